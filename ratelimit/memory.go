package ratelimit

import (
	"context"
	"hash/maphash"
	"sync"
	"time"
)

// Memory keeps the limits of one instance in memory.
type Memory struct {
	now    func() time.Time
	seed   maphash.Seed
	shards [memoryShards]memoryShard
}

const (
	memoryShards = 32
	// sweepEvery is how often a shard forgets accounts with a whole budget
	// and no request in flight.
	sweepEvery = time.Minute
)

type memoryShard struct {
	mu        sync.Mutex
	accounts  map[string]*memoryAccount
	lastSweep time.Time
}

type memoryAccount struct {
	tat      time.Time // GCRA theoretical arrival time
	inFlight int
}

// NewMemory returns an in-memory limiter. now is the clock (nil: time.Now).
func NewMemory(now func() time.Time) *Memory {
	if now == nil {
		now = time.Now
	}
	m := &Memory{now: now, seed: maphash.MakeSeed()}
	for i := range m.shards {
		m.shards[i].accounts = map[string]*memoryAccount{}
	}
	return m
}

// Admit implements [Limiter].
func (m *Memory) Admit(_ context.Context, account string, l Limits) (Decision, Slot) {
	sh := &m.shards[maphash.String(m.seed, account)%memoryShards]
	now := m.now()
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if now.Sub(sh.lastSweep) >= sweepEvery {
		sh.sweep(now)
	}
	a := sh.accounts[account]
	if a == nil {
		a = &memoryAccount{}
		sh.accounts[account] = a
	}
	if l.Concurrency > 0 && a.inFlight >= l.Concurrency {
		d := Decision{Reason: Concurrency, RetryAfter: time.Second}
		if l.RPM > 0 {
			d.Limit, d.Remaining, d.Reset = peek(a.tat, now, l.RPM)
		}
		return d, nil
	}
	var d Decision
	if l.RPM > 0 {
		var tat time.Time
		if d, tat = gcra(a.tat, now, l.RPM, time.Minute); !d.Allowed() {
			return d, nil
		}
		a.tat = tat
	}
	if l.Concurrency == 0 {
		return d, nil
	}
	a.inFlight++
	return d, &memorySlot{shard: sh, account: a}
}

// peek reports the per-minute budget without spending it.
func peek(tat, now time.Time, limit int) (int, int, time.Duration) {
	d, _ := gcra(tat, now, limit, time.Minute)
	if d.Allowed() {
		return limit, d.Remaining + 1, max(tat.Sub(now), 0)
	}
	return limit, 0, d.Reset
}

// sweep forgets idle accounts. The caller holds sh.mu.
func (sh *memoryShard) sweep(now time.Time) {
	sh.lastSweep = now
	for id, a := range sh.accounts {
		if a.inFlight == 0 && !a.tat.After(now) {
			delete(sh.accounts, id)
		}
	}
}

// InFlight returns the account's slots in use (for tests and metrics).
func (m *Memory) InFlight(account string) int {
	sh := &m.shards[maphash.String(m.seed, account)%memoryShards]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if a := sh.accounts[account]; a != nil {
		return a.inFlight
	}
	return 0
}

// Close implements [Limiter]; a memory limiter has nothing to stop.
func (m *Memory) Close() error { return nil }

type memorySlot struct {
	shard   *memoryShard
	account *memoryAccount
	once    sync.Once
}

func (s *memorySlot) Release() {
	s.once.Do(func() {
		s.shard.mu.Lock()
		s.account.inFlight--
		s.shard.mu.Unlock()
	})
}
