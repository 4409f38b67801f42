// Package ratelimit admits requests per account against its plan: requests
// per minute and concurrent requests (the gateway counts a key's own limits
// the same way, under the key's id). Two backends share one contract:
// [Memory], for one instance, and [Redis], shared by every instance that
// uses the same Redis, which falls back to its own memory limits while
// Redis is unreachable.
//
// Requests per minute follow GCRA (the generic cell rate algorithm): an
// account may send its whole limit at once, then one request every
// minute/limit; the budget is whole again a minute after the last request.
// Concurrency is a count of slots; a slot is taken by [Limiter.Admit] and
// given back by [Slot.Release].
package ratelimit

import (
	"context"
	"time"
)

// Limits are an account's limits; zero means unlimited.
type Limits struct {
	RPM         int // requests per minute
	Concurrency int // requests in flight
}

// Reason says which limit refused a request.
type Reason uint8

// The reasons.
const (
	Admitted    Reason = iota // not refused
	RPM                       // requests per minute
	Concurrency               // requests in flight
)

func (r Reason) String() string {
	switch r {
	case RPM:
		return "rpm"
	case Concurrency:
		return "concurrency"
	}
	return "admitted"
}

// Decision is the answer to one admission, with what the rate-limit
// headers report. Remaining and Reset describe the per-minute budget (zero
// when the account has no RPM limit).
type Decision struct {
	Reason     Reason        // Admitted, or the limit that refused
	Limit      int           // the RPM limit, 0 if none
	Remaining  int           // requests the budget allows right now, after this one
	Reset      time.Duration // until the budget is whole again
	RetryAfter time.Duration // when refused: until a request may pass
}

// Allowed reports whether the request was admitted.
func (d Decision) Allowed() bool { return d.Reason == Admitted }

// Limiter admits requests.
type Limiter interface {
	// Admit checks the account's per-minute budget and takes one of its
	// concurrency slots, atomically for the account. When admitted, the
	// slot (nil if the account has no concurrency limit) must be released
	// when the request ends.
	Admit(ctx context.Context, account string, l Limits) (Decision, Slot)
	// Close stops background work and releases the backend.
	Close() error
}

// Slot is one of an account's concurrency slots.
type Slot interface {
	// Release gives the slot back. It is idempotent.
	Release()
}

// gcra is the arithmetic of GCRA for a budget of limit requests per period:
// given the stored theoretical arrival time tat (zero: none), it returns
// the decision for one request at now and the new tat to store (unchanged
// when refused).
func gcra(tat, now time.Time, limit int, period time.Duration) (Decision, time.Time) {
	interval := period / time.Duration(limit)
	burst := interval * time.Duration(limit)
	if tat.Before(now) {
		tat = now
	}
	next := tat.Add(interval)
	allowAt := next.Add(-burst)
	if now.Before(allowAt) {
		return Decision{Reason: RPM, Limit: limit, Remaining: 0, Reset: tat.Sub(now), RetryAfter: allowAt.Sub(now)}, tat
	}
	remaining := int(now.Sub(allowAt) / interval)
	return Decision{Limit: limit, Remaining: remaining, Reset: next.Sub(now)}, next
}
