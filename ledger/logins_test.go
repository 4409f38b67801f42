package ledger

import (
	"context"
	"crypto/sha256"
	"errors"
	"testing"
	"time"
)

func TestLoginsAndSessions(t *testing.T) { backends(t, testLoginsAndSessions) }

func testLoginsAndSessions(t *testing.T, b backend) {
	s := b.open(t)
	ctx := context.Background()
	a, err := s.CreateLogin(ctx, "ada@example.com", "developer", "hash-1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateLogin(ctx, "ada@example.com", "developer", "hash-2"); !errors.Is(err, ErrDuplicate) {
		t.Fatalf("a second login with the same email: %v", err)
	}
	id, hash, err := s.Login(ctx, "ada@example.com")
	if err != nil || id != a.ID || hash != "hash-1" {
		t.Fatalf("login: %q %q %v", id, hash, err)
	}
	if _, _, err := s.Login(ctx, "bob@example.com"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown login: %v", err)
	}
	got, err := s.GetAccount(ctx, a.ID)
	if err != nil || got.Email != "ada@example.com" || got.State != StateActive || got.Plan != "developer" {
		t.Fatalf("account %+v %v", got, err)
	}

	tok := sha256.Sum256([]byte("token"))
	if err := s.CreateSession(ctx, tok, Session{AccountID: a.ID, CSRF: "csrf-1", ExpiresAt: time.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	sess, err := s.SessionByHash(ctx, tok)
	if err != nil || sess.AccountID != a.ID || sess.CSRF != "csrf-1" {
		t.Fatalf("session %+v %v", sess, err)
	}
	expired := sha256.Sum256([]byte("old"))
	if err := s.CreateSession(ctx, expired, Session{AccountID: a.ID, CSRF: "x", ExpiresAt: time.Now().Add(-time.Second)}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SessionByHash(ctx, expired); !errors.Is(err, ErrNotFound) {
		t.Fatalf("an expired session: %v", err)
	}
	if err := s.DeleteSession(ctx, tok); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SessionByHash(ctx, tok); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a deleted session: %v", err)
	}

	// a new password ends every session
	if err := s.CreateSession(ctx, tok, Session{AccountID: a.ID, CSRF: "c", ExpiresAt: time.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if err := s.SetPassword(ctx, a.ID, "hash-3"); err != nil {
		t.Fatal(err)
	}
	if _, hash, _ := s.Login(ctx, "ada@example.com"); hash != "hash-3" {
		t.Fatalf("hash after SetPassword: %q", hash)
	}
	if _, err := s.SessionByHash(ctx, tok); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a session outlived a password change: %v", err)
	}
	// an account without an email gets no login
	plain, _ := s.CreateAccount(ctx, "", "developer")
	if err := s.SetPassword(ctx, plain.ID, "h"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("login without email: %v", err)
	}
	// an account made without a login gets one
	withEmail, _ := s.CreateAccount(ctx, "cy@example.com", "developer")
	if err := s.SetPassword(ctx, withEmail.ID, "h4"); err != nil {
		t.Fatal(err)
	}
	if id, _, err := s.Login(ctx, "cy@example.com"); err != nil || id != withEmail.ID {
		t.Fatalf("login of an existing account: %q %v", id, err)
	}
}
