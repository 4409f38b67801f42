package accounts

import (
	"context"
	"crypto/sha256"
	"errors"
	"regexp"
	"testing"
	"time"

	"github.com/modelgate/modelgate/ledger"
)

// TestTokens: tokens are 43 characters of base64url, all different, and
// the ledger keeps their SHA-256, by which an issued one is found.
func TestTokens(t *testing.T) {
	shape := regexp.MustCompile(`^[A-Za-z0-9_-]{43}$`)
	seen := map[string]bool{}
	for range 100 {
		tok, hash := NewToken()
		if !shape.MatchString(tok) || seen[tok] || hash != sha256.Sum256([]byte(tok)) || TokenHash(tok) != hash {
			t.Fatalf("token %q", tok)
		}
		seen[tok] = true
	}
	if got := ResetLink("https://gw.example.com/console/", "T"); got != "https://gw.example.com/console/reset?token=T" {
		t.Fatalf("reset link %q", got)
	}
	if got := VerifyLink("https://gw.example.com/console", "T"); got != "https://gw.example.com/console/verify?token=T" {
		t.Fatalf("verify link %q", got)
	}

	ctx := context.Background()
	svc := testService(t)
	a, err := svc.Open(ctx, Opening{Email: "Lin@Example.com", Password: "a long enough password", Unverified: true})
	if err != nil {
		t.Fatal(err)
	}
	tok, err := svc.IssueToken(ctx, a.ID, ledger.TokenVerify, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if id, err := svc.Store.LoginToken(ctx, TokenHash(tok), ledger.TokenVerify); err != nil || id != a.ID {
		t.Fatalf("issued token: %q, %v", id, err)
	}
	if _, err := svc.Store.LoginToken(ctx, TokenHash(tok), ledger.TokenReset); !errors.Is(err, ledger.ErrNotFound) {
		t.Fatalf("a verify token used as a reset token: %v", err)
	}
}

// TestFindAccount finds an account by id or email, and refuses one
// without an email (it has no console login to reset).
func TestFindAccount(t *testing.T) {
	ctx := context.Background()
	svc := testService(t)
	a, err := svc.Open(ctx, Opening{Email: "kim@example.com"})
	if err != nil {
		t.Fatal(err)
	}
	bare, err := svc.Open(ctx, Opening{})
	if err != nil {
		t.Fatal(err)
	}
	for _, who := range []string{a.ID, "KIM@example.com", " kim@example.com "} {
		if id, err := svc.FindAccount(ctx, who); err != nil || id != a.ID {
			t.Fatalf("%q: %q, %v", who, id, err)
		}
	}
	for who, check := range map[string]func(error) bool{
		"nobody@example.com": func(err error) bool { return errors.Is(err, ledger.ErrNotFound) },
		"acct_nope":          func(err error) bool { return errors.Is(err, ledger.ErrNotFound) },
		"":                   IsInvalid,
		bare.ID:              IsInvalid,
	} {
		if id, err := svc.FindAccount(ctx, who); id != "" || !check(err) {
			t.Fatalf("%q: %q, %v", who, id, err)
		}
	}
}
