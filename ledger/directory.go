package ledger

import (
	"container/heap"
	"context"
	"database/sql"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// The operator's views of the ledger: accounts listed and
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
	query := `SELECT id, email, plan, state, balance, created_at, ` + s.eng.heldColumn() + `, owed, suspended_for, spend_month, month_spend FROM accounts WHERE 1 = 1`
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
	month := monthOf(s.now())
	for rows.Next() {
		if len(page.Accounts) == limit {
			last := page.Accounts[limit-1]
			page.Next = accountCursor(lastMS, last.ID)
			break
		}
		var a Account
		var state string
		var spend monthSpend
		if err := rows.Scan(&a.ID, &a.Email, &a.Plan, &state, &a.Balance, &lastMS, &a.Held, &a.Owed, &a.SuspendedFor,
			&spend.month, &spend.spend); err != nil {
			return AccountPage{}, fmt.Errorf("ledger: list accounts: %w", err)
		}
		a.State = State(state)
		a.MonthSpend = spend.in(month)
		a.CreatedAt = fromMilli(sql.NullInt64{Int64: lastMS, Valid: true})
		page.Accounts = append(page.Accounts, a)
	}
	if err := rows.Err(); err != nil {
		return AccountPage{}, fmt.Errorf("ledger: list accounts: %w", err)
	}
	rows.Close()
	if err := s.eng.heldOf(ctx, page.Accounts); err != nil {
		return AccountPage{}, fmt.Errorf("ledger: list accounts: %w", err)
	}
	return page, nil
}

// HeldEverywhere reports whether the Held of GetAccount and ListAccounts
// counts every instance's holds (PostgreSQL), not only this process's
// (SQLite, where a running gateway keeps its holds in its own memory, so a
// CLI beside it sees none of them).
func (s *Store) HeldEverywhere() bool { return s.eng.sharedHolds() }

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
	if err := s.eng.catchUp(ctx); err != nil {
		return nil, err
	}
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
		FROM keys WHERE account_id = ? ORDER BY created_at, `+s.eng.keyInsertionOrder(), accountID)
	if err != nil {
		return nil, fmt.Errorf("ledger: list keys: %w", err)
	}
	defer rows.Close()
	out := []KeySummary{}
	for rows.Next() {
		var k KeySummary
		var err error
		if k.Key, err = scanKey(rows, &k.Requests, &k.InputTokens, &k.OutputTokens, &k.Spent); err != nil {
			return nil, fmt.Errorf("ledger: list keys: %w", err)
		}
		out = append(out, k)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("ledger: list keys: %w", err)
	}
	return out, nil
}

// EachUsage calls fn with each usage row of the account created in
// [from, to), oldest first (by time, then insertion), rows of deleted keys
// and keyless rows included; a zero from or to leaves that end open. An
// error from fn stops the reading and is returned; an unknown account is
// ErrNotFound.
//
// The rows are never all in memory: usage has no index by account (see
// sqlite_schema.go), so EachUsage reads each of the account's keys' index range in
// chunks of rows already in order, continuing from the last row read, and
// merges them. Each chunk is a short read of its own: no read stays open
// between chunks, so fn may take its time (and call the store), and a
// SQLite writer's log is not held back by a long export. A row that
// commits during the export behind a chunk already read is not seen:
// export ranges that have ended. fn must not keep the record it is given.
func (s *Store) EachUsage(ctx context.Context, accountID string, from, to time.Time, fn func(*UsageRecord) error) error {
	if !from.IsZero() && !to.IsZero() && !from.Before(to) {
		return fmt.Errorf("ledger: usage: the range's start %s is not before its end %s",
			from.UTC().Format(time.RFC3339), to.UTC().Format(time.RFC3339))
	}
	keys, err := s.usageKeys(ctx, accountID)
	if err != nil {
		return err
	}
	// a chunk per source: at most about usageExportRows rows in memory
	return s.eachUsage(ctx, accountID, keys, from, to, min(max(usageExportRows/len(keys), 64), 1000), fn)
}

// eachUsage is EachUsage with the sources' chunk size.
func (s *Store) eachUsage(ctx context.Context, accountID string, keys []string, from, to time.Time, chunk int, fn func(*UsageRecord) error) error {
	if err := s.eng.catchUp(ctx); err != nil {
		return err
	}
	var h usageHeap
	for _, k := range keys {
		src := &usageSource{key: k}
		if !from.IsZero() {
			src.afterMS = from.UnixMilli()
		}
		if err := s.readUsageChunk(ctx, accountID, src, to, chunk); err != nil {
			return err
		}
		if len(src.rows) > 0 {
			h = append(h, src)
		}
	}
	heap.Init(&h)
	for len(h) > 0 {
		src := h[0]
		if err := fn(&src.rows[0].rec); err != nil {
			return err
		}
		src.rows = src.rows[1:]
		if len(src.rows) == 0 && !src.done {
			if err := s.readUsageChunk(ctx, accountID, src, to, chunk); err != nil {
				return err
			}
		}
		if len(src.rows) == 0 {
			heap.Pop(&h)
		} else {
			heap.Fix(&h, 0)
		}
	}
	return nil
}

// usageExportRows bounds the rows EachUsage holds, over all its sources
// (each holds at least 64).
const usageExportRows = 20000

// usageKeys returns the sources of an account's usage rows: its keys,
// deleted ones included, and "" for its keyless rows.
func (s *Store) usageKeys(ctx context.Context, accountID string) ([]string, error) {
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
		return nil, fmt.Errorf("ledger: usage: %w", err)
	}
	rows, err := s.query(ctx, `SELECT id FROM keys WHERE account_id = ?`, accountID)
	if err != nil {
		return nil, fmt.Errorf("ledger: usage: %w", err)
	}
	defer rows.Close()
	keys := []string{""}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("ledger: usage: %w", err)
		}
		keys = append(keys, id)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("ledger: usage: %w", err)
	}
	return keys, nil
}

// usageSource is one key's rows in an export: the chunk read, and where
// the next chunk starts (after the row created at afterMS with the id
// afterID).
type usageSource struct {
	key              string
	rows             []usageRow
	afterMS, afterID int64
	done             bool // the last chunk was short: nothing follows
}

// readUsageChunk reads src's next chunk, in one short read: the rows of
// its key's index range after its last row, in the index's order.
func (s *Store) readUsageChunk(ctx context.Context, accountID string, src *usageSource, to time.Time, chunk int) error {
	done, err := s.beginRead()
	if err != nil {
		return err
	}
	defer done()
	cond := ` AND (created_at, id) > (?, ?)`
	args := []any{src.key, accountID, src.afterMS, src.afterID}
	if !to.IsZero() {
		cond += ` AND created_at < ?`
		args = append(args, to.UnixMilli())
	}
	rows, err := s.queryUsage(ctx, s.keyUsageQuery(cond, "created_at, id"), append(args, chunk)...)
	if err != nil {
		return fmt.Errorf("ledger: usage: %w", err)
	}
	src.rows, src.done = rows, len(rows) < chunk
	if n := len(rows); n > 0 {
		src.afterMS, src.afterID = rows[n-1].rec.CreatedAt.UnixMilli(), rows[n-1].id
	}
	return nil
}

// usageHeap orders the sources of an export by their next row, oldest
// first (ties by id: insertion order).
type usageHeap []*usageSource

func (h usageHeap) Len() int { return len(h) }
func (h usageHeap) Less(i, j int) bool {
	a, b := &h[i].rows[0], &h[j].rows[0]
	if !a.rec.CreatedAt.Equal(b.rec.CreatedAt) {
		return a.rec.CreatedAt.Before(b.rec.CreatedAt)
	}
	return a.id < b.id
}
func (h usageHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *usageHeap) Push(x any)   { *h = append(*h, x.(*usageSource)) }
func (h *usageHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
