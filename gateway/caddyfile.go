package gateway

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/dustin/go-humanize"
	"github.com/redis/go-redis/v9"

	"github.com/modelgate/modelgate/formats"
	"github.com/modelgate/modelgate/ledger"
	"github.com/modelgate/modelgate/mailer"
	"github.com/modelgate/modelgate/relay"
	"github.com/modelgate/modelgate/upstream"
)

func init() {
	httpcaddyfile.RegisterGlobalOption("modelgate", parseGlobalOption)
	httpcaddyfile.RegisterHandlerDirective("modelgate_api", parseAPIHandler)
	httpcaddyfile.RegisterDirectiveOrder("modelgate_api", httpcaddyfile.Before, "respond")
}

// parseGlobalOption sets up the modelgate app from the global option.
func parseGlobalOption(d *caddyfile.Dispenser, existingVal any) (any, error) {
	if existingVal != nil {
		return nil, d.Err("the modelgate global option may appear only once")
	}
	app := new(App)
	if err := app.UnmarshalCaddyfile(d); err != nil {
		return nil, err
	}
	return httpcaddyfile.App{Name: "modelgate", Value: caddyconfig.JSON(app, nil)}, nil
}

// pos is a place in a Caddyfile, kept to report a problem found later.
type pos struct {
	file string
	line int
}

func (p pos) errf(format string, args ...any) error {
	return fmt.Errorf("%s, at %s:%d", fmt.Sprintf(format, args...), p.file, p.line)
}

func here(d *caddyfile.Dispenser) pos { return pos{d.File(), d.Line()} }

// UnmarshalCaddyfile parses the global option:
//
//	modelgate {
//		ledger sqlite <path> [normal|full] [{
//			poll_interval <duration>
//			busy_timeout <duration>
//		}]
//		ledger postgres <dsn> [{
//			poll_interval <duration>
//			busy_timeout <duration>
//			lease <duration>
//			max_conns <n>
//		}]
//		redis <url> [{
//			slot_lease <duration>
//		}]
//		block_countries <CC...> {
//			geoip_db <path>
//		}
//		smtp {
//			host <host>
//			port <port>
//			username <name>
//			password <password>
//			from <address>
//			tls starttls|tls|none
//			timeout <duration>
//		}
//		alerts {
//			interval <duration>
//			reload_interval <duration>
//			retry_base <duration>
//			allow_private_webhooks
//		}
//		currency <code>
//		min_output <tokens>
//		max_request_body <size>
//		max_image_spool <size>
//		max_attempts <n>
//		keepalive_interval <duration>
//		health_flush_interval <duration>
//		health_scope <name>
//		provider <name> {
//			format openai|anthropic|gemini
//			base_url <url>
//			keys <key...>
//			key <key> [weight <n>]
//			anthropic_version <date>
//			anthropic_beta default|none|<beta...>
//			chat_only
//			connect_timeout <duration>
//			first_byte_timeout <duration>
//			response_timeout <duration>
//			drain_timeout <duration>
//			on_hangup stop|drain
//			failure_cooldown <duration>
//			health_check off | {
//				interval <duration>
//				request GET|POST <path> [<body>]
//				expect <status>
//				timeout <duration>
//			}
//			breaker {
//				failures <n>
//				window <duration>
//				cooldown <duration>
//			}
//		}
//		model <id> {
//			route <provider> <upstream_model> [weight <n>]
//			price input <x> output <y> [cache_read <z>] [cache_write <w>] [image <i>]
//			      [web_search <s>] [web_fetch <f>] [image_generation <g>]
//			owned_by <name>
//			max_output <tokens>
//			features [reasoning] [structured_outputs]
//			allow_stateful <state...>
//		}
//		plan <name> {
//			rpm <n>
//			concurrency <n>
//			discount <percent>%
//			models <id|pattern...>
//			tier <monthly spend> <percent>%
//		}
//		default_plan <name>
//		public_url <scheme://host[:port][/path]>
//		allow_remote_unauthenticated_admin
//	}
//
// Prices are decimals per one million tokens and must come to a whole number
// of nanos per token; image is the price of one image; web_search, web_fetch
// and image_generation are the fees of hosted tools per 1,000 uses (a
// hosted tool is served only when priced). allow_stateful lets requests
// reach state kept in the operator's account at the provider (store,
// conversation, prompt, files, file_search, code_execution, mcp,
// cached_content); anthropic_beta lists the anthropic-beta values an
// anthropic provider receives ("default": the built-in list). Keys should be placeholders such as {env.OPENAI_KEY}:
// they are expanded when the config is loaded, never written into it.
func (a *App) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // the option name
	if d.NextArg() {
		return d.ArgErr()
	}
	routeRefs := map[*RouteConfig]pos{}
	modelAt := map[string]pos{}
	planAt := map[string]pos{}
	var defaultPlanAt pos
	seen := map[string]bool{}
	once := func(name string) error {
		if seen[name] {
			return d.Errf("%s already specified", name)
		}
		seen[name] = true
		return nil
	}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		switch opt := d.Val(); opt {
		case "ledger":
			if err := once(opt); err != nil {
				return err
			}
			args := d.RemainingArgs()
			if len(args) >= 1 && args[0] == "postgres" {
				if len(args) != 2 {
					return d.Err("usage: ledger postgres <dsn> (a placeholder such as {env.MODELGATE_POSTGRES} keeps the password out of the file)")
				}
				a.Ledger = &LedgerConfig{Driver: "postgres", DSN: args[1]}
			} else {
				if len(args) < 2 || len(args) > 3 {
					return d.Err("usage: ledger sqlite <path> [normal|full], or ledger postgres <dsn>")
				}
				if args[0] != "sqlite" {
					return d.Errf("unknown ledger driver %q (want sqlite or postgres)", args[0])
				}
				a.Ledger = &LedgerConfig{Driver: args[0], Path: args[1]}
			}
			if len(args) == 3 {
				if args[2] != "normal" && args[2] != "full" {
					return d.Errf("ledger synchronous mode %q: want normal or full", args[2])
				}
				a.Ledger.Synchronous = args[2]
			}
			for nesting := d.Nesting(); d.NextBlock(nesting); {
				switch d.Val() {
				case "poll_interval":
					dur, err := durationArg(d)
					if err != nil {
						return err
					}
					a.Ledger.PollInterval = dur
				case "busy_timeout":
					dur, err := durationArg(d)
					if err != nil {
						return err
					}
					a.Ledger.BusyTimeout = dur
				case "lease":
					if a.Ledger.Driver != "postgres" {
						return d.Err("ledger: lease applies to a postgres ledger only")
					}
					dur, err := durationArg(d)
					if err != nil {
						return err
					}
					a.Ledger.Lease = dur
				case "max_conns":
					if a.Ledger.Driver != "postgres" {
						return d.Err("ledger: max_conns applies to a postgres ledger only")
					}
					n, err := intArg(d, 1)
					if err != nil {
						return err
					}
					a.Ledger.MaxConns = n
				default:
					return d.Errf("ledger: unrecognized option %q", d.Val())
				}
			}
		case "redis":
			if err := once(opt); err != nil {
				return err
			}
			rc, err := parseRedis(d)
			if err != nil {
				return err
			}
			a.Redis = rc
		case "payments":
			if err := once(opt); err != nil {
				return err
			}
			pc, err := parsePayments(d)
			if err != nil {
				return err
			}
			a.Payments = pc
		case "alerts":
			if err := once(opt); err != nil {
				return err
			}
			ac, err := parseAlerts(d)
			if err != nil {
				return err
			}
			a.Alerts = ac
		case "smtp":
			if err := once(opt); err != nil {
				return err
			}
			sc, err := parseSMTP(d)
			if err != nil {
				return err
			}
			a.SMTP = sc
		case "block_countries":
			if err := once(opt); err != nil {
				return err
			}
			rc, err := parseBlockCountries(d)
			if err != nil {
				return err
			}
			a.BlockCountries = rc
		case "currency":
			if err := once(opt); err != nil {
				return err
			}
			if !d.AllArgs(&a.Currency) {
				return d.ArgErr()
			}
		case "min_output":
			if err := once(opt); err != nil {
				return err
			}
			n, err := intArg(d, 1)
			if err != nil {
				return err
			}
			a.MinOutput = n
		case "max_attempts":
			if err := once(opt); err != nil {
				return err
			}
			n, err := intArg(d, 1)
			if err != nil {
				return err
			}
			a.MaxAttempts = n
		case "keepalive_interval", "health_flush_interval":
			if err := once(opt); err != nil {
				return err
			}
			dur, err := durationArg(d)
			if err != nil {
				return err
			}
			if opt == "keepalive_interval" {
				a.KeepAliveInterval = dur
			} else {
				a.HealthFlushInterval = dur
			}
		case "health_scope":
			if err := once(opt); err != nil {
				return err
			}
			if !d.AllArgs(&a.HealthScope) {
				return d.ArgErr()
			}
		case "max_request_body":
			if err := once(opt); err != nil {
				return err
			}
			var s string
			if !d.AllArgs(&s) {
				return d.ArgErr()
			}
			n, err := humanize.ParseBytes(s)
			if err != nil || n == 0 || n > 1<<40 {
				return d.Errf("max_request_body %q: want a size such as 32MiB", s)
			}
			a.MaxRequestBody = int64(n)
		case "max_image_spool":
			if err := once(opt); err != nil {
				return err
			}
			var s string
			if !d.AllArgs(&s) {
				return d.ArgErr()
			}
			n, err := humanize.ParseBytes(s)
			if err != nil || n == 0 || n > 1<<40 {
				return d.Errf("max_image_spool %q: want a size such as 256MiB", s)
			}
			a.MaxImageSpool = int64(n)
		case "provider":
			p, err := parseProvider(d)
			if err != nil {
				return err
			}
			for _, q := range a.Providers {
				if q.Name == p.Name {
					return d.Errf("provider %s defined twice", p.Name)
				}
			}
			a.Providers = append(a.Providers, p)
		case "model":
			start := here(d)
			m, refs, err := parseModel(d)
			if err != nil {
				return err
			}
			if _, dup := modelAt[m.ID]; dup {
				return start.errf("duplicate model %s (first defined at line %d)", m.ID, modelAt[m.ID].line)
			}
			modelAt[m.ID] = start
			for r, at := range refs {
				routeRefs[r] = at
			}
			a.Models = append(a.Models, m)
		case "plan":
			start := here(d)
			p, err := parsePlan(d)
			if err != nil {
				return err
			}
			if _, dup := planAt[p.Name]; dup {
				return start.errf("plan %s defined twice", p.Name)
			}
			planAt[p.Name] = start
			a.Plans = append(a.Plans, p)
		case "default_plan":
			if err := once(opt); err != nil {
				return err
			}
			defaultPlanAt = here(d)
			if !d.AllArgs(&a.DefaultPlan) {
				return d.ArgErr()
			}
		case "public_url":
			if err := once(opt); err != nil {
				return err
			}
			if !d.AllArgs(&a.PublicURL) {
				return d.ArgErr()
			}
			if !strings.Contains(a.PublicURL, "{") { // a placeholder is checked once expanded
				if _, err := parsePublicURL(a.PublicURL); err != nil {
					return d.Err(err.Error())
				}
			}
		case "allow_remote_unauthenticated_admin":
			if err := once(opt); err != nil {
				return err
			}
			if d.NextArg() {
				return d.ArgErr()
			}
			a.AllowRemoteUnauthenticatedAdmin = true
		default:
			return d.Errf("unrecognized modelgate option %q", opt)
		}
	}

	// checks that need the whole block: providers may follow the models
	// that route to them
	providers := map[string]bool{}
	for _, p := range a.Providers {
		providers[p.Name] = true
	}
	for _, m := range a.Models {
		for i := range m.Routes {
			r := &m.Routes[i]
			if !providers[r.Provider] {
				return routeRefs[r].errf("model %s: route to unknown provider %q %s", m.ID, r.Provider, known("providers", r.Provider, slices.Collect(maps.Keys(providers))))
			}
		}
	}
	if len(a.Plans) > 0 {
		// a plan's models and discounts against the catalogue and its
		// own discount, as provisioning checks them (buildPlan)
		catalogue := make(map[string]*relay.Model, len(a.Models))
		for _, m := range a.Models {
			catalogue[m.ID] = &relay.Model{ID: m.ID}
		}
		for _, p := range a.Plans {
			if _, err := buildPlan(p, catalogue); err != nil {
				return planAt[p.Name].errf("%v", err)
			}
		}
	}
	if a.DefaultPlan != "" {
		if _, ok := planAt[a.DefaultPlan]; !ok {
			return defaultPlanAt.errf("default_plan %s: no such plan %s", a.DefaultPlan, known("plans", a.DefaultPlan, slices.Collect(maps.Keys(planAt))))
		}
	}
	return nil
}

// parseProvider parses a provider block; the cursor is on "provider".
func parseProvider(d *caddyfile.Dispenser) (*ProviderConfig, error) {
	p := new(ProviderConfig)
	if !d.NextArg() {
		return nil, d.ArgErr()
	}
	p.Name = d.Val()
	if d.NextArg() {
		return nil, d.ArgErr()
	}
	start := here(d)
	seen := map[string]bool{}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		opt := d.Val()
		if seen[opt] {
			return nil, d.Errf("provider %s: %s already specified", p.Name, opt)
		}
		seen[opt] = true
		switch opt {
		case "format":
			if !d.AllArgs(&p.Format) {
				return nil, d.ArgErr()
			}
			if _, err := upstream.ParseFormat(p.Format); err != nil {
				return nil, d.Errf("provider %s: %v", p.Name, err)
			}
		case "base_url":
			if !d.AllArgs(&p.BaseURL) {
				return nil, d.ArgErr()
			}
		case "keys":
			keys := d.RemainingArgs()
			if len(keys) == 0 {
				return nil, d.ArgErr()
			}
			for _, k := range keys {
				p.Keys = append(p.Keys, k)
				p.KeyWeights = append(p.KeyWeights, 1)
			}
		case "key":
			seen[opt] = false // may repeat
			args := d.RemainingArgs()
			if len(args) != 1 && !(len(args) == 3 && args[1] == "weight") {
				return nil, d.Errf("provider %s: usage: key <key> [weight <n>]", p.Name)
			}
			w := 1
			if len(args) == 3 {
				n, err := strconv.Atoi(args[2])
				if err != nil || n < 1 {
					return nil, d.Errf("provider %s: key weight %q: want a positive integer", p.Name, args[2])
				}
				w = n
			}
			p.Keys = append(p.Keys, args[0])
			p.KeyWeights = append(p.KeyWeights, w)
		case "connect_timeout", "first_byte_timeout", "response_timeout", "drain_timeout", "failure_cooldown":
			dur, err := durationArg(d)
			if err != nil {
				return nil, err
			}
			switch opt {
			case "connect_timeout":
				p.ConnectTimeout = dur
			case "first_byte_timeout":
				p.FirstByteTimeout = dur
			case "response_timeout":
				p.ResponseTimeout = dur
			case "drain_timeout":
				p.DrainTimeout = dur
			default:
				p.FailureCooldown = dur
			}
		case "on_hangup":
			if !d.AllArgs(&p.OnHangup) {
				return nil, d.ArgErr()
			}
			if p.OnHangup != hangupStop && p.OnHangup != hangupDrain {
				return nil, d.Errf("provider %s: on_hangup %q: want %s or %s", p.Name, p.OnHangup, hangupStop, hangupDrain)
			}
		case "health_check":
			hc, err := parseHealthCheck(d, p.Name)
			if err != nil {
				return nil, err
			}
			p.HealthCheck = hc
		case "breaker":
			b, err := parseBreaker(d, p.Name)
			if err != nil {
				return nil, err
			}
			p.Breaker = b
		case "chat_only":
			if d.NextArg() {
				return nil, d.ArgErr()
			}
			p.ChatOnly = true
		case "display_name":
			if !d.AllArgs(&p.DisplayName) || strings.TrimSpace(p.DisplayName) == "" {
				return nil, d.ArgErr()
			}
		case "anthropic_beta":
			p.AnthropicBeta = d.RemainingArgs()
			if len(p.AnthropicBeta) == 0 {
				return nil, d.ArgErr()
			}
			if _, err := relay.AnthropicBetas(p.AnthropicBeta); err != nil {
				return nil, d.Errf("provider %s: %v", p.Name, err)
			}
		case "anthropic_version":
			if !d.AllArgs(&p.AnthropicVersion) {
				return nil, d.ArgErr()
			}
			if !datedVersion.MatchString(p.AnthropicVersion) {
				return nil, d.Errf("provider %s: anthropic_version %q: want a date such as 2023-06-01", p.Name, p.AnthropicVersion)
			}
		default:
			return nil, d.Errf("provider %s: unrecognized option %q", p.Name, opt)
		}
	}
	switch {
	case p.Format == "":
		return nil, start.errf("provider %s: missing format", p.Name)
	case p.BaseURL == "":
		return nil, start.errf("provider %s: missing base_url", p.Name)
	case len(p.Keys) == 0:
		return nil, start.errf("provider %s: missing keys", p.Name)
	}
	if allOnes(p.KeyWeights) {
		p.KeyWeights = nil // the default
	}
	switch {
	case p.AnthropicVersion != "" && p.Format != "anthropic":
		return nil, start.errf("provider %s: anthropic_version applies to anthropic providers only", p.Name)
	case len(p.AnthropicBeta) > 0 && p.Format != "anthropic":
		return nil, start.errf("provider %s: anthropic_beta applies to anthropic providers only", p.Name)
	case p.ChatOnly && p.Format != "openai":
		return nil, start.errf("provider %s: chat_only applies to openai providers only", p.Name)
	}
	return p, nil
}

// allOnes reports whether every weight is 1.
func allOnes(ws []int) bool {
	for _, w := range ws {
		if w != 1 {
			return false
		}
	}
	return true
}

// parseHealthCheck parses a provider's health_check, either the word off or
// a block:
//
//	health_check {
//		interval <duration>
//		request <method> <path> [<body>]
//		expect <status>
//		timeout <duration>
//	}
func parseHealthCheck(d *caddyfile.Dispenser, provider string) (*HealthCheckConfig, error) {
	hc := new(HealthCheckConfig)
	if d.NextArg() {
		if d.Val() != "off" || d.NextArg() {
			return nil, d.Errf("provider %s: health_check takes a block, or off", provider)
		}
		hc.Disabled = true
		return hc, nil
	}
	seen := map[string]bool{}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		opt := d.Val()
		if seen[opt] {
			return nil, d.Errf("provider %s: health_check: %s already specified", provider, opt)
		}
		seen[opt] = true
		switch opt {
		case "interval", "timeout":
			dur, err := durationArg(d)
			if err != nil {
				return nil, err
			}
			if opt == "interval" {
				hc.Interval = dur
			} else {
				hc.Timeout = dur
			}
		case "request":
			args := d.RemainingArgs()
			if len(args) < 2 || len(args) > 3 || (args[0] != "GET" && args[0] != "POST") || !strings.HasPrefix(args[1], "/") {
				return nil, d.Errf("provider %s: usage: request GET|POST /path [body]", provider)
			}
			hc.Method, hc.Path = args[0], args[1]
			if len(args) == 3 {
				hc.Body = args[2]
			}
		case "expect":
			n, err := intArg(d, 100)
			if err != nil {
				return nil, err
			}
			if n > 599 {
				return nil, d.Errf("provider %s: expect %d: want an HTTP status", provider, n)
			}
			hc.Expect = n
		default:
			return nil, d.Errf("provider %s: health_check: unrecognized option %q", provider, opt)
		}
	}
	return hc, nil
}

// parseBreaker parses a provider's breaker block:
//
//	breaker {
//		failures <n>
//		window <duration>
//		cooldown <duration>
//	}
func parseBreaker(d *caddyfile.Dispenser, provider string) (*BreakerConfig, error) {
	b := new(BreakerConfig)
	if d.NextArg() {
		return nil, d.ArgErr()
	}
	seen := map[string]bool{}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		opt := d.Val()
		if seen[opt] {
			return nil, d.Errf("provider %s: breaker: %s already specified", provider, opt)
		}
		seen[opt] = true
		switch opt {
		case "failures":
			n, err := intArg(d, 1)
			if err != nil {
				return nil, err
			}
			b.Failures = n
		case "window", "cooldown":
			dur, err := durationArg(d)
			if err != nil {
				return nil, err
			}
			if opt == "window" {
				b.Window = dur
			} else {
				b.Cooldown = dur
			}
		default:
			return nil, d.Errf("provider %s: breaker: unrecognized option %q", provider, opt)
		}
	}
	return b, nil
}

// durationArg reads the one positive duration argument of the current
// option.
func durationArg(d *caddyfile.Dispenser) (caddy.Duration, error) {
	opt := d.Val()
	var s string
	if !d.AllArgs(&s) {
		return 0, d.ArgErr()
	}
	dur, err := caddy.ParseDuration(s)
	if err != nil || dur <= 0 {
		return 0, d.Errf("%s %q: want a positive duration such as 30s", opt, s)
	}
	return caddy.Duration(dur), nil
}

// parseModel parses a model block; the cursor is on "model". It returns where
// each route was written, to report an unknown provider once all are known.
func parseModel(d *caddyfile.Dispenser) (*ModelConfig, map[*RouteConfig]pos, error) {
	m := new(ModelConfig)
	if !d.NextArg() {
		return nil, nil, d.ArgErr()
	}
	m.ID = d.Val()
	if d.NextArg() {
		return nil, nil, d.ArgErr()
	}
	start := here(d)
	var routeAt []pos
	seen := map[string]bool{}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		opt := d.Val()
		if opt != "route" && seen[opt] {
			return nil, nil, d.Errf("model %s: %s already specified", m.ID, opt)
		}
		seen[opt] = true
		switch opt {
		case "route":
			at := here(d)
			args := d.RemainingArgs()
			if len(args) != 2 && len(args) != 4 {
				return nil, nil, d.Errf("model %s: usage: route <provider> <upstream_model> [weight <n>]", m.ID)
			}
			r := RouteConfig{Provider: args[0], Model: args[1]}
			if len(args) == 4 {
				if args[2] != "weight" {
					return nil, nil, d.Errf("model %s: route: unexpected %q (want weight <n>)", m.ID, args[2])
				}
				w, err := strconv.Atoi(args[3])
				if err != nil || w < 1 {
					return nil, nil, d.Errf("model %s: route weight %q: want a positive integer", m.ID, args[3])
				}
				r.Weight = w
			}
			m.Routes = append(m.Routes, r)
			routeAt = append(routeAt, at)
		case "price":
			args := d.RemainingArgs()
			if len(args) == 0 || len(args)%2 != 0 {
				return nil, nil, d.Errf("model %s: usage: price input <x> output <y> [cache_read <z>] [cache_write <w>] [image <i>] "+
					"[web_search <s>] [web_fetch <f>] [image_generation <g>]", m.ID)
			}
			got := map[string]bool{}
			for i := 0; i < len(args); i += 2 {
				name, val := args[i], args[i+1]
				if got[name] {
					return nil, nil, d.Errf("model %s: price %s given twice", m.ID, name)
				}
				got[name] = true
				var dst *string
				switch name {
				case "input":
					dst = &m.Price.Input
				case "output":
					dst = &m.Price.Output
				case "cache_read":
					dst = &m.Price.CacheRead
				case "cache_write":
					dst = &m.Price.CacheWrite
				case "image":
					dst = &m.Price.Image
				case "web_search":
					dst = &m.Price.WebSearch
				case "web_fetch":
					dst = &m.Price.WebFetch
				case "image_generation":
					dst = &m.Price.ImageGeneration
				default:
					return nil, nil, d.Errf("model %s: unknown price %q (want input, output, cache_read, cache_write, image, "+
						"web_search, web_fetch or image_generation)", m.ID, name)
				}
				parse := ledger.ParsePerMillion
				switch name {
				case "image":
					parse = ledger.ParseMoney // the price of one image
				case "web_search", "web_fetch", "image_generation":
					parse = ledger.ParsePerThousand // a hosted tool's fee per 1,000 uses
				}
				if _, err := parse(val); err != nil {
					return nil, nil, d.Errf("model %s: price %s %s: %v", m.ID, name, val, err)
				}
				*dst = val
			}
			if m.Price.Input == "" || m.Price.Output == "" {
				return nil, nil, d.Errf("model %s: price needs both input and output", m.ID)
			}
		case "owned_by":
			if !d.AllArgs(&m.OwnedBy) {
				return nil, nil, d.ArgErr()
			}
		case "max_output":
			n, err := intArg(d, 1)
			if err != nil {
				return nil, nil, err
			}
			m.MaxOutput = n
		case "features":
			m.Features = d.RemainingArgs()
			if len(m.Features) == 0 {
				return nil, nil, d.ArgErr()
			}
			for _, f := range m.Features {
				if f != featureReasoning && f != featureStructuredOutputs {
					return nil, nil, d.Errf("model %s: unknown feature %q (want %s or %s)", m.ID, f, featureReasoning, featureStructuredOutputs)
				}
			}
		case "allow_stateful":
			m.AllowStateful = d.RemainingArgs()
			if len(m.AllowStateful) == 0 {
				return nil, nil, d.ArgErr()
			}
			for _, st := range m.AllowStateful {
				if _, ok := formats.ParseState(st); !ok {
					return nil, nil, d.Errf("model %s: allow_stateful: unknown state %q (want %s)", m.ID, st, relay.StateNames())
				}
			}
		default:
			return nil, nil, d.Errf("model %s: unrecognized option %q", m.ID, opt)
		}
	}
	if len(m.Routes) == 0 {
		return nil, nil, start.errf("model %s: missing route", m.ID)
	}
	if m.Price.Input == "" {
		return nil, nil, start.errf("model %s: missing price (a model without a price cannot be served)", m.ID)
	}
	refs := make(map[*RouteConfig]pos, len(m.Routes))
	for i := range m.Routes {
		refs[&m.Routes[i]] = routeAt[i]
	}
	return m, refs, nil
}

// parsePlan parses a plan block; the cursor is on "plan".
func parsePlan(d *caddyfile.Dispenser) (*PlanConfig, error) {
	p := new(PlanConfig)
	if !d.NextArg() {
		return nil, d.ArgErr()
	}
	p.Name = d.Val()
	if d.NextArg() {
		return nil, d.ArgErr()
	}
	seen := map[string]bool{}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		opt := d.Val()
		if seen[opt] && opt != "tier" {
			return nil, d.Errf("plan %s: %s already specified", p.Name, opt)
		}
		seen[opt] = true
		switch opt {
		case "models":
			// IDs or patterns, checked against the catalogue when the
			// config is provisioned (buildPlan)
			p.Models = d.RemainingArgs()
			if len(p.Models) == 0 {
				return nil, d.ArgErr()
			}
		case "tier":
			var t TierConfig
			if !d.AllArgs(&t.Above, &t.Discount) {
				return nil, d.ArgErr()
			}
			if _, err := ledger.ParseMoney(t.Above); err != nil {
				return nil, d.Errf("plan %s: tier %s: %v", p.Name, t.Above, err)
			}
			if _, err := ledger.ParseDiscount(t.Discount); err != nil {
				return nil, d.Errf("plan %s: tier %s %s: %v", p.Name, t.Above, t.Discount, err)
			}
			p.Tiers = append(p.Tiers, t)
		case "rpm":
			n, err := intArg(d, 0)
			if err != nil {
				return nil, err
			}
			p.RPM = n
		case "concurrency":
			n, err := intArg(d, 0)
			if err != nil {
				return nil, err
			}
			p.Concurrency = n
		case "discount":
			if !d.AllArgs(&p.Discount) {
				return nil, d.ArgErr()
			}
			if _, err := ledger.ParseDiscount(p.Discount); err != nil {
				return nil, d.Errf("plan %s: discount %s: %v", p.Name, p.Discount, err)
			}
		default:
			return nil, d.Errf("plan %s: unrecognized option %q", p.Name, opt)
		}
	}
	return p, nil
}

// parseRedis parses `redis <url> [{ slot_lease <duration> }]`.
func parseRedis(d *caddyfile.Dispenser) (*RedisConfig, error) {
	rc := new(RedisConfig)
	if !d.NextArg() {
		return nil, d.ArgErr()
	}
	rc.URL = d.Val()
	if d.NextArg() {
		return nil, d.ArgErr()
	}
	// placeholders ({env.REDIS_URL}) are expanded when the app starts
	if !strings.Contains(rc.URL, "{") {
		if _, err := redis.ParseURL(rc.URL); err != nil {
			return nil, d.Errf("redis %s: %v", redactURL(rc.URL), err)
		}
	}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		switch d.Val() {
		case "slot_lease":
			dur, err := durationArg(d)
			if err != nil {
				return nil, err
			}
			rc.SlotLease = dur
		default:
			return nil, d.Errf("redis: unrecognized option %q", d.Val())
		}
	}
	return rc, nil
}

// parsePayments parses `payments stripe { secret_key <k> webhook_secret <s>
// [currency <c>] [min <amount>] }`.
func parsePayments(d *caddyfile.Dispenser) (*PaymentsConfig, error) {
	pc := new(PaymentsConfig)
	if !d.Args(&pc.Provider) || d.NextArg() {
		return nil, d.Err("usage: payments stripe { secret_key <key> webhook_secret <secret> [currency <code>] [min <amount>] [api_base <url>] }")
	}
	if pc.Provider != "stripe" {
		return nil, d.Errf("payments: unknown provider %q (want stripe)", pc.Provider)
	}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		opt := d.Val()
		var dst *string
		switch opt {
		case "secret_key":
			dst = &pc.SecretKey
		case "webhook_secret":
			dst = &pc.WebhookSecret
		case "currency":
			dst = &pc.Currency
		case "min":
			dst = &pc.Min
		case "api_base":
			dst = &pc.APIBase
		default:
			return nil, d.Errf("payments: unrecognized option %q", opt)
		}
		if !d.AllArgs(dst) {
			return nil, d.ArgErr()
		}
		if opt == "min" {
			if m, err := ledger.ParseMoney(pc.Min); err != nil || m <= 0 {
				return nil, d.Errf("payments: min %q: want a positive amount such as 5.00", pc.Min)
			}
		}
	}
	if pc.SecretKey == "" || pc.WebhookSecret == "" {
		return nil, d.Err("payments stripe: secret_key and webhook_secret are required")
	}
	return pc, nil
}

// parseSMTP parses the smtp block, the server the console sends its mail
// through (docs/caddyfile.md, "smtp"); the cursor is on "smtp".
func parseSMTP(d *caddyfile.Dispenser) (*SMTPConfig, error) {
	if d.NextArg() {
		return nil, d.Err("usage: smtp { host <host> from <address> [port <port>] [username <name>] [password <password>] [tls starttls|tls|none] [timeout <duration>] }")
	}
	sc := new(SMTPConfig)
	seen := map[string]bool{}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		opt := d.Val()
		if seen[opt] {
			return nil, d.Errf("smtp: %s already specified", opt)
		}
		seen[opt] = true
		var err error
		switch opt {
		case "host", "username", "password", "from":
			field := map[string]*string{"host": &sc.Host, "username": &sc.Username, "password": &sc.Password, "from": &sc.From}[opt]
			if !d.AllArgs(field) {
				return nil, d.ArgErr()
			}
		case "port":
			sc.Port, err = intArg(d, 1)
			if err == nil && sc.Port > 65535 {
				err = d.Errf("smtp: port %d: want 1 to 65535", sc.Port)
			}
		case "tls":
			if !d.AllArgs(&sc.TLS) {
				return nil, d.ArgErr()
			}
			if sc.TLS != mailer.TLSStartTLS && sc.TLS != mailer.TLSImplicit && sc.TLS != mailer.TLSNone {
				err = d.Errf("smtp: tls %q: want starttls, tls or none", sc.TLS)
			}
		case "timeout":
			sc.Timeout, err = durationArg(d)
		default:
			err = d.Errf("smtp: unrecognized option %q", opt)
		}
		if err != nil {
			return nil, err
		}
	}
	if sc.Host == "" || sc.From == "" {
		return nil, d.Err("smtp: host and from are required")
	}
	if sc.Password != "" && !strings.Contains(sc.Password, "{") {
		return nil, d.Err("smtp: write the password as a placeholder such as {env.SMTP_PASSWORD}, which keeps it out of the configuration")
	}
	return sc, nil
}

// countryCode matches an ISO 3166-1 alpha-2 code.
var countryCode = regexp.MustCompile(`^[A-Z]{2}$`)

// parseBlockCountries parses `block_countries <CC...> { geoip_db <path> }`.
func parseBlockCountries(d *caddyfile.Dispenser) (*RegionConfig, error) {
	rc := &RegionConfig{Countries: d.RemainingArgs()}
	if len(rc.Countries) == 0 {
		return nil, d.Err("usage: block_countries <CC...> { geoip_db <path> }")
	}
	for i, c := range rc.Countries {
		rc.Countries[i] = strings.ToUpper(c)
		if !countryCode.MatchString(rc.Countries[i]) {
			return nil, d.Errf("block_countries: %q is not a two-letter country code (ISO 3166-1)", c)
		}
	}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		switch d.Val() {
		case "geoip_db":
			if !d.AllArgs(&rc.GeoIPDB) {
				return nil, d.ArgErr()
			}
		default:
			return nil, d.Errf("block_countries: unrecognized option %q", d.Val())
		}
	}
	if rc.GeoIPDB == "" {
		return nil, d.Err("block_countries: missing geoip_db (a MaxMind-format country database)")
	}
	return rc, nil
}

// intArg reads the one integer argument of the current option.
func intArg(d *caddyfile.Dispenser, min int) (int, error) {
	opt := d.Val()
	var s string
	if !d.AllArgs(&s) {
		return 0, d.ArgErr()
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < min {
		return 0, d.Errf("%s %q: want an integer of at least %d", opt, s, min)
	}
	return n, nil
}

// parseAPIHandler sets up the modelgate_api handler:
//
//	modelgate_api
func parseAPIHandler(h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
	api := new(APIHandler)
	err := api.UnmarshalCaddyfile(h.Dispenser)
	return api, err
}

// UnmarshalCaddyfile parses the modelgate_api directive, which takes no
// arguments and no block.
func (h *APIHandler) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // the directive name
	if d.NextArg() {
		return d.ArgErr()
	}
	if d.NextBlock(d.Nesting()) {
		return d.Errf("modelgate_api takes no options (the catalogue lives in the modelgate global option)")
	}
	return nil
}

// Interface guards
var (
	_ caddyfile.Unmarshaler = (*App)(nil)
	_ caddyfile.Unmarshaler = (*APIHandler)(nil)
	_ caddy.Module          = (*App)(nil)
)
