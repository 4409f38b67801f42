package accounts

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelgate/modelgate/ledger"
)

// testOffer offers gpt-4o, gpt-4o-mini and claude-sonnet, 60 rpm and 4 at
// once on "developer"; everything on "enterprise".
func testOffer(plan string) *PlanOffer {
	if plan != "developer" {
		return &PlanOffer{}
	}
	models := []string{"gpt-4o", "gpt-4o-mini", "claude-sonnet"}
	return &PlanOffer{RPM: 60, Concurrency: 4, Offers: func(pat string) bool {
		for _, m := range models {
			if pat == m || (strings.HasSuffix(pat, "*") && strings.HasPrefix(m, strings.TrimSuffix(pat, "*"))) {
				return true
			}
		}
		return false
	}}
}

func TestCheckKeyLimits(t *testing.T) {
	now := time.Date(2026, 11, 5, 12, 0, 0, 0, time.UTC)
	offer := testOffer("developer")
	past := now.Add(-time.Hour)
	for _, tc := range []struct {
		name    string
		l       ledger.KeyLimits
		old     *ledger.KeyLimits
		offer   *PlanOffer
		want    ledger.KeyLimits
		invalid string // the refusal's message, in part
	}{
		{name: "none", want: ledger.KeyLimits{Period: ledger.PeriodNever}},
		{name: "a cap by the day", l: ledger.KeyLimits{Cap: 20_000_000_000, Period: " Day "},
			want: ledger.KeyLimits{Cap: 20_000_000_000, Period: ledger.PeriodDay}},
		{name: "a period without a cap", l: ledger.KeyLimits{Period: ledger.PeriodMonth}, invalid: "give a cap too"},
		{name: "never without a cap", l: ledger.KeyLimits{Period: "never"}, want: ledger.KeyLimits{Period: ledger.PeriodNever}},
		{name: "an unknown period", l: ledger.KeyLimits{Cap: 1, Period: "fortnight"}, invalid: "use day, week, month or never"},
		{name: "a negative cap", l: ledger.KeyLimits{Cap: -1}, invalid: "want a positive amount"},
		{name: "models tidied", l: ledger.KeyLimits{Models: []string{" gpt-4o ", "gpt-*", "gpt-4o"}}, offer: offer,
			want: ledger.KeyLimits{Period: ledger.PeriodNever, Models: []string{"gpt-4o", "gpt-*"}}},
		{name: "a model outside the plan", l: ledger.KeyLimits{Models: []string{"gpt-5"}}, offer: offer,
			invalid: "models: gpt-5 is not a model the plan offers"},
		{name: "a pattern matching nothing in the plan", l: ledger.KeyLimits{Models: []string{"gemini-*"}}, offer: offer,
			invalid: "models: gemini-* matches no model the plan offers"},
		{name: "any model without the plan's catalogue", l: ledger.KeyLimits{Models: []string{"gpt-5"}},
			want: ledger.KeyLimits{Period: ledger.PeriodNever, Models: []string{"gpt-5"}}},
		{name: "an empty list", l: ledger.KeyLimits{Models: []string{}}, invalid: "name at least one model"},
		{name: "an empty entry", l: ledger.KeyLimits{Models: []string{"gpt-4o", " "}}, invalid: "an entry is empty"},
		{name: "an entry with a space", l: ledger.KeyLimits{Models: []string{"gpt-4o gpt-4o-mini"}}, invalid: "is not a model id or pattern"},
		{name: "too many entries", l: ledger.KeyLimits{Models: manyModels(ledger.MaxKeyModels + 1)}, invalid: "at most 100 entries"},
		{name: "rpm and concurrency within the plan", l: ledger.KeyLimits{RPM: 60, Concurrency: 4}, offer: offer,
			want: ledger.KeyLimits{Period: ledger.PeriodNever, RPM: 60, Concurrency: 4}},
		{name: "rpm above the plan", l: ledger.KeyLimits{RPM: 61}, offer: offer, invalid: "the plan allows at most 60 requests a minute"},
		{name: "concurrency above the plan", l: ledger.KeyLimits{Concurrency: 5}, offer: offer, invalid: "the plan allows at most 4 requests at once"},
		{name: "any rpm on an unlimited plan", l: ledger.KeyLimits{RPM: 100000}, offer: &PlanOffer{},
			want: ledger.KeyLimits{Period: ledger.PeriodNever, RPM: 100000}},
		{name: "negative rpm", l: ledger.KeyLimits{RPM: -1}, invalid: "rpm -1"},
		{name: "negative concurrency", l: ledger.KeyLimits{Concurrency: -1}, invalid: "concurrency -1"},
		{name: "an expiry to the millisecond", l: ledger.KeyLimits{ExpiresAt: now.Add(time.Hour + time.Microsecond)},
			want: ledger.KeyLimits{Period: ledger.PeriodNever, ExpiresAt: now.Add(time.Hour)}},
		{name: "an expiry in the past", l: ledger.KeyLimits{ExpiresAt: past}, invalid: "want a time in the future"},
		{name: "an expiry now", l: ledger.KeyLimits{ExpiresAt: now}, invalid: "want a time in the future"},
		{name: "a passed expiry kept as it was", l: ledger.KeyLimits{ExpiresAt: past, Cap: 5}, old: &ledger.KeyLimits{ExpiresAt: past},
			want: ledger.KeyLimits{Period: ledger.PeriodNever, ExpiresAt: past, Cap: 5}},
		{name: "a passed expiry changed", l: ledger.KeyLimits{ExpiresAt: past}, old: &ledger.KeyLimits{ExpiresAt: past.Add(-time.Hour)},
			invalid: "want a time in the future"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := CheckKeyLimits(tc.l, tc.old, tc.offer, now)
			if tc.invalid != "" {
				if !IsInvalid(err) || !strings.Contains(err.Error(), tc.invalid) {
					t.Fatalf("%v; want a refusal saying %q", err, tc.invalid)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Cap != tc.want.Cap || got.Period != tc.want.Period || !slices.Equal(got.Models, tc.want.Models) ||
				(got.Models == nil) != (tc.want.Models == nil) || !got.ExpiresAt.Equal(tc.want.ExpiresAt) ||
				got.RPM != tc.want.RPM || got.Concurrency != tc.want.Concurrency {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func manyModels(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = "m" + strings.Repeat("x", i)
	}
	return out
}

func TestKeyLimits(t *testing.T) {
	ctx := context.Background()
	svc := testService(t)
	svc.Offer = testOffer
	dev, err := svc.Open(ctx, Opening{})
	if err != nil {
		t.Fatal(err)
	}
	ent, err := svc.Open(ctx, Opening{Plan: "enterprise"})
	if err != nil {
		t.Fatal(err)
	}
	// created with limits, checked against the account's plan
	if _, _, err := svc.CreateKeyWithLimits(ctx, dev.ID, "ci", ledger.KeyLimits{RPM: 100}); !IsInvalid(err) {
		t.Fatalf("rpm above the developer plan: %v", err)
	}
	if _, _, err := svc.CreateKeyWithLimits(ctx, ent.ID, "ci", ledger.KeyLimits{RPM: 100}); err != nil {
		t.Fatalf("rpm on the unlimited enterprise plan: %v", err)
	}
	if _, _, err := svc.CreateKeyWithLimits(ctx, dev.ID, "ci", ledger.KeyLimits{ExpiresAt: time.Now().Add(-time.Minute)}); !IsInvalid(err) {
		t.Fatalf("a key that expired already: %v", err)
	}
	if _, _, err := svc.CreateKeyWithLimits(ctx, "acct_nope", "ci", ledger.KeyLimits{RPM: 1}); !errors.Is(err, ledger.ErrNotFound) {
		t.Fatalf("an unknown account: %v", err)
	}
	secret, k, err := svc.CreateKeyWithLimits(ctx, dev.ID, "ci", ledger.KeyLimits{Cap: 5_000_000_000, Period: "day", Models: []string{"gpt-*"}})
	if err != nil || !ledger.WellFormedKey(secret) {
		t.Fatal(err)
	}
	if k.Limits.Cap != 5_000_000_000 || k.Limits.Period != ledger.PeriodDay || !slices.Equal(k.Limits.Models, []string{"gpt-*"}) {
		t.Fatalf("%+v", k.Limits)
	}
	// changed: every limit replaced
	expires := time.Now().Add(48 * time.Hour).Truncate(time.Millisecond)
	got, err := svc.UpdateKey(ctx, k.ID, ledger.KeyLimits{Cap: 1_000_000_000, Period: "month", ExpiresAt: expires, Concurrency: 2})
	if err != nil {
		t.Fatal(err)
	}
	if got.Limits.Cap != 1_000_000_000 || got.Limits.Period != ledger.PeriodMonth || got.Limits.Models != nil ||
		!got.Limits.ExpiresAt.Equal(expires) || got.Limits.Concurrency != 2 || got.ResetsAt(time.Now()).IsZero() {
		t.Fatalf("%+v", got.Limits)
	}
	for _, tc := range []struct {
		name string
		id   string
		l    ledger.KeyLimits
		want func(error) bool
	}{
		{name: "no id", l: ledger.KeyLimits{}, want: IsInvalid},
		{name: "unknown key", id: "key_nope", want: func(err error) bool { return errors.Is(err, ledger.ErrNotFound) }},
		{name: "a model outside the plan", id: k.ID, l: ledger.KeyLimits{Models: []string{"o3"}}, want: IsInvalid},
		{name: "concurrency above the plan", id: k.ID, l: ledger.KeyLimits{Concurrency: 5}, want: IsInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := svc.UpdateKey(ctx, tc.id, tc.l); !tc.want(err) {
				t.Fatalf("%v", err)
			}
		})
	}
	// cleared
	if got, err = svc.UpdateKey(ctx, k.ID, ledger.KeyLimits{}); err != nil || !got.Limits.None() {
		t.Fatalf("%+v %v", got.Limits, err)
	}
	if err := svc.DeleteKey(ctx, k.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.UpdateKey(ctx, k.ID, ledger.KeyLimits{Cap: 1}); !IsInvalid(err) || !strings.Contains(err.Error(), "is deleted") {
		t.Fatalf("a deleted key: %v", err)
	}
}

func TestParseKeyInput(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{"", nil},
		{" all ", nil},
		{"gpt-4o", []string{"gpt-4o"}},
		{"gpt-4o, claude-*\n o3", []string{"gpt-4o", "claude-*", "o3"}},
		{",,", nil},
	} {
		if got := ParseModelList(tc.in); !slices.Equal(got, tc.want) || (got == nil) != (tc.want == nil) {
			t.Errorf("ParseModelList(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	for _, tc := range []struct {
		in      string
		want    time.Time
		invalid bool
	}{
		{"", time.Time{}, false},
		{"Never", time.Time{}, false},
		{"2026-12-31", time.Date(2026, 12, 31, 0, 0, 0, 0, time.UTC), false},
		{"2026-12-31T18:00:00+02:00", time.Date(2026, 12, 31, 16, 0, 0, 0, time.UTC), false},
		{"tomorrow", time.Time{}, true},
		{"31/12/2026", time.Time{}, true},
	} {
		got, err := ParseExpiry(tc.in)
		if (err != nil) != tc.invalid || !got.Equal(tc.want) {
			t.Errorf("ParseExpiry(%q) = %v, %v", tc.in, got, err)
		}
	}
}
