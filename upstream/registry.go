package upstream

import (
	"cmp"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Registry owns the health state that outlives a configuration: per
// provider (by name) its breaker, recent failures, availability counts and
// incident, and per key (by ID) its requests in flight, cooldown and breaker.
// Providers built by its NewProvider share that state with every earlier
// and later Provider of the same name, so a config reload loses nothing.
// Keep one per process. Its methods are safe for concurrent use.
type Registry struct {
	clock func() time.Time

	mu        sync.Mutex
	providers map[string]*providerState

	incMu     sync.Mutex
	incidents []IncidentEvent
	incGen    uint64 // bumped by every DrainIncidents
}

// NewRegistry returns an empty registry that reads the time from clock
// (time.Now when nil) for every outcome it records.
func NewRegistry(clock func() time.Time) *Registry {
	if clock == nil {
		clock = time.Now
	}
	return &Registry{clock: clock, providers: make(map[string]*providerState)}
}

// Destruct has nothing to free; it lets a Registry live in a caddy.UsagePool.
func (r *Registry) Destruct() error { return nil }

func (r *Registry) now() int64 { return r.clock().UnixNano() }

// state returns the provider's state, creating it.
func (r *Registry) state(name string) *providerState {
	r.mu.Lock()
	defer r.mu.Unlock()
	ps := r.providers[name]
	if ps == nil {
		ps = &providerState{name: name, reg: r, all: make(map[string]*keyState)}
		r.providers[name] = ps
	}
	return ps
}

// Retain forgets the keys that none of live uses and retires the providers
// that none of live is: an ongoing incident of a retired provider ends now,
// its breaker is reset, and only its name and undrained availability counts
// are kept (they are still drained). Call it once a new configuration is in
// service, not concurrently with NewProvider. Providers built earlier keep
// working (a forgotten key's state is only detached); a forgotten key or
// retired provider that comes back starts afresh.
func (r *Registry) Retain(live []*Provider) {
	keep := make(map[*providerState]map[*keyState]bool, len(live))
	for _, p := range live {
		if p == nil || p.state == nil || p.state.reg != r {
			continue
		}
		ks := keep[p.state]
		if ks == nil {
			ks = make(map[*keyState]bool, len(p.keys))
			keep[p.state] = ks
		}
		for _, k := range p.keys {
			ks[k.st] = true
		}
	}
	now := r.clock().UTC()
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, ps := range r.providers {
		ks := keep[ps]
		ps.mu.Lock()
		for id, st := range ps.all {
			if !ks[st] {
				delete(ps.all, id)
			}
		}
		if ks == nil && !ps.retired {
			ps.retired = true
			ps.keys = nil
			ps.br.reset()
			ps.publish()
			ps.nrecent = 0
			if ps.down {
				ps.down = false
				r.closeIncident(ps, now)
			}
		}
		ps.mu.Unlock()
	}
}

// IncidentEvent is the start or the end of a period during which a provider
// was down: its provider breaker was not closed (open, or testing recovery),
// or none of its keys was usable (each auth-failed or behind a breaker that
// is not closed). Cause is the most frequent failure cause of the preceding
// BreakerWindow. End is zero while the incident goes on; the same incident
// is reported again, with the same Start, when it ends (once, with both
// times, if it ended before it was drained).
type IncidentEvent struct {
	Provider string
	Cause    string
	Start    time.Time
	End      time.Time
}

// DrainIncidents returns the incident events recorded since the last call,
// oldest first, and forgets them.
func (r *Registry) DrainIncidents() []IncidentEvent {
	r.incMu.Lock()
	defer r.incMu.Unlock()
	out := r.incidents
	r.incidents = nil
	r.incGen++
	return out
}

// openIncident records the start of ps's incident; the caller holds ps.mu.
func (r *Registry) openIncident(ps *providerState) {
	r.incMu.Lock()
	r.incidents = append(r.incidents, IncidentEvent{Provider: ps.name, Cause: ps.incCause.String(), Start: ps.incStart})
	ps.incIdx, ps.incGen = len(r.incidents)-1, r.incGen
	r.incMu.Unlock()
}

// closeIncident records the end of ps's incident; the caller holds ps.mu.
func (r *Registry) closeIncident(ps *providerState, end time.Time) {
	r.incMu.Lock()
	if ps.incGen == r.incGen && ps.incIdx < len(r.incidents) {
		r.incidents[ps.incIdx].End = end // its start is not drained yet
	} else {
		r.incidents = append(r.incidents, IncidentEvent{Provider: ps.name, Cause: ps.incCause.String(), Start: ps.incStart, End: end})
	}
	r.incMu.Unlock()
}

// MinuteCount is the outcome counts of one provider's upstream attempts and
// probes during one UTC minute. It has the layout of ledger.MinuteCount, so
// one converts to the other.
type MinuteCount struct {
	Provider string
	Minute   time.Time // the start of the minute, UTC
	OK       int64
	Fail     [NumCauses]int64 // by Cause
}

// DrainAvailability returns the counts of every minute that starts at or
// before upTo, and clears them, sorted by provider and minute; minutes
// without outcomes are left out. Draining the current minute is safe: what
// is counted afterwards is returned by a later call, so every outcome is
// returned exactly once. The same provider and minute can therefore come
// back in several calls: add them up.
func (r *Registry) DrainAvailability(upTo time.Time) []MinuteCount {
	r.mu.Lock()
	states := make([]*providerState, 0, len(r.providers))
	for _, ps := range r.providers {
		states = append(states, ps)
	}
	r.mu.Unlock()
	slices.SortFunc(states, func(a, b *providerState) int { return cmp.Compare(a.name, b.name) })
	last := floorDiv(upTo.UnixNano(), int64(time.Minute))
	var out []MinuteCount
	for _, ps := range states {
		out = ps.avail.drain(ps.name, last, out)
	}
	return out
}

// bucket counts one provider's outcomes during one minute. Writers announce
// themselves in writers and check sealed; a drain seals the bucket, waits for
// the writers to leave, then reads it: a count lands either in this drain or
// (after the seal) in a fresh bucket that a later drain reads.
type bucket struct {
	minute  int64 // minutes since the unix epoch
	writers atomic.Int64
	sealed  atomic.Bool
	ok      atomic.Int64
	fail    [NumCauses]atomic.Int64
}

func (b *bucket) add(ok bool, c Cause) {
	if ok {
		b.ok.Add(1)
	} else if int(c) < NumCauses {
		b.fail[c].Add(1)
	}
}

func (b *bucket) empty() bool {
	if b.ok.Load() != 0 {
		return false
	}
	for i := range b.fail {
		if b.fail[i].Load() != 0 {
			return false
		}
	}
	return true
}

// availability is a provider's undrained minute buckets. Outside mu, cur is
// never sealed and past buckets are only written by writers that loaded them
// as cur before they rotated.
type availability struct {
	cur  atomic.Pointer[bucket]
	mu   sync.Mutex
	past []*bucket // older (or late) minutes, not yet drained
}

// count adds one outcome at time now (unix ns).
func (av *availability) count(now int64, ok bool, c Cause) {
	m := floorDiv(now, int64(time.Minute))
	if b := av.cur.Load(); b != nil && b.minute == m {
		b.writers.Add(1)
		if !b.sealed.Load() {
			b.add(ok, c)
			b.writers.Add(-1)
			return
		}
		b.writers.Add(-1)
	}
	av.mu.Lock()
	defer av.mu.Unlock()
	// Under mu no reachable bucket is sealed, so adding directly is safe.
	b := av.cur.Load()
	switch {
	case b != nil && b.minute == m:
	case b == nil || b.minute < m:
		if b != nil {
			av.past = append(av.past, b)
		}
		b = &bucket{minute: m}
		av.cur.Store(b)
	default: // an outcome of an earlier minute, reported late
		b = nil
		for _, p := range av.past {
			if p.minute == m {
				b = p
				break
			}
		}
		if b == nil {
			b = &bucket{minute: m}
			av.past = append(av.past, b)
		}
	}
	b.add(ok, c)
}

// drain appends the counts of the minutes up to last to out and clears them.
func (av *availability) drain(name string, last int64, out []MinuteCount) []MinuteCount {
	av.mu.Lock()
	defer av.mu.Unlock()
	var taken []*bucket
	keep := av.past[:0]
	for _, b := range av.past {
		if b.minute <= last {
			taken = append(taken, b)
		} else {
			keep = append(keep, b)
		}
	}
	clear(av.past[len(keep):])
	av.past = keep
	if b := av.cur.Load(); b != nil && b.minute <= last && !b.empty() {
		av.cur.Store(&bucket{minute: b.minute})
		taken = append(taken, b)
	}
	slices.SortFunc(taken, func(a, b *bucket) int { return cmp.Compare(a.minute, b.minute) })
	start := len(out)
	for _, b := range taken {
		b.sealed.Store(true)
		for b.writers.Load() != 0 {
			runtime.Gosched()
		}
		var mc *MinuteCount
		if n := len(out); n > start && out[n-1].Minute.Unix() == b.minute*60 {
			mc = &out[n-1]
		} else {
			out = append(out, MinuteCount{Provider: name, Minute: time.Unix(b.minute*60, 0).UTC()})
			mc = &out[len(out)-1]
		}
		mc.OK += b.ok.Load()
		for i := range b.fail {
			mc.Fail[i] += b.fail[i].Load()
		}
		if mc.OK == 0 && mc.Fail == [NumCauses]int64{} {
			out = out[:len(out)-1]
		}
	}
	return out
}

// floorDiv is a/b rounded toward minus infinity (b > 0).
func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && a < 0 {
		q--
	}
	return q
}
