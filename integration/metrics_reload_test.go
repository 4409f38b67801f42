package integration

import (
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelgate/modelgate/mockupstream"
)

// TestMetricsSurviveReload: a `caddy reload` under load keeps every
// modelgate series' value (Caddy's metrics registry is per config; the
// gateway's series live with its ledger): after the reload, the settled
// requests counted on /metrics are every request settled before and
// after it, as the usage rows say, and the histograms' counts did not
// start again from zero.
func TestMetricsSurviveReload(t *testing.T) {
	g := startGateway(t, gatewayOptions{mock: mockupstream.Config{TokenDelay: time.Millisecond}})
	acct, key := g.account("10")
	for range 5 {
		if r := g.generate("openai", testModel, "before the reload", false, key); r.status != 200 {
			t.Fatalf("%d %s", r.status, r.body)
		}
	}
	before := metricSums(t)
	if before["modelgate_requests_total"] != 5 || before["modelgate_upstream_latency_seconds_count"] != 5 {
		t.Fatalf("before the reload: %v", before)
	}

	// load through the reload
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{}}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var ok atomic.Int64
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				req := overdraftRequest([]string{"openai", "anthropic", "gemini"}[(w+i)%3], testModel, i%2 == 0, key)
				resp, err := client.Do(req)
				if err != nil {
					continue // a connection the reload closed
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode == 200 {
					ok.Add(1)
				}
			}
		}()
	}
	time.Sleep(200 * time.Millisecond)
	g.reload()
	time.Sleep(300 * time.Millisecond)
	close(stop)
	wg.Wait()

	rows := len(g.rows(acct))
	after := metricSums(t)
	t.Logf("before %v; after %v; %d answered 200 under load, %d usage rows", before, after, ok.Load(), rows)
	if ok.Load() < 10 {
		t.Fatalf("only %d requests went through under load", ok.Load())
	}
	if after["modelgate_requests_total"] != float64(rows) {
		t.Fatalf("after the reload /metrics counts %v settled requests; the ledger has %d rows", after["modelgate_requests_total"], rows)
	}
	if after["modelgate_upstream_latency_seconds_count"] < float64(rows) || after["modelgate_ledger_commit_seconds_count"] < before["modelgate_ledger_commit_seconds_count"] {
		t.Fatalf("a histogram started again: before %v, after %v", before, after)
	}
}

// metricSums reads the test Caddy's /metrics and sums each modelgate
// series' samples over their labels.
func metricSums(t *testing.T) map[string]float64 {
	t.Helper()
	resp, err := http.Get(adminAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	sums := map[string]float64{}
	for _, line := range strings.Split(string(data), "\n") {
		if !strings.HasPrefix(line, "modelgate_") {
			continue
		}
		name, rest, _ := strings.Cut(line, " ")
		if i := strings.IndexByte(name, '{'); i >= 0 {
			name = name[:i]
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
		if err != nil {
			t.Fatalf("metric line %q: %v", line, err)
		}
		sums[name] += v
	}
	return sums
}
