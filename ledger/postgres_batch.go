package ledger

// The PostgreSQL engine's batches of settles and releases (postgres.go,
// "Settles").

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// pgBatch is one batch's columns and sums, reused by the writer.
type pgBatch struct {
	holdIDs []int64
	held    map[int64]int64 // hold id → amount its row still held
	avail   map[string]int64

	// usage rows, one slice per column (usageInsertColumns, hold_id, hold_lapsed)
	txt                           [8][]string // request_id … client_format
	stream                        []bool
	num                           [5][]int64 // input … reasoning tokens
	cost, charged, hold, discount []int64
	over                          []bool
	source                        []string
	status                        []int64
	outcome                       []string
	latency, ttft, created        []int64
	hosted                        [4][]int64
	tier, discountAmt             []int64
	holdID                        []int64
	lapsed                        []bool

	settles  []*command       // the settles whose rows the INSERT carried, in order
	inserted map[string]int64 // request id → hold id of the rows inserted

	carved []*command      // the settles of holds carved from advances, in order
	take   map[int64]int64 // advance → what its settles charged

	debit, release map[string]int64
	spend          map[string]monthSpend // what the debits add to each account's month (spend.go)
	keys           map[string]keyAgg
	daily          map[dailyKey]dailyAgg
}

func (b *pgBatch) reset() {
	if b.held == nil {
		b.held, b.avail, b.inserted = map[int64]int64{}, map[string]int64{}, map[string]int64{}
		b.debit, b.release, b.spend = map[string]int64{}, map[string]int64{}, map[string]monthSpend{}
		b.keys, b.daily = map[string]keyAgg{}, map[dailyKey]dailyAgg{}
		b.take = map[int64]int64{}
	}
	b.holdIDs = b.holdIDs[:0]
	clear(b.take)
	clear(b.carved)
	b.carved = b.carved[:0]
	clear(b.held)
	clear(b.avail)
	for i := range b.txt {
		b.txt[i] = b.txt[i][:0]
	}
	for i := range b.num {
		b.num[i] = b.num[i][:0]
	}
	for i := range b.hosted {
		b.hosted[i] = b.hosted[i][:0]
	}
	b.stream, b.cost, b.charged, b.hold, b.discount = b.stream[:0], b.cost[:0], b.charged[:0], b.hold[:0], b.discount[:0]
	b.over, b.source, b.status, b.outcome = b.over[:0], b.source[:0], b.status[:0], b.outcome[:0]
	b.latency, b.ttft, b.created, b.holdID, b.lapsed = b.latency[:0], b.ttft[:0], b.created[:0], b.holdID[:0], b.lapsed[:0]
	b.tier, b.discountAmt = b.tier[:0], b.discountAmt[:0]
	clear(b.settles)
	b.settles = b.settles[:0]
	clear(b.inserted)
	clear(b.debit)
	clear(b.release)
	clear(b.spend)
	clear(b.keys)
	clear(b.daily)
}

func (b *pgBatch) addRow(c *command) {
	r := c.rec
	for i, v := range [8]string{r.RequestID, r.AccountID, r.KeyID, r.Model, r.Provider, r.UpstreamModel, r.UpstreamKeyID, r.ClientFormat} {
		b.txt[i] = append(b.txt[i], v)
	}
	b.stream = append(b.stream, r.Stream)
	for i, v := range [5]int64{r.Tokens.Input, r.Tokens.Output, r.Tokens.CacheRead, r.Tokens.CacheWrite, r.Tokens.Reasoning} {
		b.num[i] = append(b.num[i], v)
	}
	b.cost = append(b.cost, int64(r.Cost))
	b.charged = append(b.charged, int64(r.Charged))
	b.hold = append(b.hold, int64(r.Hold))
	b.discount = append(b.discount, int64(r.DiscountBps))
	b.over = append(b.over, r.OverHold)
	b.source = append(b.source, r.UsageSource)
	b.status = append(b.status, int64(r.Status))
	b.outcome = append(b.outcome, r.Outcome)
	b.latency = append(b.latency, r.Latency.Microseconds())
	b.ttft = append(b.ttft, r.TTFT.Microseconds())
	b.created = append(b.created, r.CreatedAt.UnixMilli())
	for i, v := range [4]int64{r.Hosted.WebSearch, r.Hosted.WebFetch, r.Hosted.ImageGeneration, int64(r.HostedCost)} {
		b.hosted[i] = append(b.hosted[i], v)
	}
	b.tier = append(b.tier, int64(r.TierBps))
	b.discountAmt = append(b.discountAmt, int64(r.Discount))
	b.holdID = append(b.holdID, c.hold.id)
	b.lapsed = append(b.lapsed, r.HoldLapsed)
	b.settles = append(b.settles, c)
}

func (b *pgBatch) rowArgs() []any {
	args := make([]any, 0, 33)
	for i := range b.txt {
		args = append(args, b.txt[i])
	}
	args = append(args, b.stream)
	for i := range b.num {
		args = append(args, b.num[i])
	}
	args = append(args, b.cost, b.charged, b.hold, b.discount, b.over, b.source, b.status, b.outcome,
		b.latency, b.ttft, b.created)
	for i := range b.hosted {
		args = append(args, b.hosted[i])
	}
	return append(args, b.tier, b.discountAmt, b.holdID, b.lapsed)
}

// usageCopyColumns are the columns of rowArgs, in order, for COPY.
var usageCopyColumns = func() []string {
	var cols []string
	for _, c := range strings.Split(usageInsertColumns, ",") {
		cols = append(cols, strings.TrimSpace(c))
	}
	return append(cols, "hold_id", "hold_lapsed")
}()

// copyRows is the batch's usage rows as a pgx.CopyFromSource: row i is
// element i of each of rowArgs' columns.
type copyRows struct {
	cols []any
	i, n int
	row  []any
}

func (r *copyRows) Next() bool { r.i++; return r.i <= r.n }
func (r *copyRows) Err() error { return nil }

func (r *copyRows) Values() ([]any, error) {
	r.row = r.row[:0]
	for _, col := range r.cols {
		var v any
		switch c := col.(type) {
		case []string:
			v = c[r.i-1]
		case []int64:
			v = c[r.i-1]
		case []bool:
			v = c[r.i-1]
		default:
			return nil, fmt.Errorf("usage column of type %T", col)
		}
		r.row = append(r.row, v)
	}
	return r.row, nil
}

// pgInsertNewUsage inserts the rows that are not there yet (see batchTx).
const pgInsertNewUsage = `INSERT INTO usage (` + usageInsertColumns + `, hold_id, hold_lapsed)
	SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[],
		$9::boolean[], $10::bigint[], $11::bigint[], $12::bigint[], $13::bigint[], $14::bigint[],
		$15::bigint[], $16::bigint[], $17::bigint[], $18::bigint[], $19::boolean[], $20::text[], $21::bigint[], $22::text[],
		$23::bigint[], $24::bigint[], $25::bigint[], $26::bigint[], $27::bigint[], $28::bigint[], $29::bigint[],
		$30::bigint[], $31::bigint[], $32::bigint[], $33::boolean[])
	ON CONFLICT (request_id) DO NOTHING RETURNING request_id, hold_id`

// runBatch commits a batch of settles and releases in one transaction.
func (p *pgEngine) runBatch(batch []*command) (err error) {
	s := p.s
	ctx, cancel := context.WithTimeout(context.Background(), pgBatchTimeout)
	defer cancel()
	start := time.Now()
	resetOutputs(batch)
	conn, err := p.writerConn(ctx)
	if err != nil {
		s.stats.failures.Add(1)
		return fmt.Errorf("%w: begin: %w", errTransaction, err)
	}
	var mode batchMode
attempts:
	for {
		err = p.batchTx(ctx, conn, batch, mode)
		var pe *pgconn.PgError
		switch {
		case errors.Is(err, errRowsExist) && !mode.existing:
			mode.existing = true
		case errors.As(err, &pe) && pe.Code == "MG001" && !mode.careful: // an advance short or gone
			mode.careful = true
		default:
			break attempts
		}
		if _, err = conn.Exec(ctx, "ROLLBACK"); err != nil {
			break
		}
		resetOutputs(batch)
	}
	if err != nil {
		s.stats.failures.Add(1)
		if conn.PgConn().TxStatus() != 'I' {
			rctx, rcancel := context.WithTimeout(context.Background(), time.Second)
			_, _ = conn.Exec(rctx, "ROLLBACK")
			rcancel()
		}
		p.dropWriterConn()
		return err
	}
	for _, c := range batch {
		c.n = 1
	}
	took := time.Since(start)
	s.committed(len(batch), took)
	return nil
}

// resetOutputs clears what an attempt at the batch set on its commands.
func resetOutputs(batch []*command) {
	for _, c := range batch {
		c.err, c.balance, c.n, c.earlier, c.covered = nil, 0, 0, false, 0
		if c.rec != nil {
			c.rec.Charged, c.rec.HoldLapsed = c.amount, false
		}
	}
}

// batchMode is how batchTx runs a batch: existing, after its COPY found a
// usage row there already; careful, after its advances were found short
// or gone (pgTakeStrict's MG001).
type batchMode struct{ existing, careful bool }

// writerConn returns the writer's own connection, so that the writer never
// waits behind reserves for one of the pool's. It runs on the writer
// goroutine.
func (p *pgEngine) writerConn(ctx context.Context) (*pgx.Conn, error) {
	if p.wconn == nil {
		c, err := p.acquireOwn(ctx)
		if err != nil {
			return nil, err
		}
		p.wconn = c
	}
	return p.wconn.Conn(), nil
}

// dropWriterConn closes the writer's connection after a failure.
func (p *pgEngine) dropWriterConn() {
	if p.wconn != nil {
		dropOwn(p.wconn)
		p.wconn = nil
	}
}

// acquireOwn takes a connection from the pool for the writer or the
// reserver to keep, set to plan its statements once: they run the same few
// statements thousands of times a second, whose plans do not depend on
// the values, and PostgreSQL would otherwise plan each of the first
// executions and keep re-checking.
func (p *pgEngine) acquireOwn(ctx context.Context) (*pgxpool.Conn, error) {
	c, err := p.pool.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	var pe *pgconn.PgError
	if _, err := c.Exec(ctx, "SET plan_cache_mode = force_generic_plan"); err != nil &&
		!(errors.As(err, &pe) && pe.Code == "42704") { // before PostgreSQL 12 there is no such setting
		dropOwn(c)
		return nil, err
	}
	return c, nil
}

// dropOwn closes a connection of acquireOwn's, so that the pool does not
// hand its setting to other work.
func dropOwn(c *pgxpool.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	_ = c.Conn().Close(ctx)
	cancel()
	c.Release()
}

// errRowsExist: a usage row of the batch was there already.
var errRowsExist = errors.New("usage rows exist")

// batchTx runs the batch's transaction on conn (see the file's comment).
// The usage rows go in with COPY, which fails (errRowsExist, the
// transaction left to roll back) if one of their request ids has a row: a
// settle tried again after a commit whose outcome it could not learn. The
// batch is then run again with existing set, where the rows are inserted
// ON CONFLICT DO NOTHING and the ones not inserted are looked at
// (resolveDuplicates). COPY is the common case: it costs PostgreSQL a
// fraction of an INSERT of the same rows from 33 unnested arrays (whose
// per-array work and memory dominated the writer's backend).
func (p *pgEngine) batchTx(ctx context.Context, conn *pgx.Conn, batch []*command, mode batchMode) error {
	existing := mode.existing
	b := &p.batch
	b.reset()
	for _, c := range batch {
		if c.hold.adv == nil { // a hold carved from an advance has no row
			b.holdIDs = append(b.holdIDs, c.hold.id)
		}
		if c.kind == cmdSettle {
			b.addRow(c)
		}
	}

	// 1: begin, delete the holds, insert the rows as if every hold covered
	// its charge. The accounts are not locked yet: holds before accounts,
	// as the reaper, releases and mg_extend take them, and the accounts'
	// row locks, which every reserve on them waits for, are held only
	// through the last round trip.
	pb := &pgx.Batch{}
	pb.Queue("BEGIN")
	if len(b.holdIDs) > 0 { // none when every settle's hold was carved from an advance
		pb.Queue(`DELETE FROM holds WHERE id = ANY($1) RETURNING id, amount`, b.holdIDs)
	}
	if len(b.settles) > 0 && existing {
		pb.Queue(pgInsertNewUsage, b.rowArgs()...)
	}
	br := conn.SendBatch(ctx, pb)
	if _, err := br.Exec(); err != nil {
		br.Close()
		return fmt.Errorf("%w: begin: %w", errTransaction, err)
	}
	var err error
	if len(b.holdIDs) > 0 {
		var rows pgx.Rows
		if rows, err = br.Query(); err == nil {
			var id, amount int64
			_, err = pgx.ForEachRow(rows, []any{&id, &amount}, func() error {
				b.held[id] = amount
				return nil
			})
		}
	}
	if err == nil && len(b.settles) > 0 && existing {
		var rows pgx.Rows
		rows, err = br.Query()
		if err == nil {
			var req string
			var hold int64
			_, err = pgx.ForEachRow(rows, []any{&req, &hold}, func() error {
				b.inserted[req] = hold
				return nil
			})
		}
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err == nil && len(b.settles) > 0 && !existing {
		_, err = conn.CopyFrom(ctx, pgx.Identifier{"usage"}, usageCopyColumns, &copyRows{cols: b.rowArgs(), n: len(b.settles)})
		if err == nil {
			for _, c := range b.settles {
				b.inserted[c.rec.RequestID] = c.hold.id
			}
		}
	}
	var pe *pgconn.PgError
	if !existing && errors.As(err, &pe) && pe.Code == "23505" && pe.TableName == "usage" { // unique_violation
		return errRowsExist
	}
	if err != nil {
		return fmt.Errorf("settle: %w", err)
	}

	accts := make([]string, 0, len(batch))
	for _, c := range batch {
		if !slices.Contains(accts, c.hold.acct.id) {
			accts = append(accts, c.hold.acct.id)
		}
	}
	slices.Sort(accts)

	// 2: what each settle is charged, and which rows are not ours
	var fix, dups []*command
	b.carved = b.carved[:0]
	for _, c := range batch {
		held, live := b.held[c.hold.id]
		if live {
			b.release[c.hold.acct.id] += held
		}
		if c.kind != cmdSettle {
			continue
		}
		r := c.rec
		if hid, ok := b.inserted[r.RequestID]; !ok || hid != c.hold.id {
			dups = append(dups, c)
			continue
		}
		if adv := c.hold.adv; adv != nil {
			b.carved = append(b.carved, c)
			if r.Charged > 0 {
				b.take[adv.id] += int64(r.Charged)
			}
			continue
		}
		if !live || held < int64(r.Charged) {
			r.HoldLapsed = !live
			fix = append(fix, c)
		}
	}
	// the advances, before the accounts: in the last round trip, where
	// pgTakeStrict fails the transaction if one is short (the batch then runs
	// again in careful mode); in careful mode, or when accounts are locked
	// sooner (fixCharges), in a round trip of their own that takes what
	// each has and charges the rest to the available balances
	careful := len(b.take) > 0 && (mode.careful || len(fix) > 0)
	if careful {
		var err error
		if fix, err = p.takeCarefully(ctx, conn, fix); err != nil {
			return err
		}
	} else {
		for _, c := range b.carved {
			c.covered = c.rec.Charged
			b.release[c.hold.acct.id] += int64(c.covered)
		}
	}
	if len(fix) > 0 {
		if err := p.fixCharges(ctx, conn, accts, fix); err != nil {
			return err
		}
	}
	if len(dups) > 0 {
		if err := p.resolveDuplicates(ctx, conn, dups); err != nil {
			return err
		}
	}

	// 3: debits and releases, key totals, rollups, commit
	for _, c := range b.settles {
		if c.err != nil || c.earlier { // refused, or settled by an earlier attempt
			continue
		}
		r := c.rec
		if r.Charged != 0 {
			b.debit[r.AccountID] += int64(r.Charged)
			sp := b.spend[r.AccountID]
			sp.add(monthOf(r.CreatedAt), r.Charged)
			b.spend[r.AccountID] = sp
		}
		addUsage(b.keys, b.daily, r)
		if h := c.hold; h.key != nil && c.now >= 0 && r.Charged != 0 {
			id := h.key.principal.KeyID
			k := b.keys[id]
			k.period.add(c.now, r.Charged)
			b.keys[id] = k
		}
		if r.HoldLapsed {
			p.lapsed.Add(1)
		}
	}
	pb = &pgx.Batch{}
	if len(b.take) > 0 && !careful {
		ids, used := b.takes()
		pb.Queue(pgTakeStrict, ids, used)
	}
	// the accounts, in one order for every instance and the reserves
	pb.Queue(`SELECT count(*) FROM (SELECT 1 FROM accounts WHERE id = ANY($1) ORDER BY id FOR UPDATE) AS locked`, accts)
	if len(b.debit)+len(b.release) > 0 {
		ids := make([]string, 0, len(b.release)+len(b.debit))
		for id := range b.release {
			ids = append(ids, id)
		}
		for id := range b.debit {
			if _, ok := b.release[id]; !ok {
				ids = append(ids, id)
			}
		}
		slices.Sort(ids) // one lock order for every instance
		debits, releases := make([]int64, len(ids)), make([]int64, len(ids))
		months, spends := make([]int32, len(ids)), make([]int64, len(ids))
		for i, id := range ids {
			debits[i], releases[i] = b.debit[id], b.release[id]
			months[i], spends[i] = b.spend[id].month, int64(b.spend[id].spend)
		}
		// the month's spend as spend.go counts it: every SET reads the row as it was
		pb.Queue(`UPDATE accounts SET balance = accounts.balance - v.debit, held = accounts.held - v.release,
				month_spend = CASE WHEN v.month > accounts.spend_month THEN v.spend
					WHEN v.month = accounts.spend_month THEN accounts.month_spend + v.spend ELSE accounts.month_spend END,
				spend_month = greatest(accounts.spend_month, v.month)
			FROM unnest($1::text[], $2::bigint[], $3::bigint[], $4::integer[], $5::bigint[]) AS v(id, debit, release, month, spend)
			WHERE accounts.id = v.id`,
			ids, debits, releases, months, spends)
	}
	if len(b.keys) > 0 {
		ids := make([]string, 0, len(b.keys))
		for id := range b.keys {
			ids = append(ids, id)
		}
		slices.Sort(ids)
		var n, in, out, spent, last = make([]int64, len(ids)), make([]int64, len(ids)), make([]int64, len(ids)),
			make([]int64, len(ids)), make([]int64, len(ids))
		pstart, pspend := make([]int64, len(ids)), make([]int64, len(ids))
		for i, id := range ids {
			k := b.keys[id]
			n[i], in[i], out[i], spent[i], last[i] = k.requests, k.input, k.output, int64(k.spent), k.lastUsed
			pstart[i], pspend[i] = -1, 0
			if k.period.spend != 0 {
				pstart[i], pspend[i] = k.period.start, int64(k.period.spend)
			}
		}
		// a capped key's period spend as periodSpend.add counts it (-1: no charge to count)
		pb.Queue(`UPDATE keys SET requests = keys.requests + v.n, input_tokens = keys.input_tokens + v.i,
			output_tokens = keys.output_tokens + v.o, spent = keys.spent + v.s,
			last_used_at = greatest(coalesce(keys.last_used_at, 0), v.last),
			period_spent = CASE WHEN v.ps > keys.period_start THEN v.pp WHEN v.ps = keys.period_start THEN keys.period_spent + v.pp
				ELSE keys.period_spent END,
			period_start = greatest(keys.period_start, v.ps)
			FROM unnest($1::text[], $2::bigint[], $3::bigint[], $4::bigint[], $5::bigint[], $6::bigint[], $7::bigint[], $8::bigint[])
				AS v(id, n, i, o, s, last, ps, pp)
			WHERE keys.id = v.id`, ids, n, in, out, spent, last, pstart, pspend)
	}
	if len(b.daily) > 0 {
		dks := make([]dailyKey, 0, len(b.daily))
		for dk := range b.daily {
			dks = append(dks, dk)
		}
		slices.SortFunc(dks, func(x, y dailyKey) int {
			if x.day != y.day {
				return int(x.day - y.day)
			}
			if c := strings.Compare(x.key, y.key); c != 0 {
				return c
			}
			return strings.Compare(x.model, y.model)
		})
		cols := [4][]string{}
		nums := [7][]int64{}
		for _, dk := range dks {
			d := b.daily[dk]
			cols[0] = append(cols[0], time.UnixMilli(dk.day*millisPerDay).UTC().Format(time.DateOnly))
			cols[1] = append(cols[1], dk.key)
			cols[2] = append(cols[2], dk.model)
			cols[3] = append(cols[3], d.account)
			for i, v := range [7]int64{d.requests, d.input, d.output, d.cacheRead, d.cacheWrite, int64(d.spent), int64(d.discount)} {
				nums[i] = append(nums[i], v)
			}
		}
		pb.Queue(`INSERT INTO usage_daily (day, key_id, model, account_id, requests, input_tokens, output_tokens,
				cache_read_tokens, cache_write_tokens, spent, discount)
			SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::bigint[], $6::bigint[], $7::bigint[],
				$8::bigint[], $9::bigint[], $10::bigint[], $11::bigint[])
			ON CONFLICT (day, key_id, model) DO UPDATE SET
				requests = usage_daily.requests + excluded.requests,
				input_tokens = usage_daily.input_tokens + excluded.input_tokens,
				output_tokens = usage_daily.output_tokens + excluded.output_tokens,
				cache_read_tokens = usage_daily.cache_read_tokens + excluded.cache_read_tokens,
				cache_write_tokens = usage_daily.cache_write_tokens + excluded.cache_write_tokens,
				spent = usage_daily.spent + excluded.spent,
				discount = usage_daily.discount + excluded.discount`,
			cols[0], cols[1], cols[2], cols[3], nums[0], nums[1], nums[2], nums[3], nums[4], nums[5], nums[6])
	}
	statements := pb.Len()
	pb.Queue("COMMIT")
	br = conn.SendBatch(ctx, pb)
	for i := 0; i < statements; i++ {
		if _, err := br.Exec(); err != nil {
			br.Close()
			return fmt.Errorf("settle: %w", err)
		}
	}
	tag, err := br.Exec()
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("%w: commit: %w", errTransaction, err)
	}
	if tag.String() != "COMMIT" {
		return fmt.Errorf("%w: commit: %s", errTransaction, tag)
	}
	return nil
}

// pgTakeStrict lowers the advances $1 by what their settles took ($2), in
// one statement; if one holds less or is gone it fails the transaction
// (mg_short's MG001) and the batch runs again in careful mode. The ids are
// sorted, so the rows are locked in id order, as mg_reserve locks them.
const pgTakeStrict = `WITH u AS (
		UPDATE holds SET amount = holds.amount - v.used FROM unnest($1::bigint[], $2::bigint[]) AS v(id, used)
		WHERE holds.id = v.id AND holds.amount >= v.used RETURNING 1)
	SELECT CASE WHEN count(*) = cardinality($1::bigint[]) THEN 0 ELSE mg_short() END FROM u`

// takes lists the advances to lower and by how much, in id order.
func (b *pgBatch) takes() (ids, used []int64) {
	ids = make([]int64, 0, len(b.take))
	for id := range b.take {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	used = make([]int64, len(ids))
	for i, id := range ids {
		used[i] = b.take[id]
	}
	return ids, used
}

// takeCarefully lowers the batch's advances by what they have of what
// their settles charged (mg_take), and gives each carved
// settle, in order, its part: a settle whose advance is gone is lapsed,
// and one whose part falls short joins fix, to be charged the rest from
// the available balance. An advance found short or gone is spoiled: this
// instance's idea of it was wrong (its lease lapsed, or a raise was lost
// with a crashed server).
func (p *pgEngine) takeCarefully(ctx context.Context, conn *pgx.Conn, fix []*command) ([]*command, error) {
	b := &p.batch
	ids, used := b.takes()
	rows, err := conn.Query(ctx, `SELECT advance, taken FROM mg_take($1, $2)`, ids, used)
	if err != nil {
		return nil, fmt.Errorf("settle: %w", err)
	}
	have := make(map[int64]int64, len(ids))
	var id, taken int64
	if _, err := pgx.ForEachRow(rows, []any{&id, &taken}, func() error {
		have[id] = taken
		return nil
	}); err != nil {
		return nil, fmt.Errorf("settle: %w", err)
	}
	for i, id := range ids {
		if have[id] < used[i] {
			for _, c := range b.carved {
				if c.hold.adv.id == id {
					p.spoil(c.hold.adv)
					break
				}
			}
		}
	}
	for _, c := range b.carved {
		r := c.rec
		if r.Charged == 0 {
			continue
		}
		left, live := have[c.hold.adv.id]
		t := min(int64(r.Charged), left)
		have[c.hold.adv.id] = left - t
		c.covered = Money(t)
		b.held[c.hold.id] = t
		b.release[c.hold.acct.id] += t
		if !live || t < int64(r.Charged) {
			r.HoldLapsed = !live
			fix = append(fix, c)
		}
	}
	return fix, nil
}

// fixCharges charges the settles whose hold lapsed, or covers less than
// their charge, from their accounts' available balances (never below
// zero), and corrects their rows. It locks all the batch's accounts
// (accts, sorted), not only those it reads: a lock order that skipped
// some and took them later could deadlock with a reserve.
func (p *pgEngine) fixCharges(ctx context.Context, conn *pgx.Conn, accts []string, fix []*command) error {
	b := &p.batch
	rows, err := conn.Query(ctx, `SELECT id, balance - held FROM accounts WHERE id = ANY($1) ORDER BY id FOR UPDATE`, accts)
	if err != nil {
		return fmt.Errorf("settle: %w", err)
	}
	var id string
	var avail int64
	if _, err := pgx.ForEachRow(rows, []any{&id, &avail}, func() error {
		// The holds this batch deletes are still in held: what they leave
		// unused is not counted as available, which errs on the safe side.
		b.avail[id] = max(avail, 0)
		return nil
	}); err != nil {
		return fmt.Errorf("settle: %w", err)
	}
	keyLeft, err := p.keysLeft(ctx, conn, fix)
	if err != nil {
		return fmt.Errorf("settle: %w", err)
	}
	reqs := make([]string, 0, len(fix))
	charged := make([]int64, 0, len(fix))
	over := make([]bool, 0, len(fix))
	lapsed := make([]bool, 0, len(fix))
	for _, c := range fix {
		r := c.rec
		covered := min(int64(r.Charged), b.held[c.hold.id]) // 0 when lapsed
		excess := int64(r.Charged) - covered
		take := min(excess, b.avail[r.AccountID])
		if left, capped := keyLeft[c.hold.key]; capped {
			take = max(min(take, left), 0)
			keyLeft[c.hold.key] = left - take
		}
		b.avail[r.AccountID] -= take
		r.Charged = Money(covered + take)
		if take < excess {
			r.OverHold = true
		}
		reqs = append(reqs, r.RequestID)
		charged = append(charged, int64(r.Charged))
		over = append(over, r.OverHold)
		lapsed = append(lapsed, r.HoldLapsed)
	}
	if _, err := conn.Exec(ctx, `UPDATE usage SET charged = v.charged, over_hold = v.over, hold_lapsed = v.lapsed
		FROM unnest($1::text[], $2::bigint[], $3::boolean[], $4::boolean[]) AS v(req, charged, over, lapsed)
		WHERE usage.request_id = v.req`, reqs, charged, over, lapsed); err != nil {
		return fmt.Errorf("settle: %w", err)
	}
	return nil
}

// keysLeft is, for the capped keys of the settles to fix, what their caps
// leave beyond the batch's other charges on them (which the batch counts
// only later): the keys' rows are locked, after the accounts, and the
// holds this batch deleted no longer count. A lapsed hold's charge is
// thus taken only as far as its key's cap goes, as the account's
// available balance bounds it.
func (p *pgEngine) keysLeft(ctx context.Context, conn *pgx.Conn, fix []*command) (map[*keyEntry]int64, error) {
	var ids []string
	var starts []int64
	for _, c := range fix {
		if h := c.hold; h.key != nil && c.now >= 0 && !slices.Contains(ids, h.key.principal.KeyID) {
			ids, starts = append(ids, h.key.principal.KeyID), append(starts, c.now)
		}
	}
	if len(ids) == 0 {
		return nil, nil
	}
	rows, err := conn.Query(ctx, `SELECT v.k, coalesce(mg_key_left(v.k, v.st), 0)
		FROM (SELECT k.id AS k, u.st FROM keys k JOIN unnest($1::text[], $2::bigint[]) AS u(k, st) ON k.id = u.k
			ORDER BY k.id FOR UPDATE OF k) AS v`, ids, starts)
	if err != nil {
		return nil, err
	}
	byID := map[string]int64{}
	var id string
	var left int64
	if _, err := pgx.ForEachRow(rows, []any{&id, &left}, func() error {
		byID[id] = left
		return nil
	}); err != nil {
		return nil, err
	}
	out := map[*keyEntry]int64{}
	for _, c := range p.batch.settles {
		k := c.hold.key
		if k == nil {
			continue
		}
		l, capped := byID[k.principal.KeyID]
		if !capped {
			continue
		}
		if _, seen := out[k]; !seen {
			out[k] = l
		}
		if !slices.Contains(fix, c) {
			out[k] -= int64(c.rec.Charged)
		} else {
			out[k] -= min(int64(c.rec.Charged), p.batch.held[c.hold.id])
		}
	}
	return out, nil
}

// resolveDuplicates looks at the rows of the settles whose request id was
// taken: a row with the settle's own hold is an earlier attempt of this
// settle that committed (success, nothing more to do: c.balance is set);
// any other is a duplicate request id (refused: nothing is debited).
func (p *pgEngine) resolveDuplicates(ctx context.Context, conn *pgx.Conn, dups []*command) error {
	reqs := make([]string, len(dups))
	for i, c := range dups {
		reqs[i] = c.rec.RequestID
	}
	rows, err := conn.Query(ctx, `SELECT request_id, coalesce(hold_id, 0), charged, over_hold, hold_lapsed FROM usage WHERE request_id = ANY($1)`, reqs)
	if err != nil {
		return fmt.Errorf("settle: %w", err)
	}
	type row struct {
		hold         int64
		charged      int64
		over, lapsed bool
	}
	found := map[string]row{}
	var req string
	var r row
	if _, err := pgx.ForEachRow(rows, []any{&req, &r.hold, &r.charged, &r.over, &r.lapsed}, func() error {
		found[req] = r
		return nil
	}); err != nil {
		return fmt.Errorf("settle: %w", err)
	}
	for _, c := range dups {
		f, ok := found[c.rec.RequestID]
		if ok && f.hold == c.hold.id {
			c.rec.Charged, c.rec.OverHold, c.rec.HoldLapsed = Money(f.charged), f.over, f.lapsed
			c.earlier = true // no effect in this batch
			if c.hold.adv != nil && !f.lapsed {
				c.covered = Money(f.charged) // what that attempt took from the advance, as near as the row says
			}
			continue
		}
		c.err = fmt.Errorf("ledger: usage row for request %q exists: %w", c.rec.RequestID, ErrDuplicate)
	}
	return nil
}
