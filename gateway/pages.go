package gateway

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"

	"github.com/modelgate/modelgate/web"
)

// AppFor returns the modelgate app of the config that a handler of the
// directive is provisioned in.
func AppFor(ctx caddy.Context, directive string) (*App, error) {
	app, err := ctx.AppIfConfigured("modelgate")
	if errors.Is(err, caddy.ErrNotConfigured) {
		return nil, fmt.Errorf("%s needs the modelgate global option (providers, models, ledger)", directive)
	}
	if err != nil {
		return nil, err // the app's own error, such as a ledger it cannot open
	}
	return app.(*App), nil
}

// WritePage renders a page of package web into memory and sends it with
// status and the page's Content-Security-Policy, so that a template error
// answers a clean 500, never half a page.
func WritePage(w http.ResponseWriter, logger *zap.Logger, status int, csp string, render func(io.Writer) error) {
	var b bytes.Buffer
	if err := render(&b); err != nil {
		logger.Error("rendering a page", zap.Error(err))
		http.Error(w, "The page is unavailable right now.", http.StatusInternalServerError)
		return
	}
	hdr := w.Header()
	hdr.Set("Content-Security-Policy", csp)
	hdr.Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(b.Bytes())
}

// wantsPage reports whether a request for the root is a browser's: it
// asks for HTML. API clients (SDKs, curl) ask for JSON or anything, and
// get the JSON index.
func wantsPage(r *http.Request) bool {
	return strings.Contains(r.Header.Get("Accept"), "text/html")
}

// serveIndexPage answers a browser at the root: the base URL and how to
// point each client at it.
func (a *App) serveIndexPage(w http.ResponseWriter, r *http.Request) {
	base := a.BaseURL(r)
	model := a.SampleModel("")
	host := base[strings.Index(base, "://")+3:]
	p := &web.IndexPage{Title: host + " API", BaseURL: base, Setups: web.ClientSetups(base, "", model)}
	w.Header().Set("Vary", "Accept")
	WritePage(w, a.logger, http.StatusOK, web.ContentSecurityPolicy(), func(out io.Writer) error { return web.RenderIndex(out, p) })
}

// SampleModel is a model for the examples shown to an account of the plan
// named plan: the first, by id, that the plan offers ("" plan: the
// catalogue's first); "MODEL" when there is none.
func (a *App) SampleModel(plan string) string {
	ms := a.modelList // sorted by id
	if plan != "" {
		if offered, _ := a.modelsFor(a.plan(plan)); len(offered) > 0 {
			ms = offered
		}
	}
	if len(ms) > 0 {
		return ms[0].ID
	}
	return "MODEL"
}

// BaseURL is the gateway's address for the set-ups shown to people: the
// public_url option, or else the request's scheme and host (shown back to
// whoever sent it, never used for links another person follows).
func (a *App) BaseURL(r *http.Request) string {
	if u := a.publicURL; u != nil {
		return strings.TrimSuffix(u.Scheme+"://"+u.Host+u.Path, "/")
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}
