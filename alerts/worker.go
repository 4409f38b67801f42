package alerts

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/modelgate/modelgate/ledger"
	"github.com/modelgate/modelgate/mailer"
)

// Charger charges an automatic top-up to a saved card, off-session. The
// idempotency key is the same on every try of one top-up, so that it is
// charged once whoever tries it and however often. A declined card (or one
// that needs the customer's authentication) is an error implementing
// Decline; any other error is tried again later with the same key. The
// money is credited later, when the payment provider confirms the payment,
// not by the Charger.
type Charger interface {
	ChargeTopup(ctx context.Context, accountID string, card ledger.SavedCard, amount ledger.Money, idempotencyKey string) (paymentRef string, err error)
}

// Decline is the error of a charge the card's bank refused, or that needs
// the customer's authentication: automatic top-up is then turned off and
// the customer told.
type Decline interface {
	Decline() (code, message string, needsAuthentication bool)
}

// DeclineError is a ready Decline for a Charger's adapter.
type DeclineError struct {
	Code, Message       string
	NeedsAuthentication bool
}

// Error says what was declined.
func (e *DeclineError) Error() string {
	return "alerts: the card was declined (" + e.Code + "): " + e.Message
}

// Decline implements Decline.
func (e *DeclineError) Decline() (string, string, bool) {
	return e.Code, e.Message, e.NeedsAuthentication
}

// chargeTimeout bounds one try of a top-up's charge, well within a lease.
const chargeTimeout = 30 * time.Second

// retryFactors are the retries' delays in units of the retry base (10 s by
// default: 10 s, 30 s, 2 min, 10 min, 30 min, 1 h, 3 h, 6 h); a delivery
// whose last try failed after them all failed for good.
var retryFactors = []int64{1, 3, 12, 60, 180, 360, 1080, 2160}

// RetryDelay is how long after its attempt-th failed try (1 for the first)
// a delivery is tried again, with base the first delay; ok is false when
// it is not tried again.
func RetryDelay(base time.Duration, attempt int) (d time.Duration, ok bool) {
	if attempt < 1 || attempt > len(retryFactors) {
		return 0, false
	}
	return time.Duration(retryFactors[attempt-1]) * base, true
}

// Worker delivers the outbox's due deliveries: it claims each under a
// lease (any instance's worker may claim it; one does), tries it, and
// finishes it.
type Worker struct {
	cfg    Config
	client *http.Client
	wake   chan struct{}
}

// NewWorker returns a worker; Run starts it.
func NewWorker(cfg Config) *Worker {
	cfg = cfg.withDefaults()
	return &Worker{cfg: cfg, client: webhookClient(cfg.AllowPrivateWebhooks), wake: make(chan struct{}, 1)}
}

// Wake has the worker look for due deliveries now rather than at its
// next poll. It never blocks.
func (w *Worker) Wake() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// Run tries due deliveries, Workers at once, until ctx ends; it returns
// when every try under way ended. One loop claims them (so that an idle
// instance costs the ledger one claim every Interval, and at once when
// woken) and hands each to a goroutine of its own.
func (w *Worker) Run(ctx context.Context) {
	var wg sync.WaitGroup
	defer func() {
		wg.Wait()
		w.client.CloseIdleConnections()
	}()
	slots := make(chan struct{}, w.cfg.Workers)
	for {
		for ctx.Err() == nil {
			select {
			case slots <- struct{}{}:
			case <-ctx.Done():
				return
			}
			d, ok, err := w.cfg.Store.ClaimDelivery(ctx, w.cfg.Instance, w.cfg.Now(), w.cfg.Lease)
			if err != nil || !ok {
				<-slots
				if err != nil && ctx.Err() == nil {
					w.cfg.Logger.Warn("alerts: could not claim a delivery", zap.Error(err))
				}
				break
			}
			wg.Go(func() {
				defer func() { <-slots }()
				w.deliver(ctx, d)
			})
		}
		t := time.NewTimer(w.cfg.Interval)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-w.wake:
		case <-t.C:
		}
		t.Stop()
	}
}

// RunOnce claims one due delivery and tries it; tried is false when none
// was due.
func (w *Worker) RunOnce(ctx context.Context) (tried bool, err error) {
	d, ok, err := w.cfg.Store.ClaimDelivery(ctx, w.cfg.Instance, w.cfg.Now(), w.cfg.Lease)
	if err != nil || !ok {
		return false, err
	}
	w.deliver(ctx, d)
	return true, nil
}

// deliver tries a claimed delivery and finishes it: done, due again
// after its back-off, or failed for good.
func (w *Worker) deliver(ctx context.Context, d ledger.Delivery) {
	o := w.try(ctx, d)
	outcome := "done"
	if !o.Done {
		outcome = "failed"
		if delay, ok := RetryDelay(w.cfg.RetryBase, d.Attempts); ok && !o.final {
			o.RetryAt = w.cfg.Now().Add(delay)
			outcome = "retry"
		}
	}
	// finished even when ctx ended: the try happened
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := w.cfg.Store.FinishDelivery(fctx, d.ID, w.cfg.Instance, w.cfg.Now(), o.DeliveryOutcome); err != nil {
		w.cfg.Logger.Warn("alerts: could not finish a delivery", zap.String("delivery", d.ID), zap.Error(err))
		return
	}
	if o.Done {
		w.cfg.Logger.Info("alerts: delivered", zap.String("delivery", d.ID), zap.String("channel", d.Channel),
			zap.String("account", d.AccountID), zap.String("result", o.Result))
	} else {
		w.cfg.Logger.Warn("alerts: delivery failed", zap.String("delivery", d.ID), zap.String("channel", d.Channel),
			zap.String("account", d.AccountID), zap.Int("attempt", d.Attempts), zap.String("error", o.Error),
			zap.Bool("again", !o.RetryAt.IsZero()))
	}
	if w.cfg.OnDelivery != nil {
		w.cfg.OnDelivery(d.Channel, outcome)
	}
}

// outcome is a try's outcome; final: failed for good, never retried.
type outcome struct {
	ledger.DeliveryOutcome
	final bool
}

// done, retry and fail are the outcomes of a try.
func done(result string) outcome {
	return outcome{DeliveryOutcome: ledger.DeliveryOutcome{Done: true, Result: result}}
}
func retry(err error) outcome {
	return outcome{DeliveryOutcome: ledger.DeliveryOutcome{Error: err.Error()}}
}
func fail(reason string) outcome {
	return outcome{DeliveryOutcome: ledger.DeliveryOutcome{Error: reason}, final: true}
}

// try makes one try of d.
func (w *Worker) try(ctx context.Context, d ledger.Delivery) outcome {
	switch d.Channel {
	case ledger.ChannelMail:
		return w.mail(ctx, d)
	case ledger.ChannelWebhook:
		return w.webhook(ctx, d)
	case ledger.ChannelTopup:
		return w.topup(ctx, d)
	}
	return fail("unknown channel " + d.Channel)
}

// mail sends the event's mail.
func (w *Worker) mail(ctx context.Context, d ledger.Delivery) outcome {
	if w.cfg.Mailer == nil {
		// another instance's configuration may have one
		return retry(errors.New("this instance has no smtp server configured"))
	}
	var ev Event
	if err := json.Unmarshal(d.Payload, &ev); err != nil {
		return fail("the event is not JSON: " + err.Error())
	}
	subject, text, err := mailText(w.cfg, ev)
	if err != nil {
		return fail(err.Error())
	}
	if err := w.cfg.Mailer.Send(ctx, mailer.Message{To: d.Target, Subject: subject, Text: text}); err != nil {
		return retry(err)
	}
	return done("sent")
}

// webhook POSTs the event to the URL, signed with the account's secret
// at the time of the try.
func (w *Worker) webhook(ctx context.Context, d ledger.Delivery) outcome {
	st, err := w.cfg.Store.AlertSettingsOf(ctx, d.AccountID)
	if err != nil {
		return retry(err)
	}
	if st.WebhookSecret == "" {
		return fail("the account has no webhook signing secret")
	}
	rctx, cancel := context.WithTimeout(ctx, WebhookTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodPost, d.Target, bytes.NewReader(d.Payload))
	if err != nil {
		return fail("the webhook URL does not parse")
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", UserAgent)
	req.Header.Set(HeaderWebhookID, d.ID)
	req.Header.Set(HeaderSignature, Sign(st.WebhookSecret, w.cfg.Now(), d.Payload))
	resp, err := w.client.Do(req)
	if err != nil {
		// without the URL, which may carry the customer's token in its
		// query: the error is logged and shown in the console
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		if errors.Is(err, ErrPrivateAddress) {
			return fail(err.Error())
		}
		return retry(err)
	}
	// a little of the body is read so that the connection can be reused
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	status := "HTTP " + strconv.Itoa(resp.StatusCode)
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		o := retry(errors.New("the receiver answered " + status))
		o.Result = status
		return o
	}
	return done(status)
}

// topup charges an automatic top-up.
func (w *Worker) topup(ctx context.Context, d ledger.Delivery) outcome {
	if w.cfg.Charger == nil {
		return fail("no payment provider is configured (the payments option), so automatic top-ups cannot be charged")
	}
	st, err := w.cfg.Store.AlertSettingsOf(ctx, d.AccountID)
	if err != nil {
		return retry(err)
	}
	t := st.AutoTopup
	if !t.On || !t.Card.Saved() {
		return fail("automatic top-up was turned off, or its card removed, before the charge was made")
	}
	cctx, cancel := context.WithTimeout(ctx, chargeTimeout)
	defer cancel()
	ref, err := w.cfg.Charger.ChargeTopup(cctx, d.AccountID, t.Card, d.Amount, d.ID)
	if err == nil {
		return done(ref)
	}
	var dec Decline
	if !errors.As(err, &dec) {
		return retry(err)
	}
	code, message, auth := dec.Decline()
	reason := declineReason(code, message, auth)
	if err := w.declined(ctx, st, d, code, message, auth, reason); err != nil {
		// tried again: the same key gets the same answer from the provider
		return retry(err)
	}
	return fail(reason)
}

// declineReason says why automatic top-up was turned off.
func declineReason(code, message string, auth bool) string {
	if auth {
		return fmt.Sprintf("the payment needs the customer's authentication (%s): %s", code, message)
	}
	return fmt.Sprintf("the card was declined (%s): %s", code, message)
}

// ChargeFailed handles an automatic top-up's charge that the payment
// provider reported failed after it was made (its signed notification):
// as a decline at the charge, the top-up's delivery is failed, automatic
// top-up is turned off and the customer told, once per charge however
// often the notification comes (the alert is the delivery's).
func (w *Worker) ChargeFailed(ctx context.Context, accountID, deliveryID string, amount ledger.Money, code, message string, auth bool) error {
	st, err := w.cfg.Store.AlertSettingsOf(ctx, accountID)
	if err != nil {
		return err
	}
	reason := declineReason(code, message, auth)
	if _, err := w.cfg.Store.FailTopup(ctx, deliveryID, reason, w.cfg.Now()); err != nil {
		return err
	}
	return w.declined(ctx, st, ledger.Delivery{ID: deliveryID, AccountID: accountID, Amount: amount}, code, message, auth, reason)
}

// declined tells the customer of a declined top-up and turns automatic
// top-up off.
func (w *Worker) declined(ctx context.Context, st ledger.AlertSettings, d ledger.Delivery, code, message string, auth bool, reason string) error {
	acc, err := w.cfg.Store.GetAccount(ctx, d.AccountID)
	if err != nil {
		return err
	}
	data := AutoTopupFailed{Amount: d.Amount, Currency: w.cfg.currencyCode(), Code: code, Message: message, NeedsAuthentication: auth}
	fired, err := fireEvent(ctx, w.cfg, st, acc, "autotopup_failed:"+d.ID, TypeAutoTopupFailed, reason, w.cfg.Now(), data)
	if err != nil {
		return err
	}
	if fired {
		w.Wake()
	}
	return w.cfg.Store.TurnOffAutoTopup(ctx, d.AccountID, reason)
}
