package ledger

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestAlertFiresOncePerCrossing: many requests, on every instance of a
// shared ledger, see an account cross its threshold at once: the alert
// fires exactly once; it stays fired until re-armed (the balance back above
// the threshold), then the next crossing fires it once again; a period's
// alert is another name and fires on its own; alerts survive a restart and
// are the account's alone.
func TestAlertFiresOncePerCrossing(t *testing.T) { backends(t, testAlertFiresOncePerCrossing) }

func testAlertFiresOncePerCrossing(t *testing.T, b backend) {
	ctx := context.Background()
	var db testDB
	var stores []*Store
	if b.pg {
		_, stores = openShared(t, 3)
	} else {
		db = b.db(t)
		stores = []*Store{b.openAt(t, db)}
	}
	a := mustAccount(t, stores[0], 1000)
	other := mustAccount(t, stores[0], 1000)
	now := time.Now()
	crossing := func(round int) int64 {
		t.Helper()
		var fired atomic.Int64
		var wg sync.WaitGroup
		for i := range 60 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ok, err := stores[i%len(stores)].FireAlert(ctx, a.ID, "low_balance", fmt.Sprintf("round %d: balance below 5.00", round), now)
				if err != nil {
					t.Error(err)
				}
				if ok {
					fired.Add(1)
				}
			}()
		}
		wg.Wait()
		return fired.Load()
	}
	if n := crossing(1); n != 1 {
		t.Fatalf("the first crossing fired %d times, want once", n)
	}
	if n := crossing(2); n != 0 {
		t.Fatalf("a crossing while fired fired %d times, want none", n)
	}
	if ok, err := stores[len(stores)-1].RearmAlert(ctx, a.ID, "low_balance"); err != nil || !ok {
		t.Fatalf("rearm: %v, %v", ok, err)
	}
	if ok, err := stores[0].RearmAlert(ctx, a.ID, "low_balance"); err != nil || ok {
		t.Fatalf("a second rearm: %v, %v", ok, err)
	}
	if n := crossing(3); n != 1 {
		t.Fatalf("the crossing after re-arming fired %d times, want once", n)
	}
	// a period's alert, and another account's, fire on their own
	for _, tt := range []struct{ account, alert string }{{a.ID, "month_spend:2026-11"}, {other.ID, "low_balance"}} {
		if ok, err := stores[0].FireAlert(ctx, tt.account, tt.alert, "", now); err != nil || !ok {
			t.Fatalf("%s of %s: %v, %v", tt.alert, tt.account, ok, err)
		}
	}
	// the account's two, with the detail of the crossing that fired each
	// (the third round's, not an earlier one's), at the time it fired
	fired, err := stores[len(stores)-1].FiredAlerts(ctx, a.ID)
	at := now.Truncate(time.Millisecond).UTC()
	want := []Fired{{a.ID, "low_balance", "round 3: balance below 5.00", at}, {a.ID, "month_spend:2026-11", "", at}}
	if err != nil || fmt.Sprint(fired) != fmt.Sprint(want) {
		t.Fatalf("fired alerts:\n got %+v, %v\nwant %+v", fired, err, want)
	}
	for _, bad := range []string{"", " ", string(make([]byte, MaxAlertName+1))} {
		if _, err := stores[0].FireAlert(ctx, a.ID, bad, "", now); err == nil {
			t.Errorf("an alert named %q fired", bad)
		}
	}
	if !b.pg {
		if err := stores[0].Close(); err != nil {
			t.Fatal(err)
		}
		s := b.openAt(t, db)
		if ok, err := s.FireAlert(ctx, a.ID, "low_balance", "", now); err != nil || ok {
			t.Fatalf("after a restart the fired alert fired again: %v, %v", ok, err)
		}
	}
}

// TestCappedKeys: CappedKeys lists the account's live keys with a cap,
// with their period spend, and neither uncapped, deleted nor other
// accounts' keys.
func TestCappedKeys(t *testing.T) { backends(t, testCappedKeys) }

func testCappedKeys(t *testing.T, b backend) {
	ctx := context.Background()
	s := b.open(t)
	a := mustAccount(t, s, 1_000_000)
	other := mustAccount(t, s, 1_000_000)
	mk := func(acct, label string, limit Money) Key {
		t.Helper()
		_, k, err := s.CreateKeyWithLimits(ctx, acct, label, KeyLimits{Cap: limit, Period: PeriodDay})
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	_, p := keyPrincipal(t, s, a.ID, KeyLimits{Cap: 5000, Period: PeriodDay})
	mk(a.ID, "free", 0)
	gone := mk(a.ID, "gone", 5000)
	mk(other.ID, "other's", 5000)
	if err := s.DeleteKey(ctx, gone.ID); err != nil {
		t.Fatal(err)
	}
	h, err := s.ReserveForKey(p, 100, 1000, false)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Settle(ctx, usage("capped-1", p.KeyID, 700)); err != nil {
		t.Fatal(err)
	}
	keys, err := s.CappedKeys(ctx, a.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != 1 || keys[0].ID != p.KeyID || keys[0].Limits.Cap != 5000 || keys[0].SpentThisPeriod(time.Now()) != 700 {
		t.Fatalf("capped keys: %+v", keys)
	}
}
