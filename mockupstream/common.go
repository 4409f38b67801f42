package mockupstream

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Config configures a [Server]. The zero value is usable: any non-empty key,
// no latency, 12-token replies, every model, no faults.
type Config struct {
	// Keys are the accepted upstream API keys, as each vendor sends them
	// (OpenAI: Authorization: Bearer K; Anthropic: x-api-key or Bearer;
	// Gemini: x-goog-api-key or ?key=). Empty: any non-empty key is accepted.
	Keys []string
	// Latency is waited before the response headers of every request.
	Latency time.Duration
	// TokenDelay is waited before each streamed chunk that carries output
	// tokens (text, shown thinking, tool-call arguments); a non-stream answer
	// waits TokenDelay for each such chunk before its headers.
	TokenDelay time.Duration
	// ReplyTokens is the default reply length in tokens. Default: 12.
	ReplyTokens int
	// Models, if non-empty, are the only models served, by every vendor, and
	// the model lists list them: others get the vendor's 404. Empty: every
	// model is served, and the lists show [DefaultModels] (OpenAI),
	// [DefaultAnthropicModels] or [DefaultGeminiModels].
	Models []string
	// Faults inject failures per upstream key; see the package doc.
	Faults []Fault
}

// DefaultReplyTokens is the reply length when Config.ReplyTokens is 0.
const DefaultReplyTokens = 12

// DefaultModels is the model list of GET /v1/models (OpenAI shape) when
// Config.Models is empty.
var DefaultModels = []string{"gpt-4o-mini", "gpt-4o", "gpt-4.1", "gpt-4.1-mini", "o4-mini"}

// The fault modes.
const (
	FaultStatus = "status" // answer with Fault.Status and its error envelope
	FaultHang   = "hang"   // never answer, until the client goes away
	FaultClose  = "close"  // close the connection without a response
	FaultCut    = "cut"    // cut the connection after Fault.After content chunks
	FaultError  = "error"  // stream: error event after Fault.After content chunks; non-stream: 500
	FaultSlow   = "slow"   // no failure; only Fault.Latency
)

// Fault injects a failure for the requests made with an upstream key.
type Fault struct {
	// Key is the upstream key it applies to; "" applies to every key.
	Key string
	// Mode is "status", "hang", "close", "cut", "error" or "slow".
	Mode string
	// Status is the status for mode "status" (e.g. 500, 429, 503, 401). Default: 500.
	Status int
	// RetryAfter is sent as the Retry-After header, in seconds rounded up.
	// A 429 or 529 without it gets Retry-After: 1.
	RetryAfter time.Duration
	// After is the number of text chunks sent before mode "cut" cuts the
	// connection, or before mode "error" sends the error event.
	After int
	// Times is how many requests the fault applies to; 0 = every request.
	Times int
	// Latency is an extra wait before the fault acts (any mode).
	Latency time.Duration
}

// Validate reports a fault that cannot act as documented.
func (f Fault) Validate() error {
	switch f.Mode {
	case FaultStatus:
		if f.Status != 0 && (f.Status < 400 || f.Status > 599) {
			return fmt.Errorf("mockupstream: fault status %d is not an error status (400-599)", f.Status)
		}
	case FaultHang, FaultClose, FaultCut, FaultError, FaultSlow:
	default:
		return fmt.Errorf("mockupstream: unknown fault mode %q", f.Mode)
	}
	if f.After < 0 || f.Times < 0 || f.RetryAfter < 0 || f.Latency < 0 {
		return errors.New("mockupstream: negative fault field")
	}
	return nil
}

// Validate reports a configuration that cannot work as documented.
func (c Config) Validate() error {
	if c.Latency < 0 || c.TokenDelay < 0 || c.ReplyTokens < 0 {
		return errors.New("mockupstream: negative latency, token delay or reply tokens")
	}
	for i, f := range c.Faults {
		if err := f.Validate(); err != nil {
			return fmt.Errorf("fault %d: %w", i, err)
		}
	}
	return nil
}

// ---------------------------------------------------------------------------
// Token rules

// replyWords are the reply's tokens, cycled.
var replyWords = strings.Fields("Lorem ipsum dolor sit amet consectetur adipiscing elit sed do " +
	"eiusmod tempor incididunt ut labore et dolore magna aliqua")

// ReplyToken is token i of every reply: word i (mod len) of a fixed list.
func ReplyToken(i int) string { return replyWords[i%len(replyWords)] }

// ReplyText is the deterministic reply of n tokens: the first n reply tokens
// joined by single spaces ("" for n ≤ 0).
func ReplyText(n int) string {
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(ReplyToken(i))
	}
	return b.String()
}

// Words is the number of whitespace-separated words of s ([strings.Fields]).
func Words(s string) int {
	n, in := 0, false
	for _, r := range s {
		if isSpace(r) {
			in = false
		} else if !in {
			in = true
			n++
		}
	}
	return n
}

func isSpace(r rune) bool {
	// The same set as strings.Fields (unicode.IsSpace).
	switch r {
	case '\t', '\n', '\v', '\f', '\r', ' ', 0x85, 0xA0, 0x1680, 0x2028, 0x2029, 0x202f, 0x205f, 0x3000:
		return true
	}
	return r >= 0x2000 && r <= 0x200a
}

// InputTokens is the prompt token count of a conversation: each element of
// messages is the list of text pieces of one message (the texts whose words
// count, see the package doc), and the result is 3 + Σ (4 + words).
func InputTokens(messages [][]string) int {
	n := 3
	for _, texts := range messages {
		n += 4
		for _, t := range texts {
			n += Words(t)
		}
	}
	return n
}

// finish reasons, vendor neutral; each vendor file maps them.
const (
	finishStop          = "stop"
	finishLength        = "length"
	finishContentFilter = "content_filter"
	finishToolCalls     = "tool_calls"
	finishStopSequence  = "stop_sequence"
)

// applyCap applies an output cap (max tokens, ≤ 0 = none) to n visible and r
// reasoning tokens: the cap bounds n + r, reasoning first.
func applyCap(n, r, limit int) (int, int, bool) {
	if limit <= 0 || n+r <= limit {
		return n, r, false
	}
	r = min(r, limit)
	return limit - r, r, true
}

// ---------------------------------------------------------------------------
// Directives

// directives are the mock: words of the last user message.
type directives struct {
	tokens, reasoning, cached int // -1 = not given
	finish                    string
	echoModel                 string
	latency, delay            time.Duration // -1 = not given
	status                    int
	retryAfter                time.Duration // -1 = not given
	hang, close               bool
	noUsage                   bool
	cut, errorAfter           int // -1 = not given
	// uses of the hosted tools the request offers; -1 = not given
	webSearch, webFetch, imageGeneration int

	// The zero values below mean "not given".
	cacheWrite   int    // cache_write=N
	tool         string // tool=NAME
	tools        int    // tools=K
	stopSequence bool   // stop_sequence
}

const maxDirectiveTokens = 100000

func noDirectives() directives {
	return directives{tokens: -1, reasoning: -1, cached: -1, latency: -1, delay: -1, retryAfter: -1, cut: -1, errorAfter: -1,
		webSearch: -1, webFetch: -1, imageGeneration: -1}
}

// parseDirectives reads every mock: word of texts. The error message is fit
// for a 400.
func parseDirectives(texts []string) (directives, error) {
	d := noDirectives()
	for _, t := range texts {
		for _, w := range strings.FieldsFunc(t, isSpace) {
			rest, ok := strings.CutPrefix(w, "mock:")
			if !ok {
				continue
			}
			name, val, hasVal := strings.Cut(rest, "=")
			if err := d.set(name, val, hasVal); err != nil {
				return d, fmt.Errorf("mockupstream: directive %q: %w", truncate(w, 64), err)
			}
		}
	}
	return d, nil
}

func (d *directives) set(name, val string, hasVal bool) error {
	flag := func(p *bool) error {
		if hasVal {
			return errors.New("takes no value")
		}
		*p = true
		return nil
	}
	count := func(p *int, max int) error {
		n, err := strconv.Atoi(val)
		if err != nil || n < 0 || n > max {
			return fmt.Errorf("want an integer from 0 to %d", max)
		}
		*p = n
		return nil
	}
	dur := func(p *time.Duration) error {
		v, err := time.ParseDuration(val)
		if err != nil || v < 0 {
			return errors.New("want a non-negative Go duration such as 250ms")
		}
		*p = v
		return nil
	}
	if !hasVal && name != "hang" && name != "close" && name != "no_usage" && name != "stop_sequence" {
		return errors.New("needs a value (mock:NAME=VALUE)")
	}
	switch name {
	case "tokens":
		return count(&d.tokens, maxDirectiveTokens)
	case "reasoning", "thinking":
		return count(&d.reasoning, maxDirectiveTokens)
	case "cached":
		return count(&d.cached, math.MaxInt32)
	case "cache_write":
		return count(&d.cacheWrite, math.MaxInt32)
	case "tool":
		if !validToolName(val) {
			return errors.New("want a tool name of 1 to 64 letters, digits, '_', '-', '.' or ':'")
		}
		d.tool = val
	case "tools":
		if err := count(&d.tools, maxToolCalls); err != nil || d.tools < 1 {
			return fmt.Errorf("want an integer from 1 to %d", maxToolCalls)
		}
	case "web_search":
		return count(&d.webSearch, maxHostedUses)
	case "web_fetch":
		return count(&d.webFetch, maxHostedUses)
	case "image_generation":
		return count(&d.imageGeneration, maxHostedUses)
	case "cut":
		return count(&d.cut, maxDirectiveTokens)
	case "error_after":
		return count(&d.errorAfter, maxDirectiveTokens)
	case "status":
		if err := count(&d.status, 599); err != nil || d.status < 400 {
			return errors.New("want an error status from 400 to 599")
		}
	case "retry_after":
		if n, err := strconv.Atoi(val); err == nil && n >= 0 {
			d.retryAfter = time.Duration(n) * time.Second
			return nil
		}
		return dur(&d.retryAfter)
	case "latency":
		return dur(&d.latency)
	case "delay":
		return dur(&d.delay)
	case "finish":
		switch val {
		case finishStop, finishLength, finishContentFilter:
			d.finish = val
		default:
			return errors.New("want stop, length or content_filter")
		}
	case "echo_model":
		if val == "" {
			return errors.New("needs a model name")
		}
		d.echoModel = val
	case "hang":
		return flag(&d.hang)
	case "close":
		return flag(&d.close)
	case "no_usage":
		return flag(&d.noUsage)
	case "stop_sequence":
		return flag(&d.stopSequence)
	default:
		return errors.New("unknown directive")
	}
	return nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// ---------------------------------------------------------------------------
// Plan: what one request will get

// failure kinds of a plan.
const (
	failNone = iota
	failStatus
	failHang
	failClose
	failCut
	failError
)

// plan is the vendor-neutral outcome of a generation request.
type plan struct {
	fail       int
	status     int           // failStatus
	retryAfter time.Duration // -1 = default (1s for 429, none otherwise)
	after      int           // failCut, failError: content chunks sent first
	injected   bool          // the failure comes from a fault or a directive

	latency time.Duration // before the headers
	delay   time.Duration // per content chunk

	model             string
	tokens, reasoning int
	cached            int
	finish            string
	noUsage           bool // report no usage at all (some compatible servers do not)

	// hosted tool uses: web searches, page fetches, generated images
	searches, fetches, images int

	cacheWrite   int        // input tokens written to the cache (Anthropic)
	calls        []toolCall // the tool calls of the answer, after the text
	output       int        // output tokens billed: tokens + reasoning + the calls' tokens, or the cap
	stopSequence string     // the stop sequence matched (Anthropic), or ""
}

// failurePlan is the failure part of a plan from a fault (which wins) or the
// directives.
func failurePlan(f *Fault, d directives) plan {
	p := plan{retryAfter: -1}
	if f != nil {
		p.injected = f.Mode != FaultSlow
		p.latency += f.Latency
		if f.RetryAfter > 0 {
			p.retryAfter = f.RetryAfter
		}
		switch f.Mode {
		case FaultStatus:
			p.fail, p.status = failStatus, orDefault(f.Status, http.StatusInternalServerError)
		case FaultHang:
			p.fail = failHang
		case FaultClose:
			p.fail = failClose
		case FaultCut:
			p.fail, p.after = failCut, f.After
		case FaultError:
			p.fail, p.after = failError, f.After
		case FaultSlow:
		default:
			p.fail, p.status = failStatus, http.StatusInternalServerError
		}
		if p.fail != failNone {
			return p
		}
	}
	if d.retryAfter >= 0 {
		p.retryAfter = d.retryAfter
	}
	switch {
	case d.status != 0:
		p.fail, p.status = failStatus, d.status
	case d.hang:
		p.fail = failHang
	case d.close:
		p.fail = failClose
	case d.cut >= 0:
		p.fail, p.after = failCut, d.cut
	case d.errorAfter >= 0:
		p.fail, p.after = failError, d.errorAfter
	}
	p.injected = p.injected || p.fail != failNone
	return p
}

func orDefault[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// retryAfterSeconds is the Retry-After value for a status, or "" for none.
func (p *plan) retryAfterSeconds(status int) string {
	d := p.retryAfter
	if d < 0 {
		if status != http.StatusTooManyRequests && status != statusOverloaded {
			return ""
		}
		d = time.Second
	}
	return strconv.FormatInt(int64(math.Ceil(d.Seconds())), 10)
}

// ---------------------------------------------------------------------------
// JSON

// marshal encodes v like the real APIs do: no HTML escaping, no newline.
func marshal(v any) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		panic(err) // only our own types are encoded
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

// jsonString is s as a JSON string literal.
func jsonString(s string) []byte { return marshal(s) }

// maskKey masks a key as OpenAI does in its 401 message: the first five and
// last two characters of a long key, nothing of a short one.
func maskKey(key string) string {
	if len(key) < 12 {
		return "***"
	}
	return key[:5] + "***" + key[len(key)-2:]
}
