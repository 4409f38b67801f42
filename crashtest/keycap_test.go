package crashtest

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelgate/modelgate/ledger"
	"github.com/modelgate/modelgate/mockupstream"
)

// TestThreeInstancesKeyCap: three gateway processes on one PostgreSQL
// ledger; 200 concurrent requests, spread over them, with a key capped at
// about ten requests' worth on an account that could pay for far more,
// while the account's other key sends its own. The capped key is served
// for at most its cap: its usage rows never add up to more, every 200 has
// its row, the refusals are 403s naming the key's cap, and the other key
// is served every time.
func TestThreeInstancesKeyCap(t *testing.T) {
	if testing.Short() {
		t.Skip("runs three gateway processes")
	}
	ctx := context.Background()
	dsn := postgresDSN(t)
	rurl := redisURL(t)
	dir := t.TempDir()
	bin := buildCaddy(t, dir)
	mock := httptest.NewServer(mockupstream.New(mockupstream.Config{Keys: []string{upstreamKey}, TokenDelay: time.Millisecond}))
	defer mock.Close()

	// a hold is about (100 input + 100 output) tokens at 1 per 1M = 0.0002
	credit := ledger.Money(100_000_000)
	s, acct, other := pgAccount(t, dsn, credit)
	const capAmount = ledger.Money(2_100_000)
	capped, _, err := s.CreateKeyWithLimits(ctx, acct, "capped", ledger.KeyLimits{Cap: capAmount, Period: ledger.PeriodDay})
	if err != nil {
		t.Fatal(err)
	}
	gws := startInstances(t, bin, dsn, rurl, mock.URL, 3, "5s", other)

	var wg sync.WaitGroup
	var mu sync.Mutex
	statuses := map[string]map[int]int{"capped": {}, "other": {}}
	served := map[string][]string{}
	client := &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 128}}
	start := make(chan struct{})
	send := func(i int, name, key string) {
		defer wg.Done()
		<-start
		status, out, id, err := chatAt(client, gws, i, key, "cap mock:tokens=20")
		if err != nil {
			t.Errorf("%s request %d: %v", name, i, err)
			return
		}
		mu.Lock()
		defer mu.Unlock()
		statuses[name][status]++
		switch {
		case status == 200:
			served[name] = append(served[name], id)
		case name == "other" || status != 403 || !strings.Contains(string(out), "spend cap of 0.002100000 per day"):
			t.Errorf("%s request %d: %d %.300s", name, i, status, out)
		}
	}
	for i := range 200 {
		wg.Add(1)
		go send(i, "capped", capped)
		if i%5 == 0 {
			wg.Add(1)
			go send(i, "other", other)
		}
	}
	close(start)
	wg.Wait()

	byID := checkBooks(t, s, acct, credit)
	var cappedSpent ledger.Money
	var cappedRows int
	cappedID := keyIDOf(t, s, capped)
	for _, r := range byID {
		if r.KeyID == cappedID {
			cappedSpent += r.Charged
			cappedRows++
		}
	}
	for name, ids := range served {
		for _, id := range ids {
			if _, ok := byID[id]; !ok {
				t.Errorf("%s: %s was answered 200 but has no usage row", name, id)
			}
		}
	}
	t.Logf("statuses %v; the capped key spent %s of %s in %d requests", statuses, cappedSpent, capAmount, cappedRows)
	if cappedSpent > capAmount {
		t.Fatalf("the capped key spent %s, above its cap of %s", cappedSpent, capAmount)
	}
	if cappedRows != len(served["capped"]) || cappedRows < 5 || statuses["capped"][403] == 0 {
		t.Errorf("capped key: %d rows, %d answers, statuses %v", cappedRows, len(served["capped"]), statuses["capped"])
	}
	if len(served["other"]) != 40 {
		t.Errorf("the account's other key: %d of 40 served, statuses %v", len(served["other"]), statuses["other"])
	}
}

// keyIDOf is the id of the key whose secret is secret.
func keyIDOf(t *testing.T, s *ledger.Store, secret string) string {
	t.Helper()
	p, err := s.Authenticate(secret)
	if err != nil {
		t.Fatal(err)
	}
	return p.KeyID
}
