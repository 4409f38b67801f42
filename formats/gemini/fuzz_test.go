package gemini

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/modelgate/modelgate/formats"
	"github.com/modelgate/modelgate/formats/openai"
)

func addFixtures(f *testing.F, dir string) {
	paths, _ := filepath.Glob(filepath.Join("testdata", dir, "*.json"))
	for _, p := range paths {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
}

// addElements adds the data of every event of the stream fixtures.
func addElements(f *testing.F) {
	paths, _ := filepath.Glob(filepath.Join("testdata", "stream", "*.sse"))
	for _, p := range paths {
		b, _ := os.ReadFile(p)
		for _, line := range bytes.Split(b, []byte("\n")) {
			if d, ok := bytes.CutPrefix(bytes.TrimSpace(line), []byte("data: ")); ok {
				f.Add(d)
			}
		}
	}
}

// FuzzParseGenerateRequest: any body is answered without a panic and with
// a 400 at worst; an accepted one rewrites into a valid request with the
// cap, and converts to the IR and to both upstream formats.
func FuzzParseGenerateRequest(f *testing.F) {
	addFixtures(f, "request")
	addFixtures(f, "rewrite")
	f.Add([]byte(cliRequest))
	f.Fuzz(func(t *testing.T, body []byte) {
		if _, ferr := ParseCountTokensRequest(body, "m"); ferr != nil && ferr.Status() != 400 {
			t.Fatalf("count status %d", ferr.Status())
		}
		req, ferr := ParseGenerateRequest(body, "m", true)
		if ferr != nil {
			if ferr.Status() != 400 {
				t.Fatalf("status %d", ferr.Status())
			}
			return
		}
		if req.InputBound() < int64(formats.BaseTokens) {
			t.Fatalf("bound %d", req.InputBound())
		}
		out, err := RewriteGenerateRequest(nil, body, 77)
		if err != nil {
			t.Fatalf("rewrite: %v", err)
		}
		req2, ferr := ParseGenerateRequest(out, "m", true)
		if ferr != nil {
			t.Fatalf("rewritten body rejected: %v\n%s\n%s", ferr, body, out)
		}
		if n, _ := req2.MaxTokens(); n != 77 {
			t.Fatalf("rewrite lost the cap: %s", out)
		}
		ir, ferr := req.ToIR()
		if ferr != nil {
			if ferr.Status() != 400 {
				t.Fatalf("ToIR status %d", ferr.Status())
			}
			return
		}
		if r, ferr := RenderGenerateRequest(ir, nil); ferr == nil && !jsontext.Value(r).IsValid() {
			t.Fatalf("rendered invalid JSON %s", r)
		}
		ir, _ = req.ToIR()
		if r, ferr := openai.RenderChatRequest(ir, "up"); ferr == nil && !jsontext.Value(r).IsValid() {
			t.Fatalf("rendered invalid JSON %s", r)
		}
	})
}

// FuzzStreamDecoder: any element is decoded without a panic, and the
// translated output of a valid one is valid; whole-response decoding of the
// same bytes does not panic either.
func FuzzStreamDecoder(f *testing.F) {
	addElements(f)
	addFixtures(f, "response")
	f.Fuzz(func(t *testing.T, data []byte) {
		store := newStore()
		tr := formats.Translate(NewStreamDecoder(store, ""), openai.NewStreamEncoder("svc", true))
		out, done, ferr := tr.Feed(nil, nil, data)
		switch {
		case ferr != nil:
			out = tr.Fail(out, ferr)
		case done:
			out = tr.Finish(out)
		}
		_ = out
		tr2 := formats.Translate(NewStreamDecoder(nil, ""), NewStreamEncoder("svc", false))
		out, done, ferr = tr2.Feed(nil, nil, data)
		switch {
		case ferr != nil:
			out = tr2.Fail(out, ferr)
		case done:
			out = tr2.Finish(out)
		default:
			out = tr2.Fail(out, formats.NewError(formats.KindUpstream, "cut"))
		}
		if !jsontext.Value(out).IsValid() {
			t.Fatalf("invalid array %s from %s", out, data)
		}
		if resp, ferr := DecodeGenerateResponse(data, store, ""); ferr == nil {
			r := RenderGenerateResponse(nil, resp, "svc")
			if !jsontext.Value(r).IsValid() {
				t.Fatalf("invalid response %s", r)
			}
		}
		if r, _, ferr := PassThroughResponse(nil, data, "svc"); ferr == nil && !jsontext.Value(r).IsValid() {
			t.Fatalf("invalid pass-through %s", r)
		}
	})
}

// FuzzPassThroughStream: any element is handled without a panic; a valid
// JSON element yields a valid client stream in both framings.
func FuzzPassThroughStream(f *testing.F) {
	addElements(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, isSSE := range []bool{true, false} {
			tr := NewPassThroughStream("svc", isSSE)
			out, done, ferr := tr.Feed(nil, nil, data)
			switch {
			case ferr != nil:
				out = tr.Fail(out, ferr)
			case done:
				out = tr.Finish(out)
			default:
				out = tr.Fail(out, formats.NewError(formats.KindUpstream, "cut"))
			}
			if !jsontext.Value(data).IsValid() {
				continue
			}
			if !isSSE {
				if !jsontext.Value(out).IsValid() {
					t.Fatalf("invalid array %s from %s", out, data)
				}
				continue
			}
			for _, ev := range bytes.Split(out, []byte("\r\n\r\n")) {
				if d, ok := bytes.CutPrefix(ev, []byte("data: ")); ok && !jsontext.Value(d).IsValid() {
					t.Fatalf("invalid element %s from %s", d, data)
				}
			}
		}
	})
}

// FuzzDecodeGenerateResponse: any upstream answer is decoded or refused
// with an upstream error, never a panic; a decoded one renders as valid
// JSON in the Gemini and OpenAI shapes.
func FuzzDecodeGenerateResponse(f *testing.F) {
	addFixtures(f, "response")
	f.Fuzz(func(t *testing.T, body []byte) {
		resp, ferr := DecodeGenerateResponse(body, nil, "")
		if ferr != nil {
			if ferr.Kind != formats.KindUpstream {
				t.Fatalf("kind %v", ferr.Kind)
			}
			return
		}
		for _, out := range [][]byte{RenderGenerateResponse(nil, resp, "svc"), openai.RenderChatResponse(nil, resp, "svc")} {
			if !jsontext.Value(out).IsValid() {
				t.Fatalf("rendered invalid JSON %s", out)
			}
		}
		if out, _, ferr := PassThroughResponse(nil, body, "svc"); ferr == nil && !jsontext.Value(out).IsValid() {
			t.Fatalf("pass-through made invalid JSON %s", out)
		}
	})
}
