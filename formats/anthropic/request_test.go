package anthropic

import (
	"strings"
	"testing"

	"github.com/modelgate/modelgate/formats"
)

// msgs is a valid messages array for the tables below.
const msgs = `"messages":[{"role":"user","content":"hi"}]`

// base is a valid request prefix.
const base = `{"model":"m","max_tokens":100,` + msgs

func TestParseMessagesRequestInvalid(t *testing.T) {
	for _, tc := range []struct {
		name, body, param, msg string
	}{
		// the body
		{"not json", `{"model":`, "", "The request body is not valid JSON: unexpected EOF at byte 9"},
		{"trailing data", base + `} x`, "", ""},
		{"invalid utf8", "{\"model\":\"m\xff\",\"max_tokens\":1," + msgs + "}", "", ""},
		{"lone surrogate", `{"model":"m","max_tokens":1,"messages":[{"role":"user","content":"\ud800"}]}`, "", ""},
		{"duplicate key", `{"model":"a","model":"b","max_tokens":1,` + msgs + `}`, "", ""},
		{"not an object", `[1,2]`, "", "Input should be a valid dictionary or object to extract fields from"},
		// model, max_tokens
		{"model missing", `{"max_tokens":1,` + msgs + `}`, "model", "model: Field required"},
		{"model number", `{"model":4,"max_tokens":1,` + msgs + `}`, "model", "model: Input should be a valid string"},
		{"model null", `{"model":null,"max_tokens":1,` + msgs + `}`, "model", "model: Input should be a valid string"},
		{"model empty", `{"model":"","max_tokens":1,` + msgs + `}`, "model", "model: String should have at least 1 character"},
		{"max_tokens missing", `{"model":"m",` + msgs + `}`, "max_tokens", "max_tokens: Field required"},
		{"max_tokens zero", `{"model":"m","max_tokens":0,` + msgs + `}`, "max_tokens", "max_tokens: Input should be greater than or equal to 1"},
		{"max_tokens float", `{"model":"m","max_tokens":10.5,` + msgs + `}`, "max_tokens", "max_tokens: Input should be a valid integer, got a number with a fractional part"},
		{"max_tokens string", `{"model":"m","max_tokens":"10",` + msgs + `}`, "max_tokens", "max_tokens: Input should be a valid integer"},
		{"max_tokens null", `{"model":"m","max_tokens":null,` + msgs + `}`, "max_tokens", "max_tokens: Input should be a valid integer"},
		// messages
		{"messages missing", `{"model":"m","max_tokens":1}`, "messages", "messages: Field required"},
		{"messages object", `{"model":"m","max_tokens":1,"messages":{}}`, "messages", "messages: Input should be a valid list"},
		{"messages empty", `{"model":"m","max_tokens":1,"messages":[]}`, "messages", "messages: at least one message is required"},
		{"message not object", `{"model":"m","max_tokens":1,"messages":["hi"]}`, "messages.0", "messages.0: Input should be a valid dictionary"},
		{"role missing", `{"model":"m","max_tokens":1,"messages":[{"content":"hi"}]}`, "messages.0.role", "messages.0.role: Field required"},
		{"role unknown", `{"model":"m","max_tokens":1,"messages":[{"role":"user","content":"a"},{"role":"tool","content":"hi"}]}`, "messages.1.role", "messages.1.role: Input should be 'user' or 'assistant'"},
		{"content missing", `{"model":"m","max_tokens":1,"messages":[{"role":"user"}]}`, "messages.0.content", "messages.0.content: Field required"},
		{"content number", `{"model":"m","max_tokens":1,"messages":[{"role":"user","content":5}]}`, "messages.0.content", "messages.0.content: Input should be a valid list"},
		{"block not object", `{"model":"m","max_tokens":1,"messages":[{"role":"user","content":["hi"]}]}`, "messages.0.content.0", "messages.0.content.0: Input should be a valid dictionary"},
		{"block type missing", `{"model":"m","max_tokens":1,"messages":[{"role":"user","content":[{"text":"hi"}]}]}`, "messages.0.content.0.type", "messages.0.content.0.type: Field required"},
		{"block type unknown", `{"model":"m","max_tokens":1,"messages":[{"role":"user","content":[{"type":"video"}]}]}`, "messages.0.content.0", ""},
		{"block type escaped unknown", `{"model":"m","max_tokens":1,"messages":[{"role":"user","content":[{"type":"\u0000x"}]}]}`, "messages.0.content.0", ""},
		{"text missing", `{"model":"m","max_tokens":1,"messages":[{"role":"user","content":[{"type":"text"}]}]}`, "messages.0.content.0.text", "messages.0.content.0.text: Field required"},
		{"text number", `{"model":"m","max_tokens":1,"messages":[{"role":"user","content":[{"type":"text","text":1}]}]}`, "messages.0.content.0.text", "messages.0.content.0.text: Input should be a valid string"},
		{"cache_control string", `{"model":"m","max_tokens":1,"messages":[{"role":"user","content":[{"type":"text","text":"a","cache_control":"x"}]}]}`, "messages.0.content.0.cache_control", "messages.0.content.0.cache_control: Input should be a valid dictionary"},
		{"image source missing", `{"model":"m","max_tokens":1,"messages":[{"role":"user","content":[{"type":"image"}]}]}`, "messages.0.content.0.source", "messages.0.content.0.source: Field required"},
		{"image media type", `{"model":"m","max_tokens":1,"messages":[{"role":"user","content":[{"type":"image","source":{"type":"base64","media_type":"image/bmp","data":"AA"}}]}]}`, "messages.0.content.0.source.media_type", "messages.0.content.0.source.media_type: Input should be 'image/jpeg', 'image/png', 'image/gif' or 'image/webp'"},
		{"image data missing", `{"model":"m","max_tokens":1,"messages":[{"role":"user","content":[{"type":"image","source":{"type":"base64","media_type":"image/png"}}]}]}`, "messages.0.content.0.source.data", "messages.0.content.0.source.data: Field required"},
		{"image source type", `{"model":"m","max_tokens":1,"messages":[{"role":"user","content":[{"type":"image","source":{"type":"ftp"}}]}]}`, "messages.0.content.0.source", "messages.0.content.0.source: Input tag 'ftp' found using 'type' does not match any of the expected tags: 'base64', 'url', 'file'"},
		{"document media type", `{"model":"m","max_tokens":1,"messages":[{"role":"user","content":[{"type":"document","source":{"type":"base64","media_type":"application/msword","data":"AA"}}]}]}`, "messages.0.content.0.source.media_type", "messages.0.content.0.source.media_type: Input should be 'application/pdf'"},
		{"document title", `{"model":"m","max_tokens":1,"messages":[{"role":"user","content":[{"type":"document","title":1,"source":{"type":"url","url":"https://x"}}]}]}`, "messages.0.content.0.title", "messages.0.content.0.title: Input should be a valid string"},
		{"tool_use in user", `{"model":"m","max_tokens":1,"messages":[{"role":"user","content":[{"type":"tool_use","id":"a","name":"f","input":{}}]}]}`, "messages.0.content.0.type", "messages.0.content.0.type: tool_use blocks are only allowed in assistant messages"},
		{"tool_use id pattern", `{"model":"m","max_tokens":1,"messages":[{"role":"assistant","content":[{"type":"tool_use","id":"a.b","name":"f","input":{}}]}]}`, "messages.0.content.0.id", "messages.0.content.0.id: String should match pattern '^[a-zA-Z0-9_-]+$'"},
		{"tool_use input string", `{"model":"m","max_tokens":1,"messages":[{"role":"assistant","content":[{"type":"tool_use","id":"a","name":"f","input":"{}"}]}]}`, "messages.0.content.0.input", "messages.0.content.0.input: Input should be a valid dictionary"},
		{"tool_use input missing", `{"model":"m","max_tokens":1,"messages":[{"role":"assistant","content":[{"type":"tool_use","id":"a","name":"f"}]}]}`, "messages.0.content.0.input", "messages.0.content.0.input: Field required"},
		{"tool_result in assistant", `{"model":"m","max_tokens":1,"messages":[{"role":"assistant","content":[{"type":"tool_result","tool_use_id":"a"}]}]}`, "messages.0.content.0.type", "messages.0.content.0.type: tool_result blocks are only allowed in user messages"},
		{"tool_result id missing", `{"model":"m","max_tokens":1,"messages":[{"role":"user","content":[{"type":"tool_result","content":"x"}]}]}`, "messages.0.content.0.tool_use_id", "messages.0.content.0.tool_use_id: Field required"},
		{"tool_result is_error", `{"model":"m","max_tokens":1,"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"a","is_error":"yes"}]}]}`, "messages.0.content.0.is_error", "messages.0.content.0.is_error: Input should be a valid boolean"},
		{"tool_result content", `{"model":"m","max_tokens":1,"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"a","content":5}]}]}`, "messages.0.content.0.content", "messages.0.content.0.content: Input should be a valid list"},
		{"tool_result nested text", `{"model":"m","max_tokens":1,"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"a","content":[{"type":"text"}]}]}]}`, "messages.0.content.0.content.0.text", "messages.0.content.0.content.0.text: Field required"},
		{"thinking signature", `{"model":"m","max_tokens":1,"messages":[{"role":"assistant","content":[{"type":"thinking","thinking":"x"}]}]}`, "messages.0.content.0.signature", "messages.0.content.0.signature: Field required"},
		{"redacted data", `{"model":"m","max_tokens":1,"messages":[{"role":"assistant","content":[{"type":"redacted_thinking"}]}]}`, "messages.0.content.0.data", "messages.0.content.0.data: Field required"},
		{"system message image", `{"model":"m","max_tokens":1,"messages":[{"role":"system","content":[{"type":"image","source":{"type":"url","url":"https://x"}}]},{"role":"user","content":"a"}]}`, "messages.0.content.0.type", "messages.0.content.0.type: Input should be 'text'"},
		// system
		{"system number", base + `,"system":1}`, "system", "system: Input should be a valid list"},
		{"system image", base + `,"system":[{"type":"image"}]}`, "system.0", "system.0: Input tag 'image' found using 'type' does not match any of the expected tags: 'text'"},
		{"system text missing", base + `,"system":[{"type":"text"}]}`, "system.0.text", "system.0.text: Field required"},
		// sampling
		{"temperature high", base + `,"temperature":1.5}`, "temperature", "temperature: Input should be less than or equal to 1"},
		{"temperature low", base + `,"temperature":-0.1}`, "temperature", "temperature: Input should be greater than or equal to 0"},
		{"temperature string", base + `,"temperature":"hot"}`, "temperature", "temperature: Input should be a valid number"},
		{"top_p high", base + `,"top_p":1.01}`, "top_p", "top_p: Input should be less than or equal to 1"},
		{"top_k negative", base + `,"top_k":-1}`, "top_k", "top_k: Input should be greater than or equal to 0"},
		{"top_k float", base + `,"top_k":1.5}`, "top_k", "top_k: Input should be a valid integer, got a number with a fractional part"},
		{"stop_sequences string", base + `,"stop_sequences":"END"}`, "stop_sequences", "stop_sequences: Input should be a valid list"},
		{"stop_sequences element", base + `,"stop_sequences":["a",1]}`, "stop_sequences.1", "stop_sequences.1: Input should be a valid string"},
		{"stream string", base + `,"stream":"yes"}`, "stream", "stream: Input should be a valid boolean"},
		// tools
		{"tools object", base + `,"tools":{}}`, "tools", "tools: Input should be a valid list"},
		{"tool not object", base + `,"tools":[1]}`, "tools.0", "tools.0: Input should be a valid dictionary"},
		{"tool name missing", base + `,"tools":[{"input_schema":{"type":"object"}}]}`, "tools.0.name", "tools.0.name: Field required"},
		{"tool name pattern", base + `,"tools":[{"name":"get weather","input_schema":{"type":"object"}}]}`, "tools.0.name", "tools.0.name: String should match pattern '^[a-zA-Z0-9_-]{1,128}$'"},
		{"tool schema missing", base + `,"tools":[{"name":"f"}]}`, "tools.0.input_schema", "tools.0.input_schema: Field required"},
		{"tool schema type", base + `,"tools":[{"name":"f","input_schema":{"type":"array"}}]}`, "tools.0.input_schema.type", "tools.0.input_schema.type: Input should be 'object'"},
		{"tool schema no type", base + `,"tools":[{"name":"f","input_schema":{"properties":{}}}]}`, "tools.0.input_schema.type", "tools.0.input_schema.type: Field required"},
		{"tool description", base + `,"tools":[{"name":"f","description":1,"input_schema":{"type":"object"}}]}`, "tools.0.description", "tools.0.description: Input should be a valid string"},
		{"tool strict", base + `,"tools":[{"name":"f","strict":"yes","input_schema":{"type":"object"}}]}`, "tools.0.strict", "tools.0.strict: Input should be a valid boolean"},
		{"tool type number", base + `,"tools":[{"type":1,"name":"f"}]}`, "tools.0.type", "tools.0.type: Input should be a valid string"},
		{"tool_choice string", base + `,"tool_choice":"auto"}`, "tool_choice", "tool_choice: Input should be a valid dictionary"},
		{"tool_choice type", base + `,"tool_choice":{"type":"required"}}`, "tool_choice", "tool_choice: Input tag 'required' found using 'type' does not match any of the expected tags: 'auto', 'any', 'tool', 'none'"},
		{"tool_choice name", base + `,"tool_choice":{"type":"tool"}}`, "tool_choice.name", "tool_choice.name: Field required"},
		{"tool_choice parallel", base + `,"tool_choice":{"type":"auto","disable_parallel_tool_use":1}}`, "tool_choice.disable_parallel_tool_use", "tool_choice.disable_parallel_tool_use: Input should be a valid boolean"},
		// thinking, output
		{"thinking type", base + `,"thinking":{"type":"on"}}`, "thinking", "thinking: Input tag 'on' found using 'type' does not match any of the expected tags: 'enabled', 'disabled', 'adaptive'"},
		{"thinking budget missing", base + `,"thinking":{"type":"enabled"}}`, "thinking.enabled.budget_tokens", "thinking.enabled.budget_tokens: Field required"},
		{"thinking budget low", `{"model":"m","max_tokens":5000,` + msgs + `,"thinking":{"type":"enabled","budget_tokens":1000}}`, "thinking.enabled.budget_tokens", "thinking.enabled.budget_tokens: Input should be greater than or equal to 1024"},
		{"thinking budget over max", `{"model":"m","max_tokens":2000,` + msgs + `,"thinking":{"type":"enabled","budget_tokens":2000}}`, "max_tokens", "max_tokens: `max_tokens` must be greater than `thinking.budget_tokens` (2000)"},
		{"output_config string", base + `,"output_config":"high"}`, "output_config", "output_config: Input should be a valid dictionary"},
		{"effort number", base + `,"output_config":{"effort":3}}`, "output_config.effort", "output_config.effort: Input should be a valid string"},
		{"format type", base + `,"output_config":{"format":{"type":"json_object"}}}`, "output_config.format", "output_config.format: Input tag 'json_object' found using 'type' does not match any of the expected tags: 'json_schema'"},
		{"format schema", base + `,"output_config":{"format":{"type":"json_schema"}}}`, "output_config.format.schema", "output_config.format.schema: Field required"},
		// bookkeeping
		{"metadata string", base + `,"metadata":"u"}`, "metadata", "metadata: Input should be a valid dictionary"},
		{"user_id number", base + `,"metadata":{"user_id":1}}`, "metadata.user_id", "metadata.user_id: Input should be a valid string"},
		{"service_tier number", base + `,"service_tier":1}`, "service_tier", "service_tier: Input should be a valid string"},
		{"mcp_servers object", base + `,"mcp_servers":{}}`, "mcp_servers", "mcp_servers: Input should be a valid list"},
		{"context_management list", base + `,"context_management":[]}`, "context_management", "context_management: Input should be a valid dictionary"},
		{"container number", base + `,"container":1}`, "container", "container: Input should be a valid string"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := ParseMessagesRequest([]byte(tc.body))
			if err == nil {
				t.Fatalf("accepted: %+v", req)
			}
			if err.Status() != 400 || err.Kind != formats.KindInvalidRequest {
				t.Fatalf("status %d", err.Status())
			}
			if err.Param != tc.param {
				t.Fatalf("param %q, want %q (%s)", err.Param, tc.param, err.Message)
			}
			if tc.msg != "" && err.Message != tc.msg {
				t.Fatalf("message\n got %s\nwant %s", err.Message, tc.msg)
			}
			if err.Message == "" {
				t.Fatal("no message")
			}
			if tc.param != "" && !strings.HasPrefix(err.Message, tc.param+": ") {
				t.Fatalf("message does not name the field: %s", err.Message)
			}
		})
	}
}

func TestParseMessagesRequestValid(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		stream     bool
		max        int
	}{
		{"minimal", base + `}`, false, 100},
		{"nulls are absent", base + `,"temperature":null,"top_p":null,"top_k":null,"stream":null,"stop_sequences":null,"tools":null,"tool_choice":null,"system":null,"metadata":null,"thinking":null,"output_config":null}`, false, 100},
		{"stream", base + `,"stream":true}`, true, 100},
		{"integer-valued float", `{"model":"m","max_tokens":1e3,` + msgs + `}`, false, 1000},
		{"unknown fields", base + `,"x_vendor":{"a":[1]},"speed":"fast"}`, false, 100},
		{"escaped names", `{"m\u006fdel":"m","max_tokens":5,"messages":[{"r\u006fle":"user","content":"hi"}]}`, false, 5},
		{"escaped block type", `{"model":"m","max_tokens":1,"messages":[{"role":"user","content":[{"type":"t\u0065xt","text":"a"}]}]}`, false, 1},
		{"system messages only first", `{"model":"m","max_tokens":1,"messages":[{"role":"system","content":"s"},{"role":"user","content":"u"}]}`, false, 1},
		{"thinking kinds", `{"model":"m","max_tokens":2000,` + msgs + `,"thinking":{"type":"enabled","budget_tokens":1024,"display":"summarized"}}`, false, 2000},
		{"adaptive", base + `,"thinking":{"type":"adaptive"},"output_config":{"effort":"max"}}`, false, 100},
		{"disabled", base + `,"thinking":{"type":"disabled"}}`, false, 100},
		{"every block", `{"model":"m","max_tokens":1,"messages":[
			{"role":"user","content":[{"type":"text","text":"look","cache_control":{"type":"ephemeral","ttl":"1h"}},
				{"type":"image","source":{"type":"base64","media_type":"image/webp","data":"UklGR"}},
				{"type":"image","source":{"type":"url","url":"https://x/y.png"}},
				{"type":"image","source":{"type":"file","file_id":"file_1"}},
				{"type":"document","source":{"type":"base64","media_type":"application/pdf","data":"JVBER"},"title":"t","context":"c","citations":{"enabled":true}},
				{"type":"document","source":{"type":"text","media_type":"text/plain","data":"hello"}},
				{"type":"document","source":{"type":"url","url":"https://x/a.pdf"}},
				{"type":"document","source":{"type":"content","content":[{"type":"text","text":"a"},{"type":"image","source":{"type":"url","url":"https://x/i.png"}}]}},
				{"type":"document","source":{"type":"content","content":"plain"}},
				{"type":"document","source":{"type":"file","file_id":"file_2"}},
				{"type":"search_result","source":"https://x","title":"T","content":[{"type":"text","text":"r"}]}]},
			{"role":"assistant","content":[{"type":"thinking","thinking":"t","signature":"s"},{"type":"redacted_thinking","data":"d"},
				{"type":"server_tool_use","id":"srvtoolu_1","name":"web_search","input":{}},{"type":"web_search_tool_result","tool_use_id":"srvtoolu_1","content":[]},
				{"type":"text","text":"ok","citations":[]},{"type":"tool_use","id":"toolu_1","name":"f","input":{"a":1}},{"type":"compaction","content":"summary"}]},
			{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":[{"type":"text","text":"r"},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBOR"}},{"type":"tool_reference","tool_name":"f"}],"is_error":true,"cache_control":{"type":"ephemeral"}}]}
		],"tools":[{"name":"f","input_schema":{"type":"object"},"type":"custom","allowed_callers":["direct"]},{"type":"bash_20250124","name":"bash"},{"type":"mcp_toolset","mcp_server_name":"gh"}],
		"tool_choice":{"type":"auto","disable_parallel_tool_use":true},"stop_sequences":["a"],"temperature":1,"top_p":0.5,"top_k":0,
		"metadata":{"user_id":null},"service_tier":"standard_only","cache_control":{"type":"ephemeral"},"container":{"id":"c","skills":[]},
		"inference_geo":"eu","mcp_servers":[],"context_management":{"edits":[]},"output_format":{"type":"json_schema","schema":{"type":"object"}}}`, false, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := ParseMessagesRequest([]byte(tc.body))
			if err != nil {
				t.Fatalf("rejected: %v", err)
			}
			if req.Model != "m" || req.Stream != tc.stream || req.MaxTokens() != tc.max {
				t.Fatalf("got %+v", req)
			}
			if _, err := req.ToIR(); err != nil {
				t.Fatalf("ToIR: %v", err)
			}
			if tc.name == "every block" && req.InputBound() < int64(len(tc.body)) {
				t.Fatalf("bound %d too small for %d bytes", req.InputBound(), len(tc.body))
			}
		})
	}
}

// TestClaudeCode: what Claude Code 2.x sends is accepted, measured, and
// maps to the IR as the gateway documents it.
func TestClaudeCode(t *testing.T) {
	body := read(t, "request/claude_code.json")
	req, ferr := ParseMessagesRequest(body)
	if ferr != nil {
		t.Fatal(ferr)
	}
	if !req.Stream || req.MaxTokens() != 32000 || req.Model != "claude-sonnet-4-5-20250929" {
		t.Fatalf("got %+v", req)
	}
	if s := req.InputSize(); s.Tools != 5 || s.Messages != 8 {
		t.Fatalf("size %+v", s)
	}
	if b := req.InputBound(); b < int64(len(body)/2) || b < req.InputEstimate() {
		t.Fatalf("bound %d, estimate %d", b, req.InputEstimate())
	}
	ir, ferr := req.ToIR()
	if ferr != nil {
		t.Fatal(ferr)
	}
	// the leading system message joins the system prompt; the later one
	// stays in place as a system message
	if len(ir.System) != 4 || !strings.HasPrefix(ir.System[3].Text, "You are running against") {
		t.Fatalf("system %+v", ir.System)
	}
	roles := ""
	for _, m := range ir.Messages {
		roles += m.Role.String()[:1]
	}
	if roles != "uatusat" { // user, assistant, tool results, user, system, assistant, tool results
		t.Fatalf("roles %s", roles)
	}
	if ir.Reasoning == nil || !ir.Reasoning.Adaptive || ir.Reasoning.Effort != "high" {
		t.Fatalf("reasoning %+v", ir.Reasoning)
	}
	if !strings.HasPrefix(ir.User, "user_5b3c") || len(ir.Tools) != 4 {
		t.Fatalf("user %q tools %d", ir.User, len(ir.Tools))
	}
	if res := ir.Messages[2].Parts[0].ToolResult; res == nil || res.Name != "Read" {
		t.Fatalf("tool result %+v", ir.Messages[2].Parts[0])
	}
	for _, d := range []string{"cache_control", "tools.tool_search_tool_regex", "context_management"} {
		if !strings.Contains(","+ir.DroppedHeader()+",", ","+d+",") {
			t.Errorf("%s not in dropped %q", d, ir.DroppedHeader())
		}
	}
	// pass-through: the system messages are hoisted, the cap lowered
	out, err := RewriteMessagesRequest(nil, body, "claude-sonnet-4-5", 8000)
	if err != nil {
		t.Fatal(err)
	}
	req2, ferr := ParseMessagesRequest(out)
	if ferr != nil {
		t.Fatal(ferr)
	}
	if req2.MaxTokens() != 8000 || req2.Model != "claude-sonnet-4-5" || strings.Contains(string(out), `"role": "system"`) {
		t.Fatalf("rewrite %s", out)
	}
	ir2, _ := req2.ToIR()
	if len(ir2.System) != 5 || ir2.System[3].Text != ir.System[3].Text || !strings.HasPrefix(ir2.System[4].Text, "Note: ") {
		t.Fatalf("hoisted system %+v", ir2.System)
	}
}

func TestParseCountTokensRequest(t *testing.T) {
	req, err := ParseCountTokensRequest([]byte(`{"model":"m","system":"s",` + msgs + `,"tools":[{"name":"f","input_schema":{"type":"object"}}],"thinking":{"type":"enabled","budget_tokens":2048}}`))
	if err != nil {
		t.Fatal(err)
	}
	if req.MaxTokens() != 0 || req.InputBound() <= 0 {
		t.Fatalf("got %+v", req)
	}
	if _, err := ParseCountTokensRequest([]byte(`{"model":"m"}`)); err == nil || err.Param != "messages" {
		t.Fatalf("missing messages: %v", err)
	}
	if _, err := ParseCountTokensRequest([]byte(`{` + msgs + `}`)); err == nil || err.Param != "model" {
		t.Fatalf("missing model: %v", err)
	}
}

func TestToIRRejects(t *testing.T) {
	// forcing a server tool cannot be translated
	req, err := ParseMessagesRequest([]byte(base + `,"tools":[{"type":"web_search_20250305","name":"web_search"}],"tool_choice":{"type":"tool","name":"web_search"}}`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := req.ToIR(); err == nil || err.Param != "tool_choice.name" {
		t.Fatalf("got %v", err)
	}
}

func TestInputBound(t *testing.T) {
	text := strings.Repeat("héllo wörld ", 100) // 1,400 bytes
	body := `{"model":"m","max_tokens":5,"system":"be brief","messages":[{"role":"user","content":[{"type":"text","text":"` + text + `"},{"type":"image","source":{"type":"url","url":"https://x/y.png"}}]},` +
		`{"role":"assistant","content":[{"type":"thinking","thinking":"hmm","signature":"s"},{"type":"tool_use","id":"t1","name":"f","input":{"path":"/a/b"}}]},` +
		`{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"result text"}]}],"tools":[{"name":"f","input_schema":{"type":"object"}}]}`
	req, err := ParseMessagesRequest([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	s := req.InputSize()
	minText := int64(len(text) + len("be brief") + len("hmm") + len(`{"path":"/a/b"}`) + len("result text"))
	if s.Messages != 4 || s.Images != 1 || s.Tools != 1 || s.TextBytes < minText {
		t.Fatalf("size %+v (min text %d)", s, minText)
	}
	if b := req.InputBound(); b < minText+formats.ImageTokens+formats.ToolsOverheadTokens {
		t.Fatalf("bound %d", b)
	}
	esc := `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"\u00e9\u00e9\u00e9\ud83d\ude00"}]}`
	req, _ = ParseMessagesRequest([]byte(esc))
	if req.InputSize().TextBytes < int64(len("ééé😀")) {
		t.Fatalf("escaped text %d", req.InputSize().TextBytes)
	}
	if e := req.InputEstimate(); e <= 0 || e > req.InputBound() {
		t.Fatalf("estimate %d", e)
	}
}
