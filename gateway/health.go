package gateway

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/modelgate/modelgate/ledger"
	"github.com/modelgate/modelgate/relay"
	"github.com/modelgate/modelgate/upstream"
)

// Timing of the background health work.
const (
	defaultProbeInterval = 30 * time.Second
	defaultProbeTimeout  = 10 * time.Second

	pruneInterval    = time.Hour
	incidentLookback = 400 * 24 * time.Hour
)

// defaultHealthFlushInterval is how often availability counts and
// incidents go to the ledger (App.HealthFlushInterval).
const defaultHealthFlushInterval = 10 * time.Second

// probeSpec is a provider's active health check.
type probeSpec struct {
	disabled bool
	interval time.Duration
	method   string
	path     string // with the provider's path prefix added when sent
	body     string
	expect   int
	timeout  time.Duration
}

// newProbeSpec fills in a provider's probe with the defaults: the format's
// model list, which every vendor serves for free.
func newProbeSpec(hc *HealthCheckConfig, f upstream.Format) probeSpec {
	ps := probeSpec{interval: defaultProbeInterval, method: http.MethodGet, expect: http.StatusOK, timeout: defaultProbeTimeout}
	switch f {
	case upstream.FormatGemini:
		ps.path = "/v1beta/models"
	default:
		ps.path = "/v1/models"
	}
	if hc == nil {
		return ps
	}
	ps.disabled = hc.Disabled
	ps.interval = durationOr(hc.Interval, ps.interval)
	ps.timeout = durationOr(hc.Timeout, ps.timeout)
	if hc.Method != "" {
		ps.method = hc.Method
	}
	if hc.Path != "" {
		ps.path = hc.Path
	}
	ps.body = hc.Body
	if hc.Expect != 0 {
		ps.expect = hc.Expect
	}
	return ps
}

// probeLoop probes a provider every interval until ctx ends: one healthy key
// in turn, and every key that is out for its credentials or testing
// recovery. Outcomes feed the breakers and the availability history; probes
// are never billed.
func (a *App) probeLoop(ctx context.Context, p *provider) {
	t := time.NewTicker(p.probe.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for _, k := range p.ProbeKeys(time.Now()) {
			a.probe(ctx, p, k)
		}
	}
}

// probe sends one probe with key k.
func (a *App) probe(ctx context.Context, p *provider, k *upstream.Key) {
	ctx, cancel := context.WithTimeout(ctx, p.probe.timeout)
	defer cancel()
	var body io.Reader
	if p.probe.body != "" {
		body = strings.NewReader(p.probe.body)
	}
	u := &url.URL{Scheme: p.Scheme, Host: p.DialAddress, Path: p.PathPrefix + p.probe.path}
	req, err := http.NewRequestWithContext(ctx, p.probe.method, u.String(), body)
	if err != nil {
		return
	}
	req.Host = p.Host
	req.Header.Set("User-Agent", relay.UserAgent)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	relay.SetUpstreamAuth(req.Header, p.Provider, k.Secret(), nil)
	start := time.Now()
	resp, err := p.transport.RoundTrip(req)
	if err != nil {
		cause := relay.TransportCause(err, ctx.Err() != nil)
		p.ProbeFailed(k, cause, 0)
		a.metrics.Probe(p.Name, k.ID, cause.String())
		relay.Debugf(a.logger, "probe failed", zap.String("provider", p.Name), zap.String("upstream_key", k.ID), zap.String("cause", cause.String()))
		return
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, relay.MaxErrorBody))
	resp.Body.Close()
	if resp.StatusCode == p.probe.expect {
		p.ProbeSucceeded(k, time.Since(start))
		a.metrics.Probe(p.Name, k.ID, "ok")
		return
	}
	cause, failed := upstream.StatusCause(resp.StatusCode)
	if !failed {
		cause = upstream.CauseServer // an unexpected answer is a failed probe
	}
	hint, _ := upstream.RetryHint(resp.Header, time.Now())
	p.ProbeFailed(k, cause, hint)
	a.metrics.Probe(p.Name, k.ID, cause.String())
	a.logger.Warn("probe failed", zap.String("provider", p.Name), zap.String("upstream_key", k.ID), zap.Int("status", resp.StatusCode))
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
