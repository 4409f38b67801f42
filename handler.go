package modelgate

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/modelgate/modelgate/formats"
	"github.com/modelgate/modelgate/ledger"
)

func init() {
	caddy.RegisterModule(APIHandler{})
}

// APIHandler serves the gateway's API: the index at / and /v1, the OpenAI
// and Anthropic routes under /v1, the Gemini routes under /v1beta (and under
// /v1/models/{model}:…, where the Google GenAI SDK sends them), and
// /api/usage. Requests for other paths go to the next handler. Every answer,
// errors included, is in the client's wire format.
type APIHandler struct {
	app       *App
	logger    *zap.Logger
	accessLog *zap.Logger // where the http app writes access log lines (scrubAccessLog)
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
	h.accessLog = accessLogger(ctx)
	app, err := appFor(ctx, "modelgate_api")
	if err != nil {
		return err
	}
	h.app = app
	return nil
}

// apiRoute is what a request path asks for.
type apiRoute uint8

const (
	routeNone             apiRoute = iota // not ours: next handler
	routeIndex                            // GET / and /v1
	routeModels                           // GET /v1/models, in the shape the client expects
	routeModel                            // GET /v1/models/{id}
	routeChat                             // POST /v1/chat/completions
	routeResponses                        // POST /v1/responses
	routeImageGenerations                 // POST /v1/images/generations
	routeImageEdits                       // POST /v1/images/edits
	routeMessages                         // POST /v1/messages
	routeMessagesCount                    // POST /v1/messages/count_tokens
	routeGeminiModels                     // GET /v1beta/models
	routeGeminiModel                      // GET /v1beta/models/{model}
	routeGeminiGenerate                   // POST …/models/{model}:generateContent
	routeGeminiStream                     // POST …/models/{model}:streamGenerateContent
	routeGeminiCount                      // POST …/models/{model}:countTokens
	routeUsage                            // GET /api/usage
	routePaymentWebhook                   // POST /api/payments/stripe: the payment provider's notifications
	routeUnknown                          // under /v1 or /v1beta but no such route: 404
)

// routeInfo is a classified request path.
type routeInfo struct {
	route  apiRoute
	arg    string       // the model of a model or Gemini route
	format clientFormat // the format its errors are written in
	method string       // the HTTP method it accepts
}

// classify maps a path to its route.
func classify(path string) routeInfo {
	switch path {
	case "/", "/v1", "/v1/":
		return routeInfo{route: routeIndex, method: http.MethodGet}
	case "/v1/models":
		return routeInfo{route: routeModels, method: http.MethodGet}
	case "/v1/chat/completions":
		return routeInfo{route: routeChat, format: clientOpenAI, method: http.MethodPost}
	case "/v1/responses":
		return routeInfo{route: routeResponses, format: clientResponses, method: http.MethodPost}
	case "/v1/images/generations":
		return routeInfo{route: routeImageGenerations, format: clientImages, method: http.MethodPost}
	case "/v1/images/edits":
		return routeInfo{route: routeImageEdits, format: clientImages, method: http.MethodPost}
	case "/v1/messages":
		return routeInfo{route: routeMessages, format: clientAnthropic, method: http.MethodPost}
	case "/v1/messages/count_tokens":
		return routeInfo{route: routeMessagesCount, format: clientAnthropic, method: http.MethodPost}
	case "/v1beta/models", "/v1beta/models/":
		return routeInfo{route: routeGeminiModels, format: clientGemini, method: http.MethodGet}
	case "/api/usage":
		return routeInfo{route: routeUsage, method: http.MethodGet}
	case "/api/payments/stripe":
		return routeInfo{route: routePaymentWebhook, method: http.MethodPost}
	}
	if rest, ok := strings.CutPrefix(path, "/v1beta/models/"); ok {
		return classifyGemini(rest, true)
	}
	if rest, ok := strings.CutPrefix(path, "/v1/models/"); ok && rest != "" {
		if strings.Contains(rest, ":") {
			return classifyGemini(rest, false)
		}
		return routeInfo{route: routeModel, arg: rest, method: http.MethodGet}
	}
	if strings.HasPrefix(path, "/v1beta/") {
		return routeInfo{route: routeUnknown, format: clientGemini}
	}
	if strings.HasPrefix(path, "/v1/") {
		return routeInfo{route: routeUnknown, format: clientOpenAI}
	}
	return routeInfo{route: routeNone}
}

// classifyGemini maps "{model}" or "{model}:{method}" of a Gemini path.
func classifyGemini(rest string, v1beta bool) routeInfo {
	// a full resource name reads models/models/{id}
	rest = strings.TrimPrefix(rest, "models/")
	model, method, hasMethod := cutLast(rest, ':')
	if !hasMethod {
		if v1beta && rest != "" {
			return routeInfo{route: routeGeminiModel, arg: rest, format: clientGemini, method: http.MethodGet}
		}
		return routeInfo{route: routeUnknown, format: clientGemini}
	}
	ri := routeInfo{arg: model, format: clientGemini, method: http.MethodPost}
	switch method {
	case "generateContent":
		ri.route = routeGeminiGenerate
	case "streamGenerateContent":
		ri.route = routeGeminiStream
	case "countTokens":
		ri.route = routeGeminiCount
	default:
		ri.route = routeUnknown
	}
	if model == "" {
		ri.route = routeUnknown
	}
	return ri
}

// cutLast splits s around the last sep.
func cutLast(s string, sep byte) (before, after string, found bool) {
	if i := strings.LastIndexByte(s, sep); i >= 0 {
		return s[:i], s[i+1:], true
	}
	return s, "", false
}

// ServeHTTP serves one API request.
func (h *APIHandler) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	ri := classify(r.URL.Path)
	if ri.route == routeNone {
		return next.ServeHTTP(w, r)
	}
	// Client credentials go no further than this handler; the proxied
	// request is built fresh, so they never reach an upstream or its logs,
	// and the access log line of the request shows them redacted.
	if logLine := h.scrubAccessLog(w, r); logLine != nil {
		defer logLine()
	}
	cred := takeCredential(r, acceptsQueryKey(ri))

	reqID := ledger.NewRequestID()
	w.Header().Set("X-Request-Id", reqID)
	if h.app.ledgerInUse != nil {
		// a server refused its ledger (#16), between the start of its HTTP
		// app and its own refusal: nothing is held here
		writeError(w, ri.format, &formats.Error{Kind: formats.KindOverloaded,
			Message: "This gateway is not serving: its ledger is in use by another server."})
		return nil
	}

	if ri.route == routeModels || ri.route == routeModel {
		// the same path serves three SDKs: answer in the one that asked
		switch {
		case r.Header.Get("Anthropic-Version") != "":
			ri.format = clientAnthropic
		case cred.via == viaGoogHeader || cred.via == viaQuery:
			ri.format = clientGemini
		}
	}
	if ri.route == routeIndex {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			return methodNotAllowed(w, ri)
		}
		writeJSON(w, http.StatusOK, h.app.index)
		return nil
	}
	if ri.route == routeUnknown {
		writeError(w, ri.format, &formats.Error{Kind: formats.KindNotFound, Code: "unknown_url",
			Message: "Unknown request URL: " + r.Method + " " + r.URL.Path + "."})
		return nil
	}
	if r.Method != ri.method && !(ri.method == http.MethodGet && r.Method == http.MethodHead) {
		return methodNotAllowed(w, ri)
	}

	if ri.route == routePaymentWebhook {
		// signed by the provider, not keyed, and sent from wherever the
		// provider's servers are
		h.servePaymentWebhook(w, r)
		return nil
	}
	if h.app.blockedRegion(r) {
		h.app.metrics.refused("region")
		writeError(w, ri.format, regionBlocked())
		return nil
	}
	p, ferr := h.authenticate(cred)
	if ferr != nil {
		writeError(w, ri.format, ferr)
		return nil
	}
	if ri.format == clientAnthropic && (ri.route == routeMessages || ri.route == routeMessagesCount) &&
		r.Header.Get("Anthropic-Version") == "" {
		writeError(w, clientAnthropic, formats.InvalidRequest("anthropic-version", "anthropic-version: header is required"))
		return nil
	}

	switch ri.route {
	case routeModels, routeGeminiModels:
		h.serveModelList(w, r, ri.format)
	case routeModel, routeGeminiModel:
		h.serveModel(w, ri.format, ri.arg)
	case routeUsage:
		h.serveUsage(w, r, p)
	case routeImageGenerations, routeImageEdits:
		h.serveImages(w, r, p, ri, reqID)
	default:
		h.serveGeneration(w, r, p, ri, reqID)
	}
	return nil
}

// credVia says where a credential was found.
type credVia uint8

const (
	viaNone credVia = iota
	viaBearer
	viaAPIKeyHeader
	viaGoogHeader
	viaQuery
	viaMalformedAuthorization
)

// credential is the API key a request carries.
type credential struct {
	key string
	via credVia
}

// acceptsQueryKey reports whether a route takes the key as ?key=: the
// Gemini routes (under /v1beta, and /v1/models/{model}:method), as
// Google's API does, and the model list and model of /v1, which answer
// Gemini clients in their shape. Elsewhere ?key= is no credential (#17).
func acceptsQueryKey(ri routeInfo) bool {
	return ri.format == clientGemini || ri.route == routeModels || ri.route == routeModel
}

// takeCredential takes the API key from Authorization: Bearer, x-api-key,
// x-goog-api-key or, when queryKey is set, ?key=, and removes all of them
// (?key= too when it is no credential) from the request so that nothing
// after this handler sees a key.
func takeCredential(r *http.Request, queryKey bool) credential {
	var c credential
	h := r.Header
	if v := h.Get("Authorization"); v != "" {
		const scheme = "Bearer "
		if len(v) > len(scheme) && strings.EqualFold(v[:len(scheme)], scheme) {
			c = credential{strings.TrimSpace(v[len(scheme):]), viaBearer}
		} else {
			c.via = viaMalformedAuthorization
		}
	} else if v := h.Get("X-Api-Key"); v != "" {
		c = credential{strings.TrimSpace(v), viaAPIKeyHeader}
	} else if v := h.Get("X-Goog-Api-Key"); v != "" {
		c = credential{strings.TrimSpace(v), viaGoogHeader}
	}
	h.Del("Authorization")
	h.Del("X-Api-Key")
	h.Del("X-Goog-Api-Key")
	if r.URL.RawQuery != "" {
		// parsed, so that an escaped name (%6Bey) is found too
		if q := r.URL.Query(); q.Has("key") {
			if v := q.Get("key"); v != "" && c.via == viaNone && queryKey {
				c = credential{strings.TrimSpace(v), viaQuery}
			}
			q.Del("key")
			r.URL.RawQuery = q.Encode()
			r.RequestURI = r.URL.RequestURI()
		}
	}
	return c
}

// principal is an authenticated caller.
type principal struct {
	ledger.Principal
	plan *plan
}

// authenticate checks the key and the account's state. The key itself never
// appears in an error.
func (h *APIHandler) authenticate(c credential) (principal, *formats.Error) {
	switch c.via {
	case viaNone:
		return principal{}, &formats.Error{Kind: formats.KindAuthentication,
			Message: "You didn't provide an API key. Send it as Authorization: Bearer <API_KEY> (or x-api-key: <API_KEY>)."}
	case viaMalformedAuthorization:
		return principal{}, &formats.Error{Kind: formats.KindAuthentication,
			Message: "Malformed Authorization header: expected Bearer <API_KEY>."}
	}
	if !ledger.WellFormedKey(c.key) {
		return principal{}, &formats.Error{Kind: formats.KindAuthentication,
			Message: "Malformed API key: keys look like mg-… followed by at least 40 letters and digits."}
	}
	p, err := h.app.store.Authenticate(c.key)
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
	writeError(w, clientOpenAI, formats.NewError(formats.KindInternal, "The gateway could not read the usage; try again."))
}

// serveGeneration handles the generation and token-count routes of every
// format: parse, then hold and proxy (generation) or count.
func (h *APIHandler) serveGeneration(w http.ResponseWriter, r *http.Request, p principal, ri routeInfo, reqID string) {
	// the plan's limits come first: a refused request holds nothing and
	// reaches no upstream; the slot is held until the answer ends
	slot, ok := h.admit(w, r, p, ri.format)
	if !ok {
		return
	}
	defer slot.Release()
	body, ferr := readBody(r, h.app.MaxRequestBody)
	if ferr != nil {
		writeError(w, ri.format, ferr)
		return
	}
	var req *genRequest
	count := false
	switch ri.route {
	case routeChat:
		req, ferr = parseChat(body)
	case routeResponses:
		req, ferr = parseResponses(body)
	case routeMessages:
		req, ferr = parseMessages(body, false, r.Header)
	case routeMessagesCount:
		req, ferr = parseMessages(body, true, r.Header)
		count = true
	case routeGeminiGenerate:
		req, ferr = parseGenerate(body, ri.arg, false, false, false)
	case routeGeminiStream:
		req, ferr = parseGenerate(body, ri.arg, true, r.URL.Query().Get("alt") == "sse", false)
	case routeGeminiCount:
		req, ferr = parseGenerate(body, ri.arg, false, false, true)
		count = true
	}
	if ferr != nil {
		writeError(w, ri.format, ferr)
		return
	}
	m, ok := h.app.models[req.model]
	if !ok {
		writeError(w, ri.format, modelNotFound(req.model))
		return
	}
	// hosted tools and upstream state: served as the model allows (#16)
	if req.plan, ferr = m.admitGated(req); ferr != nil {
		writeError(w, ri.format, ferr)
		return
	}
	c := &call{
		app:           h.app,
		logger:        h.logger,
		reqID:         reqID,
		start:         time.Now(),
		principal:     p,
		model:         m,
		route:         &m.routes[0],
		format:        req.format,
		stream:        req.stream,
		includeUsage:  req.includeUsage,
		sse:           req.sse,
		inputEstimate: req.inputEstimate,
		anthropicBeta: req.anthropicBeta,
	}
	c.req = req
	if count {
		// a token count: nothing held, nothing billed
		c.count = true
		c.run(w, r)
		return
	}

	outputCap := m.maxOutput
	if req.maxTokens > 0 && req.maxTokens < outputCap {
		outputCap = req.maxTokens
	}
	outputCap, ferr = c.reserve(req.inputBound, outputCap, req.choices)
	if ferr != nil {
		writeError(w, c.format, ferr)
		return
	}
	defer c.release() // every path that does not settle gives the hold back
	if c.outputCapped {
		w.Header().Set("X-Modelgate-Output-Capped", strconv.Itoa(outputCap))
	}
	c.outputCap = outputCap
	c.run(w, r)
}

// methodNotAllowed answers a known route called with the wrong method.
func methodNotAllowed(w http.ResponseWriter, ri routeInfo) error {
	allow := ri.method
	if allow == "" {
		allow = http.MethodGet
	}
	w.Header().Set("Allow", allow)
	writeError(w, ri.format, &formats.Error{Kind: formats.KindMethodNotAllowed, Message: "This route accepts " + allow + " only."})
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

// queryInt reads a positive integer query parameter, or def.
func queryInt(q url.Values, name string, def, max int) int {
	n, err := strconv.Atoi(q.Get(name))
	if err != nil || n <= 0 {
		return def
	}
	return min(n, max)
}

// Interface guards
var (
	_ caddy.Provisioner           = (*APIHandler)(nil)
	_ caddyhttp.MiddlewareHandler = (*APIHandler)(nil)
)
