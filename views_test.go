package modelgate

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/csv"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/url"
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
			r["created_at"] != u.CreatedAt.UTC().Format("2006-01-02T15:04:05.000Z") {
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
// through the admin API of a running gateway (#20 item 4).
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
