// Package relay is one API request's life in the gateway, in plain Go: the
// client's request parsed and rendered for the route's upstream format, the
// hold taken before the upstream call, the failover loop over keys and
// routes, the answer translated event by event while its usage is metered,
// and the bill settled exactly once (bill.go), however the call ends
// (docs/billing.md). The Caddy modules of package gateway route requests
// here and plug in the providers' reverse proxies; nothing here imports
// Caddy.
package relay

import (
	"net/http"
	"time"

	"go.uber.org/zap"

	"github.com/modelgate/modelgate/formats"
	"github.com/modelgate/modelgate/formats/images"
	"github.com/modelgate/modelgate/ledger"
	"github.com/modelgate/modelgate/upstream"
)

// Service is what every request of one configuration shares: the ledger,
// the catalogue, the metrics and the limits.
type Service struct {
	Store      *ledger.Store
	Metrics    *Metrics
	Logger     *zap.Logger
	Models     map[string]*Model // by ID
	Signatures *SignatureCache
	// ImageSpool bounds the image edit uploads spooled to temporary files.
	ImageSpool *images.Spool
	// Currency names the money unit.
	Currency string
	// MinOutput is the least number of output tokens a balance must cover
	// for a request to go ahead with a lowered output cap.
	MinOutput int
	// MaxAttempts is how many upstream attempts a request may make before
	// the first byte reaches the client.
	MaxAttempts int
	// MaxRequestBody is the largest request body accepted, in bytes (twice
	// that for an image edit form).
	MaxRequestBody int64
	// KeepAlive is how long an upstream may be silent before an Anthropic
	// client of a translated stream gets a ping; 0: DefaultKeepAlive.
	KeepAlive time.Duration
	// OnKeyCapRefused, if set, is told of each request refused because
	// its key's spend cap does not cover it (the key's 100 % alert). It
	// must not block.
	OnKeyCapRefused func(accountID, keyID string)

	imageModels []*Model // the models with an OpenAI-format route
}

// Prepare derives what the service needs from its models; call it once
// the catalogue is complete and its providers are set up.
func (s *Service) Prepare() {
	s.imageModels = s.imageModels[:0]
	for _, m := range s.Models {
		m.prepare()
		if len(m.imageRoutes.index) > 0 {
			s.imageModels = append(s.imageModels, m)
		}
	}
}

// keepAlive is the ping interval of Anthropic streams.
func (s *Service) keepAlive() time.Duration {
	if s.KeepAlive > 0 {
		return s.KeepAlive
	}
	return DefaultKeepAlive
}

// Provider is an upstream provider as a request sees it.
type Provider struct {
	*upstream.Provider
	// AnthropicVersion is the anthropic-version header an Anthropic
	// provider receives.
	AnthropicVersion string
	// AnthropicBetas are the anthropic-beta values it receives from
	// clients; others are dropped and named.
	AnthropicBetas map[string]bool
	// ResponsesAPI marks an OpenAI-format provider with POST /v1/responses.
	ResponsesAPI bool
	// FirstByteTimeout bounds the wait for a stream's first event;
	// ResponseTimeout a non-streamed answer; DrainTimeout the reading of a
	// stream whose client left.
	FirstByteTimeout, ResponseTimeout, DrainTimeout time.Duration
	// StopOnHangup says that a stream whose client hangs up is stopped at
	// once and billed what was counted (on_hangup stop), rather than read
	// to its end (drain).
	StopOnHangup bool
	// Upstream sends one HTTP request to the provider (dialing, TLS,
	// connection pools).
	Upstream http.RoundTripper
}

// Route is one way to serve a model: a provider and its name for the model.
type Route struct {
	Provider      *Provider
	UpstreamModel string
	Weight        int // a share of traffic among routes; 0: failover order only
}

// Model is a model customers may call, with its routes and prices.
type Model struct {
	ID        string
	OwnedBy   string
	Created   int64 // Unix time it was first served
	Price     ledger.Price
	MaxOutput int // the default and the cap of a request's output tokens
	Routes    []Route
	// Doc is its OpenAI model object, for GET /v1/models.
	Doc []byte

	// ImagePrice is what one image costs when the upstream reports no
	// token usage; 0 when not configured.
	ImagePrice ledger.Money
	// Reasoning and StructuredOutputs say what the upstream model can do
	// beyond plain generation, so that a translated request keeps them.
	Reasoning, StructuredOutputs bool

	routes      routeSet // every route, for the scheduler
	imageRoutes routeSet // the routes to OpenAI-format providers, which make images

	hostedPrice  ledger.HostedPrice                // one use of each hosted tool
	hostedPriced [formats.HostedUnmetered + 1]bool // by kind: a price is set
	stateful     [formats.StateBackground]bool     // by state: allowed
}

// prepare derives the scheduler's candidates from the routes.
func (m *Model) prepare() {
	m.routes, m.imageRoutes = routeSet{}, routeSet{}
	for i := range m.Routes {
		m.routes.add(m, i)
		if m.Routes[i].Provider.Format == upstream.FormatOpenAI {
			m.imageRoutes.add(m, i)
		}
	}
}

// MakesImages reports whether the model has a route that makes images.
func (m *Model) MakesImages() bool { return len(m.imageRoutes.index) > 0 }

// Plan is a set of per-account limits, discounts and the models offered.
type Plan struct {
	Name             string
	RPM, Concurrency int // 0: unlimited
	DiscountBps      int // taken off every request, in basis points
	// Tiers are volume discounts by the account's spend in the current
	// calendar month, by ascending Above; a tier's discount is added to
	// DiscountBps (docs/billing.md, "Plan discounts and volume tiers").
	Tiers []Tier
	// Models are the models the plan offers, by ID; nil: every model.
	// A model the plan does not offer is, to its accounts, a model that
	// does not exist.
	Models map[string]*Model
}

// Tier is a volume discount: Bps basis points more off every request once
// the account's spend in the month is above Above.
type Tier struct {
	Above ledger.Money
	Bps   int
}

// TierBps is the discount of the tier in force at a month's spend: the
// highest tier whose Above the spend is above, or 0.
func (p *Plan) TierBps(spend ledger.Money) int {
	bps := 0
	for _, t := range p.Tiers {
		if spend <= t.Above {
			break
		}
		bps = t.Bps
	}
	return bps
}

// Model finds the model id for an account on plan p. It is not found when
// the catalogue has no such model or when p does not offer it: callers
// answer both alike (ModelNotFound), so that a plan does not tell its
// accounts which models it leaves out. It is one map lookup either way.
func (s *Service) Model(p *Plan, id string) (*Model, bool) {
	models := s.Models
	if p != nil && p.Models != nil {
		models = p.Models
	}
	m, ok := models[id]
	return m, ok
}

// Principal is an authenticated caller: the key, its account and plan.
type Principal struct {
	ledger.Principal
	Plan *Plan
}
