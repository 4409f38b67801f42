package ledger

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelgate/modelgate/internal/walvfs"
)

func testPath(t testing.TB) string {
	return filepath.Join(t.TempDir(), "sub", "dir", "ledger.db")
}

func openAt(t testing.TB, path string, mod ...func(*Options)) *Store {
	t.Helper()
	opts := Options{Path: path, PollInterval: 20 * time.Millisecond}
	for _, m := range mod {
		m(&opts)
	}
	s, err := Open(context.Background(), opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func openTest(t testing.TB, mod ...func(*Options)) *Store {
	return openAt(t, testPath(t), mod...)
}

// rawDB opens the store's file with plain database/sql, as another process would.
func rawDB(t testing.TB, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)")
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	t.Cleanup(func() { db.Close() })
	return db
}

// queryRower is *sql.DB or *rawConn.
type queryRower interface {
	QueryRow(query string, args ...any) *sql.Row
}

func count(t testing.TB, db queryRower, query string, args ...any) int64 {
	t.Helper()
	var n int64
	if err := db.QueryRow(query, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}

func mustAccount(t testing.TB, s *Store, credit Money) Account {
	t.Helper()
	ctx := context.Background()
	a, err := s.CreateAccount(ctx, "", "basic")
	if err != nil {
		t.Fatal(err)
	}
	if credit > 0 {
		if _, err := s.Credit(ctx, CreditRequest{AccountID: a.ID, Amount: credit, Reference: "init-" + a.ID, Reason: "test"}); err != nil {
			t.Fatal(err)
		}
	}
	return a
}

func mustAudit(t testing.TB, s *Store) {
	t.Helper()
	ms, err := s.Audit(context.Background())
	if err != nil {
		t.Fatalf("Audit: %v", err)
	}
	for _, m := range ms {
		t.Errorf("audit mismatch: %s", m)
	}
}

func balanceOf(t testing.TB, s *Store, id string) Account {
	t.Helper()
	a, err := s.GetAccount(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestOpenMigrations(t *testing.T) {
	path := testPath(t)
	s := openAt(t, path)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	db := rawDB(t, path)
	if v := count(t, db, "PRAGMA user_version"); v != int64(len(migrations)) {
		t.Fatalf("user_version = %d, want %d", v, len(migrations))
	}
	if n := count(t, db, "SELECT count(*) FROM sqlite_master WHERE name = 'usage_account'"); n != 0 {
		t.Fatal("migration 2 did not drop usage_account")
	}
	if n := count(t, db, "SELECT count(*) FROM sqlite_master WHERE name = 'usage_key'"); n != 0 {
		t.Fatal("migration 11 did not drop usage_key")
	}
	if n := count(t, db, "SELECT count(*) FROM sqlite_master WHERE name IN ('usage_by_key', 'usage_rollup')"); n != 2 {
		t.Fatal("migration 11's tables missing")
	}
	var mode string
	if err := db.QueryRow("PRAGMA journal_mode").Scan(&mode); err != nil || mode != "wal" {
		t.Fatalf("journal_mode = %q, %v", mode, err)
	}
	// Reopening runs nothing twice.
	s2 := openAt(t, path)
	s2.Close()
	if v := count(t, db, "PRAGMA user_version"); v != int64(len(migrations)) {
		t.Fatalf("user_version after reopen = %d", v)
	}
	// A newer schema is refused.
	if _, err := db.Exec(fmt.Sprintf("PRAGMA user_version = %d", len(migrations)+1)); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(context.Background(), Options{Path: path}); err == nil || !strings.Contains(err.Error(), "newer") {
		t.Fatalf("Open on newer schema: %v", err)
	}
	if _, err := Open(context.Background(), Options{Path: path, Synchronous: "off"}); err == nil {
		t.Fatal("Open accepted synchronous=off")
	}
	if _, err := Open(context.Background(), Options{}); err == nil {
		t.Fatal("Open accepted an empty path")
	}
}

func TestSynchronousOption(t *testing.T) {
	for _, tt := range []struct {
		opt  string
		want int64
	}{{"", 1}, {"normal", 1}, {"FULL", 2}} {
		s := openTest(t, func(o *Options) { o.Synchronous = tt.opt })
		var v int64
		if err := sqliteOf(s).wconn.QueryRowContext(context.Background(), "PRAGMA synchronous").Scan(&v); err != nil {
			t.Fatal(err)
		}
		if v != tt.want {
			t.Errorf("synchronous %q: PRAGMA synchronous = %d, want %d", tt.opt, v, tt.want)
		}
	}
}

func TestAccountsAndCredits(t *testing.T) { backends(t, testAccountsAndCredits) }

func testAccountsAndCredits(t *testing.T, b backend) {
	ctx := context.Background()
	path := b.db(t)
	s := b.openAt(t, path)

	a, err := s.CreateAccount(ctx, "ann@example.com", "pro")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(a.ID, "acct_") || len(a.ID) != 5+16 || a.State != StateActive || a.Plan != "pro" {
		t.Fatalf("account = %+v", a)
	}
	if _, err := s.CreateAccount(ctx, "ann@example.com", ""); !errors.Is(err, ErrDuplicate) {
		t.Fatalf("duplicate email: %v", err)
	}
	for i := 0; i < 2; i++ { // empty emails are not unique
		if _, err := s.CreateAccount(ctx, "", ""); err != nil {
			t.Fatalf("empty email %d: %v", i, err)
		}
	}

	bal, err := s.Credit(ctx, CreditRequest{AccountID: a.ID, Amount: 5_000_000_000, Reference: "pay_1", Reason: "top-up"})
	if err != nil || bal != 5_000_000_000 {
		t.Fatalf("Credit = %d, %v", bal, err)
	}
	bal, err = s.Credit(ctx, CreditRequest{AccountID: a.ID, Amount: 250, Reference: "pay_2"})
	if err != nil || bal != 5_000_000_250 {
		t.Fatalf("second Credit = %d, %v", bal, err)
	}
	if _, err := s.Credit(ctx, CreditRequest{AccountID: a.ID, Amount: 5_000_000_000, Reference: "pay_1"}); !errors.Is(err, ErrDuplicate) {
		t.Fatalf("duplicate reference: %v", err)
	}
	if _, err := s.Credit(ctx, CreditRequest{AccountID: "acct_nope", Amount: 1, Reference: "pay_x"}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown account: %v", err)
	}
	if _, err := s.Credit(ctx, CreditRequest{AccountID: a.ID, Amount: 0, Reference: "pay_0"}); err == nil {
		t.Fatal("zero credit accepted")
	}
	if _, err := s.Credit(ctx, CreditRequest{AccountID: a.ID, Amount: -5, Reference: "pay_neg"}); err == nil {
		t.Fatal("negative credit accepted")
	}
	if _, err := s.Credit(ctx, CreditRequest{AccountID: a.ID, Amount: 5}); err == nil {
		t.Fatal("credit without reference accepted")
	}
	// The reference freed by the failed unknown-account credit is still usable.
	if _, err := s.Credit(ctx, CreditRequest{AccountID: a.ID, Amount: 1, Reference: "pay_x"}); err != nil {
		t.Fatalf("pay_x after failed attempt: %v", err)
	}

	got := balanceOf(t, s, a.ID)
	if got.Balance != 5_000_000_251 || got.Held != 0 || got.Email != "ann@example.com" || got.CreatedAt.IsZero() {
		t.Fatalf("GetAccount = %+v", got)
	}
	if _, err := s.GetAccount(ctx, "acct_nope"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("GetAccount unknown: %v", err)
	}

	if err := s.SetAccountState(ctx, a.ID, StateSuspended); err != nil {
		t.Fatal(err)
	}
	if err := s.SetAccountPlan(ctx, a.ID, "enterprise"); err != nil {
		t.Fatal(err)
	}
	st, plan, err := s.AccountState(a.ID)
	if err != nil || st != StateSuspended || plan != "enterprise" {
		t.Fatalf("AccountState = %q %q %v", st, plan, err)
	}
	if err := s.SetAccountState(ctx, a.ID, StateActive); err != nil {
		t.Fatal(err)
	}
	if st, _, _ := s.AccountState(a.ID); st != StateActive { // cached now: updated in memory
		t.Fatalf("state after resume = %q", st)
	}
	if err := s.SetAccountState(ctx, "acct_nope", StateActive); !errors.Is(err, ErrNotFound) {
		t.Fatalf("SetAccountState unknown: %v", err)
	}
	if err := s.SetAccountState(ctx, a.ID, "frozen"); err == nil {
		t.Fatal("invalid state accepted")
	}
	if err := s.SetAccountPlan(ctx, "acct_nope", "x"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("SetAccountPlan unknown: %v", err)
	}
	if _, _, err := s.AccountState("acct_nope"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("AccountState unknown: %v", err)
	}

	db := b.raw(t, path)
	if n := count(t, db, "SELECT count(*) FROM credits WHERE account_id = ?", a.ID); n != 3 {
		t.Fatalf("credit rows = %d, want 3", n)
	}
	mustAudit(t, s)
}

func TestCreditSameReferenceConcurrently(t *testing.T) {
	backends(t, testCreditSameReferenceConcurrently)
}

func testCreditSameReferenceConcurrently(t *testing.T, b backend) {
	ctx := context.Background()
	path := b.db(t)
	s := b.openAt(t, path)
	a := mustAccount(t, s, 0)
	var ok, dup atomic.Int32
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := 0; i < 20; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			_, err := s.Credit(ctx, CreditRequest{AccountID: a.ID, Amount: 7_000_000_000, Reference: "cs_test_abc", Reason: "stripe"})
			switch {
			case err == nil:
				ok.Add(1)
			case errors.Is(err, ErrDuplicate):
				dup.Add(1)
			default:
				t.Errorf("Credit: %v", err)
			}
		}()
	}
	close(start)
	wg.Wait()
	if ok.Load() != 1 || dup.Load() != 19 {
		t.Fatalf("ok=%d dup=%d, want 1 and 19", ok.Load(), dup.Load())
	}
	if b := balanceOf(t, s, a.ID).Balance; b != 7_000_000_000 {
		t.Fatalf("balance = %d", b)
	}
	if n := count(t, b.raw(t, path), "SELECT count(*) FROM credits WHERE reference = 'cs_test_abc'"); n != 1 {
		t.Fatalf("credit rows = %d", n)
	}
	mustAudit(t, s)
}

func TestKeys(t *testing.T) { backends(t, testKeys) }

func testKeys(t *testing.T, b backend) {
	ctx := context.Background()
	path := b.db(t)
	s := b.openAt(t, path)
	a := mustAccount(t, s, 0)

	secret, k, err := s.CreateKey(ctx, a.ID, "laptop")
	if err != nil {
		t.Fatal(err)
	}
	if !WellFormedKey(secret) || len(secret) != 3+43 || !strings.HasPrefix(secret, "mg-") {
		t.Fatalf("secret shape: len %d", len(secret))
	}
	wantPrefix := "mg-" + secret[3:7] + "…" + secret[len(secret)-4:]
	if k.Prefix != wantPrefix || !strings.HasPrefix(k.ID, "key_") || len(k.ID) != 4+16 || k.AccountID != a.ID || k.Label != "laptop" {
		t.Fatalf("key = %+v", k)
	}
	if strings.Contains(k.Prefix, secret[7:len(secret)-4]) {
		t.Fatal("prefix reveals the middle of the key")
	}

	p, err := s.Authenticate(secret)
	if err != nil || p != (Principal{KeyID: k.ID, AccountID: a.ID, Label: "laptop", Prefix: wantPrefix}) {
		t.Fatalf("Authenticate = %+v, %v", p, err)
	}

	// Only the hash is stored.
	db := b.raw(t, path)
	sum := hashKey(secret)
	if n := count(t, db, "SELECT count(*) FROM keys WHERE hash = ?", sum[:]); n != 1 {
		t.Fatalf("rows with the key's hash = %d", n)
	}
	rows, err := db.Query("SELECT id, account_id, label, prefix, hash FROM keys")
	if err != nil {
		t.Fatal(err)
	}
	var dump strings.Builder
	for rows.Next() {
		var id, acct, label, prefix string
		var hash []byte
		if err := rows.Scan(&id, &acct, &label, &prefix, &hash); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&dump, "%s%s%s%s%x%s\n", id, acct, label, prefix, hash, hash)
	}
	rows.Close()
	if strings.Contains(dump.String(), secret[3:]) {
		t.Fatal("the secret is stored")
	}

	for _, bad := range []string{"", "mg-", "mg-short", secret[:len(secret)-4], "sk-" + secret[3:], secret + "!",
		"mg-" + strings.Repeat("a", 198), secret[:20] + " " + secret[21:], "MG-" + secret[3:]} {
		if _, err := s.Authenticate(bad); !errors.Is(err, ErrUnauthorized) {
			t.Errorf("Authenticate(malformed len %d) = %v", len(bad), err)
		}
	}
	unknown := "mg-" + strings.Repeat("Z", 43)
	for i := 0; i < 3; i++ { // the second and third hit the negative cache
		if _, err := s.Authenticate(unknown); !errors.Is(err, ErrUnauthorized) {
			t.Fatalf("unknown key: %v", err)
		}
	}

	secret2, k2, err := s.CreateKey(ctx, a.ID, "ci")
	if err != nil {
		t.Fatal(err)
	}
	if secret2 == secret || k2.ID == k.ID {
		t.Fatal("keys are not unique")
	}
	if err := s.DeleteKey(ctx, k.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Authenticate(secret); !errors.Is(err, ErrUnauthorized) {
		t.Fatalf("deleted key accepted: %v", err)
	}
	if _, err := s.Authenticate(secret2); err != nil {
		t.Fatalf("other key refused: %v", err)
	}
	if err := s.DeleteKey(ctx, k.ID); err != nil {
		t.Fatalf("second DeleteKey: %v", err)
	}
	if err := s.DeleteKey(ctx, "key_nope"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("DeleteKey unknown: %v", err)
	}
	if _, _, err := s.CreateKey(ctx, "acct_nope", "x"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("CreateKey unknown account: %v", err)
	}

	keys, err := s.ListKeys(ctx, a.ID)
	if err != nil || len(keys) != 2 {
		t.Fatalf("ListKeys = %d keys, %v", len(keys), err)
	}
	if keys[0].ID != k.ID || !keys[0].Deleted || keys[0].DeletedAt.IsZero() || keys[1].ID != k2.ID || keys[1].Deleted {
		t.Fatalf("ListKeys = %+v", keys)
	}
	if _, err := s.ListKeys(ctx, "acct_nope"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("ListKeys unknown: %v", err)
	}
	got, err := s.KeyByID(ctx, k2.ID)
	if err != nil || got.Label != "ci" || got.Prefix != k2.Prefix || got.Deleted {
		t.Fatalf("KeyByID = %+v, %v", got, err)
	}
	if _, err := s.KeyByID(ctx, "key_nope"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("KeyByID unknown: %v", err)
	}

	// Reopen: the live key is loaded at Open, the deleted one stays refused.
	s.Close()
	s = b.openAt(t, path)
	if _, err := s.Authenticate(secret2); err != nil {
		t.Fatalf("after reopen: %v", err)
	}
	if _, err := s.Authenticate(secret); !errors.Is(err, ErrUnauthorized) {
		t.Fatalf("deleted key after reopen: %v", err)
	}
}

func TestWellFormedKey(t *testing.T) {
	tests := []struct {
		in   string
		want bool
	}{
		{"mg-" + strings.Repeat("a", 40), true},
		{"mg-" + strings.Repeat("a", 39), false},
		{"mg-" + strings.Repeat("Z9", 98) + "x", true}, // 200 bytes
		{"mg-" + strings.Repeat("Z9", 98) + "xy", false},
		{"mg-" + strings.Repeat("a", 39) + "-", false},
		{"mg-" + strings.Repeat("a", 39) + "é", false},
		{"mg_" + strings.Repeat("a", 40), false},
		{"", false},
	}
	for _, tt := range tests {
		if got := WellFormedKey(tt.in); got != tt.want {
			t.Errorf("WellFormedKey(len %d %q…) = %v, want %v", len(tt.in), tt.in[:min(len(tt.in), 8)], got, tt.want)
		}
	}
	// Generated keys use every base62 character and nothing else.
	seen := map[byte]bool{}
	for i := 0; i < 200; i++ {
		s, err := newSecret()
		if err != nil {
			t.Fatal(err)
		}
		if !WellFormedKey(s) || len(s) != 46 {
			t.Fatalf("newSecret gave a malformed key of length %d", len(s))
		}
		for j := 3; j < len(s); j++ {
			seen[s[j]] = true
		}
	}
	if len(seen) != 62 {
		t.Fatalf("saw %d distinct characters, want 62", len(seen))
	}
}

func TestReserveRules(t *testing.T) { backends(t, testReserveRules) }

func testReserveRules(t *testing.T, b backend) {
	ctx := context.Background()
	s := b.open(t)
	a := mustAccount(t, s, 1000)

	if _, err := s.Reserve("acct_nope", 1, 2); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown account: %v", err)
	}
	if _, err := s.Reserve(a.ID, 10, 5); !errors.Is(err, ErrInsufficientFunds) {
		t.Fatalf("min > max: %v", err)
	}
	h1, err := s.Reserve(a.ID, 100, 600)
	if err != nil || h1.Amount() != 600 || h1.AccountID() != a.ID {
		t.Fatalf("h1 = %v, %v", h1, err)
	}
	// 400 left: a request wanting up to 32k with min 100 gets the 400.
	h2, err := s.Reserve(a.ID, 100, 32000)
	if err != nil || h2.Amount() != 400 {
		t.Fatalf("h2 = %v, %v", h2, err)
	}
	if _, err := s.Reserve(a.ID, 0, 10); !errors.Is(err, ErrInsufficientFunds) {
		t.Fatalf("nothing available: %v", err)
	}
	if s.Outstanding() != 1000 || balanceOf(t, s, a.ID).Held != 1000 {
		t.Fatalf("outstanding = %d", s.Outstanding())
	}
	h2.Release()
	if _, err := s.Reserve(a.ID, 401, 500); !errors.Is(err, ErrInsufficientFunds) {
		t.Fatalf("below min: %v", err)
	}
	h3, err := s.Reserve(a.ID, 400, 500)
	if err != nil || h3.Amount() != 400 {
		t.Fatalf("h3 = %v, %v", h3, err)
	}
	h1.Release()
	h3.Release()
	if s.Outstanding() != 0 {
		t.Fatalf("outstanding = %d", s.Outstanding())
	}
	// Suspended accounts are not refused by Reserve.
	if err := s.SetAccountState(ctx, a.ID, StateSuspended); err != nil {
		t.Fatal(err)
	}
	h4, err := s.Reserve(a.ID, 1, 1)
	if err != nil {
		t.Fatalf("suspended: %v", err)
	}
	h4.Release()
}

func usage(reqID, keyID string, cost Money) *UsageRecord {
	return &UsageRecord{
		RequestID: reqID, KeyID: keyID, Model: "gpt-4o-mini", Provider: "openai", UpstreamModel: "gpt-4o-mini-2024",
		UpstreamKeyID: "up1", ClientFormat: "chat", Stream: true,
		Tokens:      Tokens{Input: 100, Output: 20, CacheRead: 10, CacheWrite: 5, Reasoning: 3},
		Cost:        cost,
		DiscountBps: 1500, UsageSource: "upstream", Status: 200, Outcome: "ok",
		Latency: 1500 * time.Millisecond, TTFT: 250 * time.Millisecond,
	}
}

func TestSettleExactlyOnce(t *testing.T) { backends(t, testSettleExactlyOnce) }

func testSettleExactlyOnce(t *testing.T, b backend) {
	ctx := context.Background()
	path := b.db(t)
	s := b.openAt(t, path)
	a := mustAccount(t, s, 1000)
	_, k, err := s.CreateKey(ctx, a.ID, "k")
	if err != nil {
		t.Fatal(err)
	}

	h, err := s.Reserve(a.ID, 100, 300)
	if err != nil {
		t.Fatal(err)
	}
	rec := usage("req_1", k.ID, 120)
	if err := h.Settle(ctx, rec); err != nil {
		t.Fatal(err)
	}
	if rec.Charged != 120 || rec.OverHold || rec.Hold != 300 || rec.AccountID != a.ID || rec.CreatedAt.IsZero() {
		t.Fatalf("rec = %+v", rec)
	}
	if err := h.Settle(ctx, usage("req_1b", k.ID, 120)); !errors.Is(err, ErrAlreadySettled) {
		t.Fatalf("second Settle: %v", err)
	}
	h.Release() // no-op after Settle
	if got := balanceOf(t, s, a.ID); got.Balance != 880 || got.Held != 0 {
		t.Fatalf("after settle: %+v", got)
	}

	// Release gives the money back to available; Settle after Release errors.
	h2, err := s.Reserve(a.ID, 880, 880)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Reserve(a.ID, 1, 1); !errors.Is(err, ErrInsufficientFunds) {
		t.Fatalf("while held: %v", err)
	}
	h2.Release()
	h2.Release()
	if err := h2.Settle(ctx, usage("req_2", k.ID, 10)); !errors.Is(err, ErrAlreadySettled) {
		t.Fatalf("Settle after Release: %v", err)
	}
	h3, err := s.Reserve(a.ID, 880, 880)
	if err != nil {
		t.Fatalf("after release: %v", err)
	}
	// A duplicate request id is refused and debits nothing; the hold is given back.
	if err := h3.Settle(ctx, usage("req_1", k.ID, 10)); !errors.Is(err, ErrDuplicate) {
		t.Fatalf("duplicate request id: %v", err)
	}
	if got := balanceOf(t, s, a.ID); got.Balance != 880 || got.Held != 0 || s.Outstanding() != 0 {
		t.Fatalf("after duplicate: %+v outstanding %d", got, s.Outstanding())
	}
	// Zero cost settles too (a row, no debit).
	h4, _ := s.Reserve(a.ID, 1, 10)
	if err := h4.Settle(ctx, usage("req_4", k.ID, 0)); err != nil {
		t.Fatal(err)
	}
	// Mismatched account is refused.
	other := mustAccount(t, s, 10)
	h5, _ := s.Reserve(other.ID, 1, 10)
	r5 := usage("req_5", k.ID, 5)
	r5.AccountID = a.ID
	if err := h5.Settle(ctx, r5); err == nil {
		t.Fatal("settle on another account accepted")
	}
	if s.Outstanding() != 0 {
		t.Fatalf("outstanding = %d", s.Outstanding())
	}

	db := b.raw(t, path)
	if n := count(t, db, "SELECT count(*) FROM usage"); n != 2 {
		t.Fatalf("usage rows = %d, want 2", n)
	}
	ku, err := s.KeyUsage(ctx, k.ID)
	if err != nil || ku.Requests != 2 || ku.InputTokens != 200 || ku.OutputTokens != 40 || ku.Spent != 120 || ku.LastUsedAt.IsZero() {
		t.Fatalf("KeyUsage = %+v, %v", ku, err)
	}
	if _, err := s.KeyUsage(ctx, "key_nope"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("KeyUsage unknown: %v", err)
	}
	mustAudit(t, s)
}

// TestDuplicatesInABatch: settles committed in one batch, several usage
// rows per statement, where some request ids are taken (by an earlier
// settle, or twice in the batch): exactly those settles fail with
// ErrDuplicate and debit nothing, the others are charged, one row each.
func TestDuplicatesInABatch(t *testing.T) { backends(t, testDuplicatesInABatch) }

func testDuplicatesInABatch(t *testing.T, b backend) {
	ctx := context.Background()
	var hold atomic.Bool
	release := make(chan struct{})
	batches := make(chan int, 16)
	path := b.db(t)
	s := b.openAt(t, path, func(o *Options) {
		o.writerOnly = true // the queue is what this test counts
		o.OnCommit = func(n int, _ time.Duration) {
			batches <- n
			if hold.CompareAndSwap(true, false) {
				<-release // the writer waits here while the next batch queues
			}
		}
	})
	releaseOnce := sync.OnceFunc(func() { close(release) })
	t.Cleanup(releaseOnce) // a failure must not leave Close waiting on the held commit
	a := mustAccount(t, s, 100_000)
	_, k, err := s.CreateKey(ctx, a.ID, "k")
	if err != nil {
		t.Fatal(err)
	}
	for len(batches) > 0 {
		<-batches
	}
	reserve := func() *Hold {
		t.Helper()
		h, err := s.Reserve(a.ID, 1000, 1000)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	for _, id := range []string{"old-1", "old-2"} {
		if err := reserve().Settle(ctx, usage(id, k.ID, 7)); err != nil {
			t.Fatal(err)
		}
		<-batches
	}

	// queued in this order behind a filler's commit: two chunks of four rows
	ids := []string{"new-1", "old-1", "twin", "new-2", "twin", "old-2", "new-3", "new-4"}
	dup := map[int]bool{1: true, 4: true, 5: true}
	holds := make([]*Hold, len(ids))
	for i := range holds {
		holds[i] = reserve()
	}
	errs := make([]error, len(ids))
	var wg sync.WaitGroup
	hold.Store(true)
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := reserve().Settle(ctx, usage("filler", k.ID, 1)); err != nil {
			t.Error(err)
		}
	}()
	if n := <-batches; n != 1 {
		t.Fatalf("the filler's batch had %d commands", n)
	}
	for i, id := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = holds[i].Settle(ctx, usage(id, k.ID, Money(10*(i+1))))
		}()
		for deadline := time.Now().Add(5 * time.Second); len(s.cmds) < i+1; {
			if time.Now().After(deadline) {
				t.Fatalf("%d settles queued, want %d", len(s.cmds), i+1)
			}
			time.Sleep(time.Millisecond)
		}
	}
	releaseOnce()
	wg.Wait()
	if n := <-batches; n != len(ids) {
		t.Fatalf("the settles went in a batch of %d, want %d", n, len(ids))
	}
	var charged Money
	for i, err := range errs {
		if dup[i] != errors.Is(err, ErrDuplicate) {
			t.Errorf("settle %d (%s): %v", i, ids[i], err)
		}
		if err == nil {
			charged += Money(10 * (i + 1))
		}
	}
	if want := Money(100_000 - 7 - 7 - 1 - charged); balanceOf(t, s, a.ID).Balance != want {
		t.Fatalf("balance %d, want %d", balanceOf(t, s, a.ID).Balance, want)
	}
	if got := balanceOf(t, s, a.ID).Held; got != 0 || s.Outstanding() != 0 {
		t.Fatalf("held %d, outstanding %d", got, s.Outstanding())
	}
	db := b.raw(t, path)
	if n := count(t, db, "SELECT count(*) FROM usage"); n != 8 {
		t.Fatalf("usage rows = %d, want 8", n)
	}
	if n := count(t, db, "SELECT count(*) FROM usage WHERE request_id = 'twin' AND charged = 30"); n != 1 {
		t.Fatalf("the twin's row is not the first's (%d rows)", n)
	}
	mustAudit(t, s)
}

func TestOverHold(t *testing.T) { backends(t, testOverHold) }

func testOverHold(t *testing.T, b backend) {
	ctx := context.Background()
	s := b.open(t)
	a := mustAccount(t, s, 1000)

	// Another request holds 500; ours holds 100 but costs 450: the extra 350 is available.
	other, _ := s.Reserve(a.ID, 500, 500)
	h, _ := s.Reserve(a.ID, 100, 100)
	rec := usage("r1", "", 450)
	if err := h.Settle(ctx, rec); err != nil {
		t.Fatal(err)
	}
	if rec.Charged != 450 || !rec.OverHold || rec.Hold != 450 {
		t.Fatalf("rec: charged %d over %v hold %d", rec.Charged, rec.OverHold, rec.Hold)
	}
	if got := balanceOf(t, s, a.ID); got.Balance != 550 || got.Held != 500 {
		t.Fatalf("after over-hold: %+v", got)
	}

	// Now 50 is available beyond the other hold; a cost of 1000 on a 10 hold takes 60 in all.
	h2, _ := s.Reserve(a.ID, 10, 10)
	rec2 := usage("r2", "", 1000)
	if err := h2.Settle(ctx, rec2); err != nil {
		t.Fatal(err)
	}
	if rec2.Charged != 50 || !rec2.OverHold || rec2.Uncollected() != 950 || rec.Uncollected() != 0 {
		t.Fatalf("rec2: charged %d over %v uncollected %d", rec2.Charged, rec2.OverHold, rec2.Uncollected())
	}
	if got := balanceOf(t, s, a.ID); got.Balance != 500 || got.Held != 500 {
		t.Fatalf("after clamp: %+v", got)
	}
	// The other hold's money is intact and can be fully settled.
	if err := other.Settle(ctx, usage("r3", "", 500)); err != nil {
		t.Fatal(err)
	}
	if got := balanceOf(t, s, a.ID); got.Balance != 0 || got.Held != 0 {
		t.Fatalf("end: %+v", got)
	}
	rows, err := s.UsageRows(ctx, UsageFilter{AccountID: a.ID})
	if err != nil || len(rows) != 3 {
		t.Fatalf("UsageRows = %d, %v", len(rows), err)
	}
	over, uncollected := 0, Money(0)
	for _, r := range rows {
		if r.OverHold {
			over++
		}
		uncollected += r.Uncollected()
	}
	// the row keeps what could not be charged (cost − charged)
	if over != 2 || uncollected != 950 {
		t.Fatalf("over-hold rows = %d, want 2; uncollected %d, want 950", over, uncollected)
	}
	mustAudit(t, s)
}

func TestRaceNoOverdraft(t *testing.T) { backends(t, testRaceNoOverdraft) }

func testRaceNoOverdraft(t *testing.T, b backend) {
	ctx := context.Background()
	path := b.db(t)
	s := b.openAt(t, path)
	const credit = 10_000 // about 10 holds of up to 1000
	a := mustAccount(t, s, credit)
	_, k, err := s.CreateKey(ctx, a.ID, "k")
	if err != nil {
		t.Fatal(err)
	}

	stop := make(chan struct{})
	var sampler sync.WaitGroup
	var minSeen atomic.Int64
	minSeen.Store(credit)
	var samples atomic.Int64
	sampler.Add(1)
	go func() {
		defer sampler.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			got, err := s.GetAccount(ctx, a.ID)
			if err != nil {
				t.Error(err)
				return
			}
			samples.Add(1)
			if int64(got.Balance) < minSeen.Load() {
				minSeen.Store(int64(got.Balance))
			}
			if got.Balance < 0 || got.Held < 0 || got.Held > credit {
				t.Errorf("sample: %+v", got)
			}
		}
	}()

	var wg sync.WaitGroup
	var charged, settled, refused atomic.Int64
	var idsMu sync.Mutex
	var settledIDs []string
	for i := 0; i < 100; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			for j := 0; j < 5; j++ {
				h, err := s.Reserve(a.ID, 200, 1000)
				if errors.Is(err, ErrInsufficientFunds) {
					refused.Add(1)
					time.Sleep(time.Millisecond)
					continue
				}
				if err != nil {
					t.Error(err)
					return
				}
				cost := Money(100 + (i*7+j*13)%100)
				if cost > h.Amount() {
					cost = h.Amount()
				}
				rec := usage(fmt.Sprintf("req-%d-%d", i, j), k.ID, cost)
				if err := h.Settle(ctx, rec); err != nil {
					t.Error(err)
					return
				}
				if rec.OverHold || rec.Charged != cost {
					t.Errorf("rec %+v", rec)
				}
				charged.Add(int64(rec.Charged))
				settled.Add(1)
				idsMu.Lock()
				settledIDs = append(settledIDs, rec.RequestID)
				idsMu.Unlock()
			}
		}(i)
	}
	wg.Wait()
	close(stop)
	sampler.Wait()

	got := balanceOf(t, s, a.ID)
	if int64(got.Balance) != credit-charged.Load() || got.Balance < 0 || got.Held != 0 {
		t.Fatalf("final %+v, want balance %d", got, credit-charged.Load())
	}
	if s.Outstanding() != 0 {
		t.Fatalf("outstanding = %d", s.Outstanding())
	}
	db := b.raw(t, path)
	if n := count(t, db, "SELECT count(*) FROM usage"); n != settled.Load() {
		t.Fatalf("usage rows = %d, settles = %d", n, settled.Load())
	}
	for _, id := range settledIDs {
		if n := count(t, db, "SELECT count(*) FROM usage WHERE request_id = ?", id); n != 1 {
			t.Fatalf("request %s has %d usage rows", id, n)
		}
	}
	if n := count(t, db, "SELECT coalesce(sum(charged), 0) FROM usage"); n != charged.Load() {
		t.Fatalf("Σcharged rows = %d, callers saw %d", n, charged.Load())
	}
	ku, _ := s.KeyUsage(ctx, k.ID)
	if ku.Requests != settled.Load() || int64(ku.Spent) != charged.Load() {
		t.Fatalf("key usage %+v", ku)
	}
	mustAudit(t, s)
	t.Logf("settled %d, refused %d, charged %d, balance samples %d (min %d)", settled.Load(), refused.Load(), charged.Load(), samples.Load(), minSeen.Load())
	if settled.Load() < 10 {
		t.Fatalf("only %d settles", settled.Load())
	}
}

func TestRestartDurability(t *testing.T) { backends(t, testRestartDurability) }

func testRestartDurability(t *testing.T, b backend) {
	ctx := context.Background()
	path := b.db(t)
	s := b.openAt(t, path)
	a := mustAccount(t, s, 1000)
	secret, k, _ := s.CreateKey(ctx, a.ID, "k")
	for i := 0; i < 3; i++ {
		h, err := s.Reserve(a.ID, 10, 100)
		if err != nil {
			t.Fatal(err)
		}
		if err := h.Settle(ctx, usage(fmt.Sprintf("r%d", i), k.ID, 70)); err != nil {
			t.Fatal(err)
		}
	}
	open, _ := s.Reserve(a.ID, 300, 300) // never settled: dropped by the restart
	_ = open
	if got := balanceOf(t, s, a.ID); got.Balance != 790 || got.Held != 300 {
		t.Fatalf("before close: %+v", got)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := open.Settle(ctx, usage("late", k.ID, 1)); !errors.Is(err, ErrClosed) {
		t.Fatalf("Settle after Close: %v", err)
	}
	if _, err := s.CreateAccount(ctx, "", ""); !errors.Is(err, ErrClosed) {
		t.Fatalf("write after Close: %v", err)
	}
	if _, err := s.GetAccount(ctx, a.ID); !errors.Is(err, ErrClosed) {
		t.Fatalf("read after Close: %v", err)
	}

	s2 := b.openAt(t, path)
	got := balanceOf(t, s2, a.ID)
	if got.Balance != 790 || got.Held != 0 {
		t.Fatalf("after reopen: %+v", got)
	}
	ku, err := s2.KeyUsage(ctx, k.ID)
	if err != nil || ku.Requests != 3 || ku.Spent != 210 || ku.InputTokens != 300 || ku.OutputTokens != 60 {
		t.Fatalf("key usage after reopen: %+v %v", ku, err)
	}
	rows, err := s2.UsageRows(ctx, UsageFilter{KeyID: k.ID})
	if err != nil || len(rows) != 3 {
		t.Fatalf("rows after reopen: %d %v", len(rows), err)
	}
	if _, err := s2.Authenticate(secret); err != nil {
		t.Fatal(err)
	}
	h, err := s2.Reserve(a.ID, 790, 790)
	if err != nil {
		t.Fatalf("full balance available after restart: %v", err)
	}
	h.Release()
	mustAudit(t, s2)
}

func TestUsageRowsAndRollup(t *testing.T) { backends(t, testUsageRowsAndRollup) }

func testUsageRowsAndRollup(t *testing.T, b backend) {
	ctx := context.Background()
	s := b.open(t)
	a := mustAccount(t, s, 1_000_000)
	_, k1, _ := s.CreateKey(ctx, a.ID, "one")
	_, k2, _ := s.CreateKey(ctx, a.ID, "two")
	day1 := time.Date(2025, 3, 1, 23, 59, 59, 0, time.UTC)
	day2 := day1.Add(2 * time.Second)
	settle := func(id, key, model string, at time.Time, cost Money) {
		t.Helper()
		h, err := s.Reserve(a.ID, 1, 1000)
		if err != nil {
			t.Fatal(err)
		}
		r := usage(id, key, cost)
		r.Model, r.CreatedAt = model, at
		if err := h.Settle(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	settle("a", k1.ID, "m1", day1, 10)
	settle("b", k1.ID, "m1", day1, 20)
	settle("c", k1.ID, "m2", day1, 30)
	settle("d", k1.ID, "m1", day2, 40)
	settle("e", k2.ID, "m1", day2, 50)

	wantRow := UsageRecord{
		RequestID: "e", AccountID: a.ID, KeyID: k2.ID, Model: "m1", Provider: "openai", UpstreamModel: "gpt-4o-mini-2024",
		UpstreamKeyID: "up1", ClientFormat: "chat", Stream: true,
		Tokens: Tokens{Input: 100, Output: 20, CacheRead: 10, CacheWrite: 5, Reasoning: 3},
		Cost:   50, DiscountBps: 1500, UsageSource: "upstream", Status: 200, Outcome: "ok",
		Latency: 1500 * time.Millisecond, TTFT: 250 * time.Millisecond, CreatedAt: day2,
		Hold: 1000, Charged: 50,
	}
	rows, err := s.UsageRows(ctx, UsageFilter{AccountID: a.ID})
	if err != nil || len(rows) != 5 {
		t.Fatalf("UsageRows = %d, %v", len(rows), err)
	}
	if rows[0] != wantRow {
		t.Fatalf("newest row\n got %+v\nwant %+v", rows[0], wantRow)
	}
	var order []string
	for _, r := range rows {
		order = append(order, r.RequestID)
	}
	if strings.Join(order, "") != "edcba" {
		t.Fatalf("order = %v", order)
	}
	if rows, _ := s.UsageRows(ctx, UsageFilter{KeyID: k1.ID, Limit: 2}); len(rows) != 2 || rows[0].RequestID != "d" {
		t.Fatalf("key filter with limit: %+v", rows)
	}
	if rows, _ := s.UsageRows(ctx, UsageFilter{AccountID: a.ID, KeyID: k2.ID}); len(rows) != 1 || rows[0].RequestID != "e" {
		t.Fatalf("account and key filter: %+v", rows)
	}
	daily, err := s.DailyUsageRows(ctx, a.ID, "", "")
	if err != nil {
		t.Fatal(err)
	}
	want := []DailyUsage{
		{"2025-03-01", k1.ID, "m1", 2, 200, 40, 20, 10, 30, 0},
		{"2025-03-01", k1.ID, "m2", 1, 100, 20, 10, 5, 30, 0},
		{"2025-03-02", k1.ID, "m1", 1, 100, 20, 10, 5, 40, 0},
		{"2025-03-02", k2.ID, "m1", 1, 100, 20, 10, 5, 50, 0},
	}
	sort.Slice(want, func(i, j int) bool {
		x, y := want[i], want[j]
		return x.Day+x.KeyID+x.Model < y.Day+y.KeyID+y.Model
	})
	if !reflect.DeepEqual(daily, want) {
		t.Fatalf("daily\n got %+v\nwant %+v", daily, want)
	}
	if d, _ := s.DailyUsageRows(ctx, a.ID, k2.ID, "2025-03-02"); len(d) != 1 || d[0].Spent != 50 {
		t.Fatalf("daily for one key since a day: %+v", d)
	}
	// A keyless row and a deleted key's rows are part of the account's listing;
	// another account's rows are not.
	other := mustAccount(t, s, 1000)
	_, ko, _ := s.CreateKey(ctx, other.ID, "other")
	ho, _ := s.Reserve(other.ID, 1, 10)
	ro := usage("o", ko.ID, 1)
	ro.CreatedAt = day2.Add(time.Hour)
	if err := ho.Settle(ctx, ro); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteKey(ctx, k1.ID); err != nil {
		t.Fatal(err)
	}
	settle("f", "", "m1", day2.Add(time.Minute), 5)
	listing := func(f UsageFilter) string {
		t.Helper()
		rows, err := s.UsageRows(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, r := range rows {
			ids = append(ids, r.RequestID)
		}
		return strings.Join(ids, "")
	}
	if got := listing(UsageFilter{AccountID: a.ID}); got != "fedcba" {
		t.Fatalf("account listing = %q", got)
	}
	if got := listing(UsageFilter{AccountID: a.ID, Limit: 3}); got != "fed" {
		t.Fatalf("account listing with limit = %q", got)
	}
	if got := listing(UsageFilter{}); got != "foedcba" { // unfiltered: reverse insertion order
		t.Fatalf("unfiltered listing = %q", got)
	}
	if got := listing(UsageFilter{AccountID: other.ID}); got != "o" {
		t.Fatalf("other account listing = %q", got)
	}

	mustAudit(t, s)

	if _, err := s.RegisterModel(ctx, ""); err == nil {
		t.Fatal("empty model id accepted")
	}
	t1, err := s.RegisterModel(ctx, "m1")
	if err != nil || t1.IsZero() {
		t.Fatal(err)
	}
	time.Sleep(5 * time.Millisecond)
	t2, err := s.RegisterModel(ctx, "m1")
	if err != nil || !t2.Equal(t1) {
		t.Fatalf("second registration = %v, first %v (%v)", t2, t1, err)
	}
}

func TestAuditDetectsTampering(t *testing.T) { backends(t, testAuditDetectsTampering) }

func testAuditDetectsTampering(t *testing.T, b backend) {
	ctx := context.Background()
	path := b.db(t)
	s := b.openAt(t, path, func(o *Options) { o.PollInterval = time.Hour })
	a := mustAccount(t, s, 1000)
	_, k, _ := s.CreateKey(ctx, a.ID, "k")
	h, _ := s.Reserve(a.ID, 1, 100)
	if err := h.Settle(ctx, usage("r", k.ID, 40)); err != nil {
		t.Fatal(err)
	}
	mustAudit(t, s)
	db := b.raw(t, path)
	if _, err := db.Exec("UPDATE accounts SET balance = balance + 1 WHERE id = ?", a.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("UPDATE keys SET spent = 0 WHERE id = ?", k.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("UPDATE usage_daily SET requests = 5"); err != nil {
		t.Fatal(err)
	}
	ms, err := s.Audit(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]Mismatch{
		"accounts.balance":     {AccountID: a.ID, Column: "accounts.balance", Stored: 961, Recomputed: 960},
		"keys.spent":           {AccountID: a.ID, KeyID: k.ID, Column: "keys.spent", Stored: 0, Recomputed: 40},
		"usage_daily.requests": {AccountID: a.ID, KeyID: k.ID, Model: "gpt-4o-mini", Column: "usage_daily.requests", Stored: 5, Recomputed: 1},
	}
	if len(ms) != len(want) {
		t.Fatalf("mismatches = %v", ms)
	}
	for _, m := range ms {
		w := want[m.Column]
		w.Day = m.Day
		if m != w || (m.Column == "usage_daily.requests" && m.Day == "") {
			t.Errorf("mismatch %+v, want %+v", m, w)
		}
	}
}

func TestExternalChanges(t *testing.T) { backends(t, testExternalChanges) }

func testExternalChanges(t *testing.T, b backend) {
	ctx := context.Background()
	path := b.db(t)
	s := b.openAt(t, path, func(o *Options) { o.PollInterval = 50 * time.Millisecond })
	a := mustAccount(t, s, 100)
	secret, k, _ := s.CreateKey(ctx, a.ID, "k")
	if _, err := s.Authenticate(secret); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.AccountState(a.ID); err != nil { // cache the account
		t.Fatal(err)
	}

	eventually := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not seen within 1s", what)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}

	// A second Store on the same file, as the CLI would open.
	cli := b.openAt(t, path)
	if _, err := cli.Credit(ctx, CreditRequest{AccountID: a.ID, Amount: 900, Reference: "cli-1", Reason: "manual"}); err != nil {
		t.Fatal(err)
	}
	eventually("external credit", func() bool {
		h, err := s.Reserve(a.ID, 1000, 1000)
		if err != nil {
			return false
		}
		h.Release()
		return true
	})
	if err := cli.SetAccountState(ctx, a.ID, StateSuspended); err != nil {
		t.Fatal(err)
	}
	eventually("external suspension", func() bool {
		st, _, _ := s.AccountState(a.ID)
		return st == StateSuspended
	})
	// A key created elsewhere works at once (miss → DB read); deleted elsewhere, refused within the poll.
	secret2, k2, err := cli.CreateKey(ctx, a.ID, "from-cli")
	if err != nil {
		t.Fatal(err)
	}
	if p, err := s.Authenticate(secret2); err != nil || p.KeyID != k2.ID {
		t.Fatalf("key created by another process: %+v %v", p, err)
	}
	if err := cli.DeleteKey(ctx, k.ID); err != nil {
		t.Fatal(err)
	}
	if err := cli.DeleteKey(ctx, k2.ID); err != nil {
		t.Fatal(err)
	}
	eventually("external key deletion", func() bool {
		_, err1 := s.Authenticate(secret)
		_, err2 := s.Authenticate(secret2)
		return errors.Is(err1, ErrUnauthorized) && errors.Is(err2, ErrUnauthorized)
	})
	cli.Close()

	// Plain database/sql, no Store at all.
	db := b.raw(t, path)
	if _, err := db.Exec("UPDATE accounts SET state = 'active', plan = 'gold' WHERE id = ?", a.ID); err != nil {
		t.Fatal(err)
	}
	eventually("raw SQL resume", func() bool {
		st, plan, _ := s.AccountState(a.ID)
		return st == StateActive && plan == "gold"
	})
	// A key inserted by plain SQL after a failed lookup (negative cache) is found after the reload.
	secret3, err := newSecret()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Authenticate(secret3); !errors.Is(err, ErrUnauthorized) {
		t.Fatal(err)
	}
	h := hashKey(secret3)
	if _, err := db.Exec("INSERT INTO keys (id, account_id, hash, label, prefix, created_at) VALUES ('key_raw', ?, ?, '', ?, 0)",
		a.ID, h[:], displayPrefix(secret3)); err != nil {
		t.Fatal(err)
	}
	eventually("raw SQL key", func() bool {
		_, err := s.Authenticate(secret3)
		return err == nil
	})
	if s.Stats().Reloads == 0 {
		t.Fatal("no reloads counted")
	}
	mustAudit(t, s)
}

func TestGroupCommit(t *testing.T) { backends(t, testGroupCommit) }

func testGroupCommit(t *testing.T, b backend) {
	ctx := context.Background()
	s := b.open(t)
	const n = 400
	accts := make([]Account, 8)
	for i := range accts {
		accts[i] = mustAccount(t, s, 1_000_000)
	}
	before := s.Stats()
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			<-start
			h, err := s.Reserve(accts[i%len(accts)].ID, 1, 100)
			if err != nil {
				t.Error(err)
				return
			}
			if err := h.Settle(ctx, usage(fmt.Sprintf("g%d", i), "", 10)); err != nil {
				t.Error(err)
			}
		}(i)
	}
	close(start)
	wg.Wait()
	after := s.Stats()
	cmds := after.Commands - before.Commands
	txs := after.Transactions - before.Transactions
	t.Logf("%d commands in %d transactions (max batch %d)", cmds, txs, after.MaxBatch)
	if cmds != n {
		t.Fatalf("commands = %d, want %d", cmds, n)
	}
	if txs*4 > cmds {
		t.Fatalf("%d transactions for %d commands: group commit is not grouping", txs, cmds)
	}
	for _, a := range accts {
		if b := balanceOf(t, s, a.ID).Balance; b != 1_000_000-10*n/Money(len(accts)) {
			t.Fatalf("balance = %d", b)
		}
	}
	mustAudit(t, s)
}

// TestLoneSettleOnCaller checks flat combining (submit): settles made one at
// a time are committed on their callers' goroutines, each in the database
// when it returns. Under concurrency batches still group (TestGroupCommit).
func TestLoneSettleOnCaller(t *testing.T) { backends(t, testLoneSettleOnCaller) }

func testLoneSettleOnCaller(t *testing.T, b backend) {
	ctx := context.Background()
	path := b.db(t)
	s := b.openAt(t, path, func(o *Options) { o.PollInterval = time.Hour })
	a := mustAccount(t, s, 1000)
	db := b.raw(t, path)
	before := s.stats.combined.Load()
	const n = 20
	for i := range n {
		h, err := s.Reserve(a.ID, 10, 10)
		if err != nil {
			t.Fatal(err)
		}
		if err := h.Settle(ctx, usage(fmt.Sprintf("lone%d", i), "", 10)); err != nil {
			t.Fatal(err)
		}
		if got := count(t, db, "SELECT count(*) FROM usage WHERE account_id = ?", a.ID); got != int64(i+1) {
			t.Fatalf("after settle %d: %d usage rows", i, got)
		}
	}
	// PostgreSQL's change notifications may give the writer its turn now
	// and then; most lone settles still find it idle.
	if got := s.stats.combined.Load() - before; got < n/2 {
		t.Fatalf("%d of %d lone settles committed on their callers' goroutines", got, n)
	}
	if bal := balanceOf(t, s, a.ID); bal.Balance != 1000-10*n || bal.Held != 0 {
		t.Fatalf("account = %+v", bal)
	}
	mustAudit(t, s)
}

// TestBatchIsolation makes one command of a batch fail at the database
// (a debit that would break CHECK(balance >= 0), as after a tampered balance)
// and checks that the others in the same batch still commit.
func TestBatchIsolation(t *testing.T) { backends(t, testBatchIsolation) }

func testBatchIsolation(t *testing.T, b backend) {
	ctx := context.Background()
	path := b.db(t)
	s := b.openAt(t, path, func(o *Options) { o.PollInterval = time.Hour })
	good := mustAccount(t, s, 1000)
	bad := mustAccount(t, s, 1000)
	holdBad, err := s.Reserve(bad.ID, 500, 500)
	if err != nil {
		t.Fatal(err)
	}
	db := b.raw(t, path)
	if _, err := db.Exec("UPDATE accounts SET balance = 10 WHERE id = ?", bad.ID); err != nil {
		t.Fatal(err)
	}

	var holds []*Hold
	for i := 0; i < 50; i++ {
		h, err := s.Reserve(good.ID, 10, 10)
		if err != nil {
			t.Fatal(err)
		}
		holds = append(holds, h)
	}
	var wg sync.WaitGroup
	var badErr error
	errs := make([]error, len(holds))
	start := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		<-start
		badErr = holdBad.Settle(ctx, usage("bad", "", 500))
	}()
	for i, h := range holds {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			errs[i] = h.Settle(ctx, usage(fmt.Sprintf("good%d", i), "", 10))
		}()
	}
	close(start)
	wg.Wait()
	if badErr == nil || !strings.Contains(strings.ToLower(badErr.Error()), "check") {
		t.Fatalf("bad settle: %v", badErr)
	}
	for i, err := range errs {
		if err != nil {
			t.Fatalf("good settle %d: %v", i, err)
		}
	}
	if b := balanceOf(t, s, good.ID).Balance; b != 500 {
		t.Fatalf("good balance = %d", b)
	}
	if got := balanceOf(t, s, bad.ID); got.Balance != 10 || got.Held != 0 {
		t.Fatalf("bad account = %+v", got)
	}
	if n := count(t, db, "SELECT count(*) FROM usage WHERE account_id = ?", bad.ID); n != 0 {
		t.Fatalf("bad usage rows = %d", n)
	}
	if n := count(t, db, "SELECT count(*) FROM usage WHERE account_id = ?", good.ID); n != 50 {
		t.Fatalf("good usage rows = %d", n)
	}
	if s.Outstanding() != 0 {
		t.Fatalf("outstanding = %d", s.Outstanding())
	}
}

// TestCloseDrains checks that commands queued before Close are committed.
func TestCloseDrains(t *testing.T) { backends(t, testCloseDrains) }

func testCloseDrains(t *testing.T, b backend) {
	ctx := context.Background()
	path := b.db(t)
	s := b.openAt(t, path)
	a := mustAccount(t, s, 1_000_000)
	if _, _, err := s.AccountState(a.ID); err != nil { // cache it: Reserve then works after Close
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var okCount, closedCount atomic.Int64
	for i := 0; i < 200; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			h, err := s.Reserve(a.ID, 1, 10)
			if errors.Is(err, ErrClosed) { // the account was not cached yet
				closedCount.Add(1)
				return
			}
			if err != nil {
				t.Error(err)
				return
			}
			switch err := h.Settle(ctx, usage(fmt.Sprintf("c%d", i), "", 10)); {
			case err == nil:
				okCount.Add(1)
			case errors.Is(err, ErrClosed):
				closedCount.Add(1)
			default:
				t.Error(err)
			}
		}(i)
	}
	time.Sleep(2 * time.Millisecond)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if okCount.Load()+closedCount.Load() != 200 {
		t.Fatalf("ok %d closed %d", okCount.Load(), closedCount.Load())
	}
	db := b.raw(t, path)
	if n := count(t, db, "SELECT count(*) FROM usage"); n != okCount.Load() {
		t.Fatalf("rows = %d, successful settles = %d", n, okCount.Load())
	}
	if b := count(t, db, "SELECT balance FROM accounts WHERE id = ?", a.ID); b != 1_000_000-10*okCount.Load() {
		t.Fatalf("balance = %d", b)
	}
}

// TestWriteFailure holds the database's write lock from another connection
// for longer than the busy timeout: settles and credits fail after their
// retries and debit nothing; a failed settle keeps its hold reserved
// (ErrWriteFailed) and succeeds when tried again once the lock is gone.
func TestWriteFailure(t *testing.T) { backends(t, testWriteFailure) }

func testWriteFailure(t *testing.T, b backend) {
	ctx := context.Background()
	path := b.db(t)
	s := b.openAt(t, path, func(o *Options) { o.PollInterval, o.BusyTimeout = time.Hour, 20*time.Millisecond })
	a := mustAccount(t, s, 1000)

	db := b.raw(t, path)
	unlock := db.lockWrites(t, "usage", "credits")
	h, err := s.Reserve(a.ID, 100, 100)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var settleErr, creditErr error
	wg.Add(2)
	go func() { defer wg.Done(); settleErr = h.Settle(ctx, usage("r1", "", 60)) }()
	go func() {
		defer wg.Done()
		_, creditErr = s.Credit(ctx, CreditRequest{AccountID: a.ID, Amount: 5, Reference: "locked"})
	}()
	wg.Wait()
	if !errors.Is(settleErr, ErrWriteFailed) || creditErr == nil {
		t.Fatalf("settle: %v, credit: %v", settleErr, creditErr)
	}
	// nothing debited, the hold still reserved
	if got := balanceOf(t, s, a.ID); got.Balance != 1000 || got.Held != 100 || s.Outstanding() != 100 {
		t.Fatalf("after failed writes: %+v outstanding %d", got, s.Outstanding())
	}
	if s.Stats().Failures == 0 {
		t.Fatal("no failures counted")
	}

	unlock()
	if bal, err := s.Credit(ctx, CreditRequest{AccountID: a.ID, Amount: 5, Reference: "locked"}); err != nil || bal != 1005 {
		t.Fatalf("credit after unlock: %d, %v", bal, err)
	}
	// the failed settle, tried again, goes through on the same hold
	if err := h.Settle(ctx, usage("r1", "", 60)); err != nil {
		t.Fatalf("settle tried again after unlock: %v", err)
	}
	if err := h.Settle(ctx, usage("r1", "", 60)); !errors.Is(err, ErrAlreadySettled) {
		t.Fatalf("a third Settle: %v", err)
	}
	if got := balanceOf(t, s, a.ID); got.Balance != 945 || got.Held != 0 || s.Outstanding() != 0 {
		t.Fatalf("final: %+v outstanding %d", got, s.Outstanding())
	}
	mustAudit(t, s)
}

// TestOpenHoldsCounted: the count of open holds that drives the writer's
// commit delay follows every way a hold ends (settled, released, settled
// twice, failed), and concurrent settles with the delay on all commit.
func TestOpenHoldsCounted(t *testing.T) { backends(t, testOpenHoldsCounted) }

func testOpenHoldsCounted(t *testing.T, b backend) {
	s := b.open(t, func(o *Options) { o.CommitDelay = 2 * time.Millisecond; o.CommitSiblings = 1 })
	a := mustAccount(t, s, 1_000_000)
	ctx := context.Background()
	var wg sync.WaitGroup
	for range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			h, err := s.Reserve(a.ID, 1, 10)
			if err != nil {
				t.Error(err)
				return
			}
			if err := h.Settle(ctx, &UsageRecord{Model: "m", Cost: 3}); err != nil {
				t.Error(err)
			}
			if err := h.Settle(ctx, &UsageRecord{Model: "m", Cost: 3}); !errors.Is(err, ErrAlreadySettled) {
				t.Errorf("second settle: %v", err)
			}
			h.Release() // a no-op after Settle
		}()
	}
	wg.Wait()
	h, err := s.Reserve(a.ID, 1, 10)
	if err != nil {
		t.Fatal(err)
	}
	if n := s.openHolds.Load(); n != 1 {
		t.Fatalf("%d open holds, want 1", n)
	}
	h.Release()
	h.Release()
	if err := h.Settle(ctx, &UsageRecord{Model: "m", Cost: -1}); err == nil {
		t.Fatal("a negative cost settled")
	}
	if n := s.openHolds.Load(); n != 0 {
		t.Fatalf("%d open holds after every hold ended, want 0", n)
	}
	giveBack(t, s) // with PostgreSQL, the advance the busy account got
	if got := balanceOf(t, s, a.ID); got.Balance != 1_000_000-150 || got.Held != 0 {
		t.Fatalf("account %+v", got)
	}
}

// TestUsageRowHostedTools: a usage row keeps its hosted-tool uses and their
// cost (migration 5).
func TestUsageRowHostedTools(t *testing.T) { backends(t, testUsageRowHostedTools) }

func testUsageRowHostedTools(t *testing.T, b backend) {
	ctx := context.Background()
	s := b.open(t)
	a := mustAccount(t, s, 1_000_000_000)
	_, k, _ := s.CreateKey(ctx, a.ID, "k")
	h, err := s.Reserve(a.ID, 1, 100_000_000)
	if err != nil {
		t.Fatal(err)
	}
	r := usage("hosted", k.ID, 70_000_000)
	r.Hosted = HostedUses{WebSearch: 3, WebFetch: 1, ImageGeneration: 2}
	r.HostedCost = 60_000_000
	if err := h.Settle(ctx, r); err != nil {
		t.Fatal(err)
	}
	rows, err := s.UsageRows(ctx, UsageFilter{KeyID: k.ID})
	if err != nil || len(rows) != 1 {
		t.Fatalf("UsageRows = %+v, %v", rows, err)
	}
	if got := rows[0]; got.Hosted != r.Hosted || got.HostedCost != r.HostedCost || got.Charged != 70_000_000 {
		t.Fatalf("row %+v, want hosted %+v cost %s", got, r.Hosted, r.HostedCost)
	}
	if bal, _ := s.GetAccount(ctx, a.ID); bal.Balance != 1_000_000_000-70_000_000 {
		t.Fatalf("balance %s", bal.Balance)
	}
}

// TestWriterOpensThroughWALVFS: the writer connection writes through
// internal/walvfs, which needs it never to spill pages to the log before a
// commit (docs/design.md, "The SQLite write path").
func TestWriterOpensThroughWALVFS(t *testing.T) {
	s := openTest(t)
	var spill int
	if err := sqliteOf(s).wconn.QueryRowContext(context.Background(), "PRAGMA cache_spill").Scan(&spill); err != nil {
		t.Fatal(err)
	}
	if spill != 0 {
		t.Fatalf("the writer's cache_spill is %d, want 0 (off)", spill)
	}
	var file string // the database's path as SQLite names it, and its log after it
	if err := sqliteOf(s).wconn.QueryRowContext(context.Background(), "SELECT file FROM pragma_database_list WHERE name = 'main'").Scan(&file); err != nil {
		t.Fatal(err)
	}
	before, open := walvfs.Writes(file)
	if !open {
		t.Fatalf("the log of %s is not open through walvfs", file)
	}
	mustAccount(t, s, 100)
	if after, _ := walvfs.Writes(file); after <= before {
		t.Fatalf("a commit wrote nothing through walvfs (%d, then %d write calls)", before, after)
	}
}
