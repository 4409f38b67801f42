package gateway

import (
	"net/http"
	"net/url"

	"github.com/modelgate/modelgate/accounts"
	"github.com/modelgate/modelgate/formats/images"
	"github.com/modelgate/modelgate/ledger"
	"github.com/modelgate/modelgate/mailer"
	"github.com/modelgate/modelgate/payments"
	"github.com/modelgate/modelgate/relay"
	"github.com/modelgate/modelgate/upstream"
)

// What the page modules (console, status, lookup) use of the app.

// Store is the ledger the app uses.
func (a *App) Store() *ledger.Store { return a.store }

// PaymentProvider is the payment provider, or nil without a payments
// option.
func (a *App) PaymentProvider() payments.Provider { return a.payments }

// Mailer sends the console's mail, or is nil without an smtp option.
func (a *App) Mailer() *mailer.Mailer { return a.mailer }

// PublicAddress is the expanded public_url, or nil without one.
func (a *App) PublicAddress() *url.URL { return a.publicURL }

// Metrics are the app's collectors.
func (a *App) Metrics() *relay.Metrics { return a.metrics }

// BlockedRegion reports whether the request comes from a country
// block_countries lists (Caddy's client IP, honouring trusted proxies).
func (a *App) BlockedRegion(r *http.Request) bool { return a.blockedRegion(r) }

// DisplayName is the name the public status page shows for the provider
// named name: its display_name, or else its name.
func (a *App) DisplayName(name string) string {
	for _, pc := range a.Providers {
		if pc.Name == name && pc.DisplayName != "" {
			return pc.DisplayName
		}
	}
	return name
}

// Upstreams are the providers, in the order of the configuration.
func (a *App) Upstreams() []*upstream.Provider {
	out := make([]*upstream.Provider, 0, len(a.Providers))
	for _, pc := range a.Providers {
		out = append(out, a.providers[pc.Name].Provider.Provider)
	}
	return out
}

// RunningLedger is the ledger a running configuration opened at the SQLite
// path path (absolute), or nil: for programs that embed Caddy and share its
// store, and for the tests, which read balances where the gateway writes them.
func RunningLedger(path string) *ledger.Store {
	var s *ledger.Store
	ledgers.Range(func(key, value any) bool {
		if key == "sqlite:"+path {
			s = value.(*ledgerHandle).Store
			return false
		}
		return true
	})
	return s
}

// RunningImageSpool is the bound on the image edit uploads spooled by the
// running configurations, or nil.
func RunningImageSpool() *images.Spool {
	var sp *images.Spool
	imageSpools.Range(func(_, v any) bool {
		sp = v.(spoolHandle).Spool
		return false
	})
	return sp
}

// Accounts opens and funds accounts in the app's ledger.
func (a *App) Accounts() *accounts.Service { return a.accounts }
