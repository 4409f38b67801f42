package mockupstream

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestStreamFramingWithUsage(t *testing.T) {
	_, ts := start(t, Config{})
	res, body, err := post(t, ts, testKey, "/v1/chat/completions",
		chatBody("Hello there mock:tokens=3", `"stream":true,"stream_options":{"include_usage":true}`))
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != 200 || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("status %d content type %q", res.StatusCode, res.Header.Get("Content-Type"))
	}
	if res.Header.Get("X-Request-Id") == "" {
		t.Error("no x-request-id")
	}
	if strings.Contains(string(body), "event:") {
		t.Error("event: lines in the stream")
	}
	ev := sseEvents(t, body)
	// role, 3 content, finish, usage, [DONE]
	if len(ev) != 7 || ev[6] != "[DONE]" {
		t.Fatalf("events %q", ev)
	}
	if !strings.HasSuffix(string(body), "data: [DONE]\n\n") {
		t.Errorf("body does not end with data: [DONE]")
	}
	type chunk struct {
		ID      string `json:"id"`
		Object  string `json:"object"`
		Created int64  `json:"created"`
		Model   string `json:"model"`
		Choices []struct {
			Index        int                `json:"index"`
			Delta        map[string]*string `json:"delta"`
			Logprobs     *json.RawMessage   `json:"logprobs"`
			FinishReason *string            `json:"finish_reason"`
		} `json:"choices"`
		Usage *json.RawMessage `json:"usage"`
	}
	var chunks []chunk
	var raws []map[string]json.RawMessage
	for _, e := range ev[:6] {
		var c chunk
		var raw map[string]json.RawMessage
		if err := json.Unmarshal([]byte(e), &c); err != nil {
			t.Fatalf("%s: %v", e, err)
		}
		_ = json.Unmarshal([]byte(e), &raw)
		chunks, raws = append(chunks, c), append(raws, raw)
	}
	for i, c := range chunks {
		if c.ID != chunks[0].ID || c.Created != chunks[0].Created || c.Model != "gpt-4o-mini" ||
			c.Object != "chat.completion.chunk" || !strings.HasPrefix(c.ID, "chatcmpl-") {
			t.Errorf("chunk %d header %+v", i, c)
		}
		u, ok := raws[i]["usage"]
		if !ok {
			t.Errorf("chunk %d has no usage key", i)
		}
		if i < 5 && string(u) != "null" {
			t.Errorf("chunk %d usage %s, want null", i, u)
		}
	}
	// First chunk: role and empty content.
	if d := chunks[0].Choices[0].Delta; len(d) != 2 || *d["role"] != "assistant" || *d["content"] != "" {
		t.Errorf("first delta %s", ev[0])
	}
	text := ""
	for i := 1; i <= 3; i++ {
		ch := chunks[i].Choices[0]
		if len(ch.Delta) != 1 || ch.FinishReason != nil {
			t.Errorf("content chunk %s", ev[i])
		}
		text += *ch.Delta["content"]
	}
	if text != ReplyText(3) || !strings.Contains(ev[2], `"content":" `) {
		t.Errorf("text %q", text)
	}
	if !strings.Contains(ev[1], `"logprobs":null,"finish_reason":null`) {
		t.Errorf("content chunk without null logprobs/finish_reason: %s", ev[1])
	}
	fin := chunks[4].Choices[0]
	if len(fin.Delta) != 0 || fin.FinishReason == nil || *fin.FinishReason != "stop" || !strings.Contains(ev[4], `"delta":{}`) {
		t.Errorf("finish chunk %s", ev[4])
	}
	if len(chunks[5].Choices) != 0 || !strings.Contains(ev[5], `"choices":[]`) {
		t.Errorf("usage chunk %s", ev[5])
	}
	var u struct {
		Prompt     int `json:"prompt_tokens"`
		Completion int `json:"completion_tokens"`
		Total      int `json:"total_tokens"`
	}
	_ = json.Unmarshal(*chunks[5].Usage, &u)
	if u.Prompt != 10 || u.Completion != 3 || u.Total != 13 {
		t.Errorf("usage %s", *chunks[5].Usage)
	}
	for _, k := range []string{"prompt_tokens_details", "cached_tokens", "completion_tokens_details", "reasoning_tokens",
		"accepted_prediction_tokens", "rejected_prediction_tokens", "audio_tokens"} {
		if !strings.Contains(ev[5], `"`+k+`":`) {
			t.Errorf("usage chunk without %s", k)
		}
	}
}

func TestStreamFramingWithoutUsage(t *testing.T) {
	_, ts := start(t, Config{ReplyTokens: 2})
	for _, extra := range []string{`"stream":true`, `"stream":true,"stream_options":{"include_usage":false}`, `"stream":true,"stream_options":null`} {
		_, body, err := post(t, ts, testKey, "/v1/chat/completions", chatBody("hi", extra))
		if err != nil {
			t.Fatal(err)
		}
		ev := sseEvents(t, body)
		if len(ev) != 5 || ev[4] != "[DONE]" {
			t.Fatalf("%s: events %q", extra, ev)
		}
		if strings.Contains(string(body), `"usage"`) {
			t.Errorf("%s: a usage key without include_usage", extra)
		}
	}
}

func TestNonStreamBody(t *testing.T) {
	_, ts := start(t, Config{})
	res, body, err := post(t, ts, testKey, "/v1/chat/completions", chatBody("Hello there", `"service_tier":"flex"`))
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != 200 || res.Header.Get("Content-Type") != "application/json" || res.ContentLength != int64(len(body)) {
		t.Fatalf("status %d type %q length %d", res.StatusCode, res.Header.Get("Content-Type"), res.ContentLength)
	}
	s := string(body)
	for _, want := range []string{
		`{"id":"chatcmpl-`, `"object":"chat.completion","created":`, `"model":"gpt-4o-mini","choices":[{"index":0,` +
			`"message":{"role":"assistant","content":"` + ReplyText(12) + `","refusal":null,"annotations":[]},` +
			`"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":9,"completion_tokens":12,"total_tokens":21,` +
			`"prompt_tokens_details":{"cached_tokens":0,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0,` +
			`"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}},"service_tier":"flex",` +
			`"system_fingerprint":"fp_mock"}`,
	} {
		if !strings.Contains(s, want) {
			t.Errorf("body %s\nwant %s", s, want)
		}
	}
}

func TestValidation(t *testing.T) {
	_, ts := start(t, Config{})
	for _, tc := range []struct {
		name, body  string
		param, code any
	}{
		{"not json", `{"model":`, nil, nil},
		{"not an object", `[1,2]`, nil, nil},
		{"empty body", ``, nil, nil},
		{"no model", `{"messages":[{"role":"user","content":"hi"}]}`, nil, nil},
		{"no messages", `{"model":"m"}`, "messages", "missing_required_parameter"},
		{"empty messages", `{"model":"m","messages":[]}`, "messages", "empty_array"},
		{"stream_options without stream", chatBody("hi", `"stream_options":{"include_usage":true}`), "stream_options", nil},
		{"stream false with stream_options", chatBody("hi", `"stream":false,"stream_options":{"include_usage":true}`), "stream_options", nil},
		{"bad role", `{"model":"m","messages":[{"role":"robot","content":"hi"}]}`, "messages[0].role", "invalid_value"},
		{"no content", `{"model":"m","messages":[{"role":"user"}]}`, "messages[0].content", "missing_required_parameter"},
		{"content number", `{"model":"m","messages":[{"role":"user","content":5}]}`, "messages[0].content", "invalid_type"},
		{"wrong type", chatBody("hi", `"stream":"yes"`), "stream", "invalid_type"},
		{"max_tokens 0", chatBody("hi", `"max_tokens":0`), "max_tokens", "integer_below_min_value"},
		{"unknown directive", chatBody("hi mock:tokenz=3", ""), "messages", "invalid_value"},
		{"bad directive value", chatBody("hi mock:tokens=x", ""), "messages", "invalid_value"},
		{"cached over prompt", chatBody("hi mock:cached=100", ""), "messages", "invalid_value"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, body, err := post(t, ts, testKey, "/v1/chat/completions", tc.body)
			if err != nil {
				t.Fatal(err)
			}
			if res.StatusCode != 400 {
				t.Fatalf("status %d: %s", res.StatusCode, body)
			}
			e := errorEnvelope(t, body)
			if e["type"] != "invalid_request_error" || e["param"] != tc.param || e["code"] != tc.code || e["message"] == "" {
				t.Errorf("envelope %s", body)
			}
		})
	}
}

func TestRoutesAndAuth(t *testing.T) {
	_, ts := start(t, Config{Keys: []string{testKey}})
	for _, tc := range []struct {
		name, method, path, key string
		status                  int
		code                    any
	}{
		{"no key", "POST", "/v1/chat/completions", "", 401, "invalid_api_key"},
		{"wrong key", "POST", "/v1/chat/completions", otherKey, 401, "invalid_api_key"},
		{"models without key", "GET", "/v1/models", "", 401, "invalid_api_key"},
		{"unknown route", "POST", "/v1/nothing", testKey, 404, nil},
		{"wrong method", "GET", "/v1/chat/completions", testKey, 405, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequestWithContext(ctxT(t), tc.method, ts.URL+tc.path, strings.NewReader(chatBody("hi", "")))
			if tc.key != "" {
				req.Header.Set("Authorization", "Bearer "+tc.key)
			}
			res, err := ts.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if res.StatusCode != tc.status {
				t.Fatalf("status %d: %s", res.StatusCode, body)
			}
			if e := errorEnvelope(t, body); e["code"] != tc.code {
				t.Errorf("envelope %s", body)
			}
			if tc.key != "" && strings.Contains(string(body), tc.key) {
				t.Errorf("the key is in the body")
			}
		})
	}
}

func TestModelsDefaultList(t *testing.T) {
	_, ts := start(t, Config{})
	req, _ := http.NewRequestWithContext(ctxT(t), "GET", ts.URL+"/v1/models", nil)
	req.Header.Set("Authorization", "Bearer k")
	res, err := ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var list struct {
		Object string           `json:"object"`
		Data   []map[string]any `json:"data"`
	}
	if err := json.NewDecoder(res.Body).Decode(&list); err != nil {
		t.Fatal(err)
	}
	if list.Object != "list" || len(list.Data) != len(DefaultModels) {
		t.Fatalf("%+v", list)
	}
	for i, m := range list.Data {
		if len(m) != 4 || m["id"] != DefaultModels[i] || m["object"] != "model" || m["owned_by"] != "mock" || m["created"] == nil {
			t.Errorf("model %v", m)
		}
	}
}

func TestRawCutAndErrorAfter(t *testing.T) {
	_, ts := start(t, Config{})
	// cut: the role chunk and K content chunks, then an incomplete body.
	_, body, err := post(t, ts, testKey, "/v1/chat/completions", chatBody("x mock:cut=2", `"stream":true,"stream_options":{"include_usage":true}`))
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("stream cut: read error %v, want unexpected EOF", err)
	}
	ev := sseEvents(t, body)
	if len(ev) != 3 || strings.Contains(string(body), "[DONE]") || strings.Contains(string(body), "finish_reason\":\"") {
		t.Errorf("cut stream %q", ev)
	}
	// cut=0: only the role chunk.
	_, body, _ = post(t, ts, testKey, "/v1/chat/completions", chatBody("x mock:cut=0", `"stream":true`))
	if ev := sseEvents(t, body); len(ev) != 1 {
		t.Errorf("cut=0 stream %q", ev)
	}
	// Non-stream cut: a Content-Length larger than the body sent.
	res, body, err := post(t, ts, testKey, "/v1/chat/completions", chatBody("x mock:cut=1", ""))
	if !errors.Is(err, io.ErrUnexpectedEOF) || res.ContentLength <= int64(len(body)) || len(body) == 0 {
		t.Errorf("non-stream cut: err %v, length %d, got %d bytes", err, res.ContentLength, len(body))
	}
	// error_after: K content chunks, then the error event, no [DONE], a clean end.
	res, body, err = post(t, ts, testKey, "/v1/chat/completions", chatBody("x mock:error_after=1", `"stream":true,"stream_options":{"include_usage":true}`))
	if err != nil || res.StatusCode != 200 {
		t.Fatalf("error_after: %v", err)
	}
	ev = sseEvents(t, body)
	if len(ev) != 3 || strings.Contains(string(body), "[DONE]") {
		t.Fatalf("error_after stream %q", ev)
	}
	if ev[2] != `{"error":{"message":"`+openAIServerErrorMessage+`","type":"server_error","param":null,"code":null}}` {
		t.Errorf("error event %s", ev[2])
	}
}

func TestLatencyAndDelay(t *testing.T) {
	_, ts := start(t, Config{Latency: 300 * time.Millisecond, TokenDelay: 10 * time.Millisecond})
	t0 := time.Now()
	_, _, err := post(t, ts, testKey, "/v1/chat/completions", chatBody("x mock:tokens=5", ""))
	if d := time.Since(t0); err != nil || d < 350*time.Millisecond {
		t.Errorf("non-stream took %v (%v), want ≥ 300ms + 5×10ms", d, err)
	}
	t0 = time.Now()
	_, _, err = post(t, ts, testKey, "/v1/chat/completions", chatBody("x mock:latency=0s mock:delay=0s", ""))
	if d := time.Since(t0); err != nil || d > 250*time.Millisecond {
		t.Errorf("directives latency=0 delay=0: took %v (%v)", d, err)
	}

	// The stream's headers come after the latency, its chunks every delay.
	req, _ := http.NewRequestWithContext(ctxT(t), "POST", ts.URL+"/v1/chat/completions",
		strings.NewReader(chatBody("x mock:tokens=3 mock:delay=80ms mock:latency=50ms", `"stream":true`)))
	req.Header.Set("Authorization", "Bearer "+testKey)
	t0 = time.Now()
	res, err := ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if d := time.Since(t0); d < 50*time.Millisecond || d > 50*time.Millisecond+3*80*time.Millisecond {
		t.Errorf("stream headers after %v", d)
	}
	buf := make([]byte, 4096)
	n, _ := res.Body.Read(buf) // the role chunk, flushed at once
	if !strings.Contains(string(buf[:n]), `"role":"assistant"`) || strings.Contains(string(buf[:n]), "Lorem") {
		t.Errorf("first read %q", buf[:n])
	}
	rest, _ := io.ReadAll(res.Body)
	if d := time.Since(t0); d < 50*time.Millisecond+3*80*time.Millisecond {
		t.Errorf("stream took %v", d)
	}
	if !strings.HasSuffix(string(rest), "data: [DONE]\n\n") {
		t.Errorf("rest %q", rest)
	}
}

func TestResponseHeaders(t *testing.T) {
	_, ts := start(t, Config{})
	res, _, err := post(t, ts, testKey, "/v1/chat/completions", chatBody("hi", ""))
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range []string{"X-Request-Id", "Openai-Organization", "Openai-Version", "Openai-Processing-Ms"} {
		if res.Header.Get(h) == "" {
			t.Errorf("no %s", h)
		}
	}
	if _, err := strconv.Atoi(res.Header.Get("Openai-Processing-Ms")); err != nil {
		t.Errorf("openai-processing-ms %q", res.Header.Get("Openai-Processing-Ms"))
	}
}
