package mock

import (
	"net/http"
	"strconv"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/modelgate/modelgate/mockupstream"
)

func init() {
	caddy.RegisterModule(MockUpstream{})
	httpcaddyfile.RegisterHandlerDirective("modelgate_mock", parseMockHandler)
	httpcaddyfile.RegisterDirectiveOrder("modelgate_mock", httpcaddyfile.Before, "respond")
}

// MockUpstream serves a fake LLM provider (package mockupstream) speaking the
// vendors' real wire formats, so a configuration can run without network
// access and tests can inject latency and failures. Never expose it publicly.
type MockUpstream struct {
	// Keys are the upstream keys it accepts; empty accepts any.
	Keys []string `json:"keys,omitempty"`
	// Latency is the delay before response headers.
	Latency caddy.Duration `json:"latency,omitempty"`
	// TokenDelay is the delay between streamed tokens.
	TokenDelay caddy.Duration `json:"token_delay,omitempty"`
	// ReplyTokens is the default reply length. Default: 12.
	ReplyTokens int `json:"reply_tokens,omitempty"`

	server *mockupstream.Server
}

// CaddyModule returns the Caddy module information.
func (MockUpstream) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "http.handlers.modelgate_mock",
		New: func() caddy.Module { return new(MockUpstream) },
	}
}

// Provision starts the mock.
func (m *MockUpstream) Provision(ctx caddy.Context) error {
	repl := caddy.NewReplacer()
	keys := make([]string, 0, len(m.Keys))
	for _, k := range m.Keys {
		v, err := repl.ReplaceOrErr(k, true, true)
		if err != nil {
			return err
		}
		keys = append(keys, v)
	}
	cfg := mockupstream.Config{
		Keys:        keys,
		Latency:     time.Duration(m.Latency),
		TokenDelay:  time.Duration(m.TokenDelay),
		ReplyTokens: m.ReplyTokens,
	}
	if err := cfg.Validate(); err != nil {
		return err
	}
	m.server = mockupstream.New(cfg)
	return nil
}

// Cleanup ends requests the mock is holding open (hang faults).
func (m *MockUpstream) Cleanup() error {
	if m.server != nil {
		m.server.Close()
	}
	return nil
}

// ServeHTTP answers as the fake provider.
func (m *MockUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request, _ caddyhttp.Handler) error {
	m.server.ServeHTTP(w, r)
	return nil
}

// parseMockHandler sets up the modelgate_mock handler.
func parseMockHandler(h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
	m := new(MockUpstream)
	err := m.UnmarshalCaddyfile(h.Dispenser)
	return m, err
}

// UnmarshalCaddyfile parses:
//
//	modelgate_mock {
//		keys <key...>
//		latency <duration>
//		token_delay <duration>
//		reply_tokens <n>
//	}
func (m *MockUpstream) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // the directive name
	if d.NextArg() {
		return d.ArgErr()
	}
	seen := map[string]bool{}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		opt := d.Val()
		if seen[opt] {
			return d.Errf("%s already specified", opt)
		}
		seen[opt] = true
		switch opt {
		case "keys":
			m.Keys = d.RemainingArgs()
			if len(m.Keys) == 0 {
				return d.ArgErr()
			}
		case "latency", "token_delay":
			var s string
			if !d.AllArgs(&s) {
				return d.ArgErr()
			}
			dur, err := caddy.ParseDuration(s)
			if err != nil || dur < 0 {
				return d.Errf("%s %q: want a duration such as 20ms", opt, s)
			}
			if opt == "latency" {
				m.Latency = caddy.Duration(dur)
			} else {
				m.TokenDelay = caddy.Duration(dur)
			}
		case "reply_tokens":
			var s string
			if !d.AllArgs(&s) {
				return d.ArgErr()
			}
			n, err := strconv.Atoi(s)
			if err != nil || n < 1 {
				return d.Errf("reply_tokens %q: want a positive integer", s)
			}
			m.ReplyTokens = n
		default:
			return d.Errf("unrecognized modelgate_mock option %q", opt)
		}
	}
	return nil
}

// Interface guards
var (
	_ caddy.Provisioner           = (*MockUpstream)(nil)
	_ caddy.CleanerUpper          = (*MockUpstream)(nil)
	_ caddyhttp.MiddlewareHandler = (*MockUpstream)(nil)
	_ caddyfile.Unmarshaler       = (*MockUpstream)(nil)
)
