package anthropic

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	goldenfile "github.com/modelgate/modelgate/internal/golden"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/modelgate/modelgate/formats"
	"github.com/modelgate/modelgate/formats/openai"
	"github.com/modelgate/modelgate/formats/sse"
)

// golden compares got with testdata/name (or writes it with -update).
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	goldenfile.Check(t, name, got)
}

func read(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// indent pretty-prints JSON for readable golden files.
func indent(t *testing.T, b []byte) []byte {
	t.Helper()
	v := jsontext.Value(bytes.Clone(b))
	if err := v.Indent(); err != nil {
		t.Fatalf("invalid JSON %v:\n%s", err, b)
	}
	return append(v, '\n')
}

var (
	generatedID = regexp.MustCompile(`"(msg_|toolu_|chatcmpl-|call_)[0-9A-Za-z]{24}"`)
	createdTime = regexp.MustCompile(`"created":\d+`)
)

// pin replaces generated ids (24 base62 characters) and timestamps that
// are not from the fixtures.
func pin(b []byte) []byte {
	b = generatedID.ReplaceAll(b, []byte(`"${1}GENERATED"`))
	return createdTime.ReplaceAll(b, []byte(`"created":1700000000`))
}

// TestRequestGolden: an Anthropic client's request through the IR to an
// Anthropic upstream and an OpenAI upstream.
func TestRequestGolden(t *testing.T) {
	for _, file := range []string{"claude_code", "everything"} {
		t.Run(file, func(t *testing.T) {
			req, ferr := ParseMessagesRequest(read(t, "request/"+file+".json"))
			if ferr != nil {
				t.Fatal(ferr)
			}
			for _, target := range []string{"anthropic", "openai"} {
				ir, ferr := req.ToIR()
				if ferr != nil {
					t.Fatal(ferr)
				}
				var out []byte
				if target == "anthropic" {
					out, ferr = RenderMessagesRequest(ir, "upstream-model")
					if ferr == nil {
						if _, err := ParseMessagesRequest(out); err != nil {
							t.Fatalf("rendered request rejected: %v\n%s", err, out)
						}
					}
				} else {
					out, ferr = openai.RenderChatRequest(ir, "upstream-model")
					if ferr == nil {
						if _, err := openai.ParseChatRequest(out); err != nil {
							t.Fatalf("rendered request rejected: %v\n%s", err, out)
						}
					}
				}
				if ferr != nil {
					t.Fatalf("%s: %v", target, ferr)
				}
				got := indent(t, out)
				got = append(got, "dropped: "+ir.DroppedHeader()+"\n"...)
				golden(t, "roundtrip/"+file+"."+target+".golden", got)
			}
		})
	}
}

// TestRenderFromOpenAIGolden: an OpenAI client's request rendered for an
// Anthropic upstream (docs/translation.md,
// "A tool conversation in four formats", "Request mapping").
func TestRenderFromOpenAIGolden(t *testing.T) {
	for _, tc := range []struct {
		file       string
		structured bool
		name       string
	}{
		{"oai_weather", false, "oai_weather"},
		{"oai_everything", false, "oai_everything.tool"},
		{"oai_everything", true, "oai_everything.native"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, ferr := openai.ParseChatRequest(read(t, "request/"+tc.file+".json"))
			if ferr != nil {
				t.Fatal(ferr)
			}
			ir, ferr := req.ToIR()
			if ferr != nil {
				t.Fatal(ferr)
			}
			ir.StructuredOutputs = tc.structured
			out, ferr := RenderMessagesRequest(ir, "upstream-model")
			if ferr != nil {
				t.Fatal(ferr)
			}
			if _, err := ParseMessagesRequest(out); err != nil {
				t.Fatalf("rendered request rejected: %v\n%s", err, out)
			}
			got := indent(t, out)
			got = append(got, "dropped: "+ir.DroppedHeader()+"\n"...)
			golden(t, "roundtrip/"+tc.name+".golden", got)

			// the count_tokens body of the same request
			ir, _ = req.ToIR()
			ir.StructuredOutputs = tc.structured
			cnt, ferr := RenderCountTokensRequest(ir, "upstream-model")
			if ferr != nil {
				t.Fatal(ferr)
			}
			if _, err := ParseCountTokensRequest(cnt); err != nil {
				t.Fatalf("count body rejected: %v\n%s", err, cnt)
			}
			for _, banned := range []string{`"max_tokens"`, `"stream"`, `"temperature"`, `"top_p"`, `"stop_sequences"`, `"metadata"`, `"thinking"`} {
				if bytes.Contains(cnt, []byte(banned)) && !bytes.Contains(out, []byte(`"text":`+banned)) {
					t.Errorf("count body has %s: %s", banned, cnt)
				}
			}
			if tc.file == "oai_weather" {
				golden(t, "roundtrip/"+tc.name+".count.golden", indent(t, cnt))
			}
		})
	}
}

func TestRewriteGolden(t *testing.T) {
	for _, tc := range []struct {
		file  string
		max   int
		count bool
	}{
		{"basic", 1000, false},
		{"keep_client_cap", 64000, false},
		{"system_messages", 500, false},
		{"system_string", 500, false},
		{"system_only_messages", 500, false},
		{"thinking_fit", 4000, false},
		{"thinking_disable", 1000, false},
		{"no_model", 10, false},
		{"count", 0, true},
		{"count_first_members", 0, true},
	} {
		t.Run(tc.file, func(t *testing.T) {
			body := read(t, "rewrite/"+tc.file+".json")
			var out []byte
			var err error
			if tc.count {
				out, err = RewriteCountTokensRequest(nil, body, "upstream-model-1")
			} else {
				out, err = RewriteMessagesRequest(nil, body, "upstream-model-1", tc.max)
			}
			if err != nil {
				t.Fatal(err)
			}
			if !jsontext.Value(out).IsValid() {
				t.Fatalf("invalid output %s", out)
			}
			if bytes.Contains(out, []byte(`"role":"system"`)) || bytes.Contains(out, []byte(`"role": "system"`)) {
				t.Fatalf("system message left: %s", out)
			}
			golden(t, "rewrite/"+tc.file+".golden", out)
		})
	}
}

// feedStream runs an SSE fixture through a translator, as the gateway does.
func feedStream(t testing.TB, tr formats.StreamTranslator, in []byte) []byte {
	t.Helper()
	r := sse.NewReader(bytes.NewReader(in), 1<<16)
	var out []byte
	for {
		event, data, err := r.Next()
		if err != nil {
			t.Fatalf("stream ended without its terminal event: %v", err)
		}
		var done bool
		var ferr *formats.Error
		out, done, ferr = tr.Feed(out, event, data)
		if ferr != nil {
			return tr.Fail(out, ferr)
		}
		if done {
			return tr.Finish(out)
		}
	}
}

// The Anthropic stream fixtures and what metering must find in them.
var antStreams = []struct {
	file      string
	usage     formats.Usage
	outBytes  int64
	wantError bool
}{
	{file: "text", usage: formats.Usage{Input: 25, Output: 15}, outBytes: 17},
	{file: "tools", usage: formats.Usage{Input: 472, CacheRead: 400, CacheWrite: 50, Output: 89}, outBytes: 28},
	{file: "thinking", usage: formats.Usage{Input: 40, Output: 120, Reasoning: 80}, outBytes: 39},
	{file: "error", usage: formats.Usage{Input: 10, Output: 1}, outBytes: 5, wantError: true},
	{file: "json", usage: formats.Usage{Input: 30, Output: 12}, outBytes: 12},
}

func TestPassThroughStreamGolden(t *testing.T) {
	for _, tc := range antStreams {
		t.Run(tc.file, func(t *testing.T) {
			in := read(t, "stream/"+tc.file+".sse")
			tr := NewPassThroughStream("svc-model")
			out := feedStream(t, tr, in)
			golden(t, "stream/"+tc.file+".passthrough.golden", out)
			// a stream that ends in an error has no final usage: its
			// figures so far are kept, but they are not a bill
			u, final := tr.Usage()
			if final == tc.wantError || u != tc.usage {
				t.Errorf("usage %+v final %v, want %+v final %v", u, final, tc.usage, !tc.wantError)
			}
			if n := tr.OutputBytes(); n != tc.outBytes {
				t.Errorf("output bytes %d, want %d", n, tc.outBytes)
			}
			// byte-identical but for the model (and the error event,
			// rendered by Fail)
			if !tc.wantError {
				want := bytes.ReplaceAll(in, []byte(`"model":"claude-sonnet-4-5-20250929"`), []byte(`"model":"svc-model"`))
				if !bytes.Equal(out, want) {
					t.Errorf("not byte-identical:\n%s", out)
				}
			}
			checkAnthropicStream(t, out, tc.wantError)
		})
	}
}

// checkAnthropicStream checks the event grammar of Anthropic streams:
// message_start first, sequential blocks with increasing indices, a
// message_delta, message_stop last (or an error event last).
func checkAnthropicStream(t *testing.T, out []byte, wantError bool) {
	t.Helper()
	r := sse.NewReader(bytes.NewReader(out), 1<<20)
	var names []string
	open, next := -1, 0
	for {
		event, data, err := r.Next()
		if err != nil {
			break
		}
		if !jsontext.Value(data).IsValid() {
			t.Fatalf("invalid JSON %s", data)
		}
		name := string(event)
		if !bytes.Contains(data, []byte(`"type":"`+name+`"`)) {
			t.Fatalf("event %s with data %s", name, data)
		}
		names = append(names, name)
		var idx int
		if strings.HasPrefix(name, "content_block") {
			fmt.Sscanf(string(data[bytes.Index(data, []byte(`"index":`))+8:]), "%d", &idx)
		}
		switch name {
		case "message_start":
			if len(names) != 1 {
				t.Fatalf("message_start not first: %v", names)
			}
			if !bytes.Contains(data, []byte(`"model":"svc-model"`)) {
				t.Fatalf("model not rewritten: %s", data)
			}
		case "content_block_start":
			if open >= 0 || idx != next {
				t.Fatalf("block %d started while %d open (next %d)", idx, open, next)
			}
			open = idx
		case "content_block_delta":
			if idx != open {
				t.Fatalf("delta for block %d while %d open", idx, open)
			}
		case "content_block_stop":
			if idx != open {
				t.Fatalf("stop for block %d while %d open", idx, open)
			}
			open, next = -1, next+1
		}
	}
	if len(names) == 0 {
		t.Fatal("no events")
	}
	last := names[len(names)-1]
	if wantError != (last == "error") || (!wantError && last != "message_stop") {
		t.Fatalf("events %v", names)
	}
	if !wantError && (open >= 0 || names[len(names)-2] != "message_delta") {
		t.Fatalf("events %v (open %d)", names, open)
	}
}

// TestTranslateToOpenAIGolden: an Anthropic upstream stream to an OpenAI
// client (docs/translation.md, "Streams").
func TestTranslateToOpenAIGolden(t *testing.T) {
	for _, tc := range antStreams {
		t.Run(tc.file, func(t *testing.T) {
			tr := formats.Translate(NewStreamDecoder(), openai.NewStreamEncoder("svc-model", true))
			out := pin(feedStream(t, tr, read(t, "stream/"+tc.file+".sse")))
			golden(t, "stream/"+tc.file+".openai.golden", out)
			if u, final := tr.Usage(); final == tc.wantError || u != tc.usage {
				t.Errorf("usage %+v final %v, want %+v final %v", u, final, tc.usage, !tc.wantError)
			}
			if n := tr.OutputBytes(); n != tc.outBytes {
				t.Errorf("output bytes %d", n)
			}
		})
	}
}

// TestTranslateFromOpenAIGolden: an OpenAI upstream stream to an Anthropic
// client (docs/translation.md, "Writing client streams", ANT client):
// interleaved tool fragments, input usage only at the end.
func TestTranslateFromOpenAIGolden(t *testing.T) {
	for _, tc := range []struct {
		file      string
		usage     formats.Usage
		wantError bool
	}{
		{"oai_text", formats.Usage{Input: 12, Output: 3}, false},
		{"oai_tools", formats.Usage{Input: 120, CacheRead: 64, Output: 80, Reasoning: 50}, false},
		{"oai_error", formats.Usage{}, true},
	} {
		t.Run(tc.file, func(t *testing.T) {
			tr := formats.Translate(openai.NewStreamDecoder(), NewStreamEncoder("svc-model"))
			out := pin(feedStream(t, tr, read(t, "stream/"+tc.file+".sse")))
			golden(t, "stream/"+tc.file+".anthropic.golden", out)
			u, ok := tr.Usage()
			if ok != !tc.wantError || u != tc.usage {
				t.Errorf("usage %+v %v, want %+v", u, ok, tc.usage)
			}
			checkAnthropicStream(t, out, tc.wantError)
		})
	}
}

func TestResponseGolden(t *testing.T) {
	for _, tc := range []struct {
		file  string
		usage formats.Usage
	}{
		{"text", formats.Usage{Input: 2095, CacheRead: 2048, CacheWrite: 30, Output: 6}},
		{"tools", formats.Usage{Input: 472, Output: 89, Reasoning: 40, Hosted: formats.HostedUses{WebSearch: 1}}}, // one server_tool_use web_search block
		{"json", formats.Usage{Input: 30, Output: 12}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			body := read(t, "response/"+tc.file+".json")
			out, u, ferr := PassThroughResponse(nil, body, "svc-model")
			if ferr != nil {
				t.Fatal(ferr)
			}
			if u != tc.usage {
				t.Errorf("usage %+v, want %+v", u, tc.usage)
			}
			golden(t, "response/"+tc.file+".passthrough.golden", out)

			resp, ferr := DecodeMessagesResponse(body)
			if ferr != nil {
				t.Fatal(ferr)
			}
			if resp.Usage != tc.usage || !resp.HasUsage {
				t.Errorf("decoded usage %+v", resp.Usage)
			}
			r := RenderMessagesResponse(nil, resp, "svc-model")
			golden(t, "response/"+tc.file+".anthropic.golden", indent(t, pin(r)))
			o := openai.RenderChatResponse(nil, resp, "svc-model")
			golden(t, "response/"+tc.file+".openai.golden", indent(t, pin(o)))

			// a second trip changes nothing
			resp2, ferr := DecodeMessagesResponse(r)
			if ferr != nil {
				t.Fatal(ferr)
			}
			if r2 := RenderMessagesResponse(nil, resp2, "svc-model"); !bytes.Equal(pin(r), pin(r2)) {
				t.Fatalf("second trip differs:\n%s\n%s", r, r2)
			}
		})
	}
	// an OpenAI upstream's answer for an Anthropic client
	for _, file := range []string{"oai_tools", "oai_length"} {
		t.Run(file, func(t *testing.T) {
			resp, ferr := openai.DecodeChatResponse(read(t, "response/"+file+".json"))
			if ferr != nil {
				t.Fatal(ferr)
			}
			r := RenderMessagesResponse(nil, resp, "svc-model")
			golden(t, "response/"+file+".anthropic.golden", indent(t, pin(r)))
		})
	}
}

func TestResponseErrors(t *testing.T) {
	for body, kind := range map[string]formats.ErrorKind{
		`not json`:           formats.KindUpstream,
		`{"type":"message"}`: formats.KindUpstream,
		`{"content":{}}`:     formats.KindUpstream,
		`{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`:                          formats.KindOverloaded,
		`{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 2 > 1"}}`:      formats.KindInvalidRequest,
		`{"type":"error","error":{"type":"api_error","message":"Internal server error req_011CSHoEeqs5C35K"}}`: formats.KindUpstream,
	} {
		_, _, err := PassThroughResponse(nil, []byte(body), "svc")
		if err == nil || err.Kind != kind {
			t.Errorf("%s: %v", body, err)
		}
		if err != nil && strings.Contains(err.Message, "011CSH") {
			t.Errorf("request id kept: %s", err.Message)
		}
		if _, err := DecodeMessagesResponse([]byte(body)); err == nil || err.Kind != kind {
			t.Errorf("decode %s: %v", body, err)
		}
	}
}
