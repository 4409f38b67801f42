package gateway

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/reverseproxy"

	"github.com/modelgate/modelgate/relay"
)

func init() {
	caddy.RegisterModule(Transport{})
}

// Transport is the reverse-proxy transport of modelgate. For each attempt it
// picks an upstream key, sends the request in the provider's format (the
// client's own bytes with the model rewritten, when the formats match), and
// wraps the answer in a translator that rewrites it event by event into the
// client's format while it meters usage and settles the bill.
//
// The modelgate app builds one per provider, with TLS and dialing delegated
// to the embedded HTTPTransport; it is not configured inside reverse_proxy.
type Transport struct {
	*reverseproxy.HTTPTransport

	provider *provider
}

// CaddyModule returns the Caddy module information.
func (Transport) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "http.reverse_proxy.transport.modelgate",
		New: func() caddy.Module { return &Transport{HTTPTransport: new(reverseproxy.HTTPTransport)} },
	}
}

// Provision sets up the underlying HTTP transport.
func (t *Transport) Provision(ctx caddy.Context) error {
	if t.provider == nil {
		return errors.New("the modelgate transport is set up by the modelgate app from its providers; it cannot be used in a reverse_proxy block")
	}
	return t.HTTPTransport.Provision(ctx)
}

// RoundTrip sends one attempt of the call the handler put in the request's
// context.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	return relay.RoundTrip(req)
}

// Interface guards
var (
	_ caddy.Provisioner         = (*Transport)(nil)
	_ caddy.CleanerUpper        = (*Transport)(nil)
	_ http.RoundTripper         = (*Transport)(nil)
	_ reverseproxy.TLSTransport = (*Transport)(nil)
)

// dialMarking is the provider's HTTP transport as the relay uses it: a
// failure to connect is marked relay.ErrConnect, so that the relay tells it
// from a broken connection without knowing reverse_proxy's error types.
type dialMarking struct{ rt http.RoundTripper }

// RoundTrip implements http.RoundTripper.
func (d dialMarking) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := d.rt.RoundTrip(req)
	var dial reverseproxy.DialError
	if err != nil && errors.As(err, &dial) {
		err = fmt.Errorf("%w: %w", relay.ErrConnect, err)
	}
	return resp, err
}

// noNext is the next handler of the providers' proxies: never reached.
type noNext struct{}

func (noNext) ServeHTTP(http.ResponseWriter, *http.Request) error { return nil }
