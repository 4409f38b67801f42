// Package docs holds the tests of the reference pages' examples: the code
// a reader copies from them must work as written.
package docs

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// webhookBlock is the first ```lang block of api.md's "Verifying the
// signature".
func webhookBlock(t *testing.T, lang string) string {
	t.Helper()
	raw, err := os.ReadFile("api.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(raw)
	from := strings.Index(text, "### Verifying the signature")
	if from < 0 {
		t.Fatal(`api.md has no "### Verifying the signature": update this test`)
	}
	rest := text[from:]
	if end := strings.Index(rest[1:], "\n### "); end >= 0 {
		rest = rest[:end+1]
	}
	i := strings.Index(rest, "```"+lang+"\n")
	if i < 0 {
		t.Fatalf("no ```%s block under Verifying the signature", lang)
	}
	rest = rest[i+len("```"+lang+"\n"):]
	j := strings.Index(rest, "\n```")
	if j < 0 {
		t.Fatalf("the ```%s block does not end", lang)
	}
	return rest[:j+1]
}

// freeAddr is a loopback address nothing listens on.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// lockedBuffer is a receiver's output, written by its process while the
// test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// sign is a Modelgate-Signature of body made at at with secret, computed
// here as the gateway's format says, not by the example's code.
func sign(secret string, at time.Time, body string) string {
	t := strconv.FormatInt(at.Unix(), 10)
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(t + "." + body))
	return "t=" + t + ",v1=" + hex.EncodeToString(m.Sum(nil))
}

// checkReceiver starts cmd (a receiver listening on addr, with the
// secret in its environment) and sends it deliveries: only the ones signed
// with the secret over the body, within 5 minutes, are accepted (2xx);
// the accepted one's id and type reach its output.
func checkReceiver(t *testing.T, cmd *exec.Cmd, addr, path string, env ...string) {
	t.Helper()
	const secret = "whsec_docsTestSecret0123456789abcdefABCDEF"
	cmd.Env = append(append(os.Environ(), "MODELGATE_WEBHOOK_SECRET="+secret), env...)
	out := &lockedBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	for deadline := time.Now().Add(30 * time.Second); ; {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the receiver did not start: %v\n%s", err, out)
		}
		time.Sleep(50 * time.Millisecond)
	}
	now := time.Now()
	body := `{"id":"evt_docs1","type":"balance.low","created":"2026-11-29T06:10:00Z","account":"acct_docs","data":{"balance":"4.21","threshold":"5.00","currency":"usd","spent_24h":"11.20","runs_out_in_seconds":32400}}`
	good := sign(secret, now, body)
	var accepted, refused []string // the deliveries' lines in the receiver's output
	for _, tc := range []struct {
		name, body, signature string
		accepted              bool
	}{
		{"signed", body, good, true},
		{"signed 4 minutes ago", body, sign(secret, now.Add(-4*time.Minute), body), true},
		{"another secret", body, sign("whsec_other", now, body), false},
		{"another body", strings.Replace(body, "4.21", "400.21", 1), good, false},
		{"signed 6 minutes ago", body, sign(secret, now.Add(-6*time.Minute), body), false},
		{"signed 6 minutes ahead", body, sign(secret, now.Add(6*time.Minute), body), false},
		{"no signature", body, "", false},
		{"v1 not hex", body, strings.Split(good, ",")[0] + ",v1=zz", false},
		{"no t", body, strings.Split(good, ",")[1], false},
	} {
		req, err := http.NewRequest("POST", "http://"+addr+path, strings.NewReader(tc.body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("User-Agent", "modelgate-webhooks/1")
		id := "dlv_docs_" + strings.ReplaceAll(tc.name, " ", "_")
		req.Header.Set("Modelgate-Webhook-Id", id)
		if tc.accepted {
			accepted = append(accepted, id+" balance.low")
		} else {
			refused = append(refused, id+" ")
		}
		if tc.signature != "" {
			req.Header.Set("Modelgate-Signature", tc.signature)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s: %v\n%s", tc.name, err, out)
		}
		resp.Body.Close()
		if ok := resp.StatusCode >= 200 && resp.StatusCode < 300; ok != tc.accepted {
			t.Errorf("%s: %d, want accepted %v", tc.name, resp.StatusCode, tc.accepted)
		}
	}
	for _, line := range accepted {
		for deadline := time.Now().Add(5 * time.Second); !strings.Contains(out.String(), line); time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("the accepted delivery %q is not in the receiver's output:\n%s", line, out)
			}
		}
	}
	for _, line := range refused {
		if strings.Contains(out.String(), line) {
			t.Errorf("the refused delivery %q reached the receiver's work:\n%s", strings.TrimSpace(line), out)
		}
	}
}

// TestWebhookVerifyGo: the Go receiver of api.md's "Verifying the
// signature", built as written, listening on a port of loopback, accepts a delivery signed as the gateway
// signs and refuses one with another secret, another body, a time more
// than 5 minutes away, or a malformed signature.
func TestWebhookVerifyGo(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the example")
	}
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command to build the example with")
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(webhookBlock(t, "go")), 0o600); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "receiver")
	// the example builds on its own, as a reader's module made with go mod
	// init (its method patterns need Go 1.22): no workspace, no flags of
	// this test run
	env := append(os.Environ(), "GOWORK=off", "GOFLAGS=", "GOTOOLCHAIN=local")
	for _, args := range [][]string{{"mod", "init", "receiver"}, {"build", "-o", bin, "."}} {
		c := exec.Command(gobin, args...)
		c.Dir, c.Env = dir, env
		if out, err := c.CombinedOutput(); err != nil {
			t.Fatalf("the Go example does not build (go %s): %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	addr := freeAddr(t)
	checkReceiver(t, exec.Command(bin), addr, "/modelgate-webhook", "ADDR="+addr)
}

// TestWebhookVerifyNode: the JavaScript receiver of api.md's "Verifying
// the signature", run by Node as written, accepts and refuses the same
// deliveries as the Go one. Skipped without node.
func TestWebhookVerifyNode(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("skipping the JavaScript example: no node command (install Node.js to run it)")
	}
	dir := t.TempDir()
	script := filepath.Join(dir, "receiver.js")
	if err := os.WriteFile(script, []byte(webhookBlock(t, "js")), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	_, port, _ := net.SplitHostPort(addr)
	// the example listens on every address; the test reaches it on loopback
	checkReceiver(t, exec.Command(node, script), addr, "/", "PORT="+port)
}
