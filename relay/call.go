package relay

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strconv"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/modelgate/modelgate/formats"
	"github.com/modelgate/modelgate/formats/sse"
	"github.com/modelgate/modelgate/formats/tokencount"
	"github.com/modelgate/modelgate/upstream"
)

// Limits of one call.
const (
	MaxErrorBody    = 1 << 20  // upstream error bodies read at most
	maxResponseBody = 64 << 20 // non-streamed upstream answers read at most
	maxStreamEvent  = 8 << 20  // one upstream SSE event at most
	UserAgent       = "modelgate/1"
)

// call is a generation or token-count request on its way through the
// gateway: what the handler decided (hold, upstream body) and what the
// transport learns. It settles the bill exactly once.
type call struct {
	request

	includeUsage  bool // OpenAI client: wants the usage chunk
	sse           bool // Gemini client: SSE rather than a JSON array
	count         bool // a token count: nothing held, nothing billed
	anthropicBeta []string
	upstreamBody  []byte
	passThrough   bool // client and upstream speak the same format

	req       *genRequest
	outputCap int
	bodies    []preparedBody // the request rendered for each route

	hosted hostedTally // what the answer showed of its hosted-tool uses

	choices int // the answers the request asked for (OpenAI's n)
	// hungUp is when the client hung up on a stream its provider stops
	// (on_hangup stop), in Unix nanoseconds; 0 before. wrote says the
	// upstream request was written whole (Go's client says so just before
	// it flushes the connection's buffer): a hang-up before it costs
	// nothing.
	hungUp atomic.Int64
	wrote  atomic.Bool
	// thinking is whether the request asks for thinking or a reasoning
	// effort (thinkingUnknown until reasonsOutOfSight reads its body).
	thinking uint8
}

// reserve holds what the request's quote says it may cost
// (generationQuote) and sets the output cap the hold leaves: lowered to what
// the balance covers when it covers the input, the hosted tools and at
// least min_output tokens but not the whole cap, and then said in
// X-Modelgate-Output-Capped (docs/billing.md, "Holds").
func (c *call) reserve(h http.Header) *formats.Error {
	q := generationQuote(c.model, c.req, c.hostedHold(), c.svc.MinOutput)
	if ferr := c.takeHold(h, q); ferr != nil {
		return ferr
	}
	c.choices = max(c.req.choices, 1)
	var capped bool
	if c.outputCap, capped = q.outputCapFor(c.bill.Held()); capped {
		h.Set("X-Modelgate-Output-Capped", strconv.Itoa(c.outputCap))
	}
	return nil
}

// prepare renders the request for route i (once per route) and reports
// whether the call was answered without an upstream request (a local token
// count, or a request this route's format cannot carry).
func (c *call) prepare(w http.ResponseWriter, i int) (done bool) {
	if c.bodies == nil {
		c.bodies = make([]preparedBody, len(c.model.Routes))
	}
	pb := &c.bodies[i]
	if !pb.ready {
		pb.ready = true
		switch {
		case c.count && c.route.Provider.Format == upstream.FormatOpenAI:
			pb.local = true
		case c.count:
			pb.body, pb.err = countBody(c.req, c.route)
		default:
			pb.body, pb.dropped, pb.passThrough, pb.err = upstreamBody(c.req, c.model, c.route, c.outputCap, c.svc.Signatures)
		}
	}
	if pb.err != nil {
		WriteError(w, c.format, pb.err)
		return true
	}
	if pb.local {
		c.localCount(w)
		return true
	}
	c.upstreamBody, c.passThrough = pb.body, pb.passThrough
	if pb.dropped != "" {
		w.Header().Set("X-Modelgate-Dropped", pb.dropped)
	} else {
		w.Header().Del("X-Modelgate-Dropped")
	}
	return false
}

// preparedBody is a request rendered for one route.
type preparedBody struct {
	ready       bool
	body        []byte
	dropped     string
	passThrough bool
	local       bool // a token count answered here
	err         *formats.Error
}

// localCount answers a token count with the local tokenizer, flagged as an
// estimate: the route's upstream has no count API.
func (c *call) localCount(w http.ResponseWriter) {
	ir, ferr := c.req.toIR()
	if ferr != nil {
		WriteError(w, c.format, ferr)
		return
	}
	n, err := tokencount.Count(ir)
	if err != nil {
		c.logger.Error("counting tokens", zap.Error(err))
		WriteError(w, c.format, formats.NewError(formats.KindInternal, "The gateway could not count the tokens; try again."))
		return
	}
	w.Header().Set("X-Modelgate-Token-Count", "estimate")
	WriteJSON(w, http.StatusOK, appendCount(nil, c.format, n))
}

// replayable reports that a generation can be sent again: its body was
// read whole and each route gets its own rendering of it.
func (c *call) replayable() bool { return true }

// try makes one attempt at route i (see exchange): it renders the request
// for the route (prepare), sends it to the route's provider and, when it
// succeeds, writes its answer to the client (see deliver). Whatever the
// number of attempts, the bill is settled once, by the attempt that
// answered.
func (c *call) try(w http.ResponseWriter, r *http.Request, i int) error {
	if done := c.prepare(w, i); done {
		return nil
	}
	resp, err := c.roundTrip(r)
	if err != nil {
		return err
	}
	deliver(w, resp)
	return nil
}

// deliver writes an answer the relay built to the client: its headers,
// then its body, a stream flushed event by event (docs/design.md, "The
// proxy is ours"). A client that goes away mid-answer ends the copy; closing
// the body then drains and settles what the upstream made.
func deliver(w http.ResponseWriter, resp *http.Response) {
	defer resp.Body.Close()
	h := w.Header()
	for k, v := range resp.Header {
		h[k] = v
	}
	if resp.ContentLength >= 0 {
		h["Content-Length"] = []string{strconv.FormatInt(resp.ContentLength, 10)}
	}
	w.WriteHeader(resp.StatusCode)
	if s, ok := resp.Body.(*meteredStream); ok {
		s.writeTo(w, http.NewResponseController(w))
		return
	}
	_, _ = io.Copy(w, resp.Body)
}

// roundTrip is one attempt at the upstream: it builds the upstream request
// for the call's current route and key, sends it, and turns the answer into
// the client's format. Failures before anything could reach the client
// (connection, timeout, 5xx, 429, 401/403, a stream that breaks before its
// first event) come back as an attemptError, written to nobody, so that the
// call can fail over.
func (c *call) roundTrip(req *http.Request) (*http.Response, error) {
	p := c.route.Provider
	c.svc.Metrics.Attempt(p.Name, c.upstreamKeyID)

	// A client that left before anything was sent costs nothing.
	if err := req.Context().Err(); err != nil {
		return nil, err
	}
	// Once sent, the upstream call outlives a client that goes away: the
	// provider generates (and charges) the answer whether or not anyone
	// reads it, so the gateway reads it too, to bill it. Only the
	// provider's timeouts bound it.
	ctx, cancel := context.WithCancel(context.WithoutCancel(req.Context()))
	timeout := p.ResponseTimeout
	if c.stream {
		timeout = p.FirstByteTimeout
	}
	var timedOut atomic.Bool
	timer := time.AfterFunc(timeout, func() { timedOut.Store(true); cancel() })
	keep := false // the stream keeps ctx; every other path cancels it
	stops := c.stopsOnHangup()
	unwatch := c.watchHangup(stops, req.Context(), cancel)
	defer func() {
		timer.Stop()
		if !keep {
			unwatch()
			cancel()
		}
	}()

	if stops {
		ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
			// a write that failed delivered nothing whole
			WroteRequest: func(i httptrace.WroteRequestInfo) { c.wrote.Store(i.Err == nil) },
		})
	}
	out := req.WithContext(ctx)
	path, query := upstreamURL(p.Provider, c.route.UpstreamModel, c.stream, c.count, c.passThrough && c.format == FormatResponses)
	out.URL = &url.URL{Scheme: p.Scheme, Host: p.DialAddress, Path: path, RawQuery: query}
	out.Method, out.RequestURI = http.MethodPost, ""
	out.Host = p.Host
	accept := "application/json"
	if c.stream {
		accept = "text/event-stream"
	}
	var beta []string
	if c.passThrough && c.format == FormatMessages {
		beta = c.anthropicBeta // beta features are for Anthropic upstreams only
	}
	out.Header = upstreamHeader(p, c.attempt.Key.Secret(), "application/json", accept, beta)
	body := c.upstreamBody
	out.Body = io.NopCloser(bytes.NewReader(body))
	out.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	out.ContentLength = int64(len(body))
	out.Trailer = nil
	out.Close = false

	sent := time.Now()
	resp, err := p.Upstream.RoundTrip(out)
	if err != nil {
		if c.stoppedEarly() {
			return nil, c.settleStoppedEarly(formats.Usage{})
		}
		return nil, c.fail(transportFailure(err, timedOut.Load()))
	}
	c.svc.Metrics.Headers(p.Name, c.upstreamKeyID, time.Since(sent))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return c.upstreamError(req, resp)
	}
	if c.count {
		return c.countAnswer(req, resp, &timedOut)
	}
	if !c.stream {
		return c.completeResponse(req, resp, sent, &timedOut)
	}
	if !isEventStream(resp.Header) {
		resp.Body.Close()
		return nil, c.fail(upstream.CauseServer, 0, formats.NewError(formats.KindUpstream, "The upstream provider sent an unusable answer."))
	}
	s := &meteredStream{
		c:       c,
		client:  req.Context(),
		src:     resp.Body,
		events:  sse.NewReader(resp.Body, maxStreamEvent),
		tr:      c.streamTranslator(),
		cancel:  cancel,
		unwatch: unwatch,
	}
	// the output is counted as it passes: the bill of a stream that ends
	// without the vendor's final usage rests on it
	s.meter = tokencount.NewMeter(c.exactCount())
	if m, ok := s.tr.(formats.Metered); ok {
		m.SetTokenMeter(s.meter)
	}
	s.stops = stops
	// Read the first event before committing to this attempt: a stream
	// that breaks or errs before it can still fail over.
	event, data, err := s.events.Next()
	s.firstEvent = time.Now()
	if err != nil {
		resp.Body.Close()
		if c.stoppedEarly() {
			return nil, c.settleStoppedEarly(formats.Usage{})
		}
		return nil, c.fail(brokeOff(timedOut.Load(), "The upstream provider's stream broke off before it began."))
	}
	first, done, ferr := s.tr.Feed(nil, event, data)
	if ferr == nil && !done && c.stoppedEarly() {
		// the client left while the stream opened: what it reported of
		// the input (Anthropic's message_start) is billed
		resp.Body.Close()
		u, _ := s.tr.Usage()
		return nil, c.settleStoppedEarly(u)
	}
	if ferr != nil {
		resp.Body.Close()
		cause := upstream.CauseServer
		if ferr.Kind == formats.KindOverloaded {
			cause = upstream.CauseOverloaded
		}
		return nil, c.fail(cause, 0, ferr)
	}
	timer.Stop()
	c.attempt.Succeeded(time.Since(sent))
	c.svc.Metrics.FirstEvent(p.Name, c.upstreamKeyID, time.Since(c.start))
	keep = true
	s.out = first
	if len(first) > 0 {
		c.ttft = time.Since(c.start)
	}
	if done {
		s.finish()
	}
	if c.format == FormatMessages && !c.passThrough {
		s.keepAlive = anthropicPing
	}
	resp.Body = s
	resp.Header = http.Header{
		"Content-Type":  {c.streamContentType()},
		"Cache-Control": {"no-cache"},
	}
	resp.ContentLength = -1
	resp.TransferEncoding = nil
	resp.Trailer = nil
	return resp, nil
}

// completeResponse reads a whole non-streamed answer, settles, and returns it
// in the client's format. The debit is durable before a byte is sent. An
// answer that breaks off fails over like one that never came.
func (c *call) completeResponse(req *http.Request, resp *http.Response, sent time.Time, timedOut *atomic.Bool) (*http.Response, error) {
	data, err := readAll(resp.Body, maxResponseBody)
	resp.Body.Close()
	if err != nil {
		return nil, c.fail(brokeOff(timedOut.Load(), "The upstream provider's answer broke off."))
	}
	c.attempt.Succeeded(time.Since(sent))
	c.ttft = time.Since(c.start)
	out, usage, hasUsage, outputBytes, ferr := c.translateResponse(data)
	if ferr != nil {
		return c.errorResponse(req, ferr), nil
	}
	// an upstream that reports no usage (some OpenAI-compatible servers) is
	// billed the estimate of its text rather than nothing
	if req.Context().Err() != nil {
		// the client left while the upstream answered: the answer was made
		// and is billed, though nobody will read it
		_ = c.settle(usage, hasUsage, outputBytes, statusClientClosed, outcomeClientClosed, true)
		return c.errorResponse(req, formats.NewError(formats.KindUpstream, "The client closed the request.")), nil //nolint:nilerr // the client's leaving is the answer, not an upstream failure to fail over from
	}
	if err := c.settle(usage, hasUsage, outputBytes, http.StatusOK, outcomeOK, false); err != nil {
		return c.errorResponse(req, billingFailed()), nil //nolint:nilerr // a failed settle (logged by settleRetrying) is answered with the billing error; an error here would fail over to another route after this one answered
	}
	ok := okResponse(req, resp, out)
	c.bill.setCostHeader(ok.Header)
	return ok, nil
}

// countAnswer turns an upstream's token count into the client's format.
func (c *call) countAnswer(req *http.Request, resp *http.Response, timedOut *atomic.Bool) (*http.Response, error) {
	data, err := readAll(resp.Body, MaxErrorBody)
	resp.Body.Close()
	if err != nil {
		return nil, c.fail(brokeOff(timedOut.Load(), "The upstream provider's answer broke off."))
	}
	c.attempt.Succeeded(0)
	out, ferr := c.countResponse(data)
	if ferr != nil {
		return c.errorResponse(req, ferr), nil
	}
	return okResponse(req, resp, out), nil
}

// okResponse is a 200 with a JSON body.
func okResponse(req *http.Request, resp *http.Response, body []byte) *http.Response {
	return &http.Response{
		Status:        "200 OK",
		StatusCode:    http.StatusOK,
		Proto:         resp.Proto,
		ProtoMajor:    resp.ProtoMajor,
		ProtoMinor:    resp.ProtoMinor,
		Header:        http.Header{"Content-Type": {"application/json"}},
		Body:          io.NopCloser(bytes.NewReader(body)),
		ContentLength: int64(len(body)),
		Request:       req,
	}
}

// upstreamError handles an upstream's error answer (see classifyUpstreamError):
// a failure of the upstream fails over; an error caused by the request is
// the client's answer, in its format. Nothing is billed.
func (c *call) upstreamError(req *http.Request, resp *http.Response) (*http.Response, error) {
	ferr, cause, hint, failed := c.classifyUpstreamError(resp)
	if !failed {
		c.attempt.Succeeded(0) // the upstream is fine; the request was not
		return c.errorResponse(req, ferr), nil
	}
	return nil, c.fail(cause, hint, ferr)
}

// errorResponse builds a response carrying an error in the client's format.
func (c *call) errorResponse(req *http.Request, e *formats.Error) *http.Response {
	if e.RequestID == "" {
		e.RequestID = c.reqID
	}
	body := appendError(nil, c.format, e)
	h := http.Header{"Content-Type": {"application/json"}}
	if e.RetryAfter > 0 {
		h.Set("Retry-After", strconv.Itoa(e.RetryAfter))
	}
	status := errorStatus(c.format, e)
	return &http.Response{
		Status:        strconv.Itoa(status) + " " + http.StatusText(status),
		StatusCode:    status,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        h,
		Body:          io.NopCloser(bytes.NewReader(body)),
		ContentLength: int64(len(body)),
		Request:       req,
	}
}

// settle bills the call through its bill, with the attempt that answered
// and the hosted-tool uses the answer showed: u is the upstream's
// usage, final when it is the vendor's terminal count (Bill.SettleUsage
// decides usage or estimate).
func (c *call) settle(u formats.Usage, final bool, outputBytes int64, status int, outcome string, collect bool) error {
	hosted, hostedCost := c.hostedCost(u)
	return c.bill.SettleUsage(u, final, outputBytes, hosted, hostedCost,
		End{Status: status, Outcome: outcome, Collect: collect})
}

// isEventStream reports whether a response is an SSE stream.
func isEventStream(h http.Header) bool {
	ct := h.Get("Content-Type")
	return len(ct) >= len("text/event-stream") && ct[:len("text/event-stream")] == "text/event-stream"
}

// readAll reads r to its end, failing beyond limit bytes.
func readAll(r io.Reader, limit int64) ([]byte, error) {
	var buf bytes.Buffer
	n, err := buf.ReadFrom(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, err
	}
	if n > limit {
		return nil, errors.New("answer larger than the limit")
	}
	return buf.Bytes(), nil
}
