package mockupstream

import (
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

func TestSDKCompletion(t *testing.T) {
	_, ts := start(t, Config{Keys: []string{testKey}})
	c := sdk(ts, testKey)
	res, err := c.Chat.Completions.New(ctxT(t), openai.ChatCompletionNewParams{
		Model: "gpt-4o-mini",
		Messages: []openai.ChatCompletionMessageParamUnion{
			openai.SystemMessage("You are terse."),
			openai.UserMessage("Hello there"),
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	wantPrompt := InputTokens([][]string{{"You are terse."}, {"Hello there"}}) // 3 + (4+3) + (4+2) = 16
	if wantPrompt != 16 {
		t.Fatalf("InputTokens = %d, want 16", wantPrompt)
	}
	if !strings.HasPrefix(res.ID, "chatcmpl-") || res.Object != "chat.completion" || res.Created == 0 {
		t.Errorf("id %q object %q created %d", res.ID, res.Object, res.Created)
	}
	if res.Model != "gpt-4o-mini" || !strings.Contains(res.RawJSON(), `"system_fingerprint":"fp_mock"`) || res.ServiceTier != "default" {
		t.Errorf("model %q tier %q: %s", res.Model, res.ServiceTier, res.RawJSON())
	}
	if len(res.Choices) != 1 {
		t.Fatalf("%d choices", len(res.Choices))
	}
	ch := res.Choices[0]
	if ch.Message.Role != "assistant" || ch.Message.Content != ReplyText(12) || ch.FinishReason != "stop" {
		t.Errorf("choice %+v", ch)
	}
	u := res.Usage
	if u.PromptTokens != int64(wantPrompt) || u.CompletionTokens != 12 || u.TotalTokens != int64(wantPrompt)+12 {
		t.Errorf("usage %d+%d=%d", u.PromptTokens, u.CompletionTokens, u.TotalTokens)
	}
	// Every usage field is present on the wire.
	for _, f := range []bool{u.PromptTokensDetails.JSON.CachedTokens.Valid(), u.PromptTokensDetails.JSON.AudioTokens.Valid(),
		u.CompletionTokensDetails.JSON.ReasoningTokens.Valid(), u.CompletionTokensDetails.JSON.AudioTokens.Valid(),
		u.CompletionTokensDetails.JSON.AcceptedPredictionTokens.Valid(), u.CompletionTokensDetails.JSON.RejectedPredictionTokens.Valid()} {
		if !f {
			t.Errorf("usage detail missing: %s", u.RawJSON())
		}
	}
}

func TestSDKStreamAccumulator(t *testing.T) {
	_, ts := start(t, Config{ReplyTokens: 7})
	c := sdk(ts, testKey)
	params := userParams("Hello there mock:reasoning=5 mock:cached=4")
	params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
	stream := c.Chat.Completions.NewStreaming(ctxT(t), params)
	var acc openai.ChatCompletionAccumulator
	chunks := 0
	for stream.Next() {
		if !acc.AddChunk(stream.Current()) {
			t.Fatalf("chunk %d rejected by the accumulator", chunks)
		}
		chunks++
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	// role + 7 content + finish + usage
	if chunks != 10 {
		t.Errorf("%d chunks, want 10", chunks)
	}
	if got := acc.Choices[0].Message.Content; got != ReplyText(7) {
		t.Errorf("content %q, want %q", got, ReplyText(7))
	}
	if acc.Choices[0].FinishReason != "stop" {
		t.Errorf("finish %q", acc.Choices[0].FinishReason)
	}
	prompt := int64(InputTokens([][]string{{"Hello there mock:reasoning=5 mock:cached=4"}})) // 3+4+4 = 11
	u := acc.Usage
	if u.PromptTokens != prompt || u.CompletionTokens != 12 || u.TotalTokens != prompt+12 ||
		u.CompletionTokensDetails.ReasoningTokens != 5 || u.PromptTokensDetails.CachedTokens != 4 {
		t.Errorf("usage %s", u.RawJSON())
	}

	// The same request without streaming gives the same text and usage.
	params.StreamOptions = openai.ChatCompletionStreamOptionsParam{}
	res, err := c.Chat.Completions.New(ctxT(t), params)
	if err != nil {
		t.Fatal(err)
	}
	if res.Choices[0].Message.Content != acc.Choices[0].Message.Content ||
		res.Usage.TotalTokens != u.TotalTokens || res.Usage.CompletionTokensDetails.ReasoningTokens != 5 {
		t.Errorf("non-stream %q %s", res.Choices[0].Message.Content, res.Usage.RawJSON())
	}
}

func TestSDKStreamWithoutUsage(t *testing.T) {
	_, ts := start(t, Config{})
	c := sdk(ts, testKey)
	stream := c.Chat.Completions.NewStreaming(ctxT(t), userParams("hi"))
	var acc openai.ChatCompletionAccumulator
	for stream.Next() {
		acc.AddChunk(stream.Current())
		if stream.Current().JSON.Usage.Valid() {
			t.Errorf("usage key present without include_usage: %s", stream.Current().RawJSON())
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if acc.Choices[0].Message.Content != ReplyText(DefaultReplyTokens) || acc.Usage.TotalTokens != 0 {
		t.Errorf("content %q usage %d", acc.Choices[0].Message.Content, acc.Usage.TotalTokens)
	}
}

func TestSDKOutputCap(t *testing.T) {
	_, ts := start(t, Config{})
	c := sdk(ts, testKey)
	for _, tc := range []struct {
		name       string
		text       string
		mct, mt    int64
		wantN      int
		wantReason int64
		wantFinish string
	}{
		{"max_tokens", "a", 0, 5, 5, 0, "length"},
		{"max_completion_tokens preferred", "a", 4, 100, 4, 0, "length"},
		{"under the cap", "a mock:tokens=3", 0, 3, 3, 0, "stop"},
		{"reasoning counts", "a mock:tokens=10 mock:reasoning=6", 8, 0, 2, 6, "length"},
		{"reasoning over the cap", "a mock:reasoning=9", 8, 0, 0, 8, "length"},
		{"finish directive wins", "a mock:finish=content_filter", 3, 0, 3, 0, "content_filter"},
		{"finish length without cap", "a mock:tokens=2 mock:finish=length", 0, 0, 2, 0, "length"},
		{"zero tokens", "a mock:tokens=0", 0, 0, 0, 0, "stop"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := userParams(tc.text)
			if tc.mct > 0 {
				p.MaxCompletionTokens = openai.Int(tc.mct)
			}
			if tc.mt > 0 {
				p.MaxTokens = openai.Int(tc.mt)
			}
			res, err := c.Chat.Completions.New(ctxT(t), p)
			if err != nil {
				t.Fatal(err)
			}
			ch := res.Choices[0]
			if ch.Message.Content != ReplyText(tc.wantN) || ch.FinishReason != tc.wantFinish {
				t.Errorf("content %q finish %q", ch.Message.Content, ch.FinishReason)
			}
			if res.Usage.CompletionTokens != int64(tc.wantN)+tc.wantReason ||
				res.Usage.CompletionTokensDetails.ReasoningTokens != tc.wantReason {
				t.Errorf("usage %s", res.Usage.RawJSON())
			}
		})
	}
}

func TestSDKEchoModelAndContentParts(t *testing.T) {
	_, ts := start(t, Config{})
	c := sdk(ts, testKey)
	parts := []openai.ChatCompletionContentPartUnionParam{
		openai.TextContentPart("one two"),
		openai.ImageContentPart(openai.ChatCompletionContentPartImageImageURLParam{URL: "https://example.com/x.png"}),
		openai.TextContentPart("three mock:echo_model=gpt-4o-2024-08-06"),
	}
	asst := openai.ChatCompletionAssistantMessageParam{ToolCalls: []openai.ChatCompletionMessageToolCallUnionParam{{
		OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{
			ID:       "call_1",
			Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{Name: "f", Arguments: `{"city": "Paris"}`},
		},
	}}}
	res, err := c.Chat.Completions.New(ctxT(t), openai.ChatCompletionNewParams{
		Model: "gpt-4o",
		Messages: []openai.ChatCompletionMessageParamUnion{
			openai.UserMessage("first question mock:tokens=1"), // not the last user message: no effect
			{OfAssistant: &asst},
			openai.ToolMessage("18 degrees, cloudy", "call_1"),
			openai.UserMessage(parts),
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Model != "gpt-4o-2024-08-06" {
		t.Errorf("model %q", res.Model)
	}
	if res.Choices[0].Message.Content != ReplyText(12) {
		t.Errorf("a directive of an earlier user message applied: %q", res.Choices[0].Message.Content)
	}
	// 3 + (4+3) + (4+2 arguments words) + (4+3) + (4+2+2) = 3+7+6+7+8
	want := InputTokens([][]string{
		{"first question mock:tokens=1"}, {`{"city": "Paris"}`}, {"18 degrees, cloudy"},
		{"one two", "three mock:echo_model=gpt-4o-2024-08-06"},
	})
	if want != 31 || res.Usage.PromptTokens != int64(want) {
		t.Errorf("prompt tokens %d, rule %d, want 31", res.Usage.PromptTokens, want)
	}
}

func TestSDKStatusDirective(t *testing.T) {
	_, ts := start(t, Config{})
	c := sdk(ts, testKey)
	for _, tc := range []struct {
		status   int
		typ      string
		code     string
		retryHdr string
	}{
		{400, "invalid_request_error", "", ""},
		{401, "invalid_request_error", "invalid_api_key", ""},
		{403, "request_forbidden", "unsupported_country_region_territory", ""},
		{404, "invalid_request_error", "model_not_found", ""},
		{429, "requests", "rate_limit_exceeded", "1"},
		{500, "server_error", "", ""},
		{502, "server_error", "", ""},
		{503, "server_error", "", ""},
	} {
		t.Run(http.StatusText(tc.status), func(t *testing.T) {
			_, err := c.Chat.Completions.New(ctxT(t), userParams("x mock:status="+strconv.Itoa(tc.status)))
			var apiErr *openai.Error
			if !errors.As(err, &apiErr) {
				t.Fatalf("error %v, want *openai.Error", err)
			}
			if apiErr.StatusCode != tc.status || apiErr.Type != tc.typ || apiErr.Code != tc.code || apiErr.Message == "" {
				t.Errorf("got %d %q %q %q", apiErr.StatusCode, apiErr.Type, apiErr.Code, apiErr.Message)
			}
			if got := apiErr.Response.Header.Get("Retry-After"); got != tc.retryHdr {
				t.Errorf("Retry-After %q, want %q", got, tc.retryHdr)
			}
			if strings.Contains(apiErr.RawJSON(), testKey) {
				t.Errorf("the key is in the body: %s", apiErr.RawJSON())
			}
		})
	}
	_, err := c.Chat.Completions.New(ctxT(t), userParams("x mock:status=429 mock:retry_after=7"))
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.Response.Header.Get("Retry-After") != "7" {
		t.Errorf("retry_after: %v", err)
	}
	if msg := apiErr.Message; !strings.Contains(msg, "gpt-4o-mini") || !strings.Contains(msg, "7s") {
		t.Errorf("429 message %q", msg)
	}
}

func TestSDKUnauthorized(t *testing.T) {
	s, ts := start(t, Config{Keys: []string{testKey}})
	for _, key := range []string{otherKey, "short"} {
		_, err := sdk(ts, key).Chat.Completions.New(ctxT(t), userParams("hi"))
		var apiErr *openai.Error
		if !errors.As(err, &apiErr) {
			t.Fatalf("error %v", err)
		}
		if apiErr.StatusCode != 401 || apiErr.Type != "invalid_request_error" || apiErr.Code != "invalid_api_key" {
			t.Errorf("got %d %q %q", apiErr.StatusCode, apiErr.Type, apiErr.Code)
		}
		if strings.Contains(apiErr.RawJSON(), key) {
			t.Errorf("the whole key is in the body: %s", apiErr.RawJSON())
		}
		if !strings.Contains(apiErr.Message, "Incorrect API key provided: "+maskKey(key)+".") {
			t.Errorf("message %q", apiErr.Message)
		}
		if st := s.KeyStats(key); st.Requests != 1 || st.Failed != 1 || st.ByStatus[401] != 1 {
			t.Errorf("stats %+v", st)
		}
	}
	if !strings.Contains(maskKey(otherKey), "sk-ot***RS") {
		t.Errorf("mask %q", maskKey(otherKey))
	}
}

func TestSDKHang(t *testing.T) {
	s, ts := start(t, Config{})
	c := sdk(ts, testKey, option.WithRequestTimeout(300*time.Millisecond))
	t0 := time.Now()
	_, err := c.Chat.Completions.New(ctxT(t), userParams("x mock:hang"))
	if err == nil || time.Since(t0) < 300*time.Millisecond {
		t.Fatalf("err %v after %v", err, time.Since(t0))
	}
	waitFor(t, func() bool { return s.KeyStats(testKey).Active == 0 })
	if st := s.KeyStats(testKey); st.Failed != 1 || len(st.ByStatus) != 0 {
		t.Errorf("stats %+v", st)
	}
}

func TestSDKClose(t *testing.T) {
	s, ts := start(t, Config{})
	c := sdk(ts, testKey)
	_, err := c.Chat.Completions.New(ctxT(t), userParams("x mock:close"))
	var apiErr *openai.Error
	if err == nil || errors.As(err, &apiErr) {
		t.Fatalf("err %v, want a transport error", err)
	}
	stream := c.Chat.Completions.NewStreaming(ctxT(t), userParams("x mock:close"))
	for stream.Next() {
		t.Error("a chunk after close")
	}
	if stream.Err() == nil {
		t.Error("stream: no error")
	}
	if st := s.KeyStats(testKey); st.Failed != 2 || st.Streams != 1 || len(st.ByStatus) != 0 {
		t.Errorf("stats %+v", st)
	}
}

func TestSDKCut(t *testing.T) {
	s, ts := start(t, Config{})
	c := sdk(ts, testKey)
	p := userParams("x mock:cut=3")
	p.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
	stream := c.Chat.Completions.NewStreaming(ctxT(t), p)
	var acc openai.ChatCompletionAccumulator
	for stream.Next() {
		acc.AddChunk(stream.Current())
	}
	if stream.Err() == nil {
		t.Error("cut stream ended without an error")
	}
	if got := acc.Choices[0].Message.Content; got != ReplyText(3) || acc.Choices[0].FinishReason != "" || acc.Usage.TotalTokens != 0 {
		t.Errorf("content %q finish %q usage %d", got, acc.Choices[0].FinishReason, acc.Usage.TotalTokens)
	}

	_, err := c.Chat.Completions.New(ctxT(t), userParams("x mock:cut=3"))
	if err == nil {
		t.Error("cut non-stream: no error")
	}
	if st := s.KeyStats(testKey); st.Failed != 2 || st.ByStatus[200] != 2 || st.Completed != 0 {
		t.Errorf("stats %+v", st)
	}
}

func TestSDKErrorAfter(t *testing.T) {
	_, ts := start(t, Config{})
	c := sdk(ts, testKey)
	stream := c.Chat.Completions.NewStreaming(ctxT(t), userParams("x mock:error_after=2"))
	var acc openai.ChatCompletionAccumulator
	for stream.Next() {
		acc.AddChunk(stream.Current())
	}
	if stream.Err() == nil || !strings.Contains(stream.Err().Error(), "server_error") {
		t.Errorf("stream error %v", stream.Err())
	}
	if got := acc.Choices[0].Message.Content; got != ReplyText(2) {
		t.Errorf("content %q", got)
	}
	_, err := c.Chat.Completions.New(ctxT(t), userParams("x mock:error_after=2"))
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 500 || apiErr.Type != "server_error" {
		t.Errorf("non-stream %v", err)
	}
}

func TestSDKModels(t *testing.T) {
	_, ts := start(t, Config{Models: []string{"m-one", "m-two"}})
	c := sdk(ts, testKey)
	page, err := c.Models.List(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Data) != 2 || page.Data[0].ID != "m-one" || page.Data[1].OwnedBy != "mock" || page.Data[0].Object != "model" {
		t.Errorf("models %+v", page.Data)
	}
	m, err := c.Models.Get(ctxT(t), "m-two")
	if err != nil || m.ID != "m-two" || m.Created == 0 {
		t.Errorf("get %v %+v", err, m)
	}
	_, err = c.Models.Get(ctxT(t), "nope")
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 404 || apiErr.Code != "model_not_found" {
		t.Errorf("unknown model: %v", err)
	}
	p := userParams("hi")
	p.Model = "gpt-4o-mini"
	_, err = c.Chat.Completions.New(ctxT(t), p)
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 404 || apiErr.Code != "model_not_found" ||
		!strings.Contains(apiErr.Message, "`gpt-4o-mini`") {
		t.Errorf("chat with an unknown model: %v", err)
	}
	p.Model = "m-one"
	if _, err = c.Chat.Completions.New(ctxT(t), p); err != nil {
		t.Error(err)
	}
}

func TestSDKRetriesPastFault(t *testing.T) {
	s, ts := start(t, Config{Faults: []Fault{{Key: testKey, Mode: FaultStatus, Status: 500, Times: 1}}})
	res, err := sdk(ts, testKey, option.WithMaxRetries(1)).Chat.Completions.New(ctxT(t), userParams("hi"))
	if err != nil {
		t.Fatal(err)
	}
	if res.Choices[0].Message.Content != ReplyText(12) {
		t.Errorf("content %q", res.Choices[0].Message.Content)
	}
	if st := s.KeyStats(testKey); st.Requests != 2 || st.Failed != 1 || st.Completed != 1 || st.ByStatus[500] != 1 || st.ByStatus[200] != 1 {
		t.Errorf("stats %+v", st)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in 5s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
