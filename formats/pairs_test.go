package formats_test

// The pair matrix: one conversation, one answer and one stream per format,
// carried across all nine (client format, upstream format) pairs exactly as the
// gateway composes the vendor codecs (see relay/wire.go), pinned
// byte for byte by golden files under testdata/pairs and checked beyond the
// bytes by independent parsers of each wire format (docs/translation.md,
// "Principles", "Request mapping", "Answers", "Streams",
// "A tool conversation in four formats", "What cannot be mapped").
//
// Run with -update to rewrite the golden files.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	goldenfile "github.com/modelgate/modelgate/internal/golden"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/modelgate/modelgate/formats"
	"github.com/modelgate/modelgate/formats/gemini"
	"github.com/modelgate/modelgate/formats/sse"

	// the vendor packages register their codecs, which the matrix looks up
	_ "github.com/modelgate/modelgate/formats/anthropic"
	_ "github.com/modelgate/modelgate/formats/openai"
)

// The formats of the matrix, by the names used in file and test names.
const (
	fOpenAI    = "openai"
	fAnthropic = "anthropic"
	fGemini    = "gemini"
	// fGeminiArray is a Gemini client without ?alt=sse: the stream is one
	// JSON array. It exists on the client side only.
	fGeminiArray = "gemini_array"
)

var (
	upstreams = []string{fOpenAI, fAnthropic, fGemini}
	clients   = []string{fOpenAI, fAnthropic, fGemini}
	// streamClients adds the Gemini array framing.
	streamClients = []string{fOpenAI, fAnthropic, fGemini, fGeminiArray}
)

const (
	serviceModel  = "svc-model"      // what the client asked for
	upstreamModel = "upstream-model" // what the route sends upstream
	outputCap     = 500              // the gateway's output cap for the call
)

// wireFormat is the wire format of a client name (fGeminiArray speaks
// Gemini).
func wireFormat(client string) string {
	if client == fGeminiArray {
		return fGemini
	}
	return client
}

// ---------------------------------------------------------------------------
// files

// path is a file under testdata/pairs.
func path(name string) string { return filepath.Join("testdata", "pairs", name) }

func read(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(path(name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// golden compares got with testdata/pairs/name byte for byte (or writes it
// with -update).
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	goldenfile.Check(t, filepath.Join("pairs", name), got)
}

var (
	// generatedID matches the ids the codecs make with formats.NewID.
	generatedID = regexp.MustCompile(`(chatcmpl-|msg_|toolu_|call_)[0-9A-Za-z]{24}\b`)
	// generatedResponseID matches a Gemini responseId made by the gateway.
	generatedResponseID = regexp.MustCompile(`"responseId":"[0-9A-Za-z]{24}"`)
	createdTime         = regexp.MustCompile(`"created":\d+`)
)

// fixtureCreated is the creation time in the OpenAI fixtures; an encoder
// must carry it over, so pin leaves it alone.
const fixtureCreated = `"created":1735689600`

// pin replaces what the codecs generate (random ids, the clock) with fixed
// text, so that goldens are stable.
func pin(b []byte) []byte {
	b = generatedID.ReplaceAll(b, []byte("${1}GENERATED"))
	b = generatedResponseID.ReplaceAll(b, []byte(`"responseId":"GENERATED"`))
	return createdTime.ReplaceAllFunc(b, func(m []byte) []byte {
		if string(m) == fixtureCreated {
			return m
		}
		return []byte(`"created":1700000000`)
	})
}

// mapStore is a gemini.SignatureStore for tests.
type mapStore struct {
	mu sync.Mutex
	m  map[string]string
}

func newStore() *mapStore { return &mapStore{m: map[string]string{}} }

func (s *mapStore) Put(id, sig string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.m[id] = sig
}

func (s *mapStore) Get(id string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.m[id]
	return v, ok
}

// skipIfBug skips a pair whose golden and checks assert behaviour a codec
// does not have yet; the reason names the bug. The table is empty when the
// codecs are right.
func skipIfBug(t *testing.T, bugs map[string]string, key string) {
	t.Helper()
	if why, ok := bugs[key]; ok {
		t.Skip("BUG: " + why)
	}
}

// ---------------------------------------------------------------------------
// requests (docs/translation.md, "Request mapping", "Tools",
// "A tool conversation in four formats", "What cannot be mapped")

// requestCase is one client fixture carried to one upstream format.
type requestCase struct {
	fixture    string // testdata/pairs/request/<fixture>.json
	client     string
	upstream   string
	structured bool   // the routed Anthropic model takes output_config.format
	name       string // <fixture>-<upstream>[_native]
}

func requestCases() []requestCase {
	var cases []requestCase
	for _, fx := range []struct{ fixture, client string }{
		{fOpenAI, fOpenAI}, {fAnthropic, fAnthropic}, {fGemini, fGemini}, {"openai_json", fOpenAI},
	} {
		for _, up := range upstreams {
			cases = append(cases, requestCase{fx.fixture, fx.client, up, false, fx.fixture + "-" + up})
			if fx.fixture == "openai_json" && up == fAnthropic {
				cases = append(cases, requestCase{fx.fixture, fx.client, up, true, fx.fixture + "-" + up + "_native"})
			}
		}
	}
	return cases
}

// codec is the codec the gateway looks up for a format of the matrix
// (fGeminiArray speaks Gemini).
func codec(f string) *formats.Codec {
	switch wireFormat(f) {
	case fAnthropic:
		return formats.CodecOf(formats.WireMessages)
	case fGemini:
		return formats.CodecOf(formats.WireGenerate)
	}
	return formats.CodecOf(formats.WireChat)
}

// parseClient runs the client format's parser (the model and the stream
// switch of a Gemini request come from the URL).
func parseClient(client string, body []byte) (formats.ClientRequest, *formats.Error) {
	return codec(client).Parse(body, formats.ParseOptions{Model: serviceModel})
}

// upstreamRequest renders a client body for the upstream as the gateway's
// upstreamBody does: a byte-level rewrite for the same format, else parse,
// ToIR, the gateway's settings, and the upstream's renderer. dropped is the
// x-modelgate-dropped value ("" on pass-through, as in the gateway).
func upstreamRequest(tc requestCase, body []byte, sigs gemini.SignatureStore) (out []byte, dropped string, ferr *formats.Error) {
	req, ferr := parseClient(tc.client, body)
	if ferr != nil {
		return nil, "", ferr
	}
	if tc.client == tc.upstream {
		out, err := codec(tc.upstream).Rewrite(make([]byte, 0, len(body)+64), body,
			formats.RewriteOptions{UpstreamModel: upstreamModel, MaxTokens: outputCap, Stream: req.Stream})
		if err != nil {
			return nil, "", formats.InvalidRequest("", err.Error())
		}
		return out, "", nil
	}
	ir, ferr := req.ToIR()
	if ferr != nil {
		return nil, "", ferr
	}
	ir.MaxTokens = outputCap
	ir.Stream = false
	ir.StructuredOutputs = tc.structured
	out, ferr = codec(tc.upstream).Render(ir, upstreamModel, sigs)
	return out, ir.DroppedHeader(), ferr
}

// requestBugs are request pairs that fail for a known codec bug.
var requestBugs = map[string]string{}

// TestPairRequest pins the body each client fixture becomes for each
// upstream, with the dropped-fields header on the first line, and checks
// that the upstream's own parser accepts the body and reads back the same
// conversation.
func TestPairRequest(t *testing.T) {
	for _, tc := range requestCases() {
		t.Run(tc.name, func(t *testing.T) {
			skipIfBug(t, requestBugs, tc.name)
			body := read(t, "request/"+tc.fixture+".json")
			out, dropped, ferr := upstreamRequest(tc, body, newStore())
			if ferr != nil {
				t.Fatalf("render: %v", ferr)
			}
			got := append([]byte("dropped: "+dropped+"\n"), out...)
			golden(t, "request/"+tc.name+".golden", append(got, '\n'))
			if !jsontext.Value(out).IsValid() {
				t.Fatalf("invalid JSON: %s", out)
			}
			checkRequest(t, tc, body, out)
		})
	}
}

// checkRequest parses the upstream body with the upstream format's own
// parser and compares the conversation it holds with the client's.
func checkRequest(t *testing.T, tc requestCase, clientBody, upstreamBody []byte) {
	t.Helper()
	req, ferr := parseClient(tc.client, clientBody)
	if ferr != nil {
		t.Fatal(ferr)
	}
	want, ferr := req.ToIR()
	if ferr != nil {
		t.Fatal(ferr)
	}
	want.MaxTokens = outputCap
	back, ferr := parseClient(tc.upstream, upstreamBody)
	if ferr != nil {
		t.Fatalf("the upstream format's parser rejects the body: %v\n%s", ferr, upstreamBody)
	}
	got, ferr := back.ToIR()
	if ferr != nil {
		t.Fatal(ferr)
	}
	if back.Stream {
		t.Errorf("stream set in the upstream body")
	}
	w, g := summarize(want), summarize(got)
	if tc.fixture == "openai_json" && tc.upstream == fAnthropic && !tc.structured {
		// json_schema is emulated with one forced tool (docs/translation.md,
		// "What cannot be mapped"): the conversation is the same, the tools and
		// choice are not
		w, g = withoutPrefix(w, "tool ", "tool_choice", "response_format"), withoutPrefix(g, "tool ", "tool_choice", "response_format")
		checkJSONTool(t, got)
	}
	if d := diffLines(w, g); d != "" {
		t.Errorf("the upstream reads another conversation (-client +upstream):\n%s", d)
	}
}

// checkJSONTool checks the json_schema emulation toward Anthropic
// (docs/translation.md, "What cannot be mapped"): one more tool whose
// input_schema is the requested schema, and a tool choice that forces a call.
// With client tools offered (tool_choice auto) the renderer asks for "any"
// tool, so that the model may still call the client's tools before it answers
// through the JSON tool; forcing the JSON tool by name would forbid them.
func checkJSONTool(t *testing.T, ir *formats.Request) {
	t.Helper()
	const schema = `{"additionalProperties":false,"properties":{"sign_text":{"type":"string"},"temp_c":{"type":"number"}},"required":["sign_text","temp_c"],"type":"object"}`
	var extra []formats.Tool
	for _, tool := range ir.Tools {
		if tool.Name != "get_weather" {
			extra = append(extra, tool)
		}
	}
	if len(extra) != 1 || canonical(string(extra[0].Parameters)) != schema {
		t.Fatalf("JSON tool %+v, want one tool with schema %s", extra, schema)
	}
	if ir.ToolChoice.Mode != formats.ToolChoiceRequired {
		t.Errorf("tool choice %+v, want any tool (the client's or the JSON tool)", ir.ToolChoice)
	}
}

// summarize lists what a request means, one line per fact, in a form that
// does not depend on the wire format: message boundaries (formats merge or
// split turns), tool-call ids (each format has its own) and the wrapping of
// a Gemini function response ({"output": …}) are left out; a tool result
// names the call it answers, found by id, so that pairing is checked.
func summarize(ir *formats.Request) []string {
	var out []string
	var sys []string
	for _, p := range ir.System {
		sys = append(sys, p.Text)
	}
	out = append(out, "system "+strings.Join(sys, "\n\n"))
	for _, m := range ir.Messages {
		role := m.Role.String()
		for _, p := range m.Parts {
			switch p.Type {
			case formats.PartText:
				out = append(out, role+" text "+p.Text)
			case formats.PartImage, formats.PartFile, formats.PartAudio:
				out = append(out, role+" media "+p.Media.MediaType+" "+p.Media.Data+p.Media.URL)
			case formats.PartToolCall:
				out = append(out, role+" call "+p.ToolCall.Name+" "+canonical(p.ToolCall.Arguments))
			case formats.PartToolResult:
				var text []string
				for _, rp := range p.ToolResult.Parts {
					text = append(text, rp.Text)
				}
				content := unwrapOutput(canonical(strings.Join(text, "\n")))
				name := ir.ToolName(p.ToolResult.CallID)
				if name == "" {
					name = "<unpaired " + strconv.Quote(p.ToolResult.CallID) + ">"
				}
				out = append(out, fmt.Sprintf("%s result %s %s error=%v", role, name, content, p.ToolResult.IsError))
			}
		}
	}
	for _, tool := range ir.Tools {
		out = append(out, "tool "+tool.Name+" "+strconv.Quote(tool.Description)+" "+canonical(string(tool.Parameters)))
	}
	out = append(out, fmt.Sprintf("tool_choice %d %q %q", ir.ToolChoice.Mode, ir.ToolChoice.Name, ir.ToolChoice.Allowed))
	if ir.Temperature != nil {
		out = append(out, "temperature "+strconv.FormatFloat(*ir.Temperature, 'g', -1, 64))
	}
	if ir.TopP != nil {
		out = append(out, "top_p "+strconv.FormatFloat(*ir.TopP, 'g', -1, 64))
	}
	out = append(out, fmt.Sprintf("stop %q", ir.Stop), fmt.Sprintf("max_tokens %d", ir.MaxTokens))
	if rf := ir.ResponseFormat; rf.Type != formats.FormatUnset {
		out = append(out, fmt.Sprintf("response_format %d %s", rf.Type, canonical(string(rf.Schema))))
	}
	return out
}

// canonical re-encodes JSON text with sorted keys and no spaces; text that
// is not JSON is returned quoted.
func canonical(s string) string {
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		return strconv.Quote(s)
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// unwrapOutput turns Gemini's {"output": X} function response into X.
func unwrapOutput(s string) string {
	var m map[string]json.RawMessage
	if json.Unmarshal([]byte(s), &m) == nil && len(m) == 1 && m["output"] != nil {
		var v any
		if json.Unmarshal(m["output"], &v) == nil {
			if str, ok := v.(string); ok {
				return canonical(str)
			}
		}
		return canonical(string(m["output"]))
	}
	return s
}

func withoutPrefix(lines []string, prefixes ...string) []string {
	return slices.DeleteFunc(slices.Clone(lines), func(l string) bool {
		for _, p := range prefixes {
			if strings.HasPrefix(l, p) {
				return true
			}
		}
		return false
	})
}

// diffLines lists the lines only in a (-) and only in b (+), or "".
func diffLines(a, b []string) string {
	var d []string
	for _, l := range a {
		if !slices.Contains(b, l) {
			d = append(d, "- "+l)
		}
	}
	for _, l := range b {
		if !slices.Contains(a, l) {
			d = append(d, "+ "+l)
		}
	}
	if len(d) == 0 && !slices.Equal(a, b) {
		d = append(d, "order differs:", "- "+strings.Join(a, "\n- "), "+ "+strings.Join(b, "\n+ "))
	}
	return strings.Join(d, "\n")
}

// ---------------------------------------------------------------------------
// answers (docs/translation.md, "Answers")

// upstreamUsage is the usage of each upstream fixture (answer and stream),
// normalised by the rules of docs/translation.md, "Usage".
var upstreamUsage = map[string]formats.Usage{
	// prompt_tokens 1250 (cached 1024), completion_tokens 48 (reasoning 16)
	fOpenAI: {Input: 1250, CacheRead: 1024, Output: 48, Reasoning: 16},
	// input_tokens 196 + cache_creation 30 + cache_read 1024, output 48
	fAnthropic: {Input: 1250, CacheRead: 1024, CacheWrite: 30, Output: 48},
	// promptTokenCount 1250 (cached 1024), candidates 32 + thoughts 16
	fGemini: {Input: 1250, CacheRead: 1024, Output: 48, Reasoning: 16},
}

// shown masks the usage fields a client format can express
// (docs/translation.md, "Usage", "To" table).
func shown(client string, u formats.Usage) formats.Usage {
	switch wireFormat(client) {
	case fOpenAI, fGemini:
		u.CacheWrite = 0
	case fAnthropic:
		u.Reasoning = 0
	}
	return u
}

// responseBugs are answer pairs that fail for a known codec bug.
var responseBugs = map[string]string{}

// translateResponse turns a whole upstream answer into the client's, as the
// gateway's translateResponse does.
func translateResponse(client, up string, data []byte, sigs gemini.SignatureStore) (out []byte, u formats.Usage, ferr *formats.Error) {
	dst := make([]byte, 0, len(data)+64)
	if client == up {
		return codec(up).PassThrough(dst, data, serviceModel)
	}
	resp, ferr := codec(up).Decode(data, formats.DecodeOptions{Signatures: sigs, ToolIDPrefix: codec(client).ToolIDPrefix})
	if ferr != nil {
		return nil, u, ferr
	}
	return codec(client).RenderResponse(dst, resp, formats.AnswerOptions{Model: serviceModel}), resp.Usage, nil
}

// TestPairResponse pins each upstream answer as each client sees it, with
// the normalised usage on the first line, and checks text, tool calls,
// stop reason, usage and ids through an independent parser of the client's
// format.
func TestPairResponse(t *testing.T) {
	for _, client := range clients {
		for _, up := range upstreams {
			name := client + "-" + up
			t.Run(name, func(t *testing.T) {
				skipIfBug(t, responseBugs, name)
				data := read(t, "response/"+up+".json")
				store := newStore()
				out, u, ferr := translateResponse(client, up, data, store)
				if ferr != nil {
					t.Fatal(ferr)
				}
				got := fmt.Appendf(nil, "usage: %s\n%s\n", usageString(u), pin(out))
				golden(t, "response/"+name+".golden", got)
				checkPassThroughIDs(t, client, up, out)

				want := upstreamUsage[up]
				if u != want {
					t.Errorf("metered usage %s, want %s", usageString(u), usageString(want))
				}
				src := parseAnswer(t, up, data, false, "")
				if src.Usage != want {
					t.Fatalf("fixture usage %s, want %s", usageString(src.Usage), usageString(want))
				}
				if !jsontext.Value(out).IsValid() {
					t.Fatalf("invalid JSON: %s", out)
				}
				dst := parseAnswer(t, client, out, false, serviceModel)
				compareAnswers(t, client, up, src, dst, store)
			})
		}
	}
}

// checkPassThroughIDs checks that a same-format pair keeps the upstream's ids
// and times (docs/translation.md, "Principles"): nothing for pin to replace.
func checkPassThroughIDs(t *testing.T, client, up string, out []byte) {
	t.Helper()
	if wireFormat(client) == up && !bytes.Equal(pin(out), out) {
		t.Errorf("pass-through made ids or times of its own:\n%s", out)
	}
}

// compareAnswers checks that the client's answer says what the upstream's
// said.
func compareAnswers(t *testing.T, client, up string, src, dst *answer, store *mapStore) {
	t.Helper()
	for _, p := range dst.Problems {
		t.Errorf("client output: %s", p)
	}
	if dst.Text != src.Text {
		t.Errorf("text %q, want %q", dst.Text, src.Text)
	}
	if dst.Stop != src.Stop {
		t.Errorf("stop %q, want %q", dst.Stop, src.Stop)
	}
	if !dst.HasUsage {
		t.Errorf("no usage for the client")
	} else if got, want := shown(client, dst.Usage), shown(client, upstreamUsage[up]); got != want {
		t.Errorf("client reads usage %s, want %s", usageString(got), usageString(want))
	}
	if len(dst.Calls) != len(src.Calls) {
		t.Fatalf("tool calls %+v, want %+v", dst.Calls, src.Calls)
	}
	for i, c := range dst.Calls {
		s := src.Calls[i]
		if c.Name != s.Name || c.Args != s.Args {
			t.Errorf("tool call %d: %s(%s), want %s(%s)", i, c.Name, c.Args, s.Name, s.Args)
		}
		switch {
		case s.ID != "":
			// an upstream id valid in every format goes through unchanged
			// (docs/translation.md, "Tool call ids and arguments", "Streams")
			if c.ID != s.ID {
				t.Errorf("tool call %d: id %q, want the upstream's %q", i, c.ID, s.ID)
			}
		case wireFormat(client) != fGemini:
			// a Gemini call without id gets a new one in the client's format,
			// call_… or toolu_… (docs/translation.md,
			// "Tool call ids and arguments"), under which its thought signature
			// is kept (§4.6)
			if prefix := generatedCallPrefix[client]; !strings.HasPrefix(c.ID, prefix) || len(c.ID) == len(prefix) {
				t.Errorf("tool call %d: id %q, want a new %s… id", i, c.ID, prefix)
			}
			if sig, ok := store.Get(c.ID); !ok || sig != s.Signature {
				t.Errorf("tool call %d: signature %q under %q, want %q", i, sig, c.ID, s.Signature)
			}
		}
	}
	// ids in the client's format (docs/translation.md, "Principles")
	switch wireFormat(client) {
	case fOpenAI:
		if !strings.HasPrefix(dst.ID, "chatcmpl-") {
			t.Errorf("id %q is not an OpenAI completion id", dst.ID)
		}
	case fAnthropic:
		if dst.ID == "" {
			t.Errorf("no message id")
		}
		for _, c := range dst.Calls {
			if !validAnthropicID(c.ID) {
				t.Errorf("tool_use id %q invalid for Anthropic", c.ID)
			}
		}
	}
}

// generatedCallPrefix is the prefix of a tool call id the gateway makes for
// a client (docs/translation.md, "Tool call ids and arguments").
var generatedCallPrefix = map[string]string{fOpenAI: "call_", fAnthropic: "toolu_"}

var anthropicID = regexp.MustCompile(`^[a-zA-Z0-9_-]+$`)

func validAnthropicID(id string) bool { return anthropicID.MatchString(id) }

func usageString(u formats.Usage) string {
	return fmt.Sprintf("in=%d cache_read=%d cache_write=%d out=%d reasoning=%d", u.Input, u.CacheRead, u.CacheWrite, u.Output, u.Reasoning)
}

// ---------------------------------------------------------------------------
// streams (docs/translation.md, "Streams")

// newTranslator is the gateway's streamTranslator for the pair: a
// pass-through for the same format, else the upstream's decoder composed
// with the client's encoder. OpenAI clients ask for the usage chunk.
func newTranslator(client, up string, sigs gemini.SignatureStore) formats.StreamTranslator {
	o := formats.AnswerOptions{Model: serviceModel, IncludeUsage: true, SSE: client != fGeminiArray}
	if wireFormat(client) == up {
		return codec(client).NewPassThroughStream(o)
	}
	dec := codec(up).NewStreamDecoder(formats.DecodeOptions{Signatures: sigs, ToolIDPrefix: codec(client).ToolIDPrefix})
	return formats.Translate(dec, codec(client).NewStreamEncoder(o))
}

// feed runs an upstream SSE stream through a translator as the gateway's
// meteredStream does: Feed each event, Finish after the terminal one, Fail
// on an upstream error or a cut stream. upstreamErr is the error Feed
// reported, if any.
func feed(tr formats.StreamTranslator, in []byte) (out []byte, upstreamErr *formats.Error) {
	r := sse.NewReader(bytes.NewReader(in), 8<<20)
	for {
		event, data, err := r.Next()
		if err != nil {
			return tr.Fail(out, formats.NewError(formats.KindUpstream, "The upstream provider's stream broke off.")), nil
		}
		var done bool
		var ferr *formats.Error
		out, done, ferr = tr.Feed(out, event, data)
		if ferr != nil {
			return tr.Fail(out, ferr), ferr
		}
		if done {
			return tr.Finish(out), nil
		}
	}
}

// streamBugs are stream pairs that fail for a known codec bug.
var streamBugs = map[string]string{}

// TestPairStream pins each upstream stream as each client sees it, and
// checks the framing, the JSON of every event, text, tool calls, stop
// reason and usage (metered and shown) through an independent parser.
func TestPairStream(t *testing.T) {
	for _, client := range streamClients {
		for _, up := range upstreams {
			name := client + "-" + up
			t.Run(name, func(t *testing.T) {
				skipIfBug(t, streamBugs, name)
				in := read(t, "stream/"+up+".sse")
				store := newStore()
				tr := newTranslator(client, up, store)
				out, uerr := feed(tr, in)
				if uerr != nil {
					t.Fatalf("upstream error %v", uerr)
				}
				golden(t, "stream/"+name+".golden", pin(out))
				checkPassThroughIDs(t, client, up, out)

				want := upstreamUsage[up]
				if u, ok := tr.Usage(); !ok || u != want {
					t.Errorf("metered usage %s (%v), want %s", usageString(u), ok, usageString(want))
				}
				src := parseAnswer(t, up, in, true, "")
				if src.Usage != want || len(src.Problems) > 0 {
					t.Fatalf("fixture usage %s, want %s; %q", usageString(src.Usage), usageString(want), src.Problems)
				}
				dst := parseAnswer(t, client, out, true, serviceModel)
				if dst.Err != "" {
					t.Errorf("error in the stream: %s", dst.Err)
				}
				compareAnswers(t, client, up, src, dst, store)
			})
		}
	}
}

// streamErrors says, for each upstream's mid-stream error, how each client
// format must name it (docs/translation.md, "Errors") and what usage was
// metered before it: never final, since the stream ended without the
// vendor's terminal count (Anthropic's message_start output of 1 is a
// placeholder).
var streamErrors = map[string]struct {
	kind                     formats.ErrorKind
	oaiType, antType, gemSts string
	usage                    formats.Usage
	final                    bool
	secret                   string // an upstream request id the client must not see (§8.2)
}{
	fOpenAI:    {formats.KindUpstream, "server_error", "api_error", "INTERNAL", formats.Usage{}, false, "req_8f3a9bXYZ123"},
	fAnthropic: {formats.KindOverloaded, "server_error", "overloaded_error", "UNAVAILABLE", formats.Usage{Input: 1250, CacheRead: 1024, CacheWrite: 30, Output: 1}, false, "req_011CSHoEeqs5C35K2UUqR7Fy"},
	fGemini:    {formats.KindOverloaded, "server_error", "overloaded_error", "UNAVAILABLE", formats.Usage{Input: 1250}, false, ""},
}

// TestPairStreamError pins each upstream's mid-stream error as each client
// sees it: the text so far, then the client format's error event from
// Fail, and nothing after it.
func TestPairStreamError(t *testing.T) {
	for _, client := range streamClients {
		for _, up := range upstreams {
			name := client + "-" + up
			t.Run(name, func(t *testing.T) {
				skipIfBug(t, streamBugs, name+".error")
				want := streamErrors[up]
				tr := newTranslator(client, up, newStore())
				out, uerr := feed(tr, read(t, "stream/"+up+"_error.sse"))
				if uerr == nil {
					t.Fatal("no upstream error reported")
				}
				if uerr.Kind != want.kind {
					t.Errorf("error kind %v, want %v", uerr.Kind, want.kind)
				}
				golden(t, "stream/"+name+".error.golden", pin(out))
				if u, final := tr.Usage(); final != want.final || u != want.usage {
					t.Errorf("metered usage %s (final %v), want %s", usageString(u), final, usageString(want.usage))
				}
				if want.secret != "" && bytes.Contains(out, []byte(want.secret)) {
					t.Errorf("upstream request id %s reaches the client", want.secret)
				}
				dst := parseAnswer(t, client, out, true, serviceModel)
				for _, p := range dst.Problems {
					t.Errorf("client output: %s", p)
				}
				if dst.Text != "The sign says " {
					t.Errorf("text before the error %q", dst.Text)
				}
				wantErr := map[string]string{fOpenAI: want.oaiType, fAnthropic: want.antType, fGemini: want.gemSts}[wireFormat(client)]
				if dst.Err != wantErr {
					t.Errorf("client error %q, want %q", dst.Err, wantErr)
				}
			})
		}
	}
}

// ---------------------------------------------------------------------------
// independent parsers of the three wire formats

// answer is what a client (or the gateway, reading an upstream) learns
// from an answer, whole or streamed.
type answer struct {
	ID       string
	Text     string
	Calls    []call
	Stop     string // end, tool, length, filter
	Usage    formats.Usage
	HasUsage bool
	// Err is the error type (OpenAI, Anthropic) or status (Gemini) of an
	// error event.
	Err string
	// Problems are breaches of the format's rules.
	Problems []string
}

type call struct {
	ID, Name, Args string // Args is canonical JSON
	Signature      string // Gemini thoughtSignature
}

func (a *answer) problem(format string, args ...any) {
	a.Problems = append(a.Problems, fmt.Sprintf(format, args...))
}

// parseAnswer reads an answer in format f. wantModel, when set, is the
// model every message or chunk must name.
func parseAnswer(t *testing.T, f string, b []byte, stream bool, wantModel string) *answer {
	t.Helper()
	a := &answer{}
	switch {
	case wireFormat(f) == fOpenAI && stream:
		parseOpenAIStream(a, b, wantModel)
	case wireFormat(f) == fOpenAI:
		var r oaiResponse
		if err := json.Unmarshal(b, &r); err != nil {
			t.Fatalf("OpenAI answer: %v\n%s", err, b)
		}
		a.ID = r.ID
		checkModel(a, r.Model, wantModel)
		if r.Object != "chat.completion" {
			a.problem("object %q", r.Object)
		}
		if len(r.Choices) != 1 {
			t.Fatalf("choices: %s", b)
		}
		m := r.Choices[0].Message
		if m.Content != nil {
			a.Text = *m.Content
		}
		for _, tc := range m.ToolCalls {
			a.Calls = append(a.Calls, call{ID: tc.ID, Name: tc.Function.Name, Args: canonical(tc.Function.Arguments)})
		}
		a.Stop = oaiStop(r.Choices[0].FinishReason)
		if r.Usage != nil {
			a.Usage, a.HasUsage = r.Usage.ir(a), true
		}
	case f == fAnthropic && stream:
		parseAnthropicStream(a, b, wantModel)
	case f == fAnthropic:
		var r antMessage
		if err := json.Unmarshal(b, &r); err != nil {
			t.Fatalf("Anthropic answer: %v\n%s", err, b)
		}
		a.ID = r.ID
		checkModel(a, r.Model, wantModel)
		if r.Type != "message" || r.Role != "assistant" {
			a.problem("type %q role %q", r.Type, r.Role)
		}
		for _, c := range r.Content {
			switch c.Type {
			case "text":
				a.Text += c.Text
			case "tool_use":
				a.Calls = append(a.Calls, call{ID: c.ID, Name: c.Name, Args: canonical(string(c.Input))})
			}
		}
		a.Stop = antStop(r.StopReason)
		if r.Usage != nil {
			var u antUsage
			u.add(r.Usage)
			a.Usage, a.HasUsage = u.ir(a), true
		}
	default:
		parseGemini(t, a, f, b, stream, wantModel)
	}
	return a
}

func checkModel(a *answer, got, want string) {
	if want != "" && got != want {
		a.problem("model %q, want %q", got, want)
	}
}

func checkJSON(a *answer, data []byte) bool {
	if !jsontext.Value(data).IsValid() {
		a.problem("invalid JSON %s", data)
		return false
	}
	return true
}

type oaiUsage struct {
	PromptTokens        int64 `json:"prompt_tokens"`
	CompletionTokens    int64 `json:"completion_tokens"`
	TotalTokens         int64 `json:"total_tokens"`
	PromptTokensDetails *struct {
		CachedTokens     int64 `json:"cached_tokens"`
		CacheWriteTokens int64 `json:"cache_write_tokens"`
	} `json:"prompt_tokens_details"`
	CompletionTokensDetails *struct {
		ReasoningTokens int64 `json:"reasoning_tokens"`
	} `json:"completion_tokens_details"`
}

// ir reads OpenAI usage (docs/translation.md, "Usage", "From" table).
func (u *oaiUsage) ir(a *answer) formats.Usage {
	r := formats.Usage{Input: u.PromptTokens, Output: u.CompletionTokens}
	if d := u.PromptTokensDetails; d != nil {
		r.CacheRead, r.CacheWrite = d.CachedTokens, d.CacheWriteTokens
	}
	if d := u.CompletionTokensDetails; d != nil {
		r.Reasoning = d.ReasoningTokens
	}
	if u.TotalTokens != u.PromptTokens+u.CompletionTokens {
		a.problem("total_tokens %d != %d + %d", u.TotalTokens, u.PromptTokens, u.CompletionTokens)
	}
	return r
}

type oaiToolCall struct {
	Index    *int   `json:"index"`
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string  `json:"name"`
		Arguments *string `json:"arguments"`
	} `json:"function"`
}

type oaiResponse struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Model   string `json:"model"`
	Choices []struct {
		Message struct {
			Content   *string `json:"content"`
			ToolCalls []struct {
				ID       string `json:"id"`
				Function struct {
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"message"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *oaiUsage `json:"usage"`
}

type oaiChunk struct {
	ID      string          `json:"id"`
	Object  string          `json:"object"`
	Created int64           `json:"created"`
	Model   string          `json:"model"`
	Error   json.RawMessage `json:"error"`
	Choices []struct {
		Index int `json:"index"`
		Delta struct {
			Role      string        `json:"role"`
			Content   *string       `json:"content"`
			ToolCalls []oaiToolCall `json:"tool_calls"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage json.RawMessage `json:"usage"`
}

func oaiStop(s *string) string {
	if s == nil {
		return "<null>"
	}
	switch *s {
	case "stop":
		return "end"
	case "tool_calls", "function_call":
		return "tool"
	case "content_filter":
		return "filter"
	}
	return *s
}

// parseOpenAIStream reads a chunk stream.
func parseOpenAIStream(a *answer, b []byte, wantModel string) {
	r := sse.NewReader(bytes.NewReader(b), 1<<20)
	var id string
	var created int64
	n, done := 0, false
	type pending struct {
		id, name string
		args     []byte
	}
	var calls []*pending
	for {
		event, data, err := r.Next()
		if err != nil {
			break
		}
		if len(event) > 0 {
			a.problem("event line %q", event)
		}
		if done {
			a.problem("data after [DONE]: %s", data)
		}
		if string(data) == "[DONE]" {
			done = true
			continue
		}
		if a.Err != "" {
			a.problem("data after the error: %s", data)
		}
		if !checkJSON(a, data) {
			continue
		}
		var c oaiChunk
		if err := json.Unmarshal(data, &c); err != nil {
			a.problem("chunk %s: %v", data, err)
			continue
		}
		if c.Error != nil {
			var e struct{ Type string }
			_ = json.Unmarshal(c.Error, &e)
			a.Err = e.Type
			if !strings.Contains(string(c.Error), `"message":`) || !strings.Contains(string(c.Error), `"param":`) || !strings.Contains(string(c.Error), `"code":`) {
				a.problem("error without its four keys: %s", c.Error)
			}
			continue
		}
		if n == 0 {
			id, created, a.ID = c.ID, c.Created, c.ID
			if len(c.Choices) != 1 || c.Choices[0].Delta.Role != "assistant" {
				a.problem("first chunk without role: %s", data)
			}
		} else if c.ID != id || c.Created != created {
			a.problem("chunk %d: id %q created %d, first %q %d", n, c.ID, c.Created, id, created)
		}
		n++
		checkModel(a, c.Model, wantModel)
		if c.Object != "chat.completion.chunk" {
			a.problem("object %q", c.Object)
		}
		if len(c.Choices) == 0 {
			var u oaiUsage
			if err := json.Unmarshal(c.Usage, &u); err != nil || string(c.Usage) == "null" {
				a.problem("chunk without choices nor usage: %s", data)
				continue
			}
			a.Usage, a.HasUsage = u.ir(a), true
			continue
		}
		if string(c.Usage) != "null" {
			a.problem("usage %s on a choice chunk (include_usage wants null)", c.Usage)
		}
		ch := c.Choices[0]
		if ch.Delta.Content != nil {
			a.Text += *ch.Delta.Content
		}
		for _, tc := range ch.Delta.ToolCalls {
			if tc.Index == nil {
				a.problem("tool call delta without index: %s", data)
				continue
			}
			k := *tc.Index
			if k == len(calls) {
				if tc.ID == "" || tc.Function.Name == "" || tc.Type != "function" {
					a.problem("first fragment of call %d without id, type or name: %s", k, data)
				}
				calls = append(calls, &pending{id: tc.ID, name: tc.Function.Name})
			} else if k > len(calls) || tc.ID != "" {
				a.problem("tool call index %d out of order: %s", k, data)
				continue
			}
			if tc.Function.Arguments != nil {
				calls[k].args = append(calls[k].args, *tc.Function.Arguments...)
			}
		}
		if ch.FinishReason != nil {
			a.Stop = oaiStop(ch.FinishReason)
		}
	}
	if !done && a.Err == "" {
		a.problem("no [DONE]")
	}
	if done && a.Err != "" {
		a.problem("[DONE] after an error")
	}
	for _, c := range calls {
		a.Calls = append(a.Calls, call{ID: c.id, Name: c.name, Args: canonical(string(c.args))})
	}
}

type antUsageJSON struct {
	InputTokens              *int64 `json:"input_tokens"`
	CacheCreationInputTokens *int64 `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     *int64 `json:"cache_read_input_tokens"`
	OutputTokens             *int64 `json:"output_tokens"`
}

// antUsage accumulates Anthropic usage: the last value seen of each field
// (the last value of each count wins).
type antUsage struct{ in, cacheWrite, cacheRead, out int64 }

func (u *antUsage) add(j *antUsageJSON) {
	for _, f := range []struct {
		src *int64
		dst *int64
	}{{j.InputTokens, &u.in}, {j.CacheCreationInputTokens, &u.cacheWrite}, {j.CacheReadInputTokens, &u.cacheRead}, {j.OutputTokens, &u.out}} {
		if f.src != nil {
			*f.dst = *f.src
		}
	}
}

// ir reads Anthropic usage (docs/translation.md, "Usage", "From" table).
func (u *antUsage) ir(a *answer) formats.Usage {
	if u.in < 0 {
		a.problem("negative input_tokens %d", u.in)
	}
	return formats.Usage{Input: u.in + u.cacheWrite + u.cacheRead, CacheRead: u.cacheRead, CacheWrite: u.cacheWrite, Output: u.out}
}

type antMessage struct {
	ID      string `json:"id"`
	Type    string `json:"type"`
	Role    string `json:"role"`
	Model   string `json:"model"`
	Content []struct {
		Type  string          `json:"type"`
		Text  string          `json:"text"`
		ID    string          `json:"id"`
		Name  string          `json:"name"`
		Input json.RawMessage `json:"input"`
	} `json:"content"`
	StopReason *string       `json:"stop_reason"`
	Usage      *antUsageJSON `json:"usage"`
}

type antEvent struct {
	Type         string      `json:"type"`
	Message      *antMessage `json:"message"`
	Index        *int        `json:"index"`
	ContentBlock *struct {
		Type  string          `json:"type"`
		ID    string          `json:"id"`
		Name  string          `json:"name"`
		Input json.RawMessage `json:"input"`
	} `json:"content_block"`
	Delta *struct {
		Type        string  `json:"type"`
		Text        string  `json:"text"`
		PartialJSON string  `json:"partial_json"`
		StopReason  *string `json:"stop_reason"`
	} `json:"delta"`
	Usage *antUsageJSON `json:"usage"`
	Error *struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	} `json:"error"`
}

func antStop(s *string) string {
	if s == nil {
		return "<null>"
	}
	switch *s {
	case "end_turn", "stop_sequence", "pause_turn":
		return "end"
	case "tool_use":
		return "tool"
	case "max_tokens", "model_context_window_exceeded":
		return "length"
	case "refusal":
		return "filter"
	}
	return *s
}

// parseAnthropicStream reads an event stream and checks its grammar
// (message_start, content blocks, message_delta, message_stop).
func parseAnthropicStream(a *answer, b []byte, wantModel string) {
	r := sse.NewReader(bytes.NewReader(b), 1<<20)
	var u antUsage
	var names []string
	open, next := -1, 0
	openType := ""
	var args []byte
	for {
		event, data, err := r.Next()
		if err != nil {
			break
		}
		name := string(event)
		names = append(names, name)
		if !checkJSON(a, data) {
			continue
		}
		var ev antEvent
		if err := json.Unmarshal(data, &ev); err != nil {
			a.problem("event %s: %v", data, err)
			continue
		}
		if ev.Type != name {
			a.problem("event %q carries type %q", name, ev.Type)
		}
		if a.Err != "" {
			a.problem("event after the error: %s", name)
		}
		index := -1
		if ev.Index != nil {
			index = *ev.Index
		}
		switch name {
		case "message_start":
			if len(names) != 1 || ev.Message == nil {
				a.problem("message_start at %d", len(names))
				continue
			}
			a.ID = ev.Message.ID
			checkModel(a, ev.Message.Model, wantModel)
			if ev.Message.Usage != nil {
				u.add(ev.Message.Usage)
				a.HasUsage = true
			}
		case "content_block_start":
			if open >= 0 || index != next || ev.ContentBlock == nil {
				a.problem("block %d started while %d open (next %d)", index, open, next)
				continue
			}
			open, openType = index, ev.ContentBlock.Type
			if openType == "tool_use" {
				a.Calls = append(a.Calls, call{ID: ev.ContentBlock.ID, Name: ev.ContentBlock.Name})
				args = args[:0]
			}
		case "content_block_delta":
			if index != open || ev.Delta == nil {
				a.problem("delta for block %d while %d open", index, open)
				continue
			}
			switch ev.Delta.Type {
			case "text_delta":
				a.Text += ev.Delta.Text
			case "input_json_delta":
				args = append(args, ev.Delta.PartialJSON...)
			}
		case "content_block_stop":
			if index != open {
				a.problem("stop for block %d while %d open", index, open)
			}
			if openType == "tool_use" {
				c := &a.Calls[len(a.Calls)-1]
				c.Args = canonical(string(args))
			}
			open, next = -1, next+1
		case "message_delta":
			if open >= 0 {
				a.problem("message_delta with block %d open", open)
			}
			if ev.Delta != nil {
				a.Stop = antStop(ev.Delta.StopReason)
			}
			if ev.Usage != nil {
				u.add(ev.Usage)
				a.HasUsage = true
			}
		case "error":
			if ev.Error == nil {
				a.problem("error event without error: %s", data)
				continue
			}
			a.Err = ev.Error.Type
		case "message_stop", "ping":
		default:
			a.problem("unknown event %q", name)
		}
	}
	if a.HasUsage {
		a.Usage = u.ir(a)
	}
	if len(names) == 0 {
		a.problem("no events")
		return
	}
	last := names[len(names)-1]
	switch {
	case a.Err != "":
		if last != "error" {
			a.problem("error not last: %v", names)
		}
	case last != "message_stop" || len(names) < 2 || names[len(names)-2] != "message_delta":
		a.problem("stream does not end with message_delta, message_stop: %v", names)
	}
}

type gemResponse struct {
	Candidates []struct {
		Content *struct {
			Role  string `json:"role"`
			Parts []struct {
				Text         *string `json:"text"`
				Thought      bool    `json:"thought"`
				FunctionCall *struct {
					ID   string          `json:"id"`
					Name string          `json:"name"`
					Args json.RawMessage `json:"args"`
				} `json:"functionCall"`
				ThoughtSignature string `json:"thoughtSignature"`
			} `json:"parts"`
		} `json:"content"`
		FinishReason string `json:"finishReason"`
	} `json:"candidates"`
	UsageMetadata *struct {
		PromptTokenCount        int64 `json:"promptTokenCount"`
		CachedContentTokenCount int64 `json:"cachedContentTokenCount"`
		CandidatesTokenCount    int64 `json:"candidatesTokenCount"`
		ThoughtsTokenCount      int64 `json:"thoughtsTokenCount"`
		ToolUsePromptTokenCount int64 `json:"toolUsePromptTokenCount"`
		TotalTokenCount         int64 `json:"totalTokenCount"`
	} `json:"usageMetadata"`
	ModelVersion string `json:"modelVersion"`
	ResponseID   string `json:"responseId"`
	Error        *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
		Status  string `json:"status"`
	} `json:"error"`
}

// parseGemini reads a Gemini answer: one GenerateContentResponse, or a
// stream of them as SSE (CRLF framing) or as one JSON array
// (SSE or a JSON array).
func parseGemini(t *testing.T, a *answer, f string, b []byte, stream bool, wantModel string) {
	t.Helper()
	var elems [][]byte
	switch {
	case !stream:
		elems = [][]byte{b}
	case f == fGeminiArray:
		if !jsontext.Value(b).IsValid() {
			a.problem("not one JSON document: %s", b)
			return
		}
		var raw []json.RawMessage
		if err := json.Unmarshal(b, &raw); err != nil {
			a.problem("not a JSON array: %v", err)
			return
		}
		for _, r := range raw {
			elems = append(elems, r)
		}
	default:
		if !bytes.HasSuffix(b, []byte("\r\n\r\n")) {
			a.problem("SSE stream does not end with CRLF CRLF")
		}
		r := sse.NewReader(bytes.NewReader(b), 1<<20)
		for {
			event, data, err := r.Next()
			if err != nil {
				break
			}
			if len(event) > 0 {
				a.problem("event line %q", event)
			}
			elems = append(elems, bytes.Clone(data))
		}
	}
	stop := ""
	for i, e := range elems {
		if !checkJSON(a, e) {
			continue
		}
		var r gemResponse
		if err := json.Unmarshal(e, &r); err != nil {
			a.problem("element %s: %v", e, err)
			continue
		}
		if a.Err != "" {
			a.problem("element after the error: %s", e)
		}
		if r.Error != nil {
			a.Err = r.Error.Status
			if r.Error.Code == 0 || r.Error.Message == "" {
				a.problem("error element without code or message: %s", e)
			}
			continue
		}
		checkModel(a, r.ModelVersion, wantModel)
		if i == 0 {
			a.ID = r.ResponseID
		} else if r.ResponseID != a.ID {
			a.problem("responseId %q, first %q", r.ResponseID, a.ID)
		}
		if len(r.Candidates) > 0 {
			c := r.Candidates[0]
			if c.Content != nil {
				if c.Content.Role != "model" {
					a.problem("role %q", c.Content.Role)
				}
				for _, p := range c.Content.Parts {
					switch {
					case p.FunctionCall != nil:
						a.Calls = append(a.Calls, call{ID: p.FunctionCall.ID, Name: p.FunctionCall.Name, Args: canonical(string(p.FunctionCall.Args)), Signature: p.ThoughtSignature})
					case p.Text != nil && !p.Thought:
						a.Text += *p.Text
					}
				}
			}
			if c.FinishReason != "" {
				if stop != "" {
					a.problem("second finishReason %q", c.FinishReason)
				}
				stop = c.FinishReason
			}
		}
		if m := r.UsageMetadata; m != nil {
			a.Usage = formats.Usage{
				Input: m.PromptTokenCount + m.ToolUsePromptTokenCount, CacheRead: m.CachedContentTokenCount,
				Output: m.CandidatesTokenCount + m.ThoughtsTokenCount, Reasoning: m.ThoughtsTokenCount,
			}
			a.HasUsage = true
			if m.TotalTokenCount != a.Usage.Input+a.Usage.Output {
				a.problem("totalTokenCount %d != %d + %d", m.TotalTokenCount, a.Usage.Input, a.Usage.Output)
			}
		}
	}
	switch stop {
	case "":
		a.Stop = "<null>"
	case "STOP":
		a.Stop = "end"
		if len(a.Calls) > 0 {
			a.Stop = "tool"
		}
	case "MAX_TOKENS":
		a.Stop = "length"
	case "SAFETY", "RECITATION", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII":
		a.Stop = "filter"
	default:
		a.Stop = stop
	}
	if a.Err == "" && stop == "" {
		a.problem("no finishReason")
	}
}

// ---------------------------------------------------------------------------
// benchmarks

// sseEvent is one upstream event of a fixture stream.
type sseEvent struct{ event, data []byte }

func splitEvents(tb testing.TB, in []byte) []sseEvent {
	tb.Helper()
	r := sse.NewReader(bytes.NewReader(in), 1<<20)
	var evs []sseEvent
	for {
		event, data, err := r.Next()
		if err != nil {
			return evs
		}
		evs = append(evs, sseEvent{bytes.Clone(event), bytes.Clone(data)})
	}
}

// lastStore is a SignatureStore that keeps one entry, so that a benchmark
// does not grow a map.
type lastStore struct {
	mu      sync.Mutex
	id, sig string
}

func (s *lastStore) Put(id, sig string) {
	s.mu.Lock()
	s.id, s.sig = id, sig
	s.mu.Unlock()
}

func (s *lastStore) Get(id string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sig, id == s.id
}

// BenchmarkPairEvent measures a whole fixture stream through each pair's
// translator (its construction and Finish included), reported per
// upstream event: ns/event and allocs/event (-benchmem gives the totals per
// stream).
func BenchmarkPairEvent(b *testing.B) {
	for _, client := range clients {
		for _, up := range upstreams {
			b.Run(client+"-"+up, func(b *testing.B) {
				evs := splitEvents(b, read(b, "stream/"+up+".sse"))
				store := &lastStore{}
				out := make([]byte, 0, 16<<10)
				var ms runtime.MemStats
				runtime.ReadMemStats(&ms)
				mallocs := ms.Mallocs
				for b.Loop() {
					tr := newTranslator(client, up, store)
					out = out[:0]
					for _, ev := range evs {
						var done bool
						var ferr *formats.Error
						out, done, ferr = tr.Feed(out, ev.event, ev.data)
						if ferr != nil {
							b.Fatal(ferr)
						}
						if done {
							break
						}
					}
					out = tr.Finish(out)
				}
				runtime.ReadMemStats(&ms)
				n := float64(b.N * len(evs))
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/n, "ns/event")
				b.ReportMetric(float64(ms.Mallocs-mallocs)/n, "allocs/event")
			})
		}
	}
}

// BenchmarkPairRequest measures the request path of each pair: parse and
// rewrite for the same format, parse, ToIR and render otherwise.
func BenchmarkPairRequest(b *testing.B) {
	for _, client := range clients {
		for _, up := range upstreams {
			b.Run(client+"-"+up, func(b *testing.B) {
				body := read(b, "request/"+client+".json")
				tc := requestCase{fixture: client, client: client, upstream: up}
				store := newStore()
				b.SetBytes(int64(len(body)))
				for b.Loop() {
					if _, _, ferr := upstreamRequest(tc, body, store); ferr != nil {
						b.Fatal(ferr)
					}
				}
			})
		}
	}
}

// TestPairStreamCutIsNeverFinal cuts each upstream stream after every one of
// its events but the terminal one: whatever was metered on the way
// (Anthropic's message_start placeholder, Gemini's running counts, an
// OpenAI usage chunk without its [DONE]) is never reported as the final
// usage, so that the gateway bills at least the estimate of what it read.
// The whole stream is final (TestPairStream).
func TestPairStreamCutIsNeverFinal(t *testing.T) {
	for _, client := range streamClients {
		for _, up := range upstreams {
			t.Run(client+"-"+up, func(t *testing.T) {
				in := read(t, "stream/"+up+".sse")
				var events [][2][]byte
				r := sse.NewReader(bytes.NewReader(in), 8<<20)
				for {
					event, data, err := r.Next()
					if err != nil {
						break
					}
					events = append(events, [2][]byte{bytes.Clone(event), bytes.Clone(data)})
				}
				for cut := range len(events) {
					tr := newTranslator(client, up, newStore())
					for _, ev := range events[:cut] {
						if _, done, ferr := tr.Feed(nil, ev[0], ev[1]); done || ferr != nil {
							t.Fatalf("cut after %d of %d events: done %v, %v", cut, len(events), done, ferr)
						}
					}
					if u, final := tr.Usage(); final {
						t.Errorf("cut after %d of %d events: usage %s reported final", cut, len(events), usageString(u))
					}
				}
			})
		}
	}
}
