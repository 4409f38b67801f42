package ledger

import (
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
)

// mc builds a MinuteCount; fail are the counts by cause index, from CauseConnect on.
func mc(provider string, minute time.Time, ok int64, fail ...int64) MinuteCount {
	m := MinuteCount{Provider: provider, Minute: minute, OK: ok}
	copy(m.Fail[:], fail)
	return m
}

func totals(ok int64, fail ...int64) AvailabilityTotals {
	t := AvailabilityTotals{OK: ok}
	copy(t.Fail[:], fail)
	return t
}

func date(y int, mo time.Month, d, h, mi, s, ns int) time.Time {
	return time.Date(y, mo, d, h, mi, s, ns, time.UTC)
}

func mustRecord(t testing.TB, s *Store, counts ...MinuteCount) {
	t.Helper()
	if err := s.RecordAvailability(context.Background(), counts); err != nil {
		t.Fatalf("RecordAvailability: %v", err)
	}
}

func mustAvailability(t testing.TB, s *Store, provider string, since, until time.Time) AvailabilityTotals {
	t.Helper()
	got, err := s.Availability(context.Background(), provider, since, until)
	if err != nil {
		t.Fatalf("Availability(%s, %s, %s): %v", provider, since, until, err)
	}
	return got
}

// availRow is one row of either availability table, as stored.
type availRow struct {
	Provider string
	At       string // minute as "2006-01-02T15:04:05Z" (from unix seconds), or day
	Counts   [1 + NumCauses]int64
}

func availRows(t testing.TB, db *rawConn, table string) []availRow {
	t.Helper()
	at := "day"
	if table == "availability_minutes" {
		at = "strftime('%Y-%m-%dT%H:%M:%SZ', minute, 'unixepoch')"
		if db.pg {
			at = `to_char(to_timestamp(minute) AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"')`
		}
	}
	rows, err := db.Query(`SELECT provider, ` + at + `, ` + strings.Join(availColumns(), ", ") +
		` FROM ` + table + ` ORDER BY 1, 2`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := []availRow{}
	for rows.Next() {
		var r availRow
		dest := []any{&r.Provider, &r.At}
		for i := range r.Counts {
			dest = append(dest, &r.Counts[i])
		}
		if err := rows.Scan(dest...); err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// checkRollup checks that every daily row equals the sum of its minutes and
// that every minute is in a daily row.
func checkRollup(t testing.TB, db *rawConn) {
	t.Helper()
	cols := availColumns()
	sums := make([]string, len(cols))
	diffs := make([]string, len(cols))
	for i, c := range cols {
		sums[i] = "sum(" + c + ") AS " + c
		diffs[i] = "coalesce(d." + c + ", -1) <> coalesce(m." + c + ", -1)"
	}
	q := `WITH m AS (
			SELECT provider, ` + db.utcDayOfSeconds("minute") + ` AS day, ` + strings.Join(sums, ", ") + `
			FROM availability_minutes GROUP BY 1, 2
		)
		SELECT count(*) FROM availability_daily d FULL OUTER JOIN m ON m.provider = d.provider AND m.day = d.day
		WHERE ` + strings.Join(diffs, " OR ")
	if n := count(t, db, q); n != 0 {
		t.Fatalf("%d daily rows differ from the sum of their minutes", n)
	}
}

func TestAvailabilitySchema(t *testing.T) {
	path := testPath(t)
	s := openAt(t, path)
	db := rawDB(t, path)
	for _, table := range []string{"availability_minutes", "availability_daily"} {
		rows, err := db.Query(`SELECT name FROM pragma_table_info(?) ORDER BY cid`, table)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for rows.Next() {
			var n string
			if err := rows.Scan(&n); err != nil {
				t.Fatal(err)
			}
			names = append(names, n)
		}
		rows.Close()
		if len(names) != availRowCols || !reflect.DeepEqual(names[2:], availColumns()) {
			t.Fatalf("%s columns = %v, want provider, minute/day, %v", table, names, availColumns())
		}
	}
	if want := [...]string{"connect", "timeout", "server", "overloaded", "rate_limited", "auth", "closed"}; CauseNames != want {
		t.Fatalf("CauseNames = %v", CauseNames)
	}
	for i, n := range CauseNames {
		if j, ok := CauseIndex(n); !ok || j != i {
			t.Fatalf("CauseIndex(%q) = %d, %v", n, j, ok)
		}
	}
	if _, ok := CauseIndex("nope"); ok {
		t.Fatal("CauseIndex accepted an unknown cause")
	}
	if CauseRateLimited != 4 || CauseClosed != NumCauses-1 {
		t.Fatal("cause constants out of order")
	}
	// The range reads and the prune use the primary keys.
	for _, q := range []struct{ sql, want string }{
		{`EXPLAIN QUERY PLAN ` + availabilityQuery, "USING PRIMARY KEY (provider=? AND minute>? AND minute<?)"},
		{`EXPLAIN QUERY PLAN ` + availabilityQuery, "USING PRIMARY KEY (provider=? AND day>? AND day<?)"},
		{`EXPLAIN QUERY PLAN ` + skipScan("availability_minutes") + `DELETE FROM availability_minutes
			WHERE provider IN (SELECT name FROM providers WHERE name IS NOT NULL) AND minute < ?`, "USING PRIMARY KEY (provider=? AND minute<?)"},
	} {
		n := strings.Count(q.sql, "?")
		args := make([]any, n)
		for i := range args {
			args[i] = 0
		}
		rows, err := s.rdb.Query(q.sql, args...)
		if err != nil {
			t.Fatal(err)
		}
		var plan strings.Builder
		for rows.Next() {
			var id, parent, unused int
			var detail string
			if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
				t.Fatal(err)
			}
			plan.WriteString(detail + "\n")
		}
		rows.Close()
		if !strings.Contains(plan.String(), q.want) {
			t.Errorf("plan lacks %q:\n%s", q.want, plan.String())
		}
	}
}

func TestUptime(t *testing.T) {
	for _, tc := range []struct {
		t             AvailabilityTotals
		total, failed int64
		pct           float64
		ok            bool
	}{
		{totals(999, 1), 1000, 1, 99.9, true},
		{totals(999, 0, 0, 0, 0, 0, 0, 1), 1000, 1, 99.9, true},
		{totals(0), 0, 0, 0, false},
		{totals(5), 5, 0, 100, true},
		{totals(0, 1, 2, 3, 4, 5, 6, 7), 28, 28, 0, true},
		{totals(1, 2), 3, 2, 100.0 / 3, true},
		{totals(99_999, 0, 1), 100_000, 1, 99.999, true},
	} {
		pct, ok := tc.t.Uptime()
		if tc.t.Total() != tc.total || tc.t.Failures() != tc.failed || pct != tc.pct || ok != tc.ok {
			t.Errorf("%+v: total %d failures %d uptime %v %v; want %d %d %v %v",
				tc.t, tc.t.Total(), tc.t.Failures(), pct, ok, tc.total, tc.failed, tc.pct, tc.ok)
		}
	}
}

func TestRecordAvailability(t *testing.T) { backends(t, testRecordAvailability) }

func testRecordAvailability(t *testing.T, b backend) {
	ctx := context.Background()
	path := b.db(t)
	s := b.openAt(t, path)
	db := b.raw(t, path)
	d := date(2026, 3, 10, 23, 58, 0, 0)
	mustRecord(t, s,
		mc("openai", d, 10, 1),
		mc("openai", d.Add(time.Minute), 5, 0, 2),
		// the next UTC day
		mc("openai", d.Add(2*time.Minute), 7, 0, 0, 0, 0, 0, 1),
		// below the minute: ignored
		mc("anthropic", d.Add(time.Minute+42*time.Second+500*time.Millisecond), 3),
		// the same minute in another zone: adds
		mc("openai", d.In(time.FixedZone("x", -5*3600)), 1),
		// nothing counted: no row
		mc("gemini", d, 0),
	)
	wantMinutes := []availRow{
		{"anthropic", "2026-03-10T23:59:00Z", [8]int64{3}},
		{"openai", "2026-03-10T23:58:00Z", [8]int64{11, 1}},
		{"openai", "2026-03-10T23:59:00Z", [8]int64{5, 0, 2}},
		{"openai", "2026-03-11T00:00:00Z", [8]int64{7, 0, 0, 0, 0, 0, 1}},
	}
	wantDays := []availRow{
		{"anthropic", "2026-03-10", [8]int64{3}},
		{"openai", "2026-03-10", [8]int64{16, 1, 2}},
		{"openai", "2026-03-11", [8]int64{7, 0, 0, 0, 0, 0, 1}},
	}
	check := func(step string) {
		t.Helper()
		if got := availRows(t, db, "availability_minutes"); !reflect.DeepEqual(got, wantMinutes) {
			t.Fatalf("%s: minute rows\n got %v\nwant %v", step, got, wantMinutes)
		}
		if got := availRows(t, db, "availability_daily"); !reflect.DeepEqual(got, wantDays) {
			t.Fatalf("%s: daily rows\n got %v\nwant %v", step, got, wantDays)
		}
		checkRollup(t, db)
	}
	check("first record")

	// A second record for a stored minute adds to it, and to its day.
	mustRecord(t, s, mc("openai", d.Add(time.Minute+59*time.Second), 2, 0, 0, 0, 4), mc("openai", d.Add(time.Minute), 1, 0, 0, 0, 0, 0, 0, 1))
	wantMinutes[2].Counts = [8]int64{8, 0, 2, 0, 4, 0, 0, 1}
	wantDays[1].Counts = [8]int64{19, 1, 2, 0, 4, 0, 0, 1}
	check("second record")
	if got := mustAvailability(t, s, "openai", d, d.Add(2*time.Minute)); got != totals(19, 1, 2, 0, 4, 0, 0, 1) {
		t.Fatalf("Availability = %+v", got)
	}

	// Invalid input writes nothing.
	for _, bad := range [][]MinuteCount{
		{mc("openai", d, 1), mc("", d, 1)},
		{mc("openai", time.Time{}, 1)},
		{mc("openai", d, -1)},
		{mc("openai", d, 1, 0, 0, -3)},
	} {
		if err := s.RecordAvailability(ctx, bad); err == nil {
			t.Fatalf("RecordAvailability(%+v) accepted", bad)
		}
	}
	if err := s.RecordAvailability(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if err := s.RecordAvailability(ctx, []MinuteCount{mc("x", d, 0)}); err != nil {
		t.Fatal(err)
	}
	check("after invalid records")
}

// TestAvailabilityWindows checks the windows the status page asks for, and
// their boundaries: a minute counts when its start is in [since, until).
func TestAvailabilityWindows(t *testing.T) { backends(t, testAvailabilityWindows) }

func testAvailabilityWindows(t *testing.T, b backend) {
	s := b.open(t)
	now := date(2026, 3, 15, 12, 34, 56, 789_000_000)
	today := date(2026, 3, 15, 12, 34, 0, 0) // the minute containing now
	day := 24 * time.Hour
	mustRecord(t, s,
		mc("p", today, 1),                               // in every window ending now
		mc("p", today.Add(-day+time.Minute), 10),        // first minute of the 24 h window
		mc("p", today.Add(-day), 100),                   // just before it
		mc("p", date(2026, 3, 15, 0, 0, 0, 0), 0, 1000), // today's first minute (a failure)
		mc("p", today.Add(-7*day+time.Minute), 10_000),  // first minute of the 7 d window
		mc("p", today.Add(-7*day), 100_000),             // just before it
		mc("p", date(2026, 3, 10, 6, 0, 0, 0), 1_000_000, 0, 1),
		mc("p", today.Add(-90*day+time.Minute), 10_000_000), // first minute of the 90 d window
		mc("p", today.Add(-90*day), 100_000_000),            // just before it
		mc("p", date(2026, 1, 20, 0, 0, 0, 0), 1_000_000_000, 0, 0, 1),
		mc("p", today.Add(time.Minute), 10_000_000_000), // after now
		mc("q", today, 0, 0, 0, 0, 0, 0, 0, 5),          // another provider
	)
	w24 := totals(11, 1000)
	w7d := totals(1_010_111, 1000, 1)
	w90d := totals(1_011_110_111, 1000, 1, 1)
	midnight := date(2026, 3, 10, 0, 0, 0, 0)
	for _, tc := range []struct {
		name         string
		since, until time.Time
		want         AvailabilityTotals
	}{
		{"24h", now.Add(-day), now, w24},
		{"7d", now.Add(-7 * day), now, w7d},
		{"90d", now.Add(-90 * day), now, w90d},
		{"24h other zone", now.Add(-day).In(time.FixedZone("x", 9*3600)), now.In(time.FixedZone("y", -3*3600)), w24},
		{"since on a minute start is inclusive", today.Add(-day), now, totals(111, 1000)},
		{"since just after a minute start excludes it", today.Add(-day + time.Nanosecond), now, w24},
		{"until on a minute start is exclusive", now.Add(-day), today, totals(10, 1000)},
		{"until just after a minute start includes it", now.Add(-day), today.Add(time.Nanosecond), w24},
		{"one minute", today, today.Add(time.Minute), totals(1)},
		{"empty", today, today, totals(0)},
		{"reversed", now, now.Add(-day), totals(0)},
		{"one whole day", midnight, midnight.Add(day), totals(1_000_000, 0, 1)},
		{"whole day minus its last minute", midnight, midnight.Add(day - time.Minute), totals(1_000_000, 0, 1)},
		{"day after the minute", midnight.Add(6*time.Hour + time.Second), midnight.Add(2 * day), totals(0)},
		{"whole days and partial ends", midnight.Add(-time.Hour), now, totals(1_000_111, 1000, 1)},
		{"all history", time.Time{}, now.Add(time.Hour), totals(11_111_110_111, 1000, 1, 1)},
		{"90d before now's minute, days only", date(2025, 12, 15, 0, 0, 0, 0), date(2026, 3, 15, 0, 0, 0, 0), totals(1_111_110_110, 0, 1, 1)},
	} {
		if got := mustAvailability(t, s, "p", tc.since, tc.until); got != tc.want {
			t.Errorf("%s: got %+v, want %+v", tc.name, got, tc.want)
		}
	}
	if got := mustAvailability(t, s, "q", now.Add(-day), now); got != totals(0, 0, 0, 0, 0, 0, 0, 5) {
		t.Errorf("q: %+v", got)
	}
	if got := mustAvailability(t, s, "nobody", now.Add(-90*day), now); got != totals(0) {
		t.Errorf("unknown provider: %+v", got)
	} else if _, ok := got.Uptime(); ok {
		t.Error("uptime of nothing is ok")
	}
	if _, err := s.Availability(context.Background(), "", now.Add(-day), now); err == nil {
		t.Error("empty provider accepted")
	}
}

// TestAvailabilityMatchesMinutes compares Availability over random windows
// with sums computed here from the recorded minutes.
func TestAvailabilityMatchesMinutes(t *testing.T) { backends(t, testAvailabilityMatchesMinutes) }

func testAvailabilityMatchesMinutes(t *testing.T, b backend) {
	s := b.open(t)
	rng := rand.New(rand.NewPCG(1, 2))
	now := date(2026, 3, 15, 12, 34, 56, 0)
	start := now.Add(-95 * 24 * time.Hour)
	span := int64(96 * 24 * 60)
	var recorded []MinuteCount
	var batch []MinuteCount
	for i := 0; i < 5000; i++ {
		m := mc("p", start.Add(time.Duration(rng.Int64N(span))*time.Minute+time.Duration(rng.Int64N(60e9))), rng.Int64N(1000))
		for c := range m.Fail {
			if rng.IntN(4) == 0 {
				m.Fail[c] = rng.Int64N(10)
			}
		}
		recorded = append(recorded, m)
		batch = append(batch, m)
		if len(batch) == 300 {
			mustRecord(t, s, batch...)
			batch = batch[:0]
		}
	}
	mustRecord(t, s, batch...)
	randTime := func() time.Time {
		t := start.Add(time.Duration(rng.Int64N(span*60)) * time.Second)
		switch rng.IntN(4) {
		case 0: // a UTC midnight
			return t.Truncate(24 * time.Hour)
		case 1: // a minute start
			return t.Truncate(time.Minute)
		}
		return t.Add(time.Duration(rng.Int64N(1e9)))
	}
	for i := 0; i < 300; i++ {
		since, until := randTime(), randTime()
		if i%10 == 0 {
			since = until.Add(-time.Duration(rng.Int64N(3*24*60)) * time.Minute)
		}
		var want AvailabilityTotals
		for _, m := range recorded {
			if minute := m.Minute.Truncate(time.Minute); !minute.Before(since) && minute.Before(until) {
				want.add(m.OK, &m.Fail)
			}
		}
		if got := mustAvailability(t, s, "p", since, until); got != want {
			t.Fatalf("[%s, %s): got %+v, want %+v", since, until, got, want)
		}
	}
}

func TestDailyAvailability(t *testing.T) { backends(t, testDailyAvailability) }

func testDailyAvailability(t *testing.T, b backend) {
	ctx := context.Background()
	s := b.open(t)
	// 07:00 on the 15th at UTC+10 is 21:00 on the 14th UTC: today is the 14th.
	now := time.Date(2026, 3, 15, 7, 0, 0, 0, time.FixedZone("AEST", 10*3600))
	mustRecord(t, s,
		mc("p", date(2026, 3, 14, 0, 0, 0, 0), 4),
		mc("p", date(2026, 3, 14, 20, 59, 0, 0), 1, 1),
		mc("p", date(2026, 3, 14, 23, 59, 0, 0), 2), // later today
		mc("p", date(2026, 3, 13, 23, 59, 59, 0), 3),
		mc("p", date(2025, 12, 15, 0, 0, 0, 0), 7), // the first of 90 days
		mc("p", date(2025, 12, 14, 23, 59, 0, 0), 9),
		mc("p", date(2026, 3, 15, 0, 0, 0, 0), 11), // tomorrow, UTC
		mc("q", date(2026, 3, 1, 0, 0, 0, 0), 13),
	)
	got, err := s.DailyAvailability(ctx, "p", 90, now)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 90 {
		t.Fatalf("%d days", len(got))
	}
	want := map[string]AvailabilityTotals{
		"2025-12-15": totals(7),
		"2026-03-13": totals(3),
		"2026-03-14": totals(7, 1),
	}
	day := date(2025, 12, 15, 0, 0, 0, 0)
	for i, d := range got {
		if d.Day != day.Format(time.DateOnly) {
			t.Fatalf("day %d = %s, want %s", i, d.Day, day.Format(time.DateOnly))
		}
		if d.AvailabilityTotals != want[d.Day] {
			t.Fatalf("%s: %+v, want %+v", d.Day, d.AvailabilityTotals, want[d.Day])
		}
		day = day.Add(24 * time.Hour)
	}
	if got[89].Day != "2026-03-14" {
		t.Fatalf("last day %s", got[89].Day)
	}

	for _, tc := range []struct {
		days  int
		first string
	}{{1, "2026-03-14"}, {2, "2026-03-13"}, {400, "2025-02-08"}} {
		got, err := s.DailyAvailability(ctx, "p", tc.days, now)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != tc.days || got[0].Day != tc.first || got[tc.days-1].Day != "2026-03-14" || got[tc.days-1].AvailabilityTotals != totals(7, 1) {
			t.Fatalf("%d days: %d entries, %+v … %+v", tc.days, len(got), got[0], got[len(got)-1])
		}
	}
	if got, err := s.DailyAvailability(ctx, "p", 0, now); err != nil || len(got) != 0 {
		t.Fatalf("0 days: %v, %v", got, err)
	}
	if got, err := s.DailyAvailability(ctx, "nobody", 3, now); err != nil || len(got) != 3 || got[2] != (DayAvailability{Day: "2026-03-14"}) {
		t.Fatalf("unknown provider: %v, %v", got, err)
	}
	for _, days := range []int{-1, maxAvailabilityDays + 1} {
		if _, err := s.DailyAvailability(ctx, "p", days, now); err == nil {
			t.Fatalf("%d days accepted", days)
		}
	}
	if _, err := s.DailyAvailability(ctx, "", 1, now); err == nil {
		t.Fatal("empty provider accepted")
	}
	providers, err := s.Providers(ctx)
	if err != nil || !reflect.DeepEqual(providers, []string{"p", "q"}) {
		t.Fatalf("Providers = %v, %v", providers, err)
	}
}

func TestIncidents(t *testing.T) { backends(t, testIncidents) }

func testIncidents(t *testing.T, b backend) {
	ctx := context.Background()
	path := b.db(t)
	s := b.openAt(t, path)
	t0 := date(2026, 3, 1, 10, 0, 0, 123_456_789)
	ms := func(t time.Time) time.Time { return t.Truncate(time.Millisecond) }

	id1, err := s.OpenIncident(ctx, "openai", "timeout", t0)
	if err != nil {
		t.Fatal(err)
	}
	if id, err := s.OpenIncident(ctx, "openai", "server", t0.Add(time.Minute)); err != nil || id != id1 {
		t.Fatalf("second open: %d, %v; want %d", id, err, id1)
	}
	id2, err := s.OpenIncident(ctx, "anthropic", "overloaded", t0.Add(time.Hour))
	if err != nil || id2 == id1 {
		t.Fatalf("anthropic: %d, %v", id2, err)
	}
	if err := s.CloseIncident(ctx, "openai", t0.Add(2*time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := s.CloseIncident(ctx, "openai", t0.Add(3*time.Hour)); err != nil { // none ongoing: nothing
		t.Fatal(err)
	}
	if err := s.CloseIncident(ctx, "gemini", t0); err != nil {
		t.Fatal(err)
	}
	id3, err := s.OpenIncident(ctx, "openai", "connect", t0.Add(4*time.Hour))
	if err != nil || id3 == id1 || id3 == id2 {
		t.Fatalf("reopen: %d, %v", id3, err)
	}
	inc1 := Incident{ID: id1, Provider: "openai", Cause: "timeout", Start: ms(t0), End: ms(t0.Add(2 * time.Hour))}
	inc2 := Incident{ID: id2, Provider: "anthropic", Cause: "overloaded", Start: ms(t0.Add(time.Hour))}
	inc3 := Incident{ID: id3, Provider: "openai", Cause: "connect", Start: ms(t0.Add(4 * time.Hour))}

	check := func(step string) {
		t.Helper()
		for _, tc := range []struct {
			provider string
			since    time.Time
			limit    int
			want     []Incident
		}{
			{"openai", time.Time{}, 0, []Incident{inc3, inc1}},
			{"", time.Time{}, 0, []Incident{inc3, inc2, inc1}},
			{"", time.Time{}, 2, []Incident{inc3, inc2}},
			// ongoing: always listed
			{"anthropic", t0.Add(100 * time.Hour), 0, []Incident{inc2}},
			// ended exactly at since
			{"", inc1.End, 0, []Incident{inc3, inc2, inc1}},
			{"", inc1.End.Add(time.Millisecond), 0, []Incident{inc3, inc2}},
			{"gemini", time.Time{}, 0, []Incident{}},
		} {
			got, err := s.Incidents(ctx, tc.provider, tc.since, tc.limit)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("%s: Incidents(%q, %s, %d)\n got %+v\nwant %+v", step, tc.provider, tc.since, tc.limit, got, tc.want)
			}
		}
		if !inc2.Ongoing() || inc1.Ongoing() {
			t.Fatal("Ongoing")
		}
	}
	check("open")

	// Ongoing incidents survive a restart and are still the provider's.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = b.openAt(t, path)
	check("reopened")
	if id, err := s.OpenIncident(ctx, "anthropic", "auth", t0.Add(50*time.Hour)); err != nil || id != id2 {
		t.Fatalf("open after reopen: %d, %v; want %d", id, err, id2)
	}
	// An end before the start is clamped to the start.
	if err := s.CloseIncident(ctx, "anthropic", t0); err != nil {
		t.Fatal(err)
	}
	got, err := s.Incidents(ctx, "anthropic", time.Time{}, 0)
	if err != nil || len(got) != 1 || !got[0].End.Equal(inc2.Start) {
		t.Fatalf("closed before start: %+v, %v", got, err)
	}
	providers, err := s.Providers(ctx)
	if err != nil || !reflect.DeepEqual(providers, []string{"anthropic", "openai"}) {
		t.Fatalf("Providers = %v, %v", providers, err)
	}

	// Concurrent opens for one provider (likely in one batch) share one incident.
	ids := make([]int64, 32)
	var wg sync.WaitGroup
	for i := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id, err := s.OpenIncident(ctx, "mistral", "server", t0.Add(time.Duration(i)*time.Second))
			if err != nil {
				t.Error(err)
			}
			ids[i] = id
		}()
	}
	wg.Wait()
	for _, id := range ids {
		if id != ids[0] || id == 0 {
			t.Fatalf("concurrent opens: ids %v", ids)
		}
	}
	if n := count(t, b.raw(t, path), "SELECT count(*) FROM incidents WHERE provider = 'mistral'"); n != 1 {
		t.Fatalf("%d mistral incidents", n)
	}

	for _, err := range []error{
		func() error { _, err := s.OpenIncident(ctx, "", "x", t0); return err }(),
		func() error { _, err := s.OpenIncident(ctx, "p", "x", time.Time{}); return err }(),
		s.CloseIncident(ctx, "", t0),
		s.CloseIncident(ctx, "p", time.Time{}),
	} {
		if err == nil {
			t.Fatal("invalid incident call accepted")
		}
	}
}

func TestPruneAvailability(t *testing.T) { backends(t, testPruneAvailability) }

func testPruneAvailability(t *testing.T, b backend) {
	ctx := context.Background()
	path := b.db(t)
	s := b.openAt(t, path)
	db := b.raw(t, path)
	now := date(2026, 3, 15, 12, 34, 0, 0)
	day := 24 * time.Hour
	providers := []string{"a", "b", "c"}
	for _, p := range providers {
		mustRecord(t, s,
			mc(p, now.Add(-401*day), 1),                 // day 2025-02-07: both deleted
			mc(p, now.Add(-400*day), 2),                 // day 2025-02-08: daily row kept
			mc(p, now.Add(-90*day-time.Minute), 4),      // minute deleted, day 2025-12-15 kept
			mc(p, now.Add(-90*day), 8),                  // kept
			mc(p, now.Add(-90*day+30*time.Second), 16),  // same minute
			mc(p, now, 32),                              // kept
			mc(p, now.Add(-90*day-2*time.Hour), 64, 1),  // minute deleted
			mc(p, now.Add(-90*day+2*time.Hour), 128, 1), // kept
		)
	}
	before90 := mustAvailability(t, s, "b", now.Add(-90*day), now.Add(time.Minute))
	if before90 != totals(8+16+32+128, 1) {
		t.Fatalf("90d before prune: %+v", before90)
	}
	beforeDays, err := s.DailyAvailability(ctx, "b", 400, now)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 { // pruning twice changes nothing more
		if err := s.PruneAvailability(ctx, now); err != nil {
			t.Fatal(err)
		}
		var wantMinutes, wantDays []availRow
		for _, p := range providers {
			wantMinutes = append(wantMinutes,
				availRow{p, "2025-12-15T12:34:00Z", [8]int64{24}},
				availRow{p, "2025-12-15T14:34:00Z", [8]int64{128, 1}},
				availRow{p, "2026-03-15T12:34:00Z", [8]int64{32}})
			wantDays = append(wantDays,
				availRow{p, "2025-02-08", [8]int64{2}},
				availRow{p, "2025-12-15", [8]int64{4 + 8 + 16 + 64 + 128, 2}},
				availRow{p, "2026-03-15", [8]int64{32}})
		}
		if got := availRows(t, db, "availability_minutes"); !reflect.DeepEqual(got, wantMinutes) {
			t.Fatalf("minute rows after prune\n got %v\nwant %v", got, wantMinutes)
		}
		if got := availRows(t, db, "availability_daily"); !reflect.DeepEqual(got, wantDays) {
			t.Fatalf("daily rows after prune\n got %v\nwant %v", got, wantDays)
		}
	}
	// The windows the status page shows are unchanged.
	if got := mustAvailability(t, s, "b", now.Add(-90*day), now.Add(time.Minute)); got != before90 {
		t.Fatalf("90d after prune: %+v, want %+v", got, before90)
	}
	afterDays, err := s.DailyAvailability(ctx, "b", 400, now)
	if err != nil || !reflect.DeepEqual(afterDays, beforeDays) {
		t.Fatalf("daily bars changed by prune: %v", err)
	}
	if err := s.PruneAvailability(ctx, time.Time{}); err == nil {
		t.Fatal("prune at the zero time accepted")
	}
}

// TestAvailabilityDurability closes and reopens the store: history and
// incidents are intact.
func TestAvailabilityDurability(t *testing.T) { backends(t, testAvailabilityDurability) }

func testAvailabilityDurability(t *testing.T, b backend) {
	ctx := context.Background()
	path := b.db(t)
	s := b.openAt(t, path)
	now := date(2026, 3, 15, 12, 34, 56, 0)
	var counts []MinuteCount
	for i := 0; i < 3*24*60; i += 7 {
		for j, p := range []string{"anthropic", "gemini", "openai"} {
			counts = append(counts, mc(p, now.Add(-time.Duration(i)*time.Minute), int64(i+j), int64(i%3), 0, int64(j)))
		}
	}
	mustRecord(t, s, counts...)
	if _, err := s.OpenIncident(ctx, "gemini", "server", now.Add(-time.Hour)); err != nil {
		t.Fatal(err)
	}
	read := func() (map[string]AvailabilityTotals, [][]DayAvailability, []Incident) {
		t.Helper()
		w := map[string]AvailabilityTotals{}
		var days [][]DayAvailability
		for _, p := range []string{"anthropic", "gemini", "openai"} {
			for _, d := range []time.Duration{24 * time.Hour, 7 * 24 * time.Hour, 90 * 24 * time.Hour} {
				w[fmt.Sprint(p, d)] = mustAvailability(t, s, p, now.Add(-d), now)
			}
			dd, err := s.DailyAvailability(ctx, p, 90, now)
			if err != nil {
				t.Fatal(err)
			}
			days = append(days, dd)
		}
		inc, err := s.Incidents(ctx, "", time.Time{}, 0)
		if err != nil {
			t.Fatal(err)
		}
		return w, days, inc
	}
	w1, d1, i1 := read()
	if w1["openai24h0m0s"].Total() == 0 || len(i1) != 1 {
		t.Fatalf("nothing recorded: %v %v", w1, i1)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.RecordAvailability(ctx, counts[1:2]); err != ErrClosed {
		t.Fatalf("record after Close: %v", err)
	}
	if _, err := s.Availability(ctx, "openai", now.Add(-time.Hour), now); err != ErrClosed {
		t.Fatalf("read after Close: %v", err)
	}
	s = b.openAt(t, path)
	w2, d2, i2 := read()
	if !reflect.DeepEqual(w1, w2) || !reflect.DeepEqual(d1, d2) || !reflect.DeepEqual(i1, i2) {
		t.Fatal("history changed across Close and Open")
	}
	checkRollup(t, b.raw(t, path))
}

// TestAvailabilityConcurrent records from many goroutines while settles
// commit: batches mix both kinds of commands, and every count lands once.
func TestAvailabilityConcurrent(t *testing.T) { backends(t, testAvailabilityConcurrent) }

func testAvailabilityConcurrent(t *testing.T, b backend) {
	ctx := context.Background()
	path := b.db(t)
	s := b.openAt(t, path)
	a := mustAccount(t, s, 1_000_000)
	base := date(2026, 3, 15, 23, 50, 0, 0)
	const workers, calls = 16, 40
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(2)
		go func() {
			defer wg.Done()
			for i := 0; i < calls; i++ {
				counts := make([]MinuteCount, 0, 5)
				for p := 0; p < 5; p++ {
					counts = append(counts, mc(fmt.Sprint("p", p), base.Add(time.Duration(i%20)*time.Minute), 1, int64(w%2)))
				}
				if err := s.RecordAvailability(ctx, counts); err != nil {
					t.Error(err)
					return
				}
			}
		}()
		go func() {
			defer wg.Done()
			for i := 0; i < calls/4; i++ {
				h, err := s.Reserve(a.ID, 1, 10)
				if err != nil {
					t.Error(err)
					return
				}
				if err := h.Settle(ctx, usage(fmt.Sprintf("w%d-%d", w, i), "", 1)); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	for p := 0; p < 5; p++ {
		got := mustAvailability(t, s, fmt.Sprint("p", p), base, base.Add(time.Hour))
		if got != totals(workers*calls, workers/2*calls) {
			t.Fatalf("p%d: %+v", p, got)
		}
	}
	db := b.raw(t, path)
	checkRollup(t, db)
	if n := count(t, db, "SELECT count(*) FROM availability_daily"); n != 10 {
		t.Fatalf("%d daily rows, want 5 providers × 2 days", n)
	}
	mustAudit(t, s)
	st := s.Stats()
	t.Logf("%d commands in %d transactions", st.Commands, st.Transactions)
}

// TestAvailabilityWriteFailure holds the write lock past the busy timeout:
// the record fails and writes nothing; the next one works.
func TestAvailabilityWriteFailure(t *testing.T) { backends(t, testAvailabilityWriteFailure) }

func testAvailabilityWriteFailure(t *testing.T, b backend) {
	ctx := context.Background()
	path := b.db(t)
	s := b.openAt(t, path, func(o *Options) { o.PollInterval, o.BusyTimeout = time.Hour, 20*time.Millisecond })
	db := b.raw(t, path)
	unlock := db.lockWrites(t, "availability_minutes", "incidents")
	d := date(2026, 3, 15, 0, 0, 0, 0)
	if err := s.RecordAvailability(ctx, []MinuteCount{mc("p", d, 1)}); err == nil {
		t.Fatal("record under a held lock succeeded")
	}
	if _, err := s.OpenIncident(ctx, "p", "connect", d); err == nil {
		t.Fatal("open incident under a held lock succeeded")
	}
	unlock()
	mustRecord(t, s, mc("p", d, 2))
	if got := mustAvailability(t, s, "p", d, d.Add(time.Minute)); got != totals(2) {
		t.Fatalf("after unlock: %+v", got)
	}
	if inc, err := s.Incidents(ctx, "p", time.Time{}, 0); err != nil || len(inc) != 0 {
		t.Fatalf("incidents: %v, %v", inc, err)
	}
}

// BenchmarkRecordAvailability measures one flush of the gateway's counters:
// 50 providers' counts per call, each minute flushed six times (every ~10 s).
func BenchmarkRecordAvailability(b *testing.B) {
	ctx := context.Background()
	s := openTest(b)
	const providers = 50
	names := make([]string, providers)
	for i := range names {
		names[i] = fmt.Sprintf("provider-%02d", i)
	}
	base := date(2026, 3, 15, 0, 0, 0, 0)
	counts := make([]MinuteCount, providers)
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		minute := base.Add(time.Duration(i/6) * time.Minute)
		for p := range counts {
			counts[p] = mc(names[p], minute, int64(100+p), int64(i%3), 0, int64(p%2))
		}
		if err := s.RecordAvailability(ctx, counts); err != nil {
			b.Fatal(err)
		}
	}
	elapsed := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(b.N*providers)/elapsed.Seconds(), "counts/s")
}
