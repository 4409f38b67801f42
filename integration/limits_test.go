package integration

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/maxmind/mmdbwriter"
	"github.com/maxmind/mmdbwriter/mmdbtype"

	"github.com/modelgate/modelgate/mockupstream"
)

// limitPlans are plans for the rate-limit tests.
const limitPlans = `		plan tight {
			rpm 3
		}
		plan narrow {
			concurrency 1
		}
		plan burst {
			rpm 10
			concurrency 50
		}
		plan few {
			concurrency 3
		}
`

// rateLimited is what each client format gets for a 429.
var rateLimited = map[string]string{
	"openai":    `"code":"rate_limit_exceeded"`,
	"anthropic": `"type":"rate_limit_error"`,
	"gemini":    `"status":"RESOURCE_EXHAUSTED"`,
}

// TestRateLimitRPM: an account on a plan of 3 requests a minute gets 3 in
// each minute, whatever the format, with the vendors' rate-limit headers;
// the fourth is a 429 in its own format with Retry-After, before anything
// is held or sent upstream; a reload keeps the window.
func TestRateLimitRPM(t *testing.T) {
	g := startGateway(t, gatewayOptions{extra: limitPlans})
	acct, key := g.account("1.00")
	if err := g.store.SetAccountPlan(context.Background(), acct, "tight"); err != nil {
		t.Fatal(err)
	}
	for i, client := range []string{"openai", "anthropic", "gemini"} {
		r := g.generate(client, testModel, "hello", i == 1, key)
		if r.status != 200 {
			t.Fatalf("%s: %d %s", client, r.status, r.body)
		}
		limit, remaining := "X-Ratelimit-Limit-Requests", "X-Ratelimit-Remaining-Requests"
		if client == "anthropic" {
			limit, remaining = "Anthropic-Ratelimit-Requests-Limit", "Anthropic-Ratelimit-Requests-Remaining"
			if _, err := time.Parse(time.RFC3339, r.header.Get("Anthropic-Ratelimit-Requests-Reset")); err != nil {
				t.Errorf("anthropic reset header: %q", r.header.Get("Anthropic-Ratelimit-Requests-Reset"))
			}
		} else if r.header.Get("X-Ratelimit-Reset-Requests") == "" {
			t.Errorf("%s: no reset header", client)
		}
		if r.header.Get(limit) != "3" || r.header.Get(remaining) != strconv.Itoa(2-i) {
			t.Errorf("%s: limit %q remaining %q", client, r.header.Get(limit), r.header.Get(remaining))
		}
	}
	upstreamBefore := len(g.mock.Requests())
	balance, _ := g.balance(acct)
	check := func(when string) {
		t.Helper()
		for _, client := range []string{"openai", "anthropic", "gemini"} {
			for _, stream := range []bool{false, true} {
				r := g.generate(client, testModel, "hello", stream, key)
				retry, _ := strconv.Atoi(r.header.Get("Retry-After"))
				if r.status != 429 || !strings.Contains(r.body, rateLimited[client]) || retry < 1 || retry > 20 {
					t.Errorf("%s, %s stream=%v: %d Retry-After %q %s", when, client, stream, r.status, r.header.Get("Retry-After"), r.body)
				}
			}
		}
	}
	check("over the limit")
	g.reload()
	check("after a reload")
	after, held := g.balance(acct)
	if len(g.mock.Requests()) != upstreamBefore || after != balance || held != 0 || len(g.rows(acct)) != 3 {
		t.Fatalf("refused requests reached the upstream (%d) or the ledger (balance %s → %s, held %s, %d rows)",
			len(g.mock.Requests())-upstreamBefore, balance, after, held, len(g.rows(acct)))
	}
	// another account is not affected
	_, other := g.account("1.00")
	if r := g.generate("openai", testModel, "hello", false, other); r.status != 200 {
		t.Fatalf("another account: %d %s", r.status, r.body)
	}
}

// TestRateLimitBurstExact: 40 concurrent requests on a plan of 10 a minute
// get exactly 10 answers and 30 refusals, nothing else.
func TestRateLimitBurstExact(t *testing.T) {
	g := startGateway(t, gatewayOptions{extra: limitPlans})
	acct, key := g.account("1.00")
	if err := g.store.SetAccountPlan(context.Background(), acct, "burst"); err != nil {
		t.Fatal(err)
	}
	statuses := burst(t, 40, func(i int) (*http.Request, error) {
		return overdraftRequest([]string{"openai", "anthropic", "gemini"}[i%3], testModel, i%2 == 0, key), nil
	})
	if statuses[200] != 10 || statuses[429] != 30 || len(statuses) != 2 {
		t.Fatalf("statuses %v, want 10 × 200 and 30 × 429", statuses)
	}
	if n := len(g.rows(acct)); n != 10 {
		t.Fatalf("%d usage rows", n)
	}
}

// burst sends n requests at once and counts the statuses.
func burst(t *testing.T, n int, mk func(i int) (*http.Request, error)) map[int]int {
	t.Helper()
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: n}}
	var mu sync.Mutex
	statuses := map[int]int{}
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		req, err := mk(i)
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			resp, err := client.Do(req)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				statuses[-1]++
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			statuses[resp.StatusCode]++
		}()
	}
	close(start)
	wg.Wait()
	return statuses
}

// TestConcurrencySlotHeldByStream: on a plan of one request in flight, a
// stream holds the slot until its last event: another request meanwhile is
// a 429; after the stream ends, the next one goes through.
func TestConcurrencySlotHeldByStream(t *testing.T) {
	g := startGateway(t, gatewayOptions{extra: limitPlans})
	acct, key := g.account("1.00")
	if err := g.store.SetAccountPlan(context.Background(), acct, "narrow"); err != nil {
		t.Fatal(err)
	}
	for _, client := range []string{"openai", "anthropic", "gemini"} {
		req := overdraftRequest(client, testModel, true, key)
		req.Body = io.NopCloser(strings.NewReader(strings.Replace(readAllString(req.Body), "mock:tokens=40", "mock:tokens=10 mock:delay=60ms", 1)))
		req.ContentLength = -1
		resp, err := http.DefaultClient.Do(req)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("%s stream: %v %v", client, err, resp)
		}
		first := make([]byte, 1)
		if _, err := io.ReadFull(resp.Body, first); err != nil {
			t.Fatal(err)
		}
		for _, other := range []string{"openai", "anthropic", "gemini"} {
			if r := g.generate(other, testModel, "hello", false, key); r.status != 429 || !strings.Contains(r.body, rateLimited[other]) {
				t.Errorf("while a %s stream is open, %s: %d %s", client, other, r.status, r.body)
			}
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if r := g.generate("openai", testModel, "hello", false, key); r.status != 200 {
			t.Errorf("after the %s stream: %d %s", client, r.status, r.body)
		}
	}
	// a client that goes away mid-stream frees the slot too
	req := overdraftRequest("openai", testModel, true, key)
	req.Body = io.NopCloser(strings.NewReader(strings.Replace(readAllString(req.Body), "mock:tokens=40", "mock:tokens=50 mock:delay=20ms", 1)))
	req.ContentLength = -1
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	deadline := time.Now().Add(5 * time.Second)
	for {
		r := g.generate("openai", testModel, "hello", false, key)
		if r.status == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the slot of a stream whose client left was not freed: %d", r.status)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func readAllString(r io.Reader) string {
	b, _ := io.ReadAll(r)
	return string(b)
}

// writeCountryDB writes a MaxMind-format country database: 1.2.3.0/24 in
// China, 5.6.7.0/24 in Germany, and 127.0.0.0/8 (a reserved network, so
// that unproxied test traffic has a country) in China.
func writeCountryDB(t *testing.T) string {
	t.Helper()
	w, err := mmdbwriter.New(mmdbwriter.Options{DatabaseType: "Test-Country", IncludeReservedNetworks: true})
	if err != nil {
		t.Fatal(err)
	}
	for cidr, cc := range map[string]string{"1.2.3.0/24": "CN", "5.6.7.0/24": "DE", "127.0.0.0/8": "CN"} {
		_, n, err := net.ParseCIDR(cidr)
		if err != nil {
			t.Fatal(err)
		}
		rec := mmdbtype.Map{"country": mmdbtype.Map{"iso_code": mmdbtype.String(cc)}}
		if err := w.Insert(n, rec); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(t.TempDir(), "country.mmdb")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.WriteTo(f); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestRegionBlock: clients whose IP maps to a blocked country get 403 in
// their format, with nothing held, debited or sent upstream. The client IP
// is Caddy's: X-Forwarded-For counts only from a trusted proxy.
func TestRegionBlock(t *testing.T) {
	db := writeCountryDB(t)
	blocked := map[string]string{
		"openai":    `"type":"permission_error"`,
		"anthropic": `"type":"permission_error"`,
		"gemini":    `"status":"PERMISSION_DENIED"`,
	}
	t.Run("behind a trusted proxy", func(t *testing.T) {
		g := startGateway(t, gatewayOptions{
			// strict: the client IP is the rightmost untrusted address, so a
			// client cannot prepend an address of its choice
			global: "\tservers {\n\t\ttrusted_proxies static 127.0.0.0/8 ::1/128\n\t\ttrusted_proxies_strict\n\t}\n",
			extra:  fmt.Sprintf("\t\tblock_countries CN RU {\n\t\t\tgeoip_db %s\n\t\t}\n", db),
		})
		acct, key := g.account("1.00")
		for _, client := range []string{"openai", "anthropic", "gemini"} {
			for _, tc := range []struct {
				forwarded string
				want      int
			}{{"1.2.3.4", 403}, {"5.6.7.8", 200}, {"9.9.9.9, 1.2.3.4", 403}} {
				req := overdraftRequest(client, testModel, false, key)
				req.Header.Set("X-Forwarded-For", tc.forwarded)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				body := readAllString(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != tc.want || (tc.want == 403 && !strings.Contains(body, blocked[client])) {
					t.Errorf("%s from %s: %d %s", client, tc.forwarded, resp.StatusCode, body)
				}
			}
		}
		if n := len(g.rows(acct)); n != 3 {
			t.Fatalf("%d usage rows, want the 3 allowed requests", n)
		}
	})
	t.Run("forwarded header from an untrusted client", func(t *testing.T) {
		g := startGateway(t, gatewayOptions{
			mock:  mockupstream.Config{},
			extra: fmt.Sprintf("\t\tblock_countries CN {\n\t\t\tgeoip_db %s\n\t\t}\n", db),
		})
		acct, key := g.account("1.00")
		for _, client := range []string{"openai", "anthropic", "gemini"} {
			req := overdraftRequest(client, testModel, true, key)
			req.Header.Set("X-Forwarded-For", "5.6.7.8") // ignored: the peer (127.0.0.1, "CN") is not trusted
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body := readAllString(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 403 || !strings.Contains(body, blocked[client]) {
				t.Errorf("%s: %d %s", client, resp.StatusCode, body)
			}
		}
		if bal, held := g.balance(acct); bal != 1_000_000_000 || held != 0 || len(g.rows(acct)) != 0 || len(g.mock.Requests()) != 0 {
			t.Fatalf("a blocked request left a trace: balance %s held %s", bal, held)
		}
		resp, err := http.Get(adminAddr + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		if m := readAllString(resp.Body); !strings.Contains(m, `modelgate_requests_refused_total{reason="region"} 3`) {
			t.Errorf("no region metric")
		}
		resp.Body.Close()
	})
}
