package upstream

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"sync/atomic"
	"time"
)

// Format is the wire format a provider speaks.
type Format string

// The formats a provider may speak.
const (
	FormatOpenAI    Format = "openai"
	FormatAnthropic Format = "anthropic"
	FormatGemini    Format = "gemini"
)

// ParseFormat checks a format name.
func ParseFormat(s string) (Format, error) {
	switch f := Format(s); f {
	case FormatOpenAI, FormatAnthropic, FormatGemini:
		return f, nil
	}
	return "", fmt.Errorf("unknown format %q (want openai, anthropic or gemini)", s)
}

// MaxWeight bounds a key's weight.
const MaxWeight = 1_000_000

// strideUnit is the virtual time a weight-1 key's turn costs in the
// weighted rotation; a weight-w key's costs strideUnit/w.
const strideUnit = 1 << 30

// KeySpec is a key as configured: its secret and its weight (its share of
// the provider's traffic relative to the other keys; 0 means 1).
type KeySpec struct {
	Secret string
	Weight int
}

// Key is one upstream account of a provider. Its secret is never logged:
// logs, metrics and usage rows name it by ID.
type Key struct {
	// ID names the key without revealing it: the provider name and a short
	// hash of the secret, stable across reloads and reordering.
	ID     string
	secret string
	weight int64
	stride uint64
	st     *keyState
}

// Secret is the credential to send upstream.
func (k *Key) Secret() string { return k.secret }

// Weight is the key's weight (at least 1).
func (k *Key) Weight() int { return int(k.weight) }

// InFlight is the number of requests the key is serving now, counted
// across every Provider built for it from one Registry.
func (k *Key) InFlight() int64 { return k.st.inFlight.Load() }

// Done marks the end of a request that Pick gave this key.
func (k *Key) Done() { k.st.inFlight.Add(-1) }

// Breaker is the state of the key's circuit breaker at now.
func (k *Key) Breaker(now time.Time) BreakerState {
	k.st.mu.Lock()
	defer k.st.mu.Unlock()
	return k.st.br.state(now.UnixNano())
}

// KeyID derives the public ID of a provider's key from its secret.
func KeyID(provider, secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return provider + "/" + hex.EncodeToString(sum[:4])
}

// Provider is an upstream LLM service as one configuration declares it. Its
// health lives in the Registry that built it, shared with every Provider of
// the same name from that Registry.
type Provider struct {
	Name   string
	Format Format
	// Scheme, Host and PathPrefix come from the base URL: requests go to
	// Scheme://Host + PathPrefix + the format's route.
	Scheme     string
	Host       string // host[:port] as written in the base URL, for the Host header
	ServerName string // host name without port, for TLS
	PathPrefix string // without a trailing slash
	// DialAddress is host:port with the scheme's default port filled in.
	DialAddress string

	keys  []*Key
	hc    HealthConfig // with defaults
	state *providerState
	next  atomic.Uint64 // Pick's rotation
}

// NewProvider builds a provider with equal-weight keys, default health
// settings and a Registry of its own, so its health does not survive a
// reload. The gateway uses Registry.NewProvider.
func NewProvider(name string, format Format, baseURL string, secrets []string) (*Provider, error) {
	keys := make([]KeySpec, len(secrets))
	for i, s := range secrets {
		keys[i].Secret = s
	}
	return NewRegistry(nil).NewProvider(name, format, baseURL, keys, HealthConfig{})
}

// NewProvider checks a provider's settings and builds it, attached to the
// registry's state for the provider's name and its keys' IDs: in-flight
// counts, cooldowns, breakers, availability counts and incidents carry over
// from the Providers built before under that name. If the format or base
// URL changed, the provider's breaker starts closed again (it is a new
// endpoint); its keys keep their state. The keys become the provider's
// current set, the one incidents look at. Nothing changes on error.
func (r *Registry) NewProvider(name string, format Format, baseURL string, keys []KeySpec, hc HealthConfig) (*Provider, error) {
	if name == "" {
		return nil, errors.New("provider without a name")
	}
	if _, err := ParseFormat(string(format)); err != nil {
		return nil, fmt.Errorf("provider %s: %w", name, err)
	}
	u, err := url.Parse(baseURL)
	if err != nil {
		return nil, fmt.Errorf("provider %s: base_url: %w", name, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("provider %s: base_url must start with http:// or https://", name)
	}
	if u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("provider %s: base_url must be scheme://host[:port][/path], without credentials, query or fragment", name)
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("provider %s: no keys", name)
	}
	hc, err = hc.WithDefaults()
	if err != nil {
		return nil, fmt.Errorf("provider %s: %w", name, err)
	}
	p := &Provider{
		Name:       name,
		Format:     format,
		Scheme:     u.Scheme,
		Host:       u.Host,
		ServerName: u.Hostname(),
		PathPrefix: strings.TrimSuffix(u.EscapedPath(), "/"),
		hc:         hc,
	}
	port := u.Port()
	if port == "" {
		port = "80"
		if u.Scheme == "https" {
			port = "443"
		}
	}
	p.DialAddress = net.JoinHostPort(u.Hostname(), port)
	seen := make(map[string]bool, len(keys))
	ids := make(map[string]bool, len(keys))
	for i, ks := range keys {
		switch {
		case ks.Secret == "":
			return nil, fmt.Errorf("provider %s: key %d is empty", name, i+1)
		case seen[ks.Secret]:
			return nil, fmt.Errorf("provider %s: key %d is listed twice", name, i+1)
		case ks.Weight < 0 || ks.Weight > MaxWeight:
			return nil, fmt.Errorf("provider %s: key %d: weight must be between 0 and %d", name, i+1, MaxWeight)
		}
		seen[ks.Secret] = true
		id := KeyID(name, ks.Secret)
		if ids[id] {
			return nil, fmt.Errorf("provider %s: key %d has the same ID as another key (%s); replace one of them", name, i+1, id)
		}
		ids[id] = true
		w := int64(max(ks.Weight, 1))
		p.keys = append(p.keys, &Key{ID: id, secret: ks.Secret, weight: w, stride: strideUnit / uint64(w)})
	}

	ps := r.state(name)
	p.state = ps
	endpoint := string(format) + " " + p.Scheme + "://" + p.Host + p.PathPrefix
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if ps.endpoint != "" && ps.endpoint != endpoint && ps.br.open {
		ps.br.reset()
		ps.publish()
	}
	ps.endpoint = endpoint
	ps.retired = false
	vt := ps.vt.Load()
	cur := make([]*keyState, len(p.keys))
	for i, k := range p.keys {
		st := ps.all[k.ID]
		if st == nil {
			st = &keyState{id: k.ID}
			st.pass.Store(vt) // a new key joins the rotation now, not at its start
			ps.all[k.ID] = st
		}
		k.st, cur[i] = st, st
	}
	ps.keys = cur
	ps.evalIncident(r.now(), CauseAuth, &p.hc)
	return p, nil
}

// Keys lists the provider's keys.
func (p *Provider) Keys() []*Key { return p.keys }

// HealthConfig is the provider's health configuration, defaults filled in.
func (p *Provider) HealthConfig() HealthConfig { return p.hc }

// Breaker is the state of the provider's circuit breaker at now.
func (p *Provider) Breaker(now time.Time) BreakerState {
	if p.state == nil {
		return BreakerClosed
	}
	p.state.mu.Lock()
	defer p.state.mu.Unlock()
	return p.state.br.state(now.UnixNano())
}

// Pick chooses a key the old way, ignoring health: the one with the fewest
// requests in flight, ties broken in turn. The caller must call Done on it.
// The gateway uses Choose, which honours weights, cooldowns and breakers
// and never hands out an unavailable key.
func (p *Provider) Pick() *Key {
	n := uint64(len(p.keys))
	start := p.next.Add(1)
	var best *Key
	for i := uint64(0); i < n; i++ {
		k := p.keys[(start+i)%n]
		if best == nil || k.InFlight() < best.InFlight() {
			best = k
		}
	}
	best.st.inFlight.Add(1)
	return best
}
