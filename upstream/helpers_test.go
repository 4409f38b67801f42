package upstream

import (
	"math/rand/v2"
	"strconv"
	"sync"
	"testing"
	"time"
)

// fakeClock is an injectable clock that moves only when told.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *fakeClock {
	return &fakeClock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// newTestProvider builds provider name with keys "name-k1"… of the given
// weights (nil: one key of weight 1).
func newTestProvider(t testing.TB, r *Registry, name string, hc HealthConfig, weights ...int) *Provider {
	t.Helper()
	if len(weights) == 0 {
		weights = []int{1}
	}
	specs := make([]KeySpec, len(weights))
	for i, w := range weights {
		specs[i] = KeySpec{Secret: name + "-k" + strconv.Itoa(i+1), Weight: w}
	}
	p, err := r.NewProvider(name, FormatOpenAI, "https://"+name+".example", specs, hc)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// choose is Choose that must succeed.
func choose(t testing.TB, cands []Candidate, tried []*Attempt) (int, *Attempt) {
	t.Helper()
	i, a, ok := Choose(cands, tried, nil)
	if !ok {
		t.Fatal("Choose found nothing available")
	}
	return i, a
}

// one is the single candidate of p.
func one(p *Provider) []Candidate { return []Candidate{{Provider: p}} }

// seeded is a deterministic rnd for Choose.
func seeded(seed uint64) func(int) int {
	r := rand.New(rand.NewPCG(seed, seed))
	var mu sync.Mutex
	return func(n int) int {
		mu.Lock()
		defer mu.Unlock()
		return r.IntN(n)
	}
}

// failN makes n attempts on p fail with c, advancing the clock by step
// after each.
func failN(t testing.TB, clk *fakeClock, p *Provider, n int, c Cause, step time.Duration) {
	t.Helper()
	for range n {
		_, a := choose(t, one(p), nil)
		a.Failed(c, 0)
		a.Release()
		clk.Add(step)
	}
}

// noCooldown is a health config whose failure cooldowns are negligible, so
// that breakers can be driven by consecutive attempts.
var noCooldown = HealthConfig{FailureCooldown: time.Nanosecond, MaxFailureCooldown: time.Nanosecond}
