package responses

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/modelgate/modelgate/formats"
	"github.com/modelgate/modelgate/formats/anthropic"
	"github.com/modelgate/modelgate/formats/gemini"
	"github.com/modelgate/modelgate/formats/openai"
	"github.com/modelgate/modelgate/internal/golden"
)

// TestGoldenRequests pins each testdata/request/*.json as Chat
// Completions, Anthropic and Gemini upstreams receive it, with what was
// dropped.
func TestGoldenRequests(t *testing.T) {
	files, _ := filepath.Glob("testdata/request/*.json")
	if len(files) == 0 {
		t.Fatal("no requests")
	}
	for _, f := range files {
		body, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		name := strings.TrimSuffix(filepath.Base(f), ".json")
		for _, target := range []string{"chat", "anthropic", "gemini"} {
			t.Run(name+"→"+target, func(t *testing.T) {
				req, ferr := ParseRequest(body)
				if ferr != nil {
					t.Fatal(ferr)
				}
				ir, ferr := req.ToIR()
				if ferr != nil {
					t.Fatal(ferr)
				}
				ir.StructuredOutputs = true
				var out []byte
				switch target {
				case "chat":
					out, ferr = openai.RenderChatRequest(ir, "up")
				case "anthropic":
					if ir.MaxTokens == 0 {
						ir.MaxTokens = 1024
					}
					out, ferr = anthropic.RenderMessagesRequest(ir, "up")
				case "gemini":
					out, ferr = gemini.RenderGenerateRequest(ir, nil)
				}
				if ferr != nil {
					t.Fatal(ferr)
				}
				got := append([]byte("x-modelgate-dropped: "+ir.DroppedHeader()+"\n"), out...)
				golden.Check(t, "request/"+name+"."+target+".golden", append(got, '\n'))
			})
		}
	}
}

// stable replaces the ids and times the gateway makes.
var stable = regexp.MustCompile(`"(resp|msg|fc|call)_[A-Za-z0-9]{24}"|"created_at":\d+`)

func normalise(b []byte) []byte {
	return stable.ReplaceAllFunc(b, func(m []byte) []byte {
		if bytes.HasPrefix(m, []byte(`"created_at"`)) {
			return []byte(`"created_at":0`)
		}
		i := bytes.IndexByte(m, '_')
		return append(append([]byte(nil), m[:i+1]...), `ID"`...)
	})
}

// answer is an upstream answer in the IR: text, then a call to a
// namespaced tool and one to a plain tool.
func answer() *formats.Response {
	return &formats.Response{Model: "up", Created: 1735689600, Stop: formats.StopToolUse, HasUsage: true,
		Usage: formats.Usage{Input: 120, CacheRead: 100, Output: 30, Reasoning: 8},
		Content: []formats.Part{
			{Type: formats.PartText, Text: "Let me look."},
			{Type: formats.PartToolCall, ToolCall: &formats.ToolCall{ID: "toolu_01", Name: "mcp__files__read", Arguments: `{"path":"README.md"}`}},
			{Type: formats.PartToolCall, ToolCall: &formats.ToolCall{ID: "toolu_02", Name: "shell", Arguments: `{"command":["ls"]}`}},
		}}
}

func historyRequest(t *testing.T) *Request {
	body, err := os.ReadFile("testdata/request/history.json")
	if err != nil {
		t.Fatal(err)
	}
	req, ferr := ParseRequest(body)
	if ferr != nil {
		t.Fatal(ferr)
	}
	return req
}

// TestGoldenResponse pins a whole translated answer as a Responses object.
func TestGoldenResponse(t *testing.T) {
	out := Render(nil, answer(), "codex-model", historyRequest(t))
	golden.Check(t, "response/tools.golden.json", append(normalise(out), '\n'))

	r := &formats.Response{Stop: formats.StopLength, HasUsage: true, Usage: formats.Usage{Input: 5, Output: 16},
		Content: []formats.Part{{Type: formats.PartText, Text: "Cut sh"}}}
	golden.Check(t, "response/incomplete.golden.json", append(normalise(Render(nil, r, "m", nil)), '\n'))
}

// TestGoldenStream pins the event sequence of a translated stream: text,
// two tool calls (one namespaced), usage, and the terminal event; and one
// that fails midway.
func TestGoldenStream(t *testing.T) {
	tr := formats.Translate(&replay{
		{Type: formats.EventStart, ID: "msg_up", Model: "up", Created: 1735689600},
		{Type: formats.EventText, Delta: []byte("Let me")},
		{Type: formats.EventText, Delta: []byte(" look.")},
		{Type: formats.EventToolStart, Index: 0, ID: "toolu_01", Name: "mcp__files__read"},
		{Type: formats.EventToolArgs, Index: 0, Delta: []byte(`{"path":`)},
		{Type: formats.EventToolArgs, Index: 0, Delta: []byte(`"README.md"}`)},
		{Type: formats.EventToolEnd, Index: 0},
		{Type: formats.EventToolStart, Index: 1, ID: "toolu_02", Name: "shell"},
		{Type: formats.EventToolArgs, Index: 1, Delta: []byte(`{"command":["ls"]}`)},
		{Type: formats.EventToolEnd, Index: 1},
		{Type: formats.EventUsage, Usage: formats.Usage{Input: 120, CacheRead: 100, Output: 30}, HasUsage: true},
		{Type: formats.EventFinish, Stop: formats.StopToolUse},
		{Type: formats.EventEnd},
	}, NewStreamEncoder("codex-model", historyRequest(t)))
	var out []byte
	for {
		var done bool
		var ferr *formats.Error
		out, done, ferr = tr.Feed(out, nil, []byte("x"))
		if ferr != nil {
			t.Fatal(ferr)
		}
		if done {
			break
		}
	}
	out = tr.Finish(out)
	golden.Check(t, "stream/tools.golden.sse", normalise(out))

	tr = formats.Translate(&replay{
		{Type: formats.EventStart, ID: "msg_up", Model: "up", Created: 1735689600},
		{Type: formats.EventText, Delta: []byte("Hel")},
	}, NewStreamEncoder("m", nil))
	out, _, _ = tr.Feed(nil, nil, []byte("x"))
	out, _, _ = tr.Feed(out, nil, []byte("x"))
	out = tr.Fail(out, formats.NewError(formats.KindUpstream, "The upstream provider broke off the answer."))
	golden.Check(t, "stream/failed.golden.sse", normalise(out))
}

// replay is a decoder that yields one prepared event per call.
type replay []formats.Event

func (r *replay) Decode(dst []formats.Event, _, _ []byte) ([]formats.Event, *formats.Error) {
	if len(*r) == 0 {
		return dst, nil
	}
	ev := (*r)[0]
	*r = (*r)[1:]
	return append(dst, ev), nil
}

// TestPassThroughStream: an OpenAI Responses stream keeps its bytes but for
// the model, meters usage from the terminal event, which is held until
// Finish; response.failed ends it with an error.
func TestPassThroughStream(t *testing.T) {
	tr := NewPassThroughStream("service-model")
	events := [][2]string{
		{"response.created", `{"type":"response.created","sequence_number":0,"response":{"id":"resp_1","object":"response","status":"in_progress","model":"gpt-up","output":[],"usage":null}}`},
		{"response.output_text.delta", `{"type":"response.output_text.delta","sequence_number":1,"item_id":"msg_1","output_index":0,"content_index":0,"delta":"Hello!"}`},
		{"response.completed", `{"type":"response.completed","sequence_number":2,"response":{"id":"resp_1","object":"response","status":"completed","model":"gpt-up","output":[],"usage":{"input_tokens":12,"input_tokens_details":{"cached_tokens":2},"output_tokens":3,"output_tokens_details":{"reasoning_tokens":1},"total_tokens":15}}}`},
	}
	var out []byte
	for i, ev := range events {
		var done bool
		var ferr *formats.Error
		if _, final := tr.Usage(); final {
			t.Fatalf("usage final before the terminal event (%d)", i)
		}
		out, done, ferr = tr.Feed(out, []byte(ev[0]), []byte(ev[1]))
		if ferr != nil || done != (i == 2) {
			t.Fatalf("event %d: done %v, %v", i, done, ferr)
		}
	}
	if strings.Contains(string(out), "response.completed") {
		t.Fatal("the terminal event was not held back")
	}
	u, ok := tr.Usage()
	if !ok || u != (formats.Usage{Input: 12, CacheRead: 2, Output: 3, Reasoning: 1}) || tr.OutputBytes() != 6 {
		t.Fatalf("usage %+v %v, bytes %d", u, ok, tr.OutputBytes())
	}
	out = tr.Finish(out)
	golden.Check(t, "stream/passthrough.golden.sse", out)

	// a failed response is billed the usage it reports
	tr = NewPassThroughStream("m")
	_, _, ferr := tr.Feed(nil, []byte("response.failed"), []byte(`{"type":"response.failed","sequence_number":5,"response":{"status":"failed","error":{"code":"server_error","message":"boom"},"usage":{"input_tokens":7,"output_tokens":40}}}`))
	if ferr == nil || !strings.Contains(ferr.Message, "boom") {
		t.Fatalf("response.failed: %v", ferr)
	}
	if u, final := tr.Usage(); !final || u != (formats.Usage{Input: 7, Output: 40}) {
		t.Fatalf("response.failed usage %+v final %v", u, final)
	}
	failed := string(tr.Fail(nil, ferr))
	if !strings.HasPrefix(failed, "event: error\ndata: {\"type\":\"error\",\"sequence_number\":6,") {
		t.Fatalf("fail: %s", failed)
	}
}
