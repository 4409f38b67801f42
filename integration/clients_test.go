package integration

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/modelgate/modelgate/mockupstream"
)

// claudeCodeBody is a request shaped like the ones Claude Code 2.x sends:
// system text blocks with cache_control, a system-role message inside
// messages (what it does for models it does not know), tools with
// defer_loading, adaptive thinking, context_management, output_config,
// metadata, max_tokens 32000, always streamed.
func claudeCodeBody(model string) string {
	return `{
	"model": "` + model + `",
	"max_tokens": 32000,
	"stream": true,
	"system": [
		{"type": "text", "text": "You are Claude Code, Anthropic's official CLI for Claude.", "cache_control": {"type": "ephemeral"}},
		{"type": "text", "text": "You are an interactive CLI tool that helps users with software engineering tasks.", "cache_control": {"type": "ephemeral"}}
	],
	"messages": [
		{"role": "system", "content": "The model is unknown to this client: follow the instructions above."},
		{"role": "user", "content": [
			{"type": "text", "text": "<system-reminder>This is a reminder.</system-reminder>"},
			{"type": "text", "text": "List the files here mock:tokens=6", "cache_control": {"type": "ephemeral"}}
		]}
	],
	"tools": [
		{"name": "Bash", "description": "Run a shell command.", "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"], "additionalProperties": false, "$schema": "http://json-schema.org/draft-07/schema#"}},
		{"name": "Read", "description": "Read a file.", "input_schema": {"type": "object", "properties": {"file_path": {"type": "string"}}, "required": ["file_path"]}, "defer_loading": true}
	],
	"thinking": {"type": "adaptive"},
	"context_management": {"edits": [{"type": "clear_thinking_20251015", "keep": "all"}]},
	"output_config": {"effort": "high"},
	"metadata": {"user_id": "user_3f2a_account__session_9c1e"}
}`
}

// TestClaudeCodeRequests replays Claude Code's request shape, with its
// headers and ?beta=true, against models of every upstream format.
func TestClaudeCodeRequests(t *testing.T) {
	g := startGateway(t, gatewayOptions{})
	_, key := g.account("1.00")
	const beta = "claude-code-20250219,interleaved-thinking-2025-05-14,context-management-2025-06-27"
	for _, model := range everyUpstream {
		g.mock.Reset()
		r := g.do("POST", "/v1/messages?beta=true", claudeCodeBody(model),
			"Authorization", "Bearer "+key, "Anthropic-Version", "2026-10-21", "Anthropic-Beta", beta,
			"X-App", "cli", "User-Agent", "claude-cli/2.1.0 (external, cli)")
		if r.status != 200 || !strings.HasSuffix(r.body, "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n") {
			t.Errorf("%s: %d %s", model, r.status, r.body)
			continue
		}
		var text strings.Builder
		for _, line := range strings.Split(r.body, "\n") {
			if d, ok := strings.CutPrefix(line, "data: "); ok && strings.Contains(d, `"text_delta"`) {
				var ev struct {
					Delta struct{ Text string }
				}
				_ = json.Unmarshal([]byte(d), &ev)
				text.WriteString(ev.Delta.Text)
			}
		}
		if text.String() != mockupstream.ReplyText(6) {
			t.Errorf("%s: text %q", model, text.String())
		}
		sent := g.mock.Requests()
		if len(sent) != 1 {
			t.Fatalf("%s: the upstream saw %d requests", model, len(sent))
		}
		up := sent[0]
		switch upstreamOf(model) {
		case "anthropic":
			// same format: beta features and Anthropic-only fields go through
			if up.Header.Get("Anthropic-Beta") != beta || up.Header.Get("Anthropic-Version") != "2023-06-01" ||
				!strings.Contains(string(up.Body), `"context_management"`) || strings.Contains(string(up.Body), `"role":"system"`) {
				t.Errorf("anthropic upstream got headers %v body %s", up.Header, up.Body)
			}
			if r.header.Get("X-Modelgate-Dropped") != "" {
				t.Errorf("nothing is dropped on a same-format route: %q", r.header.Get("X-Modelgate-Dropped"))
			}
		default:
			if up.Header.Get("Anthropic-Beta") != "" || strings.Contains(string(up.Body), "context_management") {
				t.Errorf("%s upstream got Anthropic-only parts: %v %s", model, up.Header, up.Body)
			}
			dropped := r.header.Get("X-Modelgate-Dropped")
			for _, want := range []string{"context_management", "anthropic-beta"} {
				if !strings.Contains(dropped, want) {
					t.Errorf("%s: x-modelgate-dropped %q lacks %s", model, dropped, want)
				}
			}
		}
		for name := range up.Header {
			if strings.EqualFold(name, "X-App") || strings.Contains(strings.ToLower(up.Header.Get(name)), key) {
				t.Errorf("%s: the client's header %s reached the upstream", model, name)
			}
		}
	}
}

// geminiCLIBody is a request shaped like Gemini CLI's: systemInstruction
// with role "user", topK, thinkingConfig.includeThoughts, tools declared
// with parametersJsonSchema.
const geminiCLIBody = `{
	"contents": [{"role": "user", "parts": [{"text": "What is in this folder? mock:tokens=5"}]}],
	"systemInstruction": {"role": "user", "parts": [{"text": "You are an interactive CLI agent specializing in software engineering tasks."}]},
	"generationConfig": {"temperature": 0, "topP": 1, "topK": 64, "thinkingConfig": {"includeThoughts": true, "thinkingBudget": -1}},
	"tools": [{"functionDeclarations": [{"name": "list_directory", "description": "Lists a directory.",
		"parametersJsonSchema": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}}]}]
}`

// TestGeminiCLIRequests replays Gemini CLI's request shape (SSE streaming)
// against models of every upstream format.
func TestGeminiCLIRequests(t *testing.T) {
	g := startGateway(t, gatewayOptions{})
	_, key := g.account("1.00")
	for _, model := range everyUpstream {
		r := g.do("POST", "/v1beta/models/"+model+":streamGenerateContent?alt=sse", geminiCLIBody,
			"X-Goog-Api-Key", key, "User-Agent", "GeminiCLI/0.9.0 (linux; x64)")
		if r.status != 200 || !strings.HasPrefix(r.header.Get("Content-Type"), "text/event-stream") {
			t.Errorf("%s: %d %s", model, r.status, r.body)
			continue
		}
		var text strings.Builder
		finished := false
		for _, line := range strings.Split(r.body, "\n") {
			d, ok := strings.CutPrefix(strings.TrimSuffix(line, "\r"), "data: ")
			if !ok {
				continue
			}
			var el struct {
				Candidates []struct {
					Content struct {
						Parts []struct {
							Text    string
							Thought bool
						}
					}
					FinishReason string
				}
				ModelVersion string
			}
			if err := json.Unmarshal([]byte(d), &el); err != nil {
				t.Fatalf("%s: element %q: %v", model, d, err)
			}
			if el.ModelVersion != model {
				t.Errorf("%s: modelVersion %q", model, el.ModelVersion)
			}
			for _, c := range el.Candidates {
				for _, p := range c.Content.Parts {
					if !p.Thought {
						text.WriteString(p.Text)
					}
				}
				finished = finished || c.FinishReason == "STOP"
			}
		}
		if text.String() != mockupstream.ReplyText(5) || !finished {
			t.Errorf("%s: text %q, finished %v", model, text.String(), finished)
		}
	}
}

// TestDroppedFieldsNamed: fields the target format cannot take are dropped,
// not refused, and named in x-modelgate-dropped.
func TestDroppedFieldsNamed(t *testing.T) {
	g := startGateway(t, gatewayOptions{})
	_, key := g.account("1.00")
	r := g.do("POST", "/v1/chat/completions", chatBody("claude-test", "hello", `"seed":7,"service_tier":"auto","some_vendor_extension":{"a":1}`),
		"Authorization", "Bearer "+key)
	dropped := r.header.Get("X-Modelgate-Dropped")
	if r.status != 200 || !strings.Contains(dropped, "seed") || !strings.Contains(dropped, "service_tier") || !strings.Contains(dropped, "some_vendor_extension") {
		t.Fatalf("%d, dropped %q: %s", r.status, dropped, r.body)
	}
	// what changes the meaning is refused, naming the field
	r = g.do("POST", "/v1/chat/completions", chatBody("claude-test", "hello", `"n":2`), "Authorization", "Bearer "+key)
	if r.status != 400 || !strings.Contains(r.body, `"param":"n"`) {
		t.Fatalf("n=2 to anthropic: %d %s", r.status, r.body)
	}
}

// TestClaudeCodeThinkingBudget: Claude Code asks for 32000 output tokens
// with a thinking budget of 31999; the gateway's lower cap (the model's
// max_output, or the balance) must keep the budget below max_tokens, as
// Anthropic requires, instead of failing the request.
func TestClaudeCodeThinkingBudget(t *testing.T) {
	g := startGateway(t, gatewayOptions{})
	_, key := g.account("1.00")
	body := strings.Replace(claudeCodeBody("claude-test"), `"thinking": {"type": "adaptive"}`, `"thinking": {"type": "enabled", "budget_tokens": 31999}`, 1)
	r := g.do("POST", "/v1/messages?beta=true", body, "Authorization", "Bearer "+key, "Anthropic-Version", "2023-06-01")
	if r.status != 200 || !strings.Contains(r.body, "message_stop") {
		t.Fatalf("%d %s", r.status, r.body)
	}
	var up struct {
		MaxTokens int `json:"max_tokens"`
		Thinking  struct {
			Type         string
			BudgetTokens int `json:"budget_tokens"`
		}
	}
	if err := json.Unmarshal(g.mock.Requests()[0].Body, &up); err != nil {
		t.Fatal(err)
	}
	if up.MaxTokens != testMaxOutput || (up.Thinking.Type == "enabled" && up.Thinking.BudgetTokens >= up.MaxTokens) {
		t.Fatalf("upstream max_tokens %d with thinking %+v", up.MaxTokens, up.Thinking)
	}
}

// TestReasoningFeature: thinking asked by a client reaches a translated
// upstream only when the model is configured with the reasoning feature;
// otherwise it is dropped (models without reasoning refuse it) and named.
func TestReasoningFeature(t *testing.T) {
	g := startGateway(t, gatewayOptions{extra: "\t\tmodel gpt-reasoner {\n\t\t\troute mock up-reasoner\n\t\t\tprice input 0.5 output 1.5\n\t\t\tfeatures reasoning\n\t\t}\n"})
	_, key := g.account("1.00")
	for model, wantEffort := range map[string]bool{"gpt-reasoner": true, testModel: false} {
		g.mock.Reset()
		body := `{"model":"` + model + `","max_tokens":3000,"thinking":{"type":"enabled","budget_tokens":2048},"messages":[{"role":"user","content":"think"}]}`
		r := g.do("POST", "/v1/messages", body, "Authorization", "Bearer "+key, "Anthropic-Version", "2023-06-01")
		if r.status != 200 {
			t.Fatalf("%s: %d %s", model, r.status, r.body)
		}
		sent := string(g.mock.Requests()[0].Body)
		if got := strings.Contains(sent, `"reasoning_effort":"low"`); got != wantEffort {
			t.Errorf("%s: upstream body %s", model, sent)
		}
		if dropped := r.header.Get("X-Modelgate-Dropped"); strings.Contains(dropped, "thinking") == wantEffort {
			t.Errorf("%s: x-modelgate-dropped %q", model, dropped)
		}
	}
}
