// Package ledger is modelgate's money core: accounts, API keys, holds,
// debits, usage rows and top-ups, stored in SQLite (the embedded default) or
// in PostgreSQL (Options.Postgres: one ledger shared by any number of
// gateway instances). Both engines keep one contract, and the
// package's tests run against both.
//
// All money is int64 nanos ([Money]); there are no floats anywhere. One
// writer per [Store] commits settles in groups (many requests per
// transaction): a goroutine, or a caller that finds it idle and commits its
// own (submit). Reads use a separate pool, so they never wait for the writer.
//
// SQLite: the writer owns the only write connection and every write goes
// through it. Holds (the no-overdraft mechanism) live in memory: one server
// process owns the SQLite file (Options.ServerLock), and a restart drops
// them, which releases them. Changes made to the file by other processes
// (the CLI) are noticed through PRAGMA data_version within
// Options.PollInterval. See sqlite.go.
//
// PostgreSQL: holds are rows that every instance sees, reserved by one
// conditional update of the account (balance − held), under a lease that
// their instance renews; a crashed instance's holds are released by any
// other once its lease has run out (Options.Lease). The writer groups
// settles and releases; other writes are transactions of their own.
// Changes to keys and accounts reach every instance through LISTEN/NOTIFY,
// with a poll as the fallback. See postgres.go.
//
// The two engines are one interface (engine.go): the money rules (a hold
// settles exactly once, the over-hold, lapsed holds, the audit) are
// written once above it.
//
// Units in the database: money in nanos, timestamps in unix milliseconds
// (UTC), latencies in microseconds.
//
// The package does not import Caddy.
package ledger

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
)

// Errors returned (possibly wrapped) by the Store. Test with errors.Is.
var (
	ErrNotFound          = errors.New("ledger: not found")
	ErrDuplicate         = errors.New("ledger: duplicate")
	ErrUnauthorized      = errors.New("ledger: unauthorized")
	ErrInsufficientFunds = errors.New("ledger: insufficient funds")
	ErrAlreadySettled    = errors.New("ledger: hold already settled or released")
	ErrClosed            = errors.New("ledger: store closed")
	// ErrWriteFailed wraps a write that failed for a reason that may pass
	// (the database locked by another process beyond the busy timeout, an
	// I/O error, a full disk). A Settle that fails so keeps its hold open:
	// the caller retries it, or releases the hold.
	ErrWriteFailed = errors.New("ledger: write failed")
	// ErrInUse: Open with ServerLock found another server using the file.
	ErrInUse = errors.New("ledger: the SQLite file is in use by another modelgate server")
)

// Store is the ledger, on SQLite or on PostgreSQL. All methods are safe for
// concurrent use.
type Store struct {
	opts Options
	log  *zap.Logger

	// eng is the database: sqliteEngine or pgEngine (engine.go).
	eng engine
	// The stores beside the money core, on the same database (setEngine):
	// their methods are the Store's.
	availabilityLog
	loginStore
	alertStore
	rdb *sql.DB // the read pool: SQLite's own, or a database/sql view of PostgreSQL's

	cmds       chan *command
	closeMu    sync.RWMutex // guards closed and sends on cmds
	closed     bool
	writerDone chan struct{}

	// loadMu orders cache fills from the read pool against the writer: the
	// writer holds it exclusively from COMMIT until the batch's effects are
	// applied in memory (and during reloads); fills hold it shared while they
	// read the database and insert into the cache. So a fill either sees a
	// commit in the database or has its entry updated by the writer, never neither.
	loadMu sync.RWMutex

	accounts    sync.Map // account id → *account
	outstanding atomic.Int64
	openHolds   atomic.Int64  // holds neither settled nor released
	refresh     chan struct{} // Refresh: look for external changes now

	keys keyCache

	// turn is held by whoever commits: the writer goroutine, or a caller
	// that found the writer idle and runs its own batch (submit). The
	// writer state below belongs to its holder.
	turn      sync.Mutex
	lastBatch atomic.Int64 // commands in the last batch committed (submit)
	combined  []*command   // a caller's batch (submit), the writer's state

	stats struct {
		transactions, commands, failures, reloads atomic.Uint64
		rolledUp, rolledFromRows                  atomic.Uint64
		combined                                  atomic.Uint64 // batches callers committed (submit)
		maxBatch                                  atomic.Int64
		commitNanos                               atomic.Int64
	}
}

// Stats are counters of the writer, for metrics and tests.
type Stats struct {
	Transactions uint64        // write transactions committed
	Commands     uint64        // commands committed (settles, credits, …)
	Failures     uint64        // failed transaction attempts
	Reloads      uint64        // reloads after a change by another process (PostgreSQL: also each change notified)
	MaxBatch     int           // largest batch committed so far
	CommitTime   time.Duration // total time spent in committed write transactions
	RolledUp     uint64        // SQLite: usage rows rolled up into the derived tables (sqlite_rollup.go)
	// PostgreSQL only:
	Reaped    uint64 // holds of lapsed instances this store released
	Lapsed    uint64 // this store's settles whose hold had lapsed (HoldLapsed)
	LeaseLost uint64 // times this store found its own lease lapsed
	// Reserves made in the database (top-ups of advances included), and
	// holds carved from this store's advances in memory (postgres_advance.go).
	DatabaseReserves, CarvedHolds uint64
}

// Stats returns a snapshot of the writer's counters.
func (s *Store) Stats() Stats {
	st := Stats{
		Transactions: s.stats.transactions.Load(),
		Commands:     s.stats.commands.Load(),
		Failures:     s.stats.failures.Load(),
		Reloads:      s.stats.reloads.Load(),
		RolledUp:     s.stats.rolledUp.Load(),
		MaxBatch:     int(s.stats.maxBatch.Load()),
		CommitTime:   time.Duration(s.stats.commitNanos.Load()),
	}
	s.eng.addStats(&st)
	return st
}

// now is the time by the ledger's clock (Options.Now).
func (s *Store) now() time.Time {
	if s.opts.Now != nil {
		return s.opts.Now()
	}
	return time.Now()
}

// changed reports a key or account change to Options.OnChange.
func (s *Store) changed(what string) {
	if s.opts.OnChange != nil {
		s.opts.OnChange(what)
	}
}

// newStore returns a Store on no engine yet, with opts (defaults set).
func newStore(opts Options) *Store {
	return &Store{
		opts:       opts,
		log:        opts.Logger,
		cmds:       make(chan *command, 4*opts.MaxBatch),
		writerDone: make(chan struct{}),
		refresh:    make(chan struct{}, 1),
		keys:       newKeyCache(),
	}
}

// setEngine puts s on eng, and the stores beside the money core on the
// same database.
func (s *Store) setEngine(eng engine) {
	s.eng = eng
	s.availabilityLog = availabilityLog{db: s, w: eng}
	s.loginStore = loginStore{db: s}
	s.alertStore = alertStore{db: s}
}

// execCommand runs fn as one write (see command.fn) named what.
func (s *Store) execCommand(ctx context.Context, what string, fn func(ctx context.Context, conn execer) error) error {
	return s.eng.execSQL(ctx, what, fn)
}

// Open opens (creating if needed) the ledger at opts.Path, or in the
// PostgreSQL database opts.Postgres, runs the schema migrations, loads the
// live keys and starts the writer.
func Open(ctx context.Context, opts Options) (*Store, error) {
	opts = opts.withDefaults()
	if opts.Postgres != "" {
		if opts.Path != "" {
			return nil, errors.New("ledger: open: both a SQLite path and a PostgreSQL DSN are set")
		}
		return openPostgres(ctx, opts)
	}
	return openSQLite(ctx, opts)
}

// Close stops accepting commands, lets the writer commit everything already
// queued, then closes the databases. It is idempotent. Holds still open are
// dropped: with SQLite they only ever lived in memory; with PostgreSQL this
// instance's holds are released and its lease ends.
func (s *Store) Close() error { return s.eng.close() }

// stopWriter stops accepting commands and waits for the writer to commit
// the ones queued (Close).
func (s *Store) stopWriter() {
	s.closeMu.Lock()
	s.closed = true
	close(s.cmds)
	s.closeMu.Unlock()
	<-s.writerDone
}

// Refresh makes the store look for changes other processes committed to
// the database (keys deleted, accounts suspended, credits) now rather than
// at its next poll. It does not wait.
func (s *Store) Refresh() {
	select {
	case s.refresh <- struct{}{}:
	default:
	}
}

// beginRead marks a read in progress, so that Close waits for it before
// closing the databases; it fails with ErrClosed after Close. Call done when
// the read is over. Reads never nest.
func (s *Store) beginRead() (done func(), err error) {
	s.closeMu.RLock()
	if s.closed {
		s.closeMu.RUnlock()
		return nil, ErrClosed
	}
	return s.closeMu.RUnlock, nil
}

// submit queues c for the writer and waits for its reply. ctx is only
// honoured while waiting for room in the queue: once queued, the command's
// outcome is always awaited, so the caller never sees a context error for a
// write that committed.
func (s *Store) submit(ctx context.Context, c *command) error {
	s.closeMu.RLock()
	if s.closed {
		s.closeMu.RUnlock()
		return ErrClosed
	}
	// Flat combining: when few holds are open (the writer would not wait
	// for siblings either, Options.CommitDelay), the last batch was a lone
	// command, nothing is queued and the writer is idle, commit on this
	// goroutine (with whatever is queued meanwhile) rather than hand the
	// command to the writer and wait to be woken: two scheduler hand-offs.
	// Under load, callers queue and the writer's batches stay whole.
	// docs/design.md "Group commit".
	if !s.opts.writerOnly && s.openHolds.Load() <= int64(s.opts.CommitSiblings) && s.lastBatch.Load() <= 1 &&
		len(s.cmds) == 0 && s.turn.TryLock() {
		s.closeMu.RUnlock()
		s.combine(c)
		s.turn.Unlock()
		<-c.done
		return nil
	}
	select {
	case s.cmds <- c:
	default:
		select {
		case s.cmds <- c:
		case <-ctx.Done():
			s.closeMu.RUnlock()
			return fmt.Errorf("ledger: %w", ctx.Err())
		}
	}
	s.closeMu.RUnlock()
	<-c.done
	return nil
}

// fromMilli converts unix milliseconds to a UTC time; 0 and NULL are the zero time.
func fromMilli(ms sql.NullInt64) time.Time {
	if !ms.Valid || ms.Int64 == 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms.Int64).UTC()
}

var _ sideDB = (*Store)(nil)
