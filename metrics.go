package modelgate

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/modelgate/modelgate/ledger"
)

// metrics are the gateway's Prometheus collectors, registered on each
// config's registry (Caddy serves them with its metrics). Labels name
// providers by name and keys by ID, never by secret.
type metrics struct {
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
}

// newMetrics builds and registers the collectors.
func newMetrics(reg prometheus.Registerer, a *App) (*metrics, error) {
	const ns = "modelgate"
	buckets := []float64{.05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300}
	m := &metrics{
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
	collectors := []prometheus.Collector{m.attempts, m.failures, m.probes, m.latency, m.ttft, m.requests, m.tokens, m.spend, m.overHold, m.uncollected, m.settleRetries, m.limited, m.commits, m.batch,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: ns, Name: "settles_pending",
			Help: "Bills of answers already made that the ledger has not taken yet (their holds stay reserved)."}, func() float64 { return float64(pendingSettles.Load()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: ns, Name: "holds_outstanding_nanos",
			Help: "Money reserved by requests in flight, in nanos."}, func() float64 { return float64(a.store.Outstanding()) }),
		breakerCollector{a},
	}
	for _, c := range collectors {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// attempt counts one upstream attempt.
func (m *metrics) attempt(provider, key string) { m.attempts.WithLabelValues(provider, key).Inc() }

// failure counts a failed upstream attempt.
func (m *metrics) failure(provider, key, cause string) {
	m.failures.WithLabelValues(provider, key, cause).Inc()
}

// probe counts a probe's result.
func (m *metrics) probe(provider, key, result string) {
	m.probes.WithLabelValues(provider, key, result).Inc()
}

// headers observes the time to an upstream's response headers.
func (m *metrics) headers(provider, key string, d time.Duration) {
	m.latency.WithLabelValues(provider, key).Observe(d.Seconds())
}

// firstEvent observes the time to a stream's first event.
func (m *metrics) firstEvent(provider, key string, d time.Duration) {
	m.ttft.WithLabelValues(provider, key).Observe(d.Seconds())
}

// settled counts a settled request.
func (m *metrics) settled(rec *ledger.UsageRecord) {
	m.requests.WithLabelValues(rec.Model, rec.Provider, rec.ClientFormat, rec.Outcome).Inc()
	m.tokens.WithLabelValues(rec.Model, rec.Provider, "input").Add(float64(rec.Tokens.Input))
	m.tokens.WithLabelValues(rec.Model, rec.Provider, "output").Add(float64(rec.Tokens.Output))
	m.spend.WithLabelValues(rec.Model, rec.Provider).Add(float64(rec.Charged))
	if rec.OverHold {
		m.overHold.Inc()
	}
	if u := rec.Uncollected(); u > 0 {
		m.uncollected.WithLabelValues(rec.Model, rec.Provider).Add(float64(u))
	}
}

// refused counts a request refused by a plan limit or the region check.
func (m *metrics) refused(reason string) { m.limited.WithLabelValues(reason).Inc() }

// committed observes a ledger write transaction.
func (m *metrics) committed(commands int, took time.Duration) {
	m.commits.Observe(took.Seconds())
	m.batch.Observe(float64(commands))
}

// breakerCollector reports the breakers' states when scraped: 0 closed,
// 1 open, 2 half-open; the provider's own breaker has an empty key.
type breakerCollector struct{ a *App }

var breakerDesc = prometheus.NewDesc("modelgate_breaker_state",
	"Circuit breaker state: 0 closed, 1 open, 2 half-open (upstream_key empty: the provider's).",
	[]string{"provider", "upstream_key"}, nil)

// Describe implements prometheus.Collector.
func (breakerCollector) Describe(ch chan<- *prometheus.Desc) { ch <- breakerDesc }

// Collect implements prometheus.Collector.
func (b breakerCollector) Collect(ch chan<- prometheus.Metric) {
	now := time.Now()
	for _, p := range b.a.providers {
		if p.Provider == nil || p.proxy == nil {
			continue
		}
		ch <- prometheus.MustNewConstMetric(breakerDesc, prometheus.GaugeValue, float64(p.Breaker(now)), p.Name, "")
		for _, k := range p.Keys() {
			ch <- prometheus.MustNewConstMetric(breakerDesc, prometheus.GaugeValue, float64(k.Breaker(now)), p.Name, k.ID)
		}
	}
}
