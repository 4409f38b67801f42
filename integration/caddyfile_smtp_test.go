package integration

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
)

// TestCaddyfileSMTP: the smtp block adapts to the app's smtp object, with
// the password kept as its placeholder; bad blocks are clear errors; a
// gateway that mails needs public_url, and a password placeholder that is
// not set stops it, naming the placeholder only.
// provisionCaddyfile adapts a configuration whose modelgate block has
// body (beside a ledger of its own) and provisions it as `caddy validate`
// does, returning what provisioning refused.
func provisionCaddyfile(t *testing.T, body string) error {
	t.Helper()
	db := filepath.Join(t.TempDir(), "ledger.db")
	in := "{\n\tmodelgate {\n\t\tledger sqlite " + db + "\n" + body + "\t}\n}\n:8080 {\n\tmodelgate_api\n}\n"
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

func TestCaddyfileSMTP(t *testing.T) {
	const head = "{\n\tmodelgate {\n"
	tail := "\t}\n}\n:8080 {\n\tmodelgate_api\n}\n"
	good := "\t\tpublic_url https://api.example.com\n\t\tsmtp {\n\t\t\thost smtp.example.com\n\t\t\tport 2525\n\t\t\tusername mailer\n\t\t\tpassword {env.MG_TEST_SMTP_PASSWORD}\n\t\t\tfrom \"Acme AI <no-reply@example.com>\"\n\t\t\ttls starttls\n\t\t\ttimeout 5s\n\t\t}\n"
	out, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(head+good+tail), nil)
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		Apps struct {
			Modelgate struct {
				SMTP map[string]any `json:"smtp"`
			} `json:"modelgate"`
		} `json:"apps"`
	}
	if err := json.Unmarshal(out, &cfg); err != nil {
		t.Fatal(err)
	}
	s := cfg.Apps.Modelgate.SMTP
	if s["host"] != "smtp.example.com" || s["port"] != 2525.0 || s["username"] != "mailer" || s["password"] != "{env.MG_TEST_SMTP_PASSWORD}" ||
		s["from"] != "Acme AI <no-reply@example.com>" || s["tls"] != "starttls" || s["timeout"] != 5e9 {
		t.Fatalf("smtp adapted to %v", s)
	}

	for name, tc := range map[string]struct{ body, want string }{
		"no host":          {"\t\tsmtp {\n\t\t\tfrom a@example.com\n\t\t}\n", "smtp: host and from are required"},
		"no from":          {"\t\tsmtp {\n\t\t\thost h\n\t\t}\n", "smtp: host and from are required"},
		"bare password":    {"\t\tsmtp {\n\t\t\thost h\n\t\t\tfrom a@example.com\n\t\t\tpassword hunter22\n\t\t}\n", "write the password as a placeholder"},
		"bad tls":          {"\t\tsmtp {\n\t\t\thost h\n\t\t\tfrom a@example.com\n\t\t\ttls ssl\n\t\t}\n", `smtp: tls "ssl": want starttls, tls or none`},
		"port too big":     {"\t\tsmtp {\n\t\t\thost h\n\t\t\tfrom a@example.com\n\t\t\tport 70000\n\t\t}\n", "smtp: port 70000: want 1 to 65535"},
		"unknown option":   {"\t\tsmtp {\n\t\t\thost h\n\t\t\tfrom a@example.com\n\t\t\trelay yes\n\t\t}\n", `smtp: unrecognized option "relay"`},
		"twice an option":  {"\t\tsmtp {\n\t\t\thost h\n\t\t\thost i\n\t\t\tfrom a@example.com\n\t\t}\n", "smtp: host already specified"},
		"an argument":      {"\t\tsmtp h {\n\t\t}\n", "usage: smtp {"},
		"two smtp options": {"\t\tsmtp {\n\t\t\thost h\n\t\t\tfrom a@example.com\n\t\t}\n\t\tsmtp {\n\t\t\thost h\n\t\t\tfrom a@example.com\n\t\t}\n", "smtp"},
	} {
		t.Run(name, func(t *testing.T) {
			err := adaptErr(t, head+tc.body+tail)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error = %v\nwant it to contain %q", err, tc.want)
			}
		})
	}

	// provisioning (caddy.Validate provisions the modules)
	validate := func(body string) error {
		t.Helper()
		return provisionCaddyfile(t, body)
	}
	t.Setenv("MG_TEST_SMTP_PASSWORD", "")
	if err := validate(strings.Replace(good, "\t\tpublic_url https://api.example.com\n", "", 1)); err == nil || !strings.Contains(err.Error(), "need public_url") {
		t.Fatalf("smtp without public_url: %v", err)
	}
	if err := validate(good); err == nil || !strings.Contains(err.Error(), "MG_TEST_SMTP_PASSWORD") {
		t.Fatalf("an unset password placeholder: %v", err)
	}
	t.Setenv("MG_TEST_SMTP_PASSWORD", "s3cret-smtp-pw")
	if err := validate(good); err != nil {
		t.Fatalf("a good smtp block: %v", err)
	}
}
