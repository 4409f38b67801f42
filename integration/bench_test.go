package integration

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"

	"github.com/caddyserver/caddy/v2/caddytest"

	"github.com/modelgate/modelgate/ledger"
	"github.com/modelgate/modelgate/mockupstream"
)

// BenchmarkChatPassThrough sends the same chat completion through plain
// Caddy reverse_proxy (the floor) and through modelgate (auth, hold, proxy,
// debit and usage row), in one Caddy, against the same in-process mock
// upstream. Compare the sub-benchmarks: the difference in allocs/op and
// ns/op is what modelgate adds per request (the client's and the mock's work
// is in both).
//
//	go test -run '^$' -bench ChatPassThrough -benchmem ./integration/
func BenchmarkChatPassThrough(b *testing.B) {
	mock := mockupstream.New(mockupstream.Config{Keys: []string{upstreamKey}})
	srv := httptest.NewServer(mock)
	defer srv.Close()
	db := filepath.Join(b.TempDir(), "ledger.db")
	floorPort := mustFreePort()
	b.Setenv("MG_TEST_UPSTREAM_KEY", upstreamKey)
	cfg := fmt.Sprintf(`{
	admin localhost:%d
	http_port %d
	https_port %d
	grace_period 1s
	modelgate {
		ledger sqlite %s
		provider mock {
			format openai
			base_url %s
			keys {env.MG_TEST_UPSTREAM_KEY}
		}
		model %s {
			route mock %s
			price input 0.5 output 1.5
			max_output 1000
		}
	}
}
http://localhost:%d {
	modelgate_api
}
http://localhost:%d {
	reverse_proxy %s
}
`, adminPort, gatewayPort, gatewayTLSPort, db, srv.URL, testModel, testUpstreamModel, gatewayPort, floorPort, srv.Listener.Addr())
	caddytest.NewTester(b).InitServer(cfg, "caddyfile")
	store := runningStore(b, db)
	ctx := context.Background()
	acct, err := store.CreateAccount(ctx, "", "default")
	if err != nil {
		b.Fatal(err)
	}
	if _, err := store.Credit(ctx, ledger.CreditRequest{AccountID: acct.ID, Amount: 1_000_000_000_000, Reference: "bench", Reason: "bench"}); err != nil {
		b.Fatal(err)
	}
	key, _, err := store.CreateKey(ctx, acct.ID, "bench")
	if err != nil {
		b.Fatal(err)
	}

	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	for _, stream := range []bool{false, true} {
		extra := `"max_tokens":16`
		if stream {
			extra += `,"stream":true`
		}
		body := []byte(chatBody(testModel, "Benchmark this short prompt please", extra))
		for _, target := range []struct{ name, url, key string }{
			{"floor", fmt.Sprintf("http://localhost:%d/v1/chat/completions", floorPort), upstreamKey},
			{"modelgate", gatewayAddr + "/v1/chat/completions", key},
		} {
			b.Run(fmt.Sprintf("stream=%v/%s", stream, target.name), func(b *testing.B) {
				b.ReportAllocs()
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						req, _ := http.NewRequest("POST", target.url, bytes.NewReader(body))
						req.Header.Set("Content-Type", "application/json")
						req.Header.Set("Authorization", "Bearer "+target.key)
						resp, err := client.Do(req)
						if err != nil {
							b.Fatal(err)
						}
						_, _ = io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
						if resp.StatusCode != 200 {
							b.Fatalf("status %d", resp.StatusCode)
						}
					}
				})
			})
		}
	}
}
