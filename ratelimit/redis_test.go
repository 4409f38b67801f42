package ratelimit

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// testRedis returns a client on the local test Redis (127.0.0.1:6379, db
// 15, flushed), or skips.
func testRedis(t *testing.T) *redis.Client {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379", DB: 15, DialTimeout: 200 * time.Millisecond})
	if err := rdb.Ping(context.Background()).Err(); err != nil {
		rdb.Close()
		t.Skipf("no redis-server on 127.0.0.1:6379 (%v): install and start redis-server to run this test", err)
	}
	rdb.FlushDB(context.Background())
	return rdb
}

// newClient is another connection to the same test Redis (another instance).
func newClient() *redis.Client {
	return redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379", DB: 15})
}

// TestRedisSharedExactly: two limiters (two instances) on one Redis
// together admit exactly an account's per-minute budget and hold it to its
// concurrency.
func TestRedisSharedExactly(t *testing.T) {
	testRedis(t).Close()
	a, b := NewRedis(newClient(), RedisOptions{Prefix: t.Name() + ":"}), NewRedis(newClient(), RedisOptions{Prefix: t.Name() + ":"})
	defer a.Close()
	defer b.Close()
	ctx := context.Background()

	var admitted atomic.Int64
	var wg sync.WaitGroup
	for i := range 120 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			lim := a
			if i%2 == 1 {
				lim = b
			}
			if d, _ := lim.Admit(ctx, "acct", Limits{RPM: 50}); d.Allowed() {
				admitted.Add(1)
			}
		}()
	}
	wg.Wait()
	// 50 at once, and at most one more per 1.2 s the test took
	if n := admitted.Load(); n < 50 || n > 51 {
		t.Fatalf("%d admitted of 120, want the budget of 50", n)
	}

	var slots []Slot
	for i := range 10 {
		lim := a
		if i%2 == 1 {
			lim = b
		}
		d, s := lim.Admit(ctx, "busy", Limits{Concurrency: 4})
		if d.Allowed() != (i < 4) {
			t.Fatalf("request %d: %+v", i, d)
		}
		if s != nil {
			slots = append(slots, s)
		}
	}
	slots[0].Release()
	if d, s := b.Admit(ctx, "busy", Limits{Concurrency: 4}); !d.Allowed() {
		t.Fatalf("after a release on the other instance: %+v", d)
	} else {
		slots = append(slots, s)
	}
	for _, s := range slots {
		s.Release()
	}
	if n := newClient().ZCard(ctx, t.Name()+":slots:busy").Val(); n != 0 {
		t.Fatalf("%d leases left after every release", n)
	}
}

// TestRedisLeases: a slot is renewed while it is held (it outlives its
// lease), and the slots of an instance that stops renewing (it died) lapse
// within a lease.
func TestRedisLeases(t *testing.T) {
	testRedis(t).Close()
	const lease = 600 * time.Millisecond
	o := RedisOptions{Lease: lease, Prefix: t.Name() + ":"}
	a, b := NewRedis(newClient(), o), NewRedis(newClient(), o)
	defer b.Close()
	ctx := context.Background()
	l := Limits{Concurrency: 1}

	_, held := a.Admit(ctx, "acct", l)
	if held == nil {
		t.Fatal("no slot")
	}
	time.Sleep(3 * lease) // renewed meanwhile
	if d, _ := b.Admit(ctx, "acct", l); d.Allowed() {
		t.Fatal("a held slot lapsed while its holder renewed it")
	}
	// the holder dies: no release, no renewals
	a.Close()
	deadline := time.Now().Add(lease + 500*time.Millisecond)
	for {
		d, s := b.Admit(ctx, "acct", l)
		if d.Allowed() {
			s.Release()
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the dead instance's slot did not lapse within its lease")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestRedisDown: with Redis unreachable the limiter says so once and
// admits by its own memory limits.
func TestRedisDown(t *testing.T) {
	var mu sync.Mutex
	var states []string
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", DialTimeout: 100 * time.Millisecond, MaxRetries: -1})
	r := NewRedis(rdb, RedisOptions{OnState: func(up bool, err error) {
		mu.Lock()
		states = append(states, fmt.Sprintf("up=%v err=%v", up, err != nil))
		mu.Unlock()
	}})
	defer r.Close()
	admitted := 0
	for range 5 {
		if d, s := r.Admit(context.Background(), "acct", Limits{RPM: 3, Concurrency: 10}); d.Allowed() {
			admitted++
			s.Release()
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if admitted != 3 || r.Up() || len(states) != 1 || states[0] != "up=false err=true" {
		t.Fatalf("admitted %d, up %v, states %v", admitted, r.Up(), states)
	}
}
