package gemini

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
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

// indent pretty-prints a JSON document for a readable golden file.
func indent(t *testing.T, b []byte) []byte {
	t.Helper()
	v := jsontext.Value(append([]byte(nil), b...))
	if err := v.Indent(); err != nil {
		t.Fatalf("invalid JSON %s: %v", b, err)
	}
	return append(v, '\n')
}

var generated = []*regexp.Regexp{
	regexp.MustCompile(`"responseId":"[0-9A-Za-z]{24}"`),
	regexp.MustCompile(`call_[0-9A-Za-z]{24}`),
	regexp.MustCompile(`chatcmpl-[0-9A-Za-z]{24}`),
	regexp.MustCompile(`"created":[0-9]+`),
}

var pinned = []string{`"responseId":"GENERATED"`, `call_GENERATED`, `chatcmpl-GENERATED`, `"created":0`}

// pin replaces generated ids and timestamps.
func pin(b []byte) []byte {
	for i, re := range generated {
		b = re.ReplaceAll(b, []byte(pinned[i]))
	}
	return b
}

// feedStream runs an SSE fixture through a translator, as the gateway does:
// Feed until done (then Finish) or an error (then Fail); a stream that ends
// early is failed as the gateway fails it.
func feedStream(t testing.TB, tr formats.StreamTranslator, in []byte) []byte {
	t.Helper()
	r := sse.NewReader(bytes.NewReader(in), 1<<16)
	var out []byte
	for {
		event, data, err := r.Next()
		if err != nil {
			return tr.Fail(out, formats.NewError(formats.KindUpstream, "The upstream provider's stream broke off."))
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

// mapStore is a SignatureStore for tests.
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

func TestRequestGolden(t *testing.T) {
	// Gemini client → IR → Gemini upstream and → OpenAI upstream
	for _, file := range []string{"cli", "everything"} {
		t.Run(file, func(t *testing.T) {
			body := read(t, "request/"+file+".json")
			req, ferr := ParseGenerateRequest(body, "gemini-2.5-flash", true)
			if ferr != nil {
				t.Fatal(ferr)
			}
			ir, ferr := req.ToIR()
			if ferr != nil {
				t.Fatal(ferr)
			}
			out, ferr := RenderGenerateRequest(ir, nil)
			if ferr != nil {
				t.Fatal(ferr)
			}
			if _, ferr := ParseGenerateRequest(out, "m", true); ferr != nil {
				t.Fatalf("rendered request rejected: %v\n%s", ferr, out)
			}
			golden(t, "request/"+file+".gemini.golden", append(indent(t, out), "dropped: "+ir.DroppedHeader()+"\n"...))

			ir, _ = req.ToIR()
			out, ferr = openai.RenderChatRequest(ir, "upstream-model")
			if ferr != nil {
				t.Fatal(ferr)
			}
			if _, ferr := openai.ParseChatRequest(out); ferr != nil {
				t.Fatalf("rendered request rejected: %v\n%s", ferr, out)
			}
			golden(t, "request/"+file+".openai.golden", append(indent(t, out), "dropped: "+ir.DroppedHeader()+"\n"...))
		})
	}
	// OpenAI client → IR → Gemini upstream (generate and countTokens)
	for _, file := range []string{"oai_tools", "oai_everything"} {
		t.Run(file, func(t *testing.T) {
			req, ferr := openai.ParseChatRequest(read(t, "request/"+file+".json"))
			if ferr != nil {
				t.Fatal(ferr)
			}
			ir, ferr := req.ToIR()
			if ferr != nil {
				t.Fatal(ferr)
			}
			out, ferr := RenderGenerateRequest(ir, nil)
			if ferr != nil {
				t.Fatal(ferr)
			}
			if _, ferr := ParseGenerateRequest(out, "m", false); ferr != nil {
				t.Fatalf("rendered request rejected: %v\n%s", ferr, out)
			}
			golden(t, "request/"+file+".gemini.golden", append(indent(t, out), "dropped: "+ir.DroppedHeader()+"\n"...))

			ir, _ = req.ToIR()
			out, ferr = RenderCountTokensRequest(ir, "gemini-2.5-flash")
			if ferr != nil {
				t.Fatal(ferr)
			}
			if _, ferr := ParseCountTokensRequest(out, "m"); ferr != nil {
				t.Fatalf("rendered count request rejected: %v\n%s", ferr, out)
			}
			golden(t, "request/"+file+".count.golden", indent(t, out))
		})
	}
}

func TestRewriteGolden(t *testing.T) {
	paths, _ := filepath.Glob("testdata/rewrite/*.json")
	if len(paths) == 0 {
		t.Fatal("no fixtures")
	}
	for _, p := range paths {
		name := strings.TrimSuffix(filepath.Base(p), ".json")
		t.Run(name, func(t *testing.T) {
			body := read(t, "rewrite/"+name+".json")
			if _, ferr := ParseGenerateRequest(body, "m", false); ferr != nil {
				t.Fatalf("fixture invalid: %v", ferr)
			}
			out, err := RewriteGenerateRequest(nil, body, 1000)
			if err != nil {
				t.Fatal(err)
			}
			req, ferr := ParseGenerateRequest(out, "m", false)
			if ferr != nil {
				t.Fatalf("output rejected: %v\n%s", ferr, out)
			}
			if n, ok := req.MaxTokens(); !ok || n != 1000 {
				t.Fatalf("cap %d in %s", n, out)
			}
			golden(t, "rewrite/"+name+".golden", out)
			// no cap: unchanged
			same, err := RewriteGenerateRequest(nil, body, 0)
			if err != nil || !bytes.Equal(same, body) {
				t.Fatalf("rewrite without a cap changed the body: %v", err)
			}
		})
	}
	if _, err := RewriteGenerateRequest(nil, []byte(`[1]`), 5); err == nil {
		t.Fatal("array accepted")
	}
}

func TestResponseGolden(t *testing.T) {
	for _, tc := range []struct {
		file  string
		usage formats.Usage
		stop  formats.StopReason
	}{
		{"text", formats.Usage{Input: 8, Output: 3}, formats.StopEnd},
		{"tools", formats.Usage{Input: 130, CacheRead: 64, Output: 80, Reasoning: 50}, formats.StopToolUse},
		{"blocked", formats.Usage{Input: 9}, formats.StopContentFilter},
		{"max_tokens", formats.Usage{Input: 8, Output: 100, Reasoning: 100}, formats.StopLength},
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

			store := newStore()
			resp, ferr := DecodeGenerateResponse(body, store, "")
			if ferr != nil {
				t.Fatal(ferr)
			}
			if resp.Usage != tc.usage || resp.Stop != tc.stop {
				t.Errorf("decoded usage %+v stop %v", resp.Usage, resp.Stop)
			}
			r := RenderGenerateResponse(nil, resp, "svc-model")
			golden(t, "response/"+tc.file+".gemini.golden", indent(t, pin(r)))
			o := openai.RenderChatResponse(nil, resp, "svc-model")
			golden(t, "response/"+tc.file+".openai.golden", indent(t, pin(o)))

			// a second trip changes nothing but the generated id
			resp2, ferr := DecodeGenerateResponse(r, nil, "")
			if ferr != nil {
				t.Fatal(ferr)
			}
			if r2 := RenderGenerateResponse(nil, resp2, "svc-model"); !bytes.Equal(pin(r), pin(r2)) {
				t.Fatalf("second trip differs:\n%s\n%s", r, r2)
			}
			if tc.file == "tools" {
				if sig, ok := store.Get("fc-7"); !ok || sig != "CtIBAVSoXO8a" {
					t.Errorf("signature not stored: %q", sig)
				}
				if resp.Content[3].ToolCall.Name != "mcp.clock:now" {
					t.Errorf("name %q", resp.Content[3].ToolCall.Name)
				}
			}
		})
	}
}

func TestResponseErrors(t *testing.T) {
	for body, kind := range map[string]formats.ErrorKind{
		`not json`:             formats.KindUpstream,
		`[]`:                   formats.KindUpstream,
		`{"modelVersion":"x"}`: formats.KindUpstream,
		`{"candidates":{}}`:    formats.KindUpstream,
		`{"error":{"code":429,"message":"Resource has been exhausted (e.g. check quota).","status":"RESOURCE_EXHAUSTED"}}`: formats.KindOverloaded,
		`{"error":{"code":400,"message":"Invalid key AIzaSyA1b2C3d4E5f6G7h8","status":"INVALID_ARGUMENT"}}`:                formats.KindInvalidRequest,
	} {
		_, _, err := PassThroughResponse(nil, []byte(body), "svc")
		if err == nil || err.Kind != kind {
			t.Errorf("%s: %v", body, err)
		}
		if err != nil && strings.Contains(err.Message, "AIza") {
			t.Errorf("key kept: %s", err.Message)
		}
		if _, err := DecodeGenerateResponse([]byte(body), nil, ""); err == nil || err.Kind != kind {
			t.Errorf("decode %s: %v", body, err)
		}
	}
}

// geminiStreams are the Gemini upstream fixtures: usage, generated bytes,
// and whether they end in an error.
var geminiStreams = []struct {
	file     string
	usage    formats.Usage
	outBytes int64
	fails    bool
}{
	{file: "text", usage: formats.Usage{Input: 8, Output: 3}, outBytes: 3 + 15},
	{file: "tools", usage: formats.Usage{Input: 120, CacheRead: 64, Output: 80, Reasoning: 50}, outBytes: 27 + 9 + 34 + 13 + 2 + 15}, // thought, text, args and names
	{file: "error", usage: formats.Usage{Input: 5}, outBytes: 4, fails: true},
	{file: "blocked", usage: formats.Usage{Input: 9}},
	{file: "max_tokens", usage: formats.Usage{Input: 8, Output: 100, Reasoning: 100}},
}

func TestPassThroughStreamGolden(t *testing.T) {
	for _, tc := range geminiStreams {
		for _, mode := range []string{"sse", "array"} {
			name := tc.file + ".passthrough_" + mode
			t.Run(name, func(t *testing.T) {
				tr := NewPassThroughStream("svc-model", mode == "sse")
				out := feedStream(t, tr, read(t, "stream/"+tc.file+".sse"))
				golden(t, "stream/"+name+".golden", out)
				u, final := tr.Usage()
				if final == tc.fails || u != tc.usage {
					t.Errorf("usage %+v final %v, want %+v final %v", u, final, tc.usage, !tc.fails)
				}
				if n := tr.OutputBytes(); n != tc.outBytes {
					t.Errorf("output bytes %d, want %d", n, tc.outBytes)
				}
				elems := checkClientStream(t, out, mode == "sse", tc.fails)
				for _, e := range elems {
					if !bytes.HasPrefix(e, []byte(`{"error":`)) && !bytes.Contains(e, []byte(`"modelVersion":"svc-model"`)) {
						t.Errorf("modelVersion not rewritten: %s", e)
					}
				}
			})
		}
	}
}

// checkClientStream checks what a Gemini SDK relies on and returns the
// elements: SSE events of valid JSON, or one valid JSON array; an error
// element last iff the stream failed.
func checkClientStream(t *testing.T, out []byte, isSSE, fails bool) [][]byte {
	t.Helper()
	var elems [][]byte
	if isSSE {
		if !bytes.HasSuffix(out, []byte("\r\n\r\n")) {
			t.Fatalf("SSE stream does not end with CRLF CRLF: %q", out)
		}
		r := sse.NewReader(bytes.NewReader(out), 1<<20)
		for {
			_, data, err := r.Next()
			if err != nil {
				break
			}
			elems = append(elems, append([]byte(nil), data...))
		}
	} else {
		if !jsontext.Value(out).IsValid() || out[0] != '[' {
			t.Fatalf("not a JSON array: %s", out)
		}
		dec := jsontext.NewDecoder(bytes.NewReader(out))
		if _, err := dec.ReadToken(); err != nil {
			t.Fatal(err)
		}
		for dec.PeekKind() != ']' {
			v, err := dec.ReadValue()
			if err != nil {
				t.Fatal(err)
			}
			elems = append(elems, append([]byte(nil), v...))
		}
	}
	if len(elems) == 0 {
		t.Fatal("no elements")
	}
	for i, e := range elems {
		if !jsontext.Value(e).IsValid() {
			t.Fatalf("invalid JSON element %s", e)
		}
		isErr := bytes.HasPrefix(e, []byte(`{"error":`))
		if isErr != (fails && i == len(elems)-1) {
			t.Fatalf("element %d: error %v, stream fails %v", i, isErr, fails)
		}
	}
	return elems
}

func TestTranslateToOpenAIGolden(t *testing.T) {
	// Gemini upstream → IR → OpenAI client
	for _, tc := range geminiStreams {
		for _, want := range []bool{true, false} {
			name := fmt.Sprintf("%s.openai_usage_%v", tc.file, want)
			t.Run(name, func(t *testing.T) {
				store := newStore()
				tr := formats.Translate(NewStreamDecoder(store, ""), openai.NewStreamEncoder("svc-model", want))
				out := feedStream(t, tr, read(t, "stream/"+tc.file+".sse"))
				golden(t, "stream/"+name+".golden", pin(out))
				if u, final := tr.Usage(); final == tc.fails || u != tc.usage {
					t.Errorf("usage %+v final %v", u, final)
				}
				if tc.file == "tools" && len(store.m) != 1 {
					t.Errorf("signatures %v", store.m)
				}
			})
		}
	}
}

func TestTranslateFromOpenAIGolden(t *testing.T) {
	// OpenAI upstream → IR → Gemini client
	for _, file := range []string{"openai_text", "openai_tools", "openai_error"} {
		for _, mode := range []string{"sse", "array"} {
			name := file + ".gemini_" + mode
			t.Run(name, func(t *testing.T) {
				tr := formats.Translate(openai.NewStreamDecoder(), NewStreamEncoder("svc-model", mode == "sse"))
				out := feedStream(t, tr, read(t, "stream/"+file+".sse"))
				golden(t, "stream/"+name+".golden", pin(out))
				for _, e := range checkClientStream(t, out, mode == "sse", file == "openai_error") {
					if !bytes.HasPrefix(e, []byte(`{"error":`)) && !bytes.Contains(e, []byte(`"modelVersion":"svc-model","responseId":"`)) {
						t.Errorf("element without modelVersion: %s", e)
					}
				}
			})
		}
	}
}

func TestStreamDecoderEvents(t *testing.T) {
	d := NewStreamDecoder(nil, "")
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
			case formats.EventStart:
				s += "(" + ev.ID + "," + ev.Model + ")"
			case formats.EventText, formats.EventReasoning:
				s += "(" + string(ev.Delta) + ")"
			case formats.EventToolStart:
				s += fmt.Sprintf("(%d,%s,%s,%s)", ev.Index, ev.ID[:5], ev.Name, ev.Signature)
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
	want := `start(r2,gemini-2.5-flash) reasoning(The user wants the weather.) usage(120,0) text(Checking ) usage(120,52) ` +
		`tool_start(0,call_,get_weather,CtIBAVSoXO8a/b+c=) tool_args(0,{"city":"Paris","units":"metric"}) tool_end(0) ` +
		`tool_start(1,call_,1st-tool,) tool_args(1,{}) tool_end(1) usage(120,80) finish(tool_use) end`
	if s := strings.Join(got, " "); s != want {
		t.Fatalf("events:\n got %s\nwant %s", s, want)
	}
}

func TestSignatureRoundTrip(t *testing.T) {
	// a Gemini upstream's call goes to an OpenAI client, whose next turn
	// carries the call back: its signature is restored; an unknown call
	// gets the placeholder
	store := newStore()
	tr := formats.Translate(NewStreamDecoder(store, ""), openai.NewStreamEncoder("svc-model", false))
	out := feedStream(t, tr, read(t, "stream/tools.sse"))
	ids := regexp.MustCompile(`"id":"(call_[0-9A-Za-z]{24})"`).FindAllSubmatch(out, -1)
	if len(ids) != 2 {
		t.Fatalf("ids %q", ids)
	}
	first, second := string(ids[0][1]), string(ids[1][1])
	history := `{"model":"m","messages":[{"role":"user","content":"weather?"},
		{"role":"assistant","content":"Checking ","tool_calls":[
			{"id":"` + first + `","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}},
			{"id":"` + second + `","type":"function","function":{"name":"1st-tool","arguments":"{}"}}]},
		{"role":"tool","tool_call_id":"` + second + `","content":"noon"},
		{"role":"tool","tool_call_id":"` + first + `","content":"sunny"},
		{"role":"user","content":"and London?"},
		{"role":"assistant","content":null,"tool_calls":[{"id":"call_unknown","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"London\"}"}}]},
		{"role":"tool","tool_call_id":"call_unknown","content":"rain"}]}`
	req, ferr := openai.ParseChatRequest([]byte(history))
	if ferr != nil {
		t.Fatal(ferr)
	}
	ir, ferr := req.ToIR()
	if ferr != nil {
		t.Fatal(ferr)
	}
	body, ferr := RenderGenerateRequest(ir, store)
	if ferr != nil {
		t.Fatal(ferr)
	}
	want := `{"contents":[{"role":"user","parts":[{"text":"weather?"}]},` +
		`{"role":"model","parts":[{"text":"Checking "},{"functionCall":{"name":"get_weather","args":{"city":"Paris"}},"thoughtSignature":"CtIBAVSoXO8a/b+c="},{"functionCall":{"name":"_mg_1st--tool","args":{}}}]},` +
		`{"role":"user","parts":[{"functionResponse":{"name":"get_weather","response":{"output":"sunny"}}},{"functionResponse":{"name":"_mg_1st--tool","response":{"output":"noon"}}},{"text":"and London?"}]},` +
		`{"role":"model","parts":[{"functionCall":{"name":"get_weather","args":{"city":"London"}},"thoughtSignature":"skip_thought_signature_validator"}]},` +
		`{"role":"user","parts":[{"functionResponse":{"name":"get_weather","response":{"output":"rain"}}}]}]}`
	if string(body) != want {
		t.Fatalf("body:\n got %s\nwant %s", body, want)
	}
	// without a store every model turn's first call has the placeholder
	ir, _ = req.ToIR()
	body, _ = RenderGenerateRequest(ir, nil)
	if n := bytes.Count(body, []byte(PlaceholderSignature)); n != 2 {
		t.Fatalf("%d placeholders in %s", n, body)
	}
}

func TestRenderRejects(t *testing.T) {
	for _, tc := range []struct {
		name, body, param string
	}{
		{"n", `{"model":"m","messages":[{"role":"user","content":"x"}],"n":2}`, "n"},
		{"logprobs", `{"model":"m","messages":[{"role":"user","content":"x"}],"logprobs":true}`, "logprobs"},
		{"logit_bias", `{"model":"m","messages":[{"role":"user","content":"x"}],"logit_bias":{"1":2}}`, "logit_bias"},
		{"audio out", `{"model":"m","messages":[{"role":"user","content":"x"}],"modalities":["text","audio"]}`, "modalities"},
		{"image url", `{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"https://example.com/a.png"}}]}]}`, "messages"},
		{"file id", `{"model":"m","messages":[{"role":"user","content":[{"type":"file","file":{"file_id":"file-1"}}]}]}`, "messages"},
		{"orphan result", `{"model":"m","messages":[{"role":"user","content":"x"},{"role":"tool","tool_call_id":"nope","content":"r"}]}`, "messages"},
		{"only system", `{"model":"m","messages":[{"role":"system","content":"x"}]}`, "messages"},
		{"long name", `{"model":"m","messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"` + strings.Repeat("-", 64) + `"}}]}`, "tools"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, ferr := openai.ParseChatRequest([]byte(tc.body))
			if ferr != nil {
				t.Fatal(ferr)
			}
			ir, _ := req.ToIR()
			_, ferr = RenderGenerateRequest(ir, nil)
			if ferr == nil || ferr.Param != tc.param || ferr.Status() != 400 {
				t.Fatalf("%v, want param %q", ferr, tc.param)
			}
		})
	}
	// more than 5 stop sequences (OpenAI allows 4, Anthropic more)
	ir := &formats.Request{Messages: []formats.Message{{Role: formats.RoleUser, Parts: []formats.Part{{Type: formats.PartText, Text: "x"}}}},
		Stop: []string{"a", "b", "c", "d", "e", "f"}}
	if _, ferr := RenderGenerateRequest(ir, nil); ferr == nil || ferr.Param != "stop" {
		t.Fatalf("stop: %v", ferr)
	}
}

func TestRenderReasoning(t *testing.T) {
	for _, tc := range []struct {
		r    formats.Reasoning
		want string
	}{
		{formats.Reasoning{Effort: "low"}, `"thinkingConfig":{"thinkingLevel":"LOW"}`},
		{formats.Reasoning{Effort: "xhigh"}, `"thinkingConfig":{"thinkingLevel":"HIGH"}`},
		{formats.Reasoning{Effort: "minimal"}, `"thinkingConfig":{"thinkingLevel":"MINIMAL"}`},
		{formats.Reasoning{Effort: "none"}, `"thinkingConfig":{"thinkingBudget":0}`},
		{formats.Reasoning{Budget: 8192}, `"thinkingConfig":{"thinkingBudget":8192}`},
		{formats.Reasoning{Disabled: true}, `"thinkingConfig":{"thinkingBudget":0}`},
		{formats.Reasoning{Adaptive: true}, `"thinkingConfig":{"thinkingBudget":-1}`},
		{formats.Reasoning{Budget: -1, IncludeThoughts: true}, `"thinkingConfig":{"includeThoughts":true,"thinkingBudget":-1}`},
	} {
		r := tc.r
		ir := &formats.Request{Messages: []formats.Message{{Role: formats.RoleUser, Parts: []formats.Part{{Type: formats.PartText, Text: "x"}}}},
			Reasoning: &r, MaxTokens: 100}
		out, ferr := RenderGenerateRequest(ir, nil)
		if ferr != nil || !bytes.Contains(out, []byte(`"generationConfig":{"maxOutputTokens":100,`+tc.want+`}`)) {
			t.Errorf("%+v: %s %v", tc.r, out, ferr)
		}
	}
}
