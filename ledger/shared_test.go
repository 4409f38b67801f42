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

// The shared ledger's properties, with several stores on one
// PostgreSQL database in this process: each store has its own pool, writer,
// lease and listener, as separate gateway instances would.

// openShared opens n stores on one new PostgreSQL database.
func openShared(t *testing.T, n int, mod ...func(*Options)) (testDB, []*Store) {
	t.Helper()
	b := backend{pg: true}
	db := newPostgresDB(t)
	stores := make([]*Store, n)
	for i := range stores {
		stores[i] = b.openAt(t, db, append([]func(*Options){func(o *Options) {
			o.Instance = fmt.Sprintf("instance-%d", i)
			o.PollInterval = 500 * time.Millisecond
		}}, mod...)...)
	}
	return db, stores
}

// crash stops a PostgreSQL store as a crash would: its lease is no longer
// renewed and its holds stay until another instance reaps them.
func (s *Store) crash() {
	if p, ok := s.eng.(*pgEngine); ok {
		_ = p.stop(false)
	}
}

// TestSharedReservesNeverOverdraw: stores racing reserves and settles on
// one account never hold more than its balance, never take it below zero,
// and every settle has exactly its row and debit.
func TestSharedReservesNeverOverdraw(t *testing.T) {
	ctx := context.Background()
	db, stores := openShared(t, 4)
	raw := backend{pg: true}.raw(t, db)
	const credit = 10_000 // about ten holds of up to 1000
	a := mustAccount(t, stores[0], credit)
	_, k, err := stores[0].CreateKey(ctx, a.ID, "k")
	if err != nil {
		t.Fatal(err)
	}

	stop := make(chan struct{})
	var sampler sync.WaitGroup
	var samples atomic.Int64
	sampler.Add(1)
	go func() {
		defer sampler.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			var bal, held, holds int64
			if err := raw.QueryRow(`SELECT balance, held, (SELECT coalesce(sum(amount), 0) FROM holds WHERE account_id = ?)
				FROM accounts WHERE id = ?`, a.ID, a.ID).Scan(&bal, &held, &holds); err != nil {
				t.Error(err)
				return
			}
			samples.Add(1)
			if bal < 0 || held < 0 || held > bal || held != holds {
				t.Errorf("sample: balance %d held %d, holds %d", bal, held, holds)
			}
		}
	}()

	var wg sync.WaitGroup
	var charged, settled, refused atomic.Int64
	for i := 0; i < 120; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			s := stores[i%len(stores)]
			for j := 0; j < 5; j++ {
				h, err := s.Reserve(a.ID, 200, 1000)
				if errors.Is(err, ErrInsufficientFunds) {
					refused.Add(1)
					time.Sleep(time.Millisecond)
					continue
				}
				if err != nil {
					t.Error(err)
					return
				}
				if j%4 == 3 { // some requests fail before they cost anything
					h.Release()
					continue
				}
				cost := Money(100 + (i*7+j*13)%100)
				rec := usage(fmt.Sprintf("req-%d-%d", i, j), k.ID, min(cost, h.Amount()))
				if err := h.Settle(ctx, rec); err != nil {
					t.Error(err)
					return
				}
				if rec.OverHold || rec.HoldLapsed || rec.Charged != rec.Cost {
					t.Errorf("rec %+v", rec)
				}
				charged.Add(int64(rec.Charged))
				settled.Add(1)
			}
		}(i)
	}
	wg.Wait()
	close(stop)
	sampler.Wait()

	got := balanceOf(t, stores[1], a.ID)
	if int64(got.Balance) != credit-charged.Load() || got.Held != 0 {
		t.Fatalf("final %+v, want balance %d held 0", got, credit-charged.Load())
	}
	if n := count(t, raw, "SELECT count(*) FROM usage"); n != settled.Load() {
		t.Fatalf("usage rows = %d, settles = %d", n, settled.Load())
	}
	if n := count(t, raw, "SELECT count(*) FROM holds"); n != 0 {
		t.Fatalf("%d holds left", n)
	}
	for _, s := range stores {
		if s.Outstanding() != 0 {
			t.Fatalf("outstanding %d", s.Outstanding())
		}
	}
	mustAudit(t, stores[2])
	t.Logf("settled %d, refused %d, charged %d, %d samples", settled.Load(), refused.Load(), charged.Load(), samples.Load())
	if settled.Load() < 10 || refused.Load() == 0 {
		t.Fatalf("settled %d refused %d: the race did not happen", settled.Load(), refused.Load())
	}
}

// TestSharedCrashedHoldsReaped: a store that stops without settling or
// releasing (a crash) has its holds released by another store within its
// lease and a second; a store closed cleanly releases its own at once.
func TestSharedCrashedHoldsReaped(t *testing.T) {
	const lease = time.Second
	db, stores := openShared(t, 2, func(o *Options) { o.Lease = lease })
	raw := backend{pg: true}.raw(t, db)
	crashed, survivor := stores[0], stores[1]
	a := mustAccount(t, survivor, 1000)
	for range 3 {
		if _, err := crashed.Reserve(a.ID, 100, 300); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := survivor.Reserve(a.ID, 200, 200); !errors.Is(err, ErrInsufficientFunds) {
		t.Fatalf("while the crashed store holds 900: %v", err)
	}
	crashed.crash()
	start := time.Now()
	for {
		h, err := survivor.Reserve(a.ID, 1000, 1000)
		if err == nil {
			h.Release()
			break
		}
		if !errors.Is(err, ErrInsufficientFunds) {
			t.Fatal(err)
		}
		if time.Since(start) > lease+2*time.Second {
			t.Fatalf("the crashed store's holds are still held after %v", time.Since(start))
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("reaped %v after the crash (lease %v)", time.Since(start).Round(time.Millisecond), lease)
	if n := count(t, raw, "SELECT count(*) FROM holds"); n != 0 {
		t.Fatalf("%d holds left", n)
	}
	if got := balanceOf(t, survivor, a.ID); got.Balance != 1000 || got.Held != 0 {
		t.Fatalf("account %+v", got)
	}
	if survivor.Stats().Reaped != 3 {
		t.Fatalf("reaped %d holds, want 3", survivor.Stats().Reaped)
	}

	// a clean close gives its holds back at once
	other := backend{pg: true}.openAt(t, db)
	if _, err := other.Reserve(a.ID, 500, 500); err != nil {
		t.Fatal(err)
	}
	if err := other.Close(); err != nil {
		t.Fatal(err)
	}
	if got := balanceOf(t, survivor, a.ID); got.Held != 0 {
		t.Fatalf("after a clean close: %+v", got)
	}
	mustAudit(t, survivor)
}

// TestSharedLapsedSettle: a store whose lease lapsed while it lived (a
// long pause, a partition) finds its holds released by another; its late
// settles still record the usage, charged to the available balance and
// never below zero, marked hold_lapsed, and release nothing twice. The
// store takes a lease again for its next holds.
func TestSharedLapsedSettle(t *testing.T) {
	ctx := context.Background()
	db, stores := openShared(t, 2)
	raw := backend{pg: true}.raw(t, db)
	slow, other := stores[0], stores[1]
	a := mustAccount(t, other, 1000)
	h1, err := slow.Reserve(a.ID, 300, 300)
	if err != nil {
		t.Fatal(err)
	}
	h2, err := slow.Reserve(a.ID, 300, 300)
	if err != nil {
		t.Fatal(err)
	}
	// the slow store's lease runs out; the other reaps
	if _, err := raw.Exec(`UPDATE instances SET lease_until = now() - interval '1 second' WHERE id = ?`, pgOf(slow).id); err != nil {
		t.Fatal(err)
	}
	pgOf(other).reap()
	if got := balanceOf(t, other, a.ID); got.Held != 0 {
		t.Fatalf("after the reap: %+v", got)
	}
	// meanwhile the other spends most of the balance
	h3, err := other.Reserve(a.ID, 800, 800)
	if err != nil {
		t.Fatal(err)
	}
	// 200 available: the first late settle is charged in full
	r1 := usage("late-1", "", 150)
	if err := h1.Settle(ctx, r1); err != nil {
		t.Fatal(err)
	}
	if !r1.HoldLapsed || r1.Charged != 150 || r1.OverHold {
		t.Fatalf("first late settle %+v", r1)
	}
	// 50 available: the second is charged 50 of its 250, never below zero
	r2 := usage("late-2", "", 250)
	if err := h2.Settle(ctx, r2); err != nil {
		t.Fatal(err)
	}
	if !r2.HoldLapsed || r2.Charged != 50 || !r2.OverHold || r2.Uncollected() != 200 {
		t.Fatalf("second late settle %+v", r2)
	}
	if got := balanceOf(t, other, a.ID); got.Balance != 800 || got.Held != 800 {
		t.Fatalf("after the late settles: %+v", got)
	}
	if err := h3.Settle(ctx, usage("on-time", "", 800)); err != nil {
		t.Fatal(err)
	}
	if got := balanceOf(t, other, a.ID); got.Balance != 0 || got.Held != 0 {
		t.Fatalf("end: %+v", got)
	}
	rows, err := other.UsageRows(ctx, UsageFilter{AccountID: a.ID})
	if err != nil || len(rows) != 3 {
		t.Fatalf("rows %+v %v", rows, err)
	}
	lapsed := 0
	for _, r := range rows {
		if r.HoldLapsed {
			lapsed++
		}
	}
	if lapsed != 2 {
		t.Fatalf("%d rows marked lapsed, want 2", lapsed)
	}
	// the slow store renews: its lease is taken again, and it reserves
	pgOf(slow).renew()
	if _, err := other.Credit(ctx, CreditRequest{AccountID: a.ID, Amount: 100, Reference: "more"}); err != nil {
		t.Fatal(err)
	}
	h4, err := slow.Reserve(a.ID, 100, 100)
	if err != nil {
		t.Fatalf("reserve after the lease was taken again: %v", err)
	}
	h4.Release()
	if slow.Stats().Lapsed != 2 {
		t.Fatalf("lapsed settles counted %d", slow.Stats().Lapsed)
	}
	mustAudit(t, other)
}

// TestSharedSettleTriedAgain: a settle tried again after its first attempt
// committed without the caller learning it (the connection lost at
// COMMIT) succeeds with the first attempt's charge and debits nothing more.
func TestSharedSettleTriedAgain(t *testing.T) {
	ctx := context.Background()
	s := backend{pg: true}.open(t)
	a := mustAccount(t, s, 1000)
	h, err := s.Reserve(a.ID, 100, 100)
	if err != nil {
		t.Fatal(err)
	}
	rec := usage("once", "", 60)
	if err := h.Settle(ctx, rec); err != nil {
		t.Fatal(err)
	}
	// as if that attempt had returned an error: the hold is open again
	h.acct.mu.Lock()
	h.state = holdOpen
	h.acct.mu.Unlock()
	s.openHolds.Add(1)
	s.outstanding.Add(int64(h.amount))
	again := usage("once", "", 60)
	if err := h.Settle(ctx, again); err != nil {
		t.Fatalf("the settle tried again: %v", err)
	}
	if again.Charged != 60 {
		t.Fatalf("charged %d", again.Charged)
	}
	if got := balanceOf(t, s, a.ID); got.Balance != 940 || got.Held != 0 {
		t.Fatalf("account %+v", got)
	}
	// another hold with the same request id is a duplicate
	h2, _ := s.Reserve(a.ID, 100, 100)
	if err := h2.Settle(ctx, usage("once", "", 60)); !errors.Is(err, ErrDuplicate) {
		t.Fatalf("duplicate: %v", err)
	}
	if got := balanceOf(t, s, a.ID); got.Balance != 940 || got.Held != 0 {
		t.Fatalf("after the duplicate: %+v", got)
	}
	mustAudit(t, s)
}

// TestSharedSettleTriedAgainInABatch: a settle tried again in the same
// batch as new settles makes the batch's COPY of usage rows fail; the batch
// is run again with the rows inserted one by one where absent, so the new
// settles are debited once each and the one tried again not a second time.
func TestSharedSettleTriedAgainInABatch(t *testing.T) {
	ctx := context.Background()
	var hold atomic.Bool
	release := make(chan struct{})
	batches := make(chan int, 16)
	s := backend{pg: true}.open(t, func(o *Options) {
		o.writerOnly = true // the queue is what this test counts
		o.OnCommit = func(n int, _ time.Duration) {
			batches <- n
			if hold.CompareAndSwap(true, false) {
				<-release // the writer waits here while the next batch queues
			}
		}
	})
	releaseOnce := sync.OnceFunc(func() { close(release) })
	t.Cleanup(releaseOnce) // a failure must not leave Close waiting on the held commit
	a := mustAccount(t, s, 10_000)
	reserve := func() *Hold {
		h, err := s.Reserve(a.ID, 100, 100)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	h := reserve()
	if err := h.Settle(ctx, usage("once", "", 60)); err != nil {
		t.Fatal(err)
	}
	<-batches
	// as if that attempt had returned an error: the hold is open again
	h.acct.mu.Lock()
	h.state = holdOpen
	h.acct.mu.Unlock()
	s.openHolds.Add(1)
	s.outstanding.Add(int64(h.amount))

	holds := []*Hold{reserve(), h, reserve(), reserve()}
	recs := []*UsageRecord{usage("filler", "", 10), usage("once", "", 60), usage("new-1", "", 20), usage("new-2", "", 30)}
	errs := make([]error, len(holds))
	var wg sync.WaitGroup
	hold.Store(true)
	settle := func(i int) {
		defer wg.Done()
		errs[i] = holds[i].Settle(ctx, recs[i])
	}
	wg.Add(1)
	go settle(0) // its batch's commit holds the writer
	if n := <-batches; n != 1 {
		t.Fatalf("the filler's batch had %d commands", n)
	}
	for i := 1; i < len(holds); i++ {
		wg.Add(1)
		go settle(i)
	}
	for deadline := time.Now().Add(5 * time.Second); len(s.cmds) < 3; {
		if time.Now().After(deadline) {
			t.Fatalf("%d settles queued, want 3", len(s.cmds))
		}
		time.Sleep(time.Millisecond)
	}
	releaseOnce()
	wg.Wait()
	if n := <-batches; n != 3 {
		t.Fatalf("the three settles went in a batch of %d", n)
	}
	for i, err := range errs {
		if err != nil {
			t.Fatalf("settle %s: %v", recs[i].RequestID, err)
		}
	}
	if recs[1].Charged != 60 || recs[2].Charged != 20 || recs[3].Charged != 30 {
		t.Fatalf("charged %d, %d, %d", recs[1].Charged, recs[2].Charged, recs[3].Charged)
	}
	if got := balanceOf(t, s, a.ID); got.Balance != 10_000-60-10-20-30 || got.Held != 0 {
		t.Fatalf("account %+v", got)
	}
	mustAudit(t, s)
}

// TestSharedChangesSeen: a change made through one store (or by SQL, or
// by the CLI) reaches another store's caches within a second, through
// LISTEN/NOTIFY, or through the poll when no notification came.
func TestSharedChangesSeen(t *testing.T) {
	ctx := context.Background()
	db, stores := openShared(t, 2)
	raw := backend{pg: true}.raw(t, db)
	admin, gw := stores[0], stores[1]
	a := mustAccount(t, admin, 100)
	secret, k, err := admin.CreateKey(ctx, a.ID, "k")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := gw.Authenticate(secret); err != nil {
		t.Fatal(err)
	}
	if _, _, err := gw.AccountState(a.ID); err != nil { // cached
		t.Fatal(err)
	}
	within := func(what string, cond func() bool) {
		t.Helper()
		start := time.Now()
		for !cond() {
			if time.Since(start) > time.Second {
				t.Fatalf("%s: not seen within a second", what)
			}
			time.Sleep(2 * time.Millisecond)
		}
		t.Logf("%s: seen after %v", what, time.Since(start).Round(100*time.Microsecond))
	}
	if err := admin.SetAccountState(ctx, a.ID, StateSuspended); err != nil {
		t.Fatal(err)
	}
	within("suspension", func() bool { st, _, _ := gw.AccountState(a.ID); return st == StateSuspended })
	if err := admin.SetAccountState(ctx, a.ID, StateActive); err != nil {
		t.Fatal(err)
	}
	within("resumption", func() bool { st, _, _ := gw.AccountState(a.ID); return st == StateActive })
	if err := admin.SetAccountPlan(ctx, a.ID, "gold"); err != nil {
		t.Fatal(err)
	}
	within("plan change", func() bool { _, plan, _ := gw.AccountState(a.ID); return plan == "gold" })
	if _, err := admin.Credit(ctx, CreditRequest{AccountID: a.ID, Amount: 900, Reference: "top-up"}); err != nil {
		t.Fatal(err)
	}
	within("credit", func() bool {
		h, err := gw.Reserve(a.ID, 1000, 1000)
		if err != nil {
			return false
		}
		h.Release()
		return true
	})
	if err := admin.DeleteKey(ctx, k.ID); err != nil {
		t.Fatal(err)
	}
	within("key deletion", func() bool { _, err := gw.Authenticate(secret); return errors.Is(err, ErrUnauthorized) })

	// by SQL, as an operator in psql would: the triggers tell
	if _, err := raw.Exec(`UPDATE accounts SET state = 'suspended' WHERE id = ?`, a.ID); err != nil {
		t.Fatal(err)
	}
	within("suspension by SQL", func() bool { st, _, _ := gw.AccountState(a.ID); return st == StateSuspended })

	// no notification (the trigger off): the poll finds the version moved
	secret2, k2, err := admin.CreateKey(ctx, a.ID, "k2")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := gw.Authenticate(secret2); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`ALTER TABLE keys DISABLE TRIGGER keys_changed`,
		`UPDATE keys SET deleted_at = 1 WHERE id = '` + k2.ID + `'`,
		`ALTER TABLE keys ENABLE TRIGGER keys_changed`,
		`UPDATE ledger_version SET v = v + 1`,
	} {
		if _, err := raw.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	within("key deletion without a notification", func() bool { _, err := gw.Authenticate(secret2); return errors.Is(err, ErrUnauthorized) })
}

// TestSharedMigrationsAtOnce: instances starting at once on an empty
// database apply each migration once and all open.
func TestSharedMigrationsAtOnce(t *testing.T) {
	db := newPostgresDB(t)
	var wg sync.WaitGroup
	errs := make([]error, 5)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := Open(context.Background(), db.options())
			if err == nil {
				err = s.Close()
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	raw := backend{pg: true}.raw(t, db)
	if v := count(t, raw, "SELECT version FROM ledger_schema"); v != int64(len(pgMigrations)) {
		t.Fatalf("version %d, want %d", v, len(pgMigrations))
	}
	if n := count(t, raw, "SELECT count(*) FROM ledger_schema"); n != 1 {
		t.Fatalf("%d version rows", n)
	}
	// a newer schema is refused
	if _, err := raw.Exec("UPDATE ledger_schema SET version = version + 1"); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(context.Background(), db.options()); err == nil {
		t.Fatal("opened a newer schema")
	}
	if _, err := Open(context.Background(), Options{Path: "x", Postgres: db.dsn}); err == nil {
		t.Fatal("opened with both a path and a DSN")
	}
}
