package ledger

import (
	"math"
	"time"
)

// The month's spend: what an account was charged in the current
// calendar month (UTC), which a plan's volume tiers read on every request
// (docs/billing.md, "Plan discounts and volume tiers"). It is kept, with the month it
// counts, on the account's row (accounts.month_spend and spend_month,
// the month as year·100 + month: 202507), updated by the transaction
// that debits each settle, so that it costs nothing to read:
//
//   - SQLite: the account's in-memory state carries it (loaded with the
//     account, updated when a settle commits), and Reserve reads it there.
//   - PostgreSQL: Reserve reads it from the account row it locks anyway, so
//     that every instance sees the spend that every other has settled.
//
// A settle counts in the month of its usage row (CreatedAt): a row of a
// later month than the account's starts that month's count afresh, one of
// an earlier month (a settle retried across the boundary) counts for its
// own month only, which is over. A month the account has no settle in
// yet reads as zero. What counts is what was charged (Charged), after
// discounts: the figure the customer's usage views add up.

// monthOf is the calendar month (UTC) of t as year·100 + month. A usage
// record's CreatedAt is its caller's and may be any time: a month beyond
// the int32 range (a year past ±21 million) is the range's end, so months
// stay in order.
func monthOf(t time.Time) int32 {
	y, m, _ := t.UTC().Date()
	month := int64(y)*100 + int64(m)
	switch {
	case month > math.MaxInt32:
		return math.MaxInt32
	case month < math.MinInt32:
		return math.MinInt32
	}
	return int32(month)
}

// monthSpend is a month's spend: the month it counts (year·100 + month)
// and what was charged in it. The account's is guarded by its mu.
type monthSpend struct {
	month int32
	spend Money
}

// in is the spend in month: zero when the count is of another month.
func (m monthSpend) in(month int32) Money {
	if m.month != month {
		return 0
	}
	return m.spend
}

// add counts a charge made in month (see above): a later month starts
// afresh, an earlier one is not counted.
func (m *monthSpend) add(month int32, charged Money) {
	countCharge(&m.month, &m.spend, month, charged)
}

// countCharge counts a charge made in period at (a month, or a period's
// start: later periods are greater) in the spend *spend of period *cur: a
// later period starts its count afresh, an earlier one is not counted. It
// is the one rule of an account's month's spend and a capped key's period
// spend (keylimits.go).
func countCharge[T int32 | int64](cur *T, spend *Money, at T, charged Money) {
	switch {
	case charged == 0 || at < *cur:
	case at > *cur:
		*cur, *spend = at, charged
	default:
		*spend += charged
	}
}

// MonthSpend is what the hold's account had been charged in the current
// calendar month (UTC) by the settles committed before the hold was taken:
// the figure a plan's volume tiers read (docs/billing.md, "Plan discounts
// and volume tiers"). The count is the one the reserve read (with
// PostgreSQL every instance's, from the account row in the reserve's own
// transaction, for a hold of ReserveWithMonthSpend; a hold of Reserve may
// be carved from this instance's advance on the account, whose count is
// the one the advance's last raise read); the month is the ledger clock's
// when MonthSpend is called, so a count of an earlier month reads as zero. Call it once, when the
// hold is taken: it reads the clock.
func (h *Hold) MonthSpend() Money {
	return monthSpend{h.spendMonth, h.spent}.in(monthOf(h.s.now()))
}
