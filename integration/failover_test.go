package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelgate/modelgate/ledger"
	"github.com/modelgate/modelgate/mockupstream"
	"github.com/modelgate/modelgate/upstream"
	"github.com/modelgate/modelgate/web/webtest"
)

// secondKey is the mock's second upstream account.
const secondKey = "sk-upstream-second-9876543210"

// twoKeyProviders declares one provider per format, each with two keys
// (the first is the one tests make fail), and a model on each.
func twoKeyProviders(extra string) string {
	var b strings.Builder
	for _, f := range []string{"openai", "anthropic", "gemini"} {
		fmt.Fprintf(&b, "\t\tprovider duo-%s {\n\t\t\tformat %s\n\t\t\tbase_url {env.MG_TEST_MOCK_URL}\n\t\t\tkeys {env.MG_TEST_UPSTREAM_KEY} %s\n%s\t\t}\n", f, f, secondKey, extra)
		fmt.Fprintf(&b, "\t\tmodel duo-%s {\n\t\t\troute duo-%s up-duo\n\t\t\tprice input 0.5 output 1.5\n\t\t}\n", f, f)
	}
	return b.String()
}

// genRequest sends one generation request in a client format and returns
// the status and body.
func (g *testGateway) generate(client, model, text string, stream bool, key string) response {
	switch client {
	case "anthropic":
		return g.do("POST", "/v1/messages", fmt.Sprintf(`{"model":%q,"max_tokens":50,"stream":%v,"messages":[{"role":"user","content":%q}]}`, model, stream, text),
			"Authorization", "Bearer "+key, "Anthropic-Version", "2023-06-01")
	case "gemini":
		method := "generateContent"
		if stream {
			method = "streamGenerateContent?alt=sse"
		}
		return g.do("POST", "/v1beta/models/"+model+":"+method, fmt.Sprintf(`{"contents":[{"parts":[{"text":%q}]}]}`, text), "X-Goog-Api-Key", key)
	}
	extra := ""
	if stream {
		extra = `"stream":true`
	}
	return g.do("POST", "/v1/chat/completions", chatBody(model, text, extra), "Authorization", "Bearer "+key)
}

// TestFailoverOneKeyFailing: with one of two keys failing in each way, 50
// requests in each client format (streamed and not, to every upstream
// format) all succeed, and the failing key gets no traffic while its
// cooldown lasts: one failed attempt per provider, then nothing.
func TestFailoverOneKeyFailing(t *testing.T) {
	for _, fault := range []mockupstream.Fault{
		{Key: upstreamKey, Mode: "status", Status: 500},
		{Key: upstreamKey, Mode: "status", Status: 429, RetryAfter: 30 * time.Second},
		{Key: upstreamKey, Mode: "hang"},
		{Key: upstreamKey, Mode: "close"},
	} {
		name := fault.Mode
		if fault.Mode == "status" {
			name = fmt.Sprint(fault.Status)
		}
		t.Run(name, func(t *testing.T) {
			g := startGateway(t, gatewayOptions{
				mock:  mockupstream.Config{Keys: []string{upstreamKey, secondKey}, Faults: []mockupstream.Fault{fault}},
				extra: twoKeyProviders("\t\t\tfailure_cooldown 30s\n\t\t\tfirst_byte_timeout 300ms\n\t\t\tresponse_timeout 300ms\n"),
			})
			acct, key := g.account("10.00")
			for _, client := range []string{"openai", "anthropic", "gemini"} {
				for i := range 50 {
					model := "duo-" + []string{"openai", "anthropic", "gemini"}[i%3]
					r := g.generate(client, model, "hello there", i%2 == 1, key)
					if r.status != 200 {
						t.Fatalf("%s client, %s, request %d: %d %s", client, model, i, r.status, r.body)
					}
				}
			}
			failing, good := g.mock.KeyStats(upstreamKey), g.mock.KeyStats(secondKey)
			// one failed attempt per provider, then the key sat out
			if failing.Requests != 3 || good.Requests != 150 {
				t.Errorf("failing key served %d requests, the good one %d; want 3 and 150", failing.Requests, good.Requests)
			}
			rows := g.rows(acct)
			if len(rows) != 150 {
				t.Fatalf("%d usage rows for 150 requests", len(rows))
			}
			for _, row := range rows {
				if row.UpstreamKeyID != upstream.KeyID(row.Provider, secondKey) {
					t.Fatalf("the row does not name the key that served: %+v", row)
				}
			}
			if _, held := g.balance(acct); held != 0 {
				t.Fatalf("held %s", held)
			}
			g.audit()
		})
	}
}

// TestAllKeysFailing: when every key fails, each client gets an error in
// its own format — the upstream's failure translated (502, or 503 for rate
// limits) or, once the breakers have opened, "none available" (503) — and
// nothing is debited, every hold released.
func TestAllKeysFailing(t *testing.T) {
	// the acceptable answers per client format: status → envelope marker
	upstreamFailed := map[string]map[int]string{
		"openai":    {502: `"type":"server_error"`, 503: `"type":"server_error"`},
		"anthropic": {502: `"type":"api_error"`, 529: `"type":"overloaded_error"`},
		"gemini":    {500: `"status":"INTERNAL"`, 503: `"status":"UNAVAILABLE"`},
	}
	rateLimited := map[string]map[int]string{
		"openai":    {503: `"type":"server_error"`},
		"anthropic": {529: `"type":"overloaded_error"`},
		"gemini":    {503: `"status":"UNAVAILABLE"`},
	}
	for _, tc := range []struct {
		fault mockupstream.Fault
		want  map[string]map[int]string
	}{
		{mockupstream.Fault{Mode: "status", Status: 500}, upstreamFailed},
		{mockupstream.Fault{Mode: "status", Status: 429, RetryAfter: 30 * time.Second}, rateLimited},
	} {
		t.Run(fmt.Sprint(tc.fault.Status), func(t *testing.T) {
			g := startGateway(t, gatewayOptions{
				mock:  mockupstream.Config{Keys: []string{upstreamKey, secondKey}, Faults: []mockupstream.Fault{tc.fault}},
				extra: twoKeyProviders("\t\t\tfailure_cooldown 1ms\n"),
			})
			acct, key := g.account("1.00")
			first := true
			for _, client := range []string{"openai", "anthropic", "gemini"} {
				for _, stream := range []bool{false, true} {
					restKeys()
					r := g.generate(client, "duo-openai", "hello", stream, key)
					marker, ok := tc.want[client][r.status]
					if !ok || !strings.Contains(r.body, marker) {
						t.Errorf("%s client, stream=%v: %d %s", client, stream, r.status, r.body)
					}
					if first && tc.fault.Status == 500 && r.status != 502 {
						t.Errorf("the first answer is the upstream's failure, translated: %d", r.status)
					}
					first = false
					if r.status == 503 || r.status == 529 {
						if r.header.Get("Retry-After") == "" {
							t.Errorf("%s client: %d without Retry-After", client, r.status)
						}
					}
				}
			}
			if bal, held := g.balance(acct); bal != 1_000_000_000 || held != 0 || len(g.rows(acct)) != 0 {
				t.Fatalf("balance %s held %s rows %d", bal, held, len(g.rows(acct)))
			}
		})
	}
}

// TestRouteFailoverAndWeights: a model whose first route's provider is down
// is served by the next route, and the row names the route that served; a
// model with weighted routes shares its traffic by weight.
func TestRouteFailoverAndWeights(t *testing.T) {
	g := startGateway(t, gatewayOptions{extra: `		provider dead {
			format openai
			base_url http://127.0.0.1:1
			keys k
		}
		model backup {
			route dead down-model
			route mock-anthropic up-backup
			price input 0.5 output 1.5
		}
		model shared {
			route mock up-three weight 3
			route mock-gemini up-one weight 1
			price input 0.5 output 1.5
		}
`})
	acct, key := g.account("10.00")
	for i := range 5 {
		r := g.generate("openai", "backup", "hello", i%2 == 0, key)
		if r.status != 200 {
			t.Fatalf("backup: %d %s", r.status, r.body)
		}
	}
	for _, row := range g.rows(acct) {
		if row.Provider != "mock-anthropic" || row.UpstreamModel != "up-backup" {
			t.Fatalf("row %+v", row)
		}
	}
	g.mock.Reset()
	for range 200 {
		if r := g.generate("openai", "shared", "hello", false, key); r.status != 200 {
			t.Fatalf("shared: %d %s", r.status, r.body)
		}
	}
	three, one := 0, 0
	for _, r := range g.mock.Requests() {
		switch {
		case strings.Contains(string(r.Body), "up-three"):
			three++
		case strings.Contains(r.Path, "up-one"):
			one++
		}
	}
	// the mock keeps the last 100 requests: about 75 and 25
	if three+one != 100 || three < 60 || three > 90 {
		t.Fatalf("weighted share: %d vs %d", three, one)
	}
}

// TestAuthFailedKeyReturnsAfterProbe: a key the upstream refuses (401) is
// taken out at once, and comes back only when a probe with it succeeds.
func TestAuthFailedKeyReturnsAfterProbe(t *testing.T) {
	g := startGateway(t, gatewayOptions{
		mock: mockupstream.Config{Keys: []string{upstreamKey, secondKey},
			Faults: []mockupstream.Fault{{Key: upstreamKey, Mode: "status", Status: 401}}},
		extra: twoKeyProviders("\t\t\thealth_check {\n\t\t\t\tinterval 100ms\n\t\t\t}\n"),
	})
	_, key := g.account("10.00")
	for i := range 10 {
		if r := g.generate("openai", "duo-openai", "hello", false, key); r.status != 200 {
			t.Fatalf("request %d: %d %s", i, r.status, r.body)
		}
	}
	if n := g.mock.KeyStats(upstreamKey).ByStatus[401]; n < 1 {
		t.Fatalf("the refused key was never tried")
	}
	// fixed upstream side: a probe brings the key back
	g.mock.SetFaults(nil)
	before := g.mock.KeyStats(upstreamKey).Completed
	deadline := time.Now().Add(3 * time.Second)
	for g.mock.KeyStats(upstreamKey).Completed == before && time.Now().Before(deadline) {
		g.generate("openai", "duo-openai", "hello", false, key)
		time.Sleep(50 * time.Millisecond)
	}
	if g.mock.KeyStats(upstreamKey).Completed == before {
		t.Fatal("the key did not come back after its credentials worked again")
	}
}

// TestStatusPage: availability and incidents recorded from real traffic
// reach the ledger, and the public status page (HTML, JSON) shows the
// degraded provider as degraded with uptime figures and bars that match
// the history written; headless Chromium renders it on a phone and a
// desktop, and the screenshots are kept.
func TestStatusPage(t *testing.T) {
	// duo-openai: its first key fails every time it is tried; steady: one
	// good key
	g := startGateway(t, gatewayOptions{
		mock: mockupstream.Config{Keys: []string{upstreamKey, secondKey}, Faults: []mockupstream.Fault{{Key: upstreamKey, Mode: "status", Status: 500}}},
		extra: "\t\thealth_flush_interval 50ms\n\t\tprovider duo-openai {\n\t\t\tformat openai\n\t\t\tbase_url {env.MG_TEST_MOCK_URL}\n\t\t\tkeys {env.MG_TEST_UPSTREAM_KEY} " + secondKey +
			"\n\t\t\tfailure_cooldown 1ms\n\t\t}\n\t\tmodel duo-openai {\n\t\t\troute duo-openai up\n\t\t\tprice input 0.5 output 1.5\n\t\t}\n" +
			"\t\tprovider steady {\n\t\t\tformat gemini\n\t\t\tbase_url {env.MG_TEST_MOCK_URL}\n\t\t\tkeys " + secondKey +
			"\n\t\t}\n\t\tmodel steady {\n\t\t\troute steady up\n\t\t\tprice input 0.5 output 1.5\n\t\t}\n" +
			"\t\tprovider gone {\n\t\t\tformat anthropic\n\t\t\tbase_url http://127.0.0.1:1\n\t\t\tkeys k\n\t\t\tfailure_cooldown 1ms\n\t\t}\n" +
			"\t\tmodel gone {\n\t\t\troute gone up\n\t\t\tprice input 0.5 output 1.5\n\t\t}\n",
		status: true,
	})
	_, key := g.account("10.00")
	for range 40 {
		if r := g.generate("openai", "duo-openai", "hello", false, key); r.status != 200 {
			t.Fatalf("%d %s", r.status, r.body)
		}
		time.Sleep(3 * time.Millisecond)
	}
	for range 10 {
		if r := g.generate("gemini", "steady", "hello", false, key); r.status != 200 {
			t.Fatalf("%d %s", r.status, r.body)
		}
	}
	// gone: nobody listens; five failures in a row open its breaker and an
	// incident
	for range 6 {
		restKeys()
		g.generate("anthropic", "gone", "hello", false, key)
	}
	failed := g.mock.KeyStats(upstreamKey).Requests
	time.Sleep(300 * time.Millisecond) // a few flushes

	var doc struct {
		State     string
		Providers []struct {
			Name      string
			State     string
			Uptime24h *float64 `json:"uptime_24h"`
			Incidents []struct {
				Cause   string
				Ongoing bool
			}
			Days []struct {
				Date               string
				Requests, Failures int64
			}
		}
	}
	r := g.do("GET", "/status.json", "")
	if r.status != 200 || json.Unmarshal([]byte(r.body), &doc) != nil {
		t.Fatalf("status.json: %d %s", r.status, r.body)
	}
	if strings.Contains(r.body, upstreamKey) || strings.Contains(r.body, secondKey) || strings.Contains(r.body, "127.0.0.1") {
		t.Fatal("the status page shows a key or an upstream address")
	}
	found := 0
	for _, p := range doc.Providers {
		today := p.Days[len(p.Days)-1]
		switch p.Name {
		case "duo-openai":
			found++
			// every attempt counted: the failures and the 40 successes
			// (the first probe round is 30 s away)
			if p.State != "degraded" || today.Failures != failed || today.Requests != failed+40 || p.Uptime24h == nil ||
				fmt.Sprintf("%.4f", *p.Uptime24h) != fmt.Sprintf("%.4f", 100*float64(40)/float64(failed+40)) {
				t.Errorf("duo-openai: state %s, today %+v, uptime %v (failed %d)", p.State, today, p.Uptime24h, failed)
			}
		case "gone":
			found++
			if p.State != "down" || len(p.Incidents) != 1 || !p.Incidents[0].Ongoing || p.Incidents[0].Cause != "connect" || today.Failures < 5 {
				t.Errorf("gone: state %s, incidents %+v, today %+v", p.State, p.Incidents, today)
			}
		case "steady":
			found++
			if p.State != "operational" || today.Requests != 10 || today.Failures != 0 || p.Uptime24h == nil || *p.Uptime24h != 100 {
				t.Errorf("steady: %s, today %+v, uptime %v", p.State, today, p.Uptime24h)
			}
		}
		if len(p.Days) != 90 {
			t.Errorf("%s: %d days", p.Name, len(p.Days))
		}
	}
	if found != 3 || doc.State != "down" {
		t.Fatalf("status: %s", r.body)
	}

	b := webtest.New(t)
	dom := b.DumpDOM(gatewayAddr + "/status")
	for _, want := range []string{"-name\">duo-openai <", "-name\">steady <", `data-state="degraded"`, `data-state="down"`, "Could not connect to upstream", `data-state="operational"`, "below target", "100.00%"} {
		if !strings.Contains(dom, want) {
			t.Errorf("the rendered page lacks %q", want)
		}
	}
	dir := webtest.ScreenshotDir(t)
	b.Screenshot(gatewayAddr+"/status", dir+"/gateway-status-390x844.png", 390, 844)
	b.Screenshot(gatewayAddr+"/status", dir+"/gateway-status-1280x900.png", 1280, 900)
}

// TestMetrics: the upstream metrics are on Caddy's metrics endpoint.
func TestMetrics(t *testing.T) {
	g := startGateway(t, gatewayOptions{
		mock:  mockupstream.Config{Keys: []string{upstreamKey, secondKey}, Faults: []mockupstream.Fault{{Key: upstreamKey, Mode: "status", Status: 503}}},
		extra: twoKeyProviders(""),
	})
	_, key := g.account("1.00")
	for range 3 {
		g.generate("openai", "duo-openai", "hello", true, key)
	}
	resp, err := http.Get(adminAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	m := string(body)
	for _, want := range []string{
		`modelgate_upstream_attempts_total{provider="duo-openai",upstream_key="` + upstream.KeyID("duo-openai", secondKey) + `"} 3`,
		`modelgate_upstream_failures_total{cause="overloaded",provider="duo-openai",upstream_key="` + upstream.KeyID("duo-openai", upstreamKey) + `"} 1`,
		`modelgate_breaker_state{provider="duo-openai",upstream_key=""} 0`,
		`modelgate_upstream_ttft_seconds_count{provider="duo-openai",upstream_key="` + upstream.KeyID("duo-openai", secondKey) + `"} 3`,
		`modelgate_upstream_latency_seconds_count`,
		`modelgate_requests_total{client_format="openai.chat",model="duo-openai",outcome="ok",provider="duo-openai"} 3`,
		`modelgate_holds_outstanding_nanos 0`,
		`modelgate_ledger_commit_seconds_count`,
		`modelgate_ledger_commit_commands_bucket{le="1"}`,
		`modelgate_ledger_database_reserves_total 0`, // SQLite: holds in memory
		`modelgate_ledger_advance_holds_total 0`,
		`modelgate_ledger_lapsed_settles_total 0`,
	} {
		if !strings.Contains(m, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	if strings.Contains(m, upstreamKey) || strings.Contains(m, secondKey) {
		t.Fatal("a key is in the metrics")
	}
}

// TestMidStreamCutNoRetry: with two healthy keys, a stream the upstream
// cuts after its first events is not retried on the other key (the client
// already has bytes): the client gets its format's error event, the
// upstream saw exactly one request, and exactly one usage row bills what
// was delivered and names the key that served it.
func TestMidStreamCutNoRetry(t *testing.T) {
	g := startGateway(t, gatewayOptions{
		mock:  mockupstream.Config{Keys: []string{upstreamKey, secondKey}},
		extra: twoKeyProviders(""),
	})
	acct, key := g.account("10.00")
	errorEvent := map[string]string{
		"openai":    `data: {"error":`,
		"anthropic": "event: error\ndata: {\"type\":\"error\"",
		"gemini":    `data: {"error":`,
	}
	for _, client := range []string{"openai", "anthropic", "gemini"} {
		for _, up := range []string{"openai", "anthropic", "gemini"} {
			model := "duo-" + up
			sent := func() int64 { return g.mock.KeyStats(upstreamKey).Requests + g.mock.KeyStats(secondKey).Requests }
			before, rowsBefore := sent(), len(g.rows(acct))
			balBefore, _ := g.balance(acct)
			r := g.generate(client, model, "mock:tokens=8 mock:cut=3", true, key)
			if r.status != 200 || !strings.Contains(r.body, errorEvent[client]) {
				t.Fatalf("%s client → %s: %d %q", client, up, r.status, r.body)
			}
			if n := sent() - before; n != 1 {
				t.Errorf("%s client → %s: %d upstream requests for one cut stream, want 1 (no retry after the first byte)", client, up, n)
			}
			rows := g.rows(acct)
			if len(rows) != rowsBefore+1 {
				t.Fatalf("%s client → %s: %d new usage rows, want 1", client, up, len(rows)-rowsBefore)
			}
			row := rows[0]
			balAfter, held := g.balance(acct)
			okKey := row.UpstreamKeyID == upstream.KeyID(model, upstreamKey) || row.UpstreamKeyID == upstream.KeyID(model, secondKey)
			if row.Outcome != "upstream_cut" || row.Tokens.Output <= 0 || row.Charged <= 0 || balBefore-balAfter != row.Charged || held != 0 || !okKey {
				t.Errorf("%s client → %s: debit %s, held %s, row %+v", client, up, balBefore-balAfter, held, row)
			}
		}
	}
	g.audit()
}

// TestBreakerOnGateway: a provider's breaker, configured in the Caddyfile,
// opens after its failures (later requests get 503 without reaching the
// upstream), half-opens after its cooldown to let exactly one of several
// concurrent requests test recovery (no thundering herd), and closes when
// that request succeeds.
func TestBreakerOnGateway(t *testing.T) {
	const cooldown = 400 * time.Millisecond
	g := startGateway(t, gatewayOptions{
		mock: mockupstream.Config{Keys: []string{upstreamKey},
			Faults: []mockupstream.Fault{{Key: upstreamKey, Mode: "status", Status: 500}}},
		extra: fmt.Sprintf(`		provider brk {
			format openai
			base_url {env.MG_TEST_MOCK_URL}
			keys {env.MG_TEST_UPSTREAM_KEY}
			failure_cooldown 1ms
			health_check off
			breaker {
				failures 3
				window 1m
				cooldown %s
			}
		}
		model brk {
			route brk up-brk
			price input 0.5 output 1.5
		}
`, cooldown),
	})
	acct, key := g.account("10.00")
	sent := func() int64 { return g.mock.KeyStats(upstreamKey).Requests }

	// closed → open: three failures reach the upstream, then nothing does
	for i := 0; i < 10 && sent() < 3; i++ {
		restKeys()
		if r := g.generate("openai", "brk", "hello", false, key); r.status != 502 {
			t.Fatalf("failure %d: %d %s", i, r.status, r.body)
		}
	}
	if n := sent(); n != 3 {
		t.Fatalf("%d upstream requests before the breaker opened, want 3", n)
	}
	opened := time.Now()
	for _, client := range []string{"openai", "anthropic", "gemini"} {
		r := g.generate(client, "brk", "hello", false, key)
		if r.status != map[string]int{"openai": 503, "anthropic": 529, "gemini": 503}[client] || r.header.Get("Retry-After") == "" {
			t.Errorf("%s client, breaker open: %d (Retry-After %q) %s", client, r.status, r.header.Get("Retry-After"), r.body)
		}
	}
	if n := sent(); n != 3 {
		t.Fatalf("the open breaker let %d requests through", n-3)
	}

	// open → half-open: of 6 concurrent requests, one trial goes upstream
	// (slow, so the others arrive while it is in flight) and succeeds
	g.mock.SetFaults([]mockupstream.Fault{{Key: upstreamKey, Mode: "slow", Latency: 300 * time.Millisecond}})
	time.Sleep(time.Until(opened.Add(cooldown + 50*time.Millisecond)))
	statuses := make(chan int, 6)
	for range 6 {
		go func() { statuses <- g.generate("openai", "brk", "hello", false, key).status }()
	}
	count := map[int]int{}
	for range 6 {
		count[<-statuses]++
	}
	if count[200] != 1 || count[503] != 5 || sent() != 4 {
		t.Fatalf("half-open: statuses %v, %d upstream requests (want one 200, five 503, one trial)", count, sent()-3)
	}

	// closed again: everything flows
	g.mock.SetFaults(nil)
	for i := range 5 {
		if r := g.generate("openai", "brk", "hello", i%2 == 0, key); r.status != 200 {
			t.Fatalf("after recovery, request %d: %d %s", i, r.status, r.body)
		}
	}
	if n := len(g.rows(acct)); n != 6 {
		t.Fatalf("%d usage rows, want 6 (the trial and five after it)", n)
	}
	g.audit()
}

// TestStatusPageHistory: history written to the ledger over the past 90
// days (as earlier runs of the gateway would have) shows on the status
// page: the day bars' levels and the 7 d and 90 d uptime match it, in the
// JSON and in the page Chromium renders; the closed incident is listed.
func TestStatusPageHistory(t *testing.T) {
	g := startGateway(t, gatewayOptions{status: true, extra: `		provider history {
			format openai
			base_url {env.MG_TEST_MOCK_URL}
			keys {env.MG_TEST_UPSTREAM_KEY}
			health_check off
		}
		model history {
			route history up-history
			price input 0.5 output 1.5
		}
`})
	today := time.Now().UTC().Truncate(24 * time.Hour)
	noon := func(daysAgo int) time.Time { return today.AddDate(0, 0, -daysAgo).Add(12 * time.Hour) }
	day := func(daysAgo int, ok int64, cause int, fail int64) ledger.MinuteCount {
		m := ledger.MinuteCount{Provider: "history", Minute: noon(daysAgo), OK: ok}
		m.Fail[cause] = fail
		return m
	}
	history := []ledger.MinuteCount{
		day(2, 9990, ledger.CauseServer, 10),  // 99.9 %: at target
		day(5, 995, ledger.CauseTimeout, 5),   // 99.5 %: minor
		day(20, 970, ledger.CauseServer, 30),  // 97 %: major
		day(60, 50, ledger.CauseConnect, 50),  // 50 %: down
		day(120, 0, ledger.CauseConnect, 100), // beyond 90 days: not shown
	}
	ctx := context.Background()
	if err := g.store.RecordAvailability(ctx, history); err != nil {
		t.Fatal(err)
	}
	if _, err := g.store.OpenIncident(ctx, "history", "timeout", noon(5)); err != nil {
		t.Fatal(err)
	}
	if err := g.store.CloseIncident(ctx, "history", noon(5).Add(12*time.Minute)); err != nil {
		t.Fatal(err)
	}

	var doc struct {
		Providers []struct {
			Name      string
			State     string
			Uptime24h *float64 `json:"uptime_24h"`
			Uptime7d  *float64 `json:"uptime_7d"`
			Uptime90d *float64 `json:"uptime_90d"`
			Days      []struct {
				Date               string
				Uptime             *float64
				Requests, Failures int64
				Level              string
			}
			Incidents []struct {
				Cause           string
				End             *string
				DurationSeconds int64 `json:"duration_seconds"`
			}
		}
	}
	r := g.do("GET", "/status.json", "")
	if r.status != 200 || json.Unmarshal([]byte(r.body), &doc) != nil {
		t.Fatalf("status.json: %d %s", r.status, r.body)
	}
	pct := func(ok, total float64) string { return fmt.Sprintf("%.4f", 100*ok/total) }
	show := func(p *float64) string {
		if p == nil {
			return "none"
		}
		return fmt.Sprintf("%.4f", *p)
	}
	found := false
	for _, p := range doc.Providers {
		if p.Name != "history" {
			continue
		}
		found = true
		if p.State != "operational" || p.Uptime24h != nil ||
			show(p.Uptime7d) != pct(9990+995, 10000+1000) || show(p.Uptime90d) != pct(9990+995+970+50, 10000+1000+1000+100) {
			t.Errorf("state %s, uptime 24h %s 7d %s 90d %s", p.State, show(p.Uptime24h), show(p.Uptime7d), show(p.Uptime90d))
		}
		if len(p.Days) != 90 {
			t.Fatalf("%d days", len(p.Days))
		}
		want := map[int]string{2: "ok", 5: "minor", 20: "major", 60: "down"}
		for i, d := range p.Days {
			ago := len(p.Days) - 1 - i
			level := want[ago]
			if level == "" {
				level = "none"
			}
			if d.Level != level || d.Date != today.AddDate(0, 0, -ago).Format("2006-01-02") {
				t.Errorf("%d days ago: %+v, want level %s", ago, d, level)
			}
		}
		if d := p.Days[len(p.Days)-1-5]; d.Requests != 1000 || d.Failures != 5 || show(d.Uptime) != "99.5000" {
			t.Errorf("5 days ago: %+v", d)
		}
		if len(p.Incidents) != 1 || p.Incidents[0].Cause != "timeout" || p.Incidents[0].End == nil || p.Incidents[0].DurationSeconds != 720 {
			t.Errorf("incidents: %+v", p.Incidents)
		}
	}
	if !found {
		t.Fatalf("no history provider: %s", r.body)
	}

	b := webtest.New(t)
	dom := b.DumpDOM(gatewayAddr + "/status")
	var section string
	for _, s := range strings.Split(dom, "<section")[1:] {
		if strings.Contains(s, "-name\">history <") {
			section = s
		}
	}
	for level, n := range map[string]int{"ok": 1, "minor": 1, "major": 1, "down": 1, "none": 86} {
		if got := strings.Count(section, "bar lvl-"+level+`"`); got != n {
			t.Errorf("%d bars of level %s in the rendered page, want %d", got, level, n)
		}
	}
	for _, want := range []string{pct(9990+995, 10000+1000)[:5] + "%", pct(12005, 12100)[:5] + "%", "upstream timed out"} {
		if !strings.Contains(strings.ToLower(section), strings.ToLower(want)) {
			t.Errorf("the rendered section lacks %q", want)
		}
	}
	b.Screenshot(gatewayAddr+"/status", webtest.ScreenshotDir(t)+"/status-history-1280x900.png", 1280, 900)
}
