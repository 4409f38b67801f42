package console

import (
	"net/url"
	"testing"
	"time"

	"github.com/modelgate/modelgate/ledger"
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
