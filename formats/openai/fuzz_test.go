package openai

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/modelgate/modelgate/formats"
)

func addFixtures(f *testing.F, dir string) {
	paths, _ := filepath.Glob(filepath.Join("testdata", dir, "*.json"))
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err == nil {
			f.Add(b)
		}
	}
}

// FuzzParseChatRequest: any body is answered without a panic; an accepted
// one rewrites into a valid request and converts to the IR and back.
func FuzzParseChatRequest(f *testing.F) {
	addFixtures(f, "rewrite")
	addFixtures(f, "roundtrip")
	f.Add([]byte(`{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/png;base64,AA"}}]}],"stream":true,"stream_options":{}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		req, ferr := ParseChatRequest(body)
		if ferr != nil {
			if ferr.Status() != 400 {
				t.Fatalf("status %d", ferr.Status())
			}
			return
		}
		if req.InputBound() < int64(formats.BaseTokens) {
			t.Fatalf("bound %d", req.InputBound())
		}
		out, err := RewriteChatRequest(nil, body, "up", 77, req.Stream)
		if err != nil {
			t.Fatalf("rewrite: %v", err)
		}
		req2, ferr := ParseChatRequest(out)
		if ferr != nil {
			t.Fatalf("rewritten body rejected: %v\n%s\n%s", ferr, body, out)
		}
		if n, _ := req2.MaxTokens(); req2.Model != "up" || n != 77 || req2.Stream != req.Stream || (req.Stream && !req2.IncludeUsage) {
			t.Fatalf("rewrite lost something: %s", out)
		}
		ir, ferr := req.ToIR()
		if ferr != nil {
			return // rejected history (custom tool calls)
		}
		r, ferr := RenderChatRequest(ir, "up")
		if ferr != nil {
			return
		}
		if !jsontext.Value(r).IsValid() {
			t.Fatalf("rendered invalid JSON %s", r)
		}
	})
}

// FuzzPassThroughStream: any event is handled without a panic; a valid
// JSON chunk yields valid JSON.
func FuzzPassThroughStream(f *testing.F) {
	for _, file := range []string{"text", "tools", "usage_in_content", "error"} {
		b, _ := os.ReadFile(filepath.Join("testdata", "stream", file+".sse"))
		for _, line := range bytes.Split(b, []byte("\n")) {
			if d, ok := bytes.CutPrefix(bytes.TrimSpace(line), []byte("data: ")); ok {
				f.Add(d)
			}
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, want := range []bool{true, false} {
			tr := NewPassThroughStream("svc", want)
			out, _, ferr := tr.Feed(nil, nil, data)
			if ferr != nil {
				_ = tr.Fail(nil, ferr)
				continue
			}
			out = tr.Finish(out)
			if !jsontext.Value(data).IsValid() {
				continue
			}
			for _, line := range bytes.Split(out, []byte("\n")) {
				if d, ok := bytes.CutPrefix(line, []byte("data: ")); ok && string(d) != "[DONE]" && !jsontext.Value(d).IsValid() {
					t.Fatalf("invalid output %s from %s", d, data)
				}
			}
		}
		dec := NewStreamDecoder()
		_, _ = dec.Decode(nil, nil, data)
	})
}

// FuzzPassThroughReuse: a chunk after another (the second often the first
// with another generated string, which Feed meters and rewrites with the
// first's walk) is translated and metered exactly as by a translator that
// walks it whole.
func FuzzPassThroughReuse(f *testing.F) {
	const head = `{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[`
	const tail = `}}],"usage":null}`
	for _, pair := range [][2]string{
		{head + `{"index":0,"delta":{"content":"a"` + tail, head + `{"index":0,"delta":{"content":"b\"c\u00e9"` + tail},
		{head + `{"index":0,"delta":{"content":"a"` + tail, head + `{"index":0,"delta":{"content":""` + tail},
		{head + `{"index":0,"delta":{"content":null` + tail, head + `{"index":0,"delta":{"content":"xyz"` + tail},
		{head + `{"index":0,"delta":{"content":"a"` + tail, head + `{"index":0,"delta":{"content":"b"}}],"usage":{"prompt_tokens":3,"completion_tokens":2}}`},
		{head + `{"index":0,"delta":{"content":"a"` + tail, head + `{"index":0,"delta":{"content":"b",` + tail},
		{head + `{"index":0,"delta":{"content":"a"` + tail, head + `{"index":0,"delta":{"content":"b" "c"` + tail},
		{head + `{"index":0,"delta":{"content":"a"` + tail, head + `{"index":0,"delta":{"content":"b"` + tail[:len(tail)-1]},
		{head + `{"index":0,"delta":{"content":"a"` + tail, head + `{"index":0,"delta":{"content":1` + tail},
		{head + `{"index":0,"delta":{"content":"a"` + tail, head + `{"index":0,"delta":{"content":"a"}}],"model":"ab"}`}, // a tail as long
		{head + `{"index":0,"delta":{"content":"a"` + tail, head + `],"error":{"message":"overloaded"}}`},
		{head + `{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\""}}]` + tail, head + `{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"city"}}]` + tail},
		{head + `{"delta":{"function_call":{"arguments":"{"}` + tail, head + `{"delta":{"function_call":{"arguments":"}"}` + tail},
		{head + `{"delta":{"content":"a","annotations":[{"type":"url_citation"}]` + tail, head + `{"delta":{"content":"bc","annotations":[{"type":"url_citation"}]` + tail},
		{`{"usage":{"prompt_tokens":3,"completion_tokens":2},` + head[1:] + `{"delta":{"content":"a"` + tail, `{"usage":{"prompt_tokens":3,"completion_tokens":2},` + head[1:] + `{"delta":{"content":"abc"` + tail},
		{`{"choices":[{"delta":{"content":"a"}}],"usage":null,"model":"m"}`, `{"choices":[{"delta":{"content":"abcd"}}],"usage":null,"model":"m"}`},
		{head + `{"index":0,"delta":{"content":"a","refusal":"b"` + tail, head + `{"index":0,"delta":{"content":"a","refusal":"cd"` + tail},
		{head + `],"usage":null}`, head + `]}`},
	} {
		f.Add([]byte(pair[0]), []byte(pair[1]))
	}
	f.Fuzz(func(t *testing.T, a, b []byte) {
		for _, want := range []bool{true, false} {
			reused := NewPassThroughStream("svc", want).(*passThrough)
			whole := NewPassThroughStream("svc", want).(*passThrough)
			_, _, errA := reused.Feed(nil, nil, a)
			_, _, _ = whole.Feed(nil, nil, a)
			whole.last.reset() // walk b whole
			got, doneGot, errGot := reused.Feed(nil, nil, b)
			exp, doneExp, errExp := whole.Feed(nil, nil, b)
			if !bytes.Equal(got, exp) || doneGot != doneExp || (errGot == nil) != (errExp == nil) {
				t.Fatalf("after %q (err %v), %q: reused %q %v %v, whole %q %v %v", a, errA, b, got, doneGot, errGot, exp, doneExp, errExp)
			}
			ug, okg := reused.Usage()
			ue, oke := whole.Usage()
			if ug != ue || okg != oke || reused.OutputBytes() != whole.OutputBytes() ||
				!bytes.Equal(reused.Finish(nil), whole.Finish(nil)) {
				t.Fatalf("after %q, %q: reused %+v %v %d, whole %+v %v %d", a, b, ug, okg, reused.OutputBytes(), ue, oke, whole.OutputBytes())
			}
		}
	})
}

// FuzzStreamDecoderReuse: three chunks in a row after a start that opened a
// tool call (the third often the first with another generated string,
// which Decode decodes with the first's event; the second one that may
// change the decoder's state) decode into the same events as by a decoder
// that decodes every chunk whole.
func FuzzStreamDecoderReuse(f *testing.F) {
	const head = `{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[`
	const tail = `}],"usage":null}`
	text := func(s string) string { return head + `{"index":0,"delta":{"content":` + s + `}` + tail }
	args := func(i int, s string) string {
		return head + `{"index":0,"delta":{"tool_calls":[{"index":` + strconv.Itoa(i) + `,"function":{"arguments":` + s + `}}]}` + tail
	}
	open := head + `{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"f","arguments":""}}]}` + tail
	for _, seq := range [][3]string{
		{text(`"a"`), text(`"b"`), text(`"c\"d"`)},
		{text(`"a"`), text(`"b"`), text(`""`)},
		{open, args(0, `"{\""`), args(0, `"x"`)},
		{args(0, `"{"`), head + `{"index":0,"delta":{},"finish_reason":"tool_calls"` + tail, args(0, `"}"`)},
		{text(`"a"`), head + `{"index":0,"delta":{"content":"b"},"finish_reason":"stop"` + tail, text(`"c"`)},
		{text(`"a"`), open, text(`"c"`)},
		{head + `{"index":0,"delta":{"reasoning_content":"think"}` + tail, text(`"a"`), head + `{"index":0,"delta":{"reasoning_content":"more"}` + tail},
		{head + `{"index":1,"delta":{"content":"a"}` + tail, text(`"b"`), head + `{"index":1,"delta":{"content":"c"}` + tail},
		{text(`"a"`), text(`"b"`), head + `{"index":0,"delta":{"content":"c"}}],"usage":{"prompt_tokens":2,"completion_tokens":1}}`},
		{text(`"a"`), text(`"b"`), head + `{"index":0,"delta":{"content":"c"}}],"model":"ab"}`}, // a tail as long
		{text(`"a"`), text(`"b"`), text(`"c" "d"`)},
		{text(`"a"`), text(`"b"`), text(`1`)},
		{head + `{"index":0,"delta":{"tool_calls":[{"index":1,"id":"call_2","function":{"name":"g","arguments":""}}]}` + tail, args(1, `"x"`), args(1, `"y"`)},
		{head + `{"index":0,"delta":{"reasoning_content":"r","content":"a"}` + tail, head + `{"index":0,"delta":{"reasoning_content":"r","content":"b"}` + tail, text(`"c"`)},
	} {
		f.Add([]byte(seq[0]), []byte(seq[1]), []byte(seq[2]))
	}
	f.Fuzz(func(t *testing.T, a, b, c []byte) {
		reused := NewStreamDecoder().(*streamDecoder)
		whole := NewStreamDecoder().(*streamDecoder)
		// started, with tool call 0 open
		_, _ = reused.Decode(nil, nil, []byte(open))
		_, _ = whole.Decode(nil, nil, []byte(open))
		for _, data := range [][]byte{a, b, c} {
			got, errGot := reused.Decode(nil, nil, data)
			whole.last.reset() // decode data whole
			exp, errExp := whole.Decode(nil, nil, data)
			if g, e := eventsText(got), eventsText(exp); g != e || (errGot == nil) != (errExp == nil) {
				t.Fatalf("in %q, %q, %q: at %q reused %s %v, whole %s %v", a, b, c, data, g, errGot, e, errExp)
			}
		}
	})
}

// eventsText prints IR events for comparison (Delta as text).
func eventsText(evs []formats.Event) string {
	var s strings.Builder
	for _, ev := range evs {
		delta := string(ev.Delta)
		ev.Delta = nil
		fmt.Fprintf(&s, "%+v %q\n", ev, delta)
	}
	return s.String()
}

// FuzzStreamDecoder: an OpenAI upstream's chunk of any shape, translated for
// an Anthropic-style consumer through the IR, never panics, and an accepted
// chunk yields IR events the OpenAI encoder renders as valid JSON.
func FuzzStreamDecoder(f *testing.F) {
	for _, file := range []string{"text", "tools", "usage_in_content", "error"} {
		b, _ := os.ReadFile(filepath.Join("testdata", "stream", file+".sse"))
		for _, line := range bytes.Split(b, []byte("\n")) {
			if d, ok := bytes.CutPrefix(bytes.TrimSpace(line), []byte("data: ")); ok {
				f.Add(d)
			}
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		tr := formats.Translate(NewStreamDecoder(), NewStreamEncoder("svc", true))
		out, done, ferr := tr.Feed(nil, nil, data)
		switch {
		case ferr != nil:
			if ferr.Message == "" {
				t.Fatalf("error without a message: %+v", ferr)
			}
			out = tr.Fail(out, ferr)
		case done:
			out = tr.Finish(out)
		default:
			out, _, _ = tr.Feed(out, nil, []byte("[DONE]"))
			out = tr.Finish(out)
		}
		for _, line := range bytes.Split(out, []byte("\n")) {
			if d, ok := bytes.CutPrefix(line, []byte("data: ")); ok && string(d) != "[DONE]" && !jsontext.Value(d).IsValid() {
				t.Fatalf("invalid JSON event %q from %q", d, data)
			}
		}
	})
}

// FuzzDecodeChatResponse: any upstream answer is decoded or refused with
// an upstream error, never a panic; a decoded one renders as valid JSON.
func FuzzDecodeChatResponse(f *testing.F) {
	addFixtures(f, "response")
	f.Fuzz(func(t *testing.T, body []byte) {
		resp, ferr := DecodeChatResponse(body)
		if ferr != nil {
			if ferr.Kind != formats.KindUpstream {
				t.Fatalf("kind %v", ferr.Kind)
			}
			return
		}
		if out := RenderChatResponse(nil, resp, "svc"); !jsontext.Value(out).IsValid() {
			t.Fatalf("rendered invalid JSON %s", out)
		}
		if out, _, ferr := PassThroughResponse(nil, body, "svc"); ferr == nil && !jsontext.Value(out).IsValid() {
			t.Fatalf("pass-through made invalid JSON %s", out)
		}
	})
}
