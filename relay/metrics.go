package relay

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/modelgate/modelgate/ledger"
)

// Metrics are the gateway's Prometheus collectors. Caddy's metrics
// registry is per config, so the collectors are made once (NewMetrics) and
// registered on each config's registry (Register): a reload keeps every
// counter's and histogram's values. Labels name providers by name and keys
// by ID, never by secret.
type Metrics struct {
	attempts *prometheus.CounterVec   // provider, upstream_key
	failures *prometheus.CounterVec   // provider, upstream_key, cause
	probes   *prometheus.CounterVec   // provider, upstream_key, result
	latency  *prometheus.HistogramVec // provider, upstream_key
	ttft     *prometheus.HistogramVec // provider, upstream_key
	requests *prometheus.CounterVec   // model, provider, client_format, outcome
	tokens   *prometheus.CounterVec   // model, provider, kind
	spend    *prometheus.CounterVec   // model, provider
	overHold prometheus.Counter
	// uncollected is usage cost that exceeded the hold and the balance,
	// in nanos; settleRetries counts settles the ledger refused for a
	// reason that may pass (each retried).
	uncollected   *prometheus.CounterVec // model, provider
	settleRetries prometheus.Counter
	limited       *prometheus.CounterVec // reason: rpm, concurrency, region
	commits       prometheus.Histogram   // ledger write transactions, seconds from BEGIN to COMMIT
	batch         prometheus.Histogram   // commands per ledger write transaction
	// alertDeliveries counts the tries of the alerts' deliveries.
	alertDeliveries *prometheus.CounterVec // channel (mail, webhook, topup), outcome (done, retry, failed)

	// A request's collectors, found by one map read per label set rather
	// than a hash of the label values and a lookup per collector.
	mu       sync.RWMutex
	settled  map[settledLabels]*settledCollectors
	upstream map[upstreamLabels]*upstreamCollectors
}

type settledLabels struct{ model, provider, format, outcome string }

// settledCollectors are a settled request's counters.
type settledCollectors struct{ requests, input, output, spend prometheus.Counter }

type upstreamLabels struct{ provider, key string }

// upstreamCollectors are an upstream attempt's counter and histograms.
type upstreamCollectors struct {
	attempts      prometheus.Counter
	latency, ttft prometheus.Observer
}

// NewMetrics builds the collectors, registered nowhere yet.
func NewMetrics() *Metrics {
	const ns = "modelgate"
	buckets := []float64{.05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300}
	return &Metrics{
		settled:  map[settledLabels]*settledCollectors{},
		upstream: map[upstreamLabels]*upstreamCollectors{},
		attempts: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "upstream_attempts_total",
			Help: "Upstream attempts, by provider and key ID."}, []string{"provider", "upstream_key"}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "upstream_failures_total",
			Help: "Failed upstream attempts, by provider, key ID and cause."}, []string{"provider", "upstream_key", "cause"}),
		probes: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "upstream_probes_total",
			Help: "Active health probes, by provider, key ID and result (ok or the failure cause)."}, []string{"provider", "upstream_key", "result"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: ns, Name: "upstream_latency_seconds",
			Help: "Time from sending an upstream request to its response headers.", Buckets: buckets}, []string{"provider", "upstream_key"}),
		ttft: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: ns, Name: "upstream_ttft_seconds",
			Help: "Time from the client's request to the first streamed event.", Buckets: buckets}, []string{"provider", "upstream_key"}),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "requests_total",
			Help: "Settled generation requests, by model, provider, client format and outcome."}, []string{"model", "provider", "client_format", "outcome"}),
		tokens: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "tokens_total",
			Help: "Billed tokens, by model, provider and kind (input, output)."}, []string{"model", "provider", "kind"}),
		spend: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "spend_nanos_total",
			Help: "Money debited, in nanos of the currency unit, by model and provider."}, []string{"model", "provider"}),
		overHold: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "usage_over_hold_total",
			Help: "Requests whose upstream usage exceeded their hold (the input bound needs fixing)."}),
		uncollected: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "uncollected_nanos_total",
			Help: "Cost of usage that exceeded its hold and the account's balance, so could not be charged, in nanos."}, []string{"model", "provider"}),
		alertDeliveries: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "alert_deliveries_total",
			Help: "Tries of the alerts' deliveries, by channel (mail, webhook, topup) and outcome (done, retry, failed: for good)."},
			[]string{"channel", "outcome"}),
		settleRetries: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "settle_retries_total",
			Help: "Settles the ledger could not take at once (locked, I/O error) and that were tried again."}),
		limited: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "requests_refused_total",
			Help: "Requests refused before anything was held: by plan limit (rpm, concurrency) or region."}, []string{"reason"}),
		commits: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: ns, Name: "ledger_commit_seconds",
			Help:    "Ledger write transactions: time from BEGIN to COMMIT.",
			Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, 1}}),
		batch: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: ns, Name: "ledger_commit_commands",
			Help:    "Commands (settles, credits, …) grouped into one ledger write transaction.",
			Buckets: prometheus.ExponentialBuckets(1, 2, 10)}),
	}
}

// Register registers the collectors on reg (a config's registry), with
// gauges of what store holds and counts and extra collectors of the
// caller's (the breakers' states), which report live values.
func (m *Metrics) Register(reg prometheus.Registerer, store *ledger.Store, extra ...prometheus.Collector) error {
	const ns = "modelgate"
	collectors := []prometheus.Collector{m.attempts, m.failures, m.probes, m.latency, m.ttft, m.requests, m.tokens, m.spend, m.overHold, m.uncollected, m.settleRetries, m.limited, m.commits, m.batch, m.alertDeliveries,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: ns, Name: "settles_pending",
			Help: "Bills of answers already made that the ledger has not taken yet (their holds stay reserved)."}, func() float64 { return float64(pendingSettles.Load()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: ns, Name: "holds_outstanding_nanos",
			Help: "Money reserved by requests in flight, in nanos."}, func() float64 { return float64(store.Outstanding()) }),
		// PostgreSQL ledger only (0 on SQLite): docs/design.md, "Advances on busy accounts"
		prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: ns, Name: "ledger_database_reserves_total",
			Help: "PostgreSQL ledger: reserves made in the database, raises of advances included."}, func() float64 { return float64(store.Stats().DatabaseReserves) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: ns, Name: "ledger_advance_holds_total",
			Help: "PostgreSQL ledger: holds carved in memory from this instance's advances on busy accounts."}, func() float64 { return float64(store.Stats().CarvedHolds) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: ns, Name: "ledger_lapsed_settles_total",
			Help: "PostgreSQL ledger: settles whose hold had lapsed with this instance's lease, charged to the available balance."}, func() float64 { return float64(store.Stats().Lapsed) }),
	}
	collectors = append(collectors, extra...)
	for _, c := range collectors {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}

// collectorsFor returns the collectors of labels, making them on first use.
func collectorsFor[L comparable, C any](m *Metrics, cache map[L]*C, labels L, build func() *C) *C {
	m.mu.RLock()
	c := cache[labels]
	m.mu.RUnlock()
	if c != nil {
		return c
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if c = cache[labels]; c == nil {
		c = build()
		cache[labels] = c
	}
	return c
}

// upstreamFor returns the collectors of an upstream provider and key.
func (m *Metrics) upstreamFor(provider, key string) *upstreamCollectors {
	return collectorsFor(m, m.upstream, upstreamLabels{provider, key}, func() *upstreamCollectors {
		return &upstreamCollectors{attempts: m.attempts.WithLabelValues(provider, key),
			latency: m.latency.WithLabelValues(provider, key), ttft: m.ttft.WithLabelValues(provider, key)}
	})
}

// Attempt counts one upstream attempt.
func (m *Metrics) Attempt(provider, key string) { m.upstreamFor(provider, key).attempts.Inc() }

// Failure counts a failed upstream attempt.
func (m *Metrics) Failure(provider, key, cause string) {
	m.failures.WithLabelValues(provider, key, cause).Inc()
}

// Probe counts a probe's result.
func (m *Metrics) Probe(provider, key, result string) {
	m.probes.WithLabelValues(provider, key, result).Inc()
}

// Headers observes the time to an upstream's response headers.
func (m *Metrics) Headers(provider, key string, d time.Duration) {
	m.upstreamFor(provider, key).latency.Observe(d.Seconds())
}

// FirstEvent observes the time to a stream's first event.
func (m *Metrics) FirstEvent(provider, key string, d time.Duration) {
	m.upstreamFor(provider, key).ttft.Observe(d.Seconds())
}

// Settled counts a settled request.
func (m *Metrics) Settled(rec *ledger.UsageRecord) {
	c := collectorsFor(m, m.settled, settledLabels{rec.Model, rec.Provider, rec.ClientFormat, rec.Outcome}, func() *settledCollectors {
		return &settledCollectors{requests: m.requests.WithLabelValues(rec.Model, rec.Provider, rec.ClientFormat, rec.Outcome),
			input:  m.tokens.WithLabelValues(rec.Model, rec.Provider, "input"),
			output: m.tokens.WithLabelValues(rec.Model, rec.Provider, "output"),
			spend:  m.spend.WithLabelValues(rec.Model, rec.Provider)}
	})
	c.requests.Inc()
	c.input.Add(float64(rec.Tokens.Input))
	c.output.Add(float64(rec.Tokens.Output))
	c.spend.Add(float64(rec.Charged))
	if rec.OverHold {
		m.overHold.Inc()
	}
	if u := rec.Uncollected(); u > 0 {
		m.uncollected.WithLabelValues(rec.Model, rec.Provider).Add(float64(u))
	}
}

// Refused counts a request refused by a plan limit or the region check.
func (m *Metrics) Refused(reason string) { m.limited.WithLabelValues(reason).Inc() }

// AlertDelivery counts one try of an alert's delivery: its channel and
// its outcome (done, retry, failed).
func (m *Metrics) AlertDelivery(channel, outcome string) {
	m.alertDeliveries.WithLabelValues(channel, outcome).Inc()
}

// Committed observes a ledger write transaction.
func (m *Metrics) Committed(commands int, took time.Duration) {
	m.commits.Observe(took.Seconds())
	m.batch.Observe(float64(commands))
}
