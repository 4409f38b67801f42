package ledger

import (
	"context"
	"os"
	"testing"
)

// TestFilesPrivate: the database and the -wal and -shm files SQLite makes
// beside it are readable by their owner only, whatever the umask lets
// through.
func TestFilesPrivate(t *testing.T) {
	path := testPath(t)
	s := openAt(t, path)
	if _, err := s.CreateLogin(context.Background(), "ada@example.com", "basic", "hash"); err != nil {
		t.Fatal(err)
	}
	for _, suffix := range []string{"", "-wal", "-shm"} {
		fi, err := os.Stat(path + suffix)
		if err != nil {
			t.Fatal(err)
		}
		if perm := fi.Mode().Perm(); perm != 0o600 {
			t.Errorf("%s: mode %v, want -rw-------", suffix, perm)
		}
	}
}
