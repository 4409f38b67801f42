package gateway

import (
	"context"
	"errors"
	"net/http"

	"go.uber.org/zap"

	"github.com/modelgate/modelgate/alerts"
	"github.com/modelgate/modelgate/ledger"
	"github.com/modelgate/modelgate/payments"
)

// Automatic top-ups with the payment provider: the customer saves a card
// (StartCardSetup, then the provider's signed notification, cardNotice),
// the alerts worker charges it once per crossing (cardCharger), and the
// provider's notification of the charge credits it (servePaymentWebhook)
// or reports it failed (cardNotice).

// ErrCardSetupUnavailable is a card that cannot be saved: no payment
// provider, or one that keeps no cards for later charges.
var ErrCardSetupUnavailable = errors.New("saving a card is not available")

// StartCardSetup starts saving a card for the account's automatic
// top-ups with the payment provider, and returns where to send the
// customer (a page on the provider's CheckoutOrigin); the provider sends
// them back to successURL or cancelURL, and its signed notification saves
// the card. A card saved before keeps its customer at the provider.
func (a *App) StartCardSetup(ctx context.Context, accountID, email, successURL, cancelURL string) (redirectURL string, err error) {
	cp, ok := a.payments.(payments.CardProvider)
	if !ok {
		return "", ErrCardSetupUnavailable
	}
	st, err := a.store.AlertSettingsOf(ctx, accountID)
	if err != nil {
		return "", err
	}
	co, err := cp.StartCardSetup(ctx, payments.SetupOptions{AccountID: accountID, Email: email,
		Customer: st.AutoTopup.Card.Customer, SuccessURL: successURL, CancelURL: cancelURL})
	if err != nil {
		return "", err
	}
	return co.URL, nil
}

// cardCharger charges automatic top-ups to the saved card through a
// payment provider that keeps cards (alerts.Charger).
type cardCharger struct{ p payments.Provider }

// ChargeTopup makes the one charge of the top-up idempotencyKey names.
func (c cardCharger) ChargeTopup(ctx context.Context, accountID string, card ledger.SavedCard, amount ledger.Money, idempotencyKey string) (string, error) {
	cp, ok := c.p.(payments.CardProvider)
	if !ok {
		return "", ErrCardSetupUnavailable
	}
	ch, err := cp.ChargeSaved(ctx, payments.ChargeOptions{AccountID: accountID, Amount: amount, IdempotencyKey: idempotencyKey,
		Card: payments.Card{Customer: card.Customer, PaymentMethod: card.PaymentMethod, Brand: card.Brand, Last4: card.Last4}})
	var dec *payments.DeclineError
	if errors.As(err, &dec) {
		return "", &alerts.DeclineError{Code: dec.Code, Message: dec.Message, NeedsAuthentication: dec.NeedsAuthentication}
	}
	if err != nil {
		return "", err
	}
	return ch.ID, nil
}

// cardNotice handles the provider's news of saved cards and their
// charges: a card saved through StartCardSetup is kept for the account
// (in place of an earlier one); an automatic top-up's charge that failed
// after it was made turns automatic top-up off and tells the customer,
// once. A failure to record either is a 500, so that the provider
// delivers it again.
func (h *APIHandler) cardNotice(ctx context.Context, pay payments.Payment, answer func(int, string)) {
	var err error
	what := "card saved"
	switch pay.Kind {
	case payments.KindCardSaved:
		cp, ok := h.app.payments.(payments.CardProvider)
		if !ok {
			answer(http.StatusOK, "ignored")
			return
		}
		var card payments.Card
		if card, err = cp.CardFromSetup(ctx, pay.SetupIntent); err == nil {
			err = h.app.store.SaveCard(ctx, pay.AccountID, ledger.SavedCard{Customer: card.Customer,
				PaymentMethod: card.PaymentMethod, Brand: card.Brand, Last4: card.Last4})
		}
	case payments.KindChargeFailed:
		what = "automatic top-up turned off"
		run := h.app.alerts
		if run == nil {
			answer(http.StatusServiceUnavailable, "not running; deliver again")
			return
		}
		err = run.worker.ChargeFailed(ctx, pay.AccountID, pay.AutoTopUp, pay.Amount, pay.FailureCode, pay.FailureMessage,
			pay.NeedsAuthentication)
	}
	switch {
	case errors.Is(err, ledger.ErrNotFound):
		h.logger.Error("card notice for an unknown account", zap.String("reference", pay.Reference), zap.String("account", pay.AccountID))
		answer(http.StatusOK, "unknown account")
	case err != nil:
		h.logger.Error("recording a card notice failed", zap.String("reference", pay.Reference), zap.Error(err))
		answer(http.StatusInternalServerError, "not recorded; deliver again")
	default:
		h.logger.Info(what, zap.String("reference", pay.Reference), zap.String("account", pay.AccountID))
		answer(http.StatusOK, what)
	}
}
