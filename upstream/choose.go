package upstream

import (
	"math/rand/v2"
	"sync"
	"time"
)

// Candidate is one route of a model: a provider and the route's weight.
type Candidate struct {
	Provider *Provider
	// Weight is the route's share of the model's traffic. When every
	// candidate's weight is 0, the routes are tried in order (failover);
	// when any is above 0, they are chosen at random by weight, a route
	// with weight 0 (or less) counting as 1.
	Weight int
}

// Attempt is one upstream attempt that Choose granted: it holds a request
// slot on Key and, when the provider's or the key's breaker was testing
// recovery, the trial token. Report its outcome once (Succeeded or Failed;
// later reports are ignored) and Release it when the request is over.
// Its methods are safe for concurrent use.
type Attempt struct {
	Provider *Provider
	Key      *Key

	mu       sync.Mutex
	reported bool
	released bool
	failed   bool  // the outcome was a failure…
	cause    Cause // …with this cause
	keyGen   uint64
	provGen  uint64
}

// Choose picks the route and key for the next attempt of a request: the
// first available candidate in order (failover), or a random one by weight
// when any candidate has a weight. A candidate is available when its
// provider's breaker lets traffic through and one of its keys is available:
// not tried by this request (tried lists its earlier attempts), not cooling
// down, not auth-failed, its breaker not open. Among those keys it takes
// the one with the fewest requests in flight relative to its weight, ties
// going to the key whose weighted turn it is. A breaker testing recovery
// (half-open) admits one request, the one that gets its trial token.
//
// Routes whose provider failed this request at the endpoint (every cause
// but rate_limited and auth) come last: they are chosen only if nothing
// else is available.
//
// rnd(n) returns a number in [0, n); nil means math/rand/v2. ok is false
// when nothing is available now; index is the chosen candidate's. The
// candidates' providers must come from one Registry (or be zero values,
// which are never available). Release the Attempt when the request ends.
func Choose(cands []Candidate, tried []*Attempt, rnd func(n int) int) (index int, a *Attempt, ok bool) {
	weighted := false
	for _, c := range cands {
		if c.Weight > 0 {
			weighted = true
			break
		}
	}
	var now int64
	clocked := false
	for round := 0; round < 2; round++ {
		// round 0: routes that did not fail this request; round 1: those that did
		var deferred bool
		var skip skipSet
		total := 0
		for i, c := range cands {
			p := c.Provider
			if p == nil || p.state == nil || len(p.keys) == 0 {
				skip.add(i, len(cands))
				continue
			}
			if failedHere(p.state, tried) != (round == 1) {
				skip.add(i, len(cands))
				deferred = deferred || round == 0
				continue
			}
			if !clocked {
				now, clocked = p.state.reg.now(), true
			}
			if !weighted {
				if a := p.attempt(now, tried); a != nil {
					return i, a, true
				}
				continue
			}
			if now < p.state.blocked.Load() {
				skip.add(i, len(cands))
				continue
			}
			total += max(c.Weight, 1)
		}
		for weighted && total > 0 {
			if rnd == nil {
				rnd = rand.IntN
			}
			r := rnd(total)
			i := -1
			for j, c := range cands {
				if skip.has(j) {
					continue
				}
				if r -= max(c.Weight, 1); r < 0 {
					i = j
					break
				}
			}
			if i < 0 { // rnd out of range
				break
			}
			if a := cands[i].Provider.attempt(now, tried); a != nil {
				return i, a, true
			}
			skip.add(i, len(cands))
			total -= max(cands[i].Weight, 1)
		}
		if !deferred {
			break
		}
	}
	return -1, nil, false
}

// failedHere reports whether one of the request's attempts failed at ps's
// endpoint.
func failedHere(ps *providerState, tried []*Attempt) bool {
	for _, a := range tried {
		if a != nil && a.Provider != nil && a.Provider.state == ps {
			a.mu.Lock()
			f := a.failed && a.cause.endpoint()
			a.mu.Unlock()
			if f {
				return true
			}
		}
	}
	return false
}

// skipSet marks candidates by index, without allocating for the first 64.
type skipSet struct {
	bits uint64
	more []bool
}

func (s *skipSet) add(i, n int) {
	if i < 64 {
		s.bits |= 1 << i
		return
	}
	if s.more == nil {
		s.more = make([]bool, n)
	}
	s.more[i] = true
}

func (s *skipSet) has(i int) bool {
	if i < 64 {
		return s.bits&(1<<i) != 0
	}
	return s.more != nil && s.more[i]
}

// attempt takes the provider (its trial token if its breaker is testing
// recovery) and a key, or returns nil.
func (p *Provider) attempt(now int64, tried []*Attempt) *Attempt {
	ps := p.state
	if now < ps.blocked.Load() {
		return nil
	}
	var provGen uint64
	if ps.gated.Load() {
		var ok bool
		if provGen, ok = ps.takeTrial(now, p.hc.MaxBreakerCooldown); !ok {
			return nil
		}
	}
	k, keyGen := p.chooseKey(now, tried)
	if k == nil {
		if provGen != 0 {
			ps.giveBack(provGen)
		}
		return nil
	}
	return &Attempt{Provider: p, Key: k, keyGen: keyGen, provGen: provGen}
}

// chooseKey takes the best available key, counting the request in flight.
func (p *Provider) chooseKey(now int64, tried []*Attempt) (*Key, uint64) {
	for range len(p.keys) + 1 {
		var best *Key
		for _, k := range p.keys {
			if now < k.st.blocked.Load() || triedKey(k.st, tried) {
				continue
			}
			if best == nil || better(k, best) {
				best = k
			}
		}
		if best == nil {
			return nil, 0
		}
		var gen uint64
		if best.st.gated.Load() {
			var ok bool
			if gen, ok = best.st.takeTrial(now, p.hc.MaxBreakerCooldown); !ok {
				continue // taken meanwhile: it is blocked now
			}
		}
		st := best.st
		st.inFlight.Add(1)
		// The key's turn: its virtual time advances by its stride, from
		// the provider's virtual time if it lagged (idle or out).
		vt := p.state.vt.Load()
		pass := st.pass.Load()
		if int64(pass-vt) < 0 { //nolint:gosec // virtual times are compared modulo 2^64, as TCP sequence numbers are
			pass = vt
		}
		st.pass.Store(pass + best.stride)
		p.state.vt.Store(pass)
		return best, gen
	}
	return nil, 0
}

// better reports whether k should serve before best: fewer requests in
// flight relative to its weight, then an earlier weighted turn.
func better(k, best *Key) bool {
	a := k.st.inFlight.Load() * best.weight
	b := best.st.inFlight.Load() * k.weight
	if a != b {
		return a < b
	}
	return int64(k.st.pass.Load()-best.st.pass.Load()) < 0 //nolint:gosec // compared modulo 2^64, as above
}

func triedKey(st *keyState, tried []*Attempt) bool {
	for _, a := range tried {
		if a != nil && a.Key != nil && a.Key.st == st {
			return true
		}
	}
	return false
}

// Succeeded reports that the attempt's upstream answered: a 2xx, or a 4xx
// that the client caused (400, 404, 413…). latency is the time to the
// answer (to the first byte for a stream); it feeds the moving averages.
func (a *Attempt) Succeeded(latency time.Duration) {
	a.outcome(true, 0, 0, latency)
}

// Failed reports that the attempt failed with cause c. retryAfter is the
// upstream's retry hint (RetryHint, or Gemini's parsed retryDelay), 0 if
// none: with rate_limited it sets the key's cooldown (else
// RateLimitCooldown), capped by MaxRetryAfter; with an endpoint cause it
// can only lengthen the growing failure cooldown.
func (a *Attempt) Failed(c Cause, retryAfter time.Duration) {
	a.outcome(false, c, retryAfter, 0)
}

func (a *Attempt) outcome(ok bool, c Cause, retryAfter, latency time.Duration) {
	a.mu.Lock()
	if a.reported {
		a.mu.Unlock()
		return
	}
	a.reported, a.failed, a.cause = true, !ok, c
	keyGen, provGen := a.keyGen, a.provGen
	a.keyGen, a.provGen = 0, 0
	a.mu.Unlock()
	a.Provider.record(a.Key, ok, c, retryAfter, latency, keyGen, provGen, false)
}

// Release ends the attempt's request: it frees the request slot on the key.
// It is idempotent. An attempt released before any outcome gives its trial
// tokens back, so another request can test recovery.
func (a *Attempt) Release() {
	a.mu.Lock()
	if a.released {
		a.mu.Unlock()
		return
	}
	a.released = true
	keyGen, provGen := a.keyGen, a.provGen
	a.keyGen, a.provGen = 0, 0
	a.mu.Unlock()
	a.Key.st.inFlight.Add(-1)
	if keyGen != 0 {
		a.Key.st.giveBack(keyGen)
	}
	if provGen != 0 {
		a.Provider.state.giveBack(provGen)
	}
}

// record applies one outcome of key k (traffic or probe) to the key, the
// provider and the availability counts.
func (p *Provider) record(k *Key, ok bool, c Cause, retryAfter, latency time.Duration, keyGen, provGen uint64, probe bool) {
	ps := p.state
	now := ps.reg.now()
	if ok {
		ewma(&k.st.latency, latency)
		ewma(&ps.latency, latency)
	}
	keyChanged := k.st.observe(now, ok, c, retryAfter, keyGen, probe, &p.hc)
	ps.observe(now, ok, c, provGen, probe, keyChanged, &p.hc)
	ps.avail.count(now, ok, c)
}
