package openai

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	goldenfile "github.com/modelgate/modelgate/internal/golden"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/modelgate/modelgate/formats"
	"github.com/modelgate/modelgate/formats/sse"
)

// golden compares got with testdata/name (or writes it with -update).
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	goldenfile.Check(t, name, got)
}

func read(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestRewriteGolden(t *testing.T) {
	for _, tc := range []struct {
		file   string
		max    int
		stream bool
	}{
		{"basic", 1000, false},
		{"max_tokens_only", 4096, false},
		{"both_caps", 150, false},
		{"stream_options", 64, true},
		{"stream_no_options", 64, true},
		{"stream_empty_options", 64, true},
		{"escaped", 0, false},
		{"null_options", 10, true},
	} {
		t.Run(tc.file, func(t *testing.T) {
			body := read(t, "rewrite/"+tc.file+".json")
			req, ferr := ParseChatRequest(body)
			if ferr != nil {
				t.Fatalf("fixture invalid: %v", ferr)
			}
			if req.Stream != tc.stream {
				t.Fatalf("fixture stream %v", req.Stream)
			}
			out, err := RewriteChatRequest(nil, body, "upstream-model-1", tc.max, tc.stream)
			if err != nil {
				t.Fatal(err)
			}
			if !jsontext.Value(out).IsValid() {
				t.Fatalf("invalid output %s", out)
			}
			// the output is a valid request with what was asked
			req2, ferr := ParseChatRequest(out)
			if ferr != nil {
				t.Fatalf("output rejected: %v\n%s", ferr, out)
			}
			if req2.Model != "upstream-model-1" || (tc.stream && !req2.IncludeUsage) {
				t.Fatalf("output %s", out)
			}
			if n, _ := req2.MaxTokens(); tc.max > 0 && n != tc.max {
				t.Fatalf("cap %d in %s", n, out)
			}
			golden(t, "rewrite/"+tc.file+".golden", out)
		})
	}
}

// feedStream runs an SSE fixture through a translator, as the gateway does.
func feedStream(t *testing.T, tr formats.StreamTranslator, in []byte) []byte {
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

func TestPassThroughStreamGolden(t *testing.T) {
	for _, tc := range []struct {
		file      string
		usage     formats.Usage
		outBytes  int64
		failKind  formats.ErrorKind
		wantError bool
	}{
		{file: "text", usage: formats.Usage{Input: 12, Output: 3}, outBytes: 10},
		{file: "tools", usage: formats.Usage{Input: 120, CacheRead: 64, Output: 80, Reasoning: 50}, outBytes: 18},
		{file: "usage_in_content", usage: formats.Usage{Input: 5, Output: 2}, outBytes: 6},
		{file: "error", outBytes: 4, wantError: true},
	} {
		for _, want := range []bool{true, false} {
			name := fmt.Sprintf("%s.usage_%v", tc.file, want)
			t.Run(name, func(t *testing.T) {
				tr := NewPassThroughStream("svc-model", want)
				out := feedStream(t, tr, read(t, "stream/"+tc.file+".sse"))
				golden(t, "stream/"+name+".golden", out)
				u, ok := tr.Usage()
				if ok != !tc.wantError || u != tc.usage {
					t.Errorf("usage %+v %v, want %+v", u, ok, tc.usage)
				}
				if n := tr.OutputBytes(); n != tc.outBytes {
					t.Errorf("output bytes %d, want %d", n, tc.outBytes)
				}
				// a compatible server's chunks keep their shape
				checkClientStream(t, out, want && tc.file != "usage_in_content", tc.wantError, want)
			})
		}
	}
}

// checkClientStream checks what an OpenAI SDK relies on: every event is
// valid JSON with model = svc-model; usage chunk present iff asked; [DONE]
// last unless an error ended the stream.
func checkClientStream(t *testing.T, out []byte, wantNull, wantError, wantUsage bool) {
	t.Helper()
	r := sse.NewReader(bytes.NewReader(out), 1<<16)
	sawUsage, sawDone, sawError := false, false, false
	for {
		_, data, err := r.Next()
		if err != nil {
			break
		}
		if sawDone || sawError {
			t.Fatalf("event after the end: %s", data)
		}
		if string(data) == "[DONE]" {
			sawDone = true
			continue
		}
		if !jsontext.Value(data).IsValid() {
			t.Fatalf("invalid JSON event %s", data)
		}
		if bytes.HasPrefix(data, []byte(`{"error":`)) {
			sawError = true
			continue
		}
		if !bytes.Contains(data, []byte(`"model":"svc-model"`)) {
			t.Fatalf("model not rewritten: %s", data)
		}
		hasUsageKey := bytes.Contains(data, []byte(`"usage":`))
		if !wantUsage && hasUsageKey {
			t.Fatalf("usage key without include_usage: %s", data)
		}
		if bytes.Contains(data, []byte(`"choices":[]`)) {
			sawUsage = true
		} else if wantNull && !bytes.Contains(data, []byte(`"usage":null`)) {
			t.Fatalf("content chunk without usage:null: %s", data)
		}
	}
	if wantError != sawError || (!wantError && !sawDone) || (!wantError && sawUsage != wantUsage) {
		t.Fatalf("usage %v done %v error %v", sawUsage, sawDone, sawError)
	}
}

func TestRoundTripGolden(t *testing.T) {
	for _, file := range []string{"tools", "everything"} {
		t.Run(file, func(t *testing.T) {
			req, ferr := ParseChatRequest(read(t, "roundtrip/"+file+".json"))
			if ferr != nil {
				t.Fatal(ferr)
			}
			ir, ferr := req.ToIR()
			if ferr != nil {
				t.Fatal(ferr)
			}
			out, ferr := RenderChatRequest(ir, "upstream-model")
			if ferr != nil {
				t.Fatal(ferr)
			}
			if _, ferr := ParseChatRequest(out); ferr != nil {
				t.Fatalf("rendered request rejected: %v\n%s", ferr, out)
			}
			var ind bytes.Buffer
			v := jsontext.Value(out)
			if err := v.Indent(); err != nil {
				t.Fatal(err)
			}
			ind.Write(v)
			ind.WriteString("\ndropped: " + ir.DroppedHeader() + "\n")
			golden(t, "roundtrip/"+file+".golden", ind.Bytes())
		})
	}
}

func TestResponseGolden(t *testing.T) {
	for _, tc := range []struct {
		file  string
		usage formats.Usage
	}{
		{"text", formats.Usage{Input: 12, Output: 3}},
		{"tools", formats.Usage{Input: 120, CacheRead: 64, CacheWrite: 16, Output: 80, Reasoning: 50}},
		{"compat", formats.Usage{Input: 5, Output: 7}},
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

			resp, ferr := DecodeChatResponse(body)
			if ferr != nil {
				t.Fatal(ferr)
			}
			if resp.Usage != tc.usage {
				t.Errorf("decoded usage %+v", resp.Usage)
			}
			r := RenderChatResponse(nil, resp, "svc-model")
			if !jsontext.Value(r).IsValid() {
				t.Fatalf("invalid %s", r)
			}
			if strings.HasPrefix(resp.ID, "chatcmpl-") {
				golden(t, "response/"+tc.file+".render.golden", r)
			}
			// a second trip changes nothing
			resp2, ferr := DecodeChatResponse(r)
			if ferr != nil {
				t.Fatal(ferr)
			}
			r2 := RenderChatResponse(nil, resp2, "svc-model")
			if strings.HasPrefix(resp.ID, "chatcmpl-") && !bytes.Equal(r, r2) {
				t.Fatalf("second trip differs:\n%s\n%s", r, r2)
			}
		})
	}
}

func TestResponseErrors(t *testing.T) {
	for body, kind := range map[string]formats.ErrorKind{
		`not json`:                    formats.KindUpstream,
		`{"object":"list","data":[]}`: formats.KindUpstream,
		`{"choices":{}}`:              formats.KindUpstream,
		`{"error":{"message":"Rate limit reached for org-AbC123xyz","type":"tokens","code":"rate_limit_exceeded"}}`: formats.KindOverloaded,
		`{"error":{"message":"bad","type":"invalid_request_error","param":"messages","code":null}}`:                 formats.KindInvalidRequest,
	} {
		_, _, err := PassThroughResponse(nil, []byte(body), "svc")
		if err == nil || err.Kind != kind {
			t.Errorf("%s: %v", body, err)
		}
		if err != nil && strings.Contains(err.Message, "AbC123") {
			t.Errorf("org id kept: %s", err.Message)
		}
		if _, err := DecodeChatResponse([]byte(body)); err == nil || err.Kind != kind {
			t.Errorf("decode %s: %v", body, err)
		}
	}
}

func TestTranslateGolden(t *testing.T) {
	// OpenAI upstream → IR → OpenAI client: what a client of another
	// format's upstream sees, checked on OpenAI fixtures.
	for _, file := range []string{"text", "tools", "usage_in_content", "error"} {
		for _, want := range []bool{true, false} {
			name := fmt.Sprintf("%s.usage_%v", file, want)
			t.Run(name, func(t *testing.T) {
				tr := formats.Translate(NewStreamDecoder(), NewStreamEncoder("svc-model", want))
				out := feedStream(t, tr, read(t, "stream/"+file+".sse"))
				// ids of non-OpenAI upstreams are random: pin them
				out = pinIDs(out)
				golden(t, "stream/"+name+".translated.golden", out)
				checkClientStream(t, out, want, file == "error", want)
			})
		}
	}
}

// pinIDs replaces generated chatcmpl- ids (24 base62 characters) and
// timestamps that are not from the fixtures.
func pinIDs(b []byte) []byte {
	s := string(b)
	var out strings.Builder
	for {
		i := strings.Index(s, `"chatcmpl-`)
		if i < 0 {
			out.WriteString(s)
			return []byte(out.String())
		}
		if len(s) >= i+10+24+1 && s[i+10+24] == '"' {
			out.WriteString(s[:i] + `"chatcmpl-GENERATED`)
			s = s[i+10+24:]
			continue
		}
		out.WriteString(s[:i+10])
		s = s[i+10:]
	}
}

func TestStreamDecoderEvents(t *testing.T) {
	d := NewStreamDecoder()
	var evs []formats.Event
	var got []string
	r := sse.NewReader(bytes.NewReader(read(t, "stream/tools.sse")), 1<<16)
	for {
		_, data, err := r.Next()
		if err != nil {
			break
		}
		var ferr *formats.Error
		evs, ferr = d.Decode(evs[:0], nil, data)
		if ferr != nil {
			t.Fatal(ferr)
		}
		for _, ev := range evs {
			s := ev.Type.String()
			switch ev.Type {
			case formats.EventToolStart:
				s += fmt.Sprintf("(%d,%s,%s)", ev.Index, ev.ID, ev.Name)
			case formats.EventToolArgs:
				s += fmt.Sprintf("(%d,%s)", ev.Index, ev.Delta)
			case formats.EventToolEnd:
				s += fmt.Sprintf("(%d)", ev.Index)
			case formats.EventFinish:
				s += "(" + ev.Stop.String() + ")"
			case formats.EventUsage:
				s += fmt.Sprintf("(%d,%d)", ev.Usage.Input, ev.Usage.Output)
			}
			got = append(got, s)
		}
	}
	want := `start tool_start(0,call_9Xk2,get_weather) tool_args(0,{"city":) tool_start(1,call_7Yz1,get_time) tool_args(1,{}) tool_args(0,"Paris"}) tool_end(0) tool_end(1) usage(120,80) finish(tool_use) end`
	if s := strings.Join(got, " "); s != want {
		t.Fatalf("events:\n got %s\nwant %s", s, want)
	}
}

func TestStreamEncoderOrder(t *testing.T) {
	// an encoder fed by another format's decoder: tool call without id,
	// no finish before end, reasoning dropped
	e := NewStreamEncoder("svc", true)
	var out []byte
	for _, ev := range []formats.Event{
		{Type: formats.EventStart, ID: "msg_01", Created: 1700000000},
		{Type: formats.EventReasoning, Delta: []byte("thinking")},
		{Type: formats.EventText, Delta: []byte("a\"b")},
		{Type: formats.EventToolStart, Index: 0, Name: "f"},
		{Type: formats.EventToolArgs, Index: 0, Delta: []byte(`{"x":1}`)},
		{Type: formats.EventToolEnd, Index: 0},
		{Type: formats.EventUsage, Usage: formats.Usage{Input: 3, Output: 4}},
		{Type: formats.EventEnd},
		{Type: formats.EventText, Delta: []byte("after end")},
	} {
		out = e.Encode(out, &ev)
	}
	s := string(out)
	for _, want := range []string{`"delta":{"role":"assistant","content":""}`, `"content":"a\"b"`, `"id":"call_`, `"finish_reason":"tool_calls"`, `"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":4,"total_tokens":7`, "data: [DONE]\n\n"} {
		if !strings.Contains(s, want) {
			t.Errorf("missing %s in\n%s", want, s)
		}
	}
	if strings.Contains(s, "thinking") || strings.Contains(s, "after end") || strings.Contains(s, "msg_01") {
		t.Errorf("unexpected content:\n%s", s)
	}
	checkClientStream(t, []byte(strings.ReplaceAll(s, `"model":"svc"`, `"model":"svc-model"`)), true, false, true)
}
