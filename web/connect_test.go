package web

import (
	"strings"
	"testing"
)

// TestClientSetups: every client's set-up names the base URL as its
// vendor's SDK expects it (OpenAI clients with /v1, the others without);
// with a key, every set-up carries it (Codex, which reads its key from the
// environment, says to export it); without one, none holds a key and each
// reads $MODELGATE_API_KEY.
func TestClientSetups(t *testing.T) {
	const base, key = "https://api.example.com", "mg-abcdefghijklmnopqrstuvwxyz0123456789"
	with, without := ClientSetups(base, key, "m"), ClientSetups(base, "", "m")
	if len(with) != 7 || len(without) != 7 {
		t.Fatalf("%d and %d set-ups, want 7", len(with), len(without))
	}
	for i, s := range with {
		if !strings.Contains(s.Code, key) {
			t.Errorf("%s with a key lacks it:\n%s", s.Client, s.Code)
		}
		w := without[i]
		if strings.Contains(w.Code, "mg-") || !strings.Contains(w.Code, "MODELGATE_API_KEY") {
			t.Errorf("%s without a key:\n%s", w.Client, w.Code)
		}
		v1 := strings.Contains(s.Code, base+"/v1")
		if openAI := s.Client == "curl" || strings.HasPrefix(s.Client, "OpenAI") || strings.HasPrefix(s.Client, "Codex"); v1 != openAI {
			t.Errorf("%s: /v1 in the base URL is %v, want %v:\n%s", s.Client, v1, openAI, s.Code)
		}
	}
	if codex := with[5]; !strings.HasPrefix(codex.Code, "# in your shell: export MODELGATE_API_KEY="+key+"\n") {
		t.Errorf("Codex with a key:\n%s", codex.Code)
	}
	if codex := without[5]; !strings.HasPrefix(codex.Code, `model = "m"`) {
		t.Errorf("Codex without a key:\n%s", codex.Code)
	}
}
