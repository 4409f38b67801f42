package alerts

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/modelgate/modelgate/ledger"
)

// mailText is the subject and the plain text of the mail that tells of
// ev: what crossed, in words, the numbers, and where to change the alerts
// or top up.
func mailText(cfg Config, ev Event) (subject, text string, err error) {
	cfg = cfg.withDefaults()
	cur := strings.ToUpper(cfg.Currency)
	// amount shows one of the payload's amounts as the pages do
	amount := func(m ledger.Money) string { return m.Display() + " " + cur }
	var b strings.Builder
	name := cfg.ServiceName
	switch ev.Type {
	case TypeBalanceLow:
		var d LowBalance
		if err := json.Unmarshal(ev.Data, &d); err != nil {
			return "", "", err
		}
		subject = name + ": your balance is below " + amount(d.Threshold)
		fmt.Fprintf(&b, "The balance of your account at %s is %s, below the %s you asked to be warned at.\n\n",
			name, amount(d.Balance), amount(d.Threshold))
		switch {
		case d.RunsOutInSeconds == nil:
			b.WriteString("Nothing was spent in the last 24 hours, so there is no estimate of when it runs out.\n")
		case *d.RunsOutInSeconds == 0:
			fmt.Fprintf(&b, "In the last 24 hours it spent %s; it has run out.\n", amount(d.Spent24h))
		default:
			fmt.Fprintf(&b, "In the last 24 hours it spent %s. At the last 24 hours' rate, the balance runs out in %s.\n",
				amount(d.Spent24h), RunOutWords(*d.RunsOutInSeconds))
		}
		b.WriteString("\nYou are warned again after the balance goes back above the threshold and falls below it once more.\n")
	case TypeSpendMonth:
		var d MonthSpend
		if err := json.Unmarshal(ev.Data, &d); err != nil {
			return "", "", err
		}
		subject = name + ": this month's spend reached " + amount(d.Threshold)
		fmt.Fprintf(&b, "Your account at %s has spent %s in %s (UTC), reaching the %s you asked to be warned at.\n\n"+
			"You are warned once a month.\n", name, amount(d.Spend), d.Month, amount(d.Threshold))
	case TypeKeyCap80, TypeKeyCap100:
		var d KeyCap
		if err := json.Unmarshal(ev.Data, &d); err != nil {
			return "", "", err
		}
		key := keyName(d.Key)
		if ev.Type == TypeKeyCap80 {
			subject = name + ": " + key + " has spent 80% of its cap"
			fmt.Fprintf(&b, "Your API %s at %s has spent %s of its spend cap of %s%s: 80%% or more.\n",
				key, name, amount(d.Spent), amount(d.Cap), perPeriod(d.Period))
		} else {
			subject = name + ": " + key + " reached its spend cap"
			fmt.Fprintf(&b, "Your API %s at %s has reached its spend cap of %s%s (it spent %s): "+
				"requests with it are refused until the cap starts afresh or is raised.\n",
				key, name, amount(d.Cap), perPeriod(d.Period), amount(d.Spent))
		}
		if d.ResetsAt != nil {
			fmt.Fprintf(&b, "\nThe cap starts afresh at %s.\n", d.ResetsAt.UTC().Format("2006-01-02 15:04 UTC"))
		} else {
			b.WriteString("\nThe cap never starts afresh: raise it, or use another key.\n")
		}
	case TypeAutoTopupFailed:
		var d AutoTopupFailed
		if err := json.Unmarshal(ev.Data, &d); err != nil {
			return "", "", err
		}
		subject = name + ": automatic top-up failed and was turned off"
		why := "your card was declined"
		if d.NeedsAuthentication {
			why = "your bank asks you to confirm the payment, which cannot be done while you are away"
		}
		fmt.Fprintf(&b, "The automatic top-up of %s to your account at %s failed: %s (%s: %s).\n\n"+
			"Automatic top-up is now off. Top up by hand, or save a card that works and turn automatic top-up on again.\n",
			amount(d.Amount), name, why, d.Code, d.Message)
	case TypeAutoTopupLimit:
		var d AutoTopupLimit
		if err := json.Unmarshal(ev.Data, &d); err != nil {
			return "", "", err
		}
		subject = name + ": automatic top-up stopped by its monthly maximum"
		fmt.Fprintf(&b, "The balance of your account at %s is %s, below the %s at which it is topped up automatically, "+
			"but no top-up was made: another %s would take this month's automatic top-ups (%s so far) past their monthly maximum of %s.\n\n"+
			"Top up by hand, or raise the monthly maximum.\n",
			name, amount(d.Balance), amount(d.Below), amount(d.Amount), amount(d.ThisMonth), amount(d.MonthMax))
	default:
		return "", "", fmt.Errorf("alerts: no mail for events of type %q", ev.Type)
	}
	if cfg.ConsoleURL != "" {
		fmt.Fprintf(&b, "\nTo top up or change your alerts, go to %s\n", cfg.ConsoleURL)
	}
	fmt.Fprintf(&b, "\n(Event %s, account %s.)\n", ev.ID, ev.Account)
	return subject, b.String(), nil
}

// keyName names a key in a mail: by its label and prefix.
func keyName(k KeyRef) string {
	if k.Label == "" {
		return "key " + k.Prefix + "…"
	}
	return fmt.Sprintf("key %q (%s…)", k.Label, k.Prefix)
}

// perPeriod is " per day", or "" for a cap that never resets.
func perPeriod(p string) string {
	if p == "" || p == string(ledger.PeriodNever) {
		return ""
	}
	return " per " + p
}
