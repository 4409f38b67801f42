package integration

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelgate/modelgate/ledger"
	"github.com/modelgate/modelgate/mailer/smtptest"
	"github.com/modelgate/modelgate/payments/stripetest"
)

// Automatic top-up end to end: a card saved through the console and
// Stripe Checkout in setup mode, one off-session charge per crossing under
// load, the credit only on Stripe's signed payment_intent.succeeded
// (once, however often it comes), re-arming, and a charge that needs the
// customer's authentication turning automatic top-up off with one mail.
// Stripe is stripetest's API double, which checks the secret key, each
// call's fields and the idempotency keys, and signs its events.

const autoTopupSecretKey = "sk_test_autotopup"

// startAutoTopupGateway starts the in-process gateway with the console,
// mail through a real SMTP server, a fast alerts watcher, and Stripe at
// the double.
func startAutoTopupGateway(t *testing.T) (*testGateway, *smtptest.Server, *stripetest.API) {
	t.Helper()
	t.Setenv("MG_TEST_WEBHOOK_SECRET", testWebhookSecret)
	api := stripetest.NewAPI(t, autoTopupSecretKey, testWebhookSecret)
	srv := smtptest.Start(t, smtptest.Options{})
	g := startGateway(t, gatewayOptions{site: consoleSite, extra: fmt.Sprintf(`		min_output 1
		public_url %s
		smtp {
			host %s
			port %d
			from "Acme AI <no-reply@example.com>"
			tls none
		}
		alerts {
			interval 50ms
			retry_base 200ms
		}
		payments stripe {
			secret_key %s
			webhook_secret {env.MG_TEST_WEBHOOK_SECRET}
			currency usd
			min 5.00
			api_base %s
		}
`, alertsPublicURL, srv.Host(), srv.Port(), autoTopupSecretKey, api.URL)})
	return g, srv, api
}

// stripeDelivers posts a signed Stripe event to the gateway's webhook and
// returns its answer.
func stripeDelivers(t *testing.T, d stripetest.Delivery) (int, string) {
	t.Helper()
	status, body, err := d.Post(context.Background(), gatewayAddr+"/api/payments/stripe")
	if err != nil {
		t.Fatal(err)
	}
	return status, string(body)
}

// waitFor polls cond every 20 ms for up to within.
func waitFor(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited %v for %s", within, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestAutoTopupEndToEnd(t *testing.T) {
	resetConsoleLimits(t)
	g, mail, api := startAutoTopupGateway(t)
	ctx := context.Background()
	c := newConsoleClient(t)
	const email = "payer@autotopup.example"
	acct := c.signUp(g, email)
	secret, _, err := g.store.CreateKey(ctx, acct, "worker")
	if err != nil {
		t.Fatal(err)
	}
	units := func(s string) ledger.Money {
		m, err := ledger.ParseMoney(s)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	if _, err := g.store.Credit(ctx, ledger.CreditRequest{AccountID: acct, Amount: units("5.002"), Reference: "start", Reason: "test"}); err != nil {
		t.Fatal(err)
	}

	// 1. save a card: the console sends the customer to Stripe's setup
	// page; Stripe's signed notification saves the card
	r := c.post("/console/billing/card", url.Values{}, "/console/billing")
	loc := r.header.Get("Location")
	sessionID, ok := strings.CutPrefix(loc, "https://checkout.stripe.com/c/pay/")
	if r.status != http.StatusSeeOther || !ok {
		t.Fatalf("save a card: %d %q\n%.2000s", r.status, loc, r.body)
	}
	pm, setup := api.CompleteSetup(sessionID, stripetest.Card{Brand: "visa", Last4: "4242", ExpMonth: 12, ExpYear: 2030})
	if status, body := stripeDelivers(t, setup); status != http.StatusOK || !strings.Contains(body, "card saved") {
		t.Fatalf("the setup's notification: %d %s", status, body)
	}
	st, err := g.store.AlertSettingsOf(ctx, acct)
	if err != nil || st.AutoTopup.Card.PaymentMethod != pm || st.AutoTopup.Card.Brand != "visa" || st.AutoTopup.Card.Last4 != "4242" ||
		!strings.HasPrefix(st.AutoTopup.Card.Customer, "cus_") {
		t.Fatalf("the saved card: %+v, %v", st.AutoTopup.Card, err)
	}
	if page := c.get("/console/billing"); !strings.Contains(page.body, "Visa •••• 4242") {
		t.Fatalf("the billing page does not show the card:\n%.3000s", page.body)
	}

	// 2. turn it on: below 5.00, add 20.00, at most 100.00 a month
	r = c.post("/console/billing/autotopup", url.Values{"on": {"on"}, "below": {"5"}, "amount": {"20"}, "month_max": {"100"}}, "/console/billing")
	if r.status != http.StatusSeeOther {
		t.Fatalf("turn it on: %d\n%.2000s", r.status, r.body)
	}

	// 3. load crosses the threshold: one charge, whatever the requests
	load := func(n int) {
		var wg sync.WaitGroup
		for range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				res := g.do("POST", "/v1/chat/completions", chatBody(testModel, "spend mock:tokens=100", `"max_tokens":300`),
					"Authorization", "Bearer "+secret)
				if res.status != 200 && res.status != 403 {
					t.Errorf("%d %s", res.status, res.body)
				}
			}()
		}
		wg.Wait()
	}
	for i := 0; api.Charges() == 0; i++ {
		if i == 20 {
			t.Fatal("no charge after 20 rounds of load below the threshold")
		}
		load(30)
		time.Sleep(100 * time.Millisecond)
	}
	load(30) // more requests below the threshold: no second charge
	time.Sleep(300 * time.Millisecond)
	pis := api.PaymentIntents()
	if len(pis) != 1 || api.Charges() != 1 {
		t.Fatalf("%d payment intents, %d charges; want one", len(pis), api.Charges())
	}
	pi := pis[0]
	key := pi.Metadata["modelgate_auto_topup"]
	if pi.Amount != 2000 || pi.Currency != "usd" || pi.PaymentMethod != pm || !strings.HasPrefix(key, "topup:"+acct+":") ||
		api.RequestsFor(key) != 1 {
		t.Fatalf("the charge: %+v (key %q, %d requests)", pi, key, api.RequestsFor(key))
	}
	if refused := api.Refused(); len(refused) != 0 {
		t.Fatalf("Stripe refused: %v", refused)
	}
	acc, _ := g.store.GetAccount(ctx, acct)
	if acc.Balance >= units("5") {
		t.Fatalf("balance %s, want below 5", acc.Balance)
	}
	before := acc.Balance

	// 4. nothing is credited before Stripe's notification; it credits
	// once, however often it comes
	succeeded := api.Event("payment_intent.succeeded", pi.ID)
	var wg sync.WaitGroup
	answers := make(chan string, 5)
	for range 5 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			status, body := stripeDelivers(t, succeeded)
			answers <- fmt.Sprint(status, " ", body)
		}()
	}
	wg.Wait()
	close(answers)
	credited := 0
	for a := range answers {
		if strings.Contains(a, `"credited"`) {
			credited++
		} else if !strings.Contains(a, "already credited") {
			t.Errorf("a redelivery answered %s", a)
		}
	}
	acc, _ = g.store.GetAccount(ctx, acct)
	if credited != 1 || acc.Balance != before+units("20") {
		t.Fatalf("credited %d times; balance %s, want %s", credited, acc.Balance, before+units("20"))
	}
	hist, err := g.store.Deliveries(ctx, acct, ledger.ChannelTopup, 10)
	if err != nil || len(hist) != 1 || hist[0].Status != ledger.DeliveryDone || hist[0].Result != pi.ID || hist[0].ID != key {
		t.Fatalf("the top-up's history: %+v, %v", hist, err)
	}

	// 5. back above the threshold it re-arms; the next crossing is
	// charged afresh, and this card now needs its owner's authentication:
	// automatic top-up turns off, and the customer gets one mail, though
	// Stripe also notifies the failure
	api.SetOutcome(pm, stripetest.OutcomeAuthenticationRequired)
	waitFor(t, 5*time.Second, "the re-arm", func() bool {
		fired, _ := g.store.FiredAlerts(ctx, acct)
		for _, f := range fired {
			if f.Alert == "auto_topup" {
				return false
			}
		}
		return true
	})
	if _, err := g.store.ApplyMoney(ctx, ledger.MoneyChange{AccountID: acct, Kind: ledger.KindAdjustment, Amount: -(acc.Balance - units("4.5")),
		Reference: "drain", Reason: "test"}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "the second charge", func() bool { return len(api.PaymentIntents()) == 2 })
	second := api.PaymentIntents()[1]
	if k := second.Metadata["modelgate_auto_topup"]; k == key || !strings.HasPrefix(k, "topup:"+acct+":") {
		t.Fatalf("the second crossing's key %q (the first's %q)", k, key)
	}
	waitFor(t, 5*time.Second, "automatic top-up off", func() bool {
		st, _ := g.store.AlertSettingsOf(ctx, acct)
		return !st.AutoTopup.On
	})
	if status, body := stripeDelivers(t, api.Event("payment_intent.requires_action", second.ID)); status != http.StatusOK {
		t.Fatalf("the failure's notification: %d %s", status, body)
	}
	// the sign-up's verification mail, then the one of the failed top-up
	mail.Wait(t, 2, 5*time.Second)
	time.Sleep(500 * time.Millisecond)
	var topupMails []smtptest.Mail
	for _, m := range mailsTo(mail, email) {
		if !strings.Contains(m.Subject(), "Verify your email") {
			topupMails = append(topupMails, m)
		}
	}
	if len(topupMails) != 1 {
		t.Fatalf("%d mails of top-ups to the customer, want one", len(topupMails))
	}
	if m := topupMails[0]; !strings.Contains(m.Text(), "authentication") || !strings.Contains(m.Text(), "20") ||
		!strings.Contains(m.Subject(), "alerts.example.test") {
		t.Errorf("the mail %q says:\n%s", m.Subject(), m.Text())
	}
	st, _ = g.store.AlertSettingsOf(ctx, acct)
	if !strings.Contains(st.AutoTopup.OffReason, "authentication") {
		t.Fatalf("the off reason %q", st.AutoTopup.OffReason)
	}
	if page := c.get("/console/billing"); !strings.Contains(page.body, "Automatic top-up was turned off") {
		t.Fatalf("the billing page does not say it was turned off:\n%.3000s", page.body)
	}
	hist, _ = g.store.Deliveries(ctx, acct, ledger.ChannelTopup, 10)
	if len(hist) != 2 || hist[0].Status != ledger.DeliveryFailed {
		t.Fatalf("the history: %+v", hist)
	}
	acc, _ = g.store.GetAccount(ctx, acct)
	if acc.Balance != units("4.5") {
		t.Fatalf("balance %s after the failed top-up, want 4.5", acc.Balance)
	}
	if pis := api.PaymentIntents(); len(pis) != 2 || pis[0].Status != "succeeded" || pis[1].Status != "requires_action" {
		t.Fatalf("the payment intents: %+v", pis)
	}
}
