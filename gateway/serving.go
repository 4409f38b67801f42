package gateway

import (
	"net/http"

	"github.com/modelgate/modelgate/formats"
	"github.com/modelgate/modelgate/relay"
)

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
