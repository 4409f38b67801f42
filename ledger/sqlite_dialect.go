package ledger

import "database/sql"

// The SQLite engine's SQL, where it differs from PostgreSQL's (engine.go,
// dialect).

// rebind returns query as it is: SQLite takes ? placeholders.
func (e *sqliteEngine) rebind(query string) string { return query }

func (e *sqliteEngine) utcDay(ms string) string {
	return "strftime('%Y-%m-%d', (" + ms + ") / 1000, 'unixepoch')"
}

func (e *sqliteEngine) keyInsertionOrder() string { return "rowid" }

// heldColumn is 0: the holds are in this process's memory (localHeld).
func (e *sqliteEngine) heldColumn() string { return "0" }

// forUpdate is empty: the single writer needs no row locks.
func (e *sqliteEngine) forUpdate() string { return "" }

func (e *sqliteEngine) recordsLapses() bool { return false }

// rolledUsage selects the rows up to usage_rollup.rolled (sqlite_rollup.go).
func (e *sqliteEngine) rolledUsage() string { return "id <= (SELECT rolled FROM usage_rollup)" }

// keyUsageQuery reads the rows through usage_by_key.
func (e *sqliteEngine) keyUsageQuery(cond, order string) string {
	return `SELECT ` + e.s.usageSelect() + ` FROM usage WHERE id IN (SELECT id FROM usage_by_key
		WHERE key_id = ? AND account_id = ?` + cond + ` ORDER BY ` + order + ` LIMIT ?) ORDER BY ` + order
}

func (e *sqliteEngine) keyTotalsQuery() string { return keyUsageWithTail }

// keyUsageWithTail (SQLite) is a key's running totals plus its rows in
// the tail that the rollup has yet to add (sqlite_rollup.go), read in one
// statement: a client polling its usage (GET /api/usage) costs a read of
// at most a second's rows, never a rollup.
const keyUsageWithTail = `SELECT k.requests + t.n, k.input_tokens + t.i, k.output_tokens + t.o, k.spent + t.s,
		CASE WHEN t.l IS NULL THEN k.last_used_at ELSE max(coalesce(k.last_used_at, 0), t.l) END
	FROM keys AS k, (SELECT count(*) AS n, coalesce(sum(input_tokens), 0) AS i, coalesce(sum(output_tokens), 0) AS o,
			coalesce(sum(charged), 0) AS s, max(created_at) AS l
		FROM usage WHERE id > (SELECT rolled FROM usage_rollup) AND key_id = ?1) AS t
	WHERE k.id = ?1`

// snapshot is a deferred transaction (on a read-only connection), which
// reads one snapshot already.
func (e *sqliteEngine) snapshot() *sql.TxOptions { return &sql.TxOptions{} }
