package integration

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/csv"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelgate/modelgate/ledger"
)

// keySummary is a key with its totals, as the admin API's and the CLI's
// JSON reads.
type keySummary struct {
	ID           string       `json:"id"`
	AccountID    string       `json:"account_id"`
	Label        string       `json:"label"`
	Prefix       string       `json:"prefix"`
	CreatedAt    time.Time    `json:"created_at"`
	LastUsedAt   *time.Time   `json:"last_used_at"`
	DeletedAt    *time.Time   `json:"deleted_at"`
	Requests     int64        `json:"requests"`
	InputTokens  int64        `json:"input_tokens"`
	OutputTokens int64        `json:"output_tokens"`
	Spent        ledger.Money `json:"spent"`
}

// accountList is a page of accounts as the admin API's JSON reads.
type accountList struct {
	Accounts []adminAccount `json:"accounts"`
	Next     string         `json:"next"`
}

// adminGet sends a GET to the admin API and returns the raw answer.
func adminGet(t *testing.T, path string) response {
	t.Helper()
	req, err := http.NewRequest("GET", adminAddr+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	return send(t, http.DefaultClient, req)
}

// noSecrets fails the test if out holds a key, in full, or its hash.
func noSecrets(t *testing.T, what, out string, secrets ...string) {
	t.Helper()
	if k := loggedKey.FindString(out); k != "" {
		t.Errorf("%s shows an API key: %s…", what, k[:8])
	}
	for _, s := range secrets {
		sum := sha256.Sum256([]byte(s))
		for _, form := range []string{s, hex.EncodeToString(sum[:]), base64.StdEncoding.EncodeToString(sum[:]), base64.RawURLEncoding.EncodeToString(sum[:])} {
			if strings.Contains(out, form) {
				t.Errorf("%s shows a key or its hash", what)
			}
		}
	}
}

// readUsageCSV parses an export: its header and rows as maps by column.
func readUsageCSV(t *testing.T, body string) (header []string, rows []map[string]string) {
	t.Helper()
	recs, err := csv.NewReader(strings.NewReader(body)).ReadAll()
	if err != nil || len(recs) == 0 {
		t.Fatalf("not CSV with a header (%v): %q", err, body)
	}
	header = recs[0]
	for _, r := range recs[1:] {
		m := map[string]string{}
		for i, col := range header {
			m[col] = r[i]
		}
		rows = append(rows, m)
	}
	return header, rows
}

// checkExport compares an export's rows with the gateway's usage rows of
// the account: the same requests, oldest first, with exact money.
func checkExport(t *testing.T, g *testGateway, acct string, rows []map[string]string, prefix string) {
	t.Helper()
	stored := g.rows(acct) // newest first
	slices.Reverse(stored)
	if len(rows) != len(stored) || len(rows) == 0 {
		t.Fatalf("%d rows exported, %d stored", len(rows), len(stored))
	}
	var charged ledger.Money
	for i, r := range rows {
		u := stored[i]
		c, err := ledger.ParseMoney(r["charged"])
		if err != nil || c != u.Charged || r["cost"] != u.Cost.String() || r["charged"] != u.Charged.String() {
			t.Errorf("row %d: charged %q cost %q, stored %s %s", i, r["charged"], r["cost"], u.Charged, u.Cost)
		}
		charged += c
		if r["request_id"] != u.RequestID || r["key_id"] != u.KeyID || r["key_prefix"] != prefix || r["model"] != u.Model ||
			r["input_tokens"] != strconv.FormatInt(u.Tokens.Input, 10) || r["output_tokens"] != strconv.FormatInt(u.Tokens.Output, 10) ||
			r["created_at"] != u.CreatedAt.UTC().Format("2006-01-02T15:04:05.000Z") ||
			r["tier_bps"] != strconv.Itoa(u.TierBps) || r["discount"] != u.Discount.String() {
			t.Errorf("row %d: %v, stored %+v", i, r, u)
		}
	}
	credited, _ := ledger.ParseMoney("10.00")
	if bal, _ := g.balance(acct); charged != credited-bal || charged == 0 {
		t.Errorf("the export charges %s; the balance went down by %s", charged, credited-bal)
	}
}

// TestAdminAccountViews: an operator lists, searches and pages accounts,
// lists an account's keys with their totals and exports its usage as CSV
// through the admin API of a running gateway.
func TestAdminAccountViews(t *testing.T) {
	g := startGateway(t, gatewayOptions{mock: mockConfig{TokenDelay: 40 * time.Millisecond}})
	create := func(body string) adminAccount {
		t.Helper()
		var a adminAccount
		if st := adminCall(t, "POST", "/modelgate/accounts", body, &a); st != 201 {
			t.Fatalf("create %s: %d", body, st)
		}
		return a
	}
	ada := create(`{"email":"Ada@Views.Example","credit":"10.00"}`)
	bob := create(`{"email":"bob@views.example","plan":"enterprise","credit":"1.00"}`)
	carol := create(`{"email":"carol@elsewhere.example"}`)
	if st := adminCall(t, "POST", "/modelgate/accounts/"+carol.ID+"/suspend", "", nil); st != 200 {
		t.Fatalf("suspend: %d", st)
	}
	var laptop, ci adminKey
	adminCall(t, "POST", "/modelgate/accounts/"+ada.ID+"/keys", `{"label":"laptop"}`, &laptop)
	adminCall(t, "POST", "/modelgate/accounts/"+ada.ID+"/keys", `{"label":"ci"}`, &ci)
	for range 3 {
		if r := g.generate("openai", testModel, "hello there", false, laptop.Secret); r.status != 200 {
			t.Fatalf("request: %d %s", r.status, r.body)
		}
	}
	if st := adminCall(t, "DELETE", "/modelgate/keys/"+ci.ID, "", nil); st != 204 {
		t.Fatalf("delete key: %d", st)
	}

	list := func(query string) accountList {
		t.Helper()
		r := adminGet(t, "/modelgate/accounts"+query)
		if r.status != 200 {
			t.Fatalf("list %s: %d %s", query, r.status, r.body)
		}
		noSecrets(t, "the account listing", r.body, laptop.Secret, ci.Secret)
		var l accountList
		if err := json.Unmarshal([]byte(r.body), &l); err != nil {
			t.Fatalf("list %s: %v in %s", query, err, r.body)
		}
		return l
	}
	ids := func(l accountList) []string {
		var out []string
		for _, a := range l.Accounts {
			out = append(out, a.ID)
		}
		return out
	}
	all := list("")
	if len(all.Accounts) != 3 || all.Next != "" {
		t.Fatalf("everything: %+v", all)
	}
	for _, a := range all.Accounts {
		got, err := g.store.GetAccount(context.Background(), a.ID)
		if err != nil || a.Email != got.Email || a.Plan != got.Plan || a.State != got.State || a.Balance != got.Balance ||
			a.Held != got.Held || !a.CreatedAt.Equal(got.CreatedAt) {
			t.Errorf("listed %+v, stored %+v (%v)", a, got, err)
		}
	}
	// pages of one, following next: the same accounts in the same order
	var paged []string
	for cursor, n := "", 0; ; n++ {
		l := list("?limit=1&cursor=" + url.QueryEscape(cursor))
		paged = append(paged, ids(l)...)
		if l.Next == "" {
			break
		}
		if n > 3 {
			t.Fatal("the pages never end")
		}
		cursor = l.Next
	}
	if !slices.Equal(paged, ids(all)) {
		t.Fatalf("paged %v, all %v", paged, ids(all))
	}
	ordered := func(set ...string) []string {
		var out []string
		for _, id := range ids(all) {
			if slices.Contains(set, id) {
				out = append(out, id)
			}
		}
		return out
	}
	for query, want := range map[string][]string{
		"?email=VIEWS.EXAMPLE":          ordered(ada.ID, bob.ID),
		"?email=%40Else":                ordered(carol.ID),
		"?state=suspended":              ordered(carol.ID),
		"?state=active":                 ordered(ada.ID, bob.ID),
		"?plan=enterprise":              ordered(bob.ID),
		"?plan=developer&email=views":   ordered(ada.ID),
		"?email=nobody":                 nil,
		"?email=_":                      nil, // not a wildcard
		"?plan=developer&state=active":  ordered(ada.ID),
		"?plan=enterprise&state=active": ordered(bob.ID),
	} {
		if got := ids(list(query)); !slices.Equal(got, want) {
			t.Errorf("%s: %v, want %v", query, got, want)
		}
	}
	// exact decimals, as GetAccount's balance
	bal, _ := g.balance(ada.ID)
	if r := adminGet(t, "/modelgate/accounts?email=ada"); !strings.Contains(r.body, `"balance":"`+bal.String()+`"`) {
		t.Errorf("the balance is not the exact decimal %s: %s", bal, r.body)
	}

	// held: a request in flight holds money, and the listing shows it
	var wg sync.WaitGroup
	wg.Go(func() {
		if r := g.generate("openai", testModel, "a slow one", true, laptop.Secret); r.status != 200 {
			t.Errorf("streamed request: %d", r.status)
		}
	})
	var held ledger.Money
	for deadline := time.Now().Add(5 * time.Second); held == 0 && time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		held = list("?email=ada").Accounts[0].Held
	}
	if held <= 0 || held > bal {
		t.Errorf("held while a request is in flight: %s", held)
	}
	wg.Wait()
	if a := list("?email=ada").Accounts[0]; a.Held != 0 {
		t.Errorf("held after the request: %s", a.Held)
	}

	// keys, with their totals: never the key or its hash
	r := adminGet(t, "/modelgate/accounts/"+ada.ID+"/keys")
	noSecrets(t, "the key list", r.body, laptop.Secret, ci.Secret)
	var keys []keySummary
	if err := json.Unmarshal([]byte(r.body), &keys); r.status != 200 || err != nil || len(keys) != 2 {
		t.Fatalf("keys: %d %v %s", r.status, err, r.body)
	}
	rows := g.rows(ada.ID)
	var spent ledger.Money
	var in, out int64
	for _, u := range rows {
		spent += u.Charged
		in += u.Tokens.Input
		out += u.Tokens.Output
	}
	k := keys[0]
	if k.ID != laptop.ID || k.Label != "laptop" || k.Prefix != laptop.Prefix || k.Requests != int64(len(rows)) || k.Requests != 4 ||
		k.Spent != spent || k.InputTokens != in || k.OutputTokens != out || k.LastUsedAt == nil || k.DeletedAt != nil {
		t.Errorf("the used key: %+v; rows spent %s in %d out %d", k, spent, in, out)
	}
	if k := keys[1]; k.ID != ci.ID || k.DeletedAt == nil || k.Requests != 0 || k.LastUsedAt != nil {
		t.Errorf("the deleted key: %+v", k)
	}

	// the usage export
	today := time.Now().UTC().Format(time.DateOnly)
	tomorrow := time.Now().UTC().Add(24 * time.Hour).Format(time.DateOnly)
	r = adminGet(t, "/modelgate/accounts/"+ada.ID+"/usage?from="+today+"&to="+tomorrow)
	if r.status != 200 || !strings.HasPrefix(r.header.Get("Content-Type"), "text/csv") ||
		!strings.Contains(r.header.Get("Content-Disposition"), "usage-"+ada.ID+"-"+today+"-to-"+tomorrow+".csv") {
		t.Fatalf("export: %d %v %s", r.status, r.header, r.body)
	}
	noSecrets(t, "the usage export", r.body, laptop.Secret, ci.Secret)
	header, exported := readUsageCSV(t, r.body)
	if header[0] != "created_at" || !slices.Contains(header, "charged") {
		t.Fatalf("header %v", header)
	}
	checkExport(t, g, ada.ID, exported, laptop.Prefix)
	// a range before the requests: the header alone
	yesterday := time.Now().UTC().Add(-24 * time.Hour).Format(time.DateOnly)
	if r := adminGet(t, "/modelgate/accounts/"+ada.ID+"/usage?from="+yesterday+"&to="+today); r.status != 200 || strings.Count(r.body, "\n") != 1 {
		t.Errorf("an empty range: %d %q", r.status, r.body)
	}
	// an RFC 3339 end: the rows before it, not the one at it
	last := rows[0].CreatedAt // rows are newest first
	before := 0
	for _, u := range rows {
		if u.CreatedAt.Before(last) {
			before++
		}
	}
	r = adminGet(t, "/modelgate/accounts/"+ada.ID+"/usage?from="+today+"&to="+url.QueryEscape(last.Format(time.RFC3339Nano)))
	if _, got := readUsageCSV(t, r.body); r.status != 200 || len(got) != before || before == len(rows) {
		t.Errorf("to %s: %d, %d rows, want %d of %d", last.Format(time.RFC3339Nano), r.status, len(got), before, len(rows))
	}

	// errors: clear 4xx JSON
	for path, want := range map[string]int{
		"/modelgate/accounts?state=closed":                                                      400,
		"/modelgate/accounts?limit=0":                                                           400,
		"/modelgate/accounts?limit=1001":                                                        400,
		"/modelgate/accounts?limit=ten":                                                         400,
		"/modelgate/accounts?cursor=nonsense":                                                   400,
		"/modelgate/accounts?emial=ada":                                                         400,
		"/modelgate/accounts/acct_nope/keys":                                                    404,
		"/modelgate/accounts/acct_nope/usage?from=" + today + "&to=" + tomorrow:                 404,
		"/modelgate/accounts/" + ada.ID + "/usage":                                              400,
		"/modelgate/accounts/" + ada.ID + "/usage?from=" + today:                                400,
		"/modelgate/accounts/" + ada.ID + "/usage?from=" + tomorrow + "&to=" + today:            400,
		"/modelgate/accounts/" + ada.ID + "/usage?from=11/01/2026&to=" + today:                  400,
		"/modelgate/accounts/" + ada.ID + "/usage?from=" + today + "&to=" + tomorrow + "&key=x": 400,
	} {
		if st := adminCall(t, "GET", path, "", nil); st != want {
			t.Errorf("GET %s: %d, want %d", path, st, want)
		}
	}
	if st := adminCall(t, "DELETE", "/modelgate/accounts", "", nil); st != 405 {
		t.Errorf("DELETE /modelgate/accounts: %d, want 405", st)
	}
	g.audit()
}

// TestCLIAccountViews: `caddy modelgate account list|show`, `key list` and
// `usage export` on the ledger file of a running gateway: a
// table by default, the admin API's JSON with --json, the usage rows as
// CSV; never a key.
func TestCLIAccountViews(t *testing.T) {
	g := startGateway(t, gatewayOptions{})
	db := g.dbPath
	cli := func(args ...string) string {
		t.Helper()
		out, err := runCLI(t, append(args, "--db", db)...)
		if err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		return out
	}
	ada := cli("account", "create", "--email", "Ada@CLI.Example", "--credit", "10.00")
	bob := cli("account", "create", "--email", "bob@cli.example", "--plan", "enterprise")
	carol := cli("account", "create", "--email", "carol@elsewhere.example")
	cli("account", "suspend", "--account", carol)
	key := cli("key", "create", "--account", ada, "--label", "laptop")
	for range 3 {
		if r := g.generate("openai", testModel, "hello from the cli", false, key); r.status != 200 {
			t.Fatalf("request: %d %s", r.status, r.body)
		}
	}
	var outputs []string
	run := func(args ...string) string {
		t.Helper()
		out := cli(args...)
		outputs = append(outputs, out)
		return out
	}
	listJSON := func(args ...string) accountList {
		t.Helper()
		var l accountList
		out := run(append([]string{"account", "list", "--json"}, args...)...)
		if err := json.Unmarshal([]byte(out), &l); err != nil {
			t.Fatalf("%v: %v in %s", args, err, out)
		}
		// a SQLite ledger's holds are the gateway's: the CLI does not say 0
		if strings.Contains(out, `"held"`) {
			t.Errorf("the CLI shows held from a SQLite ledger: %s", out)
		}
		return l
	}
	ids := func(l accountList) []string {
		var out []string
		for _, a := range l.Accounts {
			out = append(out, a.ID)
		}
		return out
	}

	// the table
	table := run("account", "list")
	lines := strings.Split(table, "\n")
	bal, _ := g.balance(ada)
	if len(lines) != 4 || !strings.HasPrefix(lines[0], "ID") || !strings.Contains(lines[0], "BALANCE") {
		t.Fatalf("account list:\n%s", table)
	}
	for _, l := range lines[1:] {
		if strings.HasPrefix(l, ada) && !(strings.Contains(l, "ada@cli.example") && strings.Contains(l, " "+bal.Display()+" ") &&
			strings.Contains(l, "default") && strings.Contains(l, "active") && strings.Contains(l, "n/a")) {
			t.Errorf("ada's line: %q (balance %s)", l, bal)
		}
		if strings.HasPrefix(l, carol) && !strings.Contains(l, "suspended") {
			t.Errorf("carol's line: %q", l)
		}
	}
	// --json, as the admin API answers
	all := listJSON()
	var api accountList
	if st := adminCall(t, "GET", "/modelgate/accounts", "", &api); st != 200 || !slices.Equal(ids(api), ids(all)) || len(all.Accounts) != 3 {
		t.Fatalf("CLI %v, admin API %v (%d)", ids(all), ids(api), st)
	}
	for i, a := range all.Accounts {
		if b := api.Accounts[i]; a.Email != b.Email || a.Balance != b.Balance || a.Plan != b.Plan || a.State != b.State || !a.CreatedAt.Equal(b.CreatedAt) {
			t.Errorf("CLI %+v, admin API %+v", a, b)
		}
	}
	// pages
	var paged []string
	for cursor, n := "", 0; ; n++ {
		args := []string{"--limit", "2"}
		if cursor != "" {
			args = append(args, "--cursor", cursor)
		}
		l := listJSON(args...)
		paged = append(paged, ids(l)...)
		if l.Next == "" {
			break
		}
		if n > 2 {
			t.Fatal("the pages never end")
		}
		cursor = l.Next
	}
	if !slices.Equal(paged, ids(all)) {
		t.Fatalf("paged %v, all %v", paged, ids(all))
	}
	// filters
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"--email", "CLI.EXAMPLE"}, []string{ada, bob}},
		{[]string{"--state", "suspended"}, []string{carol}},
		{[]string{"--plan", "enterprise"}, []string{bob}},
		{[]string{"--plan", "default", "--state", "active"}, []string{ada}},
	} {
		got := ids(listJSON(c.args...))
		slices.Sort(got)
		slices.Sort(c.want)
		if !slices.Equal(got, c.want) {
			t.Errorf("%v: %v, want %v", c.args, got, c.want)
		}
	}

	// account show: the account and its keys with their totals
	show := run("account", "show", ada)
	rows := g.rows(ada)
	var spent ledger.Money
	for _, u := range rows {
		spent += u.Charged
	}
	p, err := g.store.Authenticate(key)
	if err != nil {
		t.Fatal(err)
	}
	words := strings.Join(strings.Fields(show), " ") // the table's padding aside
	for _, want := range []string{"account " + ada, "ada@cli.example", "balance " + bal.Display(), "held n/a", "state active",
		"plan default", "owed " + ledger.Money(0).Display(), "spent this month " + spent.Display(), p.KeyID, p.Prefix, "laptop", spent.Display()} {
		if !strings.Contains(words, want) {
			t.Errorf("account show lacks %q:\n%s", want, show)
		}
	}
	if !strings.Contains(show, "  3  ") {
		t.Errorf("account show lacks the key's 3 requests:\n%s", show)
	}
	if again := run("account", "show", "--account", ada); again != show {
		t.Errorf("account show --account ID differs from account show ID:\n%s", again)
	}
	var shown struct {
		adminAccount
		Keys []keySummary `json:"keys"`
	}
	if err := json.Unmarshal([]byte(run("account", "show", ada, "--json")), &shown); err != nil {
		t.Fatal(err)
	}
	if shown.ID != ada || shown.Balance != bal || len(shown.Keys) != 1 || shown.Keys[0].Requests != 3 || shown.Keys[0].Spent != spent {
		t.Errorf("account show --json: %+v", shown)
	}
	// key list: as the admin API's keys route
	var cliKeys, apiKeys []keySummary
	if err := json.Unmarshal([]byte(run("key", "list", ada, "--json")), &cliKeys); err != nil {
		t.Fatal(err)
	}
	if st := adminCall(t, "GET", "/modelgate/accounts/"+ada+"/keys", "", &apiKeys); st != 200 || len(cliKeys) != 1 ||
		cliKeys[0].ID != apiKeys[0].ID || cliKeys[0].Requests != apiKeys[0].Requests || cliKeys[0].Spent != apiKeys[0].Spent ||
		!cliKeys[0].LastUsedAt.Equal(*apiKeys[0].LastUsedAt) || cliKeys[0].Prefix != p.Prefix {
		t.Errorf("key list --json %+v, admin API %+v", cliKeys, apiKeys)
	}
	if kl := run("key", "list", ada); !strings.HasPrefix(kl, "KEY ID") || !strings.Contains(kl, p.Prefix) || strings.Count(kl, "\n") != 1 {
		t.Errorf("key list:\n%s", kl)
	}

	// usage export
	today := time.Now().UTC().Format(time.DateOnly)
	tomorrow := time.Now().UTC().Add(24 * time.Hour).Format(time.DateOnly)
	csvOut := run("usage", "export", "--account", ada, "--from", today, "--to", tomorrow)
	_, exported := readUsageCSV(t, csvOut)
	checkExport(t, g, ada, exported, p.Prefix)
	// the same rows as the admin API's export
	if r := adminGet(t, "/modelgate/accounts/"+ada+"/usage?from="+today+"&to="+tomorrow); strings.TrimSpace(r.body) != csvOut {
		t.Errorf("the CLI's export differs from the admin API's:\n%s\n%s", csvOut, r.body)
	}

	for _, o := range outputs {
		noSecrets(t, "the CLI", o, key)
	}
	for _, bad := range [][]string{
		{"account", "list", "--state", "closed"},
		{"account", "list", "--limit", "0"},
		{"account", "list", "--cursor", "nonsense"},
		{"account", "show"},
		{"account", "show", "acct_nope"},
		{"account", "show", ada, "--account", bob},
		{"key", "list", "acct_nope"},
		{"usage", "export", "--account", ada, "--from", today},
		{"usage", "export", "--account", ada, "--from", tomorrow, "--to", today},
		{"usage", "export", "--from", today, "--to", tomorrow},
		{"usage", "export", "--account", "acct_nope", "--from", today, "--to", tomorrow},
	} {
		if out, err := runCLI(t, append(bad, "--db", db)...); err == nil || out != "" {
			t.Errorf("%v: printed %q, error %v", bad, out, err)
		}
	}
	g.audit()
}

// TestCLIAccountViewsPostgres: on a PostgreSQL ledger, whose holds every
// instance shares, the CLI shows what is held.
func TestCLIAccountViewsPostgres(t *testing.T) {
	dsn := postgresSchemaDSN(t)
	ctx := context.Background()
	s, err := ledger.Open(ctx, ledger.Options{Postgres: dsn})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	a, err := s.CreateAccount(ctx, "pg@views.example", "developer")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Credit(ctx, ledger.CreditRequest{AccountID: a.ID, Amount: 5_000_000_000, Reference: "r", Reason: "test"}); err != nil {
		t.Fatal(err)
	}
	h, err := s.Reserve(a.ID, 1, 1_250_000_001)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Release()

	cfg := filepath.Join(t.TempDir(), "Caddyfile")
	if err := os.WriteFile(cfg, []byte("{\n\tmodelgate {\n\t\tledger postgres \""+dsn+"\"\n\t\tplan developer {\n\t\t\trpm 60\n\t\t}\n\t\tdefault_plan developer\n\t}\n}\n:8080 {\n\tmodelgate_api\n}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := runCLI(t, "account", "show", a.ID, "--config", cfg, "--json")
	if err != nil {
		t.Fatal(err)
	}
	var shown adminAccount
	if err := json.Unmarshal([]byte(out), &shown); err != nil || shown.Held != 1_250_000_001 || shown.Balance != 5_000_000_000 {
		t.Fatalf("account show --json: %v %s", err, out)
	}
	out, err = runCLI(t, "account", "list", "--config", cfg, "--email", "PG@")
	// the table's six decimals, cut (--json above is exact)
	if err != nil || !strings.Contains(out, " 5.000000  1.250000 ") {
		t.Fatalf("account list: %v\n%s", err, out)
	}

	// keys and the export, from the shared ledger
	_, k, err := s.CreateKey(ctx, a.ID, "=formula")
	if err != nil {
		t.Fatal(err)
	}
	nov := time.Date(2026, 11, 3, 10, 0, 0, 0, time.UTC)
	for i, c := range []ledger.Money{1_234_567_891, 7} {
		h, err := s.Reserve(a.ID, 1, 2_000_000_000)
		if err != nil {
			t.Fatal(err)
		}
		rec := &ledger.UsageRecord{RequestID: "req_pg_" + strconv.Itoa(i), KeyID: k.ID, Model: testModel, Provider: "mock",
			UpstreamModel: testUpstreamModel, ClientFormat: "chat", Tokens: ledger.Tokens{Input: 10, Output: 5},
			Cost: c, UsageSource: "upstream", Status: 200, Outcome: "ok", CreatedAt: nov.Add(time.Duration(i) * time.Minute)}
		if err := h.Settle(ctx, rec); err != nil {
			t.Fatal(err)
		}
	}
	out, err = runCLI(t, "key", "list", a.ID, "--config", cfg, "--json")
	var keys []keySummary
	if err != nil || json.Unmarshal([]byte(out), &keys) != nil || len(keys) != 1 || keys[0].Requests != 2 || keys[0].Spent != 1_234_567_898 {
		t.Fatalf("key list: %v %s", err, out)
	}
	out, err = runCLI(t, "usage", "export", "--config", cfg, "--account", a.ID, "--from", "2026-11-01", "--to", "2026-12-01")
	if err != nil {
		t.Fatal(err)
	}
	_, rows := readUsageCSV(t, out)
	if len(rows) != 2 || rows[0]["request_id"] != "req_pg_0" || rows[0]["charged"] != "1.234567891" || rows[1]["charged"] != "0.000000007" ||
		rows[0]["key_label"] != "'=formula" || rows[0]["created_at"] != "2026-11-03T10:00:00.000Z" {
		t.Fatalf("usage export:\n%s", out)
	}
}
