package upstream

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestAvailabilityByMinuteAndCause(t *testing.T) {
	clk := newClock()
	clk.Add(10 * time.Second) // 12:00:10
	r := NewRegistry(clk.Now)
	a := newTestProvider(t, r, "a", noCooldown, 1, 1)
	b := newTestProvider(t, r, "b", noCooldown)
	m0 := clk.Now().Truncate(time.Minute)

	attempt := func(p *Provider, c Cause, ok bool) {
		_, at := choose(t, one(p), nil)
		if ok {
			at.Succeeded(time.Millisecond)
		} else {
			at.Failed(c, time.Nanosecond)
		}
		at.Release()
	}
	attempt(a, 0, true)
	attempt(a, 0, true)
	attempt(a, CauseServer, false)
	a.ProbeFailed(a.Keys()[0], CauseRateLimited, time.Nanosecond) // probes count too
	attempt(b, CauseTimeout, false)
	clk.Add(time.Minute) // 12:01:10
	attempt(a, CauseAuth, false)
	a.ProbeSucceeded(a.Keys()[1], 0)

	if got := r.DrainAvailability(m0.Add(-time.Second)); len(got) != 0 {
		t.Fatalf("drain before the first minute: %+v", got)
	}
	got := r.DrainAvailability(m0.Add(59 * time.Second)) // only the first minute
	want := []MinuteCount{
		{Provider: "a", Minute: m0, OK: 2, Fail: [NumCauses]int64{CauseServer: 1, CauseRateLimited: 1}},
		{Provider: "b", Minute: m0, Fail: [NumCauses]int64{CauseTimeout: 1}},
	}
	if !equalCounts(got, want) {
		t.Fatalf("first minute:\n got %+v\nwant %+v", got, want)
	}
	got = r.DrainAvailability(clk.Now())
	want = []MinuteCount{{Provider: "a", Minute: m0.Add(time.Minute), OK: 1, Fail: [NumCauses]int64{CauseAuth: 1}}}
	if !equalCounts(got, want) {
		t.Fatalf("second minute:\n got %+v\nwant %+v", got, want)
	}
	if got := r.DrainAvailability(clk.Now()); len(got) != 0 {
		t.Fatalf("drained twice: %+v", got)
	}

	// Draining the current minute, then counting more in it: the rest comes next time.
	attempt(b, 0, true)
	got = r.DrainAvailability(clk.Now())
	attempt(b, 0, true)
	attempt(b, 0, true)
	got = append(got, r.DrainAvailability(clk.Now())...)
	if len(got) != 2 || got[0].OK != 1 || got[1].OK != 2 || !got[0].Minute.Equal(got[1].Minute) {
		t.Fatalf("current minute: %+v", got)
	}
	if got[0].Minute.Location() != time.UTC {
		t.Fatal("minute not in UTC")
	}
}

func TestAvailabilityLateOutcome(t *testing.T) {
	clk := newClock()
	r := NewRegistry(clk.Now)
	p := newTestProvider(t, r, "p", HealthConfig{})
	p.ProbeSucceeded(p.Keys()[0], 0) // 12:00
	clk.Add(2 * time.Minute)
	p.ProbeSucceeded(p.Keys()[0], 0) // 12:02
	clk.Add(-time.Minute)
	p.ProbeSucceeded(p.Keys()[0], 0) // 12:01, reported after 12:02
	p.ProbeSucceeded(p.Keys()[0], 0)
	got := r.DrainAvailability(clk.Now().Add(time.Hour))
	if len(got) != 3 || got[0].OK != 1 || got[1].OK != 2 || got[2].OK != 1 {
		t.Fatalf("%+v", got)
	}
	for i := 1; i < len(got); i++ {
		if got[i].Minute.Sub(got[i-1].Minute) != time.Minute {
			t.Fatalf("minutes out of order: %+v", got)
		}
	}
}

// TestAvailabilityDrainConcurrent records outcomes on many goroutines while
// the clock moves and another goroutine drains: every outcome is drained
// exactly once.
func TestAvailabilityDrainConcurrent(t *testing.T) {
	clk := newClock()
	r := NewRegistry(clk.Now)
	ps := []*Provider{newTestProvider(t, r, "a", HealthConfig{}), newTestProvider(t, r, "b", HealthConfig{})}
	const writers, each = 8, 5000
	var wg sync.WaitGroup
	var done atomic.Bool
	var drained [2][NumCauses + 1]int64
	var mu sync.Mutex
	collect := func(counts []MinuteCount) {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range counts {
			i := 0
			if c.Provider == "b" {
				i = 1
			}
			drained[i][NumCauses] += c.OK
			for j, f := range c.Fail {
				drained[i][j] += f
			}
		}
	}
	drainerDone := make(chan struct{})
	go func() {
		defer close(drainerDone)
		for !done.Load() {
			clk.Add(7 * time.Second)
			collect(r.DrainAvailability(clk.Now()))
		}
	}()
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := ps[w%2]
			k := p.Keys()[0]
			for i := range each {
				if i%3 == 0 {
					p.ProbeFailed(k, Cause(i%NumCauses), time.Nanosecond)
				} else {
					p.ProbeSucceeded(k, 0)
				}
			}
		}()
	}
	wg.Wait()
	done.Store(true)
	<-drainerDone
	collect(r.DrainAvailability(clk.Now().Add(time.Hour)))
	var want [2][NumCauses + 1]int64
	for w := range writers {
		for i := range each {
			if i%3 == 0 {
				want[w%2][i%NumCauses]++
			} else {
				want[w%2][NumCauses]++
			}
		}
	}
	if drained != want {
		t.Fatalf("drained %v\n   want %v", drained, want)
	}
}

func equalCounts(a, b []MinuteCount) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Provider != b[i].Provider || !a[i].Minute.Equal(b[i].Minute) || a[i].OK != b[i].OK || a[i].Fail != b[i].Fail {
			return false
		}
	}
	return true
}
