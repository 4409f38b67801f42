package gateway

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/modelgate/modelgate/ledger"
	"github.com/modelgate/modelgate/relay"
)

// TierConfig is a plan's volume tier: Discount more off every request
// once the account's spend in the current calendar month (UTC) is above
// Above (docs/billing.md, "Plan discounts and volume tiers").
type TierConfig struct {
	// Above is a money amount, e.g. "1000.00".
	Above string `json:"above"`
	// Discount is a percentage, e.g. "5%", added to the plan's discount.
	Discount string `json:"discount"`
}

// buildTiers checks a plan's volume tiers: thresholds not negative and
// strictly ascending, discounts ascending, and each added to the plan's
// flat discount (flatBps, written flat) below 100%.
func buildTiers(plan string, flatBps int, flat string, tcs []TierConfig) ([]relay.Tier, error) {
	if len(tcs) == 0 {
		return nil, nil
	}
	tiers := make([]relay.Tier, 0, len(tcs))
	for i, tc := range tcs {
		above, err := ledger.ParseMoney(tc.Above)
		if err != nil {
			return nil, fmt.Errorf("plan %s: tier %s: %w", plan, tc.Above, err)
		}
		if above < 0 {
			return nil, fmt.Errorf("plan %s: tier %s: must not be negative", plan, tc.Above)
		}
		bps, err := ledger.ParseDiscount(tc.Discount)
		if err != nil {
			return nil, fmt.Errorf("plan %s: tier %s: %w", plan, tc.Above, err)
		}
		if bps == 0 {
			return nil, fmt.Errorf("plan %s: tier %s: a discount of 0%% is no tier", plan, tc.Above)
		}
		if flatBps+bps >= 10000 {
			return nil, fmt.Errorf("plan %s: tier %s: its discount and the plan's (%s and %s) must add up to less than 100%%",
				plan, tc.Above, tc.Discount, flat)
		}
		if i > 0 {
			prev := tiers[i-1]
			if above <= prev.Above {
				return nil, fmt.Errorf("plan %s: tier %s: tiers must be in ascending order of spend", plan, tc.Above)
			}
			if bps <= prev.Bps {
				return nil, fmt.Errorf("plan %s: tier %s: a higher tier must give a higher discount than %s",
					plan, tc.Above, tcs[i-1].Discount)
			}
		}
		tiers = append(tiers, relay.Tier{Above: above, Bps: bps})
	}
	return tiers, nil
}

// planModels resolves a plan's model list against the catalogue: each
// entry is a model ID or a pattern in which * stands for any run of
// characters, and must name or match at least one model (a typo would
// otherwise leave the plan's accounts without a model they pay for). No
// list: nil, every model.
func planModels(plan string, patterns []string, models map[string]*relay.Model) (map[string]*relay.Model, error) {
	if patterns == nil {
		return nil, nil
	}
	if len(patterns) == 0 {
		return nil, fmt.Errorf("plan %s: models: name at least one model or pattern", plan)
	}
	offered := make(map[string]*relay.Model)
	ids := make([]string, 0, len(models))
	for id := range models {
		ids = append(ids, id)
	}
	for _, pat := range patterns {
		if pat == "" {
			return nil, fmt.Errorf("plan %s: models: empty pattern", plan)
		}
		matched := false
		for id, m := range models {
			if relay.GlobMatch(pat, id) {
				offered[id], matched = m, true
			}
		}
		if !matched {
			if !strings.Contains(pat, "*") {
				return nil, fmt.Errorf("plan %s: models: no model %s %s", plan, pat, known("models", pat, ids))
			}
			return nil, fmt.Errorf("plan %s: models: %s matches no model", plan, pat)
		}
	}
	return offered, nil
}

// planModelList is the sorted list of the models p offers, and its OpenAI
// list document; all is the catalogue's, served when p offers every model.
type planModelList struct {
	models []*relay.Model
	doc    []byte
}

// buildPlanLists renders the model list of every plan with a model list,
// from the sorted catalogue (whose models have their Doc).
func (a *App) buildPlanLists() {
	a.planLists = make(map[*relay.Plan]planModelList, len(a.plans))
	for _, p := range a.plans {
		if p.Models == nil {
			continue
		}
		var l planModelList
		for _, m := range a.modelList {
			if p.Models[m.ID] != nil {
				l.models = append(l.models, m)
			}
		}
		l.doc = modelListDoc(l.models)
		a.planLists[p] = l
	}
}

// modelsFor is the sorted model list a caller on plan p sees, and its
// OpenAI document.
func (a *App) modelsFor(p *relay.Plan) ([]*relay.Model, []byte) {
	if p != nil && p.Models != nil {
		if l, ok := a.planLists[p]; ok {
			return l.models, l.doc
		}
	}
	return a.modelList, a.modelsDoc
}

// AccountPlan is the plan of an account whose plan is named name: that
// plan, or the default plan when the configuration has no such plan.
func (a *App) AccountPlan(name string) *relay.Plan { return a.plan(name) }

// Percent writes basis points as a percentage: 500 "5%", 1050 "10.5%",
// 333 "3.33%", 0 "0%".
func Percent(bps int) string {
	s := strconv.Itoa(bps / 100)
	if frac := bps % 100; frac != 0 {
		s += strings.TrimRight("."+strconv.Itoa(100 + frac)[1:], "0")
	}
	return s + "%"
}

// tierPercent is the volume tier of plan p at a month's spend, "" for none.
func tierPercent(p *relay.Plan, spend ledger.Money) string {
	if bps := p.TierBps(spend); bps != 0 {
		return Percent(bps)
	}
	return ""
}
