package ledger

import (
	"context"
	"errors"
	"fmt"
	"runtime"
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
	now    int64         // unix ms; a settle: the start of its key's cap period (-1: none)
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

// The reload's queries: every account (only cached ones are updated) and every key.
const (
	reloadAccountsQuery = `SELECT id, balance, state, plan, suspended_for FROM accounts`
	reloadKeysQuery     = `SELECT ` + entryColumns + ` FROM keys`
)

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
	// period is what a capped key's cap counts of the batch's charges
	// (keylimits.go; PostgreSQL: SQLite writes it with the batch, the
	// totals with the rollup); spend 0: nothing
	period periodSpend
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

// usageInsertColumns are the columns of a usage row a settle inserts.
const usageInsertColumns = `request_id, account_id, key_id, model, provider, upstream_model, upstream_key_id, client_format,
	stream, input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, reasoning_tokens,
	cost, charged, hold, discount_bps, over_hold, usage_source, status, outcome, latency_us, ttft_us, created_at,
	web_searches, web_fetches, hosted_images, hosted_cost, tier_bps, discount`

// usageCols is the number of usageInsertColumns.
const usageCols = 31

// writer is the writer goroutine: it group-commits queued commands and polls
// for changes made by other processes.
func (s *Store) writer() {
	defer close(s.writerDone)
	defer func() {
		s.turn.Lock()
		s.eng.rollupTail()
		s.turn.Unlock()
	}()
	// The opener took the turn for this first rollup, so that no caller
	// commits before a crash's tail is rolled up.
	s.eng.rollupTail()
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
				s.eng.rollupIfDue()
			}
			s.turn.Unlock()
			if !open {
				return
			}
		case <-ticker.C:
			s.turn.Lock()
			s.eng.poll()
			s.eng.rollupIfDue()
			s.turn.Unlock()
		case <-s.refresh:
			s.turn.Lock()
			s.eng.poll()
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
		if err = s.eng.runBatch(batch); err == nil {
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
		if err := s.eng.runBatch(half); err != nil {
			s.bisect(half, err)
		} else {
			s.reply(half)
		}
	}
}

// committed counts a committed batch of n commands that took took from
// BEGIN to COMMIT, and tells Options.OnCommit.
func (s *Store) committed(n int, took time.Duration) {
	s.stats.transactions.Add(1)
	s.stats.commands.Add(uint64(n)) //nolint:gosec // G115: n is a batch's length, never negative
	s.stats.commitNanos.Add(int64(took))
	if int64(n) > s.stats.maxBatch.Load() {
		s.stats.maxBatch.Store(int64(n))
	}
	if s.opts.OnCommit != nil {
		s.opts.OnCommit(n, took)
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

func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}

// reload refreshes the balance, state and plan of cached accounts and the
// key cache (new keys, deletions) from the database. It runs on the writer
// goroutine, so no commit of ours is in flight.
func (s *Store) reload(ctx context.Context) error {
	s.loadMu.Lock()
	defer s.loadMu.Unlock()
	rows, err := s.eng.writerQuery(ctx, reloadAccountsQuery)
	if err != nil {
		return err
	}
	defer rows.Close() // on a failed scan; closed below otherwise
	for rows.Next() {
		var id, state, plan, suspendedFor string
		var bal int64
		if err := rows.Scan(&id, &bal, &state, &plan, &suspendedFor); err != nil {
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

	rows, err = s.eng.writerQuery(ctx, reloadKeysQuery)
	if err != nil {
		return err
	}
	defer rows.Close()
	kc := &s.keys
	kc.mu.Lock()
	defer kc.mu.Unlock()
	for rows.Next() {
		e, err := scanEntry(rows)
		if err != nil {
			return err
		}
		kc.refreshLocked(e)
	}
	clear(kc.neg)
	kc.gen++
	return rows.Err()
}
