package ledger

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
)

// TestEmailsNormalized: every way in keeps the email trimmed and in lower
// case, and one email in another case is the same login name.
func TestEmailsNormalized(t *testing.T) { backends(t, testEmailsNormalized) }

func testEmailsNormalized(t *testing.T, b backend) {
	s := b.open(t)
	ctx := context.Background()
	a, err := s.CreateAccount(ctx, "  Mixed@Case.Example ", "basic")
	if err != nil || a.Email != "mixed@case.example" {
		t.Fatalf("create: %+v %v", a, err)
	}
	if got := balanceOf(t, s, a.ID); got.Email != "mixed@case.example" {
		t.Fatalf("stored email %q", got.Email)
	}
	for _, email := range []string{"mixed@case.example", "MIXED@CASE.EXAMPLE", " Mixed@Case.Example"} {
		if _, err := s.CreateAccount(ctx, email, "basic"); !errors.Is(err, ErrDuplicate) {
			t.Errorf("account %q: %v", email, err)
		}
		if _, err := s.CreateLogin(ctx, email, "basic", "hash"); !errors.Is(err, ErrDuplicate) {
			t.Errorf("login %q: %v", email, err)
		}
	}
	l, err := s.CreateLogin(ctx, "Ada@Example.com", "basic", "hash-ada")
	if err != nil || l.Email != "ada@example.com" {
		t.Fatalf("login: %+v %v", l, err)
	}
	for _, email := range []string{"ada@example.com", "ADA@EXAMPLE.COM", " Ada@Example.com\t"} {
		if id, hash, err := s.Login(ctx, email); err != nil || id != l.ID || hash != "hash-ada" {
			t.Errorf("sign in as %q: %q %q %v", email, id, hash, err)
		}
	}
	// accounts without an email stay many
	for range 2 {
		if _, err := s.CreateAccount(ctx, " ", "basic"); err != nil {
			t.Fatal(err)
		}
	}
}

// emailMigration is the index of the migration that normalizes emails.
func emailMigration(t *testing.T) int {
	t.Helper()
	for i, m := range migrations {
		if strings.Contains(m, "accounts_email_nocase") {
			return i
		}
	}
	t.Fatal("no email migration")
	return 0
}

// ledgerBefore writes a ledger file at the schema before migration n,
// with accounts of the given emails.
func ledgerBefore(t *testing.T, n int, emails ...string) string {
	t.Helper()
	path := testPath(t)
	if err := os.MkdirAll(path[:strings.LastIndexByte(path, '/')], 0o700); err != nil {
		t.Fatal(err)
	}
	db := rawDB(t, path)
	for i, m := range migrations[:n] {
		if _, err := db.Exec(m); err != nil {
			t.Fatalf("migration %d: %v", i+1, err)
		}
	}
	if _, err := db.Exec(fmt.Sprintf("PRAGMA user_version = %d", n)); err != nil {
		t.Fatal(err)
	}
	for i, e := range emails {
		if _, err := db.Exec(`INSERT INTO accounts (id, email, plan, created_at) VALUES (?, ?, 'basic', 0)`, fmt.Sprintf("acct_%d", i), e); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestEmailMigration: existing emails are normalized; emails that would
// then collide stop the ledger from opening, with a message that says
// what to do, and change nothing.
func TestEmailMigration(t *testing.T) {
	n := emailMigration(t)
	ctx := context.Background()

	path := ledgerBefore(t, n, "Ops@Example.com", " someone@example.com", "", "")
	s := openAt(t, path)
	for id, want := range map[string]string{"acct_0": "ops@example.com", "acct_1": "someone@example.com", "acct_2": ""} {
		if a := balanceOf(t, s, id); a.Email != want {
			t.Errorf("%s: email %q, want %q", id, a.Email, want)
		}
	}
	if _, err := s.CreateLogin(ctx, "ops@example.com", "basic", "h"); !errors.Is(err, ErrDuplicate) {
		t.Fatalf("a lower-case sign-up squats the operator's Ops@Example.com: %v", err)
	}

	path = ledgerBefore(t, n, "Mixed@Case.example", "mixed@case.example", "other@example.com")
	_, err := Open(ctx, Options{Path: path})
	if err == nil || !strings.Contains(err.Error(), "differs only in case") || !strings.Contains(err.Error(), "distinct email") {
		t.Fatalf("colliding emails: %v", err)
	}
	db := rawDB(t, path)
	if v := count(t, db, "PRAGMA user_version"); v != int64(n) {
		t.Fatalf("user_version %d after a refused migration, want %d", v, n)
	}
	if c := count(t, db, "SELECT count(*) FROM accounts WHERE email = 'Mixed@Case.example'"); c != 1 {
		t.Fatal("the refused migration changed an email")
	}
	// the operator renames one: the ledger opens
	if _, err := db.Exec(`UPDATE accounts SET email = 'mixed+old@case.example' WHERE email = 'Mixed@Case.example'`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	s = openAt(t, path)
	if a := balanceOf(t, s, "acct_1"); a.Email != "mixed@case.example" {
		t.Fatalf("after the fix: %+v", a)
	}
}
