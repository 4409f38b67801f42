package ledger

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
)

// A key's own limits (docs/api.md, "Keys as projects"): a spend cap that
// starts afresh every period, the models it may call, when it expires, and
// its own request rate and concurrency. The cap is kept by the ledger,
// through the hold: a reserve on the key takes no more than what the cap
// leaves, so concurrent requests, on any number of instances, never spend
// more than the cap. The other limits are the gateway's to enforce; the
// ledger stores them with the key.

// Period is how often a key's spend cap starts afresh, in UTC.
type Period string

// The periods of a key's cap.
const (
	PeriodNever Period = "never" // the cap counts every charge since it was set
	PeriodDay   Period = "day"   // from 00:00 UTC
	PeriodWeek  Period = "week"  // from Monday 00:00 UTC
	PeriodMonth Period = "month" // from the 1st, 00:00 UTC
)

// ParsePeriod reads a period by its name; "" is PeriodNever.
func ParsePeriod(s string) (Period, error) {
	switch p := Period(strings.ToLower(strings.TrimSpace(s))); p {
	case "", PeriodNever:
		return PeriodNever, nil
	case PeriodDay, PeriodWeek, PeriodMonth:
		return p, nil
	}
	return "", fmt.Errorf("reset period %q: use day, week, month or never", s)
}

// Start is the start, in unix milliseconds, of the period that t is in: 0
// for PeriodNever.
func (p Period) Start(t time.Time) int64 {
	t = t.UTC()
	y, m, d := t.Date()
	switch p {
	case PeriodDay:
		return time.Date(y, m, d, 0, 0, 0, 0, time.UTC).UnixMilli()
	case PeriodWeek:
		back := (int(t.Weekday()) + 6) % 7 // days since Monday
		return time.Date(y, m, d-back, 0, 0, 0, 0, time.UTC).UnixMilli()
	case PeriodMonth:
		return time.Date(y, m, 1, 0, 0, 0, 0, time.UTC).UnixMilli()
	}
	return 0
}

// Next is when the period that t is in ends and the cap starts afresh; the
// zero time for PeriodNever.
func (p Period) Next(t time.Time) time.Time {
	start := time.UnixMilli(p.Start(t)).UTC()
	switch p {
	case PeriodDay:
		return start.AddDate(0, 0, 1)
	case PeriodWeek:
		return start.AddDate(0, 0, 7)
	case PeriodMonth:
		return start.AddDate(0, 1, 0)
	}
	return time.Time{}
}

// KeyLimits are a key's own limits; each is optional, and its zero value
// is no limit.
type KeyLimits struct {
	// Cap is the most the key may spend in a Period (0: no cap).
	Cap    Money
	Period Period
	// Models are the model ids and patterns (* stands for any run of
	// characters) the key may call, within the account's plan; nil: all.
	Models []string
	// ExpiresAt is when the key stops working (zero: never).
	ExpiresAt time.Time
	// RPM and Concurrency are the key's own requests per minute and
	// requests at once (0: the plan's alone).
	RPM, Concurrency int
}

// MaxKeyModels bounds a key's model list.
const MaxKeyModels = 100

// Validate checks the limits' ranges.
func (l *KeyLimits) Validate() error {
	switch {
	case l.Cap < 0:
		return errors.New("cap: must not be negative")
	case l.RPM < 0:
		return errors.New("rpm: must not be negative")
	case l.Concurrency < 0:
		return errors.New("concurrency: must not be negative")
	case len(l.Models) > MaxKeyModels:
		return fmt.Errorf("models: at most %d entries", MaxKeyModels)
	}
	if _, err := ParsePeriod(string(l.Period)); err != nil {
		return err
	}
	for _, m := range l.Models {
		if strings.TrimSpace(m) == "" || len(m) > 200 {
			return fmt.Errorf("models: %q is not a model id or pattern", m)
		}
	}
	return nil
}

// normalize validates the limits, as a key stores them, and names their
// period as the ledger keeps it ("" is PeriodNever, " Day" PeriodDay).
func (l *KeyLimits) normalize() error {
	if err := l.Validate(); err != nil {
		return err
	}
	l.Period, _ = ParsePeriod(string(l.Period))
	return nil
}

// Capped reports whether the limits have a spend cap.
func (l *KeyLimits) Capped() bool { return l != nil && l.Cap > 0 }

// Expired reports whether the key has expired at now.
func (l *KeyLimits) Expired(now time.Time) bool {
	return l != nil && !l.ExpiresAt.IsZero() && !now.Before(l.ExpiresAt)
}

// None reports whether the limits limit nothing.
func (l *KeyLimits) None() bool {
	return l == nil || (l.Cap == 0 && l.Models == nil && l.ExpiresAt.IsZero() && l.RPM == 0 && l.Concurrency == 0)
}

// period is the cap's period, PeriodNever when unset.
func (l *KeyLimits) period() Period {
	if l.Period == "" {
		return PeriodNever
	}
	return l.Period
}

// ErrKeyCapReached is what a reserve on a key whose spend cap does not
// cover the request returns (wrapped in a *KeyCapError).
var ErrKeyCapReached = errors.New("ledger: the key's spend cap is reached")

// KeyCapError says which cap refused a reserve, and when it starts afresh.
type KeyCapError struct {
	KeyID    string
	Cap      Money
	Period   Period
	ResetsAt time.Time // zero for PeriodNever
}

func (e *KeyCapError) Error() string {
	return fmt.Sprintf("ledger: key %s: its spend cap of %s (%s) does not cover the request", e.KeyID, e.Cap, e.Period)
}

// Is makes errors.Is(err, ErrKeyCapReached) true.
func (e *KeyCapError) Is(target error) bool { return target == ErrKeyCapReached }

// capError is the refusal of a reserve on key k by its cap.
func capError(k *keyEntry, l *KeyLimits, now time.Time) error {
	return &KeyCapError{KeyID: k.principal.KeyID, Cap: l.Cap, Period: l.period(), ResetsAt: l.period().Next(now)}
}

// keyCap is the cap a reserve is bound by: key e's, as its limits were
// (lim) at now.
type keyCap struct {
	e   *keyEntry
	lim *KeyLimits
	now time.Time
}

// start is the start of the cap's period at the reserve.
func (k *keyCap) start() int64 { return k.lim.period().Start(k.now) }

// keyBudget is what a capped key has spent in its period and holds, on
// SQLite, where this process keeps every hold in memory (PostgreSQL keeps
// both on the key's row and its holds' rows). Lock order: the account's mu,
// then the budget's.
type keyBudget struct {
	mu    sync.Mutex
	spend periodSpend
	held  Money
}

// left is what the cap leaves at now: the cap less the period's spend and
// what is held.
func (b *keyBudget) left(l *KeyLimits, now time.Time) Money {
	return l.Cap - b.spend.in(l.period().Start(now)) - b.held
}

// keyLimitsOf is e's limits now (nil for a nil entry or none).
func keyLimitsOf(e *keyEntry) *KeyLimits {
	if e == nil {
		return nil
	}
	return e.limits.Load()
}

// unhold takes a hold of amount off the key's budget (a nil entry: a hold
// bound by no key).
func (e *keyEntry) unhold(amount Money) {
	if e == nil {
		return
	}
	e.budget.mu.Lock()
	e.budget.held -= amount
	e.budget.mu.Unlock()
}

// periodSpend is a key's spend in the period that starts at start (unix
// ms), counted as an account's month's spend is (spend.go): a charge of a
// later period starts that period's count afresh, one of an earlier period
// (a settle across the boundary) is not counted.
type periodSpend struct {
	start int64
	spend Money
}

// in is the spend in the period that starts at start: zero when the count
// is of an earlier one.
func (p periodSpend) in(start int64) Money {
	if p.start < start {
		return 0
	}
	return p.spend
}

// add counts a charge made in the period that starts at start.
func (p *periodSpend) add(start int64, charged Money) {
	countCharge(&p.start, &p.spend, start, charged)
}
