package ledger

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// openRollupTest opens a store at a new path whose writer rolls up every
// rollupEvery, with an account of 1,000,000 and a key of it.
func openRollupTest(t *testing.T, rollupEvery time.Duration) (s *Store, path string, a Account, k Key) {
	t.Helper()
	path = testPath(t)
	s = openAt(t, path, func(o *Options) { o.rollupEvery = rollupEvery })
	a = mustAccount(t, s, 1_000_000)
	_, k, err := s.CreateKey(context.Background(), a.ID, "k")
	if err != nil {
		t.Fatal(err)
	}
	return s, path, a, k
}

// settleN settles n requests of cost on acct with key (keyless when ""),
// reserving each first; models alternate between two.
func settleN(t testing.TB, s *Store, acct, key, prefix string, n int, cost Money) {
	t.Helper()
	for i := range n {
		h, err := s.Reserve(acct, 1, 1000)
		if err != nil {
			t.Fatal(err)
		}
		r := usage(fmt.Sprintf("%s-%d", prefix, i), key, cost)
		if i%2 == 1 {
			r.Model = "gpt-4o"
		}
		if err := h.Settle(context.Background(), r); err != nil {
			t.Fatal(err)
		}
	}
}

// TestRollupOffTheSettlePath: a settle writes its usage row and its
// account's balance only; usage_daily, the key's totals and usage_by_key
// stay behind until something reads them, and then every read sees every
// settle that returned before it: key totals, daily rows, the key's and
// the account's rows (keyless ones included), an export, an audit.
func TestRollupOffTheSettlePath(t *testing.T) {
	ctx := context.Background()
	s, path, a, k := openRollupTest(t, time.Hour)
	raw := rawDB(t, path)
	settleN(t, s, a.ID, k.ID, "keyed", 6, 300)
	settleN(t, s, a.ID, "", "keyless", 2, 100)

	if got := balanceOf(t, s, a.ID); got.Balance != 1_000_000-6*300-2*100 {
		t.Fatalf("balance %d", got.Balance)
	}
	for q, want := range map[string]int64{
		`SELECT count(*) FROM usage`:                          8,
		`SELECT count(*) FROM usage_daily`:                    0,
		`SELECT count(*) FROM usage_by_key`:                   0,
		`SELECT requests FROM keys WHERE id = '` + k.ID + `'`: 0,
		`SELECT rolled FROM usage_rollup`:                     0,
	} {
		if n := count(t, raw, q); n != want {
			t.Fatalf("before any read, %s = %d, want %d", q, n, want)
		}
	}

	// a key's totals add its rows in the tail, without a rollup
	ku, err := s.KeyUsage(ctx, k.ID)
	if err != nil || ku.Requests != 6 || ku.InputTokens != 600 || ku.OutputTokens != 120 || ku.Spent != 6*300 || ku.LastUsedAt.IsZero() {
		t.Fatalf("key usage %+v, %v", ku, err)
	}
	if n := count(t, raw, `SELECT rolled FROM usage_rollup`); n != 0 {
		t.Fatalf("rolled %d after KeyUsage", n)
	}
	daily, err := s.DailyUsageRows(ctx, a.ID, "", "")
	if n := count(t, raw, `SELECT rolled FROM usage_rollup`); n != count(t, raw, `SELECT max(id) FROM usage`) {
		t.Fatalf("rolled %d after reading the daily rows", n)
	}
	if err != nil {
		t.Fatal(err)
	}
	perModel := map[string]int64{}
	var spent Money
	for _, d := range daily {
		perModel[d.KeyID+"/"+d.Model] += d.Requests
		spent += d.Spent
	}
	if len(daily) != 4 || perModel[k.ID+"/gpt-4o"] != 3 || perModel[k.ID+"/gpt-4o-mini"] != 3 ||
		perModel["/gpt-4o"] != 1 || perModel["/gpt-4o-mini"] != 1 || spent != 6*300+2*100 {
		t.Fatalf("daily rows %+v", daily)
	}

	// rows settled after the first read are in the next one
	settleN(t, s, a.ID, k.ID, "later", 3, 10)
	rows, err := s.UsageRows(ctx, UsageFilter{KeyID: k.ID, Limit: 4})
	if err != nil || len(rows) != 4 || rows[0].RequestID != "later-2" || rows[3].RequestID != "keyed-5" {
		t.Fatalf("the key's rows: %d, %v", len(rows), err)
	}
	settleN(t, s, a.ID, "", "keyless-later", 1, 10)
	rows, err = s.UsageRows(ctx, UsageFilter{AccountID: a.ID})
	if err != nil || len(rows) != 12 || rows[0].RequestID != "keyless-later-0" {
		t.Fatalf("the account's rows: %d, %v", len(rows), err)
	}
	settleN(t, s, a.ID, k.ID, "export", 1, 10)
	var exported int
	if err := s.EachUsage(ctx, a.ID, time.Time{}, time.Time{}, func(*UsageRecord) error { exported++; return nil }); err != nil || exported != 13 {
		t.Fatalf("exported %d, %v", exported, err)
	}
	settleN(t, s, a.ID, k.ID, "audit", 1, 10)
	mustAudit(t, s)
	if ku, err := s.KeyUsage(ctx, k.ID); err != nil || ku.Requests != 11 {
		t.Fatalf("key usage %+v, %v", ku, err)
	}

	// the audit checks usage_by_key against the rows
	if _, err := raw.Exec(`DELETE FROM usage_by_key WHERE id = (SELECT max(id) FROM usage_by_key)`); err != nil {
		t.Fatal(err)
	}
	ms, err := s.Audit(ctx)
	if err != nil || len(ms) != 2 || ms[0].Column != "usage_by_key.entries" || ms[1].Column != "usage_by_key.rows" {
		t.Fatalf("audit of a missing entry: %v, %v", ms, err)
	}
}

// TestRollupByTheWriter: with nobody reading, the writer rolls the tail
// up by itself once rollupEvery has passed, and at Close.
func TestRollupByTheWriter(t *testing.T) {
	s, path, a, k := openRollupTest(t, 50*time.Millisecond)
	raw := rawDB(t, path)
	settleN(t, s, a.ID, k.ID, "r", 5, 100)
	deadline := time.Now().Add(5 * time.Second)
	for count(t, raw, `SELECT count(*) FROM usage_by_key`) != 5 {
		if time.Now().After(deadline) {
			t.Fatalf("not rolled up: %+v", s.Stats())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if n := count(t, raw, `SELECT requests FROM keys WHERE id = ?`, k.ID); n != 5 || s.Stats().RolledUp != 5 {
		t.Fatalf("requests %d, stats %+v", n, s.Stats())
	}

	s2path := testPath(t)
	s2 := openAt(t, s2path, func(o *Options) { o.rollupEvery = time.Hour })
	raw2 := rawDB(t, s2path)
	a2 := mustAccount(t, s2, 1_000_000)
	settleN(t, s2, a2.ID, "", "c", 3, 100)
	if n := count(t, raw2, `SELECT count(*) FROM usage_daily`); n != 0 {
		t.Fatalf("%d daily rows before Close", n)
	}
	if err := s2.Close(); err != nil {
		t.Fatal(err)
	}
	if n := count(t, raw2, `SELECT sum(requests) FROM usage_daily`); n != 3 {
		t.Fatalf("%d requests in the daily rows after Close", n)
	}
	if n := count(t, raw2, `SELECT rolled FROM usage_rollup`); n != 3 {
		t.Fatalf("rolled %d after Close", n)
	}
}

// TestAuditWhileSettling: an audit taken while settles commit and the
// writer rolls up every few milliseconds compares the derived tables with
// the rows they include, so it finds nothing.
func TestAuditWhileSettling(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, func(o *Options) { o.rollupEvery = 5 * time.Millisecond })
	var accts, keys []string
	for range 4 {
		a := mustAccount(t, s, 1_000_000_000)
		_, k, err := s.CreateKey(ctx, a.ID, "k")
		if err != nil {
			t.Fatal(err)
		}
		accts, keys = append(accts, a.ID), append(keys, k.ID)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				h, err := s.Reserve(accts[g%4], 1, 1000)
				if err != nil {
					t.Error(err)
					return
				}
				if err := h.Settle(ctx, usage(fmt.Sprintf("g%d-%d", g, i), keys[g%4], 7)); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	for range 20 {
		ms, err := s.Audit(ctx)
		if err != nil || len(ms) != 0 {
			close(stop)
			wg.Wait()
			t.Fatalf("audit while settling: %v, %v", ms, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	close(stop)
	wg.Wait()
	if s.Stats().RolledUp == 0 {
		t.Fatal("the writer never rolled up")
	}
	mustAudit(t, s)
}

// TestRollupReadsRowsItDidNotSum: the tail a crash left is rolled up from
// its rows by the next writer, before it sums its own; so is a tail with a
// row another process inserted, and one another process partly rolled up.
// Each time the derived tables come out exact, as the audit recomputes them.
func TestRollupReadsRowsItDidNotSum(t *testing.T) {
	s, path, a, k := openRollupTest(t, time.Hour)
	settleN(t, s, a.ID, k.ID, "summed", 4, 10)
	if ku, err := keySummary(t, s, a.ID); err != nil || ku.Requests != 4 || s.stats.rolledFromRows.Load() != 0 {
		t.Fatalf("the writer's own sums: %+v, %v; %d rows read", ku, err, s.stats.rolledFromRows.Load())
	}

	// a crash: the files as they are between two commits, tail included
	settleN(t, s, a.ID, k.ID, "crash", 3, 10)
	crash := filepath.Join(filepath.Dir(path), "crash.db")
	for _, ext := range []string{"", "-wal"} {
		b, err := os.ReadFile(path + ext)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(crash+ext, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	c := openAt(t, crash, func(o *Options) { o.rollupEvery = time.Hour })
	if ku, err := keySummary(t, c, a.ID); err != nil || ku.Requests != 7 {
		t.Fatalf("after the crash: %+v, %v", ku, err)
	}
	if got := c.stats.rolledFromRows.Load(); got != 3 {
		t.Fatalf("the crash's tail: %d rows read, want 3", got)
	}
	mustAudit(t, c)

	// a row of another process between two of ours, with its debit
	raw := rawDB(t, path)
	for _, q := range []string{`BEGIN IMMEDIATE`,
		`INSERT INTO usage (` + usageInsertColumns + `) SELECT 'foreign', ` +
			strings.Replace(usageInsertColumns, "request_id, ", "", 1) + ` FROM usage WHERE id = 1`,
		`UPDATE accounts SET balance = balance - 10, month_spend = month_spend + 10 WHERE id = '` + a.ID + `'`,
		`COMMIT`} {
		if _, err := raw.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	settleN(t, s, a.ID, k.ID, "after-foreign", 2, 10)
	before := s.stats.rolledFromRows.Load()
	if ku, err := keySummary(t, s, a.ID); err != nil || ku.Requests != 4+3+1+2 {
		t.Fatalf("with a foreign row: %+v, %v", ku, err)
	}
	if got := s.stats.rolledFromRows.Load() - before; got != 6 {
		t.Fatalf("with a foreign row: %d rows read, want the tail's 6", got)
	}
	mustAudit(t, s)

	// another process (a command line) rolls up part of the tail
	settleN(t, s, a.ID, k.ID, "partly", 2, 10)
	other := openAt(t, path, func(o *Options) { o.rollupEvery = time.Hour })
	if ku, err := keySummary(t, other, a.ID); err != nil || ku.Requests != 12 {
		t.Fatalf("the other process: %+v, %v", ku, err)
	}
	settleN(t, s, a.ID, k.ID, "after-other", 1, 10)
	before = s.stats.rolledFromRows.Load()
	if ku, err := keySummary(t, s, a.ID); err != nil || ku.Requests != 13 {
		t.Fatalf("after the other process's rollup: %+v, %v", ku, err)
	}
	if got := s.stats.rolledFromRows.Load() - before; got != 1 {
		t.Fatalf("after the other process's rollup: %d rows read, want 1", got)
	}
	mustAudit(t, s)
	// and back to its own sums
	settleN(t, s, a.ID, k.ID, "own", 2, 10)
	before = s.stats.rolledFromRows.Load()
	if ku, err := keySummary(t, s, a.ID); err != nil || ku.Requests != 15 || s.stats.rolledFromRows.Load() != before {
		t.Fatalf("own sums again: %+v, %v", ku, err)
	}
	mustAudit(t, s)
}

// keySummary reads the account's one key's totals through a reader that
// catches up (ListKeySummaries).
func keySummary(t *testing.T, s *Store, acct string) (KeySummary, error) {
	t.Helper()
	ks, err := s.ListKeySummaries(context.Background(), acct)
	if err != nil || len(ks) != 1 {
		return KeySummary{}, fmt.Errorf("%d keys, %v", len(ks), err)
	}
	return ks[0], nil
}
