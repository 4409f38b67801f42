package integration

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// TestRegionBlockPages: block_countries also refuses console sign-up, the
// top-up page and the lookup page (403), not only the API; sign-in and the
// rest of the console stay open.
func TestRegionBlockPages(t *testing.T) {
	resetConsoleLimits(t)
	db := writeCountryDB(t)
	g := startGateway(t, gatewayOptions{
		site:   consoleSite,
		global: trustLocalProxy,
		extra:  fmt.Sprintf("\t\tblock_countries CN {\n\t\t\tgeoip_db %s\n\t\t}\n", db),
	})
	_, key := g.account("1.00")
	const allowed, blocked = "5.6.7.8", "1.2.3.4" // DE, CN
	from := func(addr string) []string { return []string{"X-Forwarded-For", addr} }

	// an account opened from an allowed country
	c := newConsoleClient(t)
	page := c.do("GET", "/console/signup", nil, from(allowed)...)
	if page.status != http.StatusOK {
		t.Fatalf("sign-up page from %s: %d", allowed, page.status)
	}
	r := c.do("POST", "/console/signup", url.Values{"email": {"traveller@example.com"}, "password": {testPassword}, "csrf": {csrfOf(t, page.body)}}, from(allowed)...)
	if r.status != http.StatusSeeOther {
		t.Fatalf("sign-up from %s: %d %s", allowed, r.status, r.body)
	}
	csrf := csrfOf(t, c.do("GET", "/console/keys", nil, from(allowed)...).body)

	for _, tc := range []struct {
		name, method, path string
		form               url.Values
		client             *consoleClient
	}{
		{"sign-up page", "GET", "/console/signup", nil, newConsoleClient(t)},
		{"sign-up", "POST", "/console/signup", url.Values{"email": {"new@example.com"}, "password": {testPassword}}, newConsoleClient(t)},
		{"top-up page", "GET", "/console/topup", nil, c},
		{"top-up", "POST", "/console/topup", url.Values{"amount": {"10"}, "csrf": {csrf}}, c},
		{"lookup page", "GET", "/usage", nil, newConsoleClient(t)},
		{"lookup", "POST", "/usage", url.Values{"key": {key}}, newConsoleClient(t)},
	} {
		r := tc.client.do(tc.method, tc.path, tc.form, from(blocked)...)
		if r.status != http.StatusForbidden || !strings.Contains(r.body, "not available in your country") || strings.Contains(r.body, `data-figure="balance">1.000000000`) {
			t.Errorf("%s from %s: %d\n%.500s", tc.name, blocked, r.status, r.body)
		}
		if tc.method == "GET" {
			if r := tc.client.do(tc.method, tc.path, tc.form, from(allowed)...); r.status != http.StatusOK {
				t.Errorf("%s from %s: %d", tc.name, allowed, r.status)
			}
		}
	}
	if _, _, err := g.store.Login(t.Context(), "new@example.com"); err == nil {
		t.Error("a sign-up from a blocked country created an account")
	}
	// the rest of the console stays open: a customer abroad still sees
	// their keys and usage
	if r := c.do("GET", "/console/usage", nil, from(blocked)...); r.status != http.StatusOK {
		t.Errorf("usage page from %s: %d", blocked, r.status)
	}
}
