package integration

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelgate/modelgate/ledger"
	"github.com/modelgate/modelgate/passwords"
)

// adminAccount and adminKey are the admin API's account and key, as its
// JSON reads.
type adminAccount struct {
	ID      string       `json:"id"`
	Email   string       `json:"email,omitempty"`
	Plan    string       `json:"plan"`
	State   ledger.State `json:"state"`
	Balance ledger.Money `json:"balance"`
	Held    ledger.Money `json:"held"`
	// Owed and SuspendedFor
	Owed         ledger.Money `json:"owed"`
	SuspendedFor string       `json:"suspended_for"`
	CreatedAt    time.Time    `json:"created_at"`
	// the account's spend in the current calendar month
	MonthSpend ledger.Money `json:"month_spend"`
}

type adminKey struct {
	ID         string     `json:"id"`
	AccountID  string     `json:"account_id"`
	Label      string     `json:"label,omitempty"`
	Prefix     string     `json:"prefix"`
	CreatedAt  time.Time  `json:"created_at"`
	LastUsedAt *time.Time `json:"last_used_at,omitempty"`
	Secret     string     `json:"key,omitempty"`
}

// adminCall sends a request to the modelgate admin API and decodes a JSON
// answer into out (if not nil).
func adminCall(t *testing.T, method, path, body string, out any) int {
	t.Helper()
	req, err := http.NewRequest(method, adminAddr+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw := readAllString(resp.Body)
	if out != nil && resp.StatusCode < 300 {
		if err := json.Unmarshal([]byte(raw), out); err != nil {
			t.Fatalf("%s %s: %v in %s", method, path, err, raw)
		}
	}
	if resp.StatusCode >= 400 && !strings.Contains(raw, `"error"`) {
		t.Errorf("%s %s: %d without an error message: %s", method, path, resp.StatusCode, raw)
	}
	return resp.StatusCode
}

// TestAdminAPI: the operator's operations on a running gateway through
// Caddy's admin endpoint, each taking effect on the next API request.
func TestAdminAPI(t *testing.T) {
	g := startGateway(t, gatewayOptions{extra: limitPlans})
	var acct adminAccount
	if st := adminCall(t, "POST", "/modelgate/accounts", `{"email":"ops@example.com","plan":"burst","credit":"2.50"}`, &acct); st != 201 {
		t.Fatalf("create account: %d", st)
	}
	if acct.ID == "" || acct.Plan != "burst" || acct.State != ledger.StateActive || acct.Balance != 2_500_000_000 {
		t.Fatalf("created %+v", acct)
	}
	var key adminKey
	if st := adminCall(t, "POST", "/modelgate/accounts/"+acct.ID+"/keys", `{"label":"ci"}`, &key); st != 201 || !strings.HasPrefix(key.Secret, strings.Split(key.Prefix, "…")[0]) || key.Label != "ci" {
		t.Fatalf("create key: %d %+v", st, key)
	}
	if r := g.generate("openai", testModel, "hello", false, key.Secret); r.status != 200 {
		t.Fatalf("the admin's key: %d %s", r.status, r.body)
	}
	var keys []adminKey
	if st := adminCall(t, "GET", "/modelgate/accounts/"+acct.ID+"/keys", "", &keys); st != 200 || len(keys) != 1 || keys[0].Secret != "" || keys[0].LastUsedAt == nil {
		t.Fatalf("list keys: %d %+v", st, keys)
	}

	// plans
	if st := adminCall(t, "PUT", "/modelgate/accounts/"+acct.ID+"/plan", `{"plan":"gold"}`, nil); st != 400 {
		t.Fatalf("a plan the configuration lacks: %d", st)
	}
	if st := adminCall(t, "PUT", "/modelgate/accounts/"+acct.ID+"/plan", `{"plan":"tight"}`, &acct); st != 200 || acct.Plan != "tight" {
		t.Fatalf("set plan: %d %+v", st, acct)
	}
	statuses := []int{}
	for range 4 {
		statuses = append(statuses, g.generate("anthropic", testModel, "hello", false, key.Secret).status)
	}
	if statuses[3] != 429 {
		t.Fatalf("on plan tight (3 a minute): %v", statuses)
	}
	adminCall(t, "PUT", "/modelgate/accounts/"+acct.ID+"/plan", `{"plan":"burst"}`, nil)

	// suspend and resume
	if st := adminCall(t, "POST", "/modelgate/accounts/"+acct.ID+"/suspend", "", &acct); st != 200 || acct.State != ledger.StateSuspended {
		t.Fatalf("suspend: %d %+v", st, acct)
	}
	for _, client := range []string{"openai", "anthropic", "gemini"} {
		if r := g.generate(client, testModel, "hello", false, key.Secret); r.status != 403 || !strings.Contains(r.body, "suspended") {
			t.Errorf("%s while suspended: %d %s", client, r.status, r.body)
		}
	}
	if st := adminCall(t, "POST", "/modelgate/accounts/"+acct.ID+"/resume", "", &acct); st != 200 || acct.State != ledger.StateActive {
		t.Fatalf("resume: %d %+v", st, acct)
	}
	if r := g.generate("gemini", testModel, "hello", false, key.Secret); r.status != 200 {
		t.Fatalf("resumed: %d %s", r.status, r.body)
	}

	// credits
	before, _ := g.balance(acct.ID)
	var credited struct {
		Balance  ledger.Money `json:"balance"`
		Replayed bool         `json:"replayed"`
	}
	if st := adminCall(t, "POST", "/modelgate/accounts/"+acct.ID+"/credits", `{"amount":"1.25","reason":"goodwill","reference":"ticket-7"}`, &credited); st != 200 || credited.Balance != before+1_250_000_000 || credited.Replayed {
		t.Fatalf("credit: %d %s %v, before %s", st, credited.Balance, credited.Replayed, before)
	}
	// a script that lost the answer sends the credit again: the first
	// result, replayed, and nothing more credited
	credited.Replayed = false
	if st := adminCall(t, "POST", "/modelgate/accounts/"+acct.ID+"/credits", `{"amount":"1.25","reason":"goodwill","reference":"ticket-7"}`, &credited); st != 200 || credited.Balance != before+1_250_000_000 || !credited.Replayed {
		t.Fatalf("credit sent again: %d %s replayed %v", st, credited.Balance, credited.Replayed)
	}
	for body, want := range map[string]int{
		`{"amount":"2.50","reason":"goodwill","reference":"ticket-7"}`: 409, // the reference of another credit
		`{"amount":"1.25"}`:                      400, // no reason
		`{"amount":"-1","reason":"x"}`:           400,
		`{"amount":1.25,"reason":"x"}`:           400, // a float, not a decimal string
		`{"amount":"0.0000000001","reason":"x"}`: 400, // finer than a nano
		`{"amount":"1","reason":"x","colour":1}`: 400,
		`not json`:                               400,
	} {
		if st := adminCall(t, "POST", "/modelgate/accounts/"+acct.ID+"/credits", body, nil); st != want {
			t.Errorf("credit %s: %d, want %d", body, st, want)
		}
	}
	if bal, _ := g.balance(acct.ID); bal != before+1_250_000_000 {
		t.Fatalf("balance %s after refused credits, want %s", bal, before+1_250_000_000)
	}

	// errors
	for _, c := range []struct {
		method, path, body string
		want               int
	}{
		{"GET", "/modelgate/accounts/acct_nope", "", 404},
		{"POST", "/modelgate/accounts/acct_nope/suspend", "", 404},
		{"POST", "/modelgate/accounts/acct_nope/keys", "{}", 404},
		{"POST", "/modelgate/accounts/acct_nope/credits", `{"amount":"1","reason":"x"}`, 404},
		{"DELETE", "/modelgate/keys/key_nope", "", 404},
		{"DELETE", "/modelgate/accounts/" + acct.ID, "", 405},
		{"GET", "/modelgate/colours", "", 404},
		{"POST", "/modelgate/accounts", `{"plan":"gold"}`, 400},
		{"POST", "/modelgate/accounts", `{"email":"ops@example.com"}`, 409},
		{"POST", "/modelgate/accounts", `{"password":"long enough password"}`, 400},
		{"POST", "/modelgate/accounts", `{"email":"short@example.com","password":"short"}`, 400},
		{"POST", "/modelgate/accounts", `{"email":"ops@example.com","password":"long enough password"}`, 409},
	} {
		if st := adminCall(t, c.method, c.path, c.body, nil); st != c.want {
			t.Errorf("%s %s %s: %d, want %d", c.method, c.path, c.body, st, c.want)
		}
	}

	// an account with a console login: its password is stored hashed
	var login adminAccount
	if st := adminCall(t, "POST", "/modelgate/accounts", `{"email":"dev@example.com","password":"a long enough password"}`, &login); st != 201 || login.Email != "dev@example.com" {
		t.Fatalf("create account with a login: %d %+v", st, login)
	}
	id, hash, err := g.store.Login(context.Background(), "dev@example.com")
	if err != nil || id != login.ID || !strings.HasPrefix(hash, "$argon2id$") || strings.Contains(hash, "a long enough password") {
		t.Fatalf("login: %q %q %v", id, hash, err)
	}
	if ok, err := passwords.Verify("a long enough password", hash); !ok || err != nil {
		t.Fatalf("the stored hash does not verify: %v", err)
	}

	// key deletion
	if st := adminCall(t, "DELETE", "/modelgate/keys/"+key.ID, "", nil); st != 204 {
		t.Fatalf("delete key: %d", st)
	}
	if r := g.generate("openai", testModel, "hello", false, key.Secret); r.status != 401 {
		t.Fatalf("a deleted key: %d %s", r.status, r.body)
	}
	g.audit()
}

// TestAdminExposure: the /modelgate/ admin routes, which mint keys and
// credit money without authentication of their own, are refused when the
// admin endpoint listens beyond loopback, unless the operator opts in with
// allow_remote_unauthenticated_admin.
func TestAdminExposure(t *testing.T) {
	for _, tc := range []struct {
		name, admin, extra string
		want               int
	}{
		{"loopback address", "127.0.0.1", "", http.StatusCreated},
		{"all interfaces", "0.0.0.0", "", http.StatusForbidden},
		{"all interfaces, opted in", "0.0.0.0", "\t\tallow_remote_unauthenticated_admin\n", http.StatusCreated},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := startGateway(t, gatewayOptions{admin: tc.admin, extra: tc.extra})
			email := strings.ReplaceAll(tc.name, " ", "-") + "@example.com"
			req, _ := http.NewRequest("POST", adminAddr+"/modelgate/accounts", strings.NewReader(`{"email":"`+email+`","credit":"100.00"}`))
			req.Header.Set("Content-Type", "application/json")
			r := send(t, http.DefaultClient, req)
			if r.status != tc.want {
				t.Fatalf("create an account: %d %s", r.status, r.body)
			}
			if tc.want == http.StatusForbidden {
				if !strings.Contains(r.body, "allow_remote_unauthenticated_admin") {
					t.Errorf("the refusal does not name the option: %s", r.body)
				}
				// the email is still free: nothing was created
				if _, err := g.store.CreateAccount(context.Background(), email, "developer"); err != nil {
					t.Fatalf("the refused request created the account: %v", err)
				}
			}
		})
	}
}

// TestAdminEmailsNormalized: the admin API keeps emails trimmed and in
// lower case, and refuses one that differs from a taken one only in case.
func TestAdminEmailsNormalized(t *testing.T) {
	startGateway(t, gatewayOptions{})
	var acct adminAccount
	if status := adminCall(t, "POST", "/modelgate/accounts", `{"email":"  Mixed@Case.Example ","password":"`+testPassword+`"}`, &acct); status != http.StatusCreated || acct.Email != "mixed@case.example" {
		t.Fatalf("create: %d %+v", status, acct)
	}
	for _, email := range []string{"mixed@case.example", "MIXED@case.example"} {
		if status := adminCall(t, "POST", "/modelgate/accounts", `{"email":"`+email+`"}`, nil); status != http.StatusConflict {
			t.Errorf("%q again: %d", email, status)
		}
	}
}

// adminMoney is the answer of an adjustment and a history page.
type adminMoney struct {
	AccountID  string       `json:"account_id"`
	Balance    ledger.Money `json:"balance"`
	Owed       ledger.Money `json:"owed"`
	State      ledger.State `json:"state"`
	Replayed   bool         `json:"replayed"`
	NextBefore int64        `json:"next_before"`
	Entries    []adminEntry `json:"entries"`
}

type adminEntry struct {
	ID           int64         `json:"id"`
	Kind         string        `json:"kind"`
	Amount       ledger.Money  `json:"amount"`
	Owed         ledger.Money  `json:"owed"`
	BalanceAfter *ledger.Money `json:"balance_after"`
	OwedAfter    ledger.Money  `json:"owed_after"`
	Reference    string        `json:"reference"`
	Reason       string        `json:"reason"`
}

// TestAdminAdjustmentsAndHistory: an operator's debits and corrections
// with a reason and a reference applied once, a debit beyond the balance
// refused unless owed is allowed (then the account is suspended for debt
// until a credit pays it), and the money history in pages.
func TestAdminAdjustmentsAndHistory(t *testing.T) {
	g := startGateway(t, gatewayOptions{})
	var acct adminAccount
	if st := adminCall(t, "POST", "/modelgate/accounts", `{"plan":"developer","credit":"10.00"}`, &acct); st != 201 {
		t.Fatalf("create account: %d", st)
	}
	var key adminKey
	if st := adminCall(t, "POST", "/modelgate/accounts/"+acct.ID+"/keys", `{}`, &key); st != 201 {
		t.Fatalf("create key: %d", st)
	}
	path := "/modelgate/accounts/" + acct.ID + "/adjustments"
	var res, again adminMoney
	if st := adminCall(t, "POST", path, `{"amount":"-3.00","reason":"service credit withdrawn","reference":"T-1"}`, &res); st != 200 ||
		res.Balance != 7*ledger.NanosPerUnit || len(res.Entries) != 1 || res.Entries[0].Amount != -3*ledger.NanosPerUnit || res.Replayed {
		t.Fatalf("debit: %d %+v", st, res)
	}
	if st := adminCall(t, "POST", path, `{"amount":"-3.00","reason":"service credit withdrawn","reference":"T-1"}`, &again); st != 200 ||
		!again.Replayed || again.Entries[0].ID != res.Entries[0].ID || again.Balance != res.Balance {
		t.Fatalf("the same debit again: %d %+v, want the first result %+v", st, again, res)
	}
	for _, tc := range []struct {
		path, body string
		status     int
	}{
		{path, `{"amount":"-4.00","reason":"x","reference":"T-1"}`, 400}, // the reference of another amount
		{path, `{"amount":"-1.00","reference":"T-2"}`, 400},
		{path, `{"amount":"-1.00","reason":"  ","reference":"T-2"}`, 400},
		{path, `{"amount":"-1.00","reason":"x"}`, 400},
		{path, `{"amount":"0","reason":"x","reference":"T-2"}`, 400},
		{path, `{"amount":"abc","reason":"x","reference":"T-2"}`, 400},
		{path, `{"amount":-1,"reason":"x","reference":"T-2"}`, 400},
		{path, `{"amount":"-1.0000000001","reason":"x","reference":"T-2"}`, 400},
		{path, `{"amount":"-1.00","reason":"x","reference":"T-2","owed":true}`, 400},
		{path, `not json`, 400},
		{path, `{"amount":"9223372036.854775807","reason":"x","reference":"T-big"}`, 400},  // the balance cannot hold it
		{path, `{"amount":"-9223372036.854775808","reason":"x","reference":"T-big"}`, 400}, // nor can a debit be that big
		{path, `{"amount":"-1.00","reason":"` + strings.Repeat("x", 501) + `","reference":"T-long"}`, 400},
		{path, `{"amount":"-20.00","reason":"chargeback fee","reference":"T-3"}`, 409}, // beyond the balance
		{"/modelgate/accounts/acct_nope/adjustments", `{"amount":"-1.00","reason":"x","reference":"T-4"}`, 404},
		{"/modelgate/accounts/" + acct.ID + "/history?limit=0", "", 400},
		{"/modelgate/accounts/" + acct.ID + "/history?limit=1001", "", 400},
		{"/modelgate/accounts/" + acct.ID + "/history?limit=x", "", 400},
		{"/modelgate/accounts/" + acct.ID + "/history?before=-1", "", 400},
		{"/modelgate/accounts/acct_nope/history", "", 404},
	} {
		method := "POST"
		if tc.body == "" {
			method = "GET"
		}
		if st := adminCall(t, method, tc.path, tc.body, nil); st != tc.status {
			t.Errorf("%s %s %s: %d, want %d", method, tc.path, tc.body, st, tc.status)
		}
	}
	if b, _ := g.balance(acct.ID); b != 7*ledger.NanosPerUnit {
		t.Fatalf("a refused adjustment changed the balance: %s", b)
	}

	// with allow_owed: what there is, the rest owed, suspended for debt
	if st := adminCall(t, "POST", path, `{"amount":"-20.00","reason":"chargeback fee","reference":"T-3","allow_owed":true}`, &res); st != 200 ||
		res.Balance != 0 || res.Owed != 13*ledger.NanosPerUnit {
		t.Fatalf("debit with allow_owed: %d %+v", st, res)
	}
	if st := adminCall(t, "GET", "/modelgate/accounts/"+acct.ID, "", &acct); st != 200 || acct.State != ledger.StateSuspended {
		t.Fatalf("after the debt: %d %+v", st, acct)
	}
	if r := g.generate("anthropic", testModel, "hello", false, key.Secret); r.status != 403 || !strings.Contains(r.body, "owes money") {
		t.Fatalf("a request while owing: %d %s", r.status, r.body)
	}
	// the operator suspends it too: a payment no longer resumes it, and
	// the message is the operator's
	var suspended adminAccount
	if st := adminCall(t, "POST", "/modelgate/accounts/"+acct.ID+"/suspend", "", &suspended); st != 200 || suspended.SuspendedFor != "" ||
		suspended.State != ledger.StateSuspended {
		t.Fatalf("suspend: %d %+v", st, suspended)
	}
	if r := g.generate("openai", testModel, "hello", false, key.Secret); r.status != 403 || strings.Contains(r.body, "owes money") ||
		!strings.Contains(r.body, "operator") {
		t.Fatalf("a request while suspended by the operator: %d %s", r.status, r.body)
	}
	if st := adminCall(t, "POST", path, `{"amount":"0.01","reason":"a payment while suspended","reference":"T-6"}`, &res); st != 200 || res.Owed == 0 {
		t.Fatalf("a small payment: %d %+v", st, res)
	}
	if st := adminCall(t, "GET", "/modelgate/accounts/"+acct.ID, "", &acct); st != 200 || acct.State != ledger.StateSuspended {
		t.Fatalf("after a payment, the operator's suspension: %d %+v", st, acct)
	}
	if st := adminCall(t, "POST", "/modelgate/accounts/"+acct.ID+"/resume", "", &acct); st != 200 || acct.State != ledger.StateActive || acct.Owed == 0 {
		t.Fatalf("resume while owing: %d %+v", st, acct)
	}
	// a credit pays the debt first and resumes the account
	var credited map[string]any
	if st := adminCall(t, "POST", "/modelgate/accounts/"+acct.ID+"/credits", `{"amount":"20.00","reason":"wire","reference":"W-1"}`, &credited); st != 200 ||
		credited["balance"] != "7.010000000" {
		t.Fatalf("credit: %d %v", st, credited)
	}
	if st := adminCall(t, "GET", "/modelgate/accounts/"+acct.ID, "", &acct); st != 200 || acct.State != ledger.StateActive {
		t.Fatalf("after paying the debt: %d %+v", st, acct)
	}
	if r := g.generate("openai", testModel, "hello", false, key.Secret); r.status != 200 {
		t.Fatalf("a request after paying: %d %s", r.status, r.body)
	}
	// a correction up
	if st := adminCall(t, "POST", path, `{"amount":"0.50","reason":"goodwill","reference":"T-5"}`, &res); st != 200 || len(res.Entries) != 1 {
		t.Fatalf("correction: %d %+v", st, res)
	}

	// the history in pages of 2, newest first
	var entries []adminEntry
	for before := int64(0); ; {
		var page adminMoney
		p := "/modelgate/accounts/" + acct.ID + "/history?limit=2"
		if before != 0 {
			p += "&before=" + strconv.FormatInt(before, 10)
		}
		if st := adminCall(t, "GET", p, "", &page); st != 200 || len(page.Entries) > 2 {
			t.Fatalf("history: %d %+v", st, page)
		}
		entries = append(entries, page.Entries...)
		if page.NextBefore == 0 {
			break
		}
		before = page.NextBefore
	}
	var kinds []string
	for _, e := range entries {
		kinds = append(kinds, e.Kind+" "+e.Amount.String()+" "+e.Owed.String())
		if e.BalanceAfter == nil {
			t.Fatalf("an entry without its balance after: %+v", e)
		}
	}
	want := "adjustment 0.500000000 0.000000000, debt_payment -12.990000000 -12.990000000, credit 20.000000000 0.000000000, " +
		"debt_payment -0.010000000 -0.010000000, adjustment 0.010000000 0.000000000, " +
		"adjustment -7.000000000 13.000000000, adjustment -3.000000000 0.000000000, credit 10.000000000 0.000000000"
	if got := strings.Join(kinds, ", "); got != want {
		t.Fatalf("history:\n%s\nwant\n%s", got, want)
	}
	// the balance after each: the credit's before the debt it paid, the
	// newest the balance now (a request was debited between them)
	now, _ := g.balance(acct.ID)
	if *entries[2].BalanceAfter != 20*ledger.NanosPerUnit || *entries[1].BalanceAfter != 7_010_000_000 ||
		*entries[0].BalanceAfter != now || now >= 7_510_000_000 || entries[5].OwedAfter != 13*ledger.NanosPerUnit || entries[3].OwedAfter != 12_990_000_000 {
		t.Fatalf("balances after: %+v (balance now %s)", entries, now)
	}
	g.audit()
}
