package anthropic

import (
	"strconv"
	"strings"
	"testing"

	"github.com/modelgate/modelgate/formats"
	"github.com/modelgate/modelgate/formats/openai"
)

// benchSmall is a typical small Messages request (~1 KB).
var benchSmall = []byte(`{"model":"claude-sonnet-4-5","max_tokens":1024,"system":"You are a helpful assistant. Answer briefly and precisely; cite sources when you can.","messages":[{"role":"user","content":"What is the capital of France, and what is it famous for?"},{"role":"assistant","content":"Paris. It is famous for the Eiffel Tower, the Louvre, its cafés and its cuisine."},{"role":"user","content":"Give me three museums worth visiting there, with one sentence each about why."}],"temperature":0.7,"stream":true,"metadata":{"user_id":"user-1234"}}`)

// benchAgent is a Claude Code-style request: cached system blocks, 12
// tools, 30 turns of tool use with thinking (~40 KB).
var benchAgent = func() []byte {
	var b strings.Builder
	b.WriteString(`{"model":"claude-sonnet-4-5","max_tokens":32000,"stream":true,"thinking":{"type":"adaptive"},"output_config":{"effort":"high"},"metadata":{"user_id":"user_abc_account__session_123"},`)
	b.WriteString(`"system":[{"type":"text","text":"You are Claude Code, Anthropic's official CLI for Claude.","cache_control":{"type":"ephemeral"}},{"type":"text","text":"` + strings.Repeat("You are a coding agent. Follow the repository's conventions. ", 20) + `","cache_control":{"type":"ephemeral"}}],"messages":[`)
	for i := range 10 {
		n := strconv.Itoa(i)
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`{"role":"user","content":[{"type":"text","text":"Please look at file ` + n + ` and fix the failing test; the error says \"expected 3, got 4\" on line ` + n + `."}]}`)
		b.WriteString(`,{"role":"assistant","content":[{"type":"thinking","thinking":"I should read the file first.","signature":"EqQBCgIYAhIM1gbcDa9GJwZA2b3h` + n + `"},{"type":"text","text":"Reading it."},{"type":"tool_use","id":"toolu_0` + n + `","name":"Read","input":{"file_path":"/repo/src/file` + n + `.go"}}]}`)
		b.WriteString(`,{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_0` + n + `","content":"` + strings.Repeat(`package main\nfunc f() int { return 4 }\n`, 20) + `"}]}`)
	}
	b.WriteString(`],"tools":[`)
	for i := range 12 {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`{"name":"tool_` + strconv.Itoa(i) + `","description":"Does thing number ` + strconv.Itoa(i) + ` to the workspace.","input_schema":{"type":"object","properties":{"path":{"type":"string","description":"A path."},"content":{"type":"string"}},"required":["path"],"additionalProperties":false}}`)
	}
	b.WriteString(`],"context_management":{"edits":[{"type":"clear_thinking_20251015","keep":"all"}]}}`)
	return []byte(b.String())
}()

// benchAgentSystem is benchAgent with a role "system" message (Claude Code
// for a model it does not know), which the rewrite hoists.
var benchAgentSystem = []byte(strings.Replace(string(benchAgent), `"messages":[`, `"messages":[{"role":"system","content":"Extra instructions."},`, 1))

func BenchmarkParseMessagesRequest(b *testing.B) {
	for _, bc := range []struct {
		name string
		body []byte
	}{{"small", benchSmall}, {"agent", benchAgent}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(bc.body)))
			for b.Loop() {
				if _, err := ParseMessagesRequest(bc.body); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkToIR is the translated path's parse (for comparison).
func BenchmarkToIR(b *testing.B) {
	req, _ := ParseMessagesRequest(benchAgent)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := req.ToIR(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRenderMessagesRequest renders an OpenAI agent's IR for an
// Anthropic upstream.
func BenchmarkRenderMessagesRequest(b *testing.B) {
	req, _ := ParseMessagesRequest(benchAgent)
	b.ReportAllocs()
	for b.Loop() {
		ir, _ := req.ToIR()
		if _, err := RenderMessagesRequest(ir, "claude"); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkRewriteMessagesRequest(b *testing.B) {
	for _, bc := range []struct {
		name string
		body []byte
	}{{"small", benchSmall}, {"agent", benchAgent}, {"agent_system_messages", benchAgentSystem}} {
		b.Run(bc.name, func(b *testing.B) {
			dst := make([]byte, 0, len(bc.body)+128)
			b.ReportAllocs()
			b.SetBytes(int64(len(bc.body)))
			for b.Loop() {
				out, err := RewriteMessagesRequest(dst[:0], bc.body, "claude-sonnet-4-5-20250929", 8000)
				if err != nil || len(out) == 0 {
					b.Fatal(err)
				}
			}
		})
	}
}

var (
	benchDeltaName = []byte("content_block_delta")
	benchDelta     = []byte(`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":" museum, which"}}`)
	benchStartName = []byte("message_start")
	benchStart     = []byte(`{"type":"message_start","message":{"id":"msg_01XFDUDYJgAACzvnptvVoYEL","type":"message","role":"assistant","model":"claude-sonnet-4-5-20250929","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":25,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":1}}}`)
)

// BenchmarkPassThroughEvent is the same-format stream's cost per event.
func BenchmarkPassThroughEvent(b *testing.B) {
	for _, bc := range []struct {
		name        string
		event, data []byte
	}{{"delta", benchDeltaName, benchDelta}, {"message_start", benchStartName, benchStart}} {
		b.Run(bc.name, func(b *testing.B) {
			tr := NewPassThroughStream("svc-model")
			dst := make([]byte, 0, 512)
			b.ReportAllocs()
			b.SetBytes(int64(len(bc.data)))
			for b.Loop() {
				out, done, err := tr.Feed(dst[:0], bc.event, bc.data)
				if err != nil || done || len(out) == 0 {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkTranslateToOpenAI is an Anthropic upstream's text event for an
// OpenAI client (decoder ∘ encoder).
func BenchmarkTranslateToOpenAI(b *testing.B) {
	tr := formats.Translate(NewStreamDecoder(), openai.NewStreamEncoder("svc", true))
	dst := make([]byte, 0, 512)
	out, _, _ := tr.Feed(dst, benchStartName, benchStart)
	out, _, _ = tr.Feed(out, []byte("content_block_start"), []byte(`{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`))
	if len(out) == 0 {
		b.Fatal("no start")
	}
	b.ReportAllocs()
	b.SetBytes(int64(len(benchDelta)))
	for b.Loop() {
		out, _, err := tr.Feed(dst[:0], benchDeltaName, benchDelta)
		if err != nil || len(out) == 0 {
			b.Fatal(err)
		}
	}
}

var benchChunk = []byte(`{"id":"chatcmpl-AbC123","object":"chat.completion.chunk","created":1735689600,"model":"gpt-4o-mini-2024-07-18","system_fingerprint":"fp_0ba0d124f1","choices":[{"index":0,"delta":{"content":" museum"},"logprobs":null,"finish_reason":null}],"usage":null}`)

// BenchmarkTranslateFromOpenAI is an OpenAI upstream's text chunk for an
// Anthropic client.
func BenchmarkTranslateFromOpenAI(b *testing.B) {
	tr := formats.Translate(openai.NewStreamDecoder(), NewStreamEncoder("svc"))
	dst := make([]byte, 0, 512)
	if out, _, _ := tr.Feed(dst, nil, benchChunk); len(out) == 0 {
		b.Fatal("no start")
	}
	b.ReportAllocs()
	b.SetBytes(int64(len(benchChunk)))
	for b.Loop() {
		out, _, err := tr.Feed(dst[:0], nil, benchChunk)
		if err != nil || len(out) == 0 {
			b.Fatal(err)
		}
	}
}

var benchResponse = []byte(`{"id":"msg_01XFDUDYJgAACzvnptvVoYEL","type":"message","role":"assistant","model":"claude-sonnet-4-5-20250929","content":[{"type":"text","text":"The Louvre holds the Mona Lisa; the Musée d'Orsay has the finest Impressionist collection; the Centre Pompidou is Europe's largest modern art museum."}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":62,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":41,"service_tier":"standard"}}`)

func BenchmarkPassThroughResponse(b *testing.B) {
	dst := make([]byte, 0, len(benchResponse)+64)
	b.ReportAllocs()
	b.SetBytes(int64(len(benchResponse)))
	for b.Loop() {
		out, u, err := PassThroughResponse(dst[:0], benchResponse, "claude-sonnet-4-5")
		if err != nil || len(out) == 0 || u.Input != 62 {
			b.Fatal(err)
		}
	}
}
