package gateway

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/modelgate/modelgate/ledger"
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
