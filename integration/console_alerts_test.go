package integration

import (
	"context"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/modelgate/modelgate/ledger"
)

// newSecretText matches the webhook secret the alerts page shows once.
var newSecretText = regexp.MustCompile(`<output id="webhook-secret" class="secret">(whsec_[0-9A-Za-z]+)</output>`)

// TestConsoleAlerts: a customer sets alerts in the console; amounts that
// are no amounts or negative, and a webhook URL that is not http(s), are
// refused with the form kept as sent; the webhook secret is shown once,
// and a replayed cookie shows nothing; the deliveries are listed with
// what fired; forms without the token are refused.
func TestConsoleAlerts(t *testing.T) {
	resetConsoleLimits(t)
	g := startGateway(t, gatewayOptions{site: consoleSite})
	c := newConsoleClient(t)
	acct := c.signUp(g, "alerts@example.com")
	ctx := context.Background()

	page := c.get("/console/alerts")
	for _, want := range []string{`aria-current="page">Alerts`, `name="mail" value="on" checked`, "alerts@example.com", "No alerts were sent yet",
		"Create the secret", "This gateway sends no mail", "Modelgate-Signature", "5 minutes"} {
		if page.status != 200 || !strings.Contains(page.body, want) {
			t.Errorf("the alerts page lacks %q (%d)", want, page.status)
		}
	}
	for _, tc := range []struct {
		name string
		form url.Values
		says string
	}{
		{"a negative threshold", url.Values{"low_balance": {"-5"}}, "Low balance: enter an amount"},
		{"a threshold that is no amount", url.Values{"month_spend": {"lots"}}, "Month&#39;s spend: enter an amount"},
		{"a URL of another scheme", url.Values{"webhook_url": {"ftp://hooks.example.com/x"}}, "The webhook URL must be an absolute http or https URL"},
		{"a URL without a host", url.Values{"webhook_url": {"https://"}}, "The webhook URL must be an absolute http or https URL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := c.post("/console/alerts", tc.form)
			if r.status != http.StatusBadRequest || !strings.Contains(r.body, tc.says) {
				t.Fatalf("%d; want 400 saying %q:\n%.3000s", r.status, tc.says, r.body)
			}
			for _, v := range tc.form {
				if !strings.Contains(r.body, `value="`+v[0]+`"`) {
					t.Errorf("the refused form lost %q", v[0])
				}
			}
		})
	}
	if s, _ := g.store.AlertSettingsOf(ctx, acct); s.Any() || s.WebhookURL != "" {
		t.Fatalf("a refused form changed the settings: %+v", s)
	}
	r := c.post("/console/alerts", url.Values{"low_balance": {"5"}, "month_spend": {"100.50"}, "key_caps": {"on"}, "webhook_url": {"https://hooks.example.com/mg"}})
	if r.status != http.StatusSeeOther || r.header.Get("Location") != "/console/alerts?saved=1" {
		t.Fatalf("save: %d %v\n%.2000s", r.status, r.header, r.body)
	}
	s, err := g.store.AlertSettingsOf(ctx, acct)
	if err != nil || s.LowBalance != 5*ledger.NanosPerUnit || s.MonthSpend != 100_500_000_000 || !s.KeyCaps || s.Mail || s.WebhookURL != "https://hooks.example.com/mg" {
		t.Fatalf("the saved settings: %+v %v", s, err)
	}
	page = c.get("/console/alerts?saved=1")
	for _, want := range []string{"Alerts saved.", `value="5"`, `value="100.5"`, `name="key_caps" value="on" checked`, `value="https://hooks.example.com/mg"`} {
		if !strings.Contains(page.body, want) {
			t.Errorf("the saved page lacks %q", want)
		}
	}
	if strings.Contains(page.body, `name="mail" value="on" checked`) {
		t.Error("mail is still checked")
	}

	// the secret, once
	r = c.post("/console/alerts/secret", url.Values{})
	if r.status != http.StatusSeeOther || c.cookies[newSigningCookie] == "" {
		t.Fatalf("make the secret: %d %v", r.status, r.header)
	}
	sealed := c.cookies[newSigningCookie]
	page = c.get("/console/alerts")
	m := newSecretText.FindStringSubmatch(page.body)
	s, _ = g.store.AlertSettingsOf(ctx, acct)
	if m == nil || m[1] != s.WebhookSecret || !strings.Contains(page.body, "shown this once") {
		t.Fatalf("the secret is not shown once:\n%.3000s", page.body)
	}
	if again := c.get("/console/alerts"); strings.Contains(again.body, "whsec_") || !strings.Contains(again.body, "Rotate the secret") {
		t.Fatal("the secret is shown again on reload")
	}
	c.cookies[newSigningCookie] = sealed
	if replay := c.get("/console/alerts"); strings.Contains(replay.body, "whsec_") {
		t.Fatal("a replayed cookie shows the secret again")
	}

	// a delivery is listed with what fired
	now := time.Now().UTC()
	fired, err := g.store.FireAlertWith(ctx, acct, "low_balance", "4.21 < 5.00", now, []ledger.Delivery{{ID: "dlv_console_1", AccountID: acct,
		Channel: ledger.ChannelWebhook, Target: "https://hooks.example.com/mg",
		Payload: []byte(`{"id":"evt_c1","type":"balance.low","created":"` + now.Format(time.RFC3339) + `","account":"` + acct + `","data":{}}`)}})
	if err != nil || !fired {
		t.Fatal(fired, err)
	}
	page = c.get("/console/alerts")
	row := regexp.MustCompile(`(?s)<tr data-delivery="dlv_console_1" data-channel="webhook" data-status="pending">.*?</tr>`).FindString(page.body)
	for _, want := range []string{"Low balance", "https://hooks.example.com/mg", "waiting", now.Format("2006-01-02 15:04")} {
		if !strings.Contains(row, want) {
			t.Errorf("the delivery's row lacks %q: %s", want, row)
		}
	}

	// no form token: refused, nothing changed; another method: 405
	if r := c.do("POST", "/console/alerts", url.Values{"low_balance": {"1"}}); r.status != http.StatusForbidden {
		t.Fatalf("without the form token: %d", r.status)
	}
	if r := c.do("POST", "/console/alerts/secret", url.Values{}); r.status != http.StatusForbidden {
		t.Fatalf("a secret without the form token: %d", r.status)
	}
	if r := c.get("/console/alerts/secret"); r.status != http.StatusMethodNotAllowed {
		t.Fatalf("GET the secret: %d", r.status)
	}
	if s2, _ := g.store.AlertSettingsOf(ctx, acct); s2.LowBalance != s.LowBalance || s2.WebhookSecret != s.WebhookSecret {
		t.Fatal("a refused form changed the settings")
	}
	// no payment provider: no automatic top-up
	if b := c.get("/console/billing"); strings.Contains(b.body, "Automatic top-up") {
		t.Fatal("automatic top-up shown without a payment provider")
	}
	if r := c.post("/console/billing/autotopup", url.Values{"on": {"on"}}, "/console/billing"); r.status != http.StatusNotFound ||
		!strings.Contains(r.body, "Automatic top-up needs a payment provider") {
		t.Fatalf("automatic top-up without a payment provider: %d\n%.2000s", r.status, r.body)
	}
	if logs := readLogs(t, g.logPath, g.logPath+".access"); strings.Contains(logs, s.WebhookSecret) || strings.Contains(logs, "whsec_") {
		t.Fatal("the webhook secret is in the logs")
	}
}

// TestConsoleAutoTopup: with a payment provider, the Billing page has an
// automatic top-up section (saving a card through Stripe is
// TestAutoTopupEndToEnd's): turning it on without a card or with
// amounts the provider would refuse is refused with the form kept; with
// a saved card it is turned on; the reason the gateway turned it off and
// the top-up history are shown.
func TestConsoleAutoTopup(t *testing.T) {
	resetConsoleLimits(t)
	t.Setenv("MG_TEST_WEBHOOK_SECRET", testWebhookSecret)
	g := startGateway(t, gatewayOptions{site: consoleSite, extra: stripeConfig})
	c := newConsoleClient(t)
	acct := c.signUp(g, "topups@example.com")
	ctx := context.Background()

	page := c.get("/console/billing")
	if !strings.Contains(page.header.Get("Content-Security-Policy"), "form-action 'self' https://checkout.stripe.com") ||
		!strings.Contains(page.body, "Automatic top-up") || !strings.Contains(page.body, ">Save a card<") || !strings.Contains(page.body, "No automatic top-ups yet") {
		t.Fatalf("billing with a payment provider: %v\n%.4000s", page.header, page.body)
	}
	on := url.Values{"on": {"on"}, "below": {"5"}, "amount": {"20"}, "month_max": {"100"}}
	for _, tc := range []struct {
		name string
		form url.Values
		says string
	}{
		{"no card", on, "Save a card first"},
		{"below the minimum", url.Values{"on": {"on"}, "below": {"5"}, "amount": {"1"}, "month_max": {"100"}}, "at least 5.00 USD"},
		{"a month below the amount", url.Values{"on": {"on"}, "below": {"5"}, "amount": {"20"}, "month_max": {"10"}}, "at least the amount added"},
		{"a negative amount", url.Values{"below": {"-5"}}, "When the balance falls below: enter an amount"},
		{"no threshold", url.Values{"on": {"on"}, "amount": {"20"}, "month_max": {"100"}}, "balance to fall below"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.name != "no card" {
				if err := g.store.SaveCard(ctx, acct, ledger.SavedCard{Customer: "cus_1", PaymentMethod: "pm_1", Brand: "visa", Last4: "4242"}); err != nil {
					t.Fatal(err)
				}
			}
			r := c.post("/console/billing/autotopup", tc.form, "/console/billing")
			if r.status != http.StatusBadRequest || !strings.Contains(r.body, tc.says) {
				t.Fatalf("%d; want 400 saying %q:\n%.4000s", r.status, tc.says, r.body)
			}
			for k, v := range tc.form {
				if k != "on" && !strings.Contains(r.body, `value="`+v[0]+`"`) {
					t.Errorf("the refused form lost %q", v[0])
				}
			}
		})
	}
	r := c.post("/console/billing/autotopup", on, "/console/billing")
	if r.status != http.StatusSeeOther || r.header.Get("Location") != "/console/billing?autotopup=on" {
		t.Fatalf("turn it on: %d\n%.3000s", r.status, r.body)
	}
	s, _ := g.store.AlertSettingsOf(ctx, acct)
	if t2 := s.AutoTopup; !t2.On || t2.Below != 5*ledger.NanosPerUnit || t2.Amount != 20*ledger.NanosPerUnit || t2.MonthMax != 100*ledger.NanosPerUnit {
		t.Fatalf("the settings: %+v", t2)
	}
	page = c.get("/console/billing?autotopup=on")
	for _, want := range []string{"Automatic top-up is on.", "Visa •••• 4242", ">Save another card<", `name="on" value="on" checked`, `value="20"`} {
		if !strings.Contains(page.body, want) {
			t.Errorf("the billing page lacks %q", want)
		}
	}
	if strings.Contains(page.body, "pm_1") || strings.Contains(page.body, "cus_1") {
		t.Error("the payment provider's ids are shown")
	}

	// the gateway turns it off after a decline; the history
	if err := g.store.TurnOffAutoTopup(ctx, acct, "Your card was declined"); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	if _, err := g.store.FireAlertWith(ctx, acct, "topup:1", "", now, []ledger.Delivery{{ID: "topup:" + acct + ":1", AccountID: acct,
		Channel: ledger.ChannelTopup, Amount: 20 * ledger.NanosPerUnit, Payload: []byte(`{}`)}}); err != nil {
		t.Fatal(err)
	}
	page = c.get("/console/billing")
	if !strings.Contains(page.body, "Automatic top-up was turned off: Your card was declined.") || strings.Contains(page.body, `name="on" value="on" checked`) {
		t.Fatalf("the off reason:\n%.4000s", page.body)
	}
	row := regexp.MustCompile(`(?s)<tr data-delivery="topup:[^"]+" data-status="pending">.*?</tr>`).FindString(page.body)
	if !strings.Contains(row, `title="20.000000000"`) || !strings.Contains(row, "waiting") {
		t.Fatalf("the top-up's row: %q", row)
	}
}
