package ledger

import (
	"context"
	"crypto/sha256"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestCopy moves a SQLite ledger with a bit of everything into an empty
// PostgreSQL ledger: every figure reads the same from the copy, keys
// authenticate by their hashes, new writes go on from there, and a second
// copy into it, or a copy of an inconsistent source, is refused.
func TestCopy(t *testing.T) {
	ctx := context.Background()
	srcDB := backend{}.db(t)
	src := backend{}.openAt(t, srcDB)
	dst := backend{pg: true}.open(t)

	// the source
	ada, err := src.CreateLogin(ctx, "ada@example.com", "pro", "hash-ada")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := src.Credit(ctx, CreditRequest{AccountID: ada.ID, Amount: 5 * NanosPerUnit, Reference: "pay_1", Reason: "stripe",
		Kind: KindTopup, Payment: "stripe:pi_ada"}); err != nil {
		t.Fatal(err)
	}
	if _, err := src.ApplyMoney(ctx, MoneyChange{Kind: KindRefund, Payment: "stripe:pi_ada", Amount: NanosPerUnit, Reference: "refund_1"}); err != nil {
		t.Fatal(err)
	}
	bob := mustAccount(t, src, 1000)
	if err := src.SetAccountState(ctx, bob.ID, StateSuspended); err != nil {
		t.Fatal(err)
	}
	empty, _ := src.CreateAccount(ctx, "", "basic")
	secret1, k1, _ := src.CreateKey(ctx, ada.ID, "laptop")
	secret2, k2, _ := src.CreateKey(ctx, ada.ID, "old")
	_, kb, _ := src.CreateKey(ctx, bob.ID, "bob")
	day := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	for i, kid := range []string{k1.ID, k1.ID, k2.ID, ""} {
		h, err := src.Reserve(ada.ID, 1, 100_000_000)
		if err != nil {
			t.Fatal(err)
		}
		r := usage("req-"+string(rune('a'+i)), kid, Money(1_000_000*(i+1)))
		r.CreatedAt = day.Add(time.Duration(i) * 20 * time.Hour)
		r.Hosted, r.HostedCost = HostedUses{WebSearch: int64(i)}, Money(i*1000)
		if err := h.Settle(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	hb, _ := src.Reserve(bob.ID, 1, 500)
	if err := hb.Settle(ctx, usage("req-bob", kb.ID, 400)); err != nil {
		t.Fatal(err)
	}
	// a debt: the money history's columns and the account's owed are copied
	if _, err := src.ApplyMoney(ctx, MoneyChange{AccountID: bob.ID, Kind: KindAdjustment, Amount: -1000, Reference: "fee-bob",
		Reason: "fee", AllowOwed: true}); err != nil {
		t.Fatal(err)
	}
	if err := src.DeleteKey(ctx, k2.ID); err != nil {
		t.Fatal(err)
	}
	mCreated, _ := src.RegisterModel(ctx, "gpt-x")
	mustRecord(t, src, mc("openai", day, 10, 1), mc("openai", day.Add(25*time.Hour), 5), mc("anthropic", day, 3, 0, 2))
	if _, err := src.OpenIncident(ctx, "openai", "timeout", day); err != nil {
		t.Fatal(err)
	}
	if err := src.CloseIncident(ctx, "openai", day.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if _, err := src.OpenIncident(ctx, "anthropic", "server", day.Add(2*time.Hour)); err != nil {
		t.Fatal(err)
	}
	tok := sha256.Sum256([]byte("session"))
	if err := src.CreateSession(ctx, tok, Session{AccountID: ada.ID, CSRF: "csrf", ExpiresAt: time.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	resetTok := sha256.Sum256([]byte("reset"))
	if err := src.CreateLoginToken(ctx, resetTok, ada.ID, TokenReset, time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	open, _ := src.Reserve(ada.ID, 10, 10) // a hold in flight is not copied
	_ = open

	rep, err := Copy(ctx, dst, src)
	if err != nil {
		t.Fatalf("Copy: %v", err)
	}
	t.Logf("copied: %s", rep)
	if rep.Accounts != 3 || rep.Rows["usage"] != 5 || rep.Rows["keys"] != 3 || rep.Rows["sessions"] != 1 || rep.Rows["incidents"] != 2 || rep.Rows["login_tokens"] != 1 ||
		rep.Credited != 4*NanosPerUnit+1000-600 || rep.Balance != rep.Credited-rep.Charged || rep.Charged != 10_000_400 {
		t.Fatalf("report %+v", rep)
	}
	mustAudit(t, dst)
	if id, err := dst.LoginToken(ctx, resetTok, TokenReset); err != nil || id != ada.ID {
		t.Fatalf("the reset link after the copy: %q %v", id, err)
	}

	// every figure reads the same
	same := func(what string, read func(s *Store) any) {
		t.Helper()
		if a, b := read(src), read(dst); !reflect.DeepEqual(a, b) {
			t.Fatalf("%s differs:\nsqlite   %+v\npostgres %+v", what, a, b)
		}
	}
	for _, id := range []string{ada.ID, bob.ID, empty.ID} {
		same("account "+id, func(s *Store) any { a, err := s.GetAccount(ctx, id); a.Held = 0; return []any{a, err} })
		same("keys of "+id, func(s *Store) any { k, err := s.ListKeys(ctx, id); return []any{k, err} })
		same("usage of "+id, func(s *Store) any { r, err := s.UsageRows(ctx, UsageFilter{AccountID: id}); return []any{r, err} })
		same("daily usage of "+id, func(s *Store) any { r, err := s.DailyUsageRows(ctx, id, "", ""); return []any{r, err} })
		same("money history of "+id, func(s *Store) any { h, err := s.History(ctx, id, 0, 100); return []any{h, err} })
	}
	if a := balanceOf(t, dst, bob.ID); a.Owed != 400 || a.Balance != 0 {
		t.Fatalf("bob's debt after the copy: %+v", a)
	}
	for _, id := range []string{k1.ID, k2.ID, kb.ID} {
		same("key usage "+id, func(s *Store) any { u, err := s.KeyUsage(ctx, id); return []any{u, err} })
	}
	same("all usage", func(s *Store) any { r, err := s.UsageRows(ctx, UsageFilter{}); return []any{r, err} })
	same("availability", func(s *Store) any {
		a, err := s.Availability(ctx, "openai", day.Add(-time.Hour), day.Add(48*time.Hour))
		d, err2 := s.DailyAvailability(ctx, "openai", 5, day.Add(48*time.Hour))
		p, err3 := s.Providers(ctx)
		return []any{a, err, d, err2, p, err3}
	})
	same("incidents", func(s *Store) any { i, err := s.Incidents(ctx, "", time.Time{}, 0); return []any{i, err} })
	same("login", func(s *Store) any { id, h, err := s.Login(ctx, "ADA@example.com"); return []any{id, h, err} })
	same("session", func(s *Store) any { x, err := s.SessionByHash(ctx, tok); return []any{x, err} })
	if st, _, _ := dst.AccountState(bob.ID); st != StateSuspended {
		t.Fatalf("bob's state %q", st)
	}
	if created, err := dst.RegisterModel(ctx, "gpt-x"); err != nil || !created.Equal(mCreated) {
		t.Fatalf("model registered %v, %v; want %v", created, err, mCreated)
	}
	// keys authenticate by their copied hashes
	if p, err := dst.Authenticate(secret1); err != nil || p.KeyID != k1.ID {
		t.Fatalf("copied key: %+v %v", p, err)
	}
	if _, err := dst.Authenticate(secret2); !errors.Is(err, ErrUnauthorized) {
		t.Fatalf("copied deleted key: %v", err)
	}

	// writes go on: new ids follow the copied ones
	h, err := dst.Reserve(ada.ID, 1, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Settle(ctx, usage("after", k1.ID, 500)); err != nil {
		t.Fatal(err)
	}
	if _, err := dst.Credit(ctx, CreditRequest{AccountID: bob.ID, Amount: 1, Reference: "after"}); err != nil {
		t.Fatal(err)
	}
	if a := balanceOf(t, dst, bob.ID); a.Owed != 399 || a.State != StateSuspended || a.SuspendedFor != "" {
		t.Fatalf("bob after a credit on the copy: %+v", a)
	}
	if _, err := dst.OpenIncident(ctx, "gemini", "connect", day); err != nil {
		t.Fatal(err)
	}
	rows, _ := dst.UsageRows(ctx, UsageFilter{Limit: 1})
	if len(rows) != 1 || rows[0].RequestID != "after" {
		t.Fatalf("newest row after the copy: %+v", rows)
	}
	mustAudit(t, dst)

	// a second copy into it is refused
	if _, err := Copy(ctx, dst, src); err == nil || !strings.Contains(err.Error(), "not empty") {
		t.Fatalf("copy into a used ledger: %v", err)
	}
	if _, err := Copy(ctx, src, src); err == nil {
		t.Fatal("copy into SQLite accepted")
	}

	// an inconsistent source is refused, and nothing is left behind
	raw := backend{}.raw(t, srcDB)
	if _, err := raw.Exec("UPDATE accounts SET balance = balance + 7 WHERE id = ?", bob.ID); err != nil {
		t.Fatal(err)
	}
	dst2 := backend{pg: true}.open(t)
	if _, err := Copy(ctx, dst2, src); err == nil || !strings.Contains(err.Error(), "accounts.balance") {
		t.Fatalf("copy of a tampered source: %v", err)
	}
	if _, err := dst2.GetAccount(ctx, ada.ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a refused copy left rows: %v", err)
	}
}
