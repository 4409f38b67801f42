package web

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"regexp"
	"strings"
	"testing"
	"time"

	goldenfile "github.com/modelgate/modelgate/internal/golden"
)

// golden compares got with testdata/name, or rewrites it with -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	goldenfile.Check(t, name, got)
}

func renderString(t *testing.T, p *StatusPage) string {
	t.Helper()
	var b bytes.Buffer
	if err := RenderStatus(&b, p); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func TestRenderStatusGolden(t *testing.T) {
	golden(t, "status.golden.html", []byte(renderString(t, fixturePage())))
}

func TestStatusJSONGolden(t *testing.T) {
	raw, err := StatusJSON(fixturePage())
	if err != nil {
		t.Fatal(err)
	}
	var pretty bytes.Buffer
	if err := json.Indent(&pretty, raw, "", "  "); err != nil {
		t.Fatal(err)
	}
	pretty.WriteByte('\n')
	golden(t, "status.golden.json", pretty.Bytes())
}

// TestStatusJSONShape checks the promises of StatusJSON on the decoded
// value, independently of the golden file.
func TestStatusJSONShape(t *testing.T) {
	raw, err := StatusJSON(fixturePage())
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		State     string `json:"state"`
		Target    float64
		Generated string
		Providers []map[string]any
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	if doc.State != "degraded" || doc.Target != 99.9 || doc.Generated != "2026-03-14T12:00:00Z" {
		t.Errorf("state, target, generated = %q, %v, %q", doc.State, doc.Target, doc.Generated)
	}
	snake := regexp.MustCompile(`^[a-z0-9]+(_[a-z0-9]+)*$`)
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				if !snake.MatchString(k) {
					t.Errorf("key %q is not snake_case", k)
				}
				walk(x)
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	var all any
	_ = json.Unmarshal(raw, &all)
	walk(all)

	anth := doc.Providers[1]
	if anth["uptime_24h"] != 98.7 {
		t.Errorf("uptime_24h = %v", anth["uptime_24h"])
	}
	inc := anth["incidents"].([]any)
	first, second := inc[0].(map[string]any), inc[1].(map[string]any)
	if v, ok := first["end"]; !ok || v != nil || first["ongoing"] != true {
		t.Errorf("ongoing incident: end = %v (present %v), ongoing = %v", v, ok, first["ongoing"])
	}
	if first["duration_seconds"] != float64(115*60) || first["description"] != "upstream timed out" {
		t.Errorf("ongoing incident = %v", first)
	}
	if second["end"] != "2026-03-10T14:35:00Z" || second["start"] != "2026-03-10T14:00:00Z" {
		t.Errorf("ended incident = %v", second)
	}
	days := anth["days"].([]any)
	if len(days) != 90 {
		t.Fatalf("%d days", len(days))
	}
	if d := days[0].(map[string]any); d["uptime"] != nil || d["level"] != "none" {
		t.Errorf("day without data = %v", d)
	}
	if d := days[75].(map[string]any); d["level"] != "down" {
		t.Errorf("day 75 = %v", d)
	}
	gem := doc.Providers[2]
	for _, k := range []string{"uptime_24h", "uptime_7d", "uptime_90d"} {
		if v, ok := gem[k]; !ok || v != nil {
			t.Errorf("%s = %v (present %v), want null", k, v, ok)
		}
	}
	if inc := gem["incidents"].([]any); len(inc) != 0 {
		t.Errorf("incidents = %v, want []", inc)
	}
}

func TestLevel(t *testing.T) {
	for _, tc := range []struct {
		uptime *float64
		target float64
		want   string
	}{
		{nil, 99.9, LevelNone},
		{ptr(100), 99.9, LevelOK},
		{ptr(99.9), 99.9, LevelOK},
		{ptr(100 * (1 - 1.0/1000)), 99.9, LevelOK}, // 99.9 with float noise
		{ptr(99.8999), 99.9, LevelMinor},
		{ptr(99), 99.9, LevelMinor},
		{ptr(98.9999), 99.9, LevelMajor},
		{ptr(95), 99.9, LevelMajor},
		{ptr(94.9999), 99.9, LevelDown},
		{ptr(0), 99.9, LevelDown},
		{ptr(99.5), 99.5, LevelOK},
		{ptr(97), 96, LevelOK}, // a target below 99%: at or above it is ok
		{ptr(95.5), 96, LevelMajor},
	} {
		got := DayBar{Uptime: tc.uptime}.Level(tc.target)
		if got != tc.want {
			v := "nil"
			if tc.uptime != nil {
				v = fmt.Sprint(*tc.uptime)
			}
			t.Errorf("Level(%s against %v) = %q, want %q", v, tc.target, got, tc.want)
		}
	}
}

func TestOverall(t *testing.T) {
	for _, tc := range []struct {
		states []string
		want   string
		head   string
	}{
		{nil, "", "No data yet"},
		{[]string{"operational"}, "operational", "All systems operational"},
		{[]string{"operational", "degraded"}, "degraded", "Some providers degraded"},
		{[]string{"operational", "maintenance"}, "degraded", "Some providers degraded"},
		{[]string{"degraded", "down", "operational"}, "down", "Major outage"},
	} {
		p := &StatusPage{Generated: fixedNow, Target: 99.9}
		for _, s := range tc.states {
			p.Providers = append(p.Providers, ProviderStatus{Name: "p-" + s, State: s})
		}
		if got := p.Overall(); got != tc.want {
			t.Errorf("Overall(%v) = %q, want %q", tc.states, got, tc.want)
		}
		if html := renderString(t, p); !strings.Contains(html, tc.head) {
			t.Errorf("page for %v lacks %q", tc.states, tc.head)
		}
	}
}

func TestDefaultTarget(t *testing.T) {
	p := fixturePage()
	p.Target = 0
	raw, err := StatusJSON(p)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(raw, []byte(`"target":99.9,`)) {
		t.Errorf("JSON target with Target 0: %.80s", raw)
	}
	if html := renderString(t, p); !strings.Contains(html, "Uptime target 99.9% per provider") {
		t.Error("page target with Target 0 is not 99.9%")
	}
}

func TestFormatting(t *testing.T) {
	for _, tc := range []struct{ got, want string }{
		{percent(nil), "—"},
		{percent(ptr(100)), "100.00%"},
		{percent(ptr(99.999)), "99.99%"}, // rounded down, never up to 100
		{percent(ptr(99.95)), "99.95%"},  // not 99.94 from float noise
		{percent(ptr(100 * (1 - 6.0/12000))), "99.95%"},
		{percent(ptr(99.899)), "99.89%"}, // not 99.90, which would look on target
		{percent(ptr(0)), "0.00%"},
		{humanDuration(0), "< 1 min"},
		{humanDuration(59 * time.Second), "< 1 min"},
		{humanDuration(35 * time.Minute), "35 min"},
		{humanDuration(2 * time.Hour), "2 h"},
		{humanDuration(2*time.Hour + 40*time.Minute), "2 h 40 min"},
		{humanDuration(48 * time.Hour), "2 d"},
		{humanDuration(76*time.Hour + 10*time.Minute), "3 d 4 h"},
		{thousands(0), "0"},
		{thousands(999), "999"},
		{thousands(12345), "12,345"},
		{thousands(1234567), "1,234,567"},
		{thousands(-1234), "-1,234"},
		{CauseText("timeout"), "upstream timed out"},
		{CauseText("rate_limited"), "rate limited"},
		{CauseText("connect"), "could not connect to upstream"},
		{CauseText("server"), "upstream server errors"},
		{CauseText("overloaded"), "upstream overloaded"},
		{CauseText("auth"), "upstream rejected the credentials"},
		{CauseText("closed"), "upstream closed the connection"},
		{CauseText("dns_failure"), "dns failure"},
		{CauseText(""), "unknown cause"},
	} {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
}

func TestIncidentDuration(t *testing.T) {
	start := fixedNow.Add(-time.Hour)
	for _, tc := range []struct {
		in   Incident
		want time.Duration
	}{
		{Incident{Start: start}, time.Hour},                                        // ongoing: until now
		{Incident{Start: start, End: start.Add(5 * time.Minute)}, 5 * time.Minute}, // ended
		{Incident{Start: fixedNow.Add(time.Minute)}, 0},                            // clock skew
	} {
		if got := tc.in.Duration(fixedNow); got != tc.want {
			t.Errorf("Duration(%+v) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

// hostile is a provider name, format and cause that would run script if
// they reached the page unescaped, in text or in an attribute.
const hostile = `"><script>alert(1)</script><img src=x onerror=alert(2)>'`

func TestEscaping(t *testing.T) {
	p := fixturePage()
	p.Title = hostile
	p.Providers[1].Name = hostile
	p.Providers[1].Format = hostile
	p.Providers[1].State = hostile
	p.Providers[1].Incidents[0].Cause = hostile
	p.Providers[1].Days[89].Date = hostile
	html := renderString(t, p)
	for _, bad := range []string{"<script", "<img", "onerror=alert(2)>"} {
		if strings.Contains(html, bad) {
			t.Errorf("page contains %q unescaped", bad)
		}
	}
	if !strings.Contains(html, "&lt;script&gt;alert(1)&lt;/script&gt;") {
		t.Error("escaped name missing from the page")
	}
	raw, err := StatusJSON(p)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(raw, []byte("<script")) {
		t.Error("JSON contains <script unescaped")
	}
	var back struct{ Providers []struct{ Name string } }
	if err := json.Unmarshal(raw, &back); err != nil || back.Providers[1].Name != hostile {
		t.Errorf("name round trip = %q, %v", back.Providers[1].Name, err)
	}
}

// external matches anything that would make a browser contact another host:
// absolute or scheme-relative URLs in attributes, and CSS url() or @import.
var external = regexp.MustCompile(`(?i)https?:|(?:src|href|action|srcset|poster|data)\s*=\s*["']?\s*//|url\(|@import`)

func TestNoExternalURLs(t *testing.T) {
	for name, p := range map[string]*StatusPage{
		"fixture": fixturePage(),
		"empty":   {Generated: fixedNow, Target: 99.9},
	} {
		html := renderString(t, p)
		if m := external.FindString(html); m != "" {
			t.Errorf("%s page refers outside: %q", name, m)
		}
		for _, m := range regexp.MustCompile(`(?i)<(script|iframe|object|embed|img|link)\b[^>]*>`).FindAllString(html, -1) {
			if m != `<link rel="icon" href="data:,">` {
				t.Errorf("%s page has %s", name, m)
			}
		}
	}
}

func TestEmptyStates(t *testing.T) {
	for _, tc := range []struct {
		name      string
		page      *StatusPage
		want, not []string
	}{
		{
			name: "no providers",
			page: &StatusPage{Generated: fixedNow, Target: 99.9},
			want: []string{"<title>Status</title>", "No data yet", "No providers to show yet.", `class="banner state-none"`},
			not:  []string{`class="bars"`, "Recent incidents"},
		},
		{
			name: "provider without history",
			page: &StatusPage{Title: "s", Generated: fixedNow, Target: 99.9, Providers: []ProviderStatus{{Name: "new", Format: "gemini", State: "operational"}}},
			want: []string{"No data yet", "No incidents in the last 90 days", `<strong>—</strong><span class="win"><span class="sep"> · </span>24 h</span>`, `<strong>—</strong><span class="win"><span class="sep"> · </span>90 d</span>`, "All systems operational"},
			not:  []string{`class="bars"`, "below target", "<summary>Daily figures"},
		},
		{
			name: "90 days without data",
			page: func() *StatusPage { p := fixturePage(); p.Providers = p.Providers[2:]; return p }(),
			want: []string{"No data yet", "No incidents in the last 90 days"},
			not:  []string{`class="bars"`},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			html := renderString(t, tc.page)
			for _, s := range tc.want {
				if !strings.Contains(html, s) {
					t.Errorf("missing %q", s)
				}
			}
			for _, s := range tc.not {
				if strings.Contains(html, s) {
					t.Errorf("unexpected %q", s)
				}
			}
		})
	}
}

func TestPageContent(t *testing.T) {
	html := renderString(t, fixturePage())
	for _, s := range []string{
		`<html lang="en">`,
		`<meta name="viewport" content="width=device-width, initial-scale=1">`,
		`<h1>modelgate status</h1>`,
		`Some providers degraded`,
		`<time datetime="2026-03-14T12:00:00Z">2026-03-14 12:00 UTC</time>`,
		`data-state="degraded"`,
		`<span class="vh">Current state: </span>Degraded</p>`,
		`<li class="below"><strong>98.70%</strong><span class="win"><span class="sep"> · </span>24 h</span> <span class="flag">below target</span></li>`,
		`<li><strong>99.90%</strong><span class="win"><span class="sep"> · </span>90 d</span></li>`, // at target: not marked
		`title="2026-03-14: 98.78% uptime, 1,067 requests, 13 failures"`,
		`title="2025-12-15: no data"`,
		`aria-label="Daily uptime over the last 90 days: 68 days at or above 99.9%, 1 day between 95% and 99%, 1 day below 95%, 20 days without data; lowest 93.07% on 2026-02-28."`,
		`<span>90 days ago</span><span>today</span>`,
		`Upstream timed out <span class="badge badge-down">Ongoing</span>`,
		`<span class="nw">ongoing</span> · <span class="nw">for 1 h 55 min</span>`,
		`<time datetime="2026-03-10T14:35:00Z">14:35 UTC</time> · <span class="nw">35 min</span>`,
		`Rate limited`,
		`<time datetime="2026-03-01T02:10:00Z">2026-03-01 02:10 UTC</time>`, // ends another day: full date
	} {
		if !strings.Contains(html, s) {
			t.Errorf("page lacks %s", s)
		}
	}
	if n := strings.Count(html, `<span class="bar lvl-`); n != 180 {
		t.Errorf("%d bars, want 180 (two providers with data)", n)
	}
	if strings.Contains(html, " style=") {
		t.Error("inline style attribute: the CSP allows only the hashed stylesheet")
	}
}

// TestContentSecurityPolicy checks that the policy's hash matches the
// <style> element of the page byte for byte, or browsers drop the styles.
func TestContentSecurityPolicy(t *testing.T) {
	html := renderString(t, fixturePage())
	m := regexp.MustCompile(`(?s)<style>(.*?)</style>`).FindStringSubmatch(html)
	if m == nil {
		t.Fatal("no <style> element")
	}
	sum := sha256.Sum256([]byte(m[1]))
	want := "style-src 'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'"
	csp := ContentSecurityPolicy()
	if !strings.Contains(csp, want) {
		t.Errorf("CSP %q lacks %q", csp, want)
	}
	for _, d := range []string{"default-src 'none'", "frame-ancestors 'none'", "base-uri 'none'"} {
		if !strings.Contains(csp, d) {
			t.Errorf("CSP %q lacks %q", csp, d)
		}
	}
}

// TestContrast checks the colour pairs of the stylesheet, light and dark,
// against WCAG 2.2: 4.5:1 for text, 3:1 for the bars and swatches (non-text).
func TestContrast(t *testing.T) {
	blocks := regexp.MustCompile(`(?s):root \{(.*?)\}`).FindAllStringSubmatch(styleCSS, -1)
	if len(blocks) != 2 {
		t.Fatalf("%d :root blocks, want 2 (light and dark)", len(blocks))
	}
	for i, scheme := range []string{"light", "dark"} {
		vars := map[string]string{}
		for _, m := range regexp.MustCompile(`--([a-z-]+):\s*(#[0-9a-f]{6});`).FindAllStringSubmatch(blocks[i][1], -1) {
			vars[m[1]] = m[2]
		}
		for _, tc := range []struct {
			fg, bg string
			min    float64
		}{
			{"fg", "bg", 4.5}, {"fg", "card", 4.5},
			{"muted", "bg", 4.5}, {"muted", "card", 4.5},
			{"ok-fg", "ok-bg", 4.5}, {"warn-fg", "warn-bg", 4.5},
			{"down-fg", "down-bg", 4.5}, {"unknown-fg", "unknown-bg", 4.5},
			{"below", "card", 4.5},
			{"ok", "card", 3}, {"minor", "card", 3}, {"major", "card", 3}, {"down", "card", 3},
			{"ok", "bg", 3}, {"minor", "bg", 3}, {"major", "bg", 3}, {"down", "bg", 3},
			{"focus", "card", 3}, {"focus", "bg", 3},
		} {
			fg, bg := vars[tc.fg], vars[tc.bg]
			if fg == "" || bg == "" {
				t.Fatalf("%s: --%s or --%s missing", scheme, tc.fg, tc.bg)
			}
			if r := contrast(fg, bg); r < tc.min {
				t.Errorf("%s: --%s %s on --%s %s: contrast %.2f, want ≥ %.1f", scheme, tc.fg, fg, tc.bg, bg, r, tc.min)
			}
		}
	}
}

// contrast is the WCAG contrast ratio of two #rrggbb colours.
func contrast(a, b string) float64 {
	la, lb := luminance(a), luminance(b)
	if la < lb {
		la, lb = lb, la
	}
	return (la + 0.05) / (lb + 0.05)
}

func luminance(hex string) float64 {
	var c [3]float64
	for i := range c {
		var v int
		for _, r := range hex[1+2*i : 3+2*i] {
			v = v*16 + strings.IndexRune("0123456789abcdef", r)
		}
		s := float64(v) / 255
		if s <= 0.04045 {
			c[i] = s / 12.92
		} else {
			c[i] = math.Pow((s+0.055)/1.055, 2.4)
		}
	}
	return 0.2126*c[0] + 0.7152*c[1] + 0.0722*c[2]
}

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errors.New("broken pipe") }

func TestRenderStatusWriteError(t *testing.T) {
	if err := RenderStatus(failWriter{}, fixturePage()); err == nil {
		t.Error("write error not returned")
	}
}
