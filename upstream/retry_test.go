package upstream

import (
	"net/http"
	"testing"
	"time"
)

func TestRetryHint(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	at := func(d time.Duration) string { return now.Add(d).Format(time.RFC3339) }
	for _, tc := range []struct {
		name   string
		header map[string]string
		want   time.Duration
		ok     bool
	}{
		{"none", nil, 0, false},
		{"seconds", map[string]string{"Retry-After": "30"}, 30 * time.Second, true},
		{"seconds with spaces", map[string]string{"Retry-After": " 2 "}, 2 * time.Second, true},
		{"fractional seconds", map[string]string{"Retry-After": "1.5"}, 1500 * time.Millisecond, true},
		{"zero", map[string]string{"Retry-After": "0"}, 0, true},
		{"http date", map[string]string{"Retry-After": now.Add(2 * time.Minute).Format(http.TimeFormat)}, 2 * time.Minute, true},
		{"http date in the past", map[string]string{"Retry-After": now.Add(-time.Minute).Format(http.TimeFormat)}, 0, true},
		{"garbage", map[string]string{"Retry-After": "soon"}, 0, false},
		{"negative", map[string]string{"Retry-After": "-5"}, 0, false},
		{"huge", map[string]string{"Retry-After": "1e300"}, 1<<63 - 1, true},
		{"retry-after-ms wins", map[string]string{"Retry-After-Ms": "250", "Retry-After": "1"}, 250 * time.Millisecond, true},
		{"retry-after wins over vendor", map[string]string{"Retry-After": "3", "X-Ratelimit-Reset-Tokens": "6m0s"}, 3 * time.Second, true},
		{"garbage retry-after falls to vendor", map[string]string{"Retry-After": "soon", "X-Ratelimit-Reset-Requests": "4s"}, 4 * time.Second, true},

		{"openai requests", map[string]string{"X-Ratelimit-Reset-Requests": "1s"}, time.Second, true},
		{"openai tokens", map[string]string{"X-Ratelimit-Reset-Tokens": "6m0s"}, 6 * time.Minute, true},
		{"openai ms", map[string]string{"X-Ratelimit-Reset-Requests": "20ms"}, 20 * time.Millisecond, true},
		{"openai fractional", map[string]string{"X-Ratelimit-Reset-Tokens": "7.66s"}, 7660 * time.Millisecond, true},
		{"openai-compatible plain seconds", map[string]string{"X-Ratelimit-Reset-Requests": "12"}, 12 * time.Second, true},
		{"openai exhausted requests win", map[string]string{
			"X-Ratelimit-Reset-Requests": "1s", "X-Ratelimit-Remaining-Requests": "0",
			"X-Ratelimit-Reset-Tokens": "6m0s", "X-Ratelimit-Remaining-Tokens": "120000",
		}, time.Second, true},
		{"openai tokens when requests remain", map[string]string{
			"X-Ratelimit-Reset-Requests": "1s", "X-Ratelimit-Remaining-Requests": "59",
			"X-Ratelimit-Reset-Tokens": "20s", "X-Ratelimit-Remaining-Tokens": "300",
		}, 20 * time.Second, true},
		{"openai both exhausted: longest", map[string]string{
			"X-Ratelimit-Reset-Requests": "1s", "X-Ratelimit-Remaining-Requests": "0",
			"X-Ratelimit-Reset-Tokens": "20s", "X-Ratelimit-Remaining-Tokens": "0",
		}, 20 * time.Second, true},
		{"openai bad duration", map[string]string{"X-Ratelimit-Reset-Requests": "-1s"}, 0, false},

		{"anthropic requests", map[string]string{"Anthropic-Ratelimit-Requests-Reset": at(45 * time.Second)}, 45 * time.Second, true},
		{"anthropic tokens", map[string]string{"Anthropic-Ratelimit-Tokens-Reset": at(time.Minute)}, time.Minute, true},
		{"anthropic input tokens exhausted", map[string]string{
			"Anthropic-Ratelimit-Requests-Reset": at(5 * time.Second), "Anthropic-Ratelimit-Requests-Remaining": "10",
			"Anthropic-Ratelimit-Input-Tokens-Reset": at(50 * time.Second), "Anthropic-Ratelimit-Input-Tokens-Remaining": "0",
		}, 50 * time.Second, true},
		{"anthropic reset in the past", map[string]string{"Anthropic-Ratelimit-Requests-Reset": at(-time.Second)}, 0, true},
		{"anthropic bad time", map[string]string{"Anthropic-Ratelimit-Requests-Reset": "tomorrow"}, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := http.Header{}
			for k, v := range tc.header {
				h.Set(k, v)
			}
			got, ok := RetryHint(h, now)
			if got != tc.want || ok != tc.ok {
				t.Fatalf("RetryHint = %v, %v; want %v, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}

func TestStatusCause(t *testing.T) {
	for _, tc := range []struct {
		status int
		cause  Cause
		failed bool
	}{
		{200, 0, false},
		{204, 0, false},
		{400, 0, false},
		{404, 0, false},
		{413, 0, false},
		{422, 0, false},
		{401, CauseAuth, true},
		{403, CauseAuth, true},
		{408, CauseTimeout, true},
		{429, CauseRateLimited, true},
		{500, CauseServer, true},
		{502, CauseServer, true},
		{503, CauseOverloaded, true},
		{504, CauseTimeout, true},
		{529, CauseOverloaded, true},
		{301, CauseServer, true},
	} {
		c, failed := StatusCause(tc.status)
		if failed != tc.failed || failed && c != tc.cause {
			t.Errorf("StatusCause(%d) = %s, %v; want %s, %v", tc.status, c, failed, tc.cause, tc.failed)
		}
	}
}

func TestCauseNames(t *testing.T) {
	// The ledger stores one column per cause by these names, in this order.
	want := []string{"connect", "timeout", "server", "overloaded", "rate_limited", "auth", "closed"}
	if len(want) != NumCauses {
		t.Fatalf("NumCauses = %d", NumCauses)
	}
	for i, name := range want {
		if got := Cause(i).String(); got != name {
			t.Errorf("Cause(%d) = %q, want %q", i, got, name)
		}
	}
	if Cause(NumCauses).String() != "cause(7)" {
		t.Error("out of range cause")
	}
	for s, want := range map[BreakerState]string{BreakerClosed: "closed", BreakerOpen: "open", BreakerHalfOpen: "half_open", 9: "breaker(9)"} {
		if s.String() != want {
			t.Errorf("%d: %q", s, s.String())
		}
	}
}
