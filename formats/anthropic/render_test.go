package anthropic

import (
	"bytes"
	"strings"
	"testing"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/modelgate/modelgate/formats"
	"github.com/modelgate/modelgate/formats/openai"
)

// fromOpenAI converts an OpenAI Chat body to the IR.
func fromOpenAI(t *testing.T, body string) *formats.Request {
	t.Helper()
	req, err := openai.ParseChatRequest([]byte(body))
	if err != nil {
		t.Fatalf("fixture: %v", err)
	}
	ir, err := req.ToIR()
	if err != nil {
		t.Fatalf("fixture: %v", err)
	}
	return ir
}

const oaiMsgs = `"messages":[{"role":"user","content":"hi"}]`

func TestRenderRejects(t *testing.T) {
	for _, tc := range []struct {
		name, body, param string
	}{
		{"n", `{"model":"m",` + oaiMsgs + `,"n":2}`, "n"},
		{"logprobs", `{"model":"m",` + oaiMsgs + `,"logprobs":true}`, "logprobs"},
		{"logit_bias", `{"model":"m",` + oaiMsgs + `,"logit_bias":{"1":5}}`, "logit_bias"},
		{"audio output", `{"model":"m",` + oaiMsgs + `,"modalities":["text","audio"]}`, "modalities"},
		{"audio input", `{"model":"m","messages":[{"role":"user","content":[{"type":"input_audio","input_audio":{"data":"UklG","format":"wav"}}]}]}`, "messages"},
		{"whitespace stop", `{"model":"m",` + oaiMsgs + `,"stop":["\n"]}`, "stop"},
		{"forced tool with thinking", `{"model":"m",` + oaiMsgs + `,"reasoning_effort":"high","max_completion_tokens":30000,"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":"required"}`, "tool_choice"},
		{"image type", `{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/bmp;base64,Qk0="}}]}]}`, "messages"},
		{"file id", `{"model":"m","messages":[{"role":"user","content":[{"type":"file","file":{"file_id":"file-1"}}]}]}`, "messages"},
		{"docx", `{"model":"m","messages":[{"role":"user","content":[{"type":"file","file":{"file_data":"data:application/msword;base64,AAAA"}}]}]}`, "messages"},
		{"array schema", `{"model":"m",` + oaiMsgs + `,"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"array"}}}]}`, "tools"},
		{"reserved tool name", `{"model":"m",` + oaiMsgs + `,"tools":[{"type":"function","function":{"name":"modelgate_json_response"}}]}`, "tools"},
		{"named tool missing", `{"model":"m",` + oaiMsgs + `,"tool_choice":{"type":"function","function":{"name":"f"}}}`, "tool_choice"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ir := fromOpenAI(t, tc.body)
			out, err := RenderMessagesRequest(ir, "claude")
			if err == nil {
				t.Fatalf("accepted: %s", out)
			}
			if err.Kind != formats.KindInvalidRequest || err.Param != tc.param {
				t.Fatalf("got %+v", err)
			}
		})
	}
}

func TestRenderRules(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		structured bool
		want       []string // substrings of the rendered body
		not        []string
		dropped    string
	}{
		{"temperature clamp and top_p", `{"model":"m",` + oaiMsgs + `,"temperature":1.7,"top_p":0.5}`, false,
			[]string{`"temperature":1`}, []string{`"top_p"`}, "top_p"},
		{"top_p alone", `{"model":"m",` + oaiMsgs + `,"top_p":0.5}`, false, []string{`"top_p":0.5`}, nil, ""},
		{"effort to budget", `{"model":"m",` + oaiMsgs + `,"reasoning_effort":"medium","max_completion_tokens":20000,"temperature":0.3,"top_p":0.97}`, false,
			[]string{`"thinking":{"type":"enabled","budget_tokens":8192}`, `"top_p":0.97`}, []string{`"temperature"`}, "temperature"},
		{"budget capped", `{"model":"m",` + oaiMsgs + `,"reasoning_effort":"high","max_completion_tokens":5000}`, false,
			[]string{`"budget_tokens":4999`, `"max_tokens":5000`}, nil, ""},
		{"effort too small", `{"model":"m",` + oaiMsgs + `,"reasoning_effort":"low","max_completion_tokens":1000}`, false,
			nil, []string{`"thinking"`}, "reasoning_effort"},
		{"effort minimal", `{"model":"m",` + oaiMsgs + `,"reasoning_effort":"minimal"}`, false, []string{`"max_tokens":4096`}, []string{`"thinking"`}, ""},
		{"json_object", `{"model":"m",` + oaiMsgs + `,"response_format":{"type":"json_object"}}`, false,
			[]string{`"system":"Respond only with a JSON object."`}, nil, ""},
		{"json_schema non-object", `{"model":"m",` + oaiMsgs + `,"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":{"type":"array"}}}}`, false,
			[]string{`Respond only with JSON that matches this JSON Schema: {\"type\":\"array\"}`}, []string{`"tools"`}, ""},
		{"json_schema tool alone", `{"model":"m",` + oaiMsgs + `,"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":{"type":"object"}}}}`, false,
			[]string{`"tool_choice":{"type":"tool","name":"modelgate_json_response"}`}, nil, ""},
		{"json_schema native", `{"model":"m",` + oaiMsgs + `,"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":{"type":"object"}}}}`, true,
			[]string{`"output_config":{"format":{"type":"json_schema","schema":{"type":"object"}}}`}, []string{`"tools"`}, ""},
		{"parallel false alone", `{"model":"m",` + oaiMsgs + `,"tools":[{"type":"function","function":{"name":"f"}}],"parallel_tool_calls":false}`, false,
			[]string{`"tool_choice":{"type":"auto","disable_parallel_tool_use":true}`}, nil, ""},
		{"tool choice none", `{"model":"m",` + oaiMsgs + `,"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":"none"}`, false,
			[]string{`"tool_choice":{"type":"none"}`}, nil, ""},
		{"named", `{"model":"m",` + oaiMsgs + `,"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":{"type":"function","function":{"name":"f"}},"parallel_tool_calls":false}`, false,
			[]string{`"tool_choice":{"type":"tool","name":"f","disable_parallel_tool_use":true}`}, nil, ""},
		{"allowed required", `{"model":"m",` + oaiMsgs + `,"tools":[{"type":"function","function":{"name":"f"}},{"type":"function","function":{"name":"g"}}],"tool_choice":{"type":"allowed_tools","allowed_tools":{"mode":"required","tools":[{"type":"function","function":{"name":"g"}}]}}}`, false,
			[]string{`"tools":[{"name":"g"`, `"tool_choice":{"type":"any"}`}, []string{`"name":"f"`}, ""},
		{"empty stop dropped", `{"model":"m",` + oaiMsgs + `,"stop":""}`, false, nil, []string{`"stop_sequences"`}, ""},
		{"stream", `{"model":"m",` + oaiMsgs + `,"stream":true,"stream_options":{"include_usage":false}}`, false, []string{`"stream":true`}, nil, ""},
		{"prefill only whitespace", `{"model":"m","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"  "}]}`, false,
			[]string{`"messages":[{"role":"user","content":"hi"}]`}, nil, ""},
		{"name dropped", `{"model":"m","messages":[{"role":"user","name":"ann","content":"hi"}]}`, false, nil, []string{"ann"}, "name"},
		{"tool message before user text", `{"model":"m","messages":[{"role":"user","content":"q"},{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"user","content":"extra"},{"role":"tool","tool_call_id":"c1","content":"r"}]}`, false,
			[]string{`{"role":"user","content":[{"type":"tool_result","tool_use_id":"c1","content":"r"},{"type":"text","text":"extra"}]}`}, nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ir := fromOpenAI(t, tc.body)
			ir.StructuredOutputs = tc.structured
			out, err := RenderMessagesRequest(ir, "claude")
			if err != nil {
				t.Fatal(err)
			}
			if !jsontext.Value(out).IsValid() {
				t.Fatalf("invalid %s", out)
			}
			if _, err := ParseMessagesRequest(out); err != nil {
				t.Fatalf("rejected: %v\n%s", err, out)
			}
			for _, w := range tc.want {
				if !bytes.Contains(out, []byte(w)) {
					t.Errorf("missing %s in %s", w, out)
				}
			}
			for _, w := range tc.not {
				if bytes.Contains(out, []byte(w)) {
					t.Errorf("unexpected %s in %s", w, out)
				}
			}
			if got := ir.DroppedHeader(); got != tc.dropped {
				t.Errorf("dropped %q, want %q", got, tc.dropped)
			}
		})
	}
}

func TestSanitizeToolID(t *testing.T) {
	for in, want := range map[string]string{
		"toolu_01A":   "toolu_01A",
		"call.a/1":    "call_a_1",
		"":            "toolu_",
		"fc-é":        "fc-__",
		"models/x:3.": "models_x_3_",
	} {
		if got := SanitizeToolID(in); got != want || !validID(got) {
			t.Errorf("%q: %q", in, got)
		}
	}
}

// TestGeminiStyleIR: calls without ids (Gemini) get deterministic ids that
// their results share.
func TestGeminiStyleIR(t *testing.T) {
	ir := &formats.Request{MaxTokens: 100, Messages: []formats.Message{
		{Role: formats.RoleUser, Parts: []formats.Part{{Type: formats.PartText, Text: "q"}}},
		{Role: formats.RoleAssistant, Parts: []formats.Part{{Type: formats.PartToolCall, ToolCall: &formats.ToolCall{Name: "f", Arguments: `{"a":1}`}}}},
		{Role: formats.RoleTool, Parts: []formats.Part{{Type: formats.PartToolResult, ToolResult: &formats.ToolResult{Name: "f", Parts: []formats.Part{{Type: formats.PartText, Text: "r"}}}}}},
	}, Tools: []formats.Tool{{Name: "f"}}, Reasoning: &formats.Reasoning{Budget: -1}}
	out, err := RenderMessagesRequest(ir, "claude")
	if err != nil {
		t.Fatal(err)
	}
	s := string(out)
	if strings.Count(s, `"toolu_1_0"`) != 2 {
		t.Fatalf("ids: %s", s)
	}
	if strings.Contains(s, `"thinking"`) { // budget 8192 > max_tokens − 1: off
		t.Fatalf("thinking kept: %s", s)
	}
}
