package relay

import (
	"bytes"
	"io"
	"net/http"
	"strconv"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/modelgate/modelgate/formats"
)

// Kind is what a generation route asks for.
type Kind uint8

// The generation routes.
const (
	KindChat           Kind = iota // POST /v1/chat/completions
	KindResponses                  // POST /v1/responses
	KindMessages                   // POST /v1/messages
	KindMessagesCount              // POST /v1/messages/count_tokens
	KindGeminiGenerate             // POST …/models/{model}:generateContent
	KindGeminiStream               // POST …/models/{model}:streamGenerateContent
	KindGeminiCount                // POST …/models/{model}:countTokens
)

// Format is the wire format of a kind's answers and errors.
func (k Kind) Format() Format {
	switch k {
	case KindChat:
		return FormatChat
	case KindResponses:
		return FormatResponses
	case KindMessages, KindMessagesCount:
		return FormatMessages
	}
	return FormatGemini
}

// Generate serves a generation or token-count request of kind for p: it
// reads and parses the body, finds the model (model is the one a Gemini
// path names), then holds, proxies and settles (a generation) or counts.
// The caller has authenticated p and admitted the request under its plan.
func (s *Service) Generate(w http.ResponseWriter, r *http.Request, p Principal, kind Kind, model, reqID string) {
	format := kind.Format()
	body, ferr := ReadBody(r, s.MaxRequestBody)
	if ferr != nil {
		WriteError(w, format, ferr)
		return
	}
	var req *genRequest
	count := false
	switch kind {
	case KindChat:
		req, ferr = parseChat(body)
	case KindResponses:
		req, ferr = parseResponses(body)
	case KindMessages:
		req, ferr = parseMessages(body, false, r.Header)
	case KindMessagesCount:
		req, ferr = parseMessages(body, true, r.Header)
		count = true
	case KindGeminiGenerate:
		req, ferr = parseGenerate(body, model, false, false, false)
	case KindGeminiStream:
		req, ferr = parseGenerate(body, model, true, r.URL.Query().Get("alt") == "sse", false)
	case KindGeminiCount:
		req, ferr = parseGenerate(body, model, false, false, true)
		count = true
	}
	if ferr != nil {
		WriteError(w, format, ferr)
		return
	}
	m, ok := s.ModelFor(p, req.model)
	if !ok {
		WriteError(w, format, ModelNotFound(req.model))
		return
	}
	report := reportOf(r.Context())
	report.setModel(m.ID)
	// hosted tools and upstream state: served as the model allows
	if req.plan, ferr = m.admitGated(req); ferr != nil {
		WriteError(w, format, ferr)
		return
	}
	c := &call{
		request: request{svc: s, logger: s.Logger, reqID: reqID, start: time.Now(), principal: p, model: m,
			format: req.format, stream: req.stream, inputEstimate: req.inputEstimate, report: report, route: &m.Routes[0]},
		includeUsage:  req.includeUsage,
		sse:           req.sse,
		anthropicBeta: req.anthropicBeta,
	}
	c.req = req
	if count {
		// a token count: nothing held, nothing billed
		c.count = true
		c.run(w, r, m.routes, c)
		return
	}

	if ferr = c.reserve(w.Header()); ferr != nil {
		WriteError(w, c.format, ferr)
		return
	}
	defer c.bill.Release() // every path that does not settle gives the hold back
	c.run(w, r, m.routes, c)
}

// ModelNotFound is the 404 of an unknown model ID.
func ModelNotFound(id string) *formats.Error {
	if len(id) > 200 {
		id = id[:200] + "…"
	}
	return &formats.Error{Kind: formats.KindNotFound, Param: "model", Code: "model_not_found",
		Message: "The model " + strconv.Quote(id) + " does not exist. GET /v1/models lists the models you can use."}
}

// ReadBody reads a request body up to limit bytes.
func ReadBody(r *http.Request, limit int64) ([]byte, *formats.Error) {
	tooLarge := &formats.Error{Kind: formats.KindRequestTooLarge,
		Message: "The request body is larger than the limit of " + strconv.FormatInt(limit, 10) + " bytes."}
	if r.ContentLength > limit {
		return nil, tooLarge
	}
	size := r.ContentLength
	if size < 0 || size > 1<<20 {
		size = 512
	}
	buf := bytes.NewBuffer(make([]byte, 0, size+1))
	n, err := buf.ReadFrom(io.LimitReader(r.Body, limit+1))
	if err != nil {
		return nil, formats.InvalidRequest("", "The request body could not be read.")
	}
	if n > limit {
		return nil, tooLarge
	}
	return buf.Bytes(), nil
}

// WriteJSON writes a JSON body.
func WriteJSON(w http.ResponseWriter, status int, body []byte) {
	hdr := w.Header()
	hdr.Set("Content-Type", "application/json")
	hdr.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write(body) //nolint:gosec // G705: the body goes out as application/json (set above), which browsers do not render as HTML
}

// Debugf logs a debug line when debug logging is on.
func Debugf(l *zap.Logger, msg string, fields ...zap.Field) {
	if c := l.Check(zapcore.DebugLevel, msg); c != nil {
		c.Write(fields...)
	}
}
