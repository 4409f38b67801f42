package gateway

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
	"time"

	"go.uber.org/zap"

	"github.com/modelgate/modelgate/ledger"
	"github.com/modelgate/modelgate/payments"
	"github.com/modelgate/modelgate/relay"
)

// maxWebhookBody bounds a payment notification.
const maxWebhookBody = 1 << 20

// servePaymentWebhook credits a completed payment the provider notifies,
// exactly once: the credit row's unique reference is the payment's id, in
// the same transaction as the balance change, so a redelivered or
// concurrently delivered notification credits nothing more. A bad signature
// is a 400 and credits nothing; a failure to write the credit is a 500, so
// that the provider delivers it again.
func (h *APIHandler) servePaymentWebhook(w http.ResponseWriter, r *http.Request) {
	answer := func(status int, msg string) {
		relay.WriteJSON(w, status, []byte(`{"received":`+strconv.FormatBool(status == http.StatusOK)+`,"message":"`+msg+`"}`))
	}
	p := h.app.payments
	if p == nil {
		answer(http.StatusNotFound, "no payment provider is configured")
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxWebhookBody+1))
	if err != nil || len(body) > maxWebhookBody {
		answer(http.StatusBadRequest, "unreadable body")
		return
	}
	pay, ok, err := p.ParsePayment(body, r.Header)
	switch {
	case errors.Is(err, payments.ErrBadSignature):
		h.logger.Warn("payment notification with a bad signature", zap.String("remote", r.RemoteAddr))
		answer(http.StatusBadRequest, "bad signature")
		return
	case err != nil:
		// signed, but not something to credit (another currency…): the
		// operator must look; a redelivery would not change it
		h.logger.Error("payment notification not credited", zap.Error(err))
		answer(http.StatusOK, "not credited")
		return
	case !ok:
		answer(http.StatusOK, "ignored")
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), creditTimeout)
	defer cancel()
	balance, err := h.app.store.Credit(ctx, ledger.CreditRequest{AccountID: pay.AccountID, Amount: pay.Amount,
		Reference: pay.Reference, Reason: pay.Describe})
	switch {
	case errors.Is(err, ledger.ErrDuplicate):
		answer(http.StatusOK, "already credited")
	case errors.Is(err, ledger.ErrNotFound):
		h.logger.Error("payment for an unknown account", zap.String("reference", pay.Reference), zap.String("account", pay.AccountID))
		answer(http.StatusOK, "unknown account")
	case err != nil:
		h.logger.Error("crediting a payment failed", zap.String("reference", pay.Reference), zap.Error(err))
		answer(http.StatusInternalServerError, "not recorded; deliver again")
	default:
		h.logger.Info("payment credited", zap.String("reference", pay.Reference), zap.String("account", pay.AccountID),
			zap.String("amount", pay.Amount.String()), zap.String("balance", balance.String()))
		answer(http.StatusOK, "credited")
	}
}

// creditTimeout bounds the wait for the ledger to credit a payment.
const creditTimeout = 30 * time.Second
