package gateway

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/modelgate/modelgate/ledger"
	"github.com/modelgate/modelgate/ratelimit"
	"github.com/modelgate/modelgate/relay"
)

// TestAdmitKeyLimits: a key's own rpm and concurrency apply before its
// plan's, counted per key; both apply; the 429 names whose limit it is; a
// refusal by the plan gives back the slot the key's limit took. A key
// without limits on a plan without limits is admitted without allocating.
func TestAdmitKeyLimits(t *testing.T) {
	metrics := relay.NewMetrics()
	if err := metrics.Register(prometheus.NewRegistry(), nil); err != nil {
		t.Fatal(err)
	}
	mem := ratelimit.NewMemory(nil)
	h := &APIHandler{app: &App{limiter: mem, metrics: metrics}}
	free := &relay.Plan{Name: "free"}
	tight := &relay.Plan{Name: "tight", RPM: 2, Concurrency: 1}
	principal := func(key string, plan *relay.Plan, l *ledger.KeyLimits) relay.Principal {
		return relay.Principal{Principal: ledger.Principal{KeyID: key, AccountID: "acct_" + key, Limits: l}, Plan: plan}
	}
	r := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", nil)
	var last *httptest.ResponseRecorder // the last admission's answer
	admit := func(p relay.Principal) (admission, bool, string) {
		last = httptest.NewRecorder()
		a, ok := h.admit(last, r, p, relay.FormatChat)
		return a, ok, last.Body.String()
	}
	// budget is the rate-limit headers a client reads: limit/remaining
	budget := func() string {
		return last.Header().Get("X-Ratelimit-Limit-Requests") + "/" + last.Header().Get("X-Ratelimit-Remaining-Requests")
	}

	// the key's rpm, per key
	p := principal("key_rpm", free, &ledger.KeyLimits{RPM: 1})
	if _, ok, body := admit(p); !ok || budget() != "1/0" {
		t.Fatalf("first request: budget %s, %s", budget(), body)
	}
	if _, ok, body := admit(p); ok || last.Code != http.StatusTooManyRequests || last.Header().Get("Retry-After") == "" ||
		!strings.Contains(body, "Rate limit reached for requests per minute (limit 1 on this API key)") {
		t.Fatalf("second request: %v %d %s", ok, last.Code, body)
	}
	if _, ok, body := admit(principal("key_other", free, &ledger.KeyLimits{RPM: 1})); !ok {
		t.Fatalf("another key: %s", body)
	}

	// the key's concurrency
	p = principal("key_conc", free, &ledger.KeyLimits{Concurrency: 1})
	a, ok, _ := admit(p)
	if !ok {
		t.Fatal("first request refused")
	}
	if _, ok, body := admit(p); ok || last.Code != http.StatusTooManyRequests ||
		!strings.Contains(body, "(limit 1 concurrent requests on this API key)") {
		t.Fatalf("second request in flight: %v %d %s", ok, last.Code, body)
	}
	a.Release()
	a.Release() // idempotent
	if mem.InFlight("key_conc") != 0 {
		t.Fatalf("%d in flight after the release", mem.InFlight("key_conc"))
	}

	// both apply; the plan's refusal gives the key's slot back
	p = principal("key_both", tight, &ledger.KeyLimits{RPM: 10, Concurrency: 5})
	a, ok, _ = admit(p)
	if !ok || mem.InFlight("key_both") != 1 || mem.InFlight("acct_key_both") != 1 {
		t.Fatalf("admitted %v, in flight: key %d, account %d", ok, mem.InFlight("key_both"), mem.InFlight("acct_key_both"))
	}
	if budget() != "2/1" { // the plan's, with fewer requests left than the key's 9
		t.Fatalf("budget %s, want the plan's 2/1", budget())
	}
	if _, ok, body := admit(p); ok || last.Code != http.StatusTooManyRequests ||
		!strings.Contains(body, "(limit 1 concurrent requests on this account's plan)") {
		t.Fatalf("over the plan's concurrency: %v %d %s", ok, last.Code, body)
	}
	if mem.InFlight("key_both") != 1 {
		t.Fatalf("the plan's refusal kept the key's slot: %d in flight", mem.InFlight("key_both"))
	}
	a.Release()
	if mem.InFlight("key_both") != 0 || mem.InFlight("acct_key_both") != 0 {
		t.Fatal("slots kept after the release")
	}

	// no limits at all: nothing allocated
	none := principal("key_none", free, nil)
	w := httptest.NewRecorder()
	if n := testing.AllocsPerRun(100, func() {
		a, ok := h.admit(w, r, none, relay.FormatChat)
		if !ok {
			t.Fatal("refused")
		}
		a.Release()
	}); n != 0 {
		t.Fatalf("%v allocations per admission of a key without limits", n)
	}
}
