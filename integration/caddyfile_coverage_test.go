package integration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
)

// caddyfileDirectives is every directive and subdirective the Caddyfile
// accepts (docs/caddyfile.md), as a path of names from the global option
// or the handler directive down: "modelgate/provider/health_check/expect".
var caddyfileDirectives = []string{
	"modelgate",
	"modelgate/ledger",
	"modelgate/ledger/poll_interval",
	"modelgate/ledger/busy_timeout",
	"modelgate/ledger/lease",
	"modelgate/ledger/max_conns",
	"modelgate/redis",
	"modelgate/redis/slot_lease",
	"modelgate/block_countries",
	"modelgate/block_countries/geoip_db",
	"modelgate/currency",
	"modelgate/min_output",
	"modelgate/max_request_body",
	"modelgate/max_image_spool",
	"modelgate/max_attempts",
	"modelgate/keepalive_interval",
	"modelgate/health_flush_interval",
	"modelgate/health_scope",
	"modelgate/public_url",
	"modelgate/allow_remote_unauthenticated_admin",
	"modelgate/payments",
	"modelgate/payments/secret_key",
	"modelgate/payments/webhook_secret",
	"modelgate/payments/currency",
	"modelgate/payments/min",
	"modelgate/payments/api_base",
	"modelgate/alerts",
	"modelgate/alerts/interval",
	"modelgate/alerts/reload_interval",
	"modelgate/alerts/retry_base",
	"modelgate/alerts/allow_private_webhooks",
	"modelgate/smtp",
	"modelgate/smtp/host",
	"modelgate/smtp/port",
	"modelgate/smtp/username",
	"modelgate/smtp/password",
	"modelgate/smtp/from",
	"modelgate/smtp/tls",
	"modelgate/smtp/timeout",
	"modelgate/provider",
	"modelgate/provider/format",
	"modelgate/provider/base_url",
	"modelgate/provider/keys",
	"modelgate/provider/key",
	"modelgate/provider/anthropic_version",
	"modelgate/provider/anthropic_beta",
	"modelgate/provider/chat_only",
	"modelgate/provider/connect_timeout",
	"modelgate/provider/first_byte_timeout",
	"modelgate/provider/response_timeout",
	"modelgate/provider/drain_timeout",
	"modelgate/provider/on_hangup",
	"modelgate/provider/failure_cooldown",
	"modelgate/provider/health_check",
	"modelgate/provider/health_check/interval",
	"modelgate/provider/health_check/request",
	"modelgate/provider/health_check/expect",
	"modelgate/provider/health_check/timeout",
	"modelgate/provider/breaker",
	"modelgate/provider/breaker/failures",
	"modelgate/provider/breaker/window",
	"modelgate/provider/breaker/cooldown",
	"modelgate/model",
	"modelgate/model/route",
	"modelgate/model/price",
	"modelgate/model/owned_by",
	"modelgate/model/max_output",
	"modelgate/model/features",
	"modelgate/model/allow_stateful",
	"modelgate/plan",
	"modelgate/plan/models",
	"modelgate/plan/tier",
	"modelgate/plan/rpm",
	"modelgate/plan/concurrency",
	"modelgate/plan/discount",
	"modelgate/default_plan",
	"modelgate_api",
	"modelgate_console",
	"modelgate_console/title",
	"modelgate_console/signup",
	"modelgate_console/session_lifetime",
	"modelgate_status",
	"modelgate_status/title",
	"modelgate_lookup",
	"modelgate_lookup/title",
	"modelgate_mock",
	"modelgate_mock/keys",
	"modelgate_mock/latency",
	"modelgate_mock/token_delay",
	"modelgate_mock/reply_tokens",
}

// TestCaddyfileGoldensCoverEveryDirective: each directive and subdirective
// of caddyfileDirectives appears in at least one golden of testdata/adapt,
// so that TestCaddyfileAdapt pins what each adapts to.
func TestCaddyfileGoldensCoverEveryDirective(t *testing.T) {
	files, err := filepath.Glob("testdata/adapt/*.caddyfiletest")
	if err != nil || len(files) == 0 {
		t.Fatalf("no golden files: %v", err)
	}
	used := map[string]bool{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		in, _, _ := strings.Cut(string(data), "----------")
		tokens, err := caddyfile.Tokenize([]byte(in), f)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, path := range directivePaths(tokens) {
			used[path] = true
		}
	}
	for _, d := range caddyfileDirectives {
		if !used[d] {
			t.Errorf("no golden in testdata/adapt uses %s", d)
		}
	}
}

// directivePaths lists the directive of each line of a Caddyfile as a path
// of the directives whose blocks hold it, without the site address or the
// global options block that open the outermost blocks.
func directivePaths(tokens []caddyfile.Token) []string {
	var paths, open []string // open: the directive of each open block
	head, line := "", -1     // the first token of the current line
	for _, tok := range tokens {
		if tok.Line != line {
			line, head = tok.Line, tok.Text
			if len(open) > 0 && tok.Text != "{" && tok.Text != "}" {
				paths = append(paths, strings.Join(append(open[1:len(open):len(open)], head), "/"))
			}
		}
		switch tok.Text {
		case "{":
			open = append(open, head)
		case "}":
			open = open[:len(open)-1]
		}
	}
	return paths
}
