package filelock

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// TestTryLock: a second lock on the same file fails at once, within one
// process too, naming no holder it cannot know; after Release the file can be
// locked again.
func TestTryLock(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.lock")
	l, err := TryLock(path)
	if err != nil {
		t.Fatal(err)
	}
	if pid := Owner(path); pid != os.Getpid() {
		t.Fatalf("owner %d, want %d", pid, os.Getpid())
	}
	if l2, err := TryLock(path); !errors.Is(err, ErrLocked) {
		t.Fatalf("second lock: %v, %v", l2, err)
	}
	if err := l.Release(); err != nil {
		t.Fatal(err)
	}
	if err := l.Release(); err != nil {
		t.Fatalf("second release: %v", err)
	}
	l3, err := TryLock(path)
	if err != nil {
		t.Fatalf("lock after release: %v", err)
	}
	l3.Release()
	if Owner(filepath.Join(t.TempDir(), "none")) != 0 {
		t.Fatal("owner of a missing file")
	}
}

// TestLockDiesWithItsProcess: a process killed while it holds the lock
// leaves it free.
func TestLockDiesWithItsProcess(t *testing.T) {
	if path := os.Getenv("FILELOCK_TEST_HOLD"); path != "" {
		if _, err := TryLock(path); err != nil {
			os.Exit(3)
		}
		os.Stdout.WriteString("locked\n")
		time.Sleep(time.Minute)
		os.Exit(0)
	}
	path := filepath.Join(t.TempDir(), "x.lock")
	cmd := exec.Command(os.Args[0], "-test.run=^TestLockDiesWithItsProcess$")
	cmd.Env = append(os.Environ(), "FILELOCK_TEST_HOLD="+path)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 7)
	if _, err := out.Read(buf); err != nil || string(buf) != "locked\n" {
		t.Fatalf("the holder did not lock: %q %v", buf, err)
	}
	if _, err := TryLock(path); !errors.Is(err, ErrLocked) {
		t.Fatalf("locked by another process, but TryLock says %v", err)
	}
	if pid := Owner(path); pid != cmd.Process.Pid {
		t.Fatalf("owner %d, want the holder %d", pid, cmd.Process.Pid)
	}
	cmd.Process.Kill()
	cmd.Wait()
	l, err := TryLock(path)
	if err != nil {
		t.Fatalf("after the holder was killed: %v", err)
	}
	l.Release()
}
