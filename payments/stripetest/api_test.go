package stripetest

import (
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
)

// call makes a request of the double, with the key unless it is empty,
// and returns the status and the decoded body. It reports a failure with
// t.Errorf, as goroutines call it.
func call(t *testing.T, a *API, method, path, key, idempotencyKey string, form url.Values) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(method, a.URL+path, strings.NewReader(form.Encode()))
	if err != nil {
		t.Errorf("%s %s: %v", method, path, err)
		return 0, nil
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	if idempotencyKey != "" {
		req.Header.Set("Idempotency-Key", idempotencyKey)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Errorf("%s %s: %v", method, path, err)
		return 0, nil
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Errorf("%s %s: %v", method, path, err)
		return 0, nil
	}
	var m map[string]any
	if err := json.Unmarshal(body, &m); err != nil {
		t.Errorf("%s %s: %v: %s", method, path, err, body)
	}
	return resp.StatusCode, m
}

// errorOf is an answer's error type and code.
func errorOf(m map[string]any) (typ, code string) {
	e, _ := m["error"].(map[string]any)
	typ, _ = e["type"].(string)
	code, _ = e["code"].(string)
	return typ, code
}

// setUp makes two customers, the first with a saved card of the outcome.
func setUp(t *testing.T, a *API, o Outcome) (customer, other, pm string) {
	t.Helper()
	_, c := call(t, a, "POST", "/v1/customers", "sk_test_d", "", url.Values{"metadata[modelgate_account]": {"acct_a"}})
	_, c2 := call(t, a, "POST", "/v1/customers", "sk_test_d", "", nil)
	customer, other = c["id"].(string), c2["id"].(string)
	status, cs := call(t, a, "POST", "/v1/checkout/sessions", "sk_test_d", "", url.Values{"mode": {"setup"}, "customer": {customer},
		"currency": {"usd"}, "success_url": {"https://gw/ok"}, "metadata[k]": {"v"}})
	if status != http.StatusOK {
		t.Fatalf("setup session: %d %v", status, cs)
	}
	pm, d := a.CompleteSetup(cs["id"].(string), Card{Brand: "visa", Last4: "4242", ExpMonth: 1, ExpYear: 2040, Outcome: o})
	if !strings.Contains(string(d.Payload), `"metadata":{"k":"v"}`) || d.Header.Get("Stripe-Signature") == "" {
		t.Fatalf("the setup's event: %s %v", d.Payload, d.Header)
	}
	return customer, other, pm
}

// TestAPIRefuses: the double refuses what Stripe refuses (or what the
// gateway must never send), and says so in Refused.
func TestAPIRefuses(t *testing.T) {
	a := NewAPI(t, "sk_test_d", "whsec_d")
	customer, other, pm := setUp(t, a, OutcomeSucceed)
	charge := func(change func(url.Values)) url.Values {
		f := url.Values{"amount": {"1000"}, "currency": {"usd"}, "customer": {customer}, "payment_method": {pm},
			"confirm": {"true"}, "off_session": {"true"}}
		if change != nil {
			change(f)
		}
		return f
	}
	for _, tc := range []struct {
		name, method, path, key, idem string
		form                          url.Values
		status                        int
		typ, code                     string
	}{
		{name: "no key", method: "POST", path: "/v1/customers", status: 401, typ: "invalid_request_error"},
		{name: "another key", method: "POST", path: "/v1/customers", key: "sk_test_other", status: 401, typ: "invalid_request_error"},
		{name: "an unknown path", method: "POST", path: "/v1/refunds", key: "sk_test_d", status: 404, typ: "invalid_request_error"},
		{name: "a session without mode", method: "POST", path: "/v1/checkout/sessions", key: "sk_test_d",
			form: url.Values{"success_url": {"https://gw/ok"}}, status: 400, typ: "invalid_request_error", code: "parameter_missing"},
		{name: "a setup session without customer", method: "POST", path: "/v1/checkout/sessions", key: "sk_test_d",
			form: url.Values{"mode": {"setup"}, "currency": {"usd"}, "success_url": {"https://gw/ok"}}, status: 400, code: "parameter_missing",
			typ: "invalid_request_error"},
		{name: "a payment session without amount", method: "POST", path: "/v1/checkout/sessions", key: "sk_test_d",
			form: url.Values{"mode": {"payment"}, "success_url": {"https://gw/ok"}, "line_items[0][quantity]": {"1"},
				"line_items[0][price_data][currency]": {"usd"}, "line_items[0][price_data][product_data][name]": {"x"}},
			status: 400, typ: "invalid_request_error", code: "parameter_missing"},
		{name: "an unknown setup intent", method: "GET", path: "/v1/setup_intents/seti_x", key: "sk_test_d", status: 404,
			typ: "invalid_request_error", code: "resource_missing"},
		{name: "a charge without an idempotency key", method: "POST", path: "/v1/payment_intents", key: "sk_test_d", form: charge(nil),
			status: 400, typ: "invalid_request_error"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := len(a.Refused())
			status, m := call(t, a, tc.method, tc.path, tc.key, tc.idem, tc.form)
			typ, code := errorOf(m)
			if status != tc.status || typ != tc.typ || code != tc.code || len(a.Refused()) != before+1 {
				t.Fatalf("%d %s %s (%d refused), want %d %s %s", status, typ, code, len(a.Refused())-before, tc.status, tc.typ, tc.code)
			}
		})
	}
	for _, field := range []string{"amount", "currency", "customer", "payment_method", "confirm", "off_session"} {
		t.Run("a charge without "+field, func(t *testing.T) {
			status, m := call(t, a, "POST", "/v1/payment_intents", "sk_test_d", "k_no_"+field, charge(func(f url.Values) { f.Del(field) }))
			if typ, code := errorOf(m); status != 400 || code != "parameter_missing" || typ != "invalid_request_error" {
				t.Fatalf("%d %v", status, m)
			}
		})
	}
	for _, tc := range []struct {
		name   string
		change func(url.Values)
		status int
	}{
		{name: "not confirmed", change: func(f url.Values) { f.Set("confirm", "false") }, status: 400},
		{name: "on-session", change: func(f url.Values) { f.Set("off_session", "false") }, status: 400},
		{name: "a fraction", change: func(f url.Values) { f.Set("amount", "10.5") }, status: 400},
		{name: "another customer's card", change: func(f url.Values) { f.Set("customer", other) }, status: 400},
		{name: "an unknown card", change: func(f url.Values) { f.Set("payment_method", "pm_x") }, status: 404},
		{name: "an unknown customer", change: func(f url.Values) { f.Set("customer", "cus_x") }, status: 404},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// a refused request keeps no answer for its key: the right one
			// with the same key then charges
			key := "k_" + strings.ReplaceAll(tc.name, " ", "_")
			if status, m := call(t, a, "POST", "/v1/payment_intents", "sk_test_d", key, charge(tc.change)); status != tc.status {
				t.Fatalf("%d %v", status, m)
			}
			if status, m := call(t, a, "POST", "/v1/payment_intents", "sk_test_d", key, charge(nil)); status != 200 || m["status"] != "succeeded" {
				t.Fatalf("then: %d %v", status, m)
			}
		})
	}
	if a.Charges() != 6 {
		t.Fatalf("%d charges, want 6", a.Charges())
	}
}

// TestAPIIdempotency: a key charges once; the same key with other
// parameters is an idempotency_error; a 500 keeps nothing for its key.
func TestAPIIdempotency(t *testing.T) {
	a := NewAPI(t, "sk_test_d", "whsec_d")
	customer, _, pm := setUp(t, a, OutcomeSucceed)
	_, _, declined := setUp(t, a, OutcomeAuthenticationRequired)
	form := url.Values{"amount": {"1000"}, "currency": {"usd"}, "customer": {customer}, "payment_method": {pm},
		"confirm": {"true"}, "off_session": {"true"}, "metadata[modelgate_auto_topup]": {"k1"}}
	var wg sync.WaitGroup
	ids := make(chan any, 10)
	for range 10 {
		wg.Go(func() {
			status, m := call(t, a, "POST", "/v1/payment_intents", "sk_test_d", "k1", form)
			if status != 200 {
				t.Errorf("%d %v", status, m)
			}
			ids <- m["id"]
		})
	}
	wg.Wait()
	close(ids)
	first := <-ids
	for id := range ids {
		if id != first {
			t.Fatalf("ids %v and %v for one key", first, id)
		}
	}
	if a.Charges() != 1 || a.ChargesFor("k1") != 1 || a.RequestsFor("k1") != 10 {
		t.Fatalf("%d charges, %d for the key in %d requests", a.Charges(), a.ChargesFor("k1"), a.RequestsFor("k1"))
	}
	form.Set("amount", "2000")
	if status, m := call(t, a, "POST", "/v1/payment_intents", "sk_test_d", "k1", form); status != 400 || m["error"].(map[string]any)["type"] != "idempotency_error" {
		t.Fatalf("the key with another amount: %d %v", status, m)
	}
	a.FailNext(1)
	if status, _ := call(t, a, "POST", "/v1/payment_intents", "sk_test_d", "k2", form); status != 500 || a.Charges() != 1 || a.ChargesFor("k2") != 0 {
		t.Fatalf("a 500: %d, %d charges", status, a.Charges())
	}
	if status, m := call(t, a, "POST", "/v1/payment_intents", "sk_test_d", "k2", form); status != 200 || a.Charges() != 2 {
		t.Fatalf("after a 500: %d %v", status, m)
	}
	// a decline, with its payment intent, answered again
	form.Set("payment_method", declined)
	form.Set("customer", customerOf(a, declined))
	status1, m1 := call(t, a, "POST", "/v1/payment_intents", "sk_test_d", "k3", form)
	status2, m2 := call(t, a, "POST", "/v1/payment_intents", "sk_test_d", "k3", form)
	pi1 := m1["error"].(map[string]any)["payment_intent"].(map[string]any)
	pi2 := m2["error"].(map[string]any)["payment_intent"].(map[string]any)
	if status1 != 402 || status2 != 402 || pi1["id"] != pi2["id"] || pi1["status"] != "requires_action" || a.Charges() != 3 {
		t.Fatalf("declines: %d %v, %d %v", status1, m1, status2, m2)
	}
	if r := a.Refused(); len(r) != 1 || !strings.Contains(r[0], "idempotency_error") {
		t.Fatalf("refused: %q", r)
	}
}

// customerOf is the customer of a saved card.
func customerOf(a *API, pm string) string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.paymentMethods[pm].customer
}
