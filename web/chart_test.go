package web

import (
	"strconv"
	"strings"
	"testing"
)

func TestNewChart(t *testing.T) {
	days := []string{"2026-11-01", "2026-11-02", "2026-11-03", "2026-11-04"}
	count := func(v int64) string { return strconv.FormatInt(v, 10) }
	series := func(name, class string, values ...int64) ChartSeries {
		s := ChartSeries{Name: name, Class: class, Values: values}
		for _, v := range values {
			s.Labels = append(s.Labels, count(v))
		}
		return s
	}
	for _, tc := range []struct {
		name   string
		series []ChartSeries
		bars   []ChartBar
		max    string
		empty  bool
	}{
		{name: "one series", series: []ChartSeries{series("requests", "s-requests", 0, 10, 5, 1000)}, max: "1000",
			bars: []ChartBar{
				{X: "198.00", Y: "157.49", W: "144.00", H: "1.51", Class: "s-requests", Tip: "2026-11-02 · requests: 10"},
				{X: "378.00", Y: "158.00", W: "144.00", H: "1.00", Class: "s-requests", Tip: "2026-11-03 · requests: 5"},
				{X: "558.00", Y: "8.00", W: "144.00", H: "151.00", Class: "s-requests", Tip: "2026-11-04 · requests: 1000"},
			}},
		{name: "two series share a slot", series: []ChartSeries{series("in", "s-input", 4, 0, 0, 0), series("out", "s-output", 2, 0, 0, 0)}, max: "4",
			bars: []ChartBar{
				{X: "18.00", Y: "8.00", W: "72.00", H: "151.00", Class: "s-input", Tip: "2026-11-01 · in: 4"},
				{X: "90.00", Y: "83.50", W: "72.00", H: "75.50", Class: "s-output", Tip: "2026-11-01 · out: 2"},
			}},
		{name: "nothing", series: []ChartSeries{series("requests", "s-requests", 0, 0, 0, 0)}, max: "0", empty: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := NewChart("id", "Title", days, count, tc.series...)
			if c.Max != tc.max || c.Empty != tc.empty || c.First != days[0] || c.Last != days[3] || len(c.Bars) != len(tc.bars) {
				t.Fatalf("chart: %+v", c)
			}
			for i, b := range tc.bars {
				if c.Bars[i] != b {
					t.Errorf("bar %d: %+v, want %+v", i, c.Bars[i], b)
				}
			}
		})
	}
}

// TestConsolePagesRender renders every console page with its CSP-safe
// markup: no script, no inline style attribute, the form token in every
// POST form.
func TestConsolePagesRender(t *testing.T) {
	f := ConsoleFrame{Title: "console", Heading: "H", Base: "/console", Email: "a@example.com", CSRF: "tok<en>", Currency: "USD"}
	key := ConsoleKey{ID: "key_1", Prefix: "mg-AbCd…wxyz", Label: `<b>"x"</b>`, Created: "2026-11-01 10:00", LastUsed: "never"}
	capped := key
	capped.KeyLimits = KeyLimits{Capped: true, CapReached: true, Cap: Amount{Shown: "1.00"}, Period: "day", Resets: "2026-11-02 00:00",
		ResetsISO: "2026-11-02T00:00:00Z", Models: `<b>"x"</b>`, Expires: "2026-12-01 00:00", RPM: "5"}
	days := []string{"2026-11-01"}
	one := ChartSeries{Name: "requests", Class: "s-requests", Values: []int64{3}, Labels: []string{"3"}}
	for name, render := range map[string]func(*strings.Builder) error{
		"auth": func(b *strings.Builder) error {
			return RenderConsoleAuth(b, &ConsoleAuthPage{ConsoleFrame: f, SignUpOpen: true})
		},
		"signup": func(b *strings.Builder) error {
			return RenderConsoleAuth(b, &ConsoleAuthPage{ConsoleFrame: f, SignUp: true})
		},
		"overview": func(b *strings.Builder) error {
			return RenderConsoleOverview(b, &ConsoleOverview{ConsoleFrame: f, Balance: Amount{Shown: "1.00", Exact: "1.000000000"}})
		},
		"keys": func(b *strings.Builder) error {
			return RenderConsoleKeys(b, &ConsoleKeys{ConsoleFrame: f, Keys: []ConsoleKey{key}, CanCreate: true, NewKey: "mg-new"})
		},
		"keys with limits": func(b *strings.Builder) error {
			return RenderConsoleKeys(b, &ConsoleKeys{ConsoleFrame: f, Keys: []ConsoleKey{key, capped}, CanCreate: true,
				Form: KeyLimitsForm{Cap: `<b>"x"</b>`, Models: `<b>"x"</b>`}, PlanRPM: "60"})
		},
		"keyedit": func(b *strings.Builder) error {
			return RenderConsoleKeyEdit(b, &ConsoleKeyEdit{ConsoleFrame: f, Key: capped, Form: KeyLimitsForm{Expires: `<b>"x"</b>`}})
		},
		"keydelete": func(b *strings.Builder) error {
			return RenderConsoleKeyDelete(b, &ConsoleKeyDelete{ConsoleFrame: f, Key: key})
		},
		"usage": func(b *strings.Builder) error {
			return RenderConsoleUsage(b, &ConsoleUsage{ConsoleFrame: f, Keys: []ConsoleKey{key}, CSVHref: "/console/usage.csv?from=a&to=b",
				Charts: []Chart{NewChart("requests", "Requests", days, func(v int64) string { return "3" }, one)},
				Tables: []UsageTable{{Title: "By day", Column: "Day (UTC)", Name: "days", Lines: []UsageLine{{Name: "2026-11-01", Requests: "3"}}}}})
		},
		"topup": func(b *strings.Builder) error {
			return RenderConsoleTopUp(b, &ConsoleTopUp{ConsoleFrame: f, Provider: "stripe", Minimum: "5"})
		},
		"operator": func(b *strings.Builder) error { return RenderConsoleTopUp(b, &ConsoleTopUp{ConsoleFrame: f}) },
		"message": func(b *strings.Builder) error {
			return RenderConsoleMessage(b, &ConsoleMessage{ConsoleFrame: f, Message: "m"})
		},
	} {
		t.Run(name, func(t *testing.T) {
			var b strings.Builder
			if err := render(&b); err != nil {
				t.Fatal(err)
			}
			html := b.String()
			if strings.Contains(html, "<script") || strings.Contains(html, " style=") || strings.Contains(html, `<b>"x"`) {
				t.Fatalf("unsafe markup:\n%s", html)
			}
			if posts, tokens := strings.Count(html, `method="post"`), strings.Count(html, `name="csrf" value="tok&lt;en&gt;"`); posts != tokens {
				t.Fatalf("%d POST forms, %d form tokens:\n%s", posts, tokens, html)
			}
		})
	}
}
