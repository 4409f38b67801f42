package integration

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestREADMEWalkthrough: the README's shell blocks, from "Make a funded
// account" to "Test it", run as written (`go run ./cmd/caddy` is the
// binary built once; the ports are free ones) against a gateway started
// from Caddyfile.example: every command succeeds, no answer is an error,
// the revoked key's next request is a 401, the month's usage export has
// the walk-through's requests, and no command prints Caddy's log lines
// unless --verbose asks for them.
func TestREADMEWalkthrough(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the gateway")
	}
	dir := t.TempDir()
	bin := buildGateway(t, dir)
	port, admin, mock := freeTCPPort(t), freeTCPPort(t), freeTCPPort(t)
	ports := strings.NewReplacer("8080", fmt.Sprint(port), "2019", fmt.Sprint(admin), "9090", fmt.Sprint(mock))

	example, err := os.ReadFile(exampleCaddyfile)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "Caddyfile.example"), []byte(ports.Replace(string(example))), 0o600); err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(), "HOME="+dir, "XDG_DATA_HOME="+dir, "XDG_CONFIG_HOME="+dir,
		"MODELGATE_DB="+filepath.Join(dir, "modelgate.db"), "MG="+bin)
	gw := exec.Command(bin, "run", "--config", "Caddyfile.example")
	gw.Dir, gw.Env = dir, env
	logs, err := os.Create(filepath.Join(dir, "gateway.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer logs.Close()
	gw.Stdout, gw.Stderr = logs, logs
	if err := gw.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = gw.Process.Kill()
		_ = gw.Wait()
	})
	base := fmt.Sprintf("http://localhost:%d", port)
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get(base + "/v1/models")
		if err == nil {
			resp.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			out, _ := os.ReadFile(logs.Name())
			t.Fatalf("the gateway did not start: %v\n%s", err, out)
		}
		time.Sleep(100 * time.Millisecond)
	}

	script := readmeScript(t)
	script = strings.ReplaceAll(script, "go run ./cmd/caddy", `"$MG"`)
	script = strings.NewReplacer("localhost:8080", fmt.Sprintf("localhost:%d", port), "localhost:2019", fmt.Sprintf("localhost:%d", admin)).Replace(script)
	cmd := exec.Command("bash", "-euo", "pipefail", "-c", script)
	cmd.Dir, cmd.Env = dir, env
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("the README's commands failed: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	out := stdout.String()
	// the CLI prints its answers and sentences, not Caddy's JSON log lines
	// (unless --verbose)
	if strings.Contains(stderr.String(), `{"level":`) {
		t.Errorf("the CLI printed log lines on stderr:\n%s", stderr.String())
	}
	verbose := exec.Command(bin, "modelgate", "account", "list", "--verbose", "--config", "Caddyfile.example")
	verbose.Dir, verbose.Env = dir, env
	if both, err := verbose.CombinedOutput(); err != nil || !strings.Contains(string(both), `"msg":"using config from file"`) {
		t.Errorf("--verbose: %v\n%s", err, both)
	}
	if strings.Contains(out, `"error":{`) || strings.Contains(out, `"type":"error"`) {
		t.Errorf("an answer in the walk-through is an error:\n%s", out)
	}
	if !strings.Contains(out, "\n401\n") {
		t.Errorf("the revoked key's request did not show its 401:\n%s", out)
	}
	if !strings.Contains(out, "invoice 42") {
		t.Errorf("the history does not show the credit:\n%s", out)
	}
	csv, err := os.ReadFile(filepath.Join(dir, "usage.csv"))
	if err != nil {
		t.Fatal(err)
	}
	if lines := strings.Count(strings.TrimSpace(string(csv)), "\n"); lines < 5 {
		t.Errorf("usage.csv has %d rows, want the walk-through's requests:\n%s", lines, csv)
	}
}

// readmeScript is the README's ```sh blocks from "Make a funded account"
// to "## Test it", in order.
func readmeScript(t *testing.T) string {
	t.Helper()
	readme, err := os.ReadFile(filepath.Join(repoRoot, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(readme)
	from := strings.Index(text, "Make a funded account")
	to := strings.Index(text, "## Test it")
	if from < 0 || to < from {
		t.Fatal("the README's walk-through has moved: update this test")
	}
	var b strings.Builder
	blocks := 0
	for rest := text[from:to]; ; {
		i := strings.Index(rest, "```sh\n")
		if i < 0 {
			break
		}
		rest = rest[i+len("```sh\n"):]
		j := strings.Index(rest, "```")
		b.WriteString(rest[:j])
		b.WriteString("\n")
		rest = rest[j+3:]
		blocks++
	}
	if blocks < 4 {
		t.Fatalf("%d shell blocks in the walk-through", blocks)
	}
	return b.String()
}
