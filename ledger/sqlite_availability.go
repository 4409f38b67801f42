package ledger

// The SQLite engine's writes of the availability history (availability.go):
// the writer's statements, run in its batches.

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// availStmts are the writer's availability statements.
type availStmts struct {
	minutes, days                       *multiStmt
	ongoing, insIncident, closeIncident *sql.Stmt
	pruneMinutes, pruneDays             *sql.Stmt
}

func (st *availStmts) stmts() []**sql.Stmt {
	return []**sql.Stmt{&st.ongoing, &st.insIncident, &st.closeIncident, &st.pruneMinutes, &st.pruneDays}
}

func (st *availStmts) prepare(ctx context.Context, conn *sql.Conn) error {
	cols := availColumns()
	set := make([]string, len(cols))
	for i, c := range cols {
		set[i] = c + " = " + c + " + excluded." + c
	}
	upsert := func(table, at string) func(string) string {
		return func(values string) string {
			return `INSERT INTO ` + table + ` (provider, ` + at + `, ` + strings.Join(cols, ", ") + `) VALUES ` + values + `
				ON CONFLICT (provider, ` + at + `) DO UPDATE SET ` + strings.Join(set, ", ")
		}
	}
	var err error
	if st.minutes, err = prepareMulti(ctx, conn, availRowCols, upsert("availability_minutes", "minute"), ""); err != nil {
		return err
	}
	if st.days, err = prepareMulti(ctx, conn, availRowCols, upsert("availability_daily", "day"), ""); err != nil {
		return err
	}
	queries := []string{
		`SELECT id FROM incidents WHERE provider = ? AND ended_at IS NULL`,
		`INSERT INTO incidents (provider, cause, started_at) VALUES (?, ?, ?) RETURNING id`,
		`UPDATE incidents SET ended_at = max(?, started_at) WHERE provider = ? AND ended_at IS NULL`,
		skipScan("availability_minutes") + `DELETE FROM availability_minutes
			WHERE provider IN (SELECT name FROM providers WHERE name IS NOT NULL) AND minute < ?`,
		skipScan("availability_daily") + `DELETE FROM availability_daily
			WHERE provider IN (SELECT name FROM providers WHERE name IS NOT NULL) AND day < ?`,
	}
	for i, q := range queries {
		stmt, err := conn.PrepareContext(ctx, q) //nolint:sqlclosecheck // kept for the writer connection's life: availStmts.close closes it (closeDBs, also after a failed open)
		if err != nil {
			return fmt.Errorf("ledger: prepare availability statement %d: %w", i, err)
		}
		*st.stmts()[i] = stmt
	}
	return nil
}

func (st *availStmts) close() error {
	var errs []error
	for _, p := range st.stmts() {
		if *p != nil {
			errs = append(errs, (*p).Close())
			*p = nil
		}
	}
	for _, m := range []**multiStmt{&st.minutes, &st.days} {
		if *m != nil {
			errs = append(errs, (*m).close())
			*m = nil
		}
	}
	return errors.Join(errs...)
}

// flushAvailability upserts the batch's summed availability counts: minute
// rows and their daily rollup.
func (e *sqliteEngine) flushAvailability(ctx context.Context, g *availAgg) error {
	if len(g.minutes) == 0 {
		return nil
	}
	st := &e.st.avail
	g.appendRows(st.minutes, g.minutes, func(minute int64) any { return minute })
	if err := st.minutes.run(ctx); err != nil {
		return fmt.Errorf("availability minutes: %w", err)
	}
	g.appendRows(st.days, g.days, func(day int64) any { return dayString(day) })
	if err := st.days.run(ctx); err != nil {
		return fmt.Errorf("availability rollup: %w", err)
	}
	return nil
}

// execAvailability runs one availability command inside the batch transaction.
func (e *sqliteEngine) execAvailability(ctx context.Context, c *command, g *availAgg) error {
	st := &e.st.avail
	switch c.kind {
	case cmdAvailability:
		g.add(c.counts)
		return nil

	case cmdOpenIncident:
		// The transaction holds the write lock, so nobody can open one in between.
		err := st.ongoing.QueryRowContext(ctx, c.id).Scan(&c.n)
		if !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		return st.insIncident.QueryRowContext(ctx, c.id, c.str, c.now).Scan(&c.n)

	case cmdCloseIncident:
		_, err := st.closeIncident.ExecContext(ctx, c.now, c.id)
		return err

	case cmdPruneAvailability:
		minuteCutoff := -floorDiv(-(c.now - MinuteRetention.Milliseconds()), 1000) // ceil: whole seconds
		if _, err := st.pruneMinutes.ExecContext(ctx, minuteCutoff); err != nil {
			return err
		}
		dayCutoff := dayString(floorDiv(c.now-DailyRetention.Milliseconds(), millisPerDay))
		_, err := st.pruneDays.ExecContext(ctx, dayCutoff)
		return err
	}
	return fmt.Errorf("unknown availability command kind %d", c.kind)
}

// describeAvailability names an availability command for logs.
func (c *command) describeAvailability() string {
	switch c.kind {
	case cmdAvailability:
		return "record availability (" + strconv.Itoa(len(c.counts)) + " counts)"
	case cmdOpenIncident:
		return "open incident " + c.id
	case cmdCloseIncident:
		return "close incident " + c.id
	case cmdPruneAvailability:
		return "prune availability"
	}
	return "unknown"
}
