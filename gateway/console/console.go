package console

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"io"
	"net/http"
	"net/mail"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	"github.com/modelgate/modelgate/accounts"
	"github.com/modelgate/modelgate/gateway"
	"github.com/modelgate/modelgate/internal/guard"
	"github.com/modelgate/modelgate/ledger"
	"github.com/modelgate/modelgate/passwords"
	"github.com/modelgate/modelgate/payments"
	"github.com/modelgate/modelgate/web"
)

func init() {
	caddy.RegisterModule(ConsoleHandler{})
	httpcaddyfile.RegisterDirective("modelgate_console", parseConsoleDirective)
	httpcaddyfile.RegisterDirectiveOrder("modelgate_console", httpcaddyfile.Before, "respond")
}

// Limits and lifetimes of the console.
const (
	consoleMaxForm         = 16 << 10           // any console form
	consoleSessionLifetime = 7 * 24 * time.Hour // default session lifetime
	consoleNewKeyTTL       = time.Minute        // how long the new key's sealed cookie lives
	consoleMaxLabel        = 64                 // characters of a key's label
	consoleMaxEmail        = 254
)

// Cookies of the console. The session cookie holds a random token whose
// SHA-256 the ledger keeps; the form cookie is the double-submit token of
// the forms shown before sign-in; the new-key cookie carries a just-created
// key, and the new-secret cookie a just-made webhook signing secret,
// sealed with the session's secrets (sealNewKey), across the redirect to
// the page that shows it once.
const (
	sessionCookie    = "mg_console"
	formCookie       = "mg_console_form"
	newKeyCookie     = "mg_console_newkey"
	newSigningCookie = "mg_console_signing"
)

// ConsoleHandler serves the customer console (docs/operations.md): sign-up, sign-in
// and sign-out; the balance; API keys, created with the full key shown
// once, listed, deleted; usage by day, key and model with charts and a
// CSV export; the money history (Billing) with a CSV download;
// top-ups through the payment provider; alerts and automatic top-up
// (console_alerts.go); password changes, reset links and
// email verification (console_self.go). Pages are rendered on
// the server and work without JavaScript; every form carries a CSRF token
// and cross-origin form posts are refused.
type ConsoleHandler struct {
	// BasePath is where the console lives ("/console"); the Caddyfile
	// takes it from the directive's path matcher.
	BasePath string `json:"base_path,omitempty"`
	// Title names the console in its pages. Default: "modelgate console".
	// Mails name the service by it too, or by public_url's host when it is
	// the default.
	Title string `json:"title,omitempty"`
	// SignUpOff stops visitors from creating accounts; accounts then come
	// from the operator (CLI or admin API, with a password).
	SignUpOff bool `json:"signup_off,omitempty"`
	// SessionLifetime is how long a sign-in lasts. Default: 7 days.
	SessionLifetime caddy.Duration `json:"session_lifetime,omitempty"`

	app        *gateway.App
	logger     *zap.Logger
	accessLog  *zap.Logger // for the lines of one-time links (ServeHTTP)
	cop        *http.CrossOriginProtection
	cookiePath string
	guard      *guard.Guard // sign-in and sign-up limits, shared by every config
}

// CaddyModule returns the Caddy module information.
func (ConsoleHandler) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "http.handlers.modelgate_console",
		New: func() caddy.Module { return new(ConsoleHandler) },
	}
}

// decoyHash is verified against when an email has no login, so that a
// wrong email costs as long as a wrong password.
var decoyHash = sync.OnceValue(func() string {
	h, err := passwords.Hash(rand.Text())
	if err != nil {
		panic(err)
	}
	return h
})

// Provision finds the modelgate app.
func (h *ConsoleHandler) Provision(ctx caddy.Context) error {
	h.logger = ctx.Logger()
	h.accessLog = gateway.AccessLogger(ctx)
	app, err := gateway.AppFor(ctx, "modelgate_console")
	if err != nil {
		return err
	}
	h.app = app
	h.BasePath = strings.TrimRight(h.BasePath, "/")
	if h.BasePath != "" && !strings.HasPrefix(h.BasePath, "/") {
		return errors.New("modelgate_console: base_path must start with /")
	}
	if h.Title == "" {
		h.Title = defaultConsoleTitle
	}
	if h.SessionLifetime <= 0 {
		h.SessionLifetime = caddy.Duration(consoleSessionLifetime)
	}
	h.cookiePath = h.BasePath + "/"
	h.cop = http.NewCrossOriginProtection()
	g, err := guard.Load()
	if err != nil {
		return err
	}
	h.guard = g
	return nil
}

// Cleanup gives back this config's use of the limits.
func (h *ConsoleHandler) Cleanup() error {
	if h.guard == nil {
		return nil
	}
	h.guard = nil
	return guard.Release()
}

// consoleRequest is one request to the console: who asks (sess is nil
// before sign-in) and the frame of the page it gets.
type consoleRequest struct {
	w     http.ResponseWriter
	r     *http.Request
	sess  *consoleSession
	frame web.ConsoleFrame
	csp   string
}

// consoleSession is a signed-in visitor.
type consoleSession struct {
	token      string // the cookie's value
	hash       [32]byte
	csrf       string
	account    ledger.Account
	emailState ledger.EmailState
}

// ServeHTTP routes a console request.
func (h *ConsoleHandler) ServeHTTP(w http.ResponseWriter, r *http.Request, _ caddyhttp.Handler) error {
	hdr := w.Header()
	hdr.Set("Cache-Control", "no-store")
	hdr.Set("X-Content-Type-Options", "nosniff")
	hdr.Set("Referrer-Policy", "same-origin")
	hdr.Set("X-Frame-Options", "DENY")

	rel, ok := strings.CutPrefix(r.URL.Path, h.BasePath)
	if !ok || (rel != "" && rel[0] != '/') {
		// the matcher let through a path outside the console ("/consoles")
		return caddyhttp.Error(http.StatusNotFound, nil)
	}
	if rel == "" {
		http.Redirect(w, r, h.cookiePath, http.StatusMovedPermanently)
		return nil
	}
	if !h.app.Serving() {
		gateway.WriteNotServing(w)
		return nil
	}
	// a reset or verification link's token is a credential: its access
	// log line says token=REDACTED, whatever the operator's log filters
	if line := gateway.ScrubQueryParam(w, r, h.accessLog, "token"); line != nil {
		defer line()
	}
	method := r.Method
	if method == http.MethodHead {
		method = http.MethodGet
	}
	if method != http.MethodGet && method != http.MethodPost {
		hdr.Set("Allow", "GET, HEAD, POST")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return nil
	}
	c := &consoleRequest{w: w, r: r, csp: web.ContentSecurityPolicy(),
		frame: web.ConsoleFrame{Title: h.Title, Base: h.BasePath, Currency: h.app.Currency}}
	if (rel == "/signup" || rel == "/topup") && h.app.BlockedRegion(r) {
		// block_countries covers opening an account and paying, as it
		// covers the API
		h.app.Metrics().Refused("region")
		h.message(c, http.StatusForbidden, "Not available", gateway.RegionBlocked().Message)
		return nil
	}
	if method == http.MethodPost {
		// a form posted from another site is refused before anything else
		if err := h.cop.Check(r); err != nil {
			h.message(c, http.StatusForbidden, "Refused", "This form was sent from another site, so it was refused.")
			return nil
		}
		r.Body = http.MaxBytesReader(w, r.Body, consoleMaxForm)
		if err := r.ParseForm(); err != nil {
			h.message(c, http.StatusBadRequest, "Bad request", "The form could not be read.")
			return nil
		}
	}

	switch rel {
	case "/signin":
		h.serveSignIn(c, method)
		return nil
	case "/signup":
		h.serveSignUp(c, method)
		return nil
	case "/forgot":
		h.serveForgot(c, method)
		return nil
	case "/reset":
		h.serveReset(c, method)
		return nil
	case "/verify":
		if method != http.MethodGet {
			hdr.Set("Allow", "GET, HEAD")
			h.message(c, http.StatusMethodNotAllowed, "Not allowed", "This page does not take that request.")
			return nil
		}
		h.serveVerify(c)
		return nil
	}

	sess, err := h.session(r)
	if err != nil {
		h.logger.Error("reading a console session", zap.Error(err))
		h.message(c, http.StatusServiceUnavailable, "Unavailable", "The console is unavailable right now; try again.")
		return nil
	}
	if sess == nil {
		http.Redirect(w, r, h.BasePath+"/signin", http.StatusSeeOther)
		return nil
	}
	c.sess = sess
	c.frame.Email, c.frame.CSRF = sess.account.Email, sess.csrf
	c.frame.Unverified = sess.emailState == ledger.EmailPending && h.app.Mailer() != nil
	if method == http.MethodPost && !tokenEqual(r.PostForm.Get("csrf"), sess.csrf) {
		h.message(c, http.StatusForbidden, "Form expired", "This form has expired. Go back, reload the page and try again.")
		return nil
	}

	type route struct {
		rel, method string
	}
	switch (route{rel, method}) {
	case route{"/", http.MethodGet}:
		h.serveOverview(c)
	case route{"/keys", http.MethodGet}:
		h.keysPage(c, http.StatusOK, web.KeyLimitsForm{})
	case route{"/keys", http.MethodPost}:
		h.createKey(c)
	case route{"/keys/edit", http.MethodGet}, route{"/keys/edit", http.MethodPost}:
		h.serveKeyEdit(c, method)
	case route{"/keys/delete", http.MethodGet}:
		h.confirmKeyDelete(c)
	case route{"/keys/delete", http.MethodPost}:
		h.deleteKey(c)
	case route{"/usage", http.MethodGet}:
		h.serveUsage(c)
	case route{"/usage.csv", http.MethodGet}:
		h.serveUsageCSV(c)
	case route{"/billing", http.MethodGet}:
		h.serveBilling(c)
	case route{"/billing/autotopup", http.MethodPost}:
		h.saveAutoTopup(c)
	case route{"/billing/card", http.MethodPost}:
		h.saveCard(c)
	case route{"/alerts", http.MethodGet}:
		h.serveAlerts(c)
	case route{"/alerts", http.MethodPost}:
		h.saveAlerts(c)
	case route{"/alerts/secret", http.MethodPost}:
		h.rotateSecret(c)
	case route{"/billing.csv", http.MethodGet}:
		h.serveBillingCSV(c)
	case route{"/topup", http.MethodGet}:
		h.serveTopUp(c)
	case route{"/topup", http.MethodPost}:
		h.startTopUp(c)
	case route{"/signout", http.MethodPost}:
		h.signOut(c)
	case route{"/password", http.MethodGet}:
		h.servePassword(c)
	case route{"/password", http.MethodPost}:
		h.changePassword(c)
	case route{"/verify/resend", http.MethodPost}:
		h.resendVerification(c)
	default:
		switch rel {
		case "/", "/keys", "/keys/edit", "/keys/delete", "/usage", "/usage.csv", "/billing", "/billing.csv", "/topup", "/signout", "/password", "/verify/resend",
			"/billing/autotopup", "/billing/card", "/alerts", "/alerts/secret":
			hdr.Set("Allow", "GET, HEAD, POST")
			h.message(c, http.StatusMethodNotAllowed, "Not allowed", "This page does not take that request.")
		default:
			h.message(c, http.StatusNotFound, "Not found", "There is no such page in the console.")
		}
	}
	return nil
}

// page renders a console page with status.
func (h *ConsoleHandler) page(c *consoleRequest, status int, render func(io.Writer) error) {
	gateway.WritePage(c.w, h.logger, status, c.csp, render)
}

// message answers with a page that only says msg.
func (h *ConsoleHandler) message(c *consoleRequest, status int, heading, msg string) {
	c.frame.Heading = heading
	p := &web.ConsoleMessage{ConsoleFrame: c.frame, Message: msg}
	h.page(c, status, func(b io.Writer) error { return web.RenderConsoleMessage(b, p) })
}

// session returns the visitor's live session, or nil without one.
func (h *ConsoleHandler) session(r *http.Request) (*consoleSession, error) {
	ck, err := r.Cookie(sessionCookie)
	if err != nil || len(ck.Value) != 43 {
		return nil, nil //nolint:nilerr // no session cookie (or a malformed one) is no session, not a failure
	}
	sum := sha256.Sum256([]byte(ck.Value))
	s, err := h.app.Store().SessionByHash(r.Context(), sum)
	if errors.Is(err, ledger.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	acct, err := h.app.Store().GetAccount(r.Context(), s.AccountID)
	if errors.Is(err, ledger.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &consoleSession{token: ck.Value, hash: sum, csrf: s.CSRF, account: acct, emailState: s.EmailState}, nil
}

// newToken returns 32 random bytes, base64url without padding (43 characters).
func newToken() string {
	var b [32]byte
	_, _ = rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// tokenEqual compares a posted token with the expected one in constant time.
func tokenEqual(got, want string) bool {
	return want != "" && subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1
}

// setCookie sets one of the console's cookies, always Secure and HttpOnly,
// on path (the console's, or one of its pages). maxAge 0 makes a cookie
// that ends with the browser session; maxAge < 0 deletes it.
func (h *ConsoleHandler) setCookie(w http.ResponseWriter, name, value, path string, maxAge int, site http.SameSite) {
	http.SetCookie(w, &http.Cookie{Name: name, Value: value, Path: path, MaxAge: maxAge, //nolint:gosec // Secure and HttpOnly always; SameSite as the caller needs
		Secure: true, HttpOnly: true, SameSite: site})
}

// formToken returns the double-submit token of the forms shown before
// sign-in, setting its cookie when the visitor has none.
func (h *ConsoleHandler) formToken(c *consoleRequest) string {
	if ck, err := c.r.Cookie(formCookie); err == nil && len(ck.Value) == 43 {
		return ck.Value
	}
	t := newToken()
	h.setCookie(c.w, formCookie, t, h.cookiePath, 0, http.SameSiteStrictMode)
	return t
}

// formTokenValid reports whether a form shown before sign-in came back
// with the token of its cookie.
func formTokenValid(r *http.Request) bool {
	ck, err := r.Cookie(formCookie)
	return err == nil && tokenEqual(r.PostForm.Get("csrf"), ck.Value)
}

// authPage renders the sign-in or sign-up form.
func (h *ConsoleHandler) authPage(c *consoleRequest, status int, signUp bool, email, problem string) {
	c.frame.Heading = "Sign in"
	if signUp {
		c.frame.Heading = "Create an account"
	}
	c.frame.Error = problem
	c.frame.CSRF = h.formToken(c)
	p := &web.ConsoleAuthPage{ConsoleFrame: c.frame, SignUp: signUp, SignUpOpen: !h.SignUpOff, FormEmail: email,
		WillVerify: signUp && h.app.Mailer() != nil}
	h.page(c, status, func(b io.Writer) error { return web.RenderConsoleAuth(b, p) })
}

// serveSignIn shows the sign-in form and signs in. Every sign-in is
// reserved against the client address's failures and the email's (unless
// the address is one of the account's own, see guard) before the password
// hash is verified, and forgiven only if the password is right; past
// either limit, sign-ins are refused for a while, right password or not.
func (h *ConsoleHandler) serveSignIn(c *consoleRequest, method string) {
	if method == http.MethodGet {
		if sess, err := h.session(c.r); err == nil && sess != nil {
			http.Redirect(c.w, c.r, h.cookiePath, http.StatusSeeOther)
			return
		}
		h.authPage(c, http.StatusOK, false, "", "")
		return
	}
	if !formTokenValid(c.r) {
		h.authPage(c, http.StatusForbidden, false, "", "This form has expired. Try again.")
		return
	}
	email := strings.TrimSpace(c.r.PostForm.Get("email"))
	password := c.r.PostForm.Get("password")
	login := ledger.NormalizeEmail(email)
	client := guard.ClientIP(c.r)
	now := time.Now()
	g := h.guard
	addrTry, wait := g.SignInAddr.Take(client, now)
	if addrTry == nil {
		h.tooMany(c, false, email, wait, "Too many failed sign-ins from your address. Try again later.")
		return
	}
	var emailTry *guard.Attempt
	if !g.OwnAddress(login, client, now) {
		if emailTry, wait = g.SignInEmail.Take(login, now); emailTry == nil {
			addrTry.End(true) // nothing was tried
			h.tooMany(c, false, email, wait, "Too many failed sign-ins for this email. Try again later.")
			return
		}
	}
	ok := false
	defer func() {
		addrTry.End(ok)
		emailTry.End(ok)
	}()

	ctx := c.r.Context()
	accountID, hash, err := h.app.Store().Login(ctx, login)
	if err != nil && !errors.Is(err, ledger.ErrNotFound) {
		ok = true // not the visitor's failure
		h.logger.Error("reading a console login", zap.Error(err))
		h.authPage(c, http.StatusServiceUnavailable, false, email, "Signing in failed; try again.")
		return
	}
	known := err == nil
	if !known {
		hash = decoyHash()
	}
	var match bool
	var verr error
	if err := g.Hashes.Run(ctx, func() { match, verr = passwords.Verify(password, hash) }); err != nil {
		ok = true // nothing was verified
		if errors.Is(err, guard.ErrBusy) {
			h.tooMany(c, false, email, time.Second, "The console is busy. Try again in a moment.")
		}
		return // or the client went away
	}
	if verr != nil {
		h.logger.Error("a stored password hash is unreadable", zap.String("account", accountID), zap.Error(verr))
	}
	if !known || !match {
		h.authPage(c, http.StatusUnauthorized, false, email, "Wrong email or password.")
		return
	}
	ok = true
	g.SignedIn(login, client, now)
	h.startSession(c, accountID)
}

// tooMany answers a refused sign-in or sign-up with 429 and when to retry.
func (h *ConsoleHandler) tooMany(c *consoleRequest, signUp bool, email string, wait time.Duration, msg string) {
	setRetryAfter(c.w, wait)
	h.authPage(c, http.StatusTooManyRequests, signUp, email, msg)
}

// setRetryAfter sets Retry-After to wait, in whole seconds, at least one.
func setRetryAfter(w http.ResponseWriter, wait time.Duration) {
	w.Header().Set("Retry-After", strconv.Itoa(max(1, int((wait+time.Second-1)/time.Second))))
}

// startSession signs the visitor in to account with a fresh token, never
// one the visitor brought (which would let whoever planted it share the
// session), ends the session the visitor had, and goes to the console.
func (h *ConsoleHandler) startSession(c *consoleRequest, accountID string) {
	h.startSessionAt(c, accountID, h.cookiePath)
}

// startSessionAt is startSession going to the console's page at to.
func (h *ConsoleHandler) startSessionAt(c *consoleRequest, accountID, to string) {
	ctx := c.r.Context()
	if ck, err := c.r.Cookie(sessionCookie); err == nil {
		if err := h.app.Store().DeleteSession(ctx, sha256.Sum256([]byte(ck.Value))); err != nil {
			h.logger.Error("ending a console session", zap.Error(err))
		}
	}
	token := newToken()
	now := time.Now()
	lifetime := time.Duration(h.SessionLifetime)
	err := h.app.Store().CreateSession(ctx, sha256.Sum256([]byte(token)), ledger.Session{
		AccountID: accountID, CSRF: newToken(), CreatedAt: now, ExpiresAt: now.Add(lifetime)})
	if err != nil {
		h.logger.Error("creating a console session", zap.Error(err))
		h.message(c, http.StatusServiceUnavailable, "Unavailable", "Signing in failed; try again.")
		return
	}
	h.setCookie(c.w, sessionCookie, token, h.cookiePath, int(lifetime/time.Second), http.SameSiteLaxMode)
	h.setCookie(c.w, formCookie, "", h.cookiePath, -1, http.SameSiteStrictMode)
	http.Redirect(c.w, c.r, to, http.StatusSeeOther)
}

// serveSignUp shows the sign-up form and creates an account with a login.
// Every sign-up that reaches the password hash counts against the client
// address, reserved before the hash, whether it creates an account or
// finds the email taken; only a failure of the gateway's own is forgiven.
// A taken email is answered without saying so outright.
func (h *ConsoleHandler) serveSignUp(c *consoleRequest, method string) {
	if h.SignUpOff {
		h.message(c, http.StatusNotFound, "Accounts by invitation", "Accounts are created by the operator of this gateway.")
		return
	}
	if method == http.MethodGet {
		h.authPage(c, http.StatusOK, true, "", "")
		return
	}
	if !formTokenValid(c.r) {
		h.authPage(c, http.StatusForbidden, true, "", "This form has expired. Try again.")
		return
	}
	email := ledger.NormalizeEmail(c.r.PostForm.Get("email"))
	password := c.r.PostForm.Get("password")
	if !validEmail(email) {
		h.authPage(c, http.StatusBadRequest, true, email, "Enter a valid email address.")
		return
	}
	if err := passwords.Check(password); err != nil {
		h.authPage(c, http.StatusBadRequest, true, email, "The password must have 10 to 1024 characters.")
		return
	}
	try, wait := h.guard.SignUpAddr.Take(guard.ClientIP(c.r), time.Now())
	if try == nil {
		h.tooMany(c, true, email, wait, "Too many accounts created from your address. Try again later.")
		return
	}
	counted := false
	defer func() { try.End(!counted) }()

	var hash string
	var herr error
	if err := h.guard.Hashes.Run(c.r.Context(), func() { hash, herr = passwords.Hash(password) }); err != nil {
		if errors.Is(err, guard.ErrBusy) {
			h.tooMany(c, true, email, time.Second, "The console is busy. Try again in a moment.")
		}
		return
	}
	if herr != nil {
		h.logger.Error("hashing a password", zap.Error(herr))
		h.authPage(c, http.StatusInternalServerError, true, email, "Creating the account failed; try again.")
		return
	}
	// while the gateway sends mail, a new login's email awaits the link
	// mailed to it
	m := h.app.Mailer()
	acct, err := h.app.Accounts().Open(c.r.Context(), accounts.Opening{Email: email, PasswordHash: hash, Unverified: m != nil})
	if errors.Is(err, ledger.ErrDuplicate) {
		// tries at taken emails count too, so the form cannot list who
		// has an account faster than it creates them
		counted = true
		h.authPage(c, http.StatusBadRequest, true, email,
			"No account was created with this email. If you have an account, sign in; otherwise use another email.")
		return
	}
	if accounts.IsInvalid(err) {
		h.authPage(c, http.StatusBadRequest, true, email, err.Error()+".")
		return
	}
	if err != nil {
		h.logger.Error("creating an account", zap.Error(err))
		h.authPage(c, http.StatusServiceUnavailable, true, email, "Creating the account failed; try again.")
		return
	}
	counted = true
	h.logger.Info("account created in the console", zap.String("account", acct.ID))
	if m != nil {
		h.mailLater("verify", func(ctx context.Context) error { return h.mailLink(ctx, m, acct.ID, acct.Email, ledger.TokenVerify) })
	}
	h.startSession(c, acct.ID)
}

// validEmail accepts a bare address of a usual shape.
func validEmail(s string) bool {
	if len(s) > consoleMaxEmail || strings.ContainsAny(s, " <>\"") {
		return false
	}
	a, err := mail.ParseAddress(s)
	return err == nil && a.Address == s && strings.Contains(s[strings.LastIndexByte(s, '@'):], ".")
}

// signOut ends the session.
func (h *ConsoleHandler) signOut(c *consoleRequest) {
	if err := h.app.Store().DeleteSession(c.r.Context(), c.sess.hash); err != nil {
		h.logger.Error("ending a console session", zap.Error(err))
	}
	h.setCookie(c.w, sessionCookie, "", h.cookiePath, -1, http.SameSiteLaxMode)
	http.Redirect(c.w, c.r, h.BasePath+"/signin", http.StatusSeeOther)
}

// serveOverview shows the balance, the amount held and the account's state.
func (h *ConsoleHandler) serveOverview(c *consoleRequest) {
	a := c.sess.account
	keys, err := h.app.Store().ListKeys(c.r.Context(), a.ID)
	if err != nil {
		h.logger.Error("listing keys", zap.Error(err))
	}
	live := 0
	for _, k := range keys {
		if !k.Deleted {
			live++
		}
	}
	c.frame.Heading, c.frame.Page = "Balance", "overview"
	if c.r.URL.Query().Get("password") == "reset" {
		c.frame.Notice = "Your new password is set, and every other session of the account is signed out."
	}
	p := &web.ConsoleOverview{ConsoleFrame: c.frame, Balance: web.AmountOf(a.Balance), Held: web.AmountOf(a.Held),
		Available: web.AmountOf(max(a.Balance-a.Held, 0)), Plan: a.Plan, State: string(a.State),
		Suspended: a.State == ledger.StateSuspended, Keys: live,
		Owed: web.AmountOf(a.Owed), Owing: a.Owed > 0, ForDebt: a.SuspendedFor == ledger.SuspendedForDebt,
		Empty: a.Balance-a.Held <= 0}
	h.page(c, http.StatusOK, func(b io.Writer) error { return web.RenderConsoleOverview(b, p) })
}

// consoleKey is a key as the console lists it; least is what a modest
// request of the key holds (App.KeyLeastRequest; 0 to show the cap reached
// only when nothing is left).
func consoleKey(k ledger.Key, least ledger.Money) web.ConsoleKey {
	ck := web.ConsoleKey{ID: k.ID, Prefix: k.Prefix, Label: k.Label, Deleted: k.Deleted,
		Created: k.CreatedAt.UTC().Format("2006-01-02 15:04"), CreatedISO: k.CreatedAt.UTC().Format(time.RFC3339),
		LastUsed: "never"}
	if !k.LastUsedAt.IsZero() {
		ck.LastUsed, ck.UsedISO = k.LastUsedAt.UTC().Format("2006-01-02 15:04"), k.LastUsedAt.UTC().Format(time.RFC3339)
	}
	ck.KeyLimits = web.KeyLimitsOf(&k, time.Now(), least)
	return ck
}

// keysPage lists the account's live keys, and shows once the key whose
// sealed cookie came back from its creation; f is the create form's
// limits (as sent, after a refusal).
func (h *ConsoleHandler) keysPage(c *consoleRequest, status int, f web.KeyLimitsForm) {
	p := &web.ConsoleKeys{CanCreate: c.sess.account.State == ledger.StateActive, Form: f,
		FormLabel: strings.TrimSpace(c.r.PostForm.Get("label"))}
	p.PlanRPM, p.PlanConcurrency = h.planLimits(c)
	p.BaseURL = h.apiBase(c.r)
	if ck, err := c.r.Cookie(newKeyCookie); err == nil {
		h.setCookie(c.w, newKeyCookie, "", h.cookiePath+"keys", -1, http.SameSiteStrictMode)
		if id, secret, ok := openNewKey(c.sess, ck.Value); ok && shownKeys.first(id) {
			if k, err := h.app.Store().KeyByID(c.r.Context(), id); err == nil && k.AccountID == c.sess.account.ID && !k.Deleted &&
				time.Since(k.CreatedAt) < consoleNewKeyTTL {
				p.NewKey, p.NewKeyLabel = secret, k.Label
				c.frame.Notice = "Key created."
			}
		}
	}
	if c.r.URL.Query().Get("deleted") != "" {
		c.frame.Notice = "Key deleted: requests with it are refused."
	}
	if c.r.URL.Query().Get("limits") != "" {
		c.frame.Notice = "Limits saved: they apply from the key's next request."
	}
	keys, err := h.app.Store().ListKeys(c.r.Context(), c.sess.account.ID)
	if err != nil {
		h.logger.Error("listing keys", zap.Error(err))
		h.message(c, http.StatusServiceUnavailable, "Unavailable", "The keys could not be read; try again.")
		return
	}
	for _, k := range keys {
		if !k.Deleted {
			p.Keys = append(p.Keys, consoleKey(k, h.app.KeyLeastRequest(c.sess.account.Plan, &k.Limits)))
		}
	}
	p.Setups = web.ClientSetups(p.BaseURL, p.NewKey, h.app.SampleModel(c.sess.account.Plan))
	c.frame.Heading, c.frame.Page = "API keys", "keys"
	p.ConsoleFrame = c.frame
	h.page(c, status, func(b io.Writer) error { return web.RenderConsoleKeys(b, p) })
}

// createKey creates a key and redirects to the keys page, which shows it
// once: the key crosses the redirect in a cookie sealed with the session's
// secrets, deleted as the page is shown, so reloading or going back never
// shows it again, and the ledger only ever sees its hash.
func (h *ConsoleHandler) createKey(c *consoleRequest) {
	label := strings.TrimSpace(c.r.PostForm.Get("label"))
	l, f, err := postedLimits(c.r) // console_keys.go
	if utf8.RuneCountInString(label) > consoleMaxLabel || strings.IndexFunc(label, unicode.IsControl) >= 0 || !utf8.ValidString(label) {
		c.frame.Error = "A label has at most 64 characters, on one line."
		h.keysPage(c, http.StatusBadRequest, f)
		return
	}
	if c.sess.account.State != ledger.StateActive {
		c.frame.Error = "This account is suspended: no keys can be created."
		h.keysPage(c, http.StatusBadRequest, f)
		return
	}
	var secret string
	var k ledger.Key
	if err == nil {
		secret, k, err = h.app.Accounts().CreateKeyWithLimits(c.r.Context(), c.sess.account.ID, label, l)
	}
	switch {
	case accounts.IsInvalid(err):
		c.frame.Error = refusal(err)
		h.keysPage(c, http.StatusBadRequest, f)
		return
	case err != nil:
		h.logger.Error("creating a key", zap.Error(err))
		c.frame.Error = "The key could not be created; try again."
		h.keysPage(c, http.StatusServiceUnavailable, f)
		return
	}
	h.setCookie(c.w, newKeyCookie, sealNewKey(c.sess, k.ID, secret), h.cookiePath+"keys",
		int(consoleNewKeyTTL/time.Second), http.SameSiteStrictMode)
	http.Redirect(c.w, c.r, h.BasePath+"/keys", http.StatusSeeOther)
}

// shownKeys remembers which new keys were shown, so that a sealed cookie
// sent again (the browser deletes it, but a copy could be replayed)
// shows nothing; a key older than consoleNewKeyTTL is never shown.
var shownKeys = &onceSet{seen: make(map[string]time.Time)}

// onceSet answers true once per string for consoleNewKeyTTL.
type onceSet struct {
	mu   sync.Mutex
	seen map[string]time.Time
}

// first reports whether s is seen for the first time.
func (o *onceSet) first(s string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	now := time.Now()
	for k, at := range o.seen {
		if now.Sub(at) > 2*consoleNewKeyTTL {
			delete(o.seen, k)
		}
	}
	if _, ok := o.seen[s]; ok {
		return false
	}
	o.seen[s] = now
	return true
}

// newKeySealKey derives the key that seals a new key for one session: it
// takes the session's token (only in the visitor's HttpOnly cookie) and its
// form token (only in the ledger and the pages).
func newKeySealKey(s *consoleSession) cipher.AEAD {
	m := hmac.New(sha256.New, []byte(s.token))
	m.Write([]byte("modelgate console new key\x00"))
	m.Write([]byte(s.csrf))
	block, err := aes.NewCipher(m.Sum(nil))
	if err != nil {
		panic(err) // a 32-byte key always makes a cipher
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		panic(err)
	}
	return aead
}

// sealNewKey seals a key's id and secret for the session (or another
// secret shown once, with an id that says what it is: a webhook secret's
// starts with secretSealPrefix).
func sealNewKey(s *consoleSession, id, secret string) string {
	aead := newKeySealKey(s)
	nonce := make([]byte, aead.NonceSize(), aead.NonceSize()+len(id)+1+len(secret)+aead.Overhead())
	_, _ = rand.Read(nonce)
	return base64.RawURLEncoding.EncodeToString(aead.Seal(nonce, nonce, []byte(id+"\n"+secret), nil))
}

// openNewKey opens what sealNewKey sealed for the same session.
func openNewKey(s *consoleSession, sealed string) (id, secret string, ok bool) {
	raw, err := base64.RawURLEncoding.DecodeString(sealed)
	aead := newKeySealKey(s)
	if err != nil || len(raw) < aead.NonceSize() {
		return "", "", false
	}
	plain, err := aead.Open(nil, raw[:aead.NonceSize()], raw[aead.NonceSize():], nil)
	if err != nil {
		return "", "", false
	}
	id, secret, ok = strings.Cut(string(plain), "\n")
	return id, secret, ok
}

// ownKey returns the account's live key with the id.
func (h *ConsoleHandler) ownKey(c *consoleRequest, id string) (ledger.Key, bool) {
	if id == "" {
		return ledger.Key{}, false
	}
	k, err := h.app.Store().KeyByID(c.r.Context(), id)
	if err != nil || k.AccountID != c.sess.account.ID || k.Deleted {
		return ledger.Key{}, false
	}
	return k, true
}

// confirmKeyDelete asks whether to delete a key.
func (h *ConsoleHandler) confirmKeyDelete(c *consoleRequest) {
	c.frame.Page = "keys"
	k, ok := h.ownKey(c, c.r.URL.Query().Get("id"))
	if !ok {
		h.message(c, http.StatusNotFound, "No such key", "This key does not exist or is already deleted.")
		return
	}
	c.frame.Heading = "Delete a key"
	p := &web.ConsoleKeyDelete{ConsoleFrame: c.frame, Key: consoleKey(k, 0)}
	h.page(c, http.StatusOK, func(b io.Writer) error { return web.RenderConsoleKeyDelete(b, p) })
}

// deleteKey deletes a key of the account; the next request with it is
// refused (401), on other instances too within a second.
func (h *ConsoleHandler) deleteKey(c *consoleRequest) {
	c.frame.Page = "keys"
	k, ok := h.ownKey(c, c.r.PostForm.Get("id"))
	if !ok {
		h.message(c, http.StatusNotFound, "No such key", "This key does not exist or is already deleted.")
		return
	}
	if err := h.app.Accounts().DeleteKey(c.r.Context(), k.ID); err != nil {
		h.logger.Error("deleting a key", zap.String("key_id", k.ID), zap.Error(err))
		h.message(c, http.StatusServiceUnavailable, "Unavailable", "The key could not be deleted; try again.")
		return
	}
	http.Redirect(c.w, c.r, h.BasePath+"/keys?deleted=1", http.StatusSeeOther)
}

// serveTopUp shows the top-up form, or says that the operator credits
// accounts when no payment provider is configured.
func (h *ConsoleHandler) serveTopUp(c *consoleRequest) {
	q := c.r.URL.Query()
	switch {
	case q.Get("paid") != "":
		c.frame.Notice = "Thank you. Your balance is credited as soon as the payment provider confirms the payment."
	case q.Get("cancelled") != "":
		c.frame.Notice = "Payment cancelled: nothing was charged."
	}
	h.topUpPage(c, http.StatusOK, "")
}

// topUpPage renders the top-up page.
func (h *ConsoleHandler) topUpPage(c *consoleRequest, status int, amount string) {
	c.frame.Heading, c.frame.Page = "Top up", "topup"
	p := &web.ConsoleTopUp{ConsoleFrame: c.frame, Amount: amount}
	if pay := h.app.PaymentProvider(); pay != nil {
		p.Provider, p.Minimum = pay.Name(), pay.Minimum().Rounded()
		c.csp = web.ContentSecurityPolicyFormTo(pay.CheckoutOrigin())
	}
	h.page(c, status, func(b io.Writer) error { return web.RenderConsoleTopUp(b, p) })
}

// startTopUp starts a checkout with the payment provider and sends the
// visitor there; the provider's notification credits the balance.
func (h *ConsoleHandler) startTopUp(c *consoleRequest) {
	pay := h.app.PaymentProvider()
	if pay == nil {
		h.topUpPage(c, http.StatusNotFound, "")
		return
	}
	raw := strings.TrimSpace(c.r.PostForm.Get("amount"))
	amount, err := ledger.ParseMoney(raw)
	if err != nil || amount < pay.Minimum() || amount <= 0 {
		c.frame.Error = "Enter an amount of at least " + pay.Minimum().Rounded() + " " + h.app.Currency + "."
		h.topUpPage(c, http.StatusBadRequest, raw)
		return
	}
	origin, ok := h.publicOrigin(c.r)
	if !ok {
		h.logger.Error("top-ups need the public_url option: this site has no host name to send customers back to after paying")
		c.frame.Error = "Top-ups are not available right now; try again later."
		h.topUpPage(c, http.StatusServiceUnavailable, raw)
		return
	}
	base := origin + h.BasePath + "/topup"
	co, err := pay.StartCheckout(c.r.Context(), payments.CheckoutOptions{AccountID: c.sess.account.ID,
		Email: c.sess.account.Email, Amount: amount, SuccessURL: base + "?paid=1", CancelURL: base + "?cancelled=1"})
	if errors.Is(err, payments.ErrAmount) {
		c.frame.Error = "Enter an amount in whole cents (the currency's smallest unit), at least " + pay.Minimum().Rounded() + " " + h.app.Currency + "."
		h.topUpPage(c, http.StatusBadRequest, raw)
		return
	}
	if err != nil {
		h.logger.Error("starting a checkout", zap.String("account", c.sess.account.ID), zap.Error(err))
		c.frame.Error = "The payment could not be started; try again later."
		h.topUpPage(c, http.StatusBadGateway, raw)
		return
	}
	http.Redirect(c.w, c.r, co.URL, http.StatusSeeOther)
}

// publicOrigin is where customers reach the console, for the links the
// gateway hands to others (a payment provider's return URLs): the
// modelgate option's public_url, or else the request's host when Caddy
// routed it by one of the server's host names, with the scheme the client
// used (https over TLS, or X-Forwarded-Proto from a trusted proxy only).
// A Host that no site address names is never used: without
// public_url, a site without a host name (":443") has no origin to give.
func (h *ConsoleHandler) publicOrigin(r *http.Request) (string, bool) {
	if u := h.app.PublicAddress(); u != nil {
		return u.Scheme + "://" + u.Host + u.Path, true
	}
	if !siteHost(r) {
		return "", false
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	if trusted, _ := caddyhttp.GetVar(r.Context(), caddyhttp.TrustedProxyVarKey).(bool); trusted {
		switch p := strings.ToLower(r.Header.Get("X-Forwarded-Proto")); p {
		case "http", "https":
			scheme = p
		}
	}
	return scheme + "://" + r.Host, true
}

// apiBase is where the account's clients reach the API, for the set-ups
// the console shows its signed-in customer: public_url, or the console's
// own origin (the API is served on the same site), or else the request's.
func (h *ConsoleHandler) apiBase(r *http.Request) string {
	if origin, ok := h.publicOrigin(r); ok {
		return strings.TrimSuffix(origin, "/")
	}
	return h.app.BaseURL(r)
}

// siteHost reports whether r's Host is one of the host names its server
// routes by (the site addresses of a Caddyfile), so that it names the
// operator's site and not whatever a client sent.
func siteHost(r *http.Request) bool {
	srv, _ := r.Context().Value(caddyhttp.ServerCtxKey).(*caddyhttp.Server)
	if srv == nil || r.Host == "" {
		return false
	}
	for _, rt := range srv.Routes {
		for _, set := range rt.MatcherSets {
			for _, m := range set {
				var hosts caddyhttp.MatchHost
				switch m := m.(type) {
				case caddyhttp.MatchHost:
					hosts = m
				case *caddyhttp.MatchHost:
					hosts = *m
				default:
					continue
				}
				if hosts.Match(r) {
					return true
				}
			}
		}
	}
	return false
}

func parseConsoleDirective(h httpcaddyfile.Helper) ([]httpcaddyfile.ConfigValue, error) {
	if !h.Next() {
		return nil, h.ArgErr()
	}
	// The console builds its links from where it lives: the path matcher.
	base := ""
	if h.NextArg() {
		if tok := h.Val(); strings.HasPrefix(tok, "/") {
			base = strings.TrimRight(strings.TrimSuffix(tok, "*"), "/")
		}
	}
	h.Reset()
	h.Next()
	matcherSet, err := h.ExtractMatcherSet()
	if err != nil {
		return nil, err
	}
	c := &ConsoleHandler{BasePath: base}
	if err := c.UnmarshalCaddyfile(h.Dispenser); err != nil {
		return nil, err
	}
	return h.NewRoute(matcherSet, c), nil
}

// UnmarshalCaddyfile parses
//
//	modelgate_console [<path matcher>] {
//		title <text>
//		signup on|off
//		session_lifetime <duration>
//	}
func (h *ConsoleHandler) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // the directive name
	if d.NextArg() {
		return d.ArgErr()
	}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		switch d.Val() {
		case "title":
			h.Title = strings.Join(d.RemainingArgs(), " ")
			if h.Title == "" {
				return d.ArgErr()
			}
		case "signup":
			var v string
			if !d.Args(&v) || d.NextArg() {
				return d.ArgErr()
			}
			switch v {
			case "on":
				h.SignUpOff = false
			case "off":
				h.SignUpOff = true
			default:
				return d.Errf("signup: want on or off, not %q", v)
			}
		case "session_lifetime":
			var v string
			if !d.Args(&v) || d.NextArg() {
				return d.ArgErr()
			}
			dur, err := caddy.ParseDuration(v)
			if err != nil || dur < time.Minute {
				return d.Errf("session_lifetime %q: want a duration of a minute or more", v)
			}
			h.SessionLifetime = caddy.Duration(dur)
		default:
			return d.Errf("unrecognized modelgate_console option %q", d.Val())
		}
	}
	return nil
}

// Interface guards
var (
	_ caddy.Provisioner           = (*ConsoleHandler)(nil)
	_ caddy.CleanerUpper          = (*ConsoleHandler)(nil)
	_ caddyhttp.MiddlewareHandler = (*ConsoleHandler)(nil)
	_ caddyfile.Unmarshaler       = (*ConsoleHandler)(nil)
)
