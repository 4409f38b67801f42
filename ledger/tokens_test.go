package ledger

import (
	"context"
	"crypto/sha256"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"
)

// TestLoginTokens: reset and verification tokens on both engines:
// kept by hash, used once (two racing uses: one wins), refused
// once expired or for another purpose; a reset sets the password, verifies
// the email and ends every session and every other reset token; a change
// of password ends the other sessions and the reset tokens; a verification
// verifies the email.
func TestLoginTokens(t *testing.T) { backends(t, testLoginTokens) }

func testLoginTokens(t *testing.T, b backend) {
	db := b.db(t)
	s := b.openAt(t, db)
	ctx := context.Background()
	hour := time.Now().Add(time.Hour)
	tok := func(s string) [32]byte { return sha256.Sum256([]byte(s)) }

	a, err := s.CreatePendingLogin(ctx, "ada@example.com", "developer", "hash-1")
	if err != nil {
		t.Fatal(err)
	}
	session := func(name string) [32]byte {
		t.Helper()
		h := tok(name)
		if err := s.CreateSession(ctx, h, Session{AccountID: a.ID, CSRF: "c", ExpiresAt: hour}); err != nil {
			t.Fatal(err)
		}
		return h
	}
	live := func(h [32]byte) bool {
		t.Helper()
		_, err := s.SessionByHash(ctx, h)
		if err != nil && !errors.Is(err, ErrNotFound) {
			t.Fatal(err)
		}
		return err == nil
	}
	s1 := session("s1")
	if sess, _ := s.SessionByHash(ctx, s1); sess.EmailState != EmailPending {
		t.Fatalf("a pending login's session says %q", sess.EmailState)
	}

	// unknown accounts and accounts without email get no token
	if err := s.CreateLoginToken(ctx, tok("x"), "acct_nobody", TokenReset, hour); !errors.Is(err, ErrNotFound) {
		t.Fatalf("token of an unknown account: %v", err)
	}
	plain, _ := s.CreateAccount(ctx, "", "developer")
	if err := s.CreateLoginToken(ctx, tok("x"), plain.ID, TokenReset, hour); !errors.Is(err, ErrNotFound) {
		t.Fatalf("token of an account without email: %v", err)
	}

	// verification: once, and not with a reset token
	for _, name := range []string{"v1", "v2"} {
		if err := s.CreateLoginToken(ctx, tok(name), a.ID, TokenVerify, hour); err != nil {
			t.Fatal(err)
		}
	}
	if id, err := s.LoginToken(ctx, tok("v1"), TokenReset); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a verification token used as a reset token: %q %v", id, err)
	}
	if id, err := s.VerifyEmail(ctx, tok("v1")); err != nil || id != a.ID {
		t.Fatalf("verify: %q %v", id, err)
	}
	if _, err := s.VerifyEmail(ctx, tok("v1")); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a verification token used twice: %v", err)
	}
	if _, err := s.VerifyEmail(ctx, tok("v2")); !errors.Is(err, ErrNotFound) {
		t.Fatalf("the other verification token outlived the verification: %v", err)
	}
	if sess, _ := s.SessionByHash(ctx, s1); sess.EmailState != EmailVerified {
		t.Fatalf("after verification the session says %q", sess.EmailState)
	}

	// expired tokens are refused, and deleted as new ones come
	if err := s.CreateLoginToken(ctx, tok("old"), a.ID, TokenReset, time.Now().Add(-time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.LoginToken(ctx, tok("old"), TokenReset); !errors.Is(err, ErrNotFound) {
		t.Fatalf("an expired token is live: %v", err)
	}
	if _, err := s.ResetPassword(ctx, tok("old"), "hash-x"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("an expired token reset the password: %v", err)
	}
	if err := s.CreateLoginToken(ctx, tok("r1"), a.ID, TokenReset, hour); err != nil {
		t.Fatal(err)
	}
	raw := b.raw(t, db)
	if n := count(t, raw, "SELECT count(*) FROM login_tokens WHERE expires_at <= ?", time.Now().UnixMilli()); n != 0 {
		t.Fatalf("%d expired tokens kept", n)
	}

	// a change of password ends the other sessions and the reset tokens
	s2 := session("s2")
	if err := s.ChangePassword(ctx, a.ID, "hash-2", s1); err != nil {
		t.Fatal(err)
	}
	if !live(s1) || live(s2) {
		t.Fatalf("after a change: the asking session live %v, the other live %v", live(s1), live(s2))
	}
	if h, _ := s.LoginPassword(ctx, a.ID); h != "hash-2" {
		t.Fatalf("password after the change: %q", h)
	}
	if _, err := s.LoginToken(ctx, tok("r1"), TokenReset); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a reset token outlived a change of password: %v", err)
	}
	if err := s.ChangePassword(ctx, plain.ID, "h", s1); !errors.Is(err, ErrNotFound) {
		t.Fatalf("change of an account without login: %v", err)
	}

	// a reset: once, even raced; every session and other reset token ends
	for _, name := range []string{"r2", "r3"} {
		if err := s.CreateLoginToken(ctx, tok(name), a.ID, TokenReset, hour); err != nil {
			t.Fatal(err)
		}
	}
	if id, err := s.LoginToken(ctx, tok("r2"), TokenReset); err != nil || id != a.ID {
		t.Fatalf("live token: %q %v", id, err)
	}
	var wins, refusals int
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			_, err := s.ResetPassword(ctx, tok("r2"), "hash-reset-"+strconv.Itoa(i))
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				wins++
			case errors.Is(err, ErrNotFound):
				refusals++
			default:
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if wins != 1 || refusals != 7 {
		t.Fatalf("8 racing uses of one token: %d took, %d refused", wins, refusals)
	}
	if live(s1) {
		t.Fatal("a session outlived a reset")
	}
	if _, err := s.ResetPassword(ctx, tok("r3"), "hash-3"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("another reset token outlived the reset: %v", err)
	}

	// an operator-made account without a login gets one through a reset
	cy, _ := s.CreateAccount(ctx, "cy@example.com", "developer")
	if err := s.CreateLoginToken(ctx, tok("cy"), cy.ID, TokenReset, hour); err != nil {
		t.Fatal(err)
	}
	if id, err := s.ResetPassword(ctx, tok("cy"), "hash-cy"); err != nil || id != cy.ID {
		t.Fatalf("reset of an account without login: %q %v", id, err)
	}
	if id, h, err := s.Login(ctx, "cy@example.com"); err != nil || id != cy.ID || h != "hash-cy" {
		t.Fatalf("login after the reset: %q %q %v", id, h, err)
	}

	// every token is gone, used or ended
	if n := count(t, raw, "SELECT count(*) FROM login_tokens"); n != 0 {
		t.Fatalf("%d tokens left after every one was used", n)
	}
}

// TestAccountIDByEmail finds an account by its email in any case, and no
// account for an unknown or empty email.
func TestAccountIDByEmail(t *testing.T) { backends(t, testAccountIDByEmail) }

func testAccountIDByEmail(t *testing.T, b backend) {
	s := b.openAt(t, b.db(t))
	ctx := context.Background()
	a, err := s.CreateAccount(ctx, "Grace@Example.com", "developer")
	if err != nil {
		t.Fatal(err)
	}
	if id, err := s.AccountIDByEmail(ctx, " grace@EXAMPLE.com "); err != nil || id != a.ID {
		t.Fatalf("by email: %q, %v", id, err)
	}
	for _, email := range []string{"nobody@example.com", "", "  "} {
		if id, err := s.AccountIDByEmail(ctx, email); !errors.Is(err, ErrNotFound) || id != "" {
			t.Fatalf("%q: %q, %v", email, id, err)
		}
	}
}
