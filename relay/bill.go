package relay

import (
	"context"
	"errors"
	"net/http"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/modelgate/modelgate/formats"
	"github.com/modelgate/modelgate/formats/images"
	"github.com/modelgate/modelgate/ledger"
)

// The billing path, in one file (docs/billing.md). Every request that may
// make an upstream do work is billed through one Bill:
//
//	openBill  reserve a hold on the account, atomically, before any upstream call
//	SettleUsage | SettleCounted | SettleImages   debit what was used, with its usage row, exactly once
//	Release   give the hold back when nothing billable happened
//
// billedUsage decides "usage or estimate" for every way a call can end,
// whatever the route. Chat, Responses, messages, Gemini and images all bill
// this way; token counts hold nothing and bill nothing.

// Bill is the money side of one request: a hold taken before the upstream
// is called, then exactly one of a settle (the cost debited with its usage
// row) or Release (nothing debited). Its methods are safe to call from the
// goroutine that streams the answer and the one that ends the call.
type Bill struct {
	*request // the request it bills
	hold     *ledger.Hold
	done     atomic.Bool // settled or released
	// tierBps is the discount of the plan's volume tier in force when the
	// hold was taken, which applies to the whole request.
	tierBps int
	// charged is what the settle debited, once it is durable.
	charged atomic.Int64
}

// openBill reserves the hold of rq, sized by q (takeHold). A balance that
// does not cover q.least is the client's 403 (in its format, by the
// caller).
func (s *Service) openBill(rq *request, q quote) (*Bill, *formats.Error) {
	tiered := rq.principal.Plan != nil && len(rq.principal.Plan.Tiers) > 0
	// the tier reads the month's spend: counted on every instance; a
	// capped key's cap bounds the hold too
	hold, err := s.Store.ReserveForKey(rq.principal.Principal, q.least, q.most, tiered)
	if err != nil {
		var capped *ledger.KeyCapError
		if errors.As(err, &capped) {
			if f := s.OnKeyCapRefused; f != nil {
				f(rq.principal.AccountID, capped.KeyID)
			}
			return nil, &formats.Error{Kind: formats.KindInsufficientQuota, Message: keyCapMessage(capped, q.short)}
		}
		if errors.Is(err, ledger.ErrInsufficientFunds) {
			return nil, &formats.Error{Kind: formats.KindInsufficientQuota,
				Message: "Your balance does not cover this request (" + q.short +
					" at this model's price). Top up your balance and try again."}
		}
		s.Logger.Error("reserving a hold", zap.String("account", rq.principal.AccountID), zap.Error(err))
		if errors.Is(err, ledger.ErrWriteFailed) {
			// a shared ledger out of reach: nothing was held or sent
			return nil, &formats.Error{Kind: formats.KindOverloaded, RetryAfter: 1,
				Message: "The gateway cannot reach its ledger right now; nothing was charged. Try again shortly."}
		}
		return nil, formats.NewError(formats.KindInternal, "The gateway could not reserve funds for this request; try again.")
	}
	tier := 0
	if tiered {
		// the month's spend is read only for a plan with tiers
		tier = rq.principal.Plan.TierBps(hold.MonthSpend())
	}
	return &Bill{request: rq, hold: hold, tierBps: tier}, nil
}

// keyCapMessage is the refusal of a request that its key's spend cap does
// not cover: the cap, its period and when it starts afresh.
func keyCapMessage(e *ledger.KeyCapError, short string) string {
	msg := "This API key's spend cap of " + e.Cap.String()
	if e.Period != ledger.PeriodNever {
		msg += " per " + string(e.Period)
	}
	msg += " does not cover this request (" + short + " at this model's price)"
	if e.ResetsAt.IsZero() {
		return msg + "; the cap does not reset. Raise the key's cap or use another key."
	}
	return msg + "; it resets at " + e.ResetsAt.UTC().Format(time.RFC3339) + ". Raise the key's cap or use another key."
}

// Charged is what the bill's settle debited (0 before it is durable): the
// amount an answer's X-Modelgate-Cost header and usage.cost say.
func (b *Bill) Charged() ledger.Money { return ledger.Money(b.charged.Load()) }

// setCostHeader says on a whole answer, once its bill is settled, what it
// cost: exactly the amount debited, in the ledger's currency (docs/api.md,
// "What an answer cost"). X-Modelgate-Request-Id went on when the hold was
// taken (takeHold).
func (b *Bill) setCostHeader(h http.Header) {
	h.Set("X-Modelgate-Cost", b.Charged().String())
}

// Held is the amount the bill holds.
func (b *Bill) Held() ledger.Money { return b.hold.Amount() }

// Release gives the hold back unless the bill was settled; it is a no-op
// after a settle or a release.
func (b *Bill) Release() {
	if b != nil && b.done.CompareAndSwap(false, true) {
		b.hold.Release()
	}
}

// End says how a call ended, for its usage row (the request names the
// attempt that answered: its route, key and time to first token).
type End struct {
	Status  int    // the HTTP status the client got (statusClientClosed: none)
	Outcome string // ok, client_closed, upstream_cut, upstream_error
	// Collect marks a bill that must be collected even when the ledger is
	// slow to take it: a delivered answer, or one the client left after
	// the upstream made it.
	Collect bool
}

// The ends of a call.
const (
	outcomeOK            = "ok"
	outcomeClientClosed  = "client_closed"
	outcomeUpstreamCut   = "upstream_cut"
	outcomeUpstreamError = "upstream_error"
)

// statusClientClosed is the status of a usage row whose client left before
// it got any answer (nginx's 499).
const statusClientClosed = 499

// billedUsage decides what a call is billed, for every way a call can end
// (docs/billing.md, "When a usage figure is final"): the upstream's own
// count when it is final; otherwise at least estimatedOutput, the estimate
// of every piece of output read from the upstream (tokens), with the input
// the upstream reported on the way (Anthropic's message_start) or else the
// request's estimate, marked "estimated". A placeholder such as
// message_start's output of 1 token is never a bill. Streams, whole answers
// and images are all billed through it.
func billedUsage(u formats.Usage, final bool, estimatedOutput, inputEstimate int64) (formats.Usage, string) {
	if final {
		return u, "upstream"
	}
	if u.Input <= 0 {
		u.Input = inputEstimate
	}
	u.Output = max(u.Output, estimatedOutput)
	return u, "estimated"
}

// SettleUsage bills a call's usage: the upstream's figures when final, an
// estimate of what was read otherwise (billedUsage, at 4 bytes a token of
// outputBytes), plus the fees of its hosted-tool uses; once. It returns
// when the debit is durable (see settle for a ledger that cannot take it).
func (b *Bill) SettleUsage(u formats.Usage, final bool, outputBytes int64, hosted ledger.HostedUses, hostedCost ledger.Money, e End) error {
	u, source := billedUsage(u, final, formats.EstimateTokens(outputBytes), b.inputEstimate)
	return b.settleTokens(u, source, hosted, hostedCost, b.Held(), e)
}

// SettleCounted bills a stream the gateway stopped when its client hung up
// (docs/billing.md, "When the client hangs up"): u.Output is the output it
// counted with the in-flight margin; the input is what the upstream
// reported, else the request's own count. The row says "counted".
func (b *Bill) SettleCounted(u formats.Usage, hosted ledger.HostedUses, hostedCost ledger.Money, e End) error {
	u, _ = billedUsage(u, false, 0, b.inputEstimate) // the input rule of any bill not final
	return b.settleTokens(u, usageCounted, hosted, hostedCost, b.Held(), e)
}

// SettleImages bills an images answer for req: its token usage when the
// upstream reports it; else, when the model has a per-image price, that
// price for each image; else the estimate of its images (the output tokens
// of their size and quality) and of its prompt (billedUsage). An image
// served is never billed nothing: a usage that does not price is billed
// each image (at least one) at its bound.
func (b *Bill) SettleImages(ans images.Answer, req *images.Request, e End) error {
	m := b.model
	if !ans.HasUsage && m.ImagePrice > 0 {
		return b.settle(b.record(ledger.Tokens{}, mulMoney(int64(ans.Images), m.ImagePrice), usageImagePrice, e), e.Collect)
	}
	u, source := billedUsage(ans.Usage, ans.HasUsage, int64(ans.Images)*images.OutputTokens(req.Size, req.Quality),
		formats.EstimateTokens(int64(len(req.Prompt))))
	unpriced := mulMoney(int64(max(ans.Images, 1)), m.perImage(req.Size, req.Quality))
	return b.settleTokens(u, source, ledger.HostedUses{}, 0, unpriced, e)
}

// usageImagePrice is the usage source of an images bill at the model's
// per-image price.
const usageImagePrice = "image_price"

// usageCounted is the usage source of a bill whose output the gateway
// counted itself, from the text the upstream sent.
const usageCounted = "counted"

// settleTokens prices u and bills it with its hosted-tool fees, once. Usage
// with impossible counts (cache above input, overflow) is priced with its
// input uncached, the dearer reading; usage that still does not price (a
// count so large its cost overflows) is billed unpriced: the whole hold for
// a generation, which its output cap bounds, the per-image price for images.
// Never nothing: an upstream's absurd count is no free request.
func (b *Bill) settleTokens(u formats.Usage, source string, hosted ledger.HostedUses, hostedCost, unpriced ledger.Money, e End) error {
	tokens := ledger.Tokens{Input: u.Input, Output: u.Output, CacheRead: u.CacheRead, CacheWrite: u.CacheWrite, Reasoning: u.Reasoning}
	cost, err := b.model.Price.Cost(tokens)
	if err != nil {
		b.logger.Error("usage does not price", zap.String("request_id", b.reqID), zap.Error(err))
		tokens.CacheRead, tokens.CacheWrite = 0, 0
		if cost, err = b.model.Price.Cost(tokens); err != nil {
			cost = unpriced
		}
	}
	rec := b.record(tokens, addMoney(cost, hostedCost), source, e)
	rec.Hosted, rec.HostedCost = hosted, hostedCost
	return b.settle(rec, e.Collect)
}

// record is the usage row of the bill, with cost before the discounts:
// the plan's and its volume tier's, added up and taken off in one
// rounding, down to the nano (docs/billing.md, "Plan discounts and volume tiers").
func (b *Bill) record(tokens ledger.Tokens, cost ledger.Money, source string, e End) *ledger.UsageRecord {
	discount := b.principal.Plan.DiscountBps
	charged := ledger.Discounted(cost, discount+b.tierBps)
	rec := &ledger.UsageRecord{
		RequestID:     b.reqID,
		AccountID:     b.principal.AccountID,
		KeyID:         b.principal.KeyID,
		Model:         b.model.ID,
		UpstreamKeyID: b.upstreamKeyID,
		ClientFormat:  b.format.String(),
		Stream:        b.stream,
		Tokens:        tokens,
		Cost:          charged,
		DiscountBps:   discount,
		TierBps:       b.tierBps,
		Discount:      cost - charged,
		UsageSource:   source,
		Status:        e.Status,
		Outcome:       e.Outcome,
		Latency:       time.Since(b.start),
		TTFT:          b.ttft,
	}
	if b.route != nil {
		rec.Provider, rec.UpstreamModel = b.route.Provider.Name, b.route.UpstreamModel
	}
	if rec.Status == 0 {
		rec.Status = http.StatusOK
	}
	return rec
}

// settle writes rec, once. When the ledger cannot take it yet, a collect
// bill keeps its hold and is retried in the background until the ledger
// takes it; any other is released and the error returned.
func (b *Bill) settle(rec *ledger.UsageRecord, collect bool) error {
	if !b.done.CompareAndSwap(false, true) {
		return nil
	}
	settle := b.svc.settleRecord
	if collect {
		settle = b.svc.collectRecord
	}
	if err := settle(b.logger, b.hold, rec); err != nil {
		return err
	}
	b.charged.Store(int64(rec.Charged))
	b.report.setSettled(rec)
	// checked here, not in Debugf: the fields (and the amount's text) are
	// built only when debug logging is on, not on every request
	if c := b.logger.Check(zapcore.DebugLevel, "settled"); c != nil {
		c.Write(zap.String("request_id", rec.RequestID),
			zap.String("key_id", rec.KeyID),
			zap.String("model", rec.Model),
			zap.String("upstream_key", rec.UpstreamKeyID),
			zap.Int64("input_tokens", rec.Tokens.Input),
			zap.Int64("output_tokens", rec.Tokens.Output),
			zap.String("charged", rec.Charged.String()),
			zap.String("outcome", rec.Outcome))
	}
	return nil
}

// billingFailed is what the client sees when its bill could not be written:
// an answer that cannot be billed is not delivered.
func billingFailed() *formats.Error {
	return formats.NewError(formats.KindInternal, "The gateway could not record this request's cost; nothing was charged. Try again.")
}

// billingDelayed ends a delivered stream whose bill the ledger could not
// take yet: the gateway keeps trying, so the client must not think it free.
func billingDelayed() *formats.Error {
	return formats.NewError(formats.KindInternal, "The gateway could not record this request's cost yet; it will be charged when the ledger is back.")
}

// Settling with the ledger. A settle the ledger cannot take for a reason
// that may pass (ledger.ErrWriteFailed: the database locked by another
// process, a full disk) keeps its hold reserved and is tried again: inline
// for a few seconds, then, for a bill that must be collected, in the
// background until the ledger takes it. The money stays held all the
// while, so the account cannot spend it twice.

// settleRetryInline is how long a settle is retried before the caller gets
// its answer; settleRetryMax caps the wait between background tries.
var (
	settleRetryInline = 5 * time.Second
	settleRetryFirst  = 50 * time.Millisecond
	settleRetryMax    = 30 * time.Second
)

// pendingSettles counts bills the ledger has not taken yet, in the whole
// process (they outlive a config reload).
var pendingSettles atomic.Int64

// settleRecord debits rec on hold and writes its usage row, returning when
// both are durable. If the ledger cannot take it within settleRetryInline,
// the hold is released and the error returned: for an answer that will not
// be delivered.
func (s *Service) settleRecord(logger *zap.Logger, hold *ledger.Hold, rec *ledger.UsageRecord) error {
	err := s.settleRetrying(logger, hold, rec, settleRetryInline)
	if errors.Is(err, ledger.ErrWriteFailed) {
		hold.Release()
	}
	return err
}

// collectRecord is settleRecord for a bill that must be collected (a
// delivered answer, or one whose client left after the upstream made it):
// if the ledger cannot take it within settleRetryInline, the hold stays
// reserved and a goroutine keeps trying until the ledger takes it or the
// store closes. The error says the debit is not durable yet.
func (s *Service) collectRecord(logger *zap.Logger, hold *ledger.Hold, rec *ledger.UsageRecord) error {
	err := s.settleRetrying(logger, hold, rec, settleRetryInline)
	if !errors.Is(err, ledger.ErrWriteFailed) {
		return err
	}
	pendingSettles.Add(1)
	logger.Error("the ledger cannot take a bill yet: holding it and retrying in the background",
		zap.String("request_id", rec.RequestID), zap.String("account", rec.AccountID),
		zap.String("key_id", rec.KeyID), zap.String("model", rec.Model),
		zap.Int64("input_tokens", rec.Tokens.Input), zap.Int64("output_tokens", rec.Tokens.Output),
		zap.Int64("cache_read_tokens", rec.Tokens.CacheRead), zap.Int64("cache_write_tokens", rec.Tokens.CacheWrite),
		zap.String("cost", rec.Cost.String()), zap.Error(err))
	go func() {
		defer pendingSettles.Add(-1)
		err := s.settleRetrying(logger, hold, rec, -1)
		if err != nil {
			logger.Error("a held bill was never taken by the ledger",
				zap.String("request_id", rec.RequestID), zap.String("account", rec.AccountID),
				zap.String("cost", rec.Cost.String()), zap.Error(err))
			return
		}
		logger.Info("a held bill was taken by the ledger", zap.String("request_id", rec.RequestID))
	}()
	return err
}

// settleRetrying settles, trying again with backoff while the ledger fails
// with ErrWriteFailed, for at most within (forever when negative, until
// the store closes). It records the metrics of a settled bill.
func (s *Service) settleRetrying(logger *zap.Logger, hold *ledger.Hold, rec *ledger.UsageRecord, within time.Duration) error {
	start := time.Now()
	wait := settleRetryFirst
	for tries := 1; ; tries++ {
		// no deadline: the ledger awaits every settle it has queued, so
		// that a bill is never abandoned half-way, and a timer per request
		// would only cost its allocation
		err := hold.Settle(context.Background(), rec)
		if err == nil {
			s.Metrics.Settled(rec)
			if rec.OverHold {
				logger.Warn("usage exceeded the hold",
					zap.String("request_id", rec.RequestID), zap.String("model", rec.Model),
					zap.Int64("input_tokens", rec.Tokens.Input), zap.Int64("output_tokens", rec.Tokens.Output),
					zap.String("uncollected", rec.Uncollected().String()))
			}
			return nil
		}
		if !errors.Is(err, ledger.ErrWriteFailed) {
			logger.Error("settling a request failed",
				zap.String("request_id", rec.RequestID), zap.String("account", rec.AccountID), zap.Error(err))
			return err
		}
		s.Metrics.settleRetries.Inc()
		if tries == 1 {
			logger.Warn("the ledger could not take a bill; retrying",
				zap.String("request_id", rec.RequestID), zap.String("account", rec.AccountID), zap.Error(err))
		}
		if within >= 0 && time.Since(start)+wait > within {
			return err
		}
		time.Sleep(wait)
		wait = min(2*wait, settleRetryMax)
	}
}
