package gateway

import (
	"context"
	"net/http"
	"time"

	"go.uber.org/zap"

	"github.com/modelgate/modelgate/ledger"
	"github.com/modelgate/modelgate/relay"
	"github.com/modelgate/modelgate/upstream"
)

// Timing of the background health work.
const (
	pruneInterval    = time.Hour
	incidentLookback = 400 * 24 * time.Hour
)

// defaultHealthFlushInterval is how often availability counts and
// incidents go to the ledger (App.HealthFlushInterval).
const defaultHealthFlushInterval = 10 * time.Second

// probeCheck is a provider's active health check as configured: the
// format's defaults (upstream.DefaultProbeCheck) with what hc sets, and
// whether the probes are off.
func probeCheck(hc *HealthCheckConfig, f upstream.Format) (c upstream.ProbeCheck, disabled bool) {
	c = upstream.DefaultProbeCheck(f)
	if hc == nil {
		return c, false
	}
	c.Interval = durationOr(hc.Interval, c.Interval)
	c.Timeout = durationOr(hc.Timeout, c.Timeout)
	if hc.Method != "" {
		c.Method = hc.Method
	}
	if hc.Path != "" {
		c.Path = hc.Path
	}
	c.Body = hc.Body
	if hc.Expect != 0 {
		c.Expect = hc.Expect
	}
	return c, hc.Disabled
}

// prober is the runner of a provider's probes, through the provider's
// transport, with its credentials, reporting to the metrics and the log.
func (a *App) prober(p *provider) *upstream.Prober {
	return &upstream.Prober{
		Provider:  p.Provider.Provider,
		Check:     p.probe,
		Transport: p.transport,
		Authorize: func(h http.Header, secret string) {
			relay.SetUpstreamAuth(h, p.Provider, secret, nil)
		},
		UserAgent:      relay.UserAgent,
		TransportCause: relay.TransportCause,
		Report:         a.probed,
	}
}

// probed counts a probe's outcome and logs a failed one: at debug level
// when no answer came, as a warning when the answer was not the expected
// one.
func (a *App) probed(r upstream.ProbeResult) {
	a.metrics.Probe(r.Provider, r.KeyID, r.Result())
	switch {
	case r.OK:
	case r.Status == 0:
		relay.Debugf(a.logger, "probe failed", zap.String("provider", r.Provider), zap.String("upstream_key", r.KeyID), zap.String("cause", r.Cause.String()))
	default:
		a.logger.Warn("probe failed", zap.String("provider", r.Provider), zap.String("upstream_key", r.KeyID), zap.Int("status", r.Status))
	}
}

// flushHealth moves availability counts and incidents from the registry to
// the ledger every few seconds, and once more when ctx ends; it prunes old
// history every hour.
func (a *App) flushHealth(ctx context.Context) {
	t := time.NewTicker(durationOr(a.HealthFlushInterval, defaultHealthFlushInterval))
	defer t.Stop()
	lastPrune := time.Time{}
	var pending []ledger.MinuteCount
	for {
		done := false
		select {
		case <-ctx.Done():
			done = true
		case <-t.C:
		}
		// a detached context: the last flush runs after ctx ended
		wctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		pending = a.flushOnce(wctx, pending)
		if now := time.Now(); !done && now.Sub(lastPrune) >= pruneInterval {
			if err := a.store.PruneAvailability(wctx, now); err != nil {
				a.logger.Error("pruning availability history", zap.Error(err))
			}
			lastPrune = now
		}
		cancel()
		if done {
			return
		}
	}
}

// flushOnce writes what the registry counted since the last flush; counts a
// failed write returns are kept for the next one.
func (a *App) flushOnce(ctx context.Context, pending []ledger.MinuteCount) []ledger.MinuteCount {
	for _, mc := range a.registry.DrainAvailability(time.Now()) {
		pending = append(pending, ledger.MinuteCount(mc))
	}
	if len(pending) > 0 {
		if err := a.store.RecordAvailability(ctx, pending); err != nil {
			a.logger.Error("recording availability", zap.Error(err))
		} else {
			pending = pending[:0]
		}
	}
	for _, ev := range a.registry.DrainIncidents() {
		if _, err := a.store.OpenIncident(ctx, ev.Provider, ev.Cause, ev.Start); err != nil {
			a.logger.Error("recording an incident", zap.String("provider", ev.Provider), zap.Error(err))
			continue
		}
		if !ev.End.IsZero() {
			if err := a.store.CloseIncident(ctx, ev.Provider, ev.End); err != nil {
				a.logger.Error("closing an incident", zap.String("provider", ev.Provider), zap.Error(err))
			}
		}
	}
	return pending
}

// closeStaleIncidents ends the incidents a previous process left open.
func (a *App) closeStaleIncidents(ctx context.Context) {
	now := time.Now()
	incs, err := a.store.Incidents(ctx, "", now.Add(-incidentLookback), 10000)
	if err != nil {
		a.logger.Error("reading incidents", zap.Error(err))
		return
	}
	for _, inc := range incs {
		if inc.Ongoing() {
			if err := a.store.CloseIncident(ctx, inc.Provider, now); err != nil {
				a.logger.Error("closing an incident", zap.String("provider", inc.Provider), zap.Error(err))
			}
		}
	}
}
