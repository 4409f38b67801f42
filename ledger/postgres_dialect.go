package ledger

import (
	"context"
	"database/sql"
)

// The PostgreSQL engine's SQL, where it differs from SQLite's (engine.go,
// dialect).

// rebind rewrites ? placeholders as $1, $2, …; the queries never hold a ?
// inside a string literal. Rewrites are cached per store.
func (p *pgEngine) rebind(query string) string {
	if v, ok := p.rebound.Load(query); ok {
		return v.(string)
	}
	out := rebind(query)
	p.rebound.Store(query, out)
	return out
}

func (p *pgEngine) utcDay(ms string) string {
	return "to_char(to_timestamp((" + ms + ") / 1000) AT TIME ZONE 'UTC', 'YYYY-MM-DD')"
}

func (p *pgEngine) keyInsertionOrder() string { return "seq" }

// heldColumn is the accounts' held: every instance's holds.
func (p *pgEngine) heldColumn() string { return "held" }

func (p *pgEngine) forUpdate() string { return " FOR UPDATE" }

func (p *pgEngine) recordsLapses() bool { return true }

// rolledUsage is every row: the derived tables are written with each batch.
func (p *pgEngine) rolledUsage() string { return "true" }

func (p *pgEngine) keyUsageQuery(cond, order string) string {
	return `SELECT ` + p.s.usageSelect() + ` FROM usage WHERE key_id = ? AND account_id = ?` + cond +
		` ORDER BY ` + order + ` LIMIT ?`
}

func (p *pgEngine) keyTotalsQuery() string {
	return `SELECT requests, input_tokens, output_tokens, spent, last_used_at FROM keys WHERE id = ?`
}

// snapshot is a read-only repeatable read transaction.
func (p *pgEngine) snapshot() *sql.TxOptions {
	return &sql.TxOptions{Isolation: sql.LevelRepeatableRead, ReadOnly: true}
}

// pgTx is a database/sql transaction on the PostgreSQL pool that takes
// queries with ? placeholders.
type pgTx struct {
	s  *Store
	tx *sql.Tx
}

func (t pgTx) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	return t.tx.ExecContext(ctx, t.s.q(query), args...)
}

func (t pgTx) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	return t.tx.QueryRowContext(ctx, t.s.q(query), args...)
}
