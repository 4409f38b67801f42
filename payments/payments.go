// Package payments takes balance top-ups through a payment provider: it
// starts a hosted checkout for an account, and reads the provider's signed
// notifications of completed payments into credits. Stripe Checkout is
// built in. It is plain Go: crediting the ledger is the caller's job, with
// Payment.Reference as the idempotency key so that a notification delivered
// twice credits once.
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
}

// Payment is a completed payment, to be credited, or a reversal of one:
// a refund, a dispute, a dispute's outcome.
type Payment struct {
	// Kind is what to do: ledger.KindTopup (credit a payment),
	// ledger.KindRefund, ledger.KindDispute (reverse), ledger.KindDisputeWon
	// or ledger.KindDisputeLost (close a dispute).
	Kind string
	// Reference identifies the change across deliveries of its
	// notifications: "stripe:" and the Checkout Session id for a top-up;
	// "stripe:refund:" the charge and its total refunded; "stripe:dispute:"
	// and the dispute id.
	Reference string
	// AccountID is a top-up's account; a reversal's is its top-up's,
	// found by PaymentIntent.
	AccountID string
	// Amount is a top-up's amount, the total refunded of the payment so far
	// (a refund), or the disputed amount.
	Amount   ledger.Money
	Currency string
	// PaymentIntent is the payment a top-up was paid by, or the one a
	// reversal reverses ("stripe:pi_…").
	PaymentIntent string
	// Dispute is the Reference of the dispute a dispute's outcome closes.
	Dispute string
	// Describe is the entry's reason, for the account's history.
	Describe string
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
