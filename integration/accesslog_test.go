package integration

import (
	"bufio"
	"encoding/json"
	"os"
	"strings"
	"testing"
)

// accessLine is the part of an access log line the tests read.
type accessLine struct {
	Msg     string `json:"msg"`
	Status  int    `json:"status"`
	Size    int    `json:"size"`
	Read    int    `json:"bytes_read"`
	Request struct {
		Method  string              `json:"method"`
		URI     string              `json:"uri"`
		Headers map[string][]string `json:"headers"`
	} `json:"request"`
	UserID    string         `json:"user_id"`
	Modelgate map[string]any `json:"modelgate"`
	MGCost    string         `json:"mg_cost"` // log_append of the placeholder
}

// accessLines reads the gateway's access log.
func (g *testGateway) accessLines() []accessLine {
	g.t.Helper()
	f, err := os.Open(g.logPath + ".access")
	if err != nil {
		g.t.Fatal(err)
	}
	defer f.Close()
	var lines []accessLine
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var l accessLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			g.t.Fatalf("an access log line that is not JSON: %v\n%s", err, sc.Bytes())
		}
		lines = append(lines, l)
	}
	return lines
}

// TestKeysNotInPlainAccessLog: with a plain log directive (no filter), a key
// sent in any of its four forms appears nowhere in the access log (nor in
// Caddy's own log at DEBUG), while every request still has its line, with
// the key's header or parameter shown REDACTED; ?key= is a credential on
// the Gemini routes only.
func TestKeysNotInPlainAccessLog(t *testing.T) {
	for _, tc := range []struct {
		name, global string
	}{
		{"plain log", ""},
		{"log_credentials", "\tservers {\n\t\tlog_credentials\n\t}\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := startGateway(t, gatewayOptions{plainLog: true, globalLog: true, global: tc.global})
			_, key := g.account("1.00")
			unknown := "mg-" + strings.Repeat("Q", 43)
			gemini := `{"contents":[{"parts":[{"text":"hi"}]}]}`
			requests := []struct {
				method, path, body string
				headers            []string
				status             int
				redacted           string // the header shown REDACTED, or "uri"
			}{
				{"POST", "/v1/chat/completions", chatBody(testModel, "hello", ""), []string{"Authorization", "Bearer " + key}, 200, "Authorization"},
				{"POST", "/v1/messages", `{"model":"claude-test","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`,
					[]string{"X-Api-Key", key, "Anthropic-Version", "2023-06-01"}, 200, "X-Api-Key"},
				{"POST", "/v1beta/models/gemini-test:generateContent", gemini, []string{"X-Goog-Api-Key", key}, 200, "X-Goog-Api-Key"},
				{"POST", "/v1beta/models/gemini-test:streamGenerateContent?alt=sse&key=" + key, gemini, nil, 200, "uri"},
				{"POST", "/v1/models/gemini-test:generateContent?key=" + key, gemini, nil, 200, "uri"},
				{"GET", "/v1/models?key=" + key, "", nil, 200, "uri"},
				// not a credential here, and not logged either
				{"POST", "/v1/chat/completions?key=" + key, chatBody(testModel, "hello", ""), nil, 401, "uri"},
				{"GET", "/api/usage?key=" + key, "", nil, 401, "uri"},
				// refused keys are not logged either
				{"POST", "/v1/chat/completions", chatBody(testModel, "hello", ""), []string{"X-Api-Key", unknown}, 401, "X-Api-Key"},
				{"POST", "/v1/chat/completions", chatBody(testModel, "hello", `"stream":true`), []string{"Authorization", "Bearer " + unknown}, 401, "Authorization"},
			}
			for _, rq := range requests {
				if r := g.do(rq.method, rq.path, rq.body, rq.headers...); r.status != rq.status {
					path, _, _ := strings.Cut(rq.path, "?") // the query may hold the key
					t.Fatalf("%s %s: %d, want %d: %.300s", rq.method, path, r.status, rq.status, r.body)
				}
			}
			lines := g.accessLines()
			if len(lines) != len(requests) {
				t.Fatalf("%d access log lines for %d requests", len(lines), len(requests))
			}
			for i, l := range lines {
				rq := requests[i]
				wantPath, _, _ := strings.Cut(rq.path, "?")
				read := len(rq.body)
				if rq.status != 200 {
					read = 0 // refused before the body is read
				}
				if l.Msg != "handled request" || l.Status != rq.status || l.Request.Method != rq.method || !strings.HasPrefix(l.Request.URI, wantPath) ||
					l.Size == 0 || l.Read != read {
					t.Errorf("line %d: %+v, want %s %s %d", i, l, rq.method, wantPath, rq.status)
				}
				if rq.redacted == "uri" {
					if !strings.Contains(l.Request.URI, "key=REDACTED") {
						t.Errorf("line %d: uri %q", i, l.Request.URI)
					}
				} else if v := l.Request.Headers[rq.redacted]; len(v) != 1 || v[0] != "REDACTED" {
					t.Errorf("line %d: %s %q", i, rq.redacted, v)
				}
			}
			logs := readLogs(t, g.logPath, g.logPath+".access")
			for _, secret := range []string{key, unknown, key[3:23], unknown[3:23]} {
				if strings.Contains(logs, secret) {
					t.Fatal("a key is in the logs")
				}
			}
		})
	}
}

// TestAccessLogLine: each API request's access log line says who called
// (user_id: the account) and what the call was (the modelgate object:
// request and key ids, model, provider, upstream model, tokens, cost,
// usage source, outcome), with the key nowhere, whether Caddy wrote the
// line (a Bearer key) or the gateway did (x-api-key, under a plain log);
// the same values are placeholders.
func TestAccessLogLine(t *testing.T) {
	g := startGateway(t, gatewayOptions{plainLog: true, site: "\tlog_append mg_cost {http.modelgate.cost}\n"})
	acct, key := g.account("1.00")
	for _, h := range [][]string{{"Authorization", "Bearer " + key}, {"X-Api-Key", key}} {
		r := g.do("POST", "/v1/chat/completions", chatBody(testModel, "log me", ""), h...)
		if r.status != 200 {
			t.Fatalf("%s: %d %s", h[0], r.status, r.body)
		}
	}
	// an unauthenticated request has its request id, nothing more
	anon := g.do("POST", "/v1/chat/completions", chatBody(testModel, "who", ""))
	rows := g.rows(acct)
	lines := g.accessLines()
	if len(lines) != 3 || len(rows) != 2 {
		t.Fatalf("%d lines, %d rows", len(lines), len(rows))
	}
	for i, l := range lines[:2] {
		row := rows[1-i] // rows are newest first
		want := map[string]any{"request_id": row.RequestID, "account_id": acct, "key_id": row.KeyID, "model": testModel,
			"provider": "mock", "upstream_model": testUpstreamModel, "input_tokens": float64(row.Tokens.Input),
			"output_tokens": float64(row.Tokens.Output), "cost": row.Charged.String(), "usage_source": "upstream", "outcome": "ok"}
		if l.UserID != acct || len(l.Modelgate) != len(want) {
			t.Errorf("line %d: user %q, modelgate %v", i, l.UserID, l.Modelgate)
		}
		for k, v := range want {
			if l.Modelgate[k] != v {
				t.Errorf("line %d: %s = %v, want %v", i, k, l.Modelgate[k], v)
			}
		}
	}
	// the placeholder, through log_append, on the line Caddy writes
	if lines[0].MGCost != rows[1].Charged.String() {
		t.Errorf("{http.modelgate.cost} = %q, want %s", lines[0].MGCost, rows[1].Charged)
	}
	if l := lines[2]; l.Status != 401 || l.UserID != "" || len(l.Modelgate) != 1 ||
		l.Modelgate["request_id"] != anon.header.Get("X-Request-Id") {
		t.Errorf("unauthenticated line: %+v", l)
	}
}
