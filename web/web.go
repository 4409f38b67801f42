// Package web renders modelgate's pages: the status page, the customer
// console and the usage lookup page. It is plain Go with no
// Caddy import: package gateway fills a view model from the gateway's state
// and calls a Render function.
//
// Everything a page needs travels in one response. Templates and the shared
// stylesheet are embedded in the binary; the stylesheet is inlined in a
// <style> element; pages use no JavaScript, web fonts, images or third-party
// hosts; charts are inline SVG drawn by the server.
// [ContentSecurityPolicy] is the header to send with every page.
//
// Layout: templates/layout.html is the shared frame (document head with
// the inlined stylesheet, body wrapper), static/style.css the shared
// stylesheet, and each page is one templates/<page>.html that defines
// "title" and "main" (its own header, content and footer). Files named
// templates/_<name>.html hold partials every page may use. A new page adds
// its file and a Render function calling render(w, "<page>", view).
package web

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/base64"
	"fmt"
	"html/template"
	"io"
	"io/fs"
	"strings"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static/style.css
var styleCSS string

// styleHash is the CSP source expression that allows exactly the inlined
// stylesheet.
var styleHash = func() string {
	sum := sha256.Sum256([]byte(styleCSS))
	return "'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'"
}()

// ContentSecurityPolicy returns the Content-Security-Policy header value for
// the pages of this package: nothing may load from anywhere, no script may
// run, and the only style allowed is the embedded stylesheet (by hash).
// Forms may only post back to the same origin.
func ContentSecurityPolicy() string { return ContentSecurityPolicyFormTo("") }

// ContentSecurityPolicyFormTo is [ContentSecurityPolicy] for a page whose
// form is answered with a redirect to origin (a payment provider's hosted
// checkout): browsers hold redirects after a form to form-action too.
func ContentSecurityPolicyFormTo(origin string) string {
	formAction := "'self'"
	if origin != "" {
		formAction += " " + origin
	}
	return "default-src 'none'; style-src " + styleHash +
		"; img-src data:; base-uri 'none'; form-action " + formAction + "; frame-ancestors 'none'"
}

// pages holds one template set per page: the layout, the partials and the
// page's own file.
var pages = mustParsePages()

// funcs are the template functions shared by every page.
var funcs = template.FuncMap{
	// stylesheet returns the embedded stylesheet for the layout's <style>.
	"stylesheet": func() template.CSS { return template.CSS(styleCSS) }, //nolint:gosec // the embedded stylesheet, never user input
}

func mustParsePages() map[string]*template.Template {
	base := template.Must(template.New("layout.html").Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/_*.html"))
	names, err := fs.Glob(templateFS, "templates/*.html")
	if err != nil {
		panic(err)
	}
	out := make(map[string]*template.Template)
	for _, name := range names {
		page := strings.TrimSuffix(strings.TrimPrefix(name, "templates/"), ".html")
		if page == "layout" || strings.HasPrefix(page, "_") {
			continue
		}
		t := template.Must(base.Clone())
		out[page] = template.Must(t.ParseFS(templateFS, name))
	}
	return out
}

// render executes a page into a buffer first, so that a template error
// never leaves a half-written page behind.
func render(w io.Writer, page string, data any) error {
	t, ok := pages[page]
	if !ok {
		return fmt.Errorf("web: no page %q", page)
	}
	var buf bytes.Buffer
	if err := t.ExecuteTemplate(&buf, "layout", data); err != nil {
		return fmt.Errorf("web: render %s: %w", page, err)
	}
	_, err := w.Write(buf.Bytes())
	return err
}
