package integration

import (
	"strings"
	"testing"
)

// TestStatusDisplayNames: a provider's display_name is what the public
// status page (HTML and JSON) shows; its internal name, used in routes,
// logs and metrics, is nowhere on the page. A provider without one shows
// its name.
func TestStatusDisplayNames(t *testing.T) {
	g := startGateway(t, gatewayOptions{status: true,
		extra: twoKeyProviders("\t\t\tdisplay_name \"Frontier Cloud\"\n")})
	for _, path := range []string{"/status", "/status.json"} {
		r := g.do("GET", path, "")
		if r.status != 200 || !strings.Contains(r.body, "Frontier Cloud") {
			t.Fatalf("%s: %d, the display name is missing:\n%.500s", path, r.status, r.body)
		}
		if strings.Contains(r.body, "duo-openai") || strings.Contains(r.body, "duo-gemini") {
			t.Errorf("%s shows an internal provider name", path)
		}
		if path == "/status.json" && !strings.Contains(r.body, `"name":"mock"`) {
			t.Errorf("%s: a provider without display_name should show its name:\n%s", path, r.body)
		}
	}
}
