package upstream

import (
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// keyStatus is the status of p's i-th key at the clock's time.
func keyStatus(p *Provider, clk *fakeClock, i int) KeyStatus {
	return p.Status(clk.Now()).Keys[i]
}

func TestRateLimitCooldowns(t *testing.T) {
	start := newClock().Now()
	for _, tc := range []struct {
		name   string
		header http.Header
		hc     HealthConfig
		want   time.Duration
	}{
		{"retry-after seconds", http.Header{"Retry-After": {"20"}}, HealthConfig{}, 20 * time.Second},
		{"retry-after date", http.Header{"Retry-After": {start.Add(90 * time.Second).Format(http.TimeFormat)}}, HealthConfig{}, 90 * time.Second},
		{"openai requests reset", http.Header{"X-Ratelimit-Reset-Requests": {"1s"}, "X-Ratelimit-Remaining-Requests": {"0"}, "X-Ratelimit-Reset-Tokens": {"6m0s"}, "X-Ratelimit-Remaining-Tokens": {"5000"}}, HealthConfig{}, time.Second},
		{"openai tokens reset", http.Header{"X-Ratelimit-Reset-Tokens": {"6m0s"}, "X-Ratelimit-Remaining-Tokens": {"0"}}, HealthConfig{}, 6 * time.Minute},
		{"openai milliseconds", http.Header{"X-Ratelimit-Reset-Requests": {"20ms"}}, HealthConfig{}, 20 * time.Millisecond},
		{"anthropic requests reset", http.Header{"Anthropic-Ratelimit-Requests-Reset": {start.Add(42 * time.Second).Format(time.RFC3339)}}, HealthConfig{}, 42 * time.Second},
		{"anthropic tokens reset", http.Header{"Anthropic-Ratelimit-Tokens-Reset": {start.Add(3 * time.Minute).Format(time.RFC3339)}, "Anthropic-Ratelimit-Tokens-Remaining": {"0"}}, HealthConfig{}, 3 * time.Minute},
		{"default", http.Header{}, HealthConfig{}, DefaultRateLimitCooldown},
		{"configured default", http.Header{}, HealthConfig{RateLimitCooldown: 7 * time.Second}, 7 * time.Second},
		{"capped", http.Header{"Retry-After": {"86400"}}, HealthConfig{}, DefaultMaxRetryAfter},
		{"configured cap", http.Header{"Retry-After": {"600"}}, HealthConfig{MaxRetryAfter: time.Minute}, time.Minute},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := newClock()
			r := NewRegistry(clk.Now)
			p := newTestProvider(t, r, "p", tc.hc, 1, 1)
			_, a := choose(t, one(p), nil)
			hint, _ := RetryHint(tc.header, clk.Now())
			a.Failed(CauseRateLimited, hint)
			a.Release()
			i := 0
			if a.Key != p.Keys()[0] {
				i = 1
			}
			ks := keyStatus(p, clk, i)
			if ks.State != KeyCooling || !ks.Until.Equal(start.Add(tc.want)) {
				t.Fatalf("key %s until %v, want cooling until +%v", ks.State, ks.Until.Sub(start), tc.want)
			}
			// The other key serves meanwhile; the cooled one comes back on time.
			for range 3 {
				_, b := choose(t, one(p), nil)
				if b.Key == a.Key {
					t.Fatal("cooling key chosen")
				}
				b.Release()
			}
			clk.Add(tc.want - time.Nanosecond)
			if keyStatus(p, clk, i).State != KeyCooling {
				t.Fatal("cooldown ended early")
			}
			clk.Add(time.Nanosecond)
			if ks := keyStatus(p, clk, i); ks.State != KeyOK {
				t.Fatalf("after the cooldown: %s", ks.State)
			}
			// A 429 does not count toward breakers.
			if p.Breaker(clk.Now()) != BreakerClosed || a.Key.Breaker(clk.Now()) != BreakerClosed {
				t.Fatal("a 429 moved a breaker")
			}
		})
	}
}

func TestAuthFailureUntilProbe(t *testing.T) {
	clk := newClock()
	r := NewRegistry(clk.Now)
	p := newTestProvider(t, r, "p", HealthConfig{}, 1, 1)
	_, a := choose(t, one(p), nil)
	a.Failed(CauseAuth, 0)
	a.Release()
	clk.Add(24 * time.Hour)
	for range 4 {
		_, b := choose(t, one(p), nil)
		if b.Key == a.Key {
			t.Fatal("auth-failed key chosen")
		}
		b.Succeeded(0)
		b.Release()
	}
	probe := p.ProbeKeys(clk.Now())
	if len(probe) != 2 || probe[0] != a.Key {
		t.Fatalf("probe keys %v, want the failed key and a healthy one", probe)
	}
	p.ProbeFailed(a.Key, CauseAuth, 0)
	if s := a.Key.st; !s.hard.Load() {
		t.Fatal("failed probe re-enabled the key")
	}
	p.ProbeSucceeded(a.Key, time.Millisecond)
	for i := range p.Keys() {
		if ks := keyStatus(p, clk, i); ks.State != KeyOK {
			t.Fatalf("key %d: %s after the probe", i, ks.State)
		}
	}
	_, c := choose(t, one(p), nil)
	_, d := choose(t, one(p), nil)
	if c.Key == d.Key {
		t.Fatal("re-enabled key not used")
	}
}

func TestFailureCooldownGrows(t *testing.T) {
	clk := newClock()
	r := NewRegistry(clk.Now)
	hc := HealthConfig{BreakerFailures: 100, MaxFailureCooldown: 10 * time.Second}
	p := newTestProvider(t, r, "p", hc)
	for i, want := range []time.Duration{1, 2, 4, 8, 10, 10} {
		want *= time.Second
		_, a := choose(t, one(p), nil)
		a.Failed([]Cause{CauseServer, CauseTimeout, CauseConnect, CauseClosed, CauseOverloaded, CauseServer}[i], 0)
		a.Release()
		ks := keyStatus(p, clk, 0)
		if ks.State != KeyCooling || ks.Until.Sub(clk.Now()) != want || ks.ConsecutiveFailures != i+1 {
			t.Fatalf("failure %d: %s for %v (%d consecutive), want cooling %v", i+1, ks.State, ks.Until.Sub(clk.Now()), ks.ConsecutiveFailures, want)
		}
		if _, _, ok := Choose(one(p), nil, nil); ok {
			t.Fatal("cooling key chosen")
		}
		clk.Add(want)
	}
	// A retry hint can only lengthen the cooldown.
	_, a := choose(t, one(p), nil)
	a.Failed(CauseOverloaded, time.Minute)
	a.Release()
	if ks := keyStatus(p, clk, 0); ks.Until.Sub(clk.Now()) != time.Minute {
		t.Fatalf("503 with Retry-After 60: cooling %v", ks.Until.Sub(clk.Now()))
	}
	clk.Add(time.Minute)
	_, a = choose(t, one(p), nil)
	a.Succeeded(0)
	a.Release()
	if ks := keyStatus(p, clk, 0); ks.ConsecutiveFailures != 0 {
		t.Fatalf("success left %d consecutive failures", ks.ConsecutiveFailures)
	}
	_, a = choose(t, one(p), nil)
	a.Failed(CauseServer, 0)
	a.Release()
	if ks := keyStatus(p, clk, 0); ks.Until.Sub(clk.Now()) != time.Second {
		t.Fatalf("after a success the cooldown restarts at %v", ks.Until.Sub(clk.Now()))
	}
}

func TestBreakerWindow(t *testing.T) {
	for _, tc := range []struct {
		name     string
		n        int
		step     time.Duration
		wantOpen bool
	}{
		{"N within W", 5, 14 * time.Second, true}, // 5 failures over 56s
		{"N over more than W", 5, 16 * time.Second, false},
		{"N-1", 4, time.Second, false},
		{"many spread out", 50, 20 * time.Second, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := newClock()
			r := NewRegistry(clk.Now)
			p := newTestProvider(t, r, "p", noCooldown)
			for i := range tc.n {
				_, a := choose(t, one(p), nil)
				a.Failed(CauseServer, 0)
				a.Release()
				if i < tc.n-1 {
					clk.Add(tc.step)
				}
			}
			now := clk.Now()
			if got := p.Breaker(now) == BreakerOpen; got != tc.wantOpen {
				t.Fatalf("provider breaker open = %v", got)
			}
			if got := p.Keys()[0].Breaker(now) == BreakerOpen; got != tc.wantOpen {
				t.Fatalf("key breaker open = %v", got)
			}
		})
	}
}

func TestBreakerWindowConfigured(t *testing.T) {
	clk := newClock()
	r := NewRegistry(clk.Now)
	hc := noCooldown
	hc.BreakerFailures, hc.BreakerWindow = 2, 5*time.Second
	p := newTestProvider(t, r, "p", hc)
	failN(t, clk, p, 2, CauseConnect, 6*time.Second)
	if p.Breaker(clk.Now()) != BreakerClosed {
		t.Fatal("2 failures 6s apart opened a 2-in-5s breaker")
	}
	failN(t, clk, p, 2, CauseConnect, 4*time.Second)
	if p.Breaker(clk.Now()) != BreakerOpen {
		t.Fatal("2 failures 4s apart did not open it")
	}
}

// openBreakers opens p's breakers (one key) and waits out the cooldown.
func openBreakers(t *testing.T, clk *fakeClock, p *Provider) {
	t.Helper()
	failN(t, clk, p, p.hc.BreakerFailures, CauseServer, time.Second)
	if p.Breaker(clk.Now()) != BreakerOpen {
		t.Fatal("breaker did not open")
	}
	if _, _, ok := Choose(one(p), nil, nil); ok {
		t.Fatal("open breaker let a request through")
	}
	clk.Add(p.hc.BreakerCooldown)
	if p.Breaker(clk.Now()) != BreakerHalfOpen {
		t.Fatalf("after the cooldown: %s", p.Breaker(clk.Now()))
	}
}

func TestBreakerOneTrial(t *testing.T) {
	clk := newClock()
	r := NewRegistry(clk.Now)
	p := newTestProvider(t, r, "p", noCooldown)
	openBreakers(t, clk, p)
	var wg sync.WaitGroup
	var won atomic.Int32
	var trial atomic.Pointer[Attempt]
	start := make(chan struct{})
	for range 100 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			if _, a, ok := Choose(one(p), nil, nil); ok {
				won.Add(1)
				trial.Store(a)
			}
		}()
	}
	close(start)
	wg.Wait()
	if won.Load() != 1 {
		t.Fatalf("%d trials passed, want 1", won.Load())
	}
	a := trial.Load()
	if a.provGen == 0 || a.keyGen == 0 {
		t.Fatal("the trial holds no token")
	}
	a.Succeeded(time.Millisecond)
	a.Release()
	if p.Breaker(clk.Now()) != BreakerClosed || a.Key.Breaker(clk.Now()) != BreakerClosed {
		t.Fatal("trial success did not close the breakers")
	}
	for range 10 {
		_, b := choose(t, one(p), nil)
		b.Release()
	}
}

func TestBreakerTrialOutcome(t *testing.T) {
	for _, tc := range []struct {
		name      string
		outcome   func(a *Attempt)
		wantState BreakerState
		wantOpen  time.Duration // the reopened breaker's cooldown
	}{
		{"success", func(a *Attempt) { a.Succeeded(0) }, BreakerClosed, 0},
		{"client error counts as success", func(a *Attempt) { a.Succeeded(0) }, BreakerClosed, 0},
		{"failure", func(a *Attempt) { a.Failed(CauseServer, 0) }, BreakerOpen, 2 * DefaultBreakerCooldown},
		{"closed stream", func(a *Attempt) { a.Failed(CauseClosed, 0) }, BreakerOpen, 2 * DefaultBreakerCooldown},
		{"429 proves the endpoint works", func(a *Attempt) { a.Failed(CauseRateLimited, 0) }, BreakerClosed, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := newClock()
			r := NewRegistry(clk.Now)
			p := newTestProvider(t, r, "p", noCooldown)
			openBreakers(t, clk, p)
			_, a := choose(t, one(p), nil)
			tc.outcome(a)
			a.Release()
			if got := p.Breaker(clk.Now()); got != tc.wantState {
				t.Fatalf("provider breaker %s, want %s", got, tc.wantState)
			}
			if tc.wantState != BreakerOpen {
				return
			}
			if s := p.Status(clk.Now()); !s.BreakerUntil.Equal(clk.Now().Add(tc.wantOpen)) {
				t.Fatalf("reopened until +%v, want +%v", s.BreakerUntil.Sub(clk.Now()), tc.wantOpen)
			}
			// Doubling continues up to the cap, and a success resets it.
			for _, want := range []time.Duration{4 * DefaultBreakerCooldown, 8 * DefaultBreakerCooldown, DefaultMaxBreakerCooldown, DefaultMaxBreakerCooldown} {
				clk.Add(p.Status(clk.Now()).BreakerUntil.Sub(clk.Now()))
				_, a := choose(t, one(p), nil)
				a.Failed(CauseTimeout, 0)
				a.Release()
				if got := p.Status(clk.Now()).BreakerUntil.Sub(clk.Now()); got != want {
					t.Fatalf("reopened for %v, want %v", got, want)
				}
			}
			clk.Add(DefaultMaxBreakerCooldown)
			_, a = choose(t, one(p), nil)
			a.Succeeded(0)
			a.Release()
			openBreakers(t, clk, p)
			if p.state.br.trips != 1 {
				t.Fatalf("trips %d after a reset, want 1", p.state.br.trips)
			}
		})
	}
}

func TestBreakerAbandonedTrial(t *testing.T) {
	clk := newClock()
	r := NewRegistry(clk.Now)
	p := newTestProvider(t, r, "p", noCooldown)
	openBreakers(t, clk, p)
	_, a := choose(t, one(p), nil)
	if _, _, ok := Choose(one(p), nil, nil); ok {
		t.Fatal("second trial while the first is out")
	}
	a.Release() // no outcome: the token goes back
	_, b := choose(t, one(p), nil)
	a.Failed(CauseServer, 0) // a late outcome of the released attempt decides nothing
	if p.Breaker(clk.Now()) != BreakerHalfOpen {
		t.Fatalf("late outcome moved the breaker to %s", p.Breaker(clk.Now()))
	}
	b.Succeeded(0)
	b.Release()
	if p.Breaker(clk.Now()) != BreakerClosed {
		t.Fatal("the second trial did not close it")
	}
}

func TestBreakerLeakedTrialLapses(t *testing.T) {
	clk := newClock()
	r := NewRegistry(clk.Now)
	p := newTestProvider(t, r, "p", noCooldown)
	openBreakers(t, clk, p)
	_, leaked := choose(t, one(p), nil) // never reported nor released
	clk.Add(DefaultMaxBreakerCooldown - time.Nanosecond)
	if _, _, ok := Choose(one(p), nil, nil); ok {
		t.Fatal("trial lapsed early")
	}
	clk.Add(time.Nanosecond)
	_, a := choose(t, one(p), nil)
	leaked.Succeeded(0) // stale token: ignored
	if p.Breaker(clk.Now()) != BreakerHalfOpen {
		t.Fatal("the lapsed token's outcome counted")
	}
	a.Succeeded(0)
	a.Release()
	if p.Breaker(clk.Now()) != BreakerClosed {
		t.Fatal("the new trial did not close it")
	}
}

func TestStaleOutcomesWhileOpen(t *testing.T) {
	clk := newClock()
	r := NewRegistry(clk.Now)
	p := newTestProvider(t, r, "p", noCooldown)
	_, old := choose(t, one(p), nil) // started before the breaker opens
	failN(t, clk, p, DefaultBreakerFailures, CauseServer, time.Second)
	old.Succeeded(0)
	old.Release()
	if p.Breaker(clk.Now()) != BreakerOpen {
		t.Fatal("an old request's success closed an open breaker")
	}
}

func TestProbes(t *testing.T) {
	clk := newClock()
	r := NewRegistry(clk.Now)
	p := newTestProvider(t, r, "p", noCooldown, 1, 1, 1)
	k := p.Keys()
	// Healthy: one key per round, in turn.
	seen := map[*Key]bool{}
	for range 3 {
		pk := p.ProbeKeys(clk.Now())
		if len(pk) != 1 {
			t.Fatalf("probe keys %d, want 1", len(pk))
		}
		seen[pk[0]] = true
	}
	if len(seen) != 3 {
		t.Fatalf("probes used %d keys in 3 rounds", len(seen))
	}
	// k0 auth-failed, k1's breaker open then half-open.
	p.ProbeFailed(k[0], CauseAuth, 0)
	for range DefaultBreakerFailures {
		p.ProbeFailed(k[1], CauseConnect, 0)
	}
	if k[1].Breaker(clk.Now()) != BreakerOpen {
		t.Fatal("probe failures did not open the key's breaker")
	}
	if p.Breaker(clk.Now()) != BreakerOpen {
		t.Fatal("probe failures did not open the provider's breaker")
	}
	if pk := p.ProbeKeys(clk.Now()); len(pk) != 0 {
		t.Fatalf("probing while the provider's breaker is open: %d keys", len(pk))
	}
	clk.Add(DefaultBreakerCooldown)
	pk := p.ProbeKeys(clk.Now())
	want := map[*Key]bool{k[0]: true, k[1]: true, k[2]: true}
	if len(pk) != 3 {
		t.Fatalf("probe keys %d, want 3", len(pk))
	}
	for _, x := range pk {
		if !want[x] {
			t.Fatalf("unexpected probe key %s", x.ID)
		}
	}
	// A probe failure on a half-open breaker reopens it, doubled.
	p.ProbeFailed(k[1], CauseTimeout, 0)
	if st, _, _, _ := k[1].st.status(clk.Now().UnixNano()); st != KeyOpen {
		t.Fatalf("key 1 %s after a failed probe", st)
	}
	if p.Breaker(clk.Now()) != BreakerOpen {
		t.Fatal("the failed probe did not reopen the provider")
	}
	clk.Add(2 * DefaultBreakerCooldown)
	p.ProbeSucceeded(k[1], time.Millisecond)
	p.ProbeSucceeded(k[0], time.Millisecond)
	if p.Breaker(clk.Now()) != BreakerClosed || k[1].Breaker(clk.Now()) != BreakerClosed {
		t.Fatal("probe success did not close the half-open breakers")
	}
	if s := p.Status(clk.Now()); s.Keys[0].State != KeyOK || s.Keys[1].State != KeyOK {
		t.Fatalf("after probes: %+v", s.Keys)
	}
}

func TestReloadKeepsState(t *testing.T) {
	clk := newClock()
	r := NewRegistry(clk.Now)
	old := newTestProvider(t, r, "p", noCooldown, 1, 1)
	k0, k1 := old.Keys()[0], old.Keys()[1]
	// k0 cools down after a 429, k1 serves a request and has an open breaker.
	_, a := choose(t, one(old), nil)
	if a.Key != k0 {
		a.Release()
		_, a = choose(t, one(old), nil)
	}
	a.Failed(CauseRateLimited, time.Minute)
	a.Release()
	_, held := choose(t, one(old), nil)
	if held.Key != k1 {
		t.Fatal("want k1")
	}
	for range DefaultBreakerFailures {
		old.ProbeFailed(k1, CauseServer, 0)
	}

	// The same configuration, rebuilt.
	p := newTestProvider(t, r, "p", noCooldown, 1, 1)
	now := clk.Now()
	s := p.Status(now)
	if s.Keys[0].State != KeyCooling || s.Keys[1].State != KeyOpen || s.Keys[1].InFlight != 1 {
		t.Fatalf("after reload: %+v", s.Keys)
	}
	if p.Breaker(now) != BreakerOpen {
		t.Fatal("provider breaker forgotten")
	}
	held.Release() // the old request ends: the new Provider sees it
	if n := p.Keys()[1].InFlight(); n != 0 {
		t.Fatalf("in flight %d", n)
	}

	// A changed base URL is a new endpoint: its breaker starts closed; keys keep theirs.
	moved, err := r.NewProvider("p", FormatOpenAI, "https://elsewhere.example/v1", []KeySpec{{Secret: "p-k1"}, {Secret: "p-k2"}}, noCooldown)
	if err != nil {
		t.Fatal(err)
	}
	if moved.Breaker(now) != BreakerClosed || moved.Keys()[1].Breaker(now) != BreakerOpen {
		t.Fatal("endpoint change: want the provider's breaker closed and the key's kept")
	}

	// A removed key is not used; a new one is.
	clk.Add(time.Minute)
	fresh, err := r.NewProvider("p", FormatOpenAI, "https://elsewhere.example/v1", []KeySpec{{Secret: "p-k1"}, {Secret: "p-k3"}}, noCooldown)
	if err != nil {
		t.Fatal(err)
	}
	for range 10 {
		_, a := choose(t, one(fresh), nil)
		if a.Key.ID == k1.ID {
			t.Fatal("removed key chosen")
		}
		a.Release()
	}
}

func TestRetain(t *testing.T) {
	clk := newClock()
	r := NewRegistry(clk.Now)
	gone := newTestProvider(t, r, "gone", noCooldown)
	kept := newTestProvider(t, r, "kept", noCooldown, 1, 1)
	failN(t, clk, gone, DefaultBreakerFailures, CauseConnect, time.Second)
	_ = r.DrainIncidents()
	kept2, err := r.NewProvider("kept", FormatOpenAI, "https://kept.example", []KeySpec{{Secret: "kept-k1"}}, noCooldown)
	if err != nil {
		t.Fatal(err)
	}
	r.Retain([]*Provider{kept2})
	ev := r.DrainIncidents()
	if len(ev) != 1 || ev[0].Provider != "gone" || ev[0].End.IsZero() {
		t.Fatalf("incidents %+v, want gone's ended", ev)
	}
	if len(r.providers["kept"].all) != 1 {
		t.Fatalf("kept has %d key states, want 1", len(r.providers["kept"].all))
	}
	// The old Provider still works with its detached key.
	_, a := choose(t, one(kept), []*Attempt{})
	a.Release()
	// Counts of the forgotten provider are still drained.
	if got := r.DrainAvailability(clk.Now()); len(got) == 0 || got[0].Provider != "gone" {
		t.Fatalf("drain %+v", got)
	}
	// A retired provider that comes back starts with a closed breaker.
	back := newTestProvider(t, r, "gone", noCooldown)
	if back.Breaker(clk.Now()) != BreakerClosed {
		t.Fatal("a returning provider kept its open breaker")
	}
	if s := back.Status(clk.Now()); s.Keys[0].State != KeyOK {
		t.Fatalf("a returning provider's key: %s", s.Keys[0].State)
	}
}

func TestIncidents(t *testing.T) {
	clk := newClock()
	r := NewRegistry(clk.Now)
	p := newTestProvider(t, r, "p", noCooldown)
	start := clk.Now()
	for _, c := range []Cause{CauseServer, CauseTimeout, CauseServer, CauseRateLimited, CauseRateLimited, CauseRateLimited, CauseConnect, CauseServer} {
		_, a := choose(t, one(p), nil)
		a.Failed(c, time.Nanosecond)
		a.Release()
		clk.Add(time.Second)
	}
	ev := r.DrainIncidents()
	// The 5th failure that counts (429s do not) opens it at 7s: 3 server, 1 timeout, 1 connect.
	if len(ev) != 1 || ev[0].Provider != "p" || ev[0].Cause != "server" || !ev[0].Start.Equal(start.Add(7*time.Second)) || !ev[0].End.IsZero() {
		t.Fatalf("incidents %+v", ev)
	}
	if len(r.DrainIncidents()) != 0 {
		t.Fatal("drained twice")
	}
	// Half-open is not recovery; a failed trial neither.
	clk.Add(DefaultBreakerCooldown)
	_, a := choose(t, one(p), nil)
	a.Failed(CauseServer, 0)
	a.Release()
	if ev := r.DrainIncidents(); len(ev) != 0 {
		t.Fatalf("incident events while still down: %+v", ev)
	}
	clk.Add(2 * DefaultBreakerCooldown)
	_, a = choose(t, one(p), nil)
	a.Succeeded(0)
	a.Release()
	end := clk.Now()
	ev = r.DrainIncidents()
	if len(ev) != 1 || !ev[0].Start.Equal(start.Add(7*time.Second)) || !ev[0].End.Equal(end) {
		t.Fatalf("recovery: %+v", ev)
	}

	// Down and up between two drains: one event with both times.
	q := newTestProvider(t, r, "q", noCooldown, 1, 1)
	for _, k := range q.Keys() {
		q.ProbeFailed(k, CauseAuth, 0)
	}
	clk.Add(time.Minute)
	q.ProbeSucceeded(q.Keys()[1], 0)
	ev = r.DrainIncidents()
	if len(ev) != 1 || ev[0].Provider != "q" || ev[0].Cause != "auth" || ev[0].End.Sub(ev[0].Start) != time.Minute {
		t.Fatalf("auth incident: %+v", ev)
	}
}

func TestStatus(t *testing.T) {
	type step func(t *testing.T, clk *fakeClock, p *Provider)
	fail := func(c Cause, key int) step {
		return func(t *testing.T, clk *fakeClock, p *Provider) { p.ProbeFailed(p.Keys()[key], c, 0) }
	}
	wait := func(d time.Duration) step {
		return func(t *testing.T, clk *fakeClock, p *Provider) { clk.Add(d) }
	}
	open := func(t *testing.T, clk *fakeClock, p *Provider) {
		failN(t, clk, p, DefaultBreakerFailures, CauseServer, time.Second)
	}
	for _, tc := range []struct {
		name  string
		steps []step
		want  ProviderState
		keys  []KeyState
	}{
		{"fresh", nil, StateOperational, []KeyState{KeyOK, KeyOK}},
		{"a key cooling", []step{fail(CauseRateLimited, 0)}, StateDegraded, []KeyState{KeyCooling, KeyOK}},
		{"all keys cooling", []step{fail(CauseRateLimited, 0), fail(CauseRateLimited, 1)}, StateDegraded, []KeyState{KeyCooling, KeyCooling}},
		{"recent failure", []step{fail(CauseServer, 0), wait(time.Minute)}, StateDegraded, []KeyState{KeyOK, KeyOK}},
		{"failure long ago", []step{fail(CauseServer, 0), wait(DefaultDegradedWindow)}, StateOperational, []KeyState{KeyOK, KeyOK}},
		{"a key auth-failed", []step{fail(CauseAuth, 1)}, StateDegraded, []KeyState{KeyOK, KeyAuthFailed}},
		{"all keys auth-failed", []step{fail(CauseAuth, 0), fail(CauseAuth, 1)}, StateDown, []KeyState{KeyAuthFailed, KeyAuthFailed}},
		{"breaker open", []step{open}, StateDown, nil},
		{"breaker half-open", []step{open, wait(DefaultBreakerCooldown)}, StateDegraded, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := newClock()
			r := NewRegistry(clk.Now)
			p := newTestProvider(t, r, "p", noCooldown, 1, 1)
			for _, s := range tc.steps {
				s(t, clk, p)
			}
			s := p.Status(clk.Now())
			if s.State != tc.want {
				t.Fatalf("state %s, want %s (%+v)", s.State, tc.want, s)
			}
			for i, want := range tc.keys {
				if s.Keys[i].State != want {
					t.Errorf("key %d: %s, want %s", i, s.Keys[i].State, want)
				}
			}
		})
	}
	var zero Provider
	if s := zero.Status(time.Now()); s.State != StateDown {
		t.Fatalf("placeholder provider: %s", s.State)
	}
}

func TestHealthConfigDefaults(t *testing.T) {
	for _, tc := range []struct {
		name    string
		in      HealthConfig
		wantErr bool
		check   func(HealthConfig) bool
	}{
		{"zero", HealthConfig{}, false, func(h HealthConfig) bool {
			return h == HealthConfig{5, time.Minute, 30 * time.Second, 5 * time.Minute, time.Second, time.Minute, 5 * time.Second, 10 * time.Minute, 5 * time.Minute}
		}},
		{"max raised to base", HealthConfig{BreakerCooldown: 10 * time.Minute}, false, func(h HealthConfig) bool { return h.MaxBreakerCooldown == 10*time.Minute }},
		{"negative", HealthConfig{BreakerWindow: -1}, true, nil},
		{"negative failures", HealthConfig{BreakerFailures: -1}, true, nil},
		{"too many failures", HealthConfig{BreakerFailures: 1001}, true, nil},
	} {
		got, err := tc.in.WithDefaults()
		if (err != nil) != tc.wantErr {
			t.Errorf("%s: err %v", tc.name, err)
			continue
		}
		if tc.check != nil && !tc.check(got) {
			t.Errorf("%s: %+v", tc.name, got)
		}
	}
}

func TestBackoff(t *testing.T) {
	for _, tc := range []struct {
		base, ceil time.Duration
		n          int
		want       time.Duration
	}{
		{time.Second, time.Minute, 0, time.Second},
		{time.Second, time.Minute, 1, time.Second},
		{time.Second, time.Minute, 3, 4 * time.Second},
		{time.Second, time.Minute, 7, time.Minute},
		{time.Second, time.Minute, 1000, time.Minute},
		{time.Hour, 1<<63 - 1, 62, 1<<63 - 1},
	} {
		if got := backoff(tc.base, tc.ceil, tc.n); got != tc.want {
			t.Errorf("backoff(%v, %v, %d) = %v, want %v", tc.base, tc.ceil, tc.n, got, tc.want)
		}
	}
}

func TestBreakerTransitions(t *testing.T) {
	hc, _ := HealthConfig{BreakerFailures: 2}.WithDefaults()
	cd := int64(hc.BreakerCooldown)
	type op struct {
		name string
		do   func(b *breaker, gen *uint64) bool // reports success of the step
		want BreakerState
	}
	at := func(now int64) func(b *breaker, gen *uint64) bool {
		return func(b *breaker, gen *uint64) bool {
			g, ok := b.takeTrial(now, time.Minute)
			if ok {
				*gen = g
			}
			return ok
		}
	}
	fail := func(now int64) func(b *breaker, gen *uint64) bool {
		return func(b *breaker, gen *uint64) bool { b.observe(now, true, 0, false, &hc); return true }
	}
	settle := func(now int64, failed bool) func(b *breaker, gen *uint64) bool {
		return func(b *breaker, gen *uint64) bool { return b.observe(now, failed, *gen, false, &hc) }
	}
	for _, tc := range []struct {
		name string
		ops  []op
	}{
		{"trial is exclusive", []op{
			{"fail", fail(0), BreakerClosed},
			{"fail opens", fail(1), BreakerOpen},
			{"no trial while open", func(b *breaker, g *uint64) bool { return !at(cd)(b, g) }, BreakerOpen},
			{"trial", at(cd + 1), BreakerHalfOpen},
			{"second trial refused", func(b *breaker, g *uint64) bool { var x uint64; return !at(cd+2)(b, &x) }, BreakerHalfOpen},
			{"wrong token not given back", func(b *breaker, g *uint64) bool { return !b.giveBack(*g + 1) }, BreakerHalfOpen},
			{"given back", func(b *breaker, g *uint64) bool { return b.giveBack(*g) }, BreakerHalfOpen},
			{"taken again", at(cd + 3), BreakerHalfOpen},
			{"success closes", settle(cd+4, false), BreakerClosed},
			{"stale token ignored", func(b *breaker, g *uint64) bool { return !b.giveBack(*g) }, BreakerClosed},
		}},
		{"trial failure doubles", []op{
			{"fail", fail(0), BreakerClosed},
			{"fail opens", fail(0), BreakerOpen},
			{"trial", at(cd), BreakerHalfOpen},
			{"failure reopens", settle(cd, true), BreakerOpen},
			{"not after one cooldown", func(b *breaker, g *uint64) bool { return !at(2*cd)(b, g) }, BreakerOpen},
			{"after two", at(3 * cd), BreakerHalfOpen},
		}},
		{"non-trial outcomes ignored while open", []op{
			{"fail", fail(0), BreakerClosed},
			{"fail opens", fail(0), BreakerOpen},
			{"untokened success", func(b *breaker, g *uint64) bool { return !b.observe(cd, false, 0, false, &hc) }, BreakerHalfOpen},
			{"untokened failure", func(b *breaker, g *uint64) bool { return !b.observe(cd, true, 0, false, &hc) }, BreakerHalfOpen},
			{"probe closes half-open", func(b *breaker, g *uint64) bool { return b.observe(cd, false, 0, true, &hc) }, BreakerClosed},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b breaker
			var gen uint64
			for _, o := range tc.ops {
				if !o.do(&b, &gen) {
					t.Fatalf("%s: step failed", o.name)
				}
				now := int64(0)
				if b.open {
					now = b.until
					if o.want == BreakerOpen {
						now--
					}
				}
				if got := b.state(now); got != o.want {
					t.Fatalf("%s: %s, want %s", o.name, got, o.want)
				}
			}
		})
	}
}

// TestOneBadKeyDoesNotTripItsProvider: failures of one key interleaved with
// successes of another are not failures in a row of the provider: its
// breaker stays closed while the bad key's own breaker opens.
func TestOneBadKeyDoesNotTripItsProvider(t *testing.T) {
	clk := newClock()
	r := NewRegistry(clk.Now)
	p := newTestProvider(t, r, "mixed", HealthConfig{BreakerFailures: 3, FailureCooldown: time.Millisecond}, 1, 1)
	cands := []Candidate{{Provider: p}}
	bad := p.Keys()[0]
	for i := 0; i < 12; i++ {
		_, a := choose(t, cands, nil)
		if a.Key == bad {
			a.Failed(CauseServer, 0)
		} else {
			a.Succeeded(time.Millisecond)
		}
		a.Release()
		clk.Add(10 * time.Millisecond)
	}
	if st := p.Breaker(clk.Now()); st != BreakerClosed {
		t.Fatalf("the provider's breaker is %v", st)
	}
	if st := bad.Breaker(clk.Now()); st == BreakerClosed {
		t.Fatalf("the bad key's breaker stayed closed")
	}
}
