package integration

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/modelgate/modelgate/ledger"
)

// alertsOff is the alert settings of an account that set none.
const alertsOff = `"low_balance":null,"month_spend":null,"key_caps":false,"mail":true,"webhook_url":null,"webhook_secret_set":false,` +
	`"auto_topup":{"on":false,"below":null,"amount":null,"month_max":null,"card":null,"off_reason":null}}`

// TestAdminAlerts: the operator reads, sets and clears an account's
// alerts and automatic top-up through the admin API: the fields sent
// change, null clears one, the others stay; bad input is a 400 (a 409
// for automatic top-up without a saved card) that changes nothing,
// never a 5xx; an unknown account is a 404 on every route; the webhook
// secret is answered once and never by GET; the deliveries are listed
// newest first with their payload as JSON.
func TestAdminAlerts(t *testing.T) {
	t.Setenv("MG_TEST_WEBHOOK_SECRET", testWebhookSecret)
	g := startGateway(t, gatewayOptions{extra: stripeConfig})
	acct, _ := g.account("10.00")
	path := "/modelgate/accounts/" + acct + "/alerts"
	head := `{"account_id":"` + acct + `",`
	ctx := context.Background()

	for _, step := range []struct {
		name, method, body string
		status             int
		want               string // the whole answer, or what the error says
	}{
		{"none set", "GET", "", 200, head + alertsOff},
		{"set", "PATCH", `{"low_balance":"5.00","month_spend":"100","key_caps":true,"webhook_url":"https://hooks.example.com/mg"}`, 200,
			head + `"low_balance":"5.000000000","month_spend":"100.000000000","key_caps":true,"mail":true,"webhook_url":"https://hooks.example.com/mg","webhook_secret_set":false,` +
				`"auto_topup":{"on":false,"below":null,"amount":null,"month_max":null,"card":null,"off_reason":null}}`},
		{"one field", "PATCH", `{"mail":false}`, 200,
			head + `"low_balance":"5.000000000","month_spend":"100.000000000","key_caps":true,"mail":false,"webhook_url":"https://hooks.example.com/mg","webhook_secret_set":false,` +
				`"auto_topup":{"on":false,"below":null,"amount":null,"month_max":null,"card":null,"off_reason":null}}`},
		{"clear", "PATCH", `{"low_balance":null,"webhook_url":null,"mail":true}`, 200,
			head + `"low_balance":null,"month_spend":"100.000000000","key_caps":true,"mail":true,"webhook_url":null,"webhook_secret_set":false,` +
				`"auto_topup":{"on":false,"below":null,"amount":null,"month_max":null,"card":null,"off_reason":null}}`},
		{"a negative threshold", "PATCH", `{"low_balance":"-1.00"}`, 400, "must not be negative"},
		{"an amount as a number", "PATCH", `{"month_spend":100}`, 400, `decimal strings`},
		{"an amount that is no amount", "PATCH", `{"month_spend":"lots"}`, 400, `decimal strings`},
		{"a URL of another scheme", "PATCH", `{"webhook_url":"ftp://hooks.example.com/"}`, 400, "absolute http or https URL"},
		{"a URL that is no URL", "PATCH", `{"webhook_url":"hooks"}`, 400, "absolute http or https URL"},
		{"a switch that is no boolean", "PATCH", `{"key_caps":"yes"}`, 400, "bool"},
		{"an unknown field", "PATCH", `{"colour":"red"}`, 400, `\"colour\" is not a field`},
		{"a field only shown", "PATCH", `{"webhook_secret_set":true}`, 400, `\"webhook_secret_set\" is not a field`},
		{"an unknown top-up field", "PATCH", `{"auto_topup":{"when":"always"}}`, 400, `\"when\" is not a field`},
		{"a top-up without a card", "PATCH", `{"auto_topup":{"on":true,"below":"5","amount":"20","month_max":"100"}}`, 409, "saved card"},
		{"a top-up below the minimum", "PATCH", `{"auto_topup":{"on":true,"below":"5","amount":"1","month_max":"100"}}`, 400, "at least 5.00 USD"},
		{"a monthly maximum below the amount", "PATCH", `{"auto_topup":{"on":true,"below":"5","amount":"20","month_max":"10"}}`, 400, "at least the amount added"},
		{"a top-up without a threshold", "PATCH", `{"auto_topup":{"on":true,"amount":"20","month_max":"100"}}`, 400, "balance to fall below"},
		{"a negative top-up", "PATCH", `{"auto_topup":{"below":"-5"}}`, 400, "must not be negative"},
		{"not JSON", "PATCH", `{"mail":`, 400, "not the JSON"},
		{"unchanged by the refusals", "GET", "", 200,
			head + `"low_balance":null,"month_spend":"100.000000000","key_caps":true,"mail":true,"webhook_url":null,"webhook_secret_set":false,` +
				`"auto_topup":{"on":false,"below":null,"amount":null,"month_max":null,"card":null,"off_reason":null}}`},
		{"another method", "DELETE", "", 405, "GET, PATCH"},
	} {
		t.Run(step.name, func(t *testing.T) {
			st, body := adminRaw(t, step.method, path, step.body)
			body = strings.TrimSpace(body)
			if st != step.status {
				t.Fatalf("%s %s: %d, want %d: %s", step.method, step.body, st, step.status, body)
			}
			if (st < 300 && body != step.want) || (st >= 300 && !strings.Contains(body, step.want)) {
				t.Fatalf("%s %s:\n%s\nwant\n%s", step.method, step.body, body, step.want)
			}
			if st >= 300 && !strings.HasPrefix(body, `{"error":`) {
				t.Fatalf("not the admin API's error format: %s", body)
			}
		})
	}

	// unknown account: 404 on every route, nothing made
	for _, r := range [][2]string{{"GET", "/alerts"}, {"PATCH", "/alerts"}, {"POST", "/alerts/webhook-secret"}, {"GET", "/alerts/deliveries"}} {
		if st, body := adminRaw(t, r[0], "/modelgate/accounts/acct_nobody"+r[1], `{"mail":false}`); st != 404 || !strings.Contains(body, `"error"`) {
			t.Errorf("%s %s of an unknown account: %d %s", r[0], r[1], st, body)
		}
	}

	// the webhook secret: answered once, never by GET
	var first, second struct {
		Secret string `json:"webhook_secret"`
	}
	if st := adminCall(t, "POST", path+"/webhook-secret", "", &first); st != 200 || !strings.HasPrefix(first.Secret, ledger.WebhookSecretPrefix) || len(first.Secret) < 30 {
		t.Fatalf("make the secret: %d %q", st, first.Secret)
	}
	st, body := adminRaw(t, "GET", path, "")
	body = strings.TrimSpace(body)
	if st != 200 || !strings.Contains(body, `"webhook_secret_set":true`) || strings.Contains(body, first.Secret) || strings.Contains(body, "whsec_") {
		t.Fatalf("the settings after the secret: %d %s", st, body)
	}
	if st := adminCall(t, "POST", path+"/webhook-secret", "", &second); st != 200 || second.Secret == first.Secret {
		t.Fatalf("rotate the secret: %d, the same again: %v", st, second.Secret == first.Secret)
	}
	if s, _ := g.store.AlertSettingsOf(ctx, acct); s.WebhookSecret != second.Secret {
		t.Fatal("the ledger does not sign with the newest secret")
	}

	// automatic top-up with a saved card; turned off by the gateway
	if err := g.store.SaveCard(ctx, acct, ledger.SavedCard{Customer: "cus_test", PaymentMethod: "pm_test", Brand: "visa", Last4: "4242"}); err != nil {
		t.Fatal(err)
	}
	top := func(want string) {
		t.Helper()
		st, body := adminRaw(t, "GET", path, "")
		body = strings.TrimSpace(body)
		if i := strings.Index(body, `"auto_topup":`); st != 200 || i < 0 || body[i:] != `"auto_topup":`+want+`}` {
			t.Fatalf("auto_topup: %d %s\nwant %s", st, body, want)
		}
	}
	if st, body := adminRaw(t, "PATCH", path, `{"auto_topup":{"on":true,"below":"5","amount":"20","month_max":"100"}}`); st != 200 {
		t.Fatalf("turn automatic top-up on: %d %s", st, body)
	}
	top(`{"on":true,"below":"5.000000000","amount":"20.000000000","month_max":"100.000000000","card":{"brand":"visa","last4":"4242"},"off_reason":null}`)
	if strings.Contains(body, "pm_test") || strings.Contains(body, "cus_test") {
		t.Fatal("the payment provider's ids are shown")
	}
	if st, body := adminRaw(t, "PATCH", path, `{"auto_topup":{"amount":"30"}}`); st != 200 || !strings.Contains(body, `"amount":"30.000000000","month_max":"100.000000000"`) {
		t.Fatalf("change the amount alone: %d %s", st, body)
	}
	if err := g.store.TurnOffAutoTopup(ctx, acct, "Your card was declined."); err != nil {
		t.Fatal(err)
	}
	top(`{"on":false,"below":"5.000000000","amount":"30.000000000","month_max":"100.000000000","card":{"brand":"visa","last4":"4242"},"off_reason":"Your card was declined."}`)
	if st, body := adminRaw(t, "PATCH", path, `{"auto_topup":null}`); st != 200 {
		t.Fatalf("clear automatic top-up: %d %s", st, body)
	}
	top(`{"on":false,"below":null,"amount":null,"month_max":null,"card":{"brand":"visa","last4":"4242"},"off_reason":null}`)

	// deliveries: newest first, the payload as JSON, by channel
	now := time.Now().UTC()
	payload := `{"id":"evt_1","type":"balance.low","created":"` + now.Format(time.RFC3339) + `","account":"` + acct + `","data":{"balance":"4.21","threshold":"5.00"}}`
	fired, err := g.store.FireAlertWith(ctx, acct, "low_balance", "4.21 < 5.00", now, []ledger.Delivery{
		{ID: "dlv_mail_1", AccountID: acct, Channel: ledger.ChannelMail, Target: "ops@example.com", Payload: []byte(payload)},
		{ID: "dlv_hook_1", AccountID: acct, Channel: ledger.ChannelWebhook, Target: "https://hooks.example.com/mg", Payload: []byte(payload)},
	})
	if err != nil || !fired {
		t.Fatalf("fire: %v %v", fired, err)
	}
	var list struct {
		Deliveries []struct {
			ID, Channel, Target, Status string
			Payload                     json.RawMessage
			Attempts                    int
		}
	}
	if st := adminCall(t, "GET", path+"/deliveries", "", &list); st != 200 || len(list.Deliveries) != 2 {
		t.Fatalf("deliveries: %d %+v", st, list)
	}
	if st := adminCall(t, "GET", path+"/deliveries?channel=webhook&limit=5", "", &list); st != 200 || len(list.Deliveries) != 1 {
		t.Fatalf("webhook deliveries: %d %+v", st, list)
	}
	d := list.Deliveries[0]
	var event struct {
		Type string `json:"type"`
		Data struct {
			Balance string `json:"balance"`
		} `json:"data"`
	}
	if err := json.Unmarshal(d.Payload, &event); err != nil || d.ID != "dlv_hook_1" || d.Channel != "webhook" || d.Status != "pending" ||
		d.Target != "https://hooks.example.com/mg" || event.Type != "balance.low" || event.Data.Balance != "4.21" {
		t.Fatalf("the webhook delivery: %+v %v", d, err)
	}
	_, raw := adminRaw(t, "GET", path+"/deliveries", "")
	if strings.Contains(raw, second.Secret) {
		t.Fatal("the deliveries show the webhook secret")
	}
	for _, q := range []string{"?channel=sms", "?limit=0", "?limit=lots", "?limit=501", "?colour=red"} {
		if st, body := adminRaw(t, "GET", path+"/deliveries"+q, ""); st != 400 || !strings.HasPrefix(body, `{"error":`) {
			t.Errorf("deliveries%s: %d %s", q, st, body)
		}
	}
}
