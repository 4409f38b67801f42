package integration

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelgate/modelgate/ledger"
)

// TestValidateTouchesNoLedger: `caddy validate` and `caddy adapt
// --validate` check a configuration's ledger settings, but neither create
// a ledger that does not exist nor migrate or write one that does (the
// models of Caddyfile.example would otherwise be registered in it); a
// ledger path that cannot be one still fails validation.
func TestValidateTouchesNoLedger(t *testing.T) {
	dir := t.TempDir()
	bin := buildGateway(t, dir)
	caddy := func(db string, args ...string) (string, error) {
		t.Helper()
		cmd := exec.Command(bin, args...)
		cmd.Env = append(os.Environ(), "HOME="+dir, "XDG_DATA_HOME="+dir, "XDG_CONFIG_HOME="+dir, "MODELGATE_DB="+db)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	validations := [][]string{
		{"validate", "--config", exampleCaddyfile},
		{"adapt", "--config", exampleCaddyfile, "--validate"},
	}

	// a ledger that does not exist stays so
	fresh := filepath.Join(dir, "new", "modelgate.db")
	for _, args := range validations {
		out, err := caddy(fresh, args...)
		if err != nil {
			t.Fatalf("caddy %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		if _, err := os.Stat(filepath.Dir(fresh)); !os.IsNotExist(err) {
			t.Fatalf("caddy %s created the ledger's directory (%v)", strings.Join(args, " "), err)
		}
	}

	// a ledger that exists is not written: every file beside it is as it was
	existing := filepath.Join(dir, "old", "modelgate.db")
	s, err := ledger.Open(context.Background(), ledger.Options{Path: existing})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateAccount(context.Background(), "kept@example.com", ""); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	before := snapshotDir(t, filepath.Dir(existing))
	for _, args := range validations {
		out, err := caddy(existing, args...)
		if err != nil {
			t.Fatalf("caddy %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		if after := snapshotDir(t, filepath.Dir(existing)); after != before {
			t.Fatalf("caddy %s changed the ledger's directory:\nbefore %s\nafter  %s", strings.Join(args, " "), before, after)
		}
	}

	// a path that cannot be a ledger fails validation, saying why
	out, err := caddy(dir, "validate", "--config", exampleCaddyfile)
	if err == nil || !strings.Contains(out, dir+" is not a file") {
		t.Fatalf("validate with a directory for a ledger: %v\n%s", err, out)
	}
}

// snapshotDir describes every file under dir: name, size, mode, time and
// the digest of its contents.
func snapshotDir(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		fmt.Fprintf(&b, "%s %d %v %d %x; ", d.Name(), info.Size(), info.Mode(), info.ModTime().UnixNano(), sha256.Sum256(data))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}
