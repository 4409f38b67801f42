package mockupstream

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// vendorCase sends one generation request in a vendor's format.
type vendorCase struct {
	name string
	// request builds the request for text (the user message) and stream.
	request func(ts *httptest.Server, text string, stream bool) *http.Request
	// envelope checks an error body and returns its type or status name.
	envelope func(t *testing.T, res *http.Response, body []byte) string
}

func newReq(ts *httptest.Server, path, body string, headers ...string) *http.Request {
	req, _ := http.NewRequest(http.MethodPost, ts.URL+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	return req
}

var everyVendor = []vendorCase{
	{"openai", func(ts *httptest.Server, text string, stream bool) *http.Request {
		extra := ""
		if stream {
			extra = `"stream":true,"stream_options":{"include_usage":true}`
		}
		return newReq(ts, "/v1/chat/completions", chatBody(text, extra), "Authorization", "Bearer "+testKey)
	}, func(t *testing.T, _ *http.Response, body []byte) string {
		return errorEnvelope(t, body)["type"].(string)
	}},
	{"anthropic", func(ts *httptest.Server, text string, stream bool) *http.Request {
		return newReq(ts, "/v1/messages", `{"model":"claude-x","max_tokens":100,"stream":`+map[bool]string{true: "true", false: "false"}[stream]+
			`,"messages":[{"role":"user","content":`+string(jsonString(text))+`}]}`, "X-Api-Key", testKey, "Anthropic-Version", "2023-06-01")
	}, func(t *testing.T, res *http.Response, body []byte) string {
		typ, _ := antError(t, res, body)
		return typ
	}},
	{"gemini", func(ts *httptest.Server, text string, stream bool) *http.Request {
		path := "/v1beta/models/gemini-x:generateContent"
		if stream {
			path = "/v1beta/models/gemini-x:streamGenerateContent?alt=sse"
		}
		return newReq(ts, path, `{"contents":[{"parts":[{"text":`+string(jsonString(text))+`}]}]}`, "X-Goog-Api-Key", testKey)
	}, func(t *testing.T, res *http.Response, body []byte) string {
		status, _, _ := gemError(t, res, body)
		return status
	}},
}

func send(t *testing.T, ts *httptest.Server, req *http.Request) (*http.Response, []byte, error) {
	t.Helper()
	res, err := ts.Client().Do(req.WithContext(ctxT(t)))
	if err != nil {
		return nil, nil, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return res, b, err
}

// TestFailuresEveryVendor: the failure directives and faults act in every
// vendor's format.
func TestFailuresEveryVendor(t *testing.T) {
	wantType := map[string][3]string{ // 503, 429, 500 by vendor
		"openai":    {"server_error", "requests", "server_error"},
		"anthropic": {"api_error", "rate_limit_error", "api_error"},
		"gemini":    {"UNAVAILABLE", "RESOURCE_EXHAUSTED", "INTERNAL"},
	}
	for _, v := range everyVendor {
		t.Run(v.name, func(t *testing.T) {
			s, ts := start(t, Config{})
			for i, status := range []int{503, 429, 500} {
				for _, stream := range []bool{false, true} {
					res, body, err := send(t, ts, v.request(ts, "x mock:status="+itoa(status), stream))
					if err != nil || res.StatusCode != status {
						t.Fatalf("status %d: %v %v", status, res, err)
					}
					if typ := v.envelope(t, res, body); typ != wantType[v.name][i] {
						t.Errorf("status %d: type %q", status, typ)
					}
					if ra := res.Header.Get("Retry-After"); (status == 429) != (ra == "1") {
						t.Errorf("status %d: Retry-After %q", status, ra)
					}
				}
			}
			// close: no response at all.
			if _, _, err := send(t, ts, v.request(ts, "x mock:close", true)); err == nil {
				t.Error("close: a response")
			}
			// cut, non-stream and stream: an incomplete body.
			for _, stream := range []bool{false, true} {
				if _, _, err := send(t, ts, v.request(ts, "x mock:tokens=4 mock:cut=2", stream)); !errors.Is(err, io.ErrUnexpectedEOF) {
					t.Errorf("cut, stream=%v: %v", stream, err)
				}
			}
			// error_after, non-stream: a 500 in the vendor's envelope.
			res, body, err := send(t, ts, v.request(ts, "x mock:error_after=1", false))
			if err != nil || res.StatusCode != 500 || v.envelope(t, res, body) != wantType[v.name][2] {
				t.Errorf("error_after: %v %s", err, body)
			}
			// hang: ends with the client.
			req := v.request(ts, "x mock:hang", false)
			ctx, cancel := ctxWithTimeout(t, 100*time.Millisecond)
			if _, err := ts.Client().Do(req.WithContext(ctx)); err == nil {
				t.Error("hang: a response")
			}
			cancel()
			// latency before the headers, delay before each chunk.
			t0 := time.Now()
			if res, _, err := send(t, ts, v.request(ts, "x mock:latency=150ms", false)); err != nil || res.StatusCode != 200 || time.Since(t0) < 150*time.Millisecond {
				t.Errorf("latency: %v after %v", err, time.Since(t0))
			}
			t0 = time.Now()
			if res, _, err := send(t, ts, v.request(ts, "x mock:tokens=3 mock:delay=40ms", true)); err != nil || res.StatusCode != 200 || time.Since(t0) < 120*time.Millisecond {
				t.Errorf("delay: %v after %v", err, time.Since(t0))
			}
			// Faults: a keyed status fault, then a slow one.
			s.SetFaults([]Fault{{Key: testKey, Mode: FaultStatus, Status: 429, RetryAfter: 2 * time.Second, Times: 1},
				{Key: testKey, Mode: FaultSlow, Latency: 120 * time.Millisecond, Times: 1}})
			res, body, err = send(t, ts, v.request(ts, "x", true))
			if err != nil || res.StatusCode != 429 || res.Header.Get("Retry-After") != "2" || v.envelope(t, res, body) != wantType[v.name][1] {
				t.Errorf("fault 429: %v %v %s", err, res, body)
			}
			t0 = time.Now()
			if res, _, err := send(t, ts, v.request(ts, "x", true)); err != nil || res.StatusCode != 200 || time.Since(t0) < 120*time.Millisecond {
				t.Errorf("slow fault: %v after %v", err, time.Since(t0))
			}
			waitFor(t, func() bool { return s.KeyStats(testKey).Active == 0 })
			st := s.KeyStats(testKey)
			// 6 statuses, close, 2 cuts, error_after, hang (a failure), latency, delay, 2 faults
			if st.Requests != 15 || st.Completed != 3 || st.Failed != 12 || st.Canceled != 0 || st.Streams != 8 || st.ByStatus[429] != 3 {
				t.Errorf("stats %+v", st)
			}
		})
	}
}

// TestModelListsByVendor: GET /v1/models answers in the shape its headers ask for.
func TestModelListsByVendor(t *testing.T) {
	_, ts := start(t, Config{})
	get := func(path string, headers ...string) string {
		req, _ := http.NewRequest(http.MethodGet, ts.URL+path, nil)
		for i := 0; i+1 < len(headers); i += 2 {
			req.Header.Set(headers[i], headers[i+1])
		}
		_, body, err := send(t, ts, req)
		if err != nil {
			t.Fatal(err)
		}
		return string(body)
	}
	for _, tc := range []struct {
		name, body, want string
	}{
		{"openai", get("/v1/models", "Authorization", "Bearer k"), `{"object":"list","data":[{"id":"gpt-4o-mini","object":"model"`},
		{"anthropic", get("/v1/models", "X-Api-Key", "k", "Anthropic-Version", "2023-06-01"), `{"data":[{"type":"model","id":"claude-sonnet-4-5","display_name":"Claude Sonnet 4.5"`},
		{"anthropic with bearer", get("/v1/models?limit=1", "Authorization", "Bearer k", "Anthropic-Version", "2023-06-01"), `"has_more":true,"first_id":"claude-sonnet-4-5"`},
		{"anthropic before_id", get("/v1/models?before_id=claude-haiku-4-5&limit=1", "X-Api-Key", "k", "Anthropic-Version", "2023-06-01"),
			`"id":"claude-opus-4-1","display_name":"Claude Opus 4.1","created_at":"2025-09-29T00:00:00Z"}],"has_more":true`},
		{"gemini v1beta", get("/v1beta/models", "X-Goog-Api-Key", "k"), `{"models":[{"name":"models/gemini-2.5-flash","version":"001"`},
		{"gemini v1", get("/v1/models", "X-Goog-Api-Key", "k"), `{"models":[{"name":"models/gemini-2.5-flash"`},
		{"gemini key in query", get("/v1beta/models/gemini-2.5-pro?key=k"), `{"name":"models/gemini-2.5-pro"`},
		{"gemini paging", get("/v1beta/models?pageSize=1&pageToken=1", "X-Goog-Api-Key", "k"), `"nextPageToken":"2"`},
	} {
		if !strings.Contains(tc.body, tc.want) {
			t.Errorf("%s: %s\nwant %s", tc.name, tc.body, tc.want)
		}
	}
	c := genaiSDK(t, ts, testKey, "v1")
	n := 0
	for _, err := range c.Models.All(ctxT(t)) {
		if err != nil {
			t.Fatal(err)
		}
		n++
	}
	if n != len(DefaultGeminiModels) {
		t.Errorf("v1 list: %d models", n)
	}
}
