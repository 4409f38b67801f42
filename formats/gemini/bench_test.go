package gemini

import (
	"strconv"
	"strings"
	"testing"

	"github.com/modelgate/modelgate/formats"
	"github.com/modelgate/modelgate/formats/openai"
)

// benchChat is a typical small chat request (~0.7 KB).
var benchChat = []byte(`{"systemInstruction":{"parts":[{"text":"You are a helpful assistant. Answer briefly and precisely; cite sources when you can."}]},"contents":[{"role":"user","parts":[{"text":"What is the capital of France, and what is it famous for?"}]},{"role":"model","parts":[{"text":"Paris. It is famous for the Eiffel Tower, the Louvre, its cafés and its cuisine."}]},{"role":"user","parts":[{"text":"Give me three museums worth visiting there, with one sentence each about why."}]}],"generationConfig":{"temperature":0.7,"maxOutputTokens":512,"topK":40,"thinkingConfig":{"includeThoughts":true,"thinkingBudget":-1}}}`)

// benchAgent is a Gemini CLI-style request: 12 tools, 30 turns (~25 KB).
var benchAgent = func() []byte {
	var b strings.Builder
	b.WriteString(`{"systemInstruction":{"role":"user","parts":[{"text":"` + strings.Repeat("You are a coding agent. Follow the repository's conventions. ", 20) + `"}]},"contents":[`)
	for i := range 10 {
		n := strconv.Itoa(i)
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`{"role":"user","parts":[{"text":"Please look at file ` + n + ` and fix the failing test; the error says \"expected 3, got 4\" on line ` + n + `."}]}`)
		b.WriteString(`,{"role":"model","parts":[{"functionCall":{"name":"read_file","args":{"absolute_path":"/src/file` + n + `.go"}},"thoughtSignature":"CtIBAVSoXO8aQ2x0Y5Zk3mJ9b2d7c1E="}]}`)
		b.WriteString(`,{"role":"user","parts":[{"functionResponse":{"name":"read_file","response":{"output":"` + strings.Repeat(`package main\nfunc f() int { return 4 }\n`, 20) + `"}}}]}`)
	}
	b.WriteString(`],"tools":[{"functionDeclarations":[`)
	for i := range 12 {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`{"name":"tool_` + strconv.Itoa(i) + `","description":"Does thing number ` + strconv.Itoa(i) + ` to the workspace.","parametersJsonSchema":{"type":"object","properties":{"path":{"type":"string","description":"A path."},"content":{"type":"string"}},"required":["path"]}}`)
	}
	b.WriteString(`]}],"generationConfig":{"temperature":0,"topP":1,"thinkingConfig":{"includeThoughts":true}}}`)
	return []byte(b.String())
}()

func BenchmarkParseGenerateRequest(b *testing.B) {
	for _, bc := range []struct {
		name string
		body []byte
	}{{"chat", benchChat}, {"agent", benchAgent}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(bc.body)))
			for b.Loop() {
				if _, err := ParseGenerateRequest(bc.body, "gemini-2.5-flash", true); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkRewriteGenerateRequest(b *testing.B) {
	for _, bc := range []struct {
		name string
		body []byte
	}{{"chat", benchChat}, {"agent", benchAgent}} {
		b.Run(bc.name, func(b *testing.B) {
			dst := make([]byte, 0, len(bc.body)+64)
			b.ReportAllocs()
			b.SetBytes(int64(len(bc.body)))
			for b.Loop() {
				out, err := RewriteGenerateRequest(dst[:0], bc.body, 400)
				if err != nil || len(out) == 0 {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkToIR is the translated path's parse (for comparison).
func BenchmarkToIR(b *testing.B) {
	req, _ := ParseGenerateRequest(benchAgent, "m", true)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := req.ToIR(); err != nil {
			b.Fatal(err)
		}
	}
}

var benchElement = []byte(`{"candidates":[{"content":{"parts":[{"text":" museum, which holds"}],"role":"model"},"index":0}],"usageMetadata":{"promptTokenCount":62,"candidatesTokenCount":12,"totalTokenCount":74,"promptTokensDetails":[{"modality":"TEXT","tokenCount":62}]},"modelVersion":"gemini-2.5-flash","responseId":"mAitaLmkHPPlz7IPvtfUqQ4"}`)

// BenchmarkPassThroughElement is the same-format stream's cost per element.
func BenchmarkPassThroughElement(b *testing.B) {
	for _, mode := range []string{"sse", "array"} {
		b.Run(mode, func(b *testing.B) {
			tr := NewPassThroughStream("gemini-flash", mode == "sse")
			dst := make([]byte, 0, 512)
			b.ReportAllocs()
			b.SetBytes(int64(len(benchElement)))
			for b.Loop() {
				out, done, err := tr.Feed(dst[:0], nil, benchElement)
				if err != nil || done || len(out) == 0 {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkTranslateGEMToOAI is the decoder ∘ encoder cost per Gemini
// element for an OpenAI client.
func BenchmarkTranslateGEMToOAI(b *testing.B) {
	tr := formats.Translate(NewStreamDecoder(nil, ""), openai.NewStreamEncoder("svc", true))
	dst := make([]byte, 0, 512)
	b.ReportAllocs()
	b.SetBytes(int64(len(benchElement)))
	for b.Loop() {
		out, _, err := tr.Feed(dst[:0], nil, benchElement)
		if err != nil || len(out) == 0 {
			b.Fatal(err)
		}
	}
}

var benchChunk = []byte(`{"id":"chatcmpl-AbC123","object":"chat.completion.chunk","created":1735689600,"model":"gpt-4o-mini-2024-07-18","system_fingerprint":"fp_0ba0d124f1","choices":[{"index":0,"delta":{"content":" museum"},"logprobs":null,"finish_reason":null}],"usage":null}`)

// BenchmarkTranslateOAIToGEM is the decoder ∘ encoder cost per OpenAI chunk
// for a Gemini client.
func BenchmarkTranslateOAIToGEM(b *testing.B) {
	for _, mode := range []string{"sse", "array"} {
		b.Run(mode, func(b *testing.B) {
			tr := formats.Translate(openai.NewStreamDecoder(), NewStreamEncoder("svc", mode == "sse"))
			dst := make([]byte, 0, 512)
			b.ReportAllocs()
			b.SetBytes(int64(len(benchChunk)))
			for b.Loop() {
				out, _, err := tr.Feed(dst[:0], nil, benchChunk)
				if err != nil || len(out) == 0 {
					b.Fatal(err)
				}
			}
		})
	}
}

var benchResponse = []byte(`{"candidates":[{"content":{"parts":[{"text":"The Louvre holds the Mona Lisa; the Musée d'Orsay has the finest Impressionist collection; the Centre Pompidou is Europe's largest modern art museum."}],"role":"model"},"finishReason":"STOP","index":0}],"usageMetadata":{"promptTokenCount":62,"candidatesTokenCount":41,"totalTokenCount":103,"promptTokensDetails":[{"modality":"TEXT","tokenCount":62}]},"modelVersion":"gemini-2.5-flash","responseId":"mAitaLmkHPPlz7IPvtfUqQ4"}`)

func BenchmarkPassThroughResponse(b *testing.B) {
	dst := make([]byte, 0, len(benchResponse)+64)
	b.ReportAllocs()
	b.SetBytes(int64(len(benchResponse)))
	for b.Loop() {
		out, u, err := PassThroughResponse(dst[:0], benchResponse, "gemini-flash")
		if err != nil || len(out) == 0 || u.Input != 62 {
			b.Fatal(err)
		}
	}
}
