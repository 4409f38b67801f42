// Package ledger is modelgate's money core: accounts, API keys, holds,
// debits, usage rows and top-ups, stored in SQLite (the embedded default) or
// in PostgreSQL (Options.Postgres: one ledger shared by any number of
// gateway instances, #19). Both engines keep one contract, and the
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
// Options.PollInterval.
//
// PostgreSQL: holds are rows that every instance sees, reserved by one
// conditional update of the account (balance − held), under a lease that
// their instance renews; a crashed instance's holds are released by any
// other once its lease has run out (Options.Lease). The writer groups
// settles and releases; other writes are transactions of their own.
// Changes to keys and accounts reach every instance through LISTEN/NOTIFY,
// with a poll as the fallback. See postgres.go.
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
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	_ "modernc.org/sqlite" // registers the "sqlite" database/sql driver

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/modelgate/modelgate/internal/filelock"
	"github.com/modelgate/modelgate/internal/walvfs"
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

// Options configures Open. Set exactly one of Path (SQLite) and Postgres.
type Options struct {
	Path        string // SQLite file path; parent directories are created
	Synchronous string // SQLite: "normal" (default, durable against kill -9) or "full" (also against power loss)
	MaxBatch    int    // max commands per group commit; default 512
	// PollInterval is how often to look for changes made by other
	// processes; default 250ms with SQLite, 500ms with PostgreSQL (where
	// it is only the fallback of LISTEN/NOTIFY).
	PollInterval time.Duration
	// BusyTimeout is how long a connection waits for another process's
	// lock on the database (the CLI's writes; with PostgreSQL, any row or
	// table lock: lock_timeout) before a write fails with ErrWriteFailed;
	// default 5s.
	BusyTimeout time.Duration
	// CommitDelay is how long the writer waits for more settles before it
	// commits a batch while other holds are open (at least CommitSiblings
	// beyond the batch's own): under concurrency, fewer and larger
	// transactions cost less per settle; alone, a settle never waits.
	// Default 200µs on SQLite, 1ms on PostgreSQL (where each transaction
	// costs the server far more than each settle in it); negative: never
	// wait.
	CommitDelay    time.Duration
	CommitSiblings int         // default 4
	Logger         *zap.Logger // may be nil

	// ServerLock is set by a gateway server: its holds live only in its own
	// memory, so two servers on one file would each spend the same balance
	// (#16). Open then takes an exclusive advisory lock on Path+".lock",
	// held until Close and dropped by the system if the process dies, and
	// fails with an error wrapping ErrInUse if another process holds it.
	// Without it (the CLI) the file is opened beside a running server.
	ServerLock bool

	// OnChange, if set, is called after a key is deleted ("key:ID") or an
	// account's state or plan changes ("account:ID") through this store, so
	// that other instances can be told. It must not block.
	OnChange func(what string)

	// OnCommit, if set, is called by the writer after each committed write
	// transaction with its number of commands and how long it took from
	// BEGIN to COMMIT (for a ledger write latency metric). It must not block.
	OnCommit func(commands int, took time.Duration)

	// Postgres, if set, is the DSN of the PostgreSQL database that holds
	// the ledger, shared by every gateway instance that opens it (#19): a
	// URL (postgres://user:password@host:5432/db?sslmode=verify-full) or
	// key=value pairs, as pgx reads them. Path must then be empty. The
	// schema is created or migrated at Open, whichever instance comes first.
	Postgres string
	// Instance names this process in the PostgreSQL ledger's instances
	// table (operators see who holds what); default the host name. Each
	// Open also gets a unique id, so names need not be unique.
	Instance string
	// Lease is how long a PostgreSQL store's holds outlive it once it stops
	// renewing them (a crash, a lost connection): every instance renews its
	// own lease every Lease/3 (one statement for all its holds), and any
	// instance releases the holds of a lease that has run out. Default 15s.
	Lease time.Duration
	// MaxConns is the size of the PostgreSQL connection pool; default 16.
	MaxConns int

	// Now is the ledger's clock: the calendar month whose spend a hold
	// reports (Hold.MonthSpend) and the time of a usage row that has
	// none. Default time.Now; tests set it to cross a month boundary.
	Now func() time.Time

	// rollupEvery is how often at most the writer rolls up (rollup.go);
	// default rollupEvery. Tests lengthen it to see the tail, or shorten it.
	rollupEvery time.Duration
	// writerOnly: only the writer goroutine commits (no flat combining,
	// submit), for tests that hold a commit in OnCommit and queue others
	// behind it.
	writerOnly bool
}

const (
	// The writer's page cache: the accounts' and keys' pages, the ends of
	// the usage table and its request-id index, and about a second of usage
	// rows at 50k settles/s, which the next rollup reads. Pages appended
	// once and never read again are recycled from here on: a larger cache
	// kept growing for ten minutes of load, with a page fault (13.5 µs on
	// the benchmark VM) per new page and twice its size in RSS (the
	// allocator's 8 KiB size class per page); bench/RESULTS.md.
	writerCacheKiB = 16 << 10
	// Checkpoints normally run on a background connection (checkpointer);
	// the writer's own automatic checkpoint is a safety net that also lets
	// the WAL restart from its beginning under sustained load.
	walAutoCheckpointPages = 10000
	journalSizeLimit       = 64 << 20
	checkpointInterval     = 100 * time.Millisecond

	defaultMaxBatch       = 512
	defaultPollInterval   = 250 * time.Millisecond
	defaultPgPollInterval = 500 * time.Millisecond
	// Group commit under concurrency (Options.CommitDelay, CommitSiblings).
	defaultCommitDelay    = 200 * time.Microsecond
	defaultPgCommitDelay  = time.Millisecond
	defaultCommitSiblings = 4
	readPoolSize          = 4
)

// Store is the ledger, on SQLite or on PostgreSQL. All methods are safe for
// concurrent use.
type Store struct {
	opts Options
	log  *zap.Logger

	// pg is the PostgreSQL engine; nil for SQLite, whose state is the
	// fields below down to lock.
	pg      *pgEngine
	rebound sync.Map // query → query with $n placeholders (PostgreSQL)

	wdb   *sql.DB   // writer pool (one connection)
	wconn *sql.Conn // the writer connection, used in the writer's turn
	rdb   *sql.DB   // read pool (both engines)
	cdb   *sql.DB   // the background checkpointer's connection
	st    writeStmts

	cmds       chan *command
	closeMu    sync.RWMutex // guards closed and sends on cmds
	closed     bool
	writerDone chan struct{}
	ckptKick   chan struct{} // writer → checkpointer: something was committed (SQLite)
	ckptStop   chan struct{}
	ckptDone   chan struct{}
	lock       *filelock.File // the server lock, with Options.ServerLock
	closeOnce  sync.Once
	closeErr   error

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
	// writer state
	combined    []*command // a caller's batch (submit)
	dataVersion int64
	agg         batchAgg
	// the rollup's (rollup.go)
	tail       tail
	lastRollup time.Time

	stats struct {
		transactions, commands, failures, reloads atomic.Uint64
		rolledUp, rolledFromRows                  atomic.Uint64
		combined                                  atomic.Uint64 // batches callers committed (submit)
		maxBatch                                  atomic.Int64
		commitNanos                               atomic.Int64
	}
}

// defaultBusyTimeout is Options.BusyTimeout's default (PRAGMA busy_timeout).
const defaultBusyTimeout = 5 * time.Second

// Stats are counters of the writer, for metrics and tests.
type Stats struct {
	Transactions uint64        // write transactions committed
	Commands     uint64        // commands committed (settles, credits, …)
	Failures     uint64        // failed transaction attempts
	Reloads      uint64        // reloads after a change by another process (PostgreSQL: also each change notified)
	MaxBatch     int           // largest batch committed so far
	CommitTime   time.Duration // total time spent in committed write transactions
	RolledUp     uint64        // SQLite: usage rows rolled up into the derived tables (rollup.go)
	// PostgreSQL only (#19):
	Reaped    uint64 // holds of lapsed instances this store released
	Lapsed    uint64 // this store's settles whose hold had lapsed (HoldLapsed)
	LeaseLost uint64 // times this store found its own lease lapsed
	// Reserves made in the database (top-ups of advances included), and
	// holds carved from this store's advances in memory (advance.go).
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
	if s.pg != nil {
		st.Reaped, st.Lapsed, st.LeaseLost = s.pg.reaped.Load(), s.pg.lapsed.Load(), s.pg.leaseLost.Load()
		st.DatabaseReserves, st.CarvedHolds = s.pg.dbReserves.Load(), s.pg.carved.Load()
	}
	return st
}

// dsn builds a file: URI for path with the given query parameters.
func dsn(path string, params url.Values) string {
	u := url.URL{Scheme: "file", Path: path, RawQuery: params.Encode()}
	return u.String()
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

// Refresh makes the store look for changes other processes committed to
// the database (keys deleted, accounts suspended, credits) now rather than
// at its next poll. It does not wait.
func (s *Store) Refresh() {
	select {
	case s.refresh <- struct{}{}:
	default:
	}
}

// createPrivate creates the database file, if there is none, readable and
// writable by its owner only: it holds emails, password hashes and
// balances. SQLite gives the -wal and -shm files it creates beside it the
// database file's mode (#17). An existing file keeps its mode (the
// operator's choice), with a warning if others may read it.
func createPrivate(path string, log *zap.Logger) error {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("ledger: open: %w", err)
	}
	fi, err := f.Stat()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("ledger: open: %w", err)
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		log.Warn("the ledger file may be read by other users; chmod 600 it and its -wal and -shm files",
			zap.String("path", path), zap.String("mode", perm.String()))
	}
	return nil
}

// Check reports what Open would refuse in opts without opening anything:
// no file is created, no schema migrated, no connection made. It is what
// `caddy validate` checks of a ledger (#22).
func Check(opts Options) error {
	if opts.Postgres != "" {
		if opts.Path != "" {
			return errors.New("ledger: both a SQLite path and a PostgreSQL DSN are set")
		}
		// pgx leaves the password out of its parse errors
		if _, err := pgxpool.ParseConfig(opts.Postgres); err != nil {
			return fmt.Errorf("ledger: postgres: %w", err)
		}
		return nil
	}
	if opts.Path == "" {
		return errors.New("ledger: empty path")
	}
	switch strings.ToLower(opts.Synchronous) {
	case "", "normal", "full":
	default:
		return fmt.Errorf("ledger: synchronous must be \"normal\" or \"full\", not %q", opts.Synchronous)
	}
	if fi, err := os.Stat(opts.Path); err == nil && !fi.Mode().IsRegular() {
		return fmt.Errorf("ledger: %s is not a file", opts.Path)
	}
	return nil
}

// Open opens (creating if needed) the ledger at opts.Path, or in the
// PostgreSQL database opts.Postgres, runs the schema migrations, loads the
// live keys and starts the writer.
func Open(ctx context.Context, opts Options) (*Store, error) {
	if opts.Postgres != "" {
		if opts.Path != "" {
			return nil, errors.New("ledger: open: both a SQLite path and a PostgreSQL DSN are set")
		}
		return openPostgres(ctx, opts)
	}
	if opts.Path == "" {
		return nil, errors.New("ledger: open: empty path")
	}
	syncMode := strings.ToLower(opts.Synchronous)
	switch syncMode {
	case "":
		syncMode = "normal"
	case "normal", "full":
	default:
		return nil, fmt.Errorf("ledger: open: synchronous must be \"normal\" or \"full\", not %q", opts.Synchronous)
	}
	opts.Synchronous = syncMode
	if opts.MaxBatch <= 0 {
		opts.MaxBatch = defaultMaxBatch
	}
	if opts.BusyTimeout <= 0 {
		opts.BusyTimeout = defaultBusyTimeout
	}
	if opts.rollupEvery <= 0 {
		opts.rollupEvery = rollupEvery
	}
	if opts.PollInterval <= 0 {
		opts.PollInterval = defaultPollInterval
	}
	if opts.CommitDelay == 0 {
		opts.CommitDelay = defaultCommitDelay
	}
	if opts.CommitSiblings <= 0 {
		opts.CommitSiblings = defaultCommitSiblings
	}
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	abs, err := filepath.Abs(opts.Path)
	if err != nil {
		return nil, fmt.Errorf("ledger: open: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(abs), 0o750); err != nil {
		return nil, fmt.Errorf("ledger: open: create directory: %w", err)
	}
	if err := createPrivate(abs, opts.Logger); err != nil {
		return nil, err
	}
	var lock *filelock.File
	if opts.ServerLock {
		if lock, err = serverLock(abs); err != nil {
			return nil, err
		}
	}

	s := &Store{
		opts:       opts,
		log:        opts.Logger,
		cmds:       make(chan *command, 4*opts.MaxBatch),
		writerDone: make(chan struct{}),
		ckptKick:   make(chan struct{}, 1),
		refresh:    make(chan struct{}, 1),
		ckptStop:   make(chan struct{}),
		ckptDone:   make(chan struct{}),
		keys:       newKeyCache(),
		agg:        newBatchAgg(),
		lock:       lock,
	}
	ok := false
	defer func() {
		if !ok {
			s.closeDBs()
			s.lock.Release()
		}
	}()

	syncPragma := "synchronous(" + strings.ToUpper(syncMode) + ")"
	if err := walvfs.Register(); err != nil {
		return nil, fmt.Errorf("ledger: %w", err)
	}
	wq := url.Values{}
	wq.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", opts.BusyTimeout.Milliseconds()))
	wq.Add("_pragma", "journal_mode(WAL)")
	wq.Add("_pragma", syncPragma)
	wq.Add("_pragma", "foreign_keys(1)")
	// Migrations first, on a connection of their own through the default
	// VFS: one may change more pages than a cache holds, which SQLite then
	// spills to the log before the commit, and the writer's VFS must never
	// see that (internal/walvfs).
	if err := migrateFile(ctx, dsn(abs, wq)); err != nil {
		return nil, err
	}
	// The writer writes each commit's log frames with one write call
	// (internal/walvfs); it never spills pages to the log before a commit,
	// which that needs (its batches fit its cache).
	wq.Add("vfs", walvfs.Name)
	wq.Add("_pragma", "cache_spill(false)")
	wq.Add("_pragma", fmt.Sprintf("cache_size(%d)", -writerCacheKiB))
	// Multi-row statements keep a statement journal; keep it in memory.
	wq.Add("_pragma", "temp_store(MEMORY)")
	wq.Add("_pragma", fmt.Sprintf("wal_autocheckpoint(%d)", walAutoCheckpointPages))
	wq.Add("_pragma", fmt.Sprintf("journal_size_limit(%d)", journalSizeLimit))
	s.wdb, err = sql.Open("sqlite", dsn(abs, wq))
	if err != nil {
		return nil, fmt.Errorf("ledger: open: %w", err)
	}
	s.wdb.SetMaxOpenConns(1)
	s.wdb.SetMaxIdleConns(1)
	s.wdb.SetConnMaxLifetime(0)
	s.wdb.SetConnMaxIdleTime(0)
	s.wconn, err = s.wdb.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("ledger: open %s: %w", abs, err)
	}
	if err := s.st.prepare(ctx, s.wconn); err != nil {
		return nil, err
	}

	rq := url.Values{}
	rq.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", opts.BusyTimeout.Milliseconds()))
	rq.Add("_query_only", "1")
	s.rdb, err = sql.Open("sqlite", dsn(abs, rq))
	if err != nil {
		return nil, fmt.Errorf("ledger: open read pool: %w", err)
	}
	s.rdb.SetMaxOpenConns(readPoolSize)
	s.rdb.SetMaxIdleConns(readPoolSize)
	s.rdb.SetConnMaxLifetime(0)
	s.rdb.SetConnMaxIdleTime(0)

	cq := url.Values{}
	cq.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", opts.BusyTimeout.Milliseconds()))
	cq.Add("_pragma", syncPragma)
	s.cdb, err = sql.Open("sqlite", dsn(abs, cq))
	if err != nil {
		return nil, fmt.Errorf("ledger: open checkpointer: %w", err)
	}
	s.cdb.SetMaxOpenConns(1)
	s.cdb.SetMaxIdleConns(1)
	s.cdb.SetConnMaxLifetime(0)
	s.cdb.SetConnMaxIdleTime(0)

	if err := s.st.dataVersion.QueryRowContext(ctx).Scan(&s.dataVersion); err != nil {
		return nil, fmt.Errorf("ledger: open: read data_version: %w", err)
	}
	if err := s.loadLiveKeys(ctx); err != nil {
		return nil, err
	}
	ok = true
	s.turn.Lock() // the writer's until its first rollup
	go s.writer()
	go s.checkpointer()
	return s, nil
}

// checkpointer copies WAL frames back into the database file (PASSIVE
// checkpoints, which never block the writer) at most every
// checkpointInterval after a commit, so that this I/O and its fsyncs happen
// off the writer goroutine.
func (s *Store) checkpointer() {
	defer close(s.ckptDone)
	ctx := context.Background()
	for {
		select {
		case <-s.ckptStop:
			return
		case <-s.ckptKick:
		}
		var busy, logFrames, done int64
		if err := s.cdb.QueryRowContext(ctx, "PRAGMA wal_checkpoint(PASSIVE)").Scan(&busy, &logFrames, &done); err != nil {
			s.log.Warn("ledger: checkpoint", zap.Error(err))
		}
		select {
		case <-s.ckptStop:
			return
		case <-time.After(checkpointInterval):
		}
	}
}

// closeDBs closes the statements and both pools; errors are joined.
func (s *Store) closeDBs() error {
	var errs []error
	errs = append(errs, s.st.close())
	if s.wconn != nil {
		errs = append(errs, s.wconn.Close())
	}
	if s.wdb != nil {
		errs = append(errs, s.wdb.Close())
	}
	if s.rdb != nil {
		errs = append(errs, s.rdb.Close())
	}
	if s.cdb != nil {
		errs = append(errs, s.cdb.Close())
	}
	return errors.Join(errs...)
}

// Close stops accepting commands, lets the writer commit everything already
// queued, then closes the databases. It is idempotent. Holds still open are
// dropped: with SQLite they only ever lived in memory; with PostgreSQL this
// instance's holds are released and its lease ends.
func (s *Store) Close() error {
	if s.pg != nil {
		return s.pg.close(true)
	}
	s.closeOnce.Do(func() {
		s.closeMu.Lock()
		s.closed = true
		close(s.cmds)
		s.closeMu.Unlock()
		<-s.writerDone
		close(s.ckptStop)
		<-s.ckptDone
		err := s.closeDBs()
		// the lock goes last: the next server may open the file now
		if lerr := s.lock.Release(); err == nil {
			err = lerr
		}
		if err != nil {
			s.closeErr = fmt.Errorf("ledger: close: %w", err)
		}
	})
	return s.closeErr
}

// serverLock takes the server lock of the database at path (absolute), or
// says who holds it and what to do instead.
func serverLock(path string) (*filelock.File, error) {
	lockPath := path + ".lock"
	l, err := filelock.TryLock(lockPath)
	if err == nil {
		return l, nil
	}
	if !errors.Is(err, filelock.ErrLocked) {
		return nil, fmt.Errorf("ledger: open: the server lock %s: %w", lockPath, err)
	}
	holder := "another process"
	if pid := filelock.Owner(lockPath); pid > 0 {
		holder = fmt.Sprintf("process %d", pid)
	}
	return nil, fmt.Errorf("%w: %s (held by %s; lock file %s). "+
		"One server per SQLite file: each server keeps its holds in its own memory, so two would spend the same balances twice and overdraw accounts. "+
		"Stop the other server or give this one its own ledger file; to run several instances on one set of accounts, use a shared PostgreSQL ledger. "+
		"The caddy modelgate commands work beside a running server", ErrInUse, path, holder, lockPath)
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
