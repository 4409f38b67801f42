package ratelimit

import (
	"context"
	"sync"
	"testing"
	"time"
)

// clock is a settable test clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func TestGCRA(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	// 3 a minute: an interval of 20 s, a burst of 3
	steps := []struct {
		at           time.Duration // since start
		allowed      bool
		remaining    int
		reset, retry time.Duration
	}{
		{0, true, 2, 20 * time.Second, 0},
		{0, true, 1, 40 * time.Second, 0},
		{0, true, 0, 60 * time.Second, 0},
		{0, false, 0, 60 * time.Second, 20 * time.Second},
		{19 * time.Second, false, 0, 41 * time.Second, time.Second},
		{20 * time.Second, true, 0, 60 * time.Second, 0},
		{80 * time.Second, true, 2, 20 * time.Second, 0}, // a minute after it was spent: whole again
		{200 * time.Second, true, 2, 20 * time.Second, 0},
	}
	var tat time.Time
	for i, s := range steps {
		d, next := gcra(tat, start.Add(s.at), 3, time.Minute)
		if d.Allowed() != s.allowed || d.Remaining != s.remaining || d.Reset != s.reset || d.RetryAfter != s.retry || d.Limit != 3 {
			t.Fatalf("step %d at %s: %+v, want allowed=%v remaining=%d reset=%s retry=%s", i, s.at, d, s.allowed, s.remaining, s.reset, s.retry)
		}
		if !s.allowed && !next.Equal(tat) && !tat.IsZero() {
			t.Fatalf("step %d: a refusal changed the state", i)
		}
		tat = next
	}
}

func TestMemoryRPMAndConcurrency(t *testing.T) {
	c := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	m := NewMemory(c.now)
	ctx := context.Background()
	l := Limits{RPM: 4, Concurrency: 2}

	d1, s1 := m.Admit(ctx, "a", l)
	d2, s2 := m.Admit(ctx, "a", l)
	if !d1.Allowed() || !d2.Allowed() || s1 == nil || s2 == nil {
		t.Fatalf("first two: %+v %+v", d1, d2)
	}
	// both slots taken: refused by concurrency, and the minute budget is not spent
	d3, s3 := m.Admit(ctx, "a", l)
	if d3.Reason != Concurrency || s3 != nil || d3.RetryAfter <= 0 || d3.Remaining != 2 {
		t.Fatalf("third: %+v", d3)
	}
	if _, other := m.Admit(ctx, "b", l); other == nil {
		t.Fatal("another account shares the slots")
	} else {
		other.Release()
	}
	s1.Release()
	s1.Release() // idempotent
	if m.InFlight("a") != 1 {
		t.Fatalf("in flight %d after one release", m.InFlight("a"))
	}
	d4, s4 := m.Admit(ctx, "a", l)
	if !d4.Allowed() || d4.Remaining != 1 {
		t.Fatalf("after a release: %+v", d4)
	}
	s4.Release()
	s2.Release()
	d5, s5 := m.Admit(ctx, "a", l)
	if !d5.Allowed() || d5.Remaining != 0 {
		t.Fatalf("fourth of the minute: %+v", d5)
	}
	s5.Release()
	// the budget is spent: refused by RPM, no slot taken
	d6, s6 := m.Admit(ctx, "a", l)
	if d6.Reason != RPM || s6 != nil || d6.RetryAfter != 15*time.Second || m.InFlight("a") != 0 {
		t.Fatalf("fifth: %+v, in flight %d", d6, m.InFlight("a"))
	}
	c.advance(15 * time.Second)
	if d, s := m.Admit(ctx, "a", l); !d.Allowed() {
		t.Fatalf("after the interval: %+v", d)
	} else {
		s.Release()
	}
	// unlimited: always admitted, no slot
	if d, s := m.Admit(ctx, "a", Limits{}); !d.Allowed() || s != nil || d.Limit != 0 {
		t.Fatalf("unlimited: %+v %v", d, s)
	}
	// idle accounts are forgotten; one with a request in flight is not
	_, busy := m.Admit(ctx, "c", l)
	c.advance(2 * time.Minute)
	total := 0
	for i := range m.shards {
		sh := &m.shards[i]
		sh.mu.Lock()
		sh.sweep(c.now())
		total += len(sh.accounts)
		sh.mu.Unlock()
	}
	if total != 1 || m.InFlight("c") != 1 {
		t.Fatalf("%d accounts kept after they went idle, want the busy one", total)
	}
	busy.Release()
}

// TestMemoryExactUnderConcurrency: many goroutines racing for one
// account's budget get exactly the limit.
func TestMemoryExactUnderConcurrency(t *testing.T) {
	c := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	m := NewMemory(c.now)
	var wg sync.WaitGroup
	var mu sync.Mutex
	admitted := 0
	for range 200 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if d, _ := m.Admit(context.Background(), "a", Limits{RPM: 37}); d.Allowed() {
				mu.Lock()
				admitted++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if admitted != 37 {
		t.Fatalf("%d admitted, want 37", admitted)
	}
}
