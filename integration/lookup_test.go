package integration

import (
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/modelgate/modelgate/internal/guard"
)

// postLookup posts a key to the lookup page.
func postLookup(t *testing.T, key string) response {
	t.Helper()
	req, _ := http.NewRequest("POST", gatewayAddr+"/usage", strings.NewReader(url.Values{"key": {key}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	return send(t, http.DefaultClient, req)
}

// figure reads one figure of a page as people see it (its tags removed).
func figure(page, name string) string {
	m := regexp.MustCompile(`data-figure="` + name + `">(.*?)</dd>`).FindStringSubmatch(page)
	if m == nil {
		return ""
	}
	return regexp.MustCompile(`<[^>]*>`).ReplaceAllString(m[1], "")
}

// exactFigure reads the exact amount behind a money figure of a page (the
// title people can hover over).
func exactFigure(page, name string) string {
	m := regexp.MustCompile(`data-figure="` + name + `"><span class="amount" title="([^"]*)"`).FindStringSubmatch(page)
	if m == nil {
		return ""
	}
	return m[1]
}

// TestLookupPage: the public lookup page takes a key by POST only, shows
// its figures uncacheable, logs no key, and refuses a client that keeps
// sending wrong keys.
func TestLookupPage(t *testing.T) {
	resetConsoleLimits(t)
	g := startGateway(t, gatewayOptions{site: "\tmodelgate_lookup /usage*\n", globalLog: true})
	acct, key := g.account("2.00")
	if r := g.generate("openai", testModel, "hello there", false, key); r.status != 200 {
		t.Fatalf("%d %s", r.status, r.body)
	}
	row := g.rows(acct)[0]
	balance, _ := g.balance(acct)

	form := g.do("GET", "/usage?key="+url.QueryEscape(key), "")
	if form.status != 200 || !strings.Contains(form.body, `method="post"`) || figure(form.body, "requests") != "" ||
		form.header.Get("Cache-Control") != "no-store" || !strings.Contains(form.header.Get("Content-Security-Policy"), "default-src 'none'") {
		t.Fatalf("the form (a key in the URL is not looked up): %d %v\n%s", form.status, form.header, form.body)
	}

	r := postLookup(t, key)
	if r.status != 200 || r.header.Get("Cache-Control") != "no-store" {
		t.Fatalf("lookup: %d %v", r.status, r.header)
	}
	for name, want := range map[string]string{
		"requests": "1", "input_tokens": strconv.FormatInt(row.Tokens.Input, 10), "output_tokens": strconv.FormatInt(row.Tokens.Output, 10),
		"spent": row.Charged.Display() + " USD", "balance": balance.Display() + " USD", "held": "0.000000 USD",
		"plan": "developer", "state": "active",
	} {
		if got := figure(r.body, name); got != want {
			t.Errorf("%s: %q, want %q", name, got, want)
		}
	}
	// money is rounded for people, exact on hover
	if got := exactFigure(r.body, "spent"); got != row.Charged.String() {
		t.Errorf("spent, exact: %q, want %s", got, row.Charged)
	}
	if strings.Contains(r.body, key) {
		t.Fatal("the page shows the key")
	}
	// the key is named by its display prefix, which has its own ellipsis
	if title, want := resultTitle(r.body), "Key "+key[:7]+"…"+key[len(key)-4:]+" test key"; title != want {
		t.Errorf("result title %q, want %q", title, want)
	}

	// wrong keys: 404 each, then the client is refused, right key or not
	for i := range guard.LookupFailures {
		if r := postLookup(t, "mg-"+strings.Repeat("x", 40)+strconv.Itoa(i)); r.status != 404 || !strings.Contains(r.body, "No such key") {
			t.Fatalf("wrong key %d: %d", i, r.status)
		}
	}
	if r := postLookup(t, key); r.status != 429 || r.header.Get("Retry-After") == "" || figure(r.body, "requests") != "" {
		t.Fatalf("after %d wrong keys: %d %s", guard.LookupFailures, r.status, r.body)
	}
	if r := postLookup(t, ""); r.status != 429 {
		t.Fatalf("an empty key while refused: %d", r.status)
	}
	if logs := readLogs(t, g.logPath, g.logPath+".access"); strings.Contains(logs, key) || !strings.Contains(logs, "/usage") {
		t.Fatal("the key was logged (or nothing was)")
	}
}

// resultTitle is the lookup result's title as people read it (its tags
// removed).
func resultTitle(page string) string {
	m := regexp.MustCompile(`<h2 id="result-title">(.*?)</h2>`).FindStringSubmatch(page)
	if m == nil {
		return ""
	}
	return regexp.MustCompile(`<[^>]*>`).ReplaceAllString(m[1], "")
}
