package payments

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/modelgate/modelgate/ledger"
	"github.com/modelgate/modelgate/payments/stripetest"
)

const testWebhookSecret = "whsec_test_secret"

func newTestStripe(t *testing.T, currency string, api string) *Stripe {
	t.Helper()
	s, err := NewStripe(StripeConfig{SecretKey: "sk_test_x", WebhookSecret: testWebhookSecret, Currency: currency,
		Minimum: 5_000_000_000, APIBase: api})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestStripeParsePayment(t *testing.T) {
	s := newTestStripe(t, "usd", "")
	now := time.Now()
	// ours is a session as the gateway starts them
	ours := func(evt, typ, cs, acct, cur, status string, amount int64) []byte {
		return stripetest.GatewayCheckoutEvent(testWebhookSecret, evt, typ, cs, acct, cur, status, amount)
	}
	for _, tc := range []struct {
		name    string
		payload []byte
		header  http.Header
		want    Payment
		ok      bool
		err     error
		anyErr  bool
	}{
		{name: "paid", payload: ours("evt_1", "checkout.session.completed", "cs_1", "acct_a", "usd", "paid", 1250),
			ok: true, want: Payment{Kind: ledger.KindTopup, Reference: "stripe:cs_1", AccountID: "acct_a", Amount: 12_500_000_000, Currency: "usd", Describe: "Stripe Checkout cs_1"}},
		{name: "settled later", payload: ours("evt_2", "checkout.session.async_payment_succeeded", "cs_2", "acct_a", "usd", "paid", 500),
			ok: true, want: Payment{Kind: ledger.KindTopup, Reference: "stripe:cs_2", AccountID: "acct_a", Amount: 5_000_000_000, Currency: "usd", Describe: "Stripe Checkout cs_2"}},
		{name: "not yet paid", payload: ours("evt_3", "checkout.session.completed", "cs_3", "acct_a", "usd", "unpaid", 500)},
		{name: "another event", payload: ours("evt_4", "checkout.session.expired", "cs_4", "acct_a", "usd", "unpaid", 500)},
		{name: "another currency", payload: ours("evt_5", "checkout.session.completed", "cs_5", "acct_a", "eur", "paid", 500), anyErr: true},
		{name: "bad signature", payload: ours("evt_6", "checkout.session.completed", "cs_6", "acct_a", "usd", "paid", 500),
			header: stripetest.Signed([]byte("other"), testWebhookSecret, now), err: ErrBadSignature},
		{name: "other secret", payload: ours("evt_7", "checkout.session.completed", "cs_7", "acct_a", "usd", "paid", 500),
			header: stripetest.Signed(ours("evt_7", "checkout.session.completed", "cs_7", "acct_a", "usd", "paid", 500), "whsec_other", now), err: ErrBadSignature},
		{name: "unsigned", payload: ours("evt_8", "checkout.session.completed", "cs_8", "acct_a", "usd", "paid", 500),
			header: http.Header{}, err: ErrBadSignature},
		{name: "replayed later", payload: ours("evt_9", "checkout.session.completed", "cs_9", "acct_a", "usd", "paid", 500),
			header: stripetest.Signed(ours("evt_9", "checkout.session.completed", "cs_9", "acct_a", "usd", "paid", 500), testWebhookSecret, now.Add(-time.Hour)), err: ErrBadSignature},
		// sessions the gateway did not start
		{name: "a payment link naming an account", payload: stripetest.CheckoutEvent("evt_10", "checkout.session.completed", "cs_10", "acct_a", "usd", "paid", 500),
			err: ErrForeignCheckout},
		{name: "metadata without a signature", payload: stripetest.CheckoutEventWithMetadata("evt_11", "checkout.session.completed", "cs_11", "", "usd", "paid", 500,
			map[string]string{"modelgate_account": "acct_a"}), err: ErrForeignCheckout},
		{name: "another account's signature", payload: stripetest.CheckoutEventWithMetadata("evt_12", "checkout.session.completed", "cs_12", "", "usd", "paid", 500,
			map[string]string{"modelgate_account": "acct_b", "modelgate_signature": stripetest.GatewayMetadata(testWebhookSecret, "acct_a", "usd", 500)["modelgate_signature"]}),
			err: ErrForeignCheckout},
		{name: "another amount", payload: stripetest.CheckoutEventWithMetadata("evt_13", "checkout.session.completed", "cs_13", "acct_a", "usd", "paid", 99900,
			stripetest.GatewayMetadata(testWebhookSecret, "acct_a", "usd", 500)), err: ErrForeignCheckout},
		{name: "signed with another secret", payload: stripetest.GatewayCheckoutEvent("whsec_other", "evt_14", "checkout.session.completed", "cs_14", "acct_a", "usd", "paid", 500),
			err: ErrForeignCheckout},
		{name: "client reference of another account", payload: stripetest.CheckoutEventWithMetadata("evt_15", "checkout.session.completed", "cs_15", "acct_b", "usd", "paid", 500,
			stripetest.GatewayMetadata(testWebhookSecret, "acct_a", "usd", 500)), err: ErrForeignCheckout},
		{name: "a sale of something else", payload: stripetest.CheckoutEvent("evt_16", "checkout.session.completed", "cs_16", "", "usd", "paid", 500)},
		// its payment intent, which its reversals name
		{name: "paid, with its payment intent", payload: stripetest.WithPaymentIntent(ours("evt_17", "checkout.session.completed", "cs_17", "acct_a", "usd", "paid", 500), "pi_17"),
			ok: true, want: Payment{Kind: ledger.KindTopup, Reference: "stripe:cs_17", AccountID: "acct_a", Amount: 5_000_000_000, Currency: "usd",
				PaymentIntent: "stripe:pi_17", Describe: "Stripe Checkout cs_17"}},
		{name: "refunded in part", payload: stripetest.ChargeRefundedEvent("evt_18", "ch_18", "pi_17", "usd", 500, 125),
			ok: true, want: Payment{Kind: ledger.KindRefund, Reference: "stripe:refund:ch_18:125", Amount: 1_250_000_000, Currency: "usd",
				PaymentIntent: "stripe:pi_17", Describe: "Stripe refund of charge ch_18 (1.250000000 refunded in all)"}},
		{name: "refunded in another currency", payload: stripetest.ChargeRefundedEvent("evt_19", "ch_19", "pi_17", "eur", 500, 125), anyErr: true},
		{name: "a refund of a charge without a payment intent", payload: stripetest.ChargeRefundedEvent("evt_20", "ch_20", "", "usd", 500, 125)},
		{name: "disputed", payload: stripetest.DisputeEvent("evt_21", "charge.dispute.created", "dp_21", "pi_17", "usd", "needs_response", 500),
			ok: true, want: Payment{Kind: ledger.KindDispute, Reference: "stripe:dispute:dp_21", Amount: 5_000_000_000, Currency: "usd",
				PaymentIntent: "stripe:pi_17", Describe: "Stripe dispute dp_21"}},
		{name: "dispute won", payload: stripetest.DisputeEvent("evt_22", "charge.dispute.closed", "dp_21", "pi_17", "usd", "won", 500),
			ok: true, want: Payment{Kind: ledger.KindDisputeWon, Dispute: "stripe:dispute:dp_21", Amount: 5_000_000_000, Currency: "usd",
				PaymentIntent: "stripe:pi_17", Describe: "Stripe dispute dp_21 won"}},
		{name: "dispute lost", payload: stripetest.DisputeEvent("evt_23", "charge.dispute.closed", "dp_21", "pi_17", "usd", "lost", 500),
			ok: true, want: Payment{Kind: ledger.KindDisputeLost, Dispute: "stripe:dispute:dp_21", Amount: 5_000_000_000, Currency: "usd",
				PaymentIntent: "stripe:pi_17", Describe: "Stripe dispute dp_21 lost"}},
		{name: "dispute closed otherwise", payload: stripetest.DisputeEvent("evt_24", "charge.dispute.closed", "dp_21", "pi_17", "usd", "warning_closed", 500)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := tc.header
			if h == nil {
				h = stripetest.Signed(tc.payload, testWebhookSecret, now)
			}
			p, ok, err := s.ParsePayment(tc.payload, h)
			switch {
			case tc.err != nil && !errors.Is(err, tc.err), tc.anyErr && err == nil, tc.err == nil && !tc.anyErr && err != nil:
				t.Fatalf("error %v, want %v", err, tc.err)
			case ok != tc.ok || p != tc.want:
				t.Fatalf("got %+v %v, want %+v %v", p, ok, tc.want, tc.ok)
			}
		})
	}
	// a currency without minor units
	jpy := newTestStripe(t, "jpy", "")
	payload := stripetest.GatewayCheckoutEvent(testWebhookSecret, "evt_j", "checkout.session.completed", "cs_j", "acct_a", "jpy", "paid", 1500)
	if p, ok, err := jpy.ParsePayment(payload, stripetest.Signed(payload, testWebhookSecret, now)); !ok || err != nil || p.Amount != 1500_000_000_000 {
		t.Fatalf("jpy: %+v %v %v", p, ok, err)
	}
}

func TestStripeStartCheckout(t *testing.T) {
	var form url.Values
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != "POST" || r.URL.Path != "/v1/checkout/sessions" || r.Header.Get("Authorization") != "Bearer sk_test_x" {
			http.Error(w, `{"error":{"message":"unexpected"}}`, 400)
			return
		}
		r.ParseForm()
		form = r.PostForm
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"id":"cs_test_1","object":"checkout.session","url":"https://checkout.stripe.com/c/pay/cs_test_1"}`)
	}))
	defer api.Close()
	s := newTestStripe(t, "usd", api.URL)
	co, err := s.StartCheckout(context.Background(), CheckoutOptions{AccountID: "acct_a", Email: "a@example.com",
		Amount: 12_340_000_000, SuccessURL: "https://gw/console/topup?done=1", CancelURL: "https://gw/console/topup"})
	if err != nil || co.ID != "cs_test_1" || co.URL != "https://checkout.stripe.com/c/pay/cs_test_1" {
		t.Fatalf("%+v %v", co, err)
	}
	for k, v := range map[string]string{
		"mode": "payment", "client_reference_id": "acct_a", "customer_email": "a@example.com",
		"line_items[0][price_data][unit_amount]": "1234", "line_items[0][price_data][currency]": "usd",
		"line_items[0][quantity]": "1", "metadata[modelgate_account]": "acct_a",
		"metadata[modelgate_signature]": stripetest.GatewayMetadata(testWebhookSecret, "acct_a", "usd", 1234)["modelgate_signature"],
	} {
		if form.Get(k) != v {
			t.Errorf("%s = %q, want %q", k, form.Get(k), v)
		}
	}
	// the session Stripe then reports, with the metadata it was given, is
	// credited
	paid := stripetest.CheckoutEventWithMetadata("evt_1", "checkout.session.completed", "cs_test_1", form.Get("client_reference_id"), "usd", "paid", 1234,
		map[string]string{"modelgate_account": form.Get("metadata[modelgate_account]"), "modelgate_signature": form.Get("metadata[modelgate_signature]")})
	if p, ok, err := s.ParsePayment(paid, stripetest.Signed(paid, testWebhookSecret, time.Now())); !ok || err != nil || p.AccountID != "acct_a" || p.Amount != 12_340_000_000 {
		t.Fatalf("the session started: %+v %v %v", p, ok, err)
	}
	for _, amount := range []ledger.Money{4_990_000_000, 5_000_000_001, 0} {
		if _, err := s.StartCheckout(context.Background(), CheckoutOptions{AccountID: "a", Amount: amount}); !errors.Is(err, ErrAmount) {
			t.Errorf("amount %s: %v", amount, err)
		}
	}
}

// TestStripeLogsThroughZap: stripe-go's own messages about a failed call
// go to the logger it is given, at debug level (the caller logs the
// failure once), and never as plain text to the process's standard error,
// which Caddy's JSON log shares.
func TestStripeLogsThroughZap(t *testing.T) {
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusPaymentRequired)
		fmt.Fprint(w, `{"error":{"type":"card_error","message":"Your card was declined."}}`)
	}))
	defer api.Close()
	core, logs := observer.New(zapcore.DebugLevel)
	s, err := NewStripe(StripeConfig{SecretKey: "sk_test_x", WebhookSecret: testWebhookSecret, Currency: "usd",
		Minimum: 5_000_000_000, APIBase: api.URL, Logger: zap.New(core)})
	if err != nil {
		t.Fatal(err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr := os.Stderr
	os.Stderr = w
	_, err = s.StartCheckout(context.Background(), CheckoutOptions{AccountID: "acct_a", Amount: 10_000_000_000,
		SuccessURL: "https://gw/ok", CancelURL: "https://gw/cancel"})
	os.Stderr = stderr
	w.Close()
	plain, _ := io.ReadAll(r)
	if err == nil || !strings.Contains(err.Error(), "declined") {
		t.Fatalf("a declined call: %v", err)
	}
	if len(plain) != 0 {
		t.Errorf("plain text on standard error: %q", plain)
	}
	if logs.Len() == 0 {
		t.Fatal("stripe-go's messages did not reach the logger")
	}
	for _, e := range logs.All() {
		if e.Level > zapcore.DebugLevel {
			t.Errorf("stripe-go logged at %s: %s (the caller logs a failure once)", e.Level, e.Message)
		}
	}
}
