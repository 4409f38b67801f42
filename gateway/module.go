// Package modelgate is an LLM API gateway for Caddy: one base URL and one key
// serve many models from several upstream providers in the OpenAI, Anthropic
// and Gemini wire formats, billed per token against a prepaid balance.
//
// This package is the Caddy glue only: the app (the global option
// `modelgate`), the handlers, the admin API and the CLI. The work is done
// by the plain-Go packages formats, ledger and upstream.
package gateway

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/reverseproxy"
	"github.com/oschwald/maxminddb-golang/v2"
	"go.uber.org/zap"

	"github.com/modelgate/modelgate/accounts"
	"github.com/modelgate/modelgate/alerts"
	"github.com/modelgate/modelgate/formats/images"
	"github.com/modelgate/modelgate/ledger"
	"github.com/modelgate/modelgate/mailer"
	"github.com/modelgate/modelgate/payments"
	"github.com/modelgate/modelgate/ratelimit"
	"github.com/modelgate/modelgate/relay"
	"github.com/modelgate/modelgate/upstream"
)

func init() {
	caddy.RegisterModule(App{})
}

// Defaults of the app's settings.
const (
	defaultMinOutput      = 256
	defaultMaxOutput      = 4096
	defaultMaxRequestBody = 32 << 20
	defaultPlanName       = "default"
	defaultMaxAttempts    = 3
)

// App is the `modelgate` app: the catalogue of providers, models and plans,
// and the services every modelgate handler shares (the ledger). It is
// configured by the `modelgate` global option of the Caddyfile.
type App struct {
	// Ledger is where balances, keys and usage live. Default: SQLite at
	// <caddy data dir>/modelgate/ledger.db.
	Ledger *LedgerConfig `json:"ledger,omitempty"`

	// Currency is the display name of the money unit. Default: USD.
	Currency string `json:"currency,omitempty"`

	// Providers are the upstream LLM services.
	Providers []*ProviderConfig `json:"providers,omitempty"`

	// Models are the model IDs customers may call, each with its routes
	// and prices.
	Models []*ModelConfig `json:"models,omitempty"`

	// Plans set per-account limits and discounts.
	Plans []*PlanConfig `json:"plans,omitempty"`

	// DefaultPlan is the plan of new accounts. Default: the first plan, or
	// an unlimited plan named "default" when none is configured.
	DefaultPlan string `json:"default_plan,omitempty"`

	// MinOutput is the least number of output tokens a balance must cover
	// for a request to go ahead with a lowered output cap. Default: 256.
	MinOutput int `json:"min_output,omitempty"`

	// MaxRequestBody is the largest request body accepted, in bytes.
	// Default: 32 MiB.
	MaxRequestBody int64 `json:"max_request_body,omitempty"`

	// MaxImageSpool bounds the bytes of image edit uploads held at once in
	// temporary files, across every request: the image files a form sends
	// before its model field wait there until the model is known (forms
	// that send the model first are forwarded as they arrive). An upload
	// that does not fit gets a 503. Default: 256 MiB.
	MaxImageSpool int64 `json:"max_image_spool,omitempty"`

	// MaxAttempts is how many upstream attempts (keys or routes) a request
	// may make before the first byte reaches the client. Default: 3.
	MaxAttempts int `json:"max_attempts,omitempty"`

	// KeepAliveInterval is how long an upstream may be silent before an
	// Anthropic client of a translated stream gets a ping. Default: 15s.
	KeepAliveInterval caddy.Duration `json:"keepalive_interval,omitempty"`

	// HealthFlushInterval is how often availability counts and incidents
	// go from memory to the ledger. Default: 10s.
	HealthFlushInterval caddy.Duration `json:"health_flush_interval,omitempty"`

	// HealthScope names the upstream health (requests in flight, key
	// cooldowns, breakers, availability counts) that configurations share
	// across reloads: one per process by default. Configurations with
	// different scopes keep apart (the tests give each test its own).
	HealthScope string `json:"health_scope,omitempty"`

	// Redis, if set, shares rate limits and key and account changes with
	// every instance using the same Redis. Without it, limits are this
	// instance's own.
	Redis *RedisConfig `json:"redis,omitempty"`

	// BlockCountries refuses requests from clients in the listed countries.
	BlockCountries *RegionConfig `json:"block_countries,omitempty"`

	// Payments takes top-ups through a payment provider (Stripe Checkout).
	Payments *PaymentsConfig `json:"payments,omitempty"`

	// SMTP is the server the console sends its mail through: password
	// reset links, and email verification at sign-up (docs/operations.md, "Console self-service").
	// Without it, the console sends no mail: sign-ups are not verified,
	// and the operator hands out reset links (caddy modelgate account
	// reset-link).
	SMTP *SMTPConfig `json:"smtp,omitempty"`

	// PublicURL is the address customers reach the gateway at, e.g.
	// https://api.example.com: the pages build the links they hand to
	// others from it (the payment provider's return URLs), and the status
	// page takes its default title from its host. Without it, those links
	// use the site's own host name, never a Host header that no site
	// address matched. Placeholders are expanded.
	PublicURL string `json:"public_url,omitempty"`

	// Alerts tunes the accounts' alerts and automatic top-ups: how often
	// they are looked at, the deliveries' retries, which addresses
	// webhooks may reach. Default: as AlertsConfig says.
	Alerts *AlertsConfig `json:"alerts,omitempty"`

	// Charger charges the automatic top-ups to saved cards; nil (no
	// payment provider) fails them with a reason.
	Charger alerts.Charger `json:"-"`

	// AllowRemoteUnauthenticatedAdmin serves the /modelgate/ routes of
	// Caddy's admin endpoint (which mint keys and credit money, with no
	// authentication of their own) also when the admin endpoint listens
	// beyond loopback and a unix socket without client certificates.
	// Default: false, and those requests are refused.
	AllowRemoteUnauthenticatedAdmin bool `json:"allow_remote_unauthenticated_admin,omitempty"`

	ctx       caddy.Context
	logger    *zap.Logger
	publicURL *url.URL // PublicURL, expanded; nil without one
	store     *ledger.Store
	// ledgerOpts and ledgerKey are the ledger's settings and its name in
	// the pool; heldLedger is this config's hold on it there, once taken.
	ledgerOpts ledger.Options
	ledgerKey  string
	heldLedger *ledgerHandle
	// serving is set once the ledger and what needs it are wired: the
	// handlers answer 503 until then. (A pointer: App is copied by value
	// as a module value, and an atomic must not be.)
	serving   *atomic.Bool
	providers map[string]*provider
	models    map[string]*relay.Model
	modelList []*relay.Model
	plans     map[string]*relay.Plan
	index     []byte // the body of GET / and GET /v1
	modelsDoc []byte // the body of GET /v1/models
	// planLists are the model lists of the plans that name their models
	planLists map[*relay.Plan]planModelList

	// registry holds the upstreams' health (in flight, cooldowns,
	// breakers, availability counts), shared by every config.
	registry       *upstream.Registry
	freshRegistry  bool // the registry was made for this config: no process ran before it
	metrics        *relay.Metrics
	stopBackground context.CancelFunc
	background     *sync.WaitGroup

	// limiter admits requests by plan (rpm, concurrency); geo and blocked
	// implement BlockCountries.
	limiter     ratelimit.Limiter
	payments    payments.Provider // nil without a payments option
	mailer      *mailer.Mailer    // nil without an smtp option
	limiterKey  string
	heldLimiter *limiterHandle // this config's hold in the limiters pool, once taken
	geo         *maxminddb.Reader
	blocked     map[string]bool

	// signatures keeps Gemini thought signatures for the tool calls the
	// gateway handed to non-Gemini clients (docs/translation.md, "Thought
	// signatures").
	signatures *relay.SignatureCache

	// svc is the request layer every API request goes through.
	svc *relay.Service
	// accounts opens and funds accounts for the admin API and the console.
	accounts *accounts.Service

	// imageSpool bounds the uploads spooled by image edits.
	imageSpool *images.Spool

	// alerts is this config's alerts watcher and delivery worker, once
	// started.
	alerts *alertsRun
}

// LedgerConfig selects the ledger store.
type LedgerConfig struct {
	// Driver is the store: "sqlite" (embedded, one server per file) or
	// "postgres" (shared by any number of instances).
	Driver string `json:"driver,omitempty"`
	// Path is the SQLite database file.
	Path string `json:"path,omitempty"`
	// DSN is the PostgreSQL connection string (postgres://user:pass@host/db
	// or key=value form); placeholders such as {env.MODELGATE_POSTGRES}
	// are expanded, and it is never logged.
	DSN string `json:"dsn,omitempty"`
	// Lease is how long a PostgreSQL ledger keeps the holds of an instance
	// that stopped renewing them (a crashed one). Default: 15s.
	Lease caddy.Duration `json:"lease,omitempty"`
	// MaxConns bounds a PostgreSQL ledger's connection pool. Default: 16.
	MaxConns int `json:"max_conns,omitempty"`
	// Synchronous is SQLite's synchronous setting: "normal" (default,
	// durable against a process crash) or "full" (also against power loss).
	Synchronous string `json:"synchronous,omitempty"`
	// PollInterval is how often the ledger looks for changes other
	// processes made (keys deleted, accounts suspended by the CLI).
	// Default: 250ms; with Redis such changes are also announced at once.
	PollInterval caddy.Duration `json:"poll_interval,omitempty"`
	// BusyTimeout is how long a write waits for another process's lock on
	// the database (the CLI's) before it fails and is retried. Default: 5s.
	BusyTimeout caddy.Duration `json:"busy_timeout,omitempty"`
}

// ProviderConfig is an upstream LLM service.
type ProviderConfig struct {
	// Name identifies the provider in routes, logs and metrics.
	Name string `json:"name"`
	// DisplayName names the provider on the public status page, instead
	// of Name, which then stays private (the operator's own naming, such
	// as "openai-eu-backup"). Default: Name.
	DisplayName string `json:"display_name,omitempty"`
	// Format is the wire format it speaks: openai, anthropic or gemini.
	Format string `json:"format"`
	// BaseURL is scheme://host[:port][/path] of its API.
	BaseURL string `json:"base_url"`
	// Keys are its API keys (upstream accounts). Write them as
	// placeholders ({env.OPENAI_KEY}); they are expanded at provision time.
	Keys []string `json:"keys,omitempty"`
	// KeyWeights give the keys, in order, their share of traffic (a key
	// with weight 2 takes twice the requests of one with weight 1).
	// Missing weights are 1.
	KeyWeights []int `json:"key_weights,omitempty"`
	// AnthropicVersion is the anthropic-version header sent to an
	// anthropic-format provider, whatever version the client sent.
	// Default: 2023-06-01.
	AnthropicVersion string `json:"anthropic_version,omitempty"`
	// AnthropicBeta lists the anthropic-beta values an anthropic-format
	// provider receives from clients; others are dropped and named in
	// x-modelgate-dropped. The word "default" stands for the
	// built-in list (what Claude Code sends, without the betas that change
	// prices or reach state in the operator's account), "none" for no
	// value. Default: the built-in list.
	AnthropicBeta []string `json:"anthropic_beta,omitempty"`
	// ChatOnly says that an openai-format provider has no Responses API
	// (POST /v1/responses): Responses clients are then translated to
	// Chat Completions for it. Default: false (OpenAI has both).
	ChatOnly bool `json:"chat_only,omitempty"`

	// ConnectTimeout bounds connecting to the provider. Default: 5s.
	ConnectTimeout caddy.Duration `json:"connect_timeout,omitempty"`
	// FirstByteTimeout bounds the wait for a streamed answer's headers
	// (the first event). Default: 60s.
	FirstByteTimeout caddy.Duration `json:"first_byte_timeout,omitempty"`
	// ResponseTimeout bounds the wait for a non-streamed answer, which
	// arrives whole after the generation. Default: 10m.
	ResponseTimeout caddy.Duration `json:"response_timeout,omitempty"`
	// DrainTimeout bounds how long the gateway goes on reading a stream
	// whose client left, to bill what the provider made: the provider
	// goes on generating until the answer is complete. Default: 30m, a
	// full-length answer at a slow provider's pace.
	DrainTimeout caddy.Duration `json:"drain_timeout,omitempty"`
	// OnHangup is what the gateway does with a stream whose client hangs
	// up: "stop" closes the upstream connection at once and bills the
	// output counted until then, plus an in-flight margin; "drain" reads
	// the stream to its end (bounded by DrainTimeout) and bills the
	// vendor's final usage. Default: stop for the openai and anthropic
	// formats (those vendors stop generating, and billing, when the
	// connection closes), drain for gemini (Google's API goes on).
	OnHangup string `json:"on_hangup,omitempty"`

	// HealthCheck configures the active probes. Default: every 30s, the
	// format's model list, expecting 200.
	HealthCheck *HealthCheckConfig `json:"health_check,omitempty"`
	// Breaker configures the circuit breakers of the provider and its keys.
	Breaker *BreakerConfig `json:"breaker,omitempty"`
	// FailureCooldown is how long a key rests after a server error,
	// timeout or broken connection; it doubles with each failure in a row.
	// Default: 1s.
	FailureCooldown caddy.Duration `json:"failure_cooldown,omitempty"`
}

// HealthCheckConfig configures a provider's active probes. Probes use the
// provider's real keys and are never billed to an account.
type HealthCheckConfig struct {
	// Disabled turns the probes off.
	Disabled bool `json:"disabled,omitempty"`
	// Interval is the time between probe rounds. Default: 30s.
	Interval caddy.Duration `json:"interval,omitempty"`
	// Method and Path are the probe request. Default: GET of the format's
	// model list (/v1/models, /v1beta/models).
	Method string `json:"method,omitempty"`
	Path   string `json:"path,omitempty"`
	// Body is sent with a POST probe.
	Body string `json:"body,omitempty"`
	// Expect is the status a healthy answer has. Default: 200.
	Expect int `json:"expect,omitempty"`
	// Timeout bounds one probe. Default: 10s.
	Timeout caddy.Duration `json:"timeout,omitempty"`
}

// BreakerConfig configures circuit breakers: Failures within Window open
// one; after Cooldown (doubling on repeated trips) a single request tests
// recovery.
type BreakerConfig struct {
	Failures int            `json:"failures,omitempty"`
	Window   caddy.Duration `json:"window,omitempty"`
	Cooldown caddy.Duration `json:"cooldown,omitempty"`
}

// ModelConfig is a model customers may call.
type ModelConfig struct {
	// ID is the model name clients send, case-sensitive.
	ID string `json:"id"`
	// Routes are the providers that serve it, in order of preference.
	Routes []RouteConfig `json:"routes"`
	// Price is what one million tokens cost, in currency units.
	Price PriceConfig `json:"price"`
	// OwnedBy is shown in model listings. Default: the first route's provider.
	OwnedBy string `json:"owned_by,omitempty"`
	// MaxOutput is the default and the cap of a request's output tokens.
	// Default: 4096.
	MaxOutput int `json:"max_output,omitempty"`
	// Features are what the upstream model can do beyond plain generation,
	// so that a translated request keeps them: "reasoning" (reasoning
	// effort, thinking budgets) and "structured_outputs" (native JSON
	// schema output on Anthropic models). A translated request asking for a
	// feature the model lacks has it dropped and named in
	// x-modelgate-dropped. Same-format requests pass through untouched.
	Features []string `json:"features,omitempty"`
	// AllowStateful lets requests reach state kept in the operator's
	// account at the provider: store (store: true), conversation
	// (previous_response_id, conversation, item_reference), prompt (stored
	// prompts), files (Files API ids), file_search (vector stores),
	// code_execution (containers), mcp (remote MCP servers),
	// cached_content (Gemini caches). A request using one that is not
	// listed gets a 400 naming the field. Default: none.
	AllowStateful []string `json:"allow_stateful,omitempty"`
}

// RouteConfig sends a model to a provider under the provider's model name.
type RouteConfig struct {
	Provider string `json:"provider"`
	Model    string `json:"model"`
	// Weight shares traffic among routes; 0 means failover order only.
	Weight int `json:"weight,omitempty"`
}

// PriceConfig holds decimal prices per one million tokens. Each must be an
// integer number of nanos per token (at most 3 decimal places).
type PriceConfig struct {
	Input  string `json:"input"`
	Output string `json:"output"`
	// CacheRead and CacheWrite default to the input price, never to zero.
	CacheRead  string `json:"cache_read,omitempty"`
	CacheWrite string `json:"cache_write,omitempty"`
	// Image is what one image costs, in currency units, billed by the
	// images routes when the upstream reports no token usage.
	Image string `json:"image,omitempty"`
	// WebSearch, WebFetch and ImageGeneration are the fees of hosted
	// tools, in currency units per 1,000 uses, as vendors publish them.
	// A hosted tool is served only when its price is set (0 allows
	// it free of fees); otherwise it is dropped, or refused when
	// tool_choice forces it.
	WebSearch       string `json:"web_search,omitempty"`
	WebFetch        string `json:"web_fetch,omitempty"`
	ImageGeneration string `json:"image_generation,omitempty"`
}

// PaymentsConfig configures top-ups through a payment provider.
type PaymentsConfig struct {
	// Provider is "stripe".
	Provider string `json:"provider"`
	// SecretKey is the provider's API key; placeholders such as
	// {env.STRIPE_SECRET_KEY} are expanded.
	SecretKey string `json:"secret_key"`
	// WebhookSecret verifies the provider's notifications (Stripe's
	// endpoint signing secret, whsec_…); placeholders are expanded.
	WebhookSecret string `json:"webhook_secret"`
	// Currency of the top-ups; it must be the gateway's currency. Default:
	// the gateway's currency.
	Currency string `json:"currency,omitempty"`
	// Min is the smallest top-up, in currency units. Default: 5.
	Min string `json:"min,omitempty"`
	// APIBase is the address of the provider's API, for a test double
	// such as stripe-mock or an egress proxy. Default: the provider's own.
	APIBase string `json:"api_base,omitempty"`
}

// SMTPConfig is an SMTP server and the address the gateway's mail comes
// from.
type SMTPConfig struct {
	// Host is the server's host name or address.
	Host string `json:"host"`
	// Port is its port. Default: 587 with starttls, 465 with tls, 25 with
	// none.
	Port int `json:"port,omitempty"`
	// Username and Password authenticate, when Username is set;
	// placeholders such as {env.SMTP_PASSWORD} are expanded when the
	// config is loaded and never written into it.
	Username string `json:"username,omitempty"`
	Password string `json:"password,omitempty"`
	// From is the sender: an address, or a name and an address
	// ("modelgate <no-reply@example.com>").
	From string `json:"from"`
	// TLS is "starttls" (default: STARTTLS, required), "tls" (TLS from the
	// first byte) or "none" (a relay on the same host or network; no
	// password is then sent in the clear).
	TLS string `json:"tls,omitempty"`
	// Timeout bounds one exchange with the server. Default: 10s.
	Timeout caddy.Duration `json:"timeout,omitempty"`
}

// PlanConfig is a set of per-account limits, discounts and the models
// the plan offers.
type PlanConfig struct {
	Name string `json:"name"`
	// RPM is requests per minute; 0 means unlimited.
	RPM int `json:"rpm,omitempty"`
	// Concurrency is requests in flight; 0 means unlimited.
	Concurrency int `json:"concurrency,omitempty"`
	// Discount is a percentage taken off every request, e.g. "15%".
	Discount string `json:"discount,omitempty"`
	// Models are the models the plan offers: model IDs, or patterns in
	// which * stands for any run of characters ("claude-*"). Each must
	// name or match a model of the catalogue. Default: every model.
	Models []string `json:"models,omitempty"`
	// Tiers are volume discounts by the account's spend in the current
	// calendar month (UTC), added to Discount (docs/billing.md, "Plan
	// discounts and volume tiers").
	Tiers []TierConfig `json:"tiers,omitempty"`
}

// provider is a configured upstream: what a request sees of it (relay),
// its probes, and its HTTP transport (Caddy's, for dialing, TLS and
// connection pools).
type provider struct {
	*relay.Provider
	connectTimeout time.Duration
	probe          upstream.ProbeCheck
	probeOff       bool // health_check disabled
	transport      *reverseproxy.HTTPTransport
}

// The model features a configuration may declare.
const (
	featureReasoning         = "reasoning"
	featureStructuredOutputs = "structured_outputs"
)

// defaultAnthropicVersion is the anthropic-version sent upstream by default.
const defaultAnthropicVersion = "2023-06-01"

// datedVersion is the shape of an anthropic-version.
var datedVersion = regexp.MustCompile(`^\d{4}-\d{2}-\d{2}$`)

// CaddyModule returns the Caddy module information.
func (App) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "modelgate",
		New: func() caddy.Module { return new(App) },
	}
}

// registries holds the one upstream health registry, so that reloads keep
// requests in flight, cooldowns, breakers and uncounted availability.
var registries = caddy.NewUsagePool()

// registryKey names the app's registry in the pool: one per HealthScope.
func (a *App) registryKey() string { return "upstream:" + a.HealthScope }

// Default timeouts of a provider.
const (
	defaultConnectTimeout   = 5 * time.Second
	defaultFirstByteTimeout = 60 * time.Second
	defaultResponseTimeout  = 10 * time.Minute
	defaultDrainTimeout     = 30 * time.Minute
)

// upstreamIdleConnsPerHost is how many idle connections a provider's
// transport keeps per upstream host.
const upstreamIdleConnsPerHost = 1024

// durationOr is d, or def when d is zero.
// What a provider's stream does when its client hangs up (on_hangup).
const (
	hangupStop  = "stop"
	hangupDrain = "drain"
)

// stopsOnHangup reports whether a provider's streams stop when their
// client hangs up: as configured, else as its vendor does (OpenAI and
// Anthropic stop generating when the connection closes; Google's API goes
// on), docs/billing.md "When the client hangs up".
func stopsOnHangup(onHangup string, f upstream.Format) bool {
	if onHangup != "" {
		return onHangup == hangupStop
	}
	return f != upstream.FormatGemini
}

func durationOr(d caddy.Duration, def time.Duration) time.Duration {
	if d > 0 {
		return time.Duration(d)
	}
	return def
}

// Provision checks the catalogue and the ledger settings and sets up the
// proxies and the payment and mail clients. It opens no ledger and
// connects to no Redis: Start does. On a reload, it takes the ledger and
// the rate limiter the running config holds, so that the new config serves
// from its first request.
func (a *App) Provision(ctx caddy.Context) error {
	a.ctx = ctx
	a.logger = ctx.Logger()
	a.serving = new(atomic.Bool)
	if err := a.setDefaults(); err != nil {
		return err
	}
	if err := a.buildCatalogue(); err != nil {
		return err
	}
	if a.PublicURL != "" {
		u, err := parsePublicURL(caddy.NewReplacer().ReplaceAll(a.PublicURL, ""))
		if err != nil {
			return err
		}
		a.publicURL = u
	}
	if err := a.prepareLedger(); err != nil {
		return err
	}
	reg, loaded, _ := registries.LoadOrNew(a.registryKey(), func() (caddy.Destructor, error) {
		return upstream.NewRegistry(nil), nil
	})
	a.registry = reg.(*upstream.Registry)
	a.freshRegistry = !loaded
	if err := a.provisionPayments(); err != nil {
		return err
	}
	if err := a.provisionMailer(); err != nil {
		return err
	}
	if err := a.prepareLimits(); err != nil {
		return err
	}
	sc, _, _ := signatureCaches.LoadOrNew("signatures", func() (caddy.Destructor, error) {
		return relay.NewSignatureCache(relay.SignatureCacheSize, relay.SignatureTTL), nil
	})
	a.signatures = sc.(*relay.SignatureCache)
	a.index = indexDoc()

	repl := caddy.NewReplacer()
	for _, pc := range a.Providers {
		if err := a.provisionProvider(ctx, repl, pc); err != nil {
			return err
		}
	}
	a.provisionImages()
	return a.adoptRunning()
}

// signatureCaches holds the one thought-signature cache, so that a config
// reload keeps the signatures of conversations in progress.
var signatureCaches = caddy.NewUsagePool()

// defaultMaxImageSpool is App.MaxImageSpool's default.
const defaultMaxImageSpool = 256 << 20

// imageSpools holds the instance's one bound on spooled uploads, so that a
// reload keeps counting the uploads in flight.
var imageSpools = caddy.NewUsagePool()

// spoolHandle adapts the bound to the usage pool.
type spoolHandle struct{ *images.Spool }

// Destruct implements caddy.Destructor: there is nothing to free.
func (spoolHandle) Destruct() error { return nil }

// provisionImages sets the bound on spooled uploads (the newest config's
// limit applies).
func (a *App) provisionImages() {
	v, _, _ := imageSpools.LoadOrNew("spool", func() (caddy.Destructor, error) {
		return spoolHandle{images.NewSpool(a.MaxImageSpool)}, nil
	})
	a.imageSpool = v.(spoolHandle).Spool
	a.imageSpool.SetLimit(a.MaxImageSpool)
}

// parsePublicURL checks a public_url: an absolute http or https URL with a
// host, and perhaps a path, without query or fragment. Its path loses a
// trailing slash.
func parsePublicURL(s string) (*url.URL, error) {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil ||
		u.RawQuery != "" || u.Fragment != "" || u.Opaque != "" {
		return nil, fmt.Errorf("public_url %q: want scheme://host[:port][/path], such as https://api.example.com", s)
	}
	u.Path = strings.TrimRight(u.Path, "/")
	u.RawPath = ""
	return u, nil
}

// setDefaults fills in what the configuration left out.
func (a *App) setDefaults() error {
	if a.Ledger == nil {
		a.Ledger = new(LedgerConfig)
	}
	if a.Ledger.Driver == "" {
		a.Ledger.Driver = "sqlite"
	}
	switch a.Ledger.Driver {
	case "sqlite":
	case "postgres":
		if a.Ledger.DSN == "" {
			return errors.New("ledger postgres: no dsn")
		}
	default:
		return fmt.Errorf("ledger: unknown driver %q (want sqlite or postgres)", a.Ledger.Driver)
	}
	if a.Ledger.Driver == "sqlite" && a.Ledger.Path == "" {
		a.Ledger.Path = filepath.Join(caddy.AppDataDir(), "modelgate", "ledger.db")
	}
	if a.Currency == "" {
		a.Currency = "USD"
	}
	if a.MinOutput == 0 {
		a.MinOutput = defaultMinOutput
	}
	if a.MaxRequestBody == 0 {
		a.MaxRequestBody = defaultMaxRequestBody
	}
	if a.MaxAttempts == 0 {
		a.MaxAttempts = defaultMaxAttempts
	}
	if a.MaxImageSpool == 0 {
		a.MaxImageSpool = defaultMaxImageSpool
	}
	if len(a.Plans) == 0 {
		a.Plans = []*PlanConfig{{Name: defaultPlanName}}
	}
	if a.DefaultPlan == "" {
		a.DefaultPlan = a.Plans[0].Name
	}
	return nil
}

// buildCatalogue checks providers, models and plans and indexes them. Routes
// point at placeholder providers until provisionProvider builds the real ones.
func (a *App) buildCatalogue() error {
	a.providers = make(map[string]*provider, len(a.Providers))
	for _, pc := range a.Providers {
		if pc.Name == "" {
			return errors.New("provider without a name")
		}
		if _, dup := a.providers[pc.Name]; dup {
			return fmt.Errorf("provider %s: defined twice", pc.Name)
		}
		f, err := upstream.ParseFormat(pc.Format)
		if err != nil {
			return fmt.Errorf("provider %s: %w", pc.Name, err)
		}
		switch pc.OnHangup {
		case "", hangupStop, hangupDrain:
		default:
			return fmt.Errorf("provider %s: on_hangup %q: want %s or %s", pc.Name, pc.OnHangup, hangupStop, hangupDrain)
		}
		version := pc.AnthropicVersion
		if version == "" {
			version = defaultAnthropicVersion
		}
		if !datedVersion.MatchString(version) {
			return fmt.Errorf("provider %s: anthropic_version %q: want a date such as 2023-06-01", pc.Name, version)
		}
		if pc.AnthropicVersion != "" && f != upstream.FormatAnthropic {
			return fmt.Errorf("provider %s: anthropic_version applies to anthropic providers only", pc.Name)
		}
		betas, err := relay.AnthropicBetas(pc.AnthropicBeta)
		if err != nil {
			return fmt.Errorf("provider %s: %w", pc.Name, err)
		}
		if len(pc.AnthropicBeta) > 0 && f != upstream.FormatAnthropic {
			return fmt.Errorf("provider %s: anthropic_beta applies to anthropic providers only", pc.Name)
		}
		a.providers[pc.Name] = &provider{Provider: &relay.Provider{Provider: &upstream.Provider{Name: pc.Name, Format: f},
			AnthropicVersion: version, AnthropicBetas: betas, ResponsesAPI: f == upstream.FormatOpenAI && !pc.ChatOnly}}
	}

	a.models = make(map[string]*relay.Model, len(a.Models))
	for _, mc := range a.Models {
		m, err := a.buildModel(mc)
		if err != nil {
			return err
		}
		if _, dup := a.models[m.ID]; dup {
			return fmt.Errorf("model %s: defined twice", m.ID)
		}
		a.models[m.ID] = m
		a.modelList = append(a.modelList, m)
	}

	a.plans = make(map[string]*relay.Plan, len(a.Plans))
	for _, pc := range a.Plans {
		p, err := buildPlan(pc, a.models)
		if err != nil {
			return err
		}
		if _, dup := a.plans[p.Name]; dup {
			return fmt.Errorf("plan %s: defined twice", p.Name)
		}
		a.plans[p.Name] = p
	}
	if _, ok := a.plans[a.DefaultPlan]; !ok {
		return fmt.Errorf("default_plan %s: no such plan %s", a.DefaultPlan, known("plans", a.DefaultPlan, slices.Collect(maps.Keys(a.plans))))
	}
	return nil
}

// buildModel checks one model's settings.
func (a *App) buildModel(mc *ModelConfig) (*relay.Model, error) {
	if mc.ID == "" {
		return nil, errors.New("model without an id")
	}
	m := &relay.Model{ID: mc.ID, OwnedBy: mc.OwnedBy, MaxOutput: mc.MaxOutput}
	if m.MaxOutput == 0 {
		m.MaxOutput = defaultMaxOutput
	}
	if m.MaxOutput < 1 {
		return nil, fmt.Errorf("model %s: max_output must be at least 1", m.ID)
	}
	if len(mc.Routes) == 0 {
		return nil, fmt.Errorf("model %s: no route", m.ID)
	}
	for _, rc := range mc.Routes {
		p, ok := a.providers[rc.Provider]
		if !ok {
			return nil, fmt.Errorf("model %s: route to unknown provider %q %s", m.ID, rc.Provider, known("providers", rc.Provider, slices.Collect(maps.Keys(a.providers))))
		}
		if rc.Model == "" {
			return nil, fmt.Errorf("model %s: route to %s without an upstream model name", m.ID, rc.Provider)
		}
		if rc.Weight < 0 {
			return nil, fmt.Errorf("model %s: negative route weight", m.ID)
		}
		m.Routes = append(m.Routes, relay.Route{Provider: p.Provider, UpstreamModel: rc.Model, Weight: rc.Weight})
	}
	if m.OwnedBy == "" {
		m.OwnedBy = mc.Routes[0].Provider
	}
	price, err := parsePrice(mc.Price)
	if err != nil {
		return nil, fmt.Errorf("model %s: %w", m.ID, err)
	}
	m.Price = price
	if mc.Price.Image != "" {
		if m.ImagePrice, err = ledger.ParseMoney(mc.Price.Image); err != nil || m.ImagePrice < 0 {
			return nil, fmt.Errorf("model %s: price image %s: want an amount of at least 0", m.ID, mc.Price.Image)
		}
	}
	hosted := relay.HostedPrices{WebSearch: mc.Price.WebSearch, WebFetch: mc.Price.WebFetch, ImageGeneration: mc.Price.ImageGeneration}
	if err := m.SetHosted(hosted, mc.AllowStateful); err != nil {
		return nil, fmt.Errorf("model %s: %w", m.ID, err)
	}
	for _, f := range mc.Features {
		switch f {
		case featureReasoning:
			m.Reasoning = true
		case featureStructuredOutputs:
			m.StructuredOutputs = true
		default:
			return nil, fmt.Errorf("model %s: unknown feature %q (want %s or %s)", m.ID, f, featureReasoning, featureStructuredOutputs)
		}
	}
	return m, nil
}

// parsePrice converts decimal prices per 1M tokens to nanos per token.
func parsePrice(pc PriceConfig) (ledger.Price, error) {
	var p ledger.Price
	if pc.Input == "" || pc.Output == "" {
		return p, errors.New("price needs both input and output")
	}
	for _, f := range []struct {
		name string
		in   string
		out  *ledger.Money
	}{
		{"input", pc.Input, &p.Input},
		{"output", pc.Output, &p.Output},
		{"cache_read", pc.CacheRead, &p.CacheRead},
		{"cache_write", pc.CacheWrite, &p.CacheWrite},
	} {
		if f.in == "" {
			*f.out = p.Input // a missing cache price falls back to the input price, never to zero
			continue
		}
		v, err := ledger.ParsePerMillion(f.in)
		if err != nil {
			return p, fmt.Errorf("price %s %s: %w", f.name, f.in, err)
		}
		*f.out = v
	}
	return p, nil
}

// provisionPayments sets up the payment provider, if one is configured.
func (a *App) provisionPayments() error {
	pc := a.Payments
	if pc == nil {
		return nil
	}
	if pc.Provider != "stripe" {
		return fmt.Errorf("payments: unknown provider %q (want stripe)", pc.Provider)
	}
	currency := pc.Currency
	if currency == "" {
		currency = a.Currency
	}
	if !strings.EqualFold(currency, a.Currency) {
		return fmt.Errorf("payments: currency %s differs from the gateway's currency %s", currency, a.Currency)
	}
	minimum := ledger.Money(5_000_000_000)
	if pc.Min != "" {
		m, err := ledger.ParseMoney(pc.Min)
		if err != nil || m <= 0 {
			return fmt.Errorf("payments: min %q: want a positive amount", pc.Min)
		}
		minimum = m
	}
	// an empty or unset placeholder is named (never a value), as for
	// providers and smtp
	repl := caddy.NewReplacer()
	var vals [3]string
	for i, f := range []struct{ name, raw string }{{"secret_key", pc.SecretKey}, {"webhook_secret", pc.WebhookSecret}, {"api_base", pc.APIBase}} {
		v, err := repl.ReplaceOrErr(f.raw, true, true)
		if err != nil {
			return fmt.Errorf("payments: %s: %w", f.name, err)
		}
		vals[i] = v
	}
	p, err := payments.NewStripe(payments.StripeConfig{
		SecretKey:     vals[0],
		WebhookSecret: vals[1],
		Currency:      currency,
		Minimum:       minimum,
		APIBase:       vals[2],
		Logger:        a.logger.Named("stripe"),
	})
	if err != nil {
		return err
	}
	a.payments = p
	a.Charger = cardCharger{p}
	return nil
}

// provisionMailer sets up the SMTP server's mailer, if one is configured;
// its placeholders must be set (an error names the placeholder, never a
// value).
func (a *App) provisionMailer() error {
	sc := a.SMTP
	if sc == nil {
		return nil
	}
	if a.publicURL == nil {
		// the mail's links must name the operator's site, never whatever
		// Host a request came with (docs/caddyfile.md, "smtp")
		return errors.New("smtp: the mail's links need public_url (the address customers reach the gateway at)")
	}
	repl := caddy.NewReplacer()
	var vals [4]string
	for i, raw := range []string{sc.Host, sc.Username, sc.Password, sc.From} {
		v, err := repl.ReplaceOrErr(raw, true, true)
		if err != nil {
			return fmt.Errorf("smtp: %w", err)
		}
		vals[i] = v
	}
	m, err := mailer.New(mailer.Config{Host: vals[0], Port: sc.Port, Username: vals[1], Password: vals[2], From: vals[3],
		TLS: sc.TLS, Timeout: time.Duration(sc.Timeout)})
	if err != nil {
		return err
	}
	a.mailer = m
	return nil
}

// buildPlan checks one plan against the catalogue's models.
func buildPlan(pc *PlanConfig, models map[string]*relay.Model) (*relay.Plan, error) {
	if pc.Name == "" {
		return nil, errors.New("plan without a name")
	}
	if pc.RPM < 0 || pc.Concurrency < 0 {
		return nil, fmt.Errorf("plan %s: limits must not be negative", pc.Name)
	}
	p := &relay.Plan{Name: pc.Name, RPM: pc.RPM, Concurrency: pc.Concurrency}
	if pc.Discount != "" {
		bps, err := ledger.ParseDiscount(pc.Discount)
		if err != nil {
			return nil, fmt.Errorf("plan %s: discount %s: %w", pc.Name, pc.Discount, err)
		}
		p.DiscountBps = bps
	}
	tiers, err := buildTiers(pc.Name, p.DiscountBps, cmp.Or(pc.Discount, "0%"), pc.Tiers)
	if err != nil {
		return nil, err
	}
	p.Tiers = tiers
	offered, err := planModels(pc.Name, pc.Models, models)
	if err != nil {
		return nil, err
	}
	p.Models = offered
	return p, nil
}

// provisionProvider expands the provider's secrets and sets up its HTTP
// transport.
func (a *App) provisionProvider(ctx caddy.Context, repl *caddy.Replacer, pc *ProviderConfig) error {
	base, err := repl.ReplaceOrErr(pc.BaseURL, true, true)
	if err != nil {
		return fmt.Errorf("provider %s: base_url: %w", pc.Name, err)
	}
	secrets := make([]string, 0, len(pc.Keys))
	for i, raw := range pc.Keys {
		s, err := repl.ReplaceOrErr(raw, true, true)
		if err != nil {
			// the error names the placeholder, never a value
			return fmt.Errorf("provider %s: key %d: %w", pc.Name, i+1, err)
		}
		secrets = append(secrets, s)
	}
	specs := make([]upstream.KeySpec, len(secrets))
	for i, s := range secrets {
		specs[i] = upstream.KeySpec{Secret: s, Weight: 1}
		if i < len(pc.KeyWeights) {
			specs[i].Weight = pc.KeyWeights[i]
		}
	}
	hc := upstream.HealthConfig{FailureCooldown: time.Duration(pc.FailureCooldown)}
	if b := pc.Breaker; b != nil {
		hc.BreakerFailures, hc.BreakerWindow, hc.BreakerCooldown = b.Failures, time.Duration(b.Window), time.Duration(b.Cooldown)
	}
	p := a.providers[pc.Name]
	up, err := a.registry.NewProvider(pc.Name, p.Format, base, specs, hc)
	if err != nil {
		return err
	}
	p.Provider.Provider = up
	p.connectTimeout = durationOr(pc.ConnectTimeout, defaultConnectTimeout)
	p.FirstByteTimeout = durationOr(pc.FirstByteTimeout, defaultFirstByteTimeout)
	p.ResponseTimeout = durationOr(pc.ResponseTimeout, defaultResponseTimeout)
	p.DrainTimeout = durationOr(pc.DrainTimeout, defaultDrainTimeout)
	p.StopOnHangup = stopsOnHangup(pc.OnHangup, p.Format)
	p.probe, p.probeOff = probeCheck(pc.HealthCheck, p.Format)
	t := new(reverseproxy.HTTPTransport)
	t.DialTimeout = caddy.Duration(p.connectTimeout)
	// An LLM gateway keeps many requests open to few upstream hosts (long
	// streams): Caddy's default of 32 idle connections per host would close
	// and re-dial (TLS included) under any real concurrency.
	t.KeepAlive = &reverseproxy.KeepAlive{MaxIdleConnsPerHost: upstreamIdleConnsPerHost}
	if up.Scheme == "https" {
		t.TLS = &reverseproxy.TLSConfig{ServerName: up.ServerName}
	}
	if err := t.Provision(ctx); err != nil {
		return fmt.Errorf("provider %s: transport: %w", pc.Name, err)
	}
	p.transport = t
	p.Upstream = dialMarking{t}
	return nil
}

// Start opens the ledger and the rate limiter, unless Provision took a
// running config's, and begins the background work: health probes, and
// flushing availability counts and incidents to the ledger. It fails when
// another server process uses the SQLite ledger.
func (a *App) Start() error {
	if !a.Serving() {
		if err := a.openRunning(); err != nil {
			return err
		}
	}
	live := make([]*upstream.Provider, 0, len(a.providers))
	for _, p := range a.providers {
		live = append(live, p.Provider.Provider)
	}
	a.registry.Retain(live)
	a.logger.Info("modelgate serving", zap.String("ledger", a.ledgerDescription()),
		zap.Int("providers", len(a.providers)), zap.Int("models", len(a.modelList)),
		zap.Bool("payments", a.payments != nil), zap.Bool("smtp", a.mailer != nil),
		zap.Bool("redis", a.Redis != nil), zap.Bool("region_rules", a.BlockCountries != nil))
	ctx, cancel := context.WithCancel(a.ctx)
	a.stopBackground = cancel
	a.background = new(sync.WaitGroup)
	a.background.Add(1)
	go func() {
		defer a.background.Done()
		a.flushHealth(ctx)
	}()
	for _, pc := range a.Providers {
		p := a.providers[pc.Name]
		if p.probeOff {
			continue
		}
		a.background.Add(1)
		go func() {
			defer a.background.Done()
			a.prober(p).Run(ctx)
		}()
	}
	a.startAlerts(ctx)
	return nil
}

// Stop ends the background work after a last flush of the health counts.
func (a *App) Stop() error {
	a.stopAlerts()
	if a.stopBackground != nil {
		a.stopBackground()
		a.background.Wait()
	}
	return nil
}

// Cleanup releases the transports and this config's hold on the ledger,
// which closes it when no other config holds it. The ledger stays open
// until then, not only until Stop: Caddy stops its apps in no set order,
// and the requests the HTTP server drains after this app stopped still
// settle in it.
func (a *App) Cleanup() error {
	var errs []error
	for _, p := range a.providers {
		if p.transport != nil {
			errs = append(errs, p.transport.Cleanup())
		}
	}
	errs = append(errs, a.releaseLedger())
	if a.registry != nil {
		_, err := registries.Delete(a.registryKey())
		errs = append(errs, err)
	}
	if a.signatures != nil {
		_, err := signatureCaches.Delete("signatures")
		errs = append(errs, err)
	}
	if a.imageSpool != nil {
		_, err := imageSpools.Delete("spool")
		errs = append(errs, err)
	}
	errs = append(errs, a.cleanupLimits())
	return errors.Join(errs...)
}

// plan returns an account's plan, or the default plan when the account names
// one the configuration no longer has.
func (a *App) plan(name string) *relay.Plan {
	if p, ok := a.plans[name]; ok {
		return p
	}
	return a.plans[a.DefaultPlan]
}

// Interface guards
var (
	_ caddy.App          = (*App)(nil)
	_ caddy.Provisioner  = (*App)(nil)
	_ caddy.CleanerUpper = (*App)(nil)
)
