package gateway

import (
	"context"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/modelgate/modelgate/alerts"
)

// AlertsConfig tunes the accounts' alerts (balance, month spend, key
// caps) and automatic top-ups. Alerts work without it whenever an account
// sets them; mail goes out only with an smtp option.
type AlertsConfig struct {
	// Interval is how often the instance looks at the accounts whose
	// balance changed since its last look (each once, never once per
	// request), and for due deliveries. Default: 1s.
	Interval caddy.Duration `json:"interval,omitempty"`
	// ReloadInterval is how often the instance rereads every account's
	// alert settings (a change made through this instance, or announced
	// through Redis, applies at once). Default: 30s.
	ReloadInterval caddy.Duration `json:"reload_interval,omitempty"`
	// RetryBase is the delay before a failed delivery's first retry; the
	// later ones grow from it (×3, ×12, ×60, ×180, ×360, ×1080, ×2160:
	// 10s, 30s, 2m, 10m, 30m, 1h, 3h, 6h by default), then it has failed
	// for good. Default: 10s.
	RetryBase caddy.Duration `json:"retry_base,omitempty"`
	// AllowPrivateWebhooks lets webhooks reach loopback, private,
	// link-local, unspecified and multicast addresses. Customers choose
	// their webhooks' URLs, so by default those addresses are refused
	// (checked on the address connected to, after name resolution).
	AllowPrivateWebhooks bool `json:"allow_private_webhooks,omitempty"`
}

// alertsRun is one configuration's watcher and worker.
type alertsRun struct {
	watcher *alerts.Watcher
	worker  *alerts.Worker
}

// startAlerts starts the configuration's alerts watcher and delivery
// worker on the background of Start, and points the ledger's balance
// changes, settings changes and key-cap refusals at them.
func (a *App) startAlerts(ctx context.Context) {
	ac := a.Alerts
	if ac == nil {
		ac = new(AlertsConfig)
	}
	cfg := alerts.Config{
		Store:                a.store,
		Mailer:               a.mailer,
		Charger:              a.Charger,
		Currency:             a.Currency,
		Interval:             time.Duration(ac.Interval),
		Reload:               time.Duration(ac.ReloadInterval),
		RetryBase:            time.Duration(ac.RetryBase),
		AllowPrivateWebhooks: ac.AllowPrivateWebhooks,
		Logger:               a.logger.Named("alerts"),
		OnDelivery:           a.metrics.AlertDelivery,
	}
	if u := a.publicURL; u != nil {
		cfg.ServiceName = u.Hostname()
		cfg.ConsoleURL = u.Scheme + "://" + u.Host + u.Path + "/console/"
	}
	worker := alerts.NewWorker(cfg)
	run := &alertsRun{watcher: alerts.NewWatcher(cfg, worker.Wake), worker: worker}
	a.alerts = run
	a.heldLedger.alerts.Store(run)
	if a.heldLimiter != nil {
		a.heldLimiter.alerts.Store(run)
	}
	a.background.Add(2)
	go func() {
		defer a.background.Done()
		run.watcher.Run(ctx)
	}()
	go func() {
		defer a.background.Done()
		run.worker.Run(ctx)
	}()
}

// stopAlerts unhooks this configuration's watcher, unless a newer
// configuration's replaced it already (a reload starts the new before
// it stops the old); Stop then ends both.
func (a *App) stopAlerts() {
	if a.alerts == nil {
		return
	}
	if a.heldLedger != nil {
		a.heldLedger.alerts.CompareAndSwap(a.alerts, nil)
	}
	if a.heldLimiter != nil {
		a.heldLimiter.alerts.CompareAndSwap(a.alerts, nil)
	}
}

// alertsChanged passes a ledger change to the running watcher: a balance
// ("balance:ID") or alert settings ("alerts:ID").
func alertsChanged(run *alertsRun, what string) {
	if run == nil {
		return
	}
	if id, ok := strings.CutPrefix(what, "alerts:"); ok {
		run.watcher.Invalidate(id)
	}
}

// parseAlerts parses the alerts block (docs/caddyfile.md, "alerts"); the
// cursor is on "alerts".
func parseAlerts(d *caddyfile.Dispenser) (*AlertsConfig, error) {
	if d.NextArg() {
		return nil, d.Err("usage: alerts { [interval <duration>] [reload_interval <duration>] [retry_base <duration>] [allow_private_webhooks] }")
	}
	ac := new(AlertsConfig)
	seen := map[string]bool{}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		opt := d.Val()
		if seen[opt] {
			return nil, d.Errf("alerts: %s already specified", opt)
		}
		seen[opt] = true
		var err error
		switch opt {
		case "interval":
			ac.Interval, err = durationArg(d)
		case "reload_interval":
			ac.ReloadInterval, err = durationArg(d)
		case "retry_base":
			ac.RetryBase, err = durationArg(d)
		case "allow_private_webhooks":
			if d.NextArg() {
				return nil, d.ArgErr()
			}
			ac.AllowPrivateWebhooks = true
		default:
			err = d.Errf("alerts: unrecognized option %q", opt)
		}
		if err != nil {
			return nil, err
		}
	}
	return ac, nil
}
