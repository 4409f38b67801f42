package ledger

// The SQLite engine's holds: they live in this process's memory, as the
// account's held, against the balance it keeps in memory beside the
// database's (one server process owns the file).

import (
	"context"
	"strings"
)

// sharedHolds is false: a CLI beside a running gateway sees none of its
// holds.
func (e *sqliteEngine) sharedHolds() bool { return false }

// reserve grants min(max, balance − held) in memory, and no more than
// the key's cap leaves when bound is set.
func (e *sqliteEngine) reserve(a *account, bound *keyCap, min, max Money, _ bool) (*Hold, error) {
	s := e.s
	a.mu.Lock()
	available := a.balance - a.held
	var b *keyBudget
	if bound != nil {
		b = &bound.e.budget
		b.mu.Lock()
		if left := b.left(bound.lim, bound.now); left < available {
			if left <= 0 || left < min {
				b.mu.Unlock()
				a.mu.Unlock()
				return nil, capError(bound.e, bound.lim, bound.now)
			}
			available = left
		}
	}
	if available <= 0 || available < min {
		if b != nil {
			b.mu.Unlock()
		}
		a.mu.Unlock()
		return nil, ErrInsufficientFunds
	}
	grant := max
	if available < grant {
		grant = available
	}
	a.held += grant
	h := &Hold{s: s, acct: a, amount: grant, spendMonth: a.spend.month, spent: a.spend.spend}
	if b != nil {
		b.held += grant
		b.mu.Unlock()
		h.key = bound.e
	}
	a.mu.Unlock()
	s.outstanding.Add(int64(grant))
	s.openHolds.Add(1)
	return h, nil
}

// extend takes the extra from what the account has available in memory,
// and no more than the key's cap leaves.
func (e *sqliteEngine) extend(h *Hold, extra Money) (Money, error) {
	a := h.acct
	a.mu.Lock()
	if avail := a.balance - a.held; extra > avail {
		extra = max(avail, 0)
	}
	if h.key != nil {
		b := &h.key.budget
		b.mu.Lock()
		if l := h.key.limits.Load(); l.Capped() {
			extra = max(min(extra, b.left(l, e.s.now())), 0)
		}
		b.held += extra
		b.mu.Unlock()
	}
	a.held += extra
	h.amount += extra
	a.mu.Unlock()
	if extra != 0 {
		e.s.outstanding.Add(int64(extra))
	}
	return extra, nil
}

// settled does nothing: the writer applied the settle in memory as its
// batch committed (apply).
func (e *sqliteEngine) settled(*Hold, *command, Money) {}

func (e *sqliteEngine) unhold(h *Hold) {
	h.acct.held -= h.amount
	h.key.unhold(h.amount)
}

// releaseRow does nothing: the hold was only in memory.
func (e *sqliteEngine) releaseRow(*Hold) {}

// localHeld sets a.Held from the cached account, if it is cached.
func (e *sqliteEngine) localHeld(a *Account) {
	if m := e.s.cachedAccount(a.ID); m != nil {
		m.mu.Lock()
		a.Held = m.held
		m.mu.Unlock()
	}
}

// heldOf sets the Held of the accounts that have holds in this process's
// memory, with their balance read again at the same moment: as in
// GetAccount, under loadMu, so that a batch's commit and its effect on the
// holds are seen together. The listing's own query runs without loadMu,
// which would stop the writer's commits for as long as it took; this one
// reads the page's accounts by key.
func (e *sqliteEngine) heldOf(ctx context.Context, accts []Account) error {
	s := e.s
	byID := map[string]*Account{}
	for i := range accts {
		if s.cachedAccount(accts[i].ID) != nil {
			byID[accts[i].ID] = &accts[i]
		}
	}
	if len(byID) == 0 {
		return nil
	}
	args := make([]any, 0, len(byID))
	for id := range byID {
		args = append(args, id)
	}
	q := `SELECT id, balance FROM accounts WHERE id IN (?` + strings.Repeat(", ?", len(args)-1) + `)`
	s.loadMu.RLock()
	defer s.loadMu.RUnlock()
	rows, err := s.query(ctx, q, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		var balance Money
		if err := rows.Scan(&id, &balance); err != nil {
			return err
		}
		a := byID[id]
		a.Balance = balance
		if m := s.cachedAccount(id); m != nil {
			m.mu.Lock()
			a.Held = m.held
			m.mu.Unlock()
		}
	}
	return rows.Err()
}
