package gateway

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"

	"github.com/modelgate/modelgate/accounts"
	"github.com/modelgate/modelgate/ledger"
	"github.com/modelgate/modelgate/relay"
)

// ledgers holds the open ledgers by database, so that a config reload
// keeps balances, holds, the writer and the SQLite server lock.
var ledgers = caddy.NewUsagePool()

// ledgerHandle adapts a store to the usage pool. It keeps the gateway's
// metric series, which every config using the ledger registers, so that a
// reload keeps their values (Caddy's registry is per config). Its writer
// reports each commit to them, and key and account changes to the other
// instances through the newest config's Redis, if any. The balance
// changes, alert settings changes and key-cap refusals go to the running
// config's alerts watcher, if any (set by each config's Start, cleared by
// its Stop), since the store outlives configs.
type ledgerHandle struct {
	*ledger.Store
	series *relay.Metrics
	redis  atomic.Pointer[redis.Client]
	alerts atomic.Pointer[alertsRun]
}

// balanceChanged tells the running alerts watcher that an account's
// balance changed (ledger.Options.OnBalance): one map lookup for an
// account without alerts.
func (l *ledgerHandle) balanceChanged(accountID string) {
	if run := l.alerts.Load(); run != nil {
		run.watcher.Touch(accountID)
	}
}

// keyCapRefused tells the running alerts watcher that a request was
// refused for its key's cap.
func (l *ledgerHandle) keyCapRefused(accountID, keyID string) {
	if run := l.alerts.Load(); run != nil {
		run.watcher.KeyCapRefused(accountID, keyID)
	}
}

// changed announces a key or account change made through this store, and
// tells the running alerts watcher of an alert settings change.
func (l *ledgerHandle) changed(what string) {
	alertsChanged(l.alerts.Load(), what)
	rdb := l.redis.Load()
	if rdb == nil {
		return
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		if err := announce(ctx, rdb, what); err != nil {
			caddy.Log().Named("modelgate").Warn("could not announce a change through redis; other instances apply it at their next ledger poll",
				zap.String("what", what), zap.Error(err))
		}
	}()
}

// Destruct closes the store when the last config using it is gone.
func (l *ledgerHandle) Destruct() error { return l.Close() }

// committed observes one ledger write transaction.
func (l *ledgerHandle) committed(commands int, took time.Duration) {
	l.series.Committed(commands, took)
}

// prepareLedger checks the ledger settings and names the ledger in the
// pool; it creates no file and makes no connection (this is all `caddy
// validate` does with the ledger).
func (a *App) prepareLedger() error {
	a.ledgerOpts = ledger.Options{
		Synchronous:  a.Ledger.Synchronous,
		PollInterval: time.Duration(a.Ledger.PollInterval),
		BusyTimeout:  time.Duration(a.Ledger.BusyTimeout),
		Lease:        time.Duration(a.Ledger.Lease),
		MaxConns:     a.Ledger.MaxConns,
		Logger:       a.logger.Named("ledger"),
		// one server per SQLite file: each keeps its holds in its own
		// memory, so two would spend the same balance twice
		ServerLock: true,
	}
	if a.Ledger.Driver == "postgres" {
		dsn, err := caddy.NewReplacer().ReplaceOrErr(a.Ledger.DSN, true, true)
		if err != nil {
			return fmt.Errorf("ledger postgres: %w", err) // names the placeholder, never a value
		}
		a.ledgerOpts.Postgres = dsn
		// by a digest of the DSN, which holds a password and is never logged
		sum := sha256.Sum256([]byte(dsn))
		a.ledgerKey = "postgres:" + hex.EncodeToString(sum[:8])
	} else {
		// by absolute path, so that a reload spelling the path differently
		// keeps the store (and its server lock) rather than refusing itself
		path, err := filepath.Abs(a.Ledger.Path)
		if err != nil {
			return fmt.Errorf("ledger path: %w", err)
		}
		a.ledgerOpts.Path = path
		a.ledgerKey = "sqlite:" + path
	}
	return ledger.Check(a.ledgerOpts)
}

// ledgerDescription names the ledger for the log: the SQLite file's path,
// or the PostgreSQL DSN without its password.
func (a *App) ledgerDescription() string {
	if a.ledgerOpts.Postgres == "" {
		return "sqlite " + a.ledgerOpts.Path
	}
	return "postgres " + redactDSN(a.ledgerOpts.Postgres)
}

// openLedger opens the ledger, or takes it from a running config.
func (a *App) openLedger() (*ledgerHandle, error) {
	v, _, err := ledgers.LoadOrNew(a.ledgerKey, func() (caddy.Destructor, error) {
		h := &ledgerHandle{series: relay.NewMetrics()}
		opts := a.ledgerOpts
		opts.OnCommit, opts.OnChange, opts.OnBalance = h.committed, h.changed, h.balanceChanged
		s, err := ledger.Open(a.ctx, opts)
		if err != nil {
			return nil, err
		}
		h.Store = s
		return h, nil
	})
	if err != nil {
		return nil, fmt.Errorf("opening ledger: %w", err)
	}
	return v.(*ledgerHandle), nil
}

// releaseLedger gives back this config's hold on the ledger; the last
// config to let go closes it.
func (a *App) releaseLedger() error {
	if a.heldLedger == nil {
		return nil
	}
	a.heldLedger = nil
	_, err := ledgers.Delete(a.ledgerKey)
	return err
}

// useLedger wires what needs the ledger: the models' creation dates and
// documents, the metrics, the request layer and the accounts service.
func (a *App) useLedger(h *ledgerHandle) error {
	ctx := a.ctx
	a.store = h.Store
	for _, m := range a.modelList {
		created, err := a.store.RegisterModel(ctx, m.ID)
		if err != nil {
			return fmt.Errorf("registering model %s: %w", m.ID, err)
		}
		m.Created = created.Unix()
		m.Doc = modelDoc(m)
	}
	a.modelList = sortedModels(a.modelList)
	a.modelsDoc = modelListDoc(a.modelList)
	a.buildPlanLists()
	if a.freshRegistry {
		// a new process starts with every provider up: end the incidents
		// a previous one left open
		a.closeStaleIncidents(ctx)
	}
	// the ledger's series, registered on this config's registry: a reload
	// keeps their values
	if err := h.series.Register(ctx.GetMetricsRegistry(), a.store, breakerCollector{a}); err != nil {
		return err
	}
	a.metrics = h.series
	h.redis.Store(a.heldLimiter.rdb)
	a.heldLimiter.store.Store(a.store)
	a.svc = &relay.Service{
		Store:          a.store,
		Metrics:        a.metrics,
		Logger:         a.logger,
		Models:         a.models,
		Signatures:     a.signatures,
		ImageSpool:     a.imageSpool,
		Currency:       a.Currency,
		MinOutput:      a.MinOutput,
		MaxAttempts:    a.MaxAttempts,
		MaxRequestBody: a.MaxRequestBody,
		KeepAlive:      time.Duration(a.KeepAliveInterval),

		OnKeyCapRefused: h.keyCapRefused,
	}
	a.svc.Prepare()
	a.accounts = &accounts.Service{Store: a.store, DefaultPlan: a.DefaultPlan, Plan: func(name string) bool { return a.plans[name] != nil },
		Offer: a.keyOffer}
	return nil
}
