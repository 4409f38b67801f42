package gateway

import (
	"context"
	"fmt"

	"github.com/modelgate/modelgate/accounts"
	"github.com/modelgate/modelgate/ledger"
)

// An account's alerts and automatic top-up as the customer (the console)
// and the operator (the admin API) set them: both go through the App
// methods below, which check what is set in the same words and write it
// to the ledger. The ledger's setters tell the running alerts watcher
// (OnChange, "alerts:ID"), and other instances through Redis, so that it
// reads the account's settings again at its next look.

// SetAlerts checks and sets the account's thresholds, mail and webhook
// URL (ledger.Alerts.Check: bad input is an *accounts.InvalidError).
func (a *App) SetAlerts(ctx context.Context, accountID string, al ledger.Alerts) error {
	if err := al.Check(); err != nil {
		return &accounts.InvalidError{Msg: err.Error()}
	}
	return a.store.SetAlerts(ctx, accountID, al)
}

// RotateWebhookSecret makes the account a new webhook signing secret and
// returns it; it is shown this once.
func (a *App) RotateWebhookSecret(ctx context.Context, accountID string) (string, error) {
	return a.store.RotateWebhookSecret(ctx, accountID)
}

// AutoTopupSettings is an automatic top-up as it is set: on or off, and
// when the balance falls below Below, add Amount, at most MonthMax in a
// calendar month (UTC).
type AutoTopupSettings struct {
	On                      bool
	Below, Amount, MonthMax ledger.Money
}

// SetAutoTopup checks and sets the account's automatic top-up. Amounts that cannot work (negative; when on, a zero
// threshold, an amount below the payment provider's minimum, a monthly
// maximum below the amount, no payment provider) are an
// *accounts.InvalidError; turning it on without a saved card is
// ledger.ErrNoCard.
func (a *App) SetAutoTopup(ctx context.Context, accountID string, s AutoTopupSettings) error {
	if err := a.checkAutoTopup(s); err != nil {
		return err
	}
	return a.store.SetAutoTopup(ctx, accountID, s.On, s.Below, s.Amount, s.MonthMax)
}

// checkAutoTopup refuses the settings the ledger or the payment provider
// would, in words for a person.
func (a *App) checkAutoTopup(s AutoTopupSettings) error {
	invalid := func(format string, args ...any) error {
		return &accounts.InvalidError{Msg: fmt.Sprintf(format, args...)}
	}
	if s.Below < 0 || s.Amount < 0 || s.MonthMax < 0 {
		return invalid("automatic top-up amounts must not be negative")
	}
	if !s.On {
		return nil
	}
	if a.payments == nil {
		return invalid("automatic top-up needs a payment provider, and this gateway has none")
	}
	if s.Below <= 0 {
		return invalid("automatic top-up needs a balance to fall below, above zero")
	}
	if least := a.payments.Minimum(); s.Amount < least || s.Amount <= 0 {
		return invalid("the amount added must be at least %s %s, the payment provider's minimum", least.Rounded(), a.Currency)
	}
	if s.MonthMax < s.Amount {
		return invalid("the most added in a month must be at least the amount added (%s)", s.Amount.Rounded())
	}
	return nil
}
