package ledger

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

// RegisterModel records a model id the first time it is seen and returns
// the time of that first registration, which is kept forever.
func (s *Store) RegisterModel(ctx context.Context, id string) (created time.Time, err error) {
	if id == "" {
		return time.Time{}, fmt.Errorf("ledger: register model: empty id")
	}
	ms, err := s.eng.registerModel(ctx, id, time.Now().UnixMilli())
	if err != nil {
		return time.Time{}, err
	}
	return time.UnixMilli(ms).UTC(), nil
}

// UsageFilter selects usage rows. Empty fields match everything.
type UsageFilter struct {
	AccountID, KeyID string
	Limit            int // default 100, at most 10000
}

// UsageRows returns usage rows, newest (by CreatedAt) first. With only
// AccountID set, it merges the newest rows of each of the account's keys
// (deleted ones included) and of the account's keyless rows, so each source
// costs one index range read of at most Limit rows. With no filter at all,
// rows come in reverse insertion order, which avoids sorting the table.
func (s *Store) UsageRows(ctx context.Context, f UsageFilter) ([]UsageRecord, error) {
	if f.KeyID != "" || f.AccountID != "" {
		if err := s.eng.catchUp(ctx); err != nil {
			return nil, err
		}
	}
	done, err := s.beginRead()
	if err != nil {
		return nil, err
	}
	defer done()
	limit := f.Limit
	if limit <= 0 {
		limit = 100
	}
	limit = min(limit, 10000)

	var rows []usageRow
	switch {
	case f.KeyID != "":
		acct := f.AccountID
		if acct == "" {
			// a key's rows are its account's
			err = s.queryRow(ctx, `SELECT account_id FROM keys WHERE id = ?`, f.KeyID).Scan(&acct)
			if errors.Is(err, sql.ErrNoRows) {
				return []UsageRecord{}, nil
			}
			if err != nil {
				return nil, fmt.Errorf("ledger: usage rows: %w", err)
			}
		}
		rows, err = s.queryUsage(ctx, s.keyUsageQuery("", newestFirst), f.KeyID, acct, limit)
	case f.AccountID != "":
		rows, err = s.accountUsage(ctx, f.AccountID, limit)
	default:
		rows, err = s.queryUsage(ctx, `SELECT `+s.usageSelect()+` FROM usage ORDER BY id DESC LIMIT ?`, limit)
	}
	if err != nil {
		return nil, fmt.Errorf("ledger: usage rows: %w", err)
	}
	out := make([]UsageRecord, len(rows))
	for i := range rows {
		out[i] = rows[i].rec
	}
	return out, nil
}

// UsageByRequestID reads the usage row of one request, the one Settle
// wrote for that request id; ErrNotFound when there is none (the request
// was not billed, or is not settled yet). It reads the usage table itself,
// through its unique index on request_id, and none of the tables the
// rollup derives from it (sqlite_rollup.go), so unlike UsageRows it needs no
// catch-up: on both engines a row is there as soon as its Settle has
// returned. An id no row can have on PostgreSQL (empty, not UTF-8, or
// with a NUL byte) is not found on both engines, without a query.
func (s *Store) UsageByRequestID(ctx context.Context, requestID string) (UsageRecord, error) {
	if requestID == "" || !utf8.ValidString(requestID) || strings.IndexByte(requestID, 0) >= 0 {
		return UsageRecord{}, fmt.Errorf("ledger: usage of request %q: %w", requestID, ErrNotFound)
	}
	done, err := s.beginRead()
	if err != nil {
		return UsageRecord{}, err
	}
	defer done()
	rows, err := s.queryUsage(ctx, `SELECT `+s.usageSelect()+` FROM usage WHERE request_id = ?`, requestID)
	if err != nil {
		return UsageRecord{}, fmt.Errorf("ledger: usage of request %q: %w", requestID, err)
	}
	if len(rows) == 0 {
		return UsageRecord{}, fmt.Errorf("ledger: usage of request %q: %w", requestID, ErrNotFound)
	}
	return rows[0].rec, nil
}

// usageRow is a usage record with its row id (the tie-breaker for equal times).
type usageRow struct {
	id  int64
	rec UsageRecord
}

func newer(a, b *usageRow) bool {
	if !a.rec.CreatedAt.Equal(b.rec.CreatedAt) {
		return a.rec.CreatedAt.After(b.rec.CreatedAt)
	}
	return a.id > b.id
}

// newestFirst orders usage rows newest first (ties: the last inserted first).
const newestFirst = "created_at DESC, id DESC"

// accountUsage merges the newest rows of each of the account's keys.
func (s *Store) accountUsage(ctx context.Context, accountID string, limit int) ([]usageRow, error) {
	keyRows, err := s.query(ctx, `SELECT id FROM keys WHERE account_id = ?`, accountID)
	if err != nil {
		return nil, err
	}
	defer keyRows.Close()  // on a failed scan; closed below otherwise
	keyIDs := []string{""} // keyless rows
	for keyRows.Next() {
		var id string
		if err := keyRows.Scan(&id); err != nil {
			return nil, err
		}
		keyIDs = append(keyIDs, id)
	}
	if err := keyRows.Close(); err != nil {
		return nil, err
	}
	if err := keyRows.Err(); err != nil {
		return nil, err
	}
	q := s.keyUsageQuery("", newestFirst)
	var all []usageRow
	for _, k := range keyIDs {
		rows, err := s.queryUsage(ctx, q, k, accountID, limit)
		if err != nil {
			return nil, err
		}
		all = append(all, rows...)
	}
	slices.SortFunc(all, func(a, b usageRow) int {
		switch {
		case newer(&a, &b):
			return -1
		case newer(&b, &a):
			return 1
		}
		return 0
	})
	return all[:min(len(all), limit)], nil
}

func (s *Store) queryUsage(ctx context.Context, q string, args ...any) ([]usageRow, error) {
	rows, err := s.query(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []usageRow{}
	for rows.Next() {
		var u usageRow
		r := &u.rec
		var stream, overHold, lapsed flag
		var latency, ttft, created int64
		dest := []any{&u.id, &r.RequestID, &r.AccountID, &r.KeyID, &r.Model, &r.Provider, &r.UpstreamModel, &r.UpstreamKeyID,
			&r.ClientFormat, &stream, &r.Tokens.Input, &r.Tokens.Output, &r.Tokens.CacheRead, &r.Tokens.CacheWrite,
			&r.Tokens.Reasoning, &r.Cost, &r.Charged, &r.Hold, &r.DiscountBps, &overHold, &r.UsageSource, &r.Status,
			&r.Outcome, &latency, &ttft, &created, &r.Hosted.WebSearch, &r.Hosted.WebFetch, &r.Hosted.ImageGeneration,
			&r.HostedCost, &r.TierBps, &r.Discount}
		if s.eng.recordsLapses() {
			dest = append(dest, &lapsed)
		}
		if err := rows.Scan(dest...); err != nil {
			return nil, err
		}
		r.Stream, r.OverHold, r.HoldLapsed = bool(stream), bool(overHold), bool(lapsed)
		r.Latency, r.TTFT = time.Duration(latency)*time.Microsecond, time.Duration(ttft)*time.Microsecond
		r.CreatedAt = time.UnixMilli(created).UTC()
		out = append(out, u)
	}
	return out, rows.Err()
}

// DailyUsage is one row of the per-day rollup.
type DailyUsage struct {
	Day                                                        string // UTC date, "2006-01-02"
	KeyID, Model                                               string
	Requests, InputTokens, OutputTokens, CacheRead, CacheWrite int64
	Spent                                                      Money
	// Discount is what the plan's discounts took off the list price of
	// these requests; Spent is after it.
	Discount Money
}

// DailyUsageRows returns the rollup rows of an account's keys (or of one key
// when keyID is set) from the UTC date since (inclusive, "" = all), oldest first.
func (s *Store) DailyUsageRows(ctx context.Context, accountID, keyID, since string) ([]DailyUsage, error) {
	if err := s.eng.catchUp(ctx); err != nil {
		return nil, err
	}
	done, err := s.beginRead()
	if err != nil {
		return nil, err
	}
	defer done()
	q := `SELECT day, key_id, model, requests, input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, spent,
		discount FROM usage_daily WHERE account_id = ? AND day >= ?`
	args := []any{accountID, since}
	if keyID != "" {
		q += ` AND key_id = ?`
		args = append(args, keyID)
	}
	q += ` ORDER BY day, key_id, model`
	rows, err := s.query(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("ledger: daily usage: %w", err)
	}
	defer rows.Close()
	out := []DailyUsage{}
	for rows.Next() {
		var d DailyUsage
		if err := rows.Scan(&d.Day, &d.KeyID, &d.Model, &d.Requests, &d.InputTokens, &d.OutputTokens,
			&d.CacheRead, &d.CacheWrite, &d.Spent, &d.Discount); err != nil {
			return nil, fmt.Errorf("ledger: daily usage: %w", err)
		}
		out = append(out, d)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("ledger: daily usage: %w", err)
	}
	return out, nil
}

// Mismatch is one stored figure that differs from its recomputation from rows.
type Mismatch struct {
	AccountID  string
	KeyID      string // set for key and rollup mismatches
	Day, Model string // set for rollup mismatches
	Column     string // e.g. "accounts.balance", "keys.spent", "usage_daily.requests"
	Stored     int64
	Recomputed int64
}

// String describes the mismatch.
func (m Mismatch) String() string {
	return fmt.Sprintf("%s account=%s key=%s day=%s model=%s stored=%d recomputed=%d",
		m.Column, m.AccountID, m.KeyID, m.Day, m.Model, m.Stored, m.Recomputed)
}

// Audit recomputes every account's balance as Σcredits − Σcharged (the
// credits table is the money history: credits, top-ups, reversals,
// adjustments and debt payments, each with its signed change of the
// balance), what it owes as the Σ of the history's owed changes, its
// month's spend as Σcharged of its rows of that month (spend.go), every
// key's running totals and every daily rollup row from the usage rows
// (with PostgreSQL also what each account holds, from its holds' rows; with
// SQLite also usage_by_key's entries, from the rows), and
// reports each figure that differs from the stored one. Empty means consistent.
// It reads from one snapshot.
func (s *Store) Audit(ctx context.Context) ([]Mismatch, error) {
	if err := s.eng.catchUp(ctx); err != nil {
		return nil, err
	}
	done, err := s.beginRead()
	if err != nil {
		return nil, err
	}
	defer done()
	// one snapshot: SQLite's deferred transaction on a read-only
	// connection, PostgreSQL's repeatable read
	tx, err := s.rdb.BeginTx(ctx, s.eng.snapshot())
	if err != nil {
		return nil, fmt.Errorf("ledger: audit: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	return s.audit(ctx, func(ctx context.Context, query string) (auditRows, error) {
		return tx.QueryContext(ctx, s.q(query)) //nolint:rowserrcheck // the audit's readers check Err through auditRows
	})
}

// auditQuery runs an audit query on the audit's snapshot.
type auditQuery func(ctx context.Context, query string) (auditRows, error)

// auditRows are the rows of an audit query: *sql.Rows, or pgx's (Copy
// audits its copy inside the transaction that writes it). Their readers
// check Err after Close: *sql.Rows' Close does not return the error that
// ended the rows.
type auditRows interface {
	Next() bool
	Scan(dest ...any) error
	Close() error
	Err() error
}

// auditAccounts runs an audit query whose rows are (account id, stored
// figure, recomputed figure) and adds to out a mismatch of column for each
// row where the two differ; what names the check in errors.
func auditAccounts(ctx context.Context, query auditQuery,
	out []Mismatch, what, column, q string) ([]Mismatch, error) {
	rows, err := query(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("ledger: audit %s: %w", what, err)
	}
	for rows.Next() {
		var id string
		var stored, re int64
		if err := rows.Scan(&id, &stored, &re); err != nil {
			rows.Close()
			return nil, fmt.Errorf("ledger: audit %s: %w", what, err)
		}
		if stored != re {
			out = append(out, Mismatch{AccountID: id, Column: column, Stored: stored, Recomputed: re})
		}
	}
	if err := rows.Close(); err != nil {
		return nil, fmt.Errorf("ledger: audit %s: %w", what, err)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("ledger: audit %s: %w", what, err)
	}
	return out, nil
}

// audit is Audit's queries, run by query on one snapshot.
func (s *Store) audit(ctx context.Context, query auditQuery) ([]Mismatch, error) {
	conn := struct {
		QueryContext func(ctx context.Context, query string) (auditRows, error)
	}{query}

	out := []Mismatch{}
	rows, err := conn.QueryContext(ctx, `
		SELECT a.id, a.balance, coalesce(c.s, 0) - coalesce(u.s, 0), a.owed, coalesce(c.o, 0)
		FROM accounts a
		LEFT JOIN (SELECT account_id, sum(amount) AS s, sum(owed) AS o FROM credits GROUP BY account_id) c ON c.account_id = a.id
		LEFT JOIN (SELECT account_id, sum(charged) AS s FROM usage GROUP BY account_id) u ON u.account_id = a.id
		ORDER BY a.id`)
	if err != nil {
		return nil, fmt.Errorf("ledger: audit balances: %w", err)
	}
	for rows.Next() {
		var id string
		var stored, re, owed, reOwed int64
		if err := rows.Scan(&id, &stored, &re, &owed, &reOwed); err != nil {
			rows.Close()
			return nil, fmt.Errorf("ledger: audit balances: %w", err)
		}
		if stored != re {
			out = append(out, Mismatch{AccountID: id, Column: "accounts.balance", Stored: stored, Recomputed: re})
		}
		if owed != reOwed {
			out = append(out, Mismatch{AccountID: id, Column: "accounts.owed", Stored: owed, Recomputed: reOwed})
		}
	}
	if err := rows.Close(); err != nil {
		return nil, fmt.Errorf("ledger: audit balances: %w", err)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("ledger: audit balances: %w", err)
	}

	if out, err = s.eng.auditHolds(ctx, query, out); err != nil {
		return nil, err
	}

	if out, err = auditAccounts(ctx, query, out, "month spend", "accounts.month_spend", `
		WITH u AS (
			SELECT account_id, CAST(replace(substr(`+s.utcDay("created_at")+`, 1, 7), '-', '') AS INTEGER) AS month,
				sum(charged) AS s
			FROM usage GROUP BY 1, 2
		)
		SELECT a.id, a.month_spend, coalesce(u.s, 0)
		FROM accounts a LEFT JOIN u ON u.account_id = a.id AND u.month = a.spend_month
		ORDER BY a.id`); err != nil {
		return nil, err
	}

	rows, err = conn.QueryContext(ctx, `
		SELECT k.id, k.account_id, k.requests, k.input_tokens, k.output_tokens, k.spent,
			coalesce(u.n, 0), coalesce(u.i, 0), coalesce(u.o, 0), coalesce(u.s, 0)
		FROM keys k LEFT JOIN (
			SELECT key_id, count(*) AS n, sum(input_tokens) AS i, sum(output_tokens) AS o, sum(charged) AS s
			FROM usage WHERE `+s.rolledUsage()+` GROUP BY key_id
		) u ON u.key_id = k.id
		ORDER BY k.id`)
	if err != nil {
		return nil, fmt.Errorf("ledger: audit keys: %w", err)
	}
	for rows.Next() {
		var id, acct string
		var st, re [4]int64
		if err := rows.Scan(&id, &acct, &st[0], &st[1], &st[2], &st[3], &re[0], &re[1], &re[2], &re[3]); err != nil {
			rows.Close()
			return nil, fmt.Errorf("ledger: audit keys: %w", err)
		}
		for i, col := range [4]string{"keys.requests", "keys.input_tokens", "keys.output_tokens", "keys.spent"} {
			if st[i] != re[i] {
				out = append(out, Mismatch{AccountID: acct, KeyID: id, Column: col, Stored: st[i], Recomputed: re[i]})
			}
		}
	}
	if err := rows.Close(); err != nil {
		return nil, fmt.Errorf("ledger: audit keys: %w", err)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("ledger: audit keys: %w", err)
	}

	rows, err = conn.QueryContext(ctx, `
		WITH u AS (
			SELECT `+s.utcDay("created_at")+` AS day, key_id, model,
				min(account_id) AS account_id, count(*) AS n, sum(input_tokens) AS i, sum(output_tokens) AS o,
				sum(cache_read_tokens) AS cr, sum(cache_write_tokens) AS cw, sum(charged) AS s, sum(discount) AS dc
			FROM usage WHERE `+s.rolledUsage()+` GROUP BY 1, 2, 3
		)
		SELECT coalesce(d.day, u.day), coalesce(d.key_id, u.key_id), coalesce(d.model, u.model),
			coalesce(d.account_id, u.account_id),
			coalesce(d.requests, 0), coalesce(d.input_tokens, 0), coalesce(d.output_tokens, 0),
			coalesce(d.cache_read_tokens, 0), coalesce(d.cache_write_tokens, 0), coalesce(d.spent, 0), coalesce(d.discount, 0),
			coalesce(u.n, 0), coalesce(u.i, 0), coalesce(u.o, 0), coalesce(u.cr, 0), coalesce(u.cw, 0), coalesce(u.s, 0),
			coalesce(u.dc, 0)
		FROM usage_daily d FULL OUTER JOIN u ON u.day = d.day AND u.key_id = d.key_id AND u.model = d.model
		ORDER BY 1, 2, 3`)
	if err != nil {
		return nil, fmt.Errorf("ledger: audit rollups: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var day, key, model, acct string
		var st, re [7]int64
		if err := rows.Scan(&day, &key, &model, &acct, &st[0], &st[1], &st[2], &st[3], &st[4], &st[5], &st[6],
			&re[0], &re[1], &re[2], &re[3], &re[4], &re[5], &re[6]); err != nil {
			return nil, fmt.Errorf("ledger: audit rollups: %w", err)
		}
		for i, col := range [7]string{"usage_daily.requests", "usage_daily.input_tokens", "usage_daily.output_tokens",
			"usage_daily.cache_read_tokens", "usage_daily.cache_write_tokens", "usage_daily.spent", "usage_daily.discount"} {
			if st[i] != re[i] {
				out = append(out, Mismatch{AccountID: acct, KeyID: key, Day: day, Model: model, Column: col, Stored: st[i], Recomputed: re[i]})
			}
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("ledger: audit rollups: %w", err)
	}
	return s.eng.auditDerived(ctx, query, out)
}
