package integration

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddytest"

	"github.com/modelgate/modelgate/gateway"
	"github.com/modelgate/modelgate/gateway/mock"
	"github.com/modelgate/modelgate/gateway/status"
)

// TestCaddyfileAdapt compares each testdata/adapt/*.caddyfiletest: a
// Caddyfile, a line of dashes, and the JSON it must adapt to.
func TestCaddyfileAdapt(t *testing.T) {
	files, err := filepath.Glob("testdata/adapt/*.caddyfiletest")
	if err != nil || len(files) == 0 {
		t.Fatalf("no golden files: %v", err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			in, want, ok := strings.Cut(string(data), "----------")
			if !ok {
				t.Fatal("no ---------- separator")
			}
			if !caddytest.CompareAdapt(t, f, strings.TrimSpace(in)+"\n", "caddyfile", strings.TrimSpace(want)) {
				t.Errorf("%s does not adapt to its JSON", f)
			}
		})
	}
}

// adaptErr adapts a Caddyfile and returns the error.
func adaptErr(t *testing.T, in string) error {
	t.Helper()
	_, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(in), nil)
	return err
}

func TestCaddyfileErrors(t *testing.T) {
	const head = "{\n\tmodelgate {\n"                                                                                   // the global option starts on line 2
	provider := "\t\tprovider p {\n\t\t\tformat openai\n\t\t\tbase_url http://127.0.0.1:1\n\t\t\tkeys {env.K}\n\t\t}\n" // lines 3-7
	tail := "\t}\n}\n:8080 {\n\tmodelgate_api\n}\n"
	for name, tc := range map[string]struct{ body, want string }{
		"unknown provider in a route": {
			provider + "\t\tmodel m {\n\t\t\troute nope x\n\t\t\tprice input 1 output 2\n\t\t}\n",
			`model m: route to unknown provider "nope" (the providers are p), at Caddyfile:9`},
		"duplicate model": {
			provider + "\t\tmodel m {\n\t\t\troute p x\n\t\t\tprice input 1 output 2\n\t\t}\n\t\tmodel m {\n\t\t\troute p y\n\t\t\tprice input 1 output 2\n\t\t}\n",
			"duplicate model m (first defined at line 8), at Caddyfile:12"},
		"missing price": {
			provider + "\t\tmodel m {\n\t\t\troute p x\n\t\t}\n",
			"model m: missing price (a model without a price cannot be served), at Caddyfile:8"},
		"price with output only": {
			provider + "\t\tmodel m {\n\t\t\troute p x\n\t\t\tprice output 2\n\t\t}\n",
			"model m: price needs both input and output, at Caddyfile:10"},
		"price not whole nanos": {
			provider + "\t\tmodel m {\n\t\t\troute p x\n\t\t\tprice input 0.0375 output 2\n\t\t}\n",
			"model m: price input 0.0375:"},
		"price not a number": {
			provider + "\t\tmodel m {\n\t\t\troute p x\n\t\t\tprice input cheap output 2\n\t\t}\n",
			"model m: price input cheap:"},
		"payments without secrets": {
			provider + "\t\tpayments stripe {\n\t\t\tcurrency usd\n\t\t}\n",
			"secret_key and webhook_secret are required"},
		"payments unknown provider": {
			provider + "\t\tpayments paypal {\n\t\t}\n",
			`unknown provider "paypal"`},
		"payments bad minimum": {
			provider + "\t\tpayments stripe {\n\t\t\tmin five\n\t\t}\n",
			`min "five"`},
		"unknown price kind": {
			provider + "\t\tmodel m {\n\t\t\troute p x\n\t\t\tprice input 1 output 2 video 3\n\t\t}\n",
			`unknown price "video"`},
		"unknown format": {
			"\t\tprovider p {\n\t\t\tformat grpc\n\t\t\tbase_url http://x\n\t\t\tkeys k\n\t\t}\n",
			`provider p: unknown format "grpc" (want openai, anthropic or gemini), at Caddyfile:4`},
		"bad on_hangup": {
			"\t\tprovider p {\n\t\t\tformat openai\n\t\t\tbase_url http://x\n\t\t\tkeys k\n\t\t\ton_hangup wait\n\t\t}\n",
			`provider p: on_hangup "wait": want stop or drain, at Caddyfile:7`},
		"provider without keys": {
			"\t\tprovider p {\n\t\t\tformat openai\n\t\t\tbase_url http://x\n\t\t}\n",
			"provider p: missing keys, at Caddyfile:3"},
		"duplicate provider": {
			provider + provider,
			"provider p defined twice, at Caddyfile:12"},
		"unknown option": {
			"\t\tcolour red\n",
			`unrecognized modelgate option "colour", at Caddyfile:3`},
		"unknown model option": {
			provider + "\t\tmodel m {\n\t\t\troute p x\n\t\t\tprice input 1 output 2\n\t\t\tcolour red\n\t\t}\n",
			`model m: unrecognized option "colour", at Caddyfile:11`},
		"route without upstream model": {
			provider + "\t\tmodel m {\n\t\t\troute p\n\t\t\tprice input 1 output 2\n\t\t}\n",
			"route <provider> <upstream_model>"},
		"bad max_output": {
			provider + "\t\tmodel m {\n\t\t\troute p x\n\t\t\tprice input 1 output 2\n\t\t\tmax_output 0\n\t\t}\n",
			`max_output "0": want an integer of at least 1, at Caddyfile:11`},
		"bad discount": {
			"\t\tplan p {\n\t\t\tdiscount 15\n\t\t}\n",
			"plan p: discount 15:"},
		"discount too big": {
			"\t\tplan p {\n\t\t\tdiscount 100%\n\t\t}\n",
			"plan p: discount 100%:"},
		"plan model unknown": {
			provider + "\t\tmodel gpt-4o {\n\t\t\troute p x\n\t\t\tprice input 1 output 2\n\t\t}\n\t\tplan a {\n\t\t\tmodels gpt-4\n\t\t}\n",
			"plan a: models: no model gpt-4 (the models are gpt-4o; did you mean gpt-4o?), at Caddyfile:12"},
		"plan model pattern matches nothing": {
			provider + "\t\tmodel gpt-4o {\n\t\t\troute p x\n\t\t\tprice input 1 output 2\n\t\t}\n\t\tplan a {\n\t\t\tmodels claude-*\n\t\t}\n",
			"plan a: models: claude-* matches no model, at Caddyfile:12"},
		"plan models without any": {
			"\t\tplan a {\n\t\t\tmodels\n\t\t}\n",
			"wrong argument count or unexpected line ending after 'models', at Caddyfile:4"},
		"tier without a discount": {
			"\t\tplan a {\n\t\t\ttier 1000\n\t\t}\n",
			"wrong argument count or unexpected line ending after '1000', at Caddyfile:4"},
		"tier bad amount": {
			"\t\tplan a {\n\t\t\ttier 1,000 5%\n\t\t}\n",
			"plan a: tier 1,000:"},
		"tiers out of order": {
			"\t\tplan a {\n\t\t\ttier 1000 5%\n\t\t\ttier 100 10%\n\t\t}\n",
			"plan a: tier 100: tiers must be in ascending order of spend, at Caddyfile:3"},
		"tier and discount at 100%": {
			"\t\tplan a {\n\t\t\tdiscount 60%\n\t\t\ttier 1000 40%\n\t\t}\n",
			"plan a: tier 1000: its discount and the plan's (40% and 60%) must add up to less than 100%, at Caddyfile:3"},
		"negative rpm": {
			"\t\tplan p {\n\t\t\trpm -1\n\t\t}\n",
			`rpm "-1": want an integer of at least 0, at Caddyfile:4`},
		"unknown default plan": {
			"\t\tplan a {\n\t\t\trpm 1\n\t\t}\n\t\tdefault_plan b\n",
			"default_plan b: no such plan (the plans are a; did you mean a?), at Caddyfile:6"},
		"duplicate plan": {
			"\t\tplan a {\n\t\t\trpm 1\n\t\t}\n\t\tplan a {\n\t\t\trpm 2\n\t\t}\n",
			"plan a defined twice, at Caddyfile:6"},
		"ledger driver": {
			"\t\tledger mysql x\n",
			`unknown ledger driver "mysql" (want sqlite or postgres), at Caddyfile:3`},
		"ledger postgres without a dsn": {
			"\t\tledger postgres\n",
			`usage: ledger postgres <dsn>`},
		"lease on sqlite": {
			"\t\tledger sqlite x.db {\n\t\t\tlease 5s\n\t\t}\n",
			`ledger: lease applies to a postgres ledger only`},
		"bad key weight": {
			"\t\tprovider p {\n\t\t\tformat openai\n\t\t\tbase_url http://x\n\t\t\tkey k weight 0\n\t\t}\n",
			`provider p: key weight "0": want a positive integer, at Caddyfile:6`},
		"bad health check": {
			"\t\tprovider p {\n\t\t\tformat openai\n\t\t\tbase_url http://x\n\t\t\tkeys k\n\t\t\thealth_check {\n\t\t\t\tcolour red\n\t\t\t}\n\t\t}\n",
			`provider p: health_check: unrecognized option "colour", at Caddyfile:8`},
		"bad probe request": {
			"\t\tprovider p {\n\t\t\tformat openai\n\t\t\tbase_url http://x\n\t\t\tkeys k\n\t\t\thealth_check {\n\t\t\t\trequest DELETE /x\n\t\t\t}\n\t\t}\n",
			"usage: request GET|POST /path [body], at Caddyfile:8"},
		"bad timeout": {
			"\t\tprovider p {\n\t\t\tformat openai\n\t\t\tbase_url http://x\n\t\t\tkeys k\n\t\t\tfirst_byte_timeout soon\n\t\t}\n",
			`first_byte_timeout "soon": want a positive duration such as 30s, at Caddyfile:7`},
		"bad breaker": {
			"\t\tprovider p {\n\t\t\tformat openai\n\t\t\tbase_url http://x\n\t\t\tkeys k\n\t\t\tbreaker {\n\t\t\t\tfailures 0\n\t\t\t}\n\t\t}\n",
			`failures "0": want an integer of at least 1, at Caddyfile:8`},
		"max_image_spool not a size": {
			"\t\tmax_image_spool lots\n",
			`max_image_spool "lots": want a size such as 256MiB, at Caddyfile:3`},
		"max_attempts zero": {
			"\t\tmax_attempts 0\n",
			`max_attempts "0": want an integer of at least 1, at Caddyfile:3`},
		"ledger option": {
			"\t\tledger sqlite a.db {\n\t\t\tpoll_every 1s\n\t\t}\n",
			`ledger: unrecognized option "poll_every", at Caddyfile:4`},
		"redis url": {
			"\t\tredis http://127.0.0.1:6379\n",
			"redis http://127.0.0.1:6379: redis: invalid URL scheme: http, at Caddyfile:3"},
		"redis password not echoed": {
			"\t\tredis redis://:hunter2@127.0.0.1:6379/x\n",
			"redis redis://…@127.0.0.1:6379/x:"},
		"redis option": {
			"\t\tredis redis://127.0.0.1:6379 {\n\t\t\tlease 1s\n\t\t}\n",
			`redis: unrecognized option "lease", at Caddyfile:4`},
		"bad slot lease": {
			"\t\tredis redis://127.0.0.1:6379 {\n\t\t\tslot_lease never\n\t\t}\n",
			`slot_lease "never": want a positive duration such as 30s, at Caddyfile:4`},
		"block_countries without countries": {
			"\t\tblock_countries {\n\t\t\tgeoip_db x.mmdb\n\t\t}\n",
			"usage: block_countries <CC...> { geoip_db <path> }, at Caddyfile:3"},
		"block_countries bad code": {
			"\t\tblock_countries CHN {\n\t\t\tgeoip_db x.mmdb\n\t\t}\n",
			`block_countries: "CHN" is not a two-letter country code (ISO 3166-1), at Caddyfile:3`},
		"block_countries without database": {
			"\t\tblock_countries CN\n",
			"block_countries: missing geoip_db (a MaxMind-format country database), at Caddyfile:3"},
		"ledger twice": {
			"\t\tledger sqlite a.db\n\t\tledger sqlite b.db\n",
			"ledger already specified, at Caddyfile:4"},
		// hosted tools' prices, the stateful features a model allows, anthropic_beta, public_url, the admin opt-in
		"hosted price not whole nanos": {
			provider + "\t\tmodel m {\n\t\t\troute p x\n\t\t\tprice input 1 output 2 web_search 0.0000001\n\t\t}\n",
			"model m: price web_search 0.0000001: ledger: price per 1,000 uses \"0.0000001\" is not a whole number of nanos per use"},
		"hosted price negative": {
			provider + "\t\tmodel m {\n\t\t\troute p x\n\t\t\tprice input 1 output 2 image_generation -1\n\t\t}\n",
			"model m: price image_generation -1:"},
		"hosted price twice": {
			provider + "\t\tmodel m {\n\t\t\troute p x\n\t\t\tprice input 1 output 2 web_fetch 0 web_fetch 1\n\t\t}\n",
			"model m: price web_fetch given twice, at Caddyfile:10"},
		"unknown state": {
			provider + "\t\tmodel m {\n\t\t\troute p x\n\t\t\tprice input 1 output 2\n\t\t\tallow_stateful store background\n\t\t}\n",
			`model m: allow_stateful: unknown state "background" (want store, conversation, prompt, files, file_search, code_execution, mcp, cached_content), at Caddyfile:11`},
		"allow_stateful without states": {
			provider + "\t\tmodel m {\n\t\t\troute p x\n\t\t\tprice input 1 output 2\n\t\t\tallow_stateful\n\t\t}\n",
			"wrong argument count or unexpected line ending after 'allow_stateful', at Caddyfile:11"},
		"anthropic_beta on an openai provider": {
			"\t\tprovider p {\n\t\t\tformat openai\n\t\t\tbase_url http://x\n\t\t\tkeys k\n\t\t\tanthropic_beta default\n\t\t}\n",
			"provider p: anthropic_beta applies to anthropic providers only, at Caddyfile:3"},
		"anthropic_beta none with others": {
			"\t\tprovider p {\n\t\t\tformat anthropic\n\t\t\tbase_url http://x\n\t\t\tkeys k\n\t\t\tanthropic_beta none context-1m-2025-08-07\n\t\t}\n",
			"provider p: anthropic_beta: none excludes other values, at Caddyfile:7"},
		"anthropic_beta comma list": {
			"\t\tprovider p {\n\t\t\tformat anthropic\n\t\t\tbase_url http://x\n\t\t\tkeys k\n\t\t\tanthropic_beta a,b\n\t\t}\n",
			`provider p: anthropic_beta "a,b": want one beta name per argument, at Caddyfile:7`},
		"public_url without a host": {
			"\t\tpublic_url /console\n",
			`public_url "/console": want scheme://host[:port][/path], such as https://api.example.com, at Caddyfile:3`},
		"public_url with a query": {
			"\t\tpublic_url https://api.example.com/?x=1\n",
			`public_url "https://api.example.com/?x=1": want scheme://host[:port][/path]`},
		"allow_remote_unauthenticated_admin takes nothing": {
			"\t\tallow_remote_unauthenticated_admin yes\n",
			"wrong argument count or unexpected line ending after 'yes', at Caddyfile:3"},
	} {
		t.Run(name, func(t *testing.T) {
			err := adaptErr(t, head+tc.body+tail)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error = %v\nwant it to contain %q", err, tc.want)
			}
		})
	}
}

func TestCaddyfileSecondGlobalBlock(t *testing.T) {
	err := adaptErr(t, "{\n\tmodelgate {\n\t}\n\tmodelgate {\n\t}\n}\n")
	if err == nil || !strings.Contains(err.Error(), "only once") {
		t.Fatalf("error = %v", err)
	}
}

func TestAPIDirectiveTakesNoArguments(t *testing.T) {
	for _, in := range []string{"modelgate_api extra", "modelgate_api {\n\tfoo\n}"} {
		if err := new(gateway.APIHandler).UnmarshalCaddyfile(caddyfile.NewTestDispenser(in)); err == nil {
			t.Errorf("%q: want an error", in)
		}
	}
}

func TestStatusDirective(t *testing.T) {
	h := new(status.StatusHandler)
	if err := h.UnmarshalCaddyfile(caddyfile.NewTestDispenser("modelgate_status {\n\ttitle Acme AI status\n}")); err != nil || h.Title != "Acme AI status" {
		t.Fatalf("%+v %v", h, err)
	}
	for _, in := range []string{"modelgate_status x", "modelgate_status {\n\tcolour red\n}", "modelgate_status {\n\ttitle\n}"} {
		if err := new(status.StatusHandler).UnmarshalCaddyfile(caddyfile.NewTestDispenser(in)); err == nil {
			t.Errorf("%q: want an error", in)
		}
	}
}

func TestMockDirective(t *testing.T) {
	m := new(mock.MockUpstream)
	err := m.UnmarshalCaddyfile(caddyfile.NewTestDispenser("modelgate_mock {\n\tkeys a b\n\tlatency 5ms\n\ttoken_delay 1ms\n\treply_tokens 7\n}"))
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Keys) != 2 || m.Latency == 0 || m.ReplyTokens != 7 {
		t.Fatalf("parsed %+v", m)
	}
	for _, in := range []string{"modelgate_mock {\n\tlatency soon\n}", "modelgate_mock {\n\treply_tokens 0\n}", "modelgate_mock {\n\tcolour red\n}", "modelgate_mock x"} {
		if err := new(mock.MockUpstream).UnmarshalCaddyfile(caddyfile.NewTestDispenser(in)); err == nil {
			t.Errorf("%q: want an error", in)
		}
	}
}

// TestExampleAdapts keeps Caddyfile.example valid.
func TestExampleAdapts(t *testing.T) {
	data, err := os.ReadFile(exampleCaddyfile)
	if err != nil {
		t.Fatal(err)
	}
	if err := adaptErr(t, string(data)); err != nil {
		t.Fatal(err)
	}
}

// TestExampleTimeouts: Caddyfile.example sets the server timeouts that keep
// a slow client from holding a connection: request headers, the whole
// request body, idle connections; and no write timeout, which would cut
// long streams.
func TestExampleTimeouts(t *testing.T) {
	data, err := os.ReadFile(exampleCaddyfile)
	if err != nil {
		t.Fatal(err)
	}
	out, _, err := caddyconfig.GetAdapter("caddyfile").Adapt(data, nil)
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		Apps struct {
			HTTP struct {
				Servers map[string]map[string]any `json:"servers"`
			} `json:"http"`
		} `json:"apps"`
	}
	if err := json.Unmarshal(out, &cfg); err != nil {
		t.Fatal(err)
	}
	if len(cfg.Apps.HTTP.Servers) == 0 {
		t.Fatal("no servers")
	}
	for name, srv := range cfg.Apps.HTTP.Servers {
		for _, field := range []string{"read_header_timeout", "read_timeout", "idle_timeout"} {
			if d, ok := srv[field].(float64); !ok || d <= 0 {
				t.Errorf("server %s: %s not set", name, field)
			}
		}
		if _, ok := srv["write_timeout"]; ok {
			t.Errorf("server %s: a write timeout cuts long streams", name)
		}
	}
}
