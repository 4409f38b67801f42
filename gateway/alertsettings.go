package gateway

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/modelgate/modelgate/accounts"
	"github.com/modelgate/modelgate/ledger"
)

// An account's alerts and automatic top-up as the customer (the console)
// and the operator (the admin API) set them: both go through the App
// methods below, which check what is set in the same words, write it to
// the ledger, and tell the alerts' watcher, so that it reads the
// account's settings again at once rather than at its next refresh.

// alertsHooks holds, per running App, what AlertsChanged calls (the
// alerts watcher's Invalidate). It is kept beside the App rather than in
// it so that the alerts engine sets it from its own wiring
// (SetAlertsHook) when it provisions, and removes it in its cleanup.
var alertsHooks sync.Map // *App → func(accountID string)

// SetAlertsHook sets what AlertsChanged calls for this app; nil removes
// it (at cleanup, so that an old config is forgotten).
func (a *App) SetAlertsHook(f func(accountID string)) {
	if f == nil {
		alertsHooks.Delete(a)
		return
	}
	alertsHooks.Store(a, f)
}

// AlertsChanged tells the alerts watcher, when one runs, that the
// account's alert settings changed, so that it reloads them. It does not
// block.
func (a *App) AlertsChanged(accountID string) {
	if f, ok := alertsHooks.Load(a); ok {
		f.(func(string))(accountID)
	}
}

// SetAlerts checks and sets the account's thresholds, mail and webhook
// URL (ledger.Alerts.Check: bad input is an *accounts.InvalidError) and
// tells the watcher.
func (a *App) SetAlerts(ctx context.Context, accountID string, al ledger.Alerts) error {
	if err := al.Check(); err != nil {
		return &accounts.InvalidError{Msg: err.Error()}
	}
	if err := a.store.SetAlerts(ctx, accountID, al); err != nil {
		return err
	}
	a.AlertsChanged(accountID)
	return nil
}

// RotateWebhookSecret makes the account a new webhook signing secret,
// tells the watcher, and returns the secret, which is shown this once.
func (a *App) RotateWebhookSecret(ctx context.Context, accountID string) (string, error) {
	secret, err := a.store.RotateWebhookSecret(ctx, accountID)
	if err != nil {
		return "", err
	}
	a.AlertsChanged(accountID)
	return secret, nil
}

// AutoTopupSettings is an automatic top-up as it is set: on or off, and
// when the balance falls below Below, add Amount, at most MonthMax in a
// calendar month (UTC).
type AutoTopupSettings struct {
	On                      bool
	Below, Amount, MonthMax ledger.Money
}

// SetAutoTopup checks and sets the account's automatic top-up and tells
// the watcher. Amounts that cannot work (negative; when on, a zero
// threshold, an amount below the payment provider's minimum, a monthly
// maximum below the amount, no payment provider) are an
// *accounts.InvalidError; turning it on without a saved card is
// ledger.ErrNoCard.
func (a *App) SetAutoTopup(ctx context.Context, accountID string, s AutoTopupSettings) error {
	if err := a.checkAutoTopup(s); err != nil {
		return err
	}
	if err := a.store.SetAutoTopup(ctx, accountID, s.On, s.Below, s.Amount, s.MonthMax); err != nil {
		return err
	}
	a.AlertsChanged(accountID)
	return nil
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

// ErrCardSetupUnavailable is a card that cannot be saved: the payment
// provider takes no cards for later charges here.
var ErrCardSetupUnavailable = errors.New("saving a card is not available")

// StartCardSetup starts saving a card for the account's automatic
// top-ups with the payment provider, and returns where to send the
// customer (a page on the provider's CheckoutOrigin); the provider sends
// them back to successURL or cancelURL, and its signed notification saves
// the card. Without a way to save cards it is ErrCardSetupUnavailable.
func (a *App) StartCardSetup(_ context.Context, _, _, _, _ string) (redirectURL string, err error) {
	return "", ErrCardSetupUnavailable
}
