package integration

import (
	"context"
	"encoding/csv"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/modelgate/modelgate/ledger"
)

// billingRow matches a row of the billing table: its kind and amount cell.
var billingRow = regexp.MustCompile(`<tr data-kind="([a-z_]+)">\s*<th scope="row"><time[^>]*>[^<]*</time></th>\s*<td class="kind">([^<]*)</td>\s*<td><span class="amount" title="([^"]*)">([^<]*)</span></td>`)

// TestConsoleBilling: the Billing page lists the account's money history
// (top-up, refund, dispute beyond the balance, the debt paid by a credit,
// adjustments), newest first, a page at a time, rounded for people with
// the exact figure in a title; the CSV download has all of it, exact; the
// balance page says why a suspended account is suspended; another
// account's entries never show.
func TestConsoleBilling(t *testing.T) {
	resetConsoleLimits(t)
	g := startGateway(t, gatewayOptions{site: consoleSite, globalLog: true})
	c := newConsoleClient(t)
	acct := c.signUp(g, "billing@example.com")
	other := newConsoleClient(t)
	otherAcct := other.signUp(g, "other@example.com")
	ctx := context.Background()
	apply := func(ch ledger.MoneyChange) {
		t.Helper()
		if _, err := g.store.ApplyMoney(ctx, ch); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := g.store.Credit(ctx, ledger.CreditRequest{AccountID: acct, Amount: 20 * ledger.NanosPerUnit, Reference: "stripe:cs_b1",
		Reason: "Stripe Checkout cs_b1", Kind: ledger.KindTopup, Payment: "stripe:pi_b1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := g.store.Credit(ctx, ledger.CreditRequest{AccountID: otherAcct, Amount: 1, Reference: "other-secret-credit", Reason: "other's"}); err != nil {
		t.Fatal(err)
	}
	apply(ledger.MoneyChange{Kind: ledger.KindRefund, Payment: "stripe:pi_b1", Amount: 5 * ledger.NanosPerUnit, Reference: "stripe:refund:ch_b1:500",
		Reason: "Stripe refund"})
	apply(ledger.MoneyChange{AccountID: acct, Kind: ledger.KindAdjustment, Amount: -1_234_567, Reference: "fee-1", Reason: "=HYPERLINK(\"x\") fee"})
	apply(ledger.MoneyChange{Kind: ledger.KindDispute, Payment: "stripe:pi_b1", Amount: 15 * ledger.NanosPerUnit, Reference: "stripe:dispute:dp_b1",
		Reason: "Stripe dispute dp_b1"})

	// suspended for the debt: the balance page and the billing page say so
	owed := ledger.Money(1_234_567).String()
	if r := c.get("/console/"); r.status != 200 || !strings.Contains(r.body, "it owes") || !strings.Contains(r.body, `title="`+owed+`"`) ||
		!strings.Contains(r.body, `data-figure="owed"`) {
		t.Fatalf("the balance page of an account suspended for debt: %d\n%s", r.status, r.body)
	}
	r := c.get("/console/billing")
	if r.status != 200 || !strings.Contains(r.body, `aria-current="page">Billing`) || !strings.Contains(r.body, "owes") {
		t.Fatalf("billing: %d\n%s", r.status, r.body)
	}
	var got []string
	for _, m := range billingRow.FindAllStringSubmatch(r.body, -1) {
		got = append(got, m[1]+" "+m[2]+" "+m[3]+" "+m[4])
	}
	want := []string{
		"dispute Dispute -14.998765433 -14.998765", // cut, never shown as a round -15.00
		"adjustment Adjustment -0.001234567 -0.001234",
		"refund Refund -5.000000000 -5.000000",
		"topup Top-up 20.000000000 20.000000",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("billing rows:\n%s\nwant\n%s\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"), r.body)
	}
	if strings.Contains(r.body, "other-secret-credit") || strings.Contains(r.body, "other&#39;s") {
		t.Fatal("another account's entry is shown")
	}

	// a credit pays the debt; then many entries: pages of 50
	if _, err := g.store.Credit(ctx, ledger.CreditRequest{AccountID: acct, Amount: 10 * ledger.NanosPerUnit, Reference: "wire-1", Reason: "wire"}); err != nil {
		t.Fatal(err)
	}
	if r := c.get("/console/"); strings.Contains(r.body, "it owes") || strings.Contains(r.body, "suspended") {
		t.Fatalf("the balance page after the debt was paid:\n%s", r.body)
	}
	for i := range 50 {
		apply(ledger.MoneyChange{AccountID: acct, Kind: ledger.KindAdjustment, Amount: -1, Reference: fmt.Sprintf("tiny-%d", i), Reason: "tiny"})
	}
	first := c.get("/console/billing")
	older := regexp.MustCompile(`<a href="(/console/billing\?before=\d+)">Older</a>`).FindStringSubmatch(first.body)
	if n := len(billingRow.FindAllString(first.body, -1)); n != 50 || older == nil {
		t.Fatalf("the first page: %d rows, older link %v", n, older)
	}
	second := c.get(older[1])
	rows := billingRow.FindAllStringSubmatch(second.body, -1)
	if len(rows) != 6 || rows[len(rows)-1][1] != "topup" || strings.Contains(second.body, ">Older<") || !strings.Contains(second.body, ">Newest<") {
		t.Fatalf("the second page: %d rows\n%s", len(rows), second.body)
	}
	if r := c.get("/console/billing?before=abc"); r.status != 200 || !strings.Contains(r.body, "That page does not exist") {
		t.Fatalf("a bad page: %d", r.status)
	}

	// the CSV: everything, exact, a spreadsheet formula defused
	dl := c.get("/console/billing.csv")
	if dl.status != 200 || !strings.HasPrefix(dl.header.Get("Content-Type"), "text/csv") || !strings.Contains(dl.header.Get("Content-Disposition"), "attachment") {
		t.Fatalf("billing.csv: %d %v", dl.status, dl.header)
	}
	recs, err := csv.NewReader(strings.NewReader(dl.body)).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 1+56 || strings.Join(recs[0], ",") != "id,time,kind,amount,owed,balance_after,owed_after,reference,reason,payment" {
		t.Fatalf("billing.csv: %d rows, header %v", len(recs), recs[0])
	}
	var sum ledger.Money
	for i := len(recs) - 1; i >= 1; i-- {
		amt, err := ledger.ParseMoney(recs[i][3])
		if err != nil {
			t.Fatal(err)
		}
		sum += amt
	}
	bal, _ := g.balance(acct)
	if sum != bal {
		t.Fatalf("the CSV's amounts add up to %s, the balance is %s", sum, bal)
	}
	byRef := map[string][]string{}
	for _, rec := range recs[1:] {
		byRef[rec[7]] = rec
	}
	if d := byRef["stripe:dispute:dp_b1"]; d[3] != "-14.998765433" || d[4] != "0.001234567" || d[5] != "0.000000000" || d[9] != "stripe:pi_b1" {
		t.Fatalf("the dispute in the CSV: %v", d)
	}
	if f := byRef["fee-1"]; f[8] != `'=HYPERLINK("x") fee` {
		t.Fatalf("a formula in the CSV: %q", f[8])
	}
	if p := byRef["debt-paid-by:wire-1"]; p[2] != "debt_payment" || p[3] != "-0.001234567" || p[6] != "0.000000000" {
		t.Fatalf("the debt payment in the CSV: %v", p)
	}
	if strings.Contains(dl.body, "other-secret-credit") {
		t.Fatal("another account's entry is in the CSV")
	}
	// signed out: no billing
	if r := newConsoleClient(t).get("/console/billing.csv"); r.status != http.StatusSeeOther {
		t.Fatalf("billing.csv signed out: %d", r.status)
	}
	g.audit()
}

// TestConsoleBillingInBrowser: the Billing page in headless Chromium with
// page scripts off, reached from its tab, on a desktop and a phone-sized
// window: the owed alert, the history table and its download link
// (screenshots console-billing.png, console-billing-phone.png).
func TestConsoleBillingInBrowser(t *testing.T) {
	b := newConsoleBrowser(t)
	resetConsoleLimits(t)
	g := startGateway(t, gatewayOptions{site: consoleSite, globalLog: true})
	acct := newConsoleClient(t).signUp(g, "browser-billing@example.com")
	ctx := context.Background()
	if _, err := g.store.Credit(ctx, ledger.CreditRequest{AccountID: acct, Amount: 25 * ledger.NanosPerUnit, Reference: "stripe:cs_bb",
		Reason: "Stripe Checkout cs_bb", Kind: ledger.KindTopup, Payment: "stripe:pi_bb"}); err != nil {
		t.Fatal(err)
	}
	for _, ch := range []ledger.MoneyChange{
		{Kind: ledger.KindRefund, Payment: "stripe:pi_bb", Amount: 10 * ledger.NanosPerUnit, Reference: "stripe:refund:ch_bb:1000", Reason: "Stripe refund of charge ch_bb"},
		{AccountID: acct, Kind: ledger.KindAdjustment, Amount: -2_500_000_000, Reference: "T-9", Reason: "support plan, November"},
		{Kind: ledger.KindDispute, Payment: "stripe:pi_bb", Amount: 15 * ledger.NanosPerUnit, Reference: "stripe:dispute:dp_bb", Reason: "Stripe dispute dp_bb"},
	} {
		if _, err := g.store.ApplyMoney(ctx, ch); err != nil {
			t.Fatal(err)
		}
	}

	bctx, run := b.ctx, b.run
	shot := b.shot
	text := b.words
	signIn := []chromedp.Action[chromedp.Void]{
		chromedp.Navigate(gatewayAddr + "/console/signin"),
		chromedp.WaitVisible(chromedp.CSS(`#email`)),
		chromedp.SendKeys(chromedp.CSS(`#email`), "browser-billing@example.com"),
		chromedp.SendKeys(chromedp.CSS(`#password`), testPassword),
		chromedp.Click(chromedp.CSS(`button[type="submit"]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-figure="balance"]`)),
	}
	run("sign in", append([]chromedp.Action[chromedp.Void]{scriptsOff()}, signIn...)...)
	if got := text(`[role="alert"]`); !strings.Contains(got, "owes 2.500000 USD") {
		t.Fatalf("the balance page's alert: %q", got)
	}
	run("billing",
		chromedp.Click(chromedp.CSS(`a[href="/console/billing"]`)),
		chromedp.WaitVisible(chromedp.CSS(`table[data-table="billing"]`)),
		shot("console-billing.png"),
	)
	if got := text(`[role="alert"]`); !strings.Contains(got, "owes 2.500000 USD") || !strings.Contains(got, "top-up") {
		t.Fatalf("the billing page's alert: %q", got)
	}
	if got := text(`tr[data-kind="dispute"]`); !strings.Contains(got, "Dispute -12.500000 2.500000 0.000000 Stripe dispute dp_bb") {
		t.Fatalf("the dispute's row: %q", got)
	}
	if got := text(`tr[data-kind="adjustment"]`); !strings.Contains(got, "Adjustment -2.500000 12.500000 support plan, November") {
		t.Fatalf("the adjustment's row: %q", got)
	}
	if got := text(`a.csv[download]`); got != "Download CSV" {
		t.Fatalf("the download link: %q", got)
	}
	run("phone",
		asPhone(),
		chromedp.Reload(),
		chromedp.WaitVisible(chromedp.CSS(`table[data-table="billing"]`)),
		shot("console-billing-phone.png"),
	)
	// the page is no wider than the phone: the table scrolls in its box
	width, err := chromedp.Run(bctx, chromedp.Evaluate[string](`String(document.documentElement.scrollWidth)`))
	if err == nil && width != "390" {
		t.Errorf("the billing page on a phone is %s px wide", width)
	}
}
