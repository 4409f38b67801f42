package integration

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/modelgate/modelgate/internal/guard"
	"github.com/modelgate/modelgate/ledger"
	"github.com/modelgate/modelgate/mailer/smtptest"
)

// Console self-service: verification of a sign-up's email,
// forgotten passwords, password changes; with mail through a real SMTP
// server on loopback, and without mail through the CLI's reset link.

// mailPublicURL is the public_url of the gateways that mail: a host that
// is not the one the tests connect to, so that a link built on the
// request's Host would show.
const mailPublicURL = "https://console.example.test"

// startMailingGateway starts a gateway with the console, public_url and
// an smtp option pointing at a real SMTP server on loopback.
func startMailingGateway(t *testing.T) (*testGateway, *smtptest.Server) {
	t.Helper()
	return startMailingGatewayAt(t, mailPublicURL)
}

// startMailingGatewayAt is startMailingGateway with public_url publicURL.
func startMailingGatewayAt(t *testing.T, publicURL string) (*testGateway, *smtptest.Server) {
	t.Helper()
	srv := smtptest.Start(t, smtptest.Options{})
	g := startGateway(t, gatewayOptions{site: consoleSite, globalLog: true, extra: fmt.Sprintf(`		public_url %s
		smtp {
			host %s
			port %d
			from "Acme AI <no-reply@example.com>"
			tls none
			timeout 5s
		}
`, publicURL, srv.Host(), srv.Port())})
	return g, srv
}

// linkIn finds the console link to page in a mail's text, checks that it
// is built on public_url, and returns it as a path on the test gateway,
// with its token.
func linkIn(t *testing.T, m smtptest.Mail, page string) (path, token string) {
	t.Helper()
	return linkOn(t, m, mailPublicURL, page)
}

// linkOn is linkIn for a gateway whose public_url is publicURL.
func linkOn(t *testing.T, m smtptest.Mail, publicURL, page string) (path, token string) {
	t.Helper()
	re := regexp.MustCompile(regexp.QuoteMeta(publicURL+"/console/"+page+"?token=") + `([A-Za-z0-9_-]{43})\b`)
	found := re.FindStringSubmatch(m.Text())
	if found == nil {
		t.Fatalf("no %s link on %s in the mail %q:\n%s", page, publicURL, m.Subject(), m.Text())
	}
	return "/console/" + page + "?token=" + found[1], found[1]
}

// mailsTo returns the mails that arrived for addr.
func mailsTo(srv *smtptest.Server, addr string) []smtptest.Mail {
	var out []smtptest.Mail
	for _, m := range srv.Mails() {
		if len(m.To) == 1 && m.To[0] == addr {
			out = append(out, m)
		}
	}
	return out
}

// signedIn reports whether the client's session still opens the console.
func (c *consoleClient) signedIn() bool {
	c.t.Helper()
	r := c.get("/console/")
	return r.status == http.StatusOK
}

// noTokensLogged fails the test if a token or password is in the logs or
// the ledger file.
func (g *testGateway) noTokensLogged(secrets ...string) {
	g.t.Helper()
	logs := readLogs(g.t, g.logPath, g.logPath+".access")
	var db []byte
	for _, suffix := range []string{"", "-wal"} {
		b, _ := os.ReadFile(g.dbPath + suffix)
		db = append(db, b...)
	}
	for _, s := range secrets {
		if strings.Contains(logs, s) {
			g.t.Errorf("the logs hold a secret (%.6s…)", s)
		}
		if bytes.Contains(db, []byte(s)) {
			g.t.Errorf("the ledger file holds a secret (%.6s…)", s)
		}
	}
}

// TestConsoleVerifyEmail: with smtp configured, a sign-up's email awaits
// the link mailed to it; every page says so until the link is followed,
// which works once, in any browser.
func TestConsoleVerifyEmail(t *testing.T) {
	resetConsoleLimits(t)
	g, srv := startMailingGateway(t)
	c := newConsoleClient(t)
	if r := c.get("/console/signup"); r.status != 200 || !strings.Contains(r.body, "We will mail you a link to verify your email.") {
		t.Fatalf("the sign-up form does not say a mail follows: %d\n%s", r.status, r.body)
	}
	acct := c.signUp(g, "vera@example.com")
	m := srv.Wait(t, 1, 10*time.Second)[0]
	if m.From != "no-reply@example.com" || m.Subject() != "Verify your email for console.example.test" {
		t.Fatalf("mail from %q: %q", m.From, m.Subject())
	}
	path, token := linkIn(t, m, "verify")
	home := c.get("/console/")
	if home.status != 200 || !strings.Contains(home.body, `data-notice="unverified"`) || !strings.Contains(home.body, "not verified") {
		t.Fatalf("home before verifying: %d\n%s", home.status, home.body)
	}
	if _, err := g.store.LoginToken(context.Background(), [32]byte{}, ledger.TokenVerify); err == nil {
		t.Fatal("a zero hash is a token")
	}

	// the link again, on request: a second mail with another token
	if r := c.post("/console/verify/resend", url.Values{}, "/console/"); r.status != 200 || !strings.Contains(r.body, "on its way to vera@example.com") {
		t.Fatalf("resend: %d\n%s", r.status, r.body)
	}
	second := srv.Wait(t, 2, 10*time.Second)[1]
	_, token2 := linkIn(t, second, "verify")
	if token2 == token {
		t.Fatal("the resent link has the same token")
	}

	// followed in another browser, without a session
	other := newConsoleClient(t)
	if r := other.get(path); r.status != 200 || !strings.Contains(r.body, "Your email address is verified") {
		t.Fatalf("verify: %d\n%s", r.status, r.body)
	}
	if home := c.get("/console/"); strings.Contains(home.body, `data-notice="unverified"`) {
		t.Fatal("the notice stays after verifying")
	}
	// used once; the other link of the account ended with it; a made-up
	// or malformed token is the same answer
	for _, p := range []string{path, "/console/verify?token=" + token2, "/console/verify?token=" + strings.Repeat("A", 43),
		"/console/verify?token=short", "/console/verify?token=%00%01", "/console/verify"} {
		if r := other.get(p); r.status != http.StatusNotFound || !strings.Contains(r.body, "expired or was already used") {
			t.Fatalf("%s: %d\n%s", p, r.status, r.body)
		}
	}
	if r := c.post("/console/verify/resend", url.Values{}, "/console/"); r.status != http.StatusSeeOther {
		t.Fatalf("resend once verified: %d", r.status)
	}
	time.Sleep(200 * time.Millisecond)
	if n := len(srv.Mails()); n != 2 {
		t.Fatalf("%d mails, want 2", n)
	}
	_ = acct
	g.noTokensLogged(token, token2, testPassword)
	// the links' requests are logged all the same, the token redacted
	if logs := readLogs(t, g.logPath, g.logPath+".access"); !strings.Contains(logs, `/console/verify?token=REDACTED`) {
		t.Errorf("no access log line of the verification link with its token redacted")
	}
}

// TestConsoleForgotPassword: the forgotten-password form answers the same
// for any email, mails a link built on public_url (never the request's
// Host) only to an email with a login, and is limited per address and per
// email; the link shows a form, sets the password once, ends every session
// and signs in.
func TestConsoleForgotPassword(t *testing.T) {
	resetConsoleLimits(t)
	g, srv := startMailingGateway(t)
	owner := newConsoleClient(t)
	acct := owner.signUp(g, "rosa@example.com")
	srv.Wait(t, 1, 10*time.Second) // the verification mail

	// the sign-in page links to the form
	v := newConsoleClient(t)
	if r := v.get("/console/signin"); !strings.Contains(r.body, `href="/console/forgot"`) {
		t.Fatalf("sign-in page without the forgotten-password link:\n%s", r.body)
	}
	ask := func(email string, headers ...string) response {
		t.Helper()
		r := v.get("/console/forgot")
		form := url.Values{"email": {email}, "csrf": {csrfOf(t, r.body)}}
		return v.do("POST", "/console/forgot", form, headers...)
	}
	known := ask("Rosa@Example.com")
	unknown := ask("nobody@example.com")
	if known.status != 200 || unknown.status != 200 {
		t.Fatalf("forgot: %d, %d", known.status, unknown.status)
	}
	strip := func(body, email string) string {
		return csrfField.ReplaceAllString(strings.ReplaceAll(body, email, "E"), "")
	}
	if strip(known.body, "rosa@example.com") != strip(unknown.body, "nobody@example.com") {
		t.Fatalf("the answers differ:\n%s\n---\n%s", known.body, unknown.body)
	}
	if !strings.Contains(known.body, "If an account uses rosa@example.com") {
		t.Fatalf("no notice:\n%s", known.body)
	}
	reset := srv.Wait(t, 2, 10*time.Second)[1]
	if reset.To[0] != "rosa@example.com" || reset.Subject() != "Set a new password for console.example.test" {
		t.Fatalf("reset mail to %q: %q", reset.To, reset.Subject())
	}
	path, token := linkIn(t, reset, "reset")
	time.Sleep(200 * time.Millisecond)
	if n := len(srv.Mails()); n != 2 {
		t.Fatalf("%d mails: the unknown email got one?", n)
	}
	// bad input: a clear answer, no 5xx
	for _, bad := range []string{"", "not-an-email", strings.Repeat("a", 300) + "@example.com"} {
		if r := ask(bad); r.status != http.StatusBadRequest || !strings.Contains(r.body, "valid email") {
			t.Fatalf("forgot %q: %d", bad, r.status)
		}
	}
	if r := v.do("POST", "/console/forgot", url.Values{"email": {"rosa@example.com"}, "csrf": {"forged"}}); r.status != http.StatusForbidden {
		t.Fatalf("a forged form token: %d", r.status)
	}

	// the link shows a form for the account; a second browser signed in
	// stays signed in until the password is set
	page := v.get(path)
	if page.status != 200 || !strings.Contains(page.body, "rosa@example.com") || !strings.Contains(page.body, `name="token" value="`+token+`"`) {
		t.Fatalf("reset page: %d\n%s", page.status, page.body)
	}
	if page.header.Get("Referrer-Policy") != "same-origin" {
		t.Fatalf("Referrer-Policy %q", page.header.Get("Referrer-Policy"))
	}
	post := func(password, repeat string) response {
		t.Helper()
		form := url.Values{"token": {token}, "password": {password}, "repeat": {repeat}, "csrf": {csrfOf(t, v.get(path).body)}}
		return v.do("POST", "/console/reset", form)
	}
	if r := post("a new long password", "a new long passwort"); r.status != http.StatusBadRequest || !strings.Contains(r.body, "differ") {
		t.Fatalf("different passwords: %d", r.status)
	}
	if r := post("short", "short"); r.status != http.StatusBadRequest || !strings.Contains(r.body, "10 to 1024") {
		t.Fatalf("a short password: %d", r.status)
	}
	if !owner.signedIn() {
		t.Fatal("a failed reset ended a session")
	}
	const newPassword = "a new long password"
	r := post(newPassword, newPassword)
	if r.status != http.StatusSeeOther || r.header.Get("Location") != "/console/?password=reset" {
		t.Fatalf("reset: %d %v\n%s", r.status, r.header, r.body)
	}
	if home := v.get(r.header.Get("Location")); home.status != 200 || !strings.Contains(home.body, "Your new password is set") {
		t.Fatalf("signed in after the reset: %d\n%s", home.status, home.body)
	}
	if owner.signedIn() {
		t.Fatal("the reset left the other session signed in")
	}
	if r := owner.signIn("rosa@example.com", testPassword); r.status != http.StatusUnauthorized {
		t.Fatalf("the old password: %d", r.status)
	}
	if r := owner.signIn("rosa@example.com", newPassword); r.status != http.StatusSeeOther {
		t.Fatalf("the new password: %d", r.status)
	}
	// following the link proved the email
	if home := owner.get("/console/"); strings.Contains(home.body, `data-notice="unverified"`) {
		t.Fatal("a reset link did not verify the email")
	}
	// once only
	if r := v.get(path); r.status != http.StatusNotFound || !strings.Contains(r.body, "Forgot your password?") {
		t.Fatalf("the used link: %d\n%s", r.status, r.body)
	}
	again := url.Values{"token": {token}, "password": {"yet another password"}, "repeat": {"yet another password"},
		"csrf": {csrfOf(t, v.get("/console/forgot").body)}}
	if r := v.do("POST", "/console/reset", again); r.status != http.StatusNotFound {
		t.Fatalf("the used token posted again: %d", r.status)
	}

	// limits: three mails to one email an hour, the same answer past it;
	// ten requests from one address, then 429
	for i := 0; i < guard.MailRequests-2; i++ { // two were asked above
		if r := ask("rosa@example.com"); r.status != 200 || strip(r.body, "rosa@example.com") != strip(unknown.body, "nobody@example.com") {
			t.Fatalf("request %d: %d", i, r.status)
		}
	}
	srv.Wait(t, 1+guard.MailsPerEmail, 10*time.Second)
	time.Sleep(200 * time.Millisecond) // time for a mail too many to show
	if n := len(mailsTo(srv, "rosa@example.com")); n != 1+guard.MailsPerEmail {
		t.Fatalf("%d mails to one email, want the verification and %d resets", n, guard.MailsPerEmail)
	}
	if r := ask("other@example.com"); r.status != http.StatusTooManyRequests || r.header.Get("Retry-After") == "" {
		t.Fatalf("past the address's limit: %d %v", r.status, r.header)
	}
	var tokens []string
	for _, m := range mailsTo(srv, "rosa@example.com") {
		if strings.Contains(m.Text(), "/reset?token=") {
			_, tok := linkIn(t, m, "reset")
			tokens = append(tokens, tok)
		}
	}
	g.noTokensLogged(append(tokens, newPassword, testPassword)...)
	_ = acct
}

// TestConsoleChangePassword: a signed-in account changes its password,
// given the current one; the other sessions end, this one stays; a wrong
// current password counts as a failed sign-in.
func TestConsoleChangePassword(t *testing.T) {
	resetConsoleLimits(t)
	g := startGateway(t, gatewayOptions{site: consoleSite, globalLog: true})
	c := newConsoleClient(t)
	c.signUp(g, "chang@example.com")
	other := newConsoleClient(t)
	if r := other.signIn("chang@example.com", testPassword); r.status != http.StatusSeeOther {
		t.Fatalf("second sign-in: %d", r.status)
	}
	page := c.get("/console/password")
	if page.status != 200 || !strings.Contains(page.body, `name="current"`) || !strings.Contains(page.body, `aria-current="page">Password`) {
		t.Fatalf("password page: %d\n%s", page.status, page.body)
	}
	// without email (no smtp): no verification notice
	if strings.Contains(page.body, `data-notice="unverified"`) {
		t.Fatal("a notice to verify without mail")
	}
	change := func(current, password, repeat string) response {
		t.Helper()
		return c.post("/console/password", url.Values{"current": {current}, "password": {password}, "repeat": {repeat}})
	}
	const newPassword = "my changed password"
	if r := change("wrong password!", newPassword, newPassword); r.status != http.StatusUnauthorized || !strings.Contains(r.body, "current password is wrong") {
		t.Fatalf("a wrong current password: %d", r.status)
	}
	if r := change(testPassword, newPassword, "something else entirely"); r.status != http.StatusBadRequest {
		t.Fatalf("different new passwords: %d", r.status)
	}
	if r := change(testPassword, "short", "short"); r.status != http.StatusBadRequest {
		t.Fatalf("a short new password: %d", r.status)
	}
	if !other.signedIn() {
		t.Fatal("a failed change ended a session")
	}
	// a cross-site post or one without the session's form token: refused
	if r := c.do("POST", "/console/password", url.Values{"current": {testPassword}, "password": {newPassword}, "repeat": {newPassword}, "csrf": {"x"}}); r.status != http.StatusForbidden {
		t.Fatalf("no form token: %d", r.status)
	}
	r := change(testPassword, newPassword, newPassword)
	if r.status != http.StatusSeeOther || r.header.Get("Location") != "/console/password?changed=1" {
		t.Fatalf("change: %d %v\n%s", r.status, r.header, r.body)
	}
	if p := c.get("/console/password?changed=1"); p.status != 200 || !strings.Contains(p.body, "Your password is changed") {
		t.Fatalf("after the change: %d\n%s", p.status, p.body)
	}
	if other.signedIn() {
		t.Fatal("the other session survived the change")
	}
	if r := other.signIn("chang@example.com", testPassword); r.status != http.StatusUnauthorized {
		t.Fatalf("the old password: %d", r.status)
	}
	if r := other.signIn("chang@example.com", newPassword); r.status != http.StatusSeeOther {
		t.Fatalf("the new password: %d", r.status)
	}
	// wrong current passwords are limited like sign-ins
	limited := false
	for i := 0; i < guard.SignInFailures+1; i++ {
		if r := change("wrong password!", "whatever else 123", "whatever else 123"); r.status == http.StatusTooManyRequests {
			limited = true
			break
		}
	}
	if !limited {
		t.Fatal("wrong current passwords were not limited")
	}
	g.noTokensLogged(newPassword, testPassword)
}

// TestConsoleResetLinkFromCLI: without smtp, the forgotten-password page
// sends visitors to the operator, whose `caddy modelgate account
// reset-link`, run on the running gateway's configuration, prints a link
// under public_url that sets the password once in the console.
func TestConsoleResetLinkFromCLI(t *testing.T) {
	resetConsoleLimits(t)
	g := startGateway(t, gatewayOptions{site: consoleSite, globalLog: true, extra: "\t\tpublic_url " + mailPublicURL + "\n"})
	owner := newConsoleClient(t)
	acct := owner.signUp(g, "olga@example.com")
	if home := owner.get("/console/"); strings.Contains(home.body, `data-notice="unverified"`) {
		t.Fatal("a notice to verify without mail")
	}
	v := newConsoleClient(t)
	if r := v.get("/console/signup"); r.status != 200 || strings.Contains(r.body, "mail you a link") {
		t.Fatalf("the sign-up form without smtp promises a mail: %d", r.status)
	}
	f := v.get("/console/forgot")
	if f.status != 200 || !strings.Contains(f.body, "sends no mail") || strings.Contains(f.body, `name="email"`) {
		t.Fatalf("forgot without smtp: %d\n%s", f.status, f.body)
	}
	if r := v.do("POST", "/console/forgot", url.Values{"email": {"olga@example.com"}, "csrf": {"x"}}); r.status != 200 || !strings.Contains(r.body, "sends no mail") {
		t.Fatalf("forgot posted without smtp: %d", r.status)
	}

	cfg := filepath.Join(t.TempDir(), "Caddyfile")
	if err := os.WriteFile(cfg, []byte(g.cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := runCLI(t, "account", "reset-link", "--config", cfg, "olga@example.com")
	if err != nil {
		t.Fatal(err)
	}
	link := regexp.MustCompile(`^` + regexp.QuoteMeta(mailPublicURL+"/console/reset?token=") + `([A-Za-z0-9_-]{43})$`).FindStringSubmatch(out)
	if link == nil {
		t.Fatalf("reset-link printed %q", out)
	}
	token := link[1]
	path := "/console/reset?token=" + token
	page := v.get(path)
	if page.status != 200 || !strings.Contains(page.body, "olga@example.com") {
		t.Fatalf("reset page: %d\n%s", page.status, page.body)
	}
	const newPassword = "from the operator's link"
	form := url.Values{"token": {token}, "password": {newPassword}, "repeat": {newPassword}, "csrf": {csrfOf(t, page.body)}}
	if r := v.do("POST", "/console/reset", form); r.status != http.StatusSeeOther {
		t.Fatalf("reset: %d\n%s", r.status, r.body)
	}
	if !v.signedIn() || owner.signedIn() {
		t.Fatal("after the reset: want the new session in and the old one out")
	}
	if r := v.get(path); r.status != http.StatusNotFound || !strings.Contains(r.body, "Ask the operator") {
		t.Fatalf("the used link: %d\n%s", r.status, r.body)
	}
	id, _, err := g.store.Login(context.Background(), "olga@example.com")
	if err != nil || id != acct {
		t.Fatalf("login: %q %v", id, err)
	}
	g.noTokensLogged(token, newPassword, testPassword)
}

// TestConsoleMailDown: with the SMTP server down, sign-up still opens the
// account (its email awaiting verification) and the forgotten-password
// form answers as ever; the failure is logged, without the token.
func TestConsoleMailDown(t *testing.T) {
	resetConsoleLimits(t)
	g, srv := startMailingGateway(t)
	srv.Stop()
	c := newConsoleClient(t)
	c.signUp(g, "down@example.com")
	if home := c.get("/console/"); home.status != 200 || !strings.Contains(home.body, `data-notice="unverified"`) {
		t.Fatalf("home: %d", home.status)
	}
	v := newConsoleClient(t)
	f := v.get("/console/forgot")
	if r := v.do("POST", "/console/forgot", url.Values{"email": {"down@example.com"}, "csrf": {csrfOf(t, f.body)}}); r.status != 200 {
		t.Fatalf("forgot: %d", r.status)
	}
	deadline := time.Now().Add(10 * time.Second)
	for strings.Count(readLogs(t, g.logPath), `"msg":"mail not sent"`) < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("the failed mails are not logged:\n%s", readLogs(t, g.logPath))
		}
		time.Sleep(50 * time.Millisecond)
	}
	if strings.Contains(readLogs(t, g.logPath), "token=") {
		t.Fatal("a link is in the log")
	}
}
