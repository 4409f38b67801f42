package ledger

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// clock is a settable ledger clock (Options.Now).
type clock struct{ ms atomic.Int64 }

func newClock(t time.Time) *clock {
	c := new(clock)
	c.set(t)
	return c
}

func (c *clock) set(t time.Time)     { c.ms.Store(t.UnixMilli()) }
func (c *clock) now() time.Time      { return time.UnixMilli(c.ms.Load()).UTC() }
func (c *clock) option(o *Options)   { o.Now = c.now }
func (c *clock) add(d time.Duration) { c.ms.Add(d.Milliseconds()) }

// monthStart is the first instant of the calendar month (UTC) of t.
func monthStart(t time.Time) time.Time {
	y, m, _ := t.UTC().Date()
	return time.Date(y, m, 1, 0, 0, 0, 0, time.UTC)
}

func TestMonthOf(t *testing.T) {
	for _, tt := range []struct {
		at   time.Time
		want int32
	}{
		{time.Date(2025, 1, 31, 23, 59, 59, 999e6, time.UTC), 202501},
		{time.Date(2025, 2, 1, 0, 0, 0, 0, time.UTC), 202502},
		{time.Date(2025, 12, 31, 23, 0, 0, 0, time.UTC), 202512},
		// the month is UTC's: 1 February, 01:00 in Paris is still January
		{time.Date(2025, 2, 1, 0, 30, 0, 0, time.FixedZone("CET", 3600)), 202501},
		// a caller's CreatedAt beyond the int32 months ends at the range's end
		{time.Date(21474836, 12, 1, 0, 0, 0, 0, time.UTC), 2147483612},
		{time.Date(21474837, 1, 1, 0, 0, 0, 0, time.UTC), math.MaxInt32},
		{time.UnixMilli(math.MaxInt64), math.MaxInt32},
		{time.Date(-21474836, 1, 1, 0, 0, 0, 0, time.UTC), -2147483599},
		{time.Date(-21474837, 1, 1, 0, 0, 0, 0, time.UTC), math.MinInt32},
	} {
		if got := monthOf(tt.at); got != tt.want {
			t.Errorf("monthOf(%v) = %d, want %d", tt.at, got, tt.want)
		}
	}
	var m monthSpend
	for _, step := range []struct {
		month   int32
		charged Money
		want    monthSpend
	}{
		{202501, 10, monthSpend{202501, 10}},
		{202501, 5, monthSpend{202501, 15}},
		{202412, 100, monthSpend{202501, 15}}, // an earlier month is over
		{202501, 0, monthSpend{202501, 15}},
		{202502, 7, monthSpend{202502, 7}}, // a later month starts afresh
		{202503, 0, monthSpend{202502, 7}}, // nothing charged: nothing counted
	} {
		m.add(step.month, step.charged)
		if m != step.want {
			t.Fatalf("after %d in %d: %+v, want %+v", step.charged, step.month, m, step.want)
		}
	}
	if m.in(202502) != 7 || m.in(202503) != 0 || m.in(202501) != 0 {
		t.Fatalf("in: %+v", m)
	}
}

// TestMonthSpend: a hold reports what its account was charged in the
// current calendar month (UTC) by the settles before it; a new month
// starts from zero; a settle whose row belongs to an earlier month does
// not count in the new one; the figure survives a restart, and Audit
// recomputes it from the rows.
func TestMonthSpend(t *testing.T) { backends(t, testMonthSpend) }

func testMonthSpend(t *testing.T, b backend) {
	ctx := context.Background()
	clk := newClock(time.Date(2025, 1, 31, 23, 59, 0, 0, time.UTC))
	db := b.db(t)
	s := b.openAt(t, db, clk.option)
	a := mustAccount(t, s, 1_000_000)
	_, k, err := s.CreateKey(ctx, a.ID, "k")
	if err != nil {
		t.Fatal(err)
	}
	hold := func(want Money) *Hold {
		t.Helper()
		h, err := s.Reserve(a.ID, 1, 1000)
		if err != nil {
			t.Fatal(err)
		}
		if got := h.MonthSpend(); got != want {
			t.Fatalf("at %v: MonthSpend = %d, want %d", clk.now(), got, want)
		}
		return h
	}
	settle := func(h *Hold, id string, cost Money, at time.Time) {
		t.Helper()
		r := usage(id, k.ID, cost)
		r.CreatedAt, r.TierBps, r.Discount = at, 500, cost/10
		if err := h.Settle(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	monthSpend := func(want Money) {
		t.Helper()
		acct, err := s.GetAccount(ctx, a.ID)
		if err != nil {
			t.Fatal(err)
		}
		if acct.MonthSpend != want {
			t.Fatalf("at %v: GetAccount's MonthSpend = %d, want %d", clk.now(), acct.MonthSpend, want)
		}
	}

	monthSpend(0)
	h1 := hold(0)
	settle(h1, "jan-1", 100, time.Time{}) // dated by the ledger's clock: January
	monthSpend(100)
	h2 := hold(100)
	h3 := hold(100) // taken before h2 settles: h2's charge is not in it
	settle(h2, "jan-2", 50, clk.now())
	monthSpend(150)
	if h3.MonthSpend() != 100 {
		t.Fatalf("a hold's figure changed after it was taken: %d", h3.MonthSpend())
	}

	// February, UTC: the count starts again
	clk.add(2 * time.Minute)
	monthSpend(0)
	h4 := hold(0)
	settle(h3, "jan-3", 30, clk.now().Add(-2*time.Minute)) // January's row, settled in February
	monthSpend(0)
	settle(h4, "feb-1", 40, time.Time{})
	monthSpend(40)
	h5 := hold(40)
	settle(h5, "jan-late", 1000, time.Date(2025, 1, 15, 0, 0, 0, 0, time.UTC)) // January's again
	monthSpend(40)
	h6 := hold(40)
	h6.Release()
	h7 := hold(40)
	settle(h7, "feb-zero", 0, time.Time{})
	monthSpend(40)
	mustAudit(t, s)

	// the rows say the tier's discount and what the discounts took off
	rows, err := s.UsageRows(ctx, UsageFilter{AccountID: a.ID})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		if r.TierBps != 500 || r.Discount != r.Cost/10 || r.DiscountBps != 1500 {
			t.Fatalf("row %s: tier %d discount %d of cost %d", r.RequestID, r.TierBps, r.Discount, r.Cost)
		}
	}
	daily, err := s.DailyUsageRows(ctx, a.ID, "", "")
	if err != nil {
		t.Fatal(err)
	}
	var discount Money
	for _, d := range daily {
		discount += d.Discount
	}
	if discount != (100+50+30+40+1000)/10 {
		t.Fatalf("the rollup's discounts add up to %d", discount)
	}

	// a restart reads the figure from the account's row
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = b.openAt(t, db, clk.option)
	hold(40).Release()
	monthSpend(40)
	clk.set(time.Date(2025, 3, 1, 0, 0, 0, 0, time.UTC))
	hold(0).Release()
	monthSpend(0)
	mustAudit(t, s)

	// Audit notices a count that differs from the rows
	raw := b.raw(t, db)
	if _, err := raw.Exec(`UPDATE accounts SET month_spend = month_spend + 1 WHERE id = ?`, a.ID); err != nil {
		t.Fatal(err)
	}
	ms, err := s.Audit(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 1 || ms[0] != (Mismatch{AccountID: a.ID, Column: "accounts.month_spend", Stored: 41, Recomputed: 40}) {
		t.Fatalf("mismatches = %+v", ms)
	}
}

// TestMonthSpendShared: on one PostgreSQL ledger, a reserve on one
// instance reads what the others have settled this month, from the
// account's row.
func TestMonthSpendShared(t *testing.T) {
	ctx := context.Background()
	_, stores := openShared(t, 3)
	a := mustAccount(t, stores[0], 1_000_000)
	var want Money
	for i := range 9 {
		s := stores[i%3]
		h, err := s.Reserve(a.ID, 1, 1000)
		if err != nil {
			t.Fatal(err)
		}
		if h.MonthSpend() != want {
			t.Fatalf("reserve %d on instance %d: MonthSpend = %d, want %d", i, i%3, h.MonthSpend(), want)
		}
		cost := Money(10 * (i + 1))
		if err := h.Settle(ctx, usage("r"+string(rune('a'+i)), "", cost)); err != nil {
			t.Fatal(err)
		}
		want += cost
	}
	for _, s := range stores {
		acct, err := s.GetAccount(ctx, a.ID)
		if err != nil || acct.MonthSpend != want {
			t.Fatalf("GetAccount: %+v, %v; want a month's spend of %d", acct, err, want)
		}
	}
	mustAudit(t, stores[1])
}

// TestMonthSpendMigration: the migration that adds the month's spend
// counts the current month's charges already in the usage rows.
func TestMonthSpendMigration(t *testing.T) { backends(t, testMonthSpendMigration) }

func testMonthSpendMigration(t *testing.T, b backend) {
	ctx := context.Background()
	db := b.db(t)
	s := b.openAt(t, db)
	a := mustAccount(t, s, 1_000_000)
	other := mustAccount(t, s, 1_000)
	now := time.Now().UTC()
	for i, at := range []time.Time{now, now, monthStart(now).Add(-time.Hour)} { // the last: last month
		h, err := s.Reserve(a.ID, 1, 1000)
		if err != nil {
			t.Fatal(err)
		}
		r := usage("m"+string(rune('a'+i)), "", Money(100*(i+1)))
		r.CreatedAt = at
		if err := h.Settle(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// back to the schema before the migration
	raw := b.raw(t, db)
	undo := []string{
		`ALTER TABLE usage DROP COLUMN tier_bps`, `ALTER TABLE usage DROP COLUMN discount`,
		`ALTER TABLE usage_daily DROP COLUMN discount`,
		`ALTER TABLE accounts DROP COLUMN spend_month`, `ALTER TABLE accounts DROP COLUMN month_spend`,
	}
	// and of the migrations after it, which must apply again
	undo = append(undo, `DROP INDEX accounts_created`)
	undo = append(undo, `DROP TABLE alerts_fired`, `DROP TABLE alert_settings`, `DROP TABLE alert_deliveries`)
	if b.pg {
		undo = append(undo, `DROP TRIGGER keys_limits_changed ON keys`, `ALTER TABLE holds DROP COLUMN key_id`,
			`DROP FUNCTION mg_extend_key`, `DROP FUNCTION mg_reserve(text, bigint[], text[], bigint[], bigint[], bigint[], text[], bigint[])`,
			`DROP FUNCTION mg_key_left`)
	}
	for _, col := range strings.Split(limitColumns, ", ") {
		undo = append(undo, `ALTER TABLE keys DROP COLUMN `+col)
	}
	if !b.pg {
		undo = append(undo, `DROP TABLE usage_by_key`, `DROP TABLE usage_rollup`, `CREATE INDEX usage_key ON usage (key_id, created_at)`)
	}
	isMonthSpend := func(m string) bool { return strings.Contains(m, "ADD COLUMN month_spend") }
	if b.pg {
		undo = append(undo, `UPDATE ledger_schema SET version = `+strconv.Itoa(slices.IndexFunc(pgMigrations, isMonthSpend)))
	} else {
		undo = append(undo, `PRAGMA user_version = `+strconv.Itoa(slices.IndexFunc(migrations, isMonthSpend)))
	}
	for _, q := range undo {
		if _, err := raw.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	s = b.openAt(t, db)
	for _, tt := range []struct {
		id   string
		want Money
	}{{a.ID, 100 + 200}, {other.ID, 0}} {
		acct, err := s.GetAccount(ctx, tt.id)
		if err != nil || acct.MonthSpend != tt.want {
			t.Fatalf("after the migration: %+v, %v; want a month's spend of %d", acct, err, tt.want)
		}
	}
	mustAudit(t, s)
}

// TestMonthSpendConcurrent: requests on one account, settled at once from
// several goroutines (on PostgreSQL, through three instances of one
// ledger): a hold of ReserveWithMonthSpend sees at least every charge whose
// settle had returned before it was taken, never more than was charged in
// all, and the month's spend ends as the sum of the rows on every
// instance. (The account is busy and rich: Reserve would carve holds from
// advances, whose count lags other instances' settles.)
func TestMonthSpendConcurrent(t *testing.T) { backends(t, testMonthSpendConcurrent) }

func testMonthSpendConcurrent(t *testing.T, b backend) {
	ctx := context.Background()
	var stores []*Store
	if b.pg {
		_, stores = openShared(t, 3)
	} else {
		stores = []*Store{b.open(t)}
	}
	a := mustAccount(t, stores[0], 1_000_000_000)
	const workers, each = 8, 25
	var settled, started atomic.Int64 // charges whose settle returned, and begun
	errs := make(chan error, workers)
	for w := range workers {
		go func() {
			s := stores[w%len(stores)]
			for i := range each {
				floor := Money(settled.Load())
				h, err := s.ReserveWithMonthSpend(a.ID, 1, 10_000)
				if err != nil {
					errs <- err
					return
				}
				if got := h.MonthSpend(); got < floor || got > Money(started.Load()) {
					errs <- fmt.Errorf("worker %d, request %d: MonthSpend %d, outside [%d, %d]", w, i, got, floor, started.Load())
					h.Release()
					return
				}
				cost := Money(1 + w*each + i)
				started.Add(int64(cost))
				if err := h.Settle(ctx, usage(fmt.Sprintf("c-%d-%d", w, i), "", cost)); err != nil {
					errs <- err
					return
				}
				settled.Add(int64(cost))
			}
			errs <- nil
		}()
	}
	for range workers {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	for i, s := range stores {
		acct, err := s.GetAccount(ctx, a.ID)
		if err != nil || acct.MonthSpend != Money(settled.Load()) || acct.Balance != 1_000_000_000-Money(settled.Load()) {
			t.Fatalf("instance %d: %+v, %v; want a month's spend of %d", i, acct, err, settled.Load())
		}
		h, err := s.ReserveWithMonthSpend(a.ID, 1, 1)
		if err != nil || h.MonthSpend() != Money(settled.Load()) {
			t.Fatalf("instance %d: a hold after the settles sees %d, %v; want %d", i, h.MonthSpend(), err, settled.Load())
		}
		h.Release()
	}
	mustAudit(t, stores[0])
}
