package openai

import (
	"strconv"
	"strings"
	"testing"

	"github.com/modelgate/modelgate/formats"
	"github.com/modelgate/modelgate/formats/tokencount"
)

// benchChat is a typical small chat request (~1 KB).
var benchChat = []byte(`{"model":"gpt-4o-mini","messages":[{"role":"system","content":"You are a helpful assistant. Answer briefly and precisely; cite sources when you can."},{"role":"user","content":"What is the capital of France, and what is it famous for?"},{"role":"assistant","content":"Paris. It is famous for the Eiffel Tower, the Louvre, its cafés and its cuisine."},{"role":"user","content":"Give me three museums worth visiting there, with one sentence each about why."}],"temperature":0.7,"max_tokens":512,"stream":true,"stream_options":{"include_usage":true},"user":"user-1234"}`)

// benchAgent is an agent-style request: 12 tools, 30 turns (~25 KB).
var benchAgent = func() []byte {
	var b strings.Builder
	b.WriteString(`{"model":"gpt-4.1","stream":true,"max_completion_tokens":32000,"messages":[{"role":"system","content":"` + strings.Repeat("You are a coding agent. Follow the repository's conventions. ", 20) + `"}`)
	for i := range 10 {
		n := strconv.Itoa(i)
		b.WriteString(`,{"role":"user","content":"Please look at file ` + n + ` and fix the failing test; the error says \"expected 3, got 4\" on line ` + n + `."}`)
		b.WriteString(`,{"role":"assistant","content":null,"tool_calls":[{"id":"call_` + n + `","type":"function","function":{"name":"read_file","arguments":"{\"path\":\"src/file` + n + `.go\"}"}}]}`)
		b.WriteString(`,{"role":"tool","tool_call_id":"call_` + n + `","content":"` + strings.Repeat(`package main\nfunc f() int { return 4 }\n`, 20) + `"}`)
	}
	b.WriteString(`],"tools":[`)
	for i := range 12 {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`{"type":"function","function":{"name":"tool_` + strconv.Itoa(i) + `","description":"Does thing number ` + strconv.Itoa(i) + ` to the workspace.","parameters":{"type":"object","properties":{"path":{"type":"string","description":"A path."},"content":{"type":"string"}},"required":["path"]}}}`)
	}
	b.WriteString(`],"tool_choice":"auto","parallel_tool_calls":true}`)
	return []byte(b.String())
}()

func BenchmarkParseChatRequest(b *testing.B) {
	for _, bc := range []struct {
		name string
		body []byte
	}{{"chat", benchChat}, {"agent", benchAgent}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(bc.body)))
			for b.Loop() {
				if _, err := ParseChatRequest(bc.body); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkRewriteChatRequest(b *testing.B) {
	for _, bc := range []struct {
		name string
		body []byte
	}{{"chat", benchChat}, {"agent", benchAgent}} {
		b.Run(bc.name, func(b *testing.B) {
			dst := make([]byte, 0, len(bc.body)+64)
			b.ReportAllocs()
			b.SetBytes(int64(len(bc.body)))
			for b.Loop() {
				out, err := RewriteChatRequest(dst[:0], bc.body, "gpt-4o-mini-2024-07-18", 400, true)
				if err != nil || len(out) == 0 {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkToIR is the translated path's parse (for comparison).
func BenchmarkToIR(b *testing.B) {
	req, _ := ParseChatRequest(benchAgent)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := req.ToIR(); err != nil {
			b.Fatal(err)
		}
	}
}

var benchChunk = []byte(`{"id":"chatcmpl-AbC123","object":"chat.completion.chunk","created":1735689600,"model":"gpt-4o-mini-2024-07-18","system_fingerprint":"fp_0ba0d124f1","choices":[{"index":0,"delta":{"content":" museum"},"logprobs":null,"finish_reason":null}],"usage":null}`)

// BenchmarkPassThroughChunk is the same-format stream's cost per chunk.
func BenchmarkPassThroughChunk(b *testing.B) {
	for _, want := range []bool{true, false} {
		b.Run("include_usage="+strconv.FormatBool(want), func(b *testing.B) {
			benchFeed(b, NewPassThroughStream("gpt-4o-mini", want))
		})
	}
}

// BenchmarkPassThroughChunkMetered is BenchmarkPassThroughChunk with the
// token meter every stream has: exact (o200k_base, counted in batches: the
// cost of a stream longer than a batch) or the bound.
func BenchmarkPassThroughChunkMetered(b *testing.B) {
	for _, exact := range []bool{true, false} {
		b.Run("exact="+strconv.FormatBool(exact), func(b *testing.B) {
			tr := NewPassThroughStream("gpt-4o-mini", true)
			tr.(formats.Metered).SetTokenMeter(tokencount.NewMeter(exact))
			benchFeed(b, tr)
		})
	}
}

// benchFeed feeds benchChunk to tr, over and over.
func benchFeed(b *testing.B, tr formats.StreamTranslator) {
	dst := make([]byte, 0, 512)
	b.ReportAllocs()
	b.SetBytes(int64(len(benchChunk)))
	for b.Loop() {
		out, done, err := tr.Feed(dst[:0], nil, benchChunk)
		if err != nil || done || len(out) == 0 {
			b.Fatal(err)
		}
	}
}

// BenchmarkTranslateChunk is the decoder ∘ encoder cost per chunk.
func BenchmarkTranslateChunk(b *testing.B) {
	tr := formats.Translate(NewStreamDecoder(), NewStreamEncoder("svc", true))
	dst := make([]byte, 0, 512)
	b.ReportAllocs()
	b.SetBytes(int64(len(benchChunk)))
	for b.Loop() {
		out, _, err := tr.Feed(dst[:0], nil, benchChunk)
		if err != nil || len(out) == 0 {
			b.Fatal(err)
		}
	}
}

var benchResponse = []byte(`{"id":"chatcmpl-8f3a","object":"chat.completion","created":1735689600,"model":"gpt-4o-mini-2024-07-18","choices":[{"index":0,"message":{"role":"assistant","content":"The Louvre holds the Mona Lisa; the Musée d'Orsay has the finest Impressionist collection; the Centre Pompidou is Europe's largest modern art museum.","refusal":null,"annotations":[]},"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":62,"completion_tokens":41,"total_tokens":103,"prompt_tokens_details":{"cached_tokens":0,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}},"service_tier":"default","system_fingerprint":"fp_0ba0d124f1"}`)

func BenchmarkPassThroughResponse(b *testing.B) {
	dst := make([]byte, 0, len(benchResponse)+64)
	b.ReportAllocs()
	b.SetBytes(int64(len(benchResponse)))
	for b.Loop() {
		out, u, err := PassThroughResponse(dst[:0], benchResponse, "gpt-4o-mini")
		if err != nil || len(out) == 0 || u.Input != 62 {
			b.Fatal(err)
		}
	}
}
