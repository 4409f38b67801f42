package integration

// The red team: each test in this file is a paying client who wants
// free work, through a real gateway in front of the mock upstream, and each
// asserts "billed ≥ what the upstream did". docs/billing.md states the rule
// every case checks: when a usage figure is final, and what is billed on
// every way a call can end.
//
//	Hole 1  streams that end early        TestRedTeamStreamCutOrFailed, TestRedTeamHangUpPastTheDrain
//	Hole 2  abandoned calls                TestRedTeamAbandonedCalls
//	Hole 3  image edit form tricks         TestRedTeamImageEditForms, TestRedTeamImageEditSpool
//	Hole 4  state in the operator's account TestRedTeamBackgroundRefused, TestRedTeamStateRefused,
//	                                       TestRedTeamStoreFalseByDefault, TestRedTeamAllowStateful,
//	                                       TestRedTeamAnthropicBetaAllowList
//	Hole 5  hosted tools with fees         TestRedTeamHostedToolsBilled, TestRedTeamCutStreamBillsSearches,
//	                                       TestRedTeamUnpricedHostedTools, TestRedTeamHostedToolsHeld,
//	                                       TestRedTeamHostedCapsOnTheWire, TestRedTeamDocumentsByURLRefused
//	Hole 6  two servers on one SQLite file TestRedTeamTwoServersOneSQLite
//	Hole 7  a settle the ledger refuses    TestRedTeamSettleRetriedUntilTaken

import (
	"bytes"
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"

	"github.com/modelgate/modelgate/formats/images"
	"github.com/modelgate/modelgate/gateway"
	"github.com/modelgate/modelgate/ledger"
	"github.com/modelgate/modelgate/mockupstream"
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
func (g *testGateway) streamedText() int64 {
	return g.mock.Stats().ByKey[upstreamKey].StreamedText
}

// waitRow waits for an account's only usage row.
func (g *testGateway) waitRow(acct string, within time.Duration) ledger.UsageRecord {
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
func (g *testGateway) checkBilled(label, acct string, row ledger.UsageRecord, upstreamOutput int64, source, outcome string) {
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
// up on a long answer from providers set to drain (on_hangup drain); the
// provider goes on generating. The gateway goes on
// reading until the provider's drain_timeout (here 400ms; 30 minutes by
// default), then cuts it off, and bills at least every output byte it read,
// the drained ones included: never message_start's 1 token.
func TestRedTeamHangUpPastTheDrain(t *testing.T) {
	extra := ""
	for _, p := range []struct{ name, format, model string }{
		{"drain-openai", "openai", "drain-gpt"}, {"drain-anthropic", "anthropic", "drain-claude"}, {"drain-gemini", "gemini", "drain-gemini"},
	} {
		extra += fmt.Sprintf("\t\tprovider %s {\n\t\t\tformat %s\n\t\t\tbase_url {env.MG_TEST_MOCK_URL}\n\t\t\tkeys {env.MG_TEST_UPSTREAM_KEY}\n\t\t\tdrain_timeout 400ms\n\t\t\ton_hangup drain\n\t\t}\n"+
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
// A non-streamed answer, and a stream from Gemini, is made (and charged
// for) anyway, so the gateway lets the upstream call finish, reads its
// usage and bills it exactly, outcome client_closed. OpenAI and Anthropic
// stop a stream whose connection closes, so the gateway stops it too and
// bills the input and the in-flight margin, usage_source counted.
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
					if stream && m != "gemini-test" {
						// OpenAI and Anthropic stop when the connection
						// closes (on_hangup stop): the mock, still in its
						// latency, made nothing; the bill is the input and
						// the in-flight margin
						g.checkBilled(label, acct, row, 0, "counted", "client_closed")
						if row.Tokens.Output != 16 || row.Status != 499 {
							t.Errorf("%s: billed %d output tokens, status %d; want the margin of 16, 499", label, row.Tokens.Output, row.Status)
						}
						return
					}
					g.checkBilled(label, acct, row, 30, "upstream", "client_closed")
					if row.Tokens.Output != 30 {
						t.Errorf("%s: billed %d output tokens, the upstream made 30", label, row.Tokens.Output)
					}
				}()
			}
		}
	}
	// an image generation: the images are made and billed all the same
	acct, key := g.account("1.00")
	impatient := &http.Client{Timeout: 150 * time.Millisecond}
	req, _ := http.NewRequest("POST", gatewayAddr+"/v1/images/generations",
		strings.NewReader(`{"model":"gpt-test","prompt":"a fox mock:latency=700ms","size":"1024x1024","quality":"low"}`))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	if resp, err := impatient.Do(req); err == nil {
		resp.Body.Close()
		t.Error("image generation: answered within the client's timeout")
	}
	wg.Wait()
	if row := g.waitRow(acct, 10*time.Second); row.Outcome != "client_closed" || row.Charged <= 0 || row.Status != 499 {
		t.Errorf("abandoned image generation: %+v", row)
	}
	if _, held := g.balance(acct); held != 0 {
		t.Errorf("abandoned image generation: %s still held", held)
	}
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

// Holes 4 and 5: each test is an adversarial client that tries to get
// upstream work it is not billed for, with the assertion "billed ≥ what the
// upstream did" (or: the upstream did nothing), through a real gateway in
// front of the mock upstream, in every client format and upstream format
// where the hole applies.

// redTeamModels are the models of the hosted-tool and state cases: the
// same prices as the test models (0.5 / 1.5 per 1M tokens), with hosted
// tools priced per 1,000 uses, a model that allows stored state, and an
// Anthropic provider whose beta allow-list adds one value to the default.
const redTeamModels = `		model searcher {
			route mock up-searcher
			price input 0.5 output 1.5 web_search 10 image_generation 40
			max_output 1000
		}
		model claude-searcher {
			route mock-anthropic up-claude-searcher
			price input 0.5 output 1.5 web_search 10
			max_output 1000
		}
		model claude-fetcher {
			route mock-anthropic up-claude-fetcher
			price input 0.5 output 1.5 web_search 10 web_fetch 2
			max_output 1000
		}
		model gemini-searcher {
			route mock-gemini up-gemini-searcher
			price input 0.5 output 1.5 web_search 14 web_fetch 0
			max_output 1000
		}
		model gpt-stateful {
			route mock up-gpt-stateful
			price input 0.5 output 1.5
			allow_stateful store conversation
		}
		provider beta-anthropic {
			format anthropic
			base_url {env.MG_TEST_MOCK_URL}
			keys {env.MG_TEST_UPSTREAM_KEY}
			failure_cooldown 1ms
			anthropic_beta default context-1m-2025-08-07
		}
		model claude-long {
			route beta-anthropic up-claude-long
			price input 0.5 output 1.5
		}
`

// Hosted-tool fees of redTeamModels, per use, in nanos.
const (
	feeSearch       = ledger.Money(10_000_000) // web_search 10 per 1,000
	feeGeminiSearch = ledger.Money(14_000_000) // web_search 14 per 1,000
	feeImage        = ledger.Money(40_000_000) // image_generation 40 per 1,000
	feeFetch        = ledger.Money(2_000_000)  // web_fetch 2 per 1,000
)

// redTeam starts a gateway with redTeamModels and a funded account.
func redTeam(t *testing.T, credit string) (g *testGateway, acct string, auth []string) {
	t.Helper()
	g = startGateway(t, gatewayOptions{extra: redTeamModels})
	acct, key := g.account(credit)
	return g, acct, []string{"Authorization", "Bearer " + key, "Anthropic-Version", "2023-06-01"}
}

// untouched fails the test unless the account holds exactly its credit,
// with nothing held and no usage row, and the upstream saw no request.
func (g *testGateway) untouched(acct string, credit ledger.Money) {
	g.t.Helper()
	if n := len(g.mock.Requests()); n != 0 {
		g.t.Errorf("the upstream saw %d requests; first: %s", n, g.mock.Requests()[0].Body)
	}
	if rows := g.rows(acct); len(rows) != 0 {
		g.t.Errorf("%d usage rows, want none: %+v", len(rows), rows[0])
	}
	if bal, held := g.balance(acct); bal != credit || held != 0 {
		g.t.Errorf("balance %s held %s, want %s and nothing held", bal, held, credit)
	}
}

// errorParam reads the field an error names, in any client format: OpenAI's
// param, else the message (Anthropic and Gemini name it there).
func errorParam(body string) (param, message string) {
	var e struct {
		Error struct {
			Param   string `json:"param"`
			Message string `json:"message"`
		} `json:"error"`
	}
	_ = json.Unmarshal([]byte(body), &e)
	return e.Error.Param, e.Error.Message
}

// ---------------------------------------------------------------------------
// Hole 4: state

// TestRedTeamBackgroundRefused: a background Responses request would be
// billed as a small "queued" answer while the provider generates up to
// max_output_tokens at the operator's cost. It is refused on every route,
// streamed or not, before anything is held or sent upstream.
func TestRedTeamBackgroundRefused(t *testing.T) {
	g, acct, auth := redTeam(t, "1.00")
	for _, model := range append(everyUpstream, "searcher", "gpt-stateful") {
		for _, stream := range []string{"", `,"stream":true`} {
			r := g.do("POST", "/v1/responses", `{"model":"`+model+`","input":"write a novel","max_output_tokens":100000,"background":true`+stream+`}`, auth...)
			if param, _ := errorParam(r.body); r.status != 400 || param != "background" {
				t.Errorf("%s%s: %d %s, want 400 naming background", model, stream, r.status, r.body)
			}
		}
	}
	g.untouched(acct, 1_000_000_000)
}

// TestRedTeamStateRefused: a client that continues another customer's
// response, reads the operator's files, vector stores, containers, prompts
// or caches, or stores its conversation in the operator's account, gets a
// 400 naming the field, in its own error format, on every route (the
// same-format routes included), with nothing held or sent upstream.
func TestRedTeamStateRefused(t *testing.T) {
	g, acct, auth := redTeam(t, "1.00")
	msgs := func(model, extra string) string {
		return `{"model":"` + model + `","max_tokens":100,"messages":[{"role":"user","content":"hi"}]` + extra + `}`
	}
	msgsBlock := func(model, block string) string {
		return `{"model":"` + model + `","max_tokens":100,"messages":[{"role":"user","content":[` + block + `,{"type":"text","text":"hi"}]}]}`
	}
	gem := func(extra string) string {
		return `{"contents":[{"role":"user","parts":[{"text":"hi"}]}]` + extra + `}`
	}
	for _, tc := range []struct {
		name, path, body, field string
	}{
		// Responses, on the OpenAI pass-through route and translated
		{"rsp previous_response_id", "/v1/responses", `{"model":"searcher","input":"hi","previous_response_id":"resp_someone_elses"}`, "previous_response_id"},
		{"rsp conversation", "/v1/responses", `{"model":"searcher","input":"hi","conversation":"conv_1"}`, "conversation"},
		{"rsp prompt", "/v1/responses", `{"model":"searcher","input":"hi","prompt":{"id":"pmpt_operator"}}`, "prompt"},
		{"rsp store", "/v1/responses", `{"model":"searcher","input":"hi","store":true}`, "store"},
		{"rsp store translated", "/v1/responses", `{"model":"claude-test","input":"hi","store":true}`, "store"},
		{"rsp item_reference", "/v1/responses", `{"model":"searcher","input":[{"type":"item_reference","id":"msg_1"}]}`, "input[0]"},
		{"rsp file_id", "/v1/responses", `{"model":"searcher","input":[{"role":"user","content":[{"type":"input_file","file_id":"file-op"}]}]}`, "input[0].content[0].file_id"},
		{"rsp image file_id", "/v1/responses", `{"model":"gemini-test","input":[{"role":"user","content":[{"type":"input_image","file_id":"file-op"}]}]}`, "input[0].content[0].file_id"},
		{"rsp file_search", "/v1/responses", `{"model":"searcher","input":"hi","tools":[{"type":"file_search","vector_store_ids":["vs_op"]}]}`, "tools[0]"},
		{"rsp code_interpreter", "/v1/responses", `{"model":"searcher","input":"hi","tools":[{"type":"code_interpreter","container":{"type":"auto"}}]}`, "tools[0]"},
		{"rsp mcp", "/v1/responses", `{"model":"searcher","input":"hi","tools":[{"type":"mcp","server_label":"x","server_url":"https://mcp.example.com"}]}`, "tools[0]"},
		// Chat Completions
		{"chat store", "/v1/chat/completions", chatBody("searcher", "hi", `"store":true`), "store"},
		{"chat file_id", "/v1/chat/completions", `{"model":"searcher","messages":[{"role":"user","content":[{"type":"file","file":{"file_id":"file-op"}}]}]}`, "messages[0].content[0].file.file_id"},
		// Messages, same format and translated
		{"ant container", "/v1/messages", msgs("claude-test", `,"container":"container_op"`), "container"},
		{"ant mcp_servers", "/v1/messages", msgs("claude-test", `,"mcp_servers":[{"type":"url","url":"https://mcp.example.com","name":"x"}]`), "mcp_servers"},
		{"ant code_execution", "/v1/messages", msgs("claude-test", `,"tools":[{"type":"code_execution_20250825","name":"code_execution"}]`), "tools.0"},
		{"ant mcp_toolset", "/v1/messages", msgs("claude-test", `,"tools":[{"type":"mcp_toolset","mcp_server_name":"x"}]`), "tools.0"},
		{"ant file source", "/v1/messages", msgsBlock("claude-test", `{"type":"document","source":{"type":"file","file_id":"file_op"}}`), "messages.0.content.0.source.file_id"},
		{"ant image file translated", "/v1/messages", msgsBlock(testModel, `{"type":"image","source":{"type":"file","file_id":"file_op"}}`), "messages.0.content.0.source.file_id"},
		{"ant container_upload", "/v1/messages", msgsBlock("claude-test", `{"type":"container_upload","file_id":"file_op"}`), "messages.0.content.0.file_id"},
		// Gemini
		{"gem cachedContent", "/v1beta/models/gemini-test:generateContent", gem(`,"cachedContent":"cachedContents/op"`), "cached_content"},
		{"gem fileData", "/v1beta/models/gemini-test:generateContent",
			`{"contents":[{"role":"user","parts":[{"fileData":{"mimeType":"application/pdf","fileUri":"https://generativelanguage.googleapis.com/v1beta/files/op"}},{"text":"hi"}]}]}`,
			"contents[0].parts[0].file_data.file_uri"},
		{"gem fileSearch", "/v1beta/models/gemini-test:streamGenerateContent?alt=sse", gem(`,"tools":[{"fileSearch":{"fileSearchStoreNames":["op"]}}]`), "tools[0]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := g.do("POST", tc.path, tc.body, auth...)
			param, msg := errorParam(r.body)
			if r.status != 400 || (param != tc.field && !strings.Contains(msg, tc.field)) {
				t.Errorf("%d %s, want 400 naming %s", r.status, r.body, tc.field)
			}
			switch {
			case strings.HasPrefix(tc.path, "/v1/messages"):
				if !strings.Contains(r.body, `"type":"invalid_request_error"`) || !strings.HasPrefix(r.body, `{"type":"error"`) {
					t.Errorf("not in Anthropic's envelope: %s", r.body)
				}
			case strings.HasPrefix(tc.path, "/v1beta"):
				if !strings.Contains(r.body, `"status":"INVALID_ARGUMENT"`) {
					t.Errorf("not in Gemini's envelope: %s", r.body)
				}
			default:
				if !strings.Contains(r.body, `"type":"invalid_request_error"`) || param == "" {
					t.Errorf("not in OpenAI's envelope with param: %s", r.body)
				}
			}
		})
	}
	g.untouched(acct, 1_000_000_000)
}

// TestRedTeamStoreFalseByDefault: OpenAI stores every Responses answer in
// the operator's project unless told not to; the gateway sends store false
// when the client does not say, and keeps the client's own false.
func TestRedTeamStoreFalseByDefault(t *testing.T) {
	g, acct, auth := redTeam(t, "1.00")
	for _, body := range []string{
		`{"model":"searcher","input":"hi"}`,
		`{"model":"searcher","input":"hi","stream":true}`,
		`{"model":"searcher","input":"hi","store":null}`,
		`{"model":"searcher","input":"hi","store":false}`,
	} {
		g.mock.Reset()
		if r := g.do("POST", "/v1/responses", body, auth...); r.status != 200 {
			t.Fatalf("%s: %d %s", body, r.status, r.body)
		}
		sent := g.mock.Requests()[0].Body
		var up struct {
			Store *bool `json:"store"`
		}
		if err := json.Unmarshal(sent, &up); err != nil || up.Store == nil || *up.Store {
			t.Errorf("%s: the upstream got %s, want store false", body, sent)
		}
	}
	if n := len(g.rows(acct)); n != 4 {
		t.Errorf("%d rows, want 4", n)
	}
	g.audit()
}

// TestRedTeamAllowStateful: a model whose block allows stored state passes
// it through to its OpenAI provider, and only what it allows.
func TestRedTeamAllowStateful(t *testing.T) {
	g, _, auth := redTeam(t, "1.00")
	r := g.do("POST", "/v1/responses", `{"model":"gpt-stateful","input":"hi","previous_response_id":"resp_mine","store":true}`, auth...)
	if r.status != 200 {
		t.Fatalf("%d %s", r.status, r.body)
	}
	sent := string(g.mock.Requests()[0].Body)
	if !strings.Contains(sent, `"previous_response_id":"resp_mine"`) || !strings.Contains(sent, `"store":true`) {
		t.Errorf("the upstream got %s", sent)
	}
	g.mock.Reset()
	r = g.do("POST", "/v1/responses", `{"model":"gpt-stateful","input":"hi","tools":[{"type":"file_search","vector_store_ids":["vs"]}]}`, auth...)
	if param, _ := errorParam(r.body); r.status != 400 || param != "tools[0]" || len(g.mock.Requests()) != 0 {
		t.Errorf("file_search on a model that allows store and conversation only: %d %s", r.status, r.body)
	}
}

// TestRedTeamAnthropicBetaAllowList: anthropic-beta values reach an
// Anthropic upstream only when the provider allows them; the others (a
// long-context beta billed at premium rates, the Files API) are dropped
// and named in x-modelgate-dropped. A provider may add values to the
// default list.
func TestRedTeamAnthropicBetaAllowList(t *testing.T) {
	g, acct, auth := redTeam(t, "1.00")
	const sent = "claude-code-20250219,context-1m-2025-08-07, files-api-2025-04-14,interleaved-thinking-2025-05-14"
	body := `{"model":"%s","max_tokens":50,"stream":true,"messages":[{"role":"user","content":"hi"}]}`
	for _, tc := range []struct {
		model, want, dropped string
	}{
		{"claude-test", "claude-code-20250219,interleaved-thinking-2025-05-14",
			"anthropic-beta:context-1m-2025-08-07,anthropic-beta:files-api-2025-04-14"},
		{"claude-long", "claude-code-20250219,context-1m-2025-08-07,interleaved-thinking-2025-05-14",
			"anthropic-beta:files-api-2025-04-14"},
	} {
		g.mock.Reset()
		r := g.do("POST", "/v1/messages?beta=true", strings.Replace(body, "%s", tc.model, 1), append(auth, "Anthropic-Beta", sent)...)
		if r.status != 200 {
			t.Fatalf("%s: %d %s", tc.model, r.status, r.body)
		}
		if got := strings.Join(g.mock.Requests()[0].Header.Values("Anthropic-Beta"), ","); got != tc.want {
			t.Errorf("%s: the upstream got anthropic-beta %q, want %q", tc.model, got, tc.want)
		}
		if d := r.header.Get("X-Modelgate-Dropped"); d != tc.dropped {
			t.Errorf("%s: x-modelgate-dropped %q, want %q", tc.model, d, tc.dropped)
		}
	}
	if n := len(g.rows(acct)); n != 2 {
		t.Errorf("%d rows, want 2", n)
	}
}

// ---------------------------------------------------------------------------
// Hole 5: hosted tools

// hostedCase is a request that makes the upstream use hosted tools.
type hostedCase struct {
	name, path, body          string
	searches, fetches, images int64        // the uses the mock makes
	searchFee, fetchFee       ledger.Money // their price per use
}

// fees is what the case's uses cost.
func (c *hostedCase) fees() ledger.Money {
	return ledger.Money(c.searches)*c.searchFee + ledger.Money(c.fetches)*c.fetchFee + ledger.Money(c.images)*feeImage
}

// hostedCases use each priced model's hosted tools in every client format,
// streamed and not.
func hostedCases() []hostedCase {
	var cs []hostedCase
	for _, stream := range []bool{false, true} {
		s, ss, gen := "", "", ":generateContent"
		if stream {
			s, ss, gen = `,"stream":true`, " stream", ":streamGenerateContent?alt=sse"
		}
		cs = append(cs,
			hostedCase{name: "responses forced web_search" + ss, path: "/v1/responses",
				body:     `{"model":"searcher","input":"look it up mock:web_search=3","tools":[{"type":"web_search_preview"}],"tool_choice":{"type":"web_search_preview"}` + s + `}`,
				searches: 3, searchFee: feeSearch},
			hostedCase{name: "responses image_generation" + ss, path: "/v1/responses",
				body:   `{"model":"searcher","input":"draw it mock:image_generation=2","tools":[{"type":"image_generation"}],"tool_choice":{"type":"image_generation"}` + s + `}`,
				images: 2},
			hostedCase{name: "chat web_search_options" + ss, path: "/v1/chat/completions",
				body:     `{"model":"searcher","messages":[{"role":"user","content":"look it up"}],"web_search_options":{}` + s + `}`,
				searches: 1, searchFee: feeSearch},
			hostedCase{name: "messages forced web_search" + ss, path: "/v1/messages",
				body: `{"model":"claude-searcher","max_tokens":200,"messages":[{"role":"user","content":"look it up mock:web_search=4"}],` +
					`"tools":[{"type":"web_search_20250305","name":"web_search","max_uses":4}],"tool_choice":{"type":"tool","name":"web_search"}` + s + `}`,
				searches: 4, searchFee: feeSearch},
			hostedCase{name: "messages web_search and web_fetch" + ss, path: "/v1/messages",
				body: `{"model":"claude-fetcher","max_tokens":200,"messages":[{"role":"user","content":"read it mock:web_search=1 mock:web_fetch=2"}],` +
					`"tools":[{"type":"web_search_20250305","name":"web_search"},{"type":"web_fetch_20250910","name":"web_fetch"}]` + s + `}`,
				searches: 1, fetches: 2, searchFee: feeSearch, fetchFee: feeFetch},
			hostedCase{name: "gemini googleSearch" + ss, path: "/v1beta/models/gemini-searcher" + gen,
				body:     `{"contents":[{"role":"user","parts":[{"text":"look it up mock:web_search=3"}]}],"tools":[{"googleSearch":{}}]}`,
				searches: 3, searchFee: feeGeminiSearch},
			hostedCase{name: "gemini urlContext" + ss, path: "/v1beta/models/gemini-searcher" + gen,
				body:    `{"contents":[{"role":"user","parts":[{"text":"read it mock:web_fetch=2"}]}],"tools":[{"url_context":{}}]}`,
				fetches: 2, fetchFee: 0},
		)
	}
	return cs
}

// TestRedTeamHostedToolsBilled: every hosted-tool use the upstream makes is
// on the bill: the usage row counts them, the cost is the tokens plus the
// fees, the balance falls by exactly that, whatever the client format and
// stream mode.
func TestRedTeamHostedToolsBilled(t *testing.T) {
	g, acct, auth := redTeam(t, "10.00")
	balance := ledger.Money(10_000_000_000)
	for _, tc := range hostedCases() {
		t.Run(tc.name, func(t *testing.T) {
			r := g.do("POST", tc.path, tc.body, auth...)
			if r.status != 200 {
				t.Fatalf("%d %s", r.status, r.body)
			}
			row := g.rows(acct)[0]
			fees := tc.fees()
			want := cost(row.Tokens.Input, row.Tokens.Output) + fees
			if row.Hosted != (ledger.HostedUses{WebSearch: tc.searches, WebFetch: tc.fetches, ImageGeneration: tc.images}) {
				t.Errorf("row counts %+v, want %d searches, %d fetches, %d images", row.Hosted, tc.searches, tc.fetches, tc.images)
			}
			if row.HostedCost != fees || row.Cost != want || row.Charged != want || row.Tokens.Output == 0 {
				t.Errorf("row cost %s (hosted %s) charged %s, want %s (fees %s)", row.Cost, row.HostedCost, row.Charged, want, fees)
			}
			balance -= want
			if bal, held := g.balance(acct); bal != balance || held != 0 {
				t.Errorf("balance %s held %s, want %s", bal, held, balance)
			}
		})
	}
	// a translated route drops the tool: no search happens, none is billed
	r := g.do("POST", "/v1/chat/completions", `{"model":"claude-searcher","messages":[{"role":"user","content":"hi"}],"web_search_options":{}}`, auth...)
	if row := g.rows(acct)[0]; r.status != 200 || row.HostedCost != 0 || !strings.Contains(r.header.Get("X-Modelgate-Dropped"), "web_search_options") {
		t.Errorf("chat search to an Anthropic upstream: %d, dropped %q, row %+v", r.status, r.header.Get("X-Modelgate-Dropped"), row.Hosted)
	}
	g.audit()
}

// TestRedTeamCutStreamBillsSearches: a stream cut after the upstream
// searched, before its usage arrives, still bills the searches it shows
// (Anthropic server_tool_use blocks, Responses web_search_call items).
func TestRedTeamCutStreamBillsSearches(t *testing.T) {
	g, acct, auth := redTeam(t, "1.00")
	for _, tc := range []struct{ path, body string }{
		{"/v1/messages", `{"model":"claude-searcher","max_tokens":200,"stream":true,"messages":[{"role":"user","content":"look mock:web_search=2 mock:cut=1"}],` +
			`"tools":[{"type":"web_search_20250305","name":"web_search"}]}`},
		{"/v1/responses", `{"model":"searcher","input":"look mock:web_search=2 mock:cut=1","stream":true,"tools":[{"type":"web_search"}]}`},
	} {
		g.do("POST", tc.path, tc.body, auth...)
		row := g.rows(acct)[0]
		if row.Hosted.WebSearch != 2 || row.HostedCost != 2*feeSearch || row.Charged < 2*feeSearch {
			t.Errorf("%s: cut stream billed %+v, hosted %s, charged %s; want 2 searches", tc.path, row.Hosted, row.HostedCost, row.Charged)
		}
	}
	g.audit()
}

// TestRedTeamUnpricedHostedTools: a model that prices no hosted tool never
// lets the upstream use one. Offered, the tool is removed from the body the
// upstream gets and named in x-modelgate-dropped (Codex offers web_search
// on every call); forced by tool_choice, the request is a 400 naming
// tool_choice and the tool, with nothing sent upstream.
func TestRedTeamUnpricedHostedTools(t *testing.T) {
	g, acct, auth := redTeam(t, "1.00")
	offered := []struct {
		name, path, body, dropped, tool string
	}{
		{"responses", "/v1/responses", `{"model":"` + testModel + `","input":"look mock:web_search=2","tools":[{"type":"web_search"},{"type":"function","name":"f"}]}`,
			"web_search", `"type":"web_search"`},
		{"responses image", "/v1/responses", `{"model":"` + testModel + `","input":"draw mock:image_generation=2","stream":true,"tools":[{"type":"image_generation"}]}`,
			"image_generation", `"type":"image_generation"`},
		{"chat", "/v1/chat/completions", chatBody(testModel, "look", `"web_search_options":{}`), "web_search_options", `"web_search_options"`},
		{"messages", "/v1/messages", `{"model":"claude-test","max_tokens":100,"messages":[{"role":"user","content":"look mock:web_search=2"}],` +
			`"tools":[{"type":"web_search_20250305","name":"web_search"},{"type":"web_fetch_20250910","name":"web_fetch"}]}`,
			"tools.web_search,tools.web_fetch", `"type":"web_`},
		{"gemini", "/v1beta/models/gemini-test:generateContent", `{"contents":[{"role":"user","parts":[{"text":"look mock:web_search=2"}]}],` +
			`"tools":[{"googleSearch":{},"functionDeclarations":[{"name":"f"}]},{"google_search_retrieval":{}},{"urlContext":{}},{"googleMaps":{}}]}`,
			"tools.googleSearch,tools.googleSearchRetrieval,tools.urlContext,tools.googleMaps", `oogle`},
		{"priced model, unpriced tool", "/v1/messages", `{"model":"claude-searcher","max_tokens":100,"messages":[{"role":"user","content":"x mock:web_fetch=1"}],` +
			`"tools":[{"type":"web_search_20250305","name":"web_search"},{"type":"web_fetch_20250910","name":"web_fetch"}]}`, "tools.web_fetch", `"type":"web_fetch`},
	}
	for _, tc := range offered {
		g.mock.Reset()
		r := g.do("POST", tc.path, tc.body, auth...)
		if r.status != 200 {
			t.Fatalf("%s: %d %s", tc.name, r.status, r.body)
		}
		sent := string(g.mock.Requests()[0].Body)
		if tc.tool != "" && strings.Contains(sent, tc.tool) {
			t.Errorf("%s: the upstream got the unpriced tool: %s", tc.name, sent)
		}
		if d := r.header.Get("X-Modelgate-Dropped"); d != tc.dropped {
			t.Errorf("%s: x-modelgate-dropped %q, want %q", tc.name, d, tc.dropped)
		}
		for _, used := range []string{"web_search_call", "server_tool_use", "groundingMetadata", "url_citation", "image_generation_call"} {
			if strings.Contains(r.body, used) {
				t.Errorf("%s: the upstream used a hosted tool (%s) nobody pays for: %s", tc.name, used, r.body)
			}
		}
		if row := g.rows(acct)[0]; row.Hosted != (ledger.HostedUses{}) || row.HostedCost != 0 {
			t.Errorf("%s: row %+v", tc.name, row.Hosted)
		}
	}
	// the function declaration sharing a Tool object with googleSearch stays
	g.mock.Reset()
	g.do("POST", offered[4].path, offered[4].body, auth...)
	if sent := string(g.mock.Requests()[0].Body); !strings.Contains(sent, `"tools":[{"functionDeclarations":[{"name":"f"}]}]`) {
		t.Errorf("gemini tools sent: %s", sent)
	}

	rows := len(g.rows(acct))
	bal, _ := g.balance(acct)
	g.mock.Reset()
	for _, tc := range []struct{ name, path, body, field string }{
		{"responses", "/v1/responses", `{"model":"` + testModel + `","input":"x","tools":[{"type":"web_search_preview"}],"tool_choice":{"type":"web_search_preview"}}`, "tools[0]"},
		{"responses allowed_tools", "/v1/responses", `{"model":"` + testModel + `","input":"x","tools":[{"type":"image_generation"}],` +
			`"tool_choice":{"type":"allowed_tools","mode":"required","tools":[{"type":"image_generation"}]}}`, "tools[0]"},
		{"messages", "/v1/messages", `{"model":"claude-test","max_tokens":100,"messages":[{"role":"user","content":"x"}],` +
			`"tools":[{"type":"web_search_20250305","name":"web_search"}],"tool_choice":{"type":"tool","name":"web_search"}}`, "tools.0"},
		{"messages, priced model", "/v1/messages", `{"model":"claude-searcher","max_tokens":100,"messages":[{"role":"user","content":"x"}],` +
			`"tools":[{"type":"web_fetch_20250910","name":"fetch"}],"tool_choice":{"type":"tool","name":"fetch"}}`, "tools.0"},
	} {
		r := g.do("POST", tc.path, tc.body, auth...)
		param, msg := errorParam(r.body)
		if r.status != 400 || !strings.Contains(msg, "'tool_choice'") || !strings.Contains(msg, "("+tc.field+")") ||
			(param != "" && param != "tool_choice") {
			t.Errorf("forced %s: %d %s, want 400 naming tool_choice and %s", tc.name, r.status, r.body, tc.field)
		}
	}
	if n := len(g.mock.Requests()); n != 0 {
		t.Errorf("forced unpriced tools reached the upstream %d times", n)
	}
	if b, held := g.balance(acct); b != bal || held != 0 || len(g.rows(acct)) != rows {
		t.Errorf("refusals were billed: balance %s held %s", b, held)
	}
	g.audit()
}

// TestRedTeamHostedToolsHeld: the hold covers the hosted tools a request
// may use before the call (its max_uses, or the default cap the gateway
// sends upstream, × (fee + result tokens)): a balance that covers the
// tokens but not the searches is refused before anything is sent; capping
// the uses lowers the hold.
func TestRedTeamHostedToolsHeld(t *testing.T) {
	g, acct, auth := redTeam(t, "0.05")
	msgs := func(tool string) string {
		return `{"model":"claude-searcher","max_tokens":100,"messages":[{"role":"user","content":"look"}],"tools":[` + tool + `]}`
	}
	// 5 searches × (0.01 + 16,384 tokens × 0.5/1M) = 0.091 > 0.05
	r := g.do("POST", "/v1/messages", msgs(`{"type":"web_search_20250305","name":"web_search"}`), auth...)
	if r.status != 403 || !strings.Contains(r.body, "billing_error") {
		t.Fatalf("a balance below the searches' hold: %d %s, want 403", r.status, r.body)
	}
	g.untouched(acct, 50_000_000)

	// max_uses 1: 0.018 + tokens
	r = g.do("POST", "/v1/messages", msgs(`{"type":"web_search_20250305","name":"web_search","max_uses":1}`), auth...)
	if r.status != 200 {
		t.Fatalf("max_uses 1: %d %s", r.status, r.body)
	}
	g.audit()
}

// TestRedTeamHostedCapsOnTheWire: the cap the hold assumes is sent
// upstream where the vendor has one (Anthropic max_uses, and
// max_content_tokens for a fetch; Responses max_tool_calls), so that the
// upstream cannot use more than was held; a client's own cap stays.
func TestRedTeamHostedCapsOnTheWire(t *testing.T) {
	g, _, auth := redTeam(t, "1.00")
	g.do("POST", "/v1/messages", `{"model":"claude-fetcher","max_tokens":100,"messages":[{"role":"user","content":"look"}],"tools":[`+
		`{"type":"web_search_20250305","name":"web_search"},{"type":"web_fetch_20250910","name":"web_fetch","max_uses":2}]}`, auth...)
	sent := string(g.mock.Requests()[0].Body)
	if !strings.Contains(sent, `{"type":"web_search_20250305","name":"web_search","max_uses":5}`) ||
		!strings.Contains(sent, `{"type":"web_fetch_20250910","name":"web_fetch","max_uses":2,"max_content_tokens":65536}`) {
		t.Errorf("the Anthropic upstream got %s", sent)
	}
	g.mock.Reset()
	g.do("POST", "/v1/responses", `{"model":"searcher","input":"look","tools":[{"type":"web_search"}]}`, auth...)
	if sent := string(g.mock.Requests()[0].Body); !strings.Contains(sent, `"max_tool_calls":5`) {
		t.Errorf("the Responses upstream got %s", sent)
	}
	g.mock.Reset()
	g.do("POST", "/v1/responses", `{"model":"searcher","input":"look","tools":[{"type":"web_search"}],"max_tool_calls":2}`, auth...)
	if sent := string(g.mock.Requests()[0].Body); !strings.Contains(sent, `"max_tool_calls":2`) || strings.Contains(sent, `"max_tool_calls":5`) {
		t.Errorf("the client's own cap: the Responses upstream got %s", sent)
	}
}

// TestRedTeamDocumentsByURLRefused: a document the upstream would fetch by
// URL has no bound for the hold (a 100-page PDF); it is refused with a 400
// naming the field, before anything is held or sent. (Images by URL stay:
// their token cost has a fixed bound.)
func TestRedTeamDocumentsByURLRefused(t *testing.T) {
	g, acct, auth := redTeam(t, "1.00")
	for _, tc := range []struct{ name, path, body, field string }{
		{"messages", "/v1/messages", `{"model":"claude-test","max_tokens":100,"messages":[{"role":"user","content":[` +
			`{"type":"document","source":{"type":"url","url":"https://example.com/huge.pdf"}},{"type":"text","text":"summarise"}]}]}`,
			"messages.0.content.0.source.url"},
		{"responses", "/v1/responses", `{"model":"` + testModel + `","input":[{"role":"user","content":[` +
			`{"type":"input_file","file_url":"https://example.com/huge.pdf"},{"type":"input_text","text":"summarise"}]}]}`,
			"input[0].content[0].file_url"},
	} {
		r := g.do("POST", tc.path, tc.body, auth...)
		param, msg := errorParam(r.body)
		if r.status != 400 || (param != tc.field && !strings.Contains(msg, tc.field)) {
			t.Errorf("%s: %d %s, want 400 naming %s", tc.name, r.status, r.body, tc.field)
		}
	}
	g.untouched(acct, 1_000_000_000)
}

// Hole 3: image edit forms

// editPart is one part of an edit form: a text field, or a file when
// filename is set.
type editPart struct{ name, filename, content string }

func editField(name, value string) editPart { return editPart{name: name, content: value} }

// editFile is an image file part of size bytes.
func editFile(name string, size int) editPart {
	return editPart{name: name, filename: "in.png", content: string(imageBytes(size, uint64(size)))}
}

// editFormOf is a multipart form of parts, in order.
func editFormOf(parts ...editPart) (contentType string, body []byte) {
	var b bytes.Buffer
	mw := multipart.NewWriter(&b)
	for _, p := range parts {
		h := textproto.MIMEHeader{}
		if p.filename == "" {
			h.Set("Content-Disposition", fmt.Sprintf("form-data; name=%q", p.name))
		} else {
			h.Set("Content-Disposition", fmt.Sprintf("form-data; name=%q; filename=%q", p.name, p.filename))
			h.Set("Content-Type", "image/png")
		}
		w, _ := mw.CreatePart(h)
		io.WriteString(w, p.content)
	}
	mw.Close()
	return mw.FormDataContentType(), b.Bytes()
}

// editRecord is the mock's record of an edit: the fields it read and what
// it made.
type editRecord struct {
	Fields map[string]string          `json:"fields"`
	Files  []struct{ Name string }    `json:"files"`
	Served *mockupstream.ImagesServed `json:"served"`
}

// upstreamEdits waits until the mock has finished every request it began,
// then returns the edits it recorded after the first skip records.
func upstreamEdits(t *testing.T, g *testGateway, skip int) []editRecord {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for g.mock.KeyStats(upstreamKey).Active != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the mock upstream is still serving")
		}
		time.Sleep(5 * time.Millisecond)
	}
	var out []editRecord
	for _, r := range g.mock.Requests()[skip:] {
		if r.Path != "/v1/images/edits" {
			continue
		}
		var e editRecord
		if err := json.Unmarshal(r.Body, &e); err != nil {
			t.Fatalf("the mock's record %s: %v", r.Body, err)
		}
		out = append(out, e)
	}
	return out
}

// checkBilled runs send, then checks the account's bill against what the
// mock upstream made meanwhile: billed at least its cost at the model's
// prices (its token usage, or per image for dalle-test), every new usage
// row within its hold (never over_hold) and debited whole, nothing left
// held. It returns what was made and the upstream's records of the edits.
func checkBilled(t *testing.T, g *testGateway, acct, model string, send func()) (made mockupstream.ImagesServed, edits []editRecord) {
	t.Helper()
	before, _ := g.balance(acct)
	rowsBefore := len(g.rows(acct))
	skip := len(g.mock.Requests())
	send()
	edits = upstreamEdits(t, g, skip)
	for _, e := range edits {
		if e.Served != nil {
			made.Images += e.Served.Images
			made.InputTokens += e.Served.InputTokens
			made.OutputTokens += e.Served.OutputTokens
		}
	}
	upstreamCost := ledger.Money(made.InputTokens)*imagePriceIn + ledger.Money(made.OutputTokens)*imagePriceOut
	if model == "dalle-test" {
		upstreamCost = ledger.Money(made.Images) * dallePerImage
	}
	after, held := g.balance(acct)
	billed := before - after
	rows := g.rows(acct)
	var charged ledger.Money
	for _, r := range rows[:len(rows)-rowsBefore] {
		charged += r.Charged
		if r.OverHold || r.Charged != r.Cost {
			t.Errorf("row %s: charged %s of %s, hold %s, over_hold %v", r.RequestID, r.Charged, r.Cost, r.Hold, r.OverHold)
		}
	}
	if billed < upstreamCost || charged != billed || held != 0 {
		t.Errorf("billed %s (rows %s, still held %s) for upstream work costing %s: %d images, %d input and %d output tokens",
			billed, charged, held, upstreamCost, made.Images, made.InputTokens, made.OutputTokens)
	}
	return made, edits
}

// runningSpool is the bound on spooled uploads of the running gateway.
func runningSpool(t *testing.T) *images.Spool {
	t.Helper()
	sp := gateway.RunningImageSpool()
	if sp == nil {
		t.Fatal("no upload spool")
	}
	return sp
}

// TestRedTeamImageEditForms: an edit form cannot make the upstream do more
// than was held for it. Each field but the input images may come once (a
// second n, model, quality, size, prompt or mask is a 400 naming it, before
// or after the hold); a part that comes after the first image file that
// follows the model (when the request is held) is forwarded only if the
// hold still covers the form: n, more images (at high input fidelity), a
// long prompt beyond what the balance could hold are 400s naming them and
// never reach the upstream, while with the balance to cover them (the hold
// is taken for the dearest the form can still ask) they are served and
// billed. Files other than the images and the mask are refused. Forms in
// the orders real clients send (the Go SDK's, curl's documented one) work.
// Before any file is spooled (a file before the model), the balance must
// cover an edit at the cheapest image model.
func TestRedTeamImageEditForms(t *testing.T) {
	g := startGateway(t, gatewayOptions{extra: imageModels})
	model, prompt := editField("model", "image-test"), editField("prompt", imageTestPrompt)
	low, square := editField("quality", "low"), editField("size", "1024x1024")
	image := editFile("image[]", 2048)
	images16 := make([]editPart, 16)
	for i := range images16 {
		images16[i] = editFile("image[]", 1024+i)
	}
	longPrompt := editField("prompt", strings.Repeat("a ", images.MaxPromptRunes/2)) // 16000 words
	cat := func(groups ...[]editPart) []editPart {
		var out []editPart
		for _, g := range groups {
			out = append(out, g...)
		}
		return out
	}
	for _, tc := range []struct {
		name    string
		balance string
		model   string // default image-test
		parts   []editPart
		status  int
		param   string // the field a 400 names
		images  int    // images made, for a 200
		message string // in the refusal
	}{
		// the reproduction: -F n=1 -F image[]=@fox.png -F n=10 made 10
		// images costing 1.67 and charged 0.33, all that was left
		{name: "n again after the image", balance: "0.33",
			parts: []editPart{editField("n", "1"), model, prompt, image, editField("n", "10")}, status: 400, param: "n"},
		{name: "n twice before the image", balance: "10.00",
			parts: []editPart{editField("n", "1"), editField("n", "10"), model, prompt, image}, status: 400, param: "n"},
		{name: "model again after the image", balance: "10.00",
			parts: []editPart{model, prompt, image, editField("model", "dalle-test")}, status: 400, param: "model"},
		{name: "quality raised after the image", balance: "0.05",
			parts: []editPart{low, editField("n", "1"), model, prompt, image, editField("quality", "high")}, status: 400, param: "quality"},
		{name: "size changed after the image", balance: "10.00",
			parts: []editPart{square, low, model, prompt, image, editField("size", "1536x1024")}, status: 400, param: "size"},
		{name: "a second mask", balance: "10.00",
			parts: []editPart{model, prompt, image, editFile("mask", 64), editFile("mask", 65)}, status: 400, param: "mask"},
		{name: "a file that is no input", balance: "10.00",
			parts: []editPart{model, prompt, image, editFile("extra", 64)}, status: 400, param: "extra"},
		{name: "n after the image, beyond the hold", balance: "0.10",
			parts: []editPart{model, prompt, low, square, image, editField("n", "10")}, status: 400, param: "n",
			message: "asks for more than was held"},
		{name: "n after the image, covered", balance: "10.00",
			parts: []editPart{model, prompt, low, square, image, editField("n", "10")}, status: 200, images: 10},
		{name: "n after the image, beyond the hold, per-image price", balance: "0.10", model: "dalle-test",
			parts: []editPart{editField("model", "dalle-test"), prompt, image, editField("n", "10")}, status: 400, param: "n"},
		{name: "images after the hold at high fidelity, beyond it", balance: "0.20",
			parts:  cat([]editPart{model, prompt, low, square, editField("n", "1"), editField("input_fidelity", "high")}, images16),
			status: 400, param: "image[]"},
		{name: "images after the hold at high fidelity, covered", balance: "10.00",
			parts:  cat([]editPart{model, prompt, low, square, editField("n", "1"), editField("input_fidelity", "high")}, images16),
			status: 200, images: 1},
		{name: "a long prompt after the image, beyond the hold", balance: "0.06",
			parts: []editPart{model, low, square, editField("n", "1"), image, longPrompt}, status: 400, param: "prompt"},
		{name: "a long prompt after the image, covered", balance: "10.00",
			parts: []editPart{model, low, square, editField("n", "1"), image, longPrompt}, status: 200, images: 1},
		{name: "quality after the image, held at its dearest", balance: "0.25",
			parts: []editPart{model, prompt, square, editField("n", "1"), image, editField("quality", "high")}, status: 200, images: 1},
		{name: "curl's documented order", balance: "10.00",
			parts: []editPart{model, image, editFile("image[]", 3000), editFile("image[]", 3001), editFile("image[]", 3002), prompt}, status: 200, images: 1},
		{name: "an image before the model, below any image's price", balance: "0.003",
			parts: []editPart{editFile("image", 1<<20), model, prompt}, status: 403, message: "cheapest image model"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			acct, key := g.account(tc.balance)
			m := cmp.Or(tc.model, "image-test")
			var r response
			made, edits := checkBilled(t, g, acct, m, func() {
				ct, body := editFormOf(tc.parts...)
				r = g.do("POST", "/v1/images/edits", string(body), "Authorization", "Bearer "+key, "Content-Type", ct)
			})
			var e struct {
				Error struct{ Message, Type, Param string }
			}
			json.Unmarshal([]byte(r.body), &e)
			if r.status != tc.status || (tc.status != 200 && (e.Error.Param != tc.param || !strings.Contains(e.Error.Message, tc.message))) {
				t.Fatalf("%d %s", r.status, r.body)
			}
			if tc.status == 400 && (e.Error.Type != "invalid_request_error" || !strings.Contains(e.Error.Message, "'"+tc.param+"'")) {
				t.Fatalf("the 400 does not name the field: %s", r.body)
			}
			if made.Images != tc.images {
				t.Fatalf("the upstream made %d images, want %d", made.Images, tc.images)
			}
			if tc.status == 400 {
				// the refused part (the last) never reached the upstream
				last := tc.parts[len(tc.parts)-1]
				sent := 0
				for _, p := range tc.parts {
					if p.name == last.name && (p.filename != "") == (last.filename != "") {
						sent++
					}
				}
				for _, up := range edits {
					got := 0
					for _, f := range up.Files {
						if f.Name == last.name {
							got++
						}
					}
					if last.filename == "" && up.Fields[last.name] == last.content || last.filename != "" && got >= sent {
						t.Fatalf("the upstream got the refused %s: %+v", last.name, up)
					}
				}
			}
			if used := runningSpool(t).Used(); used != 0 {
				t.Fatalf("%d bytes still counted in the upload spool", used)
			}
		})
	}

	// the Go SDK's order (fields sorted by name: the images and the mask
	// before the model), every field set: read whole before the hold
	t.Run("the Go SDK's order", func(t *testing.T) {
		acct, key := g.account("10.00")
		c := g.client(key)
		made, edits := checkBilled(t, g, acct, "image-test", func() {
			_, err := c.Images.Edit(context.Background(), openai.ImageEditParams{
				Image: openai.ImageEditParamsImageUnion{OfFileArray: []io.Reader{
					openai.File(bytes.NewReader(imageBytes(4096, 1)), "a.png", "image/png"),
					openai.File(bytes.NewReader(imageBytes(4096, 2)), "b.png", "image/png")}},
				Mask:          openai.File(bytes.NewReader(imageBytes(512, 3)), "mask.png", "image/png"),
				Background:    openai.ImageEditParamsBackgroundTransparent,
				InputFidelity: openai.ImageEditParamsInputFidelityHigh,
				Model:         "image-test",
				N:             openai.Int(2),
				OutputFormat:  openai.ImageEditParamsOutputFormatPNG,
				Prompt:        imageTestPrompt,
				Quality:       openai.ImageEditParamsQualityLow,
				Size:          openai.ImageEditParamsSize1024x1024,
			})
			if err != nil {
				t.Fatal(err)
			}
		})
		if made.Images != 2 || len(edits) != 1 || edits[0].Fields["n"] != "2" || edits[0].Fields["input_fidelity"] != "high" || len(edits[0].Files) != 3 {
			t.Fatalf("made %+v from %+v", made, edits)
		}
	})
	g.audit()
}

// TestRedTeamImageEditSpool: the files that forms send before their model
// wait in a spool bounded for the whole gateway (max_image_spool): an
// upload that does not fit beside the others is a 503 in OpenAI's format,
// with Retry-After and the way out (send the model first), nothing billed;
// the others go on, and every byte is given back.
func TestRedTeamImageEditSpool(t *testing.T) {
	g := startGateway(t, gatewayOptions{extra: imageModels + "\t\tmax_image_spool 5MiB\n"})
	acct, key := g.account("10.00")
	sp := runningSpool(t)
	if sp.Limit() != 5<<20 {
		t.Fatalf("spool limit %d", sp.Limit())
	}
	// the first upload stops halfway through its image, spooled
	reached, resume := make(chan struct{}), make(chan struct{})
	pr, pw := io.Pipe()
	ct, write := editForm(pw, "image-test", true, 4<<20, func() error {
		close(reached)
		<-resume
		return nil
	})
	go func() { pw.CloseWithError(write()) }()
	req, _ := http.NewRequest("POST", gatewayAddr+"/v1/images/edits", pr)
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", ct)
	var first struct {
		status int
		body   string
		err    error
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		resp, err := http.DefaultClient.Do(req)
		if first.err = err; err == nil {
			first.status = resp.StatusCode
			first.body = readAllString(resp.Body)
			resp.Body.Close()
		}
	}()
	<-reached
	deadline := time.Now().Add(10 * time.Second)
	for sp.Used() < 2<<20 {
		if time.Now().After(deadline) {
			t.Fatalf("the first upload's half is not spooled: %d bytes", sp.Used())
		}
		time.Sleep(5 * time.Millisecond)
	}
	made, _ := checkBilled(t, g, acct, "image-test", func() {
		r := postForm(t, key, func(w io.Writer) (string, func() error) {
			return editForm(w, "image-test", true, 4<<20, nil)
		})
		if r.status != 503 || r.header.Get("Retry-After") == "" || !strings.Contains(r.body, `{"error":{"message":"The gateway is holding as many image uploads as it can (5.0 MiB)`) ||
			!strings.Contains(r.body, "send the model field first") {
			t.Fatalf("an upload beyond the spool: %d %s", r.status, r.body)
		}
	})
	if made.Images != 0 {
		t.Fatalf("the refused upload made %d images", made.Images)
	}
	close(resume)
	wg.Wait()
	if first.err != nil || first.status != 200 {
		t.Fatalf("the first upload: %v %d %s", first.err, first.status, first.body)
	}
	// the model first: forwarded as it arrives, whatever the spool holds
	r := postForm(t, key, func(w io.Writer) (string, func() error) {
		return editForm(w, "image-test", false, 8<<20, nil)
	})
	if r.status != 200 {
		t.Fatalf("model first: %d %s", r.status, r.body)
	}
	if sp.Used() != 0 {
		t.Fatalf("%d bytes still counted in the spool", sp.Used())
	}
	g.audit()
}

// Hole 6: two servers on one SQLite ledger

// TestRedTeamTwoServersOneSQLite: each server keeps its holds in its own
// memory, so two server processes on one SQLite file would both spend the
// same balance. A second gateway process on the running gateway's ledger
// refuses to start, saying why and what to use instead (were it to start,
// the two race on one account here and the overdraft shows); `caddy
// validate` and the CLI (`caddy modelgate …`, by --config and by --db)
// work beside the running gateway; a reload keeps the lock; a server killed
// with SIGKILL leaves its file to the next one.
func TestRedTeamTwoServersOneSQLite(t *testing.T) {
	g := startGateway(t, gatewayOptions{})
	// an account whose balance covers the hold of the race's request, not
	// two of its answers
	probeAcct, probeKey := g.account("1.00")
	if st, body := generateAt(gatewayAddr, "openai", testModel, raceText, true, probeKey); st != 200 {
		t.Fatalf("probe: %d %s", st, body)
	}
	probe := g.rows(probeAcct)[0]
	if 2*probe.Charged <= probe.Hold {
		t.Fatalf("the race's request is held at %s and costs %s: two would not overdraw", probe.Hold, probe.Charged)
	}
	acct, key := g.account(probe.Hold.String())
	dir := t.TempDir()
	bin := buildGateway(t, dir)
	cfg, base := secondConfig(t, g, dir, g.dbPath)

	refused := func(what string) {
		t.Helper()
		b := runGateway(t, bin, cfg, t.TempDir(), base)
		if b.serving(60 * time.Second) {
			raceTwoServers(t, g, b, acct, key)
			t.Fatalf("%s: a second server started on the running gateway's ledger", what)
		}
		select {
		case <-b.exited:
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: a second server neither serves nor exits:\n%s", what, b.output())
		}
		out := b.output()
		for _, want := range []string{"the SQLite file is in use by another modelgate server", g.dbPath,
			fmt.Sprintf("held by process %d", os.Getpid()), "One server per SQLite file", "holds in its own memory",
			"a shared PostgreSQL ledger", "caddy modelgate commands work beside a running server"} {
			if !strings.Contains(out, want) {
				t.Errorf("%s: the refusal does not say %q:\n%s", what, want, out)
			}
		}
		if b.cmd.ProcessState.Success() {
			t.Errorf("%s: the refused server exited with success", what)
		}
		t.Logf("%s, refused:\n%s", what, out[strings.LastIndex(out, "\n{")+1:])
	}
	refused("beside the gateway")

	caddy := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(bin, args...)
		cmd.Env = append(os.Environ(), "HOME="+dir, "XDG_DATA_HOME="+dir, "XDG_CONFIG_HOME="+dir)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output() // standard output only: the commands say on stderr which ledger they opened
		if err != nil {
			t.Fatalf("caddy %s: %v\n%s%s", strings.Join(args, " "), err, out, stderr.Bytes())
		}
		return string(out)
	}
	// caddy validate provisions a config but never starts it
	caddy("validate", "--config", cfg)

	// the CLI beside the running gateway, from the Caddyfile and by --db
	cli := func(args ...string) string { return caddy(append([]string{"modelgate"}, args...)...) }
	before, _ := g.balance(acct)
	cli("credit", "--config", cfg, "--account", acct, "--amount", "1.00", "--reason", "red team")
	if after, _ := g.balance(acct); after-before != ledger.NanosPerUnit {
		t.Fatalf("the CLI's credit: balance %s → %s", before, after)
	}
	id := strings.TrimSpace(cli("account", "create", "--db", g.dbPath, "--email", "cli@example.com"))
	if a, err := g.store.GetAccount(context.Background(), id); err != nil || a.Email != "cli@example.com" {
		t.Fatalf("the CLI's account %q: %+v %v", id, a, err)
	}

	// a reload keeps the ledger and its lock
	g.reload()
	if r := g.generate("openai", testModel, "hello", false, key); r.status != 200 {
		t.Fatalf("after the reload: %d %s", r.status, r.body)
	}
	refused("after a reload")

	// SIGKILL: the system drops the lock with its holder
	other := filepath.Join(t.TempDir(), "other.db")
	cfg2, base2 := secondConfig(t, g, t.TempDir(), other)
	p1 := runGateway(t, bin, cfg2, t.TempDir(), base2)
	if !p1.serving(60 * time.Second) {
		t.Fatalf("a server on its own file did not start:\n%s", p1.output())
	}
	p1.kill()
	p2 := runGateway(t, bin, cfg2, t.TempDir(), base2)
	if !p2.serving(60 * time.Second) {
		t.Fatalf("a server on the file of one killed did not start:\n%s", p2.output())
	}
	g.audit()
}

// raceText is the request of the race: its answer is capped at the
// request's max_tokens.
const raceText = "mock:tokens=200 mock:latency=300ms race"

// raceTwoServers shows what two servers on one ledger do: one streamed
// request on each, at once, on an account whose balance covers one; it
// fails the test if the upstream made more answers than were billed.
func raceTwoServers(t *testing.T, g *testGateway, b *secondInstance, acct, key string) {
	t.Helper()
	done := g.mock.KeyStats(upstreamKey).Completed
	var wg sync.WaitGroup
	statuses := make([]int, 2)
	for i, at := range []string{gatewayAddr, b.base} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			statuses[i], _ = generateAt(at, "openai", testModel, raceText, true, key)
		}()
	}
	wg.Wait()
	time.Sleep(500 * time.Millisecond) // both settled, or failed to
	made := g.mock.KeyStats(upstreamKey).Completed - done
	rows := rowsAt(t, g.dbPath, acct)
	a, _ := g.balance(acct)
	if int64(len(rows)) < made || a < 0 {
		t.Errorf("two servers on one ledger: the upstream made %d answers, %d were billed (statuses %v, balance %s)", made, len(rows), statuses, a)
	}
}
