package gateway

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp/reverseproxy"

	"github.com/modelgate/modelgate/relay"
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
