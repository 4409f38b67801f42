package gateway

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/modelgate/modelgate/ledger"
	"github.com/modelgate/modelgate/relay"
)

// TestKeyLimitsBodyApply: a change of a key's limits keeps what it leaves
// out, sets what it sends and clears what it sends as null, a repeated
// field's null included.
func TestKeyLimitsBodyApply(t *testing.T) {
	key := ledger.KeyLimits{Cap: 5 * ledger.NanosPerUnit, Period: ledger.PeriodDay, Models: []string{"gpt-*"}, RPM: 10, Concurrency: 2}
	for _, tc := range []struct {
		body string
		want ledger.KeyLimits
	}{
		{`{}`, key},
		{`{"models": null}`, ledger.KeyLimits{Cap: key.Cap, Period: key.Period, RPM: 10, Concurrency: 2}},
		{`{"models": ["a", "b*"], "rpm": 3}`, ledger.KeyLimits{Cap: key.Cap, Period: key.Period, Models: []string{"a", "b*"}, RPM: 3, Concurrency: 2}},
		{`{"models": ["a"], "models": null}`, ledger.KeyLimits{Cap: key.Cap, Period: key.Period, RPM: 10, Concurrency: 2}},
		{`{"rpm": null, "concurrency": null}`, ledger.KeyLimits{Cap: key.Cap, Period: key.Period, Models: key.Models}},
		{`{"cap": null}`, ledger.KeyLimits{Period: ledger.PeriodNever, Models: key.Models, RPM: 10, Concurrency: 2}},
		{`{"cap": "7.5", "period": "week"}`, ledger.KeyLimits{Cap: 7_500_000_000, Period: ledger.PeriodWeek, Models: key.Models, RPM: 10, Concurrency: 2}},
	} {
		var b keyLimitsBody
		if err := json.Unmarshal([]byte(tc.body), &b); err != nil {
			t.Fatalf("%s: %v", tc.body, err)
		}
		got, err := b.apply(key)
		if err != nil {
			t.Fatalf("%s: %v", tc.body, err)
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: limits %+v, want %+v", tc.body, got, tc.want)
		}
	}
}

// TestKeyOfferAndLeastRequest: a plan offers keys the patterns that match
// one of its models; a key's least request is priced at the cheapest
// model both its plan and its own list let it call.
func TestKeyOfferAndLeastRequest(t *testing.T) {
	models := map[string]*relay.Model{}
	for id, price := range map[string]ledger.Money{"gpt-big": 10, "gpt-small": 2, "claude-cheap": 1, "claude-mid": 3} {
		models[id] = &relay.Model{ID: id, Price: ledger.Price{Input: price, Output: price}}
	}
	gpt := &relay.Plan{Name: "gpt", Models: map[string]*relay.Model{"gpt-big": models["gpt-big"], "gpt-small": models["gpt-small"]}}
	a := &App{models: models, plans: map[string]*relay.Plan{"gpt": gpt, "all": {Name: "all"}}, DefaultPlan: "all", MinOutput: 100}

	offer := planOffer(gpt, models)
	for pattern, want := range map[string]bool{"gpt-*": true, "gpt-small": true, "claude-*": false, "claude-cheap": false, "*": true, "": false} {
		if got := offer.Offers(pattern); got != want {
			t.Errorf("plan gpt offers %q: %v, want %v", pattern, got, want)
		}
	}
	if planOffer(nil, models) != nil {
		t.Error("no plan offers something")
	}

	for _, tc := range []struct {
		plan   string
		models []string
		want   ledger.Money
	}{
		{"all", nil, 100 * 2 * 1},                             // claude-cheap
		{"gpt", nil, 100 * 2 * 2},                             // gpt-small
		{"all", []string{"gpt-*", "claude-mid"}, 100 * 2 * 2}, // gpt-small
		{"all", []string{"claude-mid", "gpt-big"}, 100 * 2 * 3},
		{"gpt", []string{"gpt-big", "claude-*"}, 100 * 2 * 10}, // claude is not on the plan
		{"gpt", []string{"claude-*"}, 0},                       // nothing callable
		{"gone", nil, 100 * 2 * 1},                             // the default plan's
	} {
		if got := a.KeyLeastRequest(tc.plan, &ledger.KeyLimits{Models: tc.models}); got != tc.want {
			t.Errorf("plan %s, models %v: least request %d, want %d", tc.plan, tc.models, got, tc.want)
		}
	}
}
