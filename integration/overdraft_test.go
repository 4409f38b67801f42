package integration

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelgate/modelgate/ledger"
	"github.com/modelgate/modelgate/mockupstream"
)

// TestNoOverdraftUnderConcurrency: 200 concurrent requests, in the three
// client formats, streamed and not, to upstreams of every format, on an
// account funded for about ten of them. A sampler reads the account all
// along: neither its balance nor its available money (balance − held) is
// ever below zero, and at the end every 200 has its usage row, the debits
// add up to the money spent, nothing stays held, and the ledger audits
// clean. Requests the balance cannot cover are refused (403), never served
// on credit.
func TestNoOverdraftUnderConcurrency(t *testing.T) {
	g := startGateway(t, gatewayOptions{
		mock:  mockupstream.Config{TokenDelay: 2 * time.Millisecond},
		extra: dearModels})
	// One answer: about 30 input tokens at 1000 nanos and 40 output tokens
	// at 3000: some 150,000 nanos. Ten of them:
	const credit = "0.0015"
	acct, key := g.account(credit)
	funded, _ := ledger.ParseMoney(credit)

	var minBalance, minAvailable atomic.Int64
	minBalance.Store(int64(funded))
	minAvailable.Store(int64(funded))
	samplerDone := make(chan struct{})
	stopSampler := make(chan struct{})
	samples := 0
	go func() {
		defer close(samplerDone)
		for {
			select {
			case <-stopSampler:
				return
			default:
			}
			a, err := g.store.GetAccount(context.Background(), acct)
			if err == nil {
				samples++
				if int64(a.Balance) < minBalance.Load() {
					minBalance.Store(int64(a.Balance))
				}
				if int64(a.Balance-a.Held) < minAvailable.Load() {
					minAvailable.Store(int64(a.Balance - a.Held))
				}
			}
			time.Sleep(100 * time.Microsecond)
		}
	}()

	client := &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 200}}
	var mu sync.Mutex
	statuses := map[int]int{}
	var bad []string
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range 200 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			format := []string{"openai", "anthropic", "gemini"}[i%3]
			model := "dear-" + []string{"openai", "anthropic", "gemini"}[(i/3)%3]
			stream := (i/9)%2 == 1
			req := overdraftRequest(format, model, stream, key)
			<-start
			resp, err := client.Do(req)
			if err != nil {
				mu.Lock()
				bad = append(bad, err.Error())
				mu.Unlock()
				return
			}
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			mu.Lock()
			defer mu.Unlock()
			statuses[resp.StatusCode]++
			switch {
			case err != nil:
				bad = append(bad, fmt.Sprintf("%s %s stream=%v: reading: %v", format, model, stream, err))
			case resp.StatusCode != 200 && resp.StatusCode != 403:
				bad = append(bad, fmt.Sprintf("%s %s stream=%v: %d %s", format, model, stream, resp.StatusCode, body))
			case resp.StatusCode == 403 && !strings.Contains(string(body), "balance"):
				bad = append(bad, fmt.Sprintf("%s: 403 that does not name the balance: %s", format, body))
			}
		}()
	}
	close(start)
	wg.Wait()
	close(stopSampler)
	<-samplerDone

	for _, b := range bad {
		t.Error(b)
	}
	bal, held := g.balance(acct)
	rows := g.rows(acct)
	var debits ledger.Money
	for _, r := range rows {
		debits += r.Charged
	}
	t.Logf("statuses %v; %d rows, debits %s, balance %s; lowest sampled balance %d, available %d nanos (%d samples)",
		statuses, len(rows), debits, bal, minBalance.Load(), minAvailable.Load(), samples)
	if minBalance.Load() < 0 || minAvailable.Load() < 0 || bal < 0 {
		t.Fatalf("overdraft: lowest balance %d, lowest available %d, final %s", minBalance.Load(), minAvailable.Load(), bal)
	}
	if held != 0 || bal != funded-debits || len(rows) != statuses[200] {
		t.Fatalf("balance %s held %s, debits %s of %s funded, %d rows for %d answers", bal, held, debits, funded, len(rows), statuses[200])
	}
	if statuses[200] < 3 || statuses[403] == 0 {
		t.Fatalf("statuses %v: the test did not exhaust the balance", statuses)
	}
	if samples < 20 {
		t.Fatalf("only %d samples", samples)
	}
	g.audit()
}

// dearModels are three models, one per upstream format, at 1 per 1M
// input tokens and 3 per 1M output tokens.
const dearModels = `		model dear-openai {
			route mock up-dear
			price input 1 output 3
			max_output 1000
		}
		model dear-anthropic {
			route mock-anthropic up-dear
			price input 1 output 3
			max_output 1000
		}
		model dear-gemini {
			route mock-gemini up-dear
			price input 1 output 3
			max_output 1000
		}
`

// overdraftRequest is one generation request of ~40 output tokens with an
// output cap of 60, in a client format.
func overdraftRequest(format, model string, stream bool, key string) *http.Request {
	const text = "mock:tokens=40 spend some money please"
	var req *http.Request
	switch format {
	case "openai":
		body := fmt.Sprintf(`{"model":%q,"max_tokens":60,"stream":%v,"messages":[{"role":"user","content":%q}]}`, model, stream, text)
		req, _ = http.NewRequest("POST", gatewayAddr+"/v1/chat/completions", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+key)
	case "anthropic":
		body := fmt.Sprintf(`{"model":%q,"max_tokens":60,"stream":%v,"messages":[{"role":"user","content":%q}]}`, model, stream, text)
		req, _ = http.NewRequest("POST", gatewayAddr+"/v1/messages", strings.NewReader(body))
		req.Header.Set("X-Api-Key", key)
		req.Header.Set("Anthropic-Version", "2023-06-01")
	default:
		method := "generateContent"
		if stream {
			method = "streamGenerateContent?alt=sse"
		}
		body := fmt.Sprintf(`{"contents":[{"parts":[{"text":%q}]}],"generationConfig":{"maxOutputTokens":60}}`, text)
		req, _ = http.NewRequest("POST", gatewayAddr+"/v1beta/models/"+model+":"+method, strings.NewReader(body))
		req.Header.Set("X-Goog-Api-Key", key)
	}
	req.Header.Set("Content-Type", "application/json")
	return req
}
