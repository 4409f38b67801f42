package console

import (
	"net/url"
	"strings"
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

func TestWhatFired(t *testing.T) {
	for _, tc := range []struct {
		alert, payload, want string
	}{
		{"low_balance", `{"type":"balance.low","data":{}}`, "Low balance"},
		{"month_spend:2026-11", `{"type":"spend.month"}`, "Month's spend"},
		{"key_cap_80:key_a:1", `{"type":"key.cap_80","data":{"key":{"id":"key_a","label":"ci","prefix":"mg-Ab…Cd"}}}`, "Key at 80 % of its cap (ci mg-Ab…Cd)"},
		{"key_cap_100:key_a:1", `{"type":"key.cap_100","data":{"key":{"prefix":"mg-Ab…Cd"}}}`, "Key at its cap (mg-Ab…Cd)"},
		{"topup:x", `{"type":"autotopup.failed"}`, "Automatic top-up failed"},
		{"auto_topup", `{}`, "Automatic top-up"},
		{"autotopup_failed:topup:acct:1", `{}`, "Automatic top-up failed"},
		{"auto_topup", `{"type":"autotopup.limit"}`, "Automatic top-up stopped by its monthly maximum"},
		{"key_cap_100:key_b:2", `not json`, "Key at its cap"},
		{"something_new", `{"type":"something.new"}`, "something_new"},
	} {
		if got := whatFired(&ledger.Delivery{Alert: tc.alert, Payload: []byte(tc.payload)}); got != tc.want {
			t.Errorf("%s %s: %q, want %q", tc.alert, tc.payload, got, tc.want)
		}
	}
}

func TestCardName(t *testing.T) {
	for _, tc := range []struct {
		card ledger.SavedCard
		want string
	}{
		{ledger.SavedCard{Brand: "visa", Last4: "4242"}, "Visa •••• 4242"},
		{ledger.SavedCard{Brand: "amex", Last4: "0005"}, "American Express •••• 0005"},
		{ledger.SavedCard{Brand: "link", Last4: "1111"}, "Link •••• 1111"},
		{ledger.SavedCard{Last4: "1111"}, "Card •••• 1111"},
		{ledger.SavedCard{Brand: "visa"}, "Visa"},
	} {
		if got := cardName(tc.card); got != tc.want {
			t.Errorf("%+v: %q, want %q", tc.card, got, tc.want)
		}
	}
}

func TestAmountField(t *testing.T) {
	for _, tc := range []struct {
		raw  string
		want ledger.Money
		bad  bool
	}{
		{"", 0, false}, {" off ", 0, false}, {"None", 0, false}, {"5", 5 * ledger.NanosPerUnit, false},
		{"0.000000001", 1, false}, {"-1", 0, true}, {"lots", 0, true}, {"1.0000000001", 0, true},
	} {
		got, err := amountField(tc.raw, "Low balance")
		if got != tc.want || (err != nil) != tc.bad {
			t.Errorf("%q: %v %v", tc.raw, got, err)
		}
		if err != nil && !strings.HasPrefix(err.Error(), "Low balance: enter an amount") {
			t.Errorf("%q: %v", tc.raw, err)
		}
	}
	for m, want := range map[ledger.Money]string{0: "", 20 * ledger.NanosPerUnit: "20", 100_500_000_000: "100.5", 1: "0.000000001"} {
		if got := formAmount(m); got != want {
			t.Errorf("formAmount(%d) = %q, want %q", m, got, want)
		}
	}
}
