package accounts

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"strings"
	"time"

	"github.com/modelgate/modelgate/ledger"
)

// How long the console's one-time links last (docs/operations.md, "Console self-service").
const (
	ResetLinkLifetime  = time.Hour
	VerifyLinkLifetime = 48 * time.Hour
	// MaxResetLinkLifetime bounds a reset link the operator hands out.
	MaxResetLinkLifetime = 72 * time.Hour
)

// NewToken returns 32 random bytes, base64url without padding (43
// characters), and the SHA-256 of that text, which is what the ledger keeps.
func NewToken() (token string, hash [32]byte) {
	var b [32]byte
	_, _ = rand.Read(b[:])
	token = base64.RawURLEncoding.EncodeToString(b[:])
	return token, sha256.Sum256([]byte(token))
}

// TokenHash is the SHA-256 of a token as it came back in a link.
func TokenHash(token string) [32]byte { return sha256.Sum256([]byte(token)) }

// IssueToken records a new one-time token of purpose for the account,
// valid for lifetime, and returns it: the only time it is seen whole.
func (s *Service) IssueToken(ctx context.Context, accountID string, purpose ledger.TokenPurpose, lifetime time.Duration) (string, error) {
	token, hash := NewToken()
	if err := s.Store.CreateLoginToken(ctx, hash, accountID, purpose, time.Now().Add(lifetime)); err != nil {
		return "", err
	}
	return token, nil
}

// ResetLink and VerifyLink are the console's pages that take a token, under
// the console's public address (public_url and the console's path, such
// as https://api.example.com/console).
func ResetLink(console, token string) string {
	return strings.TrimRight(console, "/") + "/reset?token=" + token
}

// VerifyLink is the console's email verification page for token.
func VerifyLink(console, token string) string {
	return strings.TrimRight(console, "/") + "/verify?token=" + token
}

// FindAccount returns the id of the account named by an id (acct_…) or an
// email (ledger.ErrNotFound if there is none).
func (s *Service) FindAccount(ctx context.Context, idOrEmail string) (string, error) {
	idOrEmail = strings.TrimSpace(idOrEmail)
	if idOrEmail == "" {
		return "", invalid("which account? give its id (acct_…) or its email")
	}
	if strings.Contains(idOrEmail, "@") {
		return s.Store.AccountIDByEmail(ctx, idOrEmail)
	}
	a, err := s.Store.GetAccount(ctx, idOrEmail)
	if err != nil {
		return "", err
	}
	if a.Email == "" {
		return "", invalid("account %s has no email, so it cannot sign in to the console", a.ID)
	}
	return a.ID, nil
}
