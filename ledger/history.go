package ledger

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// An account's money history (migration 7): one row of the credits
// table per change of its balance or of what it owes, with the balance and
// the amount owed just after it. Usage debits are the usage rows; together
// they reconcile: balance = Σ amount − Σ charged, owed = Σ owed (Audit).

// Kinds of money entries.
const (
	KindCredit      = "credit"       // an operator's credit (or an opening credit)
	KindTopup       = "topup"        // a payment through the payment provider
	KindRefund      = "refund"       // a refund of a top-up, reversed
	KindDispute     = "dispute"      // a disputed top-up, reversed
	KindDisputeWon  = "dispute_won"  // a dispute won: what it reversed is given back
	KindDisputeLost = "dispute_lost" // a dispute lost: it stays reversed (changes nothing)
	KindAdjustment  = "adjustment"   // an operator's debit or correction
	KindDebtPayment = "debt_payment" // the part of a credit that paid what the account owed
)

// SuspendedForDebt is Account.SuspendedFor of an account that a debt
// suspended: paying the debt resumes it. An operator's suspension has "".
const SuspendedForDebt = "owed"

// MoneyEntry is one change of an account's money.
type MoneyEntry struct {
	ID        int64
	AccountID string
	Kind      string
	// Amount is the change of the balance: negative for a debit or a
	// reversal (what could be taken), positive for a credit.
	Amount Money
	// Owed is the change of what the account owes: positive for the part of
	// a debit or reversal the balance did not cover, negative for a debt
	// payment.
	Owed Money
	// BalanceAfter is the balance just after the change (usage debits
	// included); nil for entries made before migration 7, when it was not
	// recorded.
	BalanceAfter *Money
	OwedAfter    Money
	Reference    string // the idempotency key, unique across all entries
	Reason       string
	Payment      string // the payment a top-up was paid by, and its reversals' ("stripe:pi_…")
	CreatedAt    time.Time
}

// MoneyChange is a change of an account's money, applied by ApplyMoney.
type MoneyChange struct {
	// AccountID is the account; empty for a reversal (KindRefund,
	// KindDispute), which finds the account of the top-up paid by Payment.
	AccountID string
	Kind      string
	// Amount by kind: KindCredit, KindTopup: the credit (> 0);
	// KindAdjustment: the signed change (≠ 0); KindRefund: the total
	// refunded of the payment so far (Stripe's cumulative amount_refunded:
	// only what exceeds the refunds already reversed is reversed);
	// KindDispute: the disputed amount (> 0); KindDisputeWon,
	// KindDisputeLost: not used (the dispute's own amount is given back).
	Amount Money
	// Reference is the idempotency key, unique across all entries:
	// required, but for KindDisputeWon and KindDisputeLost, whose
	// reference is the dispute's (a dispute closes once).
	Reference string
	Reason    string
	// Payment is the payment a top-up was paid by, or the one a reversal
	// reverses ("stripe:pi_…").
	Payment string
	// Dispute is the Reference of the dispute entry that KindDisputeWon or
	// KindDisputeLost closes.
	Dispute string
	// AllowOwed lets a debit (KindAdjustment) that exceeds the available
	// balance take what is available, record the rest as owed and suspend
	// the account for debt; without it such a debit is refused with
	// ErrInsufficientFunds. Reversals always may.
	AllowOwed bool
}

// MoneyResult is what ApplyMoney did: the entries it wrote (the change,
// then the debt it paid, if any), and the account just after.
type MoneyResult struct {
	Entries      []MoneyEntry
	Balance      Money
	Owed         Money
	State        State
	SuspendedFor string
}

// debtReference is the reference of the debt payment made by the credit
// with reference ref.
func debtReference(ref string) string { return "debt-paid-by:" + ref }

// validate checks a change's fields for its kind.
func (ch *MoneyChange) validate() error {
	if ch.Kind == KindDisputeWon || ch.Kind == KindDisputeLost {
		ch.Reference = closedReference(ch.Dispute)
	}
	if ch.Reference == "" {
		return errors.New("ledger: a reference is required")
	}
	switch ch.Kind {
	case KindCredit, KindTopup:
		if ch.Amount <= 0 {
			return fmt.Errorf("ledger: a credit must be positive, got %s", ch.Amount)
		}
	case KindAdjustment:
		if ch.Amount == 0 {
			return errors.New("ledger: an adjustment must not be zero")
		}
		if ch.Reason == "" {
			return errors.New("ledger: an adjustment needs a reason")
		}
		if ch.Amount == math.MinInt64 {
			return fmt.Errorf("ledger: adjustment %w", errOverflow)
		}
	case KindRefund, KindDispute:
		if ch.Amount <= 0 {
			return fmt.Errorf("ledger: a %s must be positive, got %s", ch.Kind, ch.Amount)
		}
		if ch.Payment == "" {
			return fmt.Errorf("ledger: a %s needs the payment it reverses", ch.Kind)
		}
	case KindDisputeWon, KindDisputeLost:
		if ch.Dispute == "" {
			return fmt.Errorf("ledger: a %s needs the dispute it closes", ch.Kind)
		}
	default:
		return fmt.Errorf("ledger: unknown kind of money entry %q", ch.Kind)
	}
	if ch.AccountID == "" && ch.Payment == "" && ch.Dispute == "" {
		return errors.New("ledger: an account is required")
	}
	return nil
}

// moneyMem is an applied change's effect on the in-memory account
// (SQLite): what it reserved while its transaction ran, so that no hold
// could take it meanwhile, and what it changed.
type moneyMem struct {
	acct     *account
	reserved Money
	delta    Money
	state    State
	debt     bool // suspended for debt
	// stateChanged: the change suspended or resumed the account
	stateChanged bool
}

// ApplyMoney applies a change of an account's money in one transaction:
// its entry, the debt a credit pays first, and the account's balance, owed
// amount and state. A debit takes at most the available balance (balance −
// holds of requests in flight); the rest is refused (ErrInsufficientFunds)
// or, for reversals and with AllowOwed, recorded as owed, and an active
// account is then suspended for debt (SuspendedForDebt). A credit pays
// what is owed first, and once nothing is owed an account suspended for
// debt resumes; an operator's suspension stays.
//
// A second change with a Reference already used changes nothing and
// returns the first one's entries with an error wrapping ErrDuplicate. A
// refund whose total is already reversed also changes nothing and returns
// ErrDuplicate. An unknown account, top-up or dispute is ErrNotFound.
func (s *Store) ApplyMoney(ctx context.Context, ch MoneyChange) (MoneyResult, error) {
	if err := ch.validate(); err != nil {
		return MoneyResult{}, err
	}
	// a reversal's account is its top-up's (read first, so that the
	// in-memory account is loaded before the write)
	if ch.AccountID == "" {
		id, err := s.moneyAccount(ctx, &ch)
		if err != nil {
			return MoneyResult{}, err
		}
		ch.AccountID = id
	}
	var res MoneyResult
	var mem moneyMem
	now := time.Now().UnixMilli()
	fn := func(ctx context.Context, conn execer) error {
		res, mem = MoneyResult{}, moneyMem{acct: mem.acct}
		return s.moneyTx(ctx, conn, &ch, now, &res, &mem)
	}
	err := s.eng.applyMoney(ctx, &ch, fn, &mem)
	if err == nil && mem.stateChanged {
		s.changed("account:" + ch.AccountID)
	}
	if f := s.opts.OnBalance; err == nil && f != nil {
		f(ch.AccountID)
	}
	return res, err
}

// undo gives back what the change reserved in memory (its transaction did
// not commit).
func (m *moneyMem) undo() {
	if m.acct == nil || m.reserved == 0 {
		return
	}
	m.acct.mu.Lock()
	m.acct.held -= m.reserved
	m.acct.mu.Unlock()
	m.reserved = 0
}

// moneyAccount finds the account of the top-up a reversal reverses, or of
// the dispute a dispute's outcome closes.
func (s *Store) moneyAccount(ctx context.Context, ch *MoneyChange) (string, error) {
	done, err := s.beginRead()
	if err != nil {
		return "", err
	}
	defer done()
	var id string
	if ch.Kind == KindDisputeWon || ch.Kind == KindDisputeLost {
		err = s.queryRow(ctx, `SELECT account_id FROM credits WHERE reference = ? AND kind = ?`, ch.Dispute, KindDispute).Scan(&id)
		if errors.Is(err, sql.ErrNoRows) {
			return "", fmt.Errorf("ledger: dispute %q: %w", ch.Dispute, ErrNotFound)
		}
	} else {
		err = s.queryRow(ctx, `SELECT account_id FROM credits WHERE payment = ? AND kind = ? ORDER BY id LIMIT 1`, ch.Payment, KindTopup).Scan(&id)
		if errors.Is(err, sql.ErrNoRows) {
			return "", fmt.Errorf("ledger: a top-up paid by %q: %w", ch.Payment, ErrNotFound)
		}
	}
	if err != nil {
		return "", fmt.Errorf("ledger: find the account of %s: %w", ch.Kind, err)
	}
	return id, nil
}

const moneyColumns = `id, account_id, kind, amount, owed, balance_after, owed_after, reference, reason, payment, created_at`

// scanMoney scans a row of moneyColumns.
func scanMoney(sc interface{ Scan(...any) error }) (MoneyEntry, error) {
	var e MoneyEntry
	var after sql.NullInt64
	var created int64
	err := sc.Scan(&e.ID, &e.AccountID, &e.Kind, &e.Amount, &e.Owed, &after, &e.OwedAfter, &e.Reference, &e.Reason, &e.Payment, &created)
	if after.Valid {
		m := Money(after.Int64)
		e.BalanceAfter = &m
	}
	e.CreatedAt = time.UnixMilli(created).UTC()
	return e, err
}

// moneyTx is ApplyMoney's transaction. Every check that refuses the change
// comes before its first write, so a refused change writes nothing.
func (s *Store) moneyTx(ctx context.Context, conn execer, ch *MoneyChange, now int64, res *MoneyResult, mem *moneyMem) error {
	var balance, owed, held Money
	var state, suspendedFor string
	err := conn.QueryRowContext(ctx, `SELECT balance, owed, state, suspended_for, `+s.eng.heldColumn()+` FROM accounts WHERE id = ?`+s.eng.forUpdate(),
		ch.AccountID).Scan(&balance, &owed, &state, &suspendedFor, &held)
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("ledger: account %q: %w", ch.AccountID, ErrNotFound)
	}
	if err != nil {
		return err
	}

	// the same reference again: the first result (read once the account
	// is locked, so that with PostgreSQL a concurrent change of the same
	// reference has committed and is seen)
	first, err := scanMoney(conn.QueryRowContext(ctx, `SELECT `+moneyColumns+` FROM credits WHERE reference = ?`, ch.Reference))
	if err == nil {
		res.Entries = append(res.Entries, first)
		if debt, err := scanMoney(conn.QueryRowContext(ctx, `SELECT `+moneyColumns+` FROM credits WHERE reference = ?`,
			debtReference(ch.Reference))); err == nil {
			res.Entries = append(res.Entries, debt)
		} else if !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		last := res.Entries[len(res.Entries)-1]
		if last.BalanceAfter != nil {
			res.Balance = *last.BalanceAfter
		}
		res.Owed = last.OwedAfter
		return fmt.Errorf("ledger: reference %q already used (%s of %s on %s): %w", ch.Reference, first.Kind, first.Amount, first.AccountID, ErrDuplicate)
	} else if !errors.Is(err, sql.ErrNoRows) {
		return err
	}

	// the change's amount (signed)
	delta := ch.Amount
	switch ch.Kind {
	case KindRefund, KindDispute:
		var topup Money
		err := conn.QueryRowContext(ctx, `SELECT amount FROM credits WHERE payment = ? AND kind = ? AND account_id = ? ORDER BY id LIMIT 1`,
			ch.Payment, KindTopup, ch.AccountID).Scan(&topup)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("ledger: a top-up paid by %q: %w", ch.Payment, ErrNotFound)
		}
		if err != nil {
			return err
		}
		// never more than the top-up: what its reversals took or left
		// owed, less what won disputes gave back
		var reversed Money
		if err := conn.QueryRowContext(ctx, `SELECT coalesce(sum(CASE WHEN kind = ? THEN -amount ELSE owed - amount END), 0)
			FROM credits WHERE payment = ? AND kind IN (?, ?, ?)`, KindDisputeWon, ch.Payment, KindRefund, KindDispute, KindDisputeWon).Scan(&reversed); err != nil {
			return err
		}
		want := min(ch.Amount, topup-reversed)
		if ch.Kind == KindRefund {
			// Amount is the total refunded: what the refunds of this
			// payment reversed so far (taken + owed) is not reversed again
			var done Money
			if err := conn.QueryRowContext(ctx, `SELECT coalesce(sum(owed - amount), 0) FROM credits WHERE payment = ? AND kind = ?`,
				ch.Payment, KindRefund).Scan(&done); err != nil {
				return err
			}
			want = min(ch.Amount-done, want)
		}
		if want <= 0 {
			return fmt.Errorf("ledger: %s of %s: %s of it is already reversed: %w", ch.Kind, ch.Payment, max(reversed, 0), ErrDuplicate)
		}
		delta = -want
	case KindDisputeWon, KindDisputeLost:
		var reversed Money
		var acct, payment string
		err := conn.QueryRowContext(ctx, `SELECT owed - amount, account_id, payment FROM credits WHERE reference = ? AND kind = ?`,
			ch.Dispute, KindDispute).Scan(&reversed, &acct, &payment)
		if errors.Is(err, sql.ErrNoRows) || (err == nil && acct != ch.AccountID) {
			return fmt.Errorf("ledger: dispute %q: %w", ch.Dispute, ErrNotFound)
		}
		if err != nil {
			return err
		}
		ch.Payment = payment
		delta = 0
		if ch.Kind == KindDisputeWon {
			delta = reversed
		}
	}

	entry := MoneyEntry{AccountID: ch.AccountID, Kind: ch.Kind, Reference: ch.Reference, Reason: ch.Reason,
		Payment: ch.Payment, CreatedAt: time.UnixMilli(now).UTC()}
	var debt Money // paid by a credit
	switch {
	case delta > 0:
		if balance > math.MaxInt64-delta {
			return fmt.Errorf("ledger: credit to %q: balance %w", ch.AccountID, errOverflow)
		}
		entry.Amount = delta
		debt = min(owed, delta)
	case delta < 0:
		want := -delta
		avail := balance - held
		if mem.acct != nil {
			// SQLite: the holds are in memory; reserve what is taken at
			// once, so that no hold takes it before the commit
			a := mem.acct
			a.mu.Lock()
			avail = min(balance, a.balance) - a.held
			take := min(want, max(avail, 0))
			if take < want && !ch.AllowOwed && ch.Kind == KindAdjustment {
				a.mu.Unlock()
				return insufficient(ch, balance, avail)
			}
			a.held += take
			mem.reserved = take
			a.mu.Unlock()
		}
		take := min(want, max(avail, 0))
		if take < want && !ch.AllowOwed && ch.Kind == KindAdjustment {
			return insufficient(ch, balance, avail)
		}
		entry.Amount, entry.Owed = -take, want-take
	}
	newBalance := balance + entry.Amount
	newOwed := owed + entry.Owed
	if newOwed < owed {
		return fmt.Errorf("ledger: owed by %q: %w", ch.AccountID, errOverflow)
	}
	after := newBalance
	entry.BalanceAfter, entry.OwedAfter = &after, newOwed
	res.Entries = append(res.Entries, entry)
	if debt > 0 {
		newBalance -= debt
		newOwed -= debt
		paid := newBalance
		res.Entries = append(res.Entries, MoneyEntry{AccountID: ch.AccountID, Kind: KindDebtPayment, Amount: -debt, Owed: -debt,
			BalanceAfter: &paid, OwedAfter: newOwed, Reference: debtReference(ch.Reference),
			Reason: "paid from " + ch.Reference, Payment: ch.Payment, CreatedAt: entry.CreatedAt})
	}
	switch {
	case newOwed > 0 && state == string(StateActive):
		state, suspendedFor = string(StateSuspended), SuspendedForDebt
		mem.stateChanged = true
	case newOwed == 0 && suspendedFor == SuspendedForDebt:
		state, suspendedFor = string(StateActive), ""
		mem.stateChanged = true
	}

	for i := range res.Entries {
		e := &res.Entries[i]
		err := conn.QueryRowContext(ctx, `INSERT INTO credits (account_id, amount, reference, reason, created_at, kind, owed, balance_after, owed_after, payment)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id`, e.AccountID, int64(e.Amount), e.Reference, e.Reason, now, e.Kind,
			int64(e.Owed), int64(*e.BalanceAfter), int64(e.OwedAfter), e.Payment).Scan(&e.ID)
		var pe *pgconn.PgError
		if errors.As(err, &pe) && pe.Code == "23505" {
			// PostgreSQL: the reference was taken meanwhile for another
			// account (the same account's waits for the lock above)
			res.Entries = nil
			return fmt.Errorf("ledger: reference %q already used: %w", e.Reference, ErrDuplicate)
		}
		if err != nil {
			return err
		}
	}
	if _, err := conn.ExecContext(ctx, `UPDATE accounts SET balance = balance + ?, owed = ?, state = ?, suspended_for = ? WHERE id = ?`,
		int64(newBalance-balance), int64(newOwed), state, suspendedFor, ch.AccountID); err != nil {
		return err
	}
	mem.delta = newBalance - balance
	mem.state, mem.debt = State(state), suspendedFor == SuspendedForDebt
	res.Balance, res.Owed, res.State, res.SuspendedFor = newBalance, newOwed, State(state), suspendedFor
	return nil
}

// closedReference is the reference of the outcome of the dispute whose
// entry's reference is dispute: a dispute closes once.
func closedReference(dispute string) string { return dispute + "#closed" }

// insufficient is the error of a debit the available balance does not cover.
func insufficient(ch *MoneyChange, balance, avail Money) error {
	return fmt.Errorf("ledger: a debit of %s exceeds the available balance of account %q (%s, of a balance of %s); "+
		"allow it to record the rest as owed (which suspends the account) or debit less: %w",
		-ch.Amount, ch.AccountID, max(avail, 0), balance, ErrInsufficientFunds)
}

// HistoryPage is a page of an account's money history, newest first.
type HistoryPage struct {
	Entries []MoneyEntry
	// Next is the Before of the next (older) page; 0 when there is none.
	Next int64
}

// History reads an account's money history, newest first: at most limit
// entries (1 to 1000) with an id below before (0: from the newest).
// ErrNotFound if the account is unknown.
func (s *Store) History(ctx context.Context, accountID string, before int64, limit int) (HistoryPage, error) {
	if limit <= 0 || limit > 1000 {
		return HistoryPage{}, fmt.Errorf("ledger: history: limit %d: want 1 to 1000", limit)
	}
	done, err := s.beginRead()
	if err != nil {
		return HistoryPage{}, err
	}
	defer done()
	var one int
	err = s.queryRow(ctx, `SELECT 1 FROM accounts WHERE id = ?`, accountID).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return HistoryPage{}, fmt.Errorf("ledger: account %q: %w", accountID, ErrNotFound)
	}
	if err != nil {
		return HistoryPage{}, fmt.Errorf("ledger: history: %w", err)
	}
	if before <= 0 {
		before = math.MaxInt64
	}
	rows, err := s.query(ctx, `SELECT `+moneyColumns+` FROM credits WHERE account_id = ? AND id < ? ORDER BY id DESC LIMIT ?`,
		accountID, before, limit+1)
	if err != nil {
		return HistoryPage{}, fmt.Errorf("ledger: history: %w", err)
	}
	defer rows.Close()
	var page HistoryPage
	for rows.Next() {
		e, err := scanMoney(rows)
		if err != nil {
			return HistoryPage{}, fmt.Errorf("ledger: history: %w", err)
		}
		page.Entries = append(page.Entries, e)
	}
	if err := rows.Err(); err != nil {
		return HistoryPage{}, fmt.Errorf("ledger: history: %w", err)
	}
	if len(page.Entries) > limit {
		page.Entries = page.Entries[:limit]
		page.Next = page.Entries[limit-1].ID
	}
	return page, nil
}
