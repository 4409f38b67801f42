package openai

import (
	"bytes"
	"os"
	"path/filepath"
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

// FuzzPassThroughResume: a chunk after another (the second often repeating
// the first's head, where Feed resumes the first's walk) is translated and
// metered exactly as by a translator that walks it whole.
func FuzzPassThroughResume(f *testing.F) {
	const head = `{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[`
	first := head + `{"index":0,"delta":{"content":"a"}}],"usage":null}`
	for _, second := range []string{
		head + `{"index":0,"delta":{"content":"b\"c"}}],"usage":null}`,
		head + `{"index":0,"delta":{"tool_calls":[{"function":{"arguments":"{}"}}]}}]}`,
		head + `],"usage":{"prompt_tokens":3,"completion_tokens":2}}`,
		head + `{"delta":{"content":"x"}}],"usage":{"prompt_tokens":3,"completion_tokens":2}}`,
		head + `],"error":{"message":"overloaded"}}`,
		head + `{"delta":{"annotations":[{"type":"url_citation"}]}}]}`,
		head + `{"delta"`,
		head + `]`,
		head,
		head[:len(head)-1] + `{}}`,
		head[:len(head)-1] + ` [{"delta":{"content":"x"}}]}`,
		`{"usage":null,` + head[1:] + `]}`,
	} {
		f.Add([]byte(first), []byte(second))
	}
	f.Add([]byte(`{"usage":null,`+head[1:]+`]}`), []byte(`{"usage":null,`+head[1:]+`],"x":1}`))
	f.Fuzz(func(t *testing.T, a, b []byte) {
		for _, want := range []bool{true, false} {
			resumed := NewPassThroughStream("svc", want).(*passThrough)
			whole := NewPassThroughStream("svc", want).(*passThrough)
			_, _, errA := resumed.Feed(nil, nil, a)
			_, _, _ = whole.Feed(nil, nil, a)
			whole.head = nil // walk b from its start
			got, doneGot, errGot := resumed.Feed(nil, nil, b)
			exp, doneExp, errExp := whole.Feed(nil, nil, b)
			if !bytes.Equal(got, exp) || doneGot != doneExp || (errGot == nil) != (errExp == nil) {
				t.Fatalf("after %q (err %v), %q: resumed %q %v %v, whole %q %v %v", a, errA, b, got, doneGot, errGot, exp, doneExp, errExp)
			}
			ug, okg := resumed.Usage()
			ue, oke := whole.Usage()
			if ug != ue || okg != oke || resumed.OutputBytes() != whole.OutputBytes() ||
				!bytes.Equal(resumed.Finish(nil), whole.Finish(nil)) {
				t.Fatalf("after %q, %q: resumed %+v %v %d, whole %+v %v %d", a, b, ug, okg, resumed.OutputBytes(), ue, oke, whole.OutputBytes())
			}
		}
	})
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
