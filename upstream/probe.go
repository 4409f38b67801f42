package upstream

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Defaults of a provider's active health check.
const (
	DefaultProbeInterval = 30 * time.Second
	DefaultProbeTimeout  = 10 * time.Second
)

// probeBodyLimit bounds what a probe reads of an answer before closing it.
const probeBodyLimit = 1 << 20

// ProbeCheck is a provider's active health check: the request a probe
// sends and the answer that counts as healthy.
type ProbeCheck struct {
	Interval time.Duration // time between probe rounds
	Timeout  time.Duration // bounds one probe
	Method   string
	Path     string // the provider's path prefix is added when sent
	Body     string // sent, as JSON, when not empty
	Expect   int    // the status of a healthy answer
}

// DefaultProbeCheck is the check of a provider of format f: every 30s, a GET
// of the format's model list, which every vendor serves for free,
// expecting 200 within 10s.
func DefaultProbeCheck(f Format) ProbeCheck {
	c := ProbeCheck{Interval: DefaultProbeInterval, Timeout: DefaultProbeTimeout, Method: http.MethodGet,
		Path: "/v1/models", Expect: http.StatusOK}
	if f == FormatGemini {
		c.Path = "/v1beta/models"
	}
	return c
}

// ProbeResult is the outcome of one probe.
type ProbeResult struct {
	Provider string
	KeyID    string
	OK       bool
	Cause    Cause // why it failed, when not OK
	Status   int   // the answer's status; 0 when none came
}

// Result is what a probe counter records: "ok" or the failure's cause.
func (r ProbeResult) Result() string {
	if r.OK {
		return "ok"
	}
	return r.Cause.String()
}

// Prober runs a provider's active health checks. Probes use the provider's
// real keys; their outcomes feed the keys' and the provider's breakers and
// the availability history, and are never billed.
type Prober struct {
	Provider  *Provider
	Check     ProbeCheck
	Transport http.RoundTripper
	// Authorize sets the provider's credentials for a key's secret.
	Authorize func(h http.Header, secret string)
	// UserAgent is the User-Agent header of the probes.
	UserAgent string
	// TransportCause classifies a request that got no answer; timedOut
	// says the probe's own deadline passed.
	TransportCause func(err error, timedOut bool) Cause
	// Report, if set, learns every probe's outcome (metrics, logs).
	Report func(ProbeResult)
}

// Run probes every Check.Interval until ctx ends: in each round, one
// healthy key in turn and every key that is out for its credentials or
// testing recovery (Provider.ProbeKeys).
func (pr *Prober) Run(ctx context.Context) {
	t := time.NewTicker(pr.Check.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for _, k := range pr.Provider.ProbeKeys(time.Now()) {
			pr.probe(ctx, k)
		}
	}
}

// probe sends one probe with key k and records its outcome.
func (pr *Prober) probe(ctx context.Context, k *Key) {
	p := pr.Provider
	ctx, cancel := context.WithTimeout(ctx, pr.Check.Timeout)
	defer cancel()
	var body io.Reader
	if pr.Check.Body != "" {
		body = strings.NewReader(pr.Check.Body)
	}
	u := &url.URL{Scheme: p.Scheme, Host: p.DialAddress, Path: p.PathPrefix + pr.Check.Path}
	req, err := http.NewRequestWithContext(ctx, pr.Check.Method, u.String(), body)
	if err != nil {
		return
	}
	req.Host = p.Host
	req.Header.Set("User-Agent", pr.UserAgent)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	pr.Authorize(req.Header, k.Secret())
	start := time.Now()
	resp, err := pr.Transport.RoundTrip(req)
	if err != nil {
		cause := pr.TransportCause(err, ctx.Err() != nil)
		p.ProbeFailed(k, cause, 0)
		pr.report(ProbeResult{Provider: p.Name, KeyID: k.ID, Cause: cause})
		return
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, probeBodyLimit))
	resp.Body.Close()
	if resp.StatusCode == pr.Check.Expect {
		p.ProbeSucceeded(k, time.Since(start))
		pr.report(ProbeResult{Provider: p.Name, KeyID: k.ID, OK: true, Status: resp.StatusCode})
		return
	}
	cause, failed := StatusCause(resp.StatusCode)
	if !failed {
		cause = CauseServer // an unexpected answer is a failed probe
	}
	hint, _ := RetryHint(resp.Header, time.Now())
	p.ProbeFailed(k, cause, hint)
	pr.report(ProbeResult{Provider: p.Name, KeyID: k.ID, Cause: cause, Status: resp.StatusCode})
}

// report hands a probe's outcome to Report, if set.
func (pr *Prober) report(r ProbeResult) {
	if pr.Report != nil {
		pr.Report(r)
	}
}
