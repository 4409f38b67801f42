package integration

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"
	"google.golang.org/genai"

	"github.com/modelgate/modelgate/ledger"
	"github.com/modelgate/modelgate/mockupstream"
)

// The client hangs up on a stream (docs/billing.md, "When the client hangs
// up"): OpenAI and Anthropic stop generating when the connection closes,
// so the gateway closes the upstream at once and bills the output it
// counted plus an in-flight margin; Gemini goes on, so the gateway drains.

// hangupModels are the extra models of these tests: an OpenAI family model
// (counted with o200k_base, exact against the mock's words) beside the
// harness's gpt-test (an OpenAI-format model of no family the gateway
// knows: counted with the bound) and claude-test (the bound).
const hangupModels = `		model gpt-4o-test {
			route mock gpt-4o-mini
			price input 0.5 output 1.5
			max_output 4000
		}
		model thinker {
			route mock o3-mini
			price input 0.5 output 1.5
			max_output 4000
			features reasoning
		}
`

// hangupMarginAllowance bounds the in-flight margin these streams can get:
// 200 ms at the rate of a stream whose tokens come every 5 ms (counted
// with the bound, at most three per mock word) is 120.
const hangupMarginAllowance = 120

// boundPerMockToken is the most tokencount.Bound counts for one of the
// mock's tokens ("consectetur" is three): the mock's Latin words are one
// token each to it, to o200k_base and to Gemma, two to Anthropic's
// published tokenizer.
const boundPerMockToken = 3

// deliveredTokens counts the output tokens a client received in body: the
// mock's reply and thinking words, and ToolCallTokens per whole call.
func deliveredTokens(body []byte) int64 {
	// Responses repeats the text and arguments whole in its closing
	// events (".done"): only the deltas count
	var deltas []byte
	for _, ev := range bytes.Split(body, []byte("\n\n")) {
		if !bytes.Contains(ev, []byte(`.done"`)) && !bytes.Contains(ev, []byte(`"response.completed"`)) {
			deltas = append(deltas, ev...)
		}
	}
	body = deltas
	// a call whose arguments arrived (some formats repeat them whole in
	// a closing event): at most one per call name
	calls := map[string]bool{}
	for _, name := range toolName.FindAll(body, -1) {
		calls[string(name)] = true
	}
	whole := min(len(calls), bytes.Count(body, []byte("celsius")))
	return int64(len(mockWord.FindAll(body, -1)) + mockupstream.ToolCallTokens*whole)
}

var toolName = regexp.MustCompile(`get_weather(_[0-9]+)?`)

var mockWord = regexp.MustCompile(`\b(Lorem|ipsum|dolor|sit|amet|consectetur|adipiscing|elit|sed|do|eiusmod|tempor|incididunt|ut|labore|et|dolore|magna|aliqua|Let|me|think|this|through|step|by|before|I|answer)\b`)

// hangUp sends c's streamed request and hangs up once the body read so far
// satisfies until, or, with until nil, 300 ms after sending it (mid-thinking:
// not every client format shows the thinking); it returns the body and
// when it hung up.
func hangUp(t *testing.T, c redClient, key, model, prompt string, until func([]byte) bool) ([]byte, time.Time) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	resp, err := http.DefaultClient.Do(c.request(ctx, key, model, prompt, true))
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s on %s: status %d", c.name, model, resp.StatusCode)
	}
	var got []byte
	buf := make([]byte, 512)
	if until == nil {
		timer := time.AfterFunc(300*time.Millisecond, cancel)
		defer timer.Stop()
		for {
			n, err := resp.Body.Read(buf)
			got = append(got, buf[:n]...)
			if err != nil {
				return got, time.Now()
			}
		}
	}
	for !until(got) {
		n, err := resp.Body.Read(buf)
		got = append(got, buf[:n]...)
		// a read may return the last bytes and io.EOF together
		if err != nil && !until(got) {
			t.Fatalf("%s on %s: %v before the hang-up, after %q", c.name, model, err, got)
		}
	}
	cancel()
	resp.Body.Close()
	return got, time.Now()
}

// rowWithin waits at most within for an account's usage row.
func (g *testGateway) rowWithin(acct string, within time.Duration) (ledger.UsageRecord, bool) {
	for deadline := time.Now().Add(within); ; time.Sleep(5 * time.Millisecond) {
		if rows := g.rows(acct); len(rows) > 0 {
			return rows[0], true
		}
		if time.Now().After(deadline) {
			return ledger.UsageRecord{}, false
		}
	}
}

// produced is what the mock made for the request whose prompt has marker
// (a word of its own: "random2" is not "random20"), once the mock is done
// with it.
func (g *testGateway) produced(marker string) int64 {
	g.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := g.mock.WaitIdle(ctx, upstreamKey); err != nil {
		g.t.Fatalf("the mock is still serving: %v", err)
	}
	for _, r := range g.mock.Requests() {
		if hasMarker(r.Body, marker) {
			return r.ProducedOutput
		}
	}
	return 0
}

// mockGot reports whether the request whose prompt has marker reached the
// mock.
func (g *testGateway) mockGot(marker string) bool {
	for _, r := range g.mock.Requests() {
		if hasMarker(r.Body, marker) {
			return true
		}
	}
	return false
}

// hasMarker reports whether a request body has marker as a word of its
// prompt: followed by a space, so that a marker is never taken for another
// it begins (a request that hung up before reaching the mock must not be
// matched with one that did).
func hasMarker(body []byte, marker string) bool {
	return bytes.Contains(body, []byte(marker+" "))
}

func contains(s string) func([]byte) bool {
	return func(b []byte) bool { return bytes.Contains(b, []byte(s)) }
}

// TestHangUpStopsTheUpstream: in every client format, on OpenAI-format
// upstreams (counted exactly and with the bound) and an Anthropic one, the
// client hangs up after the headers, mid-text, mid-tool call, mid-thinking
// (Anthropic shows it) and right before the final usage. Each is billed
// within [the tokens the client received, what the mock produced + the
// margin] (the produced tokens as the gateway's count makes them: three per
// mock word at most for the bound), with its row within one second of the
// hang-up, outcome client_closed, usage_source counted; the mock stopped
// long before the 200 tokens it was asked for.
func TestHangUpStopsTheUpstream(t *testing.T) {
	g := startGateway(t, gatewayOptions{extra: hangupModels})
	type point struct {
		name, prompt string
		until        func([]byte) bool
		anthropic    bool // only where the upstream streams thinking
		final        bool // the whole answer may come before the hang-up
	}
	points := []point{
		{"after the headers", "mock:tokens=200 mock:delay=5ms", func(b []byte) bool { return len(b) > 0 }, false, false},
		{"mid-text", "mock:tokens=200 mock:delay=5ms", contains("consectetur"), false, false},
		{"mid-tool call", "mock:tokens=40 mock:tools=3 mock:delay=5ms", contains("get_weather"), false, false},
		{"mid-thinking", "mock:thinking=200 mock:tokens=20 mock:delay=5ms", nil, true, false},
		{"before the final usage", "mock:tokens=19 mock:delay=5ms", contains("aliqua"), false, true},
	}
	n := 0
	for _, m := range []string{"gpt-4o-test", testModel, "claude-test"} {
		perToken := int64(boundPerMockToken)
		if m == "gpt-4o-test" {
			perToken = 1
		}
		for _, p := range points {
			if p.anthropic && m != "claude-test" {
				continue
			}
			for _, c := range redClients {
				n++
				label := fmt.Sprintf("%s on %s, %s", c.name, m, p.name)
				marker := fmt.Sprintf("case%d", n)
				acct, key := g.account("1.00")
				body, at := hangUp(t, c, key, m, marker+" "+p.prompt, p.until)
				row, ok := g.rowWithin(acct, time.Second)
				if !ok {
					t.Errorf("%s: no usage row within a second of the hang-up", label)
					row = g.waitRow(acct, 10*time.Second)
				}
				took := time.Since(at)
				made := g.produced(marker)
				got := deliveredTokens(body)
				if row.UsageSource == "upstream" {
					// the vendor's final count came before the hang-up was
					// seen (Gemini's calls come with the last element, the
					// last token with the usage): billed exactly
					if row.Outcome != "ok" && row.Outcome != "client_closed" || row.Tokens.Output != made {
						t.Errorf("%s: %s with %d output tokens; the mock made %d", label, row.Outcome, row.Tokens.Output, made)
					}
					continue
				}
				g.checkBilled(label, acct, row, got, "counted", "client_closed")
				if hi := made*perToken + hangupMarginAllowance; row.Tokens.Output > hi {
					t.Errorf("%s: billed %d output tokens; the mock made %d, received %d (at most %d)", label, row.Tokens.Output, made, got, hi)
				}
				if !p.final && made >= 200 {
					t.Errorf("%s: the mock made %d tokens: the upstream was not stopped", label, made)
				}
				t.Logf("%-45s received %3d  made %3d  billed %3d  (%s, row after %s)", label, got, made, row.Tokens.Output, row.UsageSource, took.Round(time.Millisecond))
			}
		}
	}
	g.audit()
}

// TestHangUpDrains: Gemini goes on generating after a hang-up; a
// reasoning model's thinking is out of sight (a model declared with the
// reasoning feature, one of OpenAI's o series, a request that asks for
// Anthropic's thinking, shown only as a summary): all are read to their
// end and billed the vendor's final usage.
func TestHangUpDrains(t *testing.T) {
	g := startGateway(t, gatewayOptions{extra: hangupModels})
	// Claude Code asks for thinking: a summary of it is all a stream shows
	acct, key := g.account("1.00")
	body := `{"model":"claude-test","max_tokens":2000,"stream":true,"thinking":{"type":"enabled","budget_tokens":1024},` +
		`"messages":[{"role":"user","content":"drain-thinking mock:thinking=40 mock:tokens=60 mock:delay=2ms"}]}`
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "POST", gatewayAddr+"/v1/messages", strings.NewReader(body))
	req.Header.Set("X-Api-Key", key)
	req.Header.Set("Anthropic-Version", "2023-06-01")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 256)
	if _, err := resp.Body.Read(buf); err != nil {
		t.Fatal(err)
	}
	cancel()
	resp.Body.Close()
	row := g.waitRow(acct, 10*time.Second)
	if made := g.produced("drain-thinking"); row.UsageSource != "upstream" || row.Tokens.Output != made || made != 100 {
		t.Errorf("a stream that asked for thinking: billed %d output tokens (%s), the mock made %d of 100", row.Tokens.Output, row.UsageSource, made)
	}

	for _, m := range []string{"gemini-test", "thinker"} {
		for _, c := range redClients {
			label := c.name + " on " + m
			marker := "drain-" + c.name + "-" + m
			acct, key := g.account("1.00")
			hangUp(t, c, key, m, marker+" mock:reasoning=50 mock:tokens=60 mock:delay=2ms", contains("consectetur"))
			row := g.waitRow(acct, 10*time.Second)
			made := g.produced(marker)
			g.checkBilled(label, acct, row, made, "upstream", "client_closed")
			if row.Tokens.Output != made || made != 110 {
				t.Errorf("%s: billed %d output tokens, the mock made %d of 110", label, row.Tokens.Output, made)
			}
		}
	}
}

// TestHangUpAtRandom: 50 streams in every client format on the two
// stopping upstream formats, each hung up at a random moment. The sum
// billed covers the sum the mock produced; both are logged (the closing
// figures of the hang-up rule).
func TestHangUpAtRandom(t *testing.T) {
	g := startGateway(t, gatewayOptions{extra: hangupModels})
	models := []string{"gpt-4o-test", "claude-test"}
	type result struct {
		acct, marker, label string
		produced, billed    int64
	}
	results := make([]result, 50)
	var wg sync.WaitGroup
	for i := range results {
		c := redClients[i%len(redClients)]
		m := models[(i/len(redClients))%len(models)]
		acct, key := g.account("1.00")
		marker := fmt.Sprintf("random%d", i)
		results[i] = result{acct: acct, marker: marker, label: c.name + " on " + m}
		wait := time.Duration(rand.IntN(600)) * time.Millisecond
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), wait)
			defer cancel()
			resp, err := http.DefaultClient.Do(c.request(ctx, key, m, marker+" mock:tokens=100 mock:delay=5ms", true))
			if err != nil {
				return // hung up before the headers
			}
			defer resp.Body.Close()
			_, _ = bytes.NewBuffer(nil).ReadFrom(resp.Body)
		}()
	}
	wg.Wait()
	var produced, billed int64
	raced := 0
	byModel := map[string][2]int64{}
	for i := range results {
		r := &results[i]
		row, ok := g.rowWithin(r.acct, 5*time.Second)
		if !ok {
			// hung up before the gateway sent the request whole: no bill
			if g.mockGot(r.marker) && g.produced(r.marker) > 0 {
				t.Errorf("%s: no usage row for a request the upstream answered", r.label)
			}
			continue
		}
		r.produced, r.billed = g.produced(r.marker), row.Tokens.Output
		if row.Tokens.Output > 0 && !g.mockGot(r.marker) {
			// Go's HTTP client reports a request written once its last
			// byte is in the connection's buffer, a moment before the
			// buffer is sent: a hang-up in that moment bills the input and
			// the least margin for a request that never left. Only that
			// bill is excused, and only rarely.
			if row.Status == 499 && row.UsageSource == "counted" && row.Tokens.Output == 16 && raced < 2 {
				raced++
				t.Logf("%s: hung up between the request's last write and its flush: billed %d output tokens", r.label, row.Tokens.Output)
			} else {
				t.Errorf("%s: billed a request the upstream never got (%d output tokens, status %d, %s)", r.label, row.Tokens.Output, row.Status, row.UsageSource)
			}
		}
		produced += r.produced
		billed += r.billed
		m := strings.SplitN(r.label, " on ", 2)[1]
		byModel[m] = [2]int64{byModel[m][0] + r.produced, byModel[m][1] + r.billed}
		if row.Outcome == "client_closed" && row.UsageSource != "counted" && row.UsageSource != "upstream" {
			t.Errorf("%s: %s, %s", r.label, row.Outcome, row.UsageSource)
		}
	}
	t.Logf("50 streams hung up at random: the mock produced %d output tokens, the gateway billed %d (%.2fx)",
		produced, billed, float64(billed)/float64(max(produced, 1)))
	for m, pb := range byModel {
		t.Logf("  on %s: produced %d, billed %d (%.2fx)", m, pb[0], pb[1], float64(pb[1])/float64(max(pb[0], 1)))
	}
	if billed < produced {
		t.Errorf("billed %d output tokens for %d produced", billed, produced)
	}
	g.audit()
}

// TestCostOnTheAnswer: a whole answer says what it cost and which usage
// row bills it; a chat stream's final usage carries the cost; and the row
// is there to fetch.
func TestCostOnTheAnswer(t *testing.T) {
	g := startGateway(t, gatewayOptions{extra: hangupModels})
	acct, key := g.account("1.00")
	r := g.do("POST", "/v1/chat/completions", chatBody("gpt-4o-test", "Hello there", ""), "Authorization", "Bearer "+key)
	if r.status != http.StatusOK {
		t.Fatalf("status %d: %s", r.status, r.body)
	}
	rows := g.rows(acct)
	if len(rows) != 1 {
		t.Fatalf("%d rows", len(rows))
	}
	if got := r.header.Get("X-Modelgate-Cost"); got != rows[0].Charged.String() || rows[0].Charged <= 0 {
		t.Errorf("X-Modelgate-Cost %q, the row charged %s", got, rows[0].Charged)
	}
	if got := r.header.Get("X-Modelgate-Request-Id"); got != rows[0].RequestID {
		t.Errorf("X-Modelgate-Request-Id %q, the row is %q", got, rows[0].RequestID)
	}

	// an image: a whole answer too
	acct, key = g.account("1.00")
	r = g.do("POST", "/v1/images/generations", `{"model":"gpt-test","prompt":"a fox","size":"1024x1024","quality":"low"}`,
		"Authorization", "Bearer "+key)
	if rows := g.rows(acct); r.status != http.StatusOK || len(rows) != 1 || r.header.Get("X-Modelgate-Cost") != rows[0].Charged.String() ||
		r.header.Get("X-Modelgate-Request-Id") != rows[0].RequestID {
		t.Errorf("image: %d, X-Modelgate-Cost %q, X-Modelgate-Request-Id %q; rows %+v", r.status, r.header.Get("X-Modelgate-Cost"),
			r.header.Get("X-Modelgate-Request-Id"), rows)
	}

	// a chat stream, passed through (OpenAI upstream) and translated
	// (Anthropic upstream)
	for _, m := range []string{"gpt-4o-test", "claude-test"} {
		acct, key := g.account("1.00")
		r := g.do("POST", "/v1/chat/completions", chatBody(m, "Hello there", `"stream":true,"stream_options":{"include_usage":true}`),
			"Authorization", "Bearer "+key)
		rows := g.rows(acct)
		if len(rows) != 1 {
			t.Fatalf("%s: %d rows", m, len(rows))
		}
		want := `"cost":` + rows[0].Charged.String() + `}`
		if !strings.Contains(r.body, want) {
			t.Errorf("%s: the stream's usage chunk lacks %s: %s", m, want, r.body)
		}
		if got := r.header.Get("X-Modelgate-Request-Id"); got != rows[0].RequestID {
			t.Errorf("%s stream: X-Modelgate-Request-Id %q, the row is %q", m, got, rows[0].RequestID)
		}
		if r.header.Get("X-Modelgate-Cost") != "" {
			t.Errorf("%s: a stream's headers cannot know its cost, yet say %q", m, r.header.Get("X-Modelgate-Cost"))
		}
	}
}

// TestHangUpThroughTheSDKs: the official SDKs (openai-go for chat and
// Responses, anthropic-sdk-go, Google's genai) read a stream until its
// fifth text token, then their context is cancelled, as an interrupted
// agent does, on an OpenAI and an Anthropic upstream. Each bill is counted
// within what the SDK saw and what the mock made plus the margin; the
// usage row of the request, fetched with the same key as a client would,
// says so. And a chat stream read to its end carries usage.cost, kept by
// openai-go among the usage's extra fields.
func TestHangUpThroughTheSDKs(t *testing.T) {
	g := startGateway(t, gatewayOptions{extra: hangupModels})
	const prompt = " mock:tokens=200 mock:delay=5ms"
	sdks := []struct {
		name string
		read func(ctx context.Context, key, model, prompt string, enough func(text string) bool) string
	}{
		{"openai-go chat", func(ctx context.Context, key, model, prompt string, enough func(string) bool) string {
			s := g.client(key).Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{Model: model,
				Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(prompt)}})
			var text string
			for s.Next() && !enough(text) {
				if ch := s.Current(); len(ch.Choices) > 0 {
					text += ch.Choices[0].Delta.Content
				}
			}
			return text
		}},
		{"openai-go responses", func(ctx context.Context, key, model, prompt string, enough func(string) bool) string {
			s := g.client(key).Responses.NewStreaming(ctx, responses.ResponseNewParams{Model: model, Store: openai.Bool(false),
				Input: responses.ResponseNewParamsInputUnion{OfString: openai.String(prompt)}})
			var text string
			for s.Next() && !enough(text) {
				if ev := s.Current(); ev.Type == "response.output_text.delta" {
					text += ev.Delta
				}
			}
			return text
		}},
		{"anthropic-sdk-go", func(ctx context.Context, key, model, prompt string, enough func(string) bool) string {
			c := g.anthropicClient(key)
			s := c.Messages.NewStreaming(ctx, anthropic.MessageNewParams{Model: anthropic.Model(model), MaxTokens: 1000,
				Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(prompt))}})
			var text string
			for s.Next() && !enough(text) {
				if ev := s.Current(); ev.Type == "content_block_delta" {
					text += ev.Delta.Text
				}
			}
			return text
		}},
		{"genai", func(ctx context.Context, key, model, prompt string, enough func(string) bool) string {
			var text string
			for r, err := range g.geminiClient(t, key, "v1beta").Models.GenerateContentStream(ctx, model, genai.Text(prompt), nil) {
				if err != nil || enough(text) {
					break
				}
				text += r.Text()
			}
			return text
		}},
	}
	for _, m := range []string{"gpt-4o-test", "claude-test"} {
		perToken := int64(boundPerMockToken)
		if m == "gpt-4o-test" {
			perToken = 1
		}
		for i, sdk := range sdks {
			label := sdk.name + " on " + m
			marker := fmt.Sprintf("sdk%d-%s", i, m)
			acct, key := g.account("1.00")
			ctx, cancel := context.WithCancel(context.Background())
			text := sdk.read(ctx, key, m, marker+prompt, func(text string) bool { return len(strings.Fields(text)) >= 5 })
			cancel()
			got := int64(len(strings.Fields(text)))
			if got < 5 {
				t.Fatalf("%s: the SDK saw %q", label, text)
			}
			row, ok := g.rowWithin(acct, time.Second)
			if !ok {
				t.Fatalf("%s: no usage row within a second of the hang-up", label)
			}
			made := g.produced(marker)
			g.checkBilled(label, acct, row, got, "counted", "client_closed")
			if hi := made*perToken + hangupMarginAllowance; row.Tokens.Output > hi || made >= 200 {
				t.Errorf("%s: billed %d output tokens; the mock made %d, the SDK saw %d", label, row.Tokens.Output, made, got)
			}
			// the bill, as the client fetches it
			r := g.do("GET", "/api/usage/requests/"+row.RequestID, "", "Authorization", "Bearer "+key)
			if r.status != http.StatusOK || !strings.Contains(r.body, `"usage_source":"counted"`) ||
				!strings.Contains(r.body, fmt.Sprintf(`"output_tokens":%d`, row.Tokens.Output)) {
				t.Errorf("%s: GET /api/usage/requests/%s: %d %s", label, row.RequestID, r.status, r.body)
			}
			t.Logf("%-35s saw %d  made %3d  billed %3d", label, got, made, row.Tokens.Output)
		}
	}

	// usage.cost, through openai-go
	acct, key := g.account("1.00")
	s := g.client(key).Chat.Completions.NewStreaming(context.Background(), openai.ChatCompletionNewParams{Model: "gpt-4o-test",
		Messages:      []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Hello there")},
		StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}})
	var cost string
	for s.Next() {
		if f, ok := s.Current().Usage.JSON.ExtraFields["cost"]; ok {
			cost = f.Raw()
		}
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	if rows := g.rows(acct); len(rows) != 1 || cost != rows[0].Charged.String() {
		t.Errorf("openai-go read usage.cost %q; the row: %+v", cost, rows)
	}
}
