package integration

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelgate/modelgate/ledger"
)

// keyLimitsCaddyfile is a configuration with two models and a plan that
// offers one of them, with its rpm and concurrency.
const keyLimitsCaddyfile = `{
	modelgate {
		ledger sqlite DB
		provider mock {
			format openai
			base_url http://127.0.0.1:1
			keys k
		}
		model gpt-4o-mini {
			route mock gpt-4o-mini
			price input 0.15 output 0.60
		}
		model gpt-4.1 {
			route mock gpt-4.1
			price input 2 output 8
		}
		plan developer {
			rpm 60
			concurrency 4
			models gpt-4o-*
		}
		default_plan developer
	}
}
:8080 {
	modelgate_api
}
`

// TestCLIKeyLimits creates a key with limits and changes them through the
// CLI, checked against the configuration's plan, and lists them.
func TestCLIKeyLimits(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "ledger.db")
	cfg := filepath.Join(dir, "Caddyfile")
	if err := os.WriteFile(cfg, []byte(strings.Replace(keyLimitsCaddyfile, "DB", db, 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	acct, err := runCLI(t, "account", "create", "--create-ledger", "--config", cfg)
	if err != nil {
		t.Fatal(err)
	}
	tomorrow := time.Now().UTC().AddDate(0, 0, 2).Format(time.DateOnly)
	for _, tc := range []struct {
		name string
		args []string
		want string // in the error
	}{
		{"a model outside the plan", []string{"--models", "gpt-4.1"}, "models: gpt-4.1 is not a model the plan offers"},
		{"a pattern matching nothing in the plan", []string{"--models", "claude-*"}, "matches no model the plan offers"},
		{"rpm above the plan", []string{"--rpm", "61"}, "the plan allows at most 60 requests a minute"},
		{"concurrency above the plan", []string{"--concurrency", "5"}, "the plan allows at most 4 requests at once"},
		{"a cap finer than a nano", []string{"--cap", "1.0000000001"}, "at most 9 decimal places"},
		{"a negative cap", []string{"--cap", "-1"}, "--cap"},
		{"an unknown period", []string{"--cap", "5", "--period", "fortnight"}, "use day, week, month or never"},
		{"a period without a cap", []string{"--period", "day"}, "give a cap too"},
		{"an expiry in the past", []string{"--expires", "2020-01-01"}, "want a time in the future"},
		{"an expiry that is no time", []string{"--expires", "soon"}, "want an RFC 3339 time"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := runCLI(t, append([]string{"key", "create", "--config", cfg, "--account", acct}, tc.args...)...)
			if err == nil || !strings.Contains(err.Error(), tc.want) || out != "" {
				t.Fatalf("%q, %v; want a refusal saying %q", out, err, tc.want)
			}
		})
	}
	secret, err := runCLI(t, "key", "create", "--config", cfg, "--account", acct, "--label", "ci",
		"--cap", "20.00", "--period", "day", "--models", "gpt-4o-mini, gpt-4o-*", "--expires", tomorrow, "--rpm", "10", "--concurrency", "2")
	if err != nil || !ledger.WellFormedKey(secret) {
		t.Fatalf("key create: %q, %v", secret, err)
	}
	s, err := ledger.Open(context.Background(), ledger.Options{Path: db})
	if err != nil {
		t.Fatal(err)
	}
	p, err := s.Authenticate(secret)
	s.Close()
	if err != nil || p.Limits == nil || p.Limits.Cap != 20_000_000_000 || p.Limits.Period != ledger.PeriodDay ||
		!slices.Equal(p.Limits.Models, []string{"gpt-4o-mini", "gpt-4o-*"}) || p.Limits.RPM != 10 || p.Limits.Concurrency != 2 ||
		p.Limits.ExpiresAt.Format(time.DateOnly) != tomorrow {
		t.Fatalf("the key's limits: %+v, %v", p.Limits, err)
	}
	list, err := runCLI(t, "key", "list", "--config", cfg, acct)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"CAP", "SPENT THIS PERIOD", "LEFT", "RESETS (UTC)", "20.000000/day", "models gpt-4o-mini,gpt-4o-*",
		"expires " + tomorrow + " 00:00:00", "rpm 10", "concurrency 2", time.Now().UTC().AddDate(0, 0, 1).Format(time.DateOnly) + " 00:00:00"} {
		if !strings.Contains(list, want) {
			t.Errorf("key list lacks %q:\n%s", want, list)
		}
	}
	keyID := p.KeyID
	// update: the flags given change, the others stay; "none" and "all" clear
	if _, err := runCLI(t, "key", "update", "--config", cfg, "--key-id", keyID); err == nil || !strings.Contains(err.Error(), "nothing to change") {
		t.Fatalf("an update without a change: %v", err)
	}
	if _, err := runCLI(t, "key", "update", "--config", cfg, "--key-id", keyID, "--rpm", "100"); err == nil {
		t.Fatal("an rpm above the plan's was accepted")
	}
	if _, err := runCLI(t, "key", "update", "--config", cfg, "--key-id", "key_nope", "--rpm", "1"); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Fatalf("an unknown key: %v", err)
	}
	if _, err := runCLI(t, "key", "update", "--config", cfg, "--key-id", keyID, "--cap", "5.5", "--period", "week", "--models", "all"); err != nil {
		t.Fatal(err)
	}
	out, err := runCLI(t, "key", "list", "--config", cfg, "--json", acct)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"cap": "5.500000000"`, `"period": "week"`, `"spent_this_period": "0.000000000"`, `"left": "5.500000000"`,
		`"resets_at": "`, `"rpm": 10`, `"concurrency": 2`, `"expires_at": "` + tomorrow + `T00:00:00Z"`} {
		if !strings.Contains(out, want) {
			t.Errorf("key list --json lacks %s:\n%s", want, out)
		}
	}
	if strings.Contains(out, `"models"`) {
		t.Errorf("--models all left a list:\n%s", out)
	}
	if _, err := runCLI(t, "key", "update", "--config", cfg, "--key-id", keyID, "--cap", "none", "--expires", "never", "--rpm", "0", "--concurrency", "0"); err != nil {
		t.Fatal(err)
	}
	if out, err = runCLI(t, "key", "list", "--config", cfg, "--json", acct); err != nil {
		t.Fatal(err)
	}
	for _, gone := range []string{`"cap"`, `"period"`, `"left"`, `"expires_at"`, `"rpm"`, `"concurrency"`} {
		if strings.Contains(out, gone) {
			t.Errorf("a cleared limit is still shown (%s):\n%s", gone, out)
		}
	}
}

// adminKeyLimits is a key's limits and cap standing as the admin API
// shows them.
type adminKeyLimits struct {
	adminKey
	Spent           ledger.Money  `json:"spent"`
	Cap             *ledger.Money `json:"cap"`
	Period          string        `json:"period"`
	SpentThisPeriod *ledger.Money `json:"spent_this_period"`
	Left            *ledger.Money `json:"left"`
	ResetsAt        *time.Time    `json:"resets_at"`
	Models          []string      `json:"models"`
	ExpiresAt       *time.Time    `json:"expires_at"`
	RPM             int           `json:"rpm"`
	Concurrency     int           `json:"concurrency"`
}

// TestAdminKeyLimits: a key created with limits, read, changed field by
// field and cleared through the admin API; bad input is a 400 that says
// why; the cap's standing follows the key's spend.
func TestAdminKeyLimits(t *testing.T) {
	g := startGateway(t, gatewayOptions{extra: limitPlans})
	var acct adminAccount
	if st := adminCall(t, "POST", "/modelgate/accounts", `{"plan":"burst","credit":"5.00"}`, &acct); st != 201 {
		t.Fatalf("create account: %d", st)
	}
	keys := "/modelgate/accounts/" + acct.ID + "/keys"
	expires := time.Now().Add(72 * time.Hour).UTC().Truncate(time.Second)
	var k adminKeyLimits
	body := `{"label":"proj","cap":"0.50","period":"day","models":["gpt-*"],"expires_at":"` + expires.Format(time.RFC3339) + `","rpm":5,"concurrency":2}`
	if st := adminCall(t, "POST", keys, body, &k); st != 201 || k.Secret == "" {
		t.Fatalf("create key: %d %+v", st, k)
	}
	tomorrow := time.Now().UTC().Truncate(24*time.Hour).AddDate(0, 0, 1)
	if k.Cap == nil || *k.Cap != 500_000_000 || k.Period != "day" || k.SpentThisPeriod == nil || *k.SpentThisPeriod != 0 ||
		k.Left == nil || *k.Left != 500_000_000 || k.ResetsAt == nil || !k.ResetsAt.Equal(tomorrow) ||
		len(k.Models) != 1 || k.Models[0] != "gpt-*" || k.ExpiresAt == nil || !k.ExpiresAt.Equal(expires) || k.RPM != 5 || k.Concurrency != 2 {
		t.Fatalf("created %+v", k)
	}
	// its spend this period and what is left follow its requests
	if r := g.generate("openai", testModel, "hello", false, k.Secret); r.status != 200 {
		t.Fatalf("a request: %d %s", r.status, r.body)
	}
	var got adminKeyLimits
	if st := adminCall(t, "GET", "/modelgate/keys/"+k.ID, "", &got); st != 200 || got.Spent == 0 || got.SpentThisPeriod == nil ||
		*got.SpentThisPeriod != got.Spent || *got.Left != 500_000_000-got.Spent || got.Secret != "" {
		t.Fatalf("get key: %d %+v", st, got)
	}
	var list []adminKeyLimits
	if st := adminCall(t, "GET", keys, "", &list); st != 200 || len(list) != 1 || list[0].Cap == nil || *list[0].Left != *got.Left {
		t.Fatalf("list keys: %d %+v", st, list)
	}

	for _, c := range []struct {
		name, method, path, body string
		want                     int
		says                     string
	}{
		{"a cap finer than a nano", "POST", keys, `{"cap":"1.0000000001"}`, 400, "9 decimal places"},
		{"a cap as a number", "POST", keys, `{"cap":5}`, 400, "decimal string"},
		{"a negative cap", "POST", keys, `{"cap":"-1"}`, 400, "cap"},
		{"an unknown period", "POST", keys, `{"cap":"1","period":"fortnight"}`, 400, "use day, week, month or never"},
		{"a period without a cap", "POST", keys, `{"period":"day"}`, 400, "give a cap too"},
		{"a model outside the catalogue", "POST", keys, `{"models":["gpt-5"]}`, 400, "gpt-5 is not a model the plan offers"},
		{"an empty model list", "POST", keys, `{"models":[]}`, 400, "name at least one model"},
		{"rpm above the plan's", "POST", keys, `{"rpm":11}`, 400, "at most 10 requests a minute"},
		{"concurrency above the plan's", "POST", keys, `{"concurrency":51}`, 400, "at most 50 requests at once"},
		{"an expiry in the past", "POST", keys, `{"expires_at":"2020-01-01"}`, 400, "in the future"},
		{"an expiry that is no time", "POST", keys, `{"expires_at":"tomorrow"}`, 400, "RFC 3339"},
		{"an unknown field", "PATCH", "/modelgate/keys/" + k.ID, `{"colour":"red"}`, 400, "colour"},
		{"a label change", "PATCH", "/modelgate/keys/" + k.ID, `{"label":"x"}`, 400, "label"},
		{"rpm above the plan's, changed", "PATCH", "/modelgate/keys/" + k.ID, `{"rpm":11}`, 400, "at most 10"},
		{"an unknown key", "PATCH", "/modelgate/keys/key_nope", `{"rpm":1}`, 404, "not found"},
		{"an unknown key read", "GET", "/modelgate/keys/key_nope", "", 404, "not found"},
		{"a replacement", "PUT", "/modelgate/keys/" + k.ID, `{}`, 405, "PATCH"},
	} {
		t.Run(c.name, func(t *testing.T) {
			st, raw := adminRaw(t, c.method, c.path, c.body)
			if st != c.want || !strings.Contains(raw, c.says) {
				t.Fatalf("%d %s; want %d saying %q", st, raw, c.want, c.says)
			}
		})
	}

	// a change: the fields sent change, the others stay; null clears
	got = adminKeyLimits{}
	if st := adminCall(t, "PATCH", "/modelgate/keys/"+k.ID, `{"cap":"0.000001","models":null}`, &got); st != 200 ||
		*got.Cap != 1000 || got.Period != "day" || got.Models != nil || got.RPM != 5 || *got.Left != 0 {
		t.Fatalf("patch: %d %+v", st, got)
	}
	// the lowered cap refuses the next request
	if r := g.generate("openai", testModel, "hello", false, k.Secret); r.status != 403 || !strings.Contains(r.body, "spend cap of 0.000001000 per day") {
		t.Fatalf("a request beyond the cap: %d %s", r.status, r.body)
	}
	got = adminKeyLimits{}
	if st := adminCall(t, "PATCH", "/modelgate/keys/"+k.ID, `{"cap":null,"expires_at":null,"rpm":null,"concurrency":0}`, &got); st != 200 ||
		got.Cap != nil || got.Period != "" || got.Left != nil || got.ResetsAt != nil || got.ExpiresAt != nil || got.RPM != 0 || got.Concurrency != 0 {
		t.Fatalf("patch clearing: %d %+v", st, got)
	}
	if r := g.generate("openai", testModel, "hello", false, k.Secret); r.status != 200 {
		t.Fatalf("without a cap: %d %s", r.status, r.body)
	}
	if st := adminCall(t, "DELETE", "/modelgate/keys/"+k.ID, "", nil); st != 204 {
		t.Fatal(st)
	}
	if st, raw := adminRaw(t, "PATCH", "/modelgate/keys/"+k.ID, `{"rpm":1}`); st != 400 || !strings.Contains(raw, "deleted") {
		t.Fatalf("a deleted key's change: %d %s", st, raw)
	}
	g.audit()
}

// adminRaw sends a request to the admin API and returns its status and body.
func adminRaw(t *testing.T, method, path, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, adminAddr+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	return resp.StatusCode, readAllString(resp.Body)
}
