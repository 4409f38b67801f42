package relay

import (
	"testing"

	"github.com/modelgate/modelgate/ledger"
)

// TestGenerationQuote: the hold of a generation is its input bound at the
// dearest input price plus its output cap for every choice, and a smaller
// hold lowers the cap to what it covers beyond the input.
func TestGenerationQuote(t *testing.T) {
	m := &Model{Price: ledger.Price{Input: 1, CacheRead: 3, CacheWrite: 2, Output: 5}, MaxOutput: 100}
	for _, tc := range []struct {
		name        string
		req         genRequest
		hosted      ledger.Money
		held        ledger.Money
		least, most ledger.Money
		outputCap   int
		capped      bool
	}{
		{"max_output, the whole cap held", genRequest{inputBound: 10}, 0, 530,
			30 + 20*5, 30 + 100*5, 100, false},
		{"max_tokens below max_output", genRequest{inputBound: 10, maxTokens: 40}, 0, 230,
			30 + 20*5, 30 + 40*5, 40, false},
		{"every choice, and the hosted tools", genRequest{inputBound: 10, choices: 2}, 7, 1037,
			37 + 20*10, 37 + 100*10, 100, false},
		{"a smaller hold lowers the cap", genRequest{inputBound: 10}, 0, 30 + 33*5 + 4,
			30 + 20*5, 30 + 100*5, 33, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := generationQuote(m, &tc.req, tc.hosted, 20)
			if q.least != tc.least || q.most != tc.most {
				t.Fatalf("least %d most %d, want %d %d", q.least, q.most, tc.least, tc.most)
			}
			if got, capped := q.outputCapFor(tc.held); got != tc.outputCap || capped != tc.capped {
				t.Fatalf("output cap %d %v, want %d %v", got, capped, tc.outputCap, tc.capped)
			}
		})
	}
}
