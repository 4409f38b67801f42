package integration

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/modelgate/modelgate/ledger"
)

// TestConsoleAlertsInBrowser: in headless Chromium with page scripts off,
// a customer reaches Alerts from the console's tabs, sets thresholds and
// a webhook URL through the form, creates the webhook secret and sees it
// once (not after a reload), and sees a delivery listed; on Billing, the
// automatic top-up shows the saved card, is turned on, and shows the
// reason after the gateway turned it off; both pages at 390 px are no
// wider than the phone (screenshots console-alerts-390x844.png,
// console-autotopup-390x844.png).
func TestConsoleAlertsInBrowser(t *testing.T) {
	b := newConsoleBrowser(t)
	resetConsoleLimits(t)
	t.Setenv("MG_TEST_WEBHOOK_SECRET", testWebhookSecret)
	g := startGateway(t, gatewayOptions{site: consoleSite, extra: stripeConfig})
	run, text, shot := b.run, b.words, b.shot
	ctx := context.Background()

	b.signUp("hooks@example.com", scriptsOff())
	acct, _, err := g.store.Login(ctx, "hooks@example.com")
	if err != nil {
		t.Fatal(err)
	}

	run("alerts",
		chromedp.Click(chromedp.CSS(`a[href="/console/alerts"]`)),
		chromedp.WaitVisible(chromedp.CSS(`form[data-form="alerts"]`)),
		chromedp.SendKeys(chromedp.CSS(`#low_balance`), "5.00"),
		chromedp.SendKeys(chromedp.CSS(`#month_spend`), "-3"),
		chromedp.Click(chromedp.CSS(`#key_caps`)),
		chromedp.SendKeys(chromedp.CSS(`#webhook_url`), "https://hooks.example.com/modelgate"),
		chromedp.Click(chromedp.CSS(`form[data-form="alerts"] button[type="submit"]`)),
		chromedp.WaitVisible(chromedp.CSS(`[role="alert"]`)),
	)
	if got := text(`[role="alert"]`); !strings.Contains(got, "Month's spend: enter an amount") {
		t.Fatalf("a negative spend threshold: %q", got)
	}
	run("fix the form",
		chromedp.SendKeys(chromedp.CSS(`#month_spend`), kb.End+"\b\b100"), // the refused -3 came back in the field
		chromedp.Click(chromedp.CSS(`form[data-form="alerts"] button[type="submit"]`)),
		chromedp.WaitVisible(chromedp.CSS(`.notice`)),
	)
	if got := text(`.notice`); got != "Alerts saved." {
		t.Fatalf("after saving: %q", got)
	}
	s, err := g.store.AlertSettingsOf(ctx, acct)
	if err != nil || s.LowBalance != 5*ledger.NanosPerUnit || s.MonthSpend != 100*ledger.NanosPerUnit || !s.KeyCaps || !s.Mail ||
		s.WebhookURL != "https://hooks.example.com/modelgate" {
		t.Fatalf("the settings the form saved: %+v %v", s, err)
	}

	run("create the secret",
		chromedp.Click(chromedp.CSS(`form[data-form="secret"] button[type="submit"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#webhook-secret`)),
	)
	shown := text(`#webhook-secret`)
	if s, _ = g.store.AlertSettingsOf(ctx, acct); !strings.HasPrefix(shown, "whsec_") || shown != s.WebhookSecret {
		t.Fatalf("the secret shown: %q", shown)
	}
	run("reload", chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS(`form[data-form="secret"]`)))
	if got := text(`main`); strings.Contains(got, "whsec_") || !strings.Contains(got, "Rotate the secret") {
		t.Fatal("the secret is shown again after a reload")
	}

	now := time.Now().UTC()
	if _, err := g.store.FireAlertWith(ctx, acct, "month_spend:"+now.Format("2006-01"), "", now, []ledger.Delivery{{ID: "dlv_browser_1", AccountID: acct,
		Channel: ledger.ChannelWebhook, Target: "https://hooks.example.com/modelgate",
		Payload: []byte(`{"id":"evt_b1","type":"spend.month","created":"` + now.Format(time.RFC3339) + `","account":"` + acct + `","data":{}}`)}}); err != nil {
		t.Fatal(err)
	}
	run("a delivery", chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS(`tr[data-delivery="dlv_browser_1"]`)))
	if got := text(`tr[data-delivery="dlv_browser_1"]`); !strings.Contains(got, "Month's spend webhook https://hooks.example.com/modelgate waiting 0") {
		t.Fatalf("the delivery's row: %q", got)
	}

	// automatic top-up
	if err := g.store.SaveCard(ctx, acct, ledger.SavedCard{Customer: "cus_b", PaymentMethod: "pm_b", Brand: "visa", Last4: "4242"}); err != nil {
		t.Fatal(err)
	}
	run("billing",
		chromedp.Click(chromedp.CSS(`a[href="/console/billing"]`)),
		chromedp.WaitVisible(chromedp.CSS(`form[data-form="autotopup"]`)),
	)
	if got := text(`[data-card]`); got != "Saved card: Visa •••• 4242" {
		t.Fatalf("the saved card: %q", got)
	}
	run("turn it on",
		chromedp.Click(chromedp.CSS(`#autotopup_on`)),
		chromedp.SendKeys(chromedp.CSS(`#below`), "5"),
		chromedp.SendKeys(chromedp.CSS(`#topup_amount`), "20"),
		chromedp.SendKeys(chromedp.CSS(`#month_max`), "100"),
		chromedp.Click(chromedp.CSS(`form[data-form="autotopup"] button[type="submit"]`)),
		chromedp.WaitVisible(chromedp.CSS(`.notice`)),
	)
	if got := text(`.notice`); got != "Automatic top-up is on." {
		t.Fatalf("after turning it on: %q", got)
	}
	if s, _ = g.store.AlertSettingsOf(ctx, acct); !s.AutoTopup.On || s.AutoTopup.Amount != 20*ledger.NanosPerUnit {
		t.Fatalf("the automatic top-up saved: %+v", s.AutoTopup)
	}
	if err := g.store.TurnOffAutoTopup(ctx, acct, "Your card was declined."); err != nil {
		t.Fatal(err)
	}
	if _, err := g.store.FireAlertWith(ctx, acct, "topup:b1", "", now, []ledger.Delivery{{ID: "topup:" + acct + ":b1", AccountID: acct,
		Channel: ledger.ChannelTopup, Amount: 20 * ledger.NanosPerUnit, Payload: []byte(`{}`)}}); err != nil {
		t.Fatal(err)
	}
	run("turned off", chromedp.Navigate(gatewayAddr+"/console/billing"), chromedp.WaitVisible(chromedp.CSS(`[data-off-reason]`)))
	if got := text(`[data-off-reason]`); !strings.Contains(got, "turned off: Your card was declined.") {
		t.Fatalf("the off reason: %q", got)
	}
	if got := text(`table[data-table="autotopups"] tbody tr`); !strings.Contains(got, "20.000000 waiting") {
		t.Fatalf("the top-up history: %q", got)
	}

	// measuring the pages takes the browser's own scripts
	run("phone", chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := cdp.Call(ctx, tg, emulation.SetScriptExecutionDisabled, emulation.SetScriptExecutionDisabledParams{Value: false})
		return err
	}), asPhone())
	for _, page := range []struct{ path, ready, shot string }{
		{"/console/alerts", `table[data-table="deliveries"]`, "console-alerts-390x844.png"},
		{"/console/billing", `form[data-form="autotopup"]`, "console-autotopup-390x844.png"},
	} {
		run(page.path, chromedp.Navigate(gatewayAddr+page.path), chromedp.WaitVisible(chromedp.CSS(page.ready)), shot(page.shot))
		if w := b.eval(`String(document.documentElement.scrollWidth)`); w != "390" {
			t.Errorf("%s is %s px wide on a 390 px phone", page.path, w)
		}
		// nothing but the tables' scrolled content reaches past the phone
		if wide := b.eval(`[...document.querySelectorAll('main *')].filter(e => !e.closest('.scroll') && e.getBoundingClientRect().right > 390.5).map(e => e.tagName + '.' + e.className).join(' ')`); wide != "" {
			t.Errorf("%s: wider than the phone: %s", page.path, wide)
		}
	}
}
