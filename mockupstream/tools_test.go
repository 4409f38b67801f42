package mockupstream

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/openai/openai-go/v3"
	"google.golang.org/genai"
)

// OpenAI tool calls and thinking, and the cross-vendor token rule.

func TestOpenAIToolCallsAndThinking(t *testing.T) {
	_, ts := start(t, Config{})
	c := sdk(ts, testKey)
	for _, tc := range []struct {
		name, prompt string
		max          int64
		text         string
		calls        []string
		finish       string
		completion   int64
		reasoning    int64
	}{
		{"one call", "weather? mock:tool=get_weather", 0, "", []string{"get_weather"}, "tool_calls", 10, 0},
		{"text and calls", "weather? mock:tokens=2 mock:tools=2 mock:tool=w", 0, ReplyText(2), []string{"w", "w_2"}, "tool_calls", 22, 0},
		{"default name", "weather? mock:tools=3", 0, "", []string{"get_weather", "get_weather_2", "get_weather_3"}, "tool_calls", 30, 0},
		{"thinking", "x mock:thinking=5 mock:tokens=3", 0, ReplyText(3), nil, "stop", 8, 5},
		{"thinking and call", "x mock:thinking=5 mock:tool=f", 0, "", []string{"f"}, "tool_calls", 15, 5},
		{"cap keeps whole calls", "x mock:tokens=1 mock:tools=3", 25, ReplyText(1), []string{"get_weather", "get_weather_2"}, "length", 25, 0},
		{"stop_sequence stops normally", "x mock:stop_sequence mock:tokens=2", 0, ReplyText(2), nil, "stop", 2, 0},
	} {
		for _, stream := range []bool{false, true} {
			p := userParams(tc.prompt)
			if tc.max > 0 {
				p.MaxCompletionTokens = openai.Int(tc.max)
			}
			var cc openai.ChatCompletion
			if stream {
				p.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
				s := c.Chat.Completions.NewStreaming(ctxT(t), p)
				var acc openai.ChatCompletionAccumulator
				for s.Next() {
					acc.AddChunk(s.Current())
				}
				if err := s.Err(); err != nil {
					t.Fatalf("%s: %v", tc.name, err)
				}
				cc = acc.ChatCompletion
			} else {
				r, err := c.Chat.Completions.New(ctxT(t), p)
				if err != nil {
					t.Fatalf("%s: %v", tc.name, err)
				}
				cc = *r
			}
			msg := cc.Choices[0].Message
			var names []string
			for _, call := range msg.ToolCalls {
				names = append(names, call.Function.Name)
				if !strings.HasPrefix(call.ID, "call_mock_") || call.Type != "function" || call.Function.Arguments != ToolArguments {
					t.Errorf("%s, stream=%v: call %+v", tc.name, stream, call)
				}
			}
			if msg.Content != tc.text || strings.Join(names, ",") != strings.Join(tc.calls, ",") || cc.Choices[0].FinishReason != tc.finish ||
				cc.Usage.CompletionTokens != tc.completion || cc.Usage.CompletionTokensDetails.ReasoningTokens != tc.reasoning {
				t.Errorf("%s, stream=%v: %q %v %q usage %+v", tc.name, stream, msg.Content, names, cc.Choices[0].FinishReason, cc.Usage)
			}
			if !stream && len(tc.calls) > 0 && tc.text == "" && !strings.Contains(cc.RawJSON(), `"content":null`) {
				t.Errorf("%s: content not null: %s", tc.name, cc.RawJSON())
			}
		}
	}
}

func TestOpenAIToolCallStreamRaw(t *testing.T) {
	_, ts := start(t, Config{})
	_, body, err := post(t, ts, testKey, "/v1/chat/completions", chatBody("x mock:tools=2", `"stream":true`))
	if err != nil {
		t.Fatal(err)
	}
	ev := sseEvents(t, body)
	// role+call 0 header, call 1 header, 4 fragments × 2 calls, finish, [DONE]
	if len(ev) != 12 || ev[11] != "[DONE]" {
		t.Fatalf("events %q", ev)
	}
	type delta struct {
		Role      *string         `json:"role"`
		Content   json.RawMessage `json:"content"`
		ToolCalls []struct {
			Index    int     `json:"index"`
			ID       *string `json:"id"`
			Type     *string `json:"type"`
			Function struct {
				Name      *string `json:"name"`
				Arguments string  `json:"arguments"`
			} `json:"function"`
		} `json:"tool_calls"`
	}
	var deltas []delta
	for _, e := range ev[:11] {
		var ch struct {
			Choices []struct {
				Delta        delta   `json:"delta"`
				FinishReason *string `json:"finish_reason"`
			} `json:"choices"`
		}
		if err := json.Unmarshal([]byte(e), &ch); err != nil {
			t.Fatal(err)
		}
		deltas = append(deltas, ch.Choices[0].Delta)
	}
	d0 := deltas[0]
	if d0.Role == nil || string(d0.Content) != "null" || len(d0.ToolCalls) != 1 || d0.ToolCalls[0].Index != 0 ||
		d0.ToolCalls[0].ID == nil || *d0.ToolCalls[0].Type != "function" || *d0.ToolCalls[0].Function.Name != "get_weather" {
		t.Errorf("first chunk %s", ev[0])
	}
	if d := deltas[1]; d.Role != nil || len(d.ToolCalls) != 1 || d.ToolCalls[0].Index != 1 || *d.ToolCalls[0].Function.Name != "get_weather_2" {
		t.Errorf("second header %s", ev[1])
	}
	args := map[int]string{}
	var order []int
	for i, d := range deltas[2:10] {
		tc := d.ToolCalls[0]
		if tc.ID != nil || tc.Type != nil || tc.Function.Name != nil {
			t.Errorf("fragment %s carries a header field", ev[i+2])
		}
		args[tc.Index] += tc.Function.Arguments
		order = append(order, tc.Index)
	}
	if args[0] != ToolArguments || args[1] != ToolArguments {
		t.Errorf("arguments %v", args)
	}
	if order[0] == order[1] { // interleaved: 0,1,0,1,...
		t.Errorf("fragments not interleaved: %v", order)
	}
	if !strings.Contains(ev[10], `"delta":{},"logprobs":null,"finish_reason":"tool_calls"`) {
		t.Errorf("finish chunk %s", ev[10])
	}
}

func TestOpenAIToolPairing(t *testing.T) {
	_, ts := start(t, Config{})
	call := `{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"f","arguments":"{}"}},` +
		`{"id":"call_2","type":"function","function":{"name":"g","arguments":"{}"}}]}`
	tool := func(id string) string { return `{"role":"tool","tool_call_id":"` + id + `","content":"ok"}` }
	user := `{"role":"user","content":"hi"}`
	for _, tc := range []struct {
		name, msgs string
		status     int
		param      any
	}{
		{"paired", user + "," + call + "," + tool("call_2") + "," + tool("call_1") + "," + user, 200, nil},
		{"tool without call", user + "," + tool("call_1"), 400, "messages.[1].role"},
		{"missing result", user + "," + call + "," + tool("call_1") + "," + user, 400, "messages.[1].role"},
		{"call last", user + "," + call, 400, "messages.[1].role"},
		{"unknown id", user + "," + call + "," + tool("call_9"), 400, "messages.[2].tool_call_id"},
		{"no tool_call_id", user + `,{"role":"tool","content":"ok"}`, 400, "messages[1].tool_call_id"},
		{"no call id", user + `,{"role":"assistant","tool_calls":[{"type":"function","function":{"name":"f","arguments":"{}"}}]}`,
			400, "messages[1].tool_calls[0].id"},
	} {
		res, body, err := post(t, ts, testKey, "/v1/chat/completions", `{"model":"m","messages":[`+tc.msgs+`]}`)
		if err != nil {
			t.Fatal(err)
		}
		if res.StatusCode != tc.status {
			t.Errorf("%s: status %d: %s", tc.name, res.StatusCode, body)
			continue
		}
		if tc.status == 400 {
			if e := errorEnvelope(t, body); e["param"] != tc.param || e["type"] != "invalid_request_error" {
				t.Errorf("%s: %s", tc.name, body)
			}
		}
	}
}

// TestSameInputTokensEveryFormat: one conversation (system prompt, a user
// turn, an assistant turn with text and two tool calls, the two results and
// a follow-up) costs the same input tokens in the three formats, through
// the three official SDKs.
func TestSameInputTokensEveryFormat(t *testing.T) {
	_, ts := start(t, Config{})
	ctx := context.Background()
	const (
		system   = "You are a terse weather bot."
		question = "Weather in Paris and in New York?"
		checking = "Checking both cities now."
		result1  = "18°C and cloudy"
		result2  = "25°C, sunny and humid"
		followUp = "And tomorrow? mock:tokens=1"
	)
	args1, args2 := map[string]any{"city": "Paris"}, map[string]any{"city": "New York", "unit": "celsius"}
	compact := func(v any) string { b, _ := json.Marshal(v); return string(b) }
	want := InputTokens([][]string{{system}, {question}, {checking, compact(args1), compact(args2)}, {result1}, {result2}, {followUp}})

	// OpenAI
	oc := sdk(ts, testKey)
	r, err := oc.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "gpt-4o-mini", Messages: []openai.ChatCompletionMessageParamUnion{
		openai.SystemMessage(system),
		openai.UserMessage(question),
		{OfAssistant: &openai.ChatCompletionAssistantMessageParam{
			Content: openai.ChatCompletionAssistantMessageParamContentUnion{OfString: openai.String(checking)},
			ToolCalls: []openai.ChatCompletionMessageToolCallUnionParam{
				{OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{ID: "call_a",
					Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{Name: "get_weather", Arguments: compact(args1)}}},
				{OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{ID: "call_b",
					Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{Name: "get_weather", Arguments: compact(args2)}}},
			}}},
		openai.ToolMessage(result1, "call_a"),
		openai.ToolMessage(result2, "call_b"),
		openai.UserMessage(followUp),
	}})
	if err != nil {
		t.Fatal(err)
	}

	// Anthropic: the results share one user message, with the follow-up.
	ac := antSDK(ts, testKey)
	m, err := ac.Messages.New(ctx, anthropic.MessageNewParams{Model: "claude-sonnet-4-5", MaxTokens: 100,
		System: []anthropic.TextBlockParam{{Text: system}},
		Messages: []anthropic.MessageParam{
			anthropic.NewUserMessage(anthropic.NewTextBlock(question)),
			anthropic.NewAssistantMessage(anthropic.NewTextBlock(checking),
				anthropic.NewToolUseBlock("toolu_a", args1, "get_weather"), anthropic.NewToolUseBlock("toolu_b", args2, "get_weather")),
			anthropic.NewUserMessage(anthropic.NewToolResultBlock("toolu_a", result1, false),
				anthropic.NewToolResultBlock("toolu_b", result2, false), anthropic.NewTextBlock(followUp)),
		}})
	if err != nil {
		t.Fatal(err)
	}
	count, err := ac.Messages.CountTokens(ctx, anthropic.MessageCountTokensParams{Model: "claude-sonnet-4-5",
		System: anthropic.MessageCountTokensParamsSystemUnion{OfString: anthropic.String(system)},
		Messages: []anthropic.MessageParam{
			anthropic.NewUserMessage(anthropic.NewTextBlock(question)),
			anthropic.NewAssistantMessage(anthropic.NewTextBlock(checking),
				anthropic.NewToolUseBlock("toolu_a", args1, "get_weather"), anthropic.NewToolUseBlock("toolu_b", args2, "get_weather")),
			anthropic.NewUserMessage(anthropic.NewToolResultBlock("toolu_a", result1, false),
				anthropic.NewToolResultBlock("toolu_b", result2, false), anthropic.NewTextBlock(followUp)),
		}})
	if err != nil {
		t.Fatal(err)
	}

	// Gemini: functionResponse results {"output": text}, in one user turn with the follow-up.
	gc := genaiSDK(t, ts, testKey, "")
	contents := []*genai.Content{
		genai.NewContentFromText(question, genai.RoleUser),
		{Role: genai.RoleModel, Parts: []*genai.Part{genai.NewPartFromText(checking),
			genai.NewPartFromFunctionCall("get_weather", args1), genai.NewPartFromFunctionCall("get_weather", args2)}},
		{Role: genai.RoleUser, Parts: []*genai.Part{
			genai.NewPartFromFunctionResponse("get_weather", map[string]any{"output": result1}),
			genai.NewPartFromFunctionResponse("get_weather", map[string]any{"output": result2}),
			genai.NewPartFromText(followUp)}},
	}
	g, err := gc.Models.GenerateContent(ctx, "gemini-2.5-flash", contents,
		&genai.GenerateContentConfig{SystemInstruction: genai.NewContentFromText(system, genai.RoleUser)})
	if err != nil {
		t.Fatal(err)
	}
	gn, err := gc.Models.CountTokens(ctx, "gemini-2.5-flash", append([]*genai.Content{genai.NewContentFromText(system, genai.RoleUser)}, contents...), nil)
	if err != nil {
		t.Fatal(err)
	}

	got := []int64{r.Usage.PromptTokens, m.Usage.InputTokens + m.Usage.CacheReadInputTokens + m.Usage.CacheCreationInputTokens,
		count.InputTokens, int64(g.UsageMetadata.PromptTokenCount), int64(gn.TotalTokens)}
	for i, n := range got {
		if n != int64(want) {
			t.Errorf("count %d (OpenAI, Anthropic, Anthropic count, Gemini, Gemini count): %v, want %d", i, got, want)
			break
		}
	}
	if r.Choices[0].Message.Content != ReplyText(1) || m.Content[0].Text != ReplyText(1) || g.Text() != ReplyText(1) {
		t.Error("the follow-up's directive did not act")
	}
	for name, body := range map[string]func() (int, error){
		"MessagesInputTokens": func() (int, error) {
			return MessagesInputTokens([]byte(`{"model":"m","max_tokens":5,"system":"` + system + `","messages":[{"role":"user","content":"` + question + `"}]}`))
		},
		"GeminiPromptTokens": func() (int, error) {
			return GeminiPromptTokens([]byte(`{"systemInstruction":{"parts":[{"text":"` + system + `"}]},"contents":[{"parts":[{"text":"` + question + `"}]}]}`))
		},
		"ChatPromptTokens": func() (int, error) {
			return ChatPromptTokens([]byte(`{"model":"m","messages":[{"role":"system","content":"` + system + `"},{"role":"user","content":"` + question + `"}]}`))
		},
	} {
		if n, err := body(); err != nil || n != InputTokens([][]string{{system}, {question}}) {
			t.Errorf("%s = %d, %v", name, n, err)
		}
	}
}
