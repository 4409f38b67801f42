package integration

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/modelgate/modelgate/ledger"
)

// TestConsoleConnectYourClient: a new customer's first minutes in the
// console, in headless Chromium. A zero balance and no keys each say the
// next step; the empty keys page says where clients reach the gateway and
// shows the set-ups of every client, reading the key from
// $MODELGATE_API_KEY; the panel that shows a new key once has the set-ups
// with the key in them, and its curl set-up, copied from the page, works;
// once the panel is gone the key is nowhere on the page.
func TestConsoleConnectYourClient(t *testing.T) {
	b := newConsoleBrowser(t)
	resetConsoleLimits(t)
	g := startGateway(t, gatewayOptions{site: consoleSite})
	run, text := b.run, b.text
	ctx := context.Background()
	html := func() string {
		t.Helper()
		h, err := chromedp.Run(b.ctx, chromedp.OuterHTML(chromedp.CSS("html")))
		if err != nil {
			t.Fatal(err)
		}
		return h
	}

	b.signUp("first@example.com")
	if got := b.words(`[data-next="top-up"]`); !strings.Contains(got, "top up") {
		t.Errorf("a zero balance says: %q", got)
	}
	if got := b.words(`p[data-next="create-key"]`); !strings.Contains(got, "create an API key") {
		t.Errorf("no keys says: %q", got)
	}

	run("the empty keys page", chromedp.Navigate(gatewayAddr+"/console/keys"), chromedp.WaitVisible(chromedp.CSS(`details.connect[open]`)))
	if got := b.words(`p.empty[data-next="create-key"]`); !strings.Contains(got, gatewayAddr) {
		t.Errorf("the empty keys page: %q", got)
	}
	if got := text(`details.connect pre[data-client="curl"]`); !strings.Contains(got, gatewayAddr+"/v1/chat/completions") || !strings.Contains(got, "$MODELGATE_API_KEY") {
		t.Errorf("the curl set-up without a key: %q", got)
	}
	if got := text(`details.connect pre[data-client="Claude Code"]`); !strings.Contains(got, "ANTHROPIC_BASE_URL="+gatewayAddr+"\n") {
		t.Errorf("Claude Code's set-up (no /v1): %q", got)
	}

	acct, _, err := g.store.Login(ctx, "first@example.com")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.store.Credit(ctx, ledger.CreditRequest{AccountID: acct, Amount: 5_000_000_000, Reference: "test:first", Reason: "credit"}); err != nil {
		t.Fatal(err)
	}
	run("create a key",
		chromedp.SendKeys(chromedp.CSS(`#label`), "laptop"),
		chromedp.Click(chromedp.CSS(`form[action="/console/keys"] button[type="submit"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#new-key`)),
		b.shot("console-new-key.png"),
	)
	key := text(`#new-key`)
	curl := text(`.newkey pre[data-client="curl"]`)
	if !strings.Contains(curl, "Bearer "+key) || !strings.Contains(text(`.newkey pre[data-client="OpenAI SDK (Python)"]`), `api_key="`+key+`"`) {
		t.Fatalf("the new key's set-ups do not carry it:\n%s", curl)
	}
	if strings.Contains(html(), `details class="panel connect"`) {
		t.Error("the set-ups are shown twice beside the new key")
	}
	cmd := exec.Command("bash", "-euo", "pipefail", "-c", curl+" --fail-with-body -s")
	cmd.Env = os.Environ()
	if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), `"object":"chat.completion"`) {
		t.Fatalf("the new key's curl set-up, as shown: %v\n%s", err, out)
	}

	run("the keys page again", chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS(`table.keys`)))
	if strings.Contains(html(), key) {
		t.Fatal("the key is on the page after its panel")
	}
	if got := text(`details.connect pre[data-client="curl"]`); !strings.Contains(got, "$MODELGATE_API_KEY") {
		t.Errorf("the set-ups after the panel: %q", got)
	}
	run("the balance page", chromedp.Navigate(gatewayAddr+"/console/"), chromedp.WaitVisible(chromedp.CSS(`[data-figure="balance"]`)))
	if h := html(); strings.Contains(h, `data-next="top-up"`) || strings.Contains(h, `data-next="create-key"`) {
		t.Error("a funded account with a key is still told a next step")
	}
}
