package ledger

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Outstanding is the total held by this store's open holds, all accounts.
func (s *Store) Outstanding() Money { return Money(s.outstanding.Load()) }

// hold states
const (
	holdOpen uint8 = iota
	holdSettling
	holdSettled
	holdReleased
)

// Hold is money reserved on an account for one request, settled exactly once
// (Settle) or released (Release).
type Hold struct {
	s      *Store
	acct   *account
	amount Money // guarded by acct.mu until settled
	state  uint8 // guarded by acct.mu
	over   bool  // a settle took more than the hold (guarded by acct.mu)
	// spendMonth and spent are the account's month's spend as the reserve
	// read it (monthSpend, in two fields so that the hold keeps its size);
	// the month is checked only when MonthSpend is asked, so that a plan
	// without volume tiers costs the hot path no clock reading.
	spendMonth int32
	id         int64 // PostgreSQL: the hold's row (its own id, for a hold carved from an advance)
	spent      Money
	adv        *advance // PostgreSQL: the advance the hold is carved from, if any (postgres_advance.go)
	// key is the capped key the hold is bound by (ReserveForKey), if any
	// (the settle's command carries the start of the cap's period its
	// charge counts in, so that the hold keeps its size class)
	key *keyEntry
}

// Reserve reserves between min and max on the account, in one atomic step:
// available = balance − outstanding holds; the grant is min(max, available).
// If the grant is below min (or nothing is available, or min > max) it
// returns ErrInsufficientFunds. Suspended accounts are not refused here.
//
// With PostgreSQL the step is one statement against the balance and holds
// every instance sees, or, on an account this instance keeps busy, a hold
// carved in memory from its advance on the account, itself a hold on that
// balance (docs/design.md, "Advances on busy accounts"); an error that may
// pass (the database unreachable) wraps ErrWriteFailed.
func (s *Store) Reserve(accountID string, min, max Money) (*Hold, error) {
	return s.reserve(accountID, min, max, false)
}

// ReserveWithMonthSpend is Reserve for a request whose price depends on
// the hold's MonthSpend (a plan with volume tiers): with PostgreSQL the
// hold is never carved from this instance's advance on the account
// (docs/design.md, "Advances on busy accounts"), so its MonthSpend counts
// every charge any instance had settled before it. With SQLite it is
// Reserve.
func (s *Store) ReserveWithMonthSpend(accountID string, min, max Money) (*Hold, error) {
	return s.reserve(accountID, min, max, true)
}

// ReserveForKey is Reserve, or ReserveWithMonthSpend when monthSpend is
// set, for a request made with key p. A key with a spend cap (p carries
// one; the cap is the ledger's now, which may have changed since) also bounds the
// grant: it is at most what the cap leaves in its period, less the key's
// other holds, and the settle counts the charge in the period (in the
// transaction that debits it). A cap that leaves less than min refuses the
// reserve with a *KeyCapError (errors.Is ErrKeyCapReached). With
// PostgreSQL, a capped key's hold is never carved from an advance, so that
// every instance's holds on the key are rows that each reserve on it
// counts.
func (s *Store) ReserveForKey(p Principal, min, max Money, monthSpend bool) (*Hold, error) {
	if !p.Limits.Capped() {
		// no cap when the key was authenticated: a cap set since applies
		// from the key's next request
		return s.reserveBound(p.AccountID, nil, min, max, monthSpend)
	}
	e, err := s.keyEntryByID(p.KeyID)
	if err != nil {
		return nil, err
	}
	var bound *keyCap
	if e != nil && e.principal.AccountID == p.AccountID {
		if l := e.limits.Load(); l.Capped() {
			bound = &keyCap{e: e, lim: l, now: s.now()}
		}
	}
	return s.reserveBound(p.AccountID, bound, min, max, monthSpend)
}

func (s *Store) reserve(accountID string, min, max Money, fresh bool) (*Hold, error) {
	return s.reserveBound(accountID, nil, min, max, fresh)
}

func (s *Store) reserveBound(accountID string, bound *keyCap, min, max Money, fresh bool) (*Hold, error) {
	if min < 0 || max < 0 {
		return nil, fmt.Errorf("ledger: reserve: negative bounds")
	}
	if min > max {
		return nil, ErrInsufficientFunds
	}
	a, err := s.loadAccount(context.Background(), accountID)
	if err != nil {
		return nil, err
	}
	return s.eng.reserve(a, bound, min, max, fresh)
}

// Amount is the amount currently reserved by the hold.
func (h *Hold) Amount() Money {
	h.acct.mu.Lock()
	defer h.acct.mu.Unlock()
	return h.amount
}

// AccountID is the account the hold is on.
func (h *Hold) AccountID() string { return h.acct.id }

// Release frees the reservation. It is idempotent, and a no-op after Settle.
// With PostgreSQL it returns once the release is committed (should that
// fail, it is tried again in the background, and the hold lapses with this
// store's lease at the latest).
func (h *Hold) Release() {
	a := h.acct
	a.mu.Lock()
	if h.state != holdOpen {
		a.mu.Unlock()
		return
	}
	h.state = holdReleased
	amt := h.amount
	h.s.eng.unhold(h)
	a.mu.Unlock()
	h.s.outstanding.Add(-int64(amt))
	h.s.openHolds.Add(-1)
	h.s.eng.releaseRow(h)
}

// UsageRecord is one request's usage row. The caller fills the request
// fields and Cost; Settle fills CreatedAt (if zero), Hold, Charged and OverHold.
type UsageRecord struct {
	RequestID, AccountID, KeyID, Model, Provider, UpstreamModel, UpstreamKeyID, ClientFormat string
	Stream                                                                                   bool
	Tokens                                                                                   Tokens
	Cost                                                                                     Money  // after discount
	DiscountBps                                                                              int    // the plan's discount
	UsageSource                                                                              string // "upstream" | "estimated"
	Status                                                                                   int    // HTTP status the client got
	Outcome                                                                                  string // "ok", "client_closed", "upstream_cut", "upstream_error", …
	Latency, TTFT                                                                            time.Duration
	CreatedAt                                                                                time.Time // set by Settle if zero
	// Hosted counts the hosted-tool uses billed (web searches, fetches,
	// generated images), and HostedCost is their part of the cost, before
	// the discount.
	Hosted     HostedUses
	HostedCost Money
	// TierBps is the discount of the plan's volume tier, on top of
	// DiscountBps, and Discount what the two took off the list price
	// (the list price − Cost), in nanos.
	TierBps  int
	Discount Money

	// Set by Settle.
	Hold     Money // the amount that was reserved when settling (including any over-hold extra)
	Charged  Money // what was actually debited (= Cost unless clamped)
	OverHold bool  // Cost exceeded the hold
	// HoldLapsed (PostgreSQL only): the hold had lapsed before the
	// settle (its store's lease ran out, and another instance released
	// it), so the cost was taken from the account's available balance
	// instead, never below zero (OverHold is set if that fell short).
	HoldLapsed bool
}

// Uncollected is the part of the cost that could not be charged: the usage
// exceeded the hold and the account's available balance (Cost − Charged,
// kept on the row as its cost and charged columns).
func (r *UsageRecord) Uncollected() Money { return max(r.Cost-r.Charged, 0) }

// Settle debits the request's cost and records its usage row, in one
// transaction with the key's running totals and the daily rollup, and
// returns once that is committed. It then releases the hold. A hold settles
// exactly once: a second Settle, or Settle after Release, returns
// ErrAlreadySettled.
//
// If rec.Cost exceeds the hold, the extra is taken from the account's
// available balance (never from other holds, never below zero); Charged
// is then less than Cost when not enough was available, and OverHold is set.
//
// ctx is not used to abandon the write: a settle must happen even when the
// client has gone away. If the write fails after the writer's own retries
// for a reason that may pass, the error wraps ErrWriteFailed, nothing is
// debited, and the hold stays open with its amount reserved, so that the
// caller can call Settle again with the same record (or Release). Any other
// failure (a duplicate request id, a record the database refuses, a closed
// store) releases the hold.
//
// With PostgreSQL, a settle whose hold lapsed meanwhile (see HoldLapsed)
// still records the usage and debits what the available balance allows;
// nothing is released twice. A settle tried again after an error may find
// that its earlier attempt committed after all; it then succeeds without a
// second debit.
func (h *Hold) Settle(ctx context.Context, rec *UsageRecord) error {
	_ = ctx
	a := h.acct
	if rec == nil {
		h.Release()
		return errors.New("ledger: settle: nil usage record")
	}
	if rec.Cost < 0 {
		h.Release()
		return fmt.Errorf("ledger: settle: negative cost %s", rec.Cost)
	}
	if rec.AccountID == "" {
		rec.AccountID = a.id
	} else if rec.AccountID != a.id {
		h.Release()
		return fmt.Errorf("ledger: settle: usage record account %q does not match hold account %q", rec.AccountID, a.id)
	}
	if rec.RequestID == "" {
		rec.RequestID = NewRequestID()
	}
	if rec.CreatedAt.IsZero() {
		rec.CreatedAt = h.s.now()
	}

	a.mu.Lock()
	if h.state != holdOpen {
		a.mu.Unlock()
		return ErrAlreadySettled
	}
	h.state = holdSettling
	amount := h.amount
	a.mu.Unlock()
	reopen := func() {
		a.mu.Lock()
		h.state = holdOpen
		a.mu.Unlock()
		rec.Charged = 0
	}

	// the over-hold: the extra comes from the account's available
	// balance, as far as it goes (a lapsed hold's settle is charged from
	// the available balance by its batch)
	rec.Charged, rec.OverHold, rec.HoldLapsed = rec.Cost, false, false
	if rec.Cost > amount {
		added, err := h.s.eng.extend(h, rec.Cost-amount)
		if err != nil {
			reopen()
			return fmt.Errorf("ledger: settle request %s: %w: %w", rec.RequestID, ErrWriteFailed, err)
		}
		a.mu.Lock()
		h.over = true
		if added >= 0 {
			rec.Charged = h.amount
		}
		a.mu.Unlock()
	}
	a.mu.Lock()
	rec.OverHold = h.over // kept when a failed settle is tried again
	rec.Hold = h.amount
	amount = h.amount
	a.mu.Unlock()

	c := getCommand(cmdSettle)
	defer putCommand(c)
	c.hold, c.rec, c.amount = h, rec, rec.Charged
	c.now = -1 // the start of the key's cap period the charge counts in; -1: none
	if h.key != nil {
		if l := h.key.limits.Load(); l.Capped() {
			c.now = l.period().Start(rec.CreatedAt)
		}
	}
	err := h.s.submit(context.Background(), c)
	if err == nil {
		err = c.err
	}
	gone := c.n == 1 // PostgreSQL: the batch that answered deleted the hold's row
	if err == nil {
		h.s.eng.settled(h, c, amount)
		if f := h.s.opts.OnBalance; f != nil {
			f(a.id)
		}
		return nil
	}
	if !gone && retryable(err) {
		// Not debited, but the usage happened: keep the reservation for
		// the caller's next try.
		reopen()
		return fmt.Errorf("ledger: settle request %s: %w: %w", rec.RequestID, ErrWriteFailed, err)
	}
	// Not debited: give the reservation back.
	a.mu.Lock()
	h.state = holdReleased
	h.s.eng.unhold(h)
	a.mu.Unlock()
	h.s.outstanding.Add(-int64(amount))
	h.s.openHolds.Add(-1)
	rec.Charged = 0
	if !gone && !errors.Is(err, ErrClosed) {
		h.s.eng.releaseRow(h)
	}
	return fmt.Errorf("ledger: settle request %s: %w", rec.RequestID, err)
}

// retryable reports whether a failed write may succeed if tried again: not
// when the store is closed or the command itself is refused (a duplicate,
// a constraint such as the balance check).
func retryable(err error) bool {
	if errors.Is(err, ErrClosed) || errors.Is(err, ErrDuplicate) || errors.Is(err, ErrNotFound) {
		return false
	}
	var coded interface{ Code() int }
	if errors.As(err, &coded) && coded.Code()&0xff == sqliteConstraint {
		return false
	}
	if retry, known := pgRetryable(err); known {
		return retry
	}
	return true
}

// sqliteConstraint is SQLite's primary result code SQLITE_CONSTRAINT.
const sqliteConstraint = 19
