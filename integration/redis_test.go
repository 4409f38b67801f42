package integration

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/modelgate/modelgate/ledger"
)

// testRedisURL is the Redis the tests share instances through (db 13).
const testRedisURL = "redis://127.0.0.1:6379/13"

// needRedis skips the test when no redis-server answers on 127.0.0.1:6379,
// and empties the test database.
func needRedis(t *testing.T) {
	t.Helper()
	opts, _ := redis.ParseURL(testRedisURL)
	opts.DialTimeout = 300 * time.Millisecond
	rdb := redis.NewClient(opts)
	defer rdb.Close()
	if err := rdb.Ping(context.Background()).Err(); err != nil {
		t.Skipf("no redis-server on 127.0.0.1:6379 (%v): install and start redis-server (.ci/run does) to run this test", err)
	}
	rdb.FlushDB(context.Background())
}

// secondInstance is another gateway process sharing the first one's mock
// upstream and Redis.
type secondInstance struct {
	cmd    *exec.Cmd
	base   string
	log    string
	exited chan struct{} // closed when the process has ended
}

// buildGateway builds the gateway binary (with the race detector when the
// tests run with it) under dir and returns its path.
func buildGateway(t *testing.T, dir string) string {
	t.Helper()
	bin := filepath.Join(dir, "bin", "caddy") // not dir/caddy: that is Caddy's data directory
	args := []string{"build", "-o", bin}
	if raceEnabled {
		args = append(args, "-race")
	}
	if out, err := exec.Command("go", append(args, "github.com/modelgate/modelgate/cmd/caddy")...).CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// secondConfig writes the config of another gateway process into dir: g's
// catalogue on a free port, without admin or logs, its ledger at dbPath.
// It returns the Caddyfile's path and the process's base URL.
func secondConfig(t *testing.T, g *testGateway, dir, dbPath string) (cfgPath, base string) {
	t.Helper()
	port, tlsPort := freeTCPPort(t), freeTCPPort(t)
	cfg := g.cfg
	cfg = strings.Replace(cfg, fmt.Sprintf("admin localhost:%d", adminPort), "admin off", 1)
	cfg = strings.Replace(cfg, fmt.Sprintf("http_port %d", gatewayPort), fmt.Sprintf("http_port %d", port), 1)
	cfg = strings.Replace(cfg, fmt.Sprintf("https_port %d", gatewayTLSPort), fmt.Sprintf("https_port %d", tlsPort), 1)
	cfg = strings.Replace(cfg, "ledger sqlite "+g.dbPath, "ledger sqlite "+dbPath, 1)
	// the second process logs to its own output, not the first's log file
	cfg = strings.Replace(cfg, "\t\toutput file "+g.logPath+"\n", "\t\toutput stderr\n", 1)
	site := cfg[strings.Index(cfg, fmt.Sprintf("http://localhost:%d {", gatewayPort)):]
	cfg = strings.Replace(cfg, site, fmt.Sprintf("http://:%d {\n\tmodelgate_api\n}\n", port), 1)
	cfgPath = filepath.Join(dir, "Caddyfile")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return cfgPath, fmt.Sprintf("http://127.0.0.1:%d", port)
}

// runGateway runs `bin run --config cfgPath` as a process whose home is
// dir, its output going to dir/caddy.log; it does not wait.
func runGateway(t *testing.T, bin, cfgPath, dir, base string) *secondInstance {
	t.Helper()
	si := &secondInstance{base: base, log: filepath.Join(dir, "caddy.log"), exited: make(chan struct{})}
	logf, err := os.Create(si.log)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	si.cmd = exec.Command(bin, "run", "--config", cfgPath)
	si.cmd.Env = append(os.Environ(), "HOME="+dir, "XDG_DATA_HOME="+dir, "XDG_CONFIG_HOME="+dir)
	si.cmd.Stdout, si.cmd.Stderr = logf, logf
	if err := si.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		_ = si.cmd.Wait()
		close(si.exited)
	}()
	t.Cleanup(si.kill)
	return si
}

// serving waits until the process serves its index (200), or has exited,
// or within has passed; it reports whether it serves.
func (si *secondInstance) serving(within time.Duration) bool {
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		if resp, err := http.Get(si.base + "/"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return true
			}
		}
		select {
		case <-si.exited:
			return false
		case <-time.After(50 * time.Millisecond):
		}
	}
	return false
}

// output is what the process wrote.
func (si *secondInstance) output() string {
	out, _ := os.ReadFile(si.log)
	return string(out)
}

// startSecondInstance builds the gateway binary and runs it on a free port
// with the same catalogue as startGateway's, on the ledger at dbPath (one
// server per SQLite file: not g's own).
func startSecondInstance(t *testing.T, g *testGateway, dbPath string) *secondInstance {
	t.Helper()
	dir := t.TempDir()
	bin := buildGateway(t, dir)
	cfgPath, base := secondConfig(t, g, dir, dbPath)
	si := runGateway(t, bin, cfgPath, dir, base)
	if !si.serving(60 * time.Second) {
		t.Fatalf("the second instance did not start:\n%s", si.output())
	}
	return si
}

// freeTCPPort returns a loopback port nothing listens on.
func freeTCPPort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// kill ends the process (SIGKILL) and waits for it.
func (si *secondInstance) kill() {
	_ = si.cmd.Process.Kill()
	<-si.exited
}

// generateAt sends a request of a client format to an instance (its base
// URL) and returns the status and body.
func generateAt(base, client, model, text string, stream bool, key string) (int, string) {
	req := overdraftRequest(client, model, stream, key)
	req.URL.Host = strings.TrimPrefix(base, "http://")
	req.Body = io.NopCloser(strings.NewReader(strings.Replace(readAllString(req.Body), "mock:tokens=40 spend some money please", text, 1)))
	req.ContentLength = -1
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return -1, err.Error()
	}
	defer resp.Body.Close()
	return resp.StatusCode, readAllString(resp.Body)
}

// TestRedisTwoInstances: two gateway processes on one Redis together hold
// an account to its plan: the requests per minute exactly, and its
// concurrency, a stream keeping its slot until it ends; a key deleted or an
// account suspended through one instance is refused by the other within a
// second (the ledgers poll only every minute here: the change travels
// through Redis); and the slots of an instance killed mid-stream lapse
// within their lease.
//
// One server per SQLite file: until the instances can share a
// PostgreSQL ledger, the second runs on a copy of the first's, made once
// the accounts and keys exist, and a key or account change is made to both
// files (to the second's as the CLI would, unannounced), so that only
// Redis can tell the second instance within the second.
func TestRedisTwoInstances(t *testing.T) {
	needRedis(t)
	redisOpt := "\t\tredis " + testRedisURL + " {\n\t\t\tslot_lease 1s\n\t\t}\n"
	g := startGateway(t, gatewayOptions{extra: limitPlans + redisOpt, ledger: "\t\t\tpoll_interval 1m\n"})
	ctx := context.Background()
	type funded struct{ acct, key string }
	accounts := map[string][]funded{}
	for _, plan := range []string{"burst", "few", "narrow", "burst", "burst", "narrow"} {
		acct, key := g.account("10.00")
		if err := g.store.SetAccountPlan(ctx, acct, plan); err != nil {
			t.Fatal(err)
		}
		accounts[plan] = append(accounts[plan], funded{acct, key})
	}
	// account hands out the accounts made before the copy, in order
	account := func(plan string) (string, string) {
		f := accounts[plan][0]
		accounts[plan] = accounts[plan][1:]
		return f.acct, f.key
	}
	bPath := filepath.Join(t.TempDir(), "b.db")
	copyLedger(t, g.dbPath, bPath)
	b := startSecondInstance(t, g, bPath)
	// rows counts an account's usage rows on both instances
	rows := func(acct string) int { return len(g.rows(acct)) + len(rowsAt(t, bPath, acct)) }
	// onB changes the second instance's ledger file as the CLI would
	onB := func(f func(s *ledger.Store) error) {
		s, err := ledger.Open(ctx, ledger.Options{Path: bPath})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if err := f(s); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("requests per minute, exactly", func(t *testing.T) {
		acct, key := account("burst")
		statuses := burst(t, 40, func(i int) (*http.Request, error) {
			req := overdraftRequest([]string{"openai", "anthropic", "gemini"}[i%3], testModel, i%4 == 0, key)
			if i%2 == 1 {
				req.URL.Host = strings.TrimPrefix(b.base, "http://")
			}
			return req, nil
		})
		if statuses[200] != 10 || statuses[429] != 30 || len(statuses) != 2 {
			t.Fatalf("statuses %v over two instances, want 10 × 200 and 30 × 429", statuses)
		}
		if n := rows(acct); n != 10 {
			t.Fatalf("%d usage rows", n)
		}
	})

	t.Run("concurrency, exactly", func(t *testing.T) {
		acct, key := account("few")
		statuses := burst(t, 24, func(i int) (*http.Request, error) {
			req := overdraftRequest([]string{"openai", "anthropic", "gemini"}[i%3], testModel, i%2 == 0, key)
			if i%2 == 1 {
				req.URL.Host = strings.TrimPrefix(b.base, "http://")
			}
			body := strings.Replace(readAllString(req.Body), "mock:tokens=40", "mock:tokens=20 mock:latency=1500ms", 1)
			req.Body, req.ContentLength = io.NopCloser(strings.NewReader(body)), int64(len(body))
			return req, nil
		})
		if statuses[200] != 3 || statuses[429] != 21 || len(statuses) != 2 {
			t.Fatalf("statuses %v over two instances, want 3 × 200 and 21 × 429", statuses)
		}
		if n := rows(acct); n != 3 {
			t.Fatalf("%d usage rows", n)
		}
	})

	t.Run("a stream holds its slot on every instance", func(t *testing.T) {
		_, key := account("narrow")
		stop := openStream(t, b.base, key, "mock:tokens=60 mock:delay=50ms") // 3 s: longer than two leases
		if r := g.generate("anthropic", testModel, "hello", false, key); r.status != 429 || !strings.Contains(r.body, rateLimited["anthropic"]) {
			t.Fatalf("instance A while a stream is open on B: %d %s", r.status, r.body)
		}
		time.Sleep(2 * time.Second) // the lease is renewed while the stream lasts
		if r := g.generate("gemini", testModel, "hello", false, key); r.status != 429 {
			t.Fatalf("instance A two leases into a stream on B: %d %s", r.status, r.body)
		}
		stop(true)
		if r := g.generate("anthropic", testModel, "hello", false, key); r.status != 200 {
			t.Fatalf("instance A after the stream on B ended: %d %s", r.status, r.body)
		}
	})

	t.Run("key deletion and suspension reach the other instance", func(t *testing.T) {
		acct, key := account("burst")
		if st, body := generateAt(b.base, "openai", testModel, "hello", false, key); st != 200 {
			t.Fatalf("B before: %d %s", st, body)
		}
		keys, err := g.store.ListKeys(ctx, acct)
		if err != nil || len(keys) != 1 {
			t.Fatalf("keys: %v %v", keys, err)
		}
		onB(func(s *ledger.Store) error { return s.DeleteKey(ctx, keys[0].ID) })
		if err := g.store.DeleteKey(ctx, keys[0].ID); err != nil {
			t.Fatal(err)
		}
		waitStatus(t, "B after the key was deleted on A", time.Second, func() int {
			st, _ := generateAt(b.base, "openai", testModel, "hello", false, key)
			return st
		}, 401)

		acct2, key2 := account("burst")
		if st, body := generateAt(b.base, "gemini", testModel, "hello", false, key2); st != 200 {
			t.Fatalf("B before: %d %s", st, body)
		}
		onB(func(s *ledger.Store) error { return s.SetAccountState(ctx, acct2, ledger.StateSuspended) })
		if err := g.store.SetAccountState(ctx, acct2, ledger.StateSuspended); err != nil {
			t.Fatal(err)
		}
		waitStatus(t, "B after the account was suspended on A", time.Second, func() int {
			st, _ := generateAt(b.base, "gemini", testModel, "hello", false, key2)
			return st
		}, 403)
	})

	t.Run("a killed instance's slots lapse within the lease", func(t *testing.T) {
		_, key := account("narrow")
		stop := openStream(t, b.base, key, "mock:tokens=400 mock:delay=50ms")
		defer stop(false)
		if r := g.generate("openai", testModel, "hello", false, key); r.status != 429 {
			t.Fatalf("instance A while B streams: %d %s", r.status, r.body)
		}
		b.kill()
		killed := time.Now()
		waitStatus(t, "A after B was killed mid-stream", 3*time.Second, func() int {
			return g.generate("openai", testModel, "hello", false, key).status
		}, 200)
		t.Logf("the slot came back %s after the kill (lease 1s)", time.Since(killed).Round(10*time.Millisecond))
	})
}

// copyLedger copies the SQLite ledger at from, in use, to a new file at to
// (VACUUM INTO: a consistent snapshot, the WAL included).
func copyLedger(t *testing.T, from, to string) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+from+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec("VACUUM INTO ?", to); err != nil {
		t.Fatal(err)
	}
}

// rowsAt returns an account's usage rows in the ledger file at path, read as
// the CLI reads it (beside a running server).
func rowsAt(t *testing.T, path, acct string) []ledger.UsageRecord {
	t.Helper()
	s, err := ledger.Open(context.Background(), ledger.Options{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	rows, err := s.UsageRows(context.Background(), ledger.UsageFilter{AccountID: acct, Limit: 10000})
	if err != nil {
		t.Fatal(err)
	}
	return rows
}

// openStream starts a chat stream on an instance and reads its first
// event; stop reads it to its end (or just closes it).
func openStream(t *testing.T, base, key, text string) (stop func(drain bool)) {
	t.Helper()
	req := overdraftRequest("openai", testModel, true, key)
	req.URL.Host = strings.TrimPrefix(base, "http://")
	req.Body = io.NopCloser(strings.NewReader(strings.Replace(readAllString(req.Body), "mock:tokens=40", text, 1)))
	req.ContentLength = -1
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("stream: %v %v", err, resp)
	}
	one := make([]byte, 1)
	if _, err := io.ReadFull(resp.Body, one); err != nil {
		t.Fatal(err)
	}
	return func(drain bool) {
		if drain {
			_, _ = io.Copy(io.Discard, resp.Body)
		}
		resp.Body.Close()
	}
}

// waitStatus polls until f returns want, failing after within.
func waitStatus(t *testing.T, what string, within time.Duration, f func() int, want int) {
	t.Helper()
	start := time.Now()
	last := 0
	for time.Since(start) < within {
		if last = f(); last == want {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("%s: still %d after %s, want %d", what, last, within, want)
}

// TestRedisDownServesLocally: while the configured Redis cannot be reached
// the gateway keeps serving, holding each account to its plan by its own
// counts, and says so in its log and in modelgate_redis_up; when Redis
// comes back the limits are shared again.
func TestRedisDownServesLocally(t *testing.T) {
	server, err := exec.LookPath("redis-server")
	if err != nil {
		t.Skip("redis-server is not installed: install it (.ci/run does) to run this test")
	}
	port := freeTCPPort(t)
	startRedis := func() *exec.Cmd {
		cmd := exec.Command(server, "--port", fmt.Sprint(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		deadline := time.Now().Add(5 * time.Second)
		for time.Now().Before(deadline) {
			if c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port)); err == nil {
				c.Close()
				return cmd
			}
			time.Sleep(20 * time.Millisecond)
		}
		t.Fatal("redis-server did not start")
		return nil
	}
	rs := startRedis()
	redisOpt := fmt.Sprintf("\t\tredis redis://127.0.0.1:%d/0\n", port)
	g := startGateway(t, gatewayOptions{extra: limitPlans + redisOpt, globalLog: true})
	acct, key := g.account("1.00")
	if err := g.store.SetAccountPlan(context.Background(), acct, "tight"); err != nil {
		t.Fatal(err)
	}
	redisUp := func() string {
		resp, err := http.Get(adminAddr + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		for _, line := range strings.Split(readAllString(resp.Body), "\n") {
			if strings.HasPrefix(line, "modelgate_redis_up ") {
				return strings.TrimPrefix(line, "modelgate_redis_up ")
			}
		}
		return "absent"
	}
	if r := g.generate("openai", testModel, "hello", false, key); r.status != 200 || redisUp() != "1" {
		t.Fatalf("with redis: %d, redis_up %s", r.status, redisUp())
	}

	_ = rs.Process.Kill()
	_ = rs.Wait()
	var statuses []int
	for _, client := range []string{"anthropic", "gemini", "openai", "anthropic"} {
		statuses = append(statuses, g.generate(client, testModel, "hello", false, key).status)
	}
	// the local counts start afresh: 3 a minute
	if fmt.Sprint(statuses) != "[200 200 200 429]" {
		t.Fatalf("without redis: %v, want three served and the fourth refused", statuses)
	}
	if up := redisUp(); up != "0" {
		t.Fatalf("modelgate_redis_up %s while redis is down", up)
	}
	logged, _ := os.ReadFile(g.logPath)
	if !strings.Contains(string(logged), "redis unreachable") {
		t.Fatalf("the log does not say redis is unreachable:\n%s", logged)
	}

	startRedis()
	waitStatus(t, "modelgate_redis_up after redis came back", 5*time.Second, func() int {
		if redisUp() == "1" {
			return 1
		}
		return 0
	}, 1)
	logged, _ = os.ReadFile(g.logPath)
	if !strings.Contains(string(logged), "redis reachable again") {
		t.Fatalf("the log does not say redis is back")
	}
	// shared again: the fresh Redis has its own count, 3 a minute
	statuses = statuses[:0]
	for _, client := range []string{"gemini", "openai", "anthropic", "gemini"} {
		statuses = append(statuses, g.generate(client, testModel, "hello", false, key).status)
	}
	if fmt.Sprint(statuses) != "[200 200 200 429]" {
		t.Fatalf("with redis back: %v", statuses)
	}
	if n := len(g.rows(acct)); n != 7 {
		t.Fatalf("%d usage rows, want 7", n)
	}
}
