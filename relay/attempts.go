package relay

import (
	"context"
	"errors"
	"net"
	"net/http"
	"time"

	"go.uber.org/zap"

	"github.com/modelgate/modelgate/formats"
	"github.com/modelgate/modelgate/upstream"
)

// The attempt loop, one for every route: generations (chat, Responses,
// messages, Gemini, token counts) and images plug their own request
// building and answer reading into it (exchange); the choice of a route
// and key, the failover, the release of every attempt and the error
// written when none succeeds are shared.

// exchange is what one kind of request does in an upstream attempt.
type exchange interface {
	// replayable reports whether the request can still be sent upstream
	// (an edit form already forwarded from the client cannot).
	replayable() bool
	// try makes one attempt at route i of the model (the request's route,
	// with the key of its attempt). nil or errStopped: the client has its
	// answer, or is gone. An *attemptError (or any other error): the
	// attempt failed before anything reached the client, and another may
	// be made.
	try(w http.ResponseWriter, r *http.Request, i int) error
}

// routeSet is some of a model's routes, as the scheduler sees them.
type routeSet struct {
	index      []int                // each route's index in Model.Routes
	candidates []upstream.Candidate // the same routes, for the scheduler
}

// add appends route i of m to the set.
func (rs *routeSet) add(m *Model, i int) {
	rs.index = append(rs.index, i)
	rs.candidates = append(rs.candidates, upstream.Candidate{Provider: m.Routes[i].Provider.Provider, Weight: m.Routes[i].Weight})
}

// run serves the request through x: it asks the scheduler for a route of
// routes and a key, makes one attempt, and, when the attempt fails before
// the first byte reaches the client, tries the next key or route, up to
// max_attempts. When no attempt succeeds the client gets the last
// failure's error, in its format. Every attempt is released when the
// request ends.
func (rq *request) run(w http.ResponseWriter, r *http.Request, routes routeSet, x exchange) {
	defer func() {
		for _, a := range rq.tried {
			a.Release()
		}
	}()
	var last *formats.Error
	for len(rq.tried) < rq.svc.MaxAttempts && x.replayable() {
		i, att, ok := upstream.Choose(routes.candidates, rq.tried, nil)
		if !ok {
			break
		}
		i = routes.index[i]
		rq.tried = append(rq.tried, att)
		rq.attempt, rq.route, rq.upstreamKeyID = att, &rq.model.Routes[i], att.Key.ID
		err := x.try(w, r, i)
		if err == nil || errors.Is(err, errStopped) {
			return
		}
		var ae *attemptError
		if !errors.As(err, &ae) {
			// not an upstream failure the attempt classified (the client
			// went away before anything was sent)
			ae = &attemptError{err: formats.NewError(formats.KindUpstream, "The upstream provider could not be reached.")}
		}
		last = ae.err
		logAttemptFailed(rq.logger, rq.reqID, rq.route.Provider.Name, rq.upstreamKeyID, len(rq.tried), ae.cause)
		if r.Context().Err() != nil {
			return // nobody to answer
		}
	}
	if last == nil {
		last = noUpstreamAvailable()
	}
	w.Header().Del("X-Modelgate-Dropped") // what a failed attempt's rendering dropped
	WriteError(w, rq.format, last)
}

// attemptError is an upstream attempt that failed before anything reached
// the client: the request may try another key or route.
type attemptError struct {
	err   *formats.Error // what the client sees if no attempt succeeds
	cause upstream.Cause
}

func (e *attemptError) Error() string { return "upstream attempt failed: " + e.cause.String() }

// ErrConnect marks a failure to connect to an upstream (the transport
// wraps its dial errors with it).
var ErrConnect = errors.New("could not connect")

// TransportCause classifies an error of an upstream round trip.
func TransportCause(err error, timedOut bool) upstream.Cause {
	var op *net.OpError
	switch {
	case timedOut || errors.Is(err, context.DeadlineExceeded):
		return upstream.CauseTimeout
	case errors.Is(err, ErrConnect), errors.As(err, &op) && op.Op == "dial":
		return upstream.CauseConnect
	}
	return upstream.CauseClosed
}

// fail reports the current attempt's failure and returns the error that
// lets the request try again.
func (rq *request) fail(cause upstream.Cause, retryAfter time.Duration, e *formats.Error) error {
	rq.attempt.Failed(cause, retryAfter)
	rq.svc.Metrics.Failure(rq.route.Provider.Name, rq.upstreamKeyID, cause.String())
	return &attemptError{err: e, cause: cause}
}

// classifyUpstreamError reads and logs the current attempt's error answer.
// Failures of the upstream (5xx, 429, 401/403, and a 400 about the
// gateway's own key) are failed, with the cause and the retry hint the
// answer gave; an error caused by the request itself (400, 404, 413…) is
// not.
func (rq *request) classifyUpstreamError(resp *http.Response) (
	ferr *formats.Error, cause upstream.Cause, hint time.Duration, failed bool) {
	p := rq.route.Provider
	data, _ := readAll(resp.Body, MaxErrorBody)
	resp.Body.Close()
	ferr = parseUpstreamError(p.Format, resp.StatusCode, data)
	cause, failed = upstream.StatusCause(resp.StatusCode)
	if !failed && resp.StatusCode == http.StatusBadRequest && ferr.Kind == formats.KindUpstream {
		// a 400 that is about the gateway's credentials (Gemini's
		// API_KEY_INVALID), not the request
		cause, failed = upstream.CauseAuth, true
	}
	rq.logger.Warn("upstream error",
		zap.String("request_id", rq.reqID),
		zap.String("provider", p.Name),
		zap.String("upstream_key", rq.upstreamKeyID),
		zap.Int("status", resp.StatusCode))
	if !failed {
		return ferr, cause, 0, false
	}
	hint, ok := retryHint(resp.StatusCode, resp.Header, time.Now())
	if !ok && ferr.RetryAfter > 0 {
		hint = time.Duration(ferr.RetryAfter) * time.Second // Gemini's retryDelay
	}
	if ferr.Kind == formats.KindOverloaded && ferr.RetryAfter == 0 && hint > 0 {
		ferr.RetryAfter = int(max(1, hint/time.Second))
	}
	return ferr, cause, hint, true
}

// retryHint is how long a key that failed with status should rest, from
// the answer's headers: only a refusal for load (429, 503, Anthropic's 529)
// says when to come back. The rate-limit reset headers that vendors send
// on every answer are no such hint on a 500 or a 504 (they would rest a
// key for a minute after one server error); those get the provider's
// failure cooldown.
func retryHint(status int, h http.Header, now time.Time) (time.Duration, bool) {
	switch status {
	case http.StatusTooManyRequests, http.StatusServiceUnavailable, 529:
		return upstream.RetryHint(h, now)
	}
	return 0, false
}

// transportFailure classifies a failed round trip to an upstream, with what
// the client sees if no attempt succeeds.
func transportFailure(err error, timedOut bool) (upstream.Cause, time.Duration, *formats.Error) {
	cause := TransportCause(err, timedOut)
	if cause == upstream.CauseTimeout {
		return cause, 0, formats.NewError(formats.KindTimeout, "The upstream provider timed out.")
	}
	return cause, 0, formats.NewError(formats.KindUpstream, "The upstream provider could not be reached.")
}

// brokeOff classifies an upstream answer that broke off while it was read
// (a timeout when timedOut), with what the client sees if no attempt
// succeeds: msg.
func brokeOff(timedOut bool, msg string) (upstream.Cause, time.Duration, *formats.Error) {
	cause := upstream.CauseClosed
	if timedOut {
		cause = upstream.CauseTimeout
	}
	return cause, 0, formats.NewError(formats.KindUpstream, msg)
}

// noUpstreamAvailable is the answer when the scheduler grants no attempt.
func noUpstreamAvailable() *formats.Error {
	return &formats.Error{Kind: formats.KindOverloaded,
		Message: "No upstream provider for this model is available right now; try again shortly.", RetryAfter: 1}
}

// logAttemptFailed logs an upstream attempt that failed before anything
// reached the client.
func logAttemptFailed(logger *zap.Logger, reqID, provider, keyID string, attempt int, cause upstream.Cause) {
	logger.Warn("upstream attempt failed",
		zap.String("request_id", reqID),
		zap.String("provider", provider),
		zap.String("upstream_key", keyID),
		zap.Int("attempt", attempt),
		zap.String("cause", cause.String()))
}

// upstreamHeader is the header of an upstream request: its Content-Type,
// what it accepts, the gateway's User-Agent, and the provider's
// credentials with the client's anthropic-beta values it allows.
func upstreamHeader(p *Provider, secret, contentType, accept string, beta []string) http.Header {
	h := http.Header{
		"Content-Type": {contentType},
		"Accept":       {accept},
		"User-Agent":   {UserAgent},
	}
	SetUpstreamAuth(h, p, secret, beta)
	return h
}
