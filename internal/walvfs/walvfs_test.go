package walvfs

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	_ "modernc.org/sqlite"
)

// open opens path through the VFS as the ledger's writer does (WAL,
// synchronous NORMAL, no spill), or through the default VFS when plain.
func open(t *testing.T, path string, plain bool) *sql.DB {
	t.Helper()
	if err := Register(); err != nil {
		t.Fatal(err)
	}
	q := "?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)"
	if !plain {
		q += "&vfs=" + Name + "&_pragma=cache_spill(false)"
	}
	db, err := sql.Open("sqlite", "file:"+path+q)
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	t.Cleanup(func() { db.Close() })
	return db
}

func exec(t *testing.T, db *sql.DB, query string, args ...any) {
	t.Helper()
	if _, err := db.Exec(query, args...); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
}

func count(t *testing.T, db *sql.DB, query string) int64 {
	t.Helper()
	var n int64
	if err := db.QueryRow(query).Scan(&n); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}

// TestOneWritePerCommit: a commit of several pages reaches the log with
// one write call, and another connection (the default VFS) reads it.
func TestOneWritePerCommit(t *testing.T) {
	path := filepath.Join(t.TempDir(), "one.db")
	db := open(t, path, false)
	exec(t, db, `CREATE TABLE t (id INTEGER PRIMARY KEY, k TEXT, v BLOB)`)
	exec(t, db, `CREATE INDEX t_k ON t (k)`)
	reader := open(t, path, true)
	for i := range 50 {
		before, open := Writes(path)
		if !open {
			t.Fatal("the log is not open through the VFS")
		}
		tx, err := db.Begin()
		if err != nil {
			t.Fatal(err)
		}
		// rows on several pages: the table's, and the index's
		for j := range 8 {
			if _, err := tx.Exec(`INSERT INTO t (k, v) VALUES (?, zeroblob(600))`, fmt.Sprintf("%03d-%d", j*37%101, i)); err != nil {
				t.Fatal(err)
			}
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		after, _ := Writes(path)
		if i > 0 && after-before != 1 { // the first commit writes the log's header too, in the same call
			t.Fatalf("commit %d took %d write calls, want 1", i, after-before)
		}
		if n := count(t, reader, `SELECT count(*) FROM t`); n != int64(8*(i+1)) {
			t.Fatalf("the other connection reads %d rows after commit %d", n, i)
		}
	}
	if got := count(t, reader, `SELECT count(*) FROM pragma_integrity_check WHERE integrity_check <> 'ok'`); got != 0 {
		t.Fatal("integrity check failed")
	}
}

// TestLargeCommitsAndRestarts: a commit larger than the buffer, a
// transaction rolled back, and checkpoints that make the log start again
// from its beginning; then a fresh connection finds every committed row and
// none of the rolled-back one, and the database intact.
func TestLargeCommitsAndRestarts(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "large.db")
	db := open(t, path, false)
	exec(t, db, `CREATE TABLE t (id INTEGER PRIMARY KEY, v BLOB)`)
	want := 0
	for round := range 6 {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		for range 200 { // ~200 pages: about seven times the buffer
			if _, err := tx.Exec(`INSERT INTO t (v) VALUES (randomblob(3500))`); err != nil {
				t.Fatal(err)
			}
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		want += 200
		tx, err = db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(`INSERT INTO t (v) VALUES (randomblob(100))`); err != nil {
			t.Fatal(err)
		}
		if err := tx.Rollback(); err != nil {
			t.Fatal(err)
		}
		mode := []string{"PASSIVE", "RESTART", "TRUNCATE"}[round%3]
		exec(t, db, "PRAGMA wal_checkpoint("+mode+")")
		exec(t, db, `UPDATE t SET v = randomblob(50) WHERE id % 7 = ?`, round)
	}
	fresh := open(t, path, true)
	if n := count(t, fresh, `SELECT count(*) FROM t`); n != int64(want) {
		t.Fatalf("%d rows, want %d", n, want)
	}
	if n := count(t, fresh, `SELECT count(*) FROM t WHERE length(v) = 100`); n != 0 {
		t.Fatalf("%d rolled-back rows", n)
	}
	var check string
	if err := fresh.QueryRow(`PRAGMA integrity_check`).Scan(&check); err != nil || !strings.EqualFold(check, "ok") {
		t.Fatalf("integrity check: %q, %v", check, err)
	}
}

// TestInterleavedWriters: commits through the VFS alternate with commits of
// another connection on the default VFS (the command line beside a running
// gateway), with checkpoints that restart the log under either; every row
// of both is there after, and the database is intact.
func TestInterleavedWriters(t *testing.T) {
	path := filepath.Join(t.TempDir(), "two.db")
	ours := open(t, path, false)
	exec(t, ours, `CREATE TABLE t (id INTEGER PRIMARY KEY, who TEXT, v BLOB)`)
	theirs := open(t, path, true)
	for i := range 120 {
		db, who := ours, "ours"
		if i%3 == 2 {
			db, who = theirs, "theirs"
		}
		rows := 1 + i%5*10 // from one page to several
		tx, err := db.Begin()
		if err != nil {
			t.Fatal(err)
		}
		for range rows {
			if _, err := tx.Exec(`INSERT INTO t (who, v) VALUES (?, randomblob(900))`, who); err != nil {
				t.Fatal(err)
			}
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		if i%17 == 16 {
			exec(t, theirs, `PRAGMA wal_checkpoint(RESTART)`)
		}
		if i%23 == 22 {
			exec(t, ours, `PRAGMA wal_checkpoint(TRUNCATE)`)
		}
	}
	want := map[string]int64{}
	for i := range 120 {
		who := "ours"
		if i%3 == 2 {
			who = "theirs"
		}
		want[who] += int64(1 + i%5*10)
	}
	fresh := open(t, path, true)
	for who, n := range want {
		if got := count(t, fresh, `SELECT count(*) FROM t WHERE who = '`+who+`'`); got != n {
			t.Fatalf("%s: %d rows, want %d", who, got, n)
		}
	}
	var check string
	if err := fresh.QueryRow(`PRAGMA integrity_check`).Scan(&check); err != nil || check != "ok" {
		t.Fatalf("integrity check: %q, %v", check, err)
	}
}
