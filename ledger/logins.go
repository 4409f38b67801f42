package ledger

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// Console logins and sessions (migration 4). The ledger stores what it is
// given: a password hash made by the caller, the SHA-256 of a session's
// cookie token. It never sees a password or a token.

// loginStore is the console's logins, sessions and login tokens
// (tokens.go), beside the money core in the same database: it sees only
// sideDB. Store embeds it, so its methods are the Store's.
type loginStore struct{ db sideDB }

// Session is a console session.
type Session struct {
	AccountID string
	CSRF      string // the session's form token
	CreatedAt time.Time
	ExpiresAt time.Time
	// EmailState is the account's login's (read with the session; not
	// written by CreateSession).
	EmailState EmailState
}

// CreateLogin creates an active account that signs in to the console with
// email and the password whose hash is passwordHash. The email is kept
// normalized (NormalizeEmail) and must be unused in that form (ErrDuplicate).
func (l loginStore) CreateLogin(ctx context.Context, email, plan, passwordHash string) (Account, error) {
	return l.createLogin(ctx, email, plan, passwordHash, EmailUnchecked)
}

// CreatePendingLogin is CreateLogin for a login whose email awaits
// verification (EmailPending), as the console opens them while it can send
// mail.
func (l loginStore) CreatePendingLogin(ctx context.Context, email, plan, passwordHash string) (Account, error) {
	return l.createLogin(ctx, email, plan, passwordHash, EmailPending)
}

func (l loginStore) createLogin(ctx context.Context, email, plan, passwordHash string, state EmailState) (Account, error) {
	email = NormalizeEmail(email)
	if email == "" || passwordHash == "" {
		return Account{}, errors.New("ledger: a login needs an email and a password hash")
	}
	id, err := newID("acct_")
	if err != nil {
		return Account{}, err
	}
	now := time.Now().UnixMilli()
	err = l.db.execCommand(ctx, "create login "+id, func(ctx context.Context, conn execer) error {
		res, err := conn.ExecContext(ctx, `INSERT INTO accounts (id, email, plan, created_at) VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING`,
			id, email, plan, now)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n == 0 {
			return fmt.Errorf("ledger: account with email %q exists: %w", email, ErrDuplicate)
		}
		_, err = conn.ExecContext(ctx, `INSERT INTO logins (account_id, password_hash, created_at, email_state) VALUES (?, ?, ?, ?)`,
			id, passwordHash, now, string(state))
		return err
	})
	if err != nil {
		return Account{}, err
	}
	return Account{ID: id, Email: email, Plan: plan, State: StateActive, CreatedAt: time.UnixMilli(now).UTC()}, nil
}

// SetPassword gives an existing account a console login, or a new password
// (ErrNotFound if the account is unknown or has no email). Its sessions
// end, and its password reset links with them.
func (l loginStore) SetPassword(ctx context.Context, accountID, passwordHash string) error {
	now := time.Now().UnixMilli()
	return l.db.execCommand(ctx, "set password "+accountID, func(ctx context.Context, conn execer) error {
		var email string
		err := conn.QueryRowContext(ctx, `SELECT email FROM accounts WHERE id = ?`, accountID).Scan(&email)
		if errors.Is(err, sql.ErrNoRows) || (err == nil && email == "") {
			return fmt.Errorf("ledger: account %q with an email: %w", accountID, ErrNotFound)
		}
		if err != nil {
			return err
		}
		if _, err := conn.ExecContext(ctx, `INSERT INTO logins (account_id, password_hash, created_at) VALUES (?, ?, ?)
			ON CONFLICT (account_id) DO UPDATE SET password_hash = excluded.password_hash`, accountID, passwordHash, now); err != nil {
			return err
		}
		return endLogins(ctx, conn, accountID, nil)
	})
}

// Login returns the account and password hash of the login with email,
// in any case (ErrNotFound if there is none).
func (l loginStore) Login(ctx context.Context, email string) (accountID, passwordHash string, err error) {
	email = NormalizeEmail(email)
	done, err := l.db.beginRead()
	if err != nil {
		return "", "", err
	}
	defer done()
	err = l.db.queryRow(ctx, `SELECT l.account_id, l.password_hash FROM accounts a JOIN logins l ON l.account_id = a.id WHERE a.email = ?`,
		email).Scan(&accountID, &passwordHash)
	if errors.Is(err, sql.ErrNoRows) {
		return "", "", fmt.Errorf("ledger: login %q: %w", email, ErrNotFound)
	}
	return accountID, passwordHash, err
}

// CreateSession records a session by the hash of its token.
func (l loginStore) CreateSession(ctx context.Context, tokenHash [32]byte, sess Session) error {
	created := sess.CreatedAt
	if created.IsZero() {
		created = time.Now()
	}
	return l.db.execCommand(ctx, "create session "+sess.AccountID, func(ctx context.Context, conn execer) error {
		// expired sessions go as new ones come
		if _, err := conn.ExecContext(ctx, `DELETE FROM sessions WHERE account_id = ? AND expires_at < ?`,
			sess.AccountID, created.UnixMilli()); err != nil {
			return err
		}
		_, err := conn.ExecContext(ctx, `INSERT INTO sessions (token_hash, account_id, csrf, created_at, expires_at) VALUES (?, ?, ?, ?, ?)`,
			tokenHash[:], sess.AccountID, sess.CSRF, created.UnixMilli(), sess.ExpiresAt.UnixMilli())
		return err
	})
}

// SessionByHash returns the live session with the token hash (ErrNotFound
// if there is none or it has expired).
func (l loginStore) SessionByHash(ctx context.Context, tokenHash [32]byte) (Session, error) {
	done, err := l.db.beginRead()
	if err != nil {
		return Session{}, err
	}
	defer done()
	var sess Session
	var created, expires sql.NullInt64
	var state sql.NullString
	err = l.db.queryRow(ctx, `SELECT s.account_id, s.csrf, s.created_at, s.expires_at, l.email_state
		FROM sessions s LEFT JOIN logins l ON l.account_id = s.account_id WHERE s.token_hash = ? AND s.expires_at > ?`,
		tokenHash[:], time.Now().UnixMilli()).Scan(&sess.AccountID, &sess.CSRF, &created, &expires, &state)
	if errors.Is(err, sql.ErrNoRows) {
		return Session{}, fmt.Errorf("ledger: session: %w", ErrNotFound)
	}
	if err != nil {
		return Session{}, err
	}
	sess.CreatedAt, sess.ExpiresAt = fromMilli(created), fromMilli(expires)
	sess.EmailState = EmailState(state.String)
	if !state.Valid {
		sess.EmailState = EmailUnchecked
	}
	return sess, nil
}

// DeleteSession ends the session with the token hash, if there is one.
func (l loginStore) DeleteSession(ctx context.Context, tokenHash [32]byte) error {
	return l.db.execCommand(ctx, "delete session", func(ctx context.Context, conn execer) error {
		_, err := conn.ExecContext(ctx, `DELETE FROM sessions WHERE token_hash = ?`, tokenHash[:])
		return err
	})
}
