package gemini

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"google.golang.org/genai"

	"github.com/modelgate/modelgate/formats"
	"github.com/modelgate/modelgate/formats/openai"
)

// sdkServer serves what the gateway would send a Gemini client for an
// OpenAI upstream: the encoder's bytes. It also checks that the SDK's own
// requests pass ParseGenerateRequest.
func sdkServer(t *testing.T, stream string, fail *formats.Error) *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if r.Header.Get("X-Goog-Api-Key") != "test-key" {
			t.Errorf("key header %q", r.Header.Get("X-Goog-Api-Key"))
		}
		rest, ok := strings.CutPrefix(r.URL.Path, "/v1beta/models/")
		if !ok {
			t.Errorf("path %s", r.URL.Path)
		}
		model, method, _ := strings.Cut(rest, ":")
		if method == "countTokens" {
			if _, ferr := ParseCountTokensRequest(body, model); ferr != nil {
				t.Errorf("the SDK's count request was rejected: %v\n%s", ferr, body)
			}
			_, _ = w.Write(AppendCountTokensResponse(nil, 31))
			return
		}
		isStream := method == "streamGenerateContent"
		if _, ferr := ParseGenerateRequest(body, model, isStream); ferr != nil {
			t.Errorf("the SDK's request was rejected: %v\n%s", ferr, body)
		}
		if fail != nil {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(Status(fail))
			_, _ = w.Write(AppendError(nil, fail))
			return
		}
		if !isStream {
			resp, ferr := openai.DecodeChatResponse([]byte(`{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"gpt","choices":[{"index":0,"message":{"role":"assistant","content":"Checking.","tool_calls":[{"id":"call_1","type":"function","function":{"name":"_mg_files-dread","arguments":"{\"path\":\"/tmp\"}"}}]},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":20,"completion_tokens":7,"total_tokens":27,"prompt_tokens_details":{"cached_tokens":4},"completion_tokens_details":{"reasoning_tokens":2}}}`))
			if ferr != nil {
				t.Fatal(ferr)
			}
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(RenderGenerateResponse(nil, resp, model))
			return
		}
		if r.URL.Query().Get("alt") != "sse" {
			t.Errorf("query %s", r.URL.RawQuery)
		}
		w.Header().Set("Content-Type", "text/event-stream")
		tr := formats.Translate(openai.NewStreamDecoder(), NewStreamEncoder(model, true))
		_, _ = w.Write(feedStream(t, tr, read(t, "stream/"+stream+".sse")))
	}))
}

func sdkClient(t *testing.T, url string) *genai.Client {
	t.Helper()
	client, err := genai.NewClient(context.Background(), &genai.ClientConfig{
		APIKey:      "test-key",
		Backend:     genai.BackendGeminiAPI,
		HTTPOptions: genai.HTTPOptions{BaseURL: url},
	})
	if err != nil {
		t.Fatal(err)
	}
	return client
}

// sdkConfig exercises the request shape the SDK sends.
func sdkConfig() *genai.GenerateContentConfig {
	return &genai.GenerateContentConfig{
		SystemInstruction: &genai.Content{Role: "user", Parts: []*genai.Part{{Text: "Be brief."}}},
		Temperature:       genai.Ptr[float32](0.5),
		TopK:              genai.Ptr[float32](40),
		MaxOutputTokens:   256,
		StopSequences:     []string{"END"},
		ThinkingConfig:    &genai.ThinkingConfig{IncludeThoughts: true, ThinkingBudget: genai.Ptr[int32](-1)},
		SafetySettings:    []*genai.SafetySetting{{Category: genai.HarmCategoryHarassment, Threshold: genai.HarmBlockThresholdBlockOnlyHigh}},
		Tools: []*genai.Tool{{FunctionDeclarations: []*genai.FunctionDeclaration{{
			Name:                 "files.read",
			Description:          "Read a file",
			ParametersJsonSchema: map[string]any{"type": "object", "properties": map[string]any{"path": map[string]any{"type": "string"}}},
		}}}},
		ToolConfig: &genai.ToolConfig{FunctionCallingConfig: &genai.FunctionCallingConfig{Mode: genai.FunctionCallingConfigModeAuto}},
	}
}

func TestSDKGenerateContent(t *testing.T) {
	srv := sdkServer(t, "", nil)
	defer srv.Close()
	client := sdkClient(t, srv.URL)
	contents := []*genai.Content{
		genai.NewContentFromText("read /tmp", genai.RoleUser),
		{Role: genai.RoleModel, Parts: []*genai.Part{{FunctionCall: &genai.FunctionCall{Name: "files.read", Args: map[string]any{"path": "/"}}, ThoughtSignature: []byte("sig")}}},
		{Role: genai.RoleUser, Parts: []*genai.Part{genai.NewPartFromFunctionResponse("files.read", map[string]any{"output": "a b"}), genai.NewPartFromBytes([]byte("png"), "image/png")}},
	}
	resp, err := client.Models.GenerateContent(context.Background(), "svc-model", contents, sdkConfig())
	if err != nil {
		t.Fatal(err)
	}
	if resp.Text() != "Checking." || resp.ModelVersion != "svc-model" || resp.ResponseID == "" {
		t.Fatalf("text %q model %q id %q", resp.Text(), resp.ModelVersion, resp.ResponseID)
	}
	calls := resp.FunctionCalls()
	if len(calls) != 1 || calls[0].Name != "files.read" || calls[0].ID != "call_1" || calls[0].Args["path"] != "/tmp" {
		t.Fatalf("calls %+v", calls)
	}
	if c := resp.Candidates[0]; c.FinishReason != genai.FinishReasonStop {
		t.Fatalf("finish %v", c.FinishReason)
	}
	u := resp.UsageMetadata
	if u.PromptTokenCount != 20 || u.CachedContentTokenCount != 4 || u.CandidatesTokenCount != 5 || u.ThoughtsTokenCount != 2 || u.TotalTokenCount != 27 {
		t.Fatalf("usage %+v", u)
	}
}

func TestSDKCountTokens(t *testing.T) {
	srv := sdkServer(t, "", nil)
	defer srv.Close()
	client := sdkClient(t, srv.URL)
	resp, err := client.Models.CountTokens(context.Background(), "svc-model", genai.Text("hello there"), nil)
	if err != nil || resp.TotalTokens != 31 {
		t.Fatalf("%+v %v", resp, err)
	}
}

func TestSDKGenerateContentStream(t *testing.T) {
	for _, tc := range []struct {
		file  string
		text  string
		calls []string
	}{
		{"openai_text", "Hello! é\n", nil},
		{"openai_tools", "", []string{"get_weather", "get_time"}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			srv := sdkServer(t, tc.file, nil)
			defer srv.Close()
			client := sdkClient(t, srv.URL)
			var text strings.Builder
			var calls []string
			var last *genai.GenerateContentResponse
			for resp, err := range client.Models.GenerateContentStream(context.Background(), "svc-model", genai.Text("hi"), sdkConfig()) {
				if err != nil {
					t.Fatal(err)
				}
				if resp.ModelVersion != "svc-model" {
					t.Fatalf("model %q", resp.ModelVersion)
				}
				text.WriteString(resp.Text())
				for _, fc := range resp.FunctionCalls() {
					calls = append(calls, fc.Name)
				}
				last = resp
			}
			if text.String() != tc.text || strings.Join(calls, ",") != strings.Join(tc.calls, ",") {
				t.Fatalf("text %q calls %v", text.String(), calls)
			}
			if last == nil || last.UsageMetadata == nil || last.UsageMetadata.TotalTokenCount == 0 || last.Candidates[0].FinishReason != genai.FinishReasonStop {
				t.Fatalf("last element %+v", last)
			}
		})
	}
}

func TestSDKErrors(t *testing.T) {
	for _, tc := range []struct {
		err    *formats.Error
		code   int
		status string
	}{
		{&formats.Error{Kind: formats.KindRateLimited, Message: "Too many requests.", RetryAfter: 7}, 429, "RESOURCE_EXHAUSTED"},
		{formats.InvalidRequest("contents", "* GenerateContentRequest.contents: contents is not specified"), 400, "INVALID_ARGUMENT"},
		{formats.NewError(formats.KindRequestTooLarge, ""), 400, "INVALID_ARGUMENT"},
		{formats.NewError(formats.KindAuthentication, ""), 401, "UNAUTHENTICATED"},
		{formats.NewError(formats.KindInsufficientQuota, ""), 403, "PERMISSION_DENIED"},
		{formats.NewError(formats.KindUpstream, ""), 500, "INTERNAL"},
	} {
		t.Run(tc.status, func(t *testing.T) {
			srv := sdkServer(t, "", tc.err)
			defer srv.Close()
			client := sdkClient(t, srv.URL)
			_, err := client.Models.GenerateContent(context.Background(), "svc-model", genai.Text("hi"), nil)
			var apiErr genai.APIError
			if !errors.As(err, &apiErr) {
				t.Fatalf("error %T %v", err, err)
			}
			if apiErr.Code != tc.code || apiErr.Status != tc.status || apiErr.Message == "" {
				t.Fatalf("got %+v", apiErr)
			}
			if tc.err.RetryAfter > 0 && (len(apiErr.Details) != 1 || apiErr.Details[0]["retryDelay"] != "7s") {
				t.Fatalf("details %+v", apiErr.Details)
			}
		})
	}
	// an error inside the stream, after some text
	srv := sdkServer(t, "openai_error", nil)
	defer srv.Close()
	client := sdkClient(t, srv.URL)
	var text string
	var streamErr error
	for resp, err := range client.Models.GenerateContentStream(context.Background(), "svc-model", genai.Text("hi"), nil) {
		if err != nil {
			streamErr = err
			break
		}
		text += resp.Text()
	}
	var apiErr genai.APIError
	if text != "Part" || !errors.As(streamErr, &apiErr) || apiErr.Code != 500 || apiErr.Status != "INTERNAL" {
		t.Fatalf("text %q error %v", text, streamErr)
	}
}
