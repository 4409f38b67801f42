package ledger

import (
	"context"
	"fmt"
	"time"

	"go.uber.org/zap"
)

// The rollup (the SQLite engine's; docs/design.md, "Derived usage tables off the settle
// path"). A settle writes its usage row and its account's balance, nothing
// else: what is derived from usage rows (usage_daily, the keys' running
// totals and last use, and usage_by_key, the per-key index of usage rows)
// is written by the rollup, in large groups, from the writer's sums of the
// rows it committed (tail) or from the rows themselves. usage_rollup.rolled
// is the last usage row whose effects are in all three; the rows after it
// are the tail. Every rollup moves rolled to the last row in the same
// transaction as the derived writes, so a crash loses nothing: the tail is
// rolled up by the next rollup, whichever process runs it.
//
// Over a thousand accounts, writing the derived rows with each batch cost
// one page per distinct key and table per commit; written once a second
// they cost about one page per key and table per second.
//
// The writer rolls up at most every rollupEvery while rows come in, and
// every reader of derived data calls catchUp first (KeyUsage adds the
// key's rows in the tail instead), so readers never see the tail missing:
// a settle that returned is in every read that follows it. PostgreSQL keeps writing them with each batch (several instances
// insert rows concurrently, so row ids are not in commit order there).

// rollupEvery is how often, at most, the writer rolls up the tail while
// settles come in (the first time rollupEvery after it starts).
const rollupEvery = time.Second

// rollupStatements bring the derived tables up to the last usage row;
// ?1 is rolled, ?2 the last row's id. Each reads the tail by row id.
var rollupStatements = [...]string{
	// the daily rollup; a keyless (day, '', model) row is shared by the
	// accounts whose keyless rows it counts (the first account's id)
	`INSERT INTO usage_daily (day, key_id, model, account_id, requests, input_tokens, output_tokens,
		cache_read_tokens, cache_write_tokens, spent, discount)
	SELECT strftime('%Y-%m-%d', created_at / 1000, 'unixepoch'), key_id, model, min(account_id), count(*),
		sum(input_tokens), sum(output_tokens), sum(cache_read_tokens), sum(cache_write_tokens), sum(charged), sum(discount)
	FROM usage WHERE id > ?1 AND id <= ?2 GROUP BY 1, 2, 3` + dailyAddUp,
	`UPDATE keys SET requests = requests + u.n, input_tokens = input_tokens + u.i, output_tokens = output_tokens + u.o,
		spent = spent + u.s, last_used_at = max(coalesce(last_used_at, 0), u.l)
	FROM (SELECT key_id, count(*) AS n, sum(input_tokens) AS i, sum(output_tokens) AS o, sum(charged) AS s,
			max(created_at) AS l
		FROM usage WHERE id > ?1 AND id <= ?2 AND key_id <> '' GROUP BY key_id) AS u
	WHERE keys.id = u.key_id`,
	// in the index's order: each key's entries go in together
	`INSERT INTO usage_by_key (key_id, account_id, created_at, id)
	SELECT key_id, account_id, created_at, id FROM usage WHERE id > ?1 AND id <= ?2 ORDER BY 1, 2, 3, 4`,
	`UPDATE usage_rollup SET rolled = ?2`,
}

// rollupBehind reads rolled and the last usage row's id.
const rollupBehind = `SELECT rolled, (SELECT coalesce(max(id), 0) FROM usage) FROM usage_rollup`

// tail is the writer's own sums of the tail: the rows it inserted since
// the last rollup, summed as they commit, so that a rollup writes the sums
// without grouping the rows again (the GROUP BYs of rollupStatements cost
// ~3 µs a row; usage_by_key's entries are copied from the rows either
// way). The sums are known to cover the whole tail when
// usage_rollup.rolled is still rolled and the last row is last; otherwise
// (a crash left a tail, another process rolled up or inserted rows) the
// rollup reads the rows (rollupStatements).
type tail struct {
	rolled, last int64
	// whole is false until a rollup reads the tail's rows, and again once a
	// row of the tail was not this writer's (a gap in the row ids).
	whole bool
	keys  map[string]keyAgg
	daily map[dailyKey]dailyAgg
}

// add sums up a committed batch's usage rows (the settles without error,
// each with its row id).
func (t *tail) add(settles []*command) {
	if t.keys == nil {
		t.keys, t.daily = map[string]keyAgg{}, map[dailyKey]dailyAgg{}
	}
	for _, c := range settles {
		if c.err != nil || !t.whole {
			continue
		}
		if c.rowID != t.last+1 {
			t.whole = false
			continue
		}
		t.last = c.rowID
		addUsage(t.keys, t.daily, c.rec)
	}
}

// pending says whether the tail may have rows.
func (t *tail) pending() bool { return !t.whole || t.last > t.rolled }

// rolledUp empties the tail once a rollup up to row to committed.
func (t *tail) rolledUp(to int64) {
	t.rolled, t.last, t.whole = to, to, true
	clear(t.keys)
	clear(t.daily)
}

// rollup rolls the tail up inside the writer's transaction and returns the
// last row it rolled up and how many rows it did; once the transaction
// commits, e.tail.rolledUp(to) must follow.
func (e *sqliteEngine) rollup(ctx context.Context) (to, n int64, err error) {
	s := e.s
	var rolled, last int64
	if err := e.wconn.QueryRowContext(ctx, rollupBehind).Scan(&rolled, &last); err != nil {
		return 0, 0, fmt.Errorf("rollup: %w", err)
	}
	if last <= rolled {
		return rolled, 0, nil
	}
	t := &e.tail
	if !t.whole || rolled != t.rolled || last != t.last {
		for _, q := range rollupStatements {
			if _, err := e.wconn.ExecContext(ctx, q, rolled, last); err != nil {
				return 0, 0, fmt.Errorf("rollup: %w", err)
			}
		}
		s.stats.rolledFromRows.Add(uint64(last - rolled)) //nolint:gosec // G115: last > rolled ≥ 0 (row ids; checked above); tests: which way it went
		return last, last - rolled, nil
	}
	st := &e.st
	for dk, d := range t.daily {
		day := time.UnixMilli(dk.day * millisPerDay).UTC().Format(time.DateOnly)
		st.daily.args = append(st.daily.args, day, dk.key, dk.model, d.account,
			d.requests, d.input, d.output, d.cacheRead, d.cacheWrite, int64(d.spent), int64(d.discount))
	}
	if err := st.daily.run(ctx); err != nil {
		return 0, 0, fmt.Errorf("rollup: daily rows: %w", err)
	}
	for id, k := range t.keys {
		st.keyTotals.args = append(st.keyTotals.args, id, k.requests, k.input, k.output, int64(k.spent), k.lastUsed)
	}
	if err := st.keyTotals.run(ctx); err != nil {
		return 0, 0, fmt.Errorf("rollup: key totals: %w", err)
	}
	// usage_by_key's entries and rolled, as when the rows are read: SQLite
	// copies four columns of rows still in its cache faster than it binds
	// them as parameters
	for _, q := range rollupStatements[2:] {
		if _, err := e.wconn.ExecContext(ctx, q, rolled, last); err != nil {
			return 0, 0, fmt.Errorf("rollup: %w", err)
		}
	}
	return last, last - rolled, nil
}

// rollupIfDue, in the writer's turn, rolls the tail up in a transaction
// of its own when the tail may have rows and the last rollup was
// rollupEvery ago or more.
func (e *sqliteEngine) rollupIfDue() {
	s := e.s
	if e.tail.pending() && time.Since(e.lastRollup) >= s.opts.rollupEvery {
		e.rollupTail()
	}
}

// rollupTail, in the writer's turn, rolls the tail up in a transaction
// of its own: the writer's first act, so that the tail a crash
// left is rolled up (reading its rows) before this writer sums its own,
// and its last when the Store closes, so that a file a gateway left has
// its derived tables whole.
func (e *sqliteEngine) rollupTail() {
	s := e.s
	ctx := context.Background()
	e.lastRollup = time.Now()
	if _, err := e.st.begin.ExecContext(ctx); err != nil {
		s.log.Warn("ledger: rollup: begin", zap.Error(err))
		return
	}
	to, n, err := e.rollup(ctx)
	if err == nil {
		_, err = e.st.commit.ExecContext(ctx)
	}
	if err != nil {
		_, _ = e.st.rollback.ExecContext(ctx)
		s.log.Warn("ledger: rollup failed; the next one retries", zap.Error(err))
		return
	}
	e.tail.rolledUp(to)
	s.stats.rolledUp.Add(uint64(n)) //nolint:gosec // G115: rollup returns n = 0, or last − rolled with last > rolled
	select {
	case e.ckptKick <- struct{}{}:
	default:
	}
}

// catchUp makes sure the derived tables include every usage row committed
// before it was called: readers of usage_daily, the keys' totals and
// usage_by_key call it first. It costs one read when nothing is pending,
// and a rollup on the writer (with the batch it joins) when something is.
func (e *sqliteEngine) catchUp(ctx context.Context) error {
	s := e.s
	var rolled, last int64
	if err := s.rdb.QueryRowContext(ctx, rollupBehind).Scan(&rolled, &last); err != nil {
		return fmt.Errorf("ledger: %w", err)
	}
	if last <= rolled {
		return nil
	}
	c := getCommand(cmdExec)
	defer putCommand(c)
	var to, n int64
	c.str = "roll up usage"
	c.fn = func(ctx context.Context, _ execer) (err error) {
		to, n, err = e.rollup(ctx)
		return err
	}
	c.commit = func() {
		e.tail.rolledUp(to)
		s.stats.rolledUp.Add(uint64(n)) //nolint:gosec // G115: rollup returns n = 0, or last − rolled with last > rolled
	}
	if err := s.submit(ctx, c); err != nil {
		return err
	}
	return c.err
}
