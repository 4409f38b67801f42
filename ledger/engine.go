package ledger

import (
	"context"
	"database/sql"
)

// engine is what a Store needs of its database beyond the queries both
// engines share: the few SQL expressions that differ, how a hold is
// reserved, extended and let go, how a batch of writes commits, the other
// writes, and the upkeep (seeing other processes' changes, the rollup,
// closing). sqliteEngine (sqlite*.go) and pgEngine (postgres*.go) are its
// two implementations; the money rules that both follow (a hold settles
// exactly once, the over-hold, the audit) are written once above them, on
// Store and Hold.
type engine interface {
	dialect
	holdKeeper
	writes
	upkeep
}

// dialect is the SQL that differs between the engines. The queries both
// share are written with SQLite's ? placeholders (dialect.go).
type dialect interface {
	// rebind returns query with its ? placeholders in the engine's form.
	rebind(query string) string
	// utcDay is an SQL expression for the UTC date ('YYYY-MM-DD') of ms,
	// an expression in unix milliseconds.
	utcDay(ms string) string
	// keyInsertionOrder is the column that orders keys rows by insertion.
	keyInsertionOrder() string
	// heldColumn is the accounts' column (or constant) of what they hold.
	heldColumn() string
	// forUpdate locks the rows a write's SELECT reads, where the engine
	// needs it.
	forUpdate() string
	// recordsLapses reports whether usage rows have hold_lapsed.
	recordsLapses() bool
	// rolledUsage is the condition on usage rows that selects the ones
	// the derived tables (usage_daily, the keys' totals, usage_by_key)
	// include.
	rolledUsage() string
	// keyUsageQuery is Store.keyUsageQuery's query (dialect.go).
	keyUsageQuery(cond, order string) string
	// keyTotalsQuery reads a key's running totals by its id (KeyUsage).
	keyTotalsQuery() string
	// snapshot is how a read that must see one snapshot (Audit, Copy)
	// begins its transaction.
	snapshot() *sql.TxOptions
}

// holdKeeper is the engine's side of holds: where the balance they are
// reserved against lives.
type holdKeeper interface {
	// sharedHolds reports whether every process's holds are in the
	// database (Store.HeldEverywhere).
	sharedHolds() bool
	// reserve reserves between min and max on a (min <= max, both >= 0),
	// within the key's cap when bound is set.
	reserve(a *account, bound *keyCap, min, max Money, fresh bool) (*Hold, error)
	// extend is the over-hold step of a settle: it adds up to extra to
	// the hold (its amount, the account's held and Store.outstanding), as
	// far as the account's available balance goes, never below zero, and
	// returns what it added, or -1 if the hold has lapsed (PostgreSQL). An
	// error is one that may pass: the settle is then tried again.
	extend(h *Hold, extra Money) (Money, error)
	// settled finishes a settle once its batch committed; amount is what
	// the hold held.
	settled(h *Hold, c *command, amount Money)
	// unhold takes a hold marked released off its account; the caller
	// holds the account's mu.
	unhold(h *Hold)
	// releaseRow, after unhold and outside the account's mu, releases
	// what the database keeps of the hold, if anything.
	releaseRow(h *Hold)
	// localHeld sets a.Held from this process's holds, where they are
	// only in memory.
	localHeld(a *Account)
	// heldOf is localHeld for a page of accounts (directory.go).
	heldOf(ctx context.Context, accts []Account) error
}

// writes are the engine's write paths. Each returns once its write is
// committed and its effects on the caches are applied.
type writes interface {
	// runBatch commits a batch of the writer's commands (writer.go).
	runBatch(batch []*command) error
	createAccount(ctx context.Context, id, email, plan string, now int64) error
	// setAccount sets an account's state or plan (column is a constant).
	setAccount(ctx context.Context, id, column, value string) error
	createKey(ctx context.Context, e *keyEntry, now int64) error
	deleteKey(ctx context.Context, id string, now int64) error
	registerModel(ctx context.Context, id string, now int64) (int64, error)
	availabilityWrites
	// execSQL runs fn (queries with ? placeholders) as one write named
	// what (see command.fn).
	execSQL(ctx context.Context, what string, fn func(ctx context.Context, conn execer) error) error
	// execCommit is execSQL with commit, which applies the write's
	// effects in memory once it committed (under loadMu, before any later
	// write's).
	execCommit(ctx context.Context, what string, fn func(ctx context.Context, conn execer) error, commit func()) error
	// applyMoney runs fn, a money change's transaction (history.go), and
	// applies mem to the cached account once it committed.
	applyMoney(ctx context.Context, ch *MoneyChange, fn func(ctx context.Context, conn execer) error, mem *moneyMem) error
}

// availabilityWrites are the writes of the availability history
// (availability.go).
type availabilityWrites interface {
	recordAvailability(ctx context.Context, counts []MinuteCount) error
	openIncident(ctx context.Context, provider, cause string, start int64) (int64, error)
	closeIncident(ctx context.Context, provider string, end int64) error
	pruneAvailability(ctx context.Context, now int64) error
}

// sideDB is what the stores beside the money core (the availability
// history, the console's logins and tokens) need of the ledger's database:
// reads on the read pool, and writes the engine commits. *Store is it.
type sideDB interface {
	beginRead() (done func(), err error)
	query(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	queryRow(ctx context.Context, query string, args ...any) *sql.Row
	// execCommand runs fn as one write named what (see command.fn).
	execCommand(ctx context.Context, what string, fn func(ctx context.Context, conn execer) error) error
}

// upkeep is what runs beside the requests.
type upkeep interface {
	// writerQuery runs a query of the reload (writer.go) where the engine
	// reads its own latest state.
	writerQuery(ctx context.Context, query string) (*sql.Rows, error)
	// poll looks for changes other processes committed; it runs in the
	// writer's turn.
	poll()
	// rollupIfDue and rollupTail bring the derived usage tables up to
	// date where the engine defers them (sqlite_rollup.go), in the writer's turn;
	// catchUp does so before a read of them.
	rollupIfDue()
	rollupTail()
	catchUp(ctx context.Context) error
	// auditHolds and auditDerived add the engine's own checks to an audit
	// (views.go): of the holds, after the balances, and of the derived
	// tables, at the end.
	auditHolds(ctx context.Context, query auditQuery, out []Mismatch) ([]Mismatch, error)
	auditDerived(ctx context.Context, query auditQuery, out []Mismatch) ([]Mismatch, error)
	// addStats adds the engine's own counters to st.
	addStats(st *Stats)
	// close stops the store (Store.Close).
	close() error
}
