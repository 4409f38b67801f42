package ledger

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"
)

// TestUsageByRequestID: one request's usage row reads back whole, as
// Settle wrote it and as UsageRows reads it (hosted tools, discounts and a
// charge clamped above the hold included), as soon as its Settle returns:
// on SQLite without waiting for or causing a rollup, on PostgreSQL from
// another instance too. An unknown id, and one no row can have, are
// ErrNotFound; a closed store is ErrClosed.
func TestUsageByRequestID(t *testing.T) { backends(t, testUsageByRequestID) }

func testUsageByRequestID(t *testing.T, b backend) {
	ctx := context.Background()
	db := b.db(t)
	// the rollup waits an hour: a read that needed it would have to cause it
	s := b.openAt(t, db, func(o *Options) { o.rollupEvery = time.Hour })
	a := mustAccount(t, s, 1_000_000_000)
	_, k1, err := s.CreateKey(ctx, a.ID, "k1")
	if err != nil {
		t.Fatal(err)
	}
	_, k2, err := s.CreateKey(ctx, a.ID, "k2")
	if err != nil {
		t.Fatal(err)
	}
	settle := func(acct string, hold Money, rec *UsageRecord) *UsageRecord {
		t.Helper()
		h, err := s.Reserve(acct, 1, hold)
		if err != nil {
			t.Fatal(err)
		}
		if err := h.Settle(ctx, rec); err != nil {
			t.Fatal(err)
		}
		return rec
	}
	// what the read must give back: the settled record, its time as stored
	// (milliseconds, UTC)
	stored := func(rec *UsageRecord) UsageRecord {
		want := *rec
		want.CreatedAt = time.UnixMilli(rec.CreatedAt.UnixMilli()).UTC()
		return want
	}
	check := func(s *Store, rec *UsageRecord) UsageRecord {
		t.Helper()
		got, err := s.UsageByRequestID(ctx, rec.RequestID)
		if err != nil {
			t.Fatalf("UsageByRequestID(%q): %v", rec.RequestID, err)
		}
		if want := stored(rec); !reflect.DeepEqual(got, want) {
			t.Fatalf("UsageByRequestID(%q)\n got %+v\nwant %+v", rec.RequestID, got, want)
		}
		return got
	}

	cut := usage("req_cut", k1.ID, 70_000_000)
	cut.Outcome, cut.UsageSource, cut.Status = "client_closed", "estimated", 200
	cut.Hosted, cut.HostedCost = HostedUses{WebSearch: 3, WebFetch: 1, ImageGeneration: 2}, 60_000_000
	cut.TierBps, cut.Discount = 500, 25_000_000
	check(s, settle(a.ID, 100_000_000, cut))
	plain := usage("req_plain", k2.ID, 1234)
	plain.Stream, plain.TTFT = false, 0
	check(s, settle(a.ID, 10_000, plain))

	// a cost above the hold and the available balance: charged is less
	poor := mustAccount(t, s, 100)
	_, kp, err := s.CreateKey(ctx, poor.ID, "kp")
	if err != nil {
		t.Fatal(err)
	}
	over := check(s, settle(poor.ID, 50, usage("req_over", kp.ID, 500)))
	if !over.OverHold || over.Charged != 100 || over.Cost != 500 || over.AccountID != poor.ID {
		t.Fatalf("over-hold row %+v", over)
	}

	if !b.pg {
		// the rows were read from the usage table, not through the rollup
		if n := count(t, b.raw(t, db), `SELECT rolled FROM usage_rollup`); n != 0 {
			t.Fatalf("rolled up to row %d: UsageByRequestID caused a rollup", n)
		}
	}
	// the two ways of reading a row agree
	rows, err := s.UsageRows(ctx, UsageFilter{KeyID: k1.ID})
	if err != nil || len(rows) != 1 || !reflect.DeepEqual(rows[0], check(s, cut)) {
		t.Fatalf("UsageRows = %+v, %v; want the row of %s", rows, err, cut.RequestID)
	}

	if b.pg {
		// another instance on the same database reads a row this one
		// settled a moment ago
		other := b.openAt(t, db)
		check(other, plain)
		late := settle(a.ID, 10_000, usage("req_late", k1.ID, 77))
		check(other, late)
	}

	for _, id := range []string{"req_nope", "", "req_cut ", "REQ_CUT", "req_\x00cut", "req_\xff\xfe"} {
		if got, err := s.UsageByRequestID(ctx, id); !errors.Is(err, ErrNotFound) || got.RequestID != "" {
			t.Errorf("UsageByRequestID(%q) = %+v, %v; want ErrNotFound", id, got, err)
		}
	}
	mustAudit(t, s)

	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.UsageByRequestID(ctx, cut.RequestID); !errors.Is(err, ErrClosed) {
		t.Fatalf("after Close: %v", err)
	}
}
