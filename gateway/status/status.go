package status

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	"github.com/modelgate/modelgate/gateway"
	"github.com/modelgate/modelgate/relay"
	"github.com/modelgate/modelgate/web"
)

func init() {
	caddy.RegisterModule(StatusHandler{})
	httpcaddyfile.RegisterHandlerDirective("modelgate_status", parseStatusHandler)
	httpcaddyfile.RegisterDirectiveOrder("modelgate_status", httpcaddyfile.Before, "respond")
}

// How the status page is built.
const (
	statusCacheFor     = 5 * time.Second // a page is rebuilt at most this often
	statusDays         = 90
	statusIncidents    = 10
	statusIncidentDays = 90
)

// StatusHandler serves the public status page: per provider its current
// state, uptime over 24 h, 7 d and 90 d against the 99.9% target, a bar per
// day for 90 days, and recent incidents. Paths ending in .json get the same
// data as JSON (place it with `modelgate_status /status*` to serve /status
// and /status.json). Nothing secret is on it: providers are named, never
// their keys or addresses.
type StatusHandler struct {
	// Title heads the page. Default: "<host> status", the host of the
	// modelgate option's public_url, or "Service status" without one;
	// never a request's Host header, which anyone may set.
	Title string `json:"title,omitempty"`

	app    *gateway.App
	logger *zap.Logger
	cache  *statusCache
}

// statusCache is the last built page and its JSON.
type statusCache struct {
	mu      sync.Mutex
	built   time.Time
	html    []byte
	jsonDoc []byte
}

// CaddyModule returns the Caddy module information.
func (StatusHandler) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "http.handlers.modelgate_status",
		New: func() caddy.Module { return new(StatusHandler) },
	}
}

// Provision finds the modelgate app.
func (h *StatusHandler) Provision(ctx caddy.Context) error {
	h.logger = ctx.Logger()
	app, err := gateway.AppFor(ctx, "modelgate_status")
	if err != nil {
		return err
	}
	h.app = app
	h.cache = new(statusCache)
	if h.Title == "" {
		h.Title = "Service status"
		if u := app.PublicAddress(); u != nil {
			h.Title = u.Hostname() + " status"
		}
	}
	return nil
}

// ServeHTTP serves the page or its JSON.
func (h *StatusHandler) ServeHTTP(w http.ResponseWriter, r *http.Request, _ caddyhttp.Handler) error {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return nil
	}
	if !h.app.Serving() {
		gateway.WriteNotServing(w)
		return nil
	}
	page, doc, err := h.documents(r.Context())
	if err != nil {
		h.logger.Error("building the status page", zap.Error(err))
		http.Error(w, "The status page is unavailable right now.", http.StatusServiceUnavailable)
		return nil
	}
	hdr := w.Header()
	hdr.Set("Cache-Control", "public, max-age=10")
	if strings.HasSuffix(r.URL.Path, ".json") {
		hdr.Set("Access-Control-Allow-Origin", "*")
		relay.WriteJSON(w, http.StatusOK, doc)
		return nil
	}
	hdr.Set("Content-Type", "text/html; charset=utf-8")
	hdr.Set("Content-Security-Policy", web.ContentSecurityPolicy())
	hdr.Set("X-Content-Type-Options", "nosniff")
	_, _ = w.Write(page)
	return nil
}

// documents returns the page and its JSON, rebuilt when older than
// statusCacheFor: a public page must not query the ledger per visit.
func (h *StatusHandler) documents(ctx context.Context) (page, doc []byte, err error) {
	c := h.cache
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.html != nil && time.Since(c.built) < statusCacheFor {
		return c.html, c.jsonDoc, nil
	}
	sp, err := statusPage(ctx, h.app, h.Title, time.Now())
	if err != nil {
		return nil, nil, err
	}
	var b bytes.Buffer
	if err := web.RenderStatus(&b, sp); err != nil {
		return nil, nil, err
	}
	j, err := web.StatusJSON(sp)
	if err != nil {
		return nil, nil, err
	}
	c.html, c.jsonDoc, c.built = b.Bytes(), j, time.Now()
	return c.html, c.jsonDoc, nil
}

// statusPage gathers every provider's live state and history.
func statusPage(ctx context.Context, a *gateway.App, title string, now time.Time) (*web.StatusPage, error) {
	sp := &web.StatusPage{Title: title, Generated: now, Target: web.DefaultTarget}
	for _, p := range a.Upstreams() {
		ps := web.ProviderStatus{Name: a.DisplayName(p.Name), Format: string(p.Format), State: string(p.Status(now).State)}
		for _, w := range []struct {
			back time.Duration
			dst  **float64
		}{{24 * time.Hour, &ps.Uptime24h}, {7 * 24 * time.Hour, &ps.Uptime7d}, {90 * 24 * time.Hour, &ps.Uptime90d}} {
			tot, err := a.Store().Availability(ctx, p.Name, now.Add(-w.back), now)
			if err != nil {
				return nil, err
			}
			if pct, ok := tot.Uptime(); ok {
				*w.dst = &pct
			}
		}
		days, err := a.Store().DailyAvailability(ctx, p.Name, statusDays, now)
		if err != nil {
			return nil, err
		}
		for _, d := range days {
			bar := web.DayBar{Date: d.Day, Requests: d.Total(), Failures: d.Failures()}
			if pct, ok := d.Uptime(); ok {
				bar.Uptime = &pct
			}
			ps.Days = append(ps.Days, bar)
		}
		incs, err := a.Store().Incidents(ctx, p.Name, now.Add(-statusIncidentDays*24*time.Hour), statusIncidents)
		if err != nil {
			return nil, err
		}
		for _, inc := range incs {
			ps.Incidents = append(ps.Incidents, web.Incident{Start: inc.Start, End: inc.End, Cause: inc.Cause})
		}
		sp.Providers = append(sp.Providers, ps)
	}
	return sp, nil
}

// parseStatusHandler sets up the modelgate_status handler:
//
//	modelgate_status [<matcher>] {
//		title <text>
//	}
func parseStatusHandler(h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
	s := new(StatusHandler)
	err := s.UnmarshalCaddyfile(h.Dispenser)
	return s, err
}

// UnmarshalCaddyfile parses the modelgate_status directive.
func (h *StatusHandler) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // the directive name
	if d.NextArg() {
		return d.ArgErr()
	}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		switch d.Val() {
		case "title":
			if h.Title != "" {
				return d.Err("title already specified")
			}
			h.Title = strings.Join(d.RemainingArgs(), " ")
			if h.Title == "" {
				return d.ArgErr()
			}
		default:
			return d.Errf("unrecognized modelgate_status option %q", d.Val())
		}
	}
	return nil
}

// Interface guards
var (
	_ caddy.Provisioner           = (*StatusHandler)(nil)
	_ caddyhttp.MiddlewareHandler = (*StatusHandler)(nil)
	_ caddyfile.Unmarshaler       = (*StatusHandler)(nil)
)
