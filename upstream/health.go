package upstream

import (
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// Cause is why an upstream attempt or probe failed. Its values index
// MinuteCount.Fail, in the same order as the ledger's causes.
type Cause uint8

// The failure causes.
const (
	CauseConnect     Cause = iota // the connection could not be made
	CauseTimeout                  // no answer (headers) in time
	CauseServer                   // a 5xx other than overloaded, or an unusable answer
	CauseOverloaded               // 503 or 529: the upstream says it is overloaded
	CauseRateLimited              // 429
	CauseAuth                     // 401 or 403: the upstream refused the key
	CauseClosed                   // the connection or stream closed before the first byte

	// NumCauses is the number of causes.
	NumCauses = iota
)

var causeNames = [NumCauses]string{"connect", "timeout", "server", "overloaded", "rate_limited", "auth", "closed"}

// String is the cause's name as stored and shown: "connect", "timeout",
// "server", "overloaded", "rate_limited", "auth" or "closed".
func (c Cause) String() string {
	if int(c) < len(causeNames) {
		return causeNames[c]
	}
	return fmt.Sprintf("cause(%d)", c)
}

// endpoint reports whether the cause says the upstream itself (the endpoint
// or the account's serving path) is unwell: these count toward breakers and
// give the key a growing cooldown. A 429 or an auth refusal is an answer
// from a working upstream about one account.
func (c Cause) endpoint() bool { return c != CauseRateLimited && c != CauseAuth }

// BreakerState is the state of a circuit breaker. As a metric gauge its
// value is 0 (closed), 1 (open) or 2 (half-open).
type BreakerState uint8

// The breaker states.
const (
	BreakerClosed   BreakerState = iota // traffic flows; failures are counted
	BreakerOpen                         // no traffic until the cooldown ends
	BreakerHalfOpen                     // the cooldown ended: one trial request may test recovery
)

// String is "closed", "open" or "half_open".
func (s BreakerState) String() string {
	switch s {
	case BreakerClosed:
		return "closed"
	case BreakerOpen:
		return "open"
	case BreakerHalfOpen:
		return "half_open"
	}
	return fmt.Sprintf("breaker(%d)", s)
}

// The defaults of HealthConfig's zero fields.
const (
	DefaultBreakerFailures    = 5                // failures that open a breaker…
	DefaultBreakerWindow      = time.Minute      // …within this window
	DefaultBreakerCooldown    = 30 * time.Second // first open period, doubling on repeated trips…
	DefaultMaxBreakerCooldown = 5 * time.Minute  // …up to this
	DefaultFailureCooldown    = time.Second      // a key's cooldown after a failure, doubling…
	DefaultMaxFailureCooldown = time.Minute      // …up to this
	DefaultRateLimitCooldown  = 5 * time.Second  // a key's cooldown after a 429 without a hint
	DefaultMaxRetryAfter      = 10 * time.Minute // cap of any upstream retry hint
	DefaultDegradedWindow     = 5 * time.Minute  // a failure this recent makes the provider degraded
)

// maxBreakerFailures bounds HealthConfig.BreakerFailures (the breaker keeps
// that many failure times).
const maxBreakerFailures = 1000

// HealthConfig tunes a provider's cooldowns and circuit breakers. A zero
// field takes its Default value; a maximum below its base is raised to it.
type HealthConfig struct {
	// BreakerFailures failures within BreakerWindow open a breaker (a key's
	// or the provider's). Only connect, timeout, server, overloaded and
	// closed failures count.
	BreakerFailures int
	BreakerWindow   time.Duration
	// BreakerCooldown is how long a breaker stays open before it lets one
	// trial request through; it doubles each time the trial fails, up to
	// MaxBreakerCooldown.
	BreakerCooldown    time.Duration
	MaxBreakerCooldown time.Duration
	// FailureCooldown is how long a key sits out after a failure; it
	// doubles with each consecutive failure, up to MaxFailureCooldown.
	FailureCooldown    time.Duration
	MaxFailureCooldown time.Duration
	// RateLimitCooldown is how long a key sits out after a 429 that came
	// without a retry hint.
	RateLimitCooldown time.Duration
	// MaxRetryAfter caps the upstream's retry hints.
	MaxRetryAfter time.Duration
	// DegradedWindow: a failure (other than a 429) this recent makes the
	// provider's status degraded.
	DegradedWindow time.Duration
}

// WithDefaults returns the configuration with its zero fields set to the
// defaults, or an error if a field is negative or out of range.
func (hc HealthConfig) WithDefaults() (HealthConfig, error) {
	if hc.BreakerFailures < 0 || hc.BreakerFailures > maxBreakerFailures {
		return hc, fmt.Errorf("breaker failures must be between 1 and %d", maxBreakerFailures)
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"breaker window", hc.BreakerWindow},
		{"breaker cooldown", hc.BreakerCooldown},
		{"max breaker cooldown", hc.MaxBreakerCooldown},
		{"failure cooldown", hc.FailureCooldown},
		{"max failure cooldown", hc.MaxFailureCooldown},
		{"rate limit cooldown", hc.RateLimitCooldown},
		{"max retry after", hc.MaxRetryAfter},
		{"degraded window", hc.DegradedWindow},
	} {
		if d.v < 0 {
			return hc, errors.New(d.name + " must not be negative")
		}
	}
	def := func(v *time.Duration, d time.Duration) {
		if *v == 0 {
			*v = d
		}
	}
	if hc.BreakerFailures == 0 {
		hc.BreakerFailures = DefaultBreakerFailures
	}
	def(&hc.BreakerWindow, DefaultBreakerWindow)
	def(&hc.BreakerCooldown, DefaultBreakerCooldown)
	def(&hc.MaxBreakerCooldown, DefaultMaxBreakerCooldown)
	def(&hc.FailureCooldown, DefaultFailureCooldown)
	def(&hc.MaxFailureCooldown, DefaultMaxFailureCooldown)
	def(&hc.RateLimitCooldown, DefaultRateLimitCooldown)
	def(&hc.MaxRetryAfter, DefaultMaxRetryAfter)
	def(&hc.DegradedWindow, DefaultDegradedWindow)
	hc.MaxBreakerCooldown = max(hc.MaxBreakerCooldown, hc.BreakerCooldown)
	hc.MaxFailureCooldown = max(hc.MaxFailureCooldown, hc.FailureCooldown)
	return hc, nil
}

// backoff is base doubled n-1 times, capped.
func backoff(base, ceiling time.Duration, n int) time.Duration {
	if n <= 1 {
		return min(base, ceiling)
	}
	if n > 40 {
		return ceiling
	}
	d := base << (n - 1)
	if d <= 0 || d > ceiling || d>>(n-1) != base {
		return ceiling
	}
	return d
}

// blockedForever marks a key that no request may take: it failed auth.
const blockedForever = math.MaxInt64

// breaker is a circuit breaker; its owner's mutex guards it. Half-open is
// not stored: it is an open breaker whose until has passed.
type breaker struct {
	open  bool
	until int64 // unix ns: while open, when it becomes half-open
	trips int   // consecutive trips, for the doubling cooldown
	gen   uint64
	// While open: the trial token is out, until trialUntil. A token that
	// is neither used nor given back by then (a leak) lapses.
	trial      bool
	trialUntil int64

	fails []int64 // ring of the last failure times while closed
	nfail int
	head  int
}

func (b *breaker) state(now int64) BreakerState {
	switch {
	case !b.open:
		return BreakerClosed
	case now < b.until:
		return BreakerOpen
	}
	return BreakerHalfOpen
}

// failure records a failure of a closed breaker and reports whether it
// opened: the last BreakerFailures outcomes were failures, all within
// BreakerWindow.
func (b *breaker) failure(now int64, hc *HealthConfig) bool {
	n := hc.BreakerFailures
	if len(b.fails) != n {
		// first failure, or the configuration changed
		b.fails = make([]int64, n)
		b.nfail, b.head = 0, 0
	}
	b.fails[b.head] = now
	b.head = (b.head + 1) % n
	b.nfail = min(b.nfail+1, n)
	if b.nfail < n {
		return false
	}
	oldest := b.fails[b.head] // the ring is full: head is the oldest
	if now-oldest > int64(hc.BreakerWindow) {
		return false
	}
	b.trip(now, hc)
	return true
}

// trip opens the breaker for the cooldown, doubled per consecutive trip.
func (b *breaker) trip(now int64, hc *HealthConfig) {
	b.trips++
	d := backoff(hc.BreakerCooldown, hc.MaxBreakerCooldown, b.trips)
	b.open, b.until, b.trial = true, now+int64(d), false
	b.gen++
	b.nfail, b.head = 0, 0
}

// reset closes the breaker and forgets its history.
func (b *breaker) reset() {
	if b.open {
		b.gen++
	}
	b.open, b.until, b.trips, b.trial = false, 0, 0, false
	b.nfail, b.head = 0, 0
}

// takeTrial hands out the half-open breaker's trial token for lease.
func (b *breaker) takeTrial(now int64, lease time.Duration) (uint64, bool) {
	if !b.open || now < b.until || b.trial && now < b.trialUntil {
		return 0, false
	}
	if b.trial {
		b.gen++ // the lapsed token's outcome no longer counts
	}
	b.trial, b.trialUntil = true, now+int64(lease)
	return b.gen, true
}

// giveBack returns an unused trial token.
func (b *breaker) giveBack(gen uint64) bool {
	if b.open && b.trial && b.gen == gen {
		b.trial = false
		return true
	}
	return false
}

// observe feeds an outcome to the breaker and reports whether it changed
// state. failed is true for failures that count (Cause.endpoint). While
// open, only the trial holder (gen) or a probe on a half-open breaker
// decides: success closes, failure reopens with a doubled cooldown; other
// outcomes (requests started before it opened) are ignored.
func (b *breaker) observe(now int64, failed bool, gen uint64, probe bool, hc *HealthConfig) bool {
	if !b.open {
		if !failed {
			// a success in between: the failures were not in a row (one
			// bad key must not trip its provider's breaker while the
			// others serve)
			b.nfail, b.head = 0, 0
			return false
		}
		return b.failure(now, hc)
	}
	trial := gen != 0 && gen == b.gen && b.trial || probe && now >= b.until
	if !trial {
		return false
	}
	if failed {
		b.trip(now, hc)
	} else {
		b.reset()
	}
	return true
}

// keyState is the persistent health of one key: every Provider built from
// one Registry with the same key shares it.
type keyState struct {
	id string

	// Read without the lock on the hot path.
	inFlight atomic.Int64
	blocked  atomic.Int64  // unix ns before which the key may not be chosen, or blockedForever
	gated    atomic.Bool   // the breaker is not closed: taking the key needs the trial token
	hard     atomic.Bool   // auth failed or breaker not closed: the key does not count as usable
	consec   atomic.Int32  // mirror of consecutive, for the success fast path
	pass     atomic.Uint64 // weighted rotation: virtual time of the key's next turn
	latency  atomic.Int64  // moving average of successful attempts, ns

	mu          sync.Mutex
	cool        int64 // unix ns: end of the cooldown
	coolRate    bool  // the cooldown came from a 429
	authFailed  bool
	consecutive int
	br          breaker
}

// publish copies the locked state to the atomics Choose reads.
func (st *keyState) publish() {
	u := st.cool
	switch {
	case st.authFailed:
		u = blockedForever
	case st.br.open && st.br.trial:
		u = max(u, st.br.trialUntil)
	case st.br.open:
		u = max(u, st.br.until)
	}
	st.blocked.Store(u)
	st.gated.Store(st.br.open)
	st.hard.Store(st.authFailed || st.br.open)
	st.consec.Store(int32(min(st.consecutive, math.MaxInt32))) //nolint:gosec // bounded by MaxInt32 just here
}

// takeTrial takes the key's half-open trial token, if it is free and the
// key is not otherwise out.
func (st *keyState) takeTrial(now int64, lease time.Duration) (uint64, bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.authFailed || now < st.cool {
		return 0, false
	}
	gen, ok := st.br.takeTrial(now, lease)
	if ok {
		st.publish()
	}
	return gen, ok
}

func (st *keyState) giveBack(gen uint64) {
	st.mu.Lock()
	if st.br.giveBack(gen) {
		st.publish()
	}
	st.mu.Unlock()
}

// observe applies an outcome to the key and reports whether the key's
// usability (hard) changed. gen is the key's trial token held by the
// attempt, 0 if none.
func (st *keyState) observe(now int64, ok bool, c Cause, retryAfter time.Duration, gen uint64, probe bool, hc *HealthConfig) bool {
	if ok && gen == 0 && !probe && st.consec.Load() == 0 {
		return false
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	wasHard := st.authFailed || st.br.open
	failed := !ok && c.endpoint()
	switch {
	case ok:
		st.consecutive = 0
		if probe {
			// the probe just used the key: it works
			st.authFailed = false
			if !st.coolRate {
				st.cool = 0
			}
		}
	case c == CauseRateLimited:
		d := retryAfter
		if d <= 0 {
			d = hc.RateLimitCooldown
		}
		st.coolFor(now, min(d, hc.MaxRetryAfter), true)
	case c == CauseAuth:
		st.authFailed = true
	default:
		st.consecutive++
		d := backoff(hc.FailureCooldown, hc.MaxFailureCooldown, st.consecutive)
		if retryAfter > 0 {
			d = max(d, min(retryAfter, hc.MaxRetryAfter))
		}
		st.coolFor(now, d, false)
	}
	st.br.observe(now, failed, gen, probe, hc)
	st.publish()
	return wasHard != (st.authFailed || st.br.open)
}

// coolFor extends the cooldown to now+d.
func (st *keyState) coolFor(now int64, d time.Duration, rate bool) {
	if u := now + int64(d); u > st.cool {
		st.cool, st.coolRate = u, rate
	}
}

// status is the key's state for Status, with the time it ends.
func (st *keyState) status(now int64) (s KeyState, until int64, consecutive int, br BreakerState) {
	st.mu.Lock()
	defer st.mu.Unlock()
	br = st.br.state(now)
	switch {
	case st.authFailed:
		s = KeyAuthFailed
	case br == BreakerOpen:
		s, until = KeyOpen, max(st.br.until, st.cool)
	case now < st.cool:
		s, until = KeyCooling, st.cool
	case br == BreakerHalfOpen:
		s = KeyHalfOpen
	default:
		s = KeyOK
	}
	return s, until, st.consecutive, br
}

// ewma folds a sample into a moving average (weight 1/8).
func ewma(v *atomic.Int64, sample time.Duration) {
	if sample <= 0 {
		return
	}
	for {
		old := v.Load()
		next := int64(sample)
		if old != 0 {
			next = old + (int64(sample)-old)/8
		}
		if v.CompareAndSwap(old, next) {
			return
		}
	}
}

// failureRec is one recent failure of a provider, for an incident's cause.
type failureRec struct {
	at    int64
	cause Cause
}

// causeRing is how many recent failures a provider remembers.
const causeRing = 32

// providerState is the persistent health of one provider (by name).
type providerState struct {
	name string
	reg  *Registry

	blocked     atomic.Int64 // as keyState.blocked, for the provider's breaker
	gated       atomic.Bool
	lastFailure atomic.Int64 // unix ns of the last failure other than a 429
	// counting is set while the closed breaker counts failures in a row,
	// so that a success (which resets them) takes the lock only then
	counting  atomic.Bool
	latency   atomic.Int64
	vt        atomic.Uint64 // virtual time of the weighted key rotation
	probeNext atomic.Uint64

	mu       sync.Mutex
	endpoint string
	keys     []*keyState          // the current configuration's keys
	all      map[string]*keyState // every key seen, by ID
	br       breaker
	recent   [causeRing]failureRec
	nrecent  int
	down     bool // an incident is open
	retired  bool // no longer configured (Registry.Retain)
	incStart time.Time
	incCause Cause
	incIdx   int    // index of the incident's start in Registry.incidents…
	incGen   uint64 // …while Registry.incGen is this

	avail availability
}

func (ps *providerState) publish() {
	var u int64
	if ps.br.open {
		u = ps.br.until
		if ps.br.trial {
			u = ps.br.trialUntil
		}
	}
	ps.blocked.Store(u)
	ps.gated.Store(ps.br.open)
}

func (ps *providerState) takeTrial(now int64, lease time.Duration) (uint64, bool) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	gen, ok := ps.br.takeTrial(now, lease)
	if ok {
		ps.publish()
	}
	return gen, ok
}

func (ps *providerState) giveBack(gen uint64) {
	ps.mu.Lock()
	if ps.br.giveBack(gen) {
		ps.publish()
	}
	ps.mu.Unlock()
}

// observe applies an outcome to the provider: its breaker, its recent
// failures and its incidents. keyChanged says the key's usability changed.
func (ps *providerState) observe(now int64, ok bool, c Cause, gen uint64, probe, keyChanged bool, hc *HealthConfig) {
	if !ok && c != CauseRateLimited {
		ps.lastFailure.Store(now)
	}
	if (ok || c == CauseRateLimited) && gen == 0 && !probe && !keyChanged && !ps.counting.Load() {
		return
	}
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if !ok && c != CauseRateLimited {
		ps.recent[ps.nrecent%causeRing] = failureRec{at: now, cause: c}
		ps.nrecent++
	}
	changed := false
	if ok || c.endpoint() || ps.br.open {
		// a 429 or 401/403 of a closed breaker is neither a failure of
		// the endpoint nor proof that it recovered: it leaves the count
		changed = ps.br.observe(now, !ok && c.endpoint(), gen, probe, hc)
	}
	ps.counting.Store(!ps.br.open && ps.br.nfail > 0)
	if changed {
		ps.publish()
	}
	if changed || keyChanged {
		ps.evalIncident(now, c, hc)
	}
}

// evalIncident opens or closes the provider's incident. The provider is down
// while its breaker is not closed (open or testing recovery) or while no key
// is usable (every key auth-failed or behind a breaker that is not closed).
// Cooldowns do not count: they are short, and a lasting failure opens a
// breaker. The caller holds ps.mu.
func (ps *providerState) evalIncident(now int64, trigger Cause, hc *HealthConfig) {
	down := ps.br.open
	if !down {
		down = true
		for _, k := range ps.keys {
			if !k.hard.Load() {
				down = false
				break
			}
		}
	}
	if ps.retired || down == ps.down {
		return
	}
	ps.down = down
	t := time.Unix(0, now).UTC()
	if down {
		ps.incStart, ps.incCause = t, ps.dominantCause(now, hc, trigger)
		ps.reg.openIncident(ps)
	} else {
		ps.reg.closeIncident(ps, t)
	}
}

// dominantCause is the most frequent cause among the failures of the last
// BreakerWindow (ties: the most recent), or fallback if there is none.
func (ps *providerState) dominantCause(now int64, hc *HealthConfig, fallback Cause) Cause {
	var counts [NumCauses]int
	var last [NumCauses]int64
	n := min(ps.nrecent, causeRing)
	for i := range n {
		r := ps.recent[i]
		if now-r.at > int64(hc.BreakerWindow) || int(r.cause) >= NumCauses {
			continue
		}
		counts[r.cause]++
		last[r.cause] = max(last[r.cause], r.at)
	}
	best, found := fallback, false
	for c := range Cause(NumCauses) {
		if counts[c] == 0 {
			continue
		}
		if !found || counts[c] > counts[best] || counts[c] == counts[best] && last[c] > last[best] {
			best, found = c, true
		}
	}
	return best
}
