package gateway

import (
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/caddyserver/certmagic"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// API keys (and the console's link tokens) never reach Caddy's access log, whatever the operator
// configured. Caddy writes the access log line of a request from a
// copy of it that it takes before the first handler runs
// (caddyhttp.Server.ServeHTTP clones the request, headers and URI
// included, and logs the clone once the handlers are done), so taking the
// key off the request, as takeCredential does, cannot reach that line, and
// Caddy redacts only Authorization (and not even that with
// log_credentials). So when a request to the API carries a key in a form
// Caddy would log, the API handler skips Caddy's own line (the log_skip
// variable) and writes the same line itself, to the same loggers, with the
// key's header set to REDACTED and ?key= to key=REDACTED. The line is
// Caddy's but for the fields that log_append adds, which a handler cannot
// read.

// redacted replaces a key in the access log, as Caddy's own redaction does.
const redacted = "REDACTED"

// httpAppModule names Caddy's http app to the logging configuration, so
// that the access log lines written here go where the app's own go.
type httpAppModule struct{}

// CaddyModule returns the http app's module ID.
func (httpAppModule) CaddyModule() caddy.ModuleInfo { return caddy.ModuleInfo{ID: "http"} }

// AccessLogger is the logger Caddy's http app writes access log lines
// with in ctx's config (http.log.access, before per-host names), for
// scrubAccessLog and ScrubQueryParam.
func AccessLogger(ctx caddy.Context) *zap.Logger {
	return ctx.Logger(httpAppModule{}).Named("log.access")
}

// ScrubQueryParam is scrubAccessLog for the pages: the access log line of
// r, when its URI carries the query parameter param (the console's one-time
// link tokens), is written with param's value REDACTED. The caller defers
// the function it returns, when not nil, and must answer r itself (not by
// returning an error to Caddy), so that the line has the status sent.
func ScrubQueryParam(w http.ResponseWriter, r *http.Request, accessLog *zap.Logger, param string) func() {
	return scrubAccessLog(w, r, accessLog, param, false, nil)
}

// scrubAccessLog takes over the access log line of r when the line would
// hold a secret: ?param= in its URI or, with apiKeys, an API key header: it
// sets log_skip and returns the function that writes the line with the
// secret redacted, to be deferred by the caller, before the secret is taken
// off r. It returns nil when Caddy's own line is safe or there is none.
// facts, when not nil, adds the API's user_id and call fields.
func scrubAccessLog(w http.ResponseWriter, r *http.Request, accessLog *zap.Logger, param string, apiKeys bool, facts *requestFacts) func() {
	ctx := r.Context()
	srv, _ := ctx.Value(caddyhttp.ServerCtxKey).(*caddyhttp.Server)
	if srv == nil || srv.Logs == nil || accessLog == nil {
		return nil // no access log on this server
	}
	logs := srv.Logs
	hdr := r.Header
	uri := r.RequestURI
	if orig, ok := ctx.Value(caddyhttp.OriginalRequestCtxKey).(http.Request); ok {
		uri = orig.RequestURI
	}
	inQuery := redactQueryParam(uri, param) != uri
	if !inQuery && (!apiKeys || hdr.Get("X-Api-Key") == "" && hdr.Get("X-Goog-Api-Key") == "" &&
		(hdr.Get("Authorization") == "" || !logs.ShouldLogCredentials)) {
		return nil // nothing Caddy would log in the clear
	}
	if skip, _ := caddyhttp.GetVar(ctx, caddyhttp.LogSkipVar).(bool); skip || !accessLogged(logs, r) {
		return nil
	}
	rec := findRecorder(w)
	caddyhttp.SetVar(ctx, caddyhttp.LogSkipVar, true)
	if rec == nil {
		return nil // no recorder means no line of Caddy's either; never log the key
	}

	// the request as Caddy's line shows it: as it came, the key redacted
	lr := r.Clone(ctx)
	if orig, ok := ctx.Value(caddyhttp.OriginalRequestCtxKey).(http.Request); ok {
		lr.Method, lr.RequestURI, lr.RemoteAddr = orig.Method, orig.RequestURI, orig.RemoteAddr
	}
	if apiKeys {
		for _, name := range []string{"Authorization", "X-Api-Key", "X-Goog-Api-Key"} {
			if _, ok := lr.Header[name]; ok {
				lr.Header[name] = []string{redacted}
			}
		}
	}
	lr.RequestURI = redactQueryParam(lr.RequestURI, param)
	lr.Body = nil
	body := &countingBody{ReadCloser: r.Body}
	if r.Body != nil {
		r.Body = body
	}

	return func() {
		status, size := rec.Status(), rec.Size()
		var duration time.Duration
		if start, ok := caddyhttp.GetVar(ctx, "start_time").(time.Time); ok {
			duration = time.Since(start)
		}
		if repl, ok := ctx.Value(caddy.ReplacerCtxKey).(*caddy.Replacer); ok {
			repl.Set("http.response.status", status)
			repl.Set("http.response.size", size)
			repl.Set("http.response.duration", duration)
			repl.Set("http.response.duration_ms", duration.Seconds()*1e3)
		}
		level := zapcore.InfoLevel
		if status >= 500 {
			level = zapcore.ErrorLevel
		}
		if name, ok := caddyhttp.GetVar(ctx, caddyhttp.LogLevelVar).(string); ok {
			if l, err := zapcore.ParseLevel(name); err == nil && l >= zapcore.DebugLevel && l <= zapcore.ErrorLevel {
				level = l
			}
		}
		var fields []zap.Field
		var userID string
		if facts != nil {
			userID = facts.accountID
		}
		for _, l := range accessLoggersFor(accessLog, logs, r) {
			c := l.Check(level, "handled request")
			if c == nil {
				continue
			}
			if fields == nil {
				fields = []zap.Field{
					zap.Object("request", caddyhttp.LoggableHTTPRequest{Request: lr, ShouldLogCredentials: logs.ShouldLogCredentials}),
					zap.Int("bytes_read", body.n),
					zap.String("user_id", userID),
					zap.Duration("duration", duration),
					zap.Int("size", size),
					zap.Int("status", status),
					zap.Object("resp_headers", caddyhttp.LoggableHTTPHeader{Header: rec.Header(), ShouldLogCredentials: logs.ShouldLogCredentials}),
				}
				if facts != nil {
					fields = append(fields, zap.Object("modelgate", facts))
				}
			}
			c.Write(fields...)
		}
	}
}

// redactQueryParam replaces the value of every param parameter of a
// request URI's query, however its name is escaped.
func redactQueryParam(uri, param string) string {
	path, query, ok := strings.Cut(uri, "?")
	if !ok {
		return uri
	}
	parts := strings.Split(query, "&")
	changed := false
	for i, p := range parts {
		name, value, ok := strings.Cut(p, "=")
		if !ok || value == "" || value == redacted {
			continue
		}
		if n, err := url.QueryUnescape(name); err == nil && n == param {
			parts[i], changed = name+"="+redacted, true
		}
	}
	if !changed {
		return uri
	}
	return path + "?" + strings.Join(parts, "&")
}

// findRecorder finds the recorder Caddy's server wraps the response in when
// it logs the request, under whatever wraps it since.
func findRecorder(w http.ResponseWriter) caddyhttp.ResponseRecorder {
	for w != nil {
		if rec, ok := w.(caddyhttp.ResponseRecorder); ok {
			return rec
		}
		u, ok := w.(interface{ Unwrap() http.ResponseWriter })
		if !ok {
			return nil
		}
		w = u.Unwrap()
	}
	return nil
}

// countingBody counts the bytes read from a request body.
type countingBody struct {
	io.ReadCloser
	n int
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.n += n
	return n, err
}

// accessLogged reports whether the server logs requests to r's host, as
// caddyhttp.Server decides it.
func accessLogged(logs *caddyhttp.ServerLogConfig, r *http.Request) bool {
	host := hostOnly(r.Host)
	for name := range logs.LoggerNames {
		if certmagic.MatchWildcard(host, name) {
			return true
		}
	}
	for _, skip := range logs.SkipHosts {
		if certmagic.MatchWildcard(host, skip) {
			return false
		}
	}
	return !logs.SkipUnmappedHosts
}

// accessLoggersFor are the loggers of r's access log line, named as
// caddyhttp.Server names them: by the access_logger_names variable, or by
// the host's logger names.
func accessLoggersFor(base *zap.Logger, logs *caddyhttp.ServerLogConfig, r *http.Request) []*zap.Logger {
	var names []string
	if v, ok := caddyhttp.GetVar(r.Context(), caddyhttp.AccessLoggerNameVarKey).([]any); ok {
		for _, n := range v {
			s, _ := n.(string)
			names = append(names, s)
		}
	} else {
		names = loggerNames(logs, strings.ToLower(hostOnly(r.Host)))
	}
	loggers := make([]*zap.Logger, 0, len(names))
	for _, name := range names {
		if name == "" {
			loggers = append(loggers, base)
		} else {
			loggers = append(loggers, base.Named(name))
		}
	}
	return loggers
}

// loggerNames are the logger names of host: its own, a wildcard's, or the
// server's default.
func loggerNames(logs *caddyhttp.ServerLogConfig, host string) []string {
	if names, ok := logs.LoggerNames[host]; ok {
		return names
	}
	labels := strings.Split(host, ".")
	for i := range labels {
		if labels[i] == "" {
			continue
		}
		labels[i] = "*"
		if names, ok := logs.LoggerNames[strings.Join(labels, ".")]; ok {
			return names
		}
	}
	return []string{logs.DefaultLoggerName}
}

// hostOnly is a Host without its port.
func hostOnly(hostport string) string {
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		return h
	}
	return hostport
}
