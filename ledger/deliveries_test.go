package ledger

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

// alertStores opens one SQLite store, or three PostgreSQL instances on
// one database.
func alertStores(t *testing.T, b backend) []*Store {
	t.Helper()
	if b.pg {
		_, stores := openShared(t, 3)
		return stores
	}
	return []*Store{b.open(t)}
}

// TestAlertSettings: an account without settings has every alert off and
// mail on; the setters change only their own fields; a bad webhook URL or
// a negative threshold is refused; automatic top-up needs a saved card
// and sane amounts, and a decline's reason is cleared by turning it on
// again; WatchedAccounts lists only accounts with something on.
func TestAlertSettings(t *testing.T) { backends(t, testAlertSettings) }

func testAlertSettings(t *testing.T, b backend) {
	ctx := context.Background()
	stores := alertStores(t, b)
	s, last := stores[0], stores[len(stores)-1]
	a := mustAccount(t, s, 1000)
	quiet := mustAccount(t, s, 1000)

	got, err := s.AlertSettingsOf(ctx, a.ID)
	if err != nil || got.Any() || !got.Mail || got.WebhookSecret != "" {
		t.Fatalf("no settings: %+v, %v", got, err)
	}
	if err := s.SetAlerts(ctx, a.ID, Alerts{LowBalance: 500, MonthSpend: 9000, KeyCaps: true, Mail: false,
		WebhookURL: "https://example.com/hook"}); err != nil {
		t.Fatal(err)
	}
	secret, err := s.RotateWebhookSecret(ctx, a.ID)
	if err != nil || len(secret) < 40 {
		t.Fatalf("secret %q, %v", secret, err)
	}
	if err := s.SetAutoTopup(ctx, a.ID, true, 100, 1000, 5000); !errors.Is(err, ErrNoCard) {
		t.Fatalf("auto top-up without a card: %v", err)
	}
	card := SavedCard{Customer: "cus_1", PaymentMethod: "pm_1", Brand: "visa", Last4: "4242"}
	if err := s.SaveCard(ctx, a.ID, card); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []struct {
		below, amount, max Money
	}{{0, 1000, 5000}, {100, 0, 5000}, {100, 1000, 999}, {-1, 1000, 5000}} {
		if err := s.SetAutoTopup(ctx, a.ID, true, bad.below, bad.amount, bad.max); err == nil {
			t.Errorf("auto top-up %+v accepted", bad)
		}
	}
	if err := s.SetAutoTopup(ctx, a.ID, true, 100, 1000, 5000); err != nil {
		t.Fatal(err)
	}
	got, err = last.AlertSettingsOf(ctx, a.ID)
	want := AlertSettings{AccountID: a.ID, LowBalance: 500, MonthSpend: 9000, KeyCaps: true, WebhookURL: "https://example.com/hook",
		WebhookSecret: secret, AutoTopup: AutoTopup{On: true, Below: 100, Amount: 1000, MonthMax: 5000, Card: card}}
	got.UpdatedAt = time.Time{}
	if err != nil || got != want {
		t.Fatalf("settings:\n got %+v\nwant %+v (%v)", got, want, err)
	}
	if err := s.TurnOffAutoTopup(ctx, a.ID, "the card was declined"); err != nil {
		t.Fatal(err)
	}
	if got, _ := last.AlertSettingsOf(ctx, a.ID); got.AutoTopup.On || got.AutoTopup.OffReason != "the card was declined" || got.LowBalance != 500 {
		t.Fatalf("after turning off: %+v", got)
	}
	if err := s.SetAutoTopup(ctx, a.ID, true, 100, 1000, 5000); err != nil {
		t.Fatal(err)
	}
	if got, _ := last.AlertSettingsOf(ctx, a.ID); !got.AutoTopup.On || got.AutoTopup.OffReason != "" {
		t.Fatalf("after turning on again: %+v", got)
	}
	for _, bad := range []Alerts{{LowBalance: -1}, {WebhookURL: "ftp://x/"}, {WebhookURL: "/relative"}, {WebhookURL: "https://"}} {
		if err := s.SetAlerts(ctx, a.ID, bad); err == nil {
			t.Errorf("alerts %+v accepted", bad)
		}
	}
	if err := s.SetAlerts(ctx, "acct_nobody", Alerts{LowBalance: 1}); !errors.Is(err, ErrNotFound) {
		t.Errorf("an unknown account: %v", err)
	}
	if err := s.SetAlerts(ctx, quiet.ID, Alerts{Mail: true}); err != nil {
		t.Fatal(err)
	}
	watched, err := last.WatchedAccounts(ctx)
	if err != nil || len(watched) != 1 || watched[0].AccountID != a.ID {
		t.Fatalf("watched: %+v, %v", watched, err)
	}
}

// TestDeliveriesOutbox: the one caller of many that fires an alert writes
// its deliveries, once; workers on every instance claim each due delivery
// exactly once; a retried delivery is due again only at its time; a
// lapsed lease lets another worker claim it, and the first one's finish is
// refused; a top-up's amount counts in the month until it fails.
func TestDeliveriesOutbox(t *testing.T) { backends(t, testDeliveriesOutbox) }

func testDeliveriesOutbox(t *testing.T, b backend) {
	ctx := context.Background()
	stores := alertStores(t, b)
	a := mustAccount(t, stores[0], 1000)
	now := time.Now().Truncate(time.Millisecond)

	var wg sync.WaitGroup
	var mu sync.Mutex
	fired := 0
	for i := range 30 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ds := []Delivery{
				{ID: fmt.Sprintf("dlv_mail_%d", i), Channel: ChannelMail, Target: "a@example.com", Payload: []byte(`{"type":"balance.low"}`)},
				{ID: fmt.Sprintf("dlv_hook_%d", i), Channel: ChannelWebhook, Target: "https://example.com/h", Payload: []byte(`{}`)},
				{ID: fmt.Sprintf("topup:%s:%d", a.ID, i), Channel: ChannelTopup, Amount: 700},
			}
			ok, err := stores[i%len(stores)].FireAlertWith(ctx, a.ID, "low_balance", "below 5", now, ds)
			if err != nil {
				t.Error(err)
			}
			if ok {
				mu.Lock()
				fired++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	list, err := stores[0].Deliveries(ctx, a.ID, "", 0)
	if err != nil || fired != 1 || len(list) != 3 {
		t.Fatalf("fired %d times, %d deliveries (%v), want 1 and 3", fired, len(list), err)
	}
	// the three are the firing caller's, as it wrote them, pending and due now
	byChannel := map[string]Delivery{}
	for _, d := range list {
		byChannel[d.Channel] = d
		if d.AccountID != a.ID || d.Alert != "low_balance" || d.Status != DeliveryPending || d.Attempts != 0 ||
			!d.CreatedAt.Equal(now) || !d.NextAt.Equal(now) || !d.DoneAt.IsZero() {
			t.Errorf("a fired delivery: %+v", d)
		}
	}
	m, h, tp := byChannel[ChannelMail], byChannel[ChannelWebhook], byChannel[ChannelTopup]
	caller := strings.TrimPrefix(m.ID, "dlv_mail_")
	if h.ID != "dlv_hook_"+caller || tp.ID != "topup:"+a.ID+":"+caller {
		t.Errorf("deliveries of more than one caller: %s, %s, %s", m.ID, h.ID, tp.ID)
	}
	if m.Target != "a@example.com" || string(m.Payload) != `{"type":"balance.low"}` || h.Target != "https://example.com/h" ||
		string(h.Payload) != `{}` || tp.Amount != 700 {
		t.Errorf("deliveries not as written:\n%+v\n%+v\n%+v", m, h, tp)
	}
	if sum, err := stores[0].AutoTopupsInMonth(ctx, a.ID, now); err != nil || sum != 700 {
		t.Fatalf("top-ups this month %s, %v", sum, err)
	}

	// 12 workers across the instances claim the three, each once
	claimed := map[string]string{}
	for i := range 12 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			owner := fmt.Sprintf("worker-%d", i)
			for {
				d, ok, err := stores[i%len(stores)].ClaimDelivery(ctx, owner, now, time.Minute)
				if err != nil {
					t.Error(err)
					return
				}
				if !ok {
					return
				}
				mu.Lock()
				if prev, dup := claimed[d.ID]; dup {
					t.Errorf("%s claimed by %s and %s", d.ID, prev, owner)
				}
				claimed[d.ID] = owner
				mu.Unlock()
				if d.Attempts != 1 || d.AccountID != a.ID || d.Alert != "low_balance" {
					t.Errorf("claimed %+v", d)
				}
			}
		}()
	}
	wg.Wait()
	if len(claimed) != 3 {
		t.Fatalf("claimed %v, want all three", claimed)
	}
	var mail, hook, topup string
	for id := range claimed {
		switch {
		case id[:8] == "dlv_mail":
			mail = id
		case id[:8] == "dlv_hook":
			hook = id
		default:
			topup = id
		}
	}
	s := stores[len(stores)-1]
	if err := s.FinishDelivery(ctx, mail, claimed[mail], now, DeliveryOutcome{Done: true, Result: "250 OK"}); err != nil {
		t.Fatal(err)
	}
	// the webhook failed: due again in a minute, not before
	if err := s.FinishDelivery(ctx, hook, claimed[hook], now, DeliveryOutcome{Error: "HTTP 500", RetryAt: now.Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	if err := s.FinishDelivery(ctx, topup, claimed[topup], now, DeliveryOutcome{Error: "card_declined"}); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := s.ClaimDelivery(ctx, "w", now.Add(59*time.Second), time.Minute); ok {
		t.Fatal("a delivery claimed before its retry time")
	}
	d, ok, err := s.ClaimDelivery(ctx, "w1", now.Add(time.Minute), 10*time.Second)
	if err != nil || !ok || d.ID != hook || d.Attempts != 2 || d.LastError != "HTTP 500" {
		t.Fatalf("the retry: %+v, %v, %v", d, ok, err)
	}
	// w1 stops; its lease lapses and w2 takes the delivery over
	if _, ok, _ := stores[0].ClaimDelivery(ctx, "w2", now.Add(time.Minute+5*time.Second), time.Minute); ok {
		t.Fatal("a leased delivery claimed again")
	}
	d, ok, err = stores[0].ClaimDelivery(ctx, "w2", now.Add(time.Minute+11*time.Second), time.Minute)
	if err != nil || !ok || d.ID != hook || d.Attempts != 3 {
		t.Fatalf("the lapsed lease: %+v, %v, %v", d, ok, err)
	}
	if err := s.FinishDelivery(ctx, hook, "w1", now, DeliveryOutcome{Done: true}); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("the lapsed worker's finish: %v", err)
	}
	if err := s.FinishDelivery(ctx, hook, "w2", now.Add(2*time.Minute), DeliveryOutcome{Done: true, Result: "HTTP 204"}); err != nil {
		t.Fatal(err)
	}
	list, err = s.Deliveries(ctx, a.ID, "", 10)
	if err != nil {
		t.Fatal(err)
	}
	status := map[string]string{}
	for _, d := range list {
		status[d.Channel] = d.Status + " " + d.Result + d.LastError
	}
	want := map[string]string{ChannelMail: "done 250 OK", ChannelWebhook: "done HTTP 204HTTP 500", ChannelTopup: "failed card_declined"}
	if fmt.Sprint(status) != fmt.Sprint(want) {
		t.Fatalf("statuses %v, want %v", status, want)
	}
	if hooks, _ := s.Deliveries(ctx, a.ID, ChannelWebhook, 10); len(hooks) != 1 || hooks[0].DoneAt.IsZero() {
		t.Fatalf("webhook deliveries: %+v", hooks)
	}
	if sum, err := s.AutoTopupsInMonth(ctx, a.ID, now); err != nil || sum != 0 {
		t.Fatalf("a failed top-up counts %s, %v", sum, err)
	}
	if _, err := s.FireAlertWith(ctx, a.ID, "x", "", now, []Delivery{{ID: "d", Channel: "pigeon"}}); err == nil {
		t.Fatal("an unknown channel accepted")
	}
}

// TestSpendSince: the burn rate's spend counts the account's charges
// since the time given, through all its keys, deleted ones too.
func TestSpendSince(t *testing.T) { backends(t, testSpendSince) }

func testSpendSince(t *testing.T, b backend) {
	ctx := context.Background()
	s := alertStores(t, b)[0]
	a := mustAccount(t, s, 1_000_000)
	before := time.Now().Add(-time.Second)
	for i := range 3 {
		_, key, err := s.CreateKey(ctx, a.ID, fmt.Sprint("k", i))
		if err != nil {
			t.Fatal(err)
		}
		h, err := s.Reserve(a.ID, 100, 100)
		if err != nil {
			t.Fatal(err)
		}
		if err := h.Settle(ctx, &UsageRecord{KeyID: key.ID, Model: "m", Cost: Money(10 * (i + 1))}); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			if err := s.DeleteKey(ctx, key.ID); err != nil {
				t.Fatal(err)
			}
		}
	}
	if got, err := s.SpendSince(ctx, a.ID, before); err != nil || got != 60 {
		t.Fatalf("spend since before: %s, %v", got, err)
	}
	if got, err := s.SpendSince(ctx, a.ID, time.Now().Add(time.Hour)); err != nil || got != 0 {
		t.Fatalf("spend since later: %s, %v", got, err)
	}
}

// TestClaimWritesNothingWhenIdle: a worker asking for due deliveries on an
// idle ledger, as every instance does every second, makes no write
// transaction. On SQLite, whose writer counts every write transaction
// (PostgreSQL's one-off writes are not counted; its claim takes the same
// read first).
func TestClaimWritesNothingWhenIdle(t *testing.T) {
	ctx := context.Background()
	s := backend{}.open(t)
	a := mustAccount(t, s, 1000)
	now := time.Now()
	if _, err := s.FireAlertWith(ctx, a.ID, "later", "", now, []Delivery{{ID: "dlv_later", Channel: ChannelMail, NextAt: now.Add(time.Hour)}}); err != nil {
		t.Fatal(err)
	}
	before := s.Stats().Transactions
	for range 20 {
		if _, ok, err := s.ClaimDelivery(ctx, "w", now, time.Minute); err != nil || ok {
			t.Fatalf("claimed %v, %v", ok, err)
		}
	}
	if after := s.Stats().Transactions; after != before {
		t.Fatalf("%d write transactions for 20 idle claims, want none", after-before)
	}
	if _, ok, err := s.ClaimDelivery(ctx, "w", now.Add(time.Hour), time.Minute); err != nil || !ok {
		t.Fatalf("the due delivery: %v, %v", ok, err)
	}
}
