// Package stripetest makes Stripe webhook deliveries for tests: the event
// JSON of a Checkout Session, a charge, a dispute or a PaymentIntent and
// the Stripe-Signature header Stripe sends with it, signed as Stripe signs
// (stripe-go's own test signer). API is an in-process double of the parts
// of the Stripe API the gateway calls, which saves cards and charges them.
package stripetest

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/stripe/stripe-go/v85/webhook"
)

// CheckoutEvent is the JSON of a Stripe event of type typ about a one-off
// Checkout Session that names accountID as its client_reference_id and
// has no metadata: what a Payment Link makes, which the gateway must not
// credit.
func CheckoutEvent(eventID, typ, sessionID, accountID, currency, paymentStatus string, amountTotal int64) []byte {
	return CheckoutEventWithMetadata(eventID, typ, sessionID, accountID, currency, paymentStatus, amountTotal, nil)
}

// GatewayCheckoutEvent is CheckoutEvent for a session as the gateway
// starts them: its metadata names the account with the signature made from
// webhookSecret.
func GatewayCheckoutEvent(webhookSecret, eventID, typ, sessionID, accountID, currency, paymentStatus string, amountTotal int64) []byte {
	return CheckoutEventWithMetadata(eventID, typ, sessionID, accountID, currency, paymentStatus, amountTotal,
		GatewayMetadata(webhookSecret, accountID, currency, amountTotal))
}

// CheckoutEventWithMetadata is CheckoutEvent with the session's metadata.
func CheckoutEventWithMetadata(eventID, typ, sessionID, clientReference, currency, paymentStatus string, amountTotal int64, metadata map[string]string) []byte {
	return event(eventID, typ, fmt.Appendf(nil, `{"id":%q,"object":"checkout.session","mode":"payment","client_reference_id":%q,`+
		`"amount_total":%d,"currency":%q,"payment_status":%q,"metadata":%s}`,
		sessionID, clientReference, amountTotal, currency, paymentStatus, metadataJSON(metadata)))
}

// WithPaymentIntent is a CheckoutEvent's JSON with the session's
// payment_intent, which Stripe sets on a paid one-off session.
func WithPaymentIntent(event []byte, paymentIntent string) []byte {
	return []byte(strings.Replace(string(event), `"object":"checkout.session",`,
		`"object":"checkout.session","payment_intent":`+strconv.Quote(paymentIntent)+`,`, 1))
}

// ChargeRefundedEvent is the JSON of a charge.refunded event: the charge
// of the payment intent, of amount, with amountRefunded refunded so far (it
// is cumulative: a second partial refund's event carries both).
func ChargeRefundedEvent(eventID, chargeID, paymentIntent, currency string, amount, amountRefunded int64) []byte {
	return event(eventID, "charge.refunded", fmt.Appendf(nil, `{"id":%q,"object":"charge","amount":%d,"amount_refunded":%d,"currency":%q,`+
		`"payment_intent":%q,"refunded":%t,"status":"succeeded"}`,
		chargeID, amount, amountRefunded, currency, paymentIntent, amountRefunded == amount))
}

// DisputeEvent is the JSON of a charge.dispute.* event of type typ about a
// dispute of amount on the payment intent's charge, with status
// ("needs_response", "won", "lost", …).
func DisputeEvent(eventID, typ, disputeID, paymentIntent, currency, status string, amount int64) []byte {
	return event(eventID, typ, fmt.Appendf(nil, `{"id":%q,"object":"dispute","amount":%d,"charge":"ch_of_%s","currency":%q,`+
		`"payment_intent":%q,"reason":"fraudulent","status":%q}`,
		disputeID, amount, paymentIntent, currency, paymentIntent, status))
}

// GatewayMetadata is the metadata the gateway gives a Checkout Session it
// starts for accountID, of amount in currency's smallest unit: the account,
// and an HMAC-SHA256 of "account NUL currency NUL amount" keyed by the
// HMAC-SHA256 of "modelgate checkout metadata v1" keyed by the webhook
// secret. It is written here from that description, apart from the
// gateway's code, so that the tests pin the scheme.
func GatewayMetadata(webhookSecret, accountID, currency string, amount int64) map[string]string {
	return map[string]string{"modelgate_account": accountID,
		"modelgate_signature": signature(webhookSecret, "modelgate checkout metadata v1", accountID, currency, strconv.FormatInt(amount, 10))}
}

// Signed is the header of payload signed with secret at the time at.
func Signed(payload []byte, secret string, at time.Time) http.Header {
	sp := webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: payload, Secret: secret, Timestamp: at})
	return http.Header{"Stripe-Signature": {sp.Header}}
}
