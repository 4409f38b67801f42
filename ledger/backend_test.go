package ledger

import (
	"context"
	"database/sql"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"
)

// One contract, two backends: every test of the ledger's behaviour
// runs as a subtest per engine, "sqlite" and "postgres", through a backend.
// The PostgreSQL subtests need a server: MODELGATE_TEST_POSTGRES is the DSN
// (a URL) of a database the tests may create schemas in; each test
// database is a schema of its own, dropped when the test ends. Without the
// variable they skip, unless CI or MODELGATE_REQUIRE_POSTGRES=1 is set:
// then they fail.

// postgresEnv names the variable with the test server's DSN.
const postgresEnv = "MODELGATE_TEST_POSTGRES"

// backend is one engine under test.
type backend struct {
	pg bool
}

// testDB is one ledger database: a SQLite file or a PostgreSQL schema.
type testDB struct {
	pg   bool
	path string // SQLite
	dsn  string // PostgreSQL, with the schema as its search_path
}

// options are the Options that open db.
func (d testDB) options() Options {
	if d.pg {
		return Options{Postgres: d.dsn}
	}
	return Options{Path: d.path}
}

// backends runs fn as a subtest per engine.
func backends(t *testing.T, fn func(t *testing.T, b backend)) {
	t.Run("sqlite", func(t *testing.T) { fn(t, backend{}) })
	t.Run("postgres", func(t *testing.T) {
		requirePostgres(t)
		fn(t, backend{pg: true})
	})
}

// requirePostgres skips t without a test server, or fails it in CI.
func requirePostgres(t testing.TB) string {
	t.Helper()
	dsn := os.Getenv(postgresEnv)
	if dsn != "" {
		return dsn
	}
	if os.Getenv("CI") != "" || os.Getenv("MODELGATE_REQUIRE_POSTGRES") == "1" {
		t.Fatalf("the PostgreSQL tests need a server: set %s to its DSN (postgres://user:password@127.0.0.1:5432/db); .ci/run starts one", postgresEnv)
	}
	t.Skipf("no PostgreSQL server: set %s=postgres://user:password@127.0.0.1:5432/db to run the PostgreSQL tests", postgresEnv)
	return ""
}

// db makes an empty ledger database, gone when the test ends.
func (b backend) db(t testing.TB) testDB {
	t.Helper()
	if !b.pg {
		return testDB{path: testPath(t)}
	}
	return newPostgresDB(t)
}

// newPostgresDB creates a schema of its own for t on the test server.
func newPostgresDB(t testing.TB) testDB {
	t.Helper()
	base := requirePostgres(t)
	schema := "t_" + strings.ToLower(mustRandom(t, 12))
	admin, err := sql.Open("pgx", base)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Exec(`CREATE SCHEMA ` + schema); err != nil {
		admin.Close()
		t.Fatalf("create schema: %v", err)
	}
	// registered first, so it runs after the stores opened later are closed
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := admin.ExecContext(ctx, `DROP SCHEMA `+schema+` CASCADE`); err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
		}
		admin.Close()
	})
	u, err := url.Parse(base)
	if err != nil {
		t.Fatalf("%s must be a URL: %v", postgresEnv, err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return testDB{pg: true, dsn: u.String()}
}

func mustRandom(t testing.TB, n int) string {
	t.Helper()
	r, err := randomBase62(n)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// open opens a store on a new database.
func (b backend) open(t testing.TB, mod ...func(*Options)) *Store {
	t.Helper()
	return b.openAt(t, b.db(t), mod...)
}

// openAt opens a store on db, closed when the test ends.
func (b backend) openAt(t testing.TB, db testDB, mod ...func(*Options)) *Store {
	t.Helper()
	opts := db.options()
	opts.PollInterval = 20 * time.Millisecond
	for _, m := range mod {
		m(&opts)
	}
	s, err := Open(context.Background(), opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// rawConn is plain database/sql on a ledger database, as another process
// (or psql) would use it; queries take ? placeholders on both engines.
type rawConn struct {
	*sql.DB
	pg bool
}

// raw opens db with plain database/sql.
func (b backend) raw(t testing.TB, db testDB) *rawConn {
	t.Helper()
	if !db.pg {
		return &rawConn{DB: rawDB(t, db.path)}
	}
	d, err := sql.Open("pgx", db.dsn)
	if err != nil {
		t.Fatal(err)
	}
	d.SetMaxOpenConns(2)
	t.Cleanup(func() { d.Close() })
	return &rawConn{DB: d, pg: true}
}

func (r *rawConn) q(query string) string {
	if r.pg {
		return rebind(query)
	}
	return query
}

// Exec, Query and QueryRow take ? placeholders.
func (r *rawConn) Exec(query string, args ...any) (sql.Result, error) {
	return r.DB.Exec(r.q(query), args...)
}

func (r *rawConn) Query(query string, args ...any) (*sql.Rows, error) {
	return r.DB.Query(r.q(query), args...)
}

func (r *rawConn) QueryRow(query string, args ...any) *sql.Row {
	return r.DB.QueryRow(r.q(query), args...)
}

// utcDay is the SQL for the UTC date of a unix-seconds expression.
func (r *rawConn) utcDayOfSeconds(sec string) string {
	if r.pg {
		return "to_char(to_timestamp(" + sec + ") AT TIME ZONE 'UTC', 'YYYY-MM-DD')"
	}
	return "strftime('%Y-%m-%d', " + sec + ", 'unixepoch')"
}

// lockWrites holds locks that make the store's writes to tables wait
// (SQLite: the database's write lock) until unlock is called.
func (r *rawConn) lockWrites(t testing.TB, tables ...string) (unlock func()) {
	t.Helper()
	ctx := context.Background()
	conn, err := r.DB.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	stmt := "BEGIN IMMEDIATE"
	if r.pg {
		stmt = "BEGIN; LOCK TABLE " + strings.Join(tables, ", ") + " IN EXCLUSIVE MODE"
	}
	if _, err := conn.ExecContext(ctx, stmt); err != nil {
		t.Fatal(err)
	}
	return func() {
		if _, err := conn.ExecContext(ctx, "ROLLBACK"); err != nil {
			t.Fatal(err)
		}
		conn.Close()
	}
}

// pgOf is s's PostgreSQL engine, nil on SQLite.
func pgOf(s *Store) *pgEngine {
	p, _ := s.eng.(*pgEngine)
	return p
}

// sqliteOf is s's SQLite engine, nil on PostgreSQL.
func sqliteOf(s *Store) *sqliteEngine {
	e, _ := s.eng.(*sqliteEngine)
	return e
}
