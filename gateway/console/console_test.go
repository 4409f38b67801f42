package console

import (
	"net/url"
	"testing"
	"time"

	"github.com/modelgate/modelgate/ledger"
	"github.com/modelgate/modelgate/relay"
	"github.com/modelgate/modelgate/web"
)

func TestParseUsageQuery(t *testing.T) {
	now := time.Date(2026, 11, 25, 15, 0, 0, 0, time.UTC)
	keys := []ledger.Key{{ID: "key_a"}, {ID: "key_b", Deleted: true}}
	for _, tc := range []struct {
		query, from, to, key string
		problem              bool
	}{
		{query: "", from: "2026-10-27", to: "2026-11-25"},
		{query: "from=2026-11-01&to=2026-11-03&key=key_b", from: "2026-11-01", to: "2026-11-03", key: "key_b"},
		{query: "from=2026-11-03&to=2026-11-01", from: "2026-11-01", to: "2026-11-03"},
		{query: "to=2026-01-31", from: "2026-01-02", to: "2026-01-31"},
		{query: "from=2020-01-01&to=2026-11-25", from: "2025-11-25", to: "2026-11-25", problem: true},
		{query: "from=yesterday", from: "2026-10-27", to: "2026-11-25", problem: true},
		{query: "key=key_other", from: "2026-10-27", to: "2026-11-25", problem: true},
	} {
		v, _ := url.ParseQuery(tc.query)
		q := parseUsageQuery(v, keys, now)
		if got := [3]string{q.from.Format(dayLayout), q.to.Format(dayLayout), q.keyID}; got != [3]string{tc.from, tc.to, tc.key} || (q.problem != "") != tc.problem {
			t.Errorf("%q: %v %q", tc.query, got, q.problem)
		}
		if q.days() > usageMaxDays {
			t.Errorf("%q: %d days", tc.query, q.days())
		}
	}
}

func TestCSVText(t *testing.T) {
	for in, want := range map[string]string{"laptop": "laptop", "=1+1": "'=1+1", "+x": "'+x", "-x": "'-x", "@x": "'@x", "": "", "a=b": "a=b"} {
		if got := csvText(in); got != want {
			t.Errorf("%q: %q, want %q", in, got, want)
		}
	}
}

func TestConsoleMonth(t *testing.T) {
	now := time.Date(2026, 11, 30, 23, 0, 0, 0, time.UTC)
	if m := consoleMonth(&relay.Plan{}, 5, now); m != nil {
		t.Errorf("a plan without tiers: %+v", m)
	}
	p := &relay.Plan{Tiers: []relay.Tier{{Above: 1000e9, Bps: 500}, {Above: 10000e9, Bps: 1000}}}
	for _, tt := range []struct {
		spend      ledger.Money
		tier, next string
	}{
		{0, "", "5% off, above 1,000.00"},
		{1000e9, "", "5% off, above 1,000.00"},
		{1000e9 + 1, "5% off, above 1,000.00", "10% off, above 10,000.00"},
		{20000e9, "10% off, above 10,000.00", ""},
	} {
		m := consoleMonth(p, tt.spend, now)
		if m == nil || m.Month != "November 2026" || m.Spent != web.AmountOf(tt.spend) || m.Tier != tt.tier || m.Next != tt.next {
			t.Errorf("spend %d: %+v, want tier %q next %q", tt.spend, m, tt.tier, tt.next)
		}
	}
}
