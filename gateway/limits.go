package gateway

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/oschwald/maxminddb-golang/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"

	"github.com/modelgate/modelgate/formats"
	"github.com/modelgate/modelgate/ledger"
	"github.com/modelgate/modelgate/ratelimit"
	"github.com/modelgate/modelgate/relay"
)

// RedisConfig shares rate limits and key and account changes between the
// instances that use the same Redis.
type RedisConfig struct {
	// URL is the Redis URL, e.g. redis://127.0.0.1:6379/0.
	URL string `json:"url"`
	// SlotLease is how long a concurrency slot outlives its last renewal
	// (the time a crashed instance's slots take to lapse). Default: 30s.
	SlotLease caddy.Duration `json:"slot_lease,omitempty"`
}

// RegionConfig refuses clients from the listed countries.
type RegionConfig struct {
	// Countries are ISO 3166-1 alpha-2 codes, e.g. "CN".
	Countries []string `json:"countries"`
	// GeoIPDB is a MaxMind-format country (or city) database.
	GeoIPDB string `json:"geoip_db"`
}

func init() {
	// go-redis logs connection failures on its own; the limiter reports
	// Redis going away and coming back once each (OnState).
	redis.SetLogger(redisLogger{})
}

// redisLogger sends go-redis's own messages to Caddy's log at debug level.
type redisLogger struct{}

func (redisLogger) Printf(_ context.Context, format string, v ...any) {
	caddy.Log().Named("modelgate.redis").Debug(fmt.Sprintf(format, v...))
}

// invalidationChannel is the Redis channel on which key deletions and
// account changes are announced to every instance.
const invalidationChannel = "modelgate:invalidate"

// limiters holds the rate limiters by backend, so that a config reload
// keeps the request windows and the slots in use.
var limiters = caddy.NewUsagePool()

// limiterHandle adapts a limiter (and, with Redis, the invalidation
// subscriber) to the usage pool.
type limiterHandle struct {
	ratelimit.Limiter
	rdb   *redis.Client    // nil without Redis
	redis *ratelimit.Redis // nil without Redis
	sub   *redis.PubSub    // nil without Redis
	store atomic.Pointer[ledger.Store]
	// alerts is the running config's alerts watcher, told of the alert
	// settings changes other instances announce.
	alerts atomic.Pointer[alertsRun]
	done   chan struct{}
}

// Destruct stops the subscriber and closes the backend.
func (h *limiterHandle) Destruct() error {
	if h.sub != nil {
		err := h.sub.Close()
		<-h.done
		return errors.Join(err, h.Limiter.Close())
	}
	return h.Limiter.Close()
}

// prepareLimits names the rate limiter (in memory, or shared through
// Redis) in its pool, and opens the region database; it connects to
// nothing.
func (a *App) prepareLimits() error {
	a.limiterKey = "ratelimit:memory"
	if a.Redis != nil {
		a.limiterKey = "ratelimit:redis:" + a.Redis.URL + ":" + time.Duration(a.Redis.SlotLease).String()
	}
	if a.BlockCountries != nil {
		db, err := maxminddb.Open(a.BlockCountries.GeoIPDB)
		if err != nil {
			return fmt.Errorf("block_countries: geoip_db: %w", err)
		}
		a.geo = db
		a.blocked = map[string]bool{}
		for _, c := range a.BlockCountries.Countries {
			a.blocked[strings.ToUpper(c)] = true
		}
	}
	return nil
}

// openLimiter makes the rate limiter, connecting to Redis if configured,
// or takes the one a running config holds.
func (a *App) openLimiter() (*limiterHandle, error) {
	logger := a.logger.Named("ratelimit")
	v, _, err := limiters.LoadOrNew(a.limiterKey, func() (caddy.Destructor, error) {
		if a.Redis == nil {
			return &limiterHandle{Limiter: ratelimit.NewMemory(nil)}, nil
		}
		return newRedisLimiter(a.Redis, logger)
	})
	if err != nil {
		return nil, err
	}
	return v.(*limiterHandle), nil
}

// useLimiter makes h the app's rate limiter, and reports whether Redis
// answers in the app's metrics.
func (a *App) useLimiter(h *limiterHandle) error {
	a.limiter = h
	if h.redis == nil {
		return nil
	}
	up := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "modelgate", Name: "redis_up",
		Help: "1 while Redis answers; 0 while rate limits are this instance's own."}, func() float64 {
		if h.redis.Up() {
			return 1
		}
		return 0
	})
	return a.ctx.GetMetricsRegistry().Register(up)
}

// newRedisLimiter connects to Redis and starts the invalidation subscriber.
func newRedisLimiter(rc *RedisConfig, logger *zap.Logger) (*limiterHandle, error) {
	url := caddy.NewReplacer().ReplaceKnown(rc.URL, "")
	opts, err := redis.ParseURL(url)
	if err != nil {
		return nil, fmt.Errorf("redis %s: %w", redactURL(rc.URL), err)
	}
	// Fail fast: a limiter that waits on a dead Redis stalls every request.
	opts.DialTimeout, opts.ReadTimeout, opts.WriteTimeout = 500*time.Millisecond, 500*time.Millisecond, 500*time.Millisecond
	opts.MaxRetries = 1
	rdb := redis.NewClient(opts)
	h := &limiterHandle{rdb: rdb, done: make(chan struct{})}
	h.redis = ratelimit.NewRedis(rdb, ratelimit.RedisOptions{
		Lease: time.Duration(rc.SlotLease),
		OnState: func(up bool, err error) {
			if up {
				logger.Info("redis reachable again: rate limits are shared again", zap.String("redis", redactURL(rc.URL)))
			} else {
				logger.Warn("redis unreachable: rate limits are this instance's own until it is back", zap.String("redis", redactURL(rc.URL)), zap.Error(err))
			}
		},
	})
	h.Limiter = h.redis
	h.sub = rdb.Subscribe(context.Background(), invalidationChannel)
	go h.listen(logger)
	return h, nil
}

// listen applies the key and account changes other instances announce:
// the ledger rereads them at once instead of at its next poll.
func (h *limiterHandle) listen(logger *zap.Logger) {
	defer close(h.done)
	for msg := range h.sub.Channel() {
		if s := h.store.Load(); s != nil {
			s.Refresh()
		}
		alertsChanged(h.alerts.Load(), msg.Payload)
		logger.Debug("change announced by another instance", zap.String("what", msg.Payload))
	}
}

// redactURL drops a password from a Redis URL for logs and errors.
func redactURL(s string) string {
	if i := strings.Index(s, "://"); i >= 0 {
		if j := strings.LastIndex(s, "@"); j > i {
			return s[:i+3] + "…@" + s[j+1:]
		}
	}
	return s
}

// announce tells every instance sharing Redis that a key or an account
// changed (what: "key:ID" or "account:ID"). Without Redis it does nothing.
func announce(ctx context.Context, rdb *redis.Client, what string) error {
	if rdb == nil {
		return nil
	}
	return rdb.Publish(ctx, invalidationChannel, what).Err()
}

// cleanupLimits releases this config's hold on the limiter and the GeoIP
// database.
func (a *App) cleanupLimits() error {
	var errs []error
	if a.heldLimiter != nil {
		a.heldLimiter = nil
		_, err := limiters.Delete(a.limiterKey)
		errs = append(errs, err)
	}
	if a.geo != nil {
		errs = append(errs, a.geo.Close())
	}
	return errors.Join(errs...)
}

// blockedRegion reports whether the client's IP (Caddy's client IP, which
// honours trusted_proxies) is in a blocked country.
func (a *App) blockedRegion(r *http.Request) bool {
	if a.geo == nil {
		return false
	}
	ip, _ := caddyhttp.GetVar(r.Context(), caddyhttp.ClientIPVarKey).(string)
	addr, err := netip.ParseAddr(ip)
	if err != nil {
		return false
	}
	var rec struct {
		Country struct {
			ISOCode string `maxminddb:"iso_code"`
		} `maxminddb:"country"`
	}
	if err := a.geo.Lookup(addr.Unmap()).Decode(&rec); err != nil {
		return false
	}
	return a.blocked[rec.Country.ISOCode]
}

// RegionBlocked is the refusal of a blocked region.
func RegionBlocked() *formats.Error {
	return &formats.Error{Kind: formats.KindPermissionDenied,
		Message: "This service is not available in your country or region."}
}

// admission is the concurrency slots an admitted request holds: its
// plan's, per account, and its key's own, per key (nil: none).
type admission struct{ plan, key ratelimit.Slot }

// Release gives both slots back; it is idempotent.
func (a admission) Release() {
	if a.plan != nil {
		a.plan.Release()
	}
	if a.key != nil {
		a.key.Release()
	}
}

// admit applies the key's own rpm and concurrency, counted per key, then
// the account's plan limits, counted per account, before anything is held
// or sent upstream: both apply. It sets the rate-limit headers (of the
// budget with fewer requests left); on refusal it answers the 429 in the
// client's format and returns ok false. When admitted, the returned
// admission must be released when the request ends. A key without limits
// costs one nil check.
func (h *APIHandler) admit(w http.ResponseWriter, r *http.Request, p relay.Principal, f relay.Format) (a admission, ok bool) {
	var kd ratelimit.Decision // the key's, when it has a limit
	if l := p.Limits; l != nil && (l.RPM > 0 || l.Concurrency > 0) {
		// key ids (key_…) and account ids (acct_…) never meet in the
		// limiter's namespace
		d, slot := h.app.limiter.Admit(r.Context(), p.KeyID, ratelimit.Limits{RPM: l.RPM, Concurrency: l.Concurrency})
		if !d.Allowed() {
			h.refuse(w, f, d, l.RPM, l.Concurrency, "on this API key")
			return admission{}, false
		}
		a.key, kd = slot, d
	}
	pl := p.Plan
	if pl == nil || (pl.RPM == 0 && pl.Concurrency == 0) {
		setRateLimitHeaders(w.Header(), f, kd)
		return a, true
	}
	d, slot := h.app.limiter.Admit(r.Context(), p.AccountID, ratelimit.Limits{RPM: pl.RPM, Concurrency: pl.Concurrency})
	if !d.Allowed() {
		a.Release()
		h.refuse(w, f, d, pl.RPM, pl.Concurrency, "on this account's plan")
		return admission{}, false
	}
	a.plan = slot
	if kd.Limit > 0 && (d.Limit == 0 || kd.Remaining < d.Remaining) {
		d = kd // the key's budget is the tighter one
	}
	setRateLimitHeaders(w.Header(), f, d)
	return a, true
}

// refuse answers a request a limit refused (d) with a 429 in the client's
// format, with the rate-limit headers and Retry-After. rpm and concurrency
// are the limits that refused it, and whose says whose they are ("on this
// API key", "on this account's plan").
func (h *APIHandler) refuse(w http.ResponseWriter, f relay.Format, d ratelimit.Decision, rpm, concurrency int, whose string) {
	setRateLimitHeaders(w.Header(), f, d)
	h.app.metrics.Refused(d.Reason.String())
	retry := max(1, int((d.RetryAfter+time.Second-1)/time.Second))
	e := &formats.Error{Kind: formats.KindRateLimited, RetryAfter: retry}
	switch d.Reason {
	case ratelimit.RPM:
		e.Message = fmt.Sprintf("Rate limit reached for requests per minute (limit %d %s). Try again in %ds.", rpm, whose, retry)
	default:
		e.Message = fmt.Sprintf("Too many requests in flight (limit %d concurrent requests %s). Try again when one has finished.", concurrency, whose)
	}
	relay.WriteError(w, f, e)
}

// setRateLimitHeaders reports the per-minute budget as the client's vendor
// does: OpenAI's x-ratelimit-*-requests (also sent to Gemini clients, whose
// API has none), Anthropic's anthropic-ratelimit-requests-*.
func setRateLimitHeaders(h http.Header, f relay.Format, d ratelimit.Decision) {
	if d.Limit == 0 {
		return
	}
	if f == relay.FormatMessages {
		h.Set("Anthropic-Ratelimit-Requests-Limit", strconv.Itoa(d.Limit))
		h.Set("Anthropic-Ratelimit-Requests-Remaining", strconv.Itoa(d.Remaining))
		h.Set("Anthropic-Ratelimit-Requests-Reset", time.Now().Add(d.Reset).UTC().Format(time.RFC3339))
		return
	}
	h.Set("X-Ratelimit-Limit-Requests", strconv.Itoa(d.Limit))
	h.Set("X-Ratelimit-Remaining-Requests", strconv.Itoa(d.Remaining))
	h.Set("X-Ratelimit-Reset-Requests", formatReset(d.Reset))
}

// formatReset writes a duration as OpenAI's reset headers do: "1s", "6m0s",
// "250ms".
func formatReset(d time.Duration) string {
	if d < time.Second {
		return strconv.Itoa(int(d/time.Millisecond)) + "ms"
	}
	return d.Round(time.Second).String()
}
