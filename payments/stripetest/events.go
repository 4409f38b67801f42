package stripetest

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
)

// SetupMetadata is the metadata the gateway gives a Checkout Session in
// setup mode (a card setup) it starts for accountID in currency: the
// account, and an HMAC-SHA256 of "account NUL currency" keyed by the
// HMAC-SHA256 of "modelgate card setup metadata v1" keyed by the webhook
// secret. Like GatewayMetadata, it is written from that description, apart
// from the gateway's code.
func SetupMetadata(webhookSecret, accountID, currency string) map[string]string {
	return map[string]string{"modelgate_account": accountID,
		"modelgate_signature": signature(webhookSecret, "modelgate card setup metadata v1", accountID, currency)}
}

// AutoTopUpMetadata is the metadata the gateway gives the PaymentIntent of
// an automatic top-up of accountID, of amount in currency's smallest unit,
// whose id (its idempotency key) is id: the account, the id, and an
// HMAC-SHA256 of "account NUL currency NUL amount NUL id" keyed by the
// HMAC-SHA256 of "modelgate auto top-up metadata v1" keyed by the webhook
// secret. Like GatewayMetadata, it is written from that description, apart
// from the gateway's code.
func AutoTopUpMetadata(webhookSecret, accountID, currency string, amount int64, id string) map[string]string {
	return map[string]string{"modelgate_account": accountID, "modelgate_auto_topup": id,
		"modelgate_signature": signature(webhookSecret, "modelgate auto top-up metadata v1", accountID, currency,
			strconv.FormatInt(amount, 10), id)}
}

// signature is the hex HMAC-SHA256 of the fields joined by NUL bytes,
// keyed by the HMAC-SHA256 of label keyed by the webhook secret.
func signature(webhookSecret, label string, fields ...string) string {
	k := hmac.New(sha256.New, []byte(webhookSecret))
	k.Write([]byte(label))
	m := hmac.New(sha256.New, k.Sum(nil))
	m.Write([]byte(strings.Join(fields, "\x00")))
	return hex.EncodeToString(m.Sum(nil))
}

// SetupSession is a Checkout Session in setup mode, as an event shows it.
type SetupSession struct {
	ID              string
	ClientReference string
	Customer        string
	Currency        string
	Status          string // "open", "complete" or "expired"
	SetupIntent     string // set once complete
	Metadata        map[string]string
}

// SetupSessionEvent is the JSON of a Stripe event of type typ
// ("checkout.session.completed", …) about the setup session.
func SetupSessionEvent(eventID, typ string, cs SetupSession) []byte {
	return event(eventID, typ, cs.json())
}

// json is the session's JSON as the API and its events show it.
func (cs SetupSession) json() []byte {
	return fmt.Appendf(nil, `{"id":%q,"object":"checkout.session","mode":"setup","client_reference_id":%s,"customer":%s,`+
		`"currency":%q,"status":%q,"payment_status":"no_payment_required","amount_total":null,"setup_intent":%s,"payment_intent":null,`+
		`"url":"https://checkout.stripe.com/c/pay/%s","livemode":false,"metadata":%s}`,
		cs.ID, nullable(cs.ClientReference), nullable(cs.Customer), cs.Currency, cs.Status, nullable(cs.SetupIntent), cs.ID, metadataJSON(cs.Metadata))
}

// PaymentIntent is a PaymentIntent, as the API and its events show it.
type PaymentIntent struct {
	ID            string
	Amount        int64 // in the currency's smallest unit
	Currency      string
	Customer      string
	PaymentMethod string
	Description   string
	// Status is "succeeded", "requires_payment_method", "requires_action", ….
	Status   string
	Metadata map[string]string
	// ErrorCode, DeclineCode and ErrorMessage are its last_payment_error:
	// empty when its last attempt did not fail.
	ErrorCode    string
	DeclineCode  string
	ErrorMessage string
	// IdempotencyKey is the Idempotency-Key it was created with (API).
	IdempotencyKey string
}

// PaymentIntentEvent is the JSON of a Stripe event of type typ
// ("payment_intent.succeeded", "payment_intent.payment_failed", …) about
// the PaymentIntent.
func PaymentIntentEvent(eventID, typ string, pi PaymentIntent) []byte {
	return event(eventID, typ, pi.json())
}

// json is the PaymentIntent's JSON.
func (pi PaymentIntent) json() []byte {
	lastError := []byte("null")
	if pi.ErrorCode != "" || pi.DeclineCode != "" {
		lastError = fmt.Appendf(nil, `{"type":"card_error","code":%q,"decline_code":%s,"message":%q,"payment_method":{"id":%q,"object":"payment_method","type":"card"}}`,
			pi.ErrorCode, nullable(pi.DeclineCode), pi.ErrorMessage, pi.PaymentMethod)
	}
	received, charge := int64(0), "null"
	if pi.Status == "succeeded" {
		received, charge = pi.Amount, strconv.Quote("ch_of_"+pi.ID)
	}
	return fmt.Appendf(nil, `{"id":%q,"object":"payment_intent","amount":%d,"amount_received":%d,"currency":%q,"customer":%s,`+
		`"payment_method":%s,"payment_method_types":["card"],"description":%s,"status":%q,"capture_method":"automatic",`+
		`"confirmation_method":"automatic","latest_charge":%s,"last_payment_error":%s,"livemode":false,"metadata":%s}`,
		pi.ID, pi.Amount, received, pi.Currency, nullable(pi.Customer), nullable(pi.PaymentMethod), nullable(pi.Description),
		pi.Status, charge, lastError, metadataJSON(pi.Metadata))
}

// event wraps an object's JSON in an event's.
func event(eventID, typ string, object []byte) []byte {
	return fmt.Appendf(nil, `{"id":%q,"object":"event","api_version":"2020-08-27","created":1700000000,"type":%q,"livemode":false,`+
		`"data":{"object":%s}}`, eventID, typ, object)
}

// nullable is s quoted, or null when empty.
func nullable(s string) string {
	if s == "" {
		return "null"
	}
	return strconv.Quote(s)
}

// metadataJSON is the metadata's JSON object ({} when nil).
func metadataJSON(m map[string]string) []byte {
	if m == nil {
		m = map[string]string{}
	}
	b, err := json.Marshal(m)
	if err != nil {
		panic(err)
	}
	return b
}

// Delivery is a webhook delivery: an event's JSON and its Stripe-Signature
// header.
type Delivery struct {
	Payload []byte
	Header  http.Header
}

// Post delivers it to a webhook endpoint as Stripe does, and returns the
// endpoint's status and body.
func (d Delivery) Post(ctx context.Context, url string) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(d.Payload))
	if err != nil {
		return 0, nil, err
	}
	for k, v := range d.Header {
		req.Header[k] = v
	}
	req.Header.Set("Content-Type", "application/json; charset=utf-8")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, body, err
}
