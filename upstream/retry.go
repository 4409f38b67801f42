package upstream

import (
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// StatusCause classifies an upstream's HTTP status: failed is false for an
// answer that shows a healthy upstream (below 300, or a 4xx the client
// caused such as 400, 404, 413 or 422), else c is the failure's cause:
// 401 and 403 auth, 429 rate_limited, 408 and 504 timeout, 503 and 529
// overloaded, any other 5xx or a 3xx (an LLM API does not redirect) server.
// The caller may know better from the body (Gemini says API_KEY_INVALID
// with a 400: report auth).
func StatusCause(status int) (c Cause, failed bool) {
	switch {
	case status < 300:
		return 0, false
	case status == http.StatusUnauthorized, status == http.StatusForbidden:
		return CauseAuth, true
	case status == http.StatusTooManyRequests:
		return CauseRateLimited, true
	case status == http.StatusRequestTimeout, status == http.StatusGatewayTimeout:
		return CauseTimeout, true
	case status == http.StatusServiceUnavailable, status == 529:
		return CauseOverloaded, true
	case status >= 400 && status < 500:
		return 0, false
	}
	return CauseServer, true
}

// resetHeader is a vendor's rate-limit reset header and the header with the
// remaining allowance it belongs to.
type resetHeader struct {
	reset, remaining string
	tokens           bool // a token limit (else a request limit)
	date             bool // an RFC 3339 time (else a duration)
}

var resetHeaders = [...]resetHeader{
	// OpenAI: durations such as "1s", "6m0s", "20ms"
	{"X-Ratelimit-Reset-Requests", "X-Ratelimit-Remaining-Requests", false, false},
	{"X-Ratelimit-Reset-Tokens", "X-Ratelimit-Remaining-Tokens", true, false},
	// Anthropic: RFC 3339 times
	{"Anthropic-Ratelimit-Requests-Reset", "Anthropic-Ratelimit-Requests-Remaining", false, true},
	{"Anthropic-Ratelimit-Tokens-Reset", "Anthropic-Ratelimit-Tokens-Remaining", true, true},
	{"Anthropic-Ratelimit-Input-Tokens-Reset", "Anthropic-Ratelimit-Input-Tokens-Remaining", true, true},
	{"Anthropic-Ratelimit-Output-Tokens-Reset", "Anthropic-Ratelimit-Output-Tokens-Remaining", true, true},
}

// RetryHint reads how long the upstream asks us to wait, from a 429's (or
// 503's) headers at time now: Retry-After-Ms (milliseconds), Retry-After
// (seconds or an HTTP date), else the vendor's rate-limit reset headers
// (OpenAI x-ratelimit-reset-requests and -tokens, Anthropic
// anthropic-ratelimit-*-reset). Of those, the resets of exhausted limits
// (remaining 0) win, the longest of them; if none is known to be exhausted,
// the token limits' (a request larger than the tokens left), else the
// requests'. A time in the past gives 0. ok is false when no header gives
// a hint. The result is not capped: Failed caps it by MaxRetryAfter.
func RetryHint(h http.Header, now time.Time) (d time.Duration, ok bool) {
	if d, ok := parseSeconds(h.Get("Retry-After-Ms"), time.Millisecond); ok {
		return d, true
	}
	if v := strings.TrimSpace(h.Get("Retry-After")); v != "" {
		if d, ok := parseSeconds(v, time.Second); ok {
			return d, true
		}
		if t, err := http.ParseTime(v); err == nil {
			return max(t.Sub(now), 0), true
		}
	}
	var exhausted, tokens, requests time.Duration
	var haveExhausted, haveTokens, haveRequests bool
	for _, rh := range resetHeaders {
		v := strings.TrimSpace(h.Get(rh.reset))
		if v == "" {
			continue
		}
		var d time.Duration
		if rh.date {
			t, err := time.Parse(time.RFC3339, v)
			if err != nil {
				continue
			}
			d = max(t.Sub(now), 0)
		} else {
			var ok bool
			if d, ok = parseDuration(v); !ok {
				continue
			}
		}
		switch {
		case strings.TrimSpace(h.Get(rh.remaining)) == "0":
			exhausted, haveExhausted = max(exhausted, d), true
		case rh.tokens:
			tokens, haveTokens = max(tokens, d), true
		default:
			requests, haveRequests = max(requests, d), true
		}
	}
	switch {
	case haveExhausted:
		return exhausted, true
	case haveTokens:
		return tokens, true
	case haveRequests:
		return requests, true
	}
	return 0, false
}

// parseSeconds parses a non-negative decimal number of units.
func parseSeconds(v string, unit time.Duration) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || f < 0 || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, false
	}
	if f*float64(unit) >= math.MaxInt64 {
		return math.MaxInt64, true
	}
	return time.Duration(math.Ceil(f * float64(unit))), true
}

// parseDuration parses a Go duration ("6m0s", "20ms") or a number of
// seconds, not negative.
func parseDuration(v string) (time.Duration, bool) {
	if d, err := time.ParseDuration(v); err == nil {
		return d, d >= 0
	}
	return parseSeconds(v, time.Second)
}
