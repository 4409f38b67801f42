package alerts

import (
	"context"
	"errors"
	"maps"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/modelgate/modelgate/ledger"
)

// Watcher sees the crossings of the watched accounts' thresholds. Its
// hot path, Touch, costs an account without settings one map lookup; the
// work is done once a tick for each account touched since the last.
type Watcher struct {
	cfg Config
	// settings are the watched accounts' settings by account: an
	// immutable map, replaced whole, so that Touch reads it without a
	// lock.
	settings atomic.Pointer[map[string]ledger.AlertSettings]

	mu sync.Mutex
	// touched are the accounts to evaluate at the next tick, each with the
	// keys a request was refused for by their cap (nil: none).
	touched map[string]map[string]bool
	// invalid are the accounts whose settings changed.
	invalid map[string]bool

	notesMu sync.Mutex
	notes   map[string]*notes

	// fired is told when this watcher fired an alert, so that the worker
	// need not wait for its next poll. It must not block.
	fired func()
}

// notes is what the watcher knows of an account's fired alerts, so that a
// healthy account costs no write per tick: an alert not noted as fired
// needs no re-arming. It is read from the ledger at the first look and
// again after each reload of the settings (another instance may have
// re-armed or fired since).
type notes struct {
	mu     sync.Mutex // held through an evaluation of the account
	loaded bool
	fired  map[string]bool
}

// NewWatcher returns a watcher; Run starts it. fired, if not nil, is
// called (it must not block) when the watcher fired an alert with
// deliveries: a Worker's Wake, so that they leave at once.
func NewWatcher(cfg Config, fired func()) *Watcher {
	if fired == nil {
		fired = func() {}
	}
	return &Watcher{cfg: cfg.withDefaults(), touched: map[string]map[string]bool{}, invalid: map[string]bool{},
		notes: map[string]*notes{}, fired: fired}
}

// watched is the account's settings, if it watches anything.
func (w *Watcher) watched(accountID string) (ledger.AlertSettings, bool) {
	m := w.settings.Load()
	if m == nil {
		return ledger.AlertSettings{}, false
	}
	st, ok := (*m)[accountID]
	return st, ok
}

// isWatched reports whether the account watches anything, without
// copying its settings (Touch runs after every settle).
func (w *Watcher) isWatched(accountID string) bool {
	m := w.settings.Load()
	if m == nil {
		return false
	}
	_, ok := (*m)[accountID]
	return ok
}

// Touch tells that the account's balance or spend changed: it is
// evaluated at the next tick if it watches anything. It never blocks on
// I/O (ledger.Options.OnBalance).
func (w *Watcher) Touch(accountID string) {
	if !w.isWatched(accountID) {
		return
	}
	w.mu.Lock()
	if _, ok := w.touched[accountID]; !ok {
		w.touched[accountID] = nil
	}
	w.mu.Unlock()
}

// KeyCapRefused tells that a request of the account was refused because
// its key's cap does not cover it: the key's 100 % alert fires at the next
// tick, even when the key's spend stopped short of the cap (a capped
// key's hold is bounded by what the cap leaves).
func (w *Watcher) KeyCapRefused(accountID, keyID string) {
	st, ok := w.watched(accountID)
	if !ok || !st.KeyCaps {
		return
	}
	w.mu.Lock()
	if w.touched[accountID] == nil {
		w.touched[accountID] = map[string]bool{}
	}
	w.touched[accountID][keyID] = true
	w.mu.Unlock()
}

// Invalidate tells that the account's settings changed (the console and
// the admin API call it after a change): the watcher reads them again and
// evaluates the account at the next tick.
func (w *Watcher) Invalidate(accountID string) {
	w.mu.Lock()
	w.invalid[accountID] = true
	w.mu.Unlock()
}

// Reload reads every watched account's settings and forgets what it knew
// of their fired alerts (read again at their next look).
func (w *Watcher) Reload(ctx context.Context) error {
	list, err := w.cfg.Store.WatchedAccounts(ctx)
	if err != nil {
		return err
	}
	m := make(map[string]ledger.AlertSettings, len(list))
	for _, st := range list {
		m[st.AccountID] = st
	}
	w.settings.Store(&m)
	w.notesMu.Lock()
	clear(w.notes)
	w.notesMu.Unlock()
	return nil
}

// Run evaluates the touched accounts every Interval and reloads the
// settings every Reload, until ctx ends. At its start it evaluates every
// watched account once (a crossing while no instance ran).
func (w *Watcher) Run(ctx context.Context) {
	for {
		err := w.Reload(ctx)
		if err == nil {
			break
		}
		w.cfg.Logger.Warn("alerts: could not load the watched accounts; trying again", zap.Error(err))
		if !sleep(ctx, w.cfg.Interval) {
			return
		}
	}
	if m := w.settings.Load(); m != nil {
		w.mu.Lock()
		for id := range *m {
			w.touched[id] = nil
		}
		w.mu.Unlock()
	}
	tick := time.NewTicker(w.cfg.Interval)
	defer tick.Stop()
	reload := time.NewTicker(w.cfg.Reload)
	defer reload.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-reload.C:
			if err := w.Reload(ctx); err != nil && ctx.Err() == nil {
				w.cfg.Logger.Warn("alerts: could not reload the watched accounts", zap.Error(err))
			}
		case <-tick.C:
			w.Tick(ctx)
		}
	}
}

// Tick reads the settings of the invalidated accounts again, then
// evaluates each touched account once.
func (w *Watcher) Tick(ctx context.Context) {
	w.mu.Lock()
	touched, invalid := w.touched, w.invalid
	w.touched, w.invalid = map[string]map[string]bool{}, map[string]bool{}
	w.mu.Unlock()
	for id := range invalid {
		if err := w.refresh(ctx, id); err != nil {
			w.cfg.Logger.Warn("alerts: could not read an account's settings", zap.String("account", id), zap.Error(err))
			continue
		}
		if _, ok := touched[id]; !ok {
			touched[id] = nil
		}
	}
	for id, capped := range touched {
		if ctx.Err() != nil {
			return
		}
		if err := w.Evaluate(ctx, id, capped); err != nil && ctx.Err() == nil {
			w.cfg.Logger.Warn("alerts: could not evaluate an account", zap.String("account", id), zap.Error(err))
			// looked at again at the next tick
			w.mu.Lock()
			if _, ok := w.touched[id]; !ok {
				w.touched[id] = capped
			}
			w.mu.Unlock()
		}
	}
}

// refresh reads one account's settings again. A changed threshold is a
// new alert: the old one's crossing is re-armed, so that the new
// threshold, if crossed already, fires at the next look (a low balance,
// this month's spend); so is an automatic top-up turned off (turned on
// again, it tops up if the balance is below). Whichever instance hears of
// the change does it, once, for all.
func (w *Watcher) refresh(ctx context.Context, accountID string) error {
	st, err := w.cfg.Store.AlertSettingsOf(ctx, accountID)
	if err != nil {
		return err
	}
	old := w.settings.Load()
	m := map[string]ledger.AlertSettings{}
	if old != nil {
		m = maps.Clone(*old)
	}
	if prev, ok := m[accountID]; ok {
		var rearm []string
		if prev.LowBalance != st.LowBalance {
			rearm = append(rearm, alertLowBalance)
		}
		if prev.MonthSpend != st.MonthSpend {
			rearm = append(rearm, "month_spend:"+w.cfg.Now().UTC().Format("2006-01"))
		}
		if prev.AutoTopup.On && !st.AutoTopup.On {
			rearm = append(rearm, alertAutoTopup)
		}
		for _, alert := range rearm {
			if _, err := w.cfg.Store.RearmAlert(ctx, accountID, alert); err != nil {
				return err
			}
		}
	}
	if st.Any() {
		m[accountID] = st
	} else {
		delete(m, accountID)
	}
	w.settings.Store(&m)
	w.notesMu.Lock()
	delete(w.notes, accountID)
	w.notesMu.Unlock()
	return nil
}

// notesOf is the account's notes, read from the ledger at the first look;
// the caller holds n.mu.
func (w *Watcher) notesOf(ctx context.Context, accountID string) (*notes, error) {
	w.notesMu.Lock()
	n := w.notes[accountID]
	if n == nil {
		n = &notes{}
		w.notes[accountID] = n
	}
	w.notesMu.Unlock()
	n.mu.Lock()
	if n.loaded {
		return n, nil
	}
	fired, err := w.cfg.Store.FiredAlerts(ctx, accountID)
	if err != nil {
		n.mu.Unlock()
		return nil, err
	}
	n.fired = make(map[string]bool, len(fired))
	for _, f := range fired {
		n.fired[f.Alert] = true
	}
	n.loaded = true
	return n, nil
}

// evaluation is one look at one account.
type evaluation struct {
	w   *Watcher
	ctx context.Context
	st  ledger.AlertSettings
	acc ledger.Account
	n   *notes
	now time.Time
}

// Evaluate looks at one watched account now: it fires the alerts whose
// thresholds it crossed and re-arms those it is back above. capped are
// the keys a request was refused for by their cap since the last look.
// Concurrent calls, on one watcher or many (instances), fire each crossing
// once.
func (w *Watcher) Evaluate(ctx context.Context, accountID string, capped map[string]bool) error {
	st, ok := w.watched(accountID)
	if !ok {
		return nil
	}
	acc, err := w.cfg.Store.GetAccount(ctx, accountID)
	if errors.Is(err, ledger.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	n, err := w.notesOf(ctx, accountID)
	if err != nil {
		return err
	}
	defer n.mu.Unlock()
	e := &evaluation{w: w, ctx: ctx, st: st, acc: acc, n: n, now: w.cfg.Now()}
	return errors.Join(e.lowBalance(), e.monthSpend(), e.keyCaps(capped), e.autoTopup())
}

// lowBalance fires balance.low below the threshold and re-arms it at or
// above.
func (e *evaluation) lowBalance() error {
	threshold := e.st.LowBalance
	if threshold <= 0 || e.acc.Balance >= threshold {
		return e.rearm(alertLowBalance)
	}
	return e.fire(alertLowBalance, TypeBalanceLow, "balance "+e.acc.Balance.String()+" below "+threshold.String(), func() (any, error) {
		spent, err := e.w.cfg.Store.SpendSince(e.ctx, e.acc.ID, e.now.Add(-day))
		if err != nil {
			return nil, err
		}
		d := LowBalance{Balance: e.acc.Balance, Threshold: threshold, Currency: e.w.cfg.currencyCode(), Spent24h: spent}
		if s, ok := RunsOutIn(e.acc.Balance, spent); ok {
			d.RunsOutInSeconds = &s
		}
		return d, nil
	})
}

// monthSpend fires spend.month once in a calendar month (UTC).
func (e *evaluation) monthSpend() error {
	threshold := e.st.MonthSpend
	if threshold <= 0 || e.acc.MonthSpend < threshold {
		return nil
	}
	month := e.now.UTC().Format("2006-01")
	return e.fire("month_spend:"+month, TypeSpendMonth, "month spend "+e.acc.MonthSpend.String()+" reached "+threshold.String(),
		func() (any, error) {
			return MonthSpend{Month: month, Spend: e.acc.MonthSpend, Threshold: threshold, Currency: e.w.cfg.currencyCode()}, nil
		})
}

// keyCaps fires key.cap_80 and key.cap_100 once in each period of each
// capped key, and again when its cap changes: at 80 % and 100 % of its
// cap, and at 100 % when a request was refused for its cap.
func (e *evaluation) keyCaps(refused map[string]bool) error {
	if !e.st.KeyCaps {
		return nil
	}
	keys, err := e.w.cfg.Store.CappedKeys(e.ctx, e.acc.ID)
	if err != nil {
		return err
	}
	var errs []error
	for _, k := range keys {
		spent, limit := k.SpentThisPeriod(e.now), k.Limits.Cap
		period := k.Limits.Period
		if period == "" {
			period = ledger.PeriodNever
		}
		// once per key, period and cap: a cap changed in the period warns
		// again at its own 80 % and 100 %
		suffix := ":" + k.ID + ":" + strconv.FormatInt(period.Start(e.now), 10) + ":" + strconv.FormatInt(int64(limit), 10)
		data := func() (any, error) {
			d := KeyCap{Key: KeyRef{ID: k.ID, Label: k.Label, Prefix: k.Prefix}, Cap: limit, Spent: spent,
				Period: string(period)}
			if at := k.ResetsAt(e.now); !at.IsZero() {
				d.ResetsAt = &at
			}
			return d, nil
		}
		detail := "key " + k.ID + " spent " + spent.String() + " of its cap of " + limit.String()
		// spent/cap ≥ 80 %, in integers: spent × 5 ≥ cap × 4 (a cap, in
		// nanos, is far below the product's overflow)
		if spent*5 >= limit*4 {
			errs = append(errs, e.fire("key_cap_80"+suffix, TypeKeyCap80, detail, data))
		}
		if spent >= limit || refused[k.ID] {
			errs = append(errs, e.fire("key_cap_100"+suffix, TypeKeyCap100, detail, data))
		}
	}
	return errors.Join(errs...)
}

// autoTopup fires the automatic top-up's charge below its threshold, once
// per crossing, or, when the charge would pass the monthly maximum, a
// warning instead; it re-arms at or above the threshold.
func (e *evaluation) autoTopup() error {
	t := e.st.AutoTopup
	if !t.On || !t.Card.Saved() || e.acc.Balance >= t.Below {
		return e.rearm(alertAutoTopup)
	}
	if e.n.fired[alertAutoTopup] {
		return nil
	}
	month, err := e.w.cfg.Store.AutoTopupsInMonth(e.ctx, e.acc.ID, e.now)
	if err != nil {
		return err
	}
	currency := e.w.cfg.currencyCode()
	if month+t.Amount > t.MonthMax {
		return e.fire(alertAutoTopup, TypeAutoTopupLimit, "automatic top-up stopped by its monthly maximum of "+t.MonthMax.String(),
			func() (any, error) {
				return AutoTopupLimit{Balance: e.acc.Balance, Below: t.Below, Amount: t.Amount, ThisMonth: month, MonthMax: t.MonthMax,
					Currency: currency}, nil
			})
	}
	payload, err := newEvent(typeAutoTopupCharge, e.acc.ID, e.now, autoTopupCharge{Amount: t.Amount, Currency: currency,
		Balance: e.acc.Balance, Below: t.Below})
	if err != nil {
		return err
	}
	charge := ledger.Delivery{
		// the charge's idempotency key: one charge per crossing, whichever
		// worker tries it, however often
		ID:      "topup:" + e.acc.ID + ":" + strconv.FormatInt(e.now.UnixMilli(), 10),
		Channel: ledger.ChannelTopup, Payload: payload, Amount: t.Amount,
	}
	fired, err := e.w.cfg.Store.FireAlertWith(e.ctx, e.acc.ID, alertAutoTopup, "automatic top-up of "+t.Amount.String(), e.now,
		[]ledger.Delivery{charge})
	if err != nil {
		return err
	}
	e.n.fired[alertAutoTopup] = true
	if fired {
		e.w.cfg.Logger.Info("alerts: automatic top-up", zap.String("account", e.acc.ID), zap.String("amount", t.Amount.String()))
		e.w.fired()
	}
	return nil
}

// rearm arms the alert again if it may have fired.
func (e *evaluation) rearm(alert string) error {
	if !e.n.fired[alert] {
		return nil
	}
	if _, err := e.w.cfg.Store.RearmAlert(e.ctx, e.acc.ID, alert); err != nil {
		return err
	}
	delete(e.n.fired, alert)
	return nil
}

// fire fires the alert, unless noted as fired, with an event of typ and
// the data data makes (called only then) delivered by mail and webhook.
func (e *evaluation) fire(alert, typ, detail string, data func() (any, error)) error {
	if e.n.fired[alert] {
		return nil
	}
	d, err := data()
	if err != nil {
		return err
	}
	fired, err := fireEvent(e.ctx, e.w.cfg, e.st, e.acc, alert, typ, detail, e.now, d)
	if err != nil {
		return err
	}
	e.n.fired[alert] = true
	if fired {
		e.w.cfg.Logger.Info("alerts: fired", zap.String("account", e.acc.ID), zap.String("alert", alert))
		e.w.fired()
	}
	return nil
}

// fireEvent fires the account's alert with an event of typ carrying data,
// delivered by mail (when the account has it on and an address, and
// there is a mailer) and by webhook (when it set a URL and has a secret).
func fireEvent(ctx context.Context, cfg Config, st ledger.AlertSettings, acc ledger.Account, alert, typ, detail string,
	now time.Time, data any) (bool, error) {
	body, err := newEvent(typ, acc.ID, now, data)
	if err != nil {
		return false, err
	}
	var deliveries []ledger.Delivery
	if st.Mail && acc.Email != "" && cfg.Mailer != nil {
		deliveries = append(deliveries, ledger.Delivery{ID: "dlv_" + randomID(), Channel: ledger.ChannelMail, Target: acc.Email, Payload: body})
	}
	if st.WebhookURL != "" && st.WebhookSecret != "" {
		deliveries = append(deliveries, ledger.Delivery{ID: "dlv_" + randomID(), Channel: ledger.ChannelWebhook, Target: st.WebhookURL, Payload: body})
	}
	return cfg.Store.FireAlertWith(ctx, acc.ID, alert, detail, now, deliveries)
}
