package mockupstream

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// The generation steps the three vendors share: the answer's shape (text,
// thinking, tool calls), the output cap and the order of the checks.

// ToolArguments are the arguments of every tool call the mock makes, as
// compact JSON.
const ToolArguments = `{"city":"Paris","unit":"celsius"}`

// toolArgumentFragments are ToolArguments as streamed, in this order.
var toolArgumentFragments = []string{`{"city":`, `"Paris",`, `"unit":`, `"celsius"}`}

// ToolCallTokens is the number of output tokens each tool call costs, on top
// of the reply tokens.
const ToolCallTokens = 10

// DefaultToolName is the name of the tool called by mock:tools=K when neither
// mock:tool=NAME nor the request names one.
const DefaultToolName = "get_weather"

// ThinkingSignature is the signature of the Anthropic thinking blocks the
// mock writes.
const ThinkingSignature = "sig-mock"

// GeminiThoughtSignature is the thoughtSignature (base64 of "sig-mock") the
// mock puts on the first functionCall part it writes when thinking was asked
// for, or always for "gemini-3" models.
const GeminiThoughtSignature = "c2lnLW1vY2s="

// maxToolCalls bounds mock:tools=K.
const maxToolCalls = 64

// maxHostedUses bounds mock:web_search=N and its kin.
const maxHostedUses = 100

// hostedAsk is what a request offers of the hosted tools the mock plays,
// and which of them it forces.
type hostedAsk struct {
	search, fetch, image                bool
	forceSearch, forceFetch, forceImage bool
}

// hostedUses is how many times a hosted tool is used: none when the request
// does not offer it, else the directive's count, else one when forced.
func hostedUses(directive int, offered, forced bool) int {
	switch {
	case !offered:
		return 0
	case directive >= 0:
		return directive
	case forced:
		return 1
	}
	return 0
}

// statusOverloaded is Anthropic's 529.
const statusOverloaded = 529

// thinkingWords are the words of the visible thinking, cycled.
var thinkingWords = strings.Fields("Let me think this through step by step before I answer")

// ThinkingToken is thinking token i: word i (mod len) of a fixed list.
func ThinkingToken(i int) string { return thinkingWords[i%len(thinkingWords)] }

// ThinkingText is the visible thinking of n tokens (Anthropic thinking
// blocks, Gemini thought parts): the first n thinking tokens joined by single
// spaces ("" for n ≤ 0).
func ThinkingText(n int) string {
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(ThinkingToken(i))
	}
	return b.String()
}

// streamToken is token i as a stream delta carries it: with a leading space
// when i > 0, so that the deltas concatenate to the text.
func streamToken(tok func(int) string, i int) string {
	if i > 0 {
		return " " + tok(i)
	}
	return tok(i)
}

func validToolName(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_', r == '-', r == '.', r == ':':
		default:
			return false
		}
	}
	return true
}

// toolCall is one tool call of an answer.
type toolCall struct {
	name string
	seq  uint64 // server-wide number, for the vendor's id
}

func (t toolCall) openAIID() string    { return "call_mock_" + strconv.FormatUint(t.seq, 10) }
func (t toolCall) anthropicID() string { return "toolu_mock_" + strconv.FormatUint(t.seq, 10) }

// genRequest is the vendor-neutral part of a parsed generation request.
type genRequest struct {
	model         string
	stream        bool
	maxTokens     int        // 0 = no cap
	turns         [][]string // per turn, the texts whose words count
	lastUser      []string   // the texts of the last user turn: its directives
	stopSequences []string
	firstTool     string    // the first tool the request declares, or ""
	hosted        hostedAsk // the hosted tools it offers
}

// genOptions are the vendor's differences in planning.
type genOptions struct {
	stopSequences bool // the vendor reports a matched stop sequence (Anthropic)
}

// prepare runs the steps every generation request shares once the vendor
// has parsed the body (perr is its validation error): the key (auth), the
// faults, the validation error, the directives, the model. It returns the
// plan and the input token count, or nil when the request has been answered.
func (s *Server) prepare(c *call, q *genRequest, perr *apiError, auth func(*call) bool, o genOptions) (*plan, int) {
	c.model = q.model
	if q.stream {
		c.countStream()
	}
	if !auth(c) {
		return nil, 0
	}
	f := s.takeFault(c.key)
	if fp := failurePlan(f, noDirectives()); fp.fail == failStatus || fp.fail == failHang || fp.fail == failClose {
		c.latency += fp.latency
		c.act(&fp)
		return nil, 0
	}
	if perr != nil {
		c.writeError(*perr)
		return nil, 0
	}
	d, err := parseDirectives(q.lastUser)
	if err != nil {
		c.writeError(c.vendor.badRequest(err.Error()))
		return nil, 0
	}
	prompt := InputTokens(q.turns)
	if max(d.cached, 0)+d.cacheWrite > prompt {
		c.writeError(c.vendor.badRequest(fmt.Sprintf(
			"mockupstream: directives cached=%d and cache_write=%d exceed the %d input tokens", max(d.cached, 0), d.cacheWrite, prompt)))
		return nil, 0
	}
	if d.stopSequence && o.stopSequences && len(q.stopSequences) == 0 {
		c.writeError(c.vendor.badRequest("mockupstream: directive mock:stop_sequence needs stop_sequences in the request"))
		return nil, 0
	}
	if !s.modelOK(q.model) {
		c.writeError(c.vendor.statusError(c, http.StatusNotFound, ""))
		return nil, 0
	}

	p := failurePlan(f, d)
	if d.latency >= 0 {
		c.latency = d.latency
	}
	c.latency += p.latency
	if c.act(&p) {
		return nil, 0
	}
	p.model = orDefault(d.echoModel, q.model)
	p.noUsage = d.noUsage
	p.tokens = s.replyTokens
	calls := 0
	if d.tool != "" || d.tools > 0 {
		calls = max(d.tools, 1)
		p.tokens = 0 // a tool call alone, unless tokens=N asks for text first
	}
	if d.tokens >= 0 {
		p.tokens = d.tokens
	}
	p.reasoning = max(d.reasoning, 0)
	p.searches = hostedUses(d.webSearch, q.hosted.search, q.hosted.forceSearch)
	p.fetches = hostedUses(d.webFetch, q.hosted.fetch, q.hosted.forceFetch)
	p.images = hostedUses(d.imageGeneration, q.hosted.image, q.hosted.forceImage)
	p.cached = max(d.cached, 0)
	p.cacheWrite = d.cacheWrite
	stopSeq := d.stopSequence && o.stopSequences
	if stopSeq {
		calls = 0 // the stop sequence ends the answer before any call
	}
	var capped bool
	p.tokens, p.reasoning, calls, p.output, capped = capOutput(p.tokens, p.reasoning, calls, q.maxTokens)
	name := orDefault(d.tool, orDefault(q.firstTool, DefaultToolName))
	for i := range calls {
		n := name
		if i > 0 {
			n += "_" + strconv.Itoa(i+1)
		}
		p.calls = append(p.calls, toolCall{name: n, seq: s.toolSeq.Add(1)})
	}
	switch {
	case capped:
		p.finish = finishLength
	case stopSeq:
		p.finish, p.stopSequence = finishStopSequence, q.stopSequences[0]
	case len(p.calls) > 0:
		p.finish = finishToolCalls
	default:
		p.finish = finishStop
	}
	p.finish = orDefault(d.finish, p.finish)
	p.delay = s.tokenDelay
	if d.delay >= 0 {
		p.delay = d.delay
	}
	return &p, prompt
}

// capOutput applies an output cap (≤ 0 = none) to r reasoning tokens, then n
// visible tokens, then k tool calls of ToolCallTokens each, in the order
// they are generated: a call that does not fit whole is not made. It
// returns what is left, the output tokens billed (the cap when it cut) and
// whether it cut.
func capOutput(n, r, k, limit int) (int, int, int, int, bool) {
	total := r + n + k*ToolCallTokens
	if limit <= 0 || total <= limit {
		return n, r, k, total, false
	}
	n, r, _ = applyCap(n, r, limit)
	k = min(k, (limit-r-n)/ToolCallTokens)
	return n, r, k, limit, true
}

// cutHere reports whether a stream with plan p stops (cut or error) before
// text chunk i.
func (p *plan) cutHere(i int) bool {
	return (p.fail == failCut || p.fail == failError) && i == p.after
}

// streamDelay is the wait of a non-stream answer with chunks streamed chunks.
func (p *plan) streamDelay(chunks int) time.Duration { return time.Duration(chunks) * p.delay }

// argumentChunks is the number of streamed chunks that carry the tool calls'
// arguments, one per fragment of every call (OpenAI, Anthropic).
func (p *plan) argumentChunks() int { return len(p.calls) * len(toolArgumentFragments) }

// fragmentTokens is the share of a call's ToolCallTokens that its argument
// fragment j carries: the tokens spread evenly over the fragments, the
// first ones taking the remainder (3, 3, 2, 2), so that a whole call
// carries exactly ToolCallTokens.
func fragmentTokens(j int) int {
	n := len(toolArgumentFragments)
	t := ToolCallTokens / n
	if j < ToolCallTokens%n {
		t++
	}
	return t
}

// unsent is the part of the output billed that no chunk carries: the
// tokens of a tool call that the cap cut off, generated after the text and
// the whole calls, but not sent (0 when the cap did not cut).
func (p *plan) unsent() int {
	return p.output - p.reasoning - p.tokens - len(p.calls)*ToolCallTokens
}

// ---------------------------------------------------------------------------
// JSON helpers for the strict parsers

// objectKeys returns the keys of a JSON object in order.
func objectKeys(raw []byte) ([]string, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	t, err := dec.Token()
	if err != nil {
		return nil, err
	}
	if t != json.Delim('{') {
		return nil, errors.New("not an object")
	}
	var keys []string
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, err
		}
		keys = append(keys, t.(string))
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return nil, err
		}
	}
	return keys, nil
}

// isObject reports whether raw is a JSON object.
func isObject(raw []byte) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) > 0 && raw[0] == '{' && json.Valid(raw)
}

// compactJSON is raw without insignificant whitespace (raw itself when it
// is not valid JSON).
func compactJSON(raw []byte) string {
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return string(raw)
	}
	return b.String()
}
