package integration

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"

	oaformat "github.com/modelgate/modelgate/formats/openai"
	"github.com/modelgate/modelgate/ledger"
)

// mockTokens is the mock upstream's input count for one user message: four
// per message, one per word, three to prime the reply.
func mockTokens(text string) int64 { return int64(4 + len(strings.Fields(text)) + 3) }

func TestChatCompletion(t *testing.T) {
	g := startGateway(t, gatewayOptions{})
	acct, key := g.account("1.00")
	before, _ := g.balance(acct)

	const prompt = "Hello there, how are you"
	resp, err := g.client(key).Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model:    testModel,
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(prompt)},
	})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Model != testModel {
		t.Errorf("model = %q, want the service model %q", resp.Model, testModel)
	}
	if got := resp.Choices[0].Message.Content; len(strings.Fields(got)) != 12 {
		t.Errorf("content = %q, want the mock's 12 tokens", got)
	}
	in, out := resp.Usage.PromptTokens, resp.Usage.CompletionTokens
	if in != mockTokens(prompt) || out != 12 {
		t.Errorf("usage = %d/%d, want %d/12", in, out, mockTokens(prompt))
	}
	after, held := g.balance(acct)
	if before-after != cost(in, out) || held != 0 {
		t.Errorf("balance went from %s to %s (held %s), want a debit of exactly %s", before, after, held, cost(in, out))
	}
	rows := g.rows(acct)
	if len(rows) != 1 {
		t.Fatalf("%d usage rows, want 1", len(rows))
	}
	r := rows[0]
	if r.Tokens.Input != in || r.Tokens.Output != out || r.Charged != cost(in, out) || r.Model != testModel ||
		r.UpstreamModel != testUpstreamModel || r.Provider != "mock" || r.UsageSource != "upstream" || r.Status != 200 ||
		r.UpstreamKeyID == "" || strings.Contains(r.UpstreamKeyID, upstreamKey) || r.Stream {
		t.Errorf("usage row = %+v", r)
	}

	// what went upstream: the upstream model, our key, a cap, nothing of the client's
	sent := g.mock.Requests()
	if len(sent) != 1 {
		t.Fatalf("upstream saw %d requests", len(sent))
	}
	var up map[string]any
	if err := json.Unmarshal(sent[0].Body, &up); err != nil {
		t.Fatal(err)
	}
	if up["model"] != testUpstreamModel || up["max_completion_tokens"] != float64(testMaxOutput) {
		t.Errorf("upstream body = %s", sent[0].Body)
	}
	if got := sent[0].Header.Get("Authorization"); got != "Bearer "+upstreamKey {
		t.Errorf("upstream Authorization = %q", got)
	}
	for name, vals := range sent[0].Header {
		for _, v := range vals {
			if strings.Contains(v, key) {
				t.Errorf("the client key reached the upstream in %s", name)
			}
		}
	}
	g.audit()
}

func TestChatCompletionStreamed(t *testing.T) {
	g := startGateway(t, gatewayOptions{})
	acct, key := g.account("1.00")
	c := g.client(key)
	const prompt = "Stream me a short answer please"

	for _, withUsage := range []bool{true, false} {
		before, _ := g.balance(acct)
		params := openai.ChatCompletionNewParams{
			Model:     testModel,
			Messages:  []openai.ChatCompletionMessageParamUnion{openai.UserMessage(prompt)},
			MaxTokens: openai.Int(8),
		}
		if withUsage {
			params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
		}
		stream := c.Chat.Completions.NewStreaming(context.Background(), params)
		var acc openai.ChatCompletionAccumulator
		chunks := 0
		for stream.Next() {
			ch := stream.Current()
			acc.AddChunk(ch)
			chunks++
			if ch.Model != testModel {
				t.Errorf("chunk model = %q", ch.Model)
			}
		}
		if err := stream.Err(); err != nil {
			t.Fatal(err)
		}
		if got := acc.Choices[0].Message.Content; len(strings.Fields(got)) != 8 {
			t.Errorf("streamed content = %q, want 8 tokens (max_tokens)", got)
		}
		if acc.Choices[0].FinishReason != "length" {
			t.Errorf("finish_reason = %q", acc.Choices[0].FinishReason)
		}
		after, held := g.balance(acct)
		want := cost(mockTokens(prompt), 8)
		if before-after != want || held != 0 {
			t.Errorf("include_usage=%v: debit %s, want %s (held %s)", withUsage, before-after, want, held)
		}
		if withUsage && (acc.Usage.PromptTokens != mockTokens(prompt) || acc.Usage.CompletionTokens != 8) {
			t.Errorf("streamed usage = %+v", acc.Usage)
		}
		if !withUsage && acc.Usage.TotalTokens != 0 {
			t.Errorf("usage reached a client that did not ask for it: %+v", acc.Usage)
		}
	}
	// the upstream was always asked for usage
	for _, r := range g.mock.Requests() {
		var up struct {
			StreamOptions struct {
				IncludeUsage bool `json:"include_usage"`
			} `json:"stream_options"`
		}
		if err := json.Unmarshal(r.Body, &up); err != nil || !up.StreamOptions.IncludeUsage {
			t.Errorf("upstream stream request without include_usage: %s", r.Body)
		}
	}
	if rows := g.rows(acct); len(rows) != 2 || !rows[0].Stream {
		t.Errorf("rows = %+v", rows)
	}
	g.audit()
}

// TestStreamBytes checks the wire: one data: line per event, no usage key
// and no usage chunk unless asked, [DONE] at the end, flushed as it goes.
func TestStreamBytes(t *testing.T) {
	g := startGateway(t, gatewayOptions{})
	_, key := g.account("1.00")

	r := g.do("POST", "/v1/chat/completions", chatBody(testModel, "hi mock:tokens=3", `"stream":true`), "Authorization", "Bearer "+key)
	if r.status != 200 || r.header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("status %d %q: %s", r.status, r.header.Get("Content-Type"), r.body)
	}
	if !strings.HasPrefix(r.header.Get("X-Request-Id"), "req_") {
		t.Errorf("X-Request-Id = %q", r.header.Get("X-Request-Id"))
	}
	for name := range r.header {
		if strings.HasPrefix(strings.ToLower(name), "openai-") {
			t.Errorf("the upstream's header %s reached the client", name)
		}
	}
	events := strings.Split(strings.TrimSuffix(r.body, "\n\n"), "\n\n")
	// role, 3 tokens, finish, [DONE]
	if len(events) != 6 || events[5] != "data: [DONE]" {
		t.Fatalf("events = %q", events)
	}
	for _, e := range events[:5] {
		if !strings.HasPrefix(e, "data: {") || strings.Contains(e, `"usage"`) || strings.Contains(e, testUpstreamModel) {
			t.Errorf("event %q", e)
		}
	}

	r = g.do("POST", "/v1/chat/completions", chatBody(testModel, "hi mock:tokens=3", `"stream":true,"stream_options":{"include_usage":true}`), "Authorization", "Bearer "+key)
	events = strings.Split(strings.TrimSuffix(r.body, "\n\n"), "\n\n")
	if len(events) != 7 || events[6] != "data: [DONE]" || !strings.Contains(events[5], `"choices":[]`) ||
		!strings.Contains(events[5], `"prompt_tokens":`+strconv.FormatInt(mockTokens("hi mock:tokens=3"), 10)) {
		t.Fatalf("events = %q", events)
	}
	if !strings.Contains(events[1], `"usage":null`) {
		t.Errorf("with include_usage, chunks carry usage:null like OpenAI's: %q", events[1])
	}
}

// TestStreamIsNotBuffered reads the first event while the upstream is still
// producing the rest.
func TestStreamIsNotBuffered(t *testing.T) {
	g := startGateway(t, gatewayOptions{})
	_, key := g.account("1.00")
	req, _ := http.NewRequest("POST", gatewayAddr+"/v1/chat/completions",
		strings.NewReader(chatBody(testModel, "slow mock:tokens=5 mock:delay=400ms", `"stream":true`)))
	req.Header.Set("Authorization", "Bearer "+key)
	start := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	buf := make([]byte, 4096)
	n, err := resp.Body.Read(buf)
	if err != nil || !strings.Contains(string(buf[:n]), `"role":"assistant"`) {
		t.Fatalf("first read %q, %v", buf[:n], err)
	}
	if time.Since(start) > 1500*time.Millisecond {
		t.Fatalf("the first event took %s: the stream is buffered (the whole answer takes 2s)", time.Since(start))
	}
}

func TestAuthentication(t *testing.T) {
	g := startGateway(t, gatewayOptions{})
	acct, key := g.account("1.00")
	body := chatBody(testModel, "hello", "")
	for name, hdr := range map[string][]string{
		"missing":           nil,
		"not bearer":        {"Authorization", "Basic " + key},
		"empty bearer":      {"Authorization", "Bearer "},
		"malformed key":     {"Authorization", "Bearer sk-not-ours"},
		"short key":         {"Authorization", "Bearer mg-abc"},
		"unknown key":       {"Authorization", "Bearer mg-" + strings.Repeat("A", 43)},
		"unknown x-api-key": {"X-Api-Key", "mg-" + strings.Repeat("B", 43)},
	} {
		r := g.do("POST", "/v1/chat/completions", body, hdr...)
		if r.status != 401 {
			t.Errorf("%s: status %d: %s", name, r.status, r.body)
			continue
		}
		var env struct {
			Error struct {
				Message, Type string
				Code          *string
				Param         *string
			}
		}
		if err := json.Unmarshal([]byte(r.body), &env); err != nil || env.Error.Type != "invalid_request_error" ||
			env.Error.Code == nil || *env.Error.Code != "invalid_api_key" || env.Error.Message == "" {
			t.Errorf("%s: body %s", name, r.body)
		}
		if !strings.Contains(r.body, `"param":null`) {
			t.Errorf("%s: the envelope needs all four keys: %s", name, r.body)
		}
	}
	// both headers work
	if r := g.do("POST", "/v1/chat/completions", body, "X-Api-Key", key); r.status != 200 {
		t.Fatalf("x-api-key: %d %s", r.status, r.body)
	}
	if r := g.do("POST", "/v1/chat/completions", body, "Authorization", "bearer "+key); r.status != 200 {
		t.Fatalf("lower-case bearer: %d %s", r.status, r.body)
	}
	// a deleted key is refused on the very next request
	p, err := g.store.Authenticate(key)
	if err != nil {
		t.Fatal(err)
	}
	if err := g.store.DeleteKey(context.Background(), p.KeyID); err != nil {
		t.Fatal(err)
	}
	if r := g.do("POST", "/v1/chat/completions", body, "Authorization", "Bearer "+key); r.status != 401 {
		t.Fatalf("deleted key: %d %s", r.status, r.body)
	}
	if r := g.do("GET", "/v1/models", "", "Authorization", "Bearer "+key); r.status != 401 {
		t.Fatalf("deleted key on /v1/models: %d", r.status)
	}
	// the SDK sees an authentication error
	_, err = g.client(key).Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model: testModel, Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("x")}})
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 401 {
		t.Fatalf("SDK error = %v", err)
	}
	if n := len(g.rows(acct)); n != 2 {
		t.Errorf("%d usage rows, want the 2 served requests", n)
	}
}

func TestRefusals(t *testing.T) {
	g := startGateway(t, gatewayOptions{})
	body := chatBody(testModel, "hello", "")

	// zero balance: 403 insufficient_quota, nothing upstream
	_, broke := g.account("")
	r := g.do("POST", "/v1/chat/completions", body, "Authorization", "Bearer "+broke)
	if r.status != 403 || !strings.Contains(r.body, `"type":"insufficient_quota"`) || !strings.Contains(r.body, `"code":"insufficient_quota"`) {
		t.Errorf("zero balance: %d %s", r.status, r.body)
	}
	// suspended: 403
	acct, key := g.account("1.00")
	if err := g.store.SetAccountState(context.Background(), acct, ledger.StateSuspended); err != nil {
		t.Fatal(err)
	}
	r = g.do("POST", "/v1/chat/completions", body, "Authorization", "Bearer "+key)
	if r.status != 403 || !strings.Contains(r.body, "suspended") {
		t.Errorf("suspended: %d %s", r.status, r.body)
	}
	if err := g.store.SetAccountState(context.Background(), acct, ledger.StateActive); err != nil {
		t.Fatal(err)
	}
	if r := g.do("POST", "/v1/chat/completions", body, "Authorization", "Bearer "+key); r.status != 200 {
		t.Errorf("resumed: %d %s", r.status, r.body)
	}
	if n := len(g.mock.Requests()); n != 1 {
		t.Errorf("the upstream saw %d requests, want only the resumed one", n)
	}
}

func TestValidation(t *testing.T) {
	g := startGateway(t, gatewayOptions{})
	acct, key := g.account("1.00")
	before, _ := g.balance(acct)
	for name, tc := range map[string]struct {
		body, param string
		status      int
	}{
		"not json":              {`{"model":`, "", 400},
		"not an object":         {`[1,2]`, "", 400},
		"no messages":           {`{"model":"gpt-test"}`, "messages", 400},
		"empty messages":        {`{"model":"gpt-test","messages":[]}`, "messages", 400},
		"bad role":              {`{"model":"gpt-test","messages":[{"role":"wizard","content":"x"}]}`, "messages[0].role", 400},
		"content wrong type":    {`{"model":"gpt-test","messages":[{"role":"user","content":5}]}`, "messages[0].content", 400},
		"temperature too high":  {chatBody(testModel, "x", `"temperature":2.5`), "temperature", 400},
		"temperature negative":  {chatBody(testModel, "x", `"temperature":-0.1`), "temperature", 400},
		"temperature string":    {chatBody(testModel, "x", `"temperature":"hot"`), "temperature", 400},
		"max_tokens zero":       {chatBody(testModel, "x", `"max_tokens":0`), "max_tokens", 400},
		"max_completion neg":    {chatBody(testModel, "x", `"max_completion_tokens":-5`), "max_completion_tokens", 400},
		"stream not bool":       {chatBody(testModel, "x", `"stream":"yes"`), "stream", 400},
		"stream_options alone":  {chatBody(testModel, "x", `"stream_options":{"include_usage":true}`), "stream_options", 400},
		"model missing":         {`{"messages":[{"role":"user","content":"x"}]}`, "model", 400},
		"invalid utf-8":         {"{\"model\":\"gpt-test\",\"messages\":[{\"role\":\"user\",\"content\":\"\xff\"}]}", "", 400},
		"unknown model":         {chatBody("gpt-nope", "x", ""), "model", 404},
		"model case-sensitive":  {chatBody("GPT-TEST", "x", ""), "model", 404},
		"oversized body (413)":  {chatBody(testModel, strings.Repeat("a", 33<<20), ""), "", 413},
		"tool message no id":    {`{"model":"gpt-test","messages":[{"role":"tool","content":"x"}]}`, "messages[0].tool_call_id", 400},
		"top_p out of range":    {chatBody(testModel, "x", `"top_p":1.5`), "top_p", 400},
		"messages not an array": {`{"model":"gpt-test","messages":"hi"}`, "messages", 400},
	} {
		r := g.do("POST", "/v1/chat/completions", tc.body, "Authorization", "Bearer "+key)
		if r.status != tc.status {
			t.Errorf("%s: status %d, want %d: %s", name, r.status, tc.status, r.body)
			continue
		}
		var env struct {
			Error struct {
				Message, Type string
				Param         *string
			}
		}
		if err := json.Unmarshal([]byte(r.body), &env); err != nil || env.Error.Message == "" {
			t.Errorf("%s: body %q", name, r.body)
			continue
		}
		got := ""
		if env.Error.Param != nil {
			got = *env.Error.Param
		}
		if tc.param != "" && got != tc.param {
			t.Errorf("%s: param %q, want %q (%s)", name, got, tc.param, env.Error.Message)
		}
		if tc.status == 404 && !strings.Contains(r.body, `"code":"model_not_found"`) {
			t.Errorf("%s: %s", name, r.body)
		}
	}
	if after, held := g.balance(acct); after != before || held != 0 {
		t.Errorf("bad input moved money: %s → %s, held %s", before, after, held)
	}
	if n := len(g.mock.Requests()); n != 0 {
		t.Errorf("bad input reached the upstream %d times", n)
	}
	if n := len(g.rows(acct)); n != 0 {
		t.Errorf("%d usage rows for bad input", n)
	}
}

// TestConcurrentHoldsNeverOverdraw races 100 requests on an account funded
// for about 10 holds.
func TestConcurrentHoldsNeverOverdraw(t *testing.T) {
	g := startGateway(t, gatewayOptions{mock: mockupstreamSlow()})
	acct := ""
	body := chatBody(testModel, "race me please", `"max_tokens":200`)
	req, ferr := oaformat.ParseChatRequest([]byte(body))
	if ferr != nil {
		t.Fatal(ferr)
	}
	hold := ledger.Money(req.InputBound())*priceIn + 200*priceOut
	fund := 10*hold + hold/2
	acct, key := g.account(fund.String())

	stop := make(chan struct{})
	var minSeen atomic.Int64
	minSeen.Store(int64(fund))
	var sampler sync.WaitGroup
	sampler.Add(1)
	go func() {
		defer sampler.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			bal, _ := g.balance(acct)
			for cur := minSeen.Load(); int64(bal) < cur && !minSeen.CompareAndSwap(cur, int64(bal)); cur = minSeen.Load() {
			}
			time.Sleep(time.Millisecond)
		}
	}()

	var ok, refused, other atomic.Int64
	var wg sync.WaitGroup
	for i := 0; i < 100; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			extra := `"max_tokens":200`
			if i%2 == 0 {
				extra += `,"stream":true`
			}
			r := g.do("POST", "/v1/chat/completions", chatBody(testModel, "race me please", extra), "Authorization", "Bearer "+key)
			switch {
			case r.status == 200:
				ok.Add(1)
			case r.status == 403 && strings.Contains(r.body, "insufficient_quota"):
				refused.Add(1)
			default:
				other.Add(1)
				t.Errorf("status %d: %s", r.status, r.body)
			}
		}(i)
	}
	wg.Wait()
	close(stop)
	sampler.Wait()

	bal, held := g.balance(acct)
	rows := g.rows(acct)
	var charged ledger.Money
	for _, r := range rows {
		charged += r.Charged
	}
	t.Logf("served %d, refused %d; balance %s of %s", ok.Load(), refused.Load(), bal, fund)
	switch {
	case minSeen.Load() < 0 || bal < 0:
		t.Fatalf("balance went below zero: min sampled %d, final %s", minSeen.Load(), bal)
	case held != 0:
		t.Fatalf("holds left: %s", held)
	case int64(len(rows)) != ok.Load():
		t.Fatalf("%d usage rows for %d served requests", len(rows), ok.Load())
	case fund-charged != bal:
		t.Fatalf("balance %s != funded %s − charged %s", bal, fund, charged)
	case ok.Load() < 10 || refused.Load() == 0:
		t.Fatalf("served %d, refused %d: the race did not exhaust the funds", ok.Load(), refused.Load())
	}
	g.audit()
}

func TestOutputCappedByBalance(t *testing.T) {
	g := startGateway(t, gatewayOptions{})
	body := chatBody(testModel, "cap me", `"max_tokens":1000,"stream":true`)
	req, _ := oaformat.ParseChatRequest([]byte(body))
	in := ledger.Money(req.InputBound()) * priceIn
	// enough for the input and 300 output tokens, not for 1000
	acct, key := g.account((in + 300*priceOut).String())
	r := g.do("POST", "/v1/chat/completions", body, "Authorization", "Bearer "+key)
	if r.status != 200 || r.header.Get("X-Modelgate-Output-Capped") != "300" {
		t.Fatalf("status %d, capped %q: %s", r.status, r.header.Get("X-Modelgate-Output-Capped"), r.body)
	}
	var up struct {
		MaxCompletionTokens int `json:"max_completion_tokens"`
		MaxTokens           int `json:"max_tokens"`
	}
	if err := json.Unmarshal(g.mock.Requests()[0].Body, &up); err != nil || up.MaxTokens != 300 || up.MaxCompletionTokens != 0 {
		t.Fatalf("upstream cap: %s", g.mock.Requests()[0].Body)
	}
	// below input + min_output: refused
	_, poor := g.account((in + 100*priceOut).String())
	if r := g.do("POST", "/v1/chat/completions", body, "Authorization", "Bearer "+poor); r.status != 403 {
		t.Fatalf("status %d: %s", r.status, r.body)
	}
	if bal, held := g.balance(acct); bal < 0 || held != 0 {
		t.Fatalf("balance %s held %s", bal, held)
	}
}

func TestUpstreamFailures(t *testing.T) {
	g := startGateway(t, gatewayOptions{})
	acct, key := g.account("1.00")
	c := g.client(key)

	// 500 before the first byte: a 502 in the OpenAI format, nothing billed
	before, _ := g.balance(acct)
	_, err := c.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model: testModel, Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("fail mock:status=500")}})
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 502 || apiErr.Type != "server_error" {
		t.Fatalf("err = %v", err)
	}
	if after, held := g.balance(acct); after != before || held != 0 || len(g.rows(acct)) != 0 {
		t.Fatalf("a failed request moved money: %s → %s, held %s", before, after, held)
	}
	restKeys()
	r := g.do("POST", "/v1/chat/completions", chatBody(testModel, "fail mock:status=500", `"stream":true`), "Authorization", "Bearer "+key)
	if r.status != 502 || !strings.Contains(r.body, `"type":"server_error"`) {
		t.Fatalf("stream, 500 upstream: %d %s", r.status, r.body)
	}
	// an upstream 400 is the client's mistake: kept as a 400
	restKeys()
	r = g.do("POST", "/v1/chat/completions", chatBody(testModel, "mock:status=400", ""), "Authorization", "Bearer "+key)
	if r.status != 400 || !strings.Contains(r.body, `"invalid_request_error"`) {
		t.Fatalf("upstream 400: %d %s", r.status, r.body)
	}
	// the upstream unreachable: 502
	// (covered by TestUpstreamDown)

	// cut mid-stream: the client gets an error event; what was delivered is billed
	before, _ = g.balance(acct)
	stream := c.Chat.Completions.NewStreaming(context.Background(), openai.ChatCompletionNewParams{
		Model: testModel, Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("cut mock:tokens=10 mock:cut=4")}})
	var acc openai.ChatCompletionAccumulator
	for stream.Next() {
		acc.AddChunk(stream.Current())
	}
	if stream.Err() == nil {
		t.Fatal("a cut stream ended without an error")
	}
	if got := len(strings.Fields(acc.Choices[0].Message.Content)); got != 4 {
		t.Errorf("delivered %d tokens before the cut, want 4", got)
	}
	after, held := g.balance(acct)
	rows := g.rows(acct)
	if held != 0 || len(rows) != 1 || rows[0].Outcome != "upstream_cut" || rows[0].UsageSource != "estimated" ||
		rows[0].Charged <= 0 || before-after != rows[0].Charged {
		t.Fatalf("after a cut: balance %s → %s, held %s, rows %+v", before, after, held, rows)
	}

	// an error event mid-stream ends the client's stream with an error event
	r = g.do("POST", "/v1/chat/completions", chatBody(testModel, "mock:tokens=10 mock:error_after=2", `"stream":true`), "Authorization", "Bearer "+key)
	if r.status != 200 || !strings.Contains(r.body, `data: {"error":`) || strings.Contains(r.body, "[DONE]") {
		t.Fatalf("error mid-stream: %d %s", r.status, r.body)
	}
	if _, held := g.balance(acct); held != 0 {
		t.Fatalf("held %s", held)
	}
	g.audit()
}

func TestUpstreamDown(t *testing.T) {
	// a model routed to a provider nobody listens on
	g := startGateway(t, gatewayOptions{extra: "\t\tprovider dead {\n\t\t\tformat openai\n\t\t\tbase_url http://127.0.0.1:1\n\t\t\tkeys k\n\t\t\tfailure_cooldown 1ms\n\t\t}\n\t\tmodel down {\n\t\t\troute dead down\n\t\t\tprice input 1 output 1\n\t\t}\n"})
	acct, key := g.account("1.00")
	for _, extra := range []string{"", `"stream":true`} {
		restKeys()
		r := g.do("POST", "/v1/chat/completions", chatBody("down", "x", extra), "Authorization", "Bearer "+key)
		if r.status != 502 || !strings.Contains(r.body, `"type":"server_error"`) {
			t.Fatalf("unreachable upstream: %d %s", r.status, r.body)
		}
	}
	if bal, held := g.balance(acct); bal != 1_000_000_000 || held != 0 || len(g.rows(acct)) != 0 {
		t.Fatalf("balance %s held %s", bal, held)
	}
}

func TestModelsAndIndex(t *testing.T) {
	g := startGateway(t, gatewayOptions{})
	_, key := g.account("1.00")
	page, err := g.client(key).Models.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	ids := []string{}
	for _, m := range page.Data {
		ids = append(ids, m.ID)
		if m.Object != "model" || m.Created == 0 || m.OwnedBy == "" {
			t.Errorf("model %+v", m)
		}
	}
	if strings.Join(ids, ",") != "claude-test,gemini-test,gpt-test,other" {
		t.Errorf("models = %v", ids)
	}
	m, err := g.client(key).Models.Get(context.Background(), testModel)
	if err != nil || m.ID != testModel || m.OwnedBy != "testers" {
		t.Fatalf("model = %+v, %v", m, err)
	}
	if r := g.do("GET", "/v1/models/nope", "", "Authorization", "Bearer "+key); r.status != 404 || !strings.Contains(r.body, "model_not_found") {
		t.Errorf("unknown model: %d %s", r.status, r.body)
	}
	if r := g.do("GET", "/v1/models", ""); r.status != 401 {
		t.Errorf("models without a key: %d", r.status)
	}
	for _, path := range []string{"/", "/v1"} {
		r := g.do("GET", path, "")
		var idx struct {
			Service, Object, Auth string
			Endpoints             map[string][]string
		}
		if r.status != 200 || json.Unmarshal([]byte(r.body), &idx) != nil || idx.Object != "api" || idx.Service == "" ||
			!strings.Contains(idx.Auth, "Authorization: Bearer") || !strings.Contains(idx.Auth, "x-api-key") ||
			len(idx.Endpoints["chat-completions"]) == 0 {
			t.Errorf("index %s: %d %s", path, r.status, r.body)
		}
	}
	if r := g.do("GET", "/v1/nothing-here", "", "Authorization", "Bearer "+key); r.status != 404 || !strings.Contains(r.body, `"error"`) {
		t.Errorf("unknown route: %d %s", r.status, r.body)
	}
	if r := g.do("GET", "/v1/chat/completions", "", "Authorization", "Bearer "+key); r.status != 405 || r.header.Get("Allow") != "POST" {
		t.Errorf("wrong method: %d %s", r.status, r.body)
	}
}

func TestUsageEndpoint(t *testing.T) {
	g := startGateway(t, gatewayOptions{})
	acct, key := g.account("2.50")
	for i := 0; i < 3; i++ {
		if r := g.do("POST", "/v1/chat/completions", chatBody(testModel, "count me", ""), "Authorization", "Bearer "+key); r.status != 200 {
			t.Fatal(r.body)
		}
	}
	r := g.do("GET", "/api/usage", "", "Authorization", "Bearer "+key)
	var u struct {
		Object string
		Key    struct {
			Label, Prefix string
			Requests      int64
			InputTokens   int64 `json:"input_tokens"`
			OutputTokens  int64 `json:"output_tokens"`
			Spent         string
		}
		Account struct{ Balance, Held, Plan, State string }
	}
	if r.status != 200 || r.header.Get("Cache-Control") != "no-store" {
		t.Fatalf("%d %s", r.status, r.body)
	}
	if err := json.Unmarshal([]byte(r.body), &u); err != nil {
		t.Fatal(err)
	}
	in, out := 3*mockTokens("count me"), int64(3*12)
	spent := cost(in, out)
	bal, _ := g.balance(acct)
	if u.Object != "usage" || u.Key.Requests != 3 || u.Key.InputTokens != in || u.Key.OutputTokens != out ||
		u.Key.Spent != spent.String() || u.Account.Balance != bal.String() || u.Account.Balance != (2_500_000_000-spent).String() ||
		u.Account.Held != "0.000000000" || u.Account.Plan != "developer" || u.Account.State != "active" ||
		u.Key.Label != "test key" || !strings.HasPrefix(u.Key.Prefix, "mg-") || strings.Contains(r.body, key) {
		t.Fatalf("usage = %s", r.body)
	}
	for _, k := range []string{`"label"`, `"prefix"`, `"requests"`, `"input_tokens"`, `"output_tokens"`, `"spent"`, `"balance"`, `"held"`, `"plan"`, `"state"`} {
		if !strings.Contains(r.body, k) {
			t.Errorf("usage lacks %s: %s", k, r.body)
		}
	}
	if r := g.do("GET", "/api/usage", ""); r.status != 401 {
		t.Errorf("usage without a key: %d", r.status)
	}
}

func TestPlanDiscount(t *testing.T) {
	g := startGateway(t, gatewayOptions{})
	acct, key := g.account("1.00")
	if err := g.store.SetAccountPlan(context.Background(), acct, "enterprise"); err != nil {
		t.Fatal(err)
	}
	before, _ := g.balance(acct)
	if r := g.do("POST", "/v1/chat/completions", chatBody(testModel, "discount me", ""), "Authorization", "Bearer "+key); r.status != 200 {
		t.Fatal(r.body)
	}
	full := cost(mockTokens("discount me"), 12)
	want := ledger.Discounted(full, 1500)
	after, _ := g.balance(acct)
	rows := g.rows(acct)
	if before-after != want || rows[0].DiscountBps != 1500 || rows[0].Charged != want {
		t.Fatalf("charged %s, want %s (full %s); row %+v", before-after, want, full, rows[0])
	}
}

// TestKeysNeverLogged runs requests with Bearer and x-api-key keys, good and
// bad, with DEBUG logging and access logs on, and searches every log line.
func TestKeysNeverLogged(t *testing.T) {
	g := startGateway(t, gatewayOptions{globalLog: true})
	_, key := g.account("1.00")
	_, key2 := g.account("1.00")
	unknown := "mg-" + strings.Repeat("Z", 43)
	g.do("POST", "/v1/chat/completions", chatBody(testModel, "hello", ""), "Authorization", "Bearer "+key)
	g.do("POST", "/v1/chat/completions", chatBody(testModel, "hello", `"stream":true`), "X-Api-Key", key2)
	g.do("POST", "/v1/chat/completions", chatBody(testModel, "mock:status=500", ""), "X-Api-Key", key2)
	g.do("POST", "/v1/chat/completions", chatBody(testModel, "hello", ""), "X-Api-Key", unknown)
	g.do("POST", "/v1/chat/completions", chatBody(testModel, "hello", ""), "Authorization", "Bearer "+unknown)
	g.do("GET", "/api/usage", "", "X-Api-Key", key)
	g.do("GET", "/v1/models", "", "Authorization", "Bearer "+key2)
	// the Gemini ways: x-goog-api-key and ?key=, streamed and not, to
	// every upstream format
	for _, model := range []string{testModel, "claude-test", "gemini-test"} {
		g.do("POST", "/v1beta/models/"+model+":generateContent", `{"contents":[{"parts":[{"text":"hi"}]}]}`, "X-Goog-Api-Key", key)
		g.do("POST", "/v1beta/models/"+model+":streamGenerateContent?alt=sse&key="+key2, `{"contents":[{"parts":[{"text":"hi"}]}]}`)
		g.do("POST", "/v1/messages", `{"model":"`+model+`","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`,
			"X-Api-Key", key2, "Anthropic-Version", "2023-06-01")
	}
	g.do("GET", "/v1beta/models?key="+unknown, "")
	for _, r := range g.mock.Requests() {
		if strings.Contains(r.RawQuery, key) || strings.Contains(r.RawQuery, key2) {
			t.Errorf("a client key reached the upstream in the query %q", r.RawQuery)
		}
		for name, vals := range r.Header {
			for _, v := range vals {
				if strings.Contains(v, key) || strings.Contains(v, key2) {
					t.Errorf("a client key reached the upstream in %s", name)
				}
			}
		}
	}

	logs := readLogs(t, g.logPath, g.logPath+".access")
	if !strings.Contains(logs, "/v1/chat/completions") || !strings.Contains(logs, "streamGenerateContent") {
		t.Fatalf("the logs recorded nothing: %q", logs)
	}
	for _, secret := range []string{key, key2, unknown, upstreamKey, key[3:20], key2[10:30]} {
		if strings.Contains(logs, secret) {
			t.Errorf("a key appears in the logs")
		}
	}
}

// mockupstreamSlow gives the race test a little latency so holds overlap.
func mockupstreamSlow() mockConfig {
	return mockConfig{Latency: 20 * time.Millisecond}
}

// TestUpstreamWithoutUsage bills an estimate, never zero, when an
// OpenAI-compatible upstream reports no usage, and says so in the row.
func TestUpstreamWithoutUsage(t *testing.T) {
	g := startGateway(t, gatewayOptions{})
	acct, key := g.account("1.00")
	for _, extra := range []string{"", `"stream":true`, `"stream":true,"stream_options":{"include_usage":true}`} {
		before, _ := g.balance(acct)
		r := g.do("POST", "/v1/chat/completions", chatBody(testModel, "no usage here mock:no_usage mock:tokens=40", extra), "Authorization", "Bearer "+key)
		if r.status != 200 {
			t.Fatalf("%s: %d %s", extra, r.status, r.body)
		}
		after, held := g.balance(acct)
		row := g.rows(acct)[0]
		if row.UsageSource != "estimated" || row.Tokens.Output < 40 || row.Tokens.Input <= 0 || held != 0 ||
			before-after != row.Charged || row.Charged != cost(row.Tokens.Input, row.Tokens.Output) {
			t.Errorf("%s: row %+v, debit %s", extra, row, before-after)
		}
	}
	g.audit()
}

// TestClientDisconnectBillsRealUsage: a client that leaves mid-stream is
// billed what the upstream reports for the answer, read to its end.
func TestClientDisconnectBillsRealUsage(t *testing.T) {
	// a provider that drains (on_hangup drain): the stream is read to its
	// end after the client left
	g := startGateway(t, gatewayOptions{extra: "\t\tprovider mock-drain {\n\t\t\tformat openai\n\t\t\tbase_url {env.MG_TEST_MOCK_URL}\n" +
		"\t\t\tkeys {env.MG_TEST_UPSTREAM_KEY}\n\t\t\ton_hangup drain\n\t\t}\n" +
		"\t\tmodel drain-gpt {\n\t\t\troute mock-drain up-drain-gpt\n\t\t\tprice input 0.5 output 1.5\n\t\t}\n"})
	const prompt = "leave early mock:tokens=20 mock:delay=20ms"
	for _, tc := range []struct{ name, path, body string }{
		{"openai client", "/v1/chat/completions", chatBody("drain-gpt", prompt, `"stream":true`)},
		// an Anthropic client on a translated route reads through the
		// keep-alive pump
		{"anthropic client", "/v1/messages", `{"model":"drain-gpt","max_tokens":100,"stream":true,"messages":[{"role":"user","content":"` + prompt + `"}]}`},
	} {
		acct, key := g.account("1.00")
		ctx, cancel := context.WithCancel(context.Background())
		req, _ := http.NewRequestWithContext(ctx, "POST", gatewayAddr+tc.path, strings.NewReader(tc.body))
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("Anthropic-Version", "2023-06-01")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 512)
		if _, err := resp.Body.Read(buf); err != nil {
			t.Fatal(err)
		}
		cancel()
		resp.Body.Close()

		deadline := time.Now().Add(5 * time.Second)
		for len(g.rows(acct)) == 0 && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		rows := g.rows(acct)
		if len(rows) != 1 {
			t.Fatalf("%s: %d rows after the client left", tc.name, len(rows))
		}
		r := rows[0]
		if r.Outcome != "client_closed" || r.UsageSource != "upstream" || r.Tokens.Output != 20 || r.Tokens.Input != mockTokens(prompt) ||
			r.Charged != cost(mockTokens(prompt), 20) {
			t.Fatalf("%s: row = %+v", tc.name, r)
		}
		if _, held := g.balance(acct); held != 0 {
			t.Fatalf("%s: held %s", tc.name, held)
		}
	}
}

// TestReloadKeepsStreamsAndMoney reloads the config while a stream is open:
// the stream finishes, is billed once, and balances and holds carry over.
func TestReloadKeepsStreamsAndMoney(t *testing.T) {
	g := startGateway(t, gatewayOptions{})
	acct, key := g.account("1.00")
	const prompt = "survive the reload mock:tokens=30 mock:delay=30ms"
	req, _ := http.NewRequest("POST", gatewayAddr+"/v1/chat/completions", strings.NewReader(chatBody(testModel, prompt, `"stream":true`)))
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if _, held := g.balance(acct); held == 0 {
		t.Fatal("no hold while streaming")
	}
	g.reload()
	if _, held := g.balance(acct); held == 0 {
		t.Fatal("the reload dropped the open stream's hold")
	}
	data, err := io.ReadAll(resp.Body)
	if err != nil || !strings.HasSuffix(string(data), "data: [DONE]\n\n") {
		t.Fatalf("the stream did not finish across the reload: %v\n%s", err, data)
	}
	bal, held := g.balance(acct)
	if rows := g.rows(acct); len(rows) != 1 || held != 0 || bal != 1_000_000_000-cost(mockTokens(prompt), 30) {
		t.Fatalf("after the reload: balance %s held %s rows %+v", bal, held, rows)
	}
	// The stream's connection belongs to the replaced server, which closes
	// it once its last answer is out; a client racing that close gets a
	// reset on a POST it cannot replay, so start from a fresh connection.
	http.DefaultClient.CloseIdleConnections()
	// the reloaded config serves the same accounts
	if r := g.do("POST", "/v1/chat/completions", chatBody(testModel, "after", ""), "Authorization", "Bearer "+key); r.status != 200 {
		t.Fatalf("after the reload: %d %s", r.status, r.body)
	}
	if r := g.do("GET", "/api/usage", "", "Authorization", "Bearer "+key); !strings.Contains(r.body, `"currency":"EUR"`) {
		t.Fatalf("the reload did not take: %s", r.body)
	}
	g.audit()
}
