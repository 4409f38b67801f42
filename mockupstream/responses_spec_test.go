package mockupstream

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/modelgate/modelgate/internal/openaispec"
)

// checkResponsesSpec fails the test when v is not an instance of the named
// schema of OpenAI's published description (see internal/openaispec): the
// mock's Responses answers follow it.
func checkResponsesSpec(t *testing.T, schema string, v []byte) {
	t.Helper()
	if msg := openaispec.Problem(schema, v); msg != "" {
		t.Errorf("not a valid %s: %s\n%s", schema, msg, v)
	}
}

// TestResponsesSpec validates the mock's Responses answers, whole and
// streamed, for each kind of plan: text, reasoning and cached tokens, tool
// calls, a cut-off answer, no usage, hosted tools, background work and a
// mid-stream error.
func TestResponsesSpec(t *testing.T) {
	_, ts := start(t, Config{})
	auth := []string{"Authorization", "Bearer " + testKey}
	const fn = `"tools":[{"type":"function","name":"shell","strict":false,"parameters":{"type":"object","properties":{}}}]`
	for _, tc := range []struct{ name, text, extra string }{
		{"text", "hi mock:tokens=5", ""},
		{"reasoning and cache", "hi mock:tokens=3 mock:reasoning=2 mock:cached=2", ""},
		{"tool call", "hi mock:tool=shell mock:tokens=0", fn},
		{"text and tool calls", "hi mock:tools=2 mock:tokens=2", fn},
		{"cut off", "hi mock:tokens=9 mock:finish=length", ""},
		{"content filter", "hi mock:tokens=1 mock:finish=content_filter", ""},
		{"no usage", "hi mock:tokens=2 mock:no_usage", ""},
		{"web search", "hi mock:web_search=2", `"tools":[{"type":"web_search"}]`},
		{"image generation", "hi mock:image_generation=1", `"tools":[{"type":"image_generation"}]`},
		{"background", "hi", `"background":true`},
		{"error mid-stream", "hi mock:tokens=5 mock:error_after=2", ""},
	} {
		for _, stream := range []bool{false, true} {
			if !stream && strings.Contains(tc.text, "error_after") {
				continue // a stream's failure
			}
			name := tc.name
			if stream {
				name += "/stream"
			}
			t.Run(name, func(t *testing.T) {
				body := `{"model":"gpt-x","input":"` + tc.text + `"`
				if tc.extra != "" {
					body += "," + tc.extra
				}
				if stream {
					body += `,"stream":true`
				}
				status, out := postWith(t, ts, "/v1/responses", body+"}", auth...)
				if status != 200 {
					t.Fatalf("%d %s", status, out)
				}
				if !stream {
					checkResponsesSpec(t, "Response", []byte(out))
					return
				}
				events := strings.Split(strings.TrimSuffix(out, "\n\n"), "\n\n")
				for i, ev := range events {
					name, data, ok := strings.Cut(ev, "\ndata: ")
					if !ok || !strings.HasPrefix(name, "event: ") {
						t.Fatalf("malformed event %q", ev)
					}
					checkResponsesSpec(t, name, []byte(data)) // the event's own schema
					checkResponsesSpec(t, "ResponseStreamEvent", []byte(data))
					var head struct {
						Type     string `json:"type"`
						Sequence int    `json:"sequence_number"`
					}
					if err := json.Unmarshal([]byte(data), &head); err != nil {
						t.Fatal(err)
					}
					if head.Type != strings.TrimPrefix(name, "event: ") || head.Sequence != i {
						t.Errorf("event %d: %s carries type %q, sequence_number %d", i, name, head.Type, head.Sequence)
					}
				}
			})
		}
	}
}
