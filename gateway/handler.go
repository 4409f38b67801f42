package gateway

import (
	"encoding/json"
	"errors"
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
	"github.com/modelgate/modelgate/relay"
)

func init() {
	caddy.RegisterModule(APIHandler{})
}

// APIHandler serves the gateway's API: the index at / and /v1, the OpenAI
// and Anthropic routes under /v1, the Gemini routes under /v1beta (and under
// /v1/models/{model}:…, where the Google GenAI SDK sends them), and
// /api/usage and /api/usage/requests/{id}. Requests for other paths go to
// the next handler. Every answer, errors included, is in the client's wire
// format (docs/api.md).
//
// The account of an authenticated request is the user of Caddy's access
// log (the http.auth.user.id placeholder, the user_id field), and each API
// request sets these placeholders, for the access log and the handlers
// after it:
//
//	{http.modelgate.request_id}      the request's id (also the X-Request-Id header)
//	{http.modelgate.account_id}      the account (once the key is checked)
//	{http.modelgate.key_id}          the key's id, never the key
//	{http.modelgate.model}           the model asked for (once the body is read)
//	{http.modelgate.provider}        the provider that answered     } once the
//	{http.modelgate.upstream_model}  the provider's name for it     } request
//	{http.modelgate.input_tokens}    the input tokens billed        } is billed
//	{http.modelgate.output_tokens}   the output tokens billed       }
//	{http.modelgate.cost}            the amount charged, a decimal  }
//	{http.modelgate.usage_source}    upstream, estimated, …         }
//	{http.modelgate.outcome}         ok, client_closed, upstream_cut, upstream_error
//
// Each API request's access log line also carries them as an object:
//
//	{"level":"info","logger":"http.log.access","msg":"handled request", …,
//	 "user_id":"acct_…","status":200,
//	 "modelgate":{"request_id":"req_…","account_id":"acct_…","key_id":"key_…",
//	   "model":"gpt-4o-mini","provider":"openai-main","upstream_model":"gpt-4o-mini",
//	   "input_tokens":9,"output_tokens":12,"cost":"0.000008550",
//	   "usage_source":"upstream","outcome":"ok"}}
//
// and log_append can add any of them as a field of its own:
//
//	log_append cost {http.modelgate.cost}
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
	h.accessLog = AccessLogger(ctx)
	app, err := AppFor(ctx, "modelgate_api")
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
	routeUsageRequest                     // GET /api/usage/requests/{id}: one request's usage row
	routePaymentWebhook                   // POST /api/payments/stripe: the payment provider's notifications
	routeUnknown                          // under /v1 or /v1beta but no such route: 404
)

// routeInfo is a classified request path.
type routeInfo struct {
	route  apiRoute
	arg    string       // the model of a model or Gemini route, the request id of a usage request route
	format relay.Format // the format its errors are written in
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
		return routeInfo{route: routeChat, format: relay.FormatChat, method: http.MethodPost}
	case "/v1/responses":
		return routeInfo{route: routeResponses, format: relay.FormatResponses, method: http.MethodPost}
	case "/v1/images/generations":
		return routeInfo{route: routeImageGenerations, format: relay.FormatImages, method: http.MethodPost}
	case "/v1/images/edits":
		return routeInfo{route: routeImageEdits, format: relay.FormatImages, method: http.MethodPost}
	case "/v1/messages":
		return routeInfo{route: routeMessages, format: relay.FormatMessages, method: http.MethodPost}
	case "/v1/messages/count_tokens":
		return routeInfo{route: routeMessagesCount, format: relay.FormatMessages, method: http.MethodPost}
	case "/v1beta/models", "/v1beta/models/":
		return routeInfo{route: routeGeminiModels, format: relay.FormatGemini, method: http.MethodGet}
	case "/api/usage":
		return routeInfo{route: routeUsage, method: http.MethodGet}
	case "/api/payments/stripe":
		return routeInfo{route: routePaymentWebhook, method: http.MethodPost}
	}
	if id, ok := strings.CutPrefix(path, usageRequestPrefix); ok && id != "" && !strings.Contains(id, "/") {
		return routeInfo{route: routeUsageRequest, arg: id, method: http.MethodGet}
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
		return routeInfo{route: routeUnknown, format: relay.FormatGemini}
	}
	if strings.HasPrefix(path, "/v1/") {
		return routeInfo{route: routeUnknown, format: relay.FormatChat}
	}
	return routeInfo{route: routeNone}
}

// usageRequestPrefix begins the path of one request's usage; the request
// id follows.
const usageRequestPrefix = "/api/usage/requests/"

// classifyGemini maps "{model}" or "{model}:{method}" of a Gemini path.
func classifyGemini(rest string, v1beta bool) routeInfo {
	// a full resource name reads models/models/{id}
	rest = strings.TrimPrefix(rest, "models/")
	model, method, hasMethod := cutLast(rest, ':')
	if !hasMethod {
		if v1beta && rest != "" {
			return routeInfo{route: routeGeminiModel, arg: rest, format: relay.FormatGemini, method: http.MethodGet}
		}
		return routeInfo{route: routeUnknown, format: relay.FormatGemini}
	}
	ri := routeInfo{arg: model, format: relay.FormatGemini, method: http.MethodPost}
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
	// what the access log line and the placeholders show of the request,
	// read only when a log line or a placeholder asks
	ctx, report := relay.WithReport(r.Context())
	r = r.WithContext(ctx)
	facts := &requestFacts{report: report}
	repl, _ := ctx.Value(caddy.ReplacerCtxKey).(*caddy.Replacer)
	if repl != nil {
		repl.Map(facts.placeholder)
	}
	if extra, ok := ctx.Value(caddyhttp.ExtraLogFieldsCtxKey).(*caddyhttp.ExtraLogFields); ok {
		extra.Add(zap.Object("modelgate", facts))
	}
	// Client credentials go no further than this handler; the proxied
	// request is built fresh, so they never reach an upstream or its logs,
	// and the access log line of the request shows them redacted.
	if logLine := scrubAccessLog(w, r, h.accessLog, "key", true, facts); logLine != nil {
		defer logLine()
	}
	cred := takeCredential(r, acceptsQueryKey(ri))

	reqID := ledger.NewRequestID()
	w.Header().Set("X-Request-Id", reqID)
	facts.requestID = reqID
	if ri.route == routeModels || ri.route == routeModel {
		// the same path serves three SDKs: answer in the one that asked
		switch {
		case r.Header.Get("Anthropic-Version") != "":
			ri.format = relay.FormatMessages
		case cred.via == viaGoogHeader || cred.via == viaQuery:
			ri.format = relay.FormatGemini
		}
	}
	if !h.app.Serving() {
		h.notServing(w, ri)
		return nil
	}
	if ri.route == routeIndex {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			return methodNotAllowed(w, ri)
		}
		if wantsPage(r) {
			h.app.serveIndexPage(w, r)
			return nil
		}
		relay.WriteJSON(w, http.StatusOK, h.app.index)
		return nil
	}
	if ri.route == routeUnknown {
		relay.WriteError(w, ri.format, &formats.Error{Kind: formats.KindNotFound, Code: "unknown_url",
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
		h.app.metrics.Refused("region")
		relay.WriteError(w, ri.format, RegionBlocked())
		return nil
	}
	p, ferr := h.authenticate(cred)
	if ferr != nil {
		relay.WriteError(w, ri.format, ferr)
		return nil
	}
	facts.accountID, facts.keyID = p.AccountID, p.KeyID
	if repl != nil {
		// the account is the user of Caddy's access log (user_id)
		repl.Set("http.auth.user.id", p.AccountID)
	}
	if ri.format == relay.FormatMessages && (ri.route == routeMessages || ri.route == routeMessagesCount) &&
		r.Header.Get("Anthropic-Version") == "" {
		relay.WriteError(w, relay.FormatMessages, formats.InvalidRequest("anthropic-version", "anthropic-version: header is required"))
		return nil
	}

	switch ri.route {
	case routeModels, routeGeminiModels:
		h.serveModelList(w, r, ri.format, p)
	case routeModel, routeGeminiModel:
		h.serveModel(w, ri.format, p, ri.arg)
	case routeUsage:
		h.serveUsage(w, r, p)
	case routeUsageRequest:
		h.serveUsageRequest(w, r, p, ri.arg)
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
// Gemini clients in their shape. Elsewhere ?key= is no credential.
func acceptsQueryKey(ri routeInfo) bool {
	return ri.format == relay.FormatGemini || ri.route == routeModels || ri.route == routeModel
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

// authenticate checks the key, its expiry and the account's state. The key
// itself never appears in an error.
func (h *APIHandler) authenticate(c credential) (relay.Principal, *formats.Error) {
	switch c.via {
	case viaNone:
		return relay.Principal{}, &formats.Error{Kind: formats.KindAuthentication,
			Message: "You didn't provide an API key. Send it as Authorization: Bearer <API_KEY> (or x-api-key: <API_KEY>)."}
	case viaMalformedAuthorization:
		return relay.Principal{}, &formats.Error{Kind: formats.KindAuthentication,
			Message: "Malformed Authorization header: expected Bearer <API_KEY>."}
	}
	if !ledger.WellFormedKey(c.key) {
		return relay.Principal{}, &formats.Error{Kind: formats.KindAuthentication,
			Message: "Malformed API key: keys look like mg-… followed by at least 40 letters and digits."}
	}
	p, err := h.app.store.Authenticate(c.key)
	if err != nil {
		if !errors.Is(err, ledger.ErrUnauthorized) {
			h.logger.Error("authenticating", zap.Error(err))
			return relay.Principal{}, formats.NewError(formats.KindInternal, "The gateway could not check the API key; try again.")
		}
		return relay.Principal{}, &formats.Error{Kind: formats.KindAuthentication,
			Message: "Incorrect API key provided, or the key was deleted."}
	}
	if p.Limits != nil && p.Limits.Expired(time.Now()) {
		return relay.Principal{}, keyExpired(p.Limits.ExpiresAt)
	}
	state, planName, err := h.app.store.AccountState(p.AccountID)
	if err != nil {
		h.logger.Error("reading account state", zap.String("account", p.AccountID), zap.Error(err))
		return relay.Principal{}, formats.NewError(formats.KindInternal, "The gateway could not read the account; try again.")
	}
	if state != ledger.StateActive {
		if h.app.store.SuspendedForDebt(p.AccountID) {
			return relay.Principal{}, &formats.Error{Kind: formats.KindAccountSuspended,
				Message: "This account is suspended: it owes money after a payment was reversed. Top up your balance to pay it, and the account resumes."}
		}
		return relay.Principal{}, &formats.Error{Kind: formats.KindAccountSuspended,
			Message: "This account is suspended. Contact the operator of this gateway."}
	}
	return relay.Principal{Principal: p, Plan: h.app.plan(planName)}, nil
}

// keyExpired is the refusal of a key that expired at at: a 401, as an
// unknown key's, that says when.
func keyExpired(at time.Time) *formats.Error {
	return &formats.Error{Kind: formats.KindAuthentication,
		Message: "This API key expired at " + at.UTC().Format(time.RFC3339) + "."}
}

// serveUsage answers GET /api/usage with the key's totals and the account's
// balance (docs/api.md).
func (h *APIHandler) serveUsage(w http.ResponseWriter, r *http.Request, p relay.Principal) {
	ku, err := h.app.store.KeyUsage(r.Context(), p.KeyID)
	var limits *keyLimitsView
	if err == nil && p.Limits != nil {
		// the key's own limits, and where its cap stands, as the admin
		// API shows them
		var k ledger.Key
		if k, err = h.app.store.KeyLimitsByID(r.Context(), p.KeyID); err == nil {
			v := toKeyLimitsView(&k, time.Now())
			limits = &v
		}
	}
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
				// Limits are the key's own, when it has any
				Limits *keyLimitsView `json:"limits,omitempty"`
			}
			type accountView struct {
				Balance  string `json:"balance"`
				Held     string `json:"held"`
				Currency string `json:"currency"`
				Plan     string `json:"plan"`
				State    string `json:"state"`
				// the month's spend and the volume tier it earns
				MonthSpend   string `json:"month_spend"`
				TierDiscount string `json:"tier_discount,omitempty"`
			}
			b, _ := json.Marshal(struct {
				Object  string      `json:"object"`
				Key     keyView     `json:"key"`
				Account accountView `json:"account"`
			}{
				Object: "usage",
				Key: keyView{Label: p.Label, Prefix: p.Prefix, Requests: ku.Requests,
					InputTokens: ku.InputTokens, OutputTokens: ku.OutputTokens, Spent: ku.Spent.String(), Limits: limits},
				Account: accountView{Balance: acct.Balance.String(), Held: acct.Held.String(),
					Currency: h.app.Currency, Plan: p.Plan.Name, State: string(acct.State),
					MonthSpend: acct.MonthSpend.String(), TierDiscount: tierPercent(p.Plan, acct.MonthSpend)},
			})
			w.Header().Set("Cache-Control", "no-store")
			relay.WriteJSON(w, http.StatusOK, b)
			return
		}
	}
	h.usageReadFailed(w, p, err)
}

// usageReadFailed logs a failed read of the usage routes and answers 500.
func (h *APIHandler) usageReadFailed(w http.ResponseWriter, p relay.Principal, err error) {
	h.logger.Error("reading usage", zap.String("key_id", p.KeyID), zap.Error(err))
	relay.WriteError(w, relay.FormatChat, formats.NewError(formats.KindInternal, "The gateway could not read the usage; try again."))
}

// requestUsageView is the answer of GET /api/usage/requests/{id}: what one
// request was billed, as its usage row has it (docs/api.md). Money is an
// exact decimal string; durations are milliseconds with three decimals.
// The provider, its name for the model and its key are not shown.
type requestUsageView struct {
	Object           string           `json:"object"`
	ID               string           `json:"id"`
	Created          int64            `json:"created"`
	Model            string           `json:"model"`
	Stream           bool             `json:"stream"`
	Status           int              `json:"status"`
	Outcome          string           `json:"outcome"`
	UsageSource      string           `json:"usage_source"`
	InputTokens      int64            `json:"input_tokens"`
	OutputTokens     int64            `json:"output_tokens"`
	CacheReadTokens  int64            `json:"cache_read_tokens"`
	CacheWriteTokens int64            `json:"cache_write_tokens"`
	ReasoningTokens  int64            `json:"reasoning_tokens"`
	HostedTools      *hostedToolsView `json:"hosted_tools,omitempty"`
	Cost             string           `json:"cost"`
	Charged          string           `json:"charged"`
	Discount         string           `json:"discount"`
	LatencyMS        float64          `json:"latency_ms"`
	TTFTMS           float64          `json:"ttft_ms"`
}

// hostedToolsView is the hosted-tool uses of a request and their part of
// its cost, before the discount; absent when it used none.
type hostedToolsView struct {
	WebSearches     int64  `json:"web_searches"`
	WebFetches      int64  `json:"web_fetches"`
	GeneratedImages int64  `json:"generated_images"`
	Cost            string `json:"cost"`
}

// requestUsageOf is the view of a usage row.
func requestUsageOf(u *ledger.UsageRecord) requestUsageView {
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	v := requestUsageView{
		Object: "usage.request", ID: u.RequestID, Created: u.CreatedAt.Unix(), Model: u.Model, Stream: u.Stream,
		Status: u.Status, Outcome: u.Outcome, UsageSource: u.UsageSource,
		InputTokens: u.Tokens.Input, OutputTokens: u.Tokens.Output, CacheReadTokens: u.Tokens.CacheRead,
		CacheWriteTokens: u.Tokens.CacheWrite, ReasoningTokens: u.Tokens.Reasoning,
		Cost: u.Cost.String(), Charged: u.Charged.String(), Discount: u.Discount.String(),
		LatencyMS: ms(u.Latency), TTFTMS: ms(u.TTFT),
	}
	if u.Hosted != (ledger.HostedUses{}) || u.HostedCost != 0 {
		v.HostedTools = &hostedToolsView{WebSearches: u.Hosted.WebSearch, WebFetches: u.Hosted.WebFetch,
			GeneratedImages: u.Hosted.ImageGeneration, Cost: u.HostedCost.String()}
	}
	return v
}

// serveUsageRequest answers GET /api/usage/requests/{id} with the usage row
// of one request of the calling key, which a client that left a stream
// early reads its bill from (docs/api.md). A request of another key, of
// the same account or not, is not found, as an unknown or unbilled one
// is, with the same answer. Neither answer is cacheable: a request not
// found now is found once it settles.
func (h *APIHandler) serveUsageRequest(w http.ResponseWriter, r *http.Request, p relay.Principal, id string) {
	w.Header().Set("Cache-Control", "no-store")
	u, err := h.app.store.UsageByRequestID(r.Context(), id)
	if err == nil && u.KeyID != p.KeyID {
		err = ledger.ErrNotFound
	}
	switch {
	case errors.Is(err, ledger.ErrNotFound):
		relay.WriteError(w, relay.FormatChat, &formats.Error{Kind: formats.KindNotFound, Code: "not_found",
			Message: "No billed request of this API key has this id. A request is listed once it is billed."})
		return
	case err != nil:
		h.usageReadFailed(w, p, err)
		return
	}
	b, _ := json.Marshal(requestUsageOf(&u))
	relay.WriteJSON(w, http.StatusOK, b)
}

// serveGeneration handles the generation and token-count routes of every
// format: the plan's limits come first (a refused request holds nothing and
// reaches no upstream; the slot is held until the answer ends), then the
// relay parses, holds, proxies and settles.
func (h *APIHandler) serveGeneration(w http.ResponseWriter, r *http.Request, p relay.Principal, ri routeInfo, reqID string) {
	slot, ok := h.admit(w, r, p, ri.format)
	if !ok {
		return
	}
	defer slot.Release()
	h.app.svc.Generate(w, r, p, generationKinds[ri.route], ri.arg, reqID)
}

// generationKinds are the relay's kinds of the generation routes.
var generationKinds = map[apiRoute]relay.Kind{
	routeChat:           relay.KindChat,
	routeResponses:      relay.KindResponses,
	routeMessages:       relay.KindMessages,
	routeMessagesCount:  relay.KindMessagesCount,
	routeGeminiGenerate: relay.KindGeminiGenerate,
	routeGeminiStream:   relay.KindGeminiStream,
	routeGeminiCount:    relay.KindGeminiCount,
}

// serveImages handles the images routes: limits first, then the relay.
func (h *APIHandler) serveImages(w http.ResponseWriter, r *http.Request, p relay.Principal, ri routeInfo, reqID string) {
	slot, ok := h.admit(w, r, p, ri.format)
	if !ok {
		return
	}
	defer slot.Release()
	h.app.svc.Images(w, r, p, ri.route == routeImageEdits, reqID)
}

// methodNotAllowed answers a known route called with the wrong method.
func methodNotAllowed(w http.ResponseWriter, ri routeInfo) error {
	allow := ri.method
	if allow == "" {
		allow = http.MethodGet
	}
	w.Header().Set("Allow", allow)
	relay.WriteError(w, ri.format, &formats.Error{Kind: formats.KindMethodNotAllowed, Message: "This route accepts " + allow + " only."})
	return nil
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

// requestFacts is what an API request's placeholders and the modelgate
// object of its access log line show: set as the request goes and read
// only when asked, so that a request costs no more for them than the
// pointer.
type requestFacts struct {
	requestID, accountID, keyID string
	report                      *relay.Report
}

// placeholderPrefix begins every placeholder of the API handler.
const placeholderPrefix = "http.modelgate."

// placeholder resolves http.modelgate.<name>, the placeholders an operator
// can use in the access log and other handlers: request_id, account_id,
// key_id, model, provider, upstream_model, input_tokens, output_tokens,
// cost, usage_source, outcome (see APIHandler). It is a caddy.ReplacerFunc.
func (f *requestFacts) placeholder(key string) (any, bool) {
	name, ok := strings.CutPrefix(key, placeholderPrefix)
	if !ok {
		return nil, false
	}
	switch name {
	case "request_id":
		return f.requestID, f.requestID != ""
	case "account_id":
		return f.accountID, f.accountID != ""
	case "key_id":
		return f.keyID, f.keyID != ""
	}
	return f.report.Value(name)
}

// MarshalLogObject implements zapcore.ObjectMarshaler.
func (f *requestFacts) MarshalLogObject(enc zapcore.ObjectEncoder) error {
	enc.AddString("request_id", f.requestID)
	if f.accountID != "" {
		enc.AddString("account_id", f.accountID)
		enc.AddString("key_id", f.keyID)
	}
	return f.report.MarshalLogObject(enc)
}
