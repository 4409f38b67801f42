package gateway

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestAdminPrivate(t *testing.T) {
	for _, tc := range []struct {
		listen string
		local  net.Addr
		tls    bool
		want   bool
	}{
		{listen: "tcp/localhost:2019", want: true},
		{listen: "tcp/127.0.0.1:2019", want: true},
		{listen: "tcp/[::1]:2019", want: true},
		{listen: "unix//run/caddy/admin.sock", want: true},
		{listen: "tcp/:2019"},
		{listen: "tcp/0.0.0.0:2019", local: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)}},
		{listen: "tcp/192.0.2.1:2019"},
		{listen: "tcp/admin.example.com:2019"},
		{listen: "tcp/0.0.0.0:2019", tls: true, want: true}, // the remote admin endpoint: client certificates
		{local: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)}, want: true},
		{local: &net.TCPAddr{IP: net.IPv4(192, 0, 2, 1)}},
		{},
	} {
		ctx := context.Background()
		if tc.listen != "" {
			ctx = context.WithValue(ctx, http.ServerContextKey, &http.Server{Addr: tc.listen})
		}
		if tc.local != nil {
			ctx = context.WithValue(ctx, http.LocalAddrContextKey, tc.local)
		}
		r := httptest.NewRequestWithContext(ctx, "GET", "/modelgate/accounts/x", nil)
		r.TLS = nil
		if tc.tls {
			r.TLS = &tls.ConnectionState{VerifiedChains: [][]*x509.Certificate{{{}}}}
		}
		if got := adminPrivate(r); got != tc.want {
			t.Errorf("listen %q, local %v, tls %v: %v", tc.listen, tc.local, tc.tls, got)
		}
	}
}
