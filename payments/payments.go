// Package payments takes balance top-ups through a payment provider: it
// starts a hosted checkout for an account, and reads the provider's signed
// notifications of completed payments into credits. Stripe Checkout is
// built in. A CardProvider also saves a card and charges it while the
// customer is away, for automatic top-ups. It is plain Go: crediting the
// ledger is the caller's job, with Payment.Reference as the idempotency key
// so that a notification delivered twice credits once.
package payments

import (
	"context"
	"errors"
	"net/http"

	"github.com/modelgate/modelgate/ledger"
)

// Checkout is a hosted payment page started for an account.
type Checkout struct {
	ID  string // the provider's id of the checkout
	URL string // where to send the customer
	// Customer is the provider's customer a card setup saves the card
	// for (CardProvider.StartCardSetup): empty for a top-up's checkout.
	Customer string
}

// Payment is a completed payment, to be credited, or a reversal of one:
// a refund, a dispute, a dispute's outcome; or news of a saved card and of
// its automatic top-ups' charges (KindCardSaved, KindChargeFailed), which
// are no ledger entries.
type Payment struct {
	// Kind is what to do: ledger.KindTopup (credit a payment: a
	// checkout's, or an automatic top-up's charge), ledger.KindRefund,
	// ledger.KindDispute (reverse), ledger.KindDisputeWon or
	// ledger.KindDisputeLost (close a dispute); KindCardSaved (keep the
	// card of CardFromSetup(SetupIntent)) or KindChargeFailed (an
	// automatic top-up's charge failed: credit nothing).
	Kind string
	// Reference identifies the change across deliveries of its
	// notifications: "stripe:" and the Checkout Session id for a top-up
	// or a saved card; "stripe:" and the PaymentIntent id for an
	// automatic top-up; "stripe:charge_failed:" and the PaymentIntent id
	// for its failure; "stripe:refund:" the charge and its total refunded;
	// "stripe:dispute:" and the dispute id.
	Reference string
	// AccountID is a top-up's, a saved card's or a failed charge's
	// account; a reversal's is its top-up's, found by PaymentIntent.
	AccountID string
	// Amount is a top-up's amount, the total refunded of the payment so far
	// (a refund), the disputed amount, or a failed charge's amount.
	Amount   ledger.Money
	Currency string
	// PaymentIntent is the payment a top-up was paid by, the one a
	// reversal reverses, or the failed charge ("stripe:pi_…").
	PaymentIntent string
	// Dispute is the Reference of the dispute a dispute's outcome closes.
	Dispute string
	// Describe is the entry's reason, for the account's history.
	Describe string
	// AutoTopUp is the ChargeOptions.IdempotencyKey of an automatic
	// top-up's charge, on its top-up and on its failure.
	AutoTopUp string
	// SetupIntent and Customer are the provider's ids ("seti_…",
	// "cus_…") of a saved card's setup, for CardFromSetup, and of the
	// customer it belongs to (KindCardSaved).
	SetupIntent string
	Customer    string
	// FailureCode is why a charge failed (KindChargeFailed): the
	// provider's code, as DeclineError.Code; FailureMessage is its
	// explanation, fit to show the customer.
	FailureCode    string
	FailureMessage string
	// NeedsAuthentication is a charge that failed because the card's
	// bank asks the customer to authenticate it, as
	// DeclineError.NeedsAuthentication.
	NeedsAuthentication bool
}

// Provider is a payment provider.
type Provider interface {
	// Name names the provider ("stripe").
	Name() string
	// Currency is the ISO currency code of the top-ups, lower case.
	Currency() string
	// Minimum is the smallest top-up.
	Minimum() ledger.Money
	// CheckoutOrigin is the origin of the provider's hosted checkout
	// pages ("https://checkout.stripe.com"), where customers are sent.
	CheckoutOrigin() string
	// StartCheckout starts a checkout of amount for the account.
	StartCheckout(ctx context.Context, o CheckoutOptions) (Checkout, error)
	// ParsePayment verifies a notification's signature and reads it:
	// ok is false for a notification that changes nothing (another event,
	// a payment not yet settled). A bad signature is ErrBadSignature.
	ParsePayment(payload []byte, header http.Header) (p Payment, ok bool, err error)
}

// CheckoutOptions is what a checkout is started with.
type CheckoutOptions struct {
	AccountID  string
	Email      string
	Amount     ledger.Money
	SuccessURL string
	CancelURL  string
}

// Errors of the providers.
var (
	ErrBadSignature = errors.New("payments: the notification's signature does not verify")
	ErrAmount       = errors.New("payments: the amount is below the minimum or not a whole number of the currency's smallest unit")
)
