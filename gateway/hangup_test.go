package gateway

import (
	"testing"

	"github.com/modelgate/modelgate/upstream"
)

func TestStopsOnHangup(t *testing.T) {
	for _, tc := range []struct {
		onHangup string
		format   upstream.Format
		want     bool
	}{
		{"", upstream.FormatOpenAI, true},    // OpenAI stops generating at the close
		{"", upstream.FormatAnthropic, true}, // so does Anthropic
		{"", upstream.FormatGemini, false},   // Google's API goes on
		{"drain", upstream.FormatOpenAI, false},
		{"stop", upstream.FormatGemini, true},
	} {
		if got := stopsOnHangup(tc.onHangup, tc.format); got != tc.want {
			t.Errorf("stopsOnHangup(%q, %v) = %v, want %v", tc.onHangup, tc.format, got, tc.want)
		}
	}
}
