package alerts

import (
	"encoding/json"
	"fmt"
	"math/big"
	"time"

	"github.com/modelgate/modelgate/ledger"
)

// The events' types: the webhook's "type", and what a mail tells of.
const (
	TypeBalanceLow      = "balance.low"
	TypeSpendMonth      = "spend.month"
	TypeKeyCap80        = "key.cap_80"
	TypeKeyCap100       = "key.cap_100"
	TypeAutoTopupFailed = "autotopup.failed"
	// TypeAutoTopupLimit: the balance fell below the automatic top-up's
	// threshold, but another top-up would pass its monthly maximum, so
	// none was made.
	TypeAutoTopupLimit = "autotopup.limit"
	// typeAutoTopupCharge is the payload of a top-up's own delivery (the
	// charge), which is never sent anywhere.
	typeAutoTopupCharge = "autotopup.charge"
)

// The alerts' names in the ledger (one row per armed-and-fired alert).
const (
	alertLowBalance = "low_balance"
	alertAutoTopup  = "auto_topup"
)

// Event is the body of a webhook and what a mail says: one per fired
// alert, shared by its mail and its webhook. The amounts of its data are
// exact decimal strings, as ledger.Money writes them ("5.000000000").
type Event struct {
	ID      string          `json:"id"`
	Type    string          `json:"type"`
	Created time.Time       `json:"created"`
	Account string          `json:"account"`
	Data    json.RawMessage `json:"data"`
}

// LowBalance is the data of a balance.low event.
type LowBalance struct {
	Balance   ledger.Money `json:"balance"`
	Threshold ledger.Money `json:"threshold"`
	Currency  string       `json:"currency"`
	Spent24h  ledger.Money `json:"spent_24h"`
	// RunsOutInSeconds is the balance over the last 24 hours' spend per
	// second; nil when nothing was spent.
	RunsOutInSeconds *int64 `json:"runs_out_in_seconds"`
}

// MonthSpend is the data of a spend.month event.
type MonthSpend struct {
	Month     string       `json:"month"` // 2026-11
	Spend     ledger.Money `json:"spend"`
	Threshold ledger.Money `json:"threshold"`
	Currency  string       `json:"currency"`
}

// KeyRef names a key in an event.
type KeyRef struct {
	ID     string `json:"id"`
	Label  string `json:"label"`
	Prefix string `json:"prefix"`
}

// KeyCap is the data of the key.cap_80 and key.cap_100 events.
type KeyCap struct {
	Key    KeyRef       `json:"key"`
	Cap    ledger.Money `json:"cap"`
	Spent  ledger.Money `json:"spent"`
	Period string       `json:"period"`
	// ResetsAt is when the cap starts afresh; nil for a cap that never
	// resets.
	ResetsAt *time.Time `json:"resets_at"`
}

// AutoTopupFailed is the data of an autotopup.failed event: the card was
// declined or needs the customer's authentication, and automatic top-up
// was turned off.
type AutoTopupFailed struct {
	Amount              ledger.Money `json:"amount"`
	Currency            string       `json:"currency"`
	Code                string       `json:"code"`
	Message             string       `json:"message"`
	NeedsAuthentication bool         `json:"needs_authentication"`
}

// AutoTopupLimit is the data of an autotopup.limit event: the balance fell
// below Below, but Amount more would take this month's automatic top-ups
// (ThisMonth) past MonthMax, so no top-up was made.
type AutoTopupLimit struct {
	Balance   ledger.Money `json:"balance"`
	Below     ledger.Money `json:"below"`
	Amount    ledger.Money `json:"amount"`
	ThisMonth ledger.Money `json:"this_month"`
	MonthMax  ledger.Money `json:"month_max"`
	Currency  string       `json:"currency"`
}

// autoTopupCharge is the payload of a top-up's delivery.
type autoTopupCharge struct {
	Amount   ledger.Money `json:"amount"`
	Currency string       `json:"currency"`
	Balance  ledger.Money `json:"balance"`
	Below    ledger.Money `json:"below"`
}

// newEvent makes the JSON of an event of typ for the account at now: one
// id per fired alert, shared by its mail and its webhook.
func newEvent(typ, accountID string, now time.Time, data any) ([]byte, error) {
	raw, err := json.Marshal(data)
	if err != nil {
		return nil, fmt.Errorf("alerts: %s data: %w", typ, err)
	}
	ev := Event{ID: "evt_" + randomID(), Type: typ, Created: now.UTC().Truncate(time.Second), Account: accountID, Data: raw}
	body, err := json.Marshal(ev)
	if err != nil {
		return nil, fmt.Errorf("alerts: %s event: %w", typ, err)
	}
	return body, nil
}

// day is the span of the burn rate.
const day = 24 * time.Hour

// RunsOutIn is how long balance lasts at the rate of spent per 24 hours:
// balance × 24 h ÷ spent, in whole seconds; ok is false when nothing was
// spent. A balance at or below zero has run out already (0). The product
// is taken in big integers: nanos times seconds overflow int64.
func RunsOutIn(balance, spent24h ledger.Money) (seconds int64, ok bool) {
	if spent24h <= 0 {
		return 0, false
	}
	if balance <= 0 {
		return 0, true
	}
	n := new(big.Int).Mul(big.NewInt(int64(balance)), big.NewInt(int64(day/time.Second)))
	n.Quo(n, big.NewInt(int64(spent24h)))
	if !n.IsInt64() {
		return 1<<63 - 1, true
	}
	return n.Int64(), true
}

// RunOutWords says in words how long a balance lasts, for the low-balance
// mail: "about 9 hours". It counts minutes under an hour, hours under two
// days, then days, each rounded to the nearest.
func RunOutWords(seconds int64) string {
	const minute, hour, day = 60, 3600, 86400
	if seconds < minute {
		return "less than a minute"
	}
	if m := (seconds + minute/2) / minute; m < 60 {
		return "about " + plural(m, "minute")
	}
	if h := (seconds + hour/2) / hour; h < 48 {
		return "about " + plural(h, "hour")
	}
	return "about " + plural((seconds+day/2)/day, "day")
}

// plural is "1 hour", "9 hours".
func plural(n int64, unit string) string {
	if n == 1 {
		return "1 " + unit
	}
	return fmt.Sprintf("%d %ss", n, unit)
}
