package relay

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/modelgate/modelgate/ledger"
)

// Settling with the ledger. A settle the ledger cannot take for a reason
// that may pass (ledger.ErrWriteFailed: the database locked by another
// process, a full disk) keeps its hold reserved and is tried again: inline
// for a few seconds, then, for a bill that must be collected, in the
// background until the ledger takes it (#16). The money stays held all the
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
		ctx, cancel := context.WithTimeout(context.Background(), settleTimeout)
		err := hold.Settle(ctx, rec)
		cancel()
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
