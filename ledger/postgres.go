package ledger

// The PostgreSQL engine: one ledger shared by any number of gateway
// instances, each a Store opened on the same database.
//
// Holds. A hold is a row of holds and the account's held column grows by
// its amount, in one transaction that locks the account row and grants
// least(max, balance − held), refused below min: however many instances
// race on one account, their holds never exceed its balance. Reserves are
// grouped as settles are: one goroutine per store (reserver) takes every
// reserve waiting and makes them in one statement, mg_reserve (the
// accounts locked and read in id order, then their held raised once each
// and the holds inserted), committed asynchronously: the accounts' locks
// are held only while the server runs it, never across a round trip.
// The reserver and the writer keep a connection each, set to plan their
// statements once (force_generic_plan). Each Store
// registers a row in instances with a lease (the database's clock) that it
// renews every Lease/3, one statement for all its holds. Every instance
// reaps about once a second: it deletes the instances whose lease has run
// out and releases the holds that have no live instance (holds rows
// deleted, held lowered by their amounts, in one statement), so a crashed
// instance's holds come back within Lease and a second.
//
// Settles. The writer goroutine (writer.go) groups settles and releases
// as it does for SQLite; a batch is one transaction of three round trips
// in the common case: the batch's holds deleted (RETURNING the amounts
// still held); its usage rows copied in (COPY); then the accounts locked
// in id order, the debits and releases per account, the key totals and
// the daily rollups (one statement each) and COMMIT. The accounts are
// locked last, after the holds (the order the reaper, releases and
// mg_extend take them in too), so that reserves on them wait only for the
// last round trip and the commit. A settle whose hold was reaped
// before it (its instance lost the lease) is a lapsed settle: its cost is
// taken from the account's available balance, never below zero, and its
// row is marked hold_lapsed; the reaper already gave the hold's amount
// back, so nothing is released twice. A settle tried again after an
// outcome it could not learn (the connection lost at COMMIT) finds its own
// row by request id and hold id and succeeds without a second debit.
//
// Changes. Triggers bump ledger_version and NOTIFY modelgate_ledger when a
// key is added or deleted or an account's state or plan changes, whoever
// changes it. Every instance LISTENs on a connection of its own (reconnected
// when lost, with a poll of the version at once) and updates its caches;
// the writer also polls the version every PollInterval, and reloads when
// it moved without a notification.

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"go.uber.org/zap"
)

const (
	// maxReapInterval bounds how long a lapsed lease waits for a reaper.
	maxReapInterval = time.Second
	// pgBatchTimeout bounds one batch transaction; pgOpTimeout one
	// statement outside the writer beyond BusyTimeout.
	pgBatchTimeout = 15 * time.Second
	pgOpTimeout    = 5 * time.Second
	// notifyChannel is the channel of the change notifications.
	notifyChannel = "modelgate_ledger"
)

// pgEngine is a Store's PostgreSQL state.
type pgEngine struct {
	s       *Store
	rebound sync.Map // query → query with $n placeholders (rebind)
	pool    *pgxpool.Pool
	cfg     *pgxpool.Config
	id      string // this Open's row in instances
	name    string
	schema  string // current_schema(), to tell our notifications from other schemas'
	lease   time.Duration

	bgCtx    context.Context
	bgCancel context.CancelFunc
	bg       sync.WaitGroup

	// seen is the ledger_version the caches reflect.
	seen atomic.Int64

	pendingMu sync.Mutex
	pending   []int64 // holds whose release failed; retried by the lease loop

	reserves chan *reserveReq // to the reserver

	// advances (postgres_advance.go): the live ones, and the retired ones whose row
	// is still to be released
	advMu   sync.Mutex
	live    map[*advance]struct{}
	retired []*advance
	tend    chan struct{} // wakes the lease loop to release retired advances
	// idle is advanceIdle in nanoseconds (a test lengthens it while it
	// sets up more advances than it can make within advanceIdle)
	idle atomic.Int64

	batch pgBatch       // the writer's scratch (Store.turn)
	wconn *pgxpool.Conn // the writer's connection, kept while it works

	reaped, lapsed, leaseLost atomic.Uint64
	dbReserves, carved        atomic.Uint64

	closeOnce sync.Once
	closeErr  error
}

// openPostgres opens the ledger in the PostgreSQL database opts.Postgres;
// opts has its defaults.
func openPostgres(ctx context.Context, opts Options) (*Store, error) {
	// pgx leaves the password out of its parse errors
	cfg, err := pgxpool.ParseConfig(opts.Postgres)
	if err != nil {
		return nil, fmt.Errorf("ledger: open postgres: %w", err)
	}
	if cfg.MaxConns, err = poolSize(opts.MaxConns); err != nil {
		return nil, fmt.Errorf("ledger: open postgres: %w", err)
	}
	rp := cfg.ConnConfig.RuntimeParams
	if rp["application_name"] == "" {
		rp["application_name"] = "modelgate"
	}
	rp["lock_timeout"] = strconv.FormatInt(opts.BusyTimeout.Milliseconds(), 10)
	rp["timezone"] = "UTC"

	id, err := newID("inst_")
	if err != nil {
		return nil, err
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("ledger: open postgres: %w", err)
	}
	s := newStore(opts)
	p := &pgEngine{s: s, pool: pool, cfg: cfg, id: id, name: opts.Instance, lease: opts.Lease,
		reserves: make(chan *reserveReq, maxReserveGroup), live: map[*advance]struct{}{}, tend: make(chan struct{}, 1)}
	p.idle.Store(int64(advanceIdle))
	s.setEngine(p)
	ok := false
	defer func() {
		if !ok {
			if s.rdb != nil {
				s.rdb.Close()
			}
			pool.Close()
		}
	}()
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("ledger: open postgres: %w", err)
	}
	err = migratePostgres(ctx, conn.Conn())
	conn.Release()
	if err != nil {
		return nil, err
	}
	if err := pool.QueryRow(ctx, `SELECT current_schema()`).Scan(&p.schema); err != nil {
		return nil, fmt.Errorf("ledger: open postgres: %w", err)
	}
	s.rdb = stdlib.OpenDBFromPool(pool)
	if err := p.register(ctx); err != nil {
		return nil, err
	}
	var v int64
	if err := pool.QueryRow(ctx, `SELECT v FROM ledger_version`).Scan(&v); err != nil {
		return nil, fmt.Errorf("ledger: open postgres: read version: %w", err)
	}
	p.seen.Store(v)
	if err := s.loadLiveKeys(ctx); err != nil {
		return nil, err
	}
	ok = true
	p.bgCtx, p.bgCancel = context.WithCancel(context.Background())
	s.turn.Lock() // the writer's until its first rollup
	go s.writer()
	p.bg.Add(3)
	go p.leaseLoop()
	go p.listen() //nolint:gosec // G118: listen lives as long as the store, on p.bgCtx (Close cancels it), not on the open's ctx
	go p.reserver()
	return s, nil
}

// poolSize is Options.MaxConns (with its default, so at least 1) as
// pgxpool takes it: an int32.
func poolSize(n int) (int32, error) {
	if n < 1 || n > math.MaxInt32 {
		return 0, fmt.Errorf("max_conns %d is not within 1 to %d", n, math.MaxInt32)
	}
	return int32(n), nil
}

// register (re)creates this instance's row with a fresh lease.
func (p *pgEngine) register(ctx context.Context) error {
	_, err := p.pool.Exec(ctx, `INSERT INTO instances (id, name, lease_until)
		VALUES ($1, $2, clock_timestamp() + make_interval(secs => $3))
		ON CONFLICT (id) DO UPDATE SET lease_until = excluded.lease_until`, p.id, p.name, p.lease.Seconds())
	if err != nil {
		return fmt.Errorf("ledger: register instance: %w", err)
	}
	return nil
}

// leaseLoop renews the lease every Lease/3, reaps lapsed leases about
// once a second, and retries releases that failed.
func (p *pgEngine) leaseLoop() {
	defer p.bg.Done()
	renew := time.NewTicker(p.lease / 3)
	defer renew.Stop()
	reap := time.NewTicker(min(p.lease/3, maxReapInterval))
	defer reap.Stop()
	for {
		select {
		case <-p.bgCtx.Done():
			return
		case <-renew.C:
			p.renew()
		case <-reap.C:
			p.reap()
			p.tendAdvances()
			p.retryReleases()
		case <-p.tend:
			p.tendAdvances()
		}
	}
}

// renew extends this instance's lease; a lease found gone (reaped while
// this instance could not renew it: its holds were released) is taken
// again for the holds to come.
func (p *pgEngine) renew() {
	ctx, cancel := context.WithTimeout(p.bgCtx, p.lease/3)
	defer cancel()
	tag, err := p.pool.Exec(ctx, `UPDATE instances SET lease_until = clock_timestamp() + make_interval(secs => $2) WHERE id = $1`,
		p.id, p.lease.Seconds())
	if err != nil {
		p.s.log.Warn("ledger: renew the lease on holds", zap.Error(err))
		return
	}
	if tag.RowsAffected() == 0 {
		p.leaseLost.Add(1)
		p.spoilAdvances()
		p.s.log.Warn("ledger: this instance's lease had lapsed and its holds were released by another; their settles are charged to the available balances",
			zap.String("instance", p.id))
		if err := p.register(ctx); err != nil {
			p.s.log.Warn("ledger: renew the lease on holds", zap.Error(err))
		}
	}
}

// reap releases the holds of instances whose lease has run out (any
// instance may, and each hold is released once: the first DELETE wins).
func (p *pgEngine) reap() {
	ctx, cancel := context.WithTimeout(p.bgCtx, pgOpTimeout)
	defer cancel()
	if _, err := p.pool.Exec(ctx, `DELETE FROM instances WHERE lease_until < clock_timestamp()`); err != nil {
		p.s.log.Debug("ledger: reap lapsed leases", zap.Error(err))
		return
	}
	rows, err := p.pool.Query(ctx, `WITH h AS (
			DELETE FROM holds WHERE NOT EXISTS (SELECT 1 FROM instances i WHERE i.id = holds.instance_id)
			RETURNING account_id, amount
		), t AS (SELECT account_id, sum(amount)::bigint AS amount, count(*) AS n FROM h GROUP BY account_id)
		UPDATE accounts SET held = accounts.held - t.amount FROM t WHERE accounts.id = t.account_id
		RETURNING t.n`)
	if err != nil {
		p.s.log.Debug("ledger: reap lapsed holds", zap.Error(err))
		return
	}
	n, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		p.s.log.Debug("ledger: reap lapsed holds", zap.Error(err))
		return
	}
	var total int64
	for _, k := range n {
		total += k
	}
	if total > 0 {
		p.reaped.Add(uint64(total))
		p.s.log.Info("ledger: released the holds of lapsed instances", zap.Int64("holds", total))
	}
}

// releaseIDs deletes holds and gives their amounts back to their accounts.
func (p *pgEngine) releaseIDs(ctx context.Context, ids []int64) error {
	_, err := p.pool.Exec(ctx, `WITH h AS (DELETE FROM holds WHERE id = ANY($1) RETURNING account_id, amount),
		t AS (SELECT account_id, sum(amount)::bigint AS amount FROM h GROUP BY account_id)
		UPDATE accounts SET held = accounts.held - t.amount FROM t WHERE accounts.id = t.account_id`, ids)
	return err
}

// retryReleases tries again the releases that failed.
func (p *pgEngine) retryReleases() {
	p.pendingMu.Lock()
	ids := p.pending
	p.pending = nil
	p.pendingMu.Unlock()
	if len(ids) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(p.bgCtx, pgOpTimeout)
	defer cancel()
	if err := p.releaseIDs(ctx, ids); err != nil {
		p.pendingMu.Lock()
		p.pending = append(p.pending, ids...)
		p.pendingMu.Unlock()
	}
}

// listen applies the change notifications of every instance to this one's
// caches, on a connection of its own, reconnecting when it is lost.
func (p *pgEngine) listen() {
	defer p.bg.Done()
	wait := 100 * time.Millisecond
	for p.bgCtx.Err() == nil {
		conn, err := pgx.ConnectConfig(p.bgCtx, p.cfg.ConnConfig.Copy())
		if err == nil {
			_, err = conn.Exec(p.bgCtx, "LISTEN "+notifyChannel)
			if err == nil {
				wait = 100 * time.Millisecond
				// what changed while nobody listened
				p.s.Refresh()
				for {
					n, werr := conn.WaitForNotification(p.bgCtx)
					if werr != nil {
						err = werr
						break
					}
					p.notified(n.Payload)
				}
			}
			conn.Close(context.Background())
		}
		if p.bgCtx.Err() != nil {
			return
		}
		p.s.log.Debug("ledger: listening for changes", zap.Error(err))
		select {
		case <-p.bgCtx.Done():
			return
		case <-time.After(wait):
		}
		wait = min(2*wait, 5*time.Second)
	}
}

// notified applies one notification: "<schema> <version> <what>".
func (p *pgEngine) notified(payload string) {
	schema, rest, _ := strings.Cut(payload, " ")
	if schema != p.schema {
		return
	}
	vs, what, _ := strings.Cut(rest, " ")
	v, err := strconv.ParseInt(vs, 10, 64)
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(p.bgCtx, pgOpTimeout)
	defer cancel()
	switch {
	case strings.HasPrefix(what, "key:"):
		err = p.reloadKey(ctx, strings.TrimPrefix(what, "key:"))
	case strings.HasPrefix(what, "account:"):
		err = p.reloadAccount(ctx, strings.TrimPrefix(what, "account:"))
	default: // keys added: forget the hashes known not to be keys
		kc := &p.s.keys
		kc.mu.Lock()
		clear(kc.neg)
		kc.gen++
		kc.mu.Unlock()
	}
	p.s.stats.reloads.Add(1)
	if err != nil || !p.seen.CompareAndSwap(v-1, v) && v > p.seen.Load() {
		// a notification was missed (or this one failed): reload all
		p.s.Refresh()
	}
}

// reloadKey rereads one key into the cache.
func (p *pgEngine) reloadKey(ctx context.Context, id string) error {
	s := p.s
	s.loadMu.Lock()
	defer s.loadMu.Unlock()
	e, err := scanEntry(p.pool.QueryRow(ctx, `SELECT `+entryColumns+` FROM keys WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil
	}
	if err != nil {
		return err
	}
	kc := &s.keys
	kc.mu.Lock()
	defer kc.mu.Unlock()
	kc.refreshLocked(e)
	return nil
}

// reloadAccount rereads one cached account's state, plan and whether a
// debt suspended it.
func (p *pgEngine) reloadAccount(ctx context.Context, id string) error {
	s := p.s
	s.loadMu.Lock()
	defer s.loadMu.Unlock()
	a := s.cachedAccount(id)
	if a == nil {
		return nil
	}
	var state, plan, suspendedFor string
	err := p.pool.QueryRow(ctx, `SELECT state, plan, suspended_for FROM accounts WHERE id = $1`, id).Scan(&state, &plan, &suspendedFor)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil
	}
	if err != nil {
		return err
	}
	a.mu.Lock()
	a.state, a.plan, a.debt = State(state), plan, suspendedFor == SuspendedForDebt
	a.mu.Unlock()
	return nil
}

// poll reloads the caches when ledger_version moved past what they
// reflect (a notification missed, or not yet arrived). It runs in the
// writer's turn.
func (p *pgEngine) poll() {
	s := p.s
	ctx, cancel := context.WithTimeout(context.Background(), pgOpTimeout)
	defer cancel()
	var v int64
	conn, err := p.writerConn(ctx)
	if err == nil {
		err = conn.QueryRow(ctx, `SELECT v FROM ledger_version`).Scan(&v)
	}
	if err != nil {
		p.dropWriterConn()
		s.log.Debug("ledger: read the version", zap.Error(err))
		return
	}
	if v == p.seen.Load() {
		return
	}
	if err := s.reload(ctx); err != nil {
		s.log.Warn("ledger: reload after a change", zap.Error(err))
		return
	}
	for {
		old := p.seen.Load()
		if old >= v || p.seen.CompareAndSwap(old, v) {
			break
		}
	}
	s.stats.reloads.Add(1)
}

// addStats adds the counters of leases, lapses and advances.
func (p *pgEngine) addStats(st *Stats) {
	st.Reaped, st.Lapsed, st.LeaseLost = p.reaped.Load(), p.lapsed.Load(), p.leaseLost.Load()
	st.DatabaseReserves, st.CarvedHolds = p.dbReserves.Load(), p.carved.Load()
}

// close is Store.Close: this instance's holds are released and its lease
// ends.
func (p *pgEngine) close() error { return p.stop(true) }

// stop stops the store; with release, this instance's holds are released
// and its lease ends (a clean stop), without, they stay until the lease
// runs out (a crash, for tests).
func (p *pgEngine) stop(release bool) error {
	p.closeOnce.Do(func() {
		s := p.s
		s.stopWriter()
		p.dropWriterConn()
		p.bgCancel()
		p.bg.Wait()
		var errs []error
		if release {
			ctx, cancel := context.WithTimeout(context.Background(), pgOpTimeout)
			p.retryReleases()
			_, err := p.pool.Exec(ctx, `WITH i AS (DELETE FROM instances WHERE id = $1),
				h AS (DELETE FROM holds WHERE instance_id = $1 RETURNING account_id, amount),
				t AS (SELECT account_id, sum(amount)::bigint AS amount FROM h GROUP BY account_id)
				UPDATE accounts SET held = accounts.held - t.amount FROM t WHERE accounts.id = t.account_id`, p.id)
			cancel()
			if err != nil {
				errs = append(errs, fmt.Errorf("release this instance's holds (they lapse with its lease): %w", err))
			}
		}
		errs = append(errs, s.rdb.Close())
		p.pool.Close()
		if err := errors.Join(errs...); err != nil {
			p.closeErr = fmt.Errorf("ledger: close: %w", err)
		}
	})
	return p.closeErr
}

// pgRetryable reports whether a PostgreSQL error may pass: not a refused
// row (integrity, data) or statement (syntax, undefined object).
func pgRetryable(err error) (retry, known bool) {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		return true, false
	}
	switch pe.Code[:2] {
	case "22", "23", "42":
		return false, true
	}
	return true, true
}

// writerQuery runs query on the read pool: every instance reads the
// database's latest state there.
func (p *pgEngine) writerQuery(ctx context.Context, query string) (*sql.Rows, error) {
	return p.s.query(ctx, query)
}

// rollupIfDue, rollupTail and catchUp do nothing: the derived tables are
// written with each batch (several instances insert rows concurrently, so
// row ids are not in commit order).
func (p *pgEngine) rollupIfDue()                  {}
func (p *pgEngine) rollupTail()                   {}
func (p *pgEngine) catchUp(context.Context) error { return nil }

// auditHolds checks that what each account holds is the sum of its holds'
// rows, every instance's requests and advances.
func (p *pgEngine) auditHolds(ctx context.Context, query auditQuery, out []Mismatch) ([]Mismatch, error) {
	return auditAccounts(ctx, query, out, "holds", "accounts.held", `
		SELECT a.id, a.held, coalesce(h.s, 0)::bigint
		FROM accounts a LEFT JOIN (SELECT account_id, sum(amount) AS s FROM holds GROUP BY account_id) h ON h.account_id = a.id
		WHERE a.held <> coalesce(h.s, 0)
		ORDER BY a.id`)
}

// auditDerived adds nothing: the derived tables are audited with the rest.
func (p *pgEngine) auditDerived(_ context.Context, _ auditQuery, out []Mismatch) ([]Mismatch, error) {
	return out, nil
}

var _ engine = (*pgEngine)(nil)
