package integration

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
)

// fakeStripe is Stripe's Checkout API as the gateway calls it: it keeps
// the form of every session it is asked to create.
type fakeStripe struct {
	srv   *httptest.Server
	mu    sync.Mutex
	forms []url.Values
}

// newFakeStripe starts the fake API and points the test configuration at
// it; stripeTestConfig is the payments option that uses it.
func newFakeStripe(t *testing.T) *fakeStripe {
	f := &fakeStripe{}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/checkout/sessions" || r.Header.Get("Authorization") != "Bearer sk_test_console" {
			http.Error(w, `{"error":{"message":"unexpected"}}`, 400)
			return
		}
		_ = r.ParseForm()
		f.mu.Lock()
		f.forms = append(f.forms, r.PostForm)
		id := fmt.Sprintf("cs_test_%d", len(f.forms))
		f.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":%q,"object":"checkout.session","url":"https://checkout.stripe.com/c/pay/%s"}`, id, id)
	}))
	t.Cleanup(f.srv.Close)
	t.Setenv("MG_TEST_WEBHOOK_SECRET", testWebhookSecret)
	t.Setenv("MG_TEST_STRIPE_API", f.srv.URL)
	return f
}

// stripeTestConfig is the payments option for newFakeStripe.
var stripeTestConfig = strings.Replace(stripeConfig, "secret_key sk_test_unused", "secret_key sk_test_console\n\t\t\tapi_base {env.MG_TEST_STRIPE_API}", 1)

// sessions is how many checkout sessions were created.
func (f *fakeStripe) sessions() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.forms)
}

// last is the form of the last session created.
func (f *fakeStripe) last() url.Values {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.forms) == 0 {
		return nil
	}
	return f.forms[len(f.forms)-1]
}

// TestStatusTitleNotFromHost: the status page's default title does not
// come from a visitor's Host header (which the page cache used to serve to
// everyone): without public_url it is "Service status", with one its host.
func TestStatusTitleNotFromHost(t *testing.T) {
	for _, tc := range []struct {
		name, extra, want string
	}{
		{"no public_url", "", "Service status"},
		{"public_url", "\t\tpublic_url https://gw.example.com/\n", "gw.example.com status"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// a site without a host name: any Host reaches it
			startGateway(t, gatewayOptions{address: fmt.Sprintf(":%d", gatewayPort), status: true, extra: tc.extra})
			req, _ := http.NewRequest("GET", gatewayAddr+"/status", nil)
			req.Host = "defaced.example"
			first := send(t, http.DefaultClient, req)
			again := send(t, http.DefaultClient, mustRequest(t, "GET", gatewayAddr+"/status"))
			for _, r := range []response{first, again} {
				if r.status != 200 || strings.Contains(r.body, "defaced") || !strings.Contains(r.body, "<h1>"+tc.want+"</h1>") {
					t.Fatalf("status page: %d\n%.600s", r.status, r.body)
				}
			}
		})
	}
}

// mustRequest makes a request without a body.
func mustRequest(t *testing.T, method, url string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	return req
}

// TestTopUpReturnURLs: the addresses Stripe sends a payer back to come
// from public_url, or from the site's own host name with the scheme the
// client used (X-Forwarded-Proto only from a trusted proxy), never from a
// Host that no site address names.
func TestTopUpReturnURLs(t *testing.T) {
	site := fmt.Sprintf("http://localhost:%d", gatewayPort)
	for _, tc := range []struct {
		name    string
		o       gatewayOptions
		headers []string
		want    string // the success URL; "" when no checkout may start
	}{
		{name: "public_url", o: gatewayOptions{extra: "\t\tpublic_url https://pay.example.com/gw\n"},
			headers: []string{"X-Forwarded-Proto", "http"}, want: "https://pay.example.com/gw/console/topup?paid=1"},
		{name: "the site's host", want: site + "/console/topup?paid=1"},
		{name: "X-Forwarded-Proto from an untrusted client", headers: []string{"X-Forwarded-Proto", "https"},
			want: site + "/console/topup?paid=1"},
		{name: "X-Forwarded-Proto from a trusted proxy", o: gatewayOptions{global: trustLocalProxy},
			headers: []string{"X-Forwarded-Proto", "https"}, want: strings.Replace(site, "http:", "https:", 1) + "/console/topup?paid=1"},
		{name: "a site without a host name", o: gatewayOptions{address: fmt.Sprintf(":%d", gatewayPort)},
			headers: []string{"X-Forwarded-Host", "evil.example"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resetConsoleLimits(t)
			stripe := newFakeStripe(t)
			tc.o.site = consoleSite
			tc.o.extra += stripeTestConfig
			startGateway(t, tc.o)
			c := newConsoleClient(t)
			page := c.get("/console/signup")
			if r := c.do("POST", "/console/signup", url.Values{"email": {"payer@example.com"}, "password": {testPassword}, "csrf": {csrfOf(t, page.body)}}); r.status != http.StatusSeeOther {
				t.Fatalf("sign up: %d", r.status)
			}
			csrf := csrfOf(t, c.get("/console/topup").body)
			do := func(host string) response {
				req, _ := http.NewRequest("POST", gatewayAddr+"/console/topup", strings.NewReader(url.Values{"amount": {"10"}, "csrf": {csrf}}.Encode()))
				req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
				for name, value := range c.cookies {
					req.AddCookie(&http.Cookie{Name: name, Value: value})
				}
				for i := 0; i+1 < len(tc.headers); i += 2 {
					req.Header.Set(tc.headers[i], tc.headers[i+1])
				}
				if host != "" {
					req.Host = host
				}
				return send(t, c.http, req)
			}
			r := do("")
			if tc.want == "" {
				if r.status != http.StatusServiceUnavailable || stripe.sessions() != 0 {
					t.Fatalf("top-up on a site without a host name: %d, %d sessions", r.status, stripe.sessions())
				}
				if r := do("evil.example"); r.status != http.StatusServiceUnavailable || stripe.sessions() != 0 {
					t.Fatalf("top-up with Host evil.example: %d, %d sessions", r.status, stripe.sessions())
				}
				return
			}
			if r.status != http.StatusSeeOther {
				t.Fatalf("top-up: %d %s", r.status, r.body)
			}
			form := stripe.last()
			if got := form.Get("success_url"); got != tc.want {
				t.Errorf("success_url %q, want %q", got, tc.want)
			}
			if got, want := form.Get("cancel_url"), strings.Replace(tc.want, "paid=1", "cancelled=1", 1); got != want {
				t.Errorf("cancel_url %q, want %q", got, want)
			}
		})
	}
}
