package mockupstream

import (
	"context"
	"io"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// maxBody bounds the request bodies the server reads.
const maxBody = 32 << 20

// maxRecorded is how many requests [Server.Requests] keeps.
const maxRecorded = 100

// Server is the mock provider; it implements [http.Handler]. Its methods are
// safe for concurrent use.
type Server struct {
	keys        map[string]struct{} // nil: any non-empty key
	models      []string            // served models; nil: any
	listed      []string            // the models GET /v1/models lists
	latency     time.Duration
	tokenDelay  time.Duration
	replyTokens int

	seq       atomic.Uint64 // request ids
	uploaded  atomic.Int64  // file bytes received by the edits route
	toolSeq   atomic.Uint64 // tool call ids
	done      chan struct{}
	closeOnce sync.Once

	mu       sync.Mutex
	faults   []Fault
	left     []int // uses left of each fault with Times > 0
	total    int64
	produced int64 // output tokens produced by streamed answers
	byKey    map[string]*KeyStats
	records  []*Recorded   // ring of maxRecorded
	next     int           // next slot of records once full
	ended    chan struct{} // closed, and replaced, whenever a request ends
}

// KeyStats counts the requests made with one key. Every finished request
// counts in exactly one of Completed, Failed and Canceled.
type KeyStats struct {
	Requests  int64 // every request
	Streams   int64 // requests asking for a stream
	Completed int64 // answered fully
	Failed    int64 // an injected failure, or an error status
	Canceled  int64 // the client went away before the answer was complete
	Active    int64 // being served now
	// StreamedText counts the text chunks of streamed answers written to
	// the connection (one reply token each): what a real provider would
	// charge for, whether or not the client read it.
	StreamedText int64
	// ProducedOutput counts the output tokens the streamed answers produced
	// up to where each stopped, as the vendor bills them: thinking, text
	// and tool-call tokens (see Counters in the package doc).
	ProducedOutput int64
	// ByStatus counts the statuses sent (a closed connection sends none).
	ByStatus map[int]int64
}

// Stats is a snapshot of the counters.
type Stats struct {
	Requests       int64               // every request
	ProducedOutput int64               // output tokens produced by streamed answers, every key
	ByKey          map[string]KeyStats // by upstream key; "" for requests without one
}

// Recorded is a request as received.
type Recorded struct {
	Time     time.Time
	Method   string
	Path     string
	RawQuery string
	Query    url.Values
	Header   http.Header // a clone; holds the key as sent
	Body     []byte
	// ProducedOutput is the output tokens the request's streamed answer
	// produced (as KeyStats.ProducedOutput counts them; 0 for a request
	// answered otherwise), final once Finished.
	ProducedOutput int64
	// Finished reports that the server is done with the request: its
	// counters and ProducedOutput no longer change.
	Finished bool
}

// New returns a server for cfg. An invalid fault (see [Config.Validate])
// answers 500.
func New(cfg Config) *Server {
	s := &Server{
		latency:     cfg.Latency,
		tokenDelay:  cfg.TokenDelay,
		replyTokens: cfg.ReplyTokens,
		done:        make(chan struct{}),
		byKey:       make(map[string]*KeyStats),
		ended:       make(chan struct{}),
	}
	if s.replyTokens <= 0 {
		s.replyTokens = DefaultReplyTokens
	}
	if len(cfg.Keys) > 0 {
		s.keys = make(map[string]struct{}, len(cfg.Keys))
		for _, k := range cfg.Keys {
			s.keys[k] = struct{}{}
		}
	}
	if len(cfg.Models) > 0 {
		s.models = slices.Clone(cfg.Models)
		s.listed = s.models
	} else {
		s.listed = slices.Clone(DefaultModels)
	}
	s.SetFaults(cfg.Faults)
	return s
}

// SetFaults replaces the faults; their Times start afresh.
func (s *Server) SetFaults(f []Fault) {
	left := make([]int, len(f))
	for i := range f {
		left[i] = f[i].Times
	}
	s.mu.Lock()
	s.faults, s.left = slices.Clone(f), left
	s.mu.Unlock()
}

// takeFault returns the fault that applies to a request made with key, and
// counts the use.
func (s *Server) takeFault(key string) *Fault {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range s.faults {
		f := s.faults[i]
		if f.Key != "" && f.Key != key {
			continue
		}
		if f.Times > 0 {
			if s.left[i] <= 0 {
				continue
			}
			s.left[i]--
		}
		if f.Validate() != nil {
			f.Mode, f.Status = FaultStatus, http.StatusInternalServerError
		}
		return &f
	}
	return nil
}

// Close ends every wait and hanging request (closing their connections);
// requests arriving later do not wait. It does not stop an [http.Server].
func (s *Server) Close() {
	s.closeOnce.Do(func() { close(s.done) })
}

// Stats returns a snapshot of the counters.
func (s *Server) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := Stats{Requests: s.total, ProducedOutput: s.produced, ByKey: make(map[string]KeyStats, len(s.byKey))}
	for k, v := range s.byKey {
		st.ByKey[k] = v.clone()
	}
	return st
}

// KeyStats returns a snapshot of the counters of one key ("" for requests
// without a key).
func (s *Server) KeyStats(key string) KeyStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	if v := s.byKey[key]; v != nil {
		return v.clone()
	}
	return KeyStats{ByStatus: map[int]int64{}}
}

func (k *KeyStats) clone() KeyStats {
	c := *k
	c.ByStatus = maps.Clone(k.ByStatus)
	if c.ByStatus == nil {
		c.ByStatus = map[int]int64{}
	}
	return c
}

// Reset clears the counters and the recorded requests. Requests being served
// still count their outcome and status when they end.
func (s *Server) Reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.total, s.produced = 0, 0
	active := make(map[string]*KeyStats)
	for k, v := range s.byKey {
		if v.Active > 0 {
			active[k] = &KeyStats{Active: v.Active, ByStatus: map[int]int64{}}
		}
	}
	s.byKey = active
	s.records, s.next = nil, 0
}

// Requests returns the last 100 requests as received, oldest first.
func (s *Server) Requests() []Recorded {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Recorded, 0, len(s.records))
	for i := range s.records {
		out = append(out, *s.records[(s.next+i)%len(s.records)])
	}
	return out
}

// WaitIdle waits until no request made with key ("" for requests without
// one) is being served, so that the counters and the recorded
// ProducedOutput of the requests that were in flight are final. It returns
// ctx's error if ctx ends first.
func (s *Server) WaitIdle(ctx context.Context, key string) error {
	for {
		s.mu.Lock()
		busy := s.byKey[key] != nil && s.byKey[key].Active > 0
		ended := s.ended
		s.mu.Unlock()
		if !busy {
			return nil
		}
		select {
		case <-ended:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// record keeps a request as received; the server updates the returned
// record (under s.mu) while it serves the request.
func (s *Server) record(r *http.Request, body []byte) *Recorded {
	rec := &Recorded{
		Time:     time.Now(),
		Method:   r.Method,
		Path:     r.URL.Path,
		RawQuery: r.URL.RawQuery,
		Query:    r.URL.Query(),
		Header:   r.Header.Clone(),
		Body:     body,
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.records) < maxRecorded {
		s.records = append(s.records, rec)
		return rec
	}
	s.records[s.next] = rec
	s.next = (s.next + 1) % maxRecorded
	return rec
}

// stats returns the counters of key, creating them; s.mu must be held.
func (s *Server) stats(key string) *KeyStats {
	v := s.byKey[key]
	if v == nil {
		v = &KeyStats{ByStatus: map[int]int64{}}
		s.byKey[key] = v
	}
	return v
}

// ServeHTTP serves the mock API.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/v1/images/edits" && r.Method == http.MethodPost && !isAnthropic(r) && !isGemini(r) {
		s.openAIImageEdit(w, r) // read as it arrives, never whole
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	rec := s.record(r, body)
	handle, vendor, key := s.route(r)
	c := s.begin(w, r, key, body, vendor)
	c.rec = rec
	defer c.end()
	switch {
	case err != nil:
		c.cancel() // the client went away while sending
	case len(body) > maxBody:
		e := c.vendor.statusError(c, http.StatusRequestEntityTooLarge, "")
		if _, ok := c.vendor.(openAI); ok {
			e = apiError{status: http.StatusRequestEntityTooLarge, typ: "invalid_request_error",
				message: "Request body too large (limit " + strconv.Itoa(maxBody) + " bytes)."}
		}
		c.writeError(e)
	default:
		handle(c)
	}
}

// route picks the handler, the vendor and the key of a request. The vendor
// is recognised by the path, and on the paths the vendors share (GET
// /v1/models) by the vendor's own headers: anthropic-version for Anthropic,
// x-goog-api-key or ?key= without Authorization for Gemini.
func (s *Server) route(r *http.Request) (func(*call), vendor, string) {
	switch {
	case isAnthropic(r):
		return s.anthropicRoute(r), anthropicAPI{}, anthropicKey(r)
	case isGemini(r):
		return s.geminiRoute(r), geminiAPI{}, geminiKey(r)
	}
	if h := s.openAIRoute(r); h != nil {
		return h, openAI{}, bearerKey(r)
	}
	return s.openAINotFound, openAI{}, bearerKey(r)
}

// ---------------------------------------------------------------------------
// One request

// vendor renders errors in one provider's format.
type vendor interface {
	// statusError is the vendor's canonical error for an injected status;
	// retryAfter is the Retry-After value in seconds, or "". A 404 is the
	// vendor's unknown-model error for c.model.
	statusError(c *call, status int, retryAfter string) apiError
	// badRequest is the vendor's 400 for a message of the mock's own (a bad
	// directive).
	badRequest(message string) apiError
	// errorBody is the error envelope.
	errorBody(c *call, e apiError) []byte
	// setHeaders sets the vendor's usual response headers.
	setHeaders(c *call)
}

// apiError is a vendor-neutral error; param and code "" are null. typ is
// the error type (OpenAI, Anthropic) or the status name (Gemini); details are
// Gemini's error details.
type apiError struct {
	status                    int
	typ, message, param, code string
	details                   []any
}

// outcomes of a request.
const (
	outNone = iota
	outCompleted
	outFailed
	outCanceled
)

// call is one request being served.
type call struct {
	s       *Server
	w       http.ResponseWriter
	r       *http.Request
	rc      *http.ResponseController
	ctx     context.Context
	key     string
	model   string // the requested model, once known
	body    []byte
	vendor  vendor
	start   time.Time
	id      uint64
	latency time.Duration // waited once, before the headers
	waited  bool
	outcome int
	rec     *Recorded // the request's record, or nil
}

func (s *Server) begin(w http.ResponseWriter, r *http.Request, key string, body []byte, v vendor) *call {
	s.mu.Lock()
	s.total++
	st := s.stats(key)
	st.Requests++
	st.Active++
	s.mu.Unlock()
	return &call{
		s: s, w: w, r: r, rc: http.NewResponseController(w), ctx: r.Context(),
		key: key, body: body, vendor: v, start: time.Now(), id: s.seq.Add(1), latency: s.latency,
	}
}

// requestID is the id of the request, as the vendors' request-id headers
// carry it.
func (c *call) requestID() string { return "req_mock" + strconv.FormatUint(c.id, 10) }

func (c *call) end() {
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	c.s.stats(c.key).Active--
	if c.rec != nil {
		c.rec.Finished = true
	}
	close(c.s.ended)
	c.s.ended = make(chan struct{})
}

// finish sets the outcome once.
func (c *call) finish(outcome int) {
	if c.outcome != outNone {
		return
	}
	c.outcome = outcome
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	st := c.s.stats(c.key)
	switch outcome {
	case outCompleted:
		st.Completed++
	case outFailed:
		st.Failed++
	case outCanceled:
		st.Canceled++
	}
}

func (c *call) complete() { c.finish(outCompleted) }

// streamedText counts one text chunk written to the connection.
func (c *call) streamedText() {
	c.s.mu.Lock()
	c.s.stats(c.key).StreamedText++
	c.s.mu.Unlock()
}

// produce counts n output tokens as produced by the streamed answer.
func (c *call) produce(n int) {
	if n <= 0 {
		return
	}
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	c.s.produced += int64(n)
	c.s.stats(c.key).ProducedOutput += int64(n)
	if c.rec != nil {
		c.rec.ProducedOutput += int64(n)
	}
}

// generate waits the delay before a streamed chunk that carries n output
// tokens, then counts them as produced, before the chunk is written; false
// (the call canceled) when the client went away during the wait.
func (c *call) generate(p *plan, n int) bool {
	if !c.sleep(p.delay) {
		return false
	}
	c.produce(n)
	return true
}

func (c *call) fail()   { c.finish(outFailed) }
func (c *call) cancel() { c.finish(outCanceled) }

func (c *call) countStream() {
	c.s.mu.Lock()
	c.s.stats(c.key).Streams++
	c.s.mu.Unlock()
}

// writeHeader sends the status and counts it.
func (c *call) writeHeader(status int) {
	c.s.mu.Lock()
	c.s.stats(c.key).ByStatus[status]++
	c.s.mu.Unlock()
	c.vendor.setHeaders(c)
	c.w.WriteHeader(status)
}

// sleep waits d; false when the wait was cut short (and the call is then
// finished: canceled, its connection closed if the server was closed).
func (c *call) sleep(d time.Duration) bool {
	if d <= 0 {
		select {
		case <-c.ctx.Done():
			c.cancel()
			return false
		case <-c.s.done:
			// Closed: answer without waiting.
		default:
		}
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-c.ctx.Done():
		c.cancel()
		return false
	case <-c.s.done:
		return true
	}
}

// beforeHeaders waits the latency (once) plus extra; false when the client
// went away.
func (c *call) beforeHeaders(extra time.Duration) bool {
	d := extra
	if !c.waited {
		c.waited = true
		d += c.latency
	}
	return c.sleep(d)
}

// writeError answers e in the vendor's envelope.
func (c *call) writeError(e apiError) { c.writeErrorRetry(e, "") }

func (c *call) writeErrorRetry(e apiError, retryAfter string) {
	if !c.beforeHeaders(0) {
		return
	}
	body := c.vendor.errorBody(c, e)
	h := c.w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	if retryAfter != "" {
		h.Set("Retry-After", retryAfter)
	}
	c.fail()
	c.writeHeader(e.status)
	_, _ = c.w.Write(body)
}

// writeJSON answers 200 with body.
func (c *call) writeJSON(body []byte) {
	h := c.w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	c.writeHeader(http.StatusOK)
	if _, err := c.w.Write(body); err != nil {
		c.cancel()
		return
	}
	c.complete()
}

// writeCut answers 200 with the Content-Length of body but only half of it,
// then closes the connection.
func (c *call) writeCut(body []byte) {
	h := c.w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	c.fail()
	c.writeHeader(http.StatusOK)
	_, _ = c.w.Write(body[:len(body)/2])
	_ = c.rc.Flush()
	c.abort()
}

// act carries out a plan's status, hang or close failure; false when the plan
// has none of them and the caller must answer.
func (c *call) act(p *plan) bool {
	switch p.fail {
	case failStatus:
		ra := p.retryAfterSeconds(p.status)
		c.writeErrorRetry(c.vendor.statusError(c, p.status, ra), ra)
	case failHang:
		c.fail()
		select {
		case <-c.ctx.Done():
		case <-c.s.done:
			c.abort()
		}
	case failClose:
		if c.beforeHeaders(0) {
			c.fail()
			c.abort()
		}
	default:
		return false
	}
	return true
}

// abort closes the connection at once, without finishing the response.
func (c *call) abort() {
	conn, _, err := c.rc.Hijack()
	if err != nil {
		// HTTP/2, or a wrapper that cannot hijack: net/http resets the
		// stream or closes the connection.
		panic(http.ErrAbortHandler)
	}
	_ = conn.Close()
}
