package gateway

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

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
		if p.Provider == nil || p.transport == nil {
			continue
		}
		ch <- prometheus.MustNewConstMetric(breakerDesc, prometheus.GaugeValue, float64(p.Breaker(now)), p.Name, "")
		for _, k := range p.Keys() {
			ch <- prometheus.MustNewConstMetric(breakerDesc, prometheus.GaugeValue, float64(k.Breaker(now)), p.Name, k.ID)
		}
	}
}
