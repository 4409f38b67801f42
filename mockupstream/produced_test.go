package mockupstream

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The output a stream produced (ProducedOutput), checked against what its
// client received: whole streams, and streams whose client hangs up.

// received is what a client read of a stream.
type received struct {
	text, thinking, fragments int // text, thinking and tool-argument chunks
	tokens                    int // the output tokens they carry
	usage                     int // output tokens of the last usage seen; -1 for none
}

// streamKind is one of the mock's stream framings, read as a client reads it.
type streamKind struct {
	name string
	// hidden: the vendor does not show thinking in this stream.
	hidden bool
	// request is a streamed request for the user text, with an output cap
	// (0: none).
	request func(ts *httptest.Server, text string, limit int) *http.Request
	// events splits a stream into its payloads, with the SSE event name
	// (or "").
	events func(body io.Reader) func() (name string, data []byte, err error)
	// count adds what one payload carries to g; calls counts the argument
	// fragments seen of each call.
	count func(t *testing.T, name string, data []byte, g *received, calls map[string]int)
}

// fragment counts an argument fragment of call key.
func (g *received) fragment(calls map[string]int, key string) {
	g.fragments++
	g.tokens += fragmentTokens(calls[key])
	calls[key]++
}

func (g *received) textChunk()     { g.text++; g.tokens++ }
func (g *received) thinkingChunk() { g.thinking++; g.tokens++ }

// sseReader reads SSE events: the "event:" name and the "data:" payload of
// each event, which ends with a blank line (LF or CRLF).
func sseReader(body io.Reader) func() (string, []byte, error) {
	br := bufio.NewReaderSize(body, 1<<16)
	return func() (string, []byte, error) {
		var name string
		var data []byte
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				return "", nil, err
			}
			line = strings.TrimRight(line, "\r\n")
			switch {
			case line == "" && data != nil:
				return name, data, nil
			case strings.HasPrefix(line, "event: "):
				name = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				data = []byte(strings.TrimPrefix(line, "data: "))
			}
		}
	}
}

// arrayReader reads the elements of Gemini's JSON array stream as they come.
func arrayReader(body io.Reader) func() (string, []byte, error) {
	dec := json.NewDecoder(body)
	opened := false
	return func() (string, []byte, error) {
		if !opened {
			if tok, err := dec.Token(); err != nil || tok != json.Delim('[') {
				return "", nil, errors.Join(err, errors.New("no opening ["))
			}
			opened = true
		}
		if !dec.More() {
			return "", nil, io.EOF
		}
		var elem json.RawMessage
		err := dec.Decode(&elem)
		return "", elem, err
	}
}

func decode(t *testing.T, data []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatalf("payload %s: %v", data, err)
	}
}

func countChat(t *testing.T, _ string, data []byte, g *received, calls map[string]int) {
	if string(data) == "[DONE]" {
		return
	}
	var v struct {
		Choices []struct {
			Delta struct {
				Content   *string
				ToolCalls []struct {
					Index    int
					Function struct{ Arguments string }
				} `json:"tool_calls"`
			}
		}
		Usage *struct {
			CompletionTokens int `json:"completion_tokens"`
		}
	}
	decode(t, data, &v)
	for _, ch := range v.Choices {
		if ch.Delta.Content != nil && *ch.Delta.Content != "" {
			g.textChunk()
		}
		for _, tc := range ch.Delta.ToolCalls {
			if tc.Function.Arguments != "" {
				g.fragment(calls, strconv.Itoa(tc.Index))
			}
		}
	}
	if v.Usage != nil {
		g.usage = v.Usage.CompletionTokens
	}
}

func countResponses(t *testing.T, name string, data []byte, g *received, calls map[string]int) {
	var v struct {
		ItemID   string `json:"item_id"`
		Response struct {
			Usage *struct {
				OutputTokens int `json:"output_tokens"`
			}
		}
	}
	decode(t, data, &v)
	switch name {
	case "response.output_text.delta":
		g.textChunk()
	case "response.function_call_arguments.delta":
		g.fragment(calls, v.ItemID)
	case "response.completed", "response.incomplete":
		if v.Response.Usage != nil {
			g.usage = v.Response.Usage.OutputTokens
		}
	}
}

func countAnthropic(t *testing.T, name string, data []byte, g *received, calls map[string]int) {
	var v struct {
		Index int
		Delta struct {
			Type        string
			PartialJSON string `json:"partial_json"`
		}
		Usage *struct {
			OutputTokens int `json:"output_tokens"`
		}
	}
	decode(t, data, &v)
	switch {
	case name == "content_block_delta" && v.Delta.Type == "text_delta":
		g.textChunk()
	case name == "content_block_delta" && v.Delta.Type == "thinking_delta":
		g.thinkingChunk()
	case name == "content_block_delta" && v.Delta.Type == "input_json_delta" && v.Delta.PartialJSON != "":
		g.fragment(calls, strconv.Itoa(v.Index))
	case name == "message_delta" && v.Usage != nil:
		g.usage = v.Usage.OutputTokens
	}
}

func countGemini(t *testing.T, _ string, data []byte, g *received, _ map[string]int) {
	var v struct {
		Candidates []struct {
			Content struct {
				Parts []struct {
					Text         *string
					Thought      bool
					FunctionCall *json.RawMessage
				}
			}
		}
		UsageMetadata *struct {
			CandidatesTokenCount, ThoughtsTokenCount int
		}
	}
	decode(t, data, &v)
	for _, c := range v.Candidates {
		for _, p := range c.Content.Parts {
			switch {
			case p.FunctionCall != nil:
				g.fragments++
				g.tokens += ToolCallTokens
			case p.Text != nil && *p.Text != "" && p.Thought:
				g.thinkingChunk()
			case p.Text != nil && *p.Text != "":
				g.textChunk()
			}
		}
	}
	if u := v.UsageMetadata; u != nil {
		g.usage = u.CandidatesTokenCount + u.ThoughtsTokenCount
	}
}

// geminiKind is Gemini's SSE or JSON-array stream, thoughts shown or not.
func geminiKind(name string, sse, thoughts bool) streamKind {
	events := arrayReader
	path := "/v1beta/models/gemini-x:streamGenerateContent"
	if sse {
		events, path = sseReader, path+"?alt=sse"
	}
	return streamKind{name, !thoughts, func(ts *httptest.Server, text string, limit int) *http.Request {
		cfg := `"thinkingConfig":{"includeThoughts":` + strconv.FormatBool(thoughts) + `}`
		if limit > 0 {
			cfg += `,"maxOutputTokens":` + strconv.Itoa(limit)
		}
		return newReq(ts, path, `{"contents":[{"parts":[{"text":`+string(jsonString(text))+`}]}],"generationConfig":{`+cfg+`}}`,
			"X-Goog-Api-Key", testKey)
	}, events, countGemini}
}

var (
	chatKind = streamKind{"chat", true, func(ts *httptest.Server, text string, limit int) *http.Request {
		extra := `"stream":true,"stream_options":{"include_usage":true}`
		if limit > 0 {
			extra += `,"max_completion_tokens":` + strconv.Itoa(limit)
		}
		return newReq(ts, "/v1/chat/completions", chatBody(text, extra), "Authorization", "Bearer "+testKey)
	}, sseReader, countChat}
	responsesKind = streamKind{"responses", true, func(ts *httptest.Server, text string, limit int) *http.Request {
		extra := ""
		if limit > 0 {
			extra = `,"max_output_tokens":` + strconv.Itoa(limit)
		}
		return newReq(ts, "/v1/responses", `{"model":"gpt-4o-mini","stream":true,"input":`+string(jsonString(text))+extra+`}`,
			"Authorization", "Bearer "+testKey)
	}, sseReader, countResponses}
	anthropicKind = streamKind{"anthropic", false, func(ts *httptest.Server, text string, limit int) *http.Request {
		return newReq(ts, "/v1/messages", `{"model":"claude-x","max_tokens":`+strconv.Itoa(orDefault(limit, 1000))+
			`,"stream":true,"messages":[{"role":"user","content":`+string(jsonString(text))+`}]}`,
			"X-Api-Key", testKey, "Anthropic-Version", "2023-06-01")
	}, sseReader, countAnthropic}
	geminiSSE           = geminiKind("gemini-sse", true, false)
	geminiArray         = geminiKind("gemini-array", false, false)
	geminiSSEThoughts   = geminiKind("gemini-sse-thoughts", true, true)
	geminiArrayThoughts = geminiKind("gemini-array-thoughts", false, true)
	everyStreamKind     = []streamKind{chatKind, responsesKind, anthropicKind, geminiSSE, geminiArray, geminiSSEThoughts, geminiArrayThoughts}
	textStreamKinds     = []streamKind{chatKind, responsesKind, anthropicKind, geminiSSE, geminiArray}
	thinkingStreamKinds = []streamKind{anthropicKind, geminiSSEThoughts, geminiArrayThoughts}
	argumentStreamKinds = []streamKind{chatKind, responsesKind, anthropicKind} // Gemini sends a call whole
)

// errClientHungUp is readStream's error when its client hung up.
var errClientHungUp = errors.New("the client hung up")

// idleWait bounds the wait for the mock to end a request whose client hung
// up; the tests then check that it took far less.
const idleWait = 5 * time.Second

// readStream sends req and reads its stream one payload at a time, as a
// client would, until the stream ends or hangUp(what it has) is true: then
// it closes the connection at once. It returns what it read, and
// errClientHungUp when it hung up.
func readStream(t *testing.T, ts *httptest.Server, k streamKind, req *http.Request, hangUp func(received) bool) (received, error) {
	t.Helper()
	ctx, cancel := context.WithCancel(ctxT(t))
	defer cancel()
	res, err := ts.Client().Do(req.WithContext(ctx))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(res.Body)
		t.Fatalf("%s: status %d: %s", k.name, res.StatusCode, b)
	}
	g := received{usage: -1}
	calls := map[string]int{}
	next := k.events(res.Body)
	for {
		if hangUp != nil && hangUp(g) {
			cancel() // closes the connection: the body is not read to its end
			_ = res.Body.Close()
			return g, errClientHungUp
		}
		name, data, err := next()
		if err != nil {
			return g, err
		}
		k.count(t, name, data, &g, calls)
	}
}

// lastRecord is the last request the server recorded.
func lastRecord(t *testing.T, s *Server) Recorded {
	t.Helper()
	recs := s.Requests()
	if len(recs) == 0 {
		t.Fatal("no request recorded")
	}
	return recs[len(recs)-1]
}

// TestProducedWholeStreams: a stream that completes has produced exactly
// the output of its own usage, in every framing, for text, thinking, tool
// calls and a cap that cuts a call off; and its client received every
// token it produced, but for hidden thinking and the call cut off.
func TestProducedWholeStreams(t *testing.T) {
	cases := []struct {
		text                   string
		limit                  int // the output cap, 0 for none
		thinking, reply, calls int // made: thinking and text tokens, tool calls
		output                 int // the usage's output
		unsent                 int // the tokens of a call the cap cut off
	}{
		{"a mock:tokens=7", 0, 0, 7, 0, 7, 0},
		{"a mock:tokens=0", 0, 0, 0, 0, 0, 0},
		{"a mock:thinking=5 mock:tokens=3", 0, 5, 3, 0, 8, 0},
		{"a mock:tools=3", 0, 0, 0, 3, 30, 0},
		{"a mock:thinking=2 mock:tokens=4 mock:tool=f", 0, 2, 4, 1, 16, 0},
		{"a mock:tokens=10 mock:tools=2", 17, 0, 10, 0, 17, 7},
		{"a mock:tokens=2 mock:tools=2", 17, 0, 2, 1, 17, 5},
		{"a mock:thinking=30 mock:tokens=4", 17, 17, 0, 0, 17, 0},
	}
	for _, k := range everyStreamKind {
		t.Run(k.name, func(t *testing.T) {
			s, ts := start(t, Config{})
			var sum int64
			for _, tc := range cases {
				g, err := readStream(t, ts, k, k.request(ts, tc.text, tc.limit), nil)
				if !errors.Is(err, io.EOF) {
					t.Fatalf("%q: %v", tc.text, err)
				}
				if err := s.WaitIdle(ctxT(t), testKey); err != nil {
					t.Fatal(err)
				}
				rec := lastRecord(t, s)
				if !rec.Finished || rec.ProducedOutput != int64(tc.output) || g.usage != tc.output {
					t.Errorf("%q: produced %d (finished %v), usage %d; want %d", tc.text, rec.ProducedOutput, rec.Finished, g.usage, tc.output)
				}
				shown := tc.thinking
				if k.hidden {
					shown = 0
				}
				wantTokens := tc.output - tc.unsent - (tc.thinking - shown)
				fragments := tc.calls * len(toolArgumentFragments)
				if strings.HasPrefix(k.name, "gemini") {
					fragments = tc.calls // one part per call
				}
				if g.tokens != wantTokens || g.text != tc.reply || g.thinking != shown || g.fragments != fragments {
					t.Errorf("%q: received %+v; want %d tokens, %d text, %d thinking, %d fragments",
						tc.text, g, wantTokens, tc.reply, shown, fragments)
				}
				if tc.output != tc.thinking+tc.reply+tc.calls*ToolCallTokens+tc.unsent {
					t.Fatalf("%q: a bad case", tc.text)
				}
				sum += int64(tc.output)
			}
			st := s.Stats()
			if st.ProducedOutput != sum || st.ByKey[testKey].ProducedOutput != sum || st.ByKey[testKey].Completed != int64(len(cases)) {
				t.Errorf("stats: produced %d, key %+v; want %d", st.ProducedOutput, st.ByKey[testKey], sum)
			}
		})
	}
}

// cutCase is a stream its client hangs up on.
type cutCase struct {
	text     string
	delay    time.Duration // the directive's, per chunk
	perChunk int           // the most output tokens one chunk carries
	total    int           // the output of the whole answer
	hangUp   func(received) bool
}

// testCut reads a stream until its client hangs up, then checks that the
// mock stopped: the request ends canceled soon after, having produced at
// least what the client received and at most what the delay allows in
// between (the chunks of 100 ms, plus one on the way), far from the whole
// answer. The bounds are loose for a loaded machine: the mock usually stops
// within a millisecond, having produced just what the client received.
func testCut(t *testing.T, k streamKind, cc cutCase) {
	s, ts := start(t, Config{})
	g, err := readStream(t, ts, k, k.request(ts, cc.text, 0), cc.hangUp)
	if !errors.Is(err, errClientHungUp) {
		t.Fatalf("the stream ended before the client hung up: %v (%+v)", err, g)
	}
	t0 := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), idleWait)
	defer cancel()
	if err := s.WaitIdle(ctx, testKey); err != nil {
		t.Fatalf("the mock still serves the request %v after the hang-up", idleWait)
	}
	took := time.Since(t0)
	rec, st := lastRecord(t, s), s.KeyStats(testKey)
	slack := (int(100*time.Millisecond/cc.delay) + 1) * cc.perChunk
	t.Logf("%s %q: received %d tokens (%d text, %d thinking, %d fragments), produced %d of %d, idle %v after the hang-up",
		k.name, cc.text, g.tokens, g.text, g.thinking, g.fragments, rec.ProducedOutput, cc.total, took.Round(time.Microsecond))
	if st.Canceled != 1 || st.Completed != 0 || !rec.Finished {
		t.Errorf("want one canceled request: %+v, finished %v", st, rec.Finished)
	}
	if took > 250*time.Millisecond {
		t.Errorf("the request ended %v after the hang-up; want it at once", took)
	}
	if p := int(rec.ProducedOutput); p < g.tokens || p > g.tokens+slack || p >= cc.total {
		t.Errorf("produced %d; want from the %d received to %d (of %d)", p, g.tokens, g.tokens+slack, cc.total)
	}
	if st.ProducedOutput != rec.ProducedOutput {
		t.Errorf("key produced %d, record %d", st.ProducedOutput, rec.ProducedOutput)
	}
}

// TestProducedClientHangsUp: a client reads part of a stream and hangs up;
// every stream kind stops: 10 of 200 text tokens (5 ms apart), 10 tokens
// into 100 of shown thinking, 3 of the 12 argument fragments of three tool
// calls (40 ms apart).
func TestProducedClientHangsUp(t *testing.T) {
	for _, tc := range []struct {
		name  string
		kinds []streamKind
		cut   cutCase
	}{
		{"mid-text", textStreamKinds, cutCase{"a long story mock:tokens=200 mock:delay=5ms", 5 * time.Millisecond, 1, 200,
			func(g received) bool { return g.text >= 10 }}},
		{"mid-thinking", thinkingStreamKinds, cutCase{"think mock:thinking=100 mock:tokens=5 mock:delay=5ms", 5 * time.Millisecond, 1, 105,
			func(g received) bool { return g.thinking >= 10 }}},
		{"mid-arguments", argumentStreamKinds, cutCase{"call mock:tools=3 mock:delay=40ms", 40 * time.Millisecond, fragmentTokens(0), 3 * ToolCallTokens,
			func(g received) bool { return g.fragments >= 3 }}},
	} {
		for _, k := range tc.kinds {
			t.Run(tc.name+"/"+k.name, func(t *testing.T) {
				t.Parallel()
				testCut(t, k, tc.cut)
			})
		}
	}
}

// TestProducedStopsWithoutDelay: without a delay the stream still stops
// when its client hangs up: a reply of 100000 tokens is far from done.
func TestProducedStopsWithoutDelay(t *testing.T) {
	s, ts := start(t, Config{})
	g, err := readStream(t, ts, chatKind, chatKind.request(ts, "x mock:tokens=100000", 0),
		func(g received) bool { return g.text >= 10 })
	if !errors.Is(err, errClientHungUp) {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), idleWait)
	defer cancel()
	if err := s.WaitIdle(ctx, testKey); err != nil {
		t.Fatal("the stream goes on after the hang-up")
	}
	rec, st := lastRecord(t, s), s.KeyStats(testKey)
	t.Logf("received %d tokens, produced %d of 100000", g.tokens, rec.ProducedOutput)
	if st.Canceled != 1 || rec.ProducedOutput < int64(g.tokens) || rec.ProducedOutput >= 100000 {
		t.Errorf("produced %d, stats %+v", rec.ProducedOutput, st)
	}
}

// failingWriter is a ResponseWriter whose writes fail from the first one
// that contains fail, without the request's context ending.
type failingWriter struct {
	header      http.Header
	fail        string
	failed      bool
	writesAfter int // writes tried after the failure
}

func (w *failingWriter) Header() http.Header { return w.header }
func (w *failingWriter) WriteHeader(int)     {}
func (w *failingWriter) Flush()              {}

func (w *failingWriter) Write(b []byte) (int, error) {
	if w.failed {
		w.writesAfter++
		return 0, errors.New("broken pipe")
	}
	if strings.Contains(string(b), w.fail) {
		w.failed = true
		return 0, errors.New("broken pipe")
	}
	return len(b), nil
}

// TestProducedStopsOnFailedWrite: a failed write ends every stream kind at
// once, without a delay and while the request's context is alive; the
// token of the chunk whose write failed counts as produced.
func TestProducedStopsOnFailedWrite(t *testing.T) {
	ts := &httptest.Server{URL: "http://mock.test"} // only for the requests' URLs
	for _, k := range textStreamKinds {
		t.Run(k.name, func(t *testing.T) {
			s := New(Config{})
			w := &failingWriter{header: http.Header{}, fail: ReplyToken(5)} // text token 5, the first "consectetur"
			req := k.request(ts, "x mock:thinking=3 mock:tokens=200", 0)
			r := httptest.NewRequest(req.Method, req.URL.String(), req.Body)
			r.Header = req.Header
			s.ServeHTTP(w, r)
			rec, st := lastRecord(t, s), s.KeyStats(testKey)
			// 3 thinking tokens, then text tokens 0 to 5, the last one not written
			if !w.failed || w.writesAfter != 0 || rec.ProducedOutput != 9 || st.StreamedText != 5 || st.Canceled != 1 || !rec.Finished {
				t.Errorf("failed %v, %d writes after the failure, produced %d; stats %+v", w.failed, w.writesAfter, rec.ProducedOutput, st)
			}
		})
	}
}

// TestProducedInjectedFailures: a stream that mock:cut or mock:error_after
// stops has produced its thinking and the text chunks it sent.
func TestProducedInjectedFailures(t *testing.T) {
	s, ts := start(t, Config{})
	for _, tc := range []struct {
		text string
		want int64
	}{
		{"x mock:thinking=2 mock:tokens=6 mock:cut=3", 5},
		{"x mock:thinking=2 mock:tokens=6 mock:error_after=4", 6},
	} {
		_, _ = readStream(t, ts, anthropicKind, anthropicKind.request(ts, tc.text, 0), nil)
		if err := s.WaitIdle(ctxT(t), testKey); err != nil {
			t.Fatal(err)
		}
		if rec := lastRecord(t, s); rec.ProducedOutput != tc.want {
			t.Errorf("%q: produced %d, want %d", tc.text, rec.ProducedOutput, tc.want)
		}
	}
	if st := s.KeyStats(testKey); st.Failed != 2 || st.ProducedOutput != 11 {
		t.Errorf("stats %+v", st)
	}
}

// TestWaitIdle: WaitIdle returns at once for a key without requests being
// served, waits for those that are, and gives up with its context.
func TestWaitIdle(t *testing.T) {
	s, ts := start(t, Config{})
	if err := s.WaitIdle(ctxT(t), "nobody"); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _, _ = post(t, ts, testKey, "/v1/chat/completions", chatBody("x mock:latency=300ms", ""))
	}()
	waitFor(t, func() bool { return s.KeyStats(testKey).Active == 1 })
	if rec := lastRecord(t, s); rec.Finished {
		t.Error("a request being served is finished")
	}
	ctx, cancel := context.WithTimeout(ctxT(t), 20*time.Millisecond)
	defer cancel()
	if err := s.WaitIdle(ctx, testKey); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("while the request is served: %v", err)
	}
	if err := s.WaitIdle(ctxT(t), testKey); err != nil {
		t.Fatal(err)
	}
	if st, rec := s.KeyStats(testKey), lastRecord(t, s); st.Active != 0 || st.Completed != 1 || !rec.Finished || rec.ProducedOutput != 0 {
		t.Errorf("after: %+v, record finished %v produced %d", st, rec.Finished, rec.ProducedOutput)
	}
	<-done
}

// TestDelayBeforeArguments: the delay is waited before each argument
// fragment (Gemini: before its element of calls), streamed or not.
func TestDelayBeforeArguments(t *testing.T) {
	_, ts := start(t, Config{})
	for _, v := range everyVendor {
		want := time.Duration(2*len(toolArgumentFragments)) * 20 * time.Millisecond
		if v.name == "gemini" {
			want = 20 * time.Millisecond
		}
		for _, stream := range []bool{false, true} {
			t0 := time.Now()
			res, _, err := send(t, ts, v.request(ts, "x mock:tools=2 mock:delay=20ms", stream))
			if took := time.Since(t0); err != nil || res.StatusCode != 200 || took < want {
				t.Errorf("%s, stream %v: %v after %v; want at least %v", v.name, stream, err, took, want)
			}
		}
	}
}
