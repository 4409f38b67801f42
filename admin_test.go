package modelgate

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelgate/modelgate/ledger"
	"github.com/modelgate/modelgate/passwords"
)

// adminAccount and adminKey are the admin API's account and key, as its
// JSON reads.
type adminAccount struct {
	ID        string       `json:"id"`
	Email     string       `json:"email,omitempty"`
	Plan      string       `json:"plan"`
	State     ledger.State `json:"state"`
	Balance   ledger.Money `json:"balance"`
	Held      ledger.Money `json:"held"`
	CreatedAt time.Time    `json:"created_at"`
	// the account's spend in the current calendar month (#20)
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
		Balance ledger.Money `json:"balance"`
	}
	if st := adminCall(t, "POST", "/modelgate/accounts/"+acct.ID+"/credits", `{"amount":"1.25","reason":"goodwill","reference":"ticket-7"}`, &credited); st != 200 || credited.Balance != before+1_250_000_000 {
		t.Fatalf("credit: %d %s, before %s", st, credited.Balance, before)
	}
	for body, want := range map[string]int{
		`{"amount":"1.25","reason":"goodwill","reference":"ticket-7"}`: 409, // the same reference again
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
// allow_remote_unauthenticated_admin (#17).
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
// lower case, and refuses one that differs from a taken one only in case
// (#17).
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
