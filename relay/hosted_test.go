package relay

import (
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/modelgate/modelgate/formats"
	"github.com/modelgate/modelgate/ledger"
)

func TestAnthropicBetas(t *testing.T) {
	def, err := AnthropicBetas(nil)
	if err != nil || len(def) != len(defaultAnthropicBetas) || !def["claude-code-20250219"] || def["context-1m-2025-08-07"] {
		t.Fatalf("default list %v, %v", def, err)
	}
	for _, tc := range []struct {
		in      []string
		allowed []string
		denied  []string
		err     bool
	}{
		{in: []string{"none"}, denied: []string{"claude-code-20250219"}},
		{in: []string{"default", "context-1m-2025-08-07"}, allowed: []string{"claude-code-20250219", "context-1m-2025-08-07"}},
		{in: []string{"files-api-2025-04-14"}, allowed: []string{"files-api-2025-04-14"}, denied: []string{"claude-code-20250219"}},
		{in: []string{"none", "x"}, err: true},
		{in: []string{"a, b"}, err: true},
	} {
		got, err := AnthropicBetas(tc.in)
		if (err != nil) != tc.err {
			t.Errorf("%v: error %v", tc.in, err)
			continue
		}
		for _, a := range tc.allowed {
			if !got[a] {
				t.Errorf("%v: %s not allowed", tc.in, a)
			}
		}
		for _, d := range tc.denied {
			if got[d] {
				t.Errorf("%v: %s allowed", tc.in, d)
			}
		}
	}
	keep, dropped := splitBetas([]string{"claude-code-20250219, context-1m-2025-08-07", "", "interleaved-thinking-2025-05-14,"}, def)
	if strings.Join(keep, ",") != "claude-code-20250219,interleaved-thinking-2025-05-14" || strings.Join(dropped, ",") != "context-1m-2025-08-07" {
		t.Errorf("split: keep %v dropped %v", keep, dropped)
	}
	h := http.Header{}
	betaHeader(h, []string{"context-1m-2025-08-07"}, def)
	if _, ok := h["Anthropic-Beta"]; ok {
		t.Errorf("a header with nothing allowed: %v", h)
	}
}

// TestAdmitGated: the plan a model makes of a request's hosted tools and
// state, request by request.
func TestAdmitGated(t *testing.T) {
	m := &Model{ID: "m", Price: ledger.Price{Input: 500, Output: 1500, CacheRead: 50, CacheWrite: 500}}
	if err := m.SetHosted(HostedPrices{WebSearch: "10", ImageGeneration: "40"}, []string{"files"}); err != nil {
		t.Fatal(err)
	}
	if err := m.SetHosted(HostedPrices{}, []string{"background"}); err == nil {
		t.Error("background may not be allowed")
	}
	search := ledger.Money(10_000_000) + formats.SearchResultTokens*500
	for _, tc := range []struct {
		name, format, body string
		param              string // a refusal naming it
		dropped            []string
		hold               ledger.Money
		fixed              formats.HostedUses
		upstream           string // the body after the edits, when it differs
	}{
		{name: "responses: store false added", format: "responses", body: `{"model":"m","input":"x"}`,
			upstream: `{"model":"m","input":"x","store":false}`},
		{name: "responses: priced search held and capped", format: "responses",
			body: `{"model":"m","input":"x","tools":[{"type":"web_search"}],"store":false}`, hold: 5 * search,
			upstream: `{"model":"m","input":"x","tools":[{"type":"web_search"}],"store":false,"max_tool_calls":5}`},
		{name: "responses: own cap", format: "responses",
			body:     `{"model":"m","input":"x","tools":[{"type":"web_search"},{"type":"image_generation"}],"max_tool_calls":2}`,
			hold:     2*search + 2*40_000_000,
			upstream: `{"model":"m","input":"x","tools":[{"type":"web_search"},{"type":"image_generation"}],"max_tool_calls":2,"store":false}`},
		{name: "responses: stored file allowed", format: "responses",
			body: `{"model":"m","input":[{"role":"user","content":[{"type":"input_file","file_id":"f"}]}],"store":false}`},
		{name: "responses: conversation refused", format: "responses", body: `{"model":"m","input":"x","conversation":"c"}`, param: "conversation"},
		{name: "chat: fixed search", format: "chat", body: `{"model":"m","messages":[{"role":"user","content":"x"}],"web_search_options":{}}`,
			hold: search, fixed: formats.HostedUses{WebSearch: 1}},
		{name: "messages: unpriced fetch dropped", format: "messages",
			body:     `{"model":"m","max_tokens":9,"messages":[{"role":"user","content":"x"}],"tools":[{"type":"web_fetch_20250910","name":"web_fetch"},{"name":"f","input_schema":{"type":"object"}}]}`,
			dropped:  []string{"tools.web_fetch"},
			upstream: `{"model":"m","max_tokens":9,"messages":[{"role":"user","content":"x"}],"tools":[{"name":"f","input_schema":{"type":"object"}}]}`},
		{name: "messages: forced unpriced fetch", format: "messages",
			body:  `{"model":"m","max_tokens":9,"messages":[{"role":"user","content":"x"}],"tools":[{"type":"web_fetch_20250910","name":"web_fetch"}],"tool_choice":{"type":"tool","name":"web_fetch"}}`,
			param: "tool_choice"},
		{name: "messages: document by url", format: "messages",
			body:  `{"model":"m","max_tokens":9,"messages":[{"role":"user","content":[{"type":"document","source":{"type":"url","url":"https://x/y.pdf"}}]}]}`,
			param: "messages.0.content.0.source.url"},
		{name: "gemini: maps dropped, search kept", format: "gemini",
			body:    `{"contents":[{"parts":[{"text":"x"}]}],"tools":[{"googleSearch":{},"googleMaps":{}}]}`,
			dropped: []string{"tools.googleMaps"}, hold: 5 * search,
			upstream: `{"contents":[{"parts":[{"text":"x"}]}],"tools":[{"googleSearch":{}}]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var req *genRequest
			var ferr *formats.Error
			switch tc.format {
			case "responses":
				req, ferr = parseResponses([]byte(tc.body))
			case "chat":
				req, ferr = parseChat([]byte(tc.body))
			case "messages":
				req, ferr = parseMessages([]byte(tc.body), false, http.Header{})
			default:
				req, ferr = parseGenerate([]byte(tc.body), "m", false, false, false)
			}
			if ferr != nil {
				t.Fatal(ferr)
			}
			plan, ferr := m.admitGated(req)
			if tc.param != "" {
				if ferr == nil || ferr.Param != tc.param || ferr.Kind != formats.KindInvalidRequest {
					t.Fatalf("refusal %+v, want one naming %s", ferr, tc.param)
				}
				return
			}
			if ferr != nil {
				t.Fatal(ferr)
			}
			if !slices.Equal(plan.dropped, tc.dropped) || plan.hold != tc.hold || plan.fixed != tc.fixed {
				t.Errorf("plan dropped %v hold %s fixed %+v, want %v %s %+v", plan.dropped, plan.hold, plan.fixed, tc.dropped, tc.hold, tc.fixed)
			}
			out, err := plan.edits.Apply(nil, []byte(tc.body))
			want := tc.upstream
			if want == "" {
				want = tc.body
			}
			if err != nil || string(out) != want {
				t.Errorf("upstream body %s, %v\nwant %s", out, err, want)
			}
		})
	}
}
