package integration

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/caddytest"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/modelgate/modelgate/gateway"
	"github.com/modelgate/modelgate/ledger"
	"github.com/modelgate/modelgate/mockupstream"
)

// Prices of the test model, per 1M tokens and per token.
const (
	testModel         = "gpt-test"
	testUpstreamModel = "up-gpt-test"
	priceIn           = ledger.Money(500)  // "0.5" per 1M
	priceOut          = ledger.Money(1500) // "1.5" per 1M
	priceCacheRead    = ledger.Money(50)   // "0.05" per 1M
	priceCacheWrite   = ledger.Money(625)  // "0.625" per 1M, claude-test only
	testMaxOutput     = 1000
	upstreamKey       = "sk-upstream-test-0123456789"
)

// The test Caddy's ports, free ones chosen when the test binary starts, so
// that the suite runs beside a gateway started from the README (8080, 2019)
// and beside another run of itself.
var (
	gatewayPort, gatewayTLSPort, adminPort int
	gatewayAddr                            string // http://localhost:<gatewayPort>
	adminAddr                              string // http://localhost:<adminPort>
)

func TestMain(m *testing.M) {
	gatewayPort, gatewayTLSPort, adminPort = mustFreePort(), mustFreePort(), mustFreePort()
	gatewayAddr = fmt.Sprintf("http://localhost:%d", gatewayPort)
	adminAddr = fmt.Sprintf("http://localhost:%d", adminPort)
	caddytest.Default.AdminPort = adminPort
	os.Exit(m.Run())
}

// mustFreePort returns a TCP port nothing listens on.
func mustFreePort() int {
	l, err := net.Listen("tcp", ":0")
	if err != nil {
		panic(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// gateway is a real Caddy, started from a Caddyfile, serving modelgate in
// front of a mock upstream, with its own SQLite ledger file.
type testGateway struct {
	t       *testing.T
	tester  *caddytest.Tester
	mock    *mockupstream.Server
	dbPath  string
	logPath string
	cfg     string
	store   *ledger.Store // the running gateway's own store
}

// gatewayOptions vary the Caddyfile.
type gatewayOptions struct {
	mock      mockupstream.Config
	globalLog bool   // Caddy's own log (always in a file) at DEBUG rather than INFO
	status    bool   // serve the status page at /status
	extra     string // more lines inside the modelgate block
	global    string // more global options (before the modelgate block)
	ledger    string // options of the ledger (its block's lines)
	site      string // more lines in the site block
	address   string // the site's address; default http://localhost:<gatewayPort>
	admin     string // the admin endpoint's host; default localhost
	plainLog  bool   // the site's access log without the filter of the example
}

// startGateway loads a config into the test Caddy (one per test binary,
// started by caddytest) and returns a handle on it.
func startGateway(t *testing.T, o gatewayOptions) *testGateway {
	t.Helper()
	t.Setenv("MG_TEST_UPSTREAM_KEY", upstreamKey)
	if o.mock.Keys == nil {
		o.mock.Keys = []string{upstreamKey}
	}
	mock := mockupstream.New(o.mock)
	srv := httptest.NewServer(mock)
	t.Cleanup(srv.Close)
	t.Setenv("MG_TEST_MOCK_URL", srv.URL)
	statusSite := ""
	if o.status {
		statusSite = "\tmodelgate_status /status*\n"
	}

	dir := t.TempDir()
	g := &testGateway{t: t, mock: mock, dbPath: filepath.Join(dir, "ledger.db"), logPath: filepath.Join(dir, "caddy.log")}
	adminHost := "localhost"
	if o.admin != "" {
		adminHost = o.admin
	}
	address := fmt.Sprintf("http://localhost:%d", gatewayPort)
	if o.address != "" {
		address = o.address
	}
	logFilter := `
		format filter {
			request>headers>X-Api-Key delete
			request>headers>X-Goog-Api-Key delete
			request>uri query {
				delete key
			}
		}`
	if o.plainLog {
		logFilter = ""
	}
	// Caddy's own log goes to a file, kept when the test fails, so that a
	// failure's output starts with its assertion
	level := "INFO"
	if o.globalLog {
		level = "DEBUG"
	}
	globalLog := fmt.Sprintf("\tlog {\n\t\toutput file %s\n\t\tlevel %s\n\t}\n", g.logPath, level)
	cfg := fmt.Sprintf(`{
	admin %s:%d
	http_port %d
	https_port %d
	grace_period 1s
%s%s	modelgate {
		ledger sqlite %s%s
		provider mock {
			format openai
			base_url %s
			keys {env.MG_TEST_UPSTREAM_KEY}
			failure_cooldown 1ms
		}
		plan developer {
			rpm 0
		}
		plan enterprise {
			discount 15%%
		}
		default_plan developer
		model %s {
			route mock %s
			price input 0.5 output 1.5 cache_read 0.05
			owned_by testers
			max_output %d
		}
		model other {
			route mock other-upstream
			price input 1 output 1
		}
		provider mock-anthropic {
			format anthropic
			base_url %s
			keys {env.MG_TEST_UPSTREAM_KEY}
			failure_cooldown 1ms
		}
		provider mock-gemini {
			format gemini
			base_url %s
			keys {env.MG_TEST_UPSTREAM_KEY}
			failure_cooldown 1ms
		}
		model claude-test {
			route mock-anthropic up-claude-test
			price input 0.5 output 1.5 cache_read 0.05 cache_write 0.625
			max_output %d
		}
		model gemini-test {
			route mock-gemini up-gemini-test
			price input 0.5 output 1.5 cache_read 0.05
			max_output %d
		}
		health_scope %q
%s	}
}

%s {
	log {
		output file %s.access%s
	}
	modelgate_api
%s}
`, adminHost, adminPort, gatewayPort, gatewayTLSPort, o.global, globalLog, g.dbPath, ledgerBlock(o.ledger), srv.URL, testModel, testUpstreamModel, testMaxOutput, srv.URL, srv.URL, testMaxOutput, testMaxOutput, t.Name(), o.extra, address, g.logPath, logFilter, statusSite+o.site)
	g.cfg = cfg
	g.tester = caddytest.NewTester(quietConfigTB{t}).WithDefaultOverrides(caddytest.Config{TestRequestTimeout: 30 * time.Second})
	g.tester.InitServer(cfg, "caddyfile")
	if t.Failed() {
		t.FailNow()
	}
	g.store = runningStore(t, g.dbPath)
	t.Cleanup(g.assertNoSecretsLogged)
	return g
}

// quietConfigTB is the test as caddytest sees it: everything passes through
// but caddytest's dump of the whole running config when a test fails (some
// 1,400 lines after the failing assertion), which goes to a file named in
// one line instead.
type quietConfigTB struct{ testing.TB }

func (q quietConfigTB) Logf(format string, args ...any) {
	if !strings.HasPrefix(format, "----------- failed with config") {
		q.TB.Logf(format, args...)
		return
	}
	f, err := os.CreateTemp("", "modelgate-failed-config-*.json")
	if err != nil {
		q.TB.Logf("the running config could not be saved: %v", err)
		return
	}
	defer f.Close()
	fmt.Fprintf(f, format, args...)
	q.TB.Logf("the running config of this failed test is in %s", f.Name())
}

// loggedKey matches a whole API key, wherever it would be written.
var loggedKey = regexp.MustCompile(`mg-[0-9A-Za-z]{40,}`)

// assertNoSecretsLogged fails the test if anything the gateway logged
// (Caddy's own log and the access log)
// holds an API key or the upstream key, in any form.
func (g *testGateway) assertNoSecretsLogged() {
	logs := readLogs(g.t, g.logPath, g.logPath+".access")
	if g.t.Failed() && logs != "" {
		if f, err := os.CreateTemp("", "modelgate-failed-log-*.json"); err == nil {
			_, _ = f.WriteString(logs)
			f.Close()
			g.t.Logf("Caddy's log of this failed test is in %s", f.Name())
		}
	}
	if k := loggedKey.FindString(logs); k != "" {
		g.t.Errorf("an API key is in the logs: %s…", k[:8])
	}
	if strings.Contains(logs, upstreamKey) {
		g.t.Error("the upstream key is in the logs")
	}
}

// ledgerBlock is the block of the ledger option, if it has options.
func ledgerBlock(lines string) string {
	if lines == "" {
		return ""
	}
	return " {\n" + lines + "\t\t}"
}

// reload loads the gateway's config again with one change (the currency),
// as `caddy reload` does.
func (g *testGateway) reload() {
	g.t.Helper()
	g.cfg = strings.Replace(g.cfg, "default_plan developer\n", "default_plan developer\n\t\tcurrency EUR\n", 1)
	g.tester.InitServer(g.cfg, "caddyfile")
	// the replaced server closes its idle connections; a POST sent on one
	// of them as it closes is reset and cannot be replayed by the client
	http.DefaultClient.CloseIdleConnections()
	if s := runningStore(g.t, g.dbPath); s != g.store {
		g.t.Fatal("a reload opened a second ledger")
	}
}

// runningStore finds the ledger the running config opened for path.
func runningStore(t testing.TB, path string) *ledger.Store {
	t.Helper()
	s := gateway.RunningLedger(path)
	if s == nil {
		t.Fatal("the running config has no ledger for " + path)
	}
	return s
}

// mockConfig configures the mock upstream.
type mockConfig = mockupstream.Config

// readLogs returns the contents of the log files that exist.
func readLogs(t *testing.T, paths ...string) string {
	t.Helper()
	var b strings.Builder
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Fatal(err)
		}
		b.Write(data)
	}
	return b.String()
}

// account creates a funded account with one key and returns both.
func (g *testGateway) account(credit string) (acct, key string) {
	g.t.Helper()
	ctx := context.Background()
	a, err := g.store.CreateAccount(ctx, "", "developer")
	if err != nil {
		g.t.Fatal(err)
	}
	if credit != "" {
		amount, err := ledger.ParseMoney(credit)
		if err != nil {
			g.t.Fatal(err)
		}
		if _, err := g.store.Credit(ctx, ledger.CreditRequest{AccountID: a.ID, Amount: amount, Reference: "test:" + a.ID, Reason: "test"}); err != nil {
			g.t.Fatal(err)
		}
	}
	secret, _, err := g.store.CreateKey(ctx, a.ID, "test key")
	if err != nil {
		g.t.Fatal(err)
	}
	return a.ID, secret
}

// balance returns an account's balance and outstanding holds.
func (g *testGateway) balance(acct string) (balance, held ledger.Money) {
	g.t.Helper()
	a, err := g.store.GetAccount(context.Background(), acct)
	if err != nil {
		g.t.Fatal(err)
	}
	return a.Balance, a.Held
}

// rows returns an account's usage rows, newest first.
func (g *testGateway) rows(acct string) []ledger.UsageRecord {
	g.t.Helper()
	rows, err := g.store.UsageRows(context.Background(), ledger.UsageFilter{AccountID: acct, Limit: 10000})
	if err != nil {
		g.t.Fatal(err)
	}
	return rows
}

// audit fails the test if the ledger's balances do not recompute from rows.
func (g *testGateway) audit() {
	g.t.Helper()
	m, err := g.store.Audit(context.Background())
	if err != nil {
		g.t.Fatal(err)
	}
	if len(m) > 0 {
		g.t.Fatalf("ledger audit: %+v", m)
	}
}

// client is the official OpenAI SDK pointed at the gateway.
func (g *testGateway) client(key string) *openai.Client {
	c := openai.NewClient(
		option.WithBaseURL(gatewayAddr+"/v1/"),
		option.WithAPIKey(key),
		option.WithMaxRetries(0),
		option.WithRequestTimeout(30*time.Second),
	)
	return &c
}

// response is a raw HTTP answer.
type response struct {
	status int
	header http.Header
	body   string
}

// do sends a raw request to the gateway. headers alternate name, value.
func (g *testGateway) do(method, path, body string, headers ...string) response {
	g.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, gatewayAddr+path, rd)
	if err != nil {
		g.t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	return send(g.t, http.DefaultClient, req)
}

// send sends req with client and reads the whole answer.
func send(t testing.TB, client *http.Client, req *http.Request) response {
	t.Helper()
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(resp.Body); err != nil {
		t.Fatalf("%s %s: reading the body: %v", req.Method, req.URL.Path, err)
	}
	return response{status: resp.StatusCode, header: resp.Header, body: buf.String()}
}

// chatBody is a chat request with one user message.
func chatBody(model, text string, extra string) string {
	b := `{"model":` + quote(model) + `,"messages":[{"role":"user","content":` + quote(text) + `}]`
	if extra != "" {
		b += "," + extra
	}
	return b + "}"
}

func quote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"', '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case '\n':
			b.WriteString(`\n`)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// cost is what the gateway must charge for a usage at the test model's price.
func cost(in, out int64) ledger.Money {
	return ledger.Money(in)*priceIn + ledger.Money(out)*priceOut
}

// restKeys waits out the test providers' key cooldown (failure_cooldown
// 1ms, doubling) after an injected upstream failure, so that the next
// request reaches the upstream instead of being told that no key is
// available. Tests of the cooldowns themselves configure longer ones.
func restKeys() { time.Sleep(20 * time.Millisecond) }
