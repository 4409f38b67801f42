package anthropic

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/modelgate/modelgate/formats"
	"github.com/modelgate/modelgate/formats/openai"
	"github.com/modelgate/modelgate/formats/sse"
)

func addFixtures(f *testing.F, dir string) {
	paths, _ := filepath.Glob(filepath.Join("testdata", dir, "*.json"))
	for _, p := range paths {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
}

// FuzzParseMessagesRequest: any body is answered without a panic; an
// accepted one rewrites into a valid request, converts to the IR, and
// renders for Anthropic and OpenAI upstreams; every error is a 400.
func FuzzParseMessagesRequest(f *testing.F) {
	addFixtures(f, "request")
	addFixtures(f, "rewrite")
	f.Add([]byte(`{"model":"m","max_tokens":9,"messages":[{"role":"system","content":"s"},{"role":"user","content":[{"type":"tool_result","tool_use_id":"x","content":[{"type":"image","source":{"type":"url","url":"https://x"}}]}]}],"thinking":{"type":"enabled","budget_tokens":1024}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, count := range []bool{false, true} {
			parse := ParseMessagesRequest
			if count {
				parse = ParseCountTokensRequest
			}
			req, ferr := parse(body)
			if ferr != nil {
				if ferr.Status() != 400 || ferr.Message == "" {
					t.Fatalf("error %+v", ferr)
				}
				continue
			}
			if req.InputBound() < int64(formats.BaseTokens) || req.InputEstimate() > req.InputBound() {
				t.Fatalf("bound %d estimate %d", req.InputBound(), req.InputEstimate())
			}
			var out []byte
			var err error
			if count {
				out, err = RewriteCountTokensRequest(nil, body, "up")
			} else {
				out, err = RewriteMessagesRequest(nil, body, "up", 77)
			}
			if err != nil {
				t.Fatalf("rewrite: %v", err)
			}
			if !jsontext.Value(out).IsValid() {
				t.Fatalf("rewrite made invalid JSON:\n%s\n%s", body, out)
			}
			if req2, ferr := parse(out); ferr == nil {
				if req2.Model != "up" || (!count && req2.MaxTokens() > 77) {
					t.Fatalf("rewrite lost something: %s", out)
				}
			}
			for _, target := range []string{"anthropic", "openai"} {
				ir, ferr := req.ToIR()
				if ferr != nil {
					if ferr.Status() != 400 {
						t.Fatalf("ToIR: %+v", ferr)
					}
					break
				}
				ir.MaxTokens = 77
				var r []byte
				if target == "anthropic" {
					r, ferr = RenderMessagesRequest(ir, "up")
				} else {
					r, ferr = openai.RenderChatRequest(ir, "up")
				}
				if ferr != nil {
					if ferr.Status() != 400 {
						t.Fatalf("render: %+v", ferr)
					}
					continue
				}
				if !jsontext.Value(r).IsValid() {
					t.Fatalf("rendered invalid JSON %s", r)
				}
			}
		}
	})
}

// streamSeeds adds the events of the stream fixtures.
func streamSeeds(f *testing.F) {
	paths, _ := filepath.Glob(filepath.Join("testdata", "stream", "*.sse"))
	for _, p := range paths {
		b, _ := os.ReadFile(p)
		r := sse.NewReader(bytes.NewReader(b), 1<<16)
		for {
			ev, data, err := r.Next()
			if err != nil {
				break
			}
			f.Add(string(ev), bytes.Clone(data))
		}
	}
}

// FuzzStreamDecoder: any event/data pair is decoded without a panic, every
// error a *formats.Error of the upstream, and the events render for an
// OpenAI and an Anthropic client.
func FuzzStreamDecoder(f *testing.F) {
	streamSeeds(f)
	f.Fuzz(func(t *testing.T, event string, data []byte) {
		for _, enc := range []formats.StreamEncoder{openai.NewStreamEncoder("svc", true), NewStreamEncoder("svc")} {
			tr := formats.Translate(NewStreamDecoder(), enc)
			start := []byte(`{"type":"message_start","message":{"id":"msg_1","model":"m","usage":{"input_tokens":1}}}`)
			out, _, ferr := tr.Feed(nil, []byte("message_start"), start)
			if ferr != nil {
				t.Fatal(ferr)
			}
			out, done, ferr := tr.Feed(out, []byte(event), data)
			if ferr != nil {
				if ferr.Message == "" {
					t.Fatalf("error without message %+v", ferr)
				}
				out = tr.Fail(out, ferr)
			} else if done {
				out = tr.Finish(out)
			} else {
				out, _, _ = tr.Feed(out, []byte("message_stop"), []byte(`{"type":"message_stop"}`))
				out = tr.Finish(out)
			}
			checkEvents(t, out)
		}
		// a second decoder fed the event twice and out of order
		d := NewStreamDecoder()
		evs, _ := d.Decode(nil, []byte(event), data)
		_, _ = d.Decode(evs[:0], []byte(event), data)
	})
}

// checkEvents checks that every SSE data line is JSON (or [DONE]).
func checkEvents(t *testing.T, out []byte) {
	t.Helper()
	r := sse.NewReader(bytes.NewReader(out), 1<<20)
	for {
		_, data, err := r.Next()
		if err != nil {
			return
		}
		if string(data) != "[DONE]" && !jsontext.Value(data).IsValid() {
			t.Fatalf("invalid event %s in\n%s", data, out)
		}
	}
}

// FuzzPassThroughStream: any event is handled without a panic; a valid
// JSON event yields valid JSON.
func FuzzPassThroughStream(f *testing.F) {
	streamSeeds(f)
	f.Fuzz(func(t *testing.T, event string, data []byte) {
		tr := NewPassThroughStream("svc")
		out, done, ferr := tr.Feed(nil, []byte(event), data)
		if ferr != nil {
			if ferr.Message == "" {
				t.Fatalf("error without message %+v", ferr)
			}
			out = tr.Fail(out, ferr)
		} else if done {
			out = tr.Finish(out)
		}
		if jsontext.Value(data).IsValid() && !bytes.ContainsAny(data, "\r\n") {
			checkEvents(t, out)
		}
		if _, ok := tr.Usage(); ok {
			if u, _ := tr.Usage(); u.Input < 0 || u.Output < 0 {
				t.Fatalf("usage %+v", u)
			}
		}
	})
}

// FuzzDecodeMessagesResponse: any upstream answer is decoded or refused with
// an upstream error, never a panic; a decoded one renders as valid JSON in
// the Anthropic and OpenAI shapes.
func FuzzDecodeMessagesResponse(f *testing.F) {
	addFixtures(f, "response")
	f.Fuzz(func(t *testing.T, body []byte) {
		resp, ferr := DecodeMessagesResponse(body)
		if ferr != nil {
			if ferr.Kind != formats.KindUpstream {
				t.Fatalf("kind %v", ferr.Kind)
			}
			return
		}
		for _, out := range [][]byte{RenderMessagesResponse(nil, resp, "svc"), openai.RenderChatResponse(nil, resp, "svc")} {
			if !jsontext.Value(out).IsValid() {
				t.Fatalf("rendered invalid JSON %s", out)
			}
		}
		if out, _, ferr := PassThroughResponse(nil, body, "svc"); ferr == nil && !jsontext.Value(out).IsValid() {
			t.Fatalf("pass-through made invalid JSON %s", out)
		}
	})
}
