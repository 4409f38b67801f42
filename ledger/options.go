package ledger

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/zap"
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
	// memory, so two servers on one file would each spend the same balance.
	// Open then takes an exclusive advisory lock on Path+".lock",
	// held until Close and dropped by the system if the process dies, and
	// fails with an error wrapping ErrInUse if another process holds it.
	// Without it (the CLI) the file is opened beside a running server.
	ServerLock bool

	// OnChange, if set, is called after a key is deleted ("key:ID") or an
	// account's state or plan changes ("account:ID") through this store, so
	// that other instances can be told. It must not block.
	OnChange func(what string)

	// OnBalance, if set, is called with the account after a settle or a
	// money change (a credit, a refund…) of it committed through this
	// store, so that its alerts can be looked at. It must not block.
	OnBalance func(accountID string)

	// OnCommit, if set, is called by the writer after each committed write
	// transaction with its number of commands and how long it took from
	// BEGIN to COMMIT (for a ledger write latency metric). It must not block.
	OnCommit func(commands int, took time.Duration)

	// Postgres, if set, is the DSN of the PostgreSQL database that holds
	// the ledger, shared by every gateway instance that opens it: a
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

	// rollupEvery is how often at most the writer rolls up (sqlite_rollup.go);
	// default rollupEvery. Tests lengthen it to see the tail, or shorten it.
	rollupEvery time.Duration
	// writerOnly: only the writer goroutine commits (no flat combining,
	// submit), for tests that hold a commit in OnCommit and queue others
	// behind it.
	writerOnly bool
}

const (
	defaultMaxBatch = 512
	// defaultBusyTimeout is Options.BusyTimeout's default (SQLite's
	// busy_timeout, PostgreSQL's lock_timeout).
	defaultBusyTimeout = 5 * time.Second
	// Group commit under concurrency (Options.CommitDelay, CommitSiblings).
	defaultCommitSiblings = 4
	// The engines' own defaults of PollInterval and CommitDelay
	// (Options).
	defaultPollInterval   = 250 * time.Millisecond
	defaultPgPollInterval = 500 * time.Millisecond
	defaultCommitDelay    = 200 * time.Microsecond
	defaultPgCommitDelay  = time.Millisecond
	defaultLease          = 15 * time.Second
	defaultMaxConns       = 16
)

// withDefaults returns o with every unset option at its default, the
// engine's where the two differ.
func (o Options) withDefaults() Options {
	pollInterval, commitDelay := defaultPollInterval, defaultCommitDelay
	if o.Postgres != "" {
		pollInterval, commitDelay = defaultPgPollInterval, defaultPgCommitDelay
	}
	if o.MaxBatch <= 0 {
		o.MaxBatch = defaultMaxBatch
	}
	if o.BusyTimeout <= 0 {
		o.BusyTimeout = defaultBusyTimeout
	}
	if o.rollupEvery <= 0 {
		o.rollupEvery = rollupEvery
	}
	if o.PollInterval <= 0 {
		o.PollInterval = pollInterval
	}
	if o.CommitDelay == 0 {
		o.CommitDelay = commitDelay
	}
	if o.CommitSiblings <= 0 {
		o.CommitSiblings = defaultCommitSiblings
	}
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	if o.Lease <= 0 {
		o.Lease = defaultLease
	}
	if o.MaxConns <= 0 {
		o.MaxConns = defaultMaxConns
	}
	if o.Instance == "" {
		o.Instance, _ = os.Hostname()
	}
	return o
}

// Check reports what Open would refuse in opts without opening anything:
// no file is created, no schema migrated, no connection made. It is what
// `caddy validate` checks of a ledger.
func Check(opts Options) error {
	if opts.Postgres != "" {
		if opts.Path != "" {
			return errors.New("ledger: both a SQLite path and a PostgreSQL DSN are set")
		}
		// pgx leaves the password out of its parse errors
		if _, err := pgxpool.ParseConfig(opts.Postgres); err != nil {
			return fmt.Errorf("ledger: postgres: %w", err)
		}
		if opts.MaxConns > 0 { // below 1 is the default
			if _, err := poolSize(opts.MaxConns); err != nil {
				return fmt.Errorf("ledger: postgres: %w", err)
			}
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
	if err := checkLedgerDir(opts.Path); err != nil {
		return fmt.Errorf("ledger: %s: %w", opts.Path, err)
	}
	return nil
}
