package gateway

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"
)

// AppFor returns the modelgate app of the config that a handler of the
// directive is provisioned in.
func AppFor(ctx caddy.Context, directive string) (*App, error) {
	app, err := ctx.AppIfConfigured("modelgate")
	if errors.Is(err, caddy.ErrNotConfigured) {
		return nil, fmt.Errorf("%s needs the modelgate global option (providers, models, ledger)", directive)
	}
	if err != nil {
		// the option is there but failed to load: say why
		return nil, err
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
