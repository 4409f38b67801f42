package integration

import (
	"encoding/json"
	"html"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"github.com/modelgate/modelgate/web/webtest"
)

// TestIndexPageForBrowsers: a browser at the root gets a page that says
// where to point each client (the base URL, OpenAI clients on /v1, the
// others without it) with a set-up to copy for each, the key read from
// $MODELGATE_API_KEY; API clients asking for JSON, or for anything, still
// get the JSON index. The page's curl set-up runs as shown.
func TestIndexPageForBrowsers(t *testing.T) {
	g := startGateway(t, gatewayOptions{})
	_, key := g.account("1.00")

	for _, accept := range []string{"", "application/json", "*/*"} {
		r := g.do("GET", "/", "", "Accept", accept)
		var doc struct{ Service string }
		if r.status != 200 || json.Unmarshal([]byte(r.body), &doc) != nil || doc.Service != "modelgate" {
			t.Fatalf("Accept %q: %d %.200s", accept, r.status, r.body)
		}
	}

	b := webtest.New(t)
	dom := b.DumpDOM(gatewayAddr + "/")
	for _, want := range []string{
		`data-base="">` + gatewayAddr + `<`,
		`base_url="` + gatewayAddr + `/v1", api_key=os.environ["MODELGATE_API_KEY"]`,                    // OpenAI SDK
		`Anthropic(base_url="` + gatewayAddr + `", api_key=`,                                            // no /v1
		`http_options={"base_url": "` + gatewayAddr + `"}`,                                              // Google GenAI
		"export ANTHROPIC_BASE_URL=" + gatewayAddr + "\nexport ANTHROPIC_AUTH_TOKEN=$MODELGATE_API_KEY", // Claude Code
		`base_url = "` + gatewayAddr + `/v1"`,                                                           // Codex
		`wire_api = "responses"`,
		"export GOOGLE_GEMINI_BASE_URL=" + gatewayAddr, // Gemini CLI
	} {
		if !strings.Contains(html.UnescapeString(dom), want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	if strings.Contains(dom, key) {
		t.Fatal("the public page shows a key")
	}
	b.Screenshot(gatewayAddr+"/", webtest.ScreenshotDir(t)+"/index-390x844.png", 390, 844)

	// the curl set-up, copied from the page, works with the key in the environment
	m := regexp.MustCompile(`(?s)data-client="curl" data-kind="shell"><code>(.*?)</code>`).FindStringSubmatch(dom)
	if m == nil {
		t.Fatal("no curl set-up on the page")
	}
	cmd := exec.Command("bash", "-euo", "pipefail", "-c", html.UnescapeString(m[1])+" --fail-with-body -s")
	cmd.Env = append(os.Environ(), "MODELGATE_API_KEY="+key)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), `"object":"chat.completion"`) {
		t.Fatalf("the page's curl set-up: %v\n%s", err, out)
	}
}
