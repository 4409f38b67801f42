package integration

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	"github.com/openai/openai-go/v3"

	"github.com/modelgate/modelgate/ledger"
)

// TestConsoleInBrowser drives the console and the lookup page in headless
// Chromium with page scripts disabled, as a customer would: sign up, create
// a key and see it once, use it with the OpenAI SDK, see the usage and its
// chart, look the key up on the public page, delete it and get 401.
// Screenshots of each page are saved (MODELGATE_SCREENSHOTS). Nothing
// logged during the run holds the key, the password or the session.
func TestConsoleInBrowser(t *testing.T) {
	b := newConsoleBrowser(t)
	resetConsoleLimits(t)
	g := startGateway(t, gatewayOptions{site: consoleSite, globalLog: true})

	ctx, run := b.ctx, b.run
	shot := b.shot
	text := b.text
	page := func() string {
		t.Helper()
		html, err := chromedp.Run(ctx, chromedp.OuterHTML(chromedp.CSS("html")))
		if err != nil {
			t.Fatalf("read the page: %v", err)
		}
		return html
	}

	// sign up, with page scripts off: the console needs none
	run("sign up",
		scriptsOff(),
		chromedp.Navigate(gatewayAddr+"/console/"),
		chromedp.WaitVisible(chromedp.CSS(`a[href="/console/signup"]`)),
		chromedp.Click(chromedp.CSS(`a[href="/console/signup"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#email`)),
		shot("console-signup.png"),
		chromedp.SendKeys(chromedp.CSS(`#email`), "browser@example.com"),
		chromedp.SendKeys(chromedp.CSS(`#password`), testPassword),
		chromedp.Click(chromedp.CSS(`button[type="submit"]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-figure="balance"]`)),
	)
	acct, _, err := g.store.Login(context.Background(), "browser@example.com")
	if err != nil {
		t.Fatal(err)
	}
	if got := text(`[data-figure="balance"]`); got != "0.000000 USD" {
		t.Fatalf("new account's balance: %q", got)
	}
	// the operator credits the account; the page shows it
	if _, err := g.store.Credit(context.Background(), ledger.CreditRequest{AccountID: acct, Amount: 5_000_000_000, Reference: "test:browser", Reason: "welcome credit"}); err != nil {
		t.Fatal(err)
	}
	run("reload", chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS(`[data-figure="balance"]`)), shot("console-balance.png"))
	if got := text(`[data-figure="balance"]`); got != "5.000000 USD" {
		t.Fatalf("balance after the credit: %q", got)
	}

	// create a key: shown once
	run("create a key",
		chromedp.Click(chromedp.CSS(`a[href="/console/keys"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#label`)),
		chromedp.SendKeys(chromedp.CSS(`#label`), "laptop"),
		chromedp.Click(chromedp.CSS(`form[action="/console/keys"] button`)),
		chromedp.WaitVisible(chromedp.CSS(`#new-key`)),
		shot("console-key-created.png"),
	)
	key := text(`#new-key`)
	if !strings.HasPrefix(key, "mg-") || len(key) < 43 {
		t.Fatalf("new key: %q", key)
	}
	run("reload the keys page", chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS(`table.keys`)))
	if p := page(); strings.Contains(p, key) || strings.Contains(p, `id="new-key"`) {
		t.Fatal("reloading the page shows the key again")
	}
	if got := text(`table.keys tbody td.text`); got != "laptop" {
		t.Fatalf("label listed: %q", got)
	}
	run("back", chromedp.NavigateBack(), chromedp.WaitReady(chromedp.CSS(`body`)))
	if strings.Contains(page(), key) {
		t.Fatal("going back shows the key again")
	}

	// use it with the OpenAI SDK
	completion, err := g.client(key).Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model:    testModel,
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hello from the browser test")},
	})
	if err != nil {
		t.Fatal(err)
	}
	row := g.rows(acct)[0]

	// the usage page and its chart show it
	run("usage",
		chromedp.Navigate(gatewayAddr+"/console/usage"),
		chromedp.WaitVisible(chromedp.CSS(`#chart-requests svg`)),
		shot("console-usage.png"),
	)
	today := time.Now().UTC().Format("2006-01-02")
	for sel, want := range map[string]string{
		`[data-figure="requests"]`:      "1",
		`[data-figure="input_tokens"]`:  strconv.FormatInt(completion.Usage.PromptTokens, 10),
		`[data-figure="output_tokens"]`: strconv.FormatInt(completion.Usage.CompletionTokens, 10),
		`[data-figure="spent"]`:         row.Charged.Rounded() + " USD",
		`#chart-requests rect title`:    today + " · requests: 1",
		`#chart-spent rect title`:       today + " · spent: " + row.Charged.Rounded() + " USD",
	} {
		if got := text(sel); got != want {
			t.Errorf("%s: %q, want %q", sel, got, want)
		}
	}
	bars, err := chromedp.Run(ctx, chromedp.AttributesAll(chromedp.CSSAll(`#chart-tokens rect`)))
	if err != nil {
		t.Fatal(err)
	}
	if len(bars) != 2 || bars[0]["class"] != "s-input" || bars[1]["class"] != "s-output" {
		t.Fatalf("token chart bars: %v", bars)
	}

	// the public lookup page shows the key's figures
	run("lookup",
		chromedp.Navigate(gatewayAddr+"/usage"),
		chromedp.WaitVisible(chromedp.CSS(`#key`)),
		chromedp.SendKeys(chromedp.CSS(`#key`), key),
		chromedp.Click(chromedp.CSS(`form.lookup button`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-figure="requests"]`)),
		shot("lookup-result.png"),
	)
	if got := text(`[data-figure="requests"]`); got != "1" {
		t.Fatalf("lookup requests: %q", got)
	}
	if got := text(`[data-figure="spent"]`); got != row.Charged.Rounded()+" USD" {
		t.Fatalf("lookup spent: %q", got)
	}
	if strings.Contains(page(), key) {
		t.Fatal("the lookup page shows the key")
	}

	// delete it, with a confirmation: the next request gets 401
	run("delete",
		chromedp.Navigate(gatewayAddr+"/console/keys"),
		chromedp.WaitVisible(chromedp.CSS(`table.keys`)),
		chromedp.Click(chromedp.CSS(`a[href^="/console/keys/delete"]`)),
		chromedp.WaitVisible(chromedp.CSS(`button.danger`)),
		shot("console-key-delete.png"),
		chromedp.Click(chromedp.CSS(`button.danger`)),
		chromedp.WaitVisible(chromedp.CSS(`.notice`)),
	)
	if p := page(); strings.Contains(p, "table class=\"keys\"") || !strings.Contains(p, "No keys yet") {
		t.Fatal("the deleted key is still listed")
	}
	_, err = g.client(key).Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model:    testModel,
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("after delete")},
	})
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 401 {
		t.Fatalf("deleted key: %v", err)
	}

	// the top-up page without a payment provider; then sign out
	run("top up and sign out",
		chromedp.Click(chromedp.CSS(`a[href="/console/topup"]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-topup="operator"]`)),
		chromedp.Click(chromedp.CSS(`form.signout button`)),
		chromedp.WaitVisible(chromedp.CSS(`#password`)),
		chromedp.Navigate(gatewayAddr+"/console/keys"),
		chromedp.WaitVisible(chromedp.CSS(`#password`)),
	)

	// a phone-sized window: the usage page fits its width
	run("phone",
		asPhone(),
		chromedp.Navigate(gatewayAddr+"/console/signin"),
		chromedp.WaitVisible(chromedp.CSS(`#email`)),
		chromedp.SendKeys(chromedp.CSS(`#email`), "browser@example.com"),
		chromedp.SendKeys(chromedp.CSS(`#password`), testPassword),
		chromedp.Click(chromedp.CSS(`button[type="submit"]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-figure="balance"]`)),
		chromedp.Navigate(gatewayAddr+"/console/usage"),
		chromedp.WaitVisible(chromedp.CSS(`#chart-requests svg`)),
		shot("console-usage-phone.png"),
	)
	var session string
	run("cookies", chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		res, err := cdp.Call(ctx, tg, network.GetCookies, network.GetCookiesParams{})
		for _, c := range res.Cookies {
			if c.Name == sessionCookie {
				if !c.HTTPOnly || !c.Secure || c.SameSite != network.CookieSameSiteLax {
					t.Errorf("session cookie as the browser keeps it: %+v", c)
				}
				session = c.Value
			}
		}
		return err
	}))
	if len(session) != 43 {
		t.Fatalf("the browser holds no session cookie: %q", session)
	}

	logs := readLogs(t, g.logPath, g.logPath+".access")
	if logs == "" {
		t.Fatal("nothing was logged")
	}
	for what, secret := range map[string]string{"key": key, "password": testPassword, "key body": key[3:], "session": session} {
		if strings.Contains(logs, secret) {
			t.Errorf("the %s is in the logs", what)
		}
	}
}
