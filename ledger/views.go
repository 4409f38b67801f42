package ledger

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// RegisterModel records a model id the first time it is seen and returns
// the time of that first registration, which is kept forever.
func (s *Store) RegisterModel(ctx context.Context, id string) (created time.Time, err error) {
	if id == "" {
		return time.Time{}, fmt.Errorf("ledger: register model: empty id")
	}
	c := getCommand(cmdRegisterModel)
	defer putCommand(c)
	c.id, c.now = id, time.Now().UnixMilli()
	if err := s.submit(ctx, c); err != nil {
		return time.Time{}, err
	}
	if c.err != nil {
		return time.Time{}, c.err
	}
	return time.UnixMilli(c.now).UTC(), nil
}

// UsageFilter selects usage rows. Empty fields match everything.
type UsageFilter struct {
	AccountID, KeyID string
	Limit            int // default 100, at most 10000
}

const usageColumns = `request_id, account_id, key_id, model, provider, upstream_model, upstream_key_id, client_format,
	stream, input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, reasoning_tokens,
	cost, charged, hold, discount_bps, over_hold, usage_source, status, outcome, latency_us, ttft_us, created_at`

// UsageRows returns usage rows, newest first.
func (s *Store) UsageRows(ctx context.Context, f UsageFilter) ([]UsageRecord, error) {
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
	var where []string
	var args []any
	if f.AccountID != "" {
		where = append(where, "account_id = ?")
		args = append(args, f.AccountID)
	}
	if f.KeyID != "" {
		where = append(where, "key_id = ?")
		args = append(args, f.KeyID)
	}
	q := `SELECT ` + usageColumns + ` FROM usage`
	if len(where) > 0 {
		q += ` WHERE ` + strings.Join(where, " AND ")
	}
	q += ` ORDER BY created_at DESC, id DESC LIMIT ?`
	args = append(args, limit)
	rows, err := s.rdb.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("ledger: usage rows: %w", err)
	}
	defer rows.Close()
	out := []UsageRecord{}
	for rows.Next() {
		var r UsageRecord
		var stream, overHold int64
		var latency, ttft, created int64
		if err := rows.Scan(&r.RequestID, &r.AccountID, &r.KeyID, &r.Model, &r.Provider, &r.UpstreamModel, &r.UpstreamKeyID,
			&r.ClientFormat, &stream, &r.Tokens.Input, &r.Tokens.Output, &r.Tokens.CacheRead, &r.Tokens.CacheWrite,
			&r.Tokens.Reasoning, &r.Cost, &r.Charged, &r.Hold, &r.DiscountBps, &overHold, &r.UsageSource, &r.Status,
			&r.Outcome, &latency, &ttft, &created); err != nil {
			return nil, fmt.Errorf("ledger: usage rows: %w", err)
		}
		r.Stream, r.OverHold = stream != 0, overHold != 0
		r.Latency, r.TTFT = time.Duration(latency)*time.Microsecond, time.Duration(ttft)*time.Microsecond
		r.CreatedAt = time.UnixMilli(created).UTC()
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("ledger: usage rows: %w", err)
	}
	return out, nil
}

// DailyUsage is one row of the per-day rollup.
type DailyUsage struct {
	Day                                                        string // UTC date, "2006-01-02"
	KeyID, Model                                               string
	Requests, InputTokens, OutputTokens, CacheRead, CacheWrite int64
	Spent                                                      Money
}

// DailyUsageRows returns the rollup rows of an account's keys (or of one key
// when keyID is set) from the UTC date since (inclusive, "" = all), oldest first.
func (s *Store) DailyUsageRows(ctx context.Context, accountID, keyID, since string) ([]DailyUsage, error) {
	done, err := s.beginRead()
	if err != nil {
		return nil, err
	}
	defer done()
	q := `SELECT day, key_id, model, requests, input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, spent
		FROM usage_daily WHERE account_id = ? AND day >= ?`
	args := []any{accountID, since}
	if keyID != "" {
		q += ` AND key_id = ?`
		args = append(args, keyID)
	}
	q += ` ORDER BY day, key_id, model`
	rows, err := s.rdb.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("ledger: daily usage: %w", err)
	}
	defer rows.Close()
	out := []DailyUsage{}
	for rows.Next() {
		var d DailyUsage
		if err := rows.Scan(&d.Day, &d.KeyID, &d.Model, &d.Requests, &d.InputTokens, &d.OutputTokens,
			&d.CacheRead, &d.CacheWrite, &d.Spent); err != nil {
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

// Audit recomputes every account's balance as Σcredits − Σcharged, every
// key's running totals and every daily rollup row from the usage rows, and
// reports each figure that differs from the stored one. Empty means consistent.
// It reads from one snapshot.
func (s *Store) Audit(ctx context.Context) ([]Mismatch, error) {
	done, err := s.beginRead()
	if err != nil {
		return nil, err
	}
	defer done()
	conn, err := s.rdb.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("ledger: audit: %w", err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "BEGIN"); err != nil {
		return nil, fmt.Errorf("ledger: audit: %w", err)
	}
	defer func() { _, _ = conn.ExecContext(context.WithoutCancel(ctx), "ROLLBACK") }()

	out := []Mismatch{}
	rows, err := conn.QueryContext(ctx, `
		SELECT a.id, a.balance,
			coalesce((SELECT sum(amount) FROM credits c WHERE c.account_id = a.id), 0)
			- coalesce((SELECT sum(charged) FROM usage u WHERE u.account_id = a.id), 0)
		FROM accounts a ORDER BY a.id`)
	if err != nil {
		return nil, fmt.Errorf("ledger: audit balances: %w", err)
	}
	for rows.Next() {
		var id string
		var stored, re int64
		if err := rows.Scan(&id, &stored, &re); err != nil {
			rows.Close()
			return nil, fmt.Errorf("ledger: audit balances: %w", err)
		}
		if stored != re {
			out = append(out, Mismatch{AccountID: id, Column: "accounts.balance", Stored: stored, Recomputed: re})
		}
	}
	if err := rows.Close(); err != nil {
		return nil, fmt.Errorf("ledger: audit balances: %w", err)
	}

	rows, err = conn.QueryContext(ctx, `
		SELECT k.id, k.account_id, k.requests, k.input_tokens, k.output_tokens, k.spent,
			coalesce(u.n, 0), coalesce(u.i, 0), coalesce(u.o, 0), coalesce(u.s, 0)
		FROM keys k LEFT JOIN (
			SELECT key_id, count(*) AS n, sum(input_tokens) AS i, sum(output_tokens) AS o, sum(charged) AS s
			FROM usage GROUP BY key_id
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

	rows, err = conn.QueryContext(ctx, `
		WITH u AS (
			SELECT strftime('%Y-%m-%d', created_at / 1000, 'unixepoch') AS day, key_id, model,
				min(account_id) AS account_id, count(*) AS n, sum(input_tokens) AS i, sum(output_tokens) AS o,
				sum(cache_read_tokens) AS cr, sum(cache_write_tokens) AS cw, sum(charged) AS s
			FROM usage GROUP BY 1, 2, 3
		)
		SELECT coalesce(d.day, u.day), coalesce(d.key_id, u.key_id), coalesce(d.model, u.model),
			coalesce(d.account_id, u.account_id),
			coalesce(d.requests, 0), coalesce(d.input_tokens, 0), coalesce(d.output_tokens, 0),
			coalesce(d.cache_read_tokens, 0), coalesce(d.cache_write_tokens, 0), coalesce(d.spent, 0),
			coalesce(u.n, 0), coalesce(u.i, 0), coalesce(u.o, 0), coalesce(u.cr, 0), coalesce(u.cw, 0), coalesce(u.s, 0)
		FROM usage_daily d FULL OUTER JOIN u ON u.day = d.day AND u.key_id = d.key_id AND u.model = d.model
		ORDER BY 1, 2, 3`)
	if err != nil {
		return nil, fmt.Errorf("ledger: audit rollups: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var day, key, model, acct string
		var st, re [6]int64
		if err := rows.Scan(&day, &key, &model, &acct, &st[0], &st[1], &st[2], &st[3], &st[4], &st[5],
			&re[0], &re[1], &re[2], &re[3], &re[4], &re[5]); err != nil {
			return nil, fmt.Errorf("ledger: audit rollups: %w", err)
		}
		for i, col := range [6]string{"usage_daily.requests", "usage_daily.input_tokens", "usage_daily.output_tokens",
			"usage_daily.cache_read_tokens", "usage_daily.cache_write_tokens", "usage_daily.spent"} {
			if st[i] != re[i] {
				out = append(out, Mismatch{AccountID: acct, KeyID: key, Day: day, Model: model, Column: col, Stored: st[i], Recomputed: re[i]})
			}
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("ledger: audit rollups: %w", err)
	}
	return out, nil
}
