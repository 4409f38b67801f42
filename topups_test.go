package modelgate

import (
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
	// gateway's signature or with another account's, #17)
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
