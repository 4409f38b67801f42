package payments

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelgate/modelgate/ledger"
	"github.com/modelgate/modelgate/payments/stripetest"
)

// parse is ParsePayment of a delivery.
func parse(t *testing.T, s *Stripe, d stripetest.Delivery) (Payment, bool, error) {
	t.Helper()
	return s.ParsePayment(d.Payload, d.Header)
}

// savedCard goes through a card setup on the double: it starts one for the
// account, completes it as the customer would with the card, and reads
// the card back, as the gateway does on the notification.
func savedCard(t *testing.T, s *Stripe, api *stripetest.API, account string, card stripetest.Card) Card {
	t.Helper()
	ctx := context.Background()
	co, err := s.StartCardSetup(ctx, SetupOptions{AccountID: account, Email: account + "@example.com",
		SuccessURL: "https://gw/console/billing?card=1", CancelURL: "https://gw/console/billing"})
	if err != nil {
		t.Fatal(err)
	}
	_, d := api.CompleteSetup(co.ID, card)
	p, ok, err := parse(t, s, d)
	if err != nil || !ok || p.Kind != KindCardSaved {
		t.Fatalf("the card setup's notification: %+v %v %v", p, ok, err)
	}
	c, err := s.CardFromSetup(ctx, p.SetupIntent)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestStripeCardSetup: a setup session creates the customer when there is
// none, or reuses the one given; its notification is a saved card of the
// account, and CardFromSetup reads the card the customer saved.
func TestStripeCardSetup(t *testing.T) {
	api := stripetest.NewAPI(t, "sk_test_x", testWebhookSecret)
	s := newTestStripe(t, "usd", api.URL)
	ctx := context.Background()
	first, err := s.StartCardSetup(ctx, SetupOptions{AccountID: "acct_a", Email: "a@example.com",
		SuccessURL: "https://gw/ok", CancelURL: "https://gw/cancel"})
	if err != nil || first.ID == "" || !strings.HasPrefix(first.URL, "https://checkout.stripe.com/") || first.Customer == "" {
		t.Fatalf("%+v %v", first, err)
	}
	for _, tc := range []struct {
		name      string
		customer  string // given to StartCardSetup
		card      stripetest.Card
		customers int // created in all, after it
	}{
		{name: "a new customer", card: stripetest.Card{Brand: "visa", Last4: "4242", ExpMonth: 12, ExpYear: 2031}, customers: 2},
		{name: "the account's customer", customer: first.Customer,
			card: stripetest.Card{Brand: "mastercard", Last4: "4444", ExpMonth: 1, ExpYear: 2030}, customers: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			co, err := s.StartCardSetup(ctx, SetupOptions{AccountID: "acct_b", Customer: tc.customer,
				SuccessURL: "https://gw/ok", CancelURL: "https://gw/cancel"})
			if err != nil {
				t.Fatal(err)
			}
			if tc.customer != "" && co.Customer != tc.customer {
				t.Errorf("customer %q, want %q", co.Customer, tc.customer)
			}
			if n := api.Customers(); n != tc.customers {
				t.Errorf("%d customers created, want %d", n, tc.customers)
			}
			pm, d := api.CompleteSetup(co.ID, tc.card)
			p, ok, err := parse(t, s, d)
			if err != nil || !ok {
				t.Fatalf("%+v %v %v", p, ok, err)
			}
			want := Payment{Kind: KindCardSaved, Reference: "stripe:" + co.ID, AccountID: "acct_b", SetupIntent: p.SetupIntent,
				Customer: co.Customer, Describe: "Card saved with Stripe Checkout " + co.ID}
			if p != want || !strings.HasPrefix(p.SetupIntent, "seti_") {
				t.Fatalf("got %+v, want %+v", p, want)
			}
			c, err := s.CardFromSetup(ctx, p.SetupIntent)
			wantCard := Card{Customer: co.Customer, PaymentMethod: pm, Brand: tc.card.Brand, Last4: tc.card.Last4,
				ExpMonth: tc.card.ExpMonth, ExpYear: tc.card.ExpYear}
			if err != nil || c != wantCard {
				t.Fatalf("CardFromSetup: %+v %v, want %+v", c, err, wantCard)
			}
		})
	}
	if _, err := s.CardFromSetup(ctx, "seti_unknown"); err == nil {
		t.Error("CardFromSetup of an unknown setup intent succeeded")
	}
	if _, err := s.StartCardSetup(ctx, SetupOptions{SuccessURL: "https://gw/ok"}); err == nil {
		t.Error("a setup for no account started")
	}
	if r := api.Refused(); len(r) != 1 || !strings.Contains(r[0], "seti_unknown") {
		t.Errorf("requests refused: %q", r)
	}
}

// TestStripeParseCardSaved: only a completed setup session the gateway
// started, with its account's valid signature, is a saved card.
func TestStripeParseCardSaved(t *testing.T) {
	s := newTestStripe(t, "usd", "")
	session := func(clientRef, status string, metadata map[string]string) stripetest.SetupSession {
		return stripetest.SetupSession{ID: "cs_s", ClientReference: clientRef, Customer: "cus_1", Currency: "usd",
			Status: status, SetupIntent: "seti_1", Metadata: metadata}
	}
	ours := stripetest.SetupMetadata(testWebhookSecret, "acct_a", "usd")
	for _, tc := range []struct {
		name string
		typ  string
		cs   stripetest.SetupSession
		ok   bool
		err  error
	}{
		{name: "completed", cs: session("acct_a", "complete", ours), ok: true},
		{name: "completed, without a client reference", cs: session("", "complete", ours), ok: true},
		{name: "expired", typ: "checkout.session.expired", cs: session("acct_a", "expired", ours)},
		{name: "not complete", cs: session("acct_a", "open", ours)},
		{name: "another software's setup", cs: session("", "complete", nil)},
		{name: "naming an account, unsigned", cs: session("acct_a", "complete", nil), err: ErrForeignCheckout},
		{name: "another account's signature", cs: session("", "complete",
			map[string]string{"modelgate_account": "acct_b", "modelgate_signature": ours["modelgate_signature"]}), err: ErrForeignCheckout},
		{name: "client reference of another account", cs: session("acct_b", "complete", ours), err: ErrForeignCheckout},
		{name: "signed for another currency", cs: session("acct_a", "complete", stripetest.SetupMetadata(testWebhookSecret, "acct_a", "eur")),
			err: ErrForeignCheckout},
		{name: "signed with another secret", cs: session("acct_a", "complete", stripetest.SetupMetadata("whsec_other", "acct_a", "usd")),
			err: ErrForeignCheckout},
		{name: "a top-up's signature", cs: session("acct_a", "complete", stripetest.GatewayMetadata(testWebhookSecret, "acct_a", "usd", 0)),
			err: ErrForeignCheckout},
	} {
		t.Run(tc.name, func(t *testing.T) {
			payload := stripetest.SetupSessionEvent("evt_s", cmp.Or(tc.typ, "checkout.session.completed"), tc.cs)
			p, ok, err := s.ParsePayment(payload, stripetest.Signed(payload, testWebhookSecret, time.Now()))
			if !errors.Is(err, tc.err) || ok != tc.ok {
				t.Fatalf("%+v %v %v, want ok %v error %v", p, ok, err, tc.ok, tc.err)
			}
			want := Payment{Kind: KindCardSaved, Reference: "stripe:cs_s", AccountID: "acct_a", SetupIntent: "seti_1", Customer: "cus_1",
				Describe: "Card saved with Stripe Checkout cs_s"}
			if ok && p != want {
				t.Fatalf("got %+v, want %+v", p, want)
			}
		})
	}
}

// TestStripeParseAutoTopUp: the events of an automatic top-up's
// PaymentIntent credit it once (succeeded) or report its failure; those of
// PaymentIntents the gateway did not make, or whose signature does not
// verify, credit nothing.
func TestStripeParseAutoTopUp(t *testing.T) {
	s := newTestStripe(t, "usd", "")
	meta := stripetest.AutoTopUpMetadata(testWebhookSecret, "acct_a", "usd", 2000, "auto_1")
	pi := func(status string, amount int64, metadata map[string]string) stripetest.PaymentIntent {
		return stripetest.PaymentIntent{ID: "pi_1", Amount: amount, Currency: "usd", Customer: "cus_1", PaymentMethod: "pm_1",
			Status: status, Metadata: metadata}
	}
	failed := func(code, decline, msg string) stripetest.PaymentIntent {
		p := pi("requires_payment_method", 2000, meta)
		p.ErrorCode, p.DeclineCode, p.ErrorMessage = code, decline, msg
		return p
	}
	other := pi("succeeded", 2000, meta)
	other.Currency = "eur"
	topup := Payment{Kind: ledger.KindTopup, Reference: "stripe:pi_1", AccountID: "acct_a", Amount: 20_000_000_000, Currency: "usd",
		PaymentIntent: "stripe:pi_1", AutoTopUp: "auto_1", Describe: "Automatic top-up, Stripe payment pi_1"}
	failure := func(code, msg string, auth bool) Payment {
		return Payment{Kind: KindChargeFailed, Reference: "stripe:charge_failed:pi_1", AccountID: "acct_a", Amount: 20_000_000_000,
			Currency: "usd", PaymentIntent: "stripe:pi_1", AutoTopUp: "auto_1", FailureCode: code, FailureMessage: msg,
			NeedsAuthentication: auth, Describe: "Automatic top-up failed, Stripe payment pi_1 (" + code + ")"}
	}
	for _, tc := range []struct {
		name   string
		typ    string
		pi     stripetest.PaymentIntent
		want   Payment
		ok     bool
		err    error
		anyErr bool
	}{
		{name: "succeeded", typ: "payment_intent.succeeded", pi: pi("succeeded", 2000, meta), ok: true, want: topup},
		{name: "declined", typ: "payment_intent.payment_failed", pi: failed("card_declined", "insufficient_funds", "Your card has insufficient funds."),
			ok: true, want: failure("card_declined", "Your card has insufficient funds.", false)},
		{name: "expired card", typ: "payment_intent.payment_failed", pi: failed("expired_card", "", "Your card has expired."),
			ok: true, want: failure("expired_card", "Your card has expired.", false)},
		{name: "authentication required", typ: "payment_intent.payment_failed",
			pi: failed("authentication_required", "authentication_required", "This transaction requires authentication."),
			ok: true, want: failure("authentication_required", "This transaction requires authentication.", true)},
		{name: "declined for authentication", typ: "payment_intent.payment_failed",
			pi: failed("card_declined", "authentication_required", "Your card was declined."),
			ok: true, want: failure("card_declined", "Your card was declined.", true)},
		{name: "failed without an error", typ: "payment_intent.payment_failed", pi: pi("requires_payment_method", 2000, meta),
			ok: true, want: failure("card_declined", "", false)},
		{name: "requires action", typ: "payment_intent.requires_action", pi: pi("requires_action", 2000, meta),
			ok: true, want: failure("authentication_required", "", true)},
		{name: "succeeded, but not so", typ: "payment_intent.succeeded", pi: pi("processing", 2000, meta)},
		// payment intents the gateway did not make for an automatic top-up
		{name: "a checkout's own payment intent", typ: "payment_intent.succeeded", pi: pi("succeeded", 2000, nil)},
		{name: "a checkout's payment intent, failed", typ: "payment_intent.payment_failed", pi: pi("requires_payment_method", 2000, nil)},
		{name: "a checkout's payment intent with its session's metadata", typ: "payment_intent.succeeded",
			pi: pi("succeeded", 2000, stripetest.GatewayMetadata(testWebhookSecret, "acct_a", "usd", 2000))},
		{name: "forged", typ: "payment_intent.succeeded", pi: pi("succeeded", 2000,
			map[string]string{"modelgate_account": "acct_a", "modelgate_auto_topup": "auto_1", "modelgate_signature": "00"}), err: ErrForeignCheckout},
		{name: "unsigned", typ: "payment_intent.succeeded", pi: pi("succeeded", 2000,
			map[string]string{"modelgate_account": "acct_a", "modelgate_auto_topup": "auto_1"}), err: ErrForeignCheckout},
		{name: "another amount", typ: "payment_intent.succeeded", pi: pi("succeeded", 99900, meta), err: ErrForeignCheckout},
		{name: "another account", typ: "payment_intent.succeeded", pi: pi("succeeded", 2000,
			map[string]string{"modelgate_account": "acct_b", "modelgate_auto_topup": "auto_1", "modelgate_signature": meta["modelgate_signature"]}),
			err: ErrForeignCheckout},
		{name: "another top-up's id", typ: "payment_intent.succeeded", pi: pi("succeeded", 2000,
			map[string]string{"modelgate_account": "acct_a", "modelgate_auto_topup": "auto_2", "modelgate_signature": meta["modelgate_signature"]}),
			err: ErrForeignCheckout},
		{name: "signed with another secret", typ: "payment_intent.succeeded",
			pi: pi("succeeded", 2000, stripetest.AutoTopUpMetadata("whsec_other", "acct_a", "usd", 2000, "auto_1")), err: ErrForeignCheckout},
		{name: "a forged failure", typ: "payment_intent.payment_failed", pi: pi("requires_payment_method", 2000,
			map[string]string{"modelgate_account": "acct_a", "modelgate_auto_topup": "auto_1"}), err: ErrForeignCheckout},
		{name: "another currency", typ: "payment_intent.succeeded", pi: other, anyErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			payload := stripetest.PaymentIntentEvent("evt_p", tc.typ, tc.pi)
			p, ok, err := s.ParsePayment(payload, stripetest.Signed(payload, testWebhookSecret, time.Now()))
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
	payload := stripetest.PaymentIntentEvent("evt_j", "payment_intent.succeeded", stripetest.PaymentIntent{ID: "pi_j", Amount: 1500,
		Currency: "jpy", Status: "succeeded", Metadata: stripetest.AutoTopUpMetadata(testWebhookSecret, "acct_a", "jpy", 1500, "auto_j")})
	if p, ok, err := jpy.ParsePayment(payload, stripetest.Signed(payload, testWebhookSecret, time.Now())); !ok || err != nil || p.Amount != 1500_000_000_000 {
		t.Fatalf("jpy: %+v %v %v", p, ok, err)
	}
}

// TestStripeChargeSaved: a saved card is charged off-session once, with
// the key as its Idempotency-Key and the signed metadata; a decline is a
// *DeclineError, and the charge's notification credits it or reports its
// failure.
func TestStripeChargeSaved(t *testing.T) {
	api := stripetest.NewAPI(t, "sk_test_x", testWebhookSecret)
	s := newTestStripe(t, "usd", api.URL)
	ctx := context.Background()
	for i, tc := range []struct {
		name    string
		outcome stripetest.Outcome
		status  string // the Charge's
		decline *DeclineError
		event   string // the notification that follows
		kind    string // what ParsePayment makes of it
	}{
		{name: "succeeds", status: "succeeded", event: "payment_intent.succeeded", kind: ledger.KindTopup},
		{name: "declined", outcome: stripetest.OutcomeDeclined, status: "requires_payment_method",
			decline: &DeclineError{Code: "card_declined", Message: "Your card was declined."},
			event:   "payment_intent.payment_failed", kind: KindChargeFailed},
		{name: "expired card", outcome: stripetest.OutcomeExpiredCard, status: "requires_payment_method",
			decline: &DeclineError{Code: "expired_card", Message: "Your card has expired."},
			event:   "payment_intent.payment_failed", kind: KindChargeFailed},
		{name: "authentication required", outcome: stripetest.OutcomeAuthenticationRequired, status: "requires_action",
			decline: &DeclineError{Code: "authentication_required", Message: "Your card was declined. This transaction requires authentication.",
				NeedsAuthentication: true},
			event: "payment_intent.requires_action", kind: KindChargeFailed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			account := fmt.Sprintf("acct_%d", i)
			card := savedCard(t, s, api, account, stripetest.Card{Brand: "visa", Last4: "0341", ExpMonth: 3, ExpYear: 2032, Outcome: tc.outcome})
			key := "auto_" + account
			before := api.Charges()
			c, err := s.ChargeSaved(ctx, ChargeOptions{AccountID: account, Card: card, Amount: 20_000_000_000, IdempotencyKey: key})
			if api.Charges() != before+1 || api.ChargesFor(key) != 1 {
				t.Fatalf("%d charges, %d with the key, want 1", api.Charges()-before, api.ChargesFor(key))
			}
			pis := api.PaymentIntents()
			pi := pis[len(pis)-1]
			wantMeta := stripetest.AutoTopUpMetadata(testWebhookSecret, account, "usd", 2000, key)
			if pi.Amount != 2000 || pi.Currency != "usd" || pi.Customer != card.Customer || pi.PaymentMethod != card.PaymentMethod ||
				pi.IdempotencyKey != key || fmt.Sprint(pi.Metadata) != fmt.Sprint(wantMeta) {
				t.Fatalf("the payment intent made: %+v, want metadata %v", pi, wantMeta)
			}
			if c.ID != pi.ID || c.Status != tc.status {
				t.Errorf("charge %+v, want %s %s", c, pi.ID, tc.status)
			}
			var d *DeclineError
			switch {
			case tc.decline == nil && err != nil:
				t.Fatalf("charge failed: %v", err)
			case tc.decline != nil && (!errors.As(err, &d) || !errors.Is(err, ErrDeclined)):
				t.Fatalf("error %v, want a decline", err)
			case tc.decline != nil:
				want := *tc.decline
				want.PaymentIntent = pi.ID
				if *d != want {
					t.Fatalf("decline %+v, want %+v", *d, want)
				}
			}
			p, ok, err := parse(t, s, api.Event(tc.event, pi.ID))
			if err != nil || !ok || p.Kind != tc.kind || p.AccountID != account || p.AutoTopUp != key || p.PaymentIntent != "stripe:"+pi.ID ||
				p.Amount != 20_000_000_000 {
				t.Fatalf("the notification: %+v %v %v", p, ok, err)
			}
			if tc.decline != nil && (p.FailureCode != tc.decline.Code || p.NeedsAuthentication != tc.decline.NeedsAuthentication) {
				t.Errorf("the failure's notification: %+v, want %+v", p, *tc.decline)
			}
		})
	}
	if r := api.Refused(); len(r) != 0 {
		t.Errorf("requests refused: %q", r)
	}
}

// TestStripeChargeSavedIdempotent: the same key charges once, however many
// times and from however many goroutines it is sent; the same key with
// another amount is refused, and charges nothing.
func TestStripeChargeSavedIdempotent(t *testing.T) {
	api := stripetest.NewAPI(t, "sk_test_x", testWebhookSecret)
	s := newTestStripe(t, "usd", api.URL)
	ctx := context.Background()
	card := savedCard(t, s, api, "acct_a", stripetest.Card{Brand: "visa", Last4: "4242", ExpMonth: 1, ExpYear: 2040})
	declined := savedCard(t, s, api, "acct_b", stripetest.Card{Brand: "visa", Last4: "0002", ExpMonth: 1, ExpYear: 2040,
		Outcome: stripetest.OutcomeDeclined})
	opts := ChargeOptions{AccountID: "acct_a", Card: card, Amount: 10_000_000_000, IdempotencyKey: "auto_same"}
	const n = 16
	ids := make([]string, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			var c Charge
			c, errs[i] = s.ChargeSaved(ctx, opts)
			ids[i] = c.ID
		})
	}
	wg.Wait()
	for i := range n {
		if errs[i] != nil || ids[i] != ids[0] || ids[0] == "" {
			t.Fatalf("call %d: %q %v, want %q", i, ids[i], errs[i], ids[0])
		}
	}
	if api.Charges() != 1 || api.ChargesFor("auto_same") != 1 || api.RequestsFor("auto_same") != n {
		t.Fatalf("%d charges, %d with the key in %d requests, want 1 in %d", api.Charges(), api.ChargesFor("auto_same"),
			api.RequestsFor("auto_same"), n)
	}
	// another amount with the key
	other := opts
	other.Amount = 20_000_000_000
	if _, err := s.ChargeSaved(ctx, other); err == nil || errors.Is(err, ErrDeclined) || !strings.Contains(err.Error(), "idempotency_error") {
		t.Fatalf("the key with another amount: %v", err)
	}
	// distinct keys charge each
	for i := range n {
		wg.Go(func() {
			o := opts
			o.IdempotencyKey = fmt.Sprintf("auto_%d", i)
			if _, err := s.ChargeSaved(ctx, o); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if api.Charges() != 1+n {
		t.Fatalf("%d charges, want %d", api.Charges(), 1+n)
	}
	// a decline is answered again, and charges nothing more
	dopts := ChargeOptions{AccountID: "acct_b", Card: declined, Amount: 10_000_000_000, IdempotencyKey: "auto_declined"}
	_, err1 := s.ChargeSaved(ctx, dopts)
	_, err2 := s.ChargeSaved(ctx, dopts)
	var d1, d2 *DeclineError
	if !errors.As(err1, &d1) || !errors.As(err2, &d2) || *d1 != *d2 || d1.PaymentIntent == "" {
		t.Fatalf("declines %v and %v", err1, err2)
	}
	if api.Charges() != 2+n || api.ChargesFor("auto_declined") != 1 {
		t.Fatalf("%d charges after a repeated decline, want %d", api.Charges(), 2+n)
	}
}

// TestStripeChargeSavedRetry: a failure of Stripe's own (a 500) is a plain
// error that charged nothing, and the same call again charges once.
func TestStripeChargeSavedRetry(t *testing.T) {
	api := stripetest.NewAPI(t, "sk_test_x", testWebhookSecret)
	s := newTestStripe(t, "usd", api.URL)
	ctx := context.Background()
	card := savedCard(t, s, api, "acct_a", stripetest.Card{Brand: "visa", Last4: "4242", ExpMonth: 1, ExpYear: 2040})
	opts := ChargeOptions{AccountID: "acct_a", Card: card, Amount: 10_000_000_000, IdempotencyKey: "auto_retry"}
	for _, tc := range []struct {
		name    string
		fail    int
		charges int
		ok      bool
	}{
		{name: "Stripe fails", fail: 1},
		{name: "again", ok: true, charges: 1},
		{name: "once more", ok: true, charges: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			api.FailNext(tc.fail)
			c, err := s.ChargeSaved(ctx, opts)
			switch {
			case tc.ok && (err != nil || c.Status != "succeeded"):
				t.Fatalf("%+v %v", c, err)
			case !tc.ok && (err == nil || errors.Is(err, ErrDeclined)):
				t.Fatalf("a 500: %+v %v, want a plain error", c, err)
			case api.Charges() != tc.charges:
				t.Fatalf("%d charges, want %d", api.Charges(), tc.charges)
			}
		})
	}
	// the other calls fail plainly too, and say nothing secret
	api.FailNext(2)
	if _, err := s.StartCardSetup(ctx, SetupOptions{AccountID: "acct_a", SuccessURL: "https://gw/ok"}); err == nil {
		t.Error("a setup through a 500 succeeded")
	}
	if _, err := s.CardFromSetup(ctx, "seti_x"); err == nil || strings.Contains(err.Error(), "sk_test_x") ||
		strings.Contains(err.Error(), testWebhookSecret) {
		t.Errorf("CardFromSetup through a 500: %v", err)
	}
}

// TestStripeChargeSavedRefuses: what cannot be charged is refused before
// any request.
func TestStripeChargeSavedRefuses(t *testing.T) {
	api := stripetest.NewAPI(t, "sk_test_x", testWebhookSecret)
	s := newTestStripe(t, "usd", api.URL)
	card := Card{Customer: "cus_1", PaymentMethod: "pm_1"}
	ok := ChargeOptions{AccountID: "acct_a", Card: card, Amount: 10_000_000_000, IdempotencyKey: "auto_1"}
	for _, tc := range []struct {
		name   string
		change func(*ChargeOptions)
		err    error
	}{
		{name: "a fraction of a cent", change: func(o *ChargeOptions) { o.Amount = 10_000_000_001 }, err: ErrAmount},
		{name: "below the minimum", change: func(o *ChargeOptions) { o.Amount = 4_990_000_000 }, err: ErrAmount},
		{name: "nothing", change: func(o *ChargeOptions) { o.Amount = 0 }, err: ErrAmount},
		{name: "negative", change: func(o *ChargeOptions) { o.Amount = -10_000_000_000 }, err: ErrAmount},
		{name: "no key", change: func(o *ChargeOptions) { o.IdempotencyKey = "" }},
		{name: "a key too long", change: func(o *ChargeOptions) { o.IdempotencyKey = strings.Repeat("k", 256) }},
		{name: "no account", change: func(o *ChargeOptions) { o.AccountID = "" }},
		{name: "an account with a NUL", change: func(o *ChargeOptions) { o.AccountID = "a\x00usd" }},
		{name: "no customer", change: func(o *ChargeOptions) { o.Card.Customer = "" }},
		{name: "no payment method", change: func(o *ChargeOptions) { o.Card.PaymentMethod = "" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := ok
			tc.change(&o)
			_, err := s.ChargeSaved(context.Background(), o)
			if err == nil || (tc.err != nil && !errors.Is(err, tc.err)) || errors.Is(err, ErrDeclined) {
				t.Fatalf("error %v, want %v", err, wantErr(tc.err))
			}
		})
	}
	if len(api.Refused()) != 0 || api.Charges() != 0 {
		t.Fatalf("requests made: %q", api.Refused())
	}
}

// wantErr names the error a case wants.
func wantErr(err error) any {
	if err == nil {
		return "an error"
	}
	return err
}

// TestStripeWrongSecretKey: a key Stripe does not know is a plain error
// that does not show the key.
func TestStripeWrongSecretKey(t *testing.T) {
	api := stripetest.NewAPI(t, "sk_test_right", testWebhookSecret)
	s, err := NewStripe(StripeConfig{SecretKey: "sk_test_wrong", WebhookSecret: testWebhookSecret, Currency: "usd",
		Minimum: 5_000_000_000, APIBase: api.URL})
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.ChargeSaved(context.Background(), ChargeOptions{AccountID: "acct_a", Card: Card{Customer: "cus_1", PaymentMethod: "pm_1"},
		Amount: 10_000_000_000, IdempotencyKey: "auto_1"})
	if err == nil || errors.Is(err, ErrDeclined) || strings.Contains(err.Error(), "sk_test_") || !strings.Contains(err.Error(), "401") &&
		!strings.Contains(err.Error(), "Invalid API Key") {
		t.Fatalf("%v", err)
	}
	if r := api.Refused(); len(r) != 1 || !strings.Contains(r[0], "401") {
		t.Fatalf("refused: %q", r)
	}
}

// TestStripeAutoTopUpCreditedOnce: a one-off Checkout top-up is credited
// by its session and never again by its own PaymentIntent's
// payment_intent.succeeded; an automatic top-up's is credited by that
// event, whose reference is stable across its deliveries.
func TestStripeAutoTopUpCreditedOnce(t *testing.T) {
	api := stripetest.NewAPI(t, "sk_test_x", testWebhookSecret)
	s := newTestStripe(t, "usd", api.URL)
	ctx := context.Background()
	co, err := s.StartCheckout(ctx, CheckoutOptions{AccountID: "acct_a", Amount: 10_000_000_000, SuccessURL: "https://gw/ok", CancelURL: "https://gw/c"})
	if err != nil {
		t.Fatal(err)
	}
	paid := stripetest.WithPaymentIntent(stripetest.GatewayCheckoutEvent(testWebhookSecret, "evt_1", "checkout.session.completed", co.ID,
		"acct_a", "usd", "paid", 1000), "pi_checkout")
	credits := map[string]int{}
	deliver := func(payload []byte) {
		t.Helper()
		p, ok, err := s.ParsePayment(payload, stripetest.Signed(payload, testWebhookSecret, time.Now()))
		if err != nil {
			t.Fatal(err)
		}
		if ok && p.Kind == ledger.KindTopup {
			credits[p.Reference]++
		}
	}
	deliver(paid)
	deliver(stripetest.PaymentIntentEvent("evt_2", "payment_intent.succeeded", stripetest.PaymentIntent{ID: "pi_checkout", Amount: 1000,
		Currency: "usd", Status: "succeeded"}))
	card := savedCard(t, s, api, "acct_a", stripetest.Card{Brand: "visa", Last4: "4242", ExpMonth: 1, ExpYear: 2040})
	c, err := s.ChargeSaved(ctx, ChargeOptions{AccountID: "acct_a", Card: card, Amount: 10_000_000_000, IdempotencyKey: "auto_1"})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		d := api.Event("payment_intent.succeeded", c.ID)
		deliver(d.Payload)
	}
	want := map[string]int{"stripe:" + co.ID: 1, "stripe:" + c.ID: 2}
	if fmt.Sprint(credits) != fmt.Sprint(want) {
		t.Fatalf("credits by reference %v, want %v (the ledger takes each reference once)", credits, want)
	}
}

// TestStripeDeliveryPost: the double's deliveries reach a webhook endpoint
// with their signature.
func TestStripeDeliveryPost(t *testing.T) {
	api := stripetest.NewAPI(t, "sk_test_x", testWebhookSecret)
	s := newTestStripe(t, "usd", api.URL)
	var got []Payment
	var mu sync.Mutex
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		p, ok, err := s.ParsePayment(body, r.Header)
		if err != nil || !ok {
			http.Error(w, fmt.Sprint(err), http.StatusBadRequest)
			return
		}
		mu.Lock()
		got = append(got, p)
		mu.Unlock()
	}))
	defer hook.Close()
	card := savedCard(t, s, api, "acct_a", stripetest.Card{Brand: "visa", Last4: "4242", ExpMonth: 1, ExpYear: 2040})
	c, err := s.ChargeSaved(context.Background(), ChargeOptions{AccountID: "acct_a", Card: card, Amount: 10_000_000_000, IdempotencyKey: "k"})
	if err != nil {
		t.Fatal(err)
	}
	status, body, err := api.Event("payment_intent.succeeded", c.ID).Post(context.Background(), hook.URL)
	if err != nil || status != http.StatusOK || len(got) != 1 || got[0].Reference != "stripe:"+c.ID {
		t.Fatalf("%d %s %v: %+v", status, body, err, got)
	}
}
