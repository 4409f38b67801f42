package modelgate

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/modelgate/modelgate/formats"
	"github.com/modelgate/modelgate/formats/openai"
	"github.com/modelgate/modelgate/ledger"
)

func init() {
	caddy.RegisterModule(APIHandler{})
}

// APIHandler serves the gateway's API: the index at / and /v1, the OpenAI
// routes under /v1, and /api/usage. Requests for other paths go to the next
// handler. Every answer, errors included, is in the client's wire format.
type APIHandler struct {
	app    *App
	logger *zap.Logger
}

// CaddyModule returns the Caddy module information.
func (APIHandler) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "http.handlers.modelgate_api",
		New: func() caddy.Module { return new(APIHandler) },
	}
}

// Provision finds the modelgate app.
func (h *APIHandler) Provision(ctx caddy.Context) error {
	h.logger = ctx.Logger()
	app, err := ctx.AppIfConfigured("modelgate")
	if err != nil {
		return errors.New("modelgate_api needs the modelgate global option (providers, models, ledger)")
	}
	h.app = app.(*App)
	return nil
}

// apiRoute is what a request path asks for.
type apiRoute uint8

const (
	routeNone apiRoute = iota // not ours: next handler
	routeIndex
	routeModels
	routeModel
	routeChat
	routeUsage
	routeUnknownV1 // under /v1 but no such route: 404
)

// classify maps a path to its route.
func classify(path string) (apiRoute, string) {
	switch path {
	case "/", "/v1", "/v1/":
		return routeIndex, ""
	case "/v1/models":
		return routeModels, ""
	case "/v1/chat/completions":
		return routeChat, ""
	case "/api/usage":
		return routeUsage, ""
	}
	if id, ok := strings.CutPrefix(path, "/v1/models/"); ok && id != "" {
		return routeModel, id
	}
	if strings.HasPrefix(path, "/v1/") || strings.HasPrefix(path, "/v1beta/") {
		return routeUnknownV1, ""
	}
	return routeNone, ""
}

// ServeHTTP serves one API request.
func (h *APIHandler) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	route, arg := classify(r.URL.Path)
	if route == routeNone {
		return next.ServeHTTP(w, r)
	}
	// Client credentials go no further than this handler; the proxied
	// request is built fresh, so they never reach an upstream or its logs.
	key, keyState := credential(r.Header)
	r.Header.Del("Authorization")
	r.Header.Del("X-Api-Key")

	reqID := ledger.NewRequestID()
	w.Header().Set("X-Request-Id", reqID)

	switch route {
	case routeIndex:
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			return h.methodNotAllowed(w, "GET")
		}
		writeJSON(w, http.StatusOK, h.app.index)
		return nil
	case routeUnknownV1:
		writeError(w, &formats.Error{Kind: formats.KindNotFound, Code: "unknown_url",
			Message: "Unknown request URL: " + r.Method + " " + r.URL.Path + "."})
		return nil
	}

	p, ferr := h.authenticate(key, keyState)
	if ferr != nil {
		writeError(w, ferr)
		return nil
	}

	switch route {
	case routeModels:
		if r.Method != http.MethodGet {
			return h.methodNotAllowed(w, "GET")
		}
		writeJSON(w, http.StatusOK, h.app.modelsDoc)
	case routeModel:
		if r.Method != http.MethodGet {
			return h.methodNotAllowed(w, "GET")
		}
		m, ok := h.app.models[arg]
		if !ok {
			writeError(w, modelNotFound(arg))
			return nil
		}
		writeJSON(w, http.StatusOK, m.doc)
	case routeUsage:
		if r.Method != http.MethodGet {
			return h.methodNotAllowed(w, "GET")
		}
		h.serveUsage(w, r, p)
	case routeChat:
		if r.Method != http.MethodPost {
			return h.methodNotAllowed(w, "POST")
		}
		h.serveChat(w, r, p, reqID)
	}
	return nil
}

// keyState says how a credential was presented.
type keyState uint8

const (
	keyMissing keyState = iota
	keyMalformedHeader
	keyPresent
)

// credential takes the API key from Authorization: Bearer or x-api-key.
func credential(h http.Header) (string, keyState) {
	if v := h.Get("Authorization"); v != "" {
		const scheme = "Bearer "
		if len(v) <= len(scheme) || !strings.EqualFold(v[:len(scheme)], scheme) {
			return "", keyMalformedHeader
		}
		return strings.TrimSpace(v[len(scheme):]), keyPresent
	}
	if v := h.Get("X-Api-Key"); v != "" {
		return strings.TrimSpace(v), keyPresent
	}
	return "", keyMissing
}

// principal is an authenticated caller.
type principal struct {
	ledger.Principal
	plan *plan
}

// authenticate checks the key and the account's state. The key itself never
// appears in an error.
func (h *APIHandler) authenticate(key string, st keyState) (principal, *formats.Error) {
	switch st {
	case keyMissing:
		return principal{}, &formats.Error{Kind: formats.KindAuthentication,
			Message: "You didn't provide an API key. Send it as Authorization: Bearer <API_KEY> (or x-api-key: <API_KEY>)."}
	case keyMalformedHeader:
		return principal{}, &formats.Error{Kind: formats.KindAuthentication,
			Message: "Malformed Authorization header: expected Bearer <API_KEY>."}
	}
	if !ledger.WellFormedKey(key) {
		return principal{}, &formats.Error{Kind: formats.KindAuthentication,
			Message: "Malformed API key: keys look like mg-… followed by at least 40 letters and digits."}
	}
	p, err := h.app.store.Authenticate(key)
	if err != nil {
		if !errors.Is(err, ledger.ErrUnauthorized) {
			h.logger.Error("authenticating", zap.Error(err))
			return principal{}, formats.NewError(formats.KindInternal, "The gateway could not check the API key; try again.")
		}
		return principal{}, &formats.Error{Kind: formats.KindAuthentication,
			Message: "Incorrect API key provided, or the key was deleted."}
	}
	state, planName, err := h.app.store.AccountState(p.AccountID)
	if err != nil {
		h.logger.Error("reading account state", zap.String("account", p.AccountID), zap.Error(err))
		return principal{}, formats.NewError(formats.KindInternal, "The gateway could not read the account; try again.")
	}
	if state != ledger.StateActive {
		return principal{}, &formats.Error{Kind: formats.KindAccountSuspended,
			Message: "This account is suspended. Contact the operator of this gateway."}
	}
	return principal{Principal: p, plan: h.app.plan(planName)}, nil
}

// serveUsage answers GET /api/usage with the key's totals and the account's
// balance (SPEC §5.5).
func (h *APIHandler) serveUsage(w http.ResponseWriter, r *http.Request, p principal) {
	ku, err := h.app.store.KeyUsage(r.Context(), p.KeyID)
	if err == nil {
		var acct ledger.Account
		acct, err = h.app.store.GetAccount(r.Context(), p.AccountID)
		if err == nil {
			type keyView struct {
				Label        string `json:"label"`
				Prefix       string `json:"prefix"`
				Requests     int64  `json:"requests"`
				InputTokens  int64  `json:"input_tokens"`
				OutputTokens int64  `json:"output_tokens"`
				Spent        string `json:"spent"`
			}
			type accountView struct {
				Balance  string `json:"balance"`
				Held     string `json:"held"`
				Currency string `json:"currency"`
				Plan     string `json:"plan"`
				State    string `json:"state"`
			}
			b, _ := json.Marshal(struct {
				Object  string      `json:"object"`
				Key     keyView     `json:"key"`
				Account accountView `json:"account"`
			}{
				Object: "usage",
				Key: keyView{Label: p.Label, Prefix: p.Prefix, Requests: ku.Requests,
					InputTokens: ku.InputTokens, OutputTokens: ku.OutputTokens, Spent: ku.Spent.String()},
				Account: accountView{Balance: acct.Balance.String(), Held: acct.Held.String(),
					Currency: h.app.Currency, Plan: p.plan.name, State: string(acct.State)},
			})
			w.Header().Set("Cache-Control", "no-store")
			writeJSON(w, http.StatusOK, b)
			return
		}
	}
	h.logger.Error("reading usage", zap.String("key_id", p.KeyID), zap.Error(err))
	writeError(w, formats.NewError(formats.KindInternal, "The gateway could not read the usage; try again."))
}

// serveChat handles POST /v1/chat/completions: parse, hold, proxy. The
// transport settles the bill when the answer ends.
func (h *APIHandler) serveChat(w http.ResponseWriter, r *http.Request, p principal, reqID string) {
	body, ferr := readBody(r, h.app.MaxRequestBody)
	if ferr != nil {
		writeError(w, ferr)
		return
	}
	req, ferr := openai.ParseChatRequest(body)
	if ferr != nil {
		writeError(w, ferr)
		return
	}
	m, ok := h.app.models[req.Model]
	if !ok {
		writeError(w, modelNotFound(req.Model))
		return
	}
	rt := &m.routes[0]

	c := &call{
		app:           h.app,
		logger:        h.logger,
		reqID:         reqID,
		start:         time.Now(),
		principal:     p,
		model:         m,
		route:         rt,
		clientFormat:  "openai.chat",
		stream:        req.Stream,
		includeUsage:  req.IncludeUsage,
		inputEstimate: req.InputEstimate(),
		upstreamPath:  "/v1/chat/completions",
	}
	outputCap := m.maxOutput
	if n, ok := req.MaxTokens(); ok && n < outputCap {
		outputCap = n
	}
	outputCap, ferr = c.reserve(req.InputBound(), outputCap, req.N)
	if ferr != nil {
		writeError(w, ferr)
		return
	}
	defer c.release() // every path that does not settle gives the hold back
	if c.outputCapped {
		w.Header().Set("X-Modelgate-Output-Capped", strconv.Itoa(outputCap))
	}

	up, err := openai.RewriteChatRequest(make([]byte, 0, len(body)+64), body, rt.upstreamModel, outputCap, req.Stream)
	if err != nil {
		writeError(w, formats.InvalidRequest("", "The request body could not be rewritten for the upstream: "+err.Error()))
		return
	}
	c.upstreamBody = up
	c.proxy(w, r)
}

// methodNotAllowed answers a known route called with the wrong method.
func (h *APIHandler) methodNotAllowed(w http.ResponseWriter, allow string) error {
	w.Header().Set("Allow", allow)
	writeError(w, &formats.Error{Kind: formats.KindMethodNotAllowed, Message: "This route accepts " + allow + " only."})
	return nil
}

// modelNotFound is the 404 of an unknown model ID.
func modelNotFound(id string) *formats.Error {
	if len(id) > 200 {
		id = id[:200] + "…"
	}
	return &formats.Error{Kind: formats.KindNotFound, Param: "model", Code: "model_not_found",
		Message: "The model " + strconv.Quote(id) + " does not exist. GET /v1/models lists the models you can use."}
}

// readBody reads a request body up to limit bytes.
func readBody(r *http.Request, limit int64) ([]byte, *formats.Error) {
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

// writeJSON writes a JSON body.
func writeJSON(w http.ResponseWriter, status int, body []byte) {
	hdr := w.Header()
	hdr.Set("Content-Type", "application/json")
	hdr.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// writeError writes an error in the client's format (OpenAI, for the routes
// this handler serves today).
func writeError(w http.ResponseWriter, e *formats.Error) {
	if e.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(e.RetryAfter))
	}
	writeJSON(w, e.Status(), openai.AppendError(nil, e))
}

// mulMoney multiplies a token count by a per-token price, saturating instead
// of overflowing (a saturated hold is refused, never wrapped around).
func mulMoney(tokens int64, price ledger.Money) ledger.Money {
	if tokens <= 0 || price <= 0 {
		return 0
	}
	if tokens > math.MaxInt64/int64(price) {
		return math.MaxInt64
	}
	return ledger.Money(tokens) * price
}

// addMoney adds, saturating.
func addMoney(a, b ledger.Money) ledger.Money {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// debugf logs a debug line when debug logging is on.
func debugf(l *zap.Logger, msg string, fields ...zap.Field) {
	if c := l.Check(zapcore.DebugLevel, msg); c != nil {
		c.Write(fields...)
	}
}

// Interface guards
var (
	_ caddy.Provisioner           = (*APIHandler)(nil)
	_ caddyhttp.MiddlewareHandler = (*APIHandler)(nil)
)
