package upstream

import "time"

// ProviderState is a provider's state on the status page.
type ProviderState string

// The provider states.
const (
	// StateOperational: the provider's breaker is closed, every key is
	// usable now, and nothing failed within DegradedWindow.
	StateOperational ProviderState = "operational"
	// StateDegraded: some key is out (cooling, open, half-open or
	// auth-failed), the provider's breaker is half-open, or something other
	// than a 429 failed within DegradedWindow.
	StateDegraded ProviderState = "degraded"
	// StateDown: the provider's breaker is open, or no key is usable: each
	// is auth-failed or behind an open breaker. (Keys that only cool down
	// make the provider degraded: a lasting failure opens their breakers.)
	StateDown ProviderState = "down"
)

// KeyState is a key's state on the status page.
type KeyState string

// The key states, in the order they take precedence.
const (
	KeyAuthFailed KeyState = "auth_failed" // refused by the upstream: out until a probe with it succeeds
	KeyOpen       KeyState = "open"        // its breaker is open: out until Until, then half-open
	KeyCooling    KeyState = "cooling"     // out until Until after a 429 or a failure
	KeyHalfOpen   KeyState = "half_open"   // its breaker lets one trial request through
	KeyOK         KeyState = "ok"
)

// KeyStatus is one key's health.
type KeyStatus struct {
	ID    string
	State KeyState
	// Until is when the state ends, for open and cooling keys (zero
	// otherwise).
	Until               time.Time
	Breaker             BreakerState
	InFlight            int64
	ConsecutiveFailures int
	// Latency is the moving average of the key's successful attempts and
	// probes (zero before the first).
	Latency time.Duration
	Weight  int
}

// ProviderStatus is a provider's health, for the status page and metrics.
type ProviderStatus struct {
	Name    string
	State   ProviderState
	Breaker BreakerState
	// BreakerUntil is when an open breaker half-opens (zero otherwise).
	BreakerUntil time.Time
	// LastFailure is the time of the last failure other than a 429 (zero if
	// none since the process started).
	LastFailure time.Time
	// Latency is the moving average of successful attempts and probes.
	Latency time.Duration
	Keys    []KeyStatus // in configuration order
}

// Status reports the provider's health at now.
func (p *Provider) Status(now time.Time) ProviderStatus {
	s := ProviderStatus{Name: p.Name, State: StateDown}
	ps := p.state
	if ps == nil {
		return s
	}
	n := now.UnixNano()
	ps.mu.Lock()
	s.Breaker = ps.br.state(n)
	if s.Breaker == BreakerOpen {
		s.BreakerUntil = time.Unix(0, ps.br.until).UTC()
	}
	ps.mu.Unlock()
	if lf := ps.lastFailure.Load(); lf != 0 {
		s.LastFailure = time.Unix(0, lf).UTC()
	}
	s.Latency = time.Duration(ps.latency.Load())
	s.Keys = make([]KeyStatus, len(p.keys))
	usable, allOK := 0, true
	for i, k := range p.keys {
		state, until, consecutive, br := k.st.status(n)
		ks := KeyStatus{
			ID:                  k.ID,
			State:               state,
			Breaker:             br,
			InFlight:            k.st.inFlight.Load(),
			ConsecutiveFailures: consecutive,
			Latency:             time.Duration(k.st.latency.Load()),
			Weight:              int(k.weight),
		}
		if until != 0 {
			ks.Until = time.Unix(0, until).UTC()
		}
		s.Keys[i] = ks
		if state != KeyAuthFailed && state != KeyOpen {
			usable++
		}
		allOK = allOK && state == KeyOK
	}
	recent := !s.LastFailure.IsZero() && n-ps.lastFailure.Load() < int64(p.hc.DegradedWindow)
	switch {
	case s.Breaker == BreakerOpen || usable == 0:
		s.State = StateDown
	case !allOK || s.Breaker == BreakerHalfOpen || recent:
		s.State = StateDegraded
	default:
		s.State = StateOperational
	}
	return s
}

// ProbeKeys lists the keys a probe round should test at now: every
// auth-failed key and every key whose breaker is half-open, plus one healthy
// key, a different one each round. While the provider's breaker is open
// (not yet half-open) it returns none: nothing may reach the upstream.
func (p *Provider) ProbeKeys(now time.Time) []*Key {
	ps := p.state
	if ps == nil || len(p.keys) == 0 {
		return nil
	}
	n := now.UnixNano()
	if p.Breaker(now) == BreakerOpen {
		return nil
	}
	var out []*Key
	var healthy *Key
	start := ps.probeNext.Add(1)
	for i := range p.keys {
		k := p.keys[(int(start%uint64(len(p.keys)))+i)%len(p.keys)] //nolint:gosec // the remainder is below len(p.keys)
		switch state, _, _, _ := k.st.status(n); state {
		case KeyAuthFailed, KeyHalfOpen:
			out = append(out, k)
		case KeyOK:
			if healthy == nil {
				healthy = k
			}
		}
	}
	if healthy != nil {
		out = append(out, healthy)
	}
	return out
}

// ProbeSucceeded reports that a probe with key k got a good answer. It
// clears the key's auth failure and failure cooldown (not a 429's), and
// closes a half-open breaker of the key or the provider.
func (p *Provider) ProbeSucceeded(k *Key, latency time.Duration) {
	if p.state == nil || k == nil || k.st == nil {
		return
	}
	p.record(k, true, 0, 0, latency, 0, 0, true)
}

// ProbeFailed reports that a probe with key k failed with cause c, with the
// upstream's retry hint if any. It counts like a failed attempt and reopens
// a half-open breaker with a doubled cooldown; a 429 or auth answer shows
// the endpoint works, so it closes the provider's half-open breaker.
func (p *Provider) ProbeFailed(k *Key, c Cause, retryAfter time.Duration) {
	if p.state == nil || k == nil || k.st == nil {
		return
	}
	p.record(k, false, c, retryAfter, 0, 0, 0, true)
}
