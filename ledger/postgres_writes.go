package ledger

// The PostgreSQL engine's writes other than settles and releases: each is
// a transaction of its own on the pool (PostgreSQL orders them; there is
// no single writer to go through). A write that changes what the caches
// hold updates this store's caches once committed, under loadMu, so that a
// cache fill racing with it cannot leave the old value behind; triggers
// tell the other instances (postgres_schema.go).

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// write runs fn in a transaction of its own (a pgx one) and commits it.
func (p *pgEngine) write(ctx context.Context, what string, fn func(tx pgx.Tx) error) error {
	done, err := p.s.beginRead()
	if err != nil {
		return err
	}
	defer done()
	ctx, cancel := context.WithTimeout(ctx, p.s.opts.BusyTimeout+pgOpTimeout)
	defer cancel()
	err = pgx.BeginFunc(ctx, p.pool, fn)
	if err != nil {
		p.s.stats.failures.Add(1)
		if errors.Is(err, ErrNotFound) || errors.Is(err, ErrDuplicate) || errors.Is(err, errOverflow) {
			return err
		}
		return fmt.Errorf("ledger: %s: write failed: %w", what, err)
	}
	p.s.stats.transactions.Add(1)
	p.s.stats.commands.Add(1)
	return nil
}

// applyLocked runs fn with loadMu held, after a commit (see above).
func (p *pgEngine) applyLocked(fn func()) {
	p.s.loadMu.Lock()
	fn()
	p.s.loadMu.Unlock()
}

func (p *pgEngine) createAccount(ctx context.Context, id, email, plan string, now int64) error {
	return p.write(ctx, "create account "+id, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `INSERT INTO accounts (id, email, plan, state, balance, created_at)
			VALUES ($1, $2, $3, 'active', 0, $4) ON CONFLICT DO NOTHING`, id, email, plan, now)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return fmt.Errorf("ledger: account with email %q exists: %w", email, ErrDuplicate)
		}
		return nil
	})
}

// setAccount sets an account's state or plan (column is a constant).
func (p *pgEngine) setAccount(ctx context.Context, id, column, value string) error {
	err := p.write(ctx, "set "+column+" "+id, func(tx pgx.Tx) error {
		set := column + ` = $1`
		if column == "state" {
			set += `, suspended_for = ''` // the operator's suspension, or none
		}
		tag, err := tx.Exec(ctx, `UPDATE accounts SET `+set+` WHERE id = $2`, value, id)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return fmt.Errorf("ledger: account %q: %w", id, ErrNotFound)
		}
		return nil
	})
	if err != nil {
		return err
	}
	p.applyLocked(func() { p.s.accountSet(id, column, value) })
	return nil
}

func (p *pgEngine) createKey(ctx context.Context, e *keyEntry, now int64) error {
	pr := e.principal
	limits, err := limitArgs(e)
	if err != nil {
		return err
	}
	err = p.write(ctx, "create key "+pr.KeyID, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `INSERT INTO keys (id, account_id, hash, label, prefix, created_at, `+limitColumns+`)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)`,
			append([]any{pr.KeyID, pr.AccountID, e.hash[:], pr.Label, pr.Prefix, now}, limits...)...)
		var pe *pgconn.PgError
		if errors.As(err, &pe) && pe.Code == "23503" { // foreign key: no such account
			return fmt.Errorf("ledger: account %q: %w", pr.AccountID, ErrNotFound)
		}
		return err
	})
	if err != nil {
		return err
	}
	p.applyLocked(func() { p.s.keyAdded(e) })
	return nil
}

func (p *pgEngine) deleteKey(ctx context.Context, id string, now int64) error {
	err := p.write(ctx, "delete key "+id, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `UPDATE keys SET deleted_at = $1 WHERE id = $2 AND deleted_at IS NULL`, now, id)
		if err != nil || tag.RowsAffected() > 0 {
			return err
		}
		var one int
		err = tx.QueryRow(ctx, `SELECT 1 FROM keys WHERE id = $1`, id).Scan(&one)
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("ledger: key %q: %w", id, ErrNotFound)
		}
		return err
	})
	if err != nil {
		return err
	}
	p.applyLocked(func() { p.s.keyDeleted(id) })
	return nil
}

func (p *pgEngine) registerModel(ctx context.Context, id string, now int64) (int64, error) {
	var created int64
	err := p.write(ctx, "register model "+id, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO models (id, created_at) VALUES ($1, $2) ON CONFLICT (id) DO NOTHING`, id, now); err != nil {
			return err
		}
		return tx.QueryRow(ctx, `SELECT created_at FROM models WHERE id = $1`, id).Scan(&created)
	})
	return created, err
}

// execSQL runs fn (queries with ? placeholders) in a database/sql
// transaction on the pool: the writes shared with SQLite's writer (logins).
func (p *pgEngine) execSQL(ctx context.Context, what string, fn func(ctx context.Context, conn execer) error) error {
	return p.execCommit(ctx, what, fn, nil)
}

// execCommit runs commit, under loadMu, once the transaction committed.
func (p *pgEngine) execCommit(ctx context.Context, what string, fn func(ctx context.Context, conn execer) error, commit func()) error {
	done, err := p.s.beginRead()
	if err != nil {
		return err
	}
	defer done()
	ctx, cancel := context.WithTimeout(ctx, p.s.opts.BusyTimeout+pgOpTimeout)
	defer cancel()
	tx, err := p.s.rdb.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("ledger: %s: write failed: %w", what, err)
	}
	defer func() { _ = tx.Rollback() }()
	if err := fn(ctx, pgTx{p.s, tx}); err != nil {
		if errors.Is(err, ErrNotFound) || errors.Is(err, ErrDuplicate) || errors.Is(err, ErrInsufficientFunds) || errors.Is(err, errOverflow) {
			return err
		}
		return fmt.Errorf("ledger: %s: write failed: %w", what, err)
	}
	if err := tx.Commit(); err != nil && !errors.Is(err, sql.ErrTxDone) {
		return fmt.Errorf("ledger: %s: write failed: %w", what, err)
	}
	if commit != nil {
		p.applyLocked(commit)
	}
	return nil
}

// recordAvailability upserts a batch of availability counts, summed per
// minute and per day (availAgg), in one transaction.
func (p *pgEngine) recordAvailability(ctx context.Context, counts []MinuteCount) error {
	g := newAvailAgg()
	g.add(counts)
	cols := availColumns()
	set := ""
	for i, c := range cols {
		if i > 0 {
			set += ", "
		}
		set += c + " = t." + c + " + excluded." + c
	}
	upsert := func(table, at, atType string) string {
		return `INSERT INTO ` + table + ` AS t (provider, ` + at + `, ok, fail_connect, fail_timeout, fail_server,
				fail_overloaded, fail_rate_limited, fail_auth, fail_closed)
			SELECT * FROM unnest($1::text[], $2::` + atType + `[], $3::bigint[], $4::bigint[], $5::bigint[], $6::bigint[],
				$7::bigint[], $8::bigint[], $9::bigint[], $10::bigint[])
			ON CONFLICT (provider, ` + at + `) DO UPDATE SET ` + set
	}
	rowsOf := func(m map[availKey]AvailabilityTotals, at func(int64) any) []any {
		g.keys = g.keys[:0]
		for k := range m {
			g.keys = append(g.keys, k)
		}
		slices.SortFunc(g.keys, compareAvailKeys)
		providers := make([]string, 0, len(g.keys))
		var ats []any
		var counts [1 + NumCauses][]int64
		var atInts []int64
		var atDays []string
		for _, k := range g.keys {
			t := m[k]
			providers = append(providers, k.provider)
			switch v := at(k.at).(type) {
			case int64:
				atInts = append(atInts, v)
			case string:
				atDays = append(atDays, v)
			}
			counts[0] = append(counts[0], t.OK)
			for i, f := range t.Fail {
				counts[1+i] = append(counts[1+i], f)
			}
		}
		if atDays != nil {
			ats = []any{atDays}
		} else {
			ats = []any{atInts}
		}
		args := []any{providers, ats[0]}
		for i := range counts {
			args = append(args, counts[i])
		}
		return args
	}
	return p.write(ctx, "record availability", func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, upsert("availability_minutes", "minute", "bigint"),
			rowsOf(g.minutes, func(m int64) any { return m })...); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, upsert("availability_daily", "day", "text"),
			rowsOf(g.days, func(d int64) any { return dayString(d) })...)
		return err
	})
}

func (p *pgEngine) openIncident(ctx context.Context, provider, cause string, start int64) (int64, error) {
	var id int64
	err := p.write(ctx, "open incident "+provider, func(tx pgx.Tx) error {
		err := tx.QueryRow(ctx, `INSERT INTO incidents (provider, cause, started_at) VALUES ($1, $2, $3)
			ON CONFLICT (provider) WHERE ended_at IS NULL DO NOTHING RETURNING id`, provider, cause, start).Scan(&id)
		if errors.Is(err, pgx.ErrNoRows) { // one is ongoing (the insert waited for it to commit)
			return tx.QueryRow(ctx, `SELECT id FROM incidents WHERE provider = $1 AND ended_at IS NULL`, provider).Scan(&id)
		}
		return err
	})
	return id, err
}

func (p *pgEngine) closeIncident(ctx context.Context, provider string, end int64) error {
	return p.write(ctx, "close incident "+provider, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `UPDATE incidents SET ended_at = greatest($1, started_at) WHERE provider = $2 AND ended_at IS NULL`, end, provider)
		return err
	})
}

func (p *pgEngine) pruneAvailability(ctx context.Context, now int64) error {
	minuteCutoff := -floorDiv(-(now - MinuteRetention.Milliseconds()), 1000)
	dayCutoff := dayString(floorDiv(now-DailyRetention.Milliseconds(), millisPerDay))
	return p.write(ctx, "prune availability", func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, rebind(skipScan("availability_minutes")+`DELETE FROM availability_minutes
			WHERE provider IN (SELECT name FROM providers WHERE name IS NOT NULL) AND minute < ?`), minuteCutoff); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, rebind(skipScan("availability_daily")+`DELETE FROM availability_daily
			WHERE provider IN (SELECT name FROM providers WHERE name IS NOT NULL) AND day < ?`), dayCutoff)
		return err
	})
}

// applyMoney runs the change in a transaction of its own, then applies it
// to the cached account.
func (p *pgEngine) applyMoney(ctx context.Context, ch *MoneyChange, fn func(ctx context.Context, conn execer) error, mem *moneyMem) error {
	err := p.execSQL(ctx, "money "+ch.Kind+" "+ch.AccountID, fn)
	if err == nil {
		p.applyLocked(func() { p.s.moneyApplied(ch.AccountID, mem) })
	}
	return err
}
