package gateway

import "testing"

func TestKnown(t *testing.T) {
	for _, tc := range []struct {
		name  string
		names []string
		want  string
	}{
		{"opneai", []string{"openai-main", "claude", "opneai-x", "openai"}, "(the providers are claude, openai, openai-main, opneai-x; did you mean openai?)"},
		{"gemini", []string{"claude", "openai"}, "(the providers are claude, openai)"},
		{"x", nil, "(there are no providers)"},
		{"Claude", []string{"claude"}, "(the providers are claude; did you mean claude?)"},
	} {
		if got := known("providers", tc.name, tc.names); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}
