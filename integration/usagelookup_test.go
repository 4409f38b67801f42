package integration

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelgate/modelgate/ledger"
)

// lookupModels adds a model that prices the hosted web search tool, so
// that a request's bill has hosted-tool uses to show.
const lookupModels = `
		model lookup-searcher {
			route mock up-lookup-searcher
			price input 0.5 output 1.5 web_search 10
			max_output 1000
		}
`

// usageRequestPath is the path of one request's usage.
func usageRequestPath(id string) string { return "/api/usage/requests/" + id }

// requestUsage is the answer of GET /api/usage/requests/{id}.
type requestUsage struct {
	Object           string  `json:"object"`
	ID               string  `json:"id"`
	Created          int64   `json:"created"`
	Model            string  `json:"model"`
	Stream           bool    `json:"stream"`
	Status           int     `json:"status"`
	Outcome          string  `json:"outcome"`
	UsageSource      string  `json:"usage_source"`
	InputTokens      int64   `json:"input_tokens"`
	OutputTokens     int64   `json:"output_tokens"`
	CacheReadTokens  int64   `json:"cache_read_tokens"`
	CacheWriteTokens int64   `json:"cache_write_tokens"`
	ReasoningTokens  int64   `json:"reasoning_tokens"`
	Cost             string  `json:"cost"`
	Charged          string  `json:"charged"`
	Discount         string  `json:"discount"`
	LatencyMS        float64 `json:"latency_ms"`
	TTFTMS           float64 `json:"ttft_ms"`
	HostedTools      *struct {
		WebSearches     int64  `json:"web_searches"`
		WebFetches      int64  `json:"web_fetches"`
		GeneratedImages int64  `json:"generated_images"`
		Cost            string `json:"cost"`
	} `json:"hosted_tools"`
}

// requestUsageFields are the keys of every answer; hosted_tools is added
// when the request used a hosted tool.
var requestUsageFields = []string{"object", "id", "created", "model", "stream", "status", "outcome", "usage_source",
	"input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens", "reasoning_tokens",
	"cost", "charged", "discount", "latency_ms", "ttft_ms"}

// usageRow finds the usage row of request id among the account's rows.
func (g *testGateway) usageRow(acct, id string) ledger.UsageRecord {
	g.t.Helper()
	rows := g.rows(acct)
	i := slices.IndexFunc(rows, func(r ledger.UsageRecord) bool { return r.RequestID == id })
	if i < 0 {
		g.t.Fatalf("no usage row of request %s among the account's %d", id, len(rows))
	}
	return rows[i]
}

// checkRequestUsage fails the test unless r is a 200 whose figures are
// those of the ledger's row, with nothing of the provider in it.
func checkRequestUsage(t *testing.T, what string, r response, row ledger.UsageRecord) requestUsage {
	t.Helper()
	if r.status != 200 || r.header.Get("Cache-Control") != "no-store" || !strings.HasPrefix(r.header.Get("Content-Type"), "application/json") {
		t.Fatalf("%s: %d %q %q %s", what, r.status, r.header.Get("Cache-Control"), r.header.Get("Content-Type"), r.body)
	}
	var u requestUsage
	if err := json.Unmarshal([]byte(r.body), &u); err != nil {
		t.Fatalf("%s: %v: %s", what, err, r.body)
	}
	var keys map[string]json.RawMessage
	_ = json.Unmarshal([]byte(r.body), &keys)
	want := slices.Clone(requestUsageFields)
	if row.Hosted != (ledger.HostedUses{}) {
		want = append(want, "hosted_tools")
	}
	got := make([]string, 0, len(keys))
	for k := range keys {
		got = append(got, k)
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("%s: fields %v, want %v", what, got, want)
	}
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	if u.Object != "usage.request" || u.ID != row.RequestID || u.Created != row.CreatedAt.Unix() || u.Model != row.Model ||
		u.Stream != row.Stream || u.Status != row.Status || u.Outcome != row.Outcome || u.UsageSource != row.UsageSource ||
		u.InputTokens != row.Tokens.Input || u.OutputTokens != row.Tokens.Output || u.CacheReadTokens != row.Tokens.CacheRead ||
		u.CacheWriteTokens != row.Tokens.CacheWrite || u.ReasoningTokens != row.Tokens.Reasoning ||
		u.Cost != row.Cost.String() || u.Charged != row.Charged.String() || u.Discount != row.Discount.String() ||
		u.LatencyMS != ms(row.Latency) || u.TTFTMS != ms(row.TTFT) {
		t.Errorf("%s: answer %s\ndoes not match the ledger's row %+v", what, r.body, row)
	}
	if h := u.HostedTools; h != nil && (h.WebSearches != row.Hosted.WebSearch || h.WebFetches != row.Hosted.WebFetch ||
		h.GeneratedImages != row.Hosted.ImageGeneration || h.Cost != row.HostedCost.String()) {
		t.Errorf("%s: hosted tools %+v, the row's %+v costing %s", what, *h, row.Hosted, row.HostedCost)
	}
	for _, internal := range []string{row.UpstreamKeyID, row.UpstreamModel, `"provider"`, `"upstream_`, `"key_id"`, `"account_id"`} {
		if internal != "" && strings.Contains(r.body, internal) {
			t.Errorf("%s: the answer shows %q: %s", what, internal, r.body)
		}
	}
	return u
}

// requestID is the id of the usage row of the generation that got an
// answer with headers h: its X-Modelgate-Request-Id, which says the same
// as X-Request-Id.
func requestID(t *testing.T, h http.Header) string {
	t.Helper()
	id := h.Get("X-Modelgate-Request-Id")
	if id == "" || id != h.Get("X-Request-Id") {
		t.Fatalf("X-Modelgate-Request-Id %q, X-Request-Id %q", id, h.Get("X-Request-Id"))
	}
	return id
}

// TestUsageRequestLookup: GET /api/usage/requests/{id} answers the caller's
// own key with the figures of the request's usage row: a whole answer, one
// with hosted-tool uses, and a stream the client left, found once it is
// billed. Another key of the same account, another account's key, an
// unknown id and ids no row can have get one and the same 404; no key is
// a 401, another method a 405. The index lists the route.
func TestUsageRequestLookup(t *testing.T) {
	g := startGateway(t, gatewayOptions{extra: lookupModels})
	ctx := context.Background()
	acct, key := g.account("1.00")
	sibling, _, err := g.store.CreateKey(ctx, acct, "sibling")
	if err != nil {
		t.Fatal(err)
	}
	_, stranger := g.account("1.00")
	bearer := func(k string) []string { return []string{"Authorization", "Bearer " + k} }

	// a whole answer
	r := g.do("POST", "/v1/chat/completions", chatBody(testModel, "bill me", ""), bearer(key)...)
	if r.status != 200 {
		t.Fatalf("chat: %d %s", r.status, r.body)
	}
	whole := requestID(t, r.header)
	row := g.usageRow(acct, whole)
	u := checkRequestUsage(t, "whole answer", g.do("GET", usageRequestPath(whole), "", bearer(key)...), row)
	if u.Outcome != "ok" || u.UsageSource != "upstream" || u.Stream || u.InputTokens != mockTokens("bill me") ||
		u.OutputTokens != 12 || u.Cost != cost(mockTokens("bill me"), 12).String() || u.HostedTools != nil {
		t.Errorf("whole answer: %+v", u)
	}
	// every form of the key is a credential here too
	checkRequestUsage(t, "x-api-key", g.do("GET", usageRequestPath(whole), "", "X-Api-Key", key), row)
	if r := g.do("HEAD", usageRequestPath(whole), "", bearer(key)...); r.status != 200 || r.body != "" {
		t.Errorf("HEAD: %d %s", r.status, r.body)
	}

	// hosted-tool uses, and their fee
	r = g.do("POST", "/v1/responses", `{"model":"lookup-searcher","input":"look it up mock:web_search=2",`+
		`"tools":[{"type":"web_search_preview"}],"tool_choice":{"type":"web_search_preview"}}`, bearer(key)...)
	if r.status != 200 {
		t.Fatalf("responses with web search: %d %s", r.status, r.body)
	}
	searched := requestID(t, r.header)
	row = g.usageRow(acct, searched)
	u = checkRequestUsage(t, "hosted tools", g.do("GET", usageRequestPath(searched), "", bearer(key)...), row)
	if u.HostedTools == nil || u.HostedTools.WebSearches != 2 || u.HostedTools.Cost != (2*ledger.Money(10_000_000)).String() {
		t.Errorf("hosted tools: %+v", u.HostedTools)
	}

	// a stream the client leaves after its first bytes: its id came with
	// the headers, its bill once the gateway has settled it
	sctx, cancel := context.WithCancel(ctx)
	req, _ := http.NewRequestWithContext(sctx, "POST", gatewayAddr+"/v1/chat/completions",
		strings.NewReader(chatBody(testModel, "leave early mock:tokens=20 mock:delay=20ms", `"stream":true`)))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	left := requestID(t, resp.Header)
	if _, err := resp.Body.Read(make([]byte, 512)); err != nil {
		t.Fatal(err)
	}
	cancel()
	resp.Body.Close()
	var found response
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		found = g.do("GET", usageRequestPath(left), "", bearer(key)...)
		if found.status != 404 || time.Now().After(deadline) {
			break
		}
	}
	row = g.usageRow(acct, left)
	u = checkRequestUsage(t, "stream the client left", found, row)
	if u.Outcome != "client_closed" || !u.Stream || u.OutputTokens <= 0 || u.Charged == "0.000000000" {
		t.Errorf("stream the client left: %+v", u)
	}

	// one answer for whatever is not the caller's: nothing says whether
	// the id exists
	var notFound string
	for _, tc := range []struct {
		what, id string
		auth     []string
	}{
		{"another key of the account", whole, bearer(sibling)},
		{"another account's key", whole, bearer(stranger)},
		{"another account's key, a stream", left, bearer(stranger)},
		{"an unknown id", "req_00000000000000000000", bearer(key)},
		{"a NUL byte", "req_%00", bearer(key)},
		{"a byte that is not UTF-8", "req_%FF", bearer(key)},
	} {
		r := g.do("GET", usageRequestPath(tc.id), "", tc.auth...)
		var e struct {
			Error struct {
				Message, Type string
				Param, Code   *string
			}
		}
		if r.status != 404 || json.Unmarshal([]byte(r.body), &e) != nil || e.Error.Type != "invalid_request_error" ||
			e.Error.Param != nil || e.Error.Code == nil || *e.Error.Code != "not_found" || e.Error.Message == "" ||
			r.header.Get("Cache-Control") != "no-store" {
			t.Errorf("%s: %d %s", tc.what, r.status, r.body)
		}
		if notFound == "" && r.status == 404 {
			notFound = r.body
		} else if r.status == 404 && r.body != notFound {
			t.Errorf("%s: %s, unlike the others' %s", tc.what, r.body, notFound)
		}
	}
	if r := g.do("GET", usageRequestPath(whole), ""); r.status != 401 || !strings.Contains(r.body, "invalid_api_key") {
		t.Errorf("no key: %d %s", r.status, r.body)
	}
	if r := g.do("POST", usageRequestPath(whole), "{}", bearer(key)...); r.status != 405 || r.header.Get("Allow") != "GET" {
		t.Errorf("POST: %d %q %s", r.status, r.header.Get("Allow"), r.body)
	}

	// the index names the route
	var idx struct{ Endpoints map[string][]string }
	if r := g.do("GET", "/", ""); r.status != 200 || json.Unmarshal([]byte(r.body), &idx) != nil ||
		!slices.Contains(idx.Endpoints["usage"], "GET /api/usage/requests/{id}") || !slices.Contains(idx.Endpoints["usage"], "GET /api/usage") {
		t.Errorf("index: %d %s", r.status, r.body)
	}
	g.audit()
}
