package ledger

import (
	"context"
	"database/sql"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// The operator's views of the ledger (#20 item 4): accounts listed and
// searched a page at a time, an account's keys with their running totals,
// and an account's usage rows over a time range, streamed for an export.
// They are reads only, one code path for both engines (dialect.go).

// ErrBadCursor is returned (wrapped) by ListAccounts for a cursor that no
// page of a listing gave.
var ErrBadCursor = errors.New("ledger: not a cursor of an account listing")

// Account page sizes (AccountQuery.Limit).
const (
	DefaultAccountPage = 50
	MaxAccountPage     = 1000
)

// AccountQuery selects a page of accounts for ListAccounts. Empty fields
// match every account.
type AccountQuery struct {
	// Email is a substring of the account's email, in any case (emails are
	// kept in lower case, NormalizeEmail). % and _ are plain characters.
	Email string
	State State  // an account state, or "" for any
	Plan  string // a plan's name, or "" for any
	// Limit is the page size: DefaultAccountPage when 0, at most
	// MaxAccountPage.
	Limit int
	// Cursor is the Next of the previous page; "" for the first page.
	Cursor string
}

// AccountPage is one page of a ListAccounts listing.
type AccountPage struct {
	Accounts []Account
	// Next is the cursor of the next page, "" on the last page.
	Next string
}

// cursorPrefix versions the cursor format.
const cursorPrefix = "a1."

// accountCursor is the opaque cursor after the account created at ms with
// the id id: the listing's sort key.
func accountCursor(ms int64, id string) string {
	return cursorPrefix + base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(ms, 10)+":"+id))
}

// parseAccountCursor reads a cursor made by accountCursor.
func parseAccountCursor(c string) (ms int64, id string, err error) {
	bad := fmt.Errorf("ledger: cursor %q: %w", c, ErrBadCursor)
	raw, err := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(c, cursorPrefix))
	if !strings.HasPrefix(c, cursorPrefix) || err != nil {
		return 0, "", bad
	}
	msText, id, ok := strings.Cut(string(raw), ":")
	if !ok || id == "" {
		return 0, "", bad
	}
	ms, err = strconv.ParseInt(msText, 10, 64)
	if err != nil {
		return 0, "", bad
	}
	return ms, id, nil
}

// likeEscape escapes the LIKE wildcards of s with '!' (the queries' ESCAPE
// character), so that s matches only itself.
func likeEscape(s string) string {
	return strings.NewReplacer("!", "!!", "%", "!%", "_", "!_").Replace(s)
}

// ListAccounts returns a page of the accounts q selects, ordered by
// creation time, then id: an order that does not change as accounts are
// added, so that following Next from the first page to the last lists
// every account that existed throughout exactly once. A page is read by
// its sort key (keyset paging, not an offset): each costs the same, however
// far into the listing. Balance and Held are as GetAccount gives them.
func (s *Store) ListAccounts(ctx context.Context, q AccountQuery) (AccountPage, error) {
	if q.State != "" && !q.State.valid() {
		return AccountPage{}, fmt.Errorf("ledger: list accounts: unknown state %q (want %s or %s)", q.State, StateActive, StateSuspended)
	}
	if q.Limit < 0 {
		return AccountPage{}, fmt.Errorf("ledger: list accounts: negative limit %d", q.Limit)
	}
	limit := q.Limit
	if limit == 0 {
		limit = DefaultAccountPage
	}
	limit = min(limit, MaxAccountPage)
	held := "0"
	if s.pg != nil {
		held = "held"
	}
	query := `SELECT id, email, plan, state, balance, created_at, ` + held + ` FROM accounts WHERE 1 = 1`
	var args []any
	if q.Email != "" {
		query += ` AND email LIKE ? ESCAPE '!'`
		args = append(args, "%"+likeEscape(NormalizeEmail(q.Email))+"%")
	}
	if q.State != "" {
		query += ` AND state = ?`
		args = append(args, string(q.State))
	}
	if q.Plan != "" {
		query += ` AND plan = ?`
		args = append(args, q.Plan)
	}
	if q.Cursor != "" {
		ms, id, err := parseAccountCursor(q.Cursor)
		if err != nil {
			return AccountPage{}, err
		}
		query += ` AND (created_at > ? OR (created_at = ? AND id > ?))`
		args = append(args, ms, ms, id)
	}
	query += ` ORDER BY created_at, id LIMIT ?`
	args = append(args, limit+1)

	done, err := s.beginRead()
	if err != nil {
		return AccountPage{}, err
	}
	defer done()
	rows, err := s.query(ctx, query, args...)
	if err != nil {
		return AccountPage{}, fmt.Errorf("ledger: list accounts: %w", err)
	}
	defer rows.Close()
	page := AccountPage{Accounts: []Account{}}
	var lastMS int64
	for rows.Next() {
		if len(page.Accounts) == limit {
			last := page.Accounts[limit-1]
			page.Next = accountCursor(lastMS, last.ID)
			break
		}
		var a Account
		var state string
		if err := rows.Scan(&a.ID, &a.Email, &a.Plan, &state, &a.Balance, &lastMS, &a.Held); err != nil {
			return AccountPage{}, fmt.Errorf("ledger: list accounts: %w", err)
		}
		a.State = State(state)
		a.CreatedAt = fromMilli(sql.NullInt64{Int64: lastMS, Valid: true})
		page.Accounts = append(page.Accounts, a)
	}
	if err := rows.Err(); err != nil {
		return AccountPage{}, fmt.Errorf("ledger: list accounts: %w", err)
	}
	rows.Close()
	if err := s.heldOf(ctx, page.Accounts); err != nil {
		return AccountPage{}, fmt.Errorf("ledger: list accounts: %w", err)
	}
	return page, nil
}

// heldOf sets the Held of the accounts that have holds in this process's
// memory (SQLite), with their balance read again at the same moment: as in
// GetAccount, under loadMu, so that a batch's commit and its effect on the
// holds are seen together. The listing's own query runs without loadMu,
// which would stop the writer's commits for as long as it took; this one
// reads the page's accounts by key. With PostgreSQL, balance and held
// were read together from the database.
func (s *Store) heldOf(ctx context.Context, accts []Account) error {
	if s.pg != nil {
		return nil
	}
	byID := map[string]*Account{}
	for i := range accts {
		if s.cachedAccount(accts[i].ID) != nil {
			byID[accts[i].ID] = &accts[i]
		}
	}
	if len(byID) == 0 {
		return nil
	}
	args := make([]any, 0, len(byID))
	for id := range byID {
		args = append(args, id)
	}
	q := `SELECT id, balance FROM accounts WHERE id IN (?` + strings.Repeat(", ?", len(args)-1) + `)`
	s.loadMu.RLock()
	defer s.loadMu.RUnlock()
	rows, err := s.query(ctx, q, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		var balance Money
		if err := rows.Scan(&id, &balance); err != nil {
			return err
		}
		a := byID[id]
		a.Balance = balance
		if m := s.cachedAccount(id); m != nil {
			m.mu.Lock()
			a.Held = m.held
			m.mu.Unlock()
		}
	}
	return rows.Err()
}

// HeldEverywhere reports whether the Held of GetAccount and ListAccounts
// counts every instance's holds (PostgreSQL), not only this process's
// (SQLite, where a running gateway keeps its holds in its own memory, so a
// CLI beside it sees none of them).
func (s *Store) HeldEverywhere() bool { return s.pg != nil }

// KeySummary is a key with its running totals, as an operator lists them.
// It holds neither the key nor its hash.
type KeySummary struct {
	Key
	Requests, InputTokens, OutputTokens int64
	Spent                               Money
}

// ListKeySummaries lists an account's keys, deleted ones included, oldest
// first, with their running totals (kept on the key rows: one indexed read).
// An unknown account is ErrNotFound.
func (s *Store) ListKeySummaries(ctx context.Context, accountID string) ([]KeySummary, error) {
	done, err := s.beginRead()
	if err != nil {
		return nil, err
	}
	defer done()
	var one int
	err = s.queryRow(ctx, `SELECT 1 FROM accounts WHERE id = ?`, accountID).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("ledger: account %q: %w", accountID, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("ledger: list keys: %w", err)
	}
	rows, err := s.query(ctx, `SELECT `+keyColumns+`, requests, input_tokens, output_tokens, spent
		FROM keys WHERE account_id = ? ORDER BY created_at, `+s.keyInsertionOrder(), accountID)
	if err != nil {
		return nil, fmt.Errorf("ledger: list keys: %w", err)
	}
	defer rows.Close()
	out := []KeySummary{}
	for rows.Next() {
		var k KeySummary
		var created, used, deleted sql.NullInt64
		if err := rows.Scan(&k.ID, &k.AccountID, &k.Label, &k.Prefix, &created, &used, &deleted,
			&k.Requests, &k.InputTokens, &k.OutputTokens, &k.Spent); err != nil {
			return nil, fmt.Errorf("ledger: list keys: %w", err)
		}
		k.CreatedAt, k.LastUsedAt, k.DeletedAt = fromMilli(created), fromMilli(used), fromMilli(deleted)
		k.Deleted = deleted.Valid
		out = append(out, k)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("ledger: list keys: %w", err)
	}
	return out, nil
}

// EachUsage calls fn with each usage row of the account created in
// [from, to), oldest first (by time, then insertion), rows of deleted keys
// and keyless rows included; a zero from or to leaves that end open. The
// rows are read one at a time as fn takes them, never all at once, in one
// query: the database reads the index range of each of the account's keys
// (usage has no index by account, see schema.go) and orders them, spilling
// to its temporary storage when they are many. The record passed to fn is
// reused for the next row. An error from fn stops the reading and is
// returned. fn must not call the store: the read holds it open.
// An unknown account is ErrNotFound.
func (s *Store) EachUsage(ctx context.Context, accountID string, from, to time.Time, fn func(*UsageRecord) error) error {
	if !from.IsZero() && !to.IsZero() && !from.Before(to) {
		return fmt.Errorf("ledger: usage: the range's start %s is not before its end %s",
			from.UTC().Format(time.RFC3339), to.UTC().Format(time.RFC3339))
	}
	done, err := s.beginRead()
	if err != nil {
		return err
	}
	defer done()
	var one int
	err = s.queryRow(ctx, `SELECT 1 FROM accounts WHERE id = ?`, accountID).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("ledger: account %q: %w", accountID, ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("ledger: usage: %w", err)
	}
	q := `SELECT ` + s.usageSelect() + ` FROM usage
		WHERE key_id IN (SELECT id FROM keys WHERE account_id = ? UNION ALL SELECT '') AND account_id = ?`
	args := []any{accountID, accountID}
	if !from.IsZero() {
		q += ` AND created_at >= ?`
		args = append(args, from.UnixMilli())
	}
	if !to.IsZero() {
		q += ` AND created_at < ?`
		args = append(args, to.UnixMilli())
	}
	rows, err := s.query(ctx, q+` ORDER BY created_at, id`, args...)
	if err != nil {
		return fmt.Errorf("ledger: usage: %w", err)
	}
	defer rows.Close()
	var u usageRow
	for rows.Next() {
		u = usageRow{}
		if err := s.scanUsage(rows, &u); err != nil {
			return fmt.Errorf("ledger: usage: %w", err)
		}
		if err := fn(&u.rec); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("ledger: usage: %w", err)
	}
	return nil
}
