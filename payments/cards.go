package payments

import (
	"context"
	"errors"

	"github.com/modelgate/modelgate/ledger"
)

// Kinds of the Payments that are not ledger entries: what a provider's
// notifications about saved cards and automatic top-ups report.
const (
	// KindCardSaved is a card the customer saved through a card setup
	// (StartCardSetup): Payment.SetupIntent names it for CardFromSetup.
	KindCardSaved = "card_saved"
	// KindChargeFailed is an automatic top-up's charge (ChargeSaved) that
	// did not go through: the card was declined, or its bank asks the
	// customer to authenticate the payment, which they cannot do while
	// away (Payment.NeedsAuthentication).
	KindChargeFailed = "charge_failed"
)

// CardProvider is a Provider that also saves a customer's card for
// payments made while the customer is away, and charges it: what
// automatic top-ups need. A card is saved on the provider's hosted page
// (StartCardSetup), reported by a notification that ParsePayment reads
// as a KindCardSaved Payment, and read with CardFromSetup; the caller
// keeps the Card (none of it is secret: the provider keeps the card
// number) and charges it with ChargeSaved. The charge's success comes
// back both as ChargeSaved's answer and as a notification that
// ParsePayment reads as a ledger.KindTopup Payment: the caller credits
// the notification, with its Reference as the idempotency key like any
// top-up, and never the answer, so that a charge is credited once.
//
// *Stripe is one. Providers that cannot save cards implement only
// Provider: the caller finds out with a type assertion.
type CardProvider interface {
	Provider
	// StartCardSetup starts a hosted page on which the customer of the
	// account saves a card, creating the provider's customer when
	// o.Customer is empty. The Checkout's Customer is the customer the
	// card will belong to, to keep and pass to the next setup.
	StartCardSetup(ctx context.Context, o SetupOptions) (Checkout, error)
	// CardFromSetup reads the card a completed setup saved
	// (Payment.SetupIntent of a KindCardSaved Payment).
	CardFromSetup(ctx context.Context, setupIntentID string) (Card, error)
	// ChargeSaved charges a saved card while the customer is away. A card
	// error is a *DeclineError (errors.Is ErrDeclined), which another
	// attempt with the same key does not change; any other error (the
	// network, the provider's own failure) may be retried with the same
	// o.IdempotencyKey, which never charges twice.
	ChargeSaved(ctx context.Context, o ChargeOptions) (Charge, error)
}

// SetupOptions is what a card setup is started with.
type SetupOptions struct {
	AccountID string
	// Email is the new customer's, when one is created.
	Email string
	// Customer is the provider's customer of the account, from an earlier
	// setup ("cus_…"), or empty to create one.
	Customer   string
	SuccessURL string
	CancelURL  string
}

// Card is a saved card, by the provider's ids, and what tells it to its
// owner.
type Card struct {
	// Customer and PaymentMethod are the provider's ids of the customer
	// the card belongs to ("cus_…") and of the card ("pm_…").
	Customer      string
	PaymentMethod string
	// Brand ("visa", "mastercard", …) and Last4 show the card.
	Brand string
	Last4 string
	// ExpMonth (1-12) and ExpYear (four digits) are when it expires.
	ExpMonth int
	ExpYear  int
}

// ChargeOptions is what an automatic top-up's charge is made with.
type ChargeOptions struct {
	AccountID string
	Card      Card
	// Amount is a whole number of the currency's smallest unit, at least
	// the provider's Minimum.
	Amount ledger.Money
	// IdempotencyKey identifies the automatic top-up (at most 255
	// characters): a second call with the same key and options answers
	// what the first did and charges nothing more. It comes back as
	// Payment.AutoTopUp.
	IdempotencyKey string
}

// Charge is a payment ChargeSaved made.
type Charge struct {
	ID     string // the provider's id of the payment ("pi_…")
	Status string // the provider's status of it: "succeeded", or "processing" until it settles
}

// DeclineError is a charge of a saved card that the card's bank or the
// provider refused: another attempt with the same card and key changes
// nothing. errors.Is(err, ErrDeclined) is true of it.
type DeclineError struct {
	// Code is the provider's code of the refusal: "card_declined",
	// "expired_card", "authentication_required", ….
	Code string
	// Message is the provider's explanation, fit to show the customer.
	Message string
	// PaymentIntent is the provider's id of the failed payment ("pi_…"),
	// when one was made.
	PaymentIntent string
	// NeedsAuthentication is a refusal the customer can lift by
	// authenticating the payment (3-D Secure) while present: a new card
	// setup, or a top-up by hand.
	NeedsAuthentication bool
}

// Error says why the card was declined.
func (e *DeclineError) Error() string {
	msg := "payments: the card was declined (" + e.Code + ")"
	if e.Message != "" {
		msg += ": " + e.Message
	}
	return msg
}

// Is makes errors.Is(err, ErrDeclined) true of a DeclineError.
func (e *DeclineError) Is(target error) bool { return target == ErrDeclined }

// ErrDeclined is what every DeclineError is (errors.Is).
var ErrDeclined = errors.New("payments: the card was declined")
