package mockupstream

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	aoption "github.com/anthropics/anthropic-sdk-go/option"
)

// antSDK is an Anthropic SDK client for ts with key (x-api-key), without retries.
func antSDK(ts *httptest.Server, key string, opts ...aoption.RequestOption) anthropic.Client {
	return anthropic.NewClient(append([]aoption.RequestOption{
		aoption.WithBaseURL(ts.URL), aoption.WithAPIKey(key), aoption.WithMaxRetries(0),
	}, opts...)...)
}

func antParams(system, text string) anthropic.MessageNewParams {
	p := anthropic.MessageNewParams{
		Model:     "claude-sonnet-4-5",
		MaxTokens: 100,
		Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(text))},
	}
	if system != "" {
		p.System = []anthropic.TextBlockParam{{Text: system}}
	}
	return p
}

// antAsk sends p, streamed (and accumulated) or not.
func antAsk(t *testing.T, c anthropic.Client, p anthropic.MessageNewParams, stream bool) (*anthropic.Message, error) {
	t.Helper()
	if !stream {
		return c.Messages.New(ctxT(t), p)
	}
	s := c.Messages.NewStreaming(ctxT(t), p)
	defer s.Close()
	var m anthropic.Message
	for s.Next() {
		if err := m.Accumulate(s.Current()); err != nil {
			t.Fatalf("accumulate: %v", err)
		}
	}
	return &m, s.Err()
}

// antPost sends a raw Anthropic request with x-api-key and anthropic-version
// (unless given "" in headers) and returns the response and its body.
func antPost(t *testing.T, ts *httptest.Server, path, body string, headers ...string) (*http.Response, []byte, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctxT(t), http.MethodPost, ts.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Api-Key", testKey)
	req.Header.Set("Anthropic-Version", "2023-06-01")
	for i := 0; i+1 < len(headers); i += 2 {
		if headers[i+1] == "" {
			req.Header.Del(headers[i])
		} else {
			req.Header.Set(headers[i], headers[i+1])
		}
	}
	res, err := ts.Client().Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return res, b, err
}

// antError decodes Anthropic's error envelope strictly.
func antError(t *testing.T, res *http.Response, body []byte) (typ, message string) {
	t.Helper()
	var env struct {
		Type  string `json:"type"`
		Error struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		} `json:"error"`
		RequestID string `json:"request_id"`
	}
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(body, &env); err != nil || json.Unmarshal(body, &keys) != nil || len(keys) != 3 {
		t.Fatalf("error body %s: %v", body, err)
	}
	if env.Type != "error" || env.RequestID == "" || env.RequestID != res.Header.Get("Request-Id") || env.Error.Message == "" {
		t.Fatalf("error body %s (request-id %q)", body, res.Header.Get("Request-Id"))
	}
	return env.Error.Type, env.Error.Message
}

func TestAnthropicSDKMessage(t *testing.T) {
	_, ts := start(t, Config{Keys: []string{testKey}})
	c := antSDK(ts, testKey)
	const system, prompt = "Be brief.", "Hello there mock:tokens=5 mock:cached=3 mock:cache_write=2"
	in := InputTokens([][]string{{system}, {prompt}}) // 3 + 6 + 8 = 17
	for _, stream := range []bool{false, true} {
		m, err := antAsk(t, c, antParams(system, prompt), stream)
		if err != nil {
			t.Fatalf("stream=%v: %v", stream, err)
		}
		u := m.Usage
		switch {
		case len(m.Content) != 1 || m.Content[0].Type != "text" || m.Content[0].Text != ReplyText(5):
			t.Errorf("stream=%v: content %+v", stream, m.Content)
		case m.StopReason != anthropic.StopReasonEndTurn || m.StopSequence != "" || m.Model != "claude-sonnet-4-5" ||
			!strings.HasPrefix(m.ID, "msg_") || m.Role != "assistant":
			t.Errorf("stream=%v: message %+v", stream, m)
		case u.InputTokens != int64(in-5) || u.CacheReadInputTokens != 3 || u.CacheCreationInputTokens != 2 || u.OutputTokens != 5:
			t.Errorf("stream=%v: usage %+v, want input %d", stream, u, in-5)
		}
	}
	// The key may also come as Authorization: Bearer.
	bc := anthropic.NewClient(aoption.WithBaseURL(ts.URL), aoption.WithAuthToken(testKey), aoption.WithMaxRetries(0))
	if m, err := bc.Messages.New(ctxT(t), antParams("", "hi")); err != nil || m.Content[0].Text != ReplyText(12) {
		t.Errorf("bearer: %v", err)
	}
}

func TestAnthropicToolsThinkingAndCaps(t *testing.T) {
	_, ts := start(t, Config{})
	c := antSDK(ts, testKey)
	type block struct{ typ, text, name string }
	tool := func(name string) block { return block{"tool_use", ToolArguments, name} }
	for _, tc := range []struct {
		name      string
		prompt    string
		max       int64
		thinking  bool
		stops     []string
		want      []block
		stop      anthropic.StopReason
		stopSeq   string
		outTokens int64
	}{
		{"one tool", "weather? mock:tool=get_weather", 100, false, nil,
			[]block{tool("get_weather")}, anthropic.StopReasonToolUse, "", 10},
		{"text then tool", "weather? mock:tool=lookup mock:tokens=3", 100, false, nil,
			[]block{{"text", ReplyText(3), ""}, tool("lookup")}, anthropic.StopReasonToolUse, "", 13},
		{"parallel tools", "weather? mock:tools=3 mock:tool=w", 100, false, nil,
			[]block{tool("w"), tool("w_2"), tool("w_3")}, anthropic.StopReasonToolUse, "", 30},
		{"thinking", "think mock:thinking=4 mock:tokens=2", 2000, true, nil,
			[]block{{"thinking", ThinkingText(4), ""}, {"text", ReplyText(2), ""}}, anthropic.StopReasonEndTurn, "", 6},
		{"thinking and tool", "think mock:thinking=2 mock:tool=f", 2000, true, nil,
			[]block{{"thinking", ThinkingText(2), ""}, tool("f")}, anthropic.StopReasonToolUse, "", 12},
		{"cap", "long mock:tokens=12", 5, false, nil,
			[]block{{"text", ReplyText(5), ""}}, anthropic.StopReasonMaxTokens, "", 5},
		{"cap drops the call", "x mock:tokens=3 mock:tool=f", 8, false, nil,
			[]block{{"text", ReplyText(3), ""}}, anthropic.StopReasonMaxTokens, "", 8},
		{"stop sequence", "x mock:stop_sequence mock:tokens=2", 100, false, []string{"END", "STOP"},
			[]block{{"text", ReplyText(2), ""}}, anthropic.StopReasonStopSequence, "END", 2},
		{"no text", "x mock:tokens=0", 100, false, nil, nil, anthropic.StopReasonEndTurn, "", 0},
	} {
		for _, stream := range []bool{false, true} {
			p := antParams("", tc.prompt)
			p.MaxTokens = tc.max
			p.StopSequences = tc.stops
			if tc.thinking {
				p.Thinking = anthropic.ThinkingConfigParamOfEnabled(1024)
			}
			m, err := antAsk(t, c, p, stream)
			if err != nil {
				t.Fatalf("%s, stream=%v: %v", tc.name, stream, err)
			}
			var got []block
			for _, b := range m.Content {
				switch b.Type {
				case "text":
					got = append(got, block{"text", b.Text, ""})
				case "thinking":
					got = append(got, block{"thinking", b.Thinking, ""})
					if b.Signature != ThinkingSignature {
						t.Errorf("%s, stream=%v: signature %q", tc.name, stream, b.Signature)
					}
				case "tool_use":
					if !strings.HasPrefix(b.ID, "toolu_mock_") {
						t.Errorf("%s, stream=%v: tool id %q", tc.name, stream, b.ID)
					}
					var args map[string]string
					if err := json.Unmarshal(b.Input, &args); err != nil || args["city"] != "Paris" || args["unit"] != "celsius" {
						t.Errorf("%s, stream=%v: input %s", tc.name, stream, b.Input)
					}
					got = append(got, block{"tool_use", ToolArguments, b.Name})
				default:
					got = append(got, block{b.Type, "", ""})
				}
			}
			if len(got) != len(tc.want) {
				t.Errorf("%s, stream=%v: blocks %+v, want %+v", tc.name, stream, got, tc.want)
			} else {
				for i := range got {
					if got[i] != tc.want[i] {
						t.Errorf("%s, stream=%v: block %d %+v, want %+v", tc.name, stream, i, got[i], tc.want[i])
					}
				}
			}
			if m.StopReason != tc.stop || m.StopSequence != tc.stopSeq || m.Usage.OutputTokens != tc.outTokens {
				t.Errorf("%s, stream=%v: stop %q %q, output %d; want %q %q %d", tc.name, stream,
					m.StopReason, m.StopSequence, m.Usage.OutputTokens, tc.stop, tc.stopSeq, tc.outTokens)
			}
		}
	}
}

func TestAnthropicSDKErrors(t *testing.T) {
	s, ts := start(t, Config{Keys: []string{testKey}})
	c := antSDK(ts, testKey)
	for _, tc := range []struct {
		prompt, typ string
		status      int
		retryAfter  string
	}{
		{"mock:status=529", "overloaded_error", 529, "1"},
		{"mock:status=429 mock:retry_after=3", "rate_limit_error", 429, "3"},
		{"mock:status=500", "api_error", 500, ""},
		{"mock:status=403", "permission_error", 403, ""},
		{"mock:status=404", "not_found_error", 404, ""},
		{"mock:status=400", "invalid_request_error", 400, ""},
		{"mock:bogus", "invalid_request_error", 400, ""},
	} {
		for _, stream := range []bool{false, true} {
			_, err := antAsk(t, c, antParams("", tc.prompt), stream)
			var ae *anthropic.Error
			if !errors.As(err, &ae) {
				t.Fatalf("%s: %v", tc.prompt, err)
			}
			if ae.StatusCode != tc.status || string(ae.Type()) != tc.typ || ae.RequestID == "" ||
				ae.Response.Header.Get("Retry-After") != tc.retryAfter {
				t.Errorf("%s, stream=%v: %d %q %q retry-after %q", tc.prompt, stream, ae.StatusCode, ae.Type(), ae.RequestID,
					ae.Response.Header.Get("Retry-After"))
			}
		}
	}
	// A wrong key: 401 authentication_error, the key not echoed.
	oc := antSDK(ts, otherKey)
	_, err := oc.Messages.New(ctxT(t), antParams("", "hi"))
	var ae *anthropic.Error
	if !errors.As(err, &ae) || ae.StatusCode != 401 || ae.Type() != "authentication_error" || strings.Contains(ae.RawJSON(), otherKey) {
		t.Errorf("wrong key: %v", err)
	}
	// Faults act in Anthropic's shape.
	s.SetFaults([]Fault{{Mode: FaultStatus, Status: 529, Times: 1}})
	if _, err := c.Messages.New(ctxT(t), antParams("", "hi")); !errors.As(err, &ae) || ae.StatusCode != 529 || ae.Type() != "overloaded_error" {
		t.Errorf("fault: %v", err)
	}
	if st := s.KeyStats(testKey); st.ByStatus[529] != 3 || st.ByStatus[401] != 0 {
		t.Errorf("stats %+v", st)
	}
}

func TestAnthropicStreamFraming(t *testing.T) {
	_, ts := start(t, Config{})
	res, body, err := antPost(t, ts, "/v1/messages",
		`{"model":"claude-x","max_tokens":50,"stream":true,"system":"Be brief.","messages":[{"role":"user","content":"hi mock:tokens=2 mock:cached=2 mock:tool=f"}]}`)
	if err != nil || res.StatusCode != 200 || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/event-stream") ||
		!strings.HasPrefix(res.Header.Get("Request-Id"), "req_") {
		t.Fatalf("%v %v %q", err, res.StatusCode, res.Header)
	}
	type event struct {
		name string
		data map[string]any
		raw  string
	}
	var events []event
	for _, chunk := range strings.SplitAfter(string(body), "\n\n") {
		if chunk == "" {
			continue
		}
		lines := strings.Split(strings.TrimSuffix(chunk, "\n\n"), "\n")
		if len(lines) != 2 || !strings.HasPrefix(lines[0], "event: ") || !strings.HasPrefix(lines[1], "data: ") || !strings.HasSuffix(chunk, "\n\n") {
			t.Fatalf("bad framing %q", chunk)
		}
		e := event{name: strings.TrimPrefix(lines[0], "event: "), raw: strings.TrimPrefix(lines[1], "data: ")}
		if err := json.Unmarshal([]byte(e.raw), &e.data); err != nil || e.data["type"] != e.name {
			t.Fatalf("event %s: data %s (%v)", e.name, e.raw, err)
		}
		events = append(events, e)
	}
	var names []string
	for _, e := range events {
		names = append(names, e.name)
	}
	want := "message_start content_block_start ping content_block_delta content_block_delta content_block_stop " +
		"content_block_start content_block_delta content_block_delta content_block_delta content_block_delta content_block_delta " +
		"content_block_stop message_delta message_stop"
	if strings.Join(names, " ") != want {
		t.Fatalf("events %v\nwant %s", names, want)
	}
	in := 3 + (4 + 2) + (4 + 4)
	start := events[0].raw
	for _, s := range []string{`"content":[]`, `"stop_reason":null`, `"stop_sequence":null`, `"output_tokens":1`,
		`"input_tokens":` + itoa(in-2), `"cache_read_input_tokens":2`, `"cache_creation_input_tokens":0`} {
		if !strings.Contains(start, s) {
			t.Errorf("message_start %s lacks %s", start, s)
		}
	}
	if events[1].raw != `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}` ||
		events[3].raw != `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Lorem"}}` ||
		events[4].raw != `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":" ipsum"}}` {
		t.Errorf("text block %s %s %s", events[1].raw, events[3].raw, events[4].raw)
	}
	if !strings.HasPrefix(events[6].raw, `{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_mock_`) ||
		!strings.HasSuffix(events[6].raw, `"name":"f","input":{}}}`) ||
		events[7].raw != `{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":""}}` {
		t.Errorf("tool block %s %s", events[6].raw, events[7].raw)
	}
	var args string
	for _, e := range events[8:12] {
		args += e.data["delta"].(map[string]any)["partial_json"].(string)
	}
	if args != ToolArguments {
		t.Errorf("arguments %q", args)
	}
	if md := events[13].raw; md != `{"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"input_tokens":`+
		itoa(in-2)+`,"cache_creation_input_tokens":0,"cache_read_input_tokens":2,"output_tokens":12}}` {
		t.Errorf("message_delta %s", md)
	}
	if strings.Contains(string(body), "[DONE]") || !strings.HasSuffix(string(body), "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n") {
		t.Error("bad end")
	}

	// No content at all: the ping still comes, after message_start.
	_, body, _ = antPost(t, ts, "/v1/messages", `{"model":"m","max_tokens":5,"stream":true,"messages":[{"role":"user","content":"mock:tokens=0"}]}`)
	if !strings.Contains(string(body), "event: message_start\n") || !strings.Contains(string(body), "}\n\nevent: ping\n") ||
		strings.Contains(string(body), "content_block") {
		t.Errorf("empty answer %s", body)
	}
	// no_usage: no usage anywhere.
	_, body, _ = antPost(t, ts, "/v1/messages", `{"model":"m","max_tokens":5,"stream":true,"messages":[{"role":"user","content":"mock:no_usage"}]}`)
	if strings.Contains(string(body), "usage") || !strings.Contains(string(body), "message_stop") {
		t.Errorf("no_usage %s", body)
	}
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

func TestAnthropicMidStreamFailures(t *testing.T) {
	s, ts := start(t, Config{})
	body := func(d string) string {
		return `{"model":"m","max_tokens":50,"stream":true,"messages":[{"role":"user","content":"x mock:tokens=5 ` + d + `"}]}`
	}
	// cut: two deltas, then the connection closes.
	_, b, err := antPost(t, ts, "/v1/messages", body("mock:cut=2"))
	if !errors.Is(err, io.ErrUnexpectedEOF) || strings.Count(string(b), "text_delta") != 2 || strings.Contains(string(b), "message_stop") {
		t.Errorf("cut: %v %s", err, b)
	}
	// error_after: an error event ends the stream.
	res, b, err := antPost(t, ts, "/v1/messages", body("mock:error_after=1"))
	if err != nil || res.StatusCode != 200 || strings.Count(string(b), "text_delta") != 1 ||
		!strings.HasSuffix(string(b), "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"api_error\",\"message\":\"Internal server error\"},\"request_id\":\""+
			res.Header.Get("Request-Id")+"\"}\n\n") {
		t.Errorf("error_after: %v %s", err, b)
	}
	// The SDK reports the error event.
	c := antSDK(ts, testKey)
	sc := c.Messages.NewStreaming(ctxT(t), antParams("", "x mock:error_after=2"))
	for sc.Next() {
	}
	if err := sc.Err(); err == nil || !strings.Contains(err.Error(), "api_error") {
		t.Errorf("sdk error_after: %v", err)
	}
	// A fault in mode error, non-stream: 500 api_error.
	s.SetFaults([]Fault{{Mode: FaultError, Times: 1}})
	res, b, _ = antPost(t, ts, "/v1/messages", `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"x"}]}`)
	if typ, _ := antError(t, res, b); res.StatusCode != 500 || typ != "api_error" {
		t.Errorf("fault error: %d %s", res.StatusCode, b)
	}
	// Non-stream cut: half a body.
	res, b, err = antPost(t, ts, "/v1/messages", `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"x mock:cut=1"}]}`)
	if !errors.Is(err, io.ErrUnexpectedEOF) || res.ContentLength <= int64(len(b)) {
		t.Errorf("non-stream cut: %v", err)
	}
	// hang ends with the client.
	ctxC, cancel := ctxWithTimeout(t, 150*time.Millisecond)
	defer cancel()
	_, err = c.Messages.New(ctxC, antParams("", "mock:hang"))
	if err == nil {
		t.Error("hang answered")
	}
}

func TestAnthropicValidation(t *testing.T) {
	_, ts := start(t, Config{Keys: []string{testKey}})
	const user = `"messages":[{"role":"user","content":"hi"}]`
	toolTurns := func(result string) string {
		return `"messages":[{"role":"user","content":"Weather?"},{"role":"assistant","content":[{"type":"text","text":"Checking."},` +
			`{"type":"tool_use","id":"toolu_01A","name":"get_weather","input":{"city":"Paris"}}]}` + result + `]`
	}
	for _, tc := range []struct {
		name, path, body string
		headers          []string
		status           int
		typ, contains    string
	}{
		{"extra field", "/v1/messages", `{"model":"m","max_tokens":5,` + user + `,"n":2}`, nil, 400, "invalid_request_error",
			"n: Extra inputs are not permitted"},
		{"openai field", "/v1/messages", `{"model":"m","max_tokens":5,` + user + `,"stream_options":{}}`, nil, 400, "invalid_request_error",
			"stream_options: Extra inputs are not permitted"},
		{"system role", "/v1/messages", `{"model":"m","max_tokens":5,"messages":[{"role":"system","content":"x"},{"role":"user","content":"hi"}]}`,
			nil, 400, "invalid_request_error", `Unexpected role "system"`},
		{"tool role", "/v1/messages", `{"model":"m","max_tokens":5,"messages":[{"role":"tool","content":"x"}]}`,
			nil, 400, "invalid_request_error", "messages.0.role: Input should be 'user' or 'assistant'"},
		{"message extra field", "/v1/messages", `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"x","name":"bob"}]}`,
			nil, 400, "invalid_request_error", "messages.0.name: Extra inputs are not permitted"},
		{"no max_tokens", "/v1/messages", `{"model":"m",` + user + `}`, nil, 400, "invalid_request_error", "max_tokens: Field required"},
		{"no model", "/v1/messages", `{"max_tokens":5,` + user + `}`, nil, 400, "invalid_request_error", "model: Field required"},
		{"empty messages", "/v1/messages", `{"model":"m","max_tokens":5,"messages":[]}`, nil, 400, "invalid_request_error", "messages"},
		{"empty text block", "/v1/messages", `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"text","text":""}]}]}`,
			nil, 400, "invalid_request_error", "text content blocks must be non-empty"},
		{"empty string content", "/v1/messages", `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":""}]}`,
			nil, 400, "invalid_request_error", "non-empty content"},
		{"empty system block", "/v1/messages", `{"model":"m","max_tokens":5,"system":[{"type":"text","text":""}],` + user + `}`,
			nil, 400, "invalid_request_error", "text content blocks must be non-empty"},
		{"bad tool_use id", "/v1/messages", `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"x"},` +
			`{"role":"assistant","content":[{"type":"tool_use","id":"call_abc.1","name":"f","input":{}}]},` +
			`{"role":"user","content":[{"type":"tool_result","tool_use_id":"call_abc.1","content":"ok"}]}]}`,
			nil, 400, "invalid_request_error", "String should match pattern '^[a-zA-Z0-9_-]+$'"},
		{"tool_use without result", "/v1/messages", `{"model":"m","max_tokens":5,` + toolTurns(`,{"role":"user","content":"And?"}`) + `}`,
			nil, 400, "invalid_request_error", "`tool_use` ids were found without `tool_result` blocks immediately after: toolu_01A"},
		{"tool_use last", "/v1/messages", `{"model":"m","max_tokens":5,` + toolTurns(``) + `}`,
			nil, 400, "invalid_request_error", "without `tool_result` blocks"},
		{"result after text", "/v1/messages", `{"model":"m","max_tokens":5,` + toolTurns(`,{"role":"user","content":[{"type":"text","text":"And"},`+
			`{"type":"tool_result","tool_use_id":"toolu_01A","content":"ok"}]}`) + `}`,
			nil, 400, "invalid_request_error", "without `tool_result` blocks"},
		{"unknown result id", "/v1/messages", `{"model":"m","max_tokens":5,` + toolTurns(`,{"role":"user","content":[`+
			`{"type":"tool_result","tool_use_id":"toolu_01A","content":"ok"},{"type":"tool_result","tool_use_id":"toolu_02B","content":"ok"}]}`) + `}`,
			nil, 400, "invalid_request_error", "unexpected `tool_use_id` found in `tool_result` blocks: toolu_02B"},
		{"temperature", "/v1/messages", `{"model":"m","max_tokens":5,"temperature":1.5,` + user + `}`, nil, 400, "invalid_request_error",
			"temperature: Input should be less than or equal to 1"},
		{"small budget", "/v1/messages", `{"model":"m","max_tokens":5000,"thinking":{"type":"enabled","budget_tokens":500},` + user + `}`,
			nil, 400, "invalid_request_error", "budget_tokens: Input should be greater than or equal to 1024"},
		{"budget over max_tokens", "/v1/messages", `{"model":"m","max_tokens":1024,"thinking":{"type":"enabled","budget_tokens":1024},` + user + `}`,
			nil, 400, "invalid_request_error", "`max_tokens` must be greater than `thinking.budget_tokens`"},
		{"thinking with temperature", "/v1/messages", `{"model":"m","max_tokens":2000,"temperature":0.5,"thinking":{"type":"enabled","budget_tokens":1024},` + user + `}`,
			nil, 400, "invalid_request_error", "`temperature` may only be set to 1"},
		{"forced tool with thinking", "/v1/messages", `{"model":"m","max_tokens":2000,"thinking":{"type":"enabled","budget_tokens":1024},` +
			`"tools":[{"name":"f","input_schema":{"type":"object"}}],"tool_choice":{"type":"any"},` + user + `}`,
			nil, 400, "invalid_request_error", "Thinking may not be enabled when tool_choice forces tool use."},
		{"tool schema type", "/v1/messages", `{"model":"m","max_tokens":5,"tools":[{"name":"f","input_schema":{"type":"string"}}],` + user + `}`,
			nil, 400, "invalid_request_error", "tools.0.custom.input_schema.type: Input should be 'object'"},
		{"openai tool shape", "/v1/messages", `{"model":"m","max_tokens":5,"tools":[{"name":"f","parameters":{"type":"object"}}],` + user + `}`,
			nil, 400, "invalid_request_error", "tools.0.custom.parameters: Extra inputs are not permitted"},
		{"count_tokens with max_tokens", "/v1/messages/count_tokens", `{"model":"m","max_tokens":5,` + user + `}`, nil, 400,
			"invalid_request_error", "max_tokens: Extra inputs are not permitted"},
		{"count_tokens with stream", "/v1/messages/count_tokens", `{"model":"m","stream":true,` + user + `}`, nil, 400,
			"invalid_request_error", "stream: Extra inputs are not permitted"},
		{"count_tokens with temperature", "/v1/messages/count_tokens", `{"model":"m","temperature":1,` + user + `}`, nil, 400,
			"invalid_request_error", "temperature: Extra inputs are not permitted"},
		{"no anthropic-version", "/v1/messages", `{"model":"m","max_tokens":5,` + user + `}`, []string{"Anthropic-Version", ""}, 400,
			"invalid_request_error", "anthropic-version"},
		{"no key", "/v1/messages", `{"model":"m","max_tokens":5,` + user + `}`, []string{"X-Api-Key", ""}, 401,
			"authentication_error", "x-api-key header is required"},
		{"wrong key", "/v1/messages", `{"model":"m","max_tokens":5,` + user + `}`, []string{"X-Api-Key", otherKey}, 401,
			"authentication_error", "invalid x-api-key"},
		{"not json", "/v1/messages", `{"model":`, nil, 400, "invalid_request_error", ""},
		{"cache over input", "/v1/messages", `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"mock:cached=5 mock:cache_write=5"}]}`,
			nil, 400, "invalid_request_error", "mockupstream:"},
		{"stop_sequence without stops", "/v1/messages", `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"mock:stop_sequence"}]}`,
			nil, 400, "invalid_request_error", "mockupstream:"},
		{"unknown path", "/v1/messages/batches", `{}`, nil, 404, "not_found_error", ""},
		// Accepted: a full tool round trip, prefill, betas' fields.
		{"tool round trip", "/v1/messages", `{"model":"m","max_tokens":5,` + toolTurns(`,{"role":"user","content":[`+
			`{"type":"tool_result","tool_use_id":"toolu_01A","content":[{"type":"text","text":"18°C"}]},{"type":"text","text":"And tomorrow?"}]}`) + `}`,
			nil, 200, "", ""},
		{"prefill", "/v1/messages", `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"Sure"}]}`,
			nil, 200, "", ""},
		{"everything", "/v1/messages", `{"model":"m","max_tokens":2000,"stop_sequences":["x"],"metadata":{"user_id":"u"},"service_tier":"auto",` +
			`"thinking":{"type":"enabled","budget_tokens":1024},"tool_choice":{"type":"auto"},"top_p":0.97,` +
			`"tools":[{"name":"f","description":"d","input_schema":{"type":"object","properties":{}},"cache_control":{"type":"ephemeral"}},` +
			`{"type":"web_search_20250305","name":"web_search"}],"system":[{"type":"text","text":"s","cache_control":{"type":"ephemeral"}}],` + user + `}`,
			nil, 200, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, b, err := antPost(t, ts, tc.path, tc.body, tc.headers...)
			if err != nil {
				t.Fatal(err)
			}
			if res.StatusCode != tc.status {
				t.Fatalf("status %d: %s", res.StatusCode, b)
			}
			if tc.status == 200 {
				return
			}
			typ, msg := antError(t, res, b)
			if typ != tc.typ || !strings.Contains(msg, tc.contains) {
				t.Errorf("got %s %q, want %s containing %q", typ, msg, tc.typ, tc.contains)
			}
		})
	}
}

func TestAnthropicCountTokensModelsAndBetas(t *testing.T) {
	s, ts := start(t, Config{Models: []string{"claude-a", "claude-b", "claude-c"}})
	c := antSDK(ts, testKey, aoption.WithHeaderAdd("anthropic-beta", "prompt-caching-2024-07-31"),
		aoption.WithHeaderAdd("anthropic-beta", "interleaved-thinking-2025-05-14,bogus-beta"))
	n, err := c.Messages.CountTokens(ctxT(t), anthropic.MessageCountTokensParams{
		Model:    "claude-a",
		System:   anthropic.MessageCountTokensParamsSystemUnion{OfTextBlockArray: []anthropic.TextBlockParam{{Text: "Be brief."}}},
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("How many tokens is this"))},
	})
	if err != nil || n.InputTokens != 3+(4+2)+(4+5) {
		t.Fatalf("count: %+v %v", n, err)
	}
	recs := s.Requests()
	if betas := recs[len(recs)-1].Header.Values("Anthropic-Beta"); strings.Join(betas, "|") !=
		"prompt-caching-2024-07-31|interleaved-thinking-2025-05-14,bogus-beta" {
		t.Errorf("recorded betas %q", betas)
	}
	if _, err := c.Messages.CountTokens(ctxT(t), anthropic.MessageCountTokensParams{Model: "gpt-4o",
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("x"))}}); err == nil {
		t.Error("count for an unknown model")
	}

	page, err := c.Models.List(ctxT(t), anthropic.ModelListParams{Limit: anthropic.Int(2)})
	if err != nil || len(page.Data) != 2 || page.Data[0].ID != "claude-a" || !page.HasMore || page.LastID != "claude-b" ||
		page.Data[0].DisplayName != "Claude A" || page.Data[0].CreatedAt.IsZero() || page.Data[0].Type != "model" {
		t.Fatalf("list: %+v %v", page, err)
	}
	var all []string
	for m := range c.Models.ListAutoPaging(ctxT(t), anthropic.ModelListParams{Limit: anthropic.Int(2)}).All() {
		all = append(all, m.ID)
	}
	if strings.Join(all, ",") != "claude-a,claude-b,claude-c" {
		t.Errorf("auto paging %v", all)
	}
	m, err := c.Models.Get(ctxT(t), "claude-c", anthropic.ModelGetParams{})
	if err != nil || m.ID != "claude-c" {
		t.Errorf("get: %+v %v", m, err)
	}
	var ae *anthropic.Error
	if _, err := c.Models.Get(ctxT(t), "nope", anthropic.ModelGetParams{}); !errors.As(err, &ae) || ae.StatusCode != 404 || ae.Type() != "not_found_error" {
		t.Errorf("get unknown: %v", err)
	}
	// An unknown model on messages: 404 not_found_error "model: x".
	if _, err := c.Messages.New(ctxT(t), antParams("", "hi")); !errors.As(err, &ae) || ae.StatusCode != 404 ||
		!strings.Contains(ae.RawJSON(), `"model: claude-sonnet-4-5"`) {
		t.Errorf("unknown model: %v", err)
	}
	// Without a models list the default Anthropic list is served.
	_, ts2 := start(t, Config{})
	c2 := antSDK(ts2, testKey)
	page, err = c2.Models.List(ctxT(t), anthropic.ModelListParams{})
	if err != nil || len(page.Data) != len(DefaultAnthropicModels) || page.Data[0].ID != DefaultAnthropicModels[0] || page.HasMore {
		t.Errorf("default list: %+v %v", page, err)
	}
}

func ctxWithTimeout(t *testing.T, d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctxT(t), d)
}
