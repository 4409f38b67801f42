package integration

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
)

// TestPaymentsPlaceholders: a payments block whose secret placeholder is
// unset or empty stops provisioning (what `caddy validate` runs) with an
// error that names the placeholder and the option, never a value; set,
// it validates.
func TestPaymentsPlaceholders(t *testing.T) {
	validate := func() error {
		t.Helper()
		db := filepath.Join(t.TempDir(), "ledger.db")
		in := "{\n\tmodelgate {\n\t\tledger sqlite " + db + "\n\t\tpublic_url https://api.example.com\n" +
			"\t\tpayments stripe {\n\t\t\tsecret_key {env.MG_TEST_STRIPE_KEY}\n\t\t\twebhook_secret {env.MG_TEST_STRIPE_WEBHOOK}\n\t\t}\n" +
			"\t}\n}\n:8080 {\n\tmodelgate_api\n}\n"
		out, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(in), nil)
		if err != nil {
			t.Fatal(err)
		}
		var c caddy.Config
		if err := json.Unmarshal(out, &c); err != nil {
			t.Fatal(err)
		}
		return caddy.Validate(&c)
	}
	t.Setenv("MG_TEST_STRIPE_KEY", "sk_test_value")
	t.Setenv("MG_TEST_STRIPE_WEBHOOK", "")
	err := validate()
	if err == nil || !strings.Contains(err.Error(), "payments: webhook_secret") || !strings.Contains(err.Error(), "MG_TEST_STRIPE_WEBHOOK") ||
		strings.Contains(err.Error(), "sk_test_value") {
		t.Fatalf("an empty webhook secret: %v", err)
	}
	t.Setenv("MG_TEST_STRIPE_WEBHOOK", "whsec_value")
	if err := validate(); err != nil {
		t.Fatalf("both set: %v", err)
	}
}
