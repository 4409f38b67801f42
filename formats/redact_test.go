package formats

import "testing"

func TestRedact(t *testing.T) {
	for in, want := range map[string]string{
		"Incorrect API key provided: sk-abc123XYZ.":    "Incorrect API key provided: [redacted].",
		"key sk-proj-****abcd here":                    "key [redacted] here",
		"in organization org-AbCdEf123 on tokens":      "in organization [redacted] on tokens",
		"project proj_AbC12 request req_9x8Y7z":        "project [redacted] request [redacted]",
		"a user-friendly message about sk-learn":       "a user-friendly message about sk-learn",
		"google key AIzaSyD-abcdefghijklmnopqrstuv123": "google key [redacted]",
		"plain message": "plain message",
		"token 0123456789abcdefghijABCDEFGHIJ0123456789": "token [redacted]",
	} {
		if got := Redact(in); got != want {
			t.Errorf("Redact(%q) = %q, want %q", in, got, want)
		}
	}
}
