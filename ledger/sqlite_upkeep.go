package ledger

// The SQLite engine's reads beside the requests: the reload's, and the
// audit's own checks (the rollup is sqlite_rollup.go's).

import (
	"context"
	"database/sql"
	"fmt"
)

// writerQuery runs query on the writer connection, which sees every commit
// of this process and of others; the reload's queries are prepared.
func (e *sqliteEngine) writerQuery(ctx context.Context, query string) (*sql.Rows, error) {
	switch query {
	case reloadAccountsQuery:
		return e.st.reloadAccounts.QueryContext(ctx)
	case reloadKeysQuery:
		return e.st.reloadKeys.QueryContext(ctx)
	}
	return e.wconn.QueryContext(ctx, query)
}

// auditHolds adds nothing: the holds are only in memory.
func (e *sqliteEngine) auditHolds(_ context.Context, _ auditQuery, out []Mismatch) ([]Mismatch, error) {
	return out, nil
}

// auditDerived checks that usage_by_key has an entry for each
// rolled-up usage row, as the row has it, and nothing else: its entries'
// count against the rows', and the rows that have their entry.
func (e *sqliteEngine) auditDerived(ctx context.Context, query auditQuery, out []Mismatch) ([]Mismatch, error) {
	rows, err := query(ctx, `SELECT (SELECT count(*) FROM usage_by_key), count(*),
			count(*) FILTER (WHERE EXISTS (SELECT 1 FROM usage_by_key k WHERE k.key_id = u.key_id
				AND k.account_id = u.account_id AND k.created_at = u.created_at AND k.id = u.id))
		FROM usage u WHERE `+e.rolledUsage())
	if err != nil {
		return nil, fmt.Errorf("ledger: audit usage_by_key: %w", err)
	}
	defer rows.Close()
	var entries, rolled, indexed int64
	if !rows.Next() {
		return nil, fmt.Errorf("ledger: audit usage_by_key: no row: %w", rows.Err())
	}
	if err := rows.Scan(&entries, &rolled, &indexed); err != nil {
		return nil, fmt.Errorf("ledger: audit usage_by_key: %w", err)
	}
	if entries != rolled {
		out = append(out, Mismatch{Column: "usage_by_key.entries", Stored: entries, Recomputed: rolled})
	}
	if indexed != rolled {
		out = append(out, Mismatch{Column: "usage_by_key.rows", Stored: indexed, Recomputed: rolled})
	}
	return out, nil
}
