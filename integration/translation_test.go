package integration

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	aoption "github.com/anthropics/anthropic-sdk-go/option"
	"github.com/openai/openai-go/v3"
	"google.golang.org/genai"

	"github.com/modelgate/modelgate/ledger"
	"github.com/modelgate/modelgate/mockupstream"
)

// The three test models, one per upstream format, all served by the mock.
var everyUpstream = []string{testModel, "claude-test", "gemini-test"}

// upstreamOf names the upstream format of a test model.
func upstreamOf(model string) string {
	switch model {
	case "claude-test":
		return "anthropic"
	case "gemini-test":
		return "gemini"
	}
	return "openai"
}

// mockTokensSys is the mock's input count for a system prompt and one user
// message: the system prompt counts as a turn in every format.
func mockTokensSys(system, prompt string) int64 {
	return int64(3 + 4 + len(strings.Fields(system)) + 4 + len(strings.Fields(prompt)))
}

// turn is what a client saw of one answer.
type turn struct {
	text                   string
	in, out                int64
	model                  string
	finish                 string
	toolID, toolName, args string
}

// anthropicClient is the official Anthropic SDK pointed at the gateway.
func (g *testGateway) anthropicClient(key string) anthropic.Client {
	return anthropic.NewClient(aoption.WithBaseURL(gatewayAddr), aoption.WithAuthToken(key), aoption.WithMaxRetries(0))
}

// geminiClient is the official Google GenAI SDK pointed at the gateway.
// assertGeminiModels checks, through the Google GenAI SDK under /v1beta
// and /v1, that key sees exactly the models want (sorted) in the list,
// that each of them answers a GET, and that absent is not found.
func assertGeminiModels(t *testing.T, g *testGateway, key string, want []string, absent string) {
	t.Helper()
	ctx := context.Background()
	names := make([]string, len(want))
	for i, id := range want {
		names[i] = "models/" + id
	}
	for _, version := range []string{"", "v1"} {
		gc := g.geminiClient(t, key, version)
		var got []string
		for m, err := range gc.Models.All(ctx) {
			if err != nil {
				t.Fatalf("gemini list (%q): %v", version, err)
			}
			got = append(got, m.Name)
		}
		if !slices.Equal(got, names) {
			t.Errorf("gemini list (%q): %v, want %v", version, got, names)
		}
		var gerr genai.APIError
		if _, err := gc.Models.Get(ctx, absent, nil); !errors.As(err, &gerr) || gerr.Code != 404 {
			t.Errorf("gemini get (%q) of %s, left out: %v", version, absent, err)
		}
		for i, id := range want {
			if m, err := gc.Models.Get(ctx, id, nil); err != nil || m.Name != names[i] {
				t.Errorf("gemini get (%q) of %s: %+v %v", version, id, m, err)
			}
		}
	}
}

func (g *testGateway) geminiClient(t *testing.T, key, apiVersion string) *genai.Client {
	t.Helper()
	c, err := genai.NewClient(context.Background(), &genai.ClientConfig{
		APIKey:      key,
		Backend:     genai.BackendGeminiAPI,
		HTTPOptions: genai.HTTPOptions{BaseURL: gatewayAddr, APIVersion: apiVersion},
	})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// weatherSchema is the JSON schema of the test tool.
var weatherSchema = map[string]any{
	"type":       "object",
	"properties": map[string]any{"city": map[string]any{"type": "string"}, "unit": map[string]any{"type": "string"}},
	"required":   []string{"city"},
}

// askOpenAI sends one turn with the OpenAI SDK.
func (g *testGateway) askOpenAI(t *testing.T, key, model, system, prompt string, stream, tools bool) turn {
	t.Helper()
	p := openai.ChatCompletionNewParams{
		Model:     model,
		Messages:  []openai.ChatCompletionMessageParamUnion{openai.SystemMessage(system), openai.UserMessage(prompt)},
		MaxTokens: openai.Int(100),
	}
	if tools {
		p.Tools = []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(openai.FunctionDefinitionParam{
			Name: "get_weather", Parameters: openai.FunctionParameters(weatherSchema)})}
	}
	c := g.client(key)
	var cc openai.ChatCompletion
	if stream {
		p.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
		s := c.Chat.Completions.NewStreaming(context.Background(), p)
		var acc openai.ChatCompletionAccumulator
		for s.Next() {
			acc.AddChunk(s.Current())
		}
		if err := s.Err(); err != nil {
			t.Fatalf("openai stream via %s: %v", model, err)
		}
		cc = acc.ChatCompletion
	} else {
		r, err := c.Chat.Completions.New(context.Background(), p)
		if err != nil {
			t.Fatalf("openai via %s: %v", model, err)
		}
		cc = *r
	}
	tr := turn{text: cc.Choices[0].Message.Content, in: cc.Usage.PromptTokens, out: cc.Usage.CompletionTokens,
		model: cc.Model, finish: cc.Choices[0].FinishReason}
	if calls := cc.Choices[0].Message.ToolCalls; len(calls) > 0 {
		tr.toolID, tr.toolName, tr.args = calls[0].ID, calls[0].Function.Name, calls[0].Function.Arguments
	}
	return tr
}

// askAnthropic sends one turn with the Anthropic SDK.
func (g *testGateway) askAnthropic(t *testing.T, key, model, system, prompt string, stream, tools bool) turn {
	t.Helper()
	p := anthropic.MessageNewParams{
		Model:     anthropic.Model(model),
		MaxTokens: 100,
		System:    []anthropic.TextBlockParam{{Text: system}},
		Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(prompt))},
	}
	if tools {
		p.Tools = []anthropic.ToolUnionParam{anthropic.ToolUnionParamOfTool(anthropic.ToolInputSchemaParam{
			Properties: weatherSchema["properties"], Required: []string{"city"}}, "get_weather")}
	}
	c := g.anthropicClient(key)
	var msg anthropic.Message
	if stream {
		s := c.Messages.NewStreaming(context.Background(), p)
		for s.Next() {
			if err := msg.Accumulate(s.Current()); err != nil {
				t.Fatalf("anthropic accumulate via %s: %v", model, err)
			}
		}
		if err := s.Err(); err != nil {
			t.Fatalf("anthropic stream via %s: %v", model, err)
		}
	} else {
		r, err := c.Messages.New(context.Background(), p)
		if err != nil {
			t.Fatalf("anthropic via %s: %v", model, err)
		}
		msg = *r
	}
	tr := turn{in: msg.Usage.InputTokens + msg.Usage.CacheReadInputTokens + msg.Usage.CacheCreationInputTokens,
		out: msg.Usage.OutputTokens, model: string(msg.Model), finish: string(msg.StopReason)}
	for _, b := range msg.Content {
		switch b.Type {
		case "text":
			tr.text += b.Text
		case "tool_use":
			tr.toolID, tr.toolName, tr.args = b.ID, b.Name, string(b.Input)
		}
	}
	return tr
}

// askGemini sends one turn with the Google GenAI SDK.
func (g *testGateway) askGemini(t *testing.T, key, model, system, prompt string, stream, tools bool) turn {
	t.Helper()
	c := g.geminiClient(t, key, "")
	cfg := &genai.GenerateContentConfig{
		SystemInstruction: genai.NewContentFromText(system, genai.RoleUser),
		MaxOutputTokens:   100,
	}
	if tools {
		cfg.Tools = []*genai.Tool{{FunctionDeclarations: []*genai.FunctionDeclaration{{Name: "get_weather", ParametersJsonSchema: weatherSchema}}}}
	}
	var tr turn
	collect := func(r *genai.GenerateContentResponse) {
		if r.UsageMetadata != nil {
			tr.in = int64(r.UsageMetadata.PromptTokenCount)
			tr.out = int64(r.UsageMetadata.CandidatesTokenCount + r.UsageMetadata.ThoughtsTokenCount)
		}
		tr.model = r.ModelVersion
		for _, cand := range r.Candidates {
			if cand.FinishReason != "" {
				tr.finish = string(cand.FinishReason)
			}
			if cand.Content == nil {
				continue
			}
			for _, part := range cand.Content.Parts {
				if part.Thought {
					continue
				}
				tr.text += part.Text
				if fc := part.FunctionCall; fc != nil {
					args, _ := json.Marshal(fc.Args)
					tr.toolID, tr.toolName, tr.args = fc.ID, fc.Name, string(args)
				}
			}
		}
	}
	if stream {
		for r, err := range c.Models.GenerateContentStream(context.Background(), model, genai.Text(prompt), cfg) {
			if err != nil {
				t.Fatalf("gemini stream via %s: %v", model, err)
			}
			collect(r)
		}
	} else {
		r, err := c.Models.GenerateContent(context.Background(), model, genai.Text(prompt), cfg)
		if err != nil {
			t.Fatalf("gemini via %s: %v", model, err)
		}
		collect(r)
	}
	return tr
}

// asker is one client SDK.
type asker struct {
	name string
	ask  func(g *testGateway, t *testing.T, key, model, system, prompt string, stream, tools bool) turn
}

var everyClient = []asker{
	{"openai", (*testGateway).askOpenAI},
	{"anthropic", (*testGateway).askAnthropic},
	{"gemini", (*testGateway).askGemini},
}

// TestEveryPair sends the same conversation from each of the three official
// SDKs to models of each of the three upstream formats, streamed and not:
// the answer, the usage the client sees and the debit are exact.
func TestEveryPair(t *testing.T) {
	g := startGateway(t, gatewayOptions{})
	acct, key := g.account("1.00")
	const system, prompt = "Be brief.", "Tell me something about the sea"
	wantIn := mockTokensSys(system, prompt)
	for _, cl := range everyClient {
		for _, model := range everyUpstream {
			for _, stream := range []bool{false, true} {
				name := fmt.Sprintf("%s client → %s upstream, stream=%v", cl.name, upstreamOf(model), stream)
				before, _ := g.balance(acct)
				tr := cl.ask(g, t, key, model, system, prompt, stream, false)
				after, held := g.balance(acct)
				switch {
				case tr.text != mockupstream.ReplyText(12):
					t.Errorf("%s: text %q", name, tr.text)
				case tr.in != wantIn || tr.out != 12:
					t.Errorf("%s: usage %d/%d, want %d/12", name, tr.in, tr.out, wantIn)
				case tr.model != model:
					t.Errorf("%s: model %q", name, tr.model)
				case before-after != cost(wantIn, 12) || held != 0:
					t.Errorf("%s: debit %s, want %s (held %s)", name, before-after, cost(wantIn, 12), held)
				}
				row := g.rows(acct)[0]
				if row.ClientFormat != map[string]string{"openai": "openai.chat", "anthropic": "anthropic", "gemini": "gemini"}[cl.name] ||
					row.Provider != map[string]string{"openai": "mock", "anthropic": "mock-anthropic", "gemini": "mock-gemini"}[upstreamOf(model)] ||
					row.Stream != stream || row.UsageSource != "upstream" {
					t.Errorf("%s: row %+v", name, row)
				}
			}
		}
	}
	if n := len(g.rows(acct)); n != 18 {
		t.Errorf("%d rows, want 18", n)
	}
	g.audit()
}

// TestToolCallsEveryPair: a tool call made by the upstream reaches every
// client in its own shape, with the name and arguments intact.
func TestToolCallsEveryPair(t *testing.T) {
	g := startGateway(t, gatewayOptions{})
	_, key := g.account("1.00")
	for _, cl := range everyClient {
		for _, model := range everyUpstream {
			for _, stream := range []bool{false, true} {
				name := fmt.Sprintf("%s client → %s upstream, stream=%v", cl.name, upstreamOf(model), stream)
				tr := cl.ask(g, t, key, model, "Use tools.", "What is the weather in Paris? mock:tool=get_weather", stream, true)
				var args map[string]any
				if err := json.Unmarshal([]byte(tr.args), &args); err != nil || args["city"] != "Paris" || args["unit"] != "celsius" {
					t.Errorf("%s: arguments %q", name, tr.args)
				}
				if tr.toolName != "get_weather" {
					t.Errorf("%s: tool %q", name, tr.toolName)
				}
				if want := map[string]string{"openai": "tool_calls", "anthropic": "tool_use", "gemini": "STOP"}[cl.name]; tr.finish != want {
					t.Errorf("%s: finish %q, want %q", name, tr.finish, want)
				}
				// upstream ids pass unchanged when the client's format takes
				// them; ids the gateway makes (Gemini calls have none) look
				// like the client format's own (docs/translation.md, "Tool call ids and arguments")
				want := map[string]string{"openai": "call_", "anthropic": "toolu_"}[cl.name]
				if upstreamOf(model) != "gemini" {
					want = map[string]string{"openai": "call_mock_", "anthropic": "toolu_mock_", "gemini": ""}[upstreamOf(model)]
				}
				if cl.name != "gemini" && !strings.HasPrefix(tr.toolID, want) {
					t.Errorf("%s: tool call id %q, want %s…", name, tr.toolID, want)
				}
			}
		}
	}
}

// TestToolResultsEveryPair sends a conversation with a tool call and its
// result from each client to each upstream: the mock rejects histories its
// vendor would reject (unpaired tool results, missing names), so a 200 means
// the translation carried the pairing.
func TestToolResultsEveryPair(t *testing.T) {
	g := startGateway(t, gatewayOptions{})
	_, key := g.account("1.00")
	ctx := context.Background()
	for _, model := range everyUpstream {
		// OpenAI client
		oc := g.client(key)
		r, err := oc.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
			Model: model,
			Tools: []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(openai.FunctionDefinitionParam{
				Name: "get_weather", Parameters: openai.FunctionParameters(weatherSchema)})},
			Messages: []openai.ChatCompletionMessageParamUnion{
				openai.UserMessage("Weather in Paris?"),
				{OfAssistant: &openai.ChatCompletionAssistantMessageParam{ToolCalls: []openai.ChatCompletionMessageToolCallUnionParam{{
					OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{ID: "call_abc.1", Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{
						Name: "get_weather", Arguments: `{"city":"Paris"}`}}}}}},
				openai.ToolMessage("18°C and cloudy", "call_abc.1"),
			},
		})
		if err != nil {
			t.Errorf("openai client → %s: %v", upstreamOf(model), err)
		} else if r.Choices[0].Message.Content == "" {
			t.Errorf("openai client → %s: empty answer", upstreamOf(model))
		}

		// Anthropic client
		ac := g.anthropicClient(key)
		m, err := ac.Messages.New(ctx, anthropic.MessageNewParams{
			Model: anthropic.Model(model), MaxTokens: 100,
			Tools: []anthropic.ToolUnionParam{anthropic.ToolUnionParamOfTool(anthropic.ToolInputSchemaParam{
				Properties: weatherSchema["properties"]}, "get_weather")},
			Messages: []anthropic.MessageParam{
				anthropic.NewUserMessage(anthropic.NewTextBlock("Weather in Paris?")),
				anthropic.NewAssistantMessage(anthropic.NewTextBlock("Checking."), anthropic.NewToolUseBlock("toolu_01A", map[string]any{"city": "Paris"}, "get_weather")),
				anthropic.NewUserMessage(anthropic.NewToolResultBlock("toolu_01A", "18°C and cloudy", false), anthropic.NewTextBlock("And tomorrow?")),
			},
		})
		if err != nil {
			t.Errorf("anthropic client → %s: %v", upstreamOf(model), err)
		} else if len(m.Content) == 0 {
			t.Errorf("anthropic client → %s: empty answer", upstreamOf(model))
		}

		// Gemini client
		gc := g.geminiClient(t, key, "")
		gr, err := gc.Models.GenerateContent(ctx, model, []*genai.Content{
			genai.NewContentFromText("Weather in Paris?", genai.RoleUser),
			{Role: genai.RoleModel, Parts: []*genai.Part{genai.NewPartFromFunctionCall("get_weather", map[string]any{"city": "Paris"})}},
			{Role: genai.RoleUser, Parts: []*genai.Part{genai.NewPartFromFunctionResponse("get_weather", map[string]any{"output": "18°C and cloudy"})}},
		}, &genai.GenerateContentConfig{Tools: []*genai.Tool{{FunctionDeclarations: []*genai.FunctionDeclaration{{Name: "get_weather", ParametersJsonSchema: weatherSchema}}}}})
		if err != nil {
			t.Errorf("gemini client → %s: %v", upstreamOf(model), err)
		} else if gr.Text() == "" {
			t.Errorf("gemini client → %s: empty answer", upstreamOf(model))
		}
	}
}

// TestCountTokens: count_tokens and countTokens are exact through upstreams
// with a count API, a local estimate (so flagged) otherwise, never billed.
func TestCountTokens(t *testing.T) {
	g := startGateway(t, gatewayOptions{})
	acct, key := g.account("1.00")
	before, _ := g.balance(acct)
	const system, prompt = "Be brief.", "How many tokens is this"
	want := mockTokensSys(system, prompt)
	ac := g.anthropicClient(key)
	gc := g.geminiClient(t, key, "")
	for _, model := range everyUpstream {
		n, err := ac.Messages.CountTokens(context.Background(), anthropic.MessageCountTokensParams{
			Model:    anthropic.Model(model),
			System:   anthropic.MessageCountTokensParamsSystemUnion{OfTextBlockArray: []anthropic.TextBlockParam{{Text: system}}},
			Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(prompt))},
		})
		if err != nil {
			t.Fatalf("anthropic count via %s: %v", model, err)
		}
		// (the GenAI SDK sends no system instruction to countTokens on the
		// Gemini API)
		gn, err := gc.Models.CountTokens(context.Background(), model, genai.Text(prompt), nil)
		if err != nil {
			t.Fatalf("gemini count via %s: %v", model, err)
		}
		if model == testModel {
			// local o200k count: plausible, not the mock's rule
			if n.InputTokens < 8 || n.InputTokens > 40 || int64(gn.TotalTokens) >= n.InputTokens || gn.TotalTokens < 4 {
				t.Errorf("local counts: %d and %d", n.InputTokens, gn.TotalTokens)
			}
			continue
		}
		if n.InputTokens != want || int64(gn.TotalTokens) != mockTokens(prompt) {
			t.Errorf("%s: counts %d and %d, want %d and %d", model, n.InputTokens, gn.TotalTokens, want, mockTokens(prompt))
		}
	}
	r := g.do("POST", "/v1/messages/count_tokens", `{"model":"gpt-test","messages":[{"role":"user","content":"hi"}]}`,
		"Authorization", "Bearer "+key, "Anthropic-Version", "2023-06-01")
	if r.status != 200 || r.header.Get("X-Modelgate-Token-Count") != "estimate" {
		t.Errorf("local count: %d %q %s", r.status, r.header.Get("X-Modelgate-Token-Count"), r.body)
	}
	if after, held := g.balance(acct); after != before || held != 0 || len(g.rows(acct)) != 0 {
		t.Fatalf("counting moved money: %s → %s", before, after)
	}
}

// TestErrorsInEveryFormat: gateway and upstream errors reach each client in
// its own envelope, with the status its SDK expects.
func TestErrorsInEveryFormat(t *testing.T) {
	g := startGateway(t, gatewayOptions{})
	_, key := g.account("1.00")
	ctx := context.Background()

	// an Anthropic 529 seen by an OpenAI client is a 503
	_, err := g.client(key).Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "claude-test",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("mock:status=529")}})
	var oe *openai.Error
	if !errors.As(err, &oe) || oe.StatusCode != 503 {
		t.Errorf("openai client, anthropic 529: %v", err)
	}
	// … and by a Gemini client a 503 UNAVAILABLE
	_, err = g.geminiClient(t, key, "").Models.GenerateContent(ctx, "claude-test", genai.Text("mock:status=529"), nil)
	var ge genai.APIError
	if !errors.As(err, &ge) || ge.Code != 503 || ge.Status != "UNAVAILABLE" {
		t.Errorf("gemini client, anthropic 529: %v", err)
	}
	// … and by an Anthropic client a 529 overloaded_error
	ac := g.anthropicClient(key)
	_, err = ac.Messages.New(ctx, anthropic.MessageNewParams{Model: "gemini-test", MaxTokens: 10,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("mock:status=503"))}})
	var ae *anthropic.Error
	if !errors.As(err, &ae) || ae.StatusCode != 529 || !strings.Contains(ae.RawJSON(), "overloaded_error") {
		t.Errorf("anthropic client, gemini 503: %v", err)
	}
	// an upstream 500 → 502 (Gemini clients: 500 INTERNAL)
	_, err = ac.Messages.New(ctx, anthropic.MessageNewParams{Model: testModel, MaxTokens: 10,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("mock:status=500"))}})
	if !errors.As(err, &ae) || ae.StatusCode != 502 || !strings.Contains(ae.RawJSON(), "api_error") {
		t.Errorf("anthropic client, openai 500: %v", err)
	}
	restKeys()
	_, err = g.geminiClient(t, key, "").Models.GenerateContent(ctx, testModel, genai.Text("mock:status=500"), nil)
	if !errors.As(err, &ge) || ge.Code != 500 || ge.Status != "INTERNAL" {
		t.Errorf("gemini client, openai 500: %v", err)
	}

	_, broke := g.account("")
	huge := strings.Repeat("a", 33<<20)
	// gateway errors in each format
	for _, tc := range []struct {
		name, method, path, body string
		headers                  []string
		status                   int
		contains                 string
	}{
		{"anthropic 401", "POST", "/v1/messages", `{}`, []string{"Anthropic-Version", "2023-06-01"}, 401, `"type":"authentication_error"`},
		{"gemini 401", "POST", "/v1beta/models/gemini-test:generateContent", `{}`, nil, 401, `"status":"UNAUTHENTICATED"`},
		{"anthropic-version missing", "POST", "/v1/messages", `{"model":"claude-test","max_tokens":5,"messages":[{"role":"user","content":"x"}]}`,
			[]string{"Authorization", "Bearer " + key}, 400, "anthropic-version"},
		{"anthropic bad body", "POST", "/v1/messages", `{"model":"claude-test","messages":[{"role":"user","content":"x"}]}`,
			[]string{"Authorization", "Bearer " + key, "Anthropic-Version", "2023-06-01"}, 400, "max_tokens"},
		{"anthropic unknown model", "POST", "/v1/messages", `{"model":"nope","max_tokens":5,"messages":[{"role":"user","content":"x"}]}`,
			[]string{"X-Api-Key", key, "Anthropic-Version", "2026-10-21"}, 404, `"type":"not_found_error"`},
		{"gemini unknown model", "POST", "/v1beta/models/nope:generateContent", `{"contents":[{"parts":[{"text":"x"}]}]}`,
			[]string{"X-Goog-Api-Key", key}, 404, `"status":"NOT_FOUND"`},
		{"gemini bad body", "POST", "/v1beta/models/gemini-test:generateContent", `{"contents":[]}`,
			[]string{"X-Goog-Api-Key", key}, 400, `"status":"INVALID_ARGUMENT"`},
		{"gemini unknown method", "POST", "/v1beta/models/gemini-test:embedContent", `{}`,
			[]string{"X-Goog-Api-Key", key}, 404, `"status":"NOT_FOUND"`},
		{"gemini key in query", "POST", "/v1beta/models/gpt-test:generateContent?key=" + key, `{"contents":[{"parts":[{"text":"x"}]}]}`,
			nil, 200, `"candidates"`},
		{"anthropic 403 no balance", "POST", "/v1/messages", `{"model":"claude-test","max_tokens":5,"messages":[{"role":"user","content":"x"}]}`,
			[]string{"X-Api-Key", broke, "Anthropic-Version", "2023-06-01"}, 403, `"type":"billing_error"`},
		{"gemini 403 no balance", "POST", "/v1beta/models/gemini-test:generateContent", `{"contents":[{"parts":[{"text":"x"}]}]}`,
			[]string{"X-Goog-Api-Key", broke}, 403, `"status":"PERMISSION_DENIED"`},
		{"anthropic 413", "POST", "/v1/messages", huge, []string{"X-Api-Key", key, "Anthropic-Version", "2023-06-01"}, 413, `"type":"request_too_large"`},
		{"gemini 413 as 400", "POST", "/v1beta/models/gemini-test:generateContent", huge, []string{"X-Goog-Api-Key", key}, 400, `"status":"INVALID_ARGUMENT"`},
		{"anthropic 405", "GET", "/v1/messages", "", []string{"X-Api-Key", key}, 405, `"type":"error"`},
	} {
		r := g.do(tc.method, tc.path, tc.body, tc.headers...)
		if r.status != tc.status || !strings.Contains(r.body, tc.contains) {
			t.Errorf("%s: %d %s", tc.name, r.status, r.body)
		}
	}
}

// TestMidStreamFailureEveryFormat: an upstream stream that breaks ends each
// client's stream with its format's error event; the delivered part is billed.
func TestMidStreamFailureEveryFormat(t *testing.T) {
	g := startGateway(t, gatewayOptions{})
	acct, key := g.account("1.00")
	for _, model := range everyUpstream {
		for _, tc := range []struct {
			name, path, body string
			headers          []string
			want             string
		}{
			{"openai", "/v1/chat/completions", chatBody(model, "mock:tokens=8 mock:cut=3", `"stream":true`), nil, `data: {"error":`},
			{"anthropic", "/v1/messages", `{"model":"` + model + `","max_tokens":50,"stream":true,"messages":[{"role":"user","content":"mock:tokens=8 mock:cut=3"}]}`,
				[]string{"Anthropic-Version", "2023-06-01"}, "event: error\ndata: {\"type\":\"error\""},
			{"gemini", "/v1beta/models/" + model + ":streamGenerateContent?alt=sse", `{"contents":[{"parts":[{"text":"mock:tokens=8 mock:cut=3"}]}]}`,
				nil, `data: {"error":`},
		} {
			before, _ := g.balance(acct)
			r := g.do("POST", tc.path, tc.body, append([]string{"Authorization", "Bearer " + key}, tc.headers...)...)
			after, held := g.balance(acct)
			if r.status != 200 || !strings.Contains(r.body, tc.want) {
				t.Errorf("%s client → %s: %d %q", tc.name, upstreamOf(model), r.status, r.body)
			}
			row := g.rows(acct)[0]
			if held != 0 || before-after != row.Charged || row.Charged <= 0 || row.Outcome != "upstream_cut" {
				t.Errorf("%s client → %s: debit %s, row %+v", tc.name, upstreamOf(model), before-after, row)
			}
		}
	}
	g.audit()
}

// TestModelListShapes: GET /v1/models answers each SDK in its own shape.
func TestModelListShapes(t *testing.T) {
	g := startGateway(t, gatewayOptions{})
	_, key := g.account("1.00")
	ctx := context.Background()

	ac := g.anthropicClient(key)
	page, err := ac.Models.List(ctx, anthropic.ModelListParams{})
	if err != nil || len(page.Data) != 4 || page.Data[0].ID != "claude-test" || page.Data[0].CreatedAt.IsZero() {
		t.Fatalf("anthropic list: %+v %v", page, err)
	}
	one, err := ac.Models.Get(ctx, "gemini-test", anthropic.ModelGetParams{})
	if err != nil || one.ID != "gemini-test" {
		t.Fatalf("anthropic get: %+v %v", one, err)
	}
	for _, version := range []string{"", "v1"} { // /v1beta/models and /v1/models with x-goog-api-key
		gc := g.geminiClient(t, key, version)
		var names []string
		for m, err := range gc.Models.All(ctx) {
			if err != nil {
				t.Fatalf("gemini list (%q): %v", version, err)
			}
			names = append(names, m.Name)
		}
		if strings.Join(names, ",") != "models/claude-test,models/gemini-test,models/gpt-test,models/other" {
			t.Errorf("gemini list (%q): %v", version, names)
		}
		m, err := gc.Models.Get(ctx, "gpt-test", nil)
		if err != nil || m.Name != "models/gpt-test" {
			t.Errorf("gemini get (%q): %+v %v", version, m, err)
		}
	}
	r := g.do("GET", "/v1/models", "", "Authorization", "Bearer "+key)
	if !strings.Contains(r.body, `"object":"list"`) {
		t.Errorf("openai list: %s", r.body)
	}
}

// TestGeminiRoutesUnderV1: the GenAI SDK configured for API version v1
// sends /v1/models/{m}:generateContent; it is served like /v1beta.
func TestGeminiRoutesUnderV1(t *testing.T) {
	g := startGateway(t, gatewayOptions{})
	_, key := g.account("1.00")
	gc := g.geminiClient(t, key, "v1")
	for _, model := range everyUpstream {
		r, err := gc.Models.GenerateContent(context.Background(), model, genai.Text("hello there"), nil)
		if err != nil || r.Text() != mockupstream.ReplyText(12) {
			t.Errorf("%s: %v", model, err)
		}
	}
	r := g.do("POST", "/v1/models/gemini-test:streamGenerateContent", `{"contents":[{"parts":[{"text":"hi mock:tokens=3"}]}]}`, "X-Goog-Api-Key", key)
	var elems []json.RawMessage
	if r.status != 200 || r.header.Get("Content-Type") != "application/json" || json.Unmarshal([]byte(r.body), &elems) != nil || len(elems) < 2 {
		t.Errorf("array-mode stream: %d %q %s", r.status, r.header.Get("Content-Type"), r.body)
	}
}

var _ = http.MethodGet

// TestCacheBucketsEveryPair: prompt-cache tokens are normalised once
// (OpenAI and Gemini report cached tokens inside the input, Anthropic beside
// it) and billed at their own prices in every pair.
func TestCacheBucketsEveryPair(t *testing.T) {
	g := startGateway(t, gatewayOptions{})
	acct, key := g.account("1.00")
	const system, prompt = "Be brief.", "Cached context follows mock:cached=5 mock:cache_write=3"
	total := mockTokensSys(system, prompt)
	for _, cl := range everyClient {
		for _, model := range everyUpstream {
			name := fmt.Sprintf("%s client → %s upstream", cl.name, upstreamOf(model))
			before, _ := g.balance(acct)
			tr := cl.ask(g, t, key, model, system, prompt, false, false)
			after, _ := g.balance(acct)
			write := int64(0)
			if model == "claude-test" {
				write = 3 // only Anthropic reports cache writes
			}
			want := ledger.Money(total-5-write)*priceIn + 5*priceCacheRead + ledger.Money(write)*priceCacheWrite + 12*priceOut
			row := g.rows(acct)[0]
			if before-after != want || row.Tokens.Input != total || row.Tokens.CacheRead != 5 || row.Tokens.CacheWrite != write {
				t.Errorf("%s: debit %s, want %s; row tokens %+v", name, before-after, want, row.Tokens)
			}
			if tr.in != total {
				t.Errorf("%s: the client saw %d input tokens in all, want %d", name, tr.in, total)
			}
		}
	}
	g.audit()
}

// TestOutputCapEveryPair: a small output cap stops every pair with the
// client format's length reason, and the cap reaches the upstream in its own
// field.
func TestOutputCapEveryPair(t *testing.T) {
	g := startGateway(t, gatewayOptions{})
	_, key := g.account("1.00")
	for _, model := range everyUpstream {
		for _, tc := range []struct {
			client, path, body string
			headers            []string
			want               string
		}{
			{"openai", "/v1/chat/completions", chatBody(model, "long answer please", `"max_completion_tokens":4`), nil, `"finish_reason":"length"`},
			{"anthropic", "/v1/messages", `{"model":"` + model + `","max_tokens":4,"messages":[{"role":"user","content":"long answer please"}]}`,
				[]string{"Anthropic-Version", "2023-06-01"}, `"stop_reason":"max_tokens"`},
			{"gemini", "/v1beta/models/" + model + ":generateContent", `{"contents":[{"parts":[{"text":"long answer please"}]}],"generationConfig":{"maxOutputTokens":4}}`,
				nil, `"finishReason":"MAX_TOKENS"`},
		} {
			g.mock.Reset()
			r := g.do("POST", tc.path, tc.body, append([]string{"Authorization", "Bearer " + key}, tc.headers...)...)
			if r.status != 200 || !strings.Contains(r.body, tc.want) || !strings.Contains(r.body, mockupstream.ReplyText(4)) {
				t.Errorf("%s client → %s: %d %s", tc.client, upstreamOf(model), r.status, r.body)
			}
			sent := string(g.mock.Requests()[0].Body)
			capField := map[string]string{"openai": `"max_completion_tokens":4`, "anthropic": `"max_tokens":4`, "gemini": `"maxOutputTokens":4`}[upstreamOf(model)]
			if tc.client == upstreamOf(model) && tc.client == "openai" {
				capField = `"max_completion_tokens":4`
			}
			if !strings.Contains(sent, capField) {
				t.Errorf("%s client → %s: upstream body lacks %s: %s", tc.client, upstreamOf(model), capField, sent)
			}
		}
	}
}

// TestContentAcrossPairs checks what reaches each upstream when clients
// send images, stop sequences and multi-turn history in their own shapes.
func TestContentAcrossPairs(t *testing.T) {
	g := startGateway(t, gatewayOptions{})
	_, key := g.account("1.00")
	const png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
	clients := []struct {
		name, path, body string
		headers          []string
	}{
		{"openai", "/v1/chat/completions", `{"model":"%s","stop":["END"],"messages":[
			{"role":"system","content":"Describe images."},
			{"role":"user","content":"Hello"},
			{"role":"assistant","content":"Hi, send the image."},
			{"role":"user","content":[{"type":"text","text":"What is this?"},{"type":"image_url","image_url":{"url":"data:image/png;base64,` + png + `"}}]}]}`, nil},
		{"anthropic", "/v1/messages", `{"model":"%s","max_tokens":50,"stop_sequences":["END"],"system":"Describe images.","messages":[
			{"role":"user","content":"Hello"},
			{"role":"assistant","content":"Hi, send the image."},
			{"role":"user","content":[{"type":"text","text":"What is this?"},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"` + png + `"}}]}]}`,
			[]string{"Anthropic-Version", "2023-06-01"}},
		{"gemini", "/v1beta/models/%s:generateContent", `{"systemInstruction":{"parts":[{"text":"Describe images."}]},"generationConfig":{"stopSequences":["END"]},"contents":[
			{"role":"user","parts":[{"text":"Hello"}]},
			{"role":"model","parts":[{"text":"Hi, send the image."}]},
			{"role":"user","parts":[{"text":"What is this?"},{"inline_data":{"mime_type":"image/png","data":"` + png + `"}}]}]}`, nil},
	}
	for _, cl := range clients {
		for _, model := range everyUpstream {
			g.mock.Reset()
			path, body := cl.path, cl.body
			if strings.Contains(path, "%s") {
				path = fmt.Sprintf(path, model)
				body = strings.Replace(body, `"model":"%s",`, "", 1)
			} else {
				body = fmt.Sprintf(body, model)
			}
			r := g.do("POST", path, body, append([]string{"Authorization", "Bearer " + key}, cl.headers...)...)
			if r.status != 200 {
				t.Errorf("%s client → %s: %d %s", cl.name, upstreamOf(model), r.status, r.body)
				continue
			}
			sent := string(g.mock.Requests()[0].Body)
			var wants []string
			switch upstreamOf(model) {
			case "openai":
				wants = []string{`"stop":["END"]`, `"url":"data:image/png;base64,` + png, `"role":"system"`, `"role":"assistant"`}
			case "anthropic":
				wants = []string{`"stop_sequences":["END"]`, `"media_type":"image/png"`, `"system":`, `"role":"assistant"`}
			case "gemini":
				wants = []string{`"stopSequences":["END"]`, `"data":"` + png, `"systemInstruction"`, `"role":"model"`}
			}
			for _, w := range wants {
				if !strings.Contains(sent, w) {
					t.Errorf("%s client → %s: upstream body lacks %s:\n%s", cl.name, upstreamOf(model), w, sent)
				}
			}
		}
	}
}

// TestThinkingEveryPair: reasoning tokens are billed as output in every
// pair; thinking text reaches an Anthropic client from an Anthropic upstream
// and is dropped across vendors.
func TestThinkingEveryPair(t *testing.T) {
	g := startGateway(t, gatewayOptions{})
	acct, key := g.account("1.00")
	for _, cl := range everyClient {
		for _, model := range everyUpstream {
			name := fmt.Sprintf("%s client → %s upstream", cl.name, upstreamOf(model))
			before, _ := g.balance(acct)
			tr := cl.ask(g, t, key, model, "Think first.", "Solve it mock:tokens=5 mock:thinking=7", true, false)
			after, _ := g.balance(acct)
			in := mockTokensSys("Think first.", "Solve it mock:tokens=5 mock:thinking=7")
			if tr.text != mockupstream.ReplyText(5) || tr.out != 12 || before-after != cost(in, 12) {
				t.Errorf("%s: text %q out %d debit %s (want %s)", name, tr.text, tr.out, before-after, cost(in, 12))
			}
			if row := g.rows(acct)[0]; row.Tokens.Reasoning != 7 && upstreamOf(model) != "anthropic" {
				t.Errorf("%s: reasoning tokens %d", name, row.Tokens.Reasoning)
			}
		}
	}
	// thinking blocks pass through between Anthropic client and upstream
	r := g.do("POST", "/v1/messages", `{"model":"claude-test","max_tokens":2000,"thinking":{"type":"enabled","budget_tokens":1024},"messages":[{"role":"user","content":"mock:tokens=3 mock:thinking=4"}]}`,
		"Authorization", "Bearer "+key, "Anthropic-Version", "2023-06-01")
	if r.status != 200 || !strings.Contains(r.body, `"type":"thinking"`) || !strings.Contains(r.body, `"signature":"sig-mock"`) {
		t.Errorf("anthropic thinking pass-through: %d %s", r.status, r.body)
	}
}

// TestThoughtSignatures: a Gemini 3 upstream signs its function calls and
// refuses a history whose current-turn call lacks the signature. An OpenAI
// client cannot carry it: the gateway keeps it by call id and puts it back
// when the call returns in the history (docs/translation.md, "Thought signatures"); a call it
// never saw gets Google's documented placeholder.
func TestThoughtSignatures(t *testing.T) {
	g := startGateway(t, gatewayOptions{extra: "\t\tmodel gemini-3-test {\n\t\t\troute mock-gemini gemini-3-pro\n\t\t\tprice input 0.5 output 1.5\n\t\t}\n"})
	_, key := g.account("1.00")
	c := g.client(key)
	tools := []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(openai.FunctionDefinitionParam{
		Name: "get_weather", Parameters: openai.FunctionParameters(weatherSchema)})}
	first, err := c.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model: "gemini-3-test", Tools: tools,
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Weather in Paris? mock:tool=get_weather mock:thinking=2")}})
	if err != nil || len(first.Choices[0].Message.ToolCalls) != 1 {
		t.Fatalf("first turn: %+v %v", first, err)
	}
	call := first.Choices[0].Message.ToolCalls[0]
	for _, tc := range []struct{ id, wantSig string }{
		{call.ID, mockupstream.GeminiThoughtSignature},
		{"call_from_elsewhere", "skip_thought_signature_validator"},
	} {
		g.mock.Reset()
		_, err := c.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
			Model: "gemini-3-test", Tools: tools,
			Messages: []openai.ChatCompletionMessageParamUnion{
				openai.UserMessage("Weather in Paris?"),
				{OfAssistant: &openai.ChatCompletionAssistantMessageParam{ToolCalls: []openai.ChatCompletionMessageToolCallUnionParam{{
					OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{ID: tc.id, Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{
						Name: "get_weather", Arguments: call.Function.Arguments}}}}}},
				openai.ToolMessage("18°C", tc.id),
			}})
		if err != nil {
			t.Fatalf("second turn with %s: %v", tc.id, err)
		}
		if sent := string(g.mock.Requests()[0].Body); !strings.Contains(sent, `"thoughtSignature":"`+tc.wantSig+`"`) {
			t.Errorf("second turn with %s: upstream body %s", tc.id, sent)
		}
	}
}

// TestAnthropicKeepAlive: while a translated upstream is silent, an
// Anthropic client gets ping events, and its SDK still reads the answer.
func TestAnthropicKeepAlive(t *testing.T) {
	g := startGateway(t, gatewayOptions{extra: "\t\tkeepalive_interval 50ms\n"})
	_, key := g.account("1.00")
	for _, model := range []string{testModel, "gemini-test"} {
		r := g.do("POST", "/v1/messages", `{"model":"`+model+`","max_tokens":50,"stream":true,"messages":[{"role":"user","content":"slowly mock:tokens=3 mock:delay=200ms"}]}`,
			"Authorization", "Bearer "+key, "Anthropic-Version", "2023-06-01")
		if n := strings.Count(r.body, "event: ping\n"); r.status != 200 || n < 4 {
			t.Errorf("%s: %d pings in %s", model, n, r.body)
		}
		if !strings.HasPrefix(r.body, "event: message_start") {
			t.Errorf("%s: a ping came before message_start: %s", model, r.body)
		}
		ac := g.anthropicClient(key)
		s := ac.Messages.NewStreaming(context.Background(), anthropic.MessageNewParams{Model: anthropic.Model(model), MaxTokens: 50,
			Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("slowly mock:tokens=3 mock:delay=200ms"))}})
		var msg anthropic.Message
		for s.Next() {
			if err := msg.Accumulate(s.Current()); err != nil {
				t.Fatal(err)
			}
		}
		if s.Err() != nil || len(msg.Content) != 1 || msg.Content[0].Text != mockupstream.ReplyText(3) {
			t.Errorf("%s: SDK read %+v, %v", model, msg.Content, s.Err())
		}
	}
}
