package mockupstream

import (
	"strings"
	"testing"
	"time"
)

func TestInputTokens(t *testing.T) {
	for _, tc := range []struct {
		msgs [][]string
		want int
	}{
		{nil, 3},
		{[][]string{{"Hello there"}}, 9},
		{[][]string{{""}}, 7},
		{[][]string{{"  a\tb\nc  "}, {"d", "e f"}}, 3 + 4 + 3 + 4 + 3},
		{[][]string{{"mock:tokens=3 hi"}}, 9},
		{[][]string{{"naïve café\u00a0x"}}, 3 + 4 + 3}, // NBSP is whitespace
	} {
		if got := InputTokens(tc.msgs); got != tc.want {
			t.Errorf("InputTokens(%q) = %d, want %d", tc.msgs, got, tc.want)
		}
	}
	for _, s := range []string{"", " ", "a", " a b ", "a\u2003b\u3000c", "x\u200by"} {
		if Words(s) != len(strings.Fields(s)) {
			t.Errorf("Words(%q) = %d, strings.Fields %d", s, Words(s), len(strings.Fields(s)))
		}
	}
}

func TestReplyText(t *testing.T) {
	if ReplyText(0) != "" || ReplyText(-1) != "" {
		t.Error("empty reply")
	}
	if got := ReplyText(3); got != "Lorem ipsum dolor" {
		t.Errorf("ReplyText(3) = %q", got)
	}
	long := ReplyText(50)
	if Words(long) != 50 || strings.Contains(long, "  ") {
		t.Errorf("ReplyText(50) = %q", long)
	}
	if f := strings.Fields(long); f[len(replyWords)] != f[0] {
		t.Error("the word list does not cycle")
	}
	// Concatenated stream deltas equal the text.
	var b strings.Builder
	for i := range 30 {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(ReplyToken(i))
	}
	if b.String() != ReplyText(30) {
		t.Error("tokens do not build the text")
	}
}

func TestApplyCap(t *testing.T) {
	for _, tc := range []struct{ n, r, limit, wantN, wantR int }{
		{12, 0, 0, 12, 0},
		{12, 0, 5, 5, 0},
		{12, 0, 12, 12, 0},
		{10, 6, 8, 2, 6},
		{10, 9, 8, 0, 8},
		{3, 2, 100, 3, 2},
	} {
		n, r, capped := applyCap(tc.n, tc.r, tc.limit)
		if n != tc.wantN || r != tc.wantR || capped != (tc.n+tc.r > tc.limit && tc.limit > 0) {
			t.Errorf("applyCap(%d,%d,%d) = %d,%d,%v", tc.n, tc.r, tc.limit, n, r, capped)
		}
	}
}

func TestParseDirectives(t *testing.T) {
	d, err := parseDirectives([]string{"hi mock:tokens=3 mock:reasoning=2", "mock:cached=1 mock:finish=length mock:echo_model=x/y " +
		"mock:latency=20ms mock:delay=1s mock:status=429 mock:retry_after=3 mock:hang mock:close mock:cut=4 mock:error_after=5 nomock:tokens=9 " +
		"mock:web_search=2 mock:web_fetch=0 mock:image_generation=3"})
	if err != nil {
		t.Fatal(err)
	}
	want := directives{tokens: 3, reasoning: 2, cached: 1, finish: "length", echoModel: "x/y", latency: 20 * time.Millisecond,
		delay: time.Second, status: 429, retryAfter: 3 * time.Second, hang: true, close: true, cut: 4, errorAfter: 5,
		webSearch: 2, webFetch: 0, imageGeneration: 3}
	if d != want {
		t.Errorf("got %+v\nwant %+v", d, want)
	}
	if d, _ := parseDirectives([]string{"mock:retry_after=1500ms"}); d.retryAfter != 1500*time.Millisecond {
		t.Errorf("retry_after duration: %v", d.retryAfter)
	}
	if d, _ := parseDirectives(nil); d != noDirectives() {
		t.Errorf("no directives: %+v", d)
	}
	for _, bad := range []string{"mock:tokens", "mock:tokens=-1", "mock:tokens=1000001", "mock:status=200", "mock:status=600",
		"mock:hang=1", "mock:latency=fast", "mock:finish=tool_calls", "mock:echo_model=", "mock:", "mock:what=1", "mock:cut=x",
		"mock:web_search=101", "mock:web_fetch", "mock:image_generation=-1"} {
		if _, err := parseDirectives([]string{bad}); err == nil || !strings.HasPrefix(err.Error(), "mockupstream:") {
			t.Errorf("%q: err %v", bad, err)
		}
	}
}

func TestFailurePlan(t *testing.T) {
	d := noDirectives()
	d.status, d.cut = 503, 2
	if p := failurePlan(nil, d); p.fail != failStatus || p.status != 503 || !p.injected {
		t.Errorf("status wins over cut: %+v", p)
	}
	if p := failurePlan(&Fault{Mode: FaultCut, After: 7}, d); p.fail != failCut || p.after != 7 {
		t.Errorf("fault wins: %+v", p)
	}
	if p := failurePlan(&Fault{Mode: FaultSlow, Latency: time.Second}, d); p.fail != failStatus || p.latency != time.Second {
		t.Errorf("slow fault with directives: %+v", p)
	}
	if p := failurePlan(&Fault{Mode: FaultStatus}, noDirectives()); p.status != 500 {
		t.Errorf("default fault status: %+v", p)
	}
	for _, tc := range []struct {
		ra     time.Duration
		status int
		want   string
	}{{-1, 429, "1"}, {-1, 503, ""}, {1500 * time.Millisecond, 429, "2"}, {2 * time.Second, 503, "2"}, {0, 429, "0"}} {
		p := plan{retryAfter: tc.ra}
		if got := p.retryAfterSeconds(tc.status); got != tc.want {
			t.Errorf("retry after %v for %d: %q, want %q", tc.ra, tc.status, got, tc.want)
		}
	}
}

func TestMaskKey(t *testing.T) {
	for key, want := range map[string]string{
		"sk-abcdefghijklmnopqrstuvwxyz": "sk-ab***yz",
		"short":                         "***",
		"":                              "***",
		"exactly12chr":                  "exact***hr",
	} {
		if got := maskKey(key); got != want {
			t.Errorf("maskKey(%q) = %q, want %q", key, got, want)
		}
	}
}

func TestChatPromptTokens(t *testing.T) {
	n, err := ChatPromptTokens([]byte(`{"model":"m","messages":[{"role":"system","content":"be brief"},
		{"role":"user","content":[{"type":"text","text":"Hello there"},{"type":"image_url","image_url":{"url":"x"}}]},
		{"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{\"a\": 1}"}}]},
		{"role":"tool","tool_call_id":"c","content":"ok"}]}`))
	if err != nil || n != 3+(4+2)+(4+2)+(4+2)+(4+1) {
		t.Errorf("ChatPromptTokens = %d, %v", n, err)
	}
	if _, err := ChatPromptTokens([]byte(`{`)); err == nil {
		t.Error("bad JSON: no error")
	}
}
