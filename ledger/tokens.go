package ledger

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// One-time login tokens (migration 8): the links of password
// resets and of email verification. As with sessions, the ledger keeps
// the SHA-256 of a token, never the token. A token is used by deleting
// its row in the same transaction as what it does, so that of two uses
// racing, one finds nothing; a token past its expiry is refused and
// deleted when the next token is created.

// EmailState says whether a login's email was shown to reach its owner.
type EmailState string

// The states of a login's email.
const (
	// EmailUnchecked: nobody asked (a login the operator made, one from
	// before verification existed, or one opened while no mail was
	// configured).
	EmailUnchecked EmailState = "unchecked"
	// EmailPending: opened in the console while mail was configured; the
	// verification link has not been followed.
	EmailPending EmailState = "pending"
	// EmailVerified: a verification or password reset link was followed.
	EmailVerified EmailState = "verified"
)

// TokenPurpose is what a login token does.
type TokenPurpose string

// The purposes of login tokens.
const (
	TokenReset  TokenPurpose = "reset"  // sets a new password
	TokenVerify TokenPurpose = "verify" // verifies the email
)

// CreateLoginToken records a token for the account with an email
// (ErrNotFound otherwise), valid until expires, by the hash of the token,
// and deletes every token that has expired.
func (l loginStore) CreateLoginToken(ctx context.Context, tokenHash [32]byte, accountID string, purpose TokenPurpose, expires time.Time) error {
	if purpose != TokenReset && purpose != TokenVerify {
		return fmt.Errorf("ledger: unknown login token purpose %q", purpose)
	}
	now := time.Now().UnixMilli()
	return l.db.execCommand(ctx, "create "+string(purpose)+" token "+accountID, func(ctx context.Context, conn execer) error {
		var email string
		err := conn.QueryRowContext(ctx, `SELECT email FROM accounts WHERE id = ?`, accountID).Scan(&email)
		if errors.Is(err, sql.ErrNoRows) || (err == nil && email == "") {
			return fmt.Errorf("ledger: account %q with an email: %w", accountID, ErrNotFound)
		}
		if err != nil {
			return err
		}
		if _, err := conn.ExecContext(ctx, `DELETE FROM login_tokens WHERE expires_at <= ?`, now); err != nil {
			return err
		}
		_, err = conn.ExecContext(ctx, `INSERT INTO login_tokens (token_hash, account_id, purpose, created_at, expires_at) VALUES (?, ?, ?, ?, ?)`,
			tokenHash[:], accountID, string(purpose), now, expires.UnixMilli())
		return err
	})
}

// LoginToken returns the account of the live token with the hash and
// purpose, without using it (ErrNotFound if there is none, it was used or
// it has expired).
func (l loginStore) LoginToken(ctx context.Context, tokenHash [32]byte, purpose TokenPurpose) (accountID string, err error) {
	done, err := l.db.beginRead()
	if err != nil {
		return "", err
	}
	defer done()
	err = l.db.queryRow(ctx, `SELECT account_id FROM login_tokens WHERE token_hash = ? AND purpose = ? AND expires_at > ?`,
		tokenHash[:], string(purpose), time.Now().UnixMilli()).Scan(&accountID)
	if errors.Is(err, sql.ErrNoRows) {
		return "", fmt.Errorf("ledger: %s token: %w", purpose, ErrNotFound)
	}
	return accountID, err
}

// takeToken deletes the live token with the hash and purpose and returns
// its account (ErrNotFound, having changed nothing, if there is none).
func takeToken(ctx context.Context, conn execer, tokenHash [32]byte, purpose TokenPurpose) (string, error) {
	var accountID string
	err := conn.QueryRowContext(ctx, `DELETE FROM login_tokens WHERE token_hash = ? AND purpose = ? AND expires_at > ? RETURNING account_id`,
		tokenHash[:], string(purpose), time.Now().UnixMilli()).Scan(&accountID)
	if errors.Is(err, sql.ErrNoRows) {
		return "", fmt.Errorf("ledger: %s token: %w", purpose, ErrNotFound)
	}
	return accountID, err
}

// endLogins ends the account's sessions but keep (if not nil) and deletes
// its password reset tokens: what a new password does.
func endLogins(ctx context.Context, conn execer, accountID string, keep *[32]byte) error {
	var err error
	if keep != nil {
		_, err = conn.ExecContext(ctx, `DELETE FROM sessions WHERE account_id = ? AND token_hash <> ?`, accountID, keep[:])
	} else {
		_, err = conn.ExecContext(ctx, `DELETE FROM sessions WHERE account_id = ?`, accountID)
	}
	if err != nil {
		return err
	}
	_, err = conn.ExecContext(ctx, `DELETE FROM login_tokens WHERE account_id = ? AND purpose = ?`, accountID, string(TokenReset))
	return err
}

// ResetPassword uses a password reset token: in one transaction the token
// is deleted, the account gets the password (a login, if it had none) and
// its email counts as verified (the link reached it), and every session
// and every other reset token of the account ends. It returns the account,
// or ErrNotFound if the token is unknown, used or expired.
func (l loginStore) ResetPassword(ctx context.Context, tokenHash [32]byte, passwordHash string) (accountID string, err error) {
	if passwordHash == "" {
		return "", errors.New("ledger: a reset needs a password hash")
	}
	now := time.Now().UnixMilli()
	err = l.db.execCommand(ctx, "reset a password", func(ctx context.Context, conn execer) error {
		id, err := takeToken(ctx, conn, tokenHash, TokenReset)
		if err != nil {
			return err
		}
		accountID = id
		if _, err := conn.ExecContext(ctx, `INSERT INTO logins (account_id, password_hash, created_at, email_state) VALUES (?, ?, ?, ?)
			ON CONFLICT (account_id) DO UPDATE SET password_hash = excluded.password_hash, email_state = excluded.email_state`,
			id, passwordHash, now, string(EmailVerified)); err != nil {
			return err
		}
		return endLogins(ctx, conn, id, nil)
	})
	return accountID, err
}

// ChangePassword gives the account's login a new password: every session
// of the account ends but the one whose token hash is keep (the one that
// asked), and so do its password reset tokens. ErrNotFound if the account
// has no login.
func (l loginStore) ChangePassword(ctx context.Context, accountID, passwordHash string, keep [32]byte) error {
	if passwordHash == "" {
		return errors.New("ledger: a new password needs its hash")
	}
	return l.db.execCommand(ctx, "change password "+accountID, func(ctx context.Context, conn execer) error {
		res, err := conn.ExecContext(ctx, `UPDATE logins SET password_hash = ? WHERE account_id = ?`, passwordHash, accountID)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n == 0 {
			return fmt.Errorf("ledger: login of %q: %w", accountID, ErrNotFound)
		}
		return endLogins(ctx, conn, accountID, &keep)
	})
}

// LoginPassword returns the password hash of the account's login
// (ErrNotFound if it has none).
func (l loginStore) LoginPassword(ctx context.Context, accountID string) (string, error) {
	done, err := l.db.beginRead()
	if err != nil {
		return "", err
	}
	defer done()
	var hash string
	err = l.db.queryRow(ctx, `SELECT password_hash FROM logins WHERE account_id = ?`, accountID).Scan(&hash)
	if errors.Is(err, sql.ErrNoRows) {
		return "", fmt.Errorf("ledger: login of %q: %w", accountID, ErrNotFound)
	}
	return hash, err
}

// VerifyEmail uses an email verification token: the token is deleted, with
// the account's other verification tokens, and its login's email is
// verified. It returns the account, or ErrNotFound if the token is unknown,
// used or expired.
func (l loginStore) VerifyEmail(ctx context.Context, tokenHash [32]byte) (accountID string, err error) {
	err = l.db.execCommand(ctx, "verify an email", func(ctx context.Context, conn execer) error {
		id, err := takeToken(ctx, conn, tokenHash, TokenVerify)
		if err != nil {
			return err
		}
		accountID = id
		if _, err := conn.ExecContext(ctx, `UPDATE logins SET email_state = ? WHERE account_id = ?`, string(EmailVerified), id); err != nil {
			return err
		}
		_, err = conn.ExecContext(ctx, `DELETE FROM login_tokens WHERE account_id = ? AND purpose = ?`, id, string(TokenVerify))
		return err
	})
	return accountID, err
}

// AccountIDByEmail returns the id of the account with the email, in any
// case (ErrNotFound if there is none).
func (l loginStore) AccountIDByEmail(ctx context.Context, email string) (string, error) {
	email = NormalizeEmail(email)
	if email == "" {
		return "", fmt.Errorf("ledger: account with no email: %w", ErrNotFound)
	}
	done, err := l.db.beginRead()
	if err != nil {
		return "", err
	}
	defer done()
	var id string
	err = l.db.queryRow(ctx, `SELECT id FROM accounts WHERE email = ?`, email).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return "", fmt.Errorf("ledger: account with email %q: %w", email, ErrNotFound)
	}
	return id, err
}
