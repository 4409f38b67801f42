package integration

import (
	"bytes"
	"context"
	"encoding/csv"
	"errors"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	"github.com/spf13/cobra"

	"github.com/modelgate/modelgate/accounts"
	"github.com/modelgate/modelgate/ledger"
	"github.com/modelgate/modelgate/passwords"
)

// runCLI runs `caddy modelgate args…` in this process and returns its
// standard output.
func runCLI(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := &cobra.Command{Use: "modelgate", SilenceUsage: true, SilenceErrors: true}
	caddycmd.Commands()["modelgate"].CobraFunc(cmd)
	cmd.SetArgs(args)

	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout := os.Stdout
	os.Stdout = w
	done := make(chan string)
	go func() {
		var b bytes.Buffer
		_, _ = io.Copy(&b, r)
		done <- b.String()
	}()
	runErr := cmd.Execute()
	os.Stdout = stdout
	w.Close()
	return strings.TrimSpace(<-done), runErr
}

func TestCLI(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "ledger.db")

	// no ledger there yet: the command says so rather than make one
	if _, err := runCLI(t, "account", "create", "--db", db, "--email", "ada@example.com"); err == nil ||
		!strings.Contains(err.Error(), "there is no ledger at "+db) || !strings.Contains(err.Error(), "--create-ledger") {
		t.Fatalf("a missing ledger: %v", err)
	}
	acct, err := runCLI(t, "account", "create", "--db", db, "--create-ledger", "--email", "ada@example.com", "--credit", "10.00")
	if err != nil || !strings.HasPrefix(acct, "acct_") {
		t.Fatalf("account create: %q, %v", acct, err)
	}
	key, err := runCLI(t, "key", "create", "--db", db, "--account", acct, "--label", "laptop")
	if err != nil || !ledger.WellFormedKey(key) || len(key) < 43 {
		t.Fatalf("key create: %q, %v", key, err)
	}
	if _, err := runCLI(t, "credit", "--db", db, "--account", acct, "--amount", "2.5", "--reason", "goodwill", "--reference", "ticket-7"); err != nil {
		t.Fatal(err)
	}
	// sent again (a lost answer): the first credit stands, nothing more
	if _, err := runCLI(t, "credit", "--db", db, "--account", acct, "--amount", "2.5", "--reason", "goodwill", "--reference", "ticket-7"); err != nil {
		t.Fatalf("the same credit sent again: %v", err)
	}
	if _, err := runCLI(t, "credit", "--db", db, "--account", acct, "--amount", "3", "--reason", "again", "--reference", "ticket-7"); err == nil {
		t.Fatal("another credit with a used reference was accepted")
	}
	for _, bad := range [][]string{
		{"credit", "--db", db, "--account", acct, "--amount", "-1", "--reason", "x"},
		{"credit", "--db", db, "--account", acct, "--amount", "1.0000000001", "--reason", "x"},
		{"credit", "--db", db, "--account", acct, "--amount", "1"},
		{"key", "create", "--db", db, "--account", "acct_nope"},
		{"account", "suspend", "--db", db},
	} {
		if _, err := runCLI(t, bad...); err == nil {
			t.Errorf("%v: want an error", bad)
		}
	}
	if _, err := runCLI(t, "account", "suspend", "--db", db, "--account", acct); err != nil {
		t.Fatal(err)
	}

	s, err := ledger.Open(context.Background(), ledger.Options{Path: db})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	a, err := s.GetAccount(context.Background(), acct)
	if err != nil {
		t.Fatal(err)
	}
	if a.Balance != 12_500_000_000 || a.State != ledger.StateSuspended || a.Email != "ada@example.com" || a.Plan != "default" {
		t.Fatalf("account = %+v", a)
	}
	p, err := s.Authenticate(key)
	if err != nil || p.AccountID != acct || p.Label != "laptop" {
		t.Fatalf("the printed key does not authenticate: %+v, %v", p, err)
	}
	if _, err := runCLI(t, "key", "delete", "--db", db, "--key-id", p.KeyID); err != nil {
		t.Fatal(err)
	}
	if _, err := runCLI(t, "account", "resume", "--db", db, "--account", acct); err != nil {
		t.Fatal(err)
	}
}

// TestCLIWithConfig finds the ledger and the plans through a Caddyfile.
func TestCLIWithConfig(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "ledger.db")
	cfg := filepath.Join(dir, "Caddyfile")
	if err := os.WriteFile(cfg, []byte("{\n\tmodelgate {\n\t\tledger sqlite "+db+"\n\t\tplan developer {\n\t\t\trpm 60\n\t\t}\n\t\tplan enterprise {\n\t\t\trpm 600\n\t\t}\n\t\tdefault_plan developer\n\t}\n}\n:8080 {\n\tmodelgate_api\n}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	acct, err := runCLI(t, "account", "create", "--create-ledger", "--config", cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := runCLI(t, "account", "create", "--create-ledger", "--config", cfg, "--plan", "gold"); err == nil {
		t.Fatal("a plan the configuration lacks was accepted")
	}
	ent, err := runCLI(t, "account", "create", "--create-ledger", "--config", cfg, "--plan", "enterprise")
	if err != nil {
		t.Fatal(err)
	}
	moved, err := runCLI(t, "account", "create", "--create-ledger", "--config", cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := runCLI(t, "account", "plan", "--config", cfg, "--account", moved, "--plan", "gold"); err == nil {
		t.Fatal("account plan accepted a plan the configuration lacks")
	}
	if _, err := runCLI(t, "account", "plan", "--config", cfg, "--account", moved, "--plan", "enterprise"); err != nil {
		t.Fatal(err)
	}
	s, err := ledger.Open(context.Background(), ledger.Options{Path: db})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for id, plan := range map[string]string{acct: "developer", ent: "enterprise", moved: "enterprise"} {
		a, err := s.GetAccount(context.Background(), id)
		if err != nil || a.Plan != plan {
			t.Errorf("%s: %+v, %v", id, a, err)
		}
	}
}

// TestCLIWhileServing: accounts, keys, credits and deletions made by the
// CLI on the ledger file of a running gateway take effect within a second.
func TestCLIWhileServing(t *testing.T) {
	g := startGateway(t, gatewayOptions{})
	acct, err := runCLI(t, "account", "create", "--create-ledger", "--db", g.dbPath, "--credit", "1.00")
	if err != nil {
		t.Fatal(err)
	}
	key, err := runCLI(t, "key", "create", "--db", g.dbPath, "--account", acct)
	if err != nil {
		t.Fatal(err)
	}
	body := chatBody(testModel, "hello from the cli", "")
	// a new key works at once: an unknown key is looked up in the database
	if r := g.do("POST", "/v1/chat/completions", body, "Authorization", "Bearer "+key); r.status != 200 {
		t.Fatalf("new key: %d %s", r.status, r.body)
	}
	within := func(what string, ok func() bool) {
		t.Helper()
		for deadline := time.Now().Add(time.Second); !ok(); time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s did not take effect within a second", what)
			}
		}
	}
	before, _ := g.balance(acct)
	if _, err := runCLI(t, "credit", "--db", g.dbPath, "--account", acct, "--amount", "5", "--reason", "top-up"); err != nil {
		t.Fatal(err)
	}
	within("a credit", func() bool {
		r := g.do("GET", "/api/usage", "", "Authorization", "Bearer "+key)
		return strings.Contains(r.body, `"balance":"`+(before+5_000_000_000).String()+`"`)
	})
	if _, err := runCLI(t, "account", "suspend", "--db", g.dbPath, "--account", acct); err != nil {
		t.Fatal(err)
	}
	within("a suspension", func() bool {
		return g.do("POST", "/v1/chat/completions", body, "Authorization", "Bearer "+key).status == 403
	})
	if _, err := runCLI(t, "account", "resume", "--db", g.dbPath, "--account", acct); err != nil {
		t.Fatal(err)
	}
	within("a resumption", func() bool {
		return g.do("POST", "/v1/chat/completions", body, "Authorization", "Bearer "+key).status == 200
	})
	p, err := g.store.Authenticate(key)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := runCLI(t, "key", "delete", "--db", g.dbPath, "--key-id", p.KeyID); err != nil {
		t.Fatal(err)
	}
	within("a key deletion", func() bool {
		return g.do("POST", "/v1/chat/completions", body, "Authorization", "Bearer "+key).status == 401
	})
	g.audit()
}

// TestCLIAccountWithLogin: `account create --password-stdin` gives the
// account a console login, its password read from standard input and
// stored hashed.
func TestCLIAccountWithLogin(t *testing.T) {
	db := filepath.Join(t.TempDir(), "ledger.db")
	stdin := os.Stdin
	t.Cleanup(func() { os.Stdin = stdin })
	feed := func(s string) {
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		io.WriteString(w, s)
		w.Close()
		os.Stdin = r
	}
	feed("a long enough password\n")
	acct, err := runCLI(t, "account", "create", "--create-ledger", "--db", db, "--email", "ops@example.com", "--password-stdin")
	if err != nil || !strings.HasPrefix(acct, "acct_") {
		t.Fatalf("account create: %q, %v", acct, err)
	}
	feed("short\n")
	if _, err := runCLI(t, "account", "create", "--create-ledger", "--db", db, "--email", "b@example.com", "--password-stdin"); err == nil || !strings.Contains(err.Error(), "at least") {
		t.Fatalf("a short password: %v", err)
	}
	// a taken email, as given or in another case: an error and no account
	// id, never an empty id with exit status 0
	for _, email := range []string{"ops@example.com", " OPS@Example.COM "} {
		feed("another long password\n")
		out, err := runCLI(t, "account", "create", "--create-ledger", "--db", db, "--email", email, "--password-stdin")
		if err == nil || out != "" || !errors.Is(err, ledger.ErrDuplicate) {
			t.Fatalf("taken email %q: printed %q, error %v", email, out, err)
		}
	}
	s, err := ledger.Open(context.Background(), ledger.Options{Path: db})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	id, hash, err := s.Login(context.Background(), "ops@example.com")
	if err != nil || id != acct || !strings.HasPrefix(hash, "$argon2id$") {
		t.Fatalf("login: %q %q %v", id, hash, err)
	}
	if ok, _ := passwords.Verify("a long enough password", hash); !ok {
		t.Fatal("the stored hash does not verify")
	}
}

// TestCLIResetLink: `account reset-link` prints a one-time link under the
// console's public address (public_url and the console's path from the
// configuration, or --url), whose token the ledger keeps only hashed; bad
// input is a clear error.
func TestCLIResetLink(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "ledger.db")
	cfg := filepath.Join(dir, "Caddyfile")
	if err := os.WriteFile(cfg, []byte("{\n\tmodelgate {\n\t\tledger sqlite "+db+"\n\t\tpublic_url https://gw.example.com\n\t}\n}\n:8080 {\n\tmodelgate_api\n\tmodelgate_console /my-console*\n}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	acct, err := runCLI(t, "account", "create", "--create-ledger", "--config", cfg, "--email", "Ops@Example.com")
	if err != nil {
		t.Fatal(err)
	}
	bare, err := runCLI(t, "account", "create", "--config", cfg)
	if err != nil {
		t.Fatal(err)
	}
	link := regexp.MustCompile(`^https://gw\.example\.com/my-console/reset\?token=([A-Za-z0-9_-]{43})$`)
	s, err := ledger.Open(context.Background(), ledger.Options{Path: db})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var tokens []string
	for _, who := range []string{acct, "ops@example.COM"} {
		out, err := runCLI(t, "account", "reset-link", "--config", cfg, who)
		m := link.FindStringSubmatch(out)
		if err != nil || m == nil {
			t.Fatalf("reset-link %s: %q, %v", who, out, err)
		}
		got, err := s.LoginToken(context.Background(), accounts.TokenHash(m[1]), ledger.TokenReset)
		if err != nil || got != acct {
			t.Fatalf("the link's token: %q, %v", got, err)
		}
		tokens = append(tokens, m[1])
	}
	if tokens[0] == tokens[1] {
		t.Fatal("two links share a token")
	}
	// the ledger holds hashes, never a token
	raw, err := os.ReadFile(db)
	if err != nil {
		t.Fatal(err)
	}
	wal, _ := os.ReadFile(db + "-wal")
	for _, tok := range tokens {
		if bytes.Contains(raw, []byte(tok)) || bytes.Contains(wal, []byte(tok)) {
			t.Fatal("a token is in the ledger file")
		}
	}
	// --url for a ledger given alone
	out, err := runCLI(t, "account", "reset-link", "--db", db, "--url", "https://other.example.com/console/", "--expires-in", "10m", acct)
	if err != nil || !strings.HasPrefix(out, "https://other.example.com/console/reset?token=") {
		t.Fatalf("--url: %q, %v", out, err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--db", db, acct}, "public_url"},
		{[]string{"--db", db, "--url", "gw.example.com", acct}, "want the console's address"},
		{[]string{"--config", cfg, "--expires-in", "100h", acct}, "want a duration up to 72h"},
		{[]string{"--config", cfg, "--expires-in", "-1m", acct}, "want a duration up to 72h"},
		{[]string{"--config", cfg, "nobody@example.com"}, "there is no account nobody@example.com"},
		{[]string{"--config", cfg, "acct_nope"}, "there is no account acct_nope"},
		{[]string{"--config", cfg, bare}, "has no email"},
	} {
		out, err := runCLI(t, append([]string{"account", "reset-link"}, tc.args...)...)
		if err == nil || out != "" || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("reset-link %q: printed %q, error %v; want one saying %q", tc.args, out, err, tc.want)
		}
	}
}

// TestCLIAdjustAndHistory: `account adjust` debits once per reference,
// refuses a debit beyond the balance unless --allow-owed (which suspends
// the account for debt until a credit pays it), and `account history`
// prints every entry with the balance after it, as a table or exact CSV.
func TestCLIAdjustAndHistory(t *testing.T) {
	db := filepath.Join(t.TempDir(), "ledger.db")
	acct, err := runCLI(t, "account", "create", "--db", db, "--create-ledger", "--credit", "10.00")
	if err != nil {
		t.Fatal(err)
	}
	adjust := func(args ...string) error {
		_, err := runCLI(t, append([]string{"account", "adjust", "--db", db, "--account", acct}, args...)...)
		return err
	}
	if err := adjust("--amount", "-2.50", "--reason", "late fee", "--reference", "INV-1"); err != nil {
		t.Fatal(err)
	}
	if err := adjust("--amount", "-2.50", "--reason", "late fee", "--reference", "INV-1"); err != nil {
		t.Fatalf("the same reference again: %v (want the first result)", err)
	}
	for _, bad := range [][]string{
		{"--amount", "-1.00", "--reference", "INV-2"},
		{"--amount", "-1.00", "--reason", "x"},
		{"--amount", "0", "--reason", "x", "--reference", "INV-2"},
		{"--amount", "abc", "--reason", "x", "--reference", "INV-2"},
		{"--amount", "-9.00", "--reason", "x", "--reference", "INV-1"}, // the reference of another amount
	} {
		if err := adjust(bad...); err == nil {
			t.Errorf("%v: want an error", bad)
		}
	}
	err = adjust("--amount", "-10.00", "--reason", "chargeback fee", "--reference", "INV-3")
	if err == nil || !strings.Contains(err.Error(), "exceeds the available balance") || !strings.Contains(err.Error(), "--allow-owed") {
		t.Fatalf("a debit beyond the balance: %v", err)
	}
	if err := adjust("--amount", "-10.00", "--reason", "chargeback fee", "--reference", "INV-3", "--allow-owed"); err != nil {
		t.Fatal(err)
	}
	s, err := ledger.Open(context.Background(), ledger.Options{Path: db})
	if err != nil {
		t.Fatal(err)
	}
	a, err := s.GetAccount(context.Background(), acct)
	s.Close()
	if err != nil || a.Balance != 0 || a.Owed != 2_500_000_000 || a.State != ledger.StateSuspended || a.SuspendedFor != ledger.SuspendedForDebt {
		t.Fatalf("after the debt: %+v %v", a, err)
	}
	if _, err := runCLI(t, "credit", "--db", db, "--account", acct, "--amount", "5", "--reason", "wire", "--reference", "W-1"); err != nil {
		t.Fatal(err)
	}

	table, err := runCLI(t, "account", "history", "--db", db, acct)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(table, "\n")
	if len(lines) != 6 || !strings.Contains(lines[1], "debt_payment") || !strings.Contains(lines[1], "-2.500000000") ||
		!strings.Contains(lines[5], "credit") || !strings.Contains(lines[5], "opening credit") {
		t.Fatalf("history table:\n%s", table)
	}
	csvOut, err := runCLI(t, "account", "history", "--db", db, "--csv", acct)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(strings.NewReader(csvOut)).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range rows[1:] {
		got = append(got, r[2]+" "+r[3]+" "+r[4]+" "+r[5]+" "+r[6])
	}
	want := []string{
		"debt_payment -2.500000000 -2.500000000 2.500000000 0.000000000",
		"credit 5.000000000 0.000000000 5.000000000 2.500000000",
		"adjustment -7.500000000 2.500000000 0.000000000 2.500000000",
		"adjustment -2.500000000 0.000000000 7.500000000 0.000000000",
		"credit 10.000000000 0.000000000 10.000000000 0.000000000",
	}
	if strings.Join(rows[0], ",") != "id,time,kind,amount,owed,balance_after,owed_after,reference,reason,payment" || strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("history CSV:\n%s", csvOut)
	}
	for _, bad := range [][]string{
		{"account", "history", "--db", db},
		{"account", "history", "--db", db, "acct_nope"},
	} {
		if _, err := runCLI(t, bad...); err == nil {
			t.Errorf("%v: want an error", bad)
		}
	}
}
