package mockupstream

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// postWith sends a raw POST with the given headers (name, value, ...).
func postWith(t *testing.T, ts *httptest.Server, path, body string, headers ...string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctxT(t), http.MethodPost, ts.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	res, err := ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res.StatusCode, string(b)
}

// TestHostedTools: the hosted tools a request offers are used as the
// directives say (or once when tool_choice forces them), and each vendor's
// answer shows the uses where the real one does: Anthropic
// server_tool_use blocks and usage.server_tool_use, Responses
// web_search_call and image_generation_call items, chat url_citation
// annotations, Gemini grounding metadata. A directive for a tool the
// request does not offer uses nothing.
func TestHostedTools(t *testing.T) {
	_, ts := start(t, Config{})
	ant := []string{"x-api-key", testKey, "anthropic-version", "2023-06-01"}
	oai := []string{"Authorization", "Bearer " + testKey}
	gem := []string{"x-goog-api-key", testKey}
	const antSearch = `"tools":[{"type":"web_search_20250305","name":"web_search"}]`
	const antFetch = `"tools":[{"type":"web_fetch_20250910","name":"web_fetch"}]`
	antBody := func(text, extra string, stream bool) string {
		s := `{"model":"claude-x","max_tokens":100,"messages":[{"role":"user","content":"` + text + `"}],` + extra
		if stream {
			s += `,"stream":true`
		}
		return s + "}"
	}
	rspBody := func(text, extra string, stream bool) string {
		s := `{"model":"gpt-x","input":"` + text + `",` + extra
		if stream {
			s += `,"stream":true`
		}
		return s + "}"
	}
	gemBody := func(text, tool string) string {
		return `{"contents":[{"role":"user","parts":[{"text":"` + text + `"}]}],"tools":[{"` + tool + `":{}}]}`
	}
	for _, tc := range []struct {
		name, path, body string
		headers          []string
		want             map[string]int // substring → count
	}{
		{"anthropic search", "/v1/messages", antBody("hi mock:web_search=3", antSearch, false), ant,
			map[string]int{`"type":"server_tool_use"`: 3, `"type":"web_search_tool_result"`: 3, `"web_search_requests":3`: 1}},
		{"anthropic search stream", "/v1/messages", antBody("hi mock:web_search=2", antSearch, true), ant,
			map[string]int{`"type":"server_tool_use"`: 2, `"web_search_requests":2`: 1}},
		{"anthropic forced search", "/v1/messages", antBody("hi", antSearch+`,"tool_choice":{"type":"tool","name":"web_search"}`, false), ant,
			map[string]int{`"type":"server_tool_use"`: 1, `"web_search_requests":1`: 1}},
		{"anthropic fetch", "/v1/messages", antBody("hi mock:web_fetch=2", antFetch, false), ant,
			map[string]int{`"name":"web_fetch"`: 2, `"web_fetch_requests":2`: 1, `"web_search_requests":0`: 1}},
		{"anthropic directive without the tool", "/v1/messages", antBody("hi mock:web_search=3", `"system":"x"`, false), ant,
			map[string]int{`server_tool_use`: 0}},
		{"responses search", "/v1/responses", rspBody("hi mock:web_search=2", `"tools":[{"type":"web_search"}]`, false), oai,
			map[string]int{`"type":"web_search_call"`: 2}},
		{"responses search stream", "/v1/responses", rspBody("hi mock:web_search=2", `"tools":[{"type":"web_search"}]`, true), oai,
			map[string]int{`"type":"response.web_search_call.completed"`: 2, `event: response.output_item.added`: 3}},
		{"responses forced image", "/v1/responses", rspBody("hi", `"tools":[{"type":"image_generation"}],"tool_choice":{"type":"image_generation"}`, false), oai,
			map[string]int{`"type":"image_generation_call"`: 1}},
		{"responses background", "/v1/responses", rspBody("hi", `"background":true`, false), oai,
			map[string]int{`"status":"queued"`: 1, `"output":[]`: 1, `"usage"`: 0}}, // no usage yet (the schema has no null usage)
		{"responses background stream", "/v1/responses", rspBody("hi", `"background":true`, true), oai,
			map[string]int{`event: response.queued`: 1, `"status":"queued"`: 2, `response.completed`: 0}},
		{"chat web search", "/v1/chat/completions", chatBody("hi", `"web_search_options":{}`), oai,
			map[string]int{`"type":"url_citation"`: 1}},
		{"chat web search stream", "/v1/chat/completions", chatBody("hi", `"web_search_options":{},"stream":true`), oai,
			map[string]int{`"type":"url_citation"`: 1}},
		{"chat without search", "/v1/chat/completions", chatBody("hi mock:web_search=1", ""), oai,
			map[string]int{`url_citation`: 0}},
		{"gemini search", "/v1beta/models/gemini-x:generateContent", gemBody("hi mock:web_search=3", "googleSearch"), gem,
			map[string]int{`"mock search `: 3, `"groundingMetadata"`: 1}},
		{"gemini search stream", "/v1beta/models/gemini-x:streamGenerateContent?alt=sse", gemBody("hi mock:web_search=2", "google_search"), gem,
			map[string]int{`"mock search `: 2, `"groundingMetadata"`: 1}},
		{"gemini url context", "/v1beta/models/gemini-x:generateContent", gemBody("hi mock:web_fetch=2", "urlContext"), gem,
			map[string]int{`URL_RETRIEVAL_STATUS_SUCCESS`: 2}},
		{"gemini offered, not used", "/v1beta/models/gemini-x:generateContent", gemBody("hi", "googleSearch"), gem,
			map[string]int{`groundingMetadata`: 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, body := postWith(t, ts, tc.path, tc.body, tc.headers...)
			if status != 200 {
				t.Fatalf("%d %s", status, body)
			}
			for sub, n := range tc.want {
				if got := strings.Count(body, sub); got != n {
					t.Errorf("%q appears %d times, want %d:\n%s", sub, got, n, body)
				}
			}
		})
	}
}
