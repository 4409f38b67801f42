package integration

import (
	"context"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/modelgate/modelgate/ledger"
	"github.com/modelgate/modelgate/web"
)

// TestConsoleKeyLimits: a customer creates keys with limits and changes
// them in the console; what the plan does not offer, and what is not an
// amount, a time or a number, is refused with the form kept as it was
// sent; another account's key cannot be changed; the lookup page shows a
// key's limits and its cap's standing.
func TestConsoleKeyLimits(t *testing.T) {
	resetConsoleLimits(t)
	g := startGateway(t, gatewayOptions{site: consoleSite})
	c := newConsoleClient(t)
	acct := c.signUp(g, "limits@example.com")
	ctx := context.Background()
	if _, err := g.store.Credit(ctx, ledger.CreditRequest{AccountID: acct, Amount: 5_000_000_000, Reference: "test:limits", Reason: "credit"}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		form url.Values
		says string
	}{
		{"a cap that is no amount", url.Values{"cap": {"lots"}}, "Spend cap: enter an amount"},
		{"a cap finer than a nano", url.Values{"cap": {"1.0000000001"}}, "Spend cap: enter an amount"},
		{"a model outside the plan", url.Values{"models": {"gpt-5"}}, "Models: gpt-5 is not a model the plan offers."},
		{"an expiry in the past", url.Values{"expires": {"2020-01-01"}}, "Expires 2020-01-01T00:00:00Z: want a time in the future"},
		{"an expiry that is no time", url.Values{"expires": {"soon"}}, "Expires: enter a date"},
		{"rpm that is no number", url.Values{"rpm": {"ten"}}, "Requests per minute: enter a whole number"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.form.Set("label", "refused")
			r := c.post("/console/keys", tc.form)
			if r.status != http.StatusBadRequest || !strings.Contains(r.body, tc.says) || strings.Contains(r.body, `id="new-key"`) {
				t.Fatalf("%d; want 400 saying %q:\n%.3000s", r.status, tc.says, r.body)
			}
			for _, v := range tc.form {
				if !strings.Contains(r.body, `value="`+v[0]+`"`) {
					t.Errorf("the refused form lost %q", v[0])
				}
			}
		})
	}
	expires := time.Now().UTC().AddDate(0, 1, 0).Format(time.DateOnly)
	r := c.post("/console/keys", url.Values{"label": {"ci"}, "cap": {"2.50"}, "period": {"week"}, "models": {"gpt-*, claude-test"},
		"expires": {expires}, "rpm": {"30"}, "concurrency": {"3"}})
	if r.status != http.StatusSeeOther {
		t.Fatalf("create a key with limits: %d\n%.3000s", r.status, r.body)
	}
	page := c.get("/console/keys")
	secret := regexpFind(t, `<output id="new-key" class="secret">([^<]+)</output>`, page.body)
	p, err := g.store.Authenticate(secret)
	if err != nil || p.Limits == nil || p.Limits.Cap != 2_500_000_000 || p.Limits.Period != ledger.PeriodWeek ||
		strings.Join(p.Limits.Models, " ") != "gpt-* claude-test" || p.Limits.RPM != 30 || p.Limits.Concurrency != 3 ||
		p.Limits.ExpiresAt.Format(time.DateOnly) != expires {
		t.Fatalf("the key's limits: %+v %v", p.Limits, err)
	}
	for _, want := range []string{"2.50", "/ week", "models gpt-*, claude-test", "expires", "30/min", "3 at once", "A key's own limits", "403", "00:00 UTC"} {
		if !strings.Contains(page.body, want) {
			t.Errorf("the keys page lacks %q", want)
		}
	}
	// a period without a cap is no cap: the form's default period is ignored
	if r := c.post("/console/keys", url.Values{"label": {"plain"}, "period": {"month"}}); r.status != http.StatusSeeOther {
		t.Fatalf("a key without a cap: %d\n%.2000s", r.status, r.body)
	}

	// change the limits: the form starts with the key's
	edit := c.get("/console/keys/edit?id=" + p.KeyID)
	for _, want := range []string{`value="2.5"`, `<option value="week" selected>`, `value="gpt-*, claude-test"`, `value="30"`, `value="3"`} {
		if edit.status != 200 || !strings.Contains(edit.body, want) {
			t.Errorf("the edit form lacks %s (%d)", want, edit.status)
		}
	}
	if r := c.post("/console/keys/edit", url.Values{"id": {p.KeyID}, "cap": {"1"}, "period": {"day"}, "models": {"nope"}}, "/console/keys/edit?id="+p.KeyID); r.status != 400 ||
		!strings.Contains(r.body, "Models: nope is not a model the plan offers.") || !strings.Contains(r.body, `value="nope"`) {
		t.Fatalf("a model outside the plan: %d\n%.2000s", r.status, r.body)
	}
	if r := c.post("/console/keys/edit", url.Values{"id": {p.KeyID}, "cap": {"1"}, "period": {"day"}}, "/console/keys/edit?id="+p.KeyID); r.status != http.StatusSeeOther {
		t.Fatalf("save the limits: %d\n%.2000s", r.status, r.body)
	}
	k, err := g.store.KeyByID(ctx, p.KeyID)
	if err != nil || k.Limits.Cap != 1_000_000_000 || k.Limits.Period != ledger.PeriodDay || k.Limits.Models != nil || !k.Limits.ExpiresAt.IsZero() || k.Limits.RPM != 0 {
		t.Fatalf("the changed limits: %+v %v", k.Limits, err)
	}
	if got := c.get("/console/keys?limits=1"); !strings.Contains(got.body, "Limits saved") {
		t.Error("no notice after saving")
	}
	// without the form token, or for another account's key: refused
	if r := c.do("POST", "/console/keys/edit", url.Values{"id": {p.KeyID}, "cap": {"9"}}); r.status != http.StatusForbidden {
		t.Fatalf("without the form token: %d", r.status)
	}
	other := newConsoleClient(t)
	other.signUp(g, "other@example.com")
	if r := other.get("/console/keys/edit?id=" + p.KeyID); r.status != http.StatusNotFound {
		t.Fatalf("another account's key: %d", r.status)
	}
	if r := other.post("/console/keys/edit", url.Values{"id": {p.KeyID}, "cap": {"9"}}, "/console/keys"); r.status != http.StatusNotFound {
		t.Fatalf("another account's key changed: %d", r.status)
	}
	if k, err := g.store.KeyByID(ctx, p.KeyID); err != nil || k.Limits.Cap != 1_000_000_000 {
		t.Fatalf("a refused change changed the key's cap: %+v %v", k.Limits, err)
	}

	// the lookup page shows the cap and where it stands
	if r := g.generate("openai", testModel, "hello", false, secret); r.status != 200 {
		t.Fatalf("a request: %d %s", r.status, r.body)
	}
	k, _ = g.store.KeyByID(ctx, p.KeyID)
	lr := postLookup(t, secret)
	if lr.status != 200 {
		t.Fatalf("lookup: %d", lr.status)
	}
	look := lr.body
	left := web.AmountOf(k.Left(time.Now())).Shown
	tomorrow := time.Now().UTC().Truncate(24*time.Hour).AddDate(0, 0, 1).Format("2006-01-02 15:04")
	for _, want := range []string{"This key's own limits", `data-figure="cap"`, "Spend cap, each day", ">" + left + "<", tomorrow} {
		if !strings.Contains(look, want) {
			t.Errorf("the lookup page lacks %q:\n%s", want, look)
		}
	}
}

// regexpFind is the first group of pattern in s.
func regexpFind(t *testing.T, pattern, s string) string {
	t.Helper()
	m := regexp.MustCompile(pattern).FindStringSubmatch(s)
	if m == nil {
		t.Fatalf("no %s in:\n%.3000s", pattern, s)
	}
	return m[1]
}

// TestConsoleKeyCapInBrowser: a customer sets a cap on a key in headless
// Chromium, sees what is left of it, uses the key until the cap refuses a
// request with 403, and sees the page say the cap is reached.
func TestConsoleKeyCapInBrowser(t *testing.T) {
	b := newConsoleBrowser(t)
	resetConsoleLimits(t)
	g := startGateway(t, gatewayOptions{site: consoleSite})
	run, text, shot := b.run, b.text, b.shot
	ctx := context.Background()

	b.signUp("cap@example.com")
	acct, _, err := g.store.Login(ctx, "cap@example.com")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.store.Credit(ctx, ledger.CreditRequest{AccountID: acct, Amount: 5_000_000_000, Reference: "test:cap", Reason: "credit"}); err != nil {
		t.Fatal(err)
	}
	run("create a key",
		chromedp.Navigate(gatewayAddr+"/console/keys"),
		chromedp.WaitVisible(chromedp.CSS(`#label`)),
		chromedp.SendKeys(chromedp.CSS(`#label`), "project"),
		chromedp.Click(chromedp.CSS(`form[action="/console/keys"] button[type="submit"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#new-key`)),
	)
	key := text(`#new-key`)
	if got := text(`td[data-limit="cap"]`); got != "none" {
		t.Fatalf("a new key's cap: %q", got)
	}

	run("set a cap",
		chromedp.Click(chromedp.CSS(`a[href^="/console/keys/edit"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#cap`)),
		chromedp.SendKeys(chromedp.CSS(`#cap`), "0.001"),
		chromedp.SendKeys(chromedp.CSS(`#models`), testModel),
		chromedp.SetValue(chromedp.CSS(`#period`), "day"),
		shot("console-key-limits.png"),
		chromedp.Click(chromedp.CSS(`form[action="/console/keys/edit"] button[type="submit"]`)),
		chromedp.WaitVisible(chromedp.CSS(`.notice`)),
	)
	if got := b.words(`td[data-limit="cap"]`); got != "0.001000 / day" {
		t.Fatalf("the cap listed: %q", got)
	}
	if got := text(`td[data-limit="left"]`); got != "0.001000" {
		t.Fatalf("left of a fresh cap: %q", got)
	}

	// a request: what is left is the cap less what it cost
	if r := g.generate("openai", testModel, "hello", false, key); r.status != 200 {
		t.Fatalf("a request within the cap: %d %s", r.status, r.body)
	}
	run("reload", chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS(`table.keys`)))
	k, err := g.store.KeyByID(ctx, strings.TrimPrefix(attr(t, b, `a[href^="/console/keys/edit"]`, "href"), "/console/keys/edit?id="))
	if err != nil || k.SpentThisPeriod(time.Now()) == 0 {
		t.Fatalf("the key after a request: %+v %v", k, err)
	}
	if got, want := text(`td[data-limit="left"]`), web.AmountOf(k.Left(time.Now())).Shown; got != want {
		t.Fatalf("left after a request: %q, want %q", got, want)
	}
	if got, want := text(`td[data-limit="spent"]`), web.AmountOf(k.SpentThisPeriod(time.Now())).Shown; got != want {
		t.Fatalf("spent this period: %q, want %q", got, want)
	}

	// requests until the cap refuses one
	refused := 0
	for i := 0; i < 200 && refused == 0; i++ {
		switch r := g.generate("openai", testModel, "hello", false, key); r.status {
		case 200:
		case 403:
			refused = i + 2
			if !strings.Contains(r.body, "cap") {
				t.Fatalf("the cap's refusal: %s", r.body)
			}
		default:
			t.Fatalf("request %d: %d %s", i+2, r.status, r.body)
		}
	}
	if refused == 0 {
		t.Fatal("the cap never refused a request")
	}
	run("reload at the cap", chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS(`td.capreached`)), shot("console-key-cap-reached.png"))
	if got := b.words(`td[data-limit="left"]`); !strings.HasSuffix(got, "cap reached") {
		t.Fatalf("left at the cap: %q", got)
	}
	if got := text(`td[data-limit="resets"]`); got != time.Now().UTC().Truncate(24*time.Hour).AddDate(0, 0, 1).Format("2006-01-02 15:04") {
		t.Fatalf("resets: %q", got)
	}
	g.audit()
}

// attr is the attribute name of the element sel selects.
func attr(t *testing.T, b *consoleBrowser, sel, name string) string {
	t.Helper()
	v, err := chromedp.Run(b.ctx, chromedp.AttributeValue(chromedp.CSS(sel), name))
	if err != nil || !v.Exists {
		t.Fatalf("read %s of %s: %v", name, sel, err)
	}
	return v.Value
}
