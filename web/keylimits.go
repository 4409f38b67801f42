package web

import (
	"strconv"
	"strings"
	"time"

	"github.com/modelgate/modelgate/ledger"
)

// KeyLimits are a key's own limits, and where its cap stands, as the
// console and the lookup page show them.
type KeyLimits struct {
	// Capped: the key has a spend cap, Cap, which starts afresh each
	// Period ("day", "week", "month" or "never"); Spent is its spend this
	// period and Left what the cap leaves; CapReached when that is less
	// than a modest request holds (see KeyLimitsOf);
	// Resets when the cap starts afresh (UTC; "" for never).
	Capped, CapReached bool
	Cap, Spent, Left   Amount
	Period             string
	Resets, ResetsISO  string
	// Models are the models the key may call ("" for every model of the
	// plan); Expires when it stops working (UTC, "" for never; Expired
	// once it has); RPM and Concurrency its own limits ("" for the plan's).
	Models              string
	Expires, ExpiresISO string
	Expired             bool
	RPM, Concurrency    string
}

// KeyLimitsOf is k's limits and its cap's standing at now; its cap is
// reached when what it leaves is nothing, or less than least, the hold of
// a modest request to the cheapest model the key may call.
func KeyLimitsOf(k *ledger.Key, now time.Time, least ledger.Money) KeyLimits {
	l := &k.Limits
	var v KeyLimits
	if l.Capped() {
		v.Capped, v.Cap, v.Period = true, AmountOf(l.Cap), string(l.Period)
		left := k.Left(now)
		v.Spent, v.Left = AmountOf(k.SpentThisPeriod(now)), AmountOf(left)
		v.CapReached = left == 0 || left < least
		if r := k.ResetsAt(now); !r.IsZero() {
			v.Resets, v.ResetsISO = r.UTC().Format("2006-01-02 15:04"), r.UTC().Format(time.RFC3339)
		}
	}
	v.Models = strings.Join(l.Models, ", ")
	if !l.ExpiresAt.IsZero() {
		v.Expires, v.ExpiresISO = l.ExpiresAt.UTC().Format("2006-01-02 15:04"), l.ExpiresAt.UTC().Format(time.RFC3339)
		v.Expired = l.Expired(now)
	}
	if l.RPM > 0 {
		v.RPM = strconv.Itoa(l.RPM)
	}
	if l.Concurrency > 0 {
		v.Concurrency = strconv.Itoa(l.Concurrency)
	}
	return v
}

// Any reports whether the key has a limit of its own.
func (v *KeyLimits) Any() bool {
	return v.Capped || v.Models != "" || v.Expires != "" || v.RPM != "" || v.Concurrency != ""
}
