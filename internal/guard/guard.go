// Package guard limits the console's sign-ins and sign-ups and the lookup
// page's key guesses, atomically, per client address and per email, with
// a bounded queue of password Hashes. Its state lives in a Caddy
// usage pool, so that a config reload keeps the counts.
package guard

import (
	"context"
	"errors"
	"net"
	"net/http"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

// The console's sign-in and sign-up and the lookup page's key guesses are
// limited per client address (and sign-ins per email too) in fixed
// windows. The limits are atomic: an attempt is reserved before the work it
// guards (a password hash, a key lookup) and counts as failed until it is
// forgiven, which only a success does; so however many attempts race,
// at most the limit are ever verified. Attempts under way at once
// are capped too, per address and per email, and the password Hashes wait
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
	// SignInFailures wrong passwords per client address, and per email,
	// in SignInWindow; SignUps accounts created per client address in
	// SignUpWindow; LookupFailures wrong keys per client address in
	// LookupWindow.
	SignInFailures = 10
	SignInWindow   = 15 * time.Minute
	SignUps        = 10
	SignUpWindow   = time.Hour
	LookupFailures = 10
	LookupWindow   = 10 * time.Minute
	// MailRequests requests for a password reset or verification mail per
	// client address in MailWindow, and MailsPerEmail mails to one email
	// in the same window: every request counts, so that
	// neither the form nor a stranger can flood a mailbox.
	MailRequests  = 10
	MailsPerEmail = 3
	MailWindow    = time.Hour

	attemptsInFlightPerAddress = 4 // attempts under way at once from one address
	attemptsInFlightPerEmail   = 2 // sign-ins under way at once for one email

	knownAddressTTL      = 30 * 24 * time.Hour // how long a successful sign-in's address is the account's own
	knownAddressesPerKey = 8                   // own addresses kept per email, the most recent
	guardMaxKeys         = 100_000             // addresses, emails or known emails tracked by one counter

	// HashQueuePerSlot bounds the password hashes waiting for a slot,
	// per slot: past it, a sign-in or sign-up is answered 429 at once.
	HashQueuePerSlot = 4
)

// ErrBusy is the refusal of a full hash queue.
var ErrBusy = errors.New("too many password Hashes waiting")

// guards holds the console and lookup limiters by name, so that a config
// reload keeps the counts (a reload must not reset a guesser's budget).
var guards = caddy.NewUsagePool()

// guardKey names the one guard of the process in the pool.
const guardKey = "console"

// Guard is the state of the console and lookup limits.
type Guard struct {
	SignInAddr  *Attempts // failed sign-ins per client address
	SignInEmail *Attempts // failed sign-ins per email, from addresses not the account's own
	SignUpAddr  *Attempts // sign-ups per client address
	LookupAddr  *Attempts // wrong keys per client address on the lookup page
	MailAddr    *Attempts // reset and verification mails asked for, per client address
	MailEmail   *Attempts // reset and verification mails asked for, per email
	Hashes      *HashQueue

	mu    sync.Mutex
	known map[string]map[string]time.Time // email → its own addresses → last successful sign-in
}

// newGuard makes the guard with the console's and the lookup page's limits.
func newGuard() *Guard {
	return &Guard{
		SignInAddr:  newAttempts(SignInFailures, SignInWindow, attemptsInFlightPerAddress),
		SignInEmail: newAttempts(SignInFailures, SignInWindow, attemptsInFlightPerEmail),
		SignUpAddr:  newAttempts(SignUps, SignUpWindow, attemptsInFlightPerAddress),
		LookupAddr:  newAttempts(LookupFailures, LookupWindow, attemptsInFlightPerAddress),
		MailAddr:    newAttempts(MailRequests, MailWindow, attemptsInFlightPerAddress),
		MailEmail:   newAttempts(MailsPerEmail, MailWindow, attemptsInFlightPerEmail),
		Hashes:      newHashQueue(max(2, runtime.GOMAXPROCS(0))),
		known:       make(map[string]map[string]time.Time),
	}
}

// Load returns the process's guard, counting one more user of it;
// Release gives the use back.
func Load() (*Guard, error) {
	v, _, err := guards.LoadOrNew(guardKey, func() (caddy.Destructor, error) { return newGuard(), nil })
	if err != nil {
		return nil, err
	}
	return v.(*Guard), nil
}

// Release ends one use of the process's guard.
func Release() error {
	_, err := guards.Delete(guardKey)
	return err
}

// Destruct frees nothing: the guard is memory only.
func (g *Guard) Destruct() error { return nil }

// OwnAddress reports whether email signed in successfully from addr within
// knownAddressTTL.
func (g *Guard) OwnAddress(email, addr string, now time.Time) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	at, ok := g.known[email][addr]
	return ok && now.Sub(at) < knownAddressTTL
}

// SignedIn remembers addr as one of email's own addresses.
func (g *Guard) SignedIn(email, addr string, now time.Time) {
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

// Attempts counts attempts per key in fixed windows of window, at most
// limit per window and inFlight under way at once.
type Attempts struct {
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

func newAttempts(limit int, window time.Duration, inFlight int) *Attempts {
	return &Attempts{limit: limit, window: window, inFlight: inFlight, counts: make(map[string]*attemptCount)}
}

// Attempt is one reserved attempt; end it exactly once.
type Attempt struct {
	a     *Attempts
	key   string
	start time.Time
}

// Take reserves an attempt for key. It returns nil when the window's
// attempts are used up or inFlight are under way, with how long to wait.
func (a *Attempts) Take(key string, now time.Time) (*Attempt, time.Duration) {
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
	return &Attempt{a: a, key: key, start: c.start}, 0
}

// End ends the attempt. A forgiven attempt no longer counts against the
// window it was taken in.
func (t *Attempt) End(forgive bool) {
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

// HashQueue runs password hashes a few at a time (each takes 64 MiB and a
// core for a while) and bounds how many may wait.
type HashQueue struct {
	slots   chan struct{}
	waiting atomic.Int64 // Hashes waiting or running
	max     atomic.Int64 // bound of waiting
}

func newHashQueue(slots int) *HashQueue {
	q := &HashQueue{slots: make(chan struct{}, slots)}
	q.max.Store(int64(slots * (1 + HashQueuePerSlot)))
	return q
}

// Run runs fn when a slot is free. It returns ErrBusy at once when the
// queue is full, and ctx's error if ctx ends first.
func (q *HashQueue) Run(ctx context.Context, fn func()) error {
	if q.waiting.Add(1) > q.max.Load() {
		q.waiting.Add(-1)
		return ErrBusy
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
var _ caddy.Destructor = (*Guard)(nil)

// connection's address.
func ClientIP(r *http.Request) string {
	if v, ok := caddyhttp.GetVar(r.Context(), caddyhttp.ClientIPVarKey).(string); ok && v != "" {
		return v
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// Reset forgets every count and every account's own addresses, in the
// process's guard: a lockout lifted at once (the tests start each case
// from nothing this way).
func Reset() {
	guards.Range(func(_, v any) bool {
		g := v.(*Guard)
		fresh := newGuard()
		for _, p := range []struct{ dst, src *Attempts }{
			{g.SignInAddr, fresh.SignInAddr}, {g.SignInEmail, fresh.SignInEmail},
			{g.SignUpAddr, fresh.SignUpAddr}, {g.LookupAddr, fresh.LookupAddr},
			{g.MailAddr, fresh.MailAddr}, {g.MailEmail, fresh.MailEmail},
		} {
			p.dst.mu.Lock()
			p.dst.counts = p.src.counts
			p.dst.mu.Unlock()
		}
		g.mu.Lock()
		g.known = fresh.known
		g.mu.Unlock()
		return true
	})
}

// SetBound sets how many hashes may wait or run at once, returning the
// bound it replaces (the default is a few per core: HashQueuePerSlot + 1
// per slot).
func (q *HashQueue) SetBound(n int) (old int) { return int(q.max.Swap(int64(n))) }
