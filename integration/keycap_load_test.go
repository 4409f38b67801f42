package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelgate/modelgate/ledger"
	"github.com/modelgate/modelgate/mockupstream"
)

// TestKeyCapUnderConcurrency: 200 concurrent requests, in the three client
// formats, streamed and not, with a key capped at about ten requests'
// worth on an account that could pay for thousands, while the account's
// other key sends its own. The capped key's usage rows never add up to
// more than its cap, every 200 has its row, the refusals are 403s naming
// the cap in the client's format, and the other key is served every time.
// Then the cap is lowered below what the key spent: its next request is
// refused, and the other key still works.
func TestKeyCapUnderConcurrency(t *testing.T) {
	g := startGateway(t, gatewayOptions{
		mock:  mockupstream.Config{TokenDelay: 2 * time.Millisecond},
		extra: dearModels})
	ctx := context.Background()
	acct, other := g.account("1")
	// a hold: ~30 input tokens at 1000 nanos and 60 output tokens at 3000
	const capAmount = ledger.Money(2_000_000)
	capped, key, err := g.store.CreateKeyWithLimits(ctx, acct, "capped", ledger.KeyLimits{Cap: capAmount, Period: ledger.PeriodMonth})
	if err != nil {
		t.Fatal(err)
	}

	client := &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 200}}
	var mu sync.Mutex
	statuses := map[string]map[int]int{key.ID: {}, "other": {}}
	var served []string
	var wg sync.WaitGroup
	start := make(chan struct{})
	send := func(i int, secret, name string) {
		defer wg.Done()
		format := []string{"openai", "anthropic", "gemini"}[i%3]
		model := "dear-" + []string{"openai", "anthropic", "gemini"}[(i/3)%3]
		stream := (i/9)%2 == 1
		req := overdraftRequest(format, model, stream, secret)
		<-start
		resp, err := client.Do(req)
		if err != nil {
			t.Errorf("%s request %d: %v", name, i, err)
			return
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		mu.Lock()
		defer mu.Unlock()
		statuses[name][resp.StatusCode]++
		switch {
		case err != nil:
			t.Errorf("%s %s stream=%v: reading: %v", format, model, stream, err)
		case resp.StatusCode == 200:
			if name == key.ID {
				served = append(served, resp.Header.Get("X-Request-Id"))
			}
		case name == "other" || resp.StatusCode != 403 || !strings.Contains(string(body), "spend cap of 0.002000000 per month"):
			t.Errorf("%s %s %s stream=%v: %d %s", name, format, model, stream, resp.StatusCode, body)
		}
	}
	for i := range 200 {
		wg.Add(1)
		go send(i, capped, key.ID)
		if i%5 == 0 {
			wg.Add(1)
			go send(i, other, "other")
		}
	}
	close(start)
	wg.Wait()

	var spent ledger.Money
	rowsOf := map[string]bool{}
	for _, r := range g.rows(acct) {
		if r.KeyID == key.ID {
			spent += r.Charged
			rowsOf[r.RequestID] = true
		}
	}
	t.Logf("statuses %v; the capped key spent %s of %s in %d requests", statuses, spent, capAmount, len(rowsOf))
	if spent > capAmount {
		t.Fatalf("the capped key spent %s, above its cap of %s", spent, capAmount)
	}
	for _, id := range served {
		if !rowsOf[id] {
			t.Errorf("%s was answered 200 but has no usage row", id)
		}
	}
	if len(rowsOf) != len(served) || len(served) < 5 || statuses[key.ID][403] == 0 {
		t.Fatalf("capped key: %d rows for %d answers, statuses %v", len(rowsOf), len(served), statuses[key.ID])
	}
	if statuses["other"][200] != 40 {
		t.Fatalf("the account's other key: statuses %v", statuses["other"])
	}
	k, err := g.store.KeyByID(ctx, key.ID)
	if err != nil || k.SpentThisPeriod(time.Now()) != spent {
		t.Fatalf("key %+v, %v: want the period's spend %s", k, err, spent)
	}

	// the key's own view: its cap, the period's spend, what is left, when it resets
	var usage struct {
		Key struct {
			Limits *struct {
				Cap, Period, SpentThisPeriod, Left string
				ResetsAt                           time.Time `json:"resets_at"`
			} `json:"limits"`
		} `json:"key"`
	}
	r := g.do("GET", "/api/usage", "", "Authorization", "Bearer "+capped)
	if err := json.Unmarshal([]byte(r.body), &usage); err != nil || usage.Key.Limits == nil {
		t.Fatalf("/api/usage: %d %s", r.status, r.body)
	}
	if l := usage.Key.Limits; l.Cap != capAmount.String() || l.Period != "month" || !strings.Contains(r.body, `"spent_this_period":"`+spent.String()+`"`) ||
		!strings.Contains(r.body, `"left":"`+(capAmount-spent).String()+`"`) || !l.ResetsAt.Equal(ledger.PeriodMonth.Next(time.Now())) {
		t.Fatalf("/api/usage of the capped key: %s", r.body)
	}
	if r := g.do("GET", "/api/usage", "", "Authorization", "Bearer "+other); strings.Contains(r.body, `"limits"`) {
		t.Fatalf("/api/usage of a key without limits: %s", r.body)
	}

	// the cap lowered below the spend: refused at once, in each format
	if _, err := g.store.SetKeyLimits(ctx, key.ID, ledger.KeyLimits{Cap: spent / 2, Period: ledger.PeriodMonth}); err != nil {
		t.Fatal(err)
	}
	for i, format := range []string{"openai", "anthropic", "gemini"} {
		resp, err := client.Do(overdraftRequest(format, "dear-openai", false, capped))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 403 || !strings.Contains(string(body), fmt.Sprintf("spend cap of %s per month", spent/2)) {
			t.Errorf("%s after the cap was lowered: %d %s", format, resp.StatusCode, body)
		}
		resp, err = client.Do(overdraftRequest(format, "dear-openai", i == 1, other))
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Errorf("%s: the other key after the cap was lowered: %d", format, resp.StatusCode)
		}
	}
	if _, held := g.balance(acct); held != 0 {
		t.Errorf("%s still held", held)
	}
	g.audit()
}
