package integration

import (
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestConsoleSelfServiceInBrowser drives the self-service pages in headless
// Chromium with page scripts disabled, following the links exactly as
// mailed by a real SMTP server on loopback (public_url is the test
// gateway's address): sign up and see the notice that the email is
// unverified, follow the verification link, change the password, sign out,
// ask for a reset link, follow it and set a new password, find the link
// used. Screenshots of each page are saved (MODELGATE_SCREENSHOTS).
func TestConsoleSelfServiceInBrowser(t *testing.T) {
	b := newConsoleBrowser(t)
	resetConsoleLimits(t)
	g, srv := startMailingGatewayAt(t, gatewayAddr)

	ctx, run := b.ctx, b.run
	shot := b.shot
	text := b.words
	has := func(sel string) bool {
		t.Helper()
		html, err := chromedp.Run(ctx, chromedp.OuterHTML(chromedp.CSS("html")))
		if err != nil {
			t.Fatalf("read the page: %v", err)
		}
		return strings.Contains(html, sel)
	}
	const email = "self@example.com"

	run("sign up",
		scriptsOff(),
		chromedp.Navigate(gatewayAddr+"/console/signup"),
		chromedp.WaitVisible(chromedp.CSS(`#email`)),
		chromedp.SendKeys(chromedp.CSS(`#email`), email),
		chromedp.SendKeys(chromedp.CSS(`#password`), testPassword),
		chromedp.Click(chromedp.CSS(`button[type="submit"]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-notice="unverified"]`)),
		shot("console-unverified.png"),
	)
	if got := text(`[data-notice="unverified"]`); !strings.Contains(got, "not verified yet") || !strings.Contains(got, email) {
		t.Fatalf("the unverified notice: %q", got)
	}

	// the verification link, exactly as mailed
	verify, _ := linkOn(t, srv.Wait(t, 1, 10*time.Second)[0], gatewayAddr, "verify")
	run("verify", chromedp.Navigate(gatewayAddr+verify), chromedp.WaitVisible(chromedp.CSS(`main p`)), shot("console-verified.png"))
	if got := text(`h1`); got != "Email verified" {
		t.Fatalf("after the verification link: %q", got)
	}
	run("home", chromedp.Navigate(gatewayAddr+"/console/"), chromedp.WaitVisible(chromedp.CSS(`[data-figure="balance"]`)))
	if has(`data-notice="unverified"`) {
		t.Fatal("the notice stays after the verification")
	}

	// change the password
	const changed = "a changed password"
	run("change the password",
		chromedp.Click(chromedp.CSS(`a[href="/console/password"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#current`)),
		shot("console-password.png"),
		chromedp.SendKeys(chromedp.CSS(`#current`), testPassword),
		chromedp.SendKeys(chromedp.CSS(`#password`), changed),
		chromedp.SendKeys(chromedp.CSS(`#repeat`), changed),
		chromedp.Click(chromedp.CSS(`form[action="/console/password"] button[type="submit"]`)),
		chromedp.WaitVisible(chromedp.CSS(`p.notice`)),
		shot("console-password-changed.png"),
	)
	if got := text(`p.notice`); !strings.Contains(got, "Your password is changed") {
		t.Fatalf("after the change: %q", got)
	}

	// sign out, forget it, ask for a link
	run("forgot",
		chromedp.Click(chromedp.CSS(`form.signout button`)),
		chromedp.WaitVisible(chromedp.CSS(`a[href="/console/forgot"]`)),
		chromedp.Click(chromedp.CSS(`a[href="/console/forgot"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#email`)),
		shot("console-forgot.png"),
		chromedp.SendKeys(chromedp.CSS(`#email`), email),
		chromedp.Click(chromedp.CSS(`button[type="submit"]`)),
		chromedp.WaitVisible(chromedp.CSS(`p.notice`)),
		shot("console-forgot-sent.png"),
	)
	if got := text(`p.notice`); !strings.Contains(got, "If an account uses "+email) {
		t.Fatalf("after asking: %q", got)
	}
	reset, _ := linkOn(t, srv.Wait(t, 2, 10*time.Second)[1], gatewayAddr, "reset")
	const fresh = "a fresh password after the reset"
	run("reset",
		chromedp.Navigate(gatewayAddr+reset),
		chromedp.WaitVisible(chromedp.CSS(`#password`)),
		shot("console-reset.png"),
		chromedp.SendKeys(chromedp.CSS(`#password`), fresh),
		chromedp.SendKeys(chromedp.CSS(`#repeat`), fresh),
		chromedp.Click(chromedp.CSS(`button[type="submit"]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-figure="balance"]`)),
		shot("console-reset-done.png"),
	)
	if got := text(`p.notice`); !strings.Contains(got, "Your new password is set") {
		t.Fatalf("after the reset: %q", got)
	}
	run("the used link", chromedp.Navigate(gatewayAddr+reset), chromedp.WaitVisible(chromedp.CSS(`main p`)), shot("console-link-used.png"))
	if got := text(`main p`); !strings.Contains(got, "expired or was already used") {
		t.Fatalf("the used link: %q", got)
	}
	if r := newConsoleClient(t).signIn(email, fresh); r.status != 303 {
		t.Fatalf("sign in with the new password: %d", r.status)
	}
	g.noTokensLogged(testPassword, changed, fresh)
}
