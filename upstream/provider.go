// Package upstream holds what the gateway knows about the LLM providers it
// calls: their wire format, base address and keys (upstream accounts), and
// which key serves the next request. It is plain Go; the Caddy glue in the
// root package builds providers from the configuration.
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

// Key is one upstream account of a provider. Its secret is never logged:
// logs, metrics and usage rows name it by ID.
type Key struct {
	// ID names the key without revealing it: the provider name and a short
	// hash of the secret, stable across reloads and reordering.
	ID       string
	secret   string
	inFlight atomic.Int64
}

// Secret is the credential to send upstream.
func (k *Key) Secret() string { return k.secret }

// InFlight is the number of requests the key is serving now.
func (k *Key) InFlight() int64 { return k.inFlight.Load() }

// Done marks the end of a request that Pick gave this key.
func (k *Key) Done() { k.inFlight.Add(-1) }

// KeyID derives the public ID of a provider's key from its secret.
func KeyID(provider, secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return provider + "/" + hex.EncodeToString(sum[:4])
}

// Provider is an upstream LLM service.
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

	keys []*Key
	next atomic.Uint64
}

// NewProvider checks a provider's settings and builds it.
func NewProvider(name string, format Format, baseURL string, secrets []string) (*Provider, error) {
	if name == "" {
		return nil, errors.New("provider without a name")
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
	if len(secrets) == 0 {
		return nil, fmt.Errorf("provider %s: no keys", name)
	}
	p := &Provider{
		Name:       name,
		Format:     format,
		Scheme:     u.Scheme,
		Host:       u.Host,
		ServerName: u.Hostname(),
		PathPrefix: strings.TrimSuffix(u.EscapedPath(), "/"),
	}
	port := u.Port()
	if port == "" {
		port = "80"
		if u.Scheme == "https" {
			port = "443"
		}
	}
	p.DialAddress = net.JoinHostPort(u.Hostname(), port)
	seen := make(map[string]bool, len(secrets))
	for i, s := range secrets {
		if s == "" {
			return nil, fmt.Errorf("provider %s: key %d is empty", name, i+1)
		}
		if seen[s] {
			return nil, fmt.Errorf("provider %s: key %d is listed twice", name, i+1)
		}
		seen[s] = true
		p.keys = append(p.keys, &Key{ID: KeyID(name, s), secret: s})
	}
	return p, nil
}

// Keys lists the provider's keys.
func (p *Provider) Keys() []*Key { return p.keys }

// Pick chooses the key for the next request: the one with the fewest requests
// in flight, ties broken in turn. The caller must call Done on it.
func (p *Provider) Pick() *Key {
	n := uint64(len(p.keys))
	start := p.next.Add(1)
	var best *Key
	for i := uint64(0); i < n; i++ {
		k := p.keys[(start+i)%n]
		if best == nil || k.inFlight.Load() < best.inFlight.Load() {
			best = k
		}
	}
	best.inFlight.Add(1)
	return best
}
