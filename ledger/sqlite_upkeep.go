package ledger

import (
	"context"
	"database/sql"
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
