package console

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/modelgate/modelgate/accounts"
	"github.com/modelgate/modelgate/internal/guard"
	"github.com/modelgate/modelgate/ledger"
	"github.com/modelgate/modelgate/mailer"
	"github.com/modelgate/modelgate/passwords"
	"github.com/modelgate/modelgate/web"
)

// Self-service (docs/operations.md "Console self-service"):
// changing the password; a forgotten password's reset link, mailed through
// the smtp option or handed out by the operator (caddy modelgate account
// reset-link); the verification of a sign-up's email. The links carry a
// one-time token whose SHA-256 the ledger keeps; they are built on
// public_url, never on a request's Host.

// mailSlots bounds the mails being sent at once, for every config of the
// process; past it, a mail is dropped (and logged) rather than queued.
var mailSlots = make(chan struct{}, 16)

// mailTimeout bounds one mail's sending, token included.
const mailTimeout = time.Minute

// mailLater runs send in the background, so that the answer to the
// visitor takes as long whether or not a mail goes (the forgotten-password
// form must not tell which emails have accounts).
func (h *ConsoleHandler) mailLater(what string, send func(ctx context.Context) error) {
	select {
	case mailSlots <- struct{}{}:
	default:
		h.logger.Error("mail not sent: too many mails being sent", zap.String("mail", what))
		return
	}
	go func() {
		defer func() { <-mailSlots }()
		ctx, cancel := context.WithTimeout(context.Background(), mailTimeout)
		defer cancel()
		if err := send(ctx); err != nil {
			h.logger.Error("mail not sent", zap.String("mail", what), zap.Error(err))
		}
	}()
}

// consoleURL is the console's public address: public_url and the
// console's path. The smtp option requires public_url, so a gateway that
// mails has one.
func (h *ConsoleHandler) consoleURL() (string, bool) {
	u := h.app.PublicAddress()
	if u == nil {
		return "", false
	}
	return u.Scheme + "://" + u.Host + strings.TrimRight(u.Path, "/") + h.BasePath, true
}

// defaultConsoleTitle is the console's title when the Caddyfile names none.
const defaultConsoleTitle = "modelgate console"

// serviceName is how mails name the service: the console's title when the
// operator chose one, else the host customers reach the gateway at (mail
// needs public_url), never the word "console" alone.
func (h *ConsoleHandler) serviceName() string {
	if u := h.app.PublicAddress(); h.Title == defaultConsoleTitle && u != nil {
		return u.Hostname()
	}
	return h.Title
}

// mailLink issues a token of purpose for the account and mails its link to
// email.
func (h *ConsoleHandler) mailLink(ctx context.Context, m *mailer.Mailer, accountID, email string, purpose ledger.TokenPurpose) error {
	base, ok := h.consoleURL()
	if !ok {
		return errors.New("no public_url to build the link on")
	}
	var msg mailer.Message
	name := h.serviceName()
	switch purpose {
	case ledger.TokenReset:
		token, err := h.app.Accounts().IssueToken(ctx, accountID, purpose, accounts.ResetLinkLifetime)
		if err != nil {
			return err
		}
		msg = mailer.Message{To: email, Subject: "Set a new password for " + name,
			Text: "Someone, hopefully you, asked to set a new password for " + email + " at " + name + ".\n\n" +
				"Follow this link within an hour to choose one (it works once):\n\n" +
				accounts.ResetLink(base, token) + "\n\n" +
				"If you did not ask, ignore this mail: your password stays as it is.\n"}
	case ledger.TokenVerify:
		token, err := h.app.Accounts().IssueToken(ctx, accountID, purpose, accounts.VerifyLinkLifetime)
		if err != nil {
			return err
		}
		msg = mailer.Message{To: email, Subject: "Verify your email for " + name,
			Text: "Welcome to " + name + ".\n\n" +
				"Follow this link within two days to verify that " + email + " is yours (it works once):\n\n" +
				accounts.VerifyLink(base, token) + "\n\n" +
				"If you did not create an account, ignore this mail.\n"}
	}
	if err := m.Send(ctx, msg); err != nil {
		return err
	}
	h.logger.Info("mail sent", zap.String("mail", string(purpose)), zap.String("account", accountID))
	return nil
}

// validToken reports whether a token from a link has a token's shape (43
// characters of base64url), before anything is looked up.
func validToken(t string) bool {
	if len(t) != 43 {
		return false
	}
	for _, r := range t {
		if !('a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' || r == '-' || r == '_') {
			return false
		}
	}
	return true
}

// forgotPage renders the forgotten-password page.
func (h *ConsoleHandler) forgotPage(c *consoleRequest, status int, email string) {
	c.frame.Heading = "Forgot your password?"
	c.frame.CSRF = h.formToken(c)
	p := &web.ConsoleForgot{ConsoleFrame: c.frame, CanMail: h.app.Mailer() != nil, FormEmail: email}
	h.page(c, status, func(b io.Writer) error { return web.RenderConsoleForgot(b, p) })
}

// serveForgot shows the forgotten-password form and mails a reset link.
// The answer is the same whether the email has a login or not, and comes
// before any mail is sent. Every request counts against the client
// address; past MailsPerEmail in the window, requests for one email are
// answered the same and send nothing (package guard).
func (h *ConsoleHandler) serveForgot(c *consoleRequest, method string) {
	m := h.app.Mailer()
	if method == http.MethodGet || m == nil {
		h.forgotPage(c, http.StatusOK, "")
		return
	}
	if !formTokenValid(c.r) {
		c.frame.Error = "This form has expired. Try again."
		h.forgotPage(c, http.StatusForbidden, "")
		return
	}
	email := ledger.NormalizeEmail(c.r.PostForm.Get("email"))
	if !validEmail(email) {
		c.frame.Error = "Enter a valid email address."
		h.forgotPage(c, http.StatusBadRequest, email)
		return
	}
	now := time.Now()
	addrTry, wait := h.guard.MailAddr.Take(guard.ClientIP(c.r), now)
	if addrTry == nil {
		setRetryAfter(c.w, wait)
		c.frame.Error = "Too many requests from your address. Try again later."
		h.forgotPage(c, http.StatusTooManyRequests, email)
		return
	}
	addrTry.End(false)
	if emailTry, _ := h.guard.MailEmail.Take(email, now); emailTry != nil {
		emailTry.End(false)
		h.mailLater("reset", func(ctx context.Context) error {
			accountID, _, err := h.app.Store().Login(ctx, email)
			if errors.Is(err, ledger.ErrNotFound) {
				return nil // no login: nothing to send, and nothing to tell
			}
			if err != nil {
				return err
			}
			return h.mailLink(ctx, m, accountID, email, ledger.TokenReset)
		})
	} else {
		h.logger.Info("reset mail not sent: the email's limit is reached")
	}
	c.frame.Notice = "If an account uses " + email + ", a link that sets a new password is on its way to it. It works once, for an hour."
	h.forgotPage(c, http.StatusOK, "")
}

// passwordPage renders the page that sets a password: the signed-in
// account's, or with token a reset link's.
func (h *ConsoleHandler) passwordPage(c *consoleRequest, status int, token, forEmail string) {
	if token == "" {
		c.frame.Heading, c.frame.Page = "Change your password", "password"
	} else {
		c.frame.Heading = "Set a new password"
		c.frame.CSRF = h.formToken(c)
	}
	p := &web.ConsolePassword{ConsoleFrame: c.frame, Token: token, ForEmail: forEmail}
	h.page(c, status, func(b io.Writer) error { return web.RenderConsolePassword(b, p) })
}

// linkUsed answers a link whose token is unknown, used or expired.
func (h *ConsoleHandler) linkUsed(c *consoleRequest, what string) {
	msg := "This link has expired or was already used. "
	if what == "reset" {
		if h.app.Mailer() != nil {
			msg += "Ask for a new one on the sign-in page (Forgot your password?)."
		} else {
			msg += "Ask the operator of this gateway for a new one."
		}
	} else {
		msg += "Sign in to have a new one mailed to you."
	}
	h.message(c, http.StatusNotFound, "Link expired", msg)
}

// newPassword reads the form's new password and its repetition, and hashes
// it in the hash queue. It answers the visitor itself when it fails.
func (h *ConsoleHandler) newPassword(c *consoleRequest, retry func(problem string, status int)) (string, bool) {
	password := c.r.PostForm.Get("password")
	if password != c.r.PostForm.Get("repeat") {
		retry("The two new passwords differ. Type the same one twice.", http.StatusBadRequest)
		return "", false
	}
	if err := passwords.Check(password); err != nil {
		retry("The password must have 10 to 1024 characters.", http.StatusBadRequest)
		return "", false
	}
	var hash string
	var herr error
	if err := h.guard.Hashes.Run(c.r.Context(), func() { hash, herr = passwords.Hash(password) }); err != nil {
		if errors.Is(err, guard.ErrBusy) {
			setRetryAfter(c.w, time.Second)
			retry("The console is busy. Try again in a moment.", http.StatusTooManyRequests)
		}
		return "", false
	}
	if herr != nil {
		h.logger.Error("hashing a password", zap.Error(herr))
		retry("Setting the password failed; try again.", http.StatusInternalServerError)
		return "", false
	}
	return hash, true
}

// serveReset shows a reset link's form and sets the password it brings:
// the token is used once, every session of the account ends, the email
// counts as verified (the link reached it), and the visitor is signed in.
func (h *ConsoleHandler) serveReset(c *consoleRequest, method string) {
	ctx := c.r.Context()
	if method == http.MethodGet {
		token := c.r.URL.Query().Get("token")
		if !validToken(token) {
			h.linkUsed(c, "reset")
			return
		}
		accountID, err := h.app.Store().LoginToken(ctx, accounts.TokenHash(token), ledger.TokenReset)
		if errors.Is(err, ledger.ErrNotFound) {
			h.linkUsed(c, "reset")
			return
		}
		var acct ledger.Account
		if err == nil {
			acct, err = h.app.Store().GetAccount(ctx, accountID)
		}
		if err != nil {
			h.logger.Error("reading a reset link", zap.Error(err))
			h.message(c, http.StatusServiceUnavailable, "Unavailable", "The console is unavailable right now; try again.")
			return
		}
		h.passwordPage(c, http.StatusOK, token, acct.Email)
		return
	}
	token := c.r.PostForm.Get("token")
	forEmail := c.r.PostForm.Get("username")
	if !validToken(token) {
		h.linkUsed(c, "reset")
		return
	}
	if !formTokenValid(c.r) {
		c.frame.Error = "This form has expired. Try again."
		h.passwordPage(c, http.StatusForbidden, token, forEmail)
		return
	}
	hash, ok := h.newPassword(c, func(problem string, status int) {
		c.frame.Error = problem
		h.passwordPage(c, status, token, forEmail)
	})
	if !ok {
		return
	}
	accountID, err := h.app.Store().ResetPassword(ctx, accounts.TokenHash(token), hash)
	if errors.Is(err, ledger.ErrNotFound) {
		h.linkUsed(c, "reset")
		return
	}
	if err != nil {
		h.logger.Error("resetting a password", zap.Error(err))
		c.frame.Error = "Setting the password failed; try again."
		h.passwordPage(c, http.StatusServiceUnavailable, token, forEmail)
		return
	}
	h.logger.Info("password reset by link", zap.String("account", accountID))
	h.startSessionAt(c, accountID, h.cookiePath+"?password=reset")
}

// changePassword sets the signed-in account's new password, given its
// current one. A wrong current password counts as a failed sign-in (so a
// stolen session cannot guess at it faster than the sign-in form); the
// other sessions end, this one stays.
func (h *ConsoleHandler) changePassword(c *consoleRequest) {
	retry := func(problem string, status int) {
		c.frame.Error = problem
		h.passwordPage(c, status, "", "")
	}
	if p := c.r.PostForm.Get("password"); p != c.r.PostForm.Get("repeat") || passwords.Check(p) != nil {
		h.newPassword(c, retry) // says which, before the current password costs a hash
		return
	}
	email := c.sess.account.Email
	client := guard.ClientIP(c.r)
	now := time.Now()
	g := h.guard
	addrTry, wait := g.SignInAddr.Take(client, now)
	if addrTry == nil {
		setRetryAfter(c.w, wait)
		retry("Too many wrong passwords from your address. Try again later.", http.StatusTooManyRequests)
		return
	}
	emailTry, wait := g.SignInEmail.Take(email, now)
	if emailTry == nil {
		addrTry.End(true)
		setRetryAfter(c.w, wait)
		retry("Too many wrong passwords for this account. Try again later.", http.StatusTooManyRequests)
		return
	}
	right := false
	defer func() {
		addrTry.End(right)
		emailTry.End(right)
	}()
	ctx := c.r.Context()
	stored, err := h.app.Store().LoginPassword(ctx, c.sess.account.ID)
	if err != nil {
		right = true // not the visitor's failure
		h.logger.Error("reading a console login", zap.Error(err))
		retry("Changing the password failed; try again.", http.StatusServiceUnavailable)
		return
	}
	var match bool
	if err := g.Hashes.Run(ctx, func() { match, _ = passwords.Verify(c.r.PostForm.Get("current"), stored) }); err != nil {
		right = true // nothing was verified
		if errors.Is(err, guard.ErrBusy) {
			setRetryAfter(c.w, time.Second)
			retry("The console is busy. Try again in a moment.", http.StatusTooManyRequests)
		}
		return
	}
	if !match {
		retry("The current password is wrong.", http.StatusUnauthorized)
		return
	}
	right = true
	hash, ok := h.newPassword(c, retry)
	if !ok {
		return
	}
	if err := h.app.Store().ChangePassword(ctx, c.sess.account.ID, hash, c.sess.hash); err != nil {
		h.logger.Error("changing a password", zap.Error(err))
		retry("Changing the password failed; try again.", http.StatusServiceUnavailable)
		return
	}
	h.logger.Info("password changed in the console", zap.String("account", c.sess.account.ID))
	http.Redirect(c.w, c.r, h.BasePath+"/password?changed=1", http.StatusSeeOther)
}

// servePassword shows the change-password form.
func (h *ConsoleHandler) servePassword(c *consoleRequest) {
	if c.r.URL.Query().Get("changed") != "" {
		c.frame.Notice = "Your password is changed. Your other sessions are signed out."
	}
	h.passwordPage(c, http.StatusOK, "", "")
}

// serveVerify uses an email verification link. It needs no session: the
// link may be opened in another browser than the one that signed up.
func (h *ConsoleHandler) serveVerify(c *consoleRequest) {
	token := c.r.URL.Query().Get("token")
	if !validToken(token) {
		h.linkUsed(c, "verify")
		return
	}
	accountID, err := h.app.Store().VerifyEmail(c.r.Context(), accounts.TokenHash(token))
	if errors.Is(err, ledger.ErrNotFound) {
		h.linkUsed(c, "verify")
		return
	}
	if err != nil {
		h.logger.Error("verifying an email", zap.Error(err))
		h.message(c, http.StatusServiceUnavailable, "Unavailable", "The console is unavailable right now; try again.")
		return
	}
	h.logger.Info("email verified", zap.String("account", accountID))
	h.message(c, http.StatusOK, "Email verified", "Your email address is verified. Thank you.")
}

// resendVerification mails the signed-in account a new verification link,
// within the same limits as the reset links.
func (h *ConsoleHandler) resendVerification(c *consoleRequest) {
	m := h.app.Mailer()
	if !c.frame.Unverified || m == nil {
		http.Redirect(c.w, c.r, h.cookiePath, http.StatusSeeOther)
		return
	}
	now := time.Now()
	addrTry, wait := h.guard.MailAddr.Take(guard.ClientIP(c.r), now)
	if addrTry == nil {
		setRetryAfter(c.w, wait)
		h.message(c, http.StatusTooManyRequests, "Try again later", "Too many mails asked for from your address. Try again later.")
		return
	}
	addrTry.End(false)
	a := c.sess.account
	emailTry, wait := h.guard.MailEmail.Take(a.Email, now)
	if emailTry == nil {
		setRetryAfter(c.w, wait)
		h.message(c, http.StatusTooManyRequests, "Try again later", "Several links were mailed to "+a.Email+" in the last hour. Look for them (in the spam folder too), or try again later.")
		return
	}
	emailTry.End(false)
	h.mailLater("verify", func(ctx context.Context) error { return h.mailLink(ctx, m, a.ID, a.Email, ledger.TokenVerify) })
	h.message(c, http.StatusOK, "Link sent", "A new link is on its way to "+a.Email+". It works once, for two days.")
}
