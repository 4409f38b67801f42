package relay

import (
	"context"
	"errors"
	"io"
	"net/http"
	"time"

	"go.uber.org/zap"

	"github.com/modelgate/modelgate/formats"
	"github.com/modelgate/modelgate/formats/sse"
	"github.com/modelgate/modelgate/formats/tokencount"
	"github.com/modelgate/modelgate/ledger"
)

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
