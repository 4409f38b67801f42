package mockupstream

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

const (
	testKey  = "sk-test-0123456789abcdefXYZ"
	otherKey = "sk-other-9876543210fedcbaQRS"
)

// start serves a mock for cfg on a real listener.
func start(t *testing.T, cfg Config) (*Server, *httptest.Server) {
	t.Helper()
	s := New(cfg)
	return s, newServer(t, s)
}

// newServer serves s on a real listener until the test ends.
func newServer(t *testing.T, s *Server) *httptest.Server {
	ts := httptest.NewServer(s)
	t.Cleanup(func() {
		s.Close() // release any hang first
		ts.Close()
	})
	return ts
}

// sdk is an OpenAI SDK client for ts with key, without retries.
func sdk(ts *httptest.Server, key string, opts ...option.RequestOption) *openai.Client {
	c := openai.NewClient(append([]option.RequestOption{
		option.WithBaseURL(ts.URL + "/v1/"),
		option.WithAPIKey(key),
		option.WithMaxRetries(0),
	}, opts...)...)
	return &c
}

func userParams(text string) openai.ChatCompletionNewParams {
	return openai.ChatCompletionNewParams{
		Model:    "gpt-4o-mini",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(text)},
	}
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// post sends a raw request and returns the response and its whole body (and
// the body's read error).
func post(t *testing.T, ts *httptest.Server, key, path, body string) (*http.Response, []byte, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctxT(t), http.MethodPost, ts.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	res, err := ts.Client().Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return res, b, err
}

// chatBody is a chat request body with one user message.
func chatBody(text string, extra string) string {
	b, _ := json.Marshal(text)
	s := `{"model":"gpt-4o-mini","messages":[{"role":"user","content":` + string(b) + `}]`
	if extra != "" {
		s += "," + extra
	}
	return s + "}"
}

// errorEnvelope decodes {"error":{...}} strictly: exactly the four keys.
func errorEnvelope(t *testing.T, body []byte) map[string]any {
	t.Helper()
	var env map[string]map[string]any
	if err := json.Unmarshal(body, &env); err != nil {
		t.Fatalf("error body %q: %v", body, err)
	}
	if len(env) != 1 || env["error"] == nil {
		t.Fatalf("error body %s: want exactly {\"error\":{...}}", body)
	}
	e := env["error"]
	for _, k := range []string{"message", "type", "param", "code"} {
		if _, ok := e[k]; !ok {
			t.Fatalf("error body %s: no %q", body, k)
		}
	}
	if len(e) != 4 {
		t.Fatalf("error body %s: want exactly four keys", body)
	}
	return e
}

// sseEvents splits a stream body into its data payloads, checking the
// framing: only "data: " lines, each followed by one blank line.
func sseEvents(t *testing.T, body []byte) []string {
	t.Helper()
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(nil, 1<<20)
	wantBlank := false
	for sc.Scan() {
		line := sc.Text()
		if wantBlank {
			if line != "" {
				t.Fatalf("line %q: want the blank line after an event", line)
			}
			wantBlank = false
			continue
		}
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			t.Fatalf("line %q: want only \"data: \" lines", line)
		}
		out = append(out, data)
		wantBlank = true
	}
	if wantBlank {
		t.Fatalf("stream ends without the blank line after its last event")
	}
	return out
}
