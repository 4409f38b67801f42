package ratelimit

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"
)

// Redis shares the limits of every instance that uses the same Redis. The
// per-minute budget is GCRA in a server-side script (redis_rate); a
// concurrency slot is a lease in a sorted set per account, renewed while
// the request lasts, so that the slots of an instance that dies lapse
// within a lease. While Redis cannot be reached the instance admits by its
// own memory limits, and reports the change through OnState.
type Redis struct {
	rdb      *redis.Client
	rate     *redis_rate.Limiter
	fallback *Memory
	lease    time.Duration
	prefix   string
	onState  func(up bool, err error)

	up      atomic.Bool
	mu      sync.Mutex
	held    map[*redisSlot]struct{}
	stop    chan struct{}
	stopped sync.WaitGroup
}

// RedisOptions configures NewRedis.
type RedisOptions struct {
	// Lease is how long a slot outlives its last renewal. Default 30s.
	Lease time.Duration
	// Prefix starts every Redis key. Default "modelgate:".
	Prefix string
	// OnState, if set, is called when Redis becomes unreachable (up false,
	// with the error) and reachable again. It must not block.
	OnState func(up bool, err error)
}

// DefaultLease is the default slot lease.
const DefaultLease = 30 * time.Second

// NewRedis returns a limiter on rdb. It starts assuming Redis is up, and
// checks it every second while it is not.
func NewRedis(rdb *redis.Client, o RedisOptions) *Redis {
	if o.Lease <= 0 {
		o.Lease = DefaultLease
	}
	if o.Prefix == "" {
		o.Prefix = "modelgate:"
	}
	r := &Redis{
		rdb:      rdb,
		rate:     redis_rate.NewLimiter(rdb),
		fallback: NewMemory(nil),
		lease:    o.Lease,
		prefix:   o.Prefix,
		onState:  o.OnState,
		held:     map[*redisSlot]struct{}{},
		stop:     make(chan struct{}),
	}
	r.up.Store(true)
	r.stopped.Add(1)
	go r.background()
	return r
}

// Up reports whether Redis was reachable at the last call.
func (r *Redis) Up() bool { return r.up.Load() }

// slotScript takes a slot: it drops lapsed leases, then adds one for
// member if fewer than the limit remain. Times are the server's.
// KEYS[1] the account's slot set; ARGV limit, lease (ms), member.
// Returns {1, in flight} or {0, in flight}.
var slotScript = redis.NewScript(`
local t = redis.call("TIME")
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local lease = tonumber(ARGV[2])
redis.call("ZREMRANGEBYSCORE", KEYS[1], "-inf", now)
local n = redis.call("ZCARD", KEYS[1])
if n >= tonumber(ARGV[1]) then
  return {0, n}
end
redis.call("ZADD", KEYS[1], now + lease, ARGV[3])
redis.call("PEXPIRE", KEYS[1], lease * 2)
return {1, n + 1}
`)

// renewScript extends the leases of members that still hold their slot.
// KEYS[1] the account's slot set; ARGV lease (ms), members...
const renewScript = `
local t = redis.call("TIME")
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local lease = tonumber(ARGV[1])
for i = 2, #ARGV do
  redis.call("ZADD", KEYS[1], "XX", now + lease, ARGV[i])
end
redis.call("PEXPIRE", KEYS[1], lease * 2)
return 1
`

// Admit implements [Limiter].
func (r *Redis) Admit(ctx context.Context, account string, l Limits) (Decision, Slot) {
	if !r.up.Load() {
		return r.fallback.Admit(ctx, account, l)
	}
	d, slot, err := r.admit(ctx, account, l)
	if err != nil {
		if ctx.Err() == nil {
			r.setUp(false, err)
		}
		return r.fallback.Admit(ctx, account, l)
	}
	return d, slot
}

func (r *Redis) admit(ctx context.Context, account string, l Limits) (Decision, Slot, error) {
	var slot *redisSlot
	if l.Concurrency > 0 {
		slot = &redisSlot{r: r, key: r.prefix + "slots:" + account, member: newMember()}
		res, err := slotScript.Run(ctx, r.rdb, []string{slot.key}, l.Concurrency, r.lease.Milliseconds(), slot.member).Int64Slice()
		if err != nil {
			return Decision{}, nil, err
		}
		if res[0] == 0 {
			return Decision{Reason: Concurrency, RetryAfter: time.Second}, nil, nil
		}
	}
	var d Decision
	if l.RPM > 0 {
		res, err := r.rate.Allow(ctx, r.prefix+"rpm:"+account, redis_rate.PerMinute(l.RPM))
		if err != nil {
			if slot != nil {
				slot.remove(context.WithoutCancel(ctx))
			}
			return Decision{}, nil, err
		}
		d = Decision{Limit: l.RPM, Remaining: res.Remaining, Reset: max(res.ResetAfter, 0)}
		if res.Allowed == 0 {
			d.Reason, d.RetryAfter = RPM, res.RetryAfter
			if slot != nil {
				slot.remove(context.WithoutCancel(ctx))
			}
			return d, nil, nil
		}
	}
	if slot == nil {
		return d, nil, nil
	}
	r.mu.Lock()
	r.held[slot] = struct{}{}
	r.mu.Unlock()
	return d, slot, nil
}

// newMember names a slot lease uniquely.
func newMember() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func (r *Redis) setUp(up bool, err error) {
	if r.up.Swap(up) != up && r.onState != nil {
		r.onState(up, err)
	}
}

// background renews the leases of the slots in use every third of a lease,
// and, while Redis is down, checks every second whether it is back.
func (r *Redis) background() {
	defer r.stopped.Done()
	renew := time.NewTicker(r.lease / 3)
	defer renew.Stop()
	check := time.NewTicker(time.Second)
	defer check.Stop()
	for {
		select {
		case <-r.stop:
			return
		case <-renew.C:
			if r.up.Load() {
				r.renew()
			}
		case <-check.C:
			if !r.up.Load() {
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				if err := r.rdb.Ping(ctx).Err(); err == nil {
					r.setUp(true, nil)
				}
				cancel()
			}
		}
	}
}

// renew extends every held lease, one script call per account.
func (r *Redis) renew() {
	r.mu.Lock()
	byKey := map[string][]any{}
	for s := range r.held {
		byKey[s.key] = append(byKey[s.key], s.member)
	}
	r.mu.Unlock()
	if len(byKey) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), r.lease/3)
	defer cancel()
	pipe := r.rdb.Pipeline()
	for key, members := range byKey {
		// EVAL, not EVALSHA: a pipeline cannot load a script on NOSCRIPT
		pipe.Eval(ctx, renewScript, []string{key}, append([]any{r.lease.Milliseconds()}, members...)...)
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		r.setUp(false, err)
	}
}

// Close stops the renewals and closes the Redis client. Held slots lapse
// with their leases.
func (r *Redis) Close() error {
	close(r.stop)
	r.stopped.Wait()
	return r.rdb.Close()
}

type redisSlot struct {
	r           *Redis
	key, member string
	once        sync.Once
}

// Release gives the slot back.
func (s *redisSlot) Release() {
	s.once.Do(func() {
		s.r.mu.Lock()
		delete(s.r.held, s)
		s.r.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		s.remove(ctx)
	})
}

// remove deletes the lease; if Redis cannot be told, the lease lapses.
func (s *redisSlot) remove(ctx context.Context) {
	if err := s.r.rdb.ZRem(ctx, s.key, s.member).Err(); err != nil {
		s.r.setUp(false, err)
	}
}
