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
	// Owed is what a reversal or a debit could not take from the balance;
	// the next credits pay it first.
	Owed Money
	// SuspendedFor is SuspendedForDebt when a debt suspended the account
	// (paying it resumes the account), "" otherwise.
	SuspendedFor string
	CreatedAt    time.Time
	// MonthSpend is what the account was charged in the current calendar
	// month (UTC), which a plan's volume tiers read.
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
	debt    bool       // suspended for debt
	// PostgreSQL (postgres_advance.go): this instance's advance on the account, its
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
// differ only in case are one login name.
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
	now := time.Now().UnixMilli()
	if err := s.eng.createAccount(ctx, id, email, plan, now); err != nil {
		return Account{}, err
	}
	return Account{ID: id, Email: email, Plan: plan, State: StateActive, CreatedAt: time.UnixMilli(now).UTC()}, nil
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
	err = s.queryRow(ctx, `SELECT email, plan, state, balance, created_at, `+s.eng.heldColumn()+`, spend_month, month_spend, owed, suspended_for FROM accounts WHERE id = ?`, id).
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
	s.eng.localHeld(&a)
	return a, nil
}

// SetAccountState suspends or resumes an account (ErrNotFound if unknown).
// It is the operator's decision: a suspension is then never lifted by a
// payment, and resuming an account suspended for debt resumes it though it
// still owes.
func (s *Store) SetAccountState(ctx context.Context, id string, st State) error {
	if !st.valid() {
		return fmt.Errorf("ledger: invalid account state %q", st)
	}
	return s.setAccount(ctx, id, "state", string(st))
}

// SetAccountPlan changes an account's plan (ErrNotFound if unknown).
func (s *Store) SetAccountPlan(ctx context.Context, id, plan string) error {
	return s.setAccount(ctx, id, "plan", plan)
}

// setAccount sets an account's state or plan (column), and tells.
func (s *Store) setAccount(ctx context.Context, id, column, value string) error {
	if err := s.eng.setAccount(ctx, id, column, value); err != nil {
		return err
	}
	s.changed("account:" + id)
	return nil
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
// the account: its requests are then refused with a word on paying
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
