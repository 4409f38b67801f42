package relay

import (
	"context"
	"database/sql"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx"

	"github.com/modelgate/modelgate/ledger"
	"github.com/modelgate/modelgate/upstream"
)

// TestVolumeTierMonthRollover: through the relay, on SQLite
// and on PostgreSQL, an account whose month's spend has passed a tier gets
// the tier's discount on top of the plan's, rounded down once; at midnight
// UTC on the first of the month the spend starts again from zero and so
// does the tier; a request whose hold was taken in the old month settles
// with the old month's tier, and counts in the new month.
func TestVolumeTierMonthRollover(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) {
		testVolumeTierMonthRollover(t, ledger.Options{Path: filepath.Join(t.TempDir(), "ledger.db")})
	})
	t.Run("postgres", func(t *testing.T) {
		dsn := os.Getenv("MODELGATE_TEST_POSTGRES")
		if dsn == "" {
			t.Skip("no PostgreSQL server: set MODELGATE_TEST_POSTGRES")
		}
		testVolumeTierMonthRollover(t, ledger.Options{Postgres: pgSchema(t, dsn)})
	})
}

func testVolumeTierMonthRollover(t *testing.T, opts ledger.Options) {
	var now atomic.Int64
	now.Store(time.Date(2026, 1, 31, 23, 58, 0, 0, time.UTC).UnixMilli())
	opts.Now = func() time.Time { return time.UnixMilli(now.Load()).UTC() }
	// 7 input and 5 output tokens at 1 and 2 a token: 17 nanos a request,
	// list price, so that every discount has a fraction to round
	fake := &fakeUpstream{status: 200, header: http.Header{"Content-Type": {"application/json"}},
		body: `{"id":"c1","object":"chat.completion","model":"up-m","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],"usage":{"prompt_tokens":7,"completion_tokens":5,"total_tokens":12}}`}
	svc, p := testServiceOn(t, opts, upstream.FormatOpenAI, fake, 1_000_000)
	p.Plan = &Plan{Name: "volume", DiscountBps: 1000, Tiers: []Tier{{Above: 30, Bps: 333}, {Above: 60, Bps: 1250}}}
	const list = ledger.Money(7*1 + 5*2)
	ask := func() {
		t.Helper()
		w := httptest.NewRecorder()
		svc.Generate(w, httptest.NewRequest("POST", "/v1/chat/completions",
			strings.NewReader(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`)), p, KindChat, "", "")
		if w.Code != 200 {
			t.Fatalf("%d %s", w.Code, w.Body.String())
		}
	}
	var spend ledger.Money
	check := func(i, tier int) {
		t.Helper()
		r := rows(t, svc, p.AccountID)[0]
		want := ledger.Discounted(list, 1000+tier)
		if r.TierBps != tier || r.DiscountBps != 1000 || r.Charged != want || r.Discount != list-want {
			t.Fatalf("request %d at %v: tier %d, charged %d, discount %d; want tier %d, %d, %d",
				i, opts.Now(), r.TierBps, r.Charged, r.Discount, tier, want, list-want)
		}
		spend += want
	}
	// January: 15 a request at the plan's 10% (17 × 0.9 = 15.3); 15 + 15
	// is not above 30, 45 is: 14 a request at 13.33% (14.73), until 73 is
	// above 60: 13 at 22.5% (13.175)
	for i, tier := range []int{0, 0, 0, 333, 333, 1250} {
		ask()
		check(i, tier)
	}
	if spend != 15+15+15+14+14+13 {
		t.Fatalf("January's spend %d: the test's own arithmetic is off", spend)
	}
	acct, err := svc.Store.GetAccount(context.Background(), p.AccountID)
	if err != nil || acct.MonthSpend != spend {
		t.Fatalf("January: %+v %v", acct, err)
	}

	// a request whose hold is taken in January and whose answer comes in
	// February: January's tier, counted in February
	fake.before = func() { now.Store(time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC).UnixMilli()) }
	january := spend
	ask()
	fake.before = nil
	spend = 0
	check(6, 1250)
	acct, err = svc.Store.GetAccount(context.Background(), p.AccountID)
	if err != nil || acct.MonthSpend != spend {
		t.Fatalf("the first February settle: %+v %v; want a month's spend of %d", acct, err, spend)
	}

	// February, UTC: the count and the tier start again
	for i, tier := range []int{0, 0, 333} {
		ask()
		check(i, tier)
	}
	acct, err = svc.Store.GetAccount(context.Background(), p.AccountID)
	if err != nil || acct.MonthSpend != spend || acct.Balance != 1_000_000-january-spend {
		t.Fatalf("February: %+v %v; want a month's spend of %d", acct, err, spend)
	}
	if ms, err := svc.Store.Audit(context.Background()); err != nil || len(ms) != 0 {
		t.Fatalf("audit: %v %v", ms, err)
	}
}

// pgSchema creates a schema of its own on the test server, dropped when t
// ends, and returns the DSN that uses it.
func pgSchema(t *testing.T, base string) string {
	t.Helper()
	admin, err := sql.Open("pgx", base)
	if err != nil {
		t.Fatal(err)
	}
	schema := fmt.Sprintf("t_relay_%d", time.Now().UnixNano())
	if _, err := admin.Exec(`CREATE SCHEMA ` + schema); err != nil {
		admin.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if _, err := admin.Exec(`DROP SCHEMA ` + schema + ` CASCADE`); err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
		}
		admin.Close()
	})
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}
