package payments

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/stripe/stripe-go/v85"

	"github.com/modelgate/modelgate/ledger"
)

var _ CardProvider = (*Stripe)(nil)

// maxIdempotencyKey is the longest Idempotency-Key Stripe takes.
const maxIdempotencyKey = 255

// setupSignature is the signature of a card setup session for account,
// with the "card setup" key.
func setupSignature(key []byte, account, currency string) string {
	return signFields(key, account, currency)
}

// autoTopUpSignature is the signature of an automatic top-up's
// PaymentIntent for account, of amount in currency's smallest unit, with
// the top-up's id, with the "auto top-up" key.
func autoTopUpSignature(key []byte, account, currency string, amount int64, id string) string {
	return signFields(key, account, currency, strconv.FormatInt(amount, 10), id)
}

// checkField refuses an empty value, and one with a NUL byte, which would
// blur the fields of a signature.
func checkField(name, value string) error {
	if value == "" || strings.ContainsRune(value, 0) {
		return fmt.Errorf("payments: stripe: %s is empty or holds a NUL byte", name)
	}
	return nil
}

// StartCardSetup creates the account's Stripe Customer when o.Customer is
// empty (its metadata names the account), then a Checkout Session in setup
// mode for a card in the top-ups' currency, tagged like a top-up's session
// with the account and its signature (of the account and currency, with
// the "card setup" key). The SetupIntent it makes carries the account in
// its metadata too, for the Dashboard.
func (s *Stripe) StartCardSetup(ctx context.Context, o SetupOptions) (Checkout, error) {
	if err := checkField("the account", o.AccountID); err != nil {
		return Checkout{}, err
	}
	customer := o.Customer
	if customer == "" {
		p := &stripe.CustomerCreateParams{Metadata: map[string]string{metadataAccount: o.AccountID}}
		if o.Email != "" {
			p.Email = stripe.String(o.Email)
		}
		c, err := s.client.V1Customers.Create(ctx, p)
		if err != nil {
			return Checkout{}, fmt.Errorf("payments: stripe: creating a customer for account %s: %w", o.AccountID, err)
		}
		customer = c.ID
	}
	p := &stripe.CheckoutSessionCreateParams{
		Mode:               stripe.String(string(stripe.CheckoutSessionModeSetup)),
		Customer:           stripe.String(customer),
		Currency:           stripe.String(s.currency),
		PaymentMethodTypes: []*string{stripe.String("card")},
		ClientReferenceID:  stripe.String(o.AccountID),
		SuccessURL:         stripe.String(o.SuccessURL),
		CancelURL:          stripe.String(o.CancelURL),
		Metadata: map[string]string{
			metadataAccount:   o.AccountID,
			metadataSignature: setupSignature(s.setupKey, o.AccountID, s.currency),
		},
		SetupIntentData: &stripe.CheckoutSessionCreateSetupIntentDataParams{
			Description: stripe.String("Card for automatic top-ups"),
			Metadata:    map[string]string{metadataAccount: o.AccountID},
		},
	}
	cs, err := s.client.V1CheckoutSessions.Create(ctx, p)
	if err != nil {
		return Checkout{}, fmt.Errorf("payments: stripe: creating a card setup session for account %s: %w", o.AccountID, err)
	}
	return Checkout{ID: cs.ID, URL: cs.URL, Customer: customer}, nil
}

// CardFromSetup retrieves the SetupIntent, with its PaymentMethod, and
// returns its card: the setup must have succeeded, with a card attached
// to a customer, which is what an off-session charge needs.
func (s *Stripe) CardFromSetup(ctx context.Context, setupIntentID string) (Card, error) {
	if err := checkField("the setup intent", setupIntentID); err != nil {
		return Card{}, err
	}
	p := &stripe.SetupIntentRetrieveParams{}
	p.AddExpand("payment_method")
	si, err := s.client.V1SetupIntents.Retrieve(ctx, setupIntentID, p)
	if err != nil {
		return Card{}, fmt.Errorf("payments: stripe: retrieving setup intent %s: %w", setupIntentID, err)
	}
	if si.Status != stripe.SetupIntentStatusSucceeded {
		return Card{}, fmt.Errorf("payments: stripe: setup intent %s is %q, not succeeded", si.ID, si.Status)
	}
	pm := si.PaymentMethod
	if pm == nil || pm.ID == "" || pm.Card == nil {
		return Card{}, fmt.Errorf("payments: stripe: setup intent %s saved no card", si.ID)
	}
	var customer string
	switch {
	case si.Customer != nil && si.Customer.ID != "":
		customer = si.Customer.ID
	case pm.Customer != nil:
		customer = pm.Customer.ID
	}
	if customer == "" {
		return Card{}, fmt.Errorf("payments: stripe: the card of setup intent %s belongs to no customer", si.ID)
	}
	return Card{Customer: customer, PaymentMethod: pm.ID, Brand: string(pm.Card.Brand), Last4: pm.Card.Last4,
		ExpMonth: int(pm.Card.ExpMonth), ExpYear: int(pm.Card.ExpYear)}, nil
}

// ChargeSaved creates and confirms, off-session, one PaymentIntent of the
// amount on the saved card, sent with o.IdempotencyKey as its
// Idempotency-Key so that Stripe answers a repeated call with the first
// one's PaymentIntent (or decline) and charges once. Its metadata carries
// the account, the key as the automatic top-up's id, and their signature
// (of the account, currency, amount and id, with the "auto top-up" key):
// ParsePayment credits no PaymentIntent without it.
//
// A card error (HTTP 402), or a PaymentIntent left waiting for the
// customer (requires_action, requires_payment_method), is a
// *DeclineError; the Charge then holds the PaymentIntent when there is
// one. A PaymentIntent that succeeded or is processing is a Charge.
func (s *Stripe) ChargeSaved(ctx context.Context, o ChargeOptions) (Charge, error) {
	if !s.chargeable(o.Amount) {
		return Charge{}, ErrAmount
	}
	for _, f := range []struct{ name, value string }{{"the account", o.AccountID}, {"the idempotency key", o.IdempotencyKey},
		{"the card's customer", o.Card.Customer}, {"the card's payment method", o.Card.PaymentMethod}} {
		if err := checkField(f.name, f.value); err != nil {
			return Charge{}, err
		}
	}
	if len(o.IdempotencyKey) > maxIdempotencyKey {
		return Charge{}, fmt.Errorf("payments: stripe: the idempotency key is longer than %d bytes", maxIdempotencyKey)
	}
	amount := int64(o.Amount / s.unit)
	p := &stripe.PaymentIntentCreateParams{
		Amount:             stripe.Int64(amount),
		Currency:           stripe.String(s.currency),
		Customer:           stripe.String(o.Card.Customer),
		PaymentMethod:      stripe.String(o.Card.PaymentMethod),
		PaymentMethodTypes: []*string{stripe.String("card")},
		Confirm:            stripe.Bool(true),
		OffSession:         stripe.Bool(true),
		Description:        stripe.String("Automatic top-up"),
		Metadata: map[string]string{
			metadataAccount:   o.AccountID,
			metadataAutoTopUp: o.IdempotencyKey,
			metadataSignature: autoTopUpSignature(s.autoTopUpKey, o.AccountID, s.currency, amount, o.IdempotencyKey),
		},
	}
	p.SetIdempotencyKey(o.IdempotencyKey)
	pi, err := s.client.V1PaymentIntents.Create(ctx, p)
	var se *stripe.Error
	switch {
	case errors.As(err, &se) && (se.Type == stripe.ErrorTypeCard || se.HTTPStatusCode == http.StatusPaymentRequired):
		d := &DeclineError{Code: cmp.Or(string(se.Code), string(se.DeclineCode)), Message: se.Msg,
			NeedsAuthentication: se.Code == stripe.ErrorCodeAuthenticationRequired || se.DeclineCode == "authentication_required"}
		var c Charge
		if se.PaymentIntent != nil {
			c = Charge{ID: se.PaymentIntent.ID, Status: string(se.PaymentIntent.Status)}
			d.PaymentIntent = c.ID
			d.NeedsAuthentication = d.NeedsAuthentication || se.PaymentIntent.Status == stripe.PaymentIntentStatusRequiresAction
		}
		return c, d
	case err != nil:
		return Charge{}, fmt.Errorf("payments: stripe: charging the saved card of account %s: %w", o.AccountID, err)
	}
	c := Charge{ID: pi.ID, Status: string(pi.Status)}
	switch pi.Status {
	case stripe.PaymentIntentStatusSucceeded, stripe.PaymentIntentStatusProcessing:
		return c, nil
	case stripe.PaymentIntentStatusRequiresAction, stripe.PaymentIntentStatusRequiresPaymentMethod:
		d := &DeclineError{PaymentIntent: pi.ID, NeedsAuthentication: pi.Status == stripe.PaymentIntentStatusRequiresAction}
		if e := pi.LastPaymentError; e != nil {
			d.Code, d.Message = cmp.Or(string(e.Code), string(e.DeclineCode)), e.Msg
			d.NeedsAuthentication = d.NeedsAuthentication || e.Code == stripe.ErrorCodeAuthenticationRequired
		}
		d.Code = failureCode(d.Code, d.NeedsAuthentication)
		return c, d
	}
	return c, fmt.Errorf("payments: stripe: the automatic top-up's payment intent %s is %q", pi.ID, pi.Status)
}

// failureCode is the code of a failed charge: the provider's, or, when
// it gave none, authentication_required for a payment waiting for the
// customer to authenticate it and card_declined for any other.
func failureCode(code string, needsAuthentication bool) string {
	switch {
	case code != "":
		return code
	case needsAuthentication:
		return string(stripe.ErrorCodeAuthenticationRequired)
	}
	return string(stripe.ErrorCodeCardDeclined)
}

// parseCardSaved reads a completed setup-mode Checkout Session the gateway
// started (a valid signature of its account) into a KindCardSaved
// Payment. Other events of setup sessions change nothing, nor do setup
// sessions that name no account (other software's).
func (s *Stripe) parseCardSaved(typ string, cs checkoutSession) (Payment, bool, error) {
	account := cs.Metadata[metadataAccount]
	switch {
	case typ != "checkout.session.completed" || cs.Status != "complete" || cs.SetupIntent == "":
		return Payment{}, false, nil
	case account == "" && cs.ClientReferenceID == "":
		return Payment{}, false, nil
	case !signedBy(cs.Metadata, cs.ClientReferenceID, setupSignature(s.setupKey, account, s.currency)):
		return Payment{}, false, fmt.Errorf("%w: card setup %s (account %q)", ErrForeignCheckout, cs.ID, cmp.Or(account, cs.ClientReferenceID))
	}
	return Payment{Kind: KindCardSaved, Reference: "stripe:" + cs.ID, AccountID: account, SetupIntent: cs.SetupIntent,
		Customer: cs.Customer, Describe: "Card saved with Stripe Checkout " + cs.ID}, true, nil
}

// paymentIntent is the part of a PaymentIntent an automatic top-up needs.
type paymentIntent struct {
	ID               string            `json:"id"`
	Amount           int64             `json:"amount"`
	Currency         string            `json:"currency"`
	Status           string            `json:"status"`
	Metadata         map[string]string `json:"metadata"`
	LastPaymentError *struct {
		Code        string `json:"code"`
		DeclineCode string `json:"decline_code"`
		Message     string `json:"message"`
	} `json:"last_payment_error"`
}

// parseAutoTopUp reads a payment_intent.* event of an automatic top-up's
// charge: succeeded credits it (by the PaymentIntent, which its refunds
// and disputes name too); payment_failed, and requires_action (the bank
// asks the absent customer to authenticate), are a KindChargeFailed
// Payment. A PaymentIntent without the automatic top-up's id in its
// metadata is not one (a one-off Checkout top-up's is credited by its
// session): it changes nothing. One with the id but without a valid
// signature is ErrForeignCheckout.
func (s *Stripe) parseAutoTopUp(ev stripe.Event) (Payment, bool, error) {
	var pi paymentIntent
	if ev.Data == nil || json.Unmarshal(ev.Data.Raw, &pi) != nil || pi.ID == "" {
		return Payment{}, false, fmt.Errorf("payments: stripe: event %s carries no payment intent", ev.ID)
	}
	id, account := pi.Metadata[metadataAutoTopUp], pi.Metadata[metadataAccount]
	switch {
	case id == "":
		return Payment{}, false, nil
	case pi.Currency != s.currency:
		return Payment{}, false, fmt.Errorf("payments: stripe: payment intent %s is in %q, not %q", pi.ID, pi.Currency, s.currency)
	case pi.Amount <= 0:
		return Payment{}, false, fmt.Errorf("payments: stripe: payment intent %s has amount %d", pi.ID, pi.Amount)
	case !signedBy(pi.Metadata, "", autoTopUpSignature(s.autoTopUpKey, account, pi.Currency, pi.Amount, id)):
		return Payment{}, false, fmt.Errorf("%w: payment intent %s (account %q)", ErrForeignCheckout, pi.ID, account)
	}
	p := Payment{AccountID: account, Amount: ledger.Money(pi.Amount) * s.unit, Currency: pi.Currency,
		PaymentIntent: "stripe:" + pi.ID, AutoTopUp: id}
	if ev.Type == "payment_intent.succeeded" {
		if pi.Status != string(stripe.PaymentIntentStatusSucceeded) {
			return Payment{}, false, nil
		}
		p.Kind, p.Reference, p.Describe = ledger.KindTopup, "stripe:"+pi.ID, "Automatic top-up, Stripe payment "+pi.ID
		return p, true, nil
	}
	p.Kind, p.Reference = KindChargeFailed, "stripe:charge_failed:"+pi.ID
	const authentication = string(stripe.ErrorCodeAuthenticationRequired)
	p.NeedsAuthentication = ev.Type == "payment_intent.requires_action" || pi.Status == string(stripe.PaymentIntentStatusRequiresAction)
	if e := pi.LastPaymentError; e != nil {
		p.FailureCode, p.FailureMessage = cmp.Or(e.Code, e.DeclineCode), e.Message
		p.NeedsAuthentication = p.NeedsAuthentication || e.Code == authentication || e.DeclineCode == authentication
	}
	p.FailureCode = failureCode(p.FailureCode, p.NeedsAuthentication)
	p.Describe = "Automatic top-up failed, Stripe payment " + pi.ID + " (" + p.FailureCode + ")"
	return p, true, nil
}
