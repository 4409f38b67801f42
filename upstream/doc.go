// Package upstream is the gateway's routing brain: what it knows about the
// LLM providers it calls (wire format, base address, keys, i.e. upstream
// accounts), which route and key serve the next attempt, and the health
// that decides it: per-key cooldowns, circuit breakers per key and per
// provider, provider status, availability counts and incidents. It is plain
// Go; the Caddy glue in package gateway builds providers from the
// configuration and reports every attempt's outcome.
//
// # State and reloads
//
// A Registry (one per process, kept across reloads) owns the health state,
// by provider name and key ID. Every config load builds fresh Providers with
// Registry.NewProvider; they attach to the existing state, so in-flight
// counts, cooldowns, breakers, availability counts and incidents carry over.
// Registry.Retain, called once a configuration is in service, forgets the
// keys and retires the providers it no longer has.
//
// # One request
//
//	var tried []*upstream.Attempt
//	defer func() { for _, a := range tried { a.Release() } }()
//	for len(tried) < maxAttempts {
//		i, a, ok := upstream.Choose(routes, tried, nil)
//		if !ok {
//			break // nothing available now: 503
//		}
//		tried = append(tried, a)
//		// … call routes[i]'s provider with a.Key.Secret() …
//		// answer 2xx or a client-caused 4xx: a.Succeeded(latency)
//		// failure before the first byte: a.Failed(cause, retryAfter); retry
//	}
//
// Choose takes the first available route in order, or a random one by
// weight when any route has a weight; then, among the provider's available
// keys not yet tried by the request, the one with the fewest requests in
// flight relative to its weight (ties: the key whose weighted turn it is,
// which rotates equal keys and shares traffic by weight when the gateway is
// idle). Routes whose provider failed this request at the endpoint come
// last. Choose and the outcome methods take no lock shared between
// providers and allocate only the Attempt.
//
// # Outcomes, cooldowns and breakers
//
// Each Attempt reports one outcome: Succeeded (2xx, or a 4xx the client
// caused: the upstream is healthy) or Failed with a Cause (StatusCause maps
// HTTP statuses). Then:
//
//   - rate_limited (429): the key cools down for the retry hint (RetryHint
//     reads Retry-After and the vendors' reset headers; Gemini's retryDelay
//     is passed as is), else RateLimitCooldown, at most MaxRetryAfter.
//   - auth (401, 403): the key is out until a probe with it succeeds.
//   - connect, timeout, server, overloaded, closed: the key cools down for
//     FailureCooldown, doubled per consecutive failure up to
//     MaxFailureCooldown, and the failure counts toward the key's and the
//     provider's breakers. A success resets the count.
//
// A breaker opens after BreakerFailures failures within BreakerWindow; it
// stays open BreakerCooldown (doubled per consecutive trip, up to
// MaxBreakerCooldown), then half-opens: exactly one request, the holder of
// its trial token, may test recovery. Success closes and resets it; failure
// reopens it. An Attempt released without an outcome gives its tokens back;
// a token neither used nor given back within MaxBreakerCooldown lapses.
// A 429 or auth answer proves the endpoint works: it closes a half-open
// breaker. While a provider's breaker is open its routes are skipped; while
// a key's is, or the key cools down, the key is skipped.
//
// Probes (ProbeKeys, ProbeSucceeded, ProbeFailed) count the same way; a
// probe success re-enables an auth-failed key and closes half-open breakers.
// A Prober runs a provider's active checks (ProbeCheck) on a timer,
// reporting each outcome (ProbeResult) to the caller's metrics and logs.
//
// # Reporting
//
// Provider.Status gives the status page's view (operational, degraded,
// down; per key ok, cooling, open, half_open, auth_failed) and the breaker
// states for metrics (Provider.Breaker, Key.Breaker). Every outcome, traffic
// and probes, counts per provider per UTC minute until
// Registry.DrainAvailability collects it; Registry.DrainIncidents collects
// the starts and ends of provider outages.
//
// # Defaults
//
// HealthConfig's zero fields: a breaker opens after 5 failures within 60s
// and stays open 30s, doubling to 5m; a failed key cools 1s, doubling to
// 60s; a 429 without a hint cools the key 5s; hints are capped at 10m; a
// failure within 5m makes the provider degraded.
package upstream
