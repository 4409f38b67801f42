//go:build unix

package ledger

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestCheckFindsUnwritableLedgerPaths: Check (what `caddy validate` runs)
// refuses a SQLite path that Open could not create, without creating
// anything: under a file, or in a directory this process may not write.
func TestCheckFindsUnwritableLedgerPaths(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "a-file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	locked := filepath.Join(dir, "locked")
	if err := os.Mkdir(locked, 0o500); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name, path, want string
		asRoot           bool // the case holds for root too
	}{
		{"new directories", filepath.Join(dir, "new", "deeper", "ledger.db"), "", true},
		{"under a file", filepath.Join(file, "ledger.db"), "a-file is not a directory", true},
		{"a directory it may not write", filepath.Join(locked, "ledger.db"), "is not writable by this process", false},
		{"below one", filepath.Join(locked, "sub", "ledger.db"), "is not writable by this process", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if !tt.asRoot && os.Geteuid() == 0 {
				asNobody(t)
				return
			}
			err := Check(Options{Path: tt.path})
			if (tt.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tt.want)) {
				t.Fatalf("Check(%s) = %v, want %q", tt.path, err, tt.want)
			}
		})
	}
	if _, err := os.Stat(filepath.Join(dir, "new")); !os.IsNotExist(err) {
		t.Fatalf("Check created something: %v", err)
	}
}

// asNobody runs the test that calls it again, in a copy of the test binary,
// as the user nobody (root may write in any directory), and fails it if
// that run fails; it skips when setpriv is not installed.
func asNobody(t *testing.T) {
	t.Helper()
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		t.Skip("root may write in any directory, and setpriv (util-linux) is not installed to run this as another user")
	}
	dir, err := os.MkdirTemp("", "ledger-nobody-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	bin, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	copied := filepath.Join(dir, "ledger.test")
	if err := os.WriteFile(copied, bin, 0o755); err != nil { //nolint:gosec // G306: the copy must be executable by nobody
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil { //nolint:gosec // G302: nobody must reach the copy
		t.Fatal(err)
	}
	cmd := exec.Command(setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", copied,
		"-test.run", "^"+strings.ReplaceAll(t.Name(), "/", "$/^")+"$", "-test.v")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "TMPDIR="+os.TempDir())
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: "+t.Name()) {
		t.Fatalf("as nobody: %v\n%s", err, out)
	}
}
