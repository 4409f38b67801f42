package relay

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/modelgate/modelgate/ledger"
)

// BenchmarkMetricsPerRequest is what one pass-through request records:
// its upstream attempt, the time to its headers and its settled usage.
func BenchmarkMetricsPerRequest(b *testing.B) {
	s, err := ledger.Open(b.Context(), ledger.Options{Path: b.TempDir() + "/l.db"})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	m := NewMetrics()
	if err := m.Register(prometheus.NewRegistry(), s); err != nil {
		b.Fatal(err)
	}
	rec := &ledger.UsageRecord{Model: "gpt-4o-mini", Provider: "openai", ClientFormat: "openai.chat", Outcome: "ok",
		Tokens: ledger.Tokens{Input: 1200, Output: 300}, Charged: 12_345}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			m.Attempt("openai", "up_1")
			m.Headers("openai", "up_1", time.Millisecond)
			m.Settled(rec)
		}
	})
}
