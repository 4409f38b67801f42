// Package filelock takes an exclusive advisory lock on a file, without
// waiting: the lock is held until Release or until the process ends, when
// the operating system drops it (flock(2) on Unix, LockFileEx on Windows),
// so a crashed holder never leaves it behind. The holder's process id is
// written in the file, so that a refused process can say who holds it.
//
// Locks belong to the open file, not to the process: two TryLock calls on
// one path conflict even within one process.
package filelock

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// ErrLocked is returned (wrapped) by TryLock when another holder has the lock.
var ErrLocked = errors.New("filelock: held by another process")

// File is a held lock.
type File struct {
	f *os.File
}

// TryLock opens path (creating it, mode 0600) and takes its exclusive lock,
// or fails at once with an error wrapping ErrLocked.
func TryLock(path string) (*File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("filelock: %w", err)
	}
	if err := lock(f); err != nil {
		f.Close()
		if errors.Is(err, ErrLocked) {
			return nil, err
		}
		return nil, fmt.Errorf("filelock: lock %s: %w", path, err)
	}
	// the holder's id, for the message of the next one refused; a failure
	// here costs only that message
	if f.Truncate(0) == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return &File{f: f}, nil
}

// Owner returns the process id written in the lock file at path by its
// latest holder, or 0 if none can be read.
func Owner(path string) int {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil || pid <= 0 {
		return 0
	}
	return pid
}

// Release drops the lock and closes the file. The file stays: removing it
// would let a newcomer lock a fresh file while another waits on the old one.
func (l *File) Release() error {
	if l == nil || l.f == nil {
		return nil
	}
	err := unlock(l.f)
	if cerr := l.f.Close(); err == nil {
		err = cerr
	}
	l.f = nil
	return err
}
