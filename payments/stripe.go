package payments

import (
	"cmp"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/stripe/stripe-go/v85"
	"github.com/stripe/stripe-go/v85/webhook"
	"go.uber.org/zap"

	"github.com/modelgate/modelgate/ledger"
)

// StripeConfig configures Stripe Checkout.
type StripeConfig struct {
	SecretKey     string
	WebhookSecret string
	Currency      string // ISO code, e.g. "usd"
	Minimum       ledger.Money
	// APIBase replaces https://api.stripe.com (tests).
	APIBase string
	// HTTPClient is used for the API (nil: stripe-go's default).
	HTTPClient *http.Client
	// Logger receives stripe-go's own messages (nil: none), so that none
	// reaches the process's standard error as plain text (stripeLogger).
	Logger *zap.Logger
}

// stripeLogger is stripe-go's leveled logger on zap: its request lines at
// debug level, its warnings as warnings, and its errors at debug level
// too, since the gateway logs each failed call once itself, with the
// account it was for and the cause.
type stripeLogger struct{ s *zap.SugaredLogger }

func (l stripeLogger) Debugf(format string, v ...any) { l.s.Debugf(format, v...) }
func (l stripeLogger) Infof(format string, v ...any)  { l.s.Debugf(format, v...) }
func (l stripeLogger) Warnf(format string, v ...any)  { l.s.Warnf(format, v...) }
func (l stripeLogger) Errorf(format string, v ...any) { l.s.Debugf(format, v...) }

// Stripe takes top-ups with Stripe Checkout: a one-off payment of the
// amount, and the checkout.session.completed (or, for payment methods that
// settle later, checkout.session.async_payment_succeeded) notification,
// signed with the endpoint's secret, credits it.
//
// Only Checkout Sessions the gateway started are credited: the
// Stripe account may sell other things, and a Payment Link lets the payer
// set client_reference_id to any account. StartCheckout puts the account
// in the session's metadata with an HMAC of the account, currency and
// amount, keyed by a key derived from the webhook secret
// (metadataKey); a paid session whose metadata does not carry a
// valid one is not credited. Rotating the webhook secret therefore leaves
// sessions started before the rotation and paid after it uncredited (an
// operator credits them by hand).
//
// It is a CardProvider too: a Checkout Session in setup mode saves a card
// for payments made while the customer is away (StartCardSetup; its
// checkout.session.completed notification is a KindCardSaved Payment), and
// ChargeSaved charges it with a PaymentIntent confirmed off-session, whose
// payment_intent.succeeded notification credits the automatic top-up and
// whose payment_intent.payment_failed or payment_intent.requires_action
// notification is a KindChargeFailed Payment. Setup sessions and
// PaymentIntents are signed in their metadata like the top-ups' sessions,
// each with a key of its own (metadataKey), and are believed only with a
// valid signature; a PaymentIntent without the gateway's metadata (the
// one-off Checkout top-ups' own, already credited by their session) is
// ignored.
type Stripe struct {
	client        *stripe.Client
	webhookSecret string
	metaKey       []byte // signs the account in a top-up session's metadata
	setupKey      []byte // signs the account in a card setup session's metadata
	autoTopUpKey  []byte // signs an automatic top-up's PaymentIntent's metadata
	currency      string
	minimum       ledger.Money
	unit          ledger.Money // nanos in the currency's smallest unit
}

// Metadata keys of the Checkout Sessions and PaymentIntents the gateway
// creates.
const (
	metadataAccount   = "modelgate_account"
	metadataSignature = "modelgate_signature"
	// metadataAutoTopUp is an automatic top-up's id (its idempotency key).
	metadataAutoTopUp = "modelgate_auto_topup"
)

// ErrForeignCheckout is a paid Checkout Session, a card setup session or
// an automatic top-up's PaymentIntent that names an account but that the
// gateway did not make (a Payment Link, a session or payment made by other
// software on the Stripe account, forged metadata): it is not credited,
// nor its card kept.
var ErrForeignCheckout = errors.New("payments: stripe: a checkout session or payment this gateway did not start")

// metadataKey derives the key that signs the account in the metadata of
// what the gateway makes at Stripe for one purpose ("checkout": a top-up's
// session; "card setup": a session that saves a card; "auto top-up": an
// automatic top-up's PaymentIntent) from the webhook endpoint's secret,
// which only the operator and Stripe know: the key is the HMAC-SHA256 of
// "modelgate <purpose> metadata v1", so that a signature made for one
// purpose never verifies for another.
func metadataKey(webhookSecret, purpose string) []byte {
	m := hmac.New(sha256.New, []byte(webhookSecret))
	m.Write([]byte("modelgate " + purpose + " metadata v1"))
	return m.Sum(nil)
}

// signFields is the hex HMAC-SHA256 with key of the fields joined
// by NUL bytes (none of which the fields hold).
func signFields(key []byte, fields ...string) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(strings.Join(fields, "\x00")))
	return hex.EncodeToString(m.Sum(nil))
}

// checkoutSignature is the signature of a session for account, of amount
// in currency's smallest unit, with the "checkout" key.
func checkoutSignature(key []byte, account, currency string, amount int64) string {
	return signFields(key, account, currency, strconv.FormatInt(amount, 10))
}

// signedBy tells whether the metadata's account was signed as want, and
// that the session's client reference, if any, names the same account.
func signedBy(metadata map[string]string, clientReference, want string) bool {
	account := metadata[metadataAccount]
	return account != "" && (clientReference == "" || clientReference == account) &&
		hmac.Equal([]byte(metadata[metadataSignature]), []byte(want))
}

// NewStripe checks cfg and returns the provider.
func NewStripe(cfg StripeConfig) (*Stripe, error) {
	if cfg.SecretKey == "" || cfg.WebhookSecret == "" {
		return nil, errors.New("payments: stripe needs secret_key and webhook_secret")
	}
	cur := strings.ToLower(cfg.Currency)
	if len(cur) != 3 {
		return nil, fmt.Errorf("payments: currency %q: want an ISO 4217 code such as usd", cfg.Currency)
	}
	s := &Stripe{webhookSecret: cfg.WebhookSecret, metaKey: metadataKey(cfg.WebhookSecret, "checkout"),
		setupKey: metadataKey(cfg.WebhookSecret, "card setup"), autoTopUpKey: metadataKey(cfg.WebhookSecret, "auto top-up"),
		currency: cur, minimum: cfg.Minimum, unit: minorUnit(cur)}
	if cfg.Minimum < 0 || cfg.Minimum%s.unit != 0 {
		return nil, fmt.Errorf("payments: minimum %s is not a whole number of %s's smallest unit", cfg.Minimum, cur)
	}
	logger := cfg.Logger
	if logger == nil {
		logger = zap.NewNop()
	}
	bc := &stripe.BackendConfig{HTTPClient: cfg.HTTPClient, LeveledLogger: stripeLogger{logger.Sugar()}}
	if cfg.APIBase != "" {
		bc.URL = stripe.String(cfg.APIBase)
	}
	s.client = stripe.NewClient(cfg.SecretKey, stripe.WithBackends(stripe.NewBackendsWithConfig(bc)))
	return s, nil
}

// CheckoutOrigin is where Stripe hosts its Checkout pages.
func (s *Stripe) CheckoutOrigin() string { return "https://checkout.stripe.com" }

// minorUnit is the value of one smallest unit of the currency in nanos:
// Stripe counts amounts in it (cents; whole yen; thousandths of a dinar).
func minorUnit(currency string) ledger.Money {
	switch currency {
	case "bif", "clp", "djf", "gnf", "jpy", "kmf", "krw", "mga", "pyg", "rwf", "ugx", "vnd", "vuv", "xaf", "xof", "xpf":
		return 1_000_000_000
	case "bhd", "jod", "kwd", "omr", "tnd":
		return 1_000_000
	}
	return 10_000_000
}

// chargeable reports whether Stripe can be asked for amount: at least the
// minimum, more than zero, and a whole number of the currency's smallest
// unit.
func (s *Stripe) chargeable(amount ledger.Money) bool {
	return amount >= s.minimum && amount > 0 && amount%s.unit == 0
}

// Name names the provider.
func (s *Stripe) Name() string { return "stripe" }

// Currency is the top-ups' currency.
func (s *Stripe) Currency() string { return s.currency }

// Minimum is the smallest top-up.
func (s *Stripe) Minimum() ledger.Money { return s.minimum }

// StartCheckout creates a Checkout Session for the amount, tagged with the
// account and its signature.
func (s *Stripe) StartCheckout(ctx context.Context, o CheckoutOptions) (Checkout, error) {
	if !s.chargeable(o.Amount) {
		return Checkout{}, ErrAmount
	}
	amount := int64(o.Amount / s.unit)
	p := &stripe.CheckoutSessionCreateParams{
		Mode:              stripe.String(string(stripe.CheckoutSessionModePayment)),
		ClientReferenceID: stripe.String(o.AccountID),
		SuccessURL:        stripe.String(o.SuccessURL),
		CancelURL:         stripe.String(o.CancelURL),
		Metadata: map[string]string{
			metadataAccount:   o.AccountID,
			metadataSignature: checkoutSignature(s.metaKey, o.AccountID, s.currency, amount),
		},
		LineItems: []*stripe.CheckoutSessionCreateLineItemParams{{
			Quantity: stripe.Int64(1),
			PriceData: &stripe.CheckoutSessionCreateLineItemPriceDataParams{
				Currency:   stripe.String(s.currency),
				UnitAmount: stripe.Int64(amount),
				ProductData: &stripe.CheckoutSessionCreateLineItemPriceDataProductDataParams{
					Name: stripe.String("Balance top-up"),
				},
			},
		}},
	}
	if o.Email != "" {
		p.CustomerEmail = stripe.String(o.Email)
	}
	cs, err := s.client.V1CheckoutSessions.Create(ctx, p)
	if err != nil {
		return Checkout{}, fmt.Errorf("payments: stripe: creating a checkout session: %w", err)
	}
	return Checkout{ID: cs.ID, URL: cs.URL}, nil
}

// checkoutSession is the part of a Checkout Session a payment or a saved
// card needs.
type checkoutSession struct {
	ID                string            `json:"id"`
	ClientReferenceID string            `json:"client_reference_id"`
	AmountTotal       int64             `json:"amount_total"`
	Currency          string            `json:"currency"`
	PaymentStatus     string            `json:"payment_status"`
	Status            string            `json:"status"`
	Mode              string            `json:"mode"`
	Metadata          map[string]string `json:"metadata"`
	PaymentIntent     string            `json:"payment_intent"`
	SetupIntent       string            `json:"setup_intent"`
	Customer          string            `json:"customer"`
}

// charge is the part of a Charge a refund needs.
type charge struct {
	ID             string `json:"id"`
	AmountRefunded int64  `json:"amount_refunded"`
	Currency       string `json:"currency"`
	PaymentIntent  string `json:"payment_intent"`
}

// dispute is the part of a Dispute a reversal needs.
type dispute struct {
	ID            string `json:"id"`
	Amount        int64  `json:"amount"`
	Currency      string `json:"currency"`
	PaymentIntent string `json:"payment_intent"`
	Status        string `json:"status"`
}

// ParsePayment verifies a webhook delivery (Stripe-Signature, within
// Stripe's default tolerance of five minutes) and reads a paid Checkout
// Session, a card setup session, an automatic top-up's PaymentIntent or a
// reversal from it. The event's API version is not checked: only fields
// that every version has are read.
func (s *Stripe) ParsePayment(payload []byte, header http.Header) (Payment, bool, error) {
	ev, err := webhook.ConstructEventWithOptions(payload, header.Get("Stripe-Signature"), s.webhookSecret,
		webhook.ConstructEventOptions{IgnoreAPIVersionMismatch: true})
	if err != nil {
		if errors.Is(err, webhook.ErrNotSigned) || errors.Is(err, webhook.ErrInvalidHeader) ||
			errors.Is(err, webhook.ErrNoValidSignature) || errors.Is(err, webhook.ErrTooOld) {
			return Payment{}, false, ErrBadSignature
		}
		return Payment{}, false, fmt.Errorf("payments: stripe: %w", err)
	}
	switch ev.Type {
	case "checkout.session.completed", "checkout.session.async_payment_succeeded":
	case "charge.refunded", "charge.dispute.created", "charge.dispute.closed":
		return s.parseReversal(ev)
	case "payment_intent.succeeded", "payment_intent.payment_failed", "payment_intent.requires_action":
		return s.parseAutoTopUp(ev)
	default:
		return Payment{}, false, nil
	}
	var cs checkoutSession
	if ev.Data == nil || json.Unmarshal(ev.Data.Raw, &cs) != nil || cs.ID == "" {
		return Payment{}, false, fmt.Errorf("payments: stripe: event %s carries no checkout session", ev.ID)
	}
	if cs.Mode == "setup" {
		return s.parseCardSaved(string(ev.Type), cs)
	}
	account := cs.Metadata[metadataAccount]
	switch {
	case cs.PaymentStatus != "paid" || cs.Mode != "payment":
		return Payment{}, false, nil // not (yet) a top-up
	case account == "" && cs.ClientReferenceID == "":
		return Payment{}, false, nil // a sale of something else
	case cs.Currency != s.currency:
		return Payment{}, false, fmt.Errorf("payments: stripe: checkout %s was paid in %q, not %q", cs.ID, cs.Currency, s.currency)
	case cs.AmountTotal <= 0:
		return Payment{}, false, fmt.Errorf("payments: stripe: checkout %s has amount %d", cs.ID, cs.AmountTotal)
	case !signedBy(cs.Metadata, cs.ClientReferenceID, checkoutSignature(s.metaKey, account, cs.Currency, cs.AmountTotal)):
		return Payment{}, false, fmt.Errorf("%w: %s (account %q)", ErrForeignCheckout, cs.ID, cmp.Or(account, cs.ClientReferenceID))
	}
	p := Payment{
		Kind:      ledger.KindTopup,
		Reference: "stripe:" + cs.ID,
		AccountID: account,
		Amount:    ledger.Money(cs.AmountTotal) * s.unit,
		Currency:  cs.Currency,
		Describe:  "Stripe Checkout " + cs.ID,
	}
	if cs.PaymentIntent != "" {
		p.PaymentIntent = "stripe:" + cs.PaymentIntent
	}
	return p, true, nil
}

// parseReversal reads a refund (charge.refunded: amount_refunded is the
// charge's total refunded so far, so that a partial refund's reference is
// the charge and that total), a dispute (charge.dispute.created) or a
// dispute's outcome (charge.dispute.closed: won gives the amount back,
// lost keeps it reversed; other statuses change nothing). The
// reversal finds its top-up by the payment intent.
func (s *Stripe) parseReversal(ev stripe.Event) (Payment, bool, error) {
	if ev.Data == nil {
		return Payment{}, false, fmt.Errorf("payments: stripe: event %s carries no object", ev.ID)
	}
	if ev.Type == "charge.refunded" {
		var ch charge
		if json.Unmarshal(ev.Data.Raw, &ch) != nil || ch.ID == "" {
			return Payment{}, false, fmt.Errorf("payments: stripe: event %s carries no charge", ev.ID)
		}
		switch {
		case ch.PaymentIntent == "" || ch.AmountRefunded <= 0:
			return Payment{}, false, nil // not a payment the gateway credited, or nothing refunded
		case ch.Currency != s.currency:
			return Payment{}, false, fmt.Errorf("payments: stripe: charge %s was refunded in %q, not %q", ch.ID, ch.Currency, s.currency)
		}
		total := ledger.Money(ch.AmountRefunded) * s.unit
		return Payment{Kind: ledger.KindRefund, Reference: "stripe:refund:" + ch.ID + ":" + strconv.FormatInt(ch.AmountRefunded, 10),
			Amount: total, Currency: ch.Currency, PaymentIntent: "stripe:" + ch.PaymentIntent,
			Describe: "Stripe refund of charge " + ch.ID + " (" + total.String() + " refunded in all)"}, true, nil
	}
	var dp dispute
	if json.Unmarshal(ev.Data.Raw, &dp) != nil || dp.ID == "" {
		return Payment{}, false, fmt.Errorf("payments: stripe: event %s carries no dispute", ev.ID)
	}
	if dp.PaymentIntent == "" {
		return Payment{}, false, nil
	}
	if dp.Currency != s.currency {
		return Payment{}, false, fmt.Errorf("payments: stripe: dispute %s is in %q, not %q", dp.ID, dp.Currency, s.currency)
	}
	ref := "stripe:dispute:" + dp.ID
	p := Payment{Currency: dp.Currency, PaymentIntent: "stripe:" + dp.PaymentIntent, Amount: ledger.Money(dp.Amount) * s.unit}
	if ev.Type == "charge.dispute.created" {
		if dp.Amount <= 0 {
			return Payment{}, false, fmt.Errorf("payments: stripe: dispute %s has amount %d", dp.ID, dp.Amount)
		}
		p.Kind, p.Reference, p.Describe = ledger.KindDispute, ref, "Stripe dispute "+dp.ID
		return p, true, nil
	}
	switch dp.Status {
	case "won":
		p.Kind, p.Describe = ledger.KindDisputeWon, "Stripe dispute "+dp.ID+" won"
	case "lost":
		p.Kind, p.Describe = ledger.KindDisputeLost, "Stripe dispute "+dp.ID+" lost"
	default:
		return Payment{}, false, nil // warning_closed and the like: nothing was reversed
	}
	p.Dispute = ref
	return p, true, nil
}
