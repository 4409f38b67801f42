package ledger

// The SQLite engine's writes: the writer connection's prepared statements,
// and a batch of commands committed in one IMMEDIATE transaction.

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.uber.org/zap"
)

// writeStmts are the writer connection's prepared statements.
type writeStmts struct {
	begin, commit, rollback                       *sql.Stmt
	acctBalance                                   *sql.Stmt
	insAccount, setState, setPlan                 *sql.Stmt
	insKey, delKey, keyExists, insModel, getModel *sql.Stmt
	keySpend                                      *sql.Stmt // a capped key's period spend (keySpendUpdate)
	reloadAccounts, reloadKeys                    *sql.Stmt
	dataVersion                                   *sql.Stmt

	// multi-row statements, run once per batch
	usageRows, debits *multiStmt
	// the rollup's (sqlite_rollup.go), run once per rollup
	keyTotals, daily *multiStmt

	avail availStmts // availability history and incidents
}

func (st *writeStmts) all() []**sql.Stmt {
	return []**sql.Stmt{&st.begin, &st.commit, &st.rollback,
		&st.acctBalance, &st.insAccount, &st.setState, &st.setPlan,
		&st.insKey, &st.delKey, &st.keyExists, &st.insModel, &st.getModel, &st.keySpend, &st.reloadAccounts, &st.reloadKeys, &st.dataVersion}
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
		`INSERT INTO keys (id, account_id, hash, label, prefix, created_at, ` + limitColumns + `) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		`UPDATE keys SET deleted_at = ? WHERE id = ? AND deleted_at IS NULL`,
		`SELECT 1 FROM keys WHERE id = ?`,
		`INSERT INTO models (id, created_at) VALUES (?, ?) ON CONFLICT (id) DO NOTHING`,
		`SELECT created_at FROM models WHERE id = ?`,
		keySpendUpdate,
		reloadAccountsQuery,
		reloadKeysQuery,
		`PRAGMA data_version`,
	}
	ptrs := st.all()
	for i, q := range queries {
		stmt, err := conn.PrepareContext(ctx, q) //nolint:sqlclosecheck // kept for the writer connection's life: writeStmts.close closes it (closeDBs, also after a failed open)
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
			// changes, ~30 % of the insert's cost over many accounts);
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
// about twice as fast, and one row is the common batch at low load).
func prepareMulti(ctx context.Context, conn *sql.Conn, cols int, query func(values string) string, one string) (*multiStmt, error) {
	m := &multiStmt{cols: cols}
	row := "(" + strings.TrimSuffix(strings.Repeat("?, ", cols), ", ") + ")"
	for i, n := range chunkSizes {
		q := query(strings.TrimSuffix(strings.Repeat(row+", ", n), ", "))
		if n == 1 && one != "" {
			q = one
		}
		stmt, err := conn.PrepareContext(ctx, q) //nolint:sqlclosecheck // kept in m for the writer connection's life: multiStmt.close closes it (writeStmts.close, or below when a size fails)
		if err != nil {
			// the caller never gets m: close the sizes prepared so far
			err = fmt.Errorf("ledger: prepare %d-row statement: %w", n, err)
			if cerr := m.close(); cerr != nil {
				err = errors.Join(err, cerr)
			}
			return nil, err
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
		stmt, size := m.chunk(len(args) / m.cols) //nolint:sqlclosecheck // one of m's statements, only borrowed: multiStmt.close closes it
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

// runBatch runs every command of batch in one IMMEDIATE transaction and, if
// it commits, applies the effects in memory. Errors that belong to a single
// command (unknown account, duplicate reference) are stored in that
// command's err without failing the batch; any other error rolls the whole
// batch back and is returned.
func (e *sqliteEngine) runBatch(batch []*command) (err error) {
	s := e.s
	ctx := context.Background()
	start := time.Now()
	for _, c := range batch {
		c.err, c.balance, c.n, c.rowID = nil, 0, 0, 0
	}
	if _, err := e.st.begin.ExecContext(ctx); err != nil {
		s.stats.failures.Add(1)
		// Should a transaction have been left open, end it so the retry can begin.
		_, _ = e.st.rollback.ExecContext(ctx)
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
			if _, rerr := e.st.rollback.ExecContext(ctx); rerr != nil {
				s.log.Debug("ledger rollback", zap.Error(rerr))
			}
		}
	}()
	g := &e.agg
	g.reset()
	for _, c := range batch {
		if err := e.exec(ctx, c, g); err != nil {
			return fmt.Errorf("%s: %w", c.describe(), err)
		}
	}
	if err := e.flush(ctx, g); err != nil {
		return err
	}
	if err := e.flushAvailability(ctx, &g.avail); err != nil {
		return err
	}
	s.loadMu.Lock()
	if _, err := e.st.commit.ExecContext(ctx); err != nil {
		s.loadMu.Unlock()
		return fmt.Errorf("%w: commit: %w", errTransaction, err)
	}
	e.apply(batch)
	s.loadMu.Unlock()
	e.tail.add(g.settles)
	took := time.Since(start)

	select {
	case e.ckptKick <- struct{}{}:
	default:
	}
	s.committed(len(batch), took)
	return nil
}

// boolInt is a flag as the schema keeps it (0 or 1).
func boolInt(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// exec runs one command's statements inside the batch transaction.
func (e *sqliteEngine) exec(ctx context.Context, c *command, g *batchAgg) error {
	st := &e.st
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
		limits, err := limitArgs(c.key)
		if err != nil {
			return err
		}
		_, err = st.insKey.ExecContext(ctx, append([]any{p.KeyID, p.AccountID, c.key.hash[:], p.Label, p.Prefix, c.now}, limits...)...)
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
		return e.execAvailability(ctx, c, &g.avail)

	case cmdExec:
		err := c.fn(ctx, e.wconn)
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
func (e *sqliteEngine) insertUsage(ctx context.Context, settles []*command) error {
	m := e.st.usageRows
	defer m.reset()
	for len(settles) > 0 {
		stmt, size := m.chunk(len(settles)) //nolint:sqlclosecheck // one of m's statements, only borrowed: multiStmt.close closes it
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
			if err := e.markDuplicates(ctx, settles[:size], n, res); err != nil {
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
func (e *sqliteEngine) markDuplicates(ctx context.Context, chunk []*command, n int64, res sql.Result) error {
	inserted := map[string]bool{}
	if n > 0 {
		last, err := res.LastInsertId()
		if err != nil {
			return err
		}
		rows, err := e.wconn.QueryContext(ctx, `SELECT request_id FROM usage WHERE id > ? AND id <= ?`, last-n, last)
		if err != nil {
			return fmt.Errorf("usage rows inserted: %w", err)
		}
		defer rows.Close() // on a failed scan; closed below otherwise
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
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
// What is derived from the rows is the rollup's (sqlite_rollup.go).
func (e *sqliteEngine) flush(ctx context.Context, g *batchAgg) error {
	if len(g.settles) == 0 {
		return nil
	}
	if err := e.insertUsage(ctx, g.settles); err != nil {
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
	st := &e.st
	for id, d := range g.debit {
		st.debits.args = append(st.debits.args, id, int64(d.amount), d.spend.month, int64(d.spend.spend))
	}
	if err := st.debits.run(ctx); err != nil {
		return fmt.Errorf("debit accounts: %w", err)
	}
	return e.flushKeySpend(ctx, g.settles)
}

// flushKeySpend moves the period spend of the capped keys the batch's
// settles charged, in the batch's transaction (keylimits.go): a charge of
// a later period than the key's count starts that period afresh, one of
// an earlier period is not counted. Settles of keys without a cap write
// nothing here.
func (e *sqliteEngine) flushKeySpend(ctx context.Context, settles []*command) error {
	for _, c := range settles {
		h := c.hold
		if c.err != nil || h.key == nil || c.now < 0 || c.rec.Charged == 0 {
			continue
		}
		if _, err := e.st.keySpend.ExecContext(ctx, h.key.principal.KeyID, c.now, int64(c.rec.Charged)); err != nil {
			return fmt.Errorf("key period spend: %w", err)
		}
	}
	return nil
}

// keySpendUpdate adds a charge (?3) made in the period that starts at ?2
// to key ?1's period spend, as periodSpend.add does.
const keySpendUpdate = `UPDATE keys SET
	period_spent = CASE WHEN ?2 > period_start THEN ?3 WHEN ?2 = period_start THEN period_spent + ?3 ELSE period_spent END,
	period_start = max(period_start, ?2)
	WHERE id = ?1`

// apply makes a committed batch's effects visible in memory. The caller
// holds loadMu exclusively.
func (e *sqliteEngine) apply(batch []*command) {
	s := e.s
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
			if k := h.key; k != nil {
				k.budget.mu.Lock()
				k.budget.held -= h.amount
				if c.now >= 0 {
					k.budget.spend.add(c.now, c.rec.Charged)
				}
				k.budget.mu.Unlock()
			}
			h.state = holdSettled
			amt := h.amount
			a.mu.Unlock()
			s.outstanding.Add(-int64(amt))
			s.openHolds.Add(-1)
		case cmdExec:
			if c.commit != nil {
				c.commit()
			}
		case cmdSetState:
			s.accountSet(c.id, "state", c.str)
		case cmdSetPlan:
			s.accountSet(c.id, "plan", c.str)
		case cmdCreateKey:
			s.keyAdded(c.key)
		case cmdDeleteKey:
			s.keyDeleted(c.id)
		}
	}
}

// poll reloads cached state when another connection has committed to the
// file since the last look (PRAGMA data_version changes).
func (e *sqliteEngine) poll() {
	s := e.s
	ctx := context.Background()
	var v int64
	if err := e.st.dataVersion.QueryRowContext(ctx).Scan(&v); err != nil {
		s.log.Warn("ledger: read data_version", zap.Error(err))
		return
	}
	if v == e.dataVersion {
		return
	}
	if err := s.reload(ctx); err != nil {
		s.log.Warn("ledger: reload after external change", zap.Error(err))
		return
	}
	e.dataVersion = v
	s.stats.reloads.Add(1)
}
