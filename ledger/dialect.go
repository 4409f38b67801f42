package ledger

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"strings"
)

// The read side of the ledger is one code path for both engines: the
// queries are written once, with SQLite's ? placeholders, and run on a
// database/sql pool: SQLite's read-only pool, or for PostgreSQL a
// database/sql view of the pgx pool, after the engine rewrites the
// placeholders as $1, $2, …. The few expressions that differ between the
// two are the engine's (engine.go, dialect).

// q returns query in the store's dialect.
func (s *Store) q(query string) string { return s.eng.rebind(query) }

// rebind rewrites ? placeholders as $1, $2, ….
func rebind(query string) string {
	if !strings.Contains(query, "?") {
		return query
	}
	var b strings.Builder
	b.Grow(len(query) + 16)
	n := 0
	for i := 0; i < len(query); i++ {
		if query[i] == '?' {
			n++
			b.WriteByte('$')
			b.WriteString(strconv.Itoa(n))
			continue
		}
		b.WriteByte(query[i])
	}
	return b.String()
}

// query, queryRow and exec run a query on the read pool in the store's dialect.
func (s *Store) query(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	return s.rdb.QueryContext(ctx, s.q(query), args...)
}

func (s *Store) queryRow(ctx context.Context, query string, args ...any) *sql.Row {
	return s.rdb.QueryRowContext(ctx, s.q(query), args...)
}

// utcDay is an SQL expression for the UTC date ('YYYY-MM-DD') of ms, an
// expression in unix milliseconds.
func (s *Store) utcDay(ms string) string { return s.eng.utcDay(ms) }

// usageSelect is the column list UsageRows reads, in scanUsage's order.
func (s *Store) usageSelect() string {
	if s.eng.recordsLapses() {
		return "id, " + usageInsertColumns + ", hold_lapsed"
	}
	return "id, " + usageInsertColumns
}

// rolledUsage is the condition on usage rows that selects the ones the
// derived tables (usage_daily, the keys' totals, usage_by_key) include.
func (s *Store) rolledUsage() string { return s.eng.rolledUsage() }

// keyUsageQuery is the query of the usage rows of one key of one account
// that match cond (a condition on created_at and id, "" or starting with
// " AND "), in order, at most a limit of them; its arguments are the key
// id, the account id, cond's, then the limit. SQLite reads them through
// usage_by_key: its callers call catchUp first.
func (s *Store) keyUsageQuery(cond, order string) string { return s.eng.keyUsageQuery(cond, order) }

// flag scans a boolean column stored as SQLite's 0/1 INTEGER or as
// PostgreSQL's boolean.
type flag bool

// Scan implements sql.Scanner.
func (f *flag) Scan(v any) error {
	switch v := v.(type) {
	case bool:
		*f = flag(v)
	case int64:
		*f = v != 0
	case nil:
		*f = false
	default:
		return fmt.Errorf("ledger: cannot scan %T into a flag", v)
	}
	return nil
}

// execer is what a write inside a transaction needs: SQLite's writer
// connection, or a PostgreSQL transaction (which rewrites placeholders).
type execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}
