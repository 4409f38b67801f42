package tokencount

import (
	"testing"

	"github.com/modelgate/modelgate/formats"
)

func text(s string) []formats.Part { return []formats.Part{{Type: formats.PartText, Text: s}} }

func TestCount(t *testing.T) {
	for _, tc := range []struct {
		name string
		ir   formats.Request
		want int64
	}{
		// "Hello world" is 2 o200k tokens; 3 per message; 3 priming
		{"one message", formats.Request{Messages: []formats.Message{{Role: formats.RoleUser, Parts: text("Hello world")}}}, 2 + 3 + 3},
		{"system counts as a message", formats.Request{
			System:   text("Be brief."),
			Messages: []formats.Message{{Role: formats.RoleUser, Parts: text("Hello world")}}}, 2 + 3 + 3 + 3 + 3}, // "Be brief." is 3 tokens
		{"image", formats.Request{Messages: []formats.Message{{Role: formats.RoleUser, Parts: []formats.Part{{Type: formats.PartImage, Media: &formats.Media{URL: "https://x"}}}}}}, 765 + 3 + 3},
		{"tool call", formats.Request{Messages: []formats.Message{{Role: formats.RoleAssistant, Parts: []formats.Part{{Type: formats.PartToolCall,
			ToolCall: &formats.ToolCall{ID: "call_1", Name: "get_weather", Arguments: `{"city":"Paris"}`}}}}}}, 0},
	} {
		got, err := Count(&tc.ir)
		if err != nil {
			t.Fatal(err)
		}
		if tc.want != 0 && got != tc.want {
			t.Errorf("%s: %d, want %d", tc.name, got, tc.want)
		}
		if got <= 0 {
			t.Errorf("%s: %d", tc.name, got)
		}
	}
}

func TestCountGrowsWithText(t *testing.T) {
	short, _ := Count(&formats.Request{Messages: []formats.Message{{Parts: text("one")}}})
	long, _ := Count(&formats.Request{Messages: []formats.Message{{Parts: text("one two three four five six seven eight nine ten")}}})
	if long-short != 9 {
		t.Fatalf("ten words vs one: %d vs %d", long, short)
	}
}

func BenchmarkCount(b *testing.B) {
	ir := &formats.Request{System: text("You are a helpful assistant."), Messages: []formats.Message{{Parts: text("Summarise the plot of Hamlet in three sentences, please.")}}}
	if _, err := Count(ir); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		_, _ = Count(ir)
	}
}
