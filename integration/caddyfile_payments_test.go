package integration

import (
	"strings"
	"testing"
)

// TestPaymentsPlaceholders: a payments block whose secret placeholder is
// unset or empty stops provisioning (what `caddy validate` runs) with an
// error that names the placeholder and the option, never a value; set,
// it validates.
func TestPaymentsPlaceholders(t *testing.T) {
	const body = "\t\tpublic_url https://api.example.com\n" +
		"\t\tpayments stripe {\n\t\t\tsecret_key {env.MG_TEST_STRIPE_KEY}\n\t\t\twebhook_secret {env.MG_TEST_STRIPE_WEBHOOK}\n\t\t}\n"
	t.Setenv("MG_TEST_STRIPE_KEY", "sk_test_value")
	t.Setenv("MG_TEST_STRIPE_WEBHOOK", "")
	err := provisionCaddyfile(t, body)
	if err == nil || !strings.Contains(err.Error(), "payments: webhook_secret") || !strings.Contains(err.Error(), "MG_TEST_STRIPE_WEBHOOK") ||
		strings.Contains(err.Error(), "sk_test_value") {
		t.Fatalf("an empty webhook secret: %v", err)
	}
	t.Setenv("MG_TEST_STRIPE_WEBHOOK", "whsec_value")
	if err := provisionCaddyfile(t, body); err != nil {
		t.Fatalf("both set: %v", err)
	}
}
