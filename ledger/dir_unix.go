//go:build unix

package ledger

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// checkLedgerDir reports, without writing anything, whether a ledger file
// can be created at path: the nearest directory of its that exists must
// be a directory this process may write in (Open creates the missing
// ones, then the file and SQLite's -wal and -shm files beside it).
func checkLedgerDir(path string) error {
	dir := filepath.Dir(path)
	for {
		fi, err := os.Stat(dir)
		switch {
		case err == nil && !fi.IsDir():
			return fmt.Errorf("%s is not a directory", dir)
		case err == nil:
			if err := unix.Access(dir, unix.W_OK|unix.X_OK); err != nil {
				return fmt.Errorf("the directory %s is not writable by this process (user %d): %w", dir, os.Geteuid(), err)
			}
			return nil
		case !errors.Is(err, os.ErrNotExist):
			return err
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return nil
		}
		dir = parent
	}
}
