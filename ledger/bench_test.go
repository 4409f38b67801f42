package ledger

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkSettle measures reserve + settle (a durable debit with its usage
// row) from many goroutines, over many accounts and on one hot account, with
// synchronous=NORMAL (and FULL for comparison).
func BenchmarkSettle(b *testing.B) {
	for _, bc := range []struct {
		name     string
		accounts int
		sync     string
	}{{"many-accounts", 1000, "normal"}, {"hot-account", 1, "normal"}, {"many-accounts-sync-full", 1000, "full"}} {
		b.Run(bc.name, func(b *testing.B) {
			ctx := context.Background()
			s := openTest(b, func(o *Options) { o.Synchronous = bc.sync })
			ids := make([]string, bc.accounts)
			keys := make([]string, bc.accounts)
			for i := range ids {
				a := mustAccount(b, s, 1_000_000_000_000)
				_, k, err := s.CreateKey(ctx, a.ID, "bench")
				if err != nil {
					b.Fatal(err)
				}
				ids[i], keys[i] = a.ID, k.ID
				if _, _, err := s.AccountState(a.ID); err != nil {
					b.Fatal(err)
				}
			}
			var seq atomic.Int64
			before := s.Stats()
			b.SetParallelism(64)
			b.ReportAllocs()
			b.ResetTimer()
			start := time.Now()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					n := seq.Add(1)
					i := int(n) % len(ids)
					h, err := s.Reserve(ids[i], 1000, 50_000)
					if err != nil {
						b.Error(err)
						return
					}
					rec := &UsageRecord{
						RequestID: NewRequestID(), KeyID: keys[i], Model: "gpt-4o-mini",
						Provider: "openai", UpstreamModel: "gpt-4o-mini", UpstreamKeyID: "up_1", ClientFormat: "chat",
						Stream: true, Tokens: Tokens{Input: 1200, Output: 300, CacheRead: 200},
						Cost: 12_345, UsageSource: "upstream", Status: 200, Outcome: "ok",
						Latency: 800 * time.Millisecond, TTFT: 120 * time.Millisecond,
					}
					if err := h.Settle(ctx, rec); err != nil {
						b.Error(err)
						return
					}
				}
			})
			elapsed := time.Since(start)
			b.StopTimer()
			st := s.Stats()
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "debits/s")
			if tx := st.Transactions - before.Transactions; tx > 0 {
				b.ReportMetric(float64(st.Commands-before.Commands)/float64(tx), "cmds/tx")
			}
		})
	}
}

// BenchmarkAuthenticate measures a key-cache hit; it must not allocate.
func BenchmarkAuthenticate(b *testing.B) {
	ctx := context.Background()
	s := openTest(b)
	a := mustAccount(b, s, 0)
	for i := 0; i < 1000; i++ { // a realistically populated cache
		if _, _, err := s.CreateKey(ctx, a.ID, ""); err != nil {
			b.Fatal(err)
		}
	}
	secret, _, err := s.CreateKey(ctx, a.ID, "bench")
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := s.Authenticate(secret); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkReserveRelease measures the in-memory hold path.
func BenchmarkReserveRelease(b *testing.B) {
	for _, bc := range []struct {
		name     string
		accounts int
	}{{"many-accounts", 1000}, {"hot-account", 1}} {
		b.Run(bc.name, func(b *testing.B) {
			s := openTest(b)
			ids := make([]string, bc.accounts)
			for i := range ids {
				ids[i] = mustAccount(b, s, 1_000_000_000).ID
				if _, _, err := s.AccountState(ids[i]); err != nil {
					b.Fatal(err)
				}
			}
			var seq atomic.Int64
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					h, err := s.Reserve(ids[int(seq.Add(1))%len(ids)], 10, 1000)
					if err != nil {
						b.Error(err)
						return
					}
					h.Release()
				}
			})
		})
	}
}

// BenchmarkSettlePostgres measures reserve + settle (a durable debit with
// its usage row) on the PostgreSQL ledger: from one instance over many
// accounts and on one hot account, and from three instances (three stores,
// each with its pool, writer and lease) sharing the accounts. It needs
// MODELGATE_TEST_POSTGRES, as the tests do.
//
//	go test -run '^$' -bench BenchmarkSettlePostgres -benchtime 20000x ./ledger/
func BenchmarkSettlePostgres(b *testing.B) {
	for _, bc := range []struct {
		name                string
		accounts, instances int
	}{{"one-instance", 1000, 1}, {"one-instance-hot-account", 1, 1}, {"three-instances", 1000, 3}} {
		b.Run(bc.name, func(b *testing.B) {
			ctx := context.Background()
			db := newPostgresDB(b)
			stores := make([]*Store, bc.instances)
			for i := range stores {
				stores[i] = backend{pg: true}.openAt(b, db, func(o *Options) { o.PollInterval = 0 })
			}
			ids := make([]string, bc.accounts)
			keys := make([]string, bc.accounts)
			for i := range ids {
				a := mustAccount(b, stores[0], 1_000_000_000_000)
				_, k, err := stores[0].CreateKey(ctx, a.ID, "bench")
				if err != nil {
					b.Fatal(err)
				}
				ids[i], keys[i] = a.ID, k.ID
				for _, s := range stores {
					if _, _, err := s.AccountState(a.ID); err != nil {
						b.Fatal(err)
					}
				}
			}
			var seq atomic.Int64
			b.SetParallelism(64)
			b.ResetTimer()
			start := time.Now()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					n := seq.Add(1)
					i := int(n) % len(ids)
					s := stores[int(n)%len(stores)]
					h, err := s.Reserve(ids[i], 1000, 50_000)
					if err != nil {
						b.Error(err)
						return
					}
					rec := &UsageRecord{
						RequestID: NewRequestID(), KeyID: keys[i], Model: "gpt-4o-mini",
						Provider: "openai", UpstreamModel: "gpt-4o-mini", UpstreamKeyID: "up_1", ClientFormat: "chat",
						Stream: true, Tokens: Tokens{Input: 1200, Output: 300, CacheRead: 200},
						Cost: 12_345, UsageSource: "upstream", Status: 200, Outcome: "ok",
						Latency: 800 * time.Millisecond, TTFT: 120 * time.Millisecond,
					}
					if err := h.Settle(ctx, rec); err != nil {
						b.Error(err)
						return
					}
				}
			})
			elapsed := time.Since(start)
			b.StopTimer()
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "debits/s")
			var tx, cmds, reserves uint64
			for _, s := range stores {
				st := s.Stats()
				tx, cmds, reserves = tx+st.Transactions, cmds+st.Commands, reserves+st.DatabaseReserves
			}
			if tx > 0 {
				b.ReportMetric(float64(cmds)/float64(tx), "cmds/tx")
			}
			// the reserves that reached the database, per debit (the rest
			// were carved from advances)
			b.ReportMetric(float64(reserves)/float64(b.N), "db-reserves/op")
		})
	}
}

// BenchmarkSettleLatency measures one reserve + settle at a time: the time a
// non-streamed request at c=1 waits for its durable debit (a write
// transaction of its own: the usage row, the account, the key's totals and
// the daily rollup, and their WAL frames).
func BenchmarkSettleLatency(b *testing.B) {
	ctx := context.Background()
	s := openTest(b)
	a := mustAccount(b, s, 1_000_000_000_000)
	_, k, err := s.CreateKey(ctx, a.ID, "bench")
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		h, err := s.Reserve(a.ID, 1000, 50_000)
		if err != nil {
			b.Fatal(err)
		}
		rec := &UsageRecord{RequestID: NewRequestID(), KeyID: k.ID, Model: "gpt-4o-mini", Provider: "openai", UpstreamModel: "gpt-4o-mini",
			UpstreamKeyID: "up_1", ClientFormat: "chat", Tokens: Tokens{Input: 1200, Output: 300}, Cost: 12_345, UsageSource: "upstream",
			Status: 200, Outcome: "ok", Latency: time.Millisecond}
		if err := h.Settle(ctx, rec); err != nil {
			b.Fatal(err)
		}
	}
}
