package relay

import (
	"testing"

	"github.com/modelgate/modelgate/ledger"
)

func TestGlobMatch(t *testing.T) {
	for _, tt := range []struct {
		pattern, s string
		want       bool
	}{
		{"gpt-4o", "gpt-4o", true},
		{"gpt-4o", "gpt-4o-mini", false},
		{"gpt-*", "gpt-4o-mini", true},
		{"gpt-*", "gpt-", true},
		{"gpt-*", "claude", false},
		{"*-mini", "gpt-4o-mini", true},
		{"*-mini", "gpt-4o", false},
		{"*", "anything/at-all", true},
		{"*", "", true},
		{"meta/*", "meta/llama-3", true},
		{"a*b*c", "abc", true},
		{"a*b*c", "axxbyyc", true},
		{"a*b*c", "axxcyyb", false},
		{"a*b*c", "abcbc", true},
		{"a*a", "a", false}, // the prefix and suffix may not overlap
		{"a*a", "aa", true},
		{"a*b*b", "ab", false}, // nor a middle part and the suffix
		{"**", "x", true},
		{"", "", true},
		{"", "x", false},
	} {
		if got := GlobMatch(tt.pattern, tt.s); got != tt.want {
			t.Errorf("GlobMatch(%q, %q) = %v, want %v", tt.pattern, tt.s, got, tt.want)
		}
	}
}

// TestModelForKeyList: a key's model list narrows what its plan offers,
// by id and by pattern; a key without limits, or with limits but no list,
// finds what its plan offers; the lookup allocates nothing either way.
func TestModelForKeyList(t *testing.T) {
	a, b, c := &Model{ID: "gpt-a"}, &Model{ID: "gpt-b"}, &Model{ID: "claude-c"}
	s := &Service{Models: map[string]*Model{a.ID: a, b.ID: b, c.ID: c}}
	narrow := &Plan{Name: "narrow", Models: map[string]*Model{a.ID: a, c.ID: c}}
	principal := func(plan *Plan, l *ledger.KeyLimits) Principal {
		return Principal{Principal: ledger.Principal{KeyID: "key_x", Limits: l}, Plan: plan}
	}
	byID := &ledger.KeyLimits{Models: []string{"gpt-b", "claude-c"}}
	byPattern := &ledger.KeyLimits{Models: []string{"gpt-*"}}
	empty := &ledger.KeyLimits{Models: []string{}}
	noList := &ledger.KeyLimits{RPM: 5}
	for _, tt := range []struct {
		name string
		p    Principal
		id   string
		want *Model
	}{
		{"no limits", principal(nil, nil), "gpt-b", b},
		{"limits without a list", principal(nil, noList), "claude-c", c},
		{"listed id", principal(nil, byID), "gpt-b", b},
		{"id not listed", principal(nil, byID), "gpt-a", nil},
		{"pattern", principal(nil, byPattern), "gpt-a", a},
		{"pattern misses", principal(nil, byPattern), "claude-c", nil},
		{"empty list", principal(nil, empty), "gpt-a", nil},
		{"listed but not on the plan", principal(narrow, byID), "gpt-b", nil},
		{"listed and on the plan", principal(narrow, byID), "claude-c", c},
		{"pattern within the plan", principal(narrow, byPattern), "gpt-a", a},
		{"unknown", principal(nil, byPattern), "gpt-zzz", nil},
	} {
		m, ok := s.ModelFor(tt.p, tt.id)
		if m != tt.want || ok != (tt.want != nil) {
			t.Errorf("%s: ModelFor(%s) = %v, %v", tt.name, tt.id, m, ok)
		}
	}
	plain, listed := principal(narrow, nil), principal(nil, byPattern)
	var sink int
	if n := testing.AllocsPerRun(100, func() {
		m, _ := s.ModelFor(plain, "gpt-a")
		m2, _ := s.ModelFor(listed, "gpt-b")
		sink += len(m.ID) + len(m2.ID)
	}); n != 0 {
		t.Fatalf("%v allocations per lookup", n)
	}
	_ = sink
}
