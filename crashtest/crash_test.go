package crashtest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelgate/modelgate/ledger"
	"github.com/modelgate/modelgate/mockupstream"
)

const upstreamKey = "sk-crash-upstream-0123456789"

// TestKill9LosesNoDebit drives load in all three client formats, streams
// included, against a gateway process, kills it with SIGKILL at random
// moments (12 rounds), restarts it each time, and then checks the ledger:
// every request whose client received a complete answer has exactly one
// usage row with its debit; balances equal credits − debits recomputed
// from the rows; and no hold survives a restart.
func TestKill9LosesNoDebit(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and kills a gateway process")
	}
	dir := t.TempDir()
	bin := buildCaddy(t, dir)

	mock := httptest.NewServer(mockupstream.New(mockupstream.Config{Keys: []string{upstreamKey}, TokenDelay: 2 * time.Millisecond}))
	defer mock.Close()

	dbPath := filepath.Join(dir, "ledger.db")
	acct, key := fundedAccount(t, dbPath, "1000.00")
	port := freePort(t)
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	cfgPath := filepath.Join(dir, "Caddyfile")
	writeConfig(t, cfgPath, dbPath, mock.URL, port)

	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))

	load := newLoad(base, key)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := range 9 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			load.run(i, stop)
		}()
	}

	const rounds = 12
	for round := range rounds {
		gw := startProcess(t, bin, cfgPath, dir, base, key)
		before := load.completed.Load()
		time.Sleep(time.Duration(150+rng.IntN(900)) * time.Millisecond)
		if err := gw.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		_ = gw.Wait()
		t.Logf("round %d: %d answers completed before SIGKILL", round+1, load.completed.Load()-before)
	}

	// A last start: no hold survived the kills (the key's own usage view
	// shows the account's held money), then one more kill.
	gw := startProcess(t, bin, cfgPath, dir, base, key)
	time.Sleep(300 * time.Millisecond)
	close(stop)
	wg.Wait()
	held := heldVia(t, base, key)
	_ = gw.Process.Kill()
	_ = gw.Wait()
	if held != "0.000000000" {
		t.Errorf("after restart and with no request in flight, %s is held", held)
	}

	s, err := ledger.Open(context.Background(), ledger.Options{Path: dbPath})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	rows, err := s.UsageRows(context.Background(), ledger.UsageFilter{AccountID: acct, Limit: 10000})
	if err != nil {
		t.Fatal(err)
	}
	byID := make(map[string]ledger.UsageRecord, len(rows))
	for _, r := range rows {
		byID[r.RequestID] = r
	}
	done := load.done()
	for _, c := range done {
		r, ok := byID[c.id]
		if !ok {
			t.Errorf("%s: the client got its whole answer (%s) but there is no usage row", c.id, c.what)
			continue
		}
		if r.Charged <= 0 || r.Tokens.Output <= 0 {
			t.Errorf("%s (%s): row without a debit: %+v", c.id, c.what, r)
		}
	}
	if len(rows) >= 10000 {
		t.Fatalf("too many rows to check in one read: %d", len(rows))
	}
	mm, err := s.Audit(context.Background())
	if err != nil || len(mm) != 0 {
		t.Fatalf("audit after the kills: %v %+v", err, mm)
	}
	a, err := s.GetAccount(context.Background(), acct)
	if err != nil {
		t.Fatal(err)
	}
	var debits ledger.Money
	for _, r := range rows {
		debits += r.Charged
	}
	if want, _ := ledger.ParseMoney("1000.00"); a.Balance != want-debits || a.Held != 0 {
		t.Errorf("balance %s held %s, want %s − %s debits", a.Balance, a.Held, want, debits)
	}
	broken := load.broken.Load()
	t.Logf("%d complete answers, %d cut by the kills, %d usage rows, debits %s; statuses %v", len(done), broken, len(rows), debits, load.statuses())
	if len(done) < 200 {
		t.Errorf("only %d complete answers: the load did not run", len(done))
	}
	if broken == 0 {
		t.Errorf("no answer was ever cut: the kills did not land mid-request")
	}
}

// buildCaddy builds the gateway's Caddy (cmd/caddy), with the race
// detector when the test has it.
func buildCaddy(t *testing.T, dir string) string {
	t.Helper()
	bin := filepath.Join(dir, "caddy")
	args := []string{"build", "-o", bin}
	if raceEnabled {
		args = append(args, "-race")
	}
	cmd := exec.Command("go", append(args, "github.com/modelgate/modelgate/cmd/caddy")...)
	cmd.Dir = ".."
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// fundedAccount creates an account with a credit and a key in a new ledger.
func fundedAccount(t *testing.T, path, credit string) (acct, key string) {
	t.Helper()
	ctx := context.Background()
	s, err := ledger.Open(ctx, ledger.Options{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	a, err := s.CreateAccount(ctx, "crash@example.com", "")
	if err != nil {
		t.Fatal(err)
	}
	amount, err := ledger.ParseMoney(credit)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Credit(ctx, ledger.CreditRequest{AccountID: a.ID, Amount: amount, Reference: "crash-test", Reason: "test"}); err != nil {
		t.Fatal(err)
	}
	secret, _, err := s.CreateKey(ctx, a.ID, "crash")
	if err != nil {
		t.Fatal(err)
	}
	return a.ID, secret
}

// freePort returns a loopback port nothing listens on.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func writeConfig(t *testing.T, path, db, mockURL string, port int) {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "{\n\tadmin off\n\tpersist_config off\n\tgrace_period 1s\n\tmodelgate {\n\t\tledger sqlite %s\n", db)
	for _, f := range []string{"openai", "anthropic", "gemini"} {
		fmt.Fprintf(&b, "\t\tprovider up-%s {\n\t\t\tformat %s\n\t\t\tbase_url %s\n\t\t\tkeys %s\n\t\t\thealth_check off\n\t\t}\n", f, f, mockURL, upstreamKey)
		fmt.Fprintf(&b, "\t\tmodel m-%s {\n\t\t\troute up-%s up-model\n\t\t\tprice input 0.5 output 1.5\n\t\t\tmax_output 1000\n\t\t}\n", f, f)
	}
	fmt.Fprintf(&b, "\t}\n}\n\nhttp://127.0.0.1:%d {\n\tmodelgate_api\n}\n", port)
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
}

// startProcess runs the gateway and waits until it answers.
func startProcess(t *testing.T, bin, cfg, dir, base, key string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(bin, "run", "--config", cfg)
	cmd.Env = append(os.Environ(), "HOME="+dir, "XDG_DATA_HOME="+dir, "XDG_CONFIG_HOME="+dir)
	logf, err := os.OpenFile(filepath.Join(dir, "caddy.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		req, _ := http.NewRequest("GET", base+"/v1/models", nil)
		req.Header.Set("Authorization", "Bearer "+key)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return cmd
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	log, _ := os.ReadFile(filepath.Join(dir, "caddy.log"))
	t.Fatalf("the gateway did not start:\n%s", log)
	return nil
}

// heldVia reads the account's held money from the key's usage view.
func heldVia(t *testing.T, base, key string) string {
	t.Helper()
	req, _ := http.NewRequest("GET", base+"/api/usage", nil)
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var u struct {
		Account struct{ Held string } `json:"account"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&u); err != nil {
		t.Fatal(err)
	}
	return u.Account.Held
}

// completion is a request whose client received the whole answer.
type completion struct{ id, what string }

// load sends requests in every format and remembers which were answered
// completely.
type load struct {
	base, key string
	client    *http.Client
	completed atomic.Int64
	broken    atomic.Int64 // answers cut short (the kills)

	mu       sync.Mutex
	complete []completion
	status   map[int]int
	noError  []string // 5xx answers without an error envelope
}

func newLoad(base, key string) *load {
	return &load{base: base, key: key, status: map[int]int{},
		client: &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 16}}}
}

// run loops over the six shapes (three formats, streamed or not) until
// stop is closed.
func (l *load) run(worker int, stop <-chan struct{}) {
	for i := worker; ; i++ {
		select {
		case <-stop:
			return
		default:
		}
		format, stream := []string{"openai", "anthropic", "gemini"}[i%3], (i/3)%2 == 1
		l.one(format, stream, fmt.Sprintf("m-%s", []string{"openai", "anthropic", "gemini"}[(i/6)%3]))
	}
}

func (l *load) one(format string, stream bool, model string) {
	var req *http.Request
	text := "mock:tokens=20 crash test"
	switch format {
	case "openai":
		body := fmt.Sprintf(`{"model":%q,"stream":%v,"messages":[{"role":"user","content":%q}]}`, model, stream, text)
		req, _ = http.NewRequest("POST", l.base+"/v1/chat/completions", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+l.key)
	case "anthropic":
		body := fmt.Sprintf(`{"model":%q,"max_tokens":100,"stream":%v,"messages":[{"role":"user","content":%q}]}`, model, stream, text)
		req, _ = http.NewRequest("POST", l.base+"/v1/messages", strings.NewReader(body))
		req.Header.Set("X-Api-Key", l.key)
		req.Header.Set("Anthropic-Version", "2023-06-01")
	default:
		method := "generateContent"
		if stream {
			method = "streamGenerateContent?alt=sse"
		}
		req, _ = http.NewRequest("POST", l.base+"/v1beta/models/"+model+":"+method, strings.NewReader(fmt.Sprintf(`{"contents":[{"parts":[{"text":%q}]}]}`, text)))
		req.Header.Set("X-Goog-Api-Key", l.key)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := l.client.Do(req)
	if err != nil {
		time.Sleep(10 * time.Millisecond) // the gateway is down
		return
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	l.mu.Lock()
	l.status[resp.StatusCode]++
	if resp.StatusCode >= 500 && !strings.Contains(string(body), `"error"`) {
		l.noError = append(l.noError, fmt.Sprintf("%d %.200s", resp.StatusCode, body))
	}
	l.mu.Unlock()
	if resp.StatusCode != 200 {
		return
	}
	if err != nil || !whole(format, stream, body) {
		l.broken.Add(1)
		return
	}
	l.completed.Add(1)
	l.mu.Lock()
	l.complete = append(l.complete, completion{resp.Header.Get("X-Request-Id"), fmt.Sprintf("%s stream=%v %s", format, stream, model)})
	l.mu.Unlock()
}

// whole reports whether a 200 answer is complete in its format.
func whole(format string, stream bool, body []byte) bool {
	s := string(body)
	if !stream {
		return json.Valid(body) && strings.Contains(s, "usage") // usage, usageMetadata
	}
	switch format {
	case "openai":
		return strings.HasSuffix(s, "data: [DONE]\n\n")
	case "anthropic":
		return strings.Contains(s, "event: message_stop\n")
	}
	i := strings.LastIndex(s, "\ndata: ")
	return i >= 0 && strings.Contains(s[i:], `"finishReason"`) && strings.Contains(s[i:], `"usageMetadata"`) && strings.HasSuffix(s, "\n\n")
}

func (l *load) done() []completion {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]completion(nil), l.complete...)
}

func (l *load) statuses() map[int]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(map[int]int, len(l.status))
	for k, v := range l.status {
		out[k] = v
	}
	return out
}

// unclear lists the 5xx answers that came without an error envelope.
func (l *load) unclear() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.noError...)
}
