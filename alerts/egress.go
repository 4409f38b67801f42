package alerts

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"syscall"
	"time"
)

// Customers choose their webhooks' URLs: by default a webhook may not
// reach the gateway's own host or network (loopback, private, link-local,
// unspecified and multicast addresses, in IPv4 and IPv6). The address is
// checked when the connection is made, after the name was resolved, so
// that a name resolving to a public address at one moment and a private
// one the next (DNS rebinding) cannot get around it.

// ErrPrivateAddress is a webhook refused for the address it resolved to.
var ErrPrivateAddress = errors.New("the webhook's address is loopback, private, link-local, unspecified or multicast, which webhooks may not reach (the operator's allow_private_webhooks option allows it)")

// forbidden reports whether a webhook may not connect to ip.
func forbidden(ip netip.Addr) bool {
	ip = ip.Unmap()
	return ip.IsLoopback() || ip.IsPrivate() || ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() ||
		ip.IsInterfaceLocalMulticast() || ip.IsMulticast() || ip.IsUnspecified() ||
		// 100.64.0.0/10, carrier-grade NAT: private in all but name
		netip.MustParsePrefix("100.64.0.0/10").Contains(ip)
}

// checkDial is a net.Dialer's Control: it refuses a forbidden address.
func checkDial(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("%w: %s", ErrPrivateAddress, address)
	}
	if forbidden(ap.Addr()) {
		return fmt.Errorf("%w: %s", ErrPrivateAddress, ap.Addr())
	}
	return nil
}

// webhookClient is the HTTP client of the webhooks: no proxy from the
// environment (it would be dialled instead of the receiver), no redirects
// followed (an answer that is not 2xx is retried), each attempt bounded
// by WebhookTimeout, and unless allowPrivate, the addresses checked.
func webhookClient(allowPrivate bool) *http.Client {
	d := &net.Dialer{Timeout: WebhookTimeout, KeepAlive: 30 * time.Second}
	if !allowPrivate {
		d.Control = checkDial
	}
	t := &http.Transport{
		DialContext:           d.DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          16,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   WebhookTimeout,
		ResponseHeaderTimeout: WebhookTimeout,
	}
	return &http.Client{
		Transport: t,
		Timeout:   WebhookTimeout,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
}
