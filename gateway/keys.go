package gateway

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"

	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	"github.com/spf13/cobra"

	"github.com/modelgate/modelgate/accounts"
	"github.com/modelgate/modelgate/ledger"
	"github.com/modelgate/modelgate/relay"
)

// A key's own limits (docs/api.md, "Keys as projects") as the operator's
// surfaces take and show them: the admin API's key routes, the CLI's key
// commands, and their shared JSON.

// planOffer is what plan p offers its accounts' keys, from the catalogue
// (every model when p has no model list).
func planOffer(p *relay.Plan, catalogue map[string]*relay.Model) *accounts.PlanOffer {
	if p == nil {
		return nil
	}
	models := catalogue
	if p.Models != nil {
		models = p.Models
	}
	return &accounts.PlanOffer{RPM: p.RPM, Concurrency: p.Concurrency, Offers: func(pattern string) bool {
		if pattern == "" {
			return false
		}
		for id := range models {
			if relay.GlobMatch(pattern, id) {
				return true
			}
		}
		return false
	}}
}

// keyOffer is what the plan named name offers keys: the default plan's
// for a name the configuration no longer has, as for requests.
func (a *App) keyOffer(name string) *accounts.PlanOffer { return planOffer(a.plan(name), a.models) }

// keyLimitsView is a key's own limits, and where its cap stands now, as
// the admin API and the CLI's --json show them: each only when set.
// SpentThisPeriod, Left and ResetsAt are shown with a cap (ResetsAt not
// for a cap that never resets); Left does not count requests under way.
type keyLimitsView struct {
	Cap             *ledger.Money `json:"cap,omitempty"`
	Period          ledger.Period `json:"period,omitempty"`
	SpentThisPeriod *ledger.Money `json:"spent_this_period,omitempty"`
	Left            *ledger.Money `json:"left,omitempty"`
	ResetsAt        *time.Time    `json:"resets_at,omitempty"`
	Models          []string      `json:"models,omitempty"`
	ExpiresAt       *time.Time    `json:"expires_at,omitempty"`
	Expired         bool          `json:"expired,omitempty"`
	RPM             int           `json:"rpm,omitempty"`
	Concurrency     int           `json:"concurrency,omitempty"`
}

// toKeyLimitsView is k's limits at now.
func toKeyLimitsView(k *ledger.Key, now time.Time) keyLimitsView {
	l := &k.Limits
	v := keyLimitsView{Models: l.Models, RPM: l.RPM, Concurrency: l.Concurrency, Expired: l.Expired(now)}
	if l.Capped() {
		c, spent, left := l.Cap, k.SpentThisPeriod(now), k.Left(now)
		v.Cap, v.Period, v.SpentThisPeriod, v.Left = &c, l.Period, &spent, &left
		if r := k.ResetsAt(now); !r.IsZero() {
			v.ResetsAt = &r
		}
	}
	if !l.ExpiresAt.IsZero() {
		t := l.ExpiresAt.UTC()
		v.ExpiresAt = &t
	}
	return v
}

// patchField is a field of a key's limits as a request sends it: absent
// (Set false) keeps the key's, null clears it.
type patchField[T any] struct {
	Set, Null bool
	V         T
}

// UnmarshalJSON records that the field was sent, and whether as null: a
// null leaves V zero, even after an earlier value of a repeated key.
func (f *patchField[T]) UnmarshalJSON(b []byte) error {
	f.Set = true
	if string(b) == "null" {
		var zero T
		f.Null, f.V = true, zero
		return nil
	}
	return json.Unmarshal(b, &f.V)
}

// keyLimitsBody is a key's limits as the admin API takes them (and the
// CLI's flags, read into it): at creation, the limits the key has; in a
// change, the limits that change, null clearing one.
type keyLimitsBody struct {
	Cap         patchField[ledger.Money] `json:"cap"`
	Period      patchField[string]       `json:"period"`
	Models      patchField[[]string]     `json:"models"`
	ExpiresAt   patchField[string]       `json:"expires_at"`
	RPM         patchField[int]          `json:"rpm"`
	Concurrency patchField[int]          `json:"concurrency"`
}

// any reports whether the body sets or clears a limit.
func (b *keyLimitsBody) any() bool {
	return b.Cap.Set || b.Period.Set || b.Models.Set || b.ExpiresAt.Set || b.RPM.Set || b.Concurrency.Set
}

// apply is l with the body's changes. Clearing the cap clears its period
// too, unless the body sets one.
func (b *keyLimitsBody) apply(l ledger.KeyLimits) (ledger.KeyLimits, error) {
	if b.Cap.Set {
		l.Cap = b.Cap.V
		if l.Cap == 0 && !b.Period.Set {
			l.Period = ledger.PeriodNever
		}
	}
	if b.Period.Set {
		l.Period = ledger.Period(b.Period.V)
	}
	patch(&l.Models, b.Models) // null: nil, all the plan's models
	if b.ExpiresAt.Set {
		t, err := accounts.ParseExpiry(b.ExpiresAt.V)
		if err != nil {
			return l, &accounts.InvalidError{Msg: "expires_at " + err.Error()}
		}
		l.ExpiresAt = t
	}
	patch(&l.RPM, b.RPM)
	patch(&l.Concurrency, b.Concurrency)
	return l, nil
}

// viewCap is a key's cap and where it stands now, for a table: the cap
// and its period, spent this period, left, and when it resets (UTC); "-"
// for each without a cap.
func viewCap(k *ledger.Key, now time.Time) (capped, spent, left, resets string) {
	if !k.Limits.Capped() {
		return "-", "-", "-", "-"
	}
	resets = "never"
	if r := k.ResetsAt(now); !r.IsZero() {
		resets = viewTime(r)
	}
	return k.Limits.Cap.Display() + "/" + string(k.Limits.Period), k.SpentThisPeriod(now).Display(), k.Left(now).Display(), resets
}

// viewLimits is a key's other limits, for a table: "models a,b; expires
// …; rpm 10; concurrency 2", or "-".
func viewLimits(l *ledger.KeyLimits, now time.Time) string {
	var parts []string
	if l.Models != nil {
		parts = append(parts, "models "+strings.Join(l.Models, ","))
	}
	if !l.ExpiresAt.IsZero() {
		word := "expires "
		if l.Expired(now) {
			word = "expired "
		}
		parts = append(parts, word+viewTime(l.ExpiresAt))
	}
	if l.RPM > 0 {
		parts = append(parts, fmt.Sprintf("rpm %d", l.RPM))
	}
	if l.Concurrency > 0 {
		parts = append(parts, fmt.Sprintf("concurrency %d", l.Concurrency))
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, "; ")
}

// addKeyLimitFlags adds the flags of a key's own limits to a key command.
func addKeyLimitFlags(c *cobra.Command) {
	c.Flags().String("cap", "", `the most the key may spend in a period, e.g. 20.00 ("none": no cap)`)
	c.Flags().String("period", "", "when the cap starts afresh, in UTC: day, week, month or never (default never)")
	c.Flags().String("models", "", `the models the key may call, within the plan: ids and patterns (* for any run of characters), comma-separated ("all": every model of the plan)`)
	c.Flags().String("expires", "", "when the key stops working: an RFC 3339 time, or a date (00:00 UTC), or never")
	c.Flags().Int("rpm", 0, "the key's own requests per minute, lower than the plan's (0: the plan's)")
	c.Flags().Int("concurrency", 0, "the key's own requests at once, lower than the plan's (0: the plan's)")
}

// keyLimitFlags reads the limit flags that were given into a body: the
// limits of a new key, or those a change sets.
func keyLimitFlags(fl caddycmd.Flags) (keyLimitsBody, error) {
	var b keyLimitsBody
	if fl.Changed("cap") {
		b.Cap.Set = true
		if v := strings.TrimSpace(fl.String("cap")); !strings.EqualFold(v, "none") {
			m, err := ledger.ParseMoney(v)
			if err != nil || m < 0 {
				return b, fmt.Errorf(`--cap %q: want an amount such as 20.00 (at most 9 decimal places), or none`, v)
			}
			b.Cap.V = m
		}
	}
	if fl.Changed("period") {
		b.Period.Set, b.Period.V = true, fl.String("period")
	}
	if fl.Changed("models") {
		b.Models.Set, b.Models.V = true, accounts.ParseModelList(fl.String("models"))
	}
	if fl.Changed("expires") {
		b.ExpiresAt.Set, b.ExpiresAt.V = true, fl.String("expires")
	}
	if fl.Changed("rpm") {
		b.RPM.Set, b.RPM.V = true, fl.Int("rpm")
	}
	if fl.Changed("concurrency") {
		b.Concurrency.Set, b.Concurrency.V = true, fl.Int("concurrency")
	}
	return b, nil
}

// printKeyLimits writes a key's limits and where its cap stands, on
// stderr, after a command that set them.
func printKeyLimits(k *ledger.Key) {
	now := time.Now()
	capped, spent, left, resets := viewCap(k, now)
	if capped == "-" {
		capped = "none"
	} else {
		capped += fmt.Sprintf(" (spent this period %s, left %s, resets %s)", spent, left, resets)
	}
	fmt.Fprintf(os.Stderr, "cap: %s; other limits: %s\n", capped, viewLimits(&k.Limits, now))
}

// KeyLeastRequest is what a modest request with limits l on the plan named
// plan holds at the least: min_output input and output tokens of the
// cheapest model the key may call. A cap that leaves less is, to the
// customer's pages, reached: a request of that size is refused with 403
// until the cap resets (only smaller ones still fit).
func (a *App) KeyLeastRequest(plan string, l *ledger.KeyLimits) ledger.Money {
	p := a.plan(plan)
	models := a.models
	if p != nil && p.Models != nil {
		models = p.Models
	}
	least := ledger.Money(-1)
	for id, m := range models {
		if !relay.KeyAllows(l, id) {
			continue
		}
		if c := ledger.Money(a.MinOutput) * (m.Price.Input + m.Price.Output); least < 0 || c < least {
			least = c
		}
	}
	return max(least, 0)
}
