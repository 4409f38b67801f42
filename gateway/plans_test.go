package gateway

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/modelgate/modelgate/ledger"
	"github.com/modelgate/modelgate/relay"
)

func TestPlanModels(t *testing.T) {
	models := map[string]*relay.Model{}
	for _, id := range []string{"gpt-4o", "gpt-4o-mini", "claude-sonnet", "claude-haiku", "gemini-flash"} {
		models[id] = &relay.Model{ID: id}
	}
	got, err := planModels("p", nil, models)
	if err != nil || got != nil {
		t.Fatalf("no list: %v, %v; want nil (every model)", got, err)
	}
	got, err = planModels("p", []string{"claude-*", "gpt-4o-mini"}, models)
	if err != nil {
		t.Fatal(err)
	}
	if ids := slices.Sorted(maps.Keys(got)); !slices.Equal(ids, []string{"claude-haiku", "claude-sonnet", "gpt-4o-mini"}) {
		t.Fatalf("offered %v", ids)
	}
	for _, tt := range []struct {
		list []string
		want string
	}{
		{[]string{}, "name at least one model"},
		{[]string{"gpt-4o-mimi"}, "no model gpt-4o-mimi"},
		{[]string{"llama-*"}, "llama-* matches no model"},
		{[]string{""}, "empty pattern"},
	} {
		if _, err := planModels("p", tt.list, models); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%q: %v, want an error saying %q", tt.list, err, tt.want)
		}
	}
}

func TestBuildTiers(t *testing.T) {
	tiers, err := buildTiers("p", 1500, "15%", []TierConfig{{"1000.00", "5%"}, {"10000", "10.5%"}})
	if err != nil {
		t.Fatal(err)
	}
	want := []relay.Tier{{Above: 1000 * ledger.Money(1e9), Bps: 500}, {Above: 10000 * ledger.Money(1e9), Bps: 1050}}
	if !slices.Equal(tiers, want) {
		t.Fatalf("tiers %+v, want %+v", tiers, want)
	}
	p := &relay.Plan{Tiers: tiers}
	for _, tt := range []struct {
		spend ledger.Money
		want  int
	}{
		{0, 0}, {1000 * 1e9, 0}, {1000*1e9 + 1, 500}, {10000 * 1e9, 500}, {10000*1e9 + 1, 1050}, {1 << 62, 1050},
	} {
		if got := p.TierBps(tt.spend); got != tt.want {
			t.Errorf("TierBps(%d) = %d, want %d", tt.spend, got, tt.want)
		}
	}
	if got := (&relay.Plan{}).TierBps(1 << 62); got != 0 {
		t.Errorf("no tiers: TierBps = %d", got)
	}
	for _, tt := range []struct {
		flat  int
		tiers []TierConfig
		want  string
	}{
		{0, []TierConfig{{"-1", "5%"}}, "must not be negative"},
		{0, []TierConfig{{"1000", "0%"}}, "is no tier"},
		{0, []TierConfig{{"1000", "5"}}, "must end in %"},
		{0, []TierConfig{{"10.0000000001", "5%"}}, "tier 10.0000000001"},
		{9500, []TierConfig{{"1000", "5%"}}, "must add up to less than 100%"},
		{0, []TierConfig{{"1000", "5%"}, {"1000", "10%"}}, "ascending order of spend"},
		{0, []TierConfig{{"1000", "5%"}, {"500", "10%"}}, "ascending order of spend"},
		{0, []TierConfig{{"1000", "5%"}, {"2000", "5%"}}, "higher discount"},
	} {
		if _, err := buildTiers("p", tt.flat, "x%", tt.tiers); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%+v: %v, want an error saying %q", tt.tiers, err, tt.want)
		}
	}
}

func TestPercent(t *testing.T) {
	for bps, want := range map[int]string{0: "0%", 5: "0.05%", 50: "0.5%", 333: "3.33%", 500: "5%", 1050: "10.5%", 9999: "99.99%"} {
		if got := Percent(bps); got != want {
			t.Errorf("Percent(%d) = %q, want %q", bps, got, want)
		}
	}
}
