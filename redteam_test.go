package modelgate

// The red team (#16): each test in this file is a paying client who wants
// free work, through a real gateway in front of the mock upstream, and each
// asserts "billed ≥ what the upstream did". docs/billing.md states the rule
// every case checks: when a usage figure is final, and what is billed on
// every way a call can end.
//
//	Hole 1  streams that end early        TestRedTeamStreamCutOrFailed, TestRedTeamHangUpPastTheDrain
//	Hole 2  abandoned calls                TestRedTeamAbandonedCalls
//	Hole 7  a settle the ledger refuses    TestRedTeamSettleRetriedUntilTaken

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelgate/modelgate/ledger"
)

// redClient is one client format's generation request.
type redClient struct {
	name    string
	path    func(model string, stream bool) string
	body    func(model, prompt string, stream bool) string
	headers func(key string) []string
}

// redClients are the four client formats.
var redClients = []redClient{
	{"chat",
		func(string, bool) string { return "/v1/chat/completions" },
		func(m, p string, stream bool) string {
			return chatBody(m, p, fmt.Sprintf(`"max_tokens":1000,"stream":%v`, stream))
		},
		func(key string) []string { return []string{"Authorization", "Bearer " + key} }},
	{"responses",
		func(string, bool) string { return "/v1/responses" },
		func(m, p string, stream bool) string {
			return fmt.Sprintf(`{"model":%s,"max_output_tokens":1000,"store":false,"stream":%v,"input":%s}`, quote(m), stream, quote(p))
		},
		func(key string) []string { return []string{"Authorization", "Bearer " + key} }},
	{"messages",
		func(string, bool) string { return "/v1/messages" },
		func(m, p string, stream bool) string {
			return fmt.Sprintf(`{"model":%s,"max_tokens":1000,"stream":%v,"messages":[{"role":"user","content":%s}]}`, quote(m), stream, quote(p))
		},
		func(key string) []string { return []string{"X-Api-Key", key, "Anthropic-Version", "2023-06-01"} }},
	{"gemini",
		func(m string, stream bool) string {
			if stream {
				return "/v1beta/models/" + m + ":streamGenerateContent?alt=sse"
			}
			return "/v1beta/models/" + m + ":generateContent"
		},
		func(_, p string, _ bool) string {
			return `{"contents":[{"role":"user","parts":[{"text":` + quote(p) + `}]}],"generationConfig":{"maxOutputTokens":1000}}`
		},
		func(key string) []string { return []string{"X-Goog-Api-Key", key} }},
}

// redUpstreams are test models of the three upstream formats.
var redUpstreams = []string{testModel, "claude-test", "gemini-test"}

// request builds c's request for model and prompt.
func (c redClient) request(ctx context.Context, key, model, prompt string, stream bool) *http.Request {
	req, _ := http.NewRequestWithContext(ctx, "POST", gatewayAddr+c.path(model, stream), strings.NewReader(c.body(model, prompt, stream)))
	req.Header.Set("Content-Type", "application/json")
	h := c.headers(key)
	for i := 0; i+1 < len(h); i += 2 {
		req.Header.Set(h[i], h[i+1])
	}
	return req
}

// streamedText is how many text tokens the mock upstream has streamed so
// far, on the test key.
func (g *gateway) streamedText() int64 {
	return g.mock.Stats().ByKey[upstreamKey].StreamedText
}

// waitRow waits for an account's only usage row.
func (g *gateway) waitRow(acct string, within time.Duration) ledger.UsageRecord {
	g.t.Helper()
	for deadline := time.Now().Add(within); ; time.Sleep(20 * time.Millisecond) {
		rows := g.rows(acct)
		if len(rows) > 1 {
			g.t.Fatalf("%d usage rows for one request", len(rows))
		}
		if len(rows) == 1 {
			return rows[0]
		}
		if time.Now().After(deadline) {
			g.t.Fatalf("no usage row after %s", within)
		}
	}
}

// checkBilled asserts the row bills at least upstreamOutput output tokens,
// at the model's price, with nothing left held.
func (g *gateway) checkBilled(label, acct string, row ledger.UsageRecord, upstreamOutput int64, source, outcome string) {
	g.t.Helper()
	if row.Tokens.Output < upstreamOutput || row.Tokens.Input <= 0 || row.UsageSource != source || row.Outcome != outcome ||
		row.Charged != cost(row.Tokens.Input, row.Tokens.Output) {
		g.t.Errorf("%s: billed %d input and %d output tokens (%s, %s, charged %s) for %d output tokens the upstream made; want ≥, %s, %s",
			label, row.Tokens.Input, row.Tokens.Output, row.UsageSource, row.Outcome, row.Charged, upstreamOutput, source, outcome)
	}
	if _, held := g.balance(acct); held != 0 {
		g.t.Errorf("%s: %s still held", label, held)
	}
}

// Hole 1: streams that end early are billed from a placeholder.

// TestRedTeamStreamCutOrFailed: the upstream cuts its stream, or ends it
// with an error event, after 200 of 300 tokens, in every client format
// on every upstream format. The stream never got the vendor's terminal
// usage, so what was metered on the way (Anthropic's message_start says 1
// output token; Gemini's running counts) is not a bill: the row bills at
// least the estimate of every output byte read, marked estimated.
func TestRedTeamStreamCutOrFailed(t *testing.T) {
	g := startGateway(t, gatewayOptions{})
	for _, fail := range []struct{ directive, outcome string }{
		{"mock:cut=200", "upstream_cut"},
		{"mock:error_after=200", "upstream_error"},
	} {
		for _, c := range redClients {
			for _, m := range redUpstreams {
				label := fmt.Sprintf("%s on %s, %s", c.name, m, fail.directive)
				acct, key := g.account("1.00")
				before := g.streamedText()
				r := send(t, http.DefaultClient, c.request(context.Background(), key, m, "tell me more mock:tokens=300 "+fail.directive, true))
				if r.status != 200 || !strings.Contains(r.body, "Lorem") {
					t.Errorf("%s: %d %.200s", label, r.status, r.body)
					continue
				}
				made := g.streamedText() - before
				if made != 200 {
					t.Fatalf("%s: the mock streamed %d tokens", label, made)
				}
				g.checkBilled(label, acct, g.waitRow(acct, 5*time.Second), made, "estimated", fail.outcome)
			}
		}
	}
	g.audit()
}

// TestRedTeamHangUpPastTheDrain: the client reads a few events and hangs
// up on a long answer; the provider goes on generating. The gateway goes on
// reading until the provider's drain_timeout (here 400ms; 30 minutes by
// default), then cuts it off, and bills at least every output byte it read,
// the drained ones included: never message_start's 1 token.
func TestRedTeamHangUpPastTheDrain(t *testing.T) {
	extra := ""
	for _, p := range []struct{ name, format, model string }{
		{"drain-openai", "openai", "drain-gpt"}, {"drain-anthropic", "anthropic", "drain-claude"}, {"drain-gemini", "gemini", "drain-gemini"},
	} {
		extra += fmt.Sprintf("\t\tprovider %s {\n\t\t\tformat %s\n\t\t\tbase_url {env.MG_TEST_MOCK_URL}\n\t\t\tkeys {env.MG_TEST_UPSTREAM_KEY}\n\t\t\tdrain_timeout 400ms\n\t\t}\n"+
			"\t\tmodel %s {\n\t\t\troute %s up-%s\n\t\t\tprice input 0.5 output 1.5\n\t\t\tmax_output 4000\n\t\t}\n", p.name, p.format, p.model, p.name, p.model)
	}
	g := startGateway(t, gatewayOptions{extra: extra})
	for _, c := range redClients {
		for _, m := range []string{"drain-gpt", "drain-claude", "drain-gemini"} {
			label := c.name + " on " + m
			acct, key := g.account("1.00")
			before := g.streamedText()
			ctx, cancel := context.WithCancel(context.Background())
			resp, err := http.DefaultClient.Do(c.request(ctx, key, m, "a long story mock:tokens=3000 mock:delay=4ms", true))
			if err != nil {
				t.Fatal(err)
			}
			var got strings.Builder
			buf := make([]byte, 256)
			for !strings.Contains(got.String(), "ipsum") {
				n, err := resp.Body.Read(buf)
				got.Write(buf[:n])
				if err != nil {
					t.Fatalf("%s: %v after %q", label, err, got.String())
				}
			}
			cancel() // the client hangs up
			resp.Body.Close()
			row := g.waitRow(acct, 10*time.Second)
			made := g.streamedText() - before
			if made >= 3000 || made < 20 {
				t.Fatalf("%s: the mock streamed %d tokens: the drain did not stop at its timeout", label, made)
			}
			g.checkBilled(label, acct, row, made, "estimated", "client_closed")
		}
	}
	g.audit()
}

// Hole 2: abandoned calls are never billed.

// TestRedTeamAbandonedCalls: the client sends a request and leaves before
// the upstream answers (its timeout is shorter than the upstream's
// latency), non-streamed or streamed, in every format on every upstream.
// The provider makes (and charges for) the answer anyway, so the gateway
// lets the upstream call finish, reads its usage and bills it exactly,
// outcome client_closed.
func TestRedTeamAbandonedCalls(t *testing.T) {
	g := startGateway(t, gatewayOptions{})
	const prompt = "answer slowly mock:tokens=30 mock:latency=700ms"
	var wg sync.WaitGroup
	for _, stream := range []bool{false, true} {
		for _, c := range redClients {
			for _, m := range redUpstreams {
				label := fmt.Sprintf("%s on %s, stream %v", c.name, m, stream)
				acct, key := g.account("1.00")
				wg.Add(1)
				go func() {
					defer wg.Done()
					impatient := &http.Client{Timeout: 150 * time.Millisecond}
					if resp, err := impatient.Do(c.request(context.Background(), key, m, prompt, stream)); err == nil {
						resp.Body.Close()
						t.Errorf("%s: answered within the client's timeout", label)
					}
				}()
				defer func() {
					row := g.waitRow(acct, 10*time.Second)
					g.checkBilled(label, acct, row, 30, "upstream", "client_closed")
					if row.Tokens.Output != 30 {
						t.Errorf("%s: billed %d output tokens, the upstream made 30", label, row.Tokens.Output)
					}
				}()
			}
		}
	}
	wg.Wait()
}

// Hole 7: a settle that fails after delivery loses the debit.

// TestRedTeamSettleRetriedUntilTaken: another process holds the ledger's
// write lock (as the CLI does while it writes) for longer than the busy
// timeout while a stream ends. The gateway cannot write the debit, so the
// stream ends with an error event instead of its terminal event, the hold
// stays reserved (the client cannot spend the money meanwhile), and the
// bill is retried in the background until the ledger takes it. A
// non-streamed answer whose bill cannot be written is not delivered, and
// nothing is charged.
func TestRedTeamSettleRetriedUntilTaken(t *testing.T) {
	g := startGateway(t, gatewayOptions{ledger: "\t\t\tbusy_timeout 50ms\n"})
	acct, key := g.account("1.00")
	funded, _ := ledger.ParseMoney("1.00")
	db, err := sql.Open("sqlite", "file:"+g.dbPath+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	lock := func() *sql.Conn {
		conn, err := db.Conn(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := conn.ExecContext(context.Background(), "BEGIN IMMEDIATE"); err != nil {
			t.Fatal(err)
		}
		return conn
	}
	unlock := func(conn *sql.Conn) {
		if _, err := conn.ExecContext(context.Background(), "ROLLBACK"); err != nil {
			t.Fatal(err)
		}
		conn.Close()
	}

	// a stream, delivered while the ledger is locked
	conn := lock()
	r := g.do("POST", "/v1/chat/completions", chatBody(testModel, "hello mock:tokens=40", `"stream":true`), "Authorization", "Bearer "+key)
	if r.status != 200 || !strings.Contains(r.body, "Lorem") || !strings.Contains(r.body, "will be charged when the ledger is back") ||
		strings.Contains(r.body, "[DONE]") {
		t.Fatalf("stream while the ledger is locked: %d %s", r.status, r.body)
	}
	bal, held := g.balance(acct)
	if bal != funded || held == 0 || len(g.rows(acct)) != 0 {
		t.Fatalf("while locked: balance %s, held %s, %d rows", bal, held, len(g.rows(acct)))
	}
	// the client cannot spend what is held for the pending bill
	if _, err := g.store.Reserve(acct, funded, funded); err == nil {
		t.Fatal("the whole balance could be reserved while a bill is pending")
	}
	unlock(conn)
	row := g.waitRow(acct, 40*time.Second)
	if row.Tokens.Output != 40 || row.UsageSource != "upstream" || row.Outcome != "ok" {
		t.Fatalf("the retried bill: %+v", row)
	}
	if bal, held := g.balance(acct); bal != funded-row.Charged || held != 0 || row.Charged != cost(row.Tokens.Input, 40) {
		t.Fatalf("after the retry: balance %s, held %s, row %+v", bal, held, row)
	}
	if m := metricValue(t, "modelgate_settle_retries_total"); m < 1 {
		t.Fatalf("settle retries metric %v", m)
	}

	// a non-streamed answer is not delivered without its bill
	conn = lock()
	r = g.do("POST", "/v1/chat/completions", chatBody(testModel, "hello again", ""), "Authorization", "Bearer "+key)
	unlock(conn)
	if r.status != 500 || !strings.Contains(r.body, "nothing was charged") {
		t.Fatalf("non-stream while the ledger is locked: %d %s", r.status, r.body)
	}
	if bal2, held := g.balance(acct); bal2 != funded-row.Charged || held != 0 || len(g.rows(acct)) != 1 {
		t.Fatalf("after the refused answer: balance %s, held %s, %d rows", bal2, held, len(g.rows(acct)))
	}
	g.audit()
}

// metricValue reads one unlabelled metric from the test Caddy's admin
// endpoint (0 when absent).
func metricValue(t *testing.T, name string) float64 {
	t.Helper()
	resp, err := http.Get(adminAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, name+" "); ok {
			var v float64
			fmt.Sscan(rest, &v)
			return v
		}
	}
	return 0
}
