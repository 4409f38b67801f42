package gateway

import (
	"errors"
	"net/http"

	"github.com/caddyserver/caddy/v2"

	"github.com/modelgate/modelgate/formats"
	"github.com/modelgate/modelgate/relay"
)

// errNotRunning says that no running config holds a pooled value.
var errNotRunning = errors.New("no running config holds it")

// takeRunning takes a hold on what a running config holds in pool under
// key, without making it: ok is false when no config holds it.
func takeRunning(pool *caddy.UsagePool, key string) (v any, ok bool, err error) {
	v, _, err = pool.LoadOrNew(key, func() (caddy.Destructor, error) { return nil, errNotRunning })
	if errors.Is(err, errNotRunning) {
		return nil, false, nil
	}
	return v, err == nil, err
}

// adoptRunning, on a reload, takes the ledger and the rate limiter the
// running config holds, so that the new config serves from its first
// request, on the same store, without reopening the database. What it
// does not find, Start opens.
func (a *App) adoptRunning() error {
	v, ok, err := takeRunning(ledgers, a.ledgerKey)
	if !ok {
		return err
	}
	a.heldLedger = v.(*ledgerHandle)
	v, ok, err = takeRunning(limiters, a.limiterKey)
	if !ok {
		return err
	}
	a.heldLimiter = v.(*limiterHandle)
	return a.serve()
}

// openRunning opens the ledger and the rate limiter this config does not
// hold yet (or takes them from a running config), and serves.
func (a *App) openRunning() error {
	if a.heldLedger == nil {
		h, err := a.openLedger()
		if err != nil {
			return err
		}
		a.heldLedger = h
	}
	if a.heldLimiter == nil {
		h, err := a.openLimiter()
		if err != nil {
			return err
		}
		a.heldLimiter = h
	}
	return a.serve()
}

// serve wires what needs the ledger and the rate limiter, then lets the
// handlers serve.
func (a *App) serve() error {
	if err := a.useLimiter(a.heldLimiter); err != nil {
		return err
	}
	if err := a.useLedger(a.heldLedger); err != nil {
		return err
	}
	a.serving.Store(true)
	return nil
}

// notServingMessage is what a request learns while its config's app has no
// ledger yet: between the start of Caddy's HTTP app and this app's Start,
// which opens the ledger (or fails, when another server holds it).
const notServingMessage = "This gateway is starting: try again in a moment."

// notServingBody is the short JSON error of the routes without a wire
// format of their own.
var notServingBody = []byte(`{"error":{"type":"unavailable","message":"` + notServingMessage + `"}}`)

// Serving reports whether the app serves: its ledger is open and wired.
// Until then every modelgate handler answers 503 (WriteNotServing) and must
// touch nothing else of the app.
func (a *App) Serving() bool { return a.serving.Load() }

// WriteNotServing answers 503 with a short JSON error, for a handler whose
// app does not serve yet.
func WriteNotServing(w http.ResponseWriter) {
	w.Header().Set("Retry-After", "1")
	w.Header().Set("Cache-Control", "no-store")
	relay.WriteJSON(w, http.StatusServiceUnavailable, notServingBody)
}

// notServing answers an API request that came before the app serves: in
// the client's wire format on the routes that have one (Anthropic clients
// get 529, their overloaded status), a short JSON error on the index and
// the payment provider's notifications (which the provider delivers
// again).
func (h *APIHandler) notServing(w http.ResponseWriter, ri routeInfo) {
	switch ri.route {
	case routeIndex, routePaymentWebhook:
		WriteNotServing(w)
	default:
		relay.WriteError(w, ri.format, &formats.Error{Kind: formats.KindOverloaded, Message: notServingMessage, RetryAfter: 1})
	}
}
