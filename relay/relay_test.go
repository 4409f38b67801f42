package relay

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/modelgate/modelgate/formats"
	"github.com/modelgate/modelgate/ledger"
	"github.com/modelgate/modelgate/upstream"
)

// The relay without Caddy: a Service on a real SQLite ledger, a provider
// whose reverse proxy is a few lines that call RoundTrip, and a fake round
// tripper that plays the upstream's answer byte for byte.

// fakeUpstream answers every request with one canned response, recording
// the requests; cut ends the body with an error after its bytes.
type fakeUpstream struct {
	mu       sync.Mutex
	status   int
	header   http.Header
	body     string
	cut      bool
	requests []string
	// stream, if set, is the body of the next answer instead of body
	stream io.Reader
	// before, if set, runs as each request arrives (a test's clock moves)
	before func()
}

func (f *fakeUpstream) RoundTrip(req *http.Request) (*http.Response, error) {
	if f.before != nil {
		f.before()
	}
	b, _ := io.ReadAll(req.Body)
	f.mu.Lock()
	f.requests = append(f.requests, string(b))
	var body io.Reader = strings.NewReader(f.body)
	if f.stream != nil {
		body, f.stream = f.stream, nil
	}
	f.mu.Unlock()
	if f.cut {
		body = io.MultiReader(body, errReader{})
	}
	return &http.Response{StatusCode: f.status, Header: f.header.Clone(), Body: io.NopCloser(body), Request: req}, nil
}

// errReader is a connection that breaks.
type errReader struct{}

func (errReader) Read([]byte) (int, error) { return 0, errors.New("connection reset by peer") }

// testService is a Service with one model routed to fake, priced 1 and 2
// per token of input and output, and an account funded with credit nanos.
func testService(t *testing.T, format upstream.Format, fake *fakeUpstream, credit ledger.Money) (*Service, Principal) {
	t.Helper()
	return testServiceOn(t, ledger.Options{Path: filepath.Join(t.TempDir(), "ledger.db")}, format, fake, credit)
}

// testServiceOn is testService on the ledger opts opens.
func testServiceOn(t *testing.T, opts ledger.Options, format upstream.Format, fake *fakeUpstream, credit ledger.Money) (*Service, Principal) {
	t.Helper()
	ctx := context.Background()
	store, err := ledger.Open(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	up, err := upstream.NewRegistry(nil).NewProvider("fake", format, "http://upstream.test", []upstream.KeySpec{{Secret: "sk-fake", Weight: 1}}, upstream.HealthConfig{})
	if err != nil {
		t.Fatal(err)
	}
	p := &Provider{Provider: up, AnthropicVersion: "2023-06-01", FirstByteTimeout: 5 * time.Second,
		ResponseTimeout: 5 * time.Second, DrainTimeout: 5 * time.Second, Upstream: fake}
	m := &Model{ID: "m", Price: ledger.Price{Input: 1, Output: 2, CacheRead: 1, CacheWrite: 1}, MaxOutput: 100,
		Routes: []Route{{Provider: p, UpstreamModel: "up-m"}}}
	svc := &Service{Store: store, Logger: zap.NewNop(), Models: map[string]*Model{"m": m},
		Signatures: NewSignatureCache(10, time.Minute), MinOutput: 1, MaxAttempts: 1, MaxRequestBody: 1 << 20}
	svc.Metrics = NewMetrics()
	if err := svc.Metrics.Register(prometheus.NewRegistry(), store); err != nil {
		t.Fatal(err)
	}
	svc.Prepare()
	acct, err := store.CreateAccount(ctx, "", "default")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.Credit(ctx, ledger.CreditRequest{AccountID: acct.ID, Amount: credit, Reference: "test"}); err != nil {
		t.Fatal(err)
	}
	secret, _, err := store.CreateKey(ctx, acct.ID, "k")
	if err != nil {
		t.Fatal(err)
	}
	pr, err := store.Authenticate(secret)
	if err != nil {
		t.Fatal(err)
	}
	return svc, Principal{Principal: pr, Plan: &Plan{Name: "default"}}
}

// rows returns the account's usage rows.
func rows(t *testing.T, svc *Service, acct string) []ledger.UsageRecord {
	t.Helper()
	rs, err := svc.Store.UsageRows(context.Background(), ledger.UsageFilter{AccountID: acct})
	if err != nil {
		t.Fatal(err)
	}
	return rs
}

const anthropicHead = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"up-m\",\"content\":[],\"usage\":{\"input_tokens\":7,\"output_tokens\":1}}}\n\n" +
	"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n"

func anthropicDelta(text string) string {
	return "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"" + text + "\"}}\n\n"
}

const anthropicTail = "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n" +
	"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":40}}\n\n" +
	"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"

// TestGenerate: one request's bill, however the answer ends, in chat
// format on an Anthropic upstream (a translated stream).
func TestGenerate(t *testing.T) {
	sse := http.Header{"Content-Type": {"text/event-stream"}}
	long := strings.Repeat(anthropicDelta("twelve bytes"), 50) // 600 bytes of text: 150 tokens estimated
	for _, tc := range []struct {
		name     string
		fake     *fakeUpstream
		body     string
		status   int
		output   int64 // billed output tokens
		source   string
		outcome  string
		contains string
		leave    bool // the client goes away once the upstream was asked
	}{
		{"whole stream", &fakeUpstream{status: 200, header: sse, body: anthropicHead + long + anthropicTail},
			`{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`, 200, 40, "upstream", "ok", "data: [DONE]", false},
		// the whole stream arrives in one read, so no write to the client
		// fails before the end: the client's context says it left
		{"client left, the stream came whole", &fakeUpstream{status: 200, header: sse, body: anthropicHead + long + anthropicTail},
			`{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`, 200, 40, "upstream", "client_closed", "twelve bytes", true},
		{"cut before message_delta: never the placeholder", &fakeUpstream{status: 200, header: sse, body: anthropicHead + long, cut: true},
			`{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`, 200, 150, "estimated", "upstream_cut", "twelve bytes", false},
		{"error event", &fakeUpstream{status: 200, header: sse, body: anthropicHead + long +
			"event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n"},
			`{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`, 200, 150, "estimated", "upstream_error", `"error"`, false},
		{"not streamed", &fakeUpstream{status: 200, header: http.Header{"Content-Type": {"application/json"}},
			body: `{"id":"msg_1","type":"message","role":"assistant","model":"up-m","content":[{"type":"text","text":"hello"}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":7,"output_tokens":3}}`},
			`{"model":"m","messages":[{"role":"user","content":"hi"}]}`, 200, 3, "upstream", "ok", `"hello"`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			svc, p := testService(t, upstream.FormatAnthropic, tc.fake, 1_000_000)
			w := httptest.NewRecorder()
			r := httptest.NewRequest("POST", "/v1/chat/completions", strings.NewReader(tc.body))
			if tc.leave {
				ctx, cancel := context.WithCancel(r.Context())
				r, tc.fake.before = r.WithContext(ctx), cancel
			}
			svc.Generate(w, r, p, KindChat, "", "req_1")
			if w.Code != tc.status || !strings.Contains(w.Body.String(), tc.contains) {
				t.Fatalf("%d %s", w.Code, w.Body.String())
			}
			rs := rows(t, svc, p.AccountID)
			if len(rs) != 1 {
				t.Fatalf("%d rows", len(rs))
			}
			row := rs[0]
			if row.Tokens.Output != tc.output || row.Tokens.Input != 7 || row.UsageSource != tc.source || row.Outcome != tc.outcome ||
				row.Charged != ledger.Money(7+2*tc.output) {
				t.Fatalf("row %+v", row)
			}
			acct, _ := svc.Store.GetAccount(context.Background(), p.AccountID)
			if acct.Held != 0 || acct.Balance != 1_000_000-row.Charged {
				t.Fatalf("account %+v", acct)
			}
		})
	}
}

// TestUnpricedUsageBillsTheHold: an upstream whose usage is so large its
// cost overflows is billed the whole hold, never nothing.
func TestUnpricedUsageBillsTheHold(t *testing.T) {
	fake := &fakeUpstream{status: 200, header: http.Header{"Content-Type": {"application/json"}},
		body: `{"id":"msg_1","type":"message","role":"assistant","model":"up-m","content":[{"type":"text","text":"hello"}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":7,"output_tokens":4611686018427387904}}`}
	svc, p := testService(t, upstream.FormatAnthropic, fake, 1_000_000)
	w := httptest.NewRecorder()
	r := httptest.NewRequest("POST", "/v1/chat/completions", strings.NewReader(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`))
	svc.Generate(w, r, p, KindChat, "", "req_1")
	rs := rows(t, svc, p.AccountID)
	if len(rs) != 1 {
		t.Fatalf("%d rows (%d %s)", len(rs), w.Code, w.Body.String())
	}
	// the hold: the request's input estimate and its output cap (100) at
	// 2 a token
	if c := rs[0].Charged; c < 200 || c > 1000 {
		t.Fatalf("charged %s for an unpriceable usage, want the hold; row %+v", c, rs[0])
	}
	acct, _ := svc.Store.GetAccount(context.Background(), p.AccountID)
	if acct.Held != 0 || acct.Balance != 1_000_000-rs[0].Charged {
		t.Fatalf("account %+v", acct)
	}
}

// TestGenerateRefusals: what is refused holds nothing and reaches no
// upstream.
func TestGenerateRefusals(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		credit     ledger.Money
		status     int
	}{
		{"unknown model", `{"model":"nope","messages":[{"role":"user","content":"hi"}]}`, 1_000_000, 404},
		{"bad JSON", `{"model":`, 1_000_000, 400},
		{"balance below the input bound", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`, 10, 403},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fake := &fakeUpstream{status: 200}
			svc, p := testService(t, upstream.FormatOpenAI, fake, tc.credit)
			w := httptest.NewRecorder()
			svc.Generate(w, httptest.NewRequest("POST", "/v1/chat/completions", strings.NewReader(tc.body)), p, KindChat, "", "req_1")
			if w.Code != tc.status || !bytes.Contains(w.Body.Bytes(), []byte(`"error"`)) {
				t.Fatalf("%d %s", w.Code, w.Body.String())
			}
			if len(fake.requests) != 0 || len(rows(t, svc, p.AccountID)) != 0 {
				t.Fatalf("%d upstream requests, %d rows", len(fake.requests), len(rows(t, svc, p.AccountID)))
			}
		})
	}
}

// TestBilledUsage: the one place that decides usage or estimate.
func TestBilledUsage(t *testing.T) {
	for _, tc := range []struct {
		name        string
		u           formats.Usage
		final       bool
		outputBytes int64
		want        formats.Usage
		source      string
	}{
		{"final figures as reported", formats.Usage{Input: 10, Output: 3}, true, 4000, formats.Usage{Input: 10, Output: 3}, "upstream"},
		{"placeholder output raised to the bytes read", formats.Usage{Input: 10, Output: 1}, false, 400, formats.Usage{Input: 10, Output: 100}, "estimated"},
		{"running count above the estimate kept", formats.Usage{Input: 10, Output: 300}, false, 400, formats.Usage{Input: 10, Output: 300}, "estimated"},
		{"no input reported: the request's estimate", formats.Usage{}, false, 5, formats.Usage{Input: 42, Output: 2}, "estimated"},
	} {
		got, source := billedUsage(tc.u, tc.final, formats.EstimateTokens(tc.outputBytes), 42)
		if got != tc.want || source != tc.source {
			t.Errorf("%s: %+v %s, want %+v %s", tc.name, got, source, tc.want, tc.source)
		}
	}
}

// TestRetryHint: only a refusal for load says when a key may come back; a
// server error with the rate-limit reset headers every Anthropic answer
// carries does not rest the key for a minute.
func TestRetryHint(t *testing.T) {
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	resets := http.Header{"Anthropic-Ratelimit-Requests-Reset": {now.Add(time.Minute).Format(time.RFC3339)},
		"Anthropic-Ratelimit-Requests-Remaining": {"0"}}
	retry := http.Header{"Retry-After": {"7"}}
	for _, tc := range []struct {
		status int
		h      http.Header
		want   time.Duration
		ok     bool
	}{
		{429, retry, 7 * time.Second, true},
		{503, retry, 7 * time.Second, true},
		{529, resets, time.Minute, true},
		{429, resets, time.Minute, true},
		{500, resets, 0, false},
		{504, resets, 0, false},
		{502, retry, 0, false},
		{401, retry, 0, false},
	} {
		if got, ok := retryHint(tc.status, tc.h, now); got != tc.want || ok != tc.ok {
			t.Errorf("%d %v: %s %v, want %s %v", tc.status, tc.h, got, ok, tc.want, tc.ok)
		}
	}
}

// flushLog is a ResponseWriter that records what was written between
// flushes.
type flushLog struct {
	*httptest.ResponseRecorder
	flushed []string // the bytes of each flush
	pending strings.Builder
	// onFlush, if set, gets each flush's bytes
	onFlush chan string
}

func (f *flushLog) Write(p []byte) (int, error) {
	f.pending.Write(p)
	return f.ResponseRecorder.Write(p)
}

func (f *flushLog) Flush() {
	f.flushed = append(f.flushed, f.pending.String())
	if f.onFlush != nil {
		f.onFlush <- f.pending.String()
	}
	f.pending.Reset()
	f.ResponseRecorder.Flush()
}

// openaiChunk is one chunk of an OpenAI chat stream with text.
func openaiChunk(text string) string {
	return `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"up-m","choices":[{"index":0,"delta":{"content":"` + text + `"},"finish_reason":null}]}` + "\n\n"
}

const (
	openaiHead = `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"up-m","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}` + "\n\n"
	openaiTail = `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"up-m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\n" +
		`data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"up-m","choices":[],"usage":{"prompt_tokens":7,"completion_tokens":3,"total_tokens":10}}` + "\n\n" +
		"data: [DONE]\n\n"
)

// TestDeliver: the relay writes answers itself (docs/design.md, "The proxy
// is ours"): a stream reaches the client in the client's format, each event
// flushed before the relay waits for the next one or for the bill (events
// that arrived together leave in one write), no byte left unflushed; a
// whole answer carries its Content-Length. Both ways of reading a stream:
// directly (chat client, Anthropic upstream) and through the keep-alive
// pump (Anthropic client, OpenAI upstream).
func TestDeliver(t *testing.T) {
	sse := http.Header{"Content-Type": {"text/event-stream"}}
	words := []string{"one", "two", "three"}
	for _, tc := range []struct {
		name        string
		format      upstream.Format
		kind        Kind
		path, body  string
		head, tail  string
		delta, text func(string) string // an upstream event with a word; the word as the client gets it
		end         string              // the client's last bytes
	}{
		{"chat client, Anthropic upstream", upstream.FormatAnthropic, KindChat, "/v1/chat/completions",
			`{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`, anthropicHead, anthropicTail,
			anthropicDelta, func(w string) string { return `"content":"` + w + `"` }, "data: [DONE]\n\n"},
		{"Anthropic client, OpenAI upstream (keep-alive pump)", upstream.FormatOpenAI, KindMessages, "/v1/messages",
			`{"model":"m","max_tokens":100,"stream":true,"messages":[{"role":"user","content":"hi"}]}`, openaiHead, openaiTail,
			openaiChunk, func(w string) string { return `"text":"` + w + `"` }, "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var deltas string
			for _, w := range words {
				deltas += tc.delta(w)
			}
			// the whole stream arrives in one read: the text leaves in one
			// write, before the bill is settled
			svc, p := testService(t, tc.format, &fakeUpstream{status: 200, header: sse, body: tc.head + deltas + tc.tail}, 1_000_000)
			w := &flushLog{ResponseRecorder: httptest.NewRecorder()}
			svc.Generate(w, httptest.NewRequest("POST", tc.path, strings.NewReader(tc.body)), p, tc.kind, "", "req_1")
			if w.Code != 200 || w.Header().Get("Content-Type") != "text/event-stream" || w.Header().Get("Content-Length") != "" {
				t.Fatalf("%d %v", w.Code, w.Header())
			}
			if w.pending.Len() != 0 {
				t.Fatalf("unflushed at the end: %q", w.pending.String())
			}
			all := strings.Join(w.flushed, "")
			if !strings.Contains(all, tc.text("one")) || !strings.Contains(all, tc.text("three")) || !strings.HasSuffix(all, tc.end) {
				t.Fatalf("flushes %q", w.flushed)
			}
			together := false
			for _, f := range w.flushed {
				together = together || strings.Contains(f, tc.text("one")) && strings.Contains(f, tc.text("three"))
				if strings.Contains(f, tc.text("three")) && strings.Contains(f, tc.end) {
					t.Errorf("the text waited for the bill: %q", f)
				}
			}
			if !together {
				t.Errorf("the deltas arrived together and were flushed one by one: %q", w.flushed)
			}

			// events that arrive one at a time each leave before the next arrives
			pr, pw := io.Pipe()
			svc, p = testService(t, tc.format, &fakeUpstream{status: 200, header: sse, stream: pr}, 1_000_000)
			w = &flushLog{ResponseRecorder: httptest.NewRecorder(), onFlush: make(chan string, 16)}
			go func() {
				defer pw.Close()
				if _, err := io.WriteString(pw, tc.head); err != nil {
					return
				}
				for _, word := range words {
					if _, err := io.WriteString(pw, tc.delta(word)); err != nil {
						return
					}
					for flushed := false; !flushed; {
						select {
						case f := <-w.onFlush:
							flushed = strings.Contains(f, tc.text(word))
						case <-time.After(5 * time.Second):
							pw.CloseWithError(fmt.Errorf("%q was not flushed before the next event", word))
							return
						}
					}
				}
				_, _ = io.WriteString(pw, tc.tail)
			}()
			svc.Generate(w, httptest.NewRequest("POST", tc.path, strings.NewReader(tc.body)), p, tc.kind, "", "req_3")
			all = strings.Join(w.flushed, "")
			if !strings.Contains(all, tc.text("one")) || !strings.Contains(all, tc.text("three")) || !strings.HasSuffix(all, tc.end) || w.pending.Len() != 0 {
				t.Fatalf("paced stream: flushes %q, unflushed %q", w.flushed, w.pending.String())
			}
		})
	}

	// a whole answer
	body := `{"id":"msg_1","type":"message","role":"assistant","model":"up-m","content":[{"type":"text","text":"hello"}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":7,"output_tokens":3}}`
	svc, p := testService(t, upstream.FormatAnthropic, &fakeUpstream{status: 200, header: http.Header{"Content-Type": {"application/json"}}, body: body}, 1_000_000)
	rec := httptest.NewRecorder()
	svc.Generate(rec, httptest.NewRequest("POST", "/v1/chat/completions", strings.NewReader(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`)), p, KindChat, "", "req_2")
	if rec.Code != 200 || rec.Header().Get("Content-Length") != strconv.Itoa(rec.Body.Len()) || !strings.Contains(rec.Body.String(), `"hello"`) {
		t.Fatalf("%d %v %s", rec.Code, rec.Header(), rec.Body.String())
	}
}

func TestHangupMargin(t *testing.T) {
	for _, tc := range []struct {
		counted int64
		elapsed time.Duration
		want    int64
	}{
		{0, 0, 16},                         // nothing yet: the floor
		{10, time.Second, 16},              // 10 tokens a second: 2 in 200 ms
		{100, time.Second, 20},             // 100 a second: 20
		{300, 500 * time.Millisecond, 120}, // 600 a second: 120
		{50, time.Millisecond, 50},         // a burst in the first event: no more than was counted
	} {
		if got := hangupMargin(tc.counted, tc.elapsed); got != tc.want {
			t.Errorf("hangupMargin(%d, %s) = %d, want %d", tc.counted, tc.elapsed, got, tc.want)
		}
	}
	c := &call{outputCap: 100, choices: 2}
	if got := c.withinCap(500); got != 200 {
		t.Errorf("withinCap(500) with a cap of 100 for 2 choices = %d, want 200", got)
	}
	if got := (&call{}).withinCap(500); got != 500 {
		t.Errorf("withinCap without a cap = %d", got)
	}
}

func TestAsksThinking(t *testing.T) {
	for _, tc := range []struct {
		body string
		want bool
	}{
		{`{"model":"m","messages":[]}`, false},
		{`{"thinking":{"type":"enabled","budget_tokens":1024}}`, true},
		{`{"thinking":{"type":"adaptive"}}`, true},
		{`{"thinking":{"type":"disabled"}}`, false},
		{`{"reasoning_effort":"low"}`, true},
		{`{"reasoning_effort":"none"}`, false},
		{`{"reasoning_effort":null}`, false},
		{`{"reasoning":{"effort":"high","summary":"auto"}}`, true},
		{`{"reasoning":{"effort":"none"}}`, false},
		{`{"generationConfig":{"thinkingConfig":{"thinkingBudget":0}}}`, false},
		{`{"generationConfig":{"thinkingConfig":{"thinkingBudget":2048}}}`, true},
		{`{"generation_config":{"thinking_config":{"include_thoughts":true}}}`, true},
		{`{"generationConfig":{"temperature":0.2}}`, false},
		{`not json`, false},
	} {
		if got := asksThinking([]byte(tc.body)); got != tc.want {
			t.Errorf("asksThinking(%s) = %v, want %v", tc.body, got, tc.want)
		}
	}
}
