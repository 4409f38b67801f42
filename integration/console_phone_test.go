package integration

import (
	"context"
	"strconv"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/modelgate/modelgate/ledger"
)

// TestConsoleOnAPhone: every console page with a table, at 390 × 844 CSS
// pixels in headless Chromium (screenshots kept with
// MODELGATE_SCREENSHOTS): no page is wider than the phone (a table
// scrolls inside its box), a key's Delete and Limits links are in view
// without scrolling, and a key's label breaks between words, never inside
// one.
func TestConsoleOnAPhone(t *testing.T) {
	b := newConsoleBrowser(t)
	resetConsoleLimits(t)
	g := startGateway(t, gatewayOptions{site: consoleSite})
	ctx := context.Background()
	run := b.run

	b.signUp("phone@example.com")
	acct, _, err := g.store.Login(ctx, "phone@example.com")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.store.Credit(ctx, ledger.CreditRequest{AccountID: acct, Amount: 5_000_000_000, Reference: "test:phone", Reason: "credit"}); err != nil {
		t.Fatal(err)
	}
	secret, _, err := g.store.CreateKeyWithLimits(ctx, acct, "nightly evaluation runner", ledger.KeyLimits{Cap: 2_000_000_000, Period: ledger.PeriodDay})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := g.store.CreateKey(ctx, acct, "laptop"); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if r := g.generate("openai", testModel, "hello", false, secret); r.status != 200 {
			t.Fatalf("%d %s", r.status, r.body)
		}
	}

	run("phone", asPhone())
	for _, page := range []struct{ path, ready, shot string }{
		{"/console/", `[data-figure="balance"]`, "console-overview-390x844.png"},
		{"/console/keys", `table.keys`, "console-keys-390x844.png"},
		{"/console/usage", `table`, "console-usage-390x844.png"},
		{"/console/billing", `table[data-table="billing"]`, "console-billing-390x844.png"},
	} {
		run(page.path, chromedp.Navigate(gatewayAddr+page.path), chromedp.WaitVisible(chromedp.CSS(page.ready)), b.shot(page.shot))
		if w := b.eval(`String(document.documentElement.scrollWidth)`); w != "390" {
			t.Errorf("%s is %s px wide on a 390 px phone", page.path, w)
		}
	}

	run("keys", chromedp.Navigate(gatewayAddr+"/console/keys"), chromedp.WaitVisible(chromedp.CSS(`table.keys`)))
	for _, sel := range []string{`a[href^="/console/keys/delete"]`, `a[href^="/console/keys/edit"]`} {
		right, err := strconv.ParseFloat(b.eval(`String(document.querySelector('`+sel+`').getBoundingClientRect().right)`), 64)
		if err != nil || right > 390 {
			t.Errorf("%s ends at %v px: out of view on a 390 px phone", sel, right)
		}
	}
	// each label's lines: one for a word, at most one per word
	lines := func(label string) int {
		t.Helper()
		n, err := strconv.Atoi(b.eval(`(() => { for (const td of document.querySelectorAll('tr[data-key] td.text')) {
			if (td.textContent.trim() !== '` + label + `') continue;
			const r = document.createRange(); r.selectNodeContents(td);
			const tops = new Set([...r.getClientRects()].map(x => Math.round(x.top)));
			return String(tops.size); } return "0"; })()`))
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := lines("laptop"); n != 1 {
		t.Errorf("the label laptop is on %d lines: broken inside the word", n)
	}
	if n := lines("nightly evaluation runner"); n < 1 || n > 3 {
		t.Errorf("the label of three words is on %d lines", n)
	}
}
