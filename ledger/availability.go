package ledger

// Availability history for the public status page: per provider, the
// outcome counts of upstream attempts and health probes per UTC minute
// (kept MinuteRetention), their per-UTC-day rollup (kept DailyRetention),
// and incidents (a provider going down and coming back).
//
// It is no money: availabilityLog sees only the shared database (sideDB)
// and the engine's availability writes. The counts are summed per
// (provider, minute) and per (provider, day) (availAgg) and upserted, minute
// rows and rollup in the same transaction: on SQLite with the writer's
// batches (sqlite_availability.go), on PostgreSQL in a transaction of their
// own (postgres_writes.go). Reads use the read pool.

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// availabilityLog is the availability history and incidents. Store embeds
// it, so its methods are the Store's.
type availabilityLog struct {
	db sideDB
	w  availabilityWrites
}

// Failure causes, indexes into MinuteCount.Fail and AvailabilityTotals.Fail.
const (
	CauseConnect = iota
	CauseTimeout
	CauseServer
	CauseOverloaded
	CauseRateLimited
	CauseAuth
	CauseClosed

	// NumCauses is the number of failure causes.
	NumCauses
)

// CauseNames are the failure causes' names, in index order. The
// availability tables have one fail_<name> column per cause.
var CauseNames = [NumCauses]string{"connect", "timeout", "server", "overloaded", "rate_limited", "auth", "closed"}

// CauseIndex returns the index of the cause called name.
func CauseIndex(name string) (int, bool) {
	for i, n := range CauseNames {
		if n == name {
			return i, true
		}
	}
	return 0, false
}

// Retention of the availability history, applied by PruneAvailability.
const (
	MinuteRetention = 90 * 24 * time.Hour  // minute rows
	DailyRetention  = 400 * 24 * time.Hour // daily rollup rows
)

const (
	secondsPerDay = 24 * 60 * 60
	// maxAvailabilityDays bounds DailyAvailability's days.
	maxAvailabilityDays = 10000
)

// MinuteCount is the outcome counts of one provider's upstream attempts and
// probes during one UTC minute.
type MinuteCount struct {
	Provider string
	Minute   time.Time // the minute; anything below the minute is ignored
	OK       int64
	Fail     [NumCauses]int64 // by cause index (CauseConnect, …)
}

// AvailabilityTotals are summed outcome counts.
type AvailabilityTotals struct {
	OK   int64
	Fail [NumCauses]int64 // by cause index (CauseConnect, …)
}

// Total is the number of outcomes, successes and failures.
func (t AvailabilityTotals) Total() int64 { return t.OK + t.Failures() }

// Failures is the number of failed outcomes, all causes.
func (t AvailabilityTotals) Failures() int64 {
	var n int64
	for _, f := range t.Fail {
		n += f
	}
	return n
}

// Uptime is 100·OK/Total, in percent; ok is false when there is no outcome.
func (t AvailabilityTotals) Uptime() (pct float64, ok bool) {
	total := t.Total()
	if total == 0 {
		return 0, false
	}
	return 100 * float64(t.OK) / float64(total), true
}

func (t *AvailabilityTotals) add(ok int64, fail *[NumCauses]int64) {
	t.OK += ok
	for i, f := range fail {
		t.Fail[i] += f
	}
}

// DayAvailability is one UTC day's totals.
type DayAvailability struct {
	Day string // UTC date, "2006-01-02"
	AvailabilityTotals
}

// Incident is a period during which a provider was down.
type Incident struct {
	ID       int64
	Provider string
	Cause    string
	Start    time.Time
	End      time.Time // zero while ongoing
}

// Ongoing reports whether the incident has not ended yet.
func (i Incident) Ongoing() bool { return i.End.IsZero() }

// availColumns are the count columns of both availability tables, in order:
// ok, then one fail_<cause> per cause.
func availColumns() []string {
	cols := []string{"ok"}
	for _, n := range CauseNames {
		cols = append(cols, "fail_"+n)
	}
	return cols
}

const availRowCols = 2 + 1 + NumCauses // provider, minute or day, counts

// Read queries, built from availColumns.
var (
	// availabilityQuery sums a provider's counts over minutes [?, ?), whole
	// days [?, ?) and minutes [?, ?), in one statement (one snapshot).
	availabilityQuery string
	// dailyAvailabilityQuery reads a provider's rollup rows for days [?, ?].
	dailyAvailabilityQuery string
)

func init() {
	cols := availColumns()
	inner := make([]string, len(cols))
	outer := make([]string, len(cols))
	for i, c := range cols {
		inner[i] = "sum(" + c + ") AS " + c
		outer[i] = "coalesce(sum(" + c + "), 0)"
	}
	in := strings.Join(inner, ", ")
	availabilityQuery = `SELECT ` + strings.Join(outer, ", ") + ` FROM (
		SELECT ` + in + ` FROM availability_minutes WHERE provider = ? AND minute >= ? AND minute < ?
		UNION ALL
		SELECT ` + in + ` FROM availability_daily WHERE provider = ? AND day >= ? AND day < ?
		UNION ALL
		SELECT ` + in + ` FROM availability_minutes WHERE provider = ? AND minute >= ? AND minute < ?) AS t`
	dailyAvailabilityQuery = `SELECT day, ` + strings.Join(cols, ", ") + `
		FROM availability_daily WHERE provider = ? AND day >= ? AND day <= ? ORDER BY day`
}

// skipScan is a recursive CTE "providers(name)" listing the distinct
// providers of table with one primary-key seek each, instead of a scan of
// all its rows.
func skipScan(table string) string {
	return `WITH RECURSIVE providers(name) AS (
		SELECT (SELECT min(provider) FROM ` + table + `)
		UNION ALL
		SELECT (SELECT min(provider) FROM ` + table + ` WHERE provider > providers.name)
		FROM providers WHERE providers.name IS NOT NULL
	) `
}

// availKey identifies a minute row (at = unix seconds of the minute's start)
// or a daily row (at = days since the unix epoch).
type availKey struct {
	provider string
	at       int64
}

func compareAvailKeys(a, b availKey) int {
	if c := strings.Compare(a.provider, b.provider); c != 0 {
		return c
	}
	return cmp.Compare(a.at, b.at)
}

// availAgg accumulates one batch's availability counts, so that each minute
// row and each daily row is written once per batch. It is reused across batches.
type availAgg struct {
	minutes map[availKey]AvailabilityTotals
	days    map[availKey]AvailabilityTotals
	keys    []availKey // scratch
}

func newAvailAgg() availAgg {
	return availAgg{minutes: map[availKey]AvailabilityTotals{}, days: map[availKey]AvailabilityTotals{}}
}

func (g *availAgg) reset() {
	clear(g.minutes)
	clear(g.days)
	clear(g.keys)
	g.keys = g.keys[:0]
}

// minuteOf returns the unix time in seconds of the start of t's minute.
func minuteOf(t time.Time) int64 { return floorDiv(t.Unix(), 60) * 60 }

// ceilMinute returns the start of the first minute that starts at or after t,
// in unix seconds.
func ceilMinute(t time.Time) int64 {
	sec := t.Unix()
	if t.Nanosecond() > 0 {
		sec++
	}
	return -floorDiv(-sec, 60) * 60
}

// dayString formats days since the unix epoch as a UTC date.
func dayString(day int64) string {
	return time.Unix(day*secondsPerDay, 0).UTC().Format(time.DateOnly)
}

func (g *availAgg) add(counts []MinuteCount) {
	for i := range counts {
		m := &counts[i]
		minute := minuteOf(m.Minute)
		k := availKey{m.Provider, minute}
		t := g.minutes[k]
		t.add(m.OK, &m.Fail)
		g.minutes[k] = t
		k.at = floorDiv(minute, secondsPerDay)
		t = g.days[k]
		t.add(m.OK, &m.Fail)
		g.days[k] = t
	}
}

// appendRows queues the rows of counts on m, in key order (which keeps the
// B-tree writes local).
func (g *availAgg) appendRows(m *multiStmt, counts map[availKey]AvailabilityTotals, at func(int64) any) {
	g.keys = g.keys[:0]
	for k := range counts {
		g.keys = append(g.keys, k)
	}
	slices.SortFunc(g.keys, compareAvailKeys)
	for _, k := range g.keys {
		t := counts[k]
		m.args = append(m.args, k.provider, at(k.at), t.OK)
		for _, f := range t.Fail {
			m.args = append(m.args, f)
		}
	}
}

// RecordAvailability adds counts into the per-minute history and the
// per-day rollup (UTC), in one transaction. Counts for a minute already
// stored add to it; entries of counts with the same provider and minute add
// up. Entries with nothing counted are skipped. It is not idempotent: record
// each count once. counts must not be modified until it returns.
func (l availabilityLog) RecordAvailability(ctx context.Context, counts []MinuteCount) error {
	nonZero := 0
	for i := range counts {
		m := &counts[i]
		if m.Provider == "" {
			return errors.New("ledger: record availability: empty provider")
		}
		if m.Minute.IsZero() {
			return fmt.Errorf("ledger: record availability for %q: zero minute", m.Provider)
		}
		bad := m.OK < 0
		for _, f := range m.Fail {
			bad = bad || f < 0
		}
		if bad {
			return fmt.Errorf("ledger: record availability for %q at %s: negative count", m.Provider, m.Minute.UTC().Format(time.RFC3339))
		}
		if m.OK != 0 || m.Fail != [NumCauses]int64{} {
			nonZero++
		}
	}
	if nonZero == 0 {
		return nil
	}
	if nonZero < len(counts) {
		kept := make([]MinuteCount, 0, nonZero)
		for _, m := range counts {
			if m.OK != 0 || m.Fail != [NumCauses]int64{} {
				kept = append(kept, m)
			}
		}
		counts = kept
	}
	return l.w.recordAvailability(ctx, counts)
}

// Availability sums a provider's counts over the minutes that start in
// [since, until). Whole UTC days inside the window come from the daily
// rollup, the partial days at its ends from minute rows, so the result is
// exact as long as those minute rows are kept (MinuteRetention): the 24 h,
// 7 d and 90 d windows ending now always are. A window that starts before
// the minute retention is exact when since is a UTC midnight.
func (l availabilityLog) Availability(ctx context.Context, provider string, since, until time.Time) (AvailabilityTotals, error) {
	var t AvailabilityTotals
	if provider == "" {
		return t, errors.New("ledger: availability: empty provider")
	}
	done, err := l.db.beginRead()
	if err != nil {
		return t, err
	}
	defer done()
	lo, hi := ceilMinute(since), ceilMinute(until)
	if hi <= lo {
		return t, nil
	}
	// Minutes [lo, headEnd), days [dayLo, dayHi), minutes [tailStart, hi).
	headEnd, tailStart := hi, hi
	var dayLo, dayHi string // empty range
	if d0, d1 := -floorDiv(-lo, secondsPerDay), floorDiv(hi, secondsPerDay); d0 < d1 {
		headEnd, tailStart = d0*secondsPerDay, d1*secondsPerDay
		dayLo, dayHi = dayString(d0), dayString(d1)
	}
	dest := make([]any, 0, 1+NumCauses)
	dest = append(dest, &t.OK)
	for i := range t.Fail {
		dest = append(dest, &t.Fail[i])
	}
	err = l.db.queryRow(ctx, availabilityQuery,
		provider, lo, headEnd, provider, dayLo, dayHi, provider, tailStart, hi).Scan(dest...)
	if err != nil {
		return AvailabilityTotals{}, fmt.Errorf("ledger: availability of %q: %w", provider, err)
	}
	return t, nil
}

// DailyAvailability returns a provider's totals for exactly days UTC days,
// oldest first, the last one being now's UTC day. Days without data have
// zero totals. Daily rows are kept DailyRetention.
func (l availabilityLog) DailyAvailability(ctx context.Context, provider string, days int, now time.Time) ([]DayAvailability, error) {
	if provider == "" {
		return nil, errors.New("ledger: daily availability: empty provider")
	}
	if days < 0 || days > maxAvailabilityDays {
		return nil, fmt.Errorf("ledger: daily availability: days must be in [0, %d], got %d", maxAvailabilityDays, days)
	}
	done, err := l.db.beginRead()
	if err != nil {
		return nil, err
	}
	defer done()
	out := make([]DayAvailability, days)
	if days == 0 {
		return out, nil
	}
	last := floorDiv(now.Unix(), secondsPerDay)
	first := last - int64(days) + 1
	for i := range out {
		out[i].Day = dayString(first + int64(i))
	}
	rows, err := l.db.query(ctx, dailyAvailabilityQuery, provider, out[0].Day, out[days-1].Day)
	if err != nil {
		return nil, fmt.Errorf("ledger: daily availability of %q: %w", provider, err)
	}
	defer rows.Close()
	var day string
	var t AvailabilityTotals
	dest := []any{&day, &t.OK}
	for i := range t.Fail {
		dest = append(dest, &t.Fail[i])
	}
	j := 0
	for rows.Next() {
		if err := rows.Scan(dest...); err != nil {
			return nil, fmt.Errorf("ledger: daily availability of %q: %w", provider, err)
		}
		// Rows come in day order, a subset of out's days.
		for j < days && out[j].Day < day {
			j++
		}
		if j < days && out[j].Day == day {
			out[j].AvailabilityTotals = t
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("ledger: daily availability of %q: %w", provider, err)
	}
	return out, nil
}

// Providers lists the providers with availability history (daily rows) or
// incidents, sorted.
func (l availabilityLog) Providers(ctx context.Context) ([]string, error) {
	done, err := l.db.beginRead()
	if err != nil {
		return nil, err
	}
	defer done()
	rows, err := l.db.query(ctx, skipScan("availability_daily")+`
		SELECT name FROM providers WHERE name IS NOT NULL
		UNION SELECT provider FROM incidents
		ORDER BY 1`)
	if err != nil {
		return nil, fmt.Errorf("ledger: providers: %w", err)
	}
	defer rows.Close()
	out := []string{}
	for rows.Next() {
		var p string
		if err := rows.Scan(&p); err != nil {
			return nil, fmt.Errorf("ledger: providers: %w", err)
		}
		out = append(out, p)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("ledger: providers: %w", err)
	}
	return out, nil
}

// OpenIncident records that provider went down at start for cause (free
// text, typically one of CauseNames) and returns the incident's id. If the
// provider already has an ongoing incident, its id is returned and nothing
// changes. Times are stored to the millisecond.
func (l availabilityLog) OpenIncident(ctx context.Context, provider, cause string, start time.Time) (int64, error) {
	if provider == "" {
		return 0, errors.New("ledger: open incident: empty provider")
	}
	if start.IsZero() {
		return 0, fmt.Errorf("ledger: open incident for %q: zero start", provider)
	}
	return l.w.openIncident(ctx, provider, cause, start.UnixMilli())
}

// CloseIncident ends provider's ongoing incident, if any, at end (or at its
// start, should end be earlier).
func (l availabilityLog) CloseIncident(ctx context.Context, provider string, end time.Time) error {
	if provider == "" {
		return errors.New("ledger: close incident: empty provider")
	}
	if end.IsZero() {
		return fmt.Errorf("ledger: close incident for %q: zero end", provider)
	}
	return l.w.closeIncident(ctx, provider, end.UnixMilli())
}

// Incidents returns provider's incidents (all providers' when provider is
// empty) that were ongoing at or after since — ongoing ones and those that
// ended at or after since — newest (by Start) first. limit defaults to 100
// and is at most 10000.
func (l availabilityLog) Incidents(ctx context.Context, provider string, since time.Time, limit int) ([]Incident, error) {
	done, err := l.db.beginRead()
	if err != nil {
		return nil, err
	}
	defer done()
	if limit <= 0 {
		limit = 100
	}
	limit = min(limit, 10000)
	q := `SELECT id, provider, cause, started_at, ended_at FROM incidents WHERE (ended_at IS NULL OR ended_at >= ?)`
	args := []any{since.UnixMilli()}
	if provider != "" {
		q += ` AND provider = ?`
		args = append(args, provider)
	}
	rows, err := l.db.query(ctx, q+` ORDER BY started_at DESC, id DESC LIMIT ?`, append(args, limit)...)
	if err != nil {
		return nil, fmt.Errorf("ledger: incidents: %w", err)
	}
	defer rows.Close()
	out := []Incident{}
	for rows.Next() {
		var in Incident
		var start int64
		var end sql.NullInt64
		if err := rows.Scan(&in.ID, &in.Provider, &in.Cause, &start, &end); err != nil {
			return nil, fmt.Errorf("ledger: incidents: %w", err)
		}
		in.Start = time.UnixMilli(start).UTC()
		if end.Valid {
			in.End = time.UnixMilli(end.Int64).UTC()
		}
		out = append(out, in)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("ledger: incidents: %w", err)
	}
	return out, nil
}

// PruneAvailability deletes the minute rows of minutes that started more
// than MinuteRetention before now and the daily rows of UTC days before the
// day of now − DailyRetention. Incidents are kept. Its cost is proportional
// to the rows deleted, so call it often (e.g. hourly) rather than rarely.
func (l availabilityLog) PruneAvailability(ctx context.Context, now time.Time) error {
	if now.IsZero() {
		return errors.New("ledger: prune availability: zero now")
	}
	return l.w.pruneAvailability(ctx, now.UnixMilli())
}
