package modelgate

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/caddyserver/caddy/v2"
)

// The console's sign-in and sign-up and the lookup page's key guesses are
// limited per client address (and sign-ins per email too) in fixed
// windows. The limits are atomic: an attempt is reserved before the work it
// guards (a password hash, a key lookup) and counts as failed until it is
// forgiven, which only a success does; so however many attempts race,
// at most the limit are ever verified (#17). Attempts under way at once
// are capped too, per address and per email, and the password hashes wait
// in a bounded queue: past it, the answer is 429 at once, so a burst
// cannot make the console unusable for everyone else.
//
// The per-email limit stops a guesser who spreads over many addresses. So
// that a stranger cannot use it to lock a customer out, it counts only
// failures from addresses that are not the account's own: an address from
// which the email signed in successfully in the last knownAddressTTL is
// neither counted nor held back by it (its own per-address limit still
// applies). A customer at a new address while someone guesses at their
// email waits for the window to pass; at a known one, they never wait.
const (
	attemptsInFlightPerAddress = 4 // attempts under way at once from one address
	attemptsInFlightPerEmail   = 2 // sign-ins under way at once for one email

	knownAddressTTL      = 30 * 24 * time.Hour // how long a successful sign-in's address is the account's own
	knownAddressesPerKey = 8                   // own addresses kept per email, the most recent
	guardMaxKeys         = 100_000             // addresses, emails or known emails tracked by one counter

	// hashQueuePerSlot bounds the password hashes waiting for a slot,
	// per slot: past it, a sign-in or sign-up is answered 429 at once.
	hashQueuePerSlot = 4
)

// errBusy is the refusal of a full hash queue.
var errBusy = errors.New("too many password hashes waiting")

// guards holds the console and lookup limiters by name, so that a config
// reload keeps the counts (a reload must not reset a guesser's budget).
var guards = caddy.NewUsagePool()

// guardKey names the one guard of the process in the pool.
const guardKey = "console"

// guard is the state of the console and lookup limits.
type guard struct {
	signInAddr  *attempts // failed sign-ins per client address
	signInEmail *attempts // failed sign-ins per email, from addresses not the account's own
	signUpAddr  *attempts // sign-ups per client address
	lookupAddr  *attempts // wrong keys per client address on the lookup page
	hashes      *hashQueue

	mu    sync.Mutex
	known map[string]map[string]time.Time // email → its own addresses → last successful sign-in
}

// newGuard makes the guard with the console's and the lookup page's limits.
func newGuard() *guard {
	return &guard{
		signInAddr:  newAttempts(consoleSignInFailures, consoleSignInWindow, attemptsInFlightPerAddress),
		signInEmail: newAttempts(consoleSignInFailures, consoleSignInWindow, attemptsInFlightPerEmail),
		signUpAddr:  newAttempts(consoleSignUps, consoleSignUpWindow, attemptsInFlightPerAddress),
		lookupAddr:  newAttempts(lookupMaxFailures, lookupFailureReset, attemptsInFlightPerAddress),
		hashes:      newHashQueue(max(2, runtime.GOMAXPROCS(0))),
		known:       make(map[string]map[string]time.Time),
	}
}

// loadGuard returns the process's guard, counting one more user of it;
// releaseGuard gives the use back.
func loadGuard() (*guard, error) {
	v, _, err := guards.LoadOrNew(guardKey, func() (caddy.Destructor, error) { return newGuard(), nil })
	if err != nil {
		return nil, err
	}
	return v.(*guard), nil
}

// releaseGuard ends one use of the process's guard.
func releaseGuard() error {
	_, err := guards.Delete(guardKey)
	return err
}

// Destruct frees nothing: the guard is memory only.
func (g *guard) Destruct() error { return nil }

// ownAddress reports whether email signed in successfully from addr within
// knownAddressTTL.
func (g *guard) ownAddress(email, addr string, now time.Time) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	at, ok := g.known[email][addr]
	return ok && now.Sub(at) < knownAddressTTL
}

// signedIn remembers addr as one of email's own addresses.
func (g *guard) signedIn(email, addr string, now time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	addrs := g.known[email]
	if addrs == nil {
		if len(g.known) >= guardMaxKeys {
			for e, as := range g.known {
				for a, at := range as {
					if now.Sub(at) >= knownAddressTTL {
						delete(as, a)
					}
				}
				if len(as) == 0 {
					delete(g.known, e)
				}
			}
			if len(g.known) >= guardMaxKeys {
				return // full of live entries: this one is not remembered
			}
		}
		addrs = make(map[string]time.Time)
		g.known[email] = addrs
	}
	addrs[addr] = now
	if len(addrs) > knownAddressesPerKey {
		oldest, first := "", true
		for a, at := range addrs {
			if first || at.Before(addrs[oldest]) {
				oldest, first = a, false
			}
		}
		delete(addrs, oldest)
	}
}

// attempts counts attempts per key in fixed windows of window, at most
// limit per window and inFlight under way at once.
type attempts struct {
	limit, inFlight int
	window          time.Duration

	mu        sync.Mutex
	counts    map[string]*attemptCount
	lastSweep time.Time
}

// attemptCount is one key's window.
type attemptCount struct {
	start   time.Time // the window's start
	n       int       // attempts reserved in the window, less the forgiven
	running int       // attempts under way
}

func newAttempts(limit int, window time.Duration, inFlight int) *attempts {
	return &attempts{limit: limit, window: window, inFlight: inFlight, counts: make(map[string]*attemptCount)}
}

// attempt is one reserved attempt; end it exactly once.
type attempt struct {
	a     *attempts
	key   string
	start time.Time
}

// take reserves an attempt for key. It returns nil when the window's
// attempts are used up or inFlight are under way, with how long to wait.
func (a *attempts) take(key string, now time.Time) (*attempt, time.Duration) {
	a.mu.Lock()
	defer a.mu.Unlock()
	c := a.counts[key]
	if c == nil {
		if len(a.counts) >= guardMaxKeys && now.Sub(a.lastSweep) >= a.window/16 {
			a.lastSweep = now
			for k, c := range a.counts {
				if c.running == 0 && now.Sub(c.start) >= a.window {
					delete(a.counts, k)
				}
			}
		}
		if len(a.counts) >= guardMaxKeys {
			// as many keys are live as the counter holds: refuse rather
			// than count nothing
			return nil, a.window / 16
		}
		c = &attemptCount{start: now}
		a.counts[key] = c
	}
	if now.Sub(c.start) >= a.window {
		c.start, c.n = now, 0
	}
	if c.n >= a.limit {
		return nil, c.start.Add(a.window).Sub(now)
	}
	if c.running >= a.inFlight {
		return nil, time.Second
	}
	c.n++
	c.running++
	return &attempt{a: a, key: key, start: c.start}, 0
}

// end ends the attempt. A forgiven attempt no longer counts against the
// window it was taken in.
func (t *attempt) end(forgive bool) {
	if t == nil {
		return
	}
	a := t.a
	a.mu.Lock()
	defer a.mu.Unlock()
	c := a.counts[t.key]
	if c == nil {
		return
	}
	if c.running > 0 {
		c.running--
	}
	if forgive && c.start.Equal(t.start) && c.n > 0 {
		c.n--
	}
}

// hashQueue runs password hashes a few at a time (each takes 64 MiB and a
// core for a while) and bounds how many may wait.
type hashQueue struct {
	slots   chan struct{}
	waiting atomic.Int64 // hashes waiting or running
	max     atomic.Int64 // bound of waiting
}

func newHashQueue(slots int) *hashQueue {
	q := &hashQueue{slots: make(chan struct{}, slots)}
	q.max.Store(int64(slots * (1 + hashQueuePerSlot)))
	return q
}

// run runs fn when a slot is free. It returns errBusy at once when the
// queue is full, and ctx's error if ctx ends first.
func (q *hashQueue) run(ctx context.Context, fn func()) error {
	if q.waiting.Add(1) > q.max.Load() {
		q.waiting.Add(-1)
		return errBusy
	}
	defer q.waiting.Add(-1)
	select {
	case q.slots <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-q.slots }()
	fn()
	return nil
}

// Interface guards
var _ caddy.Destructor = (*guard)(nil)
