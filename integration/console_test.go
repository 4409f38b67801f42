package integration

import (
	"bytes"
	"context"
	"encoding/csv"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/caddyconfig"

	"github.com/modelgate/modelgate/internal/guard"
	"github.com/modelgate/modelgate/ledger"
	"github.com/modelgate/modelgate/payments/stripetest"
)

// consoleSite serves the console and the lookup page on the test site.
const consoleSite = "\tmodelgate_console /console*\n\tmodelgate_lookup /usage*\n"

const testPassword = "correct horse battery staple"

// consoleClient is a visitor of the console: it keeps the cookies the
// console sets (Go's cookie jar would not send Secure cookies to
// http://localhost, as browsers do) and does not follow redirects.
type consoleClient struct {
	t       *testing.T
	cookies map[string]string
	http    *http.Client
}

func newConsoleClient(t *testing.T) *consoleClient {
	return &consoleClient{t: t, cookies: map[string]string{}, http: &http.Client{
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		Timeout:       30 * time.Second,
	}}
}

// do sends a request with the visitor's cookies; headers alternate name, value.
func (c *consoleClient) do(method, path string, form url.Values, headers ...string) response {
	c.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, gatewayAddr+path, body)
	if err != nil {
		c.t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for name, value := range c.cookies {
		req.AddCookie(&http.Cookie{Name: name, Value: value})
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	r := send(c.t, c.http, req)
	for _, ck := range (&http.Response{Header: r.header}).Cookies() {
		if ck.MaxAge < 0 {
			delete(c.cookies, ck.Name)
		} else {
			c.cookies[ck.Name] = ck.Value
		}
	}
	return r
}

func (c *consoleClient) get(path string) response { c.t.Helper(); return c.do("GET", path, nil) }

// post sends a form to path with the CSRF token of the page at path (or
// of from, when given).
func (c *consoleClient) post(path string, form url.Values, from ...string) response {
	c.t.Helper()
	page := path
	if len(from) > 0 {
		page = from[0]
	}
	form.Set("csrf", csrfOf(c.t, c.get(page).body))
	return c.do("POST", path, form)
}

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// csrfOf is the form token of a page.
func csrfOf(t *testing.T, page string) string {
	t.Helper()
	m := csrfField.FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("no csrf field in the page:\n%.2000s", page)
	}
	return m[1]
}

// signUp creates an account in the console and returns its id.
func (c *consoleClient) signUp(g *testGateway, email string) string {
	c.t.Helper()
	r := c.post("/console/signup", url.Values{"email": {email}, "password": {testPassword}})
	if r.status != http.StatusSeeOther || r.header.Get("Location") != "/console/" {
		c.t.Fatalf("sign up: %d %v\n%s", r.status, r.header, r.body)
	}
	id, _, err := g.store.Login(context.Background(), email)
	if err != nil {
		c.t.Fatal(err)
	}
	return id
}

// signIn signs in and returns the status.
func (c *consoleClient) signIn(email, password string) response {
	c.t.Helper()
	return c.post("/console/signin", url.Values{"email": {email}, "password": {password}})
}

// resetConsoleLimits forgets the sign-in, sign-up and lookup counts and
// the accounts' own addresses, which the guard in the usage pool keeps
// across configs (and so across tests).
func resetConsoleLimits(t *testing.T) {
	guard.Reset()
	t.Cleanup(guard.Reset)
}

// The console's cookies: the session, and the new key's sealed copy.
const (
	sessionCookie = "mg_console"
	newKeyCookie  = "mg_console_newkey"
	formCookie    = "mg_console_form"
	// the webhook secret's sealed copy
	newSigningCookie = "mg_console_signing"
)

var newKeyText = regexp.MustCompile(`<output id="new-key" class="secret">(mg-[0-9A-Za-z]+)</output>`)

// TestConsoleSessions: sign-up signs in with a Secure, HttpOnly, SameSite
// cookie whose token the ledger only keeps hashed; sign-out ends it; wrong
// passwords fail and, repeated, lock the sign-in for a while.
func TestConsoleSessions(t *testing.T) {
	resetConsoleLimits(t)
	g := startGateway(t, gatewayOptions{site: consoleSite, globalLog: true})
	if r := newConsoleClient(t).get("/console/keys"); r.status != http.StatusSeeOther || r.header.Get("Location") != "/console/signin" {
		t.Fatalf("signed out, keys: %d %v", r.status, r.header)
	}
	if r := newConsoleClient(t).get("/console"); r.status != http.StatusMovedPermanently || r.header.Get("Location") != "/console/" {
		t.Fatalf("/console: %d %v", r.status, r.header)
	}

	c := newConsoleClient(t)
	signup := c.get("/console/signup")
	if signup.status != 200 || signup.header.Get("Cache-Control") != "no-store" ||
		!strings.Contains(signup.header.Get("Content-Security-Policy"), "default-src 'none'") {
		t.Fatalf("sign-up page: %d %v", signup.status, signup.header)
	}
	form := url.Values{"email": {"Ada@Example.com"}, "password": {testPassword}, "csrf": {csrfOf(t, signup.body)}}
	r := c.do("POST", "/console/signup", form)
	if r.status != http.StatusSeeOther {
		t.Fatalf("sign up: %d %s", r.status, r.body)
	}
	var session *http.Cookie
	for _, ck := range (&http.Response{Header: r.header}).Cookies() {
		if ck.Name == sessionCookie {
			session = ck
		}
	}
	if session == nil || !session.Secure || !session.HttpOnly || session.SameSite != http.SameSiteLaxMode ||
		session.Path != "/console/" || session.MaxAge != 7*24*3600 || len(session.Value) != 43 {
		t.Fatalf("session cookie: %+v", session)
	}
	acct, _, err := g.store.Login(context.Background(), "ada@example.com")
	if err != nil {
		t.Fatalf("the email is kept in lower case: %v", err)
	}
	home := c.get("/console/")
	if home.status != 200 || !strings.Contains(home.body, "ada@example.com") || figure(home.body, "balance") != "0.000000 USD" ||
		figure(home.body, "plan") != "developer" {
		t.Fatalf("home: %d\n%s", home.status, home.body)
	}

	// the ledger holds the token's hash, never the token or the password
	var db []byte
	for _, suffix := range []string{"", "-wal"} {
		b, _ := os.ReadFile(g.dbPath + suffix)
		db = append(db, b...)
	}
	if len(db) == 0 {
		t.Fatal("no ledger file")
	}
	if bytes.Contains(db, []byte(session.Value)) || bytes.Contains(db, []byte(testPassword)) {
		t.Fatal("the ledger file holds the session token or the password")
	}

	// the same email again, in any case: refused, without saying outright
	// that the email has an account
	other := newConsoleClient(t)
	for _, email := range []string{"ada@example.com", " ADA@example.COM"} {
		r := other.post("/console/signup", url.Values{"email": {email}, "password": {testPassword}})
		if r.status != http.StatusBadRequest || other.cookies[sessionCookie] != "" || strings.Contains(strings.ToLower(r.body), "exists") ||
			!strings.Contains(r.body, "No account was created") {
			t.Fatalf("duplicate sign-up %q: %d\n%s", email, r.status, r.body)
		}
	}
	// bad input: refused, nothing created
	for _, f := range []url.Values{
		{"email": {"not-an-email"}, "password": {testPassword}},
		{"email": {"b@example.com"}, "password": {"short"}},
		{"email": {"Bob <b@example.com>"}, "password": {testPassword}},
	} {
		if r := other.post("/console/signup", f); r.status != http.StatusBadRequest {
			t.Errorf("sign-up %v: %d", f, r.status)
		}
	}

	// sign out: the token is dead, also if replayed
	token := c.cookies[sessionCookie]
	if r := c.post("/console/signout", url.Values{}, "/console/"); r.status != http.StatusSeeOther || c.cookies[sessionCookie] != "" {
		t.Fatalf("sign out: %d %v", r.status, r.header)
	}
	c.cookies[sessionCookie] = token
	if r := c.get("/console/"); r.status != http.StatusSeeOther {
		t.Fatalf("a signed-out token still works: %d", r.status)
	}
	delete(c.cookies, sessionCookie)

	// wrong password, unknown email: the same answer
	for _, email := range []string{"ada@example.com", "nobody@example.com"} {
		if r := c.signIn(email, "wrong password!"); r.status != http.StatusUnauthorized || !strings.Contains(r.body, "Wrong email or password") {
			t.Fatalf("wrong sign-in %s: %d", email, r.status)
		}
	}
	if r := c.signIn("ADA@example.com", testPassword); r.status != http.StatusSeeOther {
		t.Fatalf("sign in: %d %s", r.status, r.body)
	}
	if r := c.get("/console/"); r.status != 200 || !strings.Contains(r.body, "ada@example.com") {
		t.Fatalf("after sign-in: %d", r.status)
	}

	// an account the operator created with a password signs in too
	if status := adminCall(t, "POST", "/modelgate/accounts", `{"email":"ops-made@example.com","password":"`+testPassword+`"}`, nil); status != http.StatusCreated {
		t.Fatalf("admin account: %d", status)
	}
	if r := newConsoleClient(t).signIn("ops-made@example.com", testPassword); r.status != http.StatusSeeOther {
		t.Fatalf("operator-made login: %d", r.status)
	}

	// brute force: after 10 wrong passwords from one address, even the
	// right one is refused for a while
	resetConsoleLimits(t)
	b := newConsoleClient(t)
	for i := range guard.SignInFailures {
		if r := b.signIn("ada@example.com", fmt.Sprintf("guess number %d", i)); r.status != http.StatusUnauthorized {
			t.Fatalf("guess %d: %d", i, r.status)
		}
	}
	r = b.signIn("ada@example.com", testPassword)
	if r.status != http.StatusTooManyRequests || r.header.Get("Retry-After") == "" || b.cookies[sessionCookie] != "" {
		t.Fatalf("after %d wrong passwords: %d %v", guard.SignInFailures, r.status, r.header)
	}
	if a, _ := g.store.GetAccount(context.Background(), acct); a.Email != "ada@example.com" {
		t.Fatalf("account: %+v", a)
	}
}

// TestConsoleCSRF: a form without its token, with another session's
// token, or sent from another site changes nothing.
func TestConsoleCSRF(t *testing.T) {
	resetConsoleLimits(t)
	g := startGateway(t, gatewayOptions{site: consoleSite})
	victim := newConsoleClient(t)
	acct := victim.signUp(g, "victim@example.com")
	attacker := newConsoleClient(t)
	attacker.signUp(g, "attacker@example.com")
	attackerToken := csrfOf(t, attacker.get("/console/keys").body)
	goodToken := csrfOf(t, victim.get("/console/keys").body)

	keys := func() int {
		ks, err := g.store.ListKeys(context.Background(), acct)
		if err != nil {
			t.Fatal(err)
		}
		return len(ks)
	}
	for name, tc := range map[string]struct {
		form    url.Values
		headers []string
	}{
		"no token":              {form: url.Values{"label": {"x"}}},
		"empty token":           {form: url.Values{"label": {"x"}, "csrf": {""}}},
		"another session's":     {form: url.Values{"label": {"x"}, "csrf": {attackerToken}}},
		"cross-site, fetch":     {form: url.Values{"label": {"x"}, "csrf": {goodToken}}, headers: []string{"Sec-Fetch-Site", "cross-site"}},
		"cross-origin, origin":  {form: url.Values{"label": {"x"}, "csrf": {goodToken}}, headers: []string{"Origin", "https://evil.example"}},
		"same-site, other host": {form: url.Values{"label": {"x"}, "csrf": {goodToken}}, headers: []string{"Sec-Fetch-Site", "same-site"}},
	} {
		if r := victim.do("POST", "/console/keys", tc.form, tc.headers...); r.status != http.StatusForbidden {
			t.Errorf("%s: %d", name, r.status)
		}
	}
	if n := keys(); n != 0 {
		t.Fatalf("a forged form created %d keys", n)
	}
	// the same form, done right, works
	if r := victim.do("POST", "/console/keys", url.Values{"label": {"x"}, "csrf": {goodToken}}, "Sec-Fetch-Site", "same-origin"); r.status != http.StatusSeeOther {
		t.Fatalf("genuine form: %d %s", r.status, r.body)
	}
	if n := keys(); n != 1 {
		t.Fatalf("keys after the genuine form: %d", n)
	}

	// sign-out and delete need the token too
	ks, _ := g.store.ListKeys(context.Background(), acct)
	victim.do("POST", "/console/keys/delete", url.Values{"id": {ks[0].ID}})
	victim.do("POST", "/console/signout", url.Values{"csrf": {attackerToken}})
	if k, _ := g.store.KeyByID(context.Background(), ks[0].ID); k.Deleted {
		t.Fatal("a delete without the token deleted the key")
	}
	if r := victim.get("/console/"); r.status != 200 {
		t.Fatalf("a sign-out without the token signed out: %d", r.status)
	}
	// the attacker cannot delete the victim's key with his own session
	if r := attacker.post("/console/keys/delete", url.Values{"id": {ks[0].ID}}, "/console/keys"); r.status != http.StatusNotFound {
		t.Fatalf("deleting another account's key: %d", r.status)
	}
	if r := attacker.get("/console/keys/delete?id=" + ks[0].ID); r.status != http.StatusNotFound {
		t.Fatalf("confirming another account's key: %d", r.status)
	}

	// the forms shown before sign-in: login CSRF is refused too
	fresh := newConsoleClient(t)
	if r := fresh.do("POST", "/console/signin", url.Values{"email": {"attacker@example.com"}, "password": {testPassword}}); r.status != http.StatusForbidden || fresh.cookies[sessionCookie] != "" {
		t.Fatalf("sign-in without the form token: %d", r.status)
	}
	page := fresh.get("/console/signin")
	if r := fresh.do("POST", "/console/signin", url.Values{"email": {"attacker@example.com"}, "password": {testPassword}, "csrf": {csrfOf(t, page.body)}},
		"Sec-Fetch-Site", "cross-site"); r.status != http.StatusForbidden || fresh.cookies[sessionCookie] != "" {
		t.Fatalf("cross-site sign-in: %d", r.status)
	}
	if r := fresh.do("POST", "/console/signup", url.Values{"email": {"new@example.com"}, "password": {testPassword}, "csrf": {"forged-forged-forged-forged-forged-forged-x"}}); r.status != http.StatusForbidden {
		t.Fatalf("sign-up with a forged token: %d", r.status)
	}
}

// TestConsoleSessionFixation: a session token planted in the browser
// before sign-in is never the signed-in session: the console issues a
// fresh one and ends the planted one.
func TestConsoleSessionFixation(t *testing.T) {
	resetConsoleLimits(t)
	g := startGateway(t, gatewayOptions{site: consoleSite})
	victim := newConsoleClient(t)
	victim.signUp(g, "victim@example.com")
	victim.post("/console/signout", url.Values{}, "/console/")

	// a token the attacker made up
	planted := strings.Repeat("A", 43)
	victim.cookies[sessionCookie] = planted
	if r := victim.signIn("victim@example.com", testPassword); r.status != http.StatusSeeOther {
		t.Fatalf("sign in: %d", r.status)
	}
	if victim.cookies[sessionCookie] == planted {
		t.Fatal("the planted token became the session")
	}
	attacker := newConsoleClient(t)
	attacker.cookies[sessionCookie] = planted
	if r := attacker.get("/console/"); r.status != http.StatusSeeOther {
		t.Fatalf("the planted token opens the console: %d", r.status)
	}

	// a real session of the attacker's own account, planted in the browser
	attacker = newConsoleClient(t)
	attacker.signUp(g, "attacker@example.com")
	victim = newConsoleClient(t)
	form := url.Values{"email": {"victim@example.com"}, "password": {testPassword}, "csrf": {csrfOf(t, victim.get("/console/signin").body)}}
	victim.cookies[sessionCookie] = attacker.cookies[sessionCookie] // planted after the form was shown
	if r := victim.do("POST", "/console/signin", form); r.status != http.StatusSeeOther {
		t.Fatalf("sign in: %d", r.status)
	}
	if victim.cookies[sessionCookie] == attacker.cookies[sessionCookie] {
		t.Fatal("the planted session was kept")
	}
	if r := victim.get("/console/"); !strings.Contains(r.body, "victim@example.com") {
		t.Fatalf("victim's console: %d", r.status)
	}
	if r := attacker.get("/console/"); r.status != http.StatusSeeOther {
		t.Fatalf("the planted session lives on after the victim's sign-in: %d %.300s", r.status, r.body)
	}
}

// TestConsoleKeysAndUsage: a key created in the console is shown once,
// works with the API, shows in the usage (page and CSV, exact to the nano),
// and, deleted, is refused on the next request.
func TestConsoleKeysAndUsage(t *testing.T) {
	resetConsoleLimits(t)
	g := startGateway(t, gatewayOptions{site: consoleSite, globalLog: true})
	c := newConsoleClient(t)
	acct := c.signUp(g, "user@example.com")
	if _, err := g.store.Credit(context.Background(), ledger.CreditRequest{AccountID: acct, Amount: 5_000_000_000, Reference: "test:" + acct, Reason: "test"}); err != nil {
		t.Fatal(err)
	}

	r := c.post("/console/keys", url.Values{"label": {"=cmd|' /C calc'!A0"}})
	if r.status != http.StatusSeeOther || r.header.Get("Location") != "/console/keys" {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	sealed := c.cookies[newKeyCookie]
	if sealed == "" || !strings.Contains(r.header.Get("Set-Cookie"), "Path=/console/keys") {
		t.Fatalf("new key cookie: %q", r.header.Values("Set-Cookie"))
	}
	page := c.get("/console/keys")
	m := newKeyText.FindStringSubmatch(page.body)
	if m == nil {
		t.Fatalf("the new key is not shown:\n%s", page.body)
	}
	key := m[1]
	if strings.Contains(sealed, key) || strings.Contains(sealed, key[3:]) {
		t.Fatal("the new key travels in its cookie in the clear")
	}
	if _, ok := c.cookies[newKeyCookie]; ok {
		t.Fatal("the new key's cookie is not deleted as it is shown")
	}
	if again := c.get("/console/keys"); strings.Contains(again.body, key) || newKeyText.MatchString(again.body) {
		t.Fatal("the key is shown a second time")
	}
	c.cookies[newKeyCookie] = sealed // a replayed copy of the cookie
	if again := c.get("/console/keys"); strings.Contains(again.body, key) {
		t.Fatal("a replayed cookie shows the key again")
	}
	ks, _ := g.store.ListKeys(context.Background(), acct)
	if len(ks) != 1 || !strings.Contains(page.body, ks[0].Prefix) || !strings.Contains(page.body, "never") {
		t.Fatalf("keys list: %+v", ks)
	}

	// a suspended account's key: 403; resumed: works
	if r := g.generate("openai", testModel, "hello from the console key", false, key); r.status != 200 {
		t.Fatalf("the console's key: %d %s", r.status, r.body)
	}
	row := g.rows(acct)[0]
	usage := c.get("/console/usage")
	if figure(usage.body, "requests") != "1" || figure(usage.body, "spent") != row.Charged.Rounded()+" USD" || exactFigure(usage.body, "spent") != row.Charged.String() ||
		!strings.Contains(usage.body, `<rect class="s-requests"`) || !strings.Contains(usage.body, `<td><span class="amount" title="`+row.Charged.String()+`">`+row.Charged.Rounded()+`</span></td>`) {
		t.Fatalf("usage page:\n%s", usage.body)
	}
	csvResp := c.get("/console/usage.csv")
	if csvResp.status != 200 || !strings.HasPrefix(csvResp.header.Get("Content-Type"), "text/csv") ||
		!strings.Contains(csvResp.header.Get("Content-Disposition"), "attachment") {
		t.Fatalf("csv: %d %v", csvResp.status, csvResp.header)
	}
	records, err := csv.NewReader(strings.NewReader(csvResp.body)).ReadAll()
	if err != nil || len(records) != 2 {
		t.Fatalf("csv rows: %v %q", err, csvResp.body)
	}
	want := []string{row.CreatedAt.UTC().Format("2006-01-02"), ks[0].ID, ks[0].Prefix, "'=cmd|' /C calc'!A0", testModel, "1",
		fmt.Sprint(row.Tokens.Input), fmt.Sprint(row.Tokens.Output), "0", "0", row.Charged.String(), "USD", "0.000000000"}
	if strings.Join(records[1], ",") != strings.Join(want, ",") {
		t.Fatalf("csv row:\n got %q\nwant %q", records[1], want)
	}
	// a range without the request, and another account's key: nothing
	if r := c.get("/console/usage?from=2020-01-01&to=2020-01-31"); figure(r.body, "requests") != "0" || !strings.Contains(r.body, "No requests in this range") {
		t.Fatalf("empty range: %s", figure(r.body, "requests"))
	}
	otherAcct, _ := g.account("1.00")
	otherKeys, _ := g.store.ListKeys(context.Background(), otherAcct)
	if r := c.get("/console/usage?key=" + otherKeys[0].ID); r.status != 200 || !strings.Contains(r.body, "not one of yours") || figure(r.body, "requests") != "1" {
		t.Fatalf("another account's key as filter: %d", r.status)
	}
	if r := c.get("/console/usage?from=2020-01-31&to=2020-01-01"); r.status != 200 || !strings.Contains(r.body, `value="2020-01-01"`) {
		t.Fatalf("a range given backwards: %d", r.status)
	}

	// delete: a confirmation first, then the key is refused at once
	confirm := c.get("/console/keys/delete?id=" + ks[0].ID)
	if confirm.status != 200 || !strings.Contains(confirm.body, ks[0].Prefix) {
		t.Fatalf("confirm: %d", confirm.status)
	}
	if r := c.post("/console/keys/delete", url.Values{"id": {ks[0].ID}}, "/console/keys/delete?id="+ks[0].ID); r.status != http.StatusSeeOther {
		t.Fatalf("delete: %d %s", r.status, r.body)
	}
	if r := g.generate("openai", testModel, "after delete", false, key); r.status != http.StatusUnauthorized {
		t.Fatalf("deleted key: %d", r.status)
	}
	if r := c.get("/console/keys?deleted=1"); strings.Contains(r.body, ks[0].Prefix) || !strings.Contains(r.body, "Key deleted") {
		t.Fatalf("the deleted key is still listed:\n%s", r.body)
	}

	// suspended: no new keys
	if err := g.store.SetAccountState(context.Background(), acct, ledger.StateSuspended); err != nil {
		t.Fatal(err)
	}
	if r := c.get("/console/"); !strings.Contains(r.body, "suspended") {
		t.Fatal("the suspension is not shown")
	}
	if r := c.post("/console/keys", url.Values{"label": {"x"}}); r.status != http.StatusBadRequest {
		t.Fatalf("suspended account created a key: %d", r.status)
	}

	logs := readLogs(t, g.logPath, g.logPath+".access")
	if strings.Contains(logs, key) || strings.Contains(logs, testPassword) {
		t.Fatal("a key or a password is in the logs")
	}
}

// TestConsoleTopUp: the console starts a Stripe Checkout for the amount and
// sends the customer there; the signed notification credits it; without a
// payment provider the console says the operator credits accounts.
func TestConsoleTopUp(t *testing.T) {
	resetConsoleLimits(t)
	var mu sync.Mutex
	var form url.Values
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/checkout/sessions" || r.Header.Get("Authorization") != "Bearer sk_test_console" {
			http.Error(w, `{"error":{"message":"unexpected"}}`, 400)
			return
		}
		_ = r.ParseForm()
		mu.Lock()
		form = r.PostForm
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"id":"cs_test_console","object":"checkout.session","url":"https://checkout.stripe.com/c/pay/cs_test_console"}`)
	}))
	defer api.Close()
	t.Setenv("MG_TEST_WEBHOOK_SECRET", testWebhookSecret)
	t.Setenv("MG_TEST_STRIPE_API", api.URL)
	cfg := strings.Replace(stripeConfig, "secret_key sk_test_unused", "secret_key sk_test_console\n\t\t\tapi_base {env.MG_TEST_STRIPE_API}", 1)
	g := startGateway(t, gatewayOptions{site: consoleSite, extra: cfg})
	c := newConsoleClient(t)
	acct := c.signUp(g, "payer@example.com")

	page := c.get("/console/topup")
	if !strings.Contains(page.header.Get("Content-Security-Policy"), "form-action 'self' https://checkout.stripe.com") ||
		!strings.Contains(page.body, `name="amount"`) {
		t.Fatalf("top-up page: %v\n%s", page.header, page.body)
	}
	for _, amount := range []string{"4.99", "abc", "-10", "12.345"} {
		if r := c.post("/console/topup", url.Values{"amount": {amount}}); r.status != http.StatusBadRequest || !strings.Contains(r.body, "at least 5.00 USD") {
			t.Errorf("amount %s: %d", amount, r.status)
		}
	}
	r := c.post("/console/topup", url.Values{"amount": {"12.34"}})
	if r.status != http.StatusSeeOther || r.header.Get("Location") != "https://checkout.stripe.com/c/pay/cs_test_console" {
		t.Fatalf("top-up: %d %v %s", r.status, r.header, r.body)
	}
	mu.Lock()
	for k, v := range map[string]string{
		"line_items[0][price_data][unit_amount]": "1234", "client_reference_id": acct, "customer_email": "payer@example.com",
		"success_url": gatewayAddr + "/console/topup?paid=1", "cancel_url": gatewayAddr + "/console/topup?cancelled=1",
	} {
		if form.Get(k) != v {
			t.Errorf("checkout %s = %q, want %q", k, form.Get(k), v)
		}
	}
	mu.Unlock()
	if r := c.get("/console/topup?paid=1"); !strings.Contains(r.body, "credited as soon as") {
		t.Fatal("the return page says nothing")
	}
	// Stripe reports the session with the metadata the gateway gave it
	mu.Lock()
	meta := map[string]string{"modelgate_account": form.Get("metadata[modelgate_account]"), "modelgate_signature": form.Get("metadata[modelgate_signature]")}
	mu.Unlock()
	paid := stripetest.CheckoutEventWithMetadata("evt_c", "checkout.session.completed", "cs_test_console", acct, "usd", "paid", 1234, meta)
	if r := deliver(t, paid, stripetest.Signed(paid, testWebhookSecret, time.Now())); r.status != 200 || !strings.Contains(r.body, `"credited"`) {
		t.Fatalf("webhook: %d %s", r.status, r.body)
	}
	if got := figure(c.get("/console/").body, "balance"); got != "12.340000 USD" {
		t.Fatalf("balance after paying: %q", got)
	}

	// no provider: the operator tops up
	g = startGateway(t, gatewayOptions{site: consoleSite})
	c = newConsoleClient(t)
	c.signUp(g, "payer@example.com")
	if r := c.get("/console/topup"); !strings.Contains(r.body, "Top-ups are done by the operator") || strings.Contains(r.body, `name="amount"`) {
		t.Fatalf("top-up without a provider:\n%s", r.body)
	}
	if r := c.post("/console/topup", url.Values{"amount": {"10"}}, "/console/"); r.status != http.StatusNotFound {
		t.Fatalf("top-up post without a provider: %d", r.status)
	}
}

// TestConsoleSignUpLimit: one address creates (or tries emails for) at
// most guard.SignUps accounts an hour.
func TestConsoleSignUpLimit(t *testing.T) {
	resetConsoleLimits(t)
	g := startGateway(t, gatewayOptions{site: consoleSite})
	c := newConsoleClient(t)
	c.signUp(g, "taken@example.com")
	for i := 1; i < guard.SignUps; i++ {
		email := fmt.Sprintf("user%d@example.com", i)
		if i%2 == 0 {
			email = "taken@example.com" // probing for accounts counts too
		}
		c.cookies = map[string]string{}
		if r := c.post("/console/signup", url.Values{"email": {email}, "password": {testPassword}}); r.status != http.StatusSeeOther && r.status != http.StatusBadRequest {
			t.Fatalf("sign-up %d: %d", i, r.status)
		}
	}
	c.cookies = map[string]string{}
	r := c.post("/console/signup", url.Values{"email": {"one-more@example.com"}, "password": {testPassword}})
	if r.status != http.StatusTooManyRequests || r.header.Get("Retry-After") == "" {
		t.Fatalf("sign-up past the limit: %d", r.status)
	}
	if _, _, err := g.store.Login(context.Background(), "one-more@example.com"); err == nil {
		t.Fatal("the refused sign-up created an account")
	}
}

// TestConsoleSignUpOff: with signup off, only the operator makes
// accounts; the console still signs them in.
func TestConsoleSignUpOff(t *testing.T) {
	resetConsoleLimits(t)
	startGateway(t, gatewayOptions{site: "\tmodelgate_console /console* {\n\t\tsignup off\n\t\ttitle Acme AI console\n\t}\n"})
	c := newConsoleClient(t)
	if r := c.get("/console/signup"); r.status != http.StatusNotFound {
		t.Fatalf("sign-up page: %d", r.status)
	}
	if r := c.get("/console/signin"); strings.Contains(r.body, "/console/signup") || !strings.Contains(r.body, "Acme AI console") {
		t.Fatalf("sign-in page:\n%s", r.body)
	}
	if status := adminCall(t, "POST", "/modelgate/accounts", `{"email":"invited@example.com","password":"`+testPassword+`"}`, nil); status != http.StatusCreated {
		t.Fatalf("admin: %d", status)
	}
	if r := c.signIn("invited@example.com", testPassword); r.status != http.StatusSeeOther {
		t.Fatalf("sign in: %d", r.status)
	}
}

// TestConsoleCaddyfile: the console takes where it lives from its path
// matcher, and its options from its block.
func TestConsoleCaddyfile(t *testing.T) {
	const head = "{\n\tmodelgate {\n\t\tprovider p {\n\t\t\tformat openai\n\t\t\tbase_url http://127.0.0.1:1\n\t\t\tkeys k\n\t\t}\n" +
		"\t\tmodel m {\n\t\t\troute p x\n\t\t\tprice input 1 output 2\n\t\t}\n\t}\n}\n:8080 {\n"
	for _, tc := range []struct{ site, want, err string }{
		{site: "\tmodelgate_console /console*\n", want: `"base_path":"/console"`},
		{site: "\tmodelgate_console /account/* {\n\t\ttitle Acme AI\n\t\tsignup off\n\t\tsession_lifetime 12h\n\t}\n",
			want: `"base_path":"/account","handler":"modelgate_console","session_lifetime":43200000000000,"signup_off":true,"title":"Acme AI"`},
		{site: "\tmodelgate_console\n", want: `{"handler":"modelgate_console"}`},
		{site: "\tmodelgate_console /c* {\n\t\tsignup maybe\n\t}\n", err: "signup: want on or off"},
		{site: "\tmodelgate_console /c* {\n\t\tsession_lifetime 1s\n\t}\n", err: "session_lifetime"},
		{site: "\tmodelgate_console /c* {\n\t\tcolour red\n\t}\n", err: "unrecognized modelgate_console option"},
	} {
		out, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(head+tc.site+"}\n"), nil)
		switch {
		case tc.err != "":
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: error %v, want %q", tc.site, err, tc.err)
			}
		case err != nil:
			t.Errorf("%q: %v", tc.site, err)
		case !strings.Contains(string(out), tc.want):
			t.Errorf("%q: %s\nwant %s", tc.site, out, tc.want)
		}
	}
}

var csvLink = regexp.MustCompile(`<a class="csv" href="([^"]+)"`)

// TestConsoleCSVLinkKeepsTheView: the usage page's "Download CSV" link
// exports the range and the key the page shows, not the defaults (the
// template once escaped its query into one value).
func TestConsoleCSVLinkKeepsTheView(t *testing.T) {
	resetConsoleLimits(t)
	g := startGateway(t, gatewayOptions{site: consoleSite})
	c := newConsoleClient(t)
	acct := c.signUp(g, "csv@example.com")
	if _, err := g.store.Credit(context.Background(), ledger.CreditRequest{AccountID: acct, Amount: 5_000_000_000, Reference: "test:" + acct, Reason: "test"}); err != nil {
		t.Fatal(err)
	}
	for _, label := range []string{"first", "second"} {
		secret, _, err := g.store.CreateKey(context.Background(), acct, label)
		if err != nil {
			t.Fatal(err)
		}
		if r := g.generate("openai", testModel, "hello from "+label, false, secret); r.status != 200 {
			t.Fatalf("%s: %d", label, r.status)
		}
	}
	ks, _ := g.store.ListKeys(context.Background(), acct)
	var second string
	for _, k := range ks {
		if k.Label == "second" {
			second = k.ID
		}
	}
	today := time.Now().UTC().Format("2006-01-02")
	from := time.Now().UTC().AddDate(0, 0, -3).Format("2006-01-02")

	page := c.get("/console/usage?from=" + from + "&to=" + today + "&key=" + second)
	m := csvLink.FindStringSubmatch(page.body)
	if m == nil {
		t.Fatalf("no CSV link:\n%s", page.body)
	}
	href := html.UnescapeString(m[1])
	u, err := url.Parse(href)
	if err != nil || u.Path != "/console/usage.csv" || u.Query().Get("from") != from || u.Query().Get("to") != today || u.Query().Get("key") != second {
		t.Fatalf("CSV link %q (%v): want the page's range %s..%s and key %s", href, err, from, today, second)
	}
	r := c.get(href)
	if r.status != 200 || !strings.Contains(r.header.Get("Content-Disposition"), "usage-"+from+"-to-"+today+".csv") {
		t.Fatalf("the export: %d %v", r.status, r.header)
	}
	records, err := csv.NewReader(strings.NewReader(r.body)).ReadAll()
	if err != nil || len(records) != 2 || records[1][1] != second {
		t.Fatalf("the export of the second key alone: %v %q", err, records)
	}
}
