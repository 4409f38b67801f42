package responses

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/modelgate/modelgate/formats"
	"github.com/modelgate/modelgate/internal/openaispec"
)

// specError is why v is not an instance of the named schema of OpenAI's
// published description ("" when it is; see internal/openaispec).
func specError(t *testing.T, schema string, v []byte) string {
	t.Helper()
	return openaispec.Problem(schema, v)
}

// checkSpec fails the test when v is not an instance of the named schema.
func checkSpec(t *testing.T, schema string, v []byte) {
	t.Helper()
	if msg := specError(t, schema, v); msg != "" {
		t.Errorf("not a valid %s: %s\n%s", schema, msg, v)
	}
}

// TestSpecValidatorRejects shows that the validator catches what the spec
// forbids, so that the tests below can fail.
func TestSpecValidatorRejects(t *testing.T) {
	for _, tc := range []struct{ schema, v string }{
		{"ResponseUsage", `{"input_tokens":1,"input_tokens_details":{"cached_tokens":0},"output_tokens":1,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":2}`},
		{"FunctionTool", `{"type":"function","name":"f","parameters":null}`},
		{"ResponseStreamEvent", `{"type":"response.output_text.delta","sequence_number":1,"item_id":"msg_1","output_index":0,"content_index":0,"delta":"x"}`},
		{"Response", `{"id":"resp_1","object":"response"}`},
	} {
		if specError(t, tc.schema, []byte(tc.v)) == "" {
			t.Errorf("%s accepted %s", tc.schema, tc.v)
		}
	}
	checkSpec(t, "FunctionTool", []byte(`{"type":"function","name":"f","parameters":null,"strict":null}`))
}

// specRequest is a request whose settings a Responses object echoes:
// function tools with and without strict, parameters and description, a
// namespace, and tools only OpenAI runs (echoed as the client sent them).
const specRequest = `{"model":"m","instructions":"Be brief.","input":"hi","max_output_tokens":500,
"temperature":0.5,"metadata":{"k":"v"},
"tools":[{"type":"function","name":"shell","parameters":{"type":"object","properties":{"command":{"type":"string"}}}},
{"type":"function","name":"now","description":"The time.","strict":true,"parameters":{"type":"object","properties":{},"additionalProperties":false}},
{"type":"function","name":"bare"},
{"type":"namespace","name":"mcp__files","description":"Files","tools":[{"type":"function","name":"read","parameters":{"type":"object","properties":{"path":{"type":"string"}}}}]},
{"type":"web_search"},{"type":"custom","name":"apply_patch"}]}`

func parseSpecRequest(t *testing.T) *Request {
	t.Helper()
	req, ferr := ParseRequest([]byte(specRequest))
	if ferr != nil {
		t.Fatal(ferr)
	}
	return req
}

// specUsage has every bucket, a cache write among them.
var specUsage = formats.Usage{Input: 120, CacheRead: 100, CacheWrite: 10, Output: 30, Reasoning: 8}

// TestSpecRender validates the answers Render builds for a Responses
// client on a model of another format.
func TestSpecRender(t *testing.T) {
	call := func(id, name, args string) formats.Part {
		return formats.Part{Type: formats.PartToolCall, ToolCall: &formats.ToolCall{ID: id, Name: name, Arguments: args}}
	}
	text := formats.Part{Type: formats.PartText, Text: "Hello."}
	for _, tc := range []struct {
		name string
		resp formats.Response
		req  bool
	}{
		{"text", formats.Response{Content: []formats.Part{text}, Stop: formats.StopEnd, Usage: specUsage, HasUsage: true}, false},
		{"echoed request", formats.Response{Content: []formats.Part{text}, Stop: formats.StopEnd, Usage: specUsage, HasUsage: true}, true},
		{"tool calls", formats.Response{Content: []formats.Part{text, call("toolu_1", "mcp__files__read", `{"path":"a"}`), call("", "shell", `{}`)},
			Stop: formats.StopToolUse, Usage: specUsage, HasUsage: true}, true},
		{"reasoning", formats.Response{Content: []formats.Part{{Type: formats.PartThinking, Text: "hmm", Signature: "sig"}, text},
			Stop: formats.StopEnd, Usage: specUsage, HasUsage: true}, true},
		{"refusal", formats.Response{Content: []formats.Part{{Type: formats.PartRefusal, Text: "I can't help with that."}},
			Stop: formats.StopContentFilter, Usage: specUsage, HasUsage: true}, false},
		{"incomplete", formats.Response{Content: []formats.Part{text}, Stop: formats.StopLength, Usage: specUsage, HasUsage: true}, true},
		{"no usage", formats.Response{Content: []formats.Part{text}, Stop: formats.StopEnd}, false},
		{"empty", formats.Response{Stop: formats.StopEnd, HasUsage: true}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var req *Request
			if tc.req {
				req = parseSpecRequest(t)
			}
			checkSpec(t, "Response", Render(nil, &tc.resp, "svc-model", req))
		})
	}
}

// sseEvent is one event of a Responses stream.
type sseEvent struct {
	name string
	data []byte
}

// splitEvents reads the events of a Responses stream, failing the test on
// any other framing.
func splitEvents(t *testing.T, stream []byte) []sseEvent {
	t.Helper()
	var evs []sseEvent
	for _, block := range strings.Split(strings.TrimSuffix(string(stream), "\n\n"), "\n\n") {
		name, data, ok := strings.Cut(block, "\n")
		if !ok || !strings.HasPrefix(name, "event: ") || !strings.HasPrefix(data, "data: ") || strings.Contains(data, "\n") {
			t.Fatalf("malformed event %q in\n%s", block, stream)
		}
		evs = append(evs, sseEvent{name: strings.TrimPrefix(name, "event: "), data: []byte(strings.TrimPrefix(data, "data: "))})
	}
	return evs
}

// checkStream validates every event of a stream, its type against its
// event name, and its sequence numbers, which count up from first.
func checkStream(t *testing.T, stream []byte, first int64) []string {
	t.Helper()
	var names []string
	for i, ev := range splitEvents(t, stream) {
		if msg := specError(t, "event: "+ev.name, ev.data); msg != "" {
			t.Errorf("not a valid %s event: %s\n%s", ev.name, msg, ev.data)
		} else {
			checkSpec(t, "ResponseStreamEvent", ev.data)
		}
		var head struct {
			Type     string `json:"type"`
			Sequence int64  `json:"sequence_number"`
		}
		if err := json.Unmarshal(ev.data, &head); err != nil {
			t.Fatal(err)
		}
		if head.Type != ev.name {
			t.Errorf("event %q carries type %q", ev.name, head.Type)
		}
		if head.Sequence != first+int64(i) {
			t.Errorf("event %d (%s) has sequence_number %d, want %d", i, ev.name, head.Sequence, first+int64(i))
		}
		names = append(names, ev.name)
	}
	return names
}

// TestSpecStream validates every event the encoder writes for IR streams
// of each kind, and the error events that end a broken stream.
func TestSpecStream(t *testing.T) {
	start := formats.Event{Type: formats.EventStart, ID: "up-1", Model: "up", Created: 1735689600}
	text := func(s string) formats.Event { return formats.Event{Type: formats.EventText, Delta: []byte(s)} }
	finish := func(s formats.StopReason) formats.Event { return formats.Event{Type: formats.EventFinish, Stop: s} }
	usage := formats.Event{Type: formats.EventUsage, Usage: specUsage, HasUsage: true, Final: true}
	end := formats.Event{Type: formats.EventEnd}
	tool := func(k int, id, name, args string) []formats.Event {
		return []formats.Event{
			{Type: formats.EventToolStart, Index: k, ID: id, Name: name},
			{Type: formats.EventToolArgs, Index: k, Delta: []byte(args[:len(args)/2])},
			{Type: formats.EventToolArgs, Index: k, Delta: []byte(args[len(args)/2:])},
			{Type: formats.EventToolEnd, Index: k},
		}
	}
	cat := func(parts ...[]formats.Event) []formats.Event {
		var out []formats.Event
		for _, p := range parts {
			out = append(out, p...)
		}
		return out
	}
	upstreamErr := &formats.Error{Kind: formats.KindUpstream, Message: "The upstream provider reported an error."}
	for _, tc := range []struct {
		name string
		evs  []formats.Event
		want string // the event names, joined by spaces
	}{
		{"text", []formats.Event{start, text("Hel"), text("lo."), finish(formats.StopEnd), usage, end},
			"response.created response.in_progress response.output_item.added response.content_part.added " +
				"response.output_text.delta response.output_text.delta response.output_text.done response.content_part.done " +
				"response.output_item.done response.completed"},
		{"tool calls", cat([]formats.Event{start, text("Looking.")}, tool(0, "toolu_1", "mcp__files__read", `{"path":"a"}`),
			tool(1, "", "shell", `{"command":"ls"}`), []formats.Event{finish(formats.StopToolUse), usage, end}),
			"response.created response.in_progress response.output_item.added response.content_part.added " +
				"response.output_text.delta response.output_text.done response.content_part.done response.output_item.done " +
				"response.output_item.added response.function_call_arguments.delta response.function_call_arguments.delta " +
				"response.function_call_arguments.done response.output_item.done " +
				"response.output_item.added response.function_call_arguments.delta response.function_call_arguments.delta " +
				"response.function_call_arguments.done response.output_item.done response.completed"},
		{"reasoning", []formats.Event{start, {Type: formats.EventReasoning, Delta: []byte("hmm")}, {Type: formats.EventReasoning, Signature: "sig"},
			text("Yes."), finish(formats.StopEnd), usage, end},
			"response.created response.in_progress response.output_item.added response.content_part.added " +
				"response.output_text.delta response.output_text.done response.content_part.done response.output_item.done response.completed"},
		{"incomplete", []formats.Event{start, text("Hel"), finish(formats.StopLength), usage, end},
			"response.created response.in_progress response.output_item.added response.content_part.added " +
				"response.output_text.delta response.output_text.done response.content_part.done response.output_item.done response.incomplete"},
		{"content filter", []formats.Event{start, finish(formats.StopContentFilter), end},
			"response.created response.in_progress response.incomplete"},
		{"no usage", []formats.Event{start, text("Hi."), end},
			"response.created response.in_progress response.output_item.added response.content_part.added " +
				"response.output_text.delta response.output_text.done response.content_part.done response.output_item.done response.completed"},
		{"failed", []formats.Event{start, text("Hel"), {Type: formats.EventError, Err: upstreamErr}},
			"response.created response.in_progress response.output_item.added response.content_part.added " +
				"response.output_text.delta error response.failed"},
		{"failed in a call", cat([]formats.Event{start}, tool(0, "toolu_1", "shell", `{"command":"ls"}`)[:2],
			[]formats.Event{{Type: formats.EventError, Err: formats.NewError(formats.KindOverloaded, "")}}),
			"response.created response.in_progress response.output_item.added response.function_call_arguments.delta error response.failed"},
		{"failed on a bad request", []formats.Event{start, {Type: formats.EventError, Err: formats.InvalidRequest("input", "Bad input.")}},
			"response.created response.in_progress error response.failed"},
		{"failed at once", []formats.Event{{Type: formats.EventError, Err: upstreamErr}}, "error"},
		{"failed without an error", []formats.Event{start, {Type: formats.EventError}}, "response.created response.in_progress error response.failed"},
	} {
		for _, withReq := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/request=%v", tc.name, withReq), func(t *testing.T) {
				var req *Request
				if withReq {
					req = parseSpecRequest(t)
				}
				enc := NewStreamEncoder("svc-model", req)
				var out []byte
				for i := range tc.evs {
					out = enc.Encode(out, &tc.evs[i])
				}
				if got := strings.Join(checkStream(t, out, 0), " "); got != tc.want {
					t.Errorf("events:\n%s\nwant\n%s", got, tc.want)
				}
			})
		}
	}
}

// TestSpecPassThroughFail validates the error the gateway adds to an OpenAI
// upstream's Responses stream that broke: its sequence numbers go on from
// the upstream's.
func TestSpecPassThroughFail(t *testing.T) {
	pt := NewPassThroughStream("svc-model")
	created := `{"type":"response.created","sequence_number":0,"response":{"id":"resp_1","object":"response","model":"up"}}`
	out, _, ferr := pt.Feed(nil, []byte("response.created"), []byte(created))
	if ferr != nil {
		t.Fatal(ferr)
	}
	out = pt.Fail(out[:0], formats.NewError(formats.KindTimeout, ""))
	if got := strings.Join(checkStream(t, out, 1), " "); got != "error" {
		t.Errorf("events: %s, want error", got)
	}
}

// TestSpecGoldens validates the pinned answers and streams the gateway
// builds (the pass-through stream is the upstream's own, and left out).
func TestSpecGoldens(t *testing.T) {
	for _, f := range []string{"response/tools.golden.json", "response/incomplete.golden.json"} {
		body, err := os.ReadFile("testdata/" + f)
		if err != nil {
			t.Fatal(err)
		}
		checkSpec(t, "Response", body)
	}
	for _, f := range []string{"stream/tools.golden.sse", "stream/failed.golden.sse"} {
		stream, err := os.ReadFile("testdata/" + f)
		if err != nil {
			t.Fatal(err)
		}
		checkStream(t, stream, 0)
	}
}

// TestSpecEcho pins what the spec made the gateway add: the usage's
// cache_write_tokens, and strict and parameters on echoed function tools
// (null when the client gave none; inside a namespace, and other tools, as
// the client sent them).
func TestSpecEcho(t *testing.T) {
	resp := formats.Response{Content: []formats.Part{{Type: formats.PartText, Text: "Hi."}}, Stop: formats.StopEnd, Usage: specUsage, HasUsage: true}
	out := string(Render(nil, &resp, "svc-model", parseSpecRequest(t)))
	for _, want := range []string{
		`"usage":{"input_tokens":120,"input_tokens_details":{"cached_tokens":100,"cache_write_tokens":10},"output_tokens":30,"output_tokens_details":{"reasoning_tokens":8},"total_tokens":150}`,
		`"tools":[{"type":"function","name":"shell","parameters":{"type":"object","properties":{"command":{"type":"string"}}},"strict":null},` +
			`{"type":"function","name":"now","description":"The time.","strict":true,"parameters":{"type":"object","properties":{},"additionalProperties":false}},` +
			`{"type":"function","name":"bare","parameters":null,"strict":null},` +
			`{"type":"namespace","name":"mcp__files","description":"Files","tools":[{"type":"function","name":"read","parameters":{"type":"object","properties":{"path":{"type":"string"}}}}]},` +
			`{"type":"web_search"},{"type":"custom","name":"apply_patch"}]`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("answer lacks %s:\n%s", want, out)
		}
	}
}
