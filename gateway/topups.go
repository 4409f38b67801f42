package gateway

import (
	"cmp"
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
	"time"

	"go.uber.org/zap"

	"github.com/modelgate/modelgate/accounts"
	"github.com/modelgate/modelgate/ledger"
	"github.com/modelgate/modelgate/payments"
	"github.com/modelgate/modelgate/relay"
)

// maxWebhookBody bounds a payment notification.
const maxWebhookBody = 1 << 20

// servePaymentWebhook credits a completed payment the provider notifies,
// and reverses a refunded or disputed one (reversePayment), exactly once:
// the entry's unique reference is the payment's id, in the same
// transaction as the balance change, so a redelivered or concurrently
// delivered notification changes nothing more. A bad signature
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
	switch pay.Kind {
	case payments.KindCardSaved, payments.KindChargeFailed:
		h.cardNotice(ctx, pay, answer)
		return
	case ledger.KindTopup:
	default:
		h.reversePayment(ctx, pay, answer)
		return
	}
	balance, err := h.app.accounts.CreditTopUp(ctx, accounts.TopUp{AccountID: pay.AccountID, Amount: pay.Amount,
		Reference: pay.Reference, Reason: pay.Describe, Payment: pay.PaymentIntent})
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

// reversePayment applies a refund, a dispute or a dispute's outcome
// exactly once: the entry's unique reference is the refund's charge
// and total, or the dispute's id, in the same transaction as the balance
// change. What the balance does not cover is owed, and the account is
// suspended for debt until a payment covers it (docs/operations.md,
// "Refunds, disputes and debts"). A reversal of a payment the ledger holds
// no top-up of is logged and answered 200: a redelivery would not change
// it.
func (h *APIHandler) reversePayment(ctx context.Context, pay payments.Payment, answer func(int, string)) {
	res, err := h.app.accounts.ReversePayment(ctx, accounts.Reversal{Kind: pay.Kind, Amount: pay.Amount, Reference: pay.Reference,
		Reason: pay.Describe, Payment: pay.PaymentIntent, Dispute: pay.Dispute})
	fields := []zap.Field{zap.String("kind", pay.Kind), zap.String("reference", cmp.Or(pay.Reference, pay.Dispute)),
		zap.String("payment", pay.PaymentIntent)}
	switch {
	case errors.Is(err, ledger.ErrDuplicate):
		answer(http.StatusOK, "already recorded")
	case errors.Is(err, ledger.ErrNotFound):
		h.logger.Error("payment reversal for no known top-up or dispute", append(fields, zap.Error(err))...)
		answer(http.StatusOK, "no such top-up")
	case accounts.IsInvalid(err):
		// not a reversal: a redelivery would not change it
		h.logger.Error("payment notification is no reversal", append(fields, zap.Error(err))...)
		answer(http.StatusOK, "not recorded")
	case err != nil:
		h.logger.Error("recording a payment reversal failed", append(fields, zap.Error(err))...)
		answer(http.StatusInternalServerError, "not recorded; deliver again")
	default:
		fields = append(fields, zap.String("account", res.Entries[0].AccountID), zap.String("amount", res.Entries[0].Amount.String()),
			zap.String("owed", res.Owed.String()), zap.String("balance", res.Balance.String()), zap.String("state", string(res.State)))
		if res.Owed > 0 {
			h.logger.Warn("payment reversed beyond the balance: the account owes the rest and is suspended", fields...)
		} else {
			h.logger.Info("payment reversal recorded", fields...)
		}
		answer(http.StatusOK, "recorded")
	}
}

// creditTimeout bounds the wait for the ledger to credit a payment.
const creditTimeout = 30 * time.Second
