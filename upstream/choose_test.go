package upstream

import (
	"math"
	"sync"
	"testing"
	"time"
)

func TestChooseLeastInFlight(t *testing.T) {
	r := NewRegistry(newClock().Now)
	p := newTestProvider(t, r, "p", HealthConfig{}, 1, 1, 1)
	var held []*Attempt
	seen := map[*Key]bool{}
	for range 3 {
		_, a := choose(t, one(p), nil)
		held = append(held, a)
		seen[a.Key] = true
	}
	if len(seen) != 3 {
		t.Fatalf("three attempts used %d keys", len(seen))
	}
	held[1].Release()
	if _, a := choose(t, one(p), nil); a.Key != held[1].Key {
		t.Fatalf("chose %s, want the idle %s", a.Key.ID, held[1].Key.ID)
	}
	for _, k := range p.Keys() {
		if k.InFlight() != 1 {
			t.Fatalf("%s in flight %d", k.ID, k.InFlight())
		}
	}
	held[0].Release()
	held[0].Release() // idempotent
	if n := held[0].Key.InFlight(); n != 0 {
		t.Fatalf("double release: in flight %d", n)
	}
}

func TestChooseInFlightRelativeToWeight(t *testing.T) {
	r := NewRegistry(newClock().Now)
	p := newTestProvider(t, r, "p", HealthConfig{}, 1, 3)
	// Held requests settle at 1:3, the weights.
	for range 40 {
		choose(t, one(p), nil)
	}
	k := p.Keys()
	if k[0].InFlight() != 10 || k[1].InFlight() != 30 {
		t.Fatalf("in flight %d and %d, want 10 and 30", k[0].InFlight(), k[1].InFlight())
	}
}

func TestChooseTiesRotate(t *testing.T) {
	r := NewRegistry(newClock().Now)
	p := newTestProvider(t, r, "p", HealthConfig{}, 1, 1, 1)
	var got []string
	for range 9 {
		_, a := choose(t, one(p), nil)
		got = append(got, a.Key.ID)
		a.Succeeded(time.Millisecond)
		a.Release()
	}
	for i := 3; i < len(got); i++ {
		if got[i] != got[i-3] || got[i] == got[i-1] {
			t.Fatalf("picks do not rotate: %v", got)
		}
	}
}

func TestChooseWeightShare(t *testing.T) {
	weights := []int{1, 2, 5}
	for _, tc := range []struct {
		name string
		hold int // requests kept in flight; 0: each ends before the next starts
	}{
		{"sequential", 0},
		{"concurrent", 16},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := NewRegistry(newClock().Now)
			p := newTestProvider(t, r, "p", HealthConfig{}, weights...)
			counts := map[*Key]int{}
			var window []*Attempt
			const n = 16000
			for range n {
				_, a := choose(t, one(p), nil)
				counts[a.Key]++
				window = append(window, a)
				if len(window) > tc.hold {
					window[0].Release()
					window = window[1:]
				}
			}
			for i, k := range p.Keys() {
				want := float64(weights[i]) / 8
				got := float64(counts[k]) / n
				if math.Abs(got-want) > 0.02 {
					t.Errorf("key %d (weight %d): share %.3f, want %.3f", i, weights[i], got, want)
				}
			}
		})
	}
}

func TestChooseSkipsTriedKeys(t *testing.T) {
	r := NewRegistry(newClock().Now)
	p := newTestProvider(t, r, "p", HealthConfig{}, 1, 1)
	_, a1 := choose(t, one(p), nil)
	a1.Release()
	a1.Failed(CauseRateLimited, 0) // a key-level failure: the same provider may serve
	_, a2 := choose(t, one(p), []*Attempt{a1})
	if a2.Key == a1.Key {
		t.Fatal("chose the tried key again")
	}
	a2.Release()
	if _, _, ok := Choose(one(p), []*Attempt{a1, a2}, nil); ok {
		t.Fatal("every key tried, yet Choose found one")
	}
}

func TestChooseRouteOrder(t *testing.T) {
	clk := newClock()
	r := NewRegistry(clk.Now)
	a := newTestProvider(t, r, "a", noCooldown)
	b := newTestProvider(t, r, "b", noCooldown)
	cands := []Candidate{{Provider: a}, {Provider: b}}
	for range 5 {
		i, at := choose(t, cands, nil)
		if i != 0 {
			t.Fatalf("failover order: chose %d", i)
		}
		at.Succeeded(0)
		at.Release()
	}
	// a's breaker opens: its route is skipped.
	failN(t, clk, a, DefaultBreakerFailures, CauseServer, time.Second)
	if a.Breaker(clk.Now()) != BreakerOpen {
		t.Fatal("a's breaker did not open")
	}
	if i, at := choose(t, cands, nil); i != 1 || at.Provider != b {
		t.Fatalf("chose %d, want the second route", i)
	}
}

func TestChooseWeightedRoutes(t *testing.T) {
	clk := newClock()
	r := NewRegistry(clk.Now)
	a := newTestProvider(t, r, "a", noCooldown)
	b := newTestProvider(t, r, "b", noCooldown)
	c := newTestProvider(t, r, "c", noCooldown)
	cands := []Candidate{{Provider: a, Weight: 1}, {Provider: b, Weight: 3}, {Provider: c}} // c counts as 1
	rnd := seeded(1)
	counts := make([]int, 3)
	const n = 20000
	for range n {
		i, at, ok := Choose(cands, nil, rnd)
		if !ok {
			t.Fatal("nothing available")
		}
		counts[i]++
		at.Succeeded(0)
		at.Release()
	}
	for i, want := range []float64{0.2, 0.6, 0.2} {
		if got := float64(counts[i]) / n; math.Abs(got-want) > 0.02 {
			t.Errorf("route %d: share %.3f, want %.2f", i, got, want)
		}
	}
	// b unavailable: a and c share its traffic, b gets none.
	failN(t, clk, b, DefaultBreakerFailures, CauseTimeout, time.Second)
	counts = make([]int, 3)
	for range 2000 {
		i, at, ok := Choose(cands, nil, rnd)
		if !ok {
			t.Fatal("nothing available")
		}
		counts[i]++
		at.Release()
	}
	if counts[1] != 0 || counts[0] < 800 || counts[2] < 800 {
		t.Fatalf("with b down: %v", counts)
	}
}

func TestChooseWeightedFallsBackWhenPickedHasNoKey(t *testing.T) {
	r := NewRegistry(newClock().Now)
	a := newTestProvider(t, r, "a", HealthConfig{})
	b := newTestProvider(t, r, "b", HealthConfig{})
	cands := []Candidate{{Provider: a, Weight: 1000}, {Provider: b, Weight: 1}}
	_, first, ok := Choose(cands, nil, func(int) int { return 0 })
	if !ok || first.Provider != a {
		t.Fatal("want a")
	}
	first.Failed(CauseAuth, 0) // a's only key is out
	first.Release()
	i, _, ok := Choose(cands, []*Attempt{first}, func(int) int { return 0 })
	if !ok || i != 1 {
		t.Fatalf("chose %d %v, want b", i, ok)
	}
}

func TestChooseFailedProviderComesLast(t *testing.T) {
	for _, tc := range []struct {
		cause    Cause
		wantNext int // route of the retry
	}{
		{CauseConnect, 1},
		{CauseServer, 1},
		{CauseTimeout, 1},
		{CauseRateLimited, 0}, // the account, not the endpoint: a's other key
		{CauseAuth, 0},
	} {
		t.Run(tc.cause.String(), func(t *testing.T) {
			r := NewRegistry(newClock().Now)
			a := newTestProvider(t, r, "a", HealthConfig{}, 1, 1)
			b := newTestProvider(t, r, "b", HealthConfig{})
			cands := []Candidate{{Provider: a}, {Provider: b}}
			_, first := choose(t, cands, nil)
			first.Failed(tc.cause, 0)
			first.Release()
			tried := []*Attempt{first}
			i, second := choose(t, cands, tried)
			if i != tc.wantNext {
				t.Fatalf("retry chose route %d, want %d", i, tc.wantNext)
			}
			second.Failed(tc.cause, 0)
			second.Release()
			tried = append(tried, second)
			// Whatever is left is still used: a's other key, or b.
			if _, third, ok := Choose(cands, tried, nil); !ok || third.Key == first.Key || third.Key == second.Key {
				t.Fatalf("third attempt: ok=%v", ok)
			}
		})
	}
}

func TestChooseNothing(t *testing.T) {
	r := NewRegistry(newClock().Now)
	for name, cands := range map[string][]Candidate{
		"none":        nil,
		"nil":         {{}},
		"placeholder": {{Provider: &Provider{Name: "x", Format: FormatOpenAI}}},
	} {
		if _, _, ok := Choose(cands, nil, nil); ok {
			t.Errorf("%s: ok", name)
		}
	}
	p := newTestProvider(t, r, "p", HealthConfig{})
	_, a := choose(t, one(p), nil)
	a.Failed(CauseAuth, 0)
	a.Release()
	if _, _, ok := Choose(one(p), nil, nil); ok {
		t.Error("auth-failed key chosen")
	}
}

func TestChooseManyWeightedCandidates(t *testing.T) {
	r := NewRegistry(newClock().Now)
	var cands []Candidate
	for i := range 70 {
		p := newTestProvider(t, r, "p"+string(rune('A'+i%26))+string(rune('a'+i/26)), HealthConfig{})
		cands = append(cands, Candidate{Provider: p, Weight: 1})
	}
	// Everything but the last is unavailable (auth).
	for _, c := range cands[:69] {
		_, a := choose(t, one(c.Provider), nil)
		a.Failed(CauseAuth, 0)
		a.Release()
	}
	i, a, ok := Choose(cands, nil, seeded(3))
	if !ok || i != 69 {
		t.Fatalf("chose %d %v", i, ok)
	}
	a.Release()
}

func TestAttemptConcurrentReleaseAndOutcome(t *testing.T) {
	r := NewRegistry(newClock().Now)
	p := newTestProvider(t, r, "p", HealthConfig{}, 1, 1)
	var wg sync.WaitGroup
	for range 100 {
		_, a := choose(t, one(p), nil)
		wg.Add(3)
		go func() { defer wg.Done(); a.Succeeded(time.Millisecond) }()
		go func() { defer wg.Done(); a.Release() }()
		go func() { defer wg.Done(); a.Release() }()
	}
	wg.Wait()
	for _, k := range p.Keys() {
		if k.InFlight() != 0 {
			t.Fatalf("%s in flight %d", k.ID, k.InFlight())
		}
	}
}

func BenchmarkChoose(b *testing.B) {
	r := NewRegistry(nil)
	p1 := newTestProvider(b, r, "p1", HealthConfig{}, 1, 2, 1)
	p2 := newTestProvider(b, r, "p2", HealthConfig{}, 1, 1, 1)
	for _, bc := range []struct {
		name  string
		cands []Candidate
	}{
		{"order", []Candidate{{Provider: p1}, {Provider: p2}}},
		{"weighted", []Candidate{{Provider: p1, Weight: 3}, {Provider: p2, Weight: 1}}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_, a, ok := Choose(bc.cands, nil, nil)
				if !ok {
					b.Fatal("nothing available")
				}
				a.Release()
			}
		})
		b.Run(bc.name+"/outcome", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_, a, _ := Choose(bc.cands, nil, nil)
				a.Succeeded(time.Millisecond)
				a.Release()
			}
		})
		b.Run(bc.name+"/parallel", func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					_, a, _ := Choose(bc.cands, nil, nil)
					a.Succeeded(time.Millisecond)
					a.Release()
				}
			})
		})
	}
}
