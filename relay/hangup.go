package relay

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/modelgate/modelgate/formats"
	"github.com/modelgate/modelgate/formats/rawjson"
	"github.com/modelgate/modelgate/upstream"
)

// Stopping a stream whose client hung up (on_hangup stop, docs/billing.md
// "When the client hangs up"). OpenAI and Anthropic stop generating, and
// billing, when the connection closes: so does the gateway. It closes the
// upstream connection as soon as the client's is gone and bills what it
// counted of the output sent until then, plus a margin for what the
// provider made before it saw the close.

// errStopped ends an attempt whose client hung up before the stream began:
// the call is over, with nobody to answer and nothing to fail over.
var errStopped = errors.New("the client hung up; the upstream was stopped")

// hangupMarginMin and hangupMarginWindow make the in-flight margin: the
// tokens of the last hangupMarginWindow at the stream's observed rate, and
// at least hangupMarginMin.
const (
	hangupMarginMin    = 16
	hangupMarginWindow = 200 * time.Millisecond
)

// stopsOnHangup reports whether this call's stream stops when its client
// hangs up: the provider's on_hangup is stop, and the provider does not
// reason out of sight (reasonsOutOfSight).
func (c *call) stopsOnHangup() bool {
	return c.stream && c.route.Provider.StopOnHangup && !c.reasonsOutOfSight()
}

// What a request's body says of thinking, once read (call.thinking).
const (
	thinkingUnknown = iota
	thinkingNo
	thinkingYes
)

// reasonsOutOfSight reports whether the provider may bill reasoning that
// its stream does not show whole: a model declared with the reasoning
// feature, a model of OpenAI's reasoning families on an OpenAI-format
// provider (their reasoning is hidden), or a request that asks for
// thinking (Claude 4 and later show a summary of it, billing the whole).
// The text sent then understates the bill and a count of it would not
// cover it: such a stream is drained.
func (c *call) reasonsOutOfSight() bool {
	if c.model.Reasoning {
		return true
	}
	if c.route.Provider.Format == upstream.FormatOpenAI && hasPrefixFold(c.route.UpstreamModel, openAIReasoningFamilies) {
		return true
	}
	if c.thinking == thinkingUnknown {
		// the body is read once, whatever the attempts
		c.thinking = thinkingNo
		if c.req != nil && asksThinking(c.req.body) {
			c.thinking = thinkingYes
		}
	}
	return c.thinking == thinkingYes
}

// openAIReasoningFamilies are the name prefixes of OpenAI's models that
// always reason, out of sight.
var openAIReasoningFamilies = []string{"o1", "o3", "o4", "gpt-5", "codex-"}

// openAIFamilies are the name prefixes of the models o200k_base counts
// exactly.
var openAIFamilies = []string{"gpt-4o", "gpt-4.1", "gpt-4.5", "gpt-5", "chatgpt-4o", "o1", "o3", "o4", "codex-"}

// hasPrefixFold reports whether s starts with one of prefixes, ignoring
// case.
func hasPrefixFold(s string, prefixes []string) bool {
	for _, p := range prefixes {
		if len(s) >= len(p) && strings.EqualFold(s[:len(p)], p) {
			return true
		}
	}
	return false
}

// asksThinking reports whether a request body, in any client format, asks
// for thinking or a reasoning effort: Anthropic's thinking (not disabled),
// OpenAI's reasoning_effort and reasoning (not "none"), Gemini's
// thinkingConfig (a budget other than 0). One walk over the body's
// members.
func asksThinking(body []byte) bool {
	it := rawjson.Object(body, 0)
	for it.Next() {
		v := it.Value()
		switch {
		case it.NameIs("thinking"):
			if rawjson.Kind(v) == '{' && !rawjson.StringIs(rawjson.Get(v, "type"), "disabled") {
				return true
			}
		case it.NameIs("reasoning_effort"):
			if rawjson.Kind(v) == '"' && !rawjson.StringIs(v, "none") {
				return true
			}
		case it.NameIs("reasoning"):
			if rawjson.Kind(v) == '{' && !rawjson.StringIs(rawjson.Get(v, "effort"), "none") {
				return true
			}
		case it.NameIs("generationConfig"), it.NameIs("generation_config"):
			if geminiThinks(v) {
				return true
			}
		}
	}
	return false
}

// geminiThinks reports whether a Gemini generationConfig has a
// thinkingConfig whose budget is not 0.
func geminiThinks(gc []byte) bool {
	tc := rawjson.Get(gc, "thinkingConfig")
	if tc == nil {
		tc = rawjson.Get(gc, "thinking_config")
	}
	if rawjson.Kind(tc) != '{' {
		return false
	}
	budget := rawjson.Get(tc, "thinkingBudget")
	if budget == nil {
		budget = rawjson.Get(tc, "thinking_budget")
	}
	n, ok := rawjson.ParseInt(budget)
	return !ok || n != 0
}

// exactCount reports whether the route's model is counted with the
// encoding the gateway ships (o200k_base, OpenAI's GPT-4o and later, the o
// series and GPT-5 families); every other model is counted with
// tokencount.Bound.
func (c *call) exactCount() bool {
	if c.route.Provider.Format != upstream.FormatOpenAI {
		return false
	}
	return hasPrefixFold(c.route.UpstreamModel, openAIFamilies)
}

// watchHangup makes a client's hang-up cancel the upstream call at once,
// when the call stops on hang-up; the returned func stops the watch.
func (c *call) watchHangup(stops bool, client context.Context, cancel context.CancelFunc) func() {
	if !stops {
		return func() {}
	}
	stop := context.AfterFunc(client, func() {
		c.hungUp.CompareAndSwap(0, time.Now().UnixNano())
		cancel()
	})
	return func() { stop() }
}

// stoppedEarly reports whether the client hung up on a call that stops.
func (c *call) stoppedEarly() bool { return c.hungUp.Load() != 0 }

// settleStoppedEarly bills a stream whose client hung up before its first
// event reached it, once the upstream had the whole request: the input (as
// the upstream reported it, else the request's own count) and the
// in-flight margin, as client_closed. A request the upstream never had
// whole costs nothing.
func (c *call) settleStoppedEarly(u formats.Usage) error {
	if c.wrote.Load() {
		c.settleCounted(u, 0, 0)
	}
	return errStopped
}

// settleCounted bills a stopped stream: counted output tokens over the
// time since the first event, plus the margin, within the output cap.
func (c *call) settleCounted(u formats.Usage, counted int64, elapsed time.Duration) {
	u.Output = max(u.Output, c.withinCap(counted+hangupMargin(counted, elapsed)))
	status := http.StatusOK
	if c.ttft == 0 {
		status = statusClientClosed
	}
	hosted, hostedCost := c.hostedCost(u)
	_ = c.bill.SettleCounted(u, hosted, hostedCost,
		End{Status: status, Outcome: outcomeClientClosed, Collect: true})
}

// hangupMargin is the in-flight margin of a stream stopped after elapsed,
// having counted tokens: what the provider generated before it saw the
// close, at the stream's observed rate.
//
// A stream younger than the window is measured over the window: a burst of
// tokens in its first event says nothing of the rate, and the margin is
// then never more than what was counted.
func hangupMargin(counted int64, elapsed time.Duration) int64 {
	elapsed = max(elapsed, hangupMarginWindow)
	window := (counted*int64(hangupMarginWindow) + int64(elapsed) - 1) / int64(elapsed)
	return max(hangupMarginMin, window)
}

// stop ends a stream whose client hung up: the upstream is closed at once,
// the events it had already delivered to the gateway are counted, and the
// bill settled with what was counted.
func (s *meteredStream) stop() {
	s.c.hungUp.CompareAndSwap(0, time.Now().UnixNano())
	s.cancel()
	// the events already read from the connection (the pump, if any,
	// holds at most one, and it fails with the cancel)
	var scratch []byte
	for more := s.ka == nil; more && s.events.Ready(); {
		event, data, err := s.events.Next()
		if err != nil {
			break
		}
		scratch, more = s.discard(scratch, event, data)
	}
	s.ended = true
	if u, final := s.tr.Usage(); final {
		// the vendor's own count came before the hang-up was seen
		_ = s.c.settle(u, true, s.tr.OutputBytes(), http.StatusOK, outcomeClientClosed, true)
		return
	}
	u, _ := s.tr.Usage()
	elapsed := time.Duration(s.c.hungUp.Load() - s.firstEvent.UnixNano())
	s.c.settleCounted(u, s.meter.Tokens(), elapsed)
}

// withinCap is an output count no larger than the output cap the upstream
// was sent, for every choice: no provider generates past it, and the bound
// may count above what it made.
func (c *call) withinCap(tokens int64) int64 {
	if limit := int64(c.outputCap) * int64(max(c.choices, 1)); limit > 0 {
		return min(tokens, limit)
	}
	return tokens
}
