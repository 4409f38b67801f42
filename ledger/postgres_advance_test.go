package ledger

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// giveBack retires a PostgreSQL store's advances and releases their rows
// now, as the lease loop does once they are idle, and waits until the
// store has no hold row left (the lease loop may be releasing some), so
// that held counts only other stores' holds. Call it once no hold of the
// store is open. A no-op on SQLite.
func giveBack(t testing.TB, s *Store) {
	t.Helper()
	if pgOf(s) == nil {
		return
	}
	for _, adv := range pgOf(s).liveAdvances() {
		pgOf(s).retire(adv)
	}
	pgOf(s).tendAdvances()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		var n int64
		if err := pgOf(s).pool.QueryRow(context.Background(), `SELECT count(*) FROM holds WHERE instance_id = $1`, pgOf(s).id).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d hold rows of the store left after its advances were given back", n)
		}
		pgOf(s).tendAdvances() // a retired advance whose top-up was on its way
	}
}

// settled waits until no top-up of the store's advances is on its way.
func settled(t testing.TB, s *Store) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		topping := false
		for _, adv := range pgOf(s).liveAdvances() {
			adv.acct.mu.Lock()
			topping = topping || adv.topping
			adv.acct.mu.Unlock()
		}
		if !topping {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("a top-up never ended")
		}
	}
}

// heldRows is what the holds' rows of an account hold, every instance's.
func heldRows(t testing.TB, db testDB, id string) int64 {
	t.Helper()
	return count(t, backend{pg: true}.raw(t, db), fmt.Sprintf(`SELECT coalesce(sum(amount), 0) FROM holds WHERE account_id = '%s'`, id))
}

// busy reserves and settles n requests one after the other on the account
// (close together, so the account is busy), each held for max and charged
// cost.
func busy(t *testing.T, s *Store, acct string, n int, max, cost Money) {
	t.Helper()
	for i := range n {
		h, err := s.Reserve(acct, 1, max)
		if err != nil {
			t.Fatalf("reserve %d: %v", i, err)
		}
		if err := h.Settle(context.Background(), usage(NewRequestID(), "", cost)); err != nil {
			t.Fatalf("settle %d: %v", i, err)
		}
	}
}

// TestAdvanceCarvesHolds: on a busy, rich account an instance makes an
// advance and carves the next holds from it without the database; held
// is the advance's unused part and the holds' rows say so; settles debit
// exactly; a hold that costs more than it held takes the extra from the
// advance; a released hold costs the database nothing; given back, held
// is zero and the audit (held = Σ holds' rows included) is clean.
func TestAdvanceCarvesHolds(t *testing.T) {
	ctx := context.Background()
	db, stores := openShared(t, 1)
	s := stores[0]
	const credit = 1_000_000_000
	a := mustAccount(t, s, credit)
	busy(t, s, a.ID, 300, 1000, 300)
	// the first reserve, the one that makes the advance, and a few top-ups
	// (in the background, growing the advance as it empties fast)
	st := s.Stats()
	if st.CarvedHolds < 290 || st.DatabaseReserves > 10 {
		t.Fatalf("300 reserves: %d carved from an advance, %d in the database; want all but a few carved", st.CarvedHolds, st.DatabaseReserves)
	}
	got := balanceOf(t, s, a.ID)
	if got.Balance != credit-300*300 || got.Held <= 0 || int64(got.Held) != heldRows(t, db, a.ID) {
		t.Fatalf("after 300 settles: %+v, holds' rows %d", got, heldRows(t, db, a.ID))
	}
	mustAudit(t, s)

	// over the hold: the extra comes from the advance
	before := s.Stats().DatabaseReserves
	h, err := s.Reserve(a.ID, 1, 1000)
	if err != nil || h.adv == nil {
		t.Fatalf("reserve: %v, carved %v", err, h != nil && h.adv != nil)
	}
	r := usage("over", "", 1500)
	if err := h.Settle(ctx, r); err != nil || r.Charged != 1500 || !r.OverHold || r.HoldLapsed {
		t.Fatalf("settle over the hold: %v, %+v", err, r)
	}
	// released: nothing to write
	h, err = s.Reserve(a.ID, 1, 1000)
	if err != nil {
		t.Fatal(err)
	}
	tx := s.Stats().Transactions
	h.Release()
	if s.Stats().Transactions != tx {
		t.Fatal("releasing a carved hold wrote to the database")
	}
	if s.Stats().DatabaseReserves != before {
		t.Fatalf("%d reserves reached the database", s.Stats().DatabaseReserves-before)
	}
	giveBack(t, s)
	got = balanceOf(t, s, a.ID)
	if got.Balance != credit-300*300-1500 || got.Held != 0 || heldRows(t, db, a.ID) != 0 {
		t.Fatalf("given back: %+v, holds' rows %d", got, heldRows(t, db, a.ID))
	}
	mustAudit(t, s)
}

// TestAdvanceIdleGivenBack: advances unused for advanceIdle are given back
// by the lease loop, with nobody asking, the advances of many accounts
// going quiet at once included.
func TestAdvanceIdleGivenBack(t *testing.T) {
	db, stores := openShared(t, 1)
	s := stores[0]
	raw := backend{pg: true}.raw(t, db)
	// Making fifty advances one after another may take longer than
	// advanceIdle on a slow machine (CI under -race did): the first ones
	// would be given back before the last is made. Idle is an hour while
	// they are made, and advanceIdle again once all fifty stand.
	pgOf(s).idle.Store(int64(time.Hour))
	accts := make([]Account, 50)
	for i := range accts {
		accts[i] = mustAccount(t, s, 1_000_000_000)
		busy(t, s, accts[i].ID, 3, 1000, 300)
	}
	if n := count(t, raw, `SELECT count(*) FROM holds`); n != int64(len(accts)) {
		t.Fatalf("%d advances for %d busy accounts", n, len(accts))
	}
	pgOf(s).idle.Store(int64(advanceIdle))
	deadline := time.Now().Add(advanceIdle + 3*time.Second)
	for count(t, raw, `SELECT count(*) FROM holds`) != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("idle advances were not given back: %d left", count(t, raw, `SELECT count(*) FROM holds`))
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, a := range accts {
		if got := balanceOf(t, s, a.ID); got.Held != 0 || got.Balance != 1_000_000_000-3*300 {
			t.Fatalf("%+v", got)
		}
	}
	mustAudit(t, s)
}

// TestAdvancePoorAccountExact: an account whose balance is not far above
// its requests never gets an advance: every hold is exact, and held is
// zero once they end.
func TestAdvancePoorAccountExact(t *testing.T) {
	db, stores := openShared(t, 1)
	s := stores[0]
	a := mustAccount(t, s, 100*1000) // a hundred requests' worth
	busy(t, s, a.ID, 30, 1000, 300)
	if st := s.Stats(); st.CarvedHolds != 0 {
		t.Fatalf("%d holds carved on a poor account", st.CarvedHolds)
	}
	if got := balanceOf(t, s, a.ID); got.Held != 0 || heldRows(t, db, a.ID) != 0 {
		t.Fatalf("%+v", got)
	}
}

// TestAdvanceLapsed: an instance whose lease lapsed (reaped by another, its
// advance released) settles the holds it had carved: each is charged to
// the available balance (HoldLapsed), nothing is released twice, and the
// instance stops carving from the advance it lost.
func TestAdvanceLapsed(t *testing.T) {
	ctx := context.Background()
	db, stores := openShared(t, 2)
	s, other := stores[0], stores[1]
	const credit = 1_000_000_000
	a := mustAccount(t, s, credit)
	busy(t, s, a.ID, 10, 1000, 300)
	var open []*Hold
	for range 3 {
		h, err := s.Reserve(a.ID, 1, 1000)
		if err != nil || h.adv == nil {
			t.Fatalf("reserve: %v (carved: %v)", err, err == nil && h.adv != nil)
		}
		open = append(open, h)
	}
	// the lease lapses: another instance reaps it
	settled(t, s)
	raw := backend{pg: true}.raw(t, db)
	if _, err := raw.Exec(`UPDATE instances SET lease_until = now() - interval '1 second' WHERE id = $1`, pgOf(s).id); err != nil {
		t.Fatal(err)
	}
	pgOf(other).reap()
	if heldRows(t, db, a.ID) != 0 || balanceOf(t, other, a.ID).Held != 0 {
		t.Fatalf("the reaper left %d held", balanceOf(t, other, a.ID).Held)
	}
	for i, h := range open {
		r := usage(fmt.Sprintf("lapsed-%d", i), "", 700)
		if err := h.Settle(ctx, r); err != nil {
			t.Fatal(err)
		}
		if !r.HoldLapsed || r.Charged != 700 {
			t.Fatalf("settle %d of a lapsed advance: %+v", i, r)
		}
	}
	got := balanceOf(t, other, a.ID)
	if got.Balance != credit-10*300-3*700 || got.Held != 0 {
		t.Fatalf("%+v", got)
	}
	if s.Stats().Lapsed != 3 {
		t.Fatalf("lapsed settles: %d", s.Stats().Lapsed)
	}
	// the instance takes its lease again and reserves afresh, exactly
	pgOf(s).renew()
	h, err := s.Reserve(a.ID, 1, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if h.adv != nil && h.adv.bad {
		t.Fatal("carved from the lost advance")
	}
	if err := h.Settle(ctx, usage("after", "", 100)); err != nil {
		t.Fatal(err)
	}
	giveBack(t, s)
	if got := balanceOf(t, s, a.ID); got.Balance != credit-10*300-3*700-100 || got.Held != 0 || heldRows(t, db, a.ID) != 0 {
		t.Fatalf("%+v", got)
	}
	mustAudit(t, s)
}

// TestAdvanceShort: an advance's row holding less than the instance
// believes (a raise lost with a crashed server: its reserves commit
// asynchronously) never lets a settle release what was not held: what the
// row has is taken, the rest is charged to the available balance, and the
// advance is given up.
func TestAdvanceShort(t *testing.T) {
	ctx := context.Background()
	db, stores := openShared(t, 1)
	s := stores[0]
	const credit = 1_000_000_000
	a := mustAccount(t, s, credit)
	busy(t, s, a.ID, 10, 1000, 300)
	h, err := s.Reserve(a.ID, 1, 1000)
	if err != nil || h.adv == nil {
		t.Fatalf("reserve: %v", err)
	}
	// the row and the account lose 900 of the advance
	settled(t, s)
	raw := backend{pg: true}.raw(t, db)
	if _, err := raw.Exec(`UPDATE holds SET amount = 100 WHERE id = $1`, h.adv.id); err != nil {
		t.Fatal(err)
	}
	// the audit sees held and the hold rows disagree
	ms, err := s.Audit(ctx)
	if err != nil || len(ms) != 1 || ms[0].Column != "accounts.held" || ms[0].AccountID != a.ID || ms[0].Recomputed != heldRows(t, db, a.ID) {
		t.Fatalf("audit of a held that its hold rows do not add up to: %v, %v", ms, err)
	}
	if _, err := raw.Exec(`UPDATE accounts SET held = (SELECT sum(amount) FROM holds WHERE account_id = $1) WHERE id = $1`, a.ID); err != nil {
		t.Fatal(err)
	}
	mustAudit(t, s)
	r := usage("short", "", 600)
	if err := h.Settle(ctx, r); err != nil {
		t.Fatal(err)
	}
	if r.Charged != 600 || r.HoldLapsed {
		t.Fatalf("%+v", r)
	}
	if !h.adv.bad {
		t.Fatal("the short advance was kept")
	}
	giveBack(t, s)
	if got := balanceOf(t, s, a.ID); got.Balance != credit-10*300-600 || got.Held != 0 || heldRows(t, db, a.ID) != 0 {
		t.Fatalf("%+v", got)
	}
	mustAudit(t, s)
}

// TestAdvancesNeverOverdraw: three instances racing on one account rich
// enough for advances, until it is spent: advances are used, the balance
// never goes below zero, every settle has its row and debit, and once the
// advances are given back nothing is held.
func TestAdvancesNeverOverdraw(t *testing.T) {
	ctx := context.Background()
	db, stores := openShared(t, 3)
	const credit = 5_000_000
	a := mustAccount(t, stores[0], credit)
	var charged, settles atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 3*4)
	for w := range 3 * 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := stores[w%3]
			rng := rand.New(rand.NewPCG(uint64(w), 1))
			for refused := 0; refused < 20; {
				h, err := s.Reserve(a.ID, 100, 1000)
				if errors.Is(err, ErrInsufficientFunds) {
					refused++
					time.Sleep(2 * time.Millisecond)
					continue
				}
				if err != nil {
					errs <- err
					return
				}
				refused = 0
				if rng.IntN(10) == 0 {
					h.Release()
					continue
				}
				r := usage(NewRequestID(), "", Money(rng.IntN(1500)))
				if err := h.Settle(ctx, r); err != nil {
					errs <- err
					return
				}
				charged.Add(int64(r.Charged))
				settles.Add(1)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	var carved uint64
	for _, s := range stores {
		carved += s.Stats().CarvedHolds
		giveBack(t, s)
	}
	if carved == 0 {
		t.Fatal("no hold was carved from an advance")
	}
	got := balanceOf(t, stores[0], a.ID)
	if got.Balance < 0 || int64(got.Balance) != credit-charged.Load() || got.Held != 0 || heldRows(t, db, a.ID) != 0 {
		t.Fatalf("%+v; charged %d", got, charged.Load())
	}
	if got.Balance >= 1000 {
		t.Fatalf("%s left unspent after every instance was refused", got.Balance)
	}
	raw := backend{pg: true}.raw(t, db)
	if n := count(t, raw, fmt.Sprintf(`SELECT count(*) FROM usage WHERE account_id = '%s'`, a.ID)); n != settles.Load() {
		t.Fatalf("%d usage rows for %d settles", n, settles.Load())
	}
	t.Logf("%d settles, %d holds carved, %s left", settles.Load(), carved, got.Balance)
	mustAudit(t, stores[0])
}
