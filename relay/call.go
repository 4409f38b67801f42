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
	"strings"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/modelgate/modelgate/formats"
	"github.com/modelgate/modelgate/formats/rawjson"
	"github.com/modelgate/modelgate/formats/sse"
	"github.com/modelgate/modelgate/formats/tokencount"
	"github.com/modelgate/modelgate/ledger"
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

	outputCapped bool

	req       *genRequest
	outputCap int
	bodies    []preparedBody // the request rendered for each route

	hosted hostedTally // what the answer showed of its hosted-tool uses

	choices int // the answers the request asked for (OpenAI's n)
	// hungUp is when the client hung up on a stream its provider stops
	// (on_hangup stop), in Unix nanoseconds; 0 before. wrote says the
	// upstream request was written whole: a hang-up before it costs
	// nothing.
	hungUp atomic.Int64
	wrote  atomic.Bool
	// thinking is whether the request asks for thinking or a reasoning
	// effort (thinkingUnknown until reasonsOutOfSight reads its body).
	thinking uint8
}

// reserve holds what the request's quote says it may cost
// (generationQuote) and returns the output cap the hold leaves: lowered to
// what the balance covers when it covers the input, the hosted tools and
// at least min_output tokens but not the whole cap (docs/billing.md,
// "Holds").
func (c *call) reserve(h http.Header, inputBound int64, outputCap, choices int) (int, *formats.Error) {
	q := generationQuote(c.model, inputBound, c.hostedHold(), outputCap, choices, c.svc.MinOutput)
	if ferr := c.takeHold(h, q); ferr != nil {
		return 0, ferr
	}
	c.choices = max(choices, 1)
	outputCap, c.outputCapped = q.outputCapFor(c.bill.Held())
	return outputCap, nil
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
			WroteRequest: func(httptrace.WroteRequestInfo) { c.wrote.Store(true) },
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
		cause := upstream.CauseClosed
		if timedOut.Load() {
			cause = upstream.CauseTimeout
		}
		return nil, c.fail(cause, 0, formats.NewError(formats.KindUpstream, "The upstream provider's stream broke off before it began."))
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
		cause := upstream.CauseClosed
		if timedOut.Load() {
			cause = upstream.CauseTimeout
		}
		return nil, c.fail(cause, 0, formats.NewError(formats.KindUpstream, "The upstream provider's answer broke off."))
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
		return c.errorResponse(req, formats.NewError(formats.KindUpstream, "The client closed the request.")), nil
	}
	if err := c.settle(usage, hasUsage, outputBytes, http.StatusOK, outcomeOK, false); err != nil {
		return c.errorResponse(req, billingFailed()), nil
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
		cause := upstream.CauseClosed
		if timedOut.Load() {
			cause = upstream.CauseTimeout
		}
		return nil, c.fail(cause, 0, formats.NewError(formats.KindUpstream, "The upstream provider's answer broke off."))
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

// meteredStream is the body of a streamed answer as the client sees it: it
// reads the upstream's events one at a time, translates each into the
// client's format, and meters usage. When the upstream's stream ends it
// settles the bill before it releases the client's final bytes. If the client
// goes away first, Close keeps reading the upstream (bounded) to learn the
// real usage, then settles.
type meteredStream struct {
	c      *call
	client context.Context // the client's request: done when it leaves
	src    io.ReadCloser
	events *sse.Reader
	tr     formats.StreamTranslator
	cancel context.CancelFunc

	// meter counts the generated output. With stops (on_hangup stop), a
	// hang-up stops the stream; firstEvent is when the upstream's first
	// event came (the output's rate is measured from it); unwatch stops
	// watching the client.
	meter      *tokencount.Meter
	stops      bool
	firstEvent time.Time
	unwatch    func()

	out    []byte // client bytes not yet read
	off    int
	ended  bool // the bill is settled and out holds the last bytes
	closed bool

	// while writeTo runs: the client's writer and flusher (what was
	// translated is sent before the bill is settled, see writeTo)
	w       io.Writer
	flusher *http.ResponseController

	// With keepAlive set, upstream events are read on a goroutine so that
	// Read can send the keep-alive bytes to the client whenever the
	// upstream is silent for Service.KeepAlive (Anthropic clients expect a
	// ping; an Anthropic upstream sends its own).
	keepAlive []byte
	ka        *eventPump
	kaTimer   *time.Timer
}

// fill makes out hold client bytes not yet sent, reading and translating
// upstream events as needed; false once the stream has ended and all of it
// was sent.
func (s *meteredStream) fill() bool {
	for s.off == len(s.out) {
		if s.ended {
			return false
		}
		s.out, s.off = s.out[:0], 0
		s.step()
	}
	return true
}

// writeTo writes the stream to the client until it ends or a write fails
// (the client left). The translated bytes are sent, one write and a flush,
// before any wait for the upstream or for the ledger: events that arrived
// together leave together, as reverse_proxy's copy sends them, and no event
// waits for a later one or for the bill.
func (s *meteredStream) writeTo(w io.Writer, f *http.ResponseController) {
	s.w, s.flusher = w, f
	defer func() { s.w, s.flusher = nil, nil }()
	for !s.ended {
		if !s.ready() && !s.send() {
			return
		}
		s.step()
	}
	s.send()
}

// send writes the translated bytes not sent yet and flushes them; false
// when the client is gone. Outside writeTo it does nothing (Read hands the
// bytes out instead).
func (s *meteredStream) send() bool {
	if s.w == nil || s.off == len(s.out) {
		return true
	}
	_, err := s.w.Write(s.out[s.off:])
	s.out, s.off = s.out[:0], 0
	return err == nil && s.flusher.Flush() == nil
}

// ready reports whether the next step has its upstream event at hand, so
// that it cannot wait for the upstream. With keep-alives the pump's
// goroutine reads the events; while it waits for the last one handed over
// to be used (pending), the reader is still and may be asked (and a ready
// event read here, see nextEvent). Otherwise the pump may be reading, and
// the step may wait.
func (s *meteredStream) ready() bool {
	if s.ka != nil && !s.ka.pending {
		return false
	}
	return s.events.Ready()
}

// Read returns the next client bytes, at most one upstream event's worth,
// so that every event is flushed as it arrives.
func (s *meteredStream) Read(p []byte) (int, error) {
	if !s.fill() {
		return 0, io.EOF
	}
	n := copy(p, s.out[s.off:])
	s.off += n
	return n, nil
}

// step reads one upstream event and translates it, or sends a keep-alive.
func (s *meteredStream) step() {
	event, data, err, idle := s.next()
	if idle {
		s.out = append(s.out, s.keepAlive...)
		return
	}
	if err != nil {
		if s.stops && s.c.stoppedEarly() {
			// the gateway closed the upstream: its client hung up
			s.stop()
			return
		}
		// the upstream's stream ended before its terminal event
		s.end(outcomeUpstreamCut, formats.NewError(formats.KindUpstream, "The upstream provider's stream broke off."))
		return
	}
	before := len(s.out)
	out, done, ferr := s.tr.Feed(s.out, event, data)
	s.out = out
	if s.c.ttft == 0 && len(out) > before {
		s.c.ttft = time.Since(s.c.start)
	}
	switch {
	case ferr != nil:
		s.end(outcomeUpstreamError, ferr)
	case done:
		s.finish()
	}
}

// finish settles a stream that ended normally, then appends its last bytes.
func (s *meteredStream) finish() {
	outcome := outcomeOK
	if !s.send() || s.client.Err() != nil {
		// The client left before the end: the events that arrived with the
		// last one were never written one by one, so no failed write told
		// writeTo; the answer was made all the same and is billed.
		outcome = outcomeClientClosed
	}
	u, final := s.usage()
	switch err := s.c.settle(u, final, s.tr.OutputBytes(), http.StatusOK, outcome, true); {
	case err == nil:
		if c, ok := s.tr.(formats.Costed); ok && s.c.format == FormatChat {
			c.SetCost(s.c.bill.Charged().String())
		}
		s.out = s.tr.Finish(s.out)
	case errors.Is(err, ledger.ErrWriteFailed):
		s.out = s.tr.Fail(s.out, billingDelayed())
	default:
		s.out = s.tr.Fail(s.out, billingFailed())
	}
	s.ended = true
}

// end settles a stream that broke off — what was delivered is billed — and
// appends the client format's error event.
func (s *meteredStream) end(outcome string, e *formats.Error) {
	s.send()
	u, final := s.usage()
	s.c.logger.Warn("stream ended early",
		zap.String("request_id", s.c.reqID),
		zap.String("provider", s.c.route.Provider.Name),
		zap.String("upstream_key", s.c.upstreamKeyID),
		zap.String("outcome", outcome))
	_ = s.c.settle(u, final, s.tr.OutputBytes(), http.StatusOK, outcome, true)
	s.out = s.tr.Fail(s.out, e)
	s.ended = true
}

// Close ends the stream. If the client left before the end, it drains the
// upstream until the upstream ends it (see drain), then settles what the
// upstream made.
func (s *meteredStream) Close() error {
	if s.closed {
		return nil
	}
	s.closed = true
	if !s.ended {
		if s.stops {
			s.stop()
		} else {
			s.drain()
			u, final := s.usage()
			_ = s.c.settle(u, final, s.tr.OutputBytes(), http.StatusOK, outcomeClientClosed, true)
		}
	}
	s.unwatch()
	err := s.src.Close()
	s.cancel()
	if s.ka != nil {
		close(s.ka.quit)
		s.kaTimer.Stop()
	}
	s.c.attempt.Release()
	return err
}

// drainBytesPerToken bounds the output bytes a drain reads per token of the
// call's output cap: no tokenizer makes tokens that long, so an upstream
// past it is ignoring the cap and is cut off.
const drainBytesPerToken = 64

// drain reads the rest of a stream whose client left: the provider goes on
// generating (and charging) after the client's hang-up, so the gateway goes
// on reading, to bill what was made. It stops when the upstream ends
// the stream, after the provider's drain_timeout, or once the output read
// goes far past the call's output cap; the upstream is then cut off.
func (s *meteredStream) drain() {
	timer := time.AfterFunc(s.c.route.Provider.DrainTimeout, s.cancel)
	defer timer.Stop()
	limit := int64(max(s.c.outputCap, 1)+formats.BaseTokens) * drainBytesPerToken
	var scratch []byte
	for s.tr.OutputBytes() <= limit {
		event, data, err := s.nextEvent()
		if err != nil {
			return
		}
		var more bool
		if scratch, more = s.discard(scratch, event, data); !more {
			return
		}
	}
}

// discard meters an upstream event that no client will read (its bytes go
// to scratch, returned for the next); false once the stream is over.
func (s *meteredStream) discard(scratch, event, data []byte) ([]byte, bool) {
	scratch, done, ferr := s.tr.Feed(scratch[:0], event, data)
	return scratch, !done && ferr == nil
}

// DefaultKeepAlive is Service.KeepAlive's default.
const DefaultKeepAlive = 15 * time.Second

// anthropicPing is the keep-alive event of an Anthropic stream.
var anthropicPing = []byte("event: ping\ndata: {\"type\": \"ping\"}\n\n")

// next returns the next upstream event, or idle when a keep-alive is due.
// Keep-alives start once the client has had its first bytes, so that they
// never come before the stream's opening event.
func (s *meteredStream) next() (event, data []byte, err error, idle bool) {
	if s.keepAlive == nil || s.c.ttft == 0 {
		event, data, err = s.nextEvent()
		return event, data, err, false
	}
	if s.ready() {
		event, data, err = s.events.Next()
		return event, data, err, false
	}
	s.pump()
	s.kaTimer.Reset(s.c.svc.keepAlive())
	select {
	case r := <-s.ka.results:
		event, data, err = s.received(r)
		return event, data, err, false
	case <-s.kaTimer.C:
		return nil, nil, nil, true
	}
}

// nextEvent waits for the next upstream event.
func (s *meteredStream) nextEvent() (event, data []byte, err error) {
	if s.keepAlive == nil || s.ready() {
		return s.events.Next()
	}
	s.pump()
	return s.received(<-s.ka.results)
}

// pump starts the keep-alive pump on first use and lets it read the next
// event. An event already buffered is read on the request's goroutine
// instead (next, nextEvent): the pump, if started, waits for its ack and
// leaves the reader alone, and the round trip through it costs two channel
// operations and two wake-ups an event.
func (s *meteredStream) pump() {
	if s.ka == nil {
		s.ka = startEventPump(s.events)
		s.kaTimer = time.NewTimer(s.c.svc.keepAlive())
	}
	s.ka.release()
}

// received takes an event from the pump.
func (s *meteredStream) received(r pumped) (event, data []byte, err error) {
	s.ka.pending = r.err == nil
	return r.event, r.data, r.err
}

// eventPump reads SSE events on its own goroutine and hands them over one
// at a time: the next read waits until the previous event was used, since
// the reader reuses its buffers.
type eventPump struct {
	results chan pumped
	ack     chan struct{}
	quit    chan struct{}
	pending bool // an event was handed over and not yet released
}

// pumped is one read.
type pumped struct {
	event, data []byte
	err         error
}

func startEventPump(r *sse.Reader) *eventPump {
	p := &eventPump{results: make(chan pumped, 1), ack: make(chan struct{}, 1), quit: make(chan struct{})}
	go func() {
		for {
			event, data, err := r.Next()
			select {
			case p.results <- pumped{event, data, err}:
			case <-p.quit:
				return
			}
			if err != nil {
				return
			}
			select {
			case <-p.ack:
			case <-p.quit:
				return
			}
		}
	}()
	return p
}

// release lets the pump read the next event.
func (p *eventPump) release() {
	if p.pending {
		p.pending = false
		p.ack <- struct{}{}
	}
}

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

// usage is the stream's usage so far and whether it is final; a figure that
// is not final has at least the output the meter counted, so that the
// estimate of a stream cut short never counts fewer tokens than the
// vendor's tokenizer (4 bytes a token undercounts code and CJK text).
func (s *meteredStream) usage() (formats.Usage, bool) {
	u, final := s.tr.Usage()
	if !final {
		u.Output = max(u.Output, s.c.withinCap(s.meter.Tokens()))
	}
	return u, final
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
