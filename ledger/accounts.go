package ledger

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
)

// State is an account's state.
type State string

// Account states.
const (
	StateActive    State = "active"
	StateSuspended State = "suspended"
)

// valid reports whether st is a known state.
func (st State) valid() bool { return st == StateActive || st == StateSuspended }

// Account is an account as stored, plus Held: the outstanding holds (with
// SQLite, this process's; with PostgreSQL, every instance's).
type Account struct {
	ID, Email, Plan string
	State           State
	Balance, Held   Money
	// Owed is what a reversal or a debit could not take from the balance
	// (#20); the next credits pay it first.
	Owed Money
	// SuspendedFor is SuspendedForDebt when a debt suspended the account
	// (paying it resumes the account), "" otherwise.
	SuspendedFor string
	CreatedAt    time.Time
	// MonthSpend is what the account was charged in the current calendar
	// month (UTC), which a plan's volume tiers read (#20).
	MonthSpend Money
}

// account is the in-memory state of one account. Together with the database
// it is authoritative, since one process owns the file: balance is the
// committed balance, held the sum of open holds.
type account struct {
	id string
	mu sync.Mutex
	// guarded by mu
	balance Money
	held    Money
	state   State
	plan    string
	spend   monthSpend // the month's spend (spend.go)
	debt    bool       // suspended for debt (#20)
	// PostgreSQL (advance.go): this instance's advance on the account, its
	// last reserve, and what the account had available after the last
	// reserve that reached the database
	adv         *advance
	lastReserve time.Time
	availSeen   Money
}

// loadAccount returns the cached account, reading it from the database on
// first use.
func (s *Store) loadAccount(ctx context.Context, id string) (*account, error) {
	if v, ok := s.accounts.Load(id); ok {
		return v.(*account), nil
	}
	done, err := s.beginRead()
	if err != nil {
		return nil, err
	}
	defer done()
	s.loadMu.RLock()
	defer s.loadMu.RUnlock()
	if v, ok := s.accounts.Load(id); ok {
		return v.(*account), nil
	}
	a := &account{id: id}
	var state, suspendedFor string
	err = s.queryRow(ctx, `SELECT balance, state, plan, spend_month, month_spend, suspended_for FROM accounts WHERE id = ?`, id).
		Scan(&a.balance, &state, &a.plan, &a.spend.month, &a.spend.spend, &suspendedFor)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("ledger: account %q: %w", id, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("ledger: load account %q: %w", id, err)
	}
	a.state, a.debt = State(state), suspendedFor == SuspendedForDebt
	v, _ := s.accounts.LoadOrStore(id, a)
	return v.(*account), nil
}

// cachedAccount returns the account if it is in memory.
func (s *Store) cachedAccount(id string) *account {
	if v, ok := s.accounts.Load(id); ok {
		return v.(*account)
	}
	return nil
}

// NormalizeEmail is the form in which the ledger keeps and compares
// emails: without surrounding white space, in lower case. Two emails that
// differ only in case are one login name (#17).
func NormalizeEmail(email string) string {
	return strings.ToLower(strings.TrimSpace(email))
}

// CreateAccount creates an active account with a zero balance. email may be
// empty; a non-empty email is kept normalized (NormalizeEmail) and must be
// unique in that form (ErrDuplicate).
func (s *Store) CreateAccount(ctx context.Context, email, plan string) (Account, error) {
	email = NormalizeEmail(email)
	id, err := newID("acct_")
	if err != nil {
		return Account{}, err
	}
	now := time.Now()
	if s.pg != nil {
		if err := s.pg.createAccount(ctx, id, email, plan, now.UnixMilli()); err != nil {
			return Account{}, err
		}
		return Account{ID: id, Email: email, Plan: plan, State: StateActive, CreatedAt: time.UnixMilli(now.UnixMilli()).UTC()}, nil
	}
	c := getCommand(cmdCreateAccount)
	defer putCommand(c)
	c.id, c.email, c.str, c.now = id, email, plan, now.UnixMilli()
	if err := s.submit(ctx, c); err != nil {
		return Account{}, err
	}
	if c.err != nil {
		return Account{}, c.err
	}
	return Account{ID: id, Email: email, Plan: plan, State: StateActive, CreatedAt: time.UnixMilli(c.now).UTC()}, nil
}

// GetAccount reads an account. Balance, state and plan come from the
// database; Held is the sum of the outstanding holds (with SQLite, this
// process's; with PostgreSQL, every instance's, from the database).
func (s *Store) GetAccount(ctx context.Context, id string) (Account, error) {
	done, err := s.beginRead()
	if err != nil {
		return Account{}, err
	}
	defer done()
	// Under loadMu, a batch's commit and its effect on the cached holds are
	// seen together: never a settled usage row beside a hold still counted.
	s.loadMu.RLock()
	defer s.loadMu.RUnlock()
	a := Account{ID: id}
	var state string
	var created sql.NullInt64
	var spend monthSpend
	held := "0"
	if s.pg != nil {
		held = "held"
	}
	err = s.queryRow(ctx, `SELECT email, plan, state, balance, created_at, `+held+`, spend_month, month_spend, owed, suspended_for FROM accounts WHERE id = ?`, id).
		Scan(&a.Email, &a.Plan, &state, &a.Balance, &created, &a.Held, &spend.month, &spend.spend, &a.Owed, &a.SuspendedFor)
	if errors.Is(err, sql.ErrNoRows) {
		return Account{}, fmt.Errorf("ledger: account %q: %w", id, ErrNotFound)
	}
	if err != nil {
		return Account{}, fmt.Errorf("ledger: get account %q: %w", id, err)
	}
	a.State = State(state)
	a.CreatedAt = fromMilli(created)
	a.MonthSpend = spend.in(monthOf(s.now()))
	if m := s.cachedAccount(id); m != nil && s.pg == nil {
		m.mu.Lock()
		a.Held = m.held
		m.mu.Unlock()
	}
	return a, nil
}

// SetAccountState suspends or resumes an account (ErrNotFound if unknown).
// It is the operator's decision: a suspension is then never lifted by a
// payment, and resuming an account suspended for debt resumes it though it
// still owes (#20).
func (s *Store) SetAccountState(ctx context.Context, id string, st State) error {
	if !st.valid() {
		return fmt.Errorf("ledger: invalid account state %q", st)
	}
	if s.pg != nil {
		if err := s.pg.setAccount(ctx, id, "state", string(st)); err != nil {
			return err
		}
		s.changed("account:" + id)
		return nil
	}
	c := getCommand(cmdSetState)
	defer putCommand(c)
	c.id, c.str = id, string(st)
	if err := s.submit(ctx, c); err != nil {
		return err
	}
	if c.err == nil {
		s.changed("account:" + id)
	}
	return c.err
}

// SetAccountPlan changes an account's plan (ErrNotFound if unknown).
func (s *Store) SetAccountPlan(ctx context.Context, id, plan string) error {
	if s.pg != nil {
		if err := s.pg.setAccount(ctx, id, "plan", plan); err != nil {
			return err
		}
		s.changed("account:" + id)
		return nil
	}
	c := getCommand(cmdSetPlan)
	defer putCommand(c)
	c.id, c.str = id, plan
	if err := s.submit(ctx, c); err != nil {
		return err
	}
	if c.err == nil {
		s.changed("account:" + id)
	}
	return c.err
}

// AccountState returns an account's state and plan from memory, loading the
// account on first use.
func (s *Store) AccountState(accountID string) (State, string, error) {
	a, err := s.loadAccount(context.Background(), accountID)
	if err != nil {
		return "", "", err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.state, a.plan, nil
}

// SuspendedForDebt reports, from memory, whether a debt is what suspended
// the account (#20): its requests are then refused with a word on paying
// it rather than on asking the operator.
func (s *Store) SuspendedForDebt(accountID string) bool {
	a, err := s.loadAccount(context.Background(), accountID)
	if err != nil {
		return false
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.state == StateSuspended && a.debt
}

// CreditRequest is a credit: an operator's (KindCredit) or a top-up
// (KindTopup, with the Payment it was paid by). Reference is the
// idempotency key (e.g. the payment's id) and is unique across all money
// entries.
type CreditRequest struct {
	AccountID string
	Amount    Money
	Reference string
	Reason    string
	Kind      string // KindCredit (the default) or KindTopup
	Payment   string // a top-up's payment ("stripe:pi_…"), found by its reversals
}

// Credit adds c.Amount (> 0) to the account (ApplyMoney): it pays what
// the account owes first (which resumes an account suspended for debt),
// and returns the new balance. A second credit with the same Reference
// credits nothing and returns ErrDuplicate.
func (s *Store) Credit(ctx context.Context, cr CreditRequest) (balance Money, err error) {
	if cr.Amount <= 0 {
		return 0, fmt.Errorf("ledger: credit amount must be positive, got %s", cr.Amount)
	}
	if cr.Reference == "" {
		return 0, errors.New("ledger: credit reference required")
	}
	kind := cr.Kind
	if kind == "" {
		kind = KindCredit
	}
	if kind != KindCredit && kind != KindTopup {
		return 0, fmt.Errorf("ledger: credit kind %q: want %s or %s", kind, KindCredit, KindTopup)
	}
	res, err := s.ApplyMoney(ctx, MoneyChange{AccountID: cr.AccountID, Kind: kind, Amount: cr.Amount,
		Reference: cr.Reference, Reason: cr.Reason, Payment: cr.Payment})
	if err != nil {
		return 0, err
	}
	return res.Balance, nil
}

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
	adv        *advance // PostgreSQL: the advance the hold is carved from, if any (advance.go)
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

func (s *Store) reserve(accountID string, min, max Money, fresh bool) (*Hold, error) {
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
	if s.pg != nil {
		return s.pg.reserve(a, min, max, fresh)
	}
	a.mu.Lock()
	available := a.balance - a.held
	if available <= 0 || available < min {
		a.mu.Unlock()
		return nil, ErrInsufficientFunds
	}
	grant := max
	if available < grant {
		grant = available
	}
	a.held += grant
	spend := a.spend
	a.mu.Unlock()
	s.outstanding.Add(int64(grant))
	s.openHolds.Add(1)
	return &Hold{s: s, acct: a, amount: grant, spendMonth: spend.month, spent: spend.spend}, nil
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
	if h.s.pg == nil {
		a.held -= amt
	}
	a.mu.Unlock()
	h.s.outstanding.Add(-int64(amt))
	h.s.openHolds.Add(-1)
	if h.s.pg != nil {
		h.s.pg.release(h)
	}
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
	// the discount (#16).
	Hosted     HostedUses
	HostedCost Money
	// TierBps is the discount of the plan's volume tier, on top of
	// DiscountBps, and Discount what the two took off the list price
	// (the list price − Cost), in nanos (#20).
	TierBps  int
	Discount Money

	// Set by Settle.
	Hold     Money // the amount that was reserved when settling (including any over-hold extra)
	Charged  Money // what was actually debited (= Cost unless clamped)
	OverHold bool  // Cost exceeded the hold
	// HoldLapsed (PostgreSQL only, #19): the hold had lapsed before the
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
	if h.s.pg != nil {
		return h.s.pg.settle(h, rec)
	}

	a.mu.Lock()
	if h.state != holdOpen {
		a.mu.Unlock()
		return ErrAlreadySettled
	}
	h.state = holdSettling
	var extra Money
	rec.Charged, rec.OverHold = rec.Cost, false
	if rec.Cost > h.amount {
		extra = rec.Cost - h.amount
		if avail := a.balance - a.held; extra > avail {
			extra = max(avail, 0)
		}
		a.held += extra
		h.amount += extra
		h.over = true
		rec.Charged = h.amount
	}
	rec.OverHold = h.over // kept when a failed settle is tried again
	rec.Hold = h.amount
	a.mu.Unlock()
	if extra != 0 {
		h.s.outstanding.Add(int64(extra))
	}

	c := getCommand(cmdSettle)
	defer putCommand(c)
	c.hold, c.rec = h, rec
	err := h.s.submit(context.Background(), c)
	if err == nil {
		err = c.err
	}
	if err != nil && retryable(err) {
		// Not debited, but the usage happened: keep the reservation for
		// the caller's next try.
		a.mu.Lock()
		h.state = holdOpen
		a.mu.Unlock()
		rec.Charged = 0
		return fmt.Errorf("ledger: settle request %s: %w: %w", rec.RequestID, ErrWriteFailed, err)
	}
	if err != nil {
		// Not debited: give the reservation back.
		a.mu.Lock()
		h.state = holdReleased
		amt := h.amount
		a.held -= amt
		a.mu.Unlock()
		h.s.outstanding.Add(-int64(amt))
		h.s.openHolds.Add(-1)
		rec.Charged = 0
		return fmt.Errorf("ledger: settle request %s: %w", rec.RequestID, err)
	}
	return nil
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
