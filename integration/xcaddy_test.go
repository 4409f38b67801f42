package integration

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestXcaddyBuild proves that an operator's `xcaddy build --with
// github.com/modelgate/modelgate` works: it builds Caddy with this tree as
// the plugin (xcaddy pinned in go.mod's tool block), asks the binary for its
// modules, and then runs README.md's quick start with it: Caddyfile.example
// served offline, an account and a key made by the CLI, a chat completion
// through the gateway, the key's usage.
func TestXcaddyBuild(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a whole Caddy")
	}
	v, err := exec.Command("go", "list", "-m", "-f", "{{.Version}}", "github.com/caddyserver/caddy/v2").Output()
	if err != nil {
		t.Fatalf("finding the Caddy version in go.mod: %v", err)
	}
	caddyVersion := strings.TrimSpace(string(v))
	root, err := filepath.Abs(repoRoot)
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
	for _, mod := range []string{"modelgate", "http.handlers.modelgate_api", "http.handlers.modelgate_mock", "http.handlers.modelgate_status"} {
		if !strings.Contains("\n"+string(out), "\n"+mod+"\n") {
			t.Errorf("the built Caddy lacks module %s", mod)
		}
	}
	out, err = exec.Command(bin, "adapt", "--config", exampleCaddyfile).CombinedOutput()
	if err != nil || !strings.Contains(string(out), `"modelgate"`) {
		t.Fatalf("adapt Caddyfile.example: %v\n%s", err, out)
	}
	out, err = exec.Command(bin, "modelgate", "--help").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "account") {
		t.Fatalf("caddy modelgate --help: %v\n%s", err, out)
	}

	runQuickStart(t, bin)
}

// runQuickStart follows README.md with the built binary.
func runQuickStart(t *testing.T, bin string) {
	dir := t.TempDir()
	env := append(os.Environ(), "MODELGATE_DB="+filepath.Join(dir, "quickstart.db"), "XDG_DATA_HOME="+dir, "XDG_CONFIG_HOME="+dir)
	run := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(bin, args...)
		cmd.Env = env
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("caddy %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
		}
		return strings.TrimSpace(string(out))
	}
	// Caddyfile.example as it is, but on free ports, so that the test runs
	// beside a gateway started from the README
	example, err := os.ReadFile(exampleCaddyfile)
	if err != nil {
		t.Fatal(err)
	}
	port, mockPort, admin := freeTCPPort(t), freeTCPPort(t), freeTCPPort(t)
	cfgText := strings.NewReplacer(
		"admin localhost:2019", fmt.Sprintf("admin localhost:%d", admin),
		"\n:8080 {", fmt.Sprintf("\n:%d {", port),
		"127.0.0.1:9090", fmt.Sprintf("127.0.0.1:%d", mockPort),
	).Replace(string(example))
	if cfgText == string(example) {
		t.Fatal("Caddyfile.example no longer has the ports this test moves")
	}
	cfg := filepath.Join(dir, "Caddyfile.example")
	if err := os.WriteFile(cfg, []byte(cfgText), 0o600); err != nil {
		t.Fatal(err)
	}
	base := fmt.Sprintf("http://localhost:%d", port)

	// the README's order: the gateway first (it creates the ledger), then
	// an account and a key from a second terminal
	server := exec.Command(bin, "run", "--config", cfg)
	server.Env = env
	var logs bytes.Buffer
	server.Stdout, server.Stderr = &logs, &logs
	if err := server.Start(); err != nil {
		t.Fatal(err)
	}
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			_ = server.Process.Signal(os.Interrupt)
			_ = server.Wait()
		}
	}
	defer func() {
		stop()
		if t.Failed() {
			t.Logf("server log:\n%s", logs.String())
		}
	}()

	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		if resp, err := http.Get(base + "/"); err == nil {
			resp.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the gateway did not come up")
		}
	}
	acct := run("modelgate", "account", "create", "--config", cfg, "--email", "you@example.com", "--credit", "10.00")
	key := run("modelgate", "key", "create", "--config", cfg, "--account", acct, "--label", "laptop")

	body := `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"Hello there"}]}`
	var resp *http.Response
	for deadline := time.Now().Add(20 * time.Second); ; {
		req, _ := http.NewRequest("POST", base+"/v1/chat/completions", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("Content-Type", "application/json")
		var err error
		if resp, err = http.DefaultClient.Do(req); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the gateway did not come up: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	data, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(data), `"model":"gpt-4o-mini"`) || !strings.Contains(string(data), `"completion_tokens":12`) {
		t.Fatalf("chat completion: %d %s", resp.StatusCode, data)
	}
	// the README's other two formats, on models of other upstream formats
	for _, ex := range []struct{ path, body, header, value, want string }{
		{"/v1/messages", `{"model":"claude-sonnet-4-5","max_tokens":256,"messages":[{"role":"user","content":"Hello there"}]}`,
			"anthropic-version", "2023-06-01", `"type":"message"`},
		{"/v1beta/models/gpt-4o-mini:generateContent", `{"contents":[{"parts":[{"text":"Hello there"}]}]}`,
			"", "", `"modelVersion":"gpt-4o-mini"`},
	} {
		req, _ := http.NewRequest("POST", base+ex.path, strings.NewReader(ex.body))
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("Content-Type", "application/json")
		if ex.header != "" {
			req.Header.Set(ex.header, ex.value)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		data, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(data), ex.want) {
			t.Fatalf("%s: %d %s", ex.path, resp.StatusCode, data)
		}
	}
	req, _ := http.NewRequest("GET", base+"/api/usage", nil)
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	data, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	// 9 input tokens and 12 output tokens each time: at 0.15/0.60, 3/15
	// and 0.15/0.60 per million
	if resp.StatusCode != 200 || !strings.Contains(string(data), `"requests":3`) || !strings.Contains(string(data), `"spent":"0.000224100"`) {
		t.Fatalf("usage: %d %s", resp.StatusCode, data)
	}
	stop()
	if strings.Contains(logs.String(), key) {
		t.Fatal("the key appears in the server's log")
	}
}
