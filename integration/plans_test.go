package integration

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/chromedp/chromedp"
	"github.com/openai/openai-go/v3"

	"github.com/modelgate/modelgate/ledger"
)

// requestIDs matches the request IDs that Anthropic error bodies carry.
var requestIDs = regexp.MustCompile(`req_[0-9A-Za-z]+`)

// narrowPlan offers two of the four test models: one by ID, one by pattern.
const narrowPlan = "\t\tplan narrow {\n\t\t\tmodels gpt-test claude-*\n\t\t}\n"

// TestPlanModels: an account on a plan that names its models
// sees only those in every SDK's model list, and a model the plan leaves
// out is, in every format, the same not-found as a model that does not
// exist, with nothing sent upstream and nothing held or charged. An
// account on a plan without a list sees every model.
func TestPlanModels(t *testing.T) {
	g := startGateway(t, gatewayOptions{extra: narrowPlan})
	ctx := context.Background()
	acct, key := g.account("1.00")
	if err := g.store.SetAccountPlan(ctx, acct, "narrow"); err != nil {
		t.Fatal(err)
	}
	_, devKey := g.account("1.00") // on developer: every model
	offered := []string{"claude-test", "gpt-test"}

	// OpenAI
	oc := g.client(key)
	page, err := oc.Models.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, m := range page.Data {
		ids = append(ids, m.ID)
	}
	if !slices.Equal(ids, offered) {
		t.Errorf("openai list: %v, want %v", ids, offered)
	}
	if m, err := oc.Models.Get(ctx, "claude-test"); err != nil || m.ID != "claude-test" {
		t.Errorf("openai get of an offered model: %+v %v", m, err)
	}
	var oerr *openai.Error
	if _, err := oc.Models.Get(ctx, "gemini-test"); !errors.As(err, &oerr) || oerr.StatusCode != 404 || oerr.Code != "model_not_found" {
		t.Errorf("openai get of a model the plan leaves out: %v", err)
	}
	page, err = g.client(devKey).Models.List(ctx)
	if err != nil || len(page.Data) != 4 {
		t.Errorf("openai list on a plan without a model list: %+v %v", page, err)
	}

	// Anthropic
	ac := g.anthropicClient(key)
	apage, err := ac.Models.List(ctx, anthropic.ModelListParams{})
	ids = ids[:0]
	if err == nil {
		for _, m := range apage.Data {
			ids = append(ids, m.ID)
		}
	}
	if err != nil || !slices.Equal(ids, offered) || apage.HasMore {
		t.Errorf("anthropic list: %v %v, want %v", ids, err, offered)
	}
	// paged, one model at a time
	apage, err = ac.Models.List(ctx, anthropic.ModelListParams{Limit: anthropic.Int(1), AfterID: anthropic.String("claude-test")})
	if err != nil || len(apage.Data) != 1 || apage.Data[0].ID != "gpt-test" || apage.HasMore {
		t.Errorf("anthropic page after claude-test: %+v %v", apage, err)
	}
	var aerr *anthropic.Error
	if _, err := ac.Models.Get(ctx, "other", anthropic.ModelGetParams{}); !errors.As(err, &aerr) || aerr.StatusCode != 404 {
		t.Errorf("anthropic get of a model the plan leaves out: %v", err)
	}

	// Gemini, under /v1beta and /v1
	assertGeminiModels(t, g, key, offered, "gemini-test")

	// every request naming a model the plan leaves out gets what an unknown
	// model gets, byte for byte (the model's name aside)
	const anth = "2023-06-01"
	for _, tc := range []struct {
		name         string
		path, body   string
		headers      []string
		pathHasModel bool
		hidden       string
	}{
		{"chat", "/v1/chat/completions", chatBody("MODEL", "hi", ""), nil, false, "other"},
		{"chat stream", "/v1/chat/completions", chatBody("MODEL", "hi", `"stream":true`), nil, false, "gemini-test"},
		{"responses", "/v1/responses", `{"model":"MODEL","input":"hi"}`, nil, false, "other"},
		{"messages", "/v1/messages", `{"model":"MODEL","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`,
			[]string{"Anthropic-Version", anth}, false, "gemini-test"},
		{"count_tokens", "/v1/messages/count_tokens", `{"model":"MODEL","messages":[{"role":"user","content":"hi"}]}`,
			[]string{"Anthropic-Version", anth}, false, "other"},
		{"gemini", "/v1beta/models/MODEL:generateContent", `{"contents":[{"parts":[{"text":"hi"}]}]}`, nil, true, "gemini-test"},
		{"gemini stream", "/v1beta/models/MODEL:streamGenerateContent?alt=sse", `{"contents":[{"parts":[{"text":"hi"}]}]}`, nil, true, "other"},
		{"gemini count", "/v1beta/models/MODEL:countTokens", `{"contents":[{"parts":[{"text":"hi"}]}]}`, nil, true, "other"},
		{"gemini get", "/v1beta/models/MODEL", "", nil, true, "gemini-test"},
		{"openai get", "/v1/models/MODEL", "", nil, true, "other"},
		{"images", "/v1/images/generations", `{"model":"MODEL","prompt":"a cat"}`, nil, false, "other"},
	} {
		ask := func(model string) response {
			path, body := tc.path, tc.body
			if tc.pathHasModel {
				path = strings.Replace(path, "MODEL", model, 1)
			} else {
				body = strings.Replace(body, "MODEL", model, 1)
			}
			method := http.MethodPost
			if body == "" {
				method = http.MethodGet
			}
			auth := []string{"Authorization", "Bearer " + key}
			if strings.HasPrefix(tc.path, "/v1beta") {
				auth = []string{"X-Goog-Api-Key", key}
			} else if strings.HasPrefix(tc.path, "/v1/messages") {
				auth = []string{"X-Api-Key", key}
			}
			return g.do(method, path, body, append(auth, tc.headers...)...)
		}
		before := g.mock.Stats().Requests
		hidden, unknown := ask(tc.hidden), ask("no-such-model")
		if hidden.status != 404 || hidden.status != unknown.status ||
			requestIDs.ReplaceAllString(strings.ReplaceAll(hidden.body, tc.hidden, "no-such-model"), "ID") !=
				requestIDs.ReplaceAllString(unknown.body, "ID") ||
			hidden.header.Get("Content-Type") != unknown.header.Get("Content-Type") {
			t.Errorf("%s: a model the plan leaves out: %d %s\nan unknown model: %d %s", tc.name, hidden.status, hidden.body, unknown.status, unknown.body)
		}
		if n := g.mock.Stats().Requests - before; n != 0 {
			t.Errorf("%s: %d requests reached the upstream", tc.name, n)
		}
	}
	// the same requests on the developer plan are served: the comparison
	// above is with a model that does exist
	if r := g.do("POST", "/v1/chat/completions", chatBody("other", "hi", ""), "Authorization", "Bearer "+devKey); r.status != 200 {
		t.Errorf("developer plan, model other: %d %s", r.status, r.body)
	}
	if bal, held := g.balance(acct); bal != 1_000_000_000 || held != 0 || len(g.rows(acct)) != 0 {
		t.Errorf("after refused requests: balance %s, held %s, %d usage rows", bal, held, len(g.rows(acct)))
	}
	// an offered model is served and charged
	if r := g.do("POST", "/v1/chat/completions", chatBody("claude-test", "hi", ""), "Authorization", "Bearer "+key); r.status != 200 {
		t.Errorf("narrow plan, model claude-test: %d %s", r.status, r.body)
	}
	if rows := g.rows(acct); len(rows) != 1 || rows[0].Model != "claude-test" {
		t.Errorf("usage rows: %+v", rows)
	}
	g.audit()
}

// volumePlan has a flat discount of 10% and volume tiers of 3.33% above
// 0.00002 and 7.77% above 0.00005 of the month's spend: some 22,000 nanos
// a test request, so that the second request is in the first tier and
// the fourth in the second. Fractional percents make the roundings real.
const volumePlan = "\t\tplan volume {\n\t\t\tdiscount 10%\n\t\t\ttier 0.00002 3.33%\n\t\t\ttier 0.00005 7.77%\n\t\t}\n"

// volumeTier is the volume plan's tier at a month's spend.
func volumeTier(spend ledger.Money) int {
	switch {
	case spend > 50_000:
		return 777
	case spend > 20_000:
		return 333
	}
	return 0
}

// TestVolumeTiers: each request is charged the list price less
// the plan's discount and its volume tier's, added up and rounded down to
// the nano once; the tier is that of the month's spend before the request;
// the usage row says the tier's discount and what the discounts took off.
func TestVolumeTiers(t *testing.T) {
	g := startGateway(t, gatewayOptions{extra: volumePlan})
	ctx := context.Background()
	acct, key := g.account("1.00")
	if err := g.store.SetAccountPlan(ctx, acct, "volume"); err != nil {
		t.Fatal(err)
	}
	const prompt = "volume tiers at work"
	full := cost(mockTokens(prompt), 12)
	var spend ledger.Money
	rounded := false
	for i, wantTier := range []int{0, 333, 333, 777, 777} {
		if got := volumeTier(spend); got != wantTier {
			t.Fatalf("request %d: the test's own arithmetic: tier %d at %d, want %d", i, got, spend, wantTier)
		}
		before, _ := g.balance(acct)
		if r := g.do("POST", "/v1/chat/completions", chatBody(testModel, prompt, ""), "Authorization", "Bearer "+key); r.status != 200 {
			t.Fatal(r.body)
		}
		want := ledger.Discounted(full, 1000+wantTier)
		if int64(full)*int64(10000-1000-wantTier)%10000 != 0 {
			rounded = true
		}
		after, _ := g.balance(acct)
		row := g.rows(acct)[0]
		if before-after != want || row.Charged != want || row.DiscountBps != 1000 || row.TierBps != wantTier || row.Discount != full-want {
			t.Fatalf("request %d (month's spend %d): debit %d, row charged %d, discount %d%%·100 + tier %d, discount amount %d; want %d, 1000 + %d, %d",
				i, spend, before-after, row.Charged, row.DiscountBps, row.TierBps, row.Discount, want, wantTier, full-want)
		}
		spend += want
		a, err := g.store.GetAccount(ctx, acct)
		if err != nil || a.MonthSpend != spend {
			t.Fatalf("request %d: month's spend %d, %v; want %d", i, a.MonthSpend, err, spend)
		}
	}
	if !rounded {
		t.Fatal("no charge had a fraction of a nano to round: the test proves nothing about rounding")
	}
	// the key's usage API says the month's spend and the tier it earns
	var u struct {
		Account struct {
			MonthSpend   string  `json:"month_spend"`
			TierDiscount *string `json:"tier_discount"`
		} `json:"account"`
	}
	if r := g.do("GET", "/api/usage", "", "Authorization", "Bearer "+key); r.status != 200 || json.Unmarshal([]byte(r.body), &u) != nil ||
		u.Account.MonthSpend != spend.String() || u.Account.TierDiscount == nil || *u.Account.TierDiscount != "7.77%" {
		t.Fatalf("/api/usage: %d %s; want a month's spend of %s in the 7.77%% tier", r.status, r.body, spend)
	}
	var aa adminAccount
	if st := adminCall(t, "GET", "/modelgate/accounts/"+acct, "", &aa); st != 200 || aa.MonthSpend != spend {
		t.Fatalf("admin API: %d %+v; want a month's spend of %s", st, aa, spend)
	}

	// concurrently: every row's tier is one the spend went through, its
	// charge is exact for it, and the month's spend is the sum of the rows
	const n = 24
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			g.do("POST", "/v1/chat/completions", chatBody(testModel, prompt, ""), "Authorization", "Bearer "+key)
		})
	}
	wg.Wait()
	rows := g.rows(acct)
	if len(rows) != 5+n {
		t.Fatalf("%d rows, want %d", len(rows), 5+n)
	}
	var sum ledger.Money
	for _, r := range rows {
		sum += r.Charged
		if r.TierBps != 0 && r.TierBps != 333 && r.TierBps != 777 || r.Charged != ledger.Discounted(full, 1000+r.TierBps) || r.Charged+r.Discount != full {
			t.Errorf("row %s: tier %d, charged %d, discount %d", r.RequestID, r.TierBps, r.Charged, r.Discount)
		}
	}
	a, err := g.store.GetAccount(ctx, acct)
	if err != nil || a.MonthSpend != sum || a.Balance != 1_000_000_000-sum || a.Held != 0 {
		t.Fatalf("after concurrent requests: %+v %v; want a month's spend of %d", a, err, sum)
	}
	g.audit()
}

// TestConsoleVolumeTier: the console's usage view shows what the discounts
// took off (in total, per row and in the CSV export, exact to the nano),
// and, on a plan with volume tiers, the month's spend, the tier in force
// and the next one.
func TestConsoleVolumeTier(t *testing.T) {
	resetConsoleLimits(t)
	g := startGateway(t, gatewayOptions{site: consoleSite, extra: volumePlan})
	c := newConsoleClient(t)
	acct := c.signUp(g, "volume@example.com")
	ctx := context.Background()
	if _, err := g.store.Credit(ctx, ledger.CreditRequest{AccountID: acct, Amount: 1_000_000_000, Reference: "test:" + acct, Reason: "test"}); err != nil {
		t.Fatal(err)
	}
	usage := c.get("/console/usage")
	if figure(usage.body, "month_spent") != "" || figure(usage.body, "discount") != "0.000000 USD" {
		t.Fatalf("on the developer plan: month %q, discount %q", figure(usage.body, "month_spent"), figure(usage.body, "discount"))
	}
	if err := g.store.SetAccountPlan(ctx, acct, "volume"); err != nil {
		t.Fatal(err)
	}
	secret, _, err := g.store.CreateKey(ctx, acct, "k")
	if err != nil {
		t.Fatal(err)
	}
	usage = c.get("/console/usage")
	if figure(usage.body, "tier") != "none yet" || figure(usage.body, "next_tier") != "3.33% off, above "+ledger.Money(20_000).Rounded() {
		t.Fatalf("before any request: tier %q, next %q", figure(usage.body, "tier"), figure(usage.body, "next_tier"))
	}
	for range 2 {
		if r := g.do("POST", "/v1/chat/completions", chatBody(testModel, "volume tiers at work", ""), "Authorization", "Bearer "+secret); r.status != 200 {
			t.Fatal(r.body)
		}
	}
	var spent, discount ledger.Money
	rows := g.rows(acct)
	for _, r := range rows {
		spent += r.Charged
		discount += r.Discount
	}
	if rows[0].TierBps != 333 || rows[1].TierBps != 0 {
		t.Fatalf("tiers of the rows: %d, %d", rows[1].TierBps, rows[0].TierBps)
	}
	usage = c.get("/console/usage")
	if exactFigure(usage.body, "discount") != discount.String() || exactFigure(usage.body, "month_spent") != spent.String() ||
		figure(usage.body, "tier") != "3.33% off, above "+ledger.Money(20_000).Rounded() ||
		figure(usage.body, "next_tier") != "7.77% off, above "+ledger.Money(50_000).Rounded() ||
		!strings.Contains(usage.body, `<td><span class="amount" title="`+discount.String()+`">`) {
		t.Fatalf("usage page: discount %q, month %q, tier %q, next %q\n%s", exactFigure(usage.body, "discount"),
			exactFigure(usage.body, "month_spent"), figure(usage.body, "tier"), figure(usage.body, "next_tier"), usage.body)
	}
	records, err := csv.NewReader(strings.NewReader(c.get("/console/usage.csv").body)).ReadAll()
	if err != nil || len(records) != 2 || records[0][12] != "discount" || records[1][12] != discount.String() {
		t.Fatalf("csv: %q %v", records, err)
	}
}

// TestConsoleVolumeTierInBrowser: in headless Chromium, with page scripts
// off, the usage page of an account on a plan with volume tiers shows the
// discounts, the month's spend and the tiers (screenshot
// console-usage-tiers.png, MODELGATE_SCREENSHOTS).
func TestConsoleVolumeTierInBrowser(t *testing.T) {
	b := newConsoleBrowser(t)
	resetConsoleLimits(t)
	g := startGateway(t, gatewayOptions{site: consoleSite, extra: volumePlan})
	ctx, run := b.ctx, b.run
	text := b.text
	b.signUp("tiers@example.com", scriptsOff())
	bg := context.Background()
	acct, _, err := g.store.Login(bg, "tiers@example.com")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.store.Credit(bg, ledger.CreditRequest{AccountID: acct, Amount: 1_000_000_000, Reference: "test:tiers", Reason: "test"}); err != nil {
		t.Fatal(err)
	}
	if err := g.store.SetAccountPlan(bg, acct, "volume"); err != nil {
		t.Fatal(err)
	}
	secret, _, err := g.store.CreateKey(bg, acct, "laptop")
	if err != nil {
		t.Fatal(err)
	}
	for range 4 {
		if r := g.do("POST", "/v1/chat/completions", chatBody(testModel, "volume tiers at work", ""), "Authorization", "Bearer "+secret); r.status != 200 {
			t.Fatal(r.body)
		}
	}
	var spent, discount ledger.Money
	for _, r := range g.rows(acct) {
		spent += r.Charged
		discount += r.Discount
	}
	run("usage",
		chromedp.Navigate(gatewayAddr+"/console/usage"),
		chromedp.WaitVisible(chromedp.CSS(`[data-figure="tier"]`)),
		chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
			png, err := chromedp.FullScreenshot(100)(ctx, tg)
			if err != nil {
				return err
			}
			return os.WriteFile(filepath.Join(b.shots, "console-usage-tiers.png"), png, 0o644)
		}),
	)
	for sel, want := range map[string]string{
		`[data-figure="discount"]`:                       discount.Display() + " USD",
		`[data-figure="month_spent"]`:                    spent.Display() + " USD",
		`[data-figure="tier"]`:                           "7.77% off, above " + ledger.Money(50_000).Rounded(),
		`table[data-table="models"] tbody td:last-child`: discount.Display(),
		`table[data-table="models"] thead th:last-child`: "Discount",
	} {
		if got := text(sel); got != want {
			t.Errorf("%s: %q, want %q", sel, got, want)
		}
	}
	if html, err := chromedp.Run(ctx, chromedp.OuterHTML(chromedp.CSS("html"))); err != nil || strings.Contains(html, `data-figure="next_tier"`) {
		t.Errorf("a next tier is shown at the top tier (%v)", err)
	}
}
