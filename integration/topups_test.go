package integration

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelgate/modelgate/ledger"
	"github.com/modelgate/modelgate/payments/stripetest"
)

const testWebhookSecret = "whsec_modelgate_test"

// stripeConfig configures Stripe top-ups for a test gateway.
const stripeConfig = "\t\tpayments stripe {\n\t\t\tsecret_key sk_test_unused\n\t\t\twebhook_secret {env.MG_TEST_WEBHOOK_SECRET}\n\t\t\tcurrency usd\n\t\t\tmin 5.00\n\t\t}\n"

// deliver posts a webhook delivery to the gateway as Stripe would.
func deliver(t *testing.T, payload []byte, header http.Header) response {
	t.Helper()
	req, _ := http.NewRequest("POST", gatewayAddr+"/api/payments/stripe", strings.NewReader(string(payload)))
	req.Header = header.Clone()
	req.Header.Set("Content-Type", "application/json; charset=utf-8")
	return send(t, http.DefaultClient, req)
}

// TestStripeWebhook: a paid Checkout Session is credited once, whatever
// the redeliveries, concurrent or not; a bad signature is a 400 and credits
// nothing; events that are not paid top-ups credit nothing.
func TestStripeWebhook(t *testing.T) {
	t.Setenv("MG_TEST_WEBHOOK_SECRET", testWebhookSecret)
	g := startGateway(t, gatewayOptions{extra: stripeConfig, globalLog: true})
	acct, _ := g.account("1.00")
	balance := func() ledger.Money { b, _ := g.balance(acct); return b }
	now := time.Now()
	paid := stripetest.GatewayCheckoutEvent(testWebhookSecret, "evt_1", "checkout.session.completed", "cs_test_1", acct, "usd", "paid", 1250)

	if r := deliver(t, paid, stripetest.Signed(paid, testWebhookSecret, now)); r.status != 200 || !strings.Contains(r.body, "credited") {
		t.Fatalf("valid delivery: %d %s", r.status, r.body)
	}
	if got := balance(); got != 13_500_000_000 {
		t.Fatalf("balance after the payment: %s, want 13.5", got)
	}
	// Stripe redelivers (same event, fresh signature): not credited again
	if r := deliver(t, paid, stripetest.Signed(paid, testWebhookSecret, now.Add(time.Minute))); r.status != 200 || !strings.Contains(r.body, "already credited") {
		t.Fatalf("redelivery: %d %s", r.status, r.body)
	}
	if got := balance(); got != 13_500_000_000 {
		t.Fatalf("a redelivery credited again: %s", got)
	}

	// bad signatures: 400, nothing credited
	other := stripetest.GatewayCheckoutEvent(testWebhookSecret, "evt_2", "checkout.session.completed", "cs_test_2", acct, "usd", "paid", 99900)
	for name, h := range map[string]http.Header{
		"another secret":       stripetest.Signed(other, "whsec_attacker", now),
		"another payload":      stripetest.Signed(paid, testWebhookSecret, now),
		"no signature":         {},
		"garbage":              {"Stripe-Signature": {"t=abc,v1=zz"}},
		"too old to be replay": stripetest.Signed(other, testWebhookSecret, now.Add(-time.Hour)),
	} {
		if r := deliver(t, other, h); r.status != 400 {
			t.Errorf("%s: %d %s", name, r.status, r.body)
		}
	}
	if got := balance(); got != 13_500_000_000 {
		t.Fatalf("a forged delivery credited: %s", got)
	}

	// deliveries that credit nothing: not paid, another currency, an
	// unknown account, and paid sessions the gateway did not start (a
	// Payment Link whose payer named the account, metadata without the
	// gateway's signature or with another account's)
	for _, ev := range [][]byte{
		stripetest.GatewayCheckoutEvent(testWebhookSecret, "evt_3", "checkout.session.completed", "cs_test_3", acct, "usd", "unpaid", 500),
		stripetest.GatewayCheckoutEvent(testWebhookSecret, "evt_4", "checkout.session.expired", "cs_test_4", acct, "usd", "unpaid", 500),
		stripetest.GatewayCheckoutEvent(testWebhookSecret, "evt_5", "checkout.session.completed", "cs_test_5", acct, "eur", "paid", 500),
		stripetest.GatewayCheckoutEvent(testWebhookSecret, "evt_6", "checkout.session.completed", "cs_test_6", "acct_nobody", "usd", "paid", 500),
		stripetest.CheckoutEvent("evt_9", "checkout.session.completed", "cs_test_link", acct, "usd", "paid", 50000),
		stripetest.CheckoutEventWithMetadata("evt_10", "checkout.session.completed", "cs_test_forged", "", "usd", "paid", 50000,
			map[string]string{"modelgate_account": acct}),
		stripetest.CheckoutEventWithMetadata("evt_11", "checkout.session.completed", "cs_test_copied", "", "usd", "paid", 50000,
			map[string]string{"modelgate_account": acct, "modelgate_signature": stripetest.GatewayMetadata(testWebhookSecret, "acct_other", "usd", 50000)["modelgate_signature"]}),
		stripetest.GatewayCheckoutEvent("whsec_attacker", "evt_12", "checkout.session.completed", "cs_test_self_signed", acct, "usd", "paid", 50000),
	} {
		if r := deliver(t, ev, stripetest.Signed(ev, testWebhookSecret, now)); r.status != 200 {
			t.Errorf("%s: %d %s", ev, r.status, r.body)
		}
	}
	if got := balance(); got != 13_500_000_000 {
		t.Fatalf("an unpaid or foreign event credited: %s", got)
	}

	// a payment that settles later: completed (unpaid), then
	// async_payment_succeeded, both delivered many times at once with the
	// completed-and-paid event a retry might send: credited once
	events := [][]byte{
		stripetest.GatewayCheckoutEvent(testWebhookSecret, "evt_7", "checkout.session.async_payment_succeeded", "cs_test_7", acct, "usd", "paid", 2000),
		stripetest.GatewayCheckoutEvent(testWebhookSecret, "evt_8", "checkout.session.completed", "cs_test_7", acct, "usd", "paid", 2000),
	}
	var wg sync.WaitGroup
	statuses := make(chan int, 20)
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ev := events[i%2]
			statuses <- deliver(t, ev, stripetest.Signed(ev, testWebhookSecret, now)).status
		}()
	}
	wg.Wait()
	close(statuses)
	for s := range statuses {
		if s != 200 {
			t.Fatalf("a concurrent delivery got %d", s)
		}
	}
	if got := balance(); got != 33_500_000_000 {
		t.Fatalf("concurrent deliveries: balance %s, want 33.5", got)
	}
	g.audit()
	if logs := readLogs(t, g.logPath, g.logPath+".access"); strings.Contains(logs, testWebhookSecret) {
		t.Fatal("the webhook secret was logged")
	}
}

// TestStripeRefundsAndDisputes: refunds (partial, cumulative) and disputes
// of a top-up reverse it exactly once, whatever the redeliveries; a
// reversal beyond the balance leaves a debt and suspends the account (its
// requests get 403) until a top-up pays the debt, which resumes it; a won
// dispute gives its amount back.
func TestStripeRefundsAndDisputes(t *testing.T) {
	t.Setenv("MG_TEST_WEBHOOK_SECRET", testWebhookSecret)
	g := startGateway(t, gatewayOptions{extra: stripeConfig, globalLog: true})
	acct, key := g.account("")
	now := time.Now()
	send := func(ev []byte, want string) {
		t.Helper()
		for i := range 2 { // every delivery twice: Stripe redelivers
			r := deliver(t, ev, stripetest.Signed(ev, testWebhookSecret, now.Add(time.Duration(i)*time.Second)))
			if r.status != 200 || (i == 0 && !strings.Contains(r.body, `"`+want+`"`)) || (i == 1 && !strings.Contains(r.body, "already")) {
				t.Fatalf("delivery %d of %s: %d %s, want %q", i, ev, r.status, r.body, want)
			}
		}
	}
	wantAccount := func(balance, owed string, st ledger.State) {
		t.Helper()
		a, err := g.store.GetAccount(context.Background(), acct)
		if err != nil {
			t.Fatal(err)
		}
		if a.Balance.String() != balance || a.Owed.String() != owed || a.State != st {
			t.Fatalf("account: balance %s owed %s %s, want %s %s %s", a.Balance, a.Owed, a.State, balance, owed, st)
		}
		g.audit()
	}
	paid := stripetest.WithPaymentIntent(stripetest.GatewayCheckoutEvent(testWebhookSecret, "evt_1", "checkout.session.completed",
		"cs_test_r1", acct, "usd", "paid", 2000), "pi_r1")
	send(paid, "credited")
	wantAccount("20.000000000", "0.000000000", ledger.StateActive)

	// two partial refunds: amount_refunded is cumulative
	send(stripetest.ChargeRefundedEvent("evt_2", "ch_r1", "pi_r1", "usd", 2000, 500), "recorded")
	wantAccount("15.000000000", "0.000000000", ledger.StateActive)
	send(stripetest.ChargeRefundedEvent("evt_3", "ch_r1", "pi_r1", "usd", 2000, 800), "recorded")
	wantAccount("12.000000000", "0.000000000", ledger.StateActive)
	// a third and a fourth, their events delivered many times at once and
	// out of order: 1.00 more, then 2.00 more, reversed once
	var wg sync.WaitGroup
	statuses := make(chan int, 20)
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ev := stripetest.ChargeRefundedEvent(fmt.Sprintf("evt_c%d", i%2), "ch_r1", "pi_r1", "usd", 2000, int64(900+100*(i%2)*2))
			statuses <- deliver(t, ev, stripetest.Signed(ev, testWebhookSecret, now)).status
		}()
	}
	wg.Wait()
	close(statuses)
	for s := range statuses {
		if s != 200 {
			t.Fatalf("a concurrent refund delivery got %d", s)
		}
	}
	wantAccount("9.000000000", "0.000000000", ledger.StateActive)
	// the first refund's event delivered late changes nothing
	late := stripetest.ChargeRefundedEvent("evt_2", "ch_r1", "pi_r1", "usd", 2000, 500)
	if r := deliver(t, late, stripetest.Signed(late, testWebhookSecret, now)); r.status != 200 {
		t.Fatalf("a late refund event: %d %s", r.status, r.body)
	}
	wantAccount("9.000000000", "0.000000000", ledger.StateActive)

	// spend some, then a dispute of the remaining 9 of the payment
	if r := g.generate("openai", testModel, "hello", false, key); r.status != 200 {
		t.Fatalf("a request: %d %s", r.status, r.body)
	}
	before, _ := g.balance(acct)
	send(stripetest.DisputeEvent("evt_4", "charge.dispute.created", "dp_r1", "pi_r1", "usd", "needs_response", 900), "recorded")
	owed := 9*ledger.NanosPerUnit - before
	if owed <= 0 {
		t.Fatalf("the test needs a balance below 9 before the dispute, got %s", before)
	}
	wantAccount("0.000000000", owed.String(), ledger.StateSuspended)
	if r := g.generate("openai", testModel, "hello", false, key); r.status != 403 || !strings.Contains(r.body, "owes money") ||
		!strings.Contains(r.body, "Top up") {
		t.Fatalf("a request while owing: %d %s", r.status, r.body)
	}

	// a top-up pays the debt first, and resumes the account
	topup := stripetest.WithPaymentIntent(stripetest.GatewayCheckoutEvent(testWebhookSecret, "evt_5", "checkout.session.completed",
		"cs_test_r2", acct, "usd", "paid", 1500), "pi_r2")
	send(topup, "credited")
	wantAccount((15*ledger.NanosPerUnit - owed).String(), "0.000000000", ledger.StateActive)
	if r := g.generate("openai", testModel, "hello", false, key); r.status != 200 {
		t.Fatalf("a request after paying the debt: %d %s", r.status, r.body)
	}
	after, _ := g.balance(acct)

	// the dispute is won: its 9 come back; closing it again changes nothing
	send(stripetest.DisputeEvent("evt_6", "charge.dispute.closed", "dp_r1", "pi_r1", "usd", "won", 900), "recorded")
	wantAccount((after + 9*ledger.NanosPerUnit).String(), "0.000000000", ledger.StateActive)
	lost := stripetest.DisputeEvent("evt_7", "charge.dispute.closed", "dp_r1", "pi_r1", "usd", "lost", 900)
	if r := deliver(t, lost, stripetest.Signed(lost, testWebhookSecret, now)); r.status != 200 || !strings.Contains(r.body, "already") {
		t.Fatalf("a second outcome: %d %s", r.status, r.body)
	}
	// reversals of a payment the gateway never credited, and forged ones
	for _, ev := range [][]byte{
		stripetest.ChargeRefundedEvent("evt_8", "ch_other", "pi_other", "usd", 1000, 1000),
		stripetest.DisputeEvent("evt_9", "charge.dispute.created", "dp_other", "pi_other", "usd", "needs_response", 1000),
	} {
		if r := deliver(t, ev, stripetest.Signed(ev, testWebhookSecret, now)); r.status != 200 || !strings.Contains(r.body, "no such top-up") {
			t.Fatalf("a reversal of another payment: %d %s", r.status, r.body)
		}
	}
	forged := stripetest.ChargeRefundedEvent("evt_10", "ch_r2", "pi_r2", "usd", 1500, 1500)
	if r := deliver(t, forged, stripetest.Signed(forged, "whsec_attacker", now)); r.status != 400 {
		t.Fatalf("a forged refund: %d %s", r.status, r.body)
	}
	wantAccount((after + 9*ledger.NanosPerUnit).String(), "0.000000000", ledger.StateActive)

	// the history names every step, with the payment intents
	page, err := g.store.History(context.Background(), acct, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	var refunded ledger.Money
	for _, e := range page.Entries {
		if e.Kind == ledger.KindRefund {
			// the concurrent ones made one entry or two, by their order
			refunded += e.Owed - e.Amount
			if e.Payment != "stripe:pi_r1" {
				t.Fatalf("a refund of another payment: %+v", e)
			}
			continue
		}
		kinds = append(kinds, e.Kind+" "+e.Payment)
	}
	if got, want := strings.Join(kinds, ", "), "dispute_won stripe:pi_r1, debt_payment stripe:pi_r2, topup stripe:pi_r2, dispute stripe:pi_r1, "+
		"topup stripe:pi_r1"; got != want || refunded != 11*ledger.NanosPerUnit {
		t.Fatalf("history:\n%s (refunds %s)\nwant\n%s (refunds 11)", got, refunded, want)
	}
}
