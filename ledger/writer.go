package ledger

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
)

type cmdKind uint8

const (
	cmdSettle cmdKind = iota + 1
	cmdCreateAccount
	cmdSetState
	cmdSetPlan
	cmdCreateKey
	cmdDeleteKey
	cmdRegisterModel
	cmdAvailability
	cmdOpenIncident
	cmdCloseIncident
	cmdPruneAvailability
	cmdExec
	cmdRelease // PostgreSQL: a hold released
)

// command is one write, sent to the writer. The caller owns it
// again once done has fired.
type command struct {
	kind cmdKind

	// inputs
	hold   *Hold
	rec    *UsageRecord
	key    *keyEntry
	id     string // account id, key id or model id
	email  string
	str    string        // plan, state
	amount Money         // PostgreSQL: a hold's amount
	now    int64         // unix ms
	counts []MinuteCount // availability counts
	// fn is a cmdExec's statements, run on the writer connection inside
	// the batch transaction (possibly more than once, if the batch is
	// retried). An error wrapping ErrNotFound, ErrDuplicate,
	// ErrInsufficientFunds or ErrOverflow is the command's own (fn returns
	// it before any write); any other fails the batch.
	fn func(ctx context.Context, conn execer) error
	// commit, if set, applies a cmdExec's effects in memory once its batch
	// committed; undo, if set, takes back what fn did in memory when the
	// batch did not commit (before it is tried again). Both run in the
	// writer's turn (Store.turn).
	commit, undo func()

	// outputs, reset before each attempt
	err     error
	balance Money
	n       int64 // an incident id; PostgreSQL: 1 once a committed batch deleted the hold's row
	earlier bool  // PostgreSQL: an earlier attempt of this settle committed
	covered Money // PostgreSQL: what a settle of a hold carved from an advance took from the advance's row
	rowID   int64 // SQLite: a settle's usage row

	done chan struct{}
}

var commandPool = sync.Pool{New: func() any { return &command{done: make(chan struct{}, 1)} }}

func getCommand(kind cmdKind) *command {
	c := commandPool.Get().(*command)
	c.kind = kind
	return c
}

func putCommand(c *command) {
	done := c.done
	*c = command{done: done}
	commandPool.Put(c)
}

// writeStmts are the writer connection's prepared statements.
type writeStmts struct {
	begin, commit, rollback                       *sql.Stmt
	acctBalance                                   *sql.Stmt
	insAccount, setState, setPlan                 *sql.Stmt
	insKey, delKey, keyExists, insModel, getModel *sql.Stmt
	reloadAccounts, reloadKeys                    *sql.Stmt
	dataVersion                                   *sql.Stmt

	// multi-row statements, run once per batch
	usageRows, debits *multiStmt
	// the rollup's (rollup.go), run once per rollup
	keyTotals, daily *multiStmt

	avail availStmts // availability history and incidents
}

const usageInsertColumns = `request_id, account_id, key_id, model, provider, upstream_model, upstream_key_id, client_format,
	stream, input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, reasoning_tokens,
	cost, charged, hold, discount_bps, over_hold, usage_source, status, outcome, latency_us, ttft_us, created_at,
	web_searches, web_fetches, hosted_images, hosted_cost, tier_bps, discount`

const usageCols = 31

func (st *writeStmts) all() []**sql.Stmt {
	return []**sql.Stmt{&st.begin, &st.commit, &st.rollback,
		&st.acctBalance, &st.insAccount, &st.setState, &st.setPlan,
		&st.insKey, &st.delKey, &st.keyExists, &st.insModel, &st.getModel, &st.reloadAccounts, &st.reloadKeys, &st.dataVersion}
}

func (st *writeStmts) prepare(ctx context.Context, conn *sql.Conn) error {
	queries := []string{
		`BEGIN IMMEDIATE`,
		`COMMIT`,
		`ROLLBACK`,
		`SELECT balance FROM accounts WHERE id = ?`,
		`INSERT INTO accounts (id, email, plan, state, balance, created_at) VALUES (?, ?, ?, 'active', 0, ?) ON CONFLICT DO NOTHING`,
		`UPDATE accounts SET state = ?, suspended_for = '' WHERE id = ?`,
		`UPDATE accounts SET plan = ? WHERE id = ?`,
		`INSERT INTO keys (id, account_id, hash, label, prefix, created_at) VALUES (?, ?, ?, ?, ?, ?)`,
		`UPDATE keys SET deleted_at = ? WHERE id = ? AND deleted_at IS NULL`,
		`SELECT 1 FROM keys WHERE id = ?`,
		`INSERT INTO models (id, created_at) VALUES (?, ?) ON CONFLICT (id) DO NOTHING`,
		`SELECT created_at FROM models WHERE id = ?`,
		reloadAccountsQuery,
		reloadKeysQuery,
		`PRAGMA data_version`,
	}
	ptrs := st.all()
	for i, q := range queries {
		stmt, err := conn.PrepareContext(ctx, q)
		if err != nil {
			return fmt.Errorf("ledger: prepare statement %d: %w", i, err)
		}
		*ptrs[i] = stmt
	}
	multi := []struct {
		m     **multiStmt
		cols  int
		query func(values string) string
		one   string // the one-row statement, when it is not query's
	}{
		{&st.usageRows, usageCols, func(v string) string {
			// OR IGNORE: a conflict cannot abort the statement, so SQLite
			// keeps no statement journal (a copy of every page the statement
			// changes, ~30 % of the insert's cost over many accounts, #23);
			// insertUsage tells the skipped rows, duplicates, by their count.
			return `INSERT OR IGNORE INTO usage (` + usageInsertColumns + `) VALUES ` + v
		}, ""},
		{&st.debits, 4, func(v string) string {
			// the month's spend as spend.go counts it: every SET reads the row as it was
			return `UPDATE accounts SET balance = balance - v.column2,
				month_spend = CASE WHEN v.column3 > spend_month THEN v.column4
					WHEN v.column3 = spend_month THEN month_spend + v.column4 ELSE month_spend END,
				spend_month = max(spend_month, v.column3)
				FROM (VALUES ` + v + `) AS v WHERE accounts.id = v.column1`
		}, `UPDATE accounts SET balance = balance - ?2,
				month_spend = CASE WHEN ?3 > spend_month THEN ?4 WHEN ?3 = spend_month THEN month_spend + ?4 ELSE month_spend END,
				spend_month = max(spend_month, ?3)
			WHERE id = ?1`},
		{&st.keyTotals, 6, func(v string) string {
			return `UPDATE keys SET requests = requests + v.column2, input_tokens = input_tokens + v.column3,
				output_tokens = output_tokens + v.column4, spent = spent + v.column5,
				last_used_at = max(coalesce(last_used_at, 0), v.column6)
				FROM (VALUES ` + v + `) AS v WHERE keys.id = v.column1`
		}, `UPDATE keys SET requests = requests + ?2, input_tokens = input_tokens + ?3, output_tokens = output_tokens + ?4,
				spent = spent + ?5, last_used_at = max(coalesce(last_used_at, 0), ?6)
			WHERE id = ?1`},
		{&st.daily, 11, func(v string) string {
			return `INSERT INTO usage_daily (day, key_id, model, account_id, requests, input_tokens, output_tokens,
				cache_read_tokens, cache_write_tokens, spent, discount) VALUES ` + v + dailyAddUp
		}, ""},
	}
	for _, m := range multi {
		ms, err := prepareMulti(ctx, conn, m.cols, m.query, m.one)
		if err != nil {
			return err
		}
		*m.m = ms
	}
	return st.avail.prepare(ctx, conn)
}

// The reload's queries: every account (only cached ones are updated) and every key.
const (
	reloadAccountsQuery = `SELECT id, balance, state, plan, suspended_for FROM accounts`
	reloadKeysQuery     = `SELECT id, account_id, label, prefix, hash, deleted_at FROM keys`
)

// chunkSizes are the row counts each multi-row statement is prepared for:
// powers of two, so that n rows take at most one statement per bit of n
// below 64 (a batch of ten: 8 + 2, not 4 + 4 + 1 + 1).
var chunkSizes = [...]int{64, 32, 16, 8, 4, 2, 1}

// multiStmt is one statement prepared for several row counts, so that a
// batch's n rows take a few executions instead of n.
type multiStmt struct {
	cols  int
	sizes [len(chunkSizes)]*sql.Stmt
	args  []any // flattened rows waiting for run
}

// prepareMulti prepares query for each chunk size; one, when set, is the
// one-row statement instead (an UPDATE … FROM (VALUES …) join costs SQLite
// a temporary table even for one row: a plain UPDATE … WHERE id = ?1 is
// about twice as fast, and one row is the common batch at low load, #23).
func prepareMulti(ctx context.Context, conn *sql.Conn, cols int, query func(values string) string, one string) (*multiStmt, error) {
	m := &multiStmt{cols: cols}
	row := "(" + strings.TrimSuffix(strings.Repeat("?, ", cols), ", ") + ")"
	for i, n := range chunkSizes {
		q := query(strings.TrimSuffix(strings.Repeat(row+", ", n), ", "))
		if n == 1 && one != "" {
			q = one
		}
		stmt, err := conn.PrepareContext(ctx, q)
		if err != nil {
			return nil, fmt.Errorf("ledger: prepare %d-row statement: %w", n, err)
		}
		m.sizes[i] = stmt
	}
	return m, nil
}

// chunk returns the statement for the largest chunk of at most n rows, and its size.
func (m *multiStmt) chunk(n int) (*sql.Stmt, int) {
	for i, size := range chunkSizes {
		if size <= n {
			return m.sizes[i], size
		}
	}
	panic("ledger: empty chunk")
}

// run executes the waiting rows and clears them.
func (m *multiStmt) run(ctx context.Context) error {
	args := m.args
	defer m.reset()
	for len(args) > 0 {
		stmt, size := m.chunk(len(args) / m.cols)
		if _, err := stmt.ExecContext(ctx, args[:size*m.cols]...); err != nil {
			return err
		}
		args = args[size*m.cols:]
	}
	return nil
}

func (m *multiStmt) reset() {
	clear(m.args)
	m.args = m.args[:0]
}

func (m *multiStmt) close() error {
	var errs []error
	for i, stmt := range m.sizes {
		if stmt != nil {
			errs = append(errs, stmt.Close())
			m.sizes[i] = nil
		}
	}
	return errors.Join(errs...)
}

func (st *writeStmts) close() error {
	var errs []error
	for _, p := range st.all() {
		if *p != nil {
			errs = append(errs, (*p).Close())
			*p = nil
		}
	}
	for _, m := range []**multiStmt{&st.usageRows, &st.debits, &st.keyTotals, &st.daily} {
		if *m != nil {
			errs = append(errs, (*m).close())
			*m = nil
		}
	}
	errs = append(errs, st.avail.close())
	return errors.Join(errs...)
}

// batchAgg accumulates one batch's per-account sums, so each account is
// debited once per batch. It is reused across batches.
type batchAgg struct {
	settles []*command // in batch order; their usage rows are inserted by flush
	debit   map[string]debitAgg
	avail   availAgg
}

// debitAgg is what a batch takes from an account: the amount, and the
// month's spend it adds (spend.go).
type debitAgg struct {
	amount Money
	spend  monthSpend
}

// add counts one charge of the batch, made at created (unix ms).
func (d *debitAgg) add(charged Money, created int64) {
	d.amount += charged
	d.spend.add(monthOf(time.UnixMilli(created)), charged)
}

// dailyAddUp ends SQLite's inserts into usage_daily: a row already there
// adds the new one's figures.
const dailyAddUp = `
	ON CONFLICT (day, key_id, model) DO UPDATE SET
		requests = requests + excluded.requests,
		input_tokens = input_tokens + excluded.input_tokens,
		output_tokens = output_tokens + excluded.output_tokens,
		cache_read_tokens = cache_read_tokens + excluded.cache_read_tokens,
		cache_write_tokens = cache_write_tokens + excluded.cache_write_tokens,
		spent = spent + excluded.spent,
		discount = discount + excluded.discount`

// addUsage counts the usage row r in its key's running totals (keyed rows
// only) and in its usage_daily row. One row per (day, key, model), as
// SQLite's upsert makes: keyless rows of several accounts share one (the
// first account's).
func addUsage(keys map[string]keyAgg, daily map[dailyKey]dailyAgg, r *UsageRecord) {
	created := r.CreatedAt.UnixMilli()
	if r.KeyID != "" {
		k := keys[r.KeyID]
		k.requests++
		k.input += r.Tokens.Input
		k.output += r.Tokens.Output
		k.spent += r.Charged
		k.lastUsed = max(k.lastUsed, created)
		keys[r.KeyID] = k
	}
	dk := dailyKey{day: floorDiv(created, millisPerDay), key: r.KeyID, model: r.Model}
	d, ok := daily[dk]
	if !ok {
		d.account = r.AccountID
	}
	d.requests++
	d.input += r.Tokens.Input
	d.output += r.Tokens.Output
	d.cacheRead += r.Tokens.CacheRead
	d.cacheWrite += r.Tokens.CacheWrite
	d.spent += r.Charged
	d.discount += r.Discount
	daily[dk] = d
}

// keyAgg is what a batch (or a rollup) adds to a key's running totals.
type keyAgg struct {
	requests, input, output int64
	spent                   Money
	lastUsed                int64
}

// dailyKey is a usage_daily row's key.
type dailyKey struct {
	day        int64 // days since the unix epoch, UTC
	key, model string
}

// dailyAgg is what a batch (or a rollup) adds to a usage_daily row.
type dailyAgg struct {
	requests, input, output, cacheRead, cacheWrite int64
	spent                                          Money
	account                                        string // the row's account
	discount                                       Money  // what the plans' discounts took off
}

func newBatchAgg() batchAgg {
	return batchAgg{debit: map[string]debitAgg{}, avail: newAvailAgg()}
}

func (g *batchAgg) reset() {
	clear(g.settles)
	g.settles = g.settles[:0]
	clear(g.debit)
	g.avail.reset()
}

const millisPerDay = 24 * 60 * 60 * 1000

// writer is the writer goroutine: it group-commits queued commands and polls
// for changes made by other processes.
func (s *Store) writer() {
	defer close(s.writerDone)
	defer func() {
		s.turn.Lock()
		s.rollupTail()
		s.turn.Unlock()
	}()
	// The opener took the turn for this first rollup, so that no caller
	// commits before a crash's tail is rolled up.
	s.rollupTail()
	s.turn.Unlock()
	ticker := time.NewTicker(s.opts.PollInterval)
	defer ticker.Stop()
	batch := make([]*command, 0, s.opts.MaxBatch)
	delay := time.NewTimer(time.Hour)
	delay.Stop()
	for {
		select {
		case c, ok := <-s.cmds:
			if !ok {
				return
			}
			s.turn.Lock()
			batch = append(batch[:0], c)
			open := true
			for yields := 0; open && len(batch) < s.opts.MaxBatch; yields++ {
				before := len(batch)
				batch, open = s.drain(batch)
				// Let callers that are about to submit do so: a few scheduler
				// yields while the queue keeps filling make batches larger.
				if yields == maxYields || (yields > 0 && len(batch) == before) {
					break
				}
				runtime.Gosched()
			}
			if open && len(batch) < s.opts.MaxBatch && s.opts.CommitDelay > 0 &&
				s.openHolds.Load()-int64(len(batch)) >= int64(s.opts.CommitSiblings) {
				batch, open = s.gather(batch, delay)
			}
			s.process(batch)
			clear(batch)
			if open {
				s.rollupIfDue()
			}
			s.turn.Unlock()
			if !open {
				return
			}
		case <-ticker.C:
			s.turn.Lock()
			s.poll()
			s.rollupIfDue()
			s.turn.Unlock()
		case <-s.refresh:
			s.turn.Lock()
			s.poll()
			s.turn.Unlock()
		}
	}
}

// combine commits c, with whatever is queued, on the caller's goroutine;
// the caller holds the turn (submit).
func (s *Store) combine(c *command) {
	batch, _ := s.drain(append(s.combined[:0], c))
	s.stats.combined.Add(1)
	s.process(batch)
	clear(batch)
	s.combined = batch[:0]
}

// gather waits up to CommitDelay for more commands (the timer is stopped
// and is left stopped). open is false once the queue is closed.
func (s *Store) gather(batch []*command, delay *time.Timer) (_ []*command, open bool) {
	delay.Reset(s.opts.CommitDelay)
	defer delay.Stop()
	for len(batch) < s.opts.MaxBatch {
		select {
		case c, ok := <-s.cmds:
			if !ok {
				return batch, false
			}
			batch = append(batch, c)
		case <-delay.C:
			return batch, true
		}
	}
	return batch, true
}

// maxYields bounds the scheduler yields spent filling one batch.
const maxYields = 3

// drain appends queued commands to batch without blocking, up to MaxBatch.
// open is false once the queue is closed.
func (s *Store) drain(batch []*command) (_ []*command, open bool) {
	for len(batch) < s.opts.MaxBatch {
		select {
		case c, ok := <-s.cmds:
			if !ok {
				return batch, false
			}
			batch = append(batch, c)
		default:
			return batch, true
		}
	}
	return batch, true
}

// commitAttempts is how many times a failing batch is tried as a whole
// before it is split to isolate the failing command.
var commitBackoff = []time.Duration{0, 5 * time.Millisecond, 25 * time.Millisecond, 100 * time.Millisecond}

// process commits a batch and replies to every command in it. A batch that
// still fails after retries is split in halves, recursively, so that one
// bad command cannot fail the others; a single command that fails gets the
// error.
func (s *Store) process(batch []*command) {
	s.lastBatch.Store(int64(len(batch)))
	var err error
	for _, wait := range commitBackoff {
		if wait > 0 {
			time.Sleep(wait)
		}
		if err = s.runBatch(batch); err == nil {
			s.reply(batch)
			return
		}
	}
	s.bisect(batch, err)
}

// bisect isolates the failing commands of a batch that failed with err.
// Splitting only helps when a statement of some command failed; when the
// transaction itself could not begin or commit, every command gets the error.
func (s *Store) bisect(batch []*command, err error) {
	if len(batch) == 1 || errors.Is(err, errTransaction) {
		s.log.Error("ledger write failed", zap.Int("commands", len(batch)),
			zap.String("first", batch[0].describe()), zap.Error(err))
		for _, c := range batch {
			c.err = fmt.Errorf("ledger: write failed: %w", err)
			c.done <- struct{}{}
		}
		return
	}
	mid := len(batch) / 2
	for _, half := range [][]*command{batch[:mid], batch[mid:]} {
		if err := s.runBatch(half); err != nil {
			s.bisect(half, err)
		} else {
			s.reply(half)
		}
	}
}

// errTransaction marks a failure to begin or commit, as opposed to a failed statement.
var errTransaction = errors.New("transaction failed")

func (s *Store) reply(batch []*command) {
	for _, c := range batch {
		c.done <- struct{}{}
	}
}

// describe names a command for logs; it never includes a secret.
func (c *command) describe() string {
	switch c.kind {
	case cmdSettle:
		return "settle " + c.rec.RequestID
	case cmdCreateAccount:
		return "create account " + c.id
	case cmdSetState:
		return "set state " + c.id
	case cmdSetPlan:
		return "set plan " + c.id
	case cmdCreateKey:
		return "create key " + c.key.principal.KeyID
	case cmdDeleteKey:
		return "delete key " + c.id
	case cmdRegisterModel:
		return "register model " + c.id
	case cmdAvailability, cmdOpenIncident, cmdCloseIncident, cmdPruneAvailability:
		return c.describeAvailability()
	case cmdExec:
		return c.str
	case cmdRelease:
		return "release a hold on " + c.hold.acct.id
	}
	return "unknown"
}

// runBatch runs every command of batch in one IMMEDIATE transaction and, if
// it commits, applies the effects in memory. Errors that belong to a single
// command (unknown account, duplicate reference) are stored in that
// command's err without failing the batch; any other error rolls the whole
// batch back and is returned.
func (s *Store) runBatch(batch []*command) (err error) {
	if s.pg != nil {
		return s.pg.runBatch(batch)
	}
	ctx := context.Background()
	start := time.Now()
	for _, c := range batch {
		c.err, c.balance, c.n, c.rowID = nil, 0, 0, 0
	}
	if _, err := s.st.begin.ExecContext(ctx); err != nil {
		s.stats.failures.Add(1)
		// Should a transaction have been left open, end it so the retry can begin.
		_, _ = s.st.rollback.ExecContext(ctx)
		return fmt.Errorf("%w: begin: %w", errTransaction, err)
	}
	defer func() {
		if err != nil {
			for _, c := range batch {
				if c.undo != nil {
					c.undo()
				}
			}
			s.stats.failures.Add(1)
			if _, rerr := s.st.rollback.ExecContext(ctx); rerr != nil {
				s.log.Debug("ledger rollback", zap.Error(rerr))
			}
		}
	}()
	g := &s.agg
	g.reset()
	for _, c := range batch {
		if err := s.exec(ctx, c, g); err != nil {
			return fmt.Errorf("%s: %w", c.describe(), err)
		}
	}
	if err := s.flush(ctx, g); err != nil {
		return err
	}
	if err := s.flushAvailability(ctx, &g.avail); err != nil {
		return err
	}
	s.loadMu.Lock()
	if _, err := s.st.commit.ExecContext(ctx); err != nil {
		s.loadMu.Unlock()
		return fmt.Errorf("%w: commit: %w", errTransaction, err)
	}
	s.apply(batch)
	s.loadMu.Unlock()
	s.tail.add(g.settles)
	took := time.Since(start)

	select {
	case s.ckptKick <- struct{}{}:
	default:
	}
	s.stats.transactions.Add(1)
	s.stats.commands.Add(uint64(len(batch)))
	s.stats.commitNanos.Add(int64(took))
	if n := int64(len(batch)); n > s.stats.maxBatch.Load() {
		s.stats.maxBatch.Store(n)
	}
	if s.opts.OnCommit != nil {
		s.opts.OnCommit(len(batch), took)
	}
	return nil
}

func boolInt(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// exec runs one command's statements inside the batch transaction.
func (s *Store) exec(ctx context.Context, c *command, g *batchAgg) error {
	st := &s.st
	switch c.kind {
	case cmdSettle:
		g.settles = append(g.settles, c)
		return nil

	case cmdCreateAccount:
		res, err := st.insAccount.ExecContext(ctx, c.id, c.email, c.str, c.now)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n == 0 {
			c.err = fmt.Errorf("ledger: account with email %q exists: %w", c.email, ErrDuplicate)
		}
		return nil

	case cmdSetState, cmdSetPlan:
		stmt := st.setState
		if c.kind == cmdSetPlan {
			stmt = st.setPlan
		}
		res, err := stmt.ExecContext(ctx, c.str, c.id)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n == 0 {
			c.err = fmt.Errorf("ledger: account %q: %w", c.id, ErrNotFound)
		}
		return nil

	case cmdCreateKey:
		p := c.key.principal
		var bal int64
		err := st.acctBalance.QueryRowContext(ctx, p.AccountID).Scan(&bal)
		if errors.Is(err, sql.ErrNoRows) {
			c.err = fmt.Errorf("ledger: account %q: %w", p.AccountID, ErrNotFound)
			return nil
		}
		if err != nil {
			return err
		}
		_, err = st.insKey.ExecContext(ctx, p.KeyID, p.AccountID, c.key.hash[:], p.Label, p.Prefix, c.now)
		return err

	case cmdDeleteKey:
		res, err := st.delKey.ExecContext(ctx, c.now, c.id)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n == 0 {
			var one int
			err := st.keyExists.QueryRowContext(ctx, c.id).Scan(&one)
			if errors.Is(err, sql.ErrNoRows) {
				c.err = fmt.Errorf("ledger: key %q: %w", c.id, ErrNotFound)
				return nil
			}
			return err
		}
		return nil

	case cmdRegisterModel:
		if _, err := st.insModel.ExecContext(ctx, c.id, c.now); err != nil {
			return err
		}
		return st.getModel.QueryRowContext(ctx, c.id).Scan(&c.now)

	case cmdAvailability, cmdOpenIncident, cmdCloseIncident, cmdPruneAvailability:
		return s.execAvailability(ctx, c, &g.avail)

	case cmdExec:
		err := c.fn(ctx, s.wconn)
		if errors.Is(err, ErrNotFound) || errors.Is(err, ErrDuplicate) || errors.Is(err, ErrInsufficientFunds) || errors.Is(err, errOverflow) {
			c.err = err
			return nil
		}
		return err
	}
	return fmt.Errorf("unknown command kind %d", c.kind)
}

// appendUsageArgs appends one usage row's values in usageInsertColumns order.
func appendUsageArgs(args []any, r *UsageRecord) []any {
	return append(args, r.RequestID, r.AccountID, r.KeyID, r.Model, r.Provider, r.UpstreamModel,
		r.UpstreamKeyID, r.ClientFormat, boolInt(r.Stream), r.Tokens.Input, r.Tokens.Output, r.Tokens.CacheRead,
		r.Tokens.CacheWrite, r.Tokens.Reasoning, int64(r.Cost), int64(r.Charged), int64(r.Hold), int64(r.DiscountBps),
		boolInt(r.OverHold), r.UsageSource, int64(r.Status), r.Outcome, r.Latency.Microseconds(), r.TTFT.Microseconds(),
		r.CreatedAt.UnixMilli(), r.Hosted.WebSearch, r.Hosted.WebFetch, r.Hosted.ImageGeneration, int64(r.HostedCost),
		int64(r.TierBps), int64(r.Discount))
}

// insertUsage inserts the batch's usage rows, several per statement. A row
// whose request id is already used is skipped by the statement: when a
// chunk inserts fewer rows than it has, the rows it did insert (the last
// ones, with consecutive row ids) are read back and the others fail with
// ErrDuplicate.
func (s *Store) insertUsage(ctx context.Context, settles []*command) error {
	m := s.st.usageRows
	defer m.reset()
	for len(settles) > 0 {
		stmt, size := m.chunk(len(settles))
		m.reset()
		for _, c := range settles[:size] {
			m.args = appendUsageArgs(m.args, c.rec)
		}
		res, err := stmt.ExecContext(ctx, m.args...)
		if err != nil {
			return fmt.Errorf("usage rows: %w", err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return err
		}
		if n < int64(size) {
			if err := s.markDuplicates(ctx, settles[:size], n, res); err != nil {
				return err
			}
		}
		if n > 0 {
			// the inserted rows' ids: the n ending at the last insert's
			last, err := res.LastInsertId()
			if err != nil {
				return err
			}
			id := last - n
			for _, c := range settles[:size] {
				if c.err == nil {
					id++
					c.rowID = id
				}
			}
		}
		settles = settles[size:]
	}
	return nil
}

// markDuplicates sets ErrDuplicate on the settles of a chunk whose rows its
// INSERT OR IGNORE skipped, given the n rows it inserted. Row ids are
// assigned as the largest one plus one, so the inserted rows are the n ids
// ending at the last insert's.
func (s *Store) markDuplicates(ctx context.Context, chunk []*command, n int64, res sql.Result) error {
	inserted := map[string]bool{}
	if n > 0 {
		last, err := res.LastInsertId()
		if err != nil {
			return err
		}
		rows, err := s.wconn.QueryContext(ctx, `SELECT request_id FROM usage WHERE id > ? AND id <= ?`, last-n, last)
		if err != nil {
			return fmt.Errorf("usage rows inserted: %w", err)
		}
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				rows.Close()
				return err
			}
			inserted[id] = true
		}
		if err := rows.Close(); err != nil {
			return err
		}
		if err := rows.Err(); err != nil {
			return err
		}
	}
	for _, c := range chunk {
		// a request id twice in one chunk: its first row is the one inserted
		if !inserted[c.rec.RequestID] {
			c.err = fmt.Errorf("ledger: usage row for request %q exists: %w", c.rec.RequestID, ErrDuplicate)
		}
		delete(inserted, c.rec.RequestID)
	}
	return nil
}

// flush inserts the batch's usage rows, then debits each account once with
// what the batch took from it, both with as few statements as possible.
// What is derived from the rows is the rollup's (rollup.go).
func (s *Store) flush(ctx context.Context, g *batchAgg) error {
	if len(g.settles) == 0 {
		return nil
	}
	if err := s.insertUsage(ctx, g.settles); err != nil {
		return err
	}
	for _, c := range g.settles {
		if c.err != nil {
			continue
		}
		if r := c.rec; r.Charged != 0 {
			d := g.debit[r.AccountID]
			d.add(r.Charged, r.CreatedAt.UnixMilli())
			g.debit[r.AccountID] = d
		}
	}
	st := &s.st
	for id, d := range g.debit {
		st.debits.args = append(st.debits.args, id, int64(d.amount), d.spend.month, int64(d.spend.spend))
	}
	if err := st.debits.run(ctx); err != nil {
		return fmt.Errorf("debit accounts: %w", err)
	}
	return nil
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}

// apply makes a committed batch's effects visible in memory. The caller
// holds loadMu exclusively.
func (s *Store) apply(batch []*command) {
	for _, c := range batch {
		if c.err != nil {
			continue
		}
		switch c.kind {
		case cmdSettle:
			h := c.hold
			a := h.acct
			a.mu.Lock()
			a.balance -= c.rec.Charged
			a.spend.add(monthOf(c.rec.CreatedAt), c.rec.Charged)
			a.held -= h.amount
			h.state = holdSettled
			amt := h.amount
			a.mu.Unlock()
			s.outstanding.Add(-int64(amt))
			s.openHolds.Add(-1)
		case cmdExec:
			if c.commit != nil {
				c.commit()
			}
		case cmdSetState, cmdSetPlan:
			if a := s.cachedAccount(c.id); a != nil {
				a.mu.Lock()
				if c.kind == cmdSetState {
					a.state, a.debt = State(c.str), false
				} else {
					a.plan = c.str
				}
				a.mu.Unlock()
			}
		case cmdCreateKey:
			kc := &s.keys
			kc.mu.Lock()
			kc.putLocked(c.key)
			kc.mu.Unlock()
		case cmdDeleteKey:
			kc := &s.keys
			kc.mu.RLock()
			e := kc.byID[c.id]
			kc.mu.RUnlock()
			if e != nil {
				e.deleted.Store(true)
			}
		}
	}
}

// poll reloads cached state when another connection has committed to the
// file since the last look (PRAGMA data_version changes).
func (s *Store) poll() {
	if s.pg != nil {
		s.pg.poll()
		return
	}
	ctx := context.Background()
	var v int64
	if err := s.st.dataVersion.QueryRowContext(ctx).Scan(&v); err != nil {
		s.log.Warn("ledger: read data_version", zap.Error(err))
		return
	}
	if v == s.dataVersion {
		return
	}
	if err := s.reload(ctx); err != nil {
		s.log.Warn("ledger: reload after external change", zap.Error(err))
		return
	}
	s.dataVersion = v
	s.stats.reloads.Add(1)
}

// reload refreshes the balance, state and plan of cached accounts and the
// key cache (new keys, deletions) from the database. It runs on the writer
// goroutine, so no commit of ours is in flight.
func (s *Store) reload(ctx context.Context) error {
	s.loadMu.Lock()
	defer s.loadMu.Unlock()
	reloadQuery := func(stmt *sql.Stmt, query string) (*sql.Rows, error) {
		if s.pg != nil {
			return s.query(ctx, query)
		}
		return stmt.QueryContext(ctx)
	}
	rows, err := reloadQuery(s.st.reloadAccounts, reloadAccountsQuery)
	if err != nil {
		return err
	}
	for rows.Next() {
		var id, state, plan, suspendedFor string
		var bal int64
		if err := rows.Scan(&id, &bal, &state, &plan, &suspendedFor); err != nil {
			rows.Close()
			return err
		}
		if a := s.cachedAccount(id); a != nil {
			a.mu.Lock()
			a.balance, a.state, a.plan, a.debt = Money(bal), State(state), plan, suspendedFor == SuspendedForDebt
			a.mu.Unlock()
		}
	}
	if err := rows.Close(); err != nil {
		return err
	}
	if err := rows.Err(); err != nil {
		return err
	}

	rows, err = reloadQuery(s.st.reloadKeys, reloadKeysQuery)
	if err != nil {
		return err
	}
	defer rows.Close()
	kc := &s.keys
	kc.mu.Lock()
	defer kc.mu.Unlock()
	for rows.Next() {
		var p Principal
		var hash []byte
		var deleted sql.NullInt64
		if err := rows.Scan(&p.KeyID, &p.AccountID, &p.Label, &p.Prefix, &hash, &deleted); err != nil {
			return err
		}
		if e := kc.byID[p.KeyID]; e != nil {
			e.deleted.Store(deleted.Valid)
			continue
		}
		if deleted.Valid || len(hash) != 32 {
			continue
		}
		e := &keyEntry{principal: p}
		copy(e.hash[:], hash)
		kc.putLocked(e)
	}
	clear(kc.neg)
	kc.gen++
	return rows.Err()
}
