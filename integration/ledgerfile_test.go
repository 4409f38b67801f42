package integration

import (
	"os"
	"testing"
)

// TestLedgerFilePrivate: the ledger a gateway creates (emails, password
// hashes, balances) and the -wal and -shm files beside it are readable by
// their owner only.
func TestLedgerFilePrivate(t *testing.T) {
	g := startGateway(t, gatewayOptions{})
	_, key := g.account("1.00")
	if r := g.generate("openai", testModel, "hello", false, key); r.status != 200 {
		t.Fatalf("%d %s", r.status, r.body)
	}
	for _, suffix := range []string{"", "-wal", "-shm"} {
		fi, err := os.Stat(g.dbPath + suffix)
		if err != nil {
			t.Fatal(err)
		}
		if perm := fi.Mode().Perm(); perm != 0o600 {
			t.Errorf("ledger%s: mode %v, want -rw-------", suffix, perm)
		}
	}
}
