package lookup

import (
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	"github.com/modelgate/modelgate/gateway"
	"github.com/modelgate/modelgate/internal/guard"
	"github.com/modelgate/modelgate/ledger"
	"github.com/modelgate/modelgate/web"
)

func init() {
	caddy.RegisterModule(LookupHandler{})
	httpcaddyfile.RegisterHandlerDirective("modelgate_lookup", parseLookupHandler)
	httpcaddyfile.RegisterDirectiveOrder("modelgate_lookup", httpcaddyfile.Before, "respond")
}

// Limits of the lookup page.
const (
	lookupMaxBody = 4 << 10 // a form with one key
)

// LookupHandler serves the public usage lookup page (docs/api.md): a form
// that POSTs a key and answers with that key's figures and its account's
// balance. The key travels only in the form body, is never logged or
// stored, and the answer is not cacheable. A client that sends many wrong
// keys is refused for a while.
type LookupHandler struct {
	// Title heads the page. Default: "Usage lookup".
	Title string `json:"title,omitempty"`

	app    *gateway.App
	logger *zap.Logger
	guard  *guard.Guard // wrong keys per client, shared by every config
}

// CaddyModule returns the Caddy module information.
func (LookupHandler) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "http.handlers.modelgate_lookup",
		New: func() caddy.Module { return new(LookupHandler) },
	}
}

// Provision finds the modelgate app.
func (h *LookupHandler) Provision(ctx caddy.Context) error {
	h.logger = ctx.Logger()
	app, err := gateway.AppFor(ctx, "modelgate_lookup")
	if err != nil {
		return err
	}
	h.app = app
	if h.Title == "" {
		h.Title = "Usage lookup"
	}
	g, err := guard.Load()
	if err != nil {
		return err
	}
	h.guard = g
	return nil
}

// Cleanup gives back this config's use of the limits.
func (h *LookupHandler) Cleanup() error {
	if h.guard == nil {
		return nil
	}
	h.guard = nil
	return guard.Release()
}

// ServeHTTP serves the form (GET) and the figures of a key (POST).
func (h *LookupHandler) ServeHTTP(w http.ResponseWriter, r *http.Request, _ caddyhttp.Handler) error {
	hdr := w.Header()
	hdr.Set("Cache-Control", "no-store")
	hdr.Set("X-Content-Type-Options", "nosniff")
	hdr.Set("Referrer-Policy", "no-referrer")
	if !h.app.Serving() {
		gateway.WriteNotServing(w)
		return nil
	}
	page := &web.LookupPage{Title: h.Title, Action: r.URL.Path}
	status := http.StatusOK
	if h.app.BlockedRegion(r) {
		// block_countries covers the lookup, as it covers the API
		h.app.Metrics().Refused("region")
		page.Error = gateway.RegionBlocked().Message
		gateway.WritePage(w, h.logger, http.StatusForbidden, web.ContentSecurityPolicy(), func(b io.Writer) error { return web.RenderLookup(b, page) })
		return nil
	}
	switch r.Method {
	case http.MethodGet, http.MethodHead:
	case http.MethodPost:
		status = h.lookup(w, r, page)
	default:
		hdr.Set("Allow", "GET, HEAD, POST")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return nil
	}
	gateway.WritePage(w, h.logger, status, web.ContentSecurityPolicy(), func(b io.Writer) error { return web.RenderLookup(b, page) })
	return nil
}

// lookup fills the page with the figures of the posted key and returns the
// status to answer with. Each lookup is reserved against the client
// address's wrong keys before the key is looked up, and forgiven only if
// the key exists, so that racing guesses get no more than the limit.
func (h *LookupHandler) lookup(w http.ResponseWriter, r *http.Request, page *web.LookupPage) int {
	try, wait := h.guard.LookupAddr.Take(guard.ClientIP(r), time.Now())
	if try == nil {
		w.Header().Set("Retry-After", strconv.Itoa(max(1, int((wait+time.Second-1)/time.Second))))
		page.Error = "Too many wrong keys from your address. Try again later."
		return http.StatusTooManyRequests
	}
	r.Body = http.MaxBytesReader(nil, r.Body, lookupMaxBody)
	if err := r.ParseForm(); err != nil {
		try.End(true)
		page.Error = "The form could not be read."
		return http.StatusBadRequest
	}
	key := strings.TrimSpace(r.PostForm.Get("key"))
	if key == "" {
		try.End(true)
		page.Error = "Enter an API key."
		return http.StatusBadRequest
	}
	p, err := h.app.Store().Authenticate(key)
	if err != nil {
		if !errors.Is(err, ledger.ErrUnauthorized) {
			// not the visitor's failure; the error never holds the key
			try.End(true)
			h.logger.Error("looking up a key", zap.Error(err))
			page.Error = "The lookup failed; try again."
			return http.StatusServiceUnavailable
		}
		try.End(false)
		page.Error = "No such key: it is mistyped, or it was deleted."
		return http.StatusNotFound
	}
	try.End(true)
	ku, err := h.app.Store().KeyUsage(r.Context(), p.KeyID)
	var acct ledger.Account
	if err == nil {
		acct, err = h.app.Store().GetAccount(r.Context(), p.AccountID)
	}
	if err != nil {
		h.logger.Error("reading a key's usage", zap.String("key_id", p.KeyID), zap.Error(err))
		page.Error = "The lookup failed; try again."
		return http.StatusServiceUnavailable
	}
	page.Result = &web.LookupResult{
		Label: p.Label, Prefix: p.Prefix,
		Requests:    strconv.FormatInt(ku.Requests, 10),
		InputTokens: strconv.FormatInt(ku.InputTokens, 10),
		OutputTok:   strconv.FormatInt(ku.OutputTokens, 10),
		Spent:       web.AmountOf(ku.Spent), Balance: web.AmountOf(acct.Balance), Held: web.AmountOf(acct.Held),
		Currency: h.app.Currency, Plan: acct.Plan, State: string(acct.State),
	}
	if p.Limits != nil {
		// the key's own limits, and its cap's spend this period (the key's row)
		k, err := h.app.Store().KeyByID(r.Context(), p.KeyID)
		if err != nil {
			h.logger.Error("reading a key's limits", zap.String("key_id", p.KeyID), zap.Error(err))
			page.Result, page.Error = nil, "The lookup failed; try again."
			return http.StatusServiceUnavailable
		}
		if l := web.KeyLimitsOf(&k, time.Now(), h.app.KeyLeastRequest(acct.Plan, &k.Limits)); l.Any() {
			page.Result.Limits = &l
		}
	}
	return http.StatusOK
}

// clientIP is Caddy's client IP of r (trusted_proxies honoured), or the

func parseLookupHandler(h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
	l := new(LookupHandler)
	err := l.UnmarshalCaddyfile(h.Dispenser)
	return l, err
}

// UnmarshalCaddyfile parses `modelgate_lookup [<matcher>] { title <text> }`.
func (h *LookupHandler) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // the directive name
	if d.NextArg() {
		return d.ArgErr()
	}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		switch d.Val() {
		case "title":
			h.Title = strings.Join(d.RemainingArgs(), " ")
			if h.Title == "" {
				return d.ArgErr()
			}
		default:
			return d.Errf("unrecognized modelgate_lookup option %q", d.Val())
		}
	}
	return nil
}

// Interface guards
var (
	_ caddy.Provisioner           = (*LookupHandler)(nil)
	_ caddy.CleanerUpper          = (*LookupHandler)(nil)
	_ caddyhttp.MiddlewareHandler = (*LookupHandler)(nil)
	_ caddyfile.Unmarshaler       = (*LookupHandler)(nil)
)
