package ledger

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
)

// TestServerLock: a store opened as a server's locks its file: a second
// server store on it is refused with ErrInUse and a message that says why
// and what to use instead, naming the holder; a store opened without the
// lock (the CLI) works beside it and its writes reach the server's store;
// once the server's store is closed another server may open the file.
func TestServerLock(t *testing.T) {
	ctx := context.Background()
	path := testPath(t)
	server := func(o *Options) { o.ServerLock = true }
	a := openAt(t, path, server)

	s2, err := Open(ctx, Options{Path: path, ServerLock: true})
	if !errors.Is(err, ErrInUse) || s2 != nil {
		t.Fatalf("second server store: %v, %v", s2, err)
	}
	for _, want := range []string{path, fmt.Sprintf("process %d", os.Getpid()), "One server per SQLite file",
		"holds in its own memory", "a shared PostgreSQL ledger", "caddy modelgate commands work beside"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal does not say %q: %v", want, err)
		}
	}

	// the CLI's store, beside the server's
	cli := openAt(t, path)
	acct, err := cli.CreateAccount(ctx, "", "p")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Credit(ctx, CreditRequest{AccountID: acct.ID, Amount: 5 * NanosPerUnit, Reference: "r", Reason: "cli"}); err != nil {
		t.Fatal(err)
	}
	if err := cli.Close(); err != nil {
		t.Fatal(err)
	}
	a.Refresh()
	got, err := a.GetAccount(ctx, acct.ID)
	if err != nil || got.Balance != 5*NanosPerUnit {
		t.Fatalf("the server's store sees %+v, %v", got, err)
	}

	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := Open(ctx, Options{Path: path, ServerLock: true})
	if err != nil {
		t.Fatalf("a server store after the first closed: %v", err)
	}
	b.Close()
}
