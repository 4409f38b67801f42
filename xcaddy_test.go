package modelgate

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestXcaddyBuild proves that an operator's `xcaddy build --with
// github.com/modelgate/modelgate` works: it builds Caddy with this tree as
// the plugin (xcaddy pinned in go.mod's tool block), then asks the binary for
// its modules and has it adapt Caddyfile.example.
func TestXcaddyBuild(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a whole Caddy")
	}
	v, err := exec.Command("go", "list", "-m", "-f", "{{.Version}}", "github.com/caddyserver/caddy/v2").Output()
	if err != nil {
		t.Fatalf("finding the Caddy version in go.mod: %v", err)
	}
	caddyVersion := strings.TrimSpace(string(v))
	root, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "caddy")
	build := exec.Command("go", "tool", "xcaddy", "build", caddyVersion,
		"--with", "github.com/modelgate/modelgate@v0.0.0="+root, "--output", bin)
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("xcaddy build: %v\n%s", err, out)
	}

	out, err := exec.Command(bin, "list-modules").CombinedOutput()
	if err != nil {
		t.Fatalf("list-modules: %v\n%s", err, out)
	}
	for _, mod := range []string{"modelgate", "http.handlers.modelgate_api", "http.handlers.modelgate_mock", "http.reverse_proxy.transport.modelgate"} {
		if !strings.Contains("\n"+string(out), "\n"+mod+"\n") {
			t.Errorf("the built Caddy lacks module %s", mod)
		}
	}
	out, err = exec.Command(bin, "adapt", "--config", "Caddyfile.example").CombinedOutput()
	if err != nil || !strings.Contains(string(out), `"modelgate"`) {
		t.Fatalf("adapt Caddyfile.example: %v\n%s", err, out)
	}
	out, err = exec.Command(bin, "modelgate", "--help").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "account") {
		t.Fatalf("caddy modelgate --help: %v\n%s", err, out)
	}
}
