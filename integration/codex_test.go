package integration

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/modelgate/modelgate/mockupstream"
)

// codexTurn1 is the shape of the first request of a Codex CLI session
// (docs/api.md, "What real clients send"): streamed Responses, store false, encrypted reasoning asked
// for, developer messages, a function tool, a namespace of MCP tools and the
// hosted web_search tool. MODEL and PROMPT are replaced.
const codexTurn1 = `{"model":"MODEL","instructions":"You are Codex, a coding agent. Be brief.",
"input":[
 {"type":"message","role":"developer","content":[{"type":"input_text","text":"<permissions instructions>workspace-write</permissions instructions>"}]},
 {"type":"message","role":"user","content":[{"type":"input_text","text":"<environment_context><cwd>/src</cwd></environment_context>"}]},
 {"type":"message","role":"user","content":[{"type":"input_text","text":"PROMPT"}]}],
"tools":[
 {"type":"function","name":"shell","description":"Runs a shell command and returns its output.","strict":false,
  "parameters":{"type":"object","properties":{"command":{"type":"array","items":{"type":"string"}},"workdir":{"type":"string"}},"required":["command"],"additionalProperties":false}},
 {"type":"namespace","name":"mcp__files","description":"Tools of the files MCP server.","tools":[
  {"type":"function","name":"read","description":"Reads a file.","strict":false,"parameters":{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}}]},
 {"type":"web_search","external_web_access":false}],
"tool_choice":"auto","parallel_tool_calls":false,"reasoning":{"effort":"medium","summary":"auto"},
"store":false,"stream":true,"include":["reasoning.encrypted_content"],"prompt_cache_key":"019ab3c4-codex-session"}`

// codexTurn2 continues the session: the model's reasoning (encrypted, for
// OpenAI only), a shell call and a namespaced call with their outputs.
const codexTurn2 = `{"model":"MODEL","instructions":"You are Codex, a coding agent. Be brief.",
"input":[
 {"type":"message","role":"developer","content":[{"type":"input_text","text":"<permissions instructions>workspace-write</permissions instructions>"}]},
 {"type":"message","role":"user","content":[{"type":"input_text","text":"list the files and read the readme"}]},
 {"type":"reasoning","id":"rs_1","summary":[],"encrypted_content":"gAAAAABmock-encrypted"},
 {"type":"function_call","name":"shell","arguments":"{\"command\":[\"ls\"]}","call_id":"call_1"},
 {"type":"function_call_output","call_id":"call_1","output":"README.md\nmain.go\n"},
 {"type":"function_call","namespace":"mcp__files","name":"read","arguments":"{\"path\":\"README.md\"}","call_id":"call_2"},
 {"type":"function_call_output","call_id":"call_2","output":"# demo"}],
"tools":[
 {"type":"function","name":"shell","description":"Runs a shell command and returns its output.","strict":false,
  "parameters":{"type":"object","properties":{"command":{"type":"array","items":{"type":"string"}}},"required":["command"]}},
 {"type":"namespace","name":"mcp__files","description":"Tools of the files MCP server.","tools":[
  {"type":"function","name":"read","description":"Reads a file.","strict":false,"parameters":{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}}]},
 {"type":"web_search","external_web_access":false}],
"tool_choice":"auto","parallel_tool_calls":false,"reasoning":{"effort":"medium","summary":"auto"},
"store":false,"stream":true,"include":["reasoning.encrypted_content"],"prompt_cache_key":"019ab3c4-codex-session"}`

// sseEvent is one event of a Responses stream.
type sseEvent struct {
	name string
	data map[string]any
	raw  string
}

// parseSSE splits a Responses stream into its events and checks the
// framing: an event line naming the data's type, sequence numbers from 0.
func parseSSE(t *testing.T, body string) []sseEvent {
	t.Helper()
	var evs []sseEvent
	for _, block := range strings.Split(strings.TrimSpace(body), "\n\n") {
		name, data, ok := strings.Cut(block, "\ndata: ")
		if !ok || !strings.HasPrefix(name, "event: ") {
			t.Fatalf("not an event: %q", block)
		}
		ev := sseEvent{name: strings.TrimPrefix(name, "event: "), raw: data}
		if err := json.Unmarshal([]byte(data), &ev.data); err != nil {
			t.Fatalf("event data %q: %v", data, err)
		}
		if ev.data["type"] != ev.name || ev.data["sequence_number"] != float64(len(evs)) {
			t.Fatalf("event %d: %s with type %v and sequence_number %v", len(evs), ev.name, ev.data["type"], ev.data["sequence_number"])
		}
		evs = append(evs, ev)
	}
	return evs
}

func codexBody(tmpl, model, prompt string) string {
	return strings.ReplaceAll(strings.ReplaceAll(tmpl, "MODEL", model), "PROMPT", prompt)
}

// TestCodexCLI replays the requests Codex CLI makes against models of all
// three upstream formats: the stream is a well-formed Responses stream; on
// translated routes the hosted web_search tool and the OpenAI-only fields
// are dropped and named, the namespace tools are flattened for the upstream
// and their names restored in the answer; the OpenAI upstream gets the
// request as sent (namespaces and encrypted reasoning intact), but for the
// hosted web_search tool, which the test model does not price: it is
// dropped and named there too.
func TestCodexCLI(t *testing.T) {
	g := startGateway(t, gatewayOptions{})
	acct, key := g.account("1.00")
	auth := []string{"Authorization", "Bearer " + key}
	for _, model := range everyUpstream {
		// turn 1: the model calls the namespaced read tool
		g.mock.Reset()
		r := g.do("POST", "/v1/responses", codexBody(codexTurn1, model, "read the readme mock:tool=mcp__files__read"), auth...)
		if r.status != 200 || !strings.HasPrefix(r.header.Get("Content-Type"), "text/event-stream") {
			t.Fatalf("%s: turn 1: %d %s", model, r.status, r.body)
		}
		evs := parseSSE(t, r.body)
		last := evs[len(evs)-1]
		if last.name != "response.completed" || evs[0].name != "response.created" {
			t.Fatalf("%s: stream from %s to %s", model, evs[0].name, last.name)
		}
		sent := string(g.mock.Requests()[0].Body)
		dropped := r.header.Get("X-Modelgate-Dropped")
		if model == testModel {
			for _, want := range []string{`"type":"namespace"`, `"include":["reasoning.encrypted_content"]`, `"store":false`} {
				if !strings.Contains(sent, want) {
					t.Errorf("%s: the OpenAI upstream did not get %s: %s", model, want, sent)
				}
			}
			if strings.Contains(sent, `"type":"web_search"`) || dropped != "web_search" {
				t.Errorf("%s: the unpriced web_search tool went upstream (%s) or was not named (dropped %q)", model, sent, dropped)
			}
			continue
		}
		for _, want := range []string{"web_search", "include", "prompt_cache_key", "reasoning.summary"} {
			if !strings.Contains(","+dropped+",", ","+want+",") {
				t.Errorf("%s: x-modelgate-dropped %q does not name %s", model, dropped, want)
			}
		}
		if !strings.Contains(sent, `"mcp__files__read"`) || !strings.Contains(sent, `"shell"`) || strings.Contains(sent, "web_search") ||
			!strings.Contains(sent, "workspace-write") {
			t.Errorf("%s: upstream body %s", model, sent)
		}
		// the answer's call carries the tool's own name and namespace
		item := last.data["response"].(map[string]any)["output"].([]any)
		call := item[len(item)-1].(map[string]any)
		if call["type"] != "function_call" || call["name"] != "read" || call["namespace"] != "mcp__files" {
			t.Errorf("%s: call item %v", model, call)
		}
		for _, ev := range evs {
			if ev.name == "response.function_call_arguments.done" && ev.data["name"] != "read" {
				t.Errorf("%s: %s", model, ev.raw)
			}
		}

		// turn 2: the history with reasoning and both calls answered
		g.mock.Reset()
		r = g.do("POST", "/v1/responses", codexBody(codexTurn2, model, ""), auth...)
		if r.status != 200 {
			t.Fatalf("%s: turn 2: %d %s", model, r.status, r.body)
		}
		if evs := parseSSE(t, r.body); evs[len(evs)-1].name != "response.completed" {
			t.Errorf("%s: turn 2 ended with %s", model, evs[len(evs)-1].raw)
		}
		sent = string(g.mock.Requests()[0].Body)
		if strings.Contains(sent, "gAAAA") || !strings.Contains(sent, "README.md") || !strings.Contains(sent, "# demo") {
			t.Errorf("%s: turn 2 upstream body %s", model, sent)
		}
		if !strings.Contains(r.header.Get("X-Modelgate-Dropped"), "input.reasoning") {
			t.Errorf("%s: turn 2 dropped %q", model, r.header.Get("X-Modelgate-Dropped"))
		}
	}
	if n := len(g.rows(acct)); n != 5 {
		t.Errorf("%d usage rows, want 5", n)
	}
	g.audit()
}

// TestResponsesRefusals: what a translated route cannot honour is a 400
// naming the field, with nothing held or sent upstream; stored state is
// refused on an OpenAI upstream too, as the test model does not allow it.
func TestResponsesRefusals(t *testing.T) {
	g := startGateway(t, gatewayOptions{})
	acct, key := g.account("1.00")
	auth := []string{"Authorization", "Bearer " + key}
	base := `{"model":"claude-test","input":"hi"`
	for body, param := range map[string]string{
		base + `,"previous_response_id":"resp_123"}`:                                           "previous_response_id",
		base + `,"conversation":"conv_1"}`:                                                     "conversation",
		base + `,"store":true}`:                                                                "store",
		base + `,"background":true}`:                                                           "background",
		base + `,"tools":[{"type":"web_search"}],"tool_choice":{"type":"web_search"}}`:         "tool_choice",
		`{"model":"gemini-test","input":[{"type":"item_reference","id":"msg_1"}]}`:             "input[0]",
		base + `,"temperature":3}`:                                                             "temperature",
		base + `,"max_output_tokens":"many"}`:                                                  "max_output_tokens",
		`{"model":"claude-test"}`:                                                              "input",
		`{"model":"claude-test","input":[{"type":"message","role":"robot","content":"x"}]}`:    "input[0].role",
		`{"model":"claude-test","input":[{"role":"user","content":[{"type":"input_video"}]}]}`: "input[0].content[0].type",
	} {
		r := g.do("POST", "/v1/responses", body, auth...)
		var e struct {
			Error struct{ Param, Type, Message string }
		}
		if r.status != 400 || json.Unmarshal([]byte(r.body), &e) != nil || e.Error.Param != param || e.Error.Type != "invalid_request_error" {
			t.Errorf("%s: %d %s, want 400 naming %s", body, r.status, r.body, param)
		}
	}
	if n := len(g.mock.Requests()); n != 0 || len(g.rows(acct)) != 0 {
		t.Fatalf("refused requests reached the upstream (%d) or were billed", n)
	}
	if bal, held := g.balance(acct); bal != 1_000_000_000 || held != 0 {
		t.Fatalf("balance %s held %s", bal, held)
	}
	// an OpenAI upstream's state is the operator's: refused there too,
	// unless the model allows it (redteam_test.go)
	r := g.do("POST", "/v1/responses", `{"model":"`+testModel+`","input":"hi","previous_response_id":"resp_123"}`, auth...)
	var e struct {
		Error struct{ Param string }
	}
	if r.status != 400 || json.Unmarshal([]byte(r.body), &e) != nil || e.Error.Param != "previous_response_id" || len(g.mock.Requests()) != 0 {
		t.Fatalf("pass-through with state: %d %s", r.status, r.body)
	}
}

// TestResponsesChatOnlyProvider: an OpenAI-compatible provider without the
// Responses API (chat_only) gets Chat Completions; the client still gets a
// Responses answer, streamed and not, billed exactly.
func TestResponsesChatOnlyProvider(t *testing.T) {
	g := startGateway(t, gatewayOptions{extra: "\t\tprovider compat {\n\t\t\tformat openai\n\t\t\tbase_url {env.MG_TEST_MOCK_URL}\n" +
		"\t\t\tkeys {env.MG_TEST_UPSTREAM_KEY}\n\t\t\tchat_only\n\t\t}\n" +
		"\t\tmodel compat-model {\n\t\t\troute compat up-compat\n\t\t\tprice input 0.5 output 1.5\n\t\t}\n"})
	acct, key := g.account("1.00")
	for _, stream := range []bool{false, true} {
		g.mock.Reset()
		tr, _ := g.askResponses(t, key, "compat-model", "Be brief.", "Tell me something about the sea", stream, false)
		if tr.text != mockupstream.ReplyText(12) || tr.model != "compat-model" || tr.out != 12 {
			t.Errorf("stream=%v: %+v", stream, tr)
		}
		if reqs := g.mock.Requests(); len(reqs) != 1 || reqs[0].Path != "/v1/chat/completions" {
			t.Fatalf("stream=%v: the chat_only provider got %v", stream, reqs)
		}
	}
	if n := len(g.rows(acct)); n != 2 {
		t.Fatalf("%d rows", n)
	}
	g.audit()
}
