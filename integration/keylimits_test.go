package integration

import (
	"context"
	"errors"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/openai/openai-go/v3"
	"google.golang.org/genai"

	"github.com/modelgate/modelgate/ledger"
	"github.com/modelgate/modelgate/mockupstream"
)

// limitedKey creates a key of acct with its own limits, as the admin API
// and the console do, on the running gateway's ledger.
func (g *testGateway) limitedKey(acct string, l ledger.KeyLimits) (secret, id string) {
	g.t.Helper()
	secret, k, err := g.store.CreateKeyWithLimits(context.Background(), acct, "limited key", l)
	if err != nil {
		g.t.Fatal(err)
	}
	return secret, k.ID
}

// keyRoute is one API route, asked in its client's format with a key.
type keyRoute struct {
	name         string
	format       string // openai, anthropic or gemini: the error envelope it answers in
	path, body   string
	headers      []string
	pathHasModel bool // the model is in the path (MODEL), else in the body
}

// keyRoutes are every keyed API route, in each client format.
var keyRoutes = []keyRoute{
	{name: "chat", format: "openai", path: "/v1/chat/completions", body: chatBody("MODEL", "hi", "")},
	{name: "chat stream", format: "openai", path: "/v1/chat/completions", body: chatBody("MODEL", "hi", `"stream":true`)},
	{name: "responses", format: "openai", path: "/v1/responses", body: `{"model":"MODEL","input":"hi"}`},
	{name: "images", format: "openai", path: "/v1/images/generations", body: `{"model":"MODEL","prompt":"a cat"}`},
	{name: "openai list", format: "openai", path: "/v1/models"},
	{name: "openai get", format: "openai", path: "/v1/models/MODEL", pathHasModel: true},
	{name: "messages", format: "anthropic", path: "/v1/messages",
		body: `{"model":"MODEL","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`, headers: []string{"Anthropic-Version", "2023-06-01"}},
	{name: "messages stream", format: "anthropic", path: "/v1/messages",
		body: `{"model":"MODEL","max_tokens":5,"stream":true,"messages":[{"role":"user","content":"hi"}]}`, headers: []string{"Anthropic-Version", "2023-06-01"}},
	{name: "count_tokens", format: "anthropic", path: "/v1/messages/count_tokens",
		body: `{"model":"MODEL","messages":[{"role":"user","content":"hi"}]}`, headers: []string{"Anthropic-Version", "2023-06-01"}},
	{name: "anthropic list", format: "anthropic", path: "/v1/models", headers: []string{"Anthropic-Version", "2023-06-01"}},
	{name: "anthropic get", format: "anthropic", path: "/v1/models/MODEL", headers: []string{"Anthropic-Version", "2023-06-01"}, pathHasModel: true},
	{name: "gemini", format: "gemini", path: "/v1beta/models/MODEL:generateContent", body: `{"contents":[{"parts":[{"text":"hi"}]}]}`, pathHasModel: true},
	{name: "gemini stream", format: "gemini", path: "/v1beta/models/MODEL:streamGenerateContent?alt=sse",
		body: `{"contents":[{"parts":[{"text":"hi"}]}]}`, pathHasModel: true},
	{name: "gemini count", format: "gemini", path: "/v1beta/models/MODEL:countTokens", body: `{"contents":[{"parts":[{"text":"hi"}]}]}`, pathHasModel: true},
	{name: "gemini under /v1", format: "gemini", path: "/v1/models/MODEL:generateContent", body: `{"contents":[{"parts":[{"text":"hi"}]}]}`, pathHasModel: true},
	{name: "gemini list", format: "gemini", path: "/v1beta/models"},
	{name: "gemini get", format: "gemini", path: "/v1beta/models/MODEL", pathHasModel: true},
}

// ask sends the route's request for model with key, the key where the
// route's SDK sends it.
func (rt keyRoute) ask(g *testGateway, model, key string) response {
	g.t.Helper()
	path, body := rt.path, rt.body
	if rt.pathHasModel {
		path = strings.Replace(path, "MODEL", model, 1)
	} else {
		body = strings.Replace(body, "MODEL", model, 1)
	}
	method := http.MethodPost
	if body == "" {
		method = http.MethodGet
	}
	auth := []string{"Authorization", "Bearer " + key}
	switch {
	case rt.format == "gemini":
		auth = []string{"X-Goog-Api-Key", key}
	case strings.HasPrefix(rt.path, "/v1/messages"):
		auth = []string{"X-Api-Key", key}
	}
	return g.do(method, path, body, append(auth, rt.headers...)...)
}

// hasModel reports whether the route names a model.
func (rt keyRoute) hasModel() bool { return rt.pathHasModel || strings.Contains(rt.body, "MODEL") }

// unauthenticated is what each client format's 401 carries.
var unauthenticated = map[string]string{
	"openai":    `"type":"invalid_request_error","param":null,"code":"invalid_api_key"`,
	"anthropic": `"type":"authentication_error"`,
	"gemini":    `"status":"UNAUTHENTICATED"`,
}

// TestKeyExpired: a key past its expiry is a 401 on every route, in its
// client's format, whose message says when the key expired (not the
// unknown key's words), with nothing held, debited or sent upstream. A key
// that expires later works until then, and a key whose expiry is set in
// the past by SetKeyLimits is refused from its next request. The official
// SDKs read the refusal as their own authentication error.
func TestKeyExpired(t *testing.T) {
	g := startGateway(t, gatewayOptions{})
	ctx := context.Background()
	acct, plain := g.account("1.00")
	expiredAt := time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)
	expired, _ := g.limitedKey(acct, ledger.KeyLimits{ExpiresAt: expiredAt})
	msg := `"message":"This API key expired at 2020-01-02T03:04:05Z."`

	before := g.mock.Stats().Requests
	for _, rt := range append(keyRoutes, keyRoute{name: "usage", format: "openai", path: "/api/usage"}) {
		r := rt.ask(g, testModel, expired)
		if r.status != 401 || !strings.Contains(r.body, unauthenticated[rt.format]) || !strings.Contains(r.body, msg) {
			t.Errorf("%s: %d %s", rt.name, r.status, r.body)
		}
		if strings.Contains(r.body, "Incorrect API key") {
			t.Errorf("%s: the unknown key's words: %s", rt.name, r.body)
		}
	}

	// the SDKs
	var oerr *openai.Error
	_, err := g.client(expired).Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
		Model: testModel, Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}})
	if !errors.As(err, &oerr) || oerr.StatusCode != 401 || oerr.Code != "invalid_api_key" ||
		oerr.Message != "This API key expired at 2020-01-02T03:04:05Z." {
		t.Errorf("openai sdk: %v", err)
	}
	var aerr *anthropic.Error
	ac := g.anthropicClient(expired)
	_, err = ac.Messages.New(ctx, anthropic.MessageNewParams{Model: "claude-test", MaxTokens: 5,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))}})
	if !errors.As(err, &aerr) || aerr.StatusCode != 401 || !strings.Contains(aerr.RawJSON(), "expired at 2020-01-02T03:04:05Z") {
		t.Errorf("anthropic sdk: %v", err)
	}
	var gerr genai.APIError
	_, err = g.geminiClient(t, expired, "").Models.GenerateContent(ctx, "gemini-test", genai.Text("hi"), nil)
	if !errors.As(err, &gerr) || gerr.Code != 401 || gerr.Status != "UNAUTHENTICATED" || gerr.Message != "This API key expired at 2020-01-02T03:04:05Z." {
		t.Errorf("genai sdk: %v", err)
	}

	// a key that expires soon works until then, then is refused
	soon := time.Now().Add(1500 * time.Millisecond).Truncate(time.Second).Add(time.Second)
	later, laterID := g.limitedKey(acct, ledger.KeyLimits{ExpiresAt: soon})
	if r := g.generate("openai", testModel, "hi", false, later); r.status != 200 {
		t.Fatalf("a key before its expiry: %d %s", r.status, r.body)
	}
	time.Sleep(time.Until(soon) + 10*time.Millisecond)
	for _, client := range []string{"openai", "anthropic", "gemini"} {
		r := g.generate(client, testModel, "hi", false, later)
		if r.status != 401 || !strings.Contains(r.body, "This API key expired at "+soon.UTC().Format(time.RFC3339)+".") {
			t.Errorf("%s, a key past its expiry: %d %s", client, r.status, r.body)
		}
	}
	// and an expiry set in the past takes effect at once; lifted, the key works again
	if _, err := g.store.SetKeyLimits(ctx, laterID, ledger.KeyLimits{}); err != nil {
		t.Fatal(err)
	}
	if r := g.generate("gemini", "gemini-test", "hi", false, later); r.status != 200 {
		t.Fatalf("a key whose expiry was lifted: %d %s", r.status, r.body)
	}
	if _, err := g.store.SetKeyLimits(ctx, laterID, ledger.KeyLimits{ExpiresAt: expiredAt}); err != nil {
		t.Fatal(err)
	}
	if r := g.generate("anthropic", "claude-test", "hi", false, later); r.status != 401 || !strings.Contains(r.body, msg) {
		t.Errorf("a key set to have expired: %d %s", r.status, r.body)
	}

	// only the two requests made before the expiry reached the upstream and the ledger
	if n := g.mock.Stats().Requests - before; n != 2 {
		t.Errorf("%d requests reached the upstream, want 2", n)
	}
	bal, held := g.balance(acct)
	rows := g.rows(acct)
	var charged ledger.Money
	for _, row := range rows {
		charged += row.Charged
	}
	if len(rows) != 2 || held != 0 || bal != 1_000_000_000-charged {
		t.Errorf("after refused requests: %d usage rows, balance %s, held %s", len(rows), bal, held)
	}
	// the account's other key is not affected
	if r := g.generate("openai", testModel, "hi", false, plain); r.status != 200 {
		t.Errorf("the account's key without limits: %d %s", r.status, r.body)
	}
	g.audit()
}

// TestKeyModels: a key whose limits list models sees only those in every
// SDK's model list and single-model GET, within what its account's plan
// offers; a model outside its list is, on every route that names a model
// (generations, token counts, images), the same not-found as a model that
// does not exist, byte for byte, with nothing sent upstream and nothing
// held or charged. The account's other keys see every model.
func TestKeyModels(t *testing.T) {
	g := startGateway(t, gatewayOptions{extra: narrowPlan})
	ctx := context.Background()
	acct, plain := g.account("1.00")
	key, keyID := g.limitedKey(acct, ledger.KeyLimits{Models: []string{"gpt-test", "claude-*"}})
	allowed := []string{"claude-test", "gpt-test"}

	// OpenAI
	var ids []string
	page, err := g.client(key).Models.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range page.Data {
		ids = append(ids, m.ID)
	}
	if !slices.Equal(ids, allowed) {
		t.Errorf("openai list: %v, want %v", ids, allowed)
	}
	if m, err := g.client(key).Models.Get(ctx, "claude-test"); err != nil || m.ID != "claude-test" {
		t.Errorf("openai get of a listed model: %+v %v", m, err)
	}
	var oerr *openai.Error
	if _, err := g.client(key).Models.Get(ctx, "gemini-test"); !errors.As(err, &oerr) || oerr.StatusCode != 404 || oerr.Code != "model_not_found" {
		t.Errorf("openai get of a model the key leaves out: %v", err)
	}
	if page, err := g.client(plain).Models.List(ctx); err != nil || len(page.Data) != 4 {
		t.Errorf("openai list of the account's key without limits: %+v %v", page, err)
	}

	// Anthropic, whole and paged
	ac := g.anthropicClient(key)
	apage, err := ac.Models.List(ctx, anthropic.ModelListParams{})
	ids = ids[:0]
	if err == nil {
		for _, m := range apage.Data {
			ids = append(ids, m.ID)
		}
	}
	if err != nil || !slices.Equal(ids, allowed) || apage.HasMore {
		t.Errorf("anthropic list: %v %v, want %v", ids, err, allowed)
	}
	apage, err = ac.Models.List(ctx, anthropic.ModelListParams{Limit: anthropic.Int(1)})
	if err != nil || len(apage.Data) != 1 || apage.Data[0].ID != "claude-test" || !apage.HasMore {
		t.Errorf("anthropic first page of one: %+v %v", apage, err)
	}
	var aerr *anthropic.Error
	if _, err := ac.Models.Get(ctx, "other", anthropic.ModelGetParams{}); !errors.As(err, &aerr) || aerr.StatusCode != 404 {
		t.Errorf("anthropic get of a model the key leaves out: %v", err)
	}

	// Gemini, under /v1beta and /v1, paged by one too
	assertGeminiModels(t, g, key, []string{"claude-test", "gpt-test"}, "gemini-test")
	if r := g.do("GET", "/v1beta/models?pageSize=1", "", "X-Goog-Api-Key", key); r.status != 200 ||
		!strings.Contains(r.body, `"name":"models/claude-test"`) || !strings.Contains(r.body, `"nextPageToken":"claude-test"`) {
		t.Errorf("gemini page of one: %d %s", r.status, r.body)
	}

	// every route naming a model the key leaves out answers what an unknown
	// model gets, the model's name aside, and reaches no upstream
	for _, rt := range keyRoutes {
		if !rt.hasModel() {
			continue
		}
		hiddenModel := "other"
		if rt.format == "gemini" && !strings.Contains(rt.path, "countTokens") {
			hiddenModel = "gemini-test"
		}
		before := g.mock.Stats().Requests
		hidden, unknown := rt.ask(g, hiddenModel, key), rt.ask(g, "no-such-model", key)
		if hidden.status != 404 || hidden.status != unknown.status ||
			requestIDs.ReplaceAllString(strings.ReplaceAll(hidden.body, hiddenModel, "no-such-model"), "ID") !=
				requestIDs.ReplaceAllString(unknown.body, "ID") ||
			hidden.header.Get("Content-Type") != unknown.header.Get("Content-Type") {
			t.Errorf("%s: a model the key leaves out: %d %s\nan unknown model: %d %s", rt.name, hidden.status, hidden.body, unknown.status, unknown.body)
		}
		if n := g.mock.Stats().Requests - before; n != 0 {
			t.Errorf("%s: %d requests reached the upstream", rt.name, n)
		}
		// the account's key without limits is served the same model: the
		// comparison above is with a model that does exist
		if r := rt.ask(g, hiddenModel, plain); r.status != 200 {
			t.Errorf("%s: the account's key without limits, model %s: %d %s", rt.name, hiddenModel, r.status, r.body)
		}
	}
	rowsBefore := len(g.rows(acct))
	for _, row := range g.rows(acct) {
		if row.KeyID == keyID {
			t.Errorf("a refused request was billed: %+v", row)
		}
	}
	// a listed model is served and charged to the key
	for _, client := range []string{"openai", "anthropic", "gemini"} {
		if r := g.generate(client, "claude-test", "hi", client == "gemini", key); r.status != 200 {
			t.Errorf("%s, listed model claude-test: %d %s", client, r.status, r.body)
		}
	}
	if rows := g.rows(acct); len(rows) != rowsBefore+3 || rows[0].KeyID != keyID || rows[0].Model != "claude-test" {
		t.Errorf("usage rows: %d, newest %+v", len(rows), rows[0])
	}
	if _, held := g.balance(acct); held != 0 {
		t.Errorf("held %s", held)
	}

	// within the plan: a narrow plan (gpt-test, claude-*) and a key list of
	// gemini-test and gpt-* leave gpt-test alone
	acct2, _ := g.account("1.00")
	if err := g.store.SetAccountPlan(ctx, acct2, "narrow"); err != nil {
		t.Fatal(err)
	}
	both, _ := g.limitedKey(acct2, ledger.KeyLimits{Models: []string{"gemini-test", "gpt-*"}})
	if r := g.do("GET", "/v1/models", "", "Authorization", "Bearer "+both); r.status != 200 ||
		!strings.Contains(r.body, `"id":"gpt-test"`) || strings.Count(r.body, `"id":`) != 1 {
		t.Errorf("plan and key lists: %d %s", r.status, r.body)
	}
	if r := g.generate("gemini", "gemini-test", "hi", false, both); r.status != 404 {
		t.Errorf("a model the key lists but the plan leaves out: %d %s", r.status, r.body)
	}
	// a list changed by SetKeyLimits applies from the key's next request
	if _, err := g.store.SetKeyLimits(ctx, keyID, ledger.KeyLimits{Models: []string{"other"}}); err != nil {
		t.Fatal(err)
	}
	if r := g.generate("openai", "gpt-test", "hi", false, key); r.status != 404 {
		t.Errorf("a model taken off the key's list: %d %s", r.status, r.body)
	}
	if r := g.generate("openai", "other", "hi", false, key); r.status != 200 {
		t.Errorf("a model put on the key's list: %d %s", r.status, r.body)
	}
	g.audit()
}

// hopModel is a model with two routes to two providers of the mock: the
// first with the key the tests make fail, the second with the other.
const hopModel = `		provider first {
			format openai
			base_url {env.MG_TEST_MOCK_URL}
			keys {env.MG_TEST_UPSTREAM_KEY}
			failure_cooldown 1ms
		}
		provider second {
			format anthropic
			base_url {env.MG_TEST_MOCK_URL}
			keys ` + secondKey + `
			failure_cooldown 1ms
		}
		model hop {
			route first up-hop-first
			route second up-hop-second
			price input 0.5 output 1.5
		}
`

// TestKeyLimitsAcrossFailover: a request's attempts are routes of the one
// model it asked for, at that model's price, so a failover changes the
// provider, never the model: a key whose list allows the model is served
// by the second route when the first fails, billed once within its cap;
// a key whose list leaves the model out reaches no route at all.
func TestKeyLimitsAcrossFailover(t *testing.T) {
	g := startGateway(t, gatewayOptions{
		mock:  mockupstream.Config{Keys: []string{upstreamKey, secondKey}, Faults: []mockupstream.Fault{{Key: upstreamKey, Mode: "status", Status: 500}}},
		extra: hopModel,
	})
	acct, _ := g.account("1.00")
	capAmount := ledger.Money(1_000_000) // 0.001: some ten requests
	allowed, allowedID := g.limitedKey(acct, ledger.KeyLimits{Models: []string{"h*"}, Cap: capAmount, Period: ledger.PeriodDay})
	excluded, _ := g.limitedKey(acct, ledger.KeyLimits{Models: []string{testModel}})
	for i, client := range []string{"openai", "anthropic", "gemini"} {
		restKeys()
		g.mock.Reset()
		r := g.generate(client, "hop", "hello", i == 1, allowed)
		if r.status != 200 {
			t.Fatalf("%s: %d %s", client, r.status, r.body)
		}
		reqs := g.mock.Requests()
		if len(reqs) != 2 || !strings.Contains(string(reqs[0].Body), "up-hop-first") || !strings.Contains(string(reqs[1].Body), "up-hop-second") {
			t.Fatalf("%s: the upstream saw %d requests, want the first route then the second", client, len(reqs))
		}
		row := g.rows(acct)[0]
		if row.KeyID != allowedID || row.Model != "hop" || row.Provider != "second" || row.UpstreamModel != "up-hop-second" {
			t.Errorf("%s: row %+v", client, row)
		}

		restKeys()
		g.mock.Reset()
		r = g.generate(client, "hop", "hello", i == 1, excluded)
		if r.status != 404 || !strings.Contains(r.body, `hop`) {
			t.Errorf("%s, a key whose list leaves the model out: %d %s", client, r.status, r.body)
		}
		if n := len(g.mock.Requests()); n != 0 {
			t.Errorf("%s, a key whose list leaves the model out: %d requests reached a route", client, n)
		}
	}
	rows := g.rows(acct)
	if len(rows) != 3 {
		t.Fatalf("%d usage rows, want the 3 served requests", len(rows))
	}
	k, err := g.store.KeyByID(context.Background(), allowedID)
	if err != nil {
		t.Fatal(err)
	}
	var charged ledger.Money
	for _, row := range rows {
		charged += row.Charged
	}
	if spent := k.SpentThisPeriod(time.Now()); spent != charged || spent > capAmount {
		t.Errorf("the key's spend this period %s, charged %s, cap %s", spent, charged, capAmount)
	}
	if _, held := g.balance(acct); held != 0 {
		t.Errorf("held %s after the failovers", held)
	}
	g.audit()
}

// insufficient is what each client format's 403 for money carries.
var insufficient = map[string]string{
	"openai":    `"type":"insufficient_quota"`,
	"anthropic": `"type":"billing_error"`,
	"gemini":    `"status":"PERMISSION_DENIED"`,
}

// TestKeyCapRefusal: a request its key's spend cap does not cover is a
// 403 in its client's format (OpenAI's insufficient_quota, Anthropic's
// billing_error, Gemini's PERMISSION_DENIED) naming the cap, its period and
// when it resets, streamed or not, with nothing held, debited or sent
// upstream; the account's other key, on the same balance, is served.
func TestKeyCapRefusal(t *testing.T) {
	g := startGateway(t, gatewayOptions{})
	acct, plain := g.account("1.00")
	capped, _ := g.limitedKey(acct, ledger.KeyLimits{Cap: 1000, Period: ledger.PeriodMonth}) // 0.000001: less than one output token
	resets := ledger.PeriodMonth.Next(time.Now()).Format(time.RFC3339)
	for _, client := range []string{"openai", "anthropic", "gemini"} {
		for _, stream := range []bool{false, true} {
			r := g.generate(client, testModel, "hello", stream, capped)
			if r.status != 403 || !strings.Contains(r.body, insufficient[client]) ||
				!strings.Contains(r.body, "This API key's spend cap of 0.000001000 per month does not cover this request (") ||
				!strings.Contains(r.body, "; it resets at "+resets+". Raise the key's cap or use another key.") {
				t.Errorf("%s stream=%v: %d %s", client, stream, r.status, r.body)
			}
		}
	}
	// a cap that never resets says so
	never, _ := g.limitedKey(acct, ledger.KeyLimits{Cap: 1000})
	if r := g.generate("openai", testModel, "hello", false, never); r.status != 403 ||
		!strings.Contains(r.body, "This API key's spend cap of 0.000001000 does not cover this request (") ||
		!strings.Contains(r.body, "; the cap does not reset. Raise the key's cap or use another key.") {
		t.Errorf("a cap that never resets: %d %s", r.status, r.body)
	}
	if bal, held := g.balance(acct); bal != 1_000_000_000 || held != 0 || len(g.rows(acct)) != 0 || len(g.mock.Requests()) != 0 {
		t.Fatalf("a refused request left a trace: balance %s, held %s, %d rows, %d upstream requests",
			bal, held, len(g.rows(acct)), len(g.mock.Requests()))
	}
	if r := g.generate("openai", testModel, "hello", false, plain); r.status != 200 {
		t.Errorf("the account's key without a cap: %d %s", r.status, r.body)
	}
}

// TestKeyRateLimits: a key's own rpm and concurrency are counted per key,
// in memory and through Redis: over either, the key's request is a 429 in
// its client's format with Retry-After and the rate-limit headers, naming
// the key's limit, before anything is held or sent upstream; the account's
// other keys are not affected. The plan's limits still apply, per account,
// and name the plan.
func TestKeyRateLimits(t *testing.T) {
	for _, backend := range []string{"memory", "redis"} {
		t.Run(backend, func(t *testing.T) {
			extra := limitPlans
			if backend == "redis" {
				needRedis(t)
				extra += "\t\tredis " + testRedisURL + "\n"
			}
			g := startGateway(t, gatewayOptions{extra: extra})
			ctx := context.Background()
			acct, plain := g.account("1.00")
			key, _ := g.limitedKey(acct, ledger.KeyLimits{RPM: 2})

			// rpm: two requests a minute, whatever the format
			for i, client := range []string{"openai", "anthropic"} {
				r := g.generate(client, testModel, "hello", false, key)
				limit, remaining := "X-Ratelimit-Limit-Requests", "X-Ratelimit-Remaining-Requests"
				if client == "anthropic" {
					limit, remaining = "Anthropic-Ratelimit-Requests-Limit", "Anthropic-Ratelimit-Requests-Remaining"
				}
				if r.status != 200 || r.header.Get(limit) != "2" || r.header.Get(remaining) != strconv.Itoa(1-i) {
					t.Fatalf("%s: %d limit %q remaining %q %s", client, r.status, r.header.Get(limit), r.header.Get(remaining), r.body)
				}
			}
			upstreamBefore := g.mock.Stats().Requests
			for _, client := range []string{"openai", "anthropic", "gemini"} {
				for _, stream := range []bool{false, true} {
					r := g.generate(client, testModel, "hello", stream, key)
					retry, _ := strconv.Atoi(r.header.Get("Retry-After"))
					if r.status != 429 || !strings.Contains(r.body, rateLimited[client]) || retry < 1 || retry > 60 ||
						!strings.Contains(r.body, "Rate limit reached for requests per minute (limit 2 on this API key). Try again in "+strconv.Itoa(retry)+"s.") {
						t.Errorf("%s stream=%v: %d Retry-After %q %s", client, stream, r.status, r.header.Get("Retry-After"), r.body)
					}
				}
			}
			if n := g.mock.Stats().Requests - upstreamBefore; n != 0 || len(g.rows(acct)) != 2 {
				t.Errorf("refused requests reached the upstream (%d) or the ledger (%d rows)", n, len(g.rows(acct)))
			}
			if _, held := g.balance(acct); held != 0 {
				t.Errorf("held %s", held)
			}
			// the account's key without limits, and another key with the same limits, are not counted with it
			if r := g.generate("gemini", testModel, "hello", false, plain); r.status != 200 {
				t.Errorf("the account's key without limits: %d %s", r.status, r.body)
			}
			twin, _ := g.limitedKey(acct, ledger.KeyLimits{RPM: 2})
			if r := g.generate("gemini", testModel, "hello", false, twin); r.status != 200 {
				t.Errorf("another key with the same limits: %d %s", r.status, r.body)
			}

			// concurrency: one request in flight
			one, oneID := g.limitedKey(acct, ledger.KeyLimits{Concurrency: 1})
			req := overdraftRequest("openai", testModel, true, one)
			req.Body = io.NopCloser(strings.NewReader(strings.Replace(readAllString(req.Body), "mock:tokens=40", "mock:tokens=10 mock:delay=60ms", 1)))
			req.ContentLength = -1
			resp, err := http.DefaultClient.Do(req)
			if err != nil || resp.StatusCode != 200 {
				t.Fatalf("stream: %v %v", err, resp)
			}
			first := make([]byte, 1)
			if _, err := io.ReadFull(resp.Body, first); err != nil {
				t.Fatal(err)
			}
			for _, client := range []string{"openai", "anthropic", "gemini"} {
				r := g.generate(client, testModel, "hello", false, one)
				if r.status != 429 || !strings.Contains(r.body, rateLimited[client]) || r.header.Get("Retry-After") != "1" ||
					!strings.Contains(r.body, "Too many requests in flight (limit 1 concurrent requests on this API key). Try again when one has finished.") {
					t.Errorf("while a stream is open, %s: %d Retry-After %q %s", client, r.status, r.header.Get("Retry-After"), r.body)
				}
			}
			if r := g.generate("openai", testModel, "hello", false, plain); r.status != 200 {
				t.Errorf("the account's key without limits while the stream is open: %d %s", r.status, r.body)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if r := g.generate("anthropic", testModel, "hello", false, one); r.status != 200 {
				t.Errorf("after the stream: %d %s", r.status, r.body)
			}
			// limits lifted by SetKeyLimits apply from the next request
			if _, err := g.store.SetKeyLimits(ctx, oneID, ledger.KeyLimits{}); err != nil {
				t.Fatal(err)
			}

			// both apply: on a plan of 3 a minute, a key of 5 a minute gets the plan's 429
			acct2, _ := g.account("1.00")
			if err := g.store.SetAccountPlan(ctx, acct2, "tight"); err != nil {
				t.Fatal(err)
			}
			loose, _ := g.limitedKey(acct2, ledger.KeyLimits{RPM: 5})
			for i := range 3 {
				r := g.generate("openai", testModel, "hello", false, loose)
				// the headers report the tighter budget: the plan's
				if r.status != 200 || r.header.Get("X-Ratelimit-Limit-Requests") != "3" || r.header.Get("X-Ratelimit-Remaining-Requests") != strconv.Itoa(2-i) {
					t.Fatalf("request %d under the plan's limit: %d %q %q %s", i, r.status,
						r.header.Get("X-Ratelimit-Limit-Requests"), r.header.Get("X-Ratelimit-Remaining-Requests"), r.body)
				}
			}
			if r := g.generate("anthropic", testModel, "hello", false, loose); r.status != 429 ||
				!strings.Contains(r.body, "(limit 3 on this account's plan)") {
				t.Errorf("over the plan's limit: %d %s", r.status, r.body)
			}
			// and a key of 1 a minute on that plan gets its own
			acct3, _ := g.account("1.00")
			if err := g.store.SetAccountPlan(ctx, acct3, "tight"); err != nil {
				t.Fatal(err)
			}
			strict3, _ := g.limitedKey(acct3, ledger.KeyLimits{RPM: 1})
			if r := g.generate("gemini", testModel, "hello", false, strict3); r.status != 200 {
				t.Fatalf("a key of 1 a minute on a plan of 3: %d %s", r.status, r.body)
			}
			if r := g.generate("gemini", testModel, "hello", false, strict3); r.status != 429 ||
				!strings.Contains(r.body, "(limit 1 on this API key)") {
				t.Errorf("over the key's limit on a plan of 3: %d %s", r.status, r.body)
			}
			resp, err = http.Get(adminAddr + "/metrics")
			if err != nil {
				t.Fatal(err)
			}
			m := readAllString(resp.Body)
			resp.Body.Close()
			if !strings.Contains(m, `modelgate_requests_refused_total{reason="rpm"}`) || !strings.Contains(m, `modelgate_requests_refused_total{reason="concurrency"}`) {
				t.Errorf("the refusals are not counted in the metrics")
			}
		})
	}
}
