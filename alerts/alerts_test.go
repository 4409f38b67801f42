package alerts

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelgate/modelgate/ledger"
	"github.com/modelgate/modelgate/mailer"
	"github.com/modelgate/modelgate/mailer/smtptest"
)

// TestSignVerify: a signature made by Sign verifies; a tampered body, a
// wrong secret, a time out of tolerance and malformed headers do not,
// each with its own error. The expected header is computed here from the
// documented scheme, not by Sign.
func TestSignVerify(t *testing.T) {
	const secret = "whsec_test"
	body := []byte(`{"id":"evt_1","type":"balance.low"}`)
	at := time.Unix(1_800_000_000, 0)
	h := hmac.New(sha256.New, []byte(secret))
	fmt.Fprintf(h, "%d.%s", at.Unix(), body)
	want := fmt.Sprintf("t=%d,v1=%s", at.Unix(), hex.EncodeToString(h.Sum(nil)))
	if got := Sign(secret, at, body); got != want {
		t.Fatalf("Sign = %q, want %q", got, want)
	}
	for _, tc := range []struct {
		name, secret, header string
		body                 []byte
		now                  time.Time
		want                 error
	}{
		{"good", secret, want, body, at.Add(time.Minute), nil},
		{"two signatures, one good", secret, "t=1800000000,v1=00ff," + want[len("t=1800000000,"):], body, at, nil},
		{"tampered body", secret, want, []byte(`{"id":"evt_1","type":"balance.lov"}`), at, ErrSignatureMismatch},
		{"wrong secret", "whsec_other", want, body, at, ErrSignatureMismatch},
		{"old timestamp", secret, want, body, at.Add(6 * time.Minute), ErrSignatureTooOld},
		{"future timestamp", secret, want, body, at.Add(-6 * time.Minute), ErrSignatureTooOld},
		{"no v1", secret, "t=1800000000", body, at, ErrMalformedSignature},
		{"no t", secret, want[len("t=1800000000,"):], body, at, ErrMalformedSignature},
		{"bad t", secret, "t=soon," + want[len("t=1800000000,"):], body, at, ErrMalformedSignature},
		{"not pairs", secret, "garbage", body, at, ErrMalformedSignature},
		{"empty", secret, "", body, at, ErrMalformedSignature},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := Verify(tc.secret, tc.header, tc.body, tc.now, 0); !errors.Is(err, tc.want) {
				t.Errorf("Verify = %v, want %v", err, tc.want)
			}
		})
	}
}

// TestRunOut: the run-out estimate is the balance over the last 24
// hours' spend per second, in whole seconds, none without spend; and in
// words it is rounded to minutes, hours or days.
func TestRunOut(t *testing.T) {
	const unit = ledger.NanosPerUnit
	for _, tc := range []struct {
		balance, spent ledger.Money
		secs           int64
		ok             bool
	}{
		{unit, 0, 0, false},
		{unit, 24 * unit, 3600, true},                            // one unit an hour
		{ledger.Money(4.21 * unit), 11_200_000_000, 32477, true}, // 4.21 at 11.20 a day: about 9 hours
		{0, unit, 0, true},
		{-unit, unit, 0, true},
		{1 << 62, 1, 1<<63 - 1, true}, // overflows int64 seconds: capped
	} {
		secs, ok := RunsOutIn(tc.balance, tc.spent)
		if secs != tc.secs || ok != tc.ok {
			t.Errorf("RunsOutIn(%s, %s) = %d, %v; want %d, %v", tc.balance, tc.spent, secs, ok, tc.secs, tc.ok)
		}
	}
	for _, tc := range []struct {
		secs int64
		want string
	}{
		{0, "less than a minute"},
		{59, "less than a minute"},
		{60, "about 1 minute"},
		{89, "about 1 minute"},
		{90, "about 2 minutes"},
		{45 * 60, "about 45 minutes"},
		{59*60 + 29, "about 59 minutes"},
		{59*60 + 31, "about 1 hour"},
		{32477, "about 9 hours"},
		{47 * 3600, "about 47 hours"},
		{48*3600 - 1, "about 2 days"},
		{10 * 86400, "about 10 days"},
	} {
		if got := RunOutWords(tc.secs); got != tc.want {
			t.Errorf("RunOutWords(%d) = %q, want %q", tc.secs, got, tc.want)
		}
	}
}

// TestRetryDelay: the back-off grows from the base through eight retries,
// then there is none.
func TestRetryDelay(t *testing.T) {
	var got []time.Duration
	for i := 1; ; i++ {
		d, ok := RetryDelay(10*time.Second, i)
		if !ok {
			break
		}
		got = append(got, d)
	}
	want := []time.Duration{10 * time.Second, 30 * time.Second, 2 * time.Minute, 10 * time.Minute, 30 * time.Minute,
		time.Hour, 3 * time.Hour, 6 * time.Hour}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("delays %v, want %v", got, want)
	}
}

// TestForbiddenAddresses: webhooks may not reach the gateway's own host
// or network.
func TestForbiddenAddresses(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1": true, "::1": true, "10.1.2.3": true, "172.16.0.1": true, "192.168.1.1": true,
		"169.254.169.254": true, "fe80::1": true, "0.0.0.0": true, "::": true, "224.0.0.1": true,
		"ff02::1": true, "fd00::1": true, "100.64.0.1": true, "::ffff:127.0.0.1": true,
		"93.184.216.34": false, "2606:4700::1111": false, "8.8.8.8": false,
	} {
		if got := forbidden(netip.MustParseAddr(addr)); got != want {
			t.Errorf("forbidden(%s) = %v, want %v", addr, got, want)
		}
	}
}

// env is a real SQLite ledger with one account, for the engine's tests.
type env struct {
	t     *testing.T
	store *ledger.Store
	acct  string
	smtp  *smtptest.Server
	cfg   Config
}

// newEnv opens a ledger with an account of the given balance and an
// email, and a real SMTP server on loopback.
func newEnv(t *testing.T, balance ledger.Money) *env {
	t.Helper()
	ctx := context.Background()
	s, err := ledger.Open(ctx, ledger.Options{Path: filepath.Join(t.TempDir(), "ledger.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	a, err := s.CreateAccount(ctx, "owner@example.com", "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Credit(ctx, ledger.CreditRequest{AccountID: a.ID, Amount: balance, Reference: "start", Reason: "test"}); err != nil {
		t.Fatal(err)
	}
	srv := smtptest.Start(t, smtptest.Options{})
	m, err := mailer.New(mailer.Config{Host: srv.Host(), Port: srv.Port(), From: "Acme AI <no-reply@example.com>", TLS: mailer.TLSNone})
	if err != nil {
		t.Fatal(err)
	}
	return &env{t: t, store: s, acct: a.ID, smtp: srv, cfg: Config{Store: s, Mailer: m, Currency: "USD", ServiceName: "api.example.test",
		ConsoleURL: "https://api.example.test/console/", RetryBase: time.Millisecond, Interval: 10 * time.Millisecond}}
}

// autoTopup saves a card and turns automatic top-up on: below 5, add 20,
// at most 60 a month.
func (e *env) autoTopup() {
	e.t.Helper()
	ctx := context.Background()
	if err := e.store.SaveCard(ctx, e.acct, ledger.SavedCard{Customer: "cus_1", PaymentMethod: "pm_1", Brand: "visa", Last4: "4242"}); err != nil {
		e.t.Fatal(err)
	}
	if err := e.store.SetAutoTopup(ctx, e.acct, true, 5*ledger.NanosPerUnit, 20*ledger.NanosPerUnit, 60*ledger.NanosPerUnit); err != nil {
		e.t.Fatal(err)
	}
}

// drain runs the worker until no delivery is due.
func (e *env) drain(w *Worker) {
	e.t.Helper()
	for {
		tried, err := w.RunOnce(context.Background())
		if err != nil {
			e.t.Fatal(err)
		}
		if !tried {
			return
		}
	}
}

// deliveries lists the account's deliveries of a channel ("" all).
func (e *env) deliveries(channel string) []ledger.Delivery {
	e.t.Helper()
	ds, err := e.store.Deliveries(context.Background(), e.acct, channel, 100)
	if err != nil {
		e.t.Fatal(err)
	}
	return ds
}

// fakeCharger records the charges; fail answers each call with the
// error it returns for it (nil: the charge succeeds).
type fakeCharger struct {
	mu    sync.Mutex
	calls []charge
	fail  func(n int) error
}

type charge struct {
	account, key string
	amount       ledger.Money
	card         ledger.SavedCard
}

func (f *fakeCharger) ChargeTopup(_ context.Context, accountID string, card ledger.SavedCard, amount ledger.Money, key string) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, charge{accountID, key, amount, card})
	if f.fail != nil {
		if err := f.fail(len(f.calls)); err != nil {
			return "", err
		}
	}
	return "pi_" + key, nil
}

// keys are the idempotency keys of the charges made.
func (f *fakeCharger) keys() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, c := range f.calls {
		out = append(out, c.key)
	}
	return out
}

// instances makes n watchers on the store (as n gateway instances would
// have) with settings loaded.
func (e *env) instances(n int) []*Watcher {
	e.t.Helper()
	var ws []*Watcher
	for range n {
		w := NewWatcher(e.cfg, nil)
		if err := w.Reload(context.Background()); err != nil {
			e.t.Fatal(err)
		}
		ws = append(ws, w)
	}
	return ws
}

// evaluateConcurrently has every watcher evaluate the account rounds
// times at once.
func (e *env) evaluateConcurrently(ws []*Watcher, rounds int) {
	e.t.Helper()
	var wg sync.WaitGroup
	for _, w := range ws {
		for range rounds {
			wg.Go(func() {
				if err := w.Evaluate(context.Background(), e.acct, nil); err != nil {
					e.t.Error(err)
				}
			})
		}
	}
	wg.Wait()
}

// TestAutoTopupOncePerCrossing: three instances evaluating an account
// below its automatic top-up's threshold, many times at once, charge it
// exactly once, with the delivery's id as idempotency key, the saved card
// and the amount; a charge that errs is tried again with the same key;
// the delivery ends done with the payment's id. A credit back above the
// threshold re-arms it: the next crossing charges once more, with a new
// key.
func TestAutoTopupOncePerCrossing(t *testing.T) {
	e := newEnv(t, 3*ledger.NanosPerUnit)
	e.autoTopup()
	ch := &fakeCharger{fail: func(n int) error {
		if n == 1 {
			return errors.New("connection reset by peer")
		}
		return nil
	}}
	e.cfg.Charger = ch
	ws := e.instances(3)
	e.evaluateConcurrently(ws, 10)

	topups := e.deliveries(ledger.ChannelTopup)
	if len(topups) != 1 {
		t.Fatalf("%d top-up deliveries, want 1: %+v", len(topups), topups)
	}
	d := topups[0]
	if !strings.HasPrefix(d.ID, "topup:"+e.acct+":") || d.Amount != 20*ledger.NanosPerUnit {
		t.Errorf("top-up delivery %s of %s", d.ID, d.Amount)
	}
	w := NewWorker(e.cfg)
	e.drain(w) // the first try errs: due again after the (1 ms) back-off
	time.Sleep(20 * time.Millisecond)
	e.drain(w)
	if got := ch.keys(); len(got) != 2 || got[0] != d.ID || got[1] != d.ID {
		t.Fatalf("charges with keys %v, want two with %s", got, d.ID)
	}
	if c := ch.calls[1]; c.account != e.acct || c.amount != 20*ledger.NanosPerUnit || c.card.PaymentMethod != "pm_1" {
		t.Errorf("charge %+v", c)
	}
	d = e.deliveries(ledger.ChannelTopup)[0]
	if d.Status != ledger.DeliveryDone || d.Result != "pi_"+d.ID || d.Attempts != 2 || !strings.Contains(d.LastError, "connection reset") {
		t.Errorf("after a retry: %+v", d)
	}
	e.evaluateConcurrently(ws, 5)
	if n := len(e.deliveries(ledger.ChannelTopup)); n != 1 {
		t.Fatalf("still below the threshold: %d top-ups, want 1", n)
	}

	// the provider's credit (not the engine's) brings the balance back up
	if _, err := e.store.Credit(context.Background(), ledger.CreditRequest{AccountID: e.acct, Amount: 20 * ledger.NanosPerUnit,
		Reference: "stripe:" + d.Result, Reason: "automatic top-up", Kind: ledger.KindTopup}); err != nil {
		t.Fatal(err)
	}
	e.evaluateConcurrently(ws, 3)
	if f, _ := e.store.FiredAlerts(context.Background(), e.acct); len(f) != 0 {
		t.Fatalf("above the threshold, fired: %+v", f)
	}
	// a fresh crossing: a threshold set above the balance
	if err := e.store.SetAutoTopup(context.Background(), e.acct, true, 30*ledger.NanosPerUnit, 20*ledger.NanosPerUnit, 60*ledger.NanosPerUnit); err != nil {
		t.Fatal(err)
	}
	for _, w := range ws {
		w.Invalidate(e.acct)
	}
	var wg sync.WaitGroup
	for _, w := range ws {
		wg.Go(func() { w.Tick(context.Background()) })
	}
	wg.Wait()
	e.drain(w)
	if got := ch.keys(); len(got) != 3 || got[2] == d.ID {
		t.Fatalf("second crossing: charges %v, want a third with a new key", got)
	}
}

// TestAutoTopupDeclined: a declined charge turns automatic top-up off with
// the reason, fails the delivery for good, and mails the customer (and
// posts the webhook) an autotopup.failed event.
func TestAutoTopupDeclined(t *testing.T) {
	e := newEnv(t, 3*ledger.NanosPerUnit)
	e.autoTopup()
	ctx := context.Background()
	var posted []Event
	var mu sync.Mutex
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var ev Event
		_ = json.NewDecoder(r.Body).Decode(&ev)
		mu.Lock()
		posted = append(posted, ev)
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	defer recv.Close()
	if err := e.store.SetAlerts(ctx, e.acct, ledger.Alerts{Mail: true, WebhookURL: recv.URL}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.RotateWebhookSecret(ctx, e.acct); err != nil {
		t.Fatal(err)
	}
	e.cfg.AllowPrivateWebhooks = true
	ch := &fakeCharger{fail: func(int) error {
		return &DeclineError{Code: "card_declined", Message: "Your card was declined."}
	}}
	e.cfg.Charger = ch
	e.evaluateConcurrently(e.instances(2), 3)
	w := NewWorker(e.cfg)
	e.drain(w)

	if n := len(ch.keys()); n != 1 {
		t.Fatalf("%d charges, want 1", n)
	}
	st, err := e.store.AlertSettingsOf(ctx, e.acct)
	if err != nil {
		t.Fatal(err)
	}
	if st.AutoTopup.On || !strings.Contains(st.AutoTopup.OffReason, "card_declined") {
		t.Errorf("after a decline: auto top-up on=%v, reason %q", st.AutoTopup.On, st.AutoTopup.OffReason)
	}
	d := e.deliveries(ledger.ChannelTopup)[0]
	if d.Status != ledger.DeliveryFailed || !strings.Contains(d.LastError, "declined (card_declined): Your card was declined.") {
		t.Errorf("declined top-up: %+v", d)
	}
	mails := e.smtp.Wait(t, 1, 5*time.Second)
	if len(mails) != 1 || mails[0].To[0] != "owner@example.com" {
		t.Fatalf("mails %+v", mails)
	}
	if s, text := mails[0].Subject(), mails[0].Text(); s != "api.example.test: automatic top-up failed and was turned off" ||
		!strings.Contains(text, "The automatic top-up of 20.000000 USD") || !strings.Contains(text, "Your card was declined.") ||
		!strings.Contains(text, "https://api.example.test/console/") {
		t.Errorf("mail %q:\n%s", s, text)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(posted) != 1 || posted[0].Type != TypeAutoTopupFailed {
		t.Fatalf("webhooks %+v", posted)
	}
	var data AutoTopupFailed
	if err := json.Unmarshal(posted[0].Data, &data); err != nil || data != (AutoTopupFailed{Amount: 20 * ledger.NanosPerUnit, Currency: "usd",
		Code: "card_declined", Message: "Your card was declined."}) {
		t.Errorf("data %+v, %v", data, err)
	}
	// the receiver reads the amount as an exact decimal string
	if !strings.Contains(string(posted[0].Data), `"amount":"20.000000000"`) {
		t.Errorf("data %s", posted[0].Data)
	}
}

// TestAutoTopupLimitAndNoCharger: a top-up that would pass the monthly
// maximum is not made, and the customer is mailed an autotopup.limit
// event instead; without a Charger, a top-up fails with a reason.
func TestAutoTopupLimitAndNoCharger(t *testing.T) {
	e := newEnv(t, 3*ledger.NanosPerUnit)
	e.autoTopup()
	ctx := context.Background()
	ws := e.instances(1)
	e.evaluateConcurrently(ws, 1)
	w := NewWorker(e.cfg) // no Charger
	e.drain(w)
	d := e.deliveries(ledger.ChannelTopup)
	if len(d) != 1 || d[0].Status != ledger.DeliveryFailed || !strings.Contains(d[0].LastError, "no payment provider is configured") {
		t.Fatalf("without a charger: %+v", d)
	}
	// 60 a month: three top-ups of 20 count, failed ones do not
	if err := e.store.SetAutoTopup(ctx, e.acct, true, 5*ledger.NanosPerUnit, 20*ledger.NanosPerUnit, 20*ledger.NanosPerUnit); err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.RearmAlert(ctx, e.acct, alertAutoTopup); err != nil { // as a credit above would
		t.Fatal(err)
	}
	ch := &fakeCharger{}
	e.cfg.Charger = ch
	ws = e.instances(1)
	w = NewWorker(e.cfg)
	e.evaluateConcurrently(ws, 1) // below, the failed one not counted: charged
	e.drain(w)
	if n := len(ch.keys()); n != 1 {
		t.Fatalf("%d charges, want 1", n)
	}
	if _, err := e.store.RearmAlert(ctx, e.acct, alertAutoTopup); err != nil { // as a credit above would
		t.Fatal(err)
	}
	ws = e.instances(1)
	e.evaluateConcurrently(ws, 1) // 20 this month already, of 20: stopped
	e.drain(w)
	if n := len(ch.keys()); n != 1 {
		t.Fatalf("past the monthly maximum: %d charges, want 1", n)
	}
	mails := e.smtp.Wait(t, 1, 5*time.Second)
	if len(mails) != 1 || mails[0].Subject() != "api.example.test: automatic top-up stopped by its monthly maximum" ||
		!strings.Contains(mails[0].Text(), "past their monthly maximum of 20.000000 USD") {
		t.Fatalf("mails %+v", mails)
	}
}

// TestLowBalanceMail: the low-balance mail states the balance, the
// threshold, the last day's spend and when, at that rate, the balance
// runs out, in words.
func TestLowBalanceMail(t *testing.T) {
	secs := int64(32477)
	data, _ := json.Marshal(LowBalance{Balance: 4_210_000_000, Threshold: 5 * ledger.NanosPerUnit, Currency: "usd", Spent24h: 11_200_000_000,
		RunsOutInSeconds: &secs})
	subject, text, err := mailText(Config{Currency: "USD", ServiceName: "api.example.test", ConsoleURL: "https://api.example.test/console/"},
		Event{ID: "evt_1", Type: TypeBalanceLow, Account: "acct_1", Data: data})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"is 4.210000 USD, below the 5.000000 USD", "spent 11.200000 USD",
		"At the last 24 hours' rate, the balance runs out in about 9 hours.", "https://api.example.test/console/"} {
		if !strings.Contains(text, want) {
			t.Errorf("the mail lacks %q:\n%s", want, text)
		}
	}
	if subject != "api.example.test: your balance is below 5.000000 USD" {
		t.Errorf("subject %q", subject)
	}
}

// TestRunStops: a watcher and a worker started with Run end when their
// context does, leaving no goroutine behind.
func TestRunStops(t *testing.T) {
	e := newEnv(t, ledger.NanosPerUnit)
	before := runtime.NumGoroutine()
	ctx, cancel := context.WithCancel(context.Background())
	w := NewWorker(e.cfg)
	wa := NewWatcher(e.cfg, w.Wake)
	done := make(chan struct{}, 2)
	go func() { wa.Run(ctx); done <- struct{}{} }()
	go func() { w.Run(ctx); done <- struct{}{} }()
	time.Sleep(50 * time.Millisecond)
	cancel()
	for range 2 {
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatal("Run did not return after its context ended")
		}
	}
	deadline := time.Now().Add(2 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		buf := make([]byte, 1<<20)
		t.Errorf("%d goroutines, %d before:\n%s", n, before, buf[:runtime.Stack(buf, true)])
	}
}

// TestThresholdChangeRearms: a low balance fires once; a change that
// leaves the threshold as it was does not fire it again, a new threshold
// (still above the balance) does, once.
func TestThresholdChangeRearms(t *testing.T) {
	e := newEnv(t, 3*ledger.NanosPerUnit)
	ctx := context.Background()
	w := NewWatcher(e.cfg, nil)
	if err := w.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	set := func(threshold ledger.Money, hook string) {
		t.Helper()
		if err := e.store.SetAlerts(ctx, e.acct, ledger.Alerts{LowBalance: threshold, Mail: true, WebhookURL: hook}); err != nil {
			t.Fatal(err)
		}
		w.Invalidate(e.acct) // as the gateway's OnChange does
		w.Tick(ctx)
		w.Tick(ctx)
	}
	lows := func() int {
		n := 0
		for _, d := range e.deliveries(ledger.ChannelMail) {
			var ev Event
			if err := json.Unmarshal(d.Payload, &ev); err != nil {
				t.Fatal(err)
			}
			if ev.Type == TypeBalanceLow {
				n++
			}
		}
		return n
	}
	set(5*ledger.NanosPerUnit, "")
	if n := lows(); n != 1 {
		t.Fatalf("%d low-balance mails, want 1", n)
	}
	set(5*ledger.NanosPerUnit, "https://hooks.example.com/x")
	if n := lows(); n != 1 {
		t.Fatalf("the same threshold: %d low-balance mails, want 1", n)
	}
	set(4*ledger.NanosPerUnit, "https://hooks.example.com/x")
	if n := lows(); n != 2 {
		t.Fatalf("a new threshold: %d low-balance mails, want 2", n)
	}
}

// TestKeyCapAndMonthAlertsPerPeriod: on a clock that moves, a key's cap
// warns once at 80 % in a period, again when its cap is raised and the new
// cap's 80 % is crossed, and again in the next period; the month's spend
// warns once in a month and again in the next.
func TestKeyCapAndMonthAlertsPerPeriod(t *testing.T) {
	const unit = ledger.NanosPerUnit
	ctx := context.Background()
	var mu sync.Mutex
	now := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	setClock := func(t time.Time) { mu.Lock(); now = t; mu.Unlock() }
	s, err := ledger.Open(ctx, ledger.Options{Path: filepath.Join(t.TempDir(), "ledger.db"), Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	a, err := s.CreateAccount(ctx, "owner@example.com", "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Credit(ctx, ledger.CreditRequest{AccountID: a.ID, Amount: 100 * unit, Reference: "start", Reason: "test"}); err != nil {
		t.Fatal(err)
	}
	secret, key, err := s.CreateKeyWithLimits(ctx, a.ID, "job", ledger.KeyLimits{Cap: unit, Period: ledger.PeriodDay})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SetAlerts(ctx, a.ID, ledger.Alerts{KeyCaps: true, MonthSpend: 2 * unit}); err != nil {
		t.Fatal(err)
	}
	w := NewWatcher(Config{Store: s, Currency: "USD", Now: clock, Interval: time.Millisecond}, nil)
	if err := w.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	spendOn := func(secret, keyID string, cost ledger.Money, refused bool) {
		t.Helper()
		p, err := s.Authenticate(secret)
		if err != nil {
			t.Fatal(err)
		}
		h, err := s.ReserveForKey(p, cost, cost, true)
		if refused != errors.Is(err, ledger.ErrKeyCapReached) {
			t.Fatalf("reserve %s: %v", cost, err)
		}
		var capped map[string]bool
		if refused {
			capped = map[string]bool{keyID: true}
		} else if err := h.Settle(ctx, &ledger.UsageRecord{KeyID: keyID, Model: "m", Cost: cost}); err != nil {
			t.Fatal(err)
		}
		if err := w.Evaluate(ctx, a.ID, capped); err != nil {
			t.Fatal(err)
		}
	}
	spend := func(cost ledger.Money) { t.Helper(); spendOn(secret, key.ID, cost, false) }
	fired := func() []string {
		t.Helper()
		fs, err := s.FiredAlerts(ctx, a.ID)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, f := range fs {
			names = append(names, strings.SplitN(f.Alert, ":", 2)[0]+"@"+f.At.Format("01-02"))
		}
		slices.Sort(names)
		return names
	}
	check := func(want ...string) {
		t.Helper()
		slices.Sort(want)
		if got := fired(); !slices.Equal(got, want) {
			t.Fatalf("fired %v, want %v", got, want)
		}
	}
	spend(unit * 7 / 10)
	check()
	spend(unit / 10) // 80 % of the cap
	check("key_cap_80@11-30")
	spend(unit / 20)
	check("key_cap_80@11-30")
	if _, err := s.SetKeyLimits(ctx, key.ID, ledger.KeyLimits{Cap: 2 * unit, Period: ledger.PeriodDay}); err != nil {
		t.Fatal(err)
	}
	spend(unit / 2) // 1.35 of 2: below the new cap's 80 %
	check("key_cap_80@11-30")
	spend(unit / 4) // 1.60: the new cap's 80 %
	check("key_cap_80@11-30", "key_cap_80@11-30")
	other, otherKey, err := s.CreateKey(ctx, a.ID, "other")
	if err != nil {
		t.Fatal(err)
	}
	spendOn(other, otherKey.ID, unit/2, false) // 2.10 this month: the month's threshold
	check("key_cap_80@11-30", "key_cap_80@11-30", "month_spend@11-30")

	// the next day, and the next month
	setClock(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC))
	spend(unit)
	check("key_cap_80@11-30", "key_cap_80@11-30", "month_spend@11-30")
	spend(unit * 6 / 10) // 1.60 of 2 today
	check("key_cap_80@11-30", "key_cap_80@11-30", "month_spend@11-30", "key_cap_80@12-01")
	spend(unit * 39 / 100) // 1.99 of 2 today
	check("key_cap_80@11-30", "key_cap_80@11-30", "month_spend@11-30", "key_cap_80@12-01")
	spendOn(secret, key.ID, unit/50, true) // refused for the cap: its 100 %
	check("key_cap_80@11-30", "key_cap_80@11-30", "month_spend@11-30", "key_cap_80@12-01", "key_cap_100@12-01")
	spendOn(other, otherKey.ID, unit/50, false) // 2.01 this month
	check("key_cap_80@11-30", "key_cap_80@11-30", "month_spend@11-30", "key_cap_80@12-01", "key_cap_100@12-01", "month_spend@12-01")
}
