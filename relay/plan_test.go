package relay

import (
	"testing"

	"github.com/modelgate/modelgate/ledger"
)

// TestPlanModelLookup: a plan without a model list finds every model of the
// catalogue, one with a list only its own; either way the lookup allocates
// nothing (the request hot path).
func TestPlanModelLookup(t *testing.T) {
	a, b := &Model{ID: "a"}, &Model{ID: "b"}
	s := &Service{Models: map[string]*Model{"a": a, "b": b}}
	all := &Plan{Name: "all"}
	narrow := &Plan{Name: "narrow", Models: map[string]*Model{"b": b}}
	for _, tt := range []struct {
		p    *Plan
		id   string
		want *Model
	}{
		{all, "a", a}, {all, "b", b}, {all, "c", nil},
		{narrow, "a", nil}, {narrow, "b", b}, {narrow, "c", nil},
		{nil, "a", a},
	} {
		m, ok := s.Model(tt.p, tt.id)
		if m != tt.want || ok != (tt.want != nil) {
			t.Errorf("plan %v, model %s: %v %v", tt.p, tt.id, m, ok)
		}
	}
	tiered := &Plan{Tiers: []Tier{{Above: 100, Bps: 100}, {Above: 200, Bps: 300}}}
	var sink int
	if n := testing.AllocsPerRun(100, func() {
		m, _ := s.Model(all, "a")
		m2, _ := s.Model(narrow, "b")
		sink += len(m.ID) + len(m2.ID) + tiered.TierBps(ledger.Money(150)) + all.TierBps(1<<40)
	}); n != 0 {
		t.Fatalf("%v allocations per lookup", n)
	}
	_ = sink
}
