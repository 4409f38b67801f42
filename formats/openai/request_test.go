package openai

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/modelgate/modelgate/formats"
)

// msgs is a valid messages array for the table below.
const msgs = `"messages":[{"role":"user","content":"hi"}]`

func TestParseChatRequestInvalid(t *testing.T) {
	for _, tc := range []struct {
		name, body, param, code string
	}{
		// the body
		{"not json", `{"model":`, "", "invalid_json"},
		{"trailing data", `{"model":"m",` + msgs + `} x`, "", "invalid_json"},
		{"invalid utf8", "{\"model\":\"m\xff\"," + msgs + "}", "", "invalid_json"},
		{"duplicate key", `{"model":"a","model":"b",` + msgs + `}`, "model", "invalid_json"},
		{"not an object", `[1,2]`, "", "invalid_type"},
		{"null body", `null`, "", "invalid_type"},
		// model
		{"model missing", `{` + msgs + `}`, "model", "missing_required_parameter"},
		{"model missing, bad messages and tools", `{"messages":[{"role":"user","content":[{"type":"x"}]}],"tools":[{"type":"function","function":{}}]}`, "model", "missing_required_parameter"},
		{"bad messages before bad tools", `{"model":"m","tools":[{"type":"function","function":{}}],"messages":[{"role":"user","content":[{"type":"x"}]}],"temperature":9}`, "messages[0].content[0].type", "invalid_value"},
		{"bad tools after temperature", `{"model":"m","tools":[{"type":"function","function":{}}],` + msgs + `,"temperature":9}`, "temperature", "decimal_above_max_value"},
		{"model number", `{"model":4,` + msgs + `}`, "model", "invalid_type"},
		{"model null", `{"model":null,` + msgs + `}`, "model", "invalid_type"},
		{"model empty", `{"model":"",` + msgs + `}`, "model", "invalid_value"},
		// messages
		{"messages missing", `{"model":"m"}`, "messages", "missing_required_parameter"},
		{"messages object", `{"model":"m","messages":{}}`, "messages", "invalid_type"},
		{"messages empty", `{"model":"m","messages":[]}`, "messages", "empty_array"},
		{"message not object", `{"model":"m","messages":["hi"]}`, "messages[0]", "invalid_type"},
		{"role missing", `{"model":"m","messages":[{"content":"hi"}]}`, "messages[0].role", "missing_required_parameter"},
		{"role number", `{"model":"m","messages":[{"role":1,"content":"hi"}]}`, "messages[0].role", "invalid_type"},
		{"role unknown", `{"model":"m","messages":[{"role":"user","content":"a"},{"role":"robot","content":"hi"}]}`, "messages[1].role", "invalid_value"},
		{"content missing", `{"model":"m","messages":[{"role":"user"}]}`, "messages[0].content", "missing_required_parameter"},
		{"content number", `{"model":"m","messages":[{"role":"user","content":5}]}`, "messages[0].content", "invalid_type"},
		{"content null user", `{"model":"m","messages":[{"role":"user","content":null}]}`, "messages[0].content", "invalid_type"},
		{"content empty array", `{"model":"m","messages":[{"role":"user","content":[]}]}`, "messages[0].content", "empty_array"},
		{"part not object", `{"model":"m","messages":[{"role":"user","content":["hi"]}]}`, "messages[0].content[0]", "invalid_type"},
		{"part type missing", `{"model":"m","messages":[{"role":"user","content":[{"text":"hi"}]}]}`, "messages[0].content[0].type", "missing_required_parameter"},
		{"part type unknown", `{"model":"m","messages":[{"role":"user","content":[{"type":"video","text":"hi"}]}]}`, "messages[0].content[0].type", "invalid_value"},
		{"part text missing", `{"model":"m","messages":[{"role":"user","content":[{"type":"text"}]}]}`, "messages[0].content[0].text", "missing_required_parameter"},
		{"part text number", `{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":1}]}]}`, "messages[0].content[0].text", "invalid_type"},
		{"image in system", `{"model":"m","messages":[{"role":"system","content":[{"type":"image_url","image_url":{"url":"https://x"}}]}]}`, "messages[0].content[0].type", "invalid_value"},
		{"image in assistant", `{"model":"m","messages":[{"role":"assistant","content":[{"type":"image_url","image_url":{"url":"https://x"}}]}]}`, "messages[0].content[0].type", "invalid_value"},
		{"refusal in user", `{"model":"m","messages":[{"role":"user","content":[{"type":"refusal","refusal":"no"}]}]}`, "messages[0].content[0].type", "invalid_value"},
		{"image_url missing", `{"model":"m","messages":[{"role":"user","content":[{"type":"image_url"}]}]}`, "messages[0].content[0].image_url", "missing_required_parameter"},
		{"image_url string", `{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":"https://x"}]}]}`, "messages[0].content[0].image_url", "invalid_type"},
		{"image url missing", `{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{}}]}]}`, "messages[0].content[0].image_url.url", "missing_required_parameter"},
		{"image detail", `{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"https://x","detail":"ultra"}}]}]}`, "messages[0].content[0].image_url.detail", "invalid_value"},
		{"audio format", `{"model":"m","messages":[{"role":"user","content":[{"type":"input_audio","input_audio":{"data":"AAA","format":"ogg"}}]}]}`, "messages[0].content[0].input_audio.format", "invalid_value"},
		{"audio data", `{"model":"m","messages":[{"role":"user","content":[{"type":"input_audio","input_audio":{"format":"wav"}}]}]}`, "messages[0].content[0].input_audio.data", "missing_required_parameter"},
		{"file empty", `{"model":"m","messages":[{"role":"user","content":[{"type":"file","file":{"filename":"a.pdf"}}]}]}`, "messages[0].content[0].file.file_data", "missing_required_parameter"},
		{"file id number", `{"model":"m","messages":[{"role":"user","content":[{"type":"file","file":{"file_id":1}}]}]}`, "messages[0].content[0].file.file_id", "invalid_type"},
		{"name number", `{"model":"m","messages":[{"role":"user","content":"hi","name":3}]}`, "messages[0].name", "invalid_type"},
		{"assistant null no calls", `{"model":"m","messages":[{"role":"assistant","content":null}]}`, "messages[0].content", "invalid_type"},
		{"assistant missing content", `{"model":"m","messages":[{"role":"assistant"}]}`, "messages[0].content", "missing_required_parameter"},
		{"tool_calls object", `{"model":"m","messages":[{"role":"assistant","tool_calls":{}}]}`, "messages[0].tool_calls", "invalid_type"},
		{"tool call id missing", `{"model":"m","messages":[{"role":"assistant","tool_calls":[{"type":"function","function":{"name":"f","arguments":"{}"}}]}]}`, "messages[0].tool_calls[0].id", "missing_required_parameter"},
		{"tool call type", `{"model":"m","messages":[{"role":"assistant","tool_calls":[{"id":"c","type":"fn","function":{"name":"f","arguments":"{}"}}]}]}`, "messages[0].tool_calls[0].type", "invalid_value"},
		{"tool call args object", `{"model":"m","messages":[{"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":{}}}]}]}`, "messages[0].tool_calls[0].function.arguments", "invalid_type"},
		{"tool call name missing", `{"model":"m","messages":[{"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"arguments":"{}"}}]}]}`, "messages[0].tool_calls[0].function.name", "missing_required_parameter"},
		{"tool without id", `{"model":"m","messages":[{"role":"tool","content":"x"}]}`, "messages[0].tool_call_id", "missing_required_parameter"},
		{"tool id number", `{"model":"m","messages":[{"role":"tool","content":"x","tool_call_id":7}]}`, "messages[0].tool_call_id", "invalid_type"},
		{"tool content image", `{"model":"m","messages":[{"role":"tool","tool_call_id":"c","content":[{"type":"image_url","image_url":{"url":"u"}}]}]}`, "messages[0].content[0].type", "invalid_value"},
		{"function without name", `{"model":"m","messages":[{"role":"function","content":"x"}]}`, "messages[0].name", "missing_required_parameter"},
		{"refusal number", `{"model":"m","messages":[{"role":"assistant","content":"x","refusal":1}]}`, "messages[0].refusal", "invalid_type"},
		// sampling
		{"temperature string", `{"model":"m",` + msgs + `,"temperature":"hot"}`, "temperature", "invalid_type"},
		{"temperature high", `{"model":"m",` + msgs + `,"temperature":2.5}`, "temperature", "decimal_above_max_value"},
		{"temperature low", `{"model":"m",` + msgs + `,"temperature":-0.1}`, "temperature", "decimal_below_min_value"},
		{"top_p high", `{"model":"m",` + msgs + `,"top_p":1.01}`, "top_p", "decimal_above_max_value"},
		{"top_p bool", `{"model":"m",` + msgs + `,"top_p":true}`, "top_p", "invalid_type"},
		{"presence low", `{"model":"m",` + msgs + `,"presence_penalty":-3}`, "presence_penalty", "decimal_below_min_value"},
		{"frequency high", `{"model":"m",` + msgs + `,"frequency_penalty":2.01}`, "frequency_penalty", "decimal_above_max_value"},
		{"max_tokens zero", `{"model":"m",` + msgs + `,"max_tokens":0}`, "max_tokens", "integer_below_min_value"},
		{"max_tokens float", `{"model":"m",` + msgs + `,"max_tokens":10.5}`, "max_tokens", "invalid_type"},
		{"max_tokens string", `{"model":"m",` + msgs + `,"max_tokens":"10"}`, "max_tokens", "invalid_type"},
		{"max_completion_tokens negative", `{"model":"m",` + msgs + `,"max_completion_tokens":-1}`, "max_completion_tokens", "integer_below_min_value"},
		{"n zero", `{"model":"m",` + msgs + `,"n":0}`, "n", "integer_below_min_value"},
		{"n string", `{"model":"m",` + msgs + `,"n":"2"}`, "n", "invalid_type"},
		{"seed float", `{"model":"m",` + msgs + `,"seed":1.5}`, "seed", "invalid_type"},
		{"stream string", `{"model":"m",` + msgs + `,"stream":"yes"}`, "stream", "invalid_type"},
		{"stream_options without stream", `{"model":"m",` + msgs + `,"stream_options":{"include_usage":true}}`, "stream_options", "invalid_value"},
		{"stream_options with stream false", `{"model":"m",` + msgs + `,"stream":false,"stream_options":{"include_usage":true}}`, "stream_options", "invalid_value"},
		{"stream_options array", `{"model":"m",` + msgs + `,"stream":true,"stream_options":[]}`, "stream_options", "invalid_type"},
		{"include_usage string", `{"model":"m",` + msgs + `,"stream":true,"stream_options":{"include_usage":"yes"}}`, "stream_options.include_usage", "invalid_type"},
		{"stop number", `{"model":"m",` + msgs + `,"stop":5}`, "stop", "invalid_type"},
		{"stop too many", `{"model":"m",` + msgs + `,"stop":["a","b","c","d","e"]}`, "stop", "array_above_max_length"},
		{"stop element", `{"model":"m",` + msgs + `,"stop":["a",1]}`, "stop[1]", "invalid_type"},
		{"logprobs string", `{"model":"m",` + msgs + `,"logprobs":"true"}`, "logprobs", "invalid_type"},
		{"top_logprobs range", `{"model":"m",` + msgs + `,"logprobs":true,"top_logprobs":21}`, "top_logprobs", "integer_above_max_value"},
		{"top_logprobs alone", `{"model":"m",` + msgs + `,"top_logprobs":2}`, "top_logprobs", "invalid_value"},
		{"logit_bias range", `{"model":"m",` + msgs + `,"logit_bias":{"50256":-101}}`, "logit_bias.50256", "decimal_below_min_value"},
		{"metadata value", `{"model":"m",` + msgs + `,"metadata":{"k":1}}`, "metadata.k", "invalid_type"},
		{"user number", `{"model":"m",` + msgs + `,"user":1}`, "user", "invalid_type"},
		{"store string", `{"model":"m",` + msgs + `,"store":"no"}`, "store", "invalid_type"},
		{"reasoning_effort number", `{"model":"m",` + msgs + `,"reasoning_effort":1}`, "reasoning_effort", "invalid_type"},
		{"modalities value", `{"model":"m",` + msgs + `,"modalities":["video"]}`, "modalities[0]", "invalid_value"},
		// tools
		{"tools object", `{"model":"m",` + msgs + `,"tools":{}}`, "tools", "invalid_type"},
		{"tool not object", `{"model":"m",` + msgs + `,"tools":[1]}`, "tools[0]", "invalid_type"},
		{"tool type missing", `{"model":"m",` + msgs + `,"tools":[{"function":{"name":"f"}}]}`, "tools[0].type", "missing_required_parameter"},
		{"tool type unknown", `{"model":"m",` + msgs + `,"tools":[{"type":"web_search"}]}`, "tools[0].type", "invalid_value"},
		{"tool function missing", `{"model":"m",` + msgs + `,"tools":[{"type":"function"}]}`, "tools[0].function", "missing_required_parameter"},
		{"tool name missing", `{"model":"m",` + msgs + `,"tools":[{"type":"function","function":{}}]}`, "tools[0].function.name", "missing_required_parameter"},
		{"tool name pattern", `{"model":"m",` + msgs + `,"tools":[{"type":"function","function":{"name":"get weather"}}]}`, "tools[0].function.name", "invalid_value"},
		{"tool name too long", `{"model":"m",` + msgs + `,"tools":[{"type":"function","function":{"name":"` + strings.Repeat("a", 65) + `"}}]}`, "tools[0].function.name", "invalid_value"},
		{"tool parameters array", `{"model":"m",` + msgs + `,"tools":[{"type":"function","function":{"name":"f","parameters":[]}}]}`, "tools[0].function.parameters", "invalid_type"},
		{"tool strict string", `{"model":"m",` + msgs + `,"tools":[{"type":"function","function":{"name":"f","strict":"yes"}}]}`, "tools[0].function.strict", "invalid_type"},
		{"tool description number", `{"model":"m",` + msgs + `,"tools":[{"type":"function","function":{"name":"f","description":1}}]}`, "tools[0].function.description", "invalid_type"},
		{"tool_choice value", `{"model":"m",` + msgs + `,"tool_choice":"any"}`, "tool_choice", "invalid_value"},
		{"tool_choice number", `{"model":"m",` + msgs + `,"tool_choice":1}`, "tool_choice", "invalid_type"},
		{"tool_choice type", `{"model":"m",` + msgs + `,"tool_choice":{"type":"tool","name":"f"}}`, "tool_choice.type", "invalid_value"},
		{"tool_choice function name", `{"model":"m",` + msgs + `,"tool_choice":{"type":"function","function":{}}}`, "tool_choice.function.name", "missing_required_parameter"},
		{"allowed_tools mode", `{"model":"m",` + msgs + `,"tool_choice":{"type":"allowed_tools","allowed_tools":{"mode":"any","tools":[]}}}`, "tool_choice.allowed_tools.mode", "invalid_value"},
		{"allowed_tools tools", `{"model":"m",` + msgs + `,"tool_choice":{"type":"allowed_tools","allowed_tools":{"mode":"auto","tools":[{"type":"function","function":{}}]}}}`, "tool_choice.allowed_tools.tools[0].function.name", "missing_required_parameter"},
		{"parallel string", `{"model":"m",` + msgs + `,"parallel_tool_calls":"no"}`, "parallel_tool_calls", "invalid_type"},
		// response_format
		{"response_format string", `{"model":"m",` + msgs + `,"response_format":"json"}`, "response_format", "invalid_type"},
		{"response_format type", `{"model":"m",` + msgs + `,"response_format":{"type":"xml"}}`, "response_format.type", "invalid_value"},
		{"response_format type missing", `{"model":"m",` + msgs + `,"response_format":{}}`, "response_format.type", "missing_required_parameter"},
		{"json_schema missing", `{"model":"m",` + msgs + `,"response_format":{"type":"json_schema"}}`, "response_format.json_schema", "missing_required_parameter"},
		{"json_schema name", `{"model":"m",` + msgs + `,"response_format":{"type":"json_schema","json_schema":{"schema":{}}}}`, "response_format.json_schema.name", "missing_required_parameter"},
		{"json_schema schema", `{"model":"m",` + msgs + `,"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":"{}"}}}`, "response_format.json_schema.schema", "invalid_type"},
		{"json_schema strict", `{"model":"m",` + msgs + `,"response_format":{"type":"json_schema","json_schema":{"name":"x","strict":1}}}`, "response_format.json_schema.strict", "invalid_type"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := ParseChatRequest([]byte(tc.body))
			if err == nil {
				t.Fatalf("accepted: %+v", req)
			}
			if err.Status() != 400 || err.Kind != formats.KindInvalidRequest {
				t.Fatalf("status %d", err.Status())
			}
			if err.Param != tc.param || err.Code != tc.code {
				t.Fatalf("param %q code %q, want %q %q (%s)", err.Param, err.Code, tc.param, tc.code, err.Message)
			}
			if err.Message == "" {
				t.Fatal("no message")
			}
		})
	}
}

func TestParseChatRequestMessages(t *testing.T) {
	// a few exact messages, OpenAI's wording
	for body, want := range map[string]string{
		`{"model":"m",` + msgs + `,"temperature":3}`:   "Invalid 'temperature': decimal above maximum value. Expected a value <= 2, but got 3 instead.",
		`{"model":"m",` + msgs + `,"temperature":"x"}`: "Invalid type for 'temperature': expected a decimal, but got a string instead.",
		`{"model":"m"}`: "Missing required parameter: 'messages'.",
		`{"model":"m","messages":[{"role":"bot","content":"x"}]}`: "Invalid value: 'bot'. Supported values are: 'system', 'assistant', 'user', 'function', 'tool', and 'developer'.",
		`{"model":"m",` + msgs + `,"stream_options":{}}`:          "The 'stream_options' parameter is only allowed when 'stream' is enabled.",
	} {
		_, err := ParseChatRequest([]byte(body))
		if err == nil || err.Message != want {
			t.Errorf("%s:\n got %v\nwant %s", body, err, want)
		}
	}
}

func TestParseChatRequestValid(t *testing.T) {
	for _, tc := range []struct {
		name, body   string
		stream, incl bool
		max          int
		maxOK        bool
		n            int
	}{
		{"minimal", `{"model":"m",` + msgs + `}`, false, false, 0, false, 1},
		{"nulls are absent", `{"model":"m",` + msgs + `,"temperature":null,"top_p":null,"max_tokens":null,"stream":null,"stream_options":null,"stop":null,"tools":null,"tool_choice":null,"n":null,"user":null,"response_format":null,"seed":null}`, false, false, 0, false, 1},
		{"both caps prefer completion", `{"model":"m",` + msgs + `,"max_tokens":10,"max_completion_tokens":20}`, false, false, 20, true, 1},
		{"max_tokens", `{"model":"m",` + msgs + `,"max_tokens":10}`, false, false, 10, true, 1},
		{"integer-valued float", `{"model":"m",` + msgs + `,"max_tokens":1e3}`, false, false, 1000, true, 1},
		{"stream with usage", `{"model":"m",` + msgs + `,"stream":true,"stream_options":{"include_usage":true,"include_obfuscation":false}}`, true, true, 0, false, 1},
		{"stream without usage", `{"model":"m",` + msgs + `,"stream":true,"stream_options":{"include_usage":false}}`, true, false, 0, false, 1},
		{"n", `{"model":"m",` + msgs + `,"n":3}`, false, false, 0, false, 3},
		{"unknown fields", `{"model":"m",` + msgs + `,"x_vendor":{"a":[1]},"prediction":{"type":"content","content":"x"}}`, false, false, 0, false, 1},
		{"escaped names", `{"m\u006fdel":"m","messages":[{"r\u006fle":"user","content":"hi"}]}`, false, false, 0, false, 1},
		{"every role", `{"model":"m","messages":[
			{"role":"developer","content":[{"type":"text","text":"dev"}]},
			{"role":"system","content":"sys","name":"s"},
			{"role":"user","content":[{"type":"text","text":"look"},{"type":"image_url","image_url":{"url":"data:image/png;base64,iVBOR","detail":"high"}},{"type":"input_audio","input_audio":{"data":"UklGR","format":"wav"}},{"type":"file","file":{"file_data":"data:application/pdf;base64,JVBER","filename":"a.pdf"}},{"type":"file","file":{"file_id":"file-1"}}]},
			{"role":"assistant","content":[{"type":"text","text":"ok"},{"type":"refusal","refusal":"no"}]},
			{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}},{"id":"c2","type":"custom","custom":{"name":"g","input":"x"}}]},
			{"role":"tool","tool_call_id":"c1","content":[{"type":"text","text":"r"}]},
			{"role":"assistant","refusal":"nope"},
			{"role":"assistant","function_call":{"name":"f","arguments":"{}"}},
			{"role":"function","name":"f","content":null}
		],"tools":[{"type":"function","function":{"name":"f","description":"d","parameters":{"type":"object"},"strict":true}},{"type":"custom","custom":{"name":"g"}}],
		"tool_choice":{"type":"allowed_tools","allowed_tools":{"mode":"required","tools":[{"type":"function","function":{"name":"f"}}]}},
		"response_format":{"type":"json_schema","json_schema":{"name":"out","schema":{"type":"object"},"strict":true}},
		"stop":["a","b","c","d"],"logprobs":true,"top_logprobs":3,"logit_bias":{"1":5},"metadata":{"k":"v"},"modalities":["text"],
		"functions":[{"name":"h"}],"function_call":"auto","reasoning_effort":"low","seed":42}`, false, false, 0, false, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := ParseChatRequest([]byte(tc.body))
			if err != nil {
				t.Fatalf("rejected: %v", err)
			}
			if req.Model != "m" || req.Stream != tc.stream || req.IncludeUsage != tc.incl || req.N != tc.n {
				t.Fatalf("got %+v", req)
			}
			if n, ok := req.MaxTokens(); n != tc.max || ok != tc.maxOK {
				t.Fatalf("MaxTokens = %d %v", n, ok)
			}
			if tc.name == "every role" && req.InputBound() < int64(len(tc.body)) {
				t.Fatalf("bound %d too small for %d bytes", req.InputBound(), len(tc.body))
			}
		})
	}
}

func TestInputBound(t *testing.T) {
	text := strings.Repeat("héllo wörld ", 100) // 1,400 bytes
	body := `{"model":"m","messages":[{"role":"system","content":"be brief"},{"role":"user","content":[{"type":"text","text":"` + text + `"},{"type":"image_url","image_url":{"url":"https://x/y.png"}}]}],"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}]}`
	req, err := ParseChatRequest([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	s := req.InputSize()
	if s.Messages != 2 || s.Images != 1 || s.Tools != 1 || s.TextBytes < int64(len(text)+len("be brief")) {
		t.Fatalf("size %+v", s)
	}
	// the bound is never below the text's UTF-8 bytes plus the allowances
	min := int64(len(text)+len("be brief")) + formats.ImageTokens
	if b := req.InputBound(); b < min {
		t.Fatalf("bound %d < %d", b, min)
	}
	// escaped text counts at least its decoded bytes
	esc := `{"model":"m","messages":[{"role":"user","content":"\u00e9\u00e9\u00e9\ud83d\ude00"}]}`
	req, _ = ParseChatRequest([]byte(esc))
	if req.InputSize().TextBytes < int64(len("ééé😀")) {
		t.Fatalf("escaped text %d", req.InputSize().TextBytes)
	}
	if e := req.InputEstimate(); e <= 0 || e > req.InputBound() {
		t.Fatalf("estimate %d", e)
	}
}

func TestLongUserIDIsHashed(t *testing.T) {
	long := strings.Repeat("user_3f2a_account__session_9c1e", 5)
	for user, want := range map[string]string{
		"alice": `"safety_identifier":"alice"`,
		long:    `"safety_identifier":"sha256-`,
	} {
		b, ferr := RenderChatRequest(&formats.Request{User: user, MaxTokens: 5,
			Messages: []formats.Message{{Role: formats.RoleUser, Parts: []formats.Part{{Type: formats.PartText, Text: "hi"}}}}}, "m")
		if ferr != nil || !strings.Contains(string(b), want) {
			t.Fatalf("%s: %s %v", user, b, ferr)
		}
		var v struct {
			SafetyIdentifier string `json:"safety_identifier"`
		}
		if err := json.Unmarshal(b, &v); err != nil || len(v.SafetyIdentifier) > 64 {
			t.Fatalf("%s: %q", user, v.SafetyIdentifier)
		}
	}
}
