package ledger

// The SQLite engine: one file, owned by one server process. The writer
// owns the only write connection and every write goes through it. Holds
// live in memory (the account's held): one server process owns the file
// (Options.ServerLock), and a restart drops them, which releases them.
// Changes made to the file by other processes (the CLI) are noticed
// through PRAGMA data_version within Options.PollInterval.

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
	"time"

	"go.uber.org/zap"
	_ "modernc.org/sqlite" // registers the "sqlite" database/sql driver

	"github.com/modelgate/modelgate/internal/filelock"
	"github.com/modelgate/modelgate/internal/walvfs"
)

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
	readPoolSize           = 4
)

// sqliteEngine is a Store's SQLite state.
type sqliteEngine struct {
	s *Store

	wdb   *sql.DB   // writer pool (one connection)
	wconn *sql.Conn // the writer connection, used in the writer's turn
	cdb   *sql.DB   // the background checkpointer's connection
	st    writeStmts

	ckptKick  chan struct{} // writer → checkpointer: something was committed
	ckptStop  chan struct{}
	ckptDone  chan struct{}
	lock      *filelock.File // the server lock, with Options.ServerLock
	closeOnce sync.Once
	closeErr  error

	// writer state (Store.turn)
	dataVersion int64
	agg         batchAgg
	// the rollup's (sqlite_rollup.go)
	tail       tail
	lastRollup time.Time
}

// dsn builds a file: URI for path with the given query parameters.
func dsn(path string, params url.Values) string {
	u := url.URL{Scheme: "file", Path: path, RawQuery: params.Encode()}
	return u.String()
}

// createPrivate creates the database file, if there is none, readable and
// writable by its owner only: it holds emails, password hashes and
// balances. SQLite gives the -wal and -shm files it creates beside it the
// database file's mode. An existing file keeps its mode (the operator's
// choice), with a warning if others may read it.
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

// openSQLite opens (creating if needed) the ledger in the SQLite file
// opts.Path; opts has its defaults.
func openSQLite(ctx context.Context, opts Options) (_ *Store, err error) {
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

	s := newStore(opts)
	e := &sqliteEngine{
		s:        s,
		ckptKick: make(chan struct{}, 1),
		ckptStop: make(chan struct{}),
		ckptDone: make(chan struct{}),
		agg:      newBatchAgg(),
		lock:     lock,
	}
	s.setEngine(e)
	ok := false
	defer func() {
		if !ok {
			// the open's error first, then what undoing it failed at
			if cerr := errors.Join(e.closeDBs(), e.lock.Release()); cerr != nil {
				err = errors.Join(err, fmt.Errorf("ledger: close after a failed open: %w", cerr))
			}
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
	e.wdb, err = sql.Open("sqlite", dsn(abs, wq))
	if err != nil {
		return nil, fmt.Errorf("ledger: open: %w", err)
	}
	oneConn(e.wdb)
	e.wconn, err = e.wdb.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("ledger: open %s: %w", abs, err)
	}
	if err := e.st.prepare(ctx, e.wconn); err != nil {
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
	e.cdb, err = sql.Open("sqlite", dsn(abs, cq))
	if err != nil {
		return nil, fmt.Errorf("ledger: open checkpointer: %w", err)
	}
	oneConn(e.cdb)

	if err := e.st.dataVersion.QueryRowContext(ctx).Scan(&e.dataVersion); err != nil {
		return nil, fmt.Errorf("ledger: open: read data_version: %w", err)
	}
	if err := s.loadLiveKeys(ctx); err != nil {
		return nil, err
	}
	ok = true
	s.turn.Lock() // the writer's until its first rollup
	go s.writer()
	go e.checkpointer() //nolint:gosec // G118: the checkpointer lives as long as the store, not the open's ctx; Close stops it (ckptStop)
	return s, nil
}

// oneConn makes db a pool of one connection that is never closed for age
// or idleness.
func oneConn(db *sql.DB) {
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	db.SetConnMaxLifetime(0)
	db.SetConnMaxIdleTime(0)
}

// checkpointer copies WAL frames back into the database file (PASSIVE
// checkpoints, which never block the writer) at most every
// checkpointInterval after a commit, so that this I/O and its fsyncs happen
// off the writer goroutine.
func (e *sqliteEngine) checkpointer() {
	defer close(e.ckptDone)
	ctx := context.Background()
	for {
		select {
		case <-e.ckptStop:
			return
		case <-e.ckptKick:
		}
		var busy, logFrames, done int64
		if err := e.cdb.QueryRowContext(ctx, "PRAGMA wal_checkpoint(PASSIVE)").Scan(&busy, &logFrames, &done); err != nil {
			e.s.log.Warn("ledger: checkpoint", zap.Error(err))
		}
		select {
		case <-e.ckptStop:
			return
		case <-time.After(checkpointInterval):
		}
	}
}

// closeDBs closes the statements and the pools; errors are joined.
func (e *sqliteEngine) closeDBs() error {
	var errs []error
	errs = append(errs, e.st.close())
	if e.wconn != nil {
		errs = append(errs, e.wconn.Close())
	}
	if e.wdb != nil {
		errs = append(errs, e.wdb.Close())
	}
	if e.s.rdb != nil {
		errs = append(errs, e.s.rdb.Close())
	}
	if e.cdb != nil {
		errs = append(errs, e.cdb.Close())
	}
	return errors.Join(errs...)
}

// close is Store.Close: the holds still open only ever lived in memory.
func (e *sqliteEngine) close() error {
	e.closeOnce.Do(func() {
		e.s.stopWriter()
		close(e.ckptStop)
		<-e.ckptDone
		err := e.closeDBs()
		// the lock goes last: the next server may open the file now
		if lerr := e.lock.Release(); err == nil {
			err = lerr
		}
		if err != nil {
			e.closeErr = fmt.Errorf("ledger: close: %w", err)
		}
	})
	return e.closeErr
}

// addStats adds nothing: the SQLite engine's counters are the writer's.
func (e *sqliteEngine) addStats(*Stats) {}

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

var _ engine = (*sqliteEngine)(nil)
