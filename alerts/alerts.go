// Package alerts decides when an account's alert thresholds are crossed
// and delivers the crossings: a mail, a signed webhook, an automatic
// top-up's charge.
//
// A Watcher keeps the settings of the accounts that watch anything in
// memory and a set of the accounts touched (their balance changed) since
// its last look; every tick it evaluates each touched account once, never
// once per request. A crossing is fired in the ledger (one row per alert
// and period, which only one caller on any instance inserts) together with
// its deliveries, in one transaction: the ledger's outbox. A Worker, on
// every instance, claims due deliveries under a lease, tries them and
// finishes them: done, due again after a back-off, or failed for good.
//
// It is plain Go: the gateway makes one Watcher and one Worker per running
// configuration and feeds the Watcher from ledger.Options.OnBalance.
package alerts

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/modelgate/modelgate/ledger"
	"github.com/modelgate/modelgate/mailer"
)

// Defaults of Config.
const (
	// DefaultInterval is how often the Watcher evaluates touched accounts.
	DefaultInterval = time.Second
	// DefaultReload is how often the Watcher reloads every watched
	// account's settings (changes made on another instance show within
	// it; Invalidate shows them at once).
	DefaultReload = 30 * time.Second
	// DefaultRetryBase is the first retry's delay; the later ones grow
	// from it (RetryDelay).
	DefaultRetryBase = 10 * time.Second
	// DefaultLease is how long a worker holds a claimed delivery before
	// another may claim it again.
	DefaultLease = time.Minute
	// DefaultWorkers is how many deliveries a Worker tries at once.
	DefaultWorkers = 4
	// WebhookTimeout bounds one webhook attempt, from the connection to
	// the answer's status.
	WebhookTimeout = 10 * time.Second
)

// Config is what a Watcher and a Worker share.
type Config struct {
	// Store is the ledger: settings, balances, the fired alerts and the
	// outbox.
	Store *ledger.Store
	// Mailer sends the mails; nil sends none (and no mail delivery is
	// written).
	Mailer *mailer.Mailer
	// Charger charges automatic top-ups; nil fails them with a reason.
	Charger Charger
	// Currency is the gateway's currency (ISO code, any case): the
	// payloads carry it in lower case, the mails in upper case.
	Currency string
	// ServiceName names the service in the mails' subjects and text.
	// Default: "modelgate".
	ServiceName string
	// ConsoleURL is the console's address, linked from the mails to
	// change the alerts or top up; "" leaves the link out.
	ConsoleURL string
	// Interval, Reload, RetryBase and Lease: see their defaults.
	Interval, Reload, RetryBase, Lease time.Duration
	// Workers is how many deliveries a Worker tries at once.
	Workers int
	// AllowPrivateWebhooks lets webhooks reach loopback, private,
	// link-local, unspecified and multicast addresses, which are refused
	// by default: customers choose the URLs.
	AllowPrivateWebhooks bool
	// Instance names this worker's claims. Default: a random id.
	Instance string
	// OnDelivery, if set, is told of each finished try: its channel and
	// its outcome ("done", "retry", "failed"). It must not block.
	OnDelivery func(channel, outcome string)
	// Logger may be nil.
	Logger *zap.Logger
	// Now is the clock. Default: time.Now.
	Now func() time.Time
}

// withDefaults fills what cfg left unset.
func (cfg Config) withDefaults() Config {
	if cfg.ServiceName == "" {
		cfg.ServiceName = "modelgate"
	}
	if cfg.Currency == "" {
		cfg.Currency = "USD"
	}
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultInterval
	}
	if cfg.Reload <= 0 {
		cfg.Reload = DefaultReload
	}
	if cfg.RetryBase <= 0 {
		cfg.RetryBase = DefaultRetryBase
	}
	if cfg.Lease <= 0 {
		cfg.Lease = DefaultLease
	}
	if cfg.Workers <= 0 {
		cfg.Workers = DefaultWorkers
	}
	if cfg.Instance == "" {
		cfg.Instance = "worker_" + randomID()
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return cfg
}

// currencyCode is the payloads' currency: lower case.
func (cfg Config) currencyCode() string { return strings.ToLower(cfg.Currency) }

// randomID is 24 random hex digits.
func randomID() string {
	var b [12]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (it panics first)
	return hex.EncodeToString(b[:])
}

// sleep waits d or until ctx ends, and reports whether ctx is still live.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
