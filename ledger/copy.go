package ledger

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
)

// CopyReport says what Copy moved and checked.
type CopyReport struct {
	// Rows copied, per table (accounts, keys, credits, usage, usage_daily,
	// models, availability_minutes, availability_daily, incidents, logins,
	// sessions, login_tokens).
	Rows map[string]int64
	// Accounts whose balance was checked against Σ credits − Σ charged.
	Accounts int64
	// Totals over all accounts, equal in the source and the copy.
	Balance, Credited, Charged Money
}

// String sums the report up in one line.
func (r CopyReport) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d accounts, balances %s = credits %s − charged %s;", r.Accounts, r.Balance, r.Credited, r.Charged)
	for _, t := range copyTables {
		fmt.Fprintf(&b, " %s %d", t.name, r.Rows[t.name])
	}
	return b.String()
}

// copyTable is one table Copy moves: its columns (as both engines name
// them), the flags among them (SQLite's 0/1, PostgreSQL's booleans), the
// order it is read in, and the identity column whose sequence follows the
// copied ids.
type copyTable struct {
	name, order, identity string
	cols                  []string
	flags                 map[string]bool
}

// copyTables in an order that the foreign keys accept.
var copyTables = []copyTable{
	{name: "accounts", order: "id", cols: []string{"id", "email", "plan", "state", "balance", "created_at", "spend_month", "month_spend", "owed", "suspended_for"}},
	{name: "keys", order: "rowid", cols: append([]string{"id", "account_id", "hash", "label", "prefix", "created_at", "deleted_at",
		"last_used_at", "requests", "input_tokens", "output_tokens", "spent"}, columnList(limitColumns)...)},
	{name: "credits", order: "id", identity: "id", cols: []string{"id", "account_id", "amount", "reference", "reason", "created_at",
		"kind", "owed", "balance_after", "owed_after", "payment"}},
	{name: "usage", order: "id", identity: "id", cols: append([]string{"id"}, columnList(usageInsertColumns)...),
		flags: map[string]bool{"stream": true, "over_hold": true}},
	{name: "usage_daily", order: "day, key_id, model", cols: []string{"day", "key_id", "model", "account_id", "requests", "input_tokens",
		"output_tokens", "cache_read_tokens", "cache_write_tokens", "spent", "discount"}},
	{name: "models", order: "id", cols: []string{"id", "created_at"}},
	{name: "availability_minutes", order: "provider, minute", cols: append([]string{"provider", "minute"}, availColumns()...)},
	{name: "availability_daily", order: "provider, day", cols: append([]string{"provider", "day"}, availColumns()...)},
	{name: "incidents", order: "id", identity: "id", cols: []string{"id", "provider", "cause", "started_at", "ended_at"}},
	{name: "logins", order: "account_id", cols: []string{"account_id", "password_hash", "created_at", "email_state"}},
	{name: "sessions", order: "token_hash", cols: []string{"token_hash", "account_id", "csrf", "created_at", "expires_at"}},
	{name: "login_tokens", order: "token_hash", cols: []string{"token_hash", "account_id", "purpose", "created_at", "expires_at"}},
	{name: "alerts_fired", order: "account_id, alert", cols: []string{"account_id", "alert", "detail", "fired_at"}},
	{name: "alert_settings", order: "account_id", cols: columnList(alertSettingsColumns)},
	{name: "alert_deliveries", order: "id", cols: append(columnList(deliveryColumns), "lease_until", "leased_by")},
}

// columnList splits a query's list of columns ("id, account_id,\n\tlabel")
// into their names, so that Copy moves the columns the ledger's own
// queries name.
func columnList(cols string) []string {
	return strings.Fields(strings.ReplaceAll(cols, ",", " "))
}

// Copy copies the whole content of the ledger src (a SQLite ledger, as a
// single server kept it) into dst, an empty PostgreSQL ledger, for moving
// up to several instances: accounts with their balances, keys with
// their hashes and totals, credits, usage rows, daily rollups, models,
// availability history and incidents, console logins, sessions and
// password reset and verification tokens. It
// refuses a destination that holds anything. src is read in one snapshot;
// the copy is one transaction that commits only after the copy is checked:
// the same row counts and totals as the source, and for every account
// balance = Σ credits − Σ charged, with key totals and rollups equal to
// their recomputation from the rows (Audit). Holds are not copied: stop
// the gateway that uses src first (open src with ServerLock to be sure).
func Copy(ctx context.Context, dst, src *Store) (CopyReport, error) {
	rep := CopyReport{Rows: map[string]int64{}}
	pg, ok := dst.eng.(*pgEngine)
	if !ok {
		return rep, errors.New("ledger: copy: the destination must be a PostgreSQL ledger")
	}
	if dst == src {
		return rep, errors.New("ledger: copy: the source is the destination")
	}
	// the source's rollups include every row (sqlite_rollup.go)
	if err := src.eng.catchUp(ctx); err != nil {
		return rep, err
	}
	srcDone, err := src.beginRead()
	if err != nil {
		return rep, err
	}
	defer srcDone()
	dstDone, err := dst.beginRead()
	if err != nil {
		return rep, err
	}
	defer dstDone()

	stx, err := src.rdb.BeginTx(ctx, src.eng.snapshot())
	if err != nil {
		return rep, fmt.Errorf("ledger: copy: read the source: %w", err)
	}
	defer func() { _ = stx.Rollback() }()

	tx, err := pg.pool.Begin(ctx)
	if err != nil {
		return rep, fmt.Errorf("ledger: copy: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	// nobody else writes the destination's tables until this commits
	for _, t := range copyTables {
		var n int64
		if err := tx.QueryRow(ctx, `SELECT count(*) FROM `+t.name).Scan(&n); err != nil {
			return rep, fmt.Errorf("ledger: copy: %w", err)
		}
		if n > 0 {
			return rep, fmt.Errorf("ledger: copy: the destination is not empty (%d rows in %s): copy into a new database", n, t.name)
		}
	}

	for _, t := range copyTables {
		order := t.order
		if order == "rowid" {
			order = src.eng.keyInsertionOrder()
		}
		rows, err := stx.QueryContext(ctx, `SELECT `+strings.Join(t.cols, ", ")+` FROM `+t.name+` ORDER BY `+order) //nolint:gosec,rowserrcheck // G202: identifiers only, copyTables' literals and keyInsertionOrder's, no value spliced in; rows.Err: CopyFrom reads it through copySource.Err
		if err != nil {
			return rep, fmt.Errorf("ledger: copy: read %s: %w", t.name, err)
		}
		n, err := tx.CopyFrom(ctx, pgx.Identifier{t.name}, t.cols, &copySource{rows: rows, t: t})
		rows.Close() //nolint:sqlclosecheck // closed once CopyFrom is done with them, before the next table is read: a defer would keep every table's rows open until Copy returns
		if err != nil {
			return rep, fmt.Errorf("ledger: copy %s: %w", t.name, err)
		}
		rep.Rows[t.name] = n
		if t.identity != "" {
			if _, err := tx.Exec(ctx, `SELECT setval(pg_get_serial_sequence('`+t.name+`', '`+t.identity+`'),
				(SELECT coalesce(max(`+t.identity+`), 0) + 1 FROM `+t.name+`), false)`); err != nil {
				return rep, fmt.Errorf("ledger: copy %s: %w", t.name, err)
			}
		}
	}

	// the same rows and totals on both sides
	totals := `SELECT (SELECT count(*) FROM accounts), (SELECT coalesce(sum(balance), 0) FROM accounts),
		(SELECT coalesce(sum(amount), 0) FROM credits), (SELECT coalesce(sum(charged), 0) FROM usage)`
	var want, got [4]int64
	if err := stx.QueryRowContext(ctx, totals).Scan(&want[0], &want[1], &want[2], &want[3]); err != nil {
		return rep, fmt.Errorf("ledger: copy: source totals: %w", err)
	}
	if err := tx.QueryRow(ctx, totals).Scan(&got[0], &got[1], &got[2], &got[3]); err != nil {
		return rep, fmt.Errorf("ledger: copy: totals: %w", err)
	}
	if want != got {
		return rep, fmt.Errorf("ledger: copy: the copy's totals (accounts, balances, credits, charged) %v differ from the source's %v", got, want)
	}
	for _, t := range copyTables {
		var n int64
		if err := stx.QueryRowContext(ctx, `SELECT count(*) FROM `+t.name).Scan(&n); err != nil {
			return rep, fmt.Errorf("ledger: copy: %w", err)
		}
		if n != rep.Rows[t.name] {
			return rep, fmt.Errorf("ledger: copy: %s: %d rows copied of %d", t.name, rep.Rows[t.name], n)
		}
	}
	mismatches, err := dst.audit(ctx, func(ctx context.Context, query string) (auditRows, error) {
		rows, err := tx.Query(ctx, query)
		if err != nil {
			return nil, err
		}
		return pgxAuditRows{rows}, nil
	})
	if err != nil {
		return rep, fmt.Errorf("ledger: copy: check: %w", err)
	}
	if len(mismatches) > 0 {
		return rep, fmt.Errorf("ledger: copy: %d figures differ from their recomputation from the rows (the source's own Audit shows them), the first: %s",
			len(mismatches), mismatches[0])
	}
	if err := tx.Commit(ctx); err != nil {
		return rep, fmt.Errorf("ledger: copy: commit: %w", err)
	}
	rep.Accounts, rep.Balance, rep.Credited, rep.Charged = got[0], Money(got[1]), Money(got[2]), Money(got[3])
	return rep, nil
}

// copySource feeds CopyFrom with a source table's rows, flags as booleans.
type copySource struct {
	rows *sql.Rows
	t    copyTable
	vals []any
	err  error
}

func (c *copySource) Next() bool {
	if !c.rows.Next() {
		return false
	}
	if c.vals == nil {
		c.vals = make([]any, len(c.t.cols))
	}
	ptrs := make([]any, len(c.vals))
	for i := range c.vals {
		ptrs[i] = &c.vals[i]
	}
	if err := c.rows.Scan(ptrs...); err != nil {
		c.err = err
		return false
	}
	for i, col := range c.t.cols {
		if c.t.flags[col] {
			var f flag
			if err := f.Scan(c.vals[i]); err != nil {
				c.err = err
				return false
			}
			c.vals[i] = bool(f)
		}
	}
	return true
}

func (c *copySource) Values() ([]any, error) { return c.vals, c.err }

func (c *copySource) Err() error {
	if c.err != nil {
		return c.err
	}
	return c.rows.Err()
}

// pgxAuditRows adapts pgx's rows to auditRows.
type pgxAuditRows struct{ pgx.Rows }

func (r pgxAuditRows) Close() error {
	r.Rows.Close()
	return r.Rows.Err()
}
