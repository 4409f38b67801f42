package ledger

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestKillHelper is the child process of TestKill9LosesNoAcknowledgedDebit:
// it settles requests from several goroutines and prints each request id
// once Settle has returned, until it is killed.
func TestKillHelper(t *testing.T) {
	path, account, key := os.Getenv("LEDGER_KILL_DB"), os.Getenv("LEDGER_KILL_ACCOUNT"), os.Getenv("LEDGER_KILL_KEY")
	dsn := os.Getenv("LEDGER_KILL_DSN")
	if path == "" && dsn == "" {
		t.Skip("helper process only")
	}
	s, err := Open(context.Background(), Options{Path: path, Postgres: dsn, Lease: time.Second})
	if err != nil {
		fmt.Println("open:", err)
		os.Exit(1)
	}
	var mu sync.Mutex
	out := bufio.NewWriter(os.Stdout)
	var wg sync.WaitGroup
	for g := 0; g < 32; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				h, err := s.Reserve(account, 1, 1000)
				if err != nil {
					fmt.Println("reserve:", err)
					os.Exit(1)
				}
				rec := &UsageRecord{RequestID: NewRequestID(), KeyID: key, Model: "m", Cost: 7}
				if err := h.Settle(context.Background(), rec); err != nil {
					fmt.Println("settle:", err)
					os.Exit(1)
				}
				mu.Lock()
				fmt.Fprintln(out, "settled", rec.RequestID)
				out.Flush()
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
}

// TestKill9LosesNoAcknowledgedDebit kills a process that is settling
// (SIGKILL, no Close) and checks that every debit it acknowledged is in the
// reopened ledger and that the ledger is consistent.
func TestKill9LosesNoAcknowledgedDebit(t *testing.T) { backends(t, testKill9LosesNoAcknowledgedDebit) }

// testKill9LosesNoAcknowledgedDebit: with PostgreSQL, the killed process's
// holds (its lease of a second) are released by the parent's store too.
func testKill9LosesNoAcknowledgedDebit(t *testing.T, b backend) {
	if testing.Short() {
		t.Skip("spawns a process")
	}
	ctx := context.Background()
	path := b.db(t)
	s := b.openAt(t, path)
	a := mustAccount(t, s, 1_000_000_000)
	_, k, err := s.CreateKey(ctx, a.ID, "k")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	cmd := exec.Command(os.Args[0], "-test.run=^TestKillHelper$", "-test.count=1")
	cmd.Env = append(os.Environ(), "LEDGER_KILL_DB="+path.path, "LEDGER_KILL_DSN="+path.dsn, "LEDGER_KILL_ACCOUNT="+a.ID, "LEDGER_KILL_KEY="+k.ID)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var acked []string
	sc := bufio.NewScanner(stdout)
	deadline := time.Now().Add(20 * time.Second)
	for sc.Scan() {
		line := sc.Text()
		id, ok := strings.CutPrefix(line, "settled ")
		if !ok {
			t.Logf("child: %s", line)
			continue
		}
		acked = append(acked, id)
		if len(acked) == 3000 || time.Now().After(deadline) {
			break
		}
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	if len(acked) < 100 {
		t.Fatalf("child acknowledged only %d settles", len(acked))
	}

	s2 := b.openAt(t, path)
	db := b.raw(t, path)
	for _, id := range acked {
		if n := count(t, db, "SELECT count(*) FROM usage WHERE request_id = ?", id); n != 1 {
			t.Fatalf("acknowledged request %s has %d usage rows", id, n)
		}
	}
	rows := count(t, db, "SELECT count(*) FROM usage")
	got := balanceOf(t, s2, a.ID)
	for deadline := time.Now().Add(3 * time.Second); b.pg && got.Held != 0 && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond) // the killed process's lease runs out
		got = balanceOf(t, s2, a.ID)
	}
	if got.Held != 0 || int64(got.Balance) != 1_000_000_000-7*rows {
		t.Fatalf("after kill: %+v with %d rows", got, rows)
	}
	mustAudit(t, s2)
	t.Logf("%d acknowledged, %d rows committed", len(acked), rows)
}
