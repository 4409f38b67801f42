package ledger

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestPeriodStartAndNext(t *testing.T) {
	at := time.Date(2026, 11, 29, 17, 30, 0, 0, time.UTC) // a Sunday
	for _, tt := range []struct {
		p           Period
		start, next time.Time
	}{
		{PeriodDay, time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC), time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)},
		{PeriodWeek, time.Date(2026, 11, 23, 0, 0, 0, 0, time.UTC), time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)},
		{PeriodMonth, time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)},
		{PeriodNever, time.UnixMilli(0).UTC(), time.Time{}},
	} {
		if got := time.UnixMilli(tt.p.Start(at)).UTC(); !got.Equal(tt.start) {
			t.Errorf("%s: start %v, want %v", tt.p, got, tt.start)
		}
		if got := tt.p.Next(at); !got.Equal(tt.next) {
			t.Errorf("%s: next %v, want %v", tt.p, got, tt.next)
		}
	}
	// a Monday starts its own week; a time in another zone counts in UTC
	mon := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	if got := PeriodWeek.Start(mon); got != mon.UnixMilli() {
		t.Errorf("Monday: week starts %v", time.UnixMilli(got).UTC())
	}
	tokyo := time.FixedZone("JST", 9*3600)
	if got := PeriodDay.Start(time.Date(2026, 11, 30, 8, 0, 0, 0, tokyo)); got != time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC).UnixMilli() {
		t.Errorf("a Tokyo morning counts in the UTC day before: %v", time.UnixMilli(got).UTC())
	}
	for _, bad := range []string{"hourly", "days", "1d"} {
		if _, err := ParsePeriod(bad); err == nil {
			t.Errorf("ParsePeriod(%q) accepted", bad)
		}
	}
}

func TestKeyLimitsValidate(t *testing.T) {
	for _, tt := range []struct {
		name string
		l    KeyLimits
		ok   bool
	}{
		{"none", KeyLimits{}, true},
		{"all", KeyLimits{Cap: 5 * NanosPerUnit, Period: PeriodDay, Models: []string{"gpt-*"}, RPM: 10, Concurrency: 2,
			ExpiresAt: time.Now().Add(time.Hour)}, true},
		{"negative cap", KeyLimits{Cap: -1}, false},
		{"negative rpm", KeyLimits{RPM: -1}, false},
		{"negative concurrency", KeyLimits{Concurrency: -1}, false},
		{"unknown period", KeyLimits{Cap: 1, Period: "hour"}, false},
		{"empty model", KeyLimits{Models: []string{" "}}, false},
	} {
		if err := tt.l.Validate(); (err == nil) != tt.ok {
			t.Errorf("%s: Validate() = %v", tt.name, err)
		}
	}
}

// keyPrincipal authenticates a new key of account with limits l on s.
func keyPrincipal(t *testing.T, s *Store, account string, l KeyLimits) (string, Principal) {
	t.Helper()
	secret, _, err := s.CreateKeyWithLimits(context.Background(), account, "project", l)
	if err != nil {
		t.Fatal(err)
	}
	p, err := s.Authenticate(secret)
	if err != nil {
		t.Fatal(err)
	}
	return secret, p
}

// keySpent is what the usage rows of key charged, read from the database.
func keySpent(t *testing.T, s *Store, key string, from, to time.Time) (Money, int64) {
	t.Helper()
	var spent Money
	var n int64
	err := s.queryRow(context.Background(), `SELECT coalesce(sum(charged), 0), count(*) FROM usage WHERE key_id = ? AND created_at >= ? AND created_at < ?`,
		key, from.UnixMilli(), to.UnixMilli()).Scan(&spent, &n)
	if err != nil {
		t.Fatal(err)
	}
	return spent, n
}

// TestKeyCapConcurrent: 200 requests at once on a key capped at about ten
// requests' worth (on PostgreSQL through three instances of one ledger),
// some of them costing more than their hold: the key's charges never
// exceed the cap, every granted request has its usage row, the key's
// period spend is the sum of its rows, and the account's other key keeps
// working throughout.
func TestKeyCapConcurrent(t *testing.T) { backends(t, testKeyCapConcurrent) }

func testKeyCapConcurrent(t *testing.T, b backend) {
	ctx := context.Background()
	stores := []*Store{b.open(t)}
	if b.pg {
		_, stores = openShared(t, 3)
	}
	a := mustAccount(t, stores[0], 1_000_000)
	const hold, capAmount = 1000, 10_500
	secret, capped := keyPrincipal(t, stores[0], a.ID, KeyLimits{Cap: capAmount, Period: PeriodMonth})
	_, other := keyPrincipal(t, stores[0], a.ID, KeyLimits{})

	const requests, others = 200, 50
	var wg sync.WaitGroup
	var mu sync.Mutex
	granted, refused, otherOK := 0, 0, 0
	var failures []error
	run := func(i int, p Principal, cost Money) {
		defer wg.Done()
		s := stores[i%len(stores)]
		if p.KeyID == capped.KeyID {
			var err error
			if p, err = s.Authenticate(secret); err != nil {
				mu.Lock()
				failures = append(failures, err)
				mu.Unlock()
				return
			}
		}
		h, err := s.ReserveForKey(p, 500, hold, false)
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			if errors.Is(err, ErrKeyCapReached) && p.KeyID == capped.KeyID {
				refused++
			} else {
				failures = append(failures, fmt.Errorf("request %d on %s: %w", i, p.KeyID, err))
			}
			return
		}
		mu.Unlock()
		err = h.Settle(ctx, usage(fmt.Sprintf("r-%s-%d", p.KeyID, i), p.KeyID, cost))
		mu.Lock()
		switch {
		case err != nil:
			failures = append(failures, err)
		case p.KeyID == capped.KeyID:
			granted++
		default:
			otherOK++
		}
	}
	for i := range requests {
		wg.Add(1)
		cost := Money(600 + i%400)
		if i%7 == 0 {
			cost = 1800 // beyond its hold: the over-hold is bounded by the cap too
		}
		go run(i, capped, cost)
		if i < others {
			wg.Add(1)
			go run(i, other, 700)
		}
	}
	wg.Wait()
	for _, err := range failures {
		t.Error(err)
	}
	spent, rows := keySpent(t, stores[0], capped.KeyID, time.UnixMilli(0), time.Now().Add(time.Hour))
	t.Logf("%d granted, %d refused by the cap; the key spent %d of %d", granted, refused, spent, capAmount)
	if spent > capAmount {
		t.Fatalf("the key spent %d, above its cap %d", spent, capAmount)
	}
	if int(rows) != granted || granted < capAmount/(2*hold) || refused != requests-granted {
		t.Fatalf("%d usage rows for %d granted requests (%d refused)", rows, granted, refused)
	}
	// what the cap leaves once nothing is held is granted (the storm was
	// refused while holds in flight took the rest)
	if left := capAmount - spent; left >= 500 {
		h, err := stores[len(stores)-1].ReserveForKey(capped, 500, hold, false)
		if err != nil || h.Amount() != min(left, hold) {
			t.Fatalf("a reserve for the %d left: %v, %v", left, h, err)
		}
		h.Release()
	}
	if otherOK != others {
		t.Errorf("the account's other key: %d of %d requests went through", otherOK, others)
	}
	// the account paid for what both keys' rows charged, no more
	otherSpent, otherRows := keySpent(t, stores[0], other.KeyID, time.UnixMilli(0), time.Now().Add(time.Hour))
	if int(otherRows) != others {
		t.Errorf("the other key has %d usage rows, want %d", otherRows, others)
	}
	for i, s := range stores {
		if got := balanceOf(t, s, a.ID).Balance; got != 1_000_000-spent-otherSpent {
			t.Errorf("instance %d: balance %d, want %d less the keys' %d and %d", i, got, 1_000_000, spent, otherSpent)
		}
	}
	for i, s := range stores {
		k, err := s.KeyByID(ctx, capped.KeyID)
		if err != nil || k.SpentThisPeriod(time.Now()) != spent || k.Left(time.Now()) != capAmount-spent {
			t.Errorf("instance %d: key %+v, %v; want a period spend of %d", i, k, err, spent)
		}
		if _, err := s.ReserveForKey(capped, capAmount-spent+1, capAmount, false); !errors.Is(err, ErrKeyCapReached) {
			t.Errorf("instance %d: a reserve beyond what the cap leaves: %v", i, err)
		}
	}
	mustAudit(t, stores[0])
}

// TestKeyCapRollover: a daily cap under load across midnight (UTC): the
// charges of each day stay within the cap, the new day starts afresh, and
// a hold taken before midnight and settled after it counts in the new day
// (its settle's), where it was already held against the cap.
func TestKeyCapRollover(t *testing.T) { backends(t, testKeyCapRollover) }

func testKeyCapRollover(t *testing.T, b backend) {
	ctx := context.Background()
	midnight := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	clk := newClock(midnight.Add(-2 * time.Second))
	stores := []*Store{b.open(t, clk.option)}
	if b.pg {
		_, stores = openShared(t, 3, clk.option)
	}
	a := mustAccount(t, stores[0], 10_000_000)
	const capAmount = 5000
	_, p := keyPrincipal(t, stores[0], a.ID, KeyLimits{Cap: capAmount, Period: PeriodDay})

	var wg sync.WaitGroup
	var mu sync.Mutex
	var failures []error
	granted := 0
	var settled atomic.Int64
	request := func(i int) {
		defer wg.Done()
		s := stores[i%len(stores)]
		h, err := s.ReserveForKey(p, 200, 400, false)
		if errors.Is(err, ErrKeyCapReached) {
			return
		}
		if err == nil {
			time.Sleep(time.Duration(i%5) * time.Millisecond) // some holds outlive the day
			err = h.Settle(ctx, usage(fmt.Sprintf("roll-%d", i), p.KeyID, Money(200+i)))
		}
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			failures = append(failures, err)
			return
		}
		granted++
		settled.Add(1)
	}
	for i := range 120 {
		if i == 60 {
			for settled.Load() < 5 {
				time.Sleep(time.Millisecond)
			}
			clk.set(midnight.Add(time.Second)) // the day turns under load
		}
		wg.Add(1)
		go request(i)
	}
	wg.Wait()
	for _, err := range failures {
		t.Fatal(err)
	}
	before, n1 := keySpent(t, stores[0], p.KeyID, midnight.Add(-24*time.Hour), midnight)
	after, n2 := keySpent(t, stores[0], p.KeyID, midnight, midnight.Add(24*time.Hour))
	t.Logf("%d granted: %d requests spent %d before midnight, %d spent %d after", granted, n1, before, n2, after)
	if before > capAmount || after > capAmount {
		t.Fatalf("a day's spend above the cap %d: %d before midnight, %d after", capAmount, before, after)
	}
	if after == 0 || before == 0 {
		t.Fatalf("both days should have spent: %d before midnight, %d after", before, after)
	}
	k, err := stores[len(stores)-1].KeyByID(ctx, p.KeyID)
	if err != nil || k.SpentThisPeriod(clk.now()) != after || !k.ResetsAt(clk.now()).Equal(midnight.Add(24*time.Hour)) {
		t.Fatalf("key %+v, %v: want the new day's spend %d, resetting at the next midnight", k, err, after)
	}
	// the next day starts afresh again
	clk.set(midnight.Add(24*time.Hour + time.Second))
	h, err := stores[0].ReserveForKey(p, capAmount, capAmount, false)
	if err != nil {
		t.Fatalf("a whole cap on the next day: %v", err)
	}
	h.Release()
}

// TestKeyCapChanged: a cap lowered below the period's spend refuses the
// key's next request (saying when it resets) and leaves nothing, on every
// instance; raised again, it lets requests through; a cap set on a key
// that had none counts what the key spent in the period before it; a
// released hold gives its amount back to the cap; a cap removed lifts the
// bound.
func TestKeyCapChanged(t *testing.T) { backends(t, testKeyCapChanged) }

func testKeyCapChanged(t *testing.T, b backend) {
	ctx := context.Background()
	stores := []*Store{b.open(t)}
	if b.pg {
		_, stores = openShared(t, 2)
	}
	s := stores[0]
	a := mustAccount(t, s, 1_000_000)
	secret, p := keyPrincipal(t, s, a.ID, KeyLimits{})
	// each request authenticates its key, as the gateway does
	auth := func(st *Store) Principal {
		t.Helper()
		p, err := st.Authenticate(secret)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	spend := func(s *Store, id string, cost Money) {
		t.Helper()
		h, err := s.ReserveForKey(auth(s), cost, cost, false)
		if err != nil {
			t.Fatalf("%s: %v", id, err)
		}
		if err := h.Settle(ctx, usage(id, p.KeyID, cost)); err != nil {
			t.Fatal(err)
		}
	}
	spend(s, "before-cap", 600)

	// a cap set now counts the month's 600 already spent
	k, err := s.SetKeyLimits(ctx, p.KeyID, KeyLimits{Cap: 1000, Period: PeriodMonth})
	if err != nil || k.SpentThisPeriod(time.Now()) != 600 || k.Left(time.Now()) != 400 {
		t.Fatalf("cap set: %+v, %v; want 600 spent and 400 left", k, err)
	}
	h, err := s.ReserveForKey(auth(s), 1, 1000, false)
	if err != nil || h.Amount() != 400 {
		t.Fatalf("the hold is what the cap leaves (400): %v, %v", h, err)
	}
	if _, err := s.ReserveForKey(auth(s), 1, 1000, false); !errors.Is(err, ErrKeyCapReached) {
		t.Fatalf("a second reserve while the cap is held: %v", err)
	}
	h.Release()
	spend(s, "within-cap", 300)

	// lowered below the spend: refused on every instance, nothing left
	if k, err = s.SetKeyLimits(ctx, p.KeyID, KeyLimits{Cap: 500, Period: PeriodMonth}); err != nil || k.Left(time.Now()) != 0 || k.SpentThisPeriod(time.Now()) != 900 {
		t.Fatalf("cap lowered: %+v, %v", k, err)
	}
	for i, st := range stores {
		deadline := time.Now().Add(5 * time.Second)
		for {
			_, err := st.ReserveForKey(auth(st), 1, 10, false)
			var ce *KeyCapError
			// (the database may refuse before the instance has the new
			// cap to name)
			if errors.As(err, &ce) && ce.Cap == 500 {
				if ce.Period != PeriodMonth || !ce.ResetsAt.Equal(PeriodMonth.Next(time.Now())) {
					t.Errorf("instance %d: refusal %+v", i, ce)
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("instance %d: a reserve after the cap was lowered below the spend: %v", i, err)
			}
			if err == nil {
				t.Fatalf("instance %d: granted a reserve beyond the lowered cap", i)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}

	// raised: the spend is kept, the rest is available
	if k, err = s.SetKeyLimits(ctx, p.KeyID, KeyLimits{Cap: 2000, Period: PeriodMonth}); err != nil || k.Left(time.Now()) != 1100 {
		t.Fatalf("cap raised: %+v, %v", k, err)
	}
	spend(stores[len(stores)-1], "after-raise", 1000)
	// a daily period instead: today's spend, from the rows
	if k, err = s.SetKeyLimits(ctx, p.KeyID, KeyLimits{Cap: 2000, Period: PeriodDay}); err != nil || k.SpentThisPeriod(time.Now()) != 1900 {
		t.Fatalf("period changed: %+v, %v; want today's 1900", k, err)
	}
	// no cap: no bound, no count
	if k, err = s.SetKeyLimits(ctx, p.KeyID, KeyLimits{}); err != nil || k.Limits.Capped() || k.PeriodSpent != 0 {
		t.Fatalf("cap removed: %+v, %v", k, err)
	}
	if _, err := s.SetKeyLimits(ctx, "key_nope", KeyLimits{}); !errors.Is(err, ErrNotFound) {
		t.Errorf("an unknown key: %v", err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for _, st := range stores {
		for {
			h, err := st.ReserveForKey(auth(st), 5000, 5000, false)
			if err == nil {
				h.Release()
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("a reserve beyond the old cap after it was removed: %v", err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	mustAudit(t, s)
}

// TestKeyLimitsStored: a key's limits survive a restart and are what
// Authenticate gives the request, and a key without limits carries none.
func TestKeyLimitsStored(t *testing.T) { backends(t, testKeyLimitsStored) }

func testKeyLimitsStored(t *testing.T, b backend) {
	ctx := context.Background()
	db := b.db(t)
	s := b.openAt(t, db)
	a := mustAccount(t, s, 1000)
	want := KeyLimits{Cap: 2500, Period: PeriodWeek, Models: []string{"gpt-4o-mini", "claude-*"},
		ExpiresAt: time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC), RPM: 30, Concurrency: 3}
	secret, p := keyPrincipal(t, s, a.ID, want)
	plain, q := keyPrincipal(t, s, a.ID, KeyLimits{})
	if q.Limits != nil {
		t.Fatalf("a key without limits carries %+v", q.Limits)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = b.openAt(t, db)
	got, err := s.Authenticate(secret)
	if err != nil || got.Limits == nil || got.Limits.Cap != want.Cap || got.Limits.Period != want.Period ||
		fmt.Sprint(got.Limits.Models) != fmt.Sprint(want.Models) || !got.Limits.ExpiresAt.Equal(want.ExpiresAt) ||
		got.Limits.RPM != 30 || got.Limits.Concurrency != 3 {
		t.Fatalf("after a restart: %+v, %v", got.Limits, err)
	}
	if got, err := s.Authenticate(plain); err != nil || got.Limits != nil {
		t.Fatalf("the key without limits after a restart: %+v, %v", got, err)
	}
	k, err := s.KeyByID(ctx, p.KeyID)
	if err != nil || k.Limits.Cap != want.Cap || len(k.Limits.Models) != 2 {
		t.Fatalf("KeyByID: %+v, %v", k, err)
	}
	// an empty list is no model, not every model
	if _, err := s.SetKeyLimits(ctx, p.KeyID, KeyLimits{Models: []string{}}); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Authenticate(secret); err != nil || got.Limits == nil || got.Limits.Models == nil || len(got.Limits.Models) != 0 {
		t.Fatalf("an empty model list: %+v, %v", got.Limits, err)
	}
}

// TestSharedLapsedSettleWithinKeyCap: a store whose lease lapsed settles
// late on a capped key, after another instance reaped its hold and let the
// key spend what the hold had kept: the late charge is taken only as far
// as the cap still goes (the rest is uncollected), never beyond it.
func TestSharedLapsedSettleWithinKeyCap(t *testing.T) {
	ctx := context.Background()
	db, stores := openShared(t, 2)
	raw := backend{pg: true}.raw(t, db)
	slow, other := stores[0], stores[1]
	a := mustAccount(t, other, 100_000)
	_, p := keyPrincipal(t, other, a.ID, KeyLimits{Cap: 1000, Period: PeriodMonth})
	h1, err := slow.ReserveForKey(p, 600, 600, false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Exec(`UPDATE instances SET lease_until = now() - interval '1 second' WHERE id = ?`, pgOf(slow).id); err != nil {
		t.Fatal(err)
	}
	pgOf(other).reap()
	// the reaped hold's 600 is the cap's again: the other instance spends 700
	h2, err := other.ReserveForKey(p, 700, 700, false)
	if err != nil {
		t.Fatal(err)
	}
	if err := h2.Settle(ctx, usage("on-time", p.KeyID, 700)); err != nil {
		t.Fatal(err)
	}
	late := usage("late", p.KeyID, 500)
	if err := h1.Settle(ctx, late); err != nil {
		t.Fatal(err)
	}
	if !late.HoldLapsed || late.Charged != 300 || late.Uncollected() != 200 {
		t.Fatalf("the late settle %+v: want 300 charged, what the cap left", late)
	}
	k, err := other.KeyByID(ctx, p.KeyID)
	if err != nil || k.SpentThisPeriod(time.Now()) != 1000 {
		t.Fatalf("key %+v, %v: want the whole cap spent, no more", k, err)
	}
	if got := balanceOf(t, other, a.ID).Balance; got != 100_000-1000 {
		t.Fatalf("balance %d: want %d, the account charged the cap's 1000 and not the late settle's uncollected 200", got, 100_000-1000)
	}
	mustAudit(t, other)
}
