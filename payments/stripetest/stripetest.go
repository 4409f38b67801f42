// Package stripetest makes Stripe webhook deliveries for tests: the event
// JSON of a Checkout Session and the Stripe-Signature header Stripe sends
// with it, signed as Stripe signs (stripe-go's own test signer).
package stripetest

import (
	"fmt"
	"net/http"
	"time"

	"github.com/stripe/stripe-go/v85/webhook"
)

// CheckoutEvent is the JSON of a Stripe event of type typ about a one-off
// Checkout Session.
func CheckoutEvent(eventID, typ, sessionID, accountID, currency, paymentStatus string, amountTotal int64) []byte {
	return fmt.Appendf(nil, `{"id":%q,"object":"event","api_version":"2020-08-27","created":1700000000,"type":%q,"livemode":false,`+
		`"data":{"object":{"id":%q,"object":"checkout.session","mode":"payment","client_reference_id":%q,`+
		`"amount_total":%d,"currency":%q,"payment_status":%q,"metadata":{}}}}`,
		eventID, typ, sessionID, accountID, amountTotal, currency, paymentStatus)
}

// Signed is the header of payload signed with secret at the time at.
func Signed(payload []byte, secret string, at time.Time) http.Header {
	sp := webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: payload, Secret: secret, Timestamp: at})
	return http.Header{"Stripe-Signature": {sp.Header}}
}
