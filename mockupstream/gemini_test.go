package mockupstream

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"google.golang.org/genai"
)

// genaiSDK is a Google GenAI SDK client (Gemini API) for ts with key.
func genaiSDK(t *testing.T, ts *httptest.Server, key, apiVersion string) *genai.Client {
	t.Helper()
	c, err := genai.NewClient(ctxT(t), &genai.ClientConfig{
		APIKey:      key,
		Backend:     genai.BackendGeminiAPI,
		HTTPOptions: genai.HTTPOptions{BaseURL: ts.URL, APIVersion: apiVersion},
	})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// gemAsk sends one generation, streamed or not, and merges the answer:
// the text, the thoughts, the calls, the last usage and finish reason.
type gemTurn struct {
	text, thoughts string
	calls          []*genai.Part
	usage          *genai.GenerateContentResponseUsageMetadata
	finish         genai.FinishReason
	model, id      string
	elements       int
}

func gemAsk(t *testing.T, c *genai.Client, model string, contents []*genai.Content, cfg *genai.GenerateContentConfig, stream bool) (gemTurn, error) {
	t.Helper()
	var tr gemTurn
	add := func(r *genai.GenerateContentResponse) {
		tr.elements++
		if r.UsageMetadata != nil {
			tr.usage = r.UsageMetadata
		}
		tr.model, tr.id = r.ModelVersion, r.ResponseID
		for _, cand := range r.Candidates {
			if cand.FinishReason != "" {
				tr.finish = cand.FinishReason
			}
			if cand.Content == nil {
				continue
			}
			for _, p := range cand.Content.Parts {
				switch {
				case p.FunctionCall != nil:
					tr.calls = append(tr.calls, p)
				case p.Thought:
					tr.thoughts += p.Text
				default:
					tr.text += p.Text
				}
			}
		}
	}
	if !stream {
		r, err := c.Models.GenerateContent(ctxT(t), model, contents, cfg)
		if err != nil {
			return tr, err
		}
		add(r)
		return tr, nil
	}
	for r, err := range c.Models.GenerateContentStream(ctxT(t), model, contents, cfg) {
		if err != nil {
			return tr, err
		}
		add(r)
	}
	return tr, nil
}

// gemPost sends a raw Gemini request with x-goog-api-key (unless key is "").
func gemPost(t *testing.T, ts *httptest.Server, key, path, body string) (*http.Response, []byte, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctxT(t), http.MethodPost, ts.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("X-Goog-Api-Key", key)
	}
	res, err := ts.Client().Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return res, b, err
}

// gemError decodes Google's error envelope: code, message, status (details
// optional).
func gemError(t *testing.T, res *http.Response, body []byte) (status, message string, details []map[string]any) {
	t.Helper()
	var env map[string]map[string]any
	if err := json.Unmarshal(body, &env); err != nil || len(env) != 1 || env["error"] == nil {
		t.Fatalf("error body %s: %v", body, err)
	}
	e := env["error"]
	if code, _ := e["code"].(float64); int(code) != res.StatusCode || e["message"] == "" || e["status"] == "" {
		t.Fatalf("error body %s for status %d", body, res.StatusCode)
	}
	for k := range e {
		if k != "code" && k != "message" && k != "status" && k != "details" {
			t.Errorf("error body %s: key %q", body, k)
		}
	}
	if ds, ok := e["details"].([]any); ok {
		for _, d := range ds {
			details = append(details, d.(map[string]any))
		}
	}
	return e["status"].(string), e["message"].(string), details
}

func TestGeminiSDKGenerate(t *testing.T) {
	_, ts := start(t, Config{Keys: []string{testKey}})
	c := genaiSDK(t, ts, testKey, "")
	const system, prompt = "Be brief.", "Hello there mock:tokens=5 mock:cached=3"
	in := int32(3 + (4 + 2) + (4 + 4))
	cfg := &genai.GenerateContentConfig{SystemInstruction: genai.NewContentFromText(system, genai.RoleUser), MaxOutputTokens: 100}
	for _, stream := range []bool{false, true} {
		tr, err := gemAsk(t, c, "gemini-2.5-flash", genai.Text(prompt), cfg, stream)
		if err != nil {
			t.Fatalf("stream=%v: %v", stream, err)
		}
		u := tr.usage
		switch {
		case tr.text != ReplyText(5) || tr.thoughts != "" || len(tr.calls) != 0:
			t.Errorf("stream=%v: text %q", stream, tr.text)
		case tr.finish != genai.FinishReasonStop || tr.model != "gemini-2.5-flash" || tr.id == "":
			t.Errorf("stream=%v: %+v", stream, tr)
		case u.PromptTokenCount != in || u.CandidatesTokenCount != 5 || u.TotalTokenCount != in+5 ||
			u.CachedContentTokenCount != 3 || u.ThoughtsTokenCount != 0:
			t.Errorf("stream=%v: usage %+v", stream, u)
		case stream && tr.elements != 5, !stream && tr.elements != 1:
			t.Errorf("stream=%v: %d elements", stream, tr.elements)
		}
	}
	// API version v1 and the key in the query work too.
	c1 := genaiSDK(t, ts, testKey, "v1")
	if r, err := c1.Models.GenerateContent(ctxT(t), "gemini-2.5-pro", genai.Text("hi"), nil); err != nil || r.Text() != ReplyText(12) {
		t.Errorf("v1: %v", err)
	}
	if res, body, _ := gemPost(t, ts, "", "/v1beta/models/gemini-x:generateContent?key="+testKey, `{"contents":[{"parts":[{"text":"hi"}]}]}`); res.StatusCode != 200 {
		t.Errorf("?key=: %d %s", res.StatusCode, body)
	}
}

func TestGeminiToolsThinkingAndCaps(t *testing.T) {
	_, ts := start(t, Config{})
	c := genaiSDK(t, ts, testKey, "")
	tools := []*genai.Tool{{FunctionDeclarations: []*genai.FunctionDeclaration{{Name: "lookup",
		ParametersJsonSchema: map[string]any{"type": "object", "additionalProperties": false}}}}}
	for _, tc := range []struct {
		name, prompt     string
		max              int32
		include          bool
		model            string
		text, thoughts   string
		calls            []string
		signed           bool
		candidates, thou int32
		finish           genai.FinishReason
	}{
		{"one call", "weather? mock:tool=get_weather", 100, false, "gemini-2.5-flash", "", "", []string{"get_weather"}, false, 10, 0, "STOP"},
		{"default name from tools", "weather? mock:tools=2", 100, false, "gemini-2.5-flash", "", "", []string{"lookup", "lookup_2"}, false, 20, 0, "STOP"},
		{"text and call", "x mock:tokens=2 mock:tool=f", 100, false, "gemini-2.5-flash", ReplyText(2), "", []string{"f"}, false, 12, 0, "STOP"},
		{"hidden thinking", "x mock:tokens=2 mock:thinking=7", 100, false, "gemini-2.5-flash", ReplyText(2), "", nil, false, 2, 7, "STOP"},
		{"shown thinking", "x mock:tokens=2 mock:thinking=3", 100, true, "gemini-2.5-flash", ReplyText(2), ThinkingText(3), nil, false, 2, 3, "STOP"},
		{"thinking and call", "x mock:thinking=3 mock:tool=f", 100, false, "gemini-2.5-flash", "", "", []string{"f"}, true, 10, 3, "STOP"},
		{"gemini 3 call", "x mock:tool=f", 100, false, "gemini-3-pro", "", "", []string{"f"}, true, 10, 0, "STOP"},
		{"cap", "x mock:tokens=12 mock:thinking=2", 6, false, "gemini-2.5-flash", ReplyText(4), "", nil, false, 4, 2, "MAX_TOKENS"},
		{"no text", "x mock:tokens=0", 100, false, "gemini-2.5-flash", "", "", nil, false, 0, 0, "STOP"},
	} {
		for _, stream := range []bool{false, true} {
			cfg := &genai.GenerateContentConfig{MaxOutputTokens: tc.max, Tools: tools}
			if tc.include {
				cfg.ThinkingConfig = &genai.ThinkingConfig{IncludeThoughts: true}
			}
			tr, err := gemAsk(t, c, tc.model, genai.Text(tc.prompt), cfg, stream)
			if err != nil {
				t.Fatalf("%s, stream=%v: %v", tc.name, stream, err)
			}
			var names []string
			for i, p := range tr.calls {
				names = append(names, p.FunctionCall.Name)
				if p.FunctionCall.ID != "" || p.FunctionCall.Args["city"] != "Paris" || p.FunctionCall.Args["unit"] != "celsius" {
					t.Errorf("%s, stream=%v: call %+v", tc.name, stream, p.FunctionCall)
				}
				if signed := string(p.ThoughtSignature) == "sig-mock"; signed != (tc.signed && i == 0) {
					t.Errorf("%s, stream=%v: call %d signature %q", tc.name, stream, i, p.ThoughtSignature)
				}
			}
			u := tr.usage
			if tr.text != tc.text || tr.thoughts != tc.thoughts || strings.Join(names, ",") != strings.Join(tc.calls, ",") ||
				u.CandidatesTokenCount != tc.candidates || u.ThoughtsTokenCount != tc.thou ||
				u.TotalTokenCount != u.PromptTokenCount+tc.candidates+tc.thou || tr.finish != tc.finish {
				t.Errorf("%s, stream=%v: %+v usage %+v", tc.name, stream, tr, u)
			}
		}
	}
}

func TestGeminiSDKErrorsCountAndModels(t *testing.T) {
	s, ts := start(t, Config{Keys: []string{testKey}, Models: []string{"gemini-a", "gemini-b", "gemini-c"}})
	c := genaiSDK(t, ts, testKey, "")
	for _, tc := range []struct {
		prompt, status string
		code           int
	}{
		{"mock:status=429", "RESOURCE_EXHAUSTED", 429},
		{"mock:status=500", "INTERNAL", 500},
		{"mock:status=503", "UNAVAILABLE", 503},
		{"mock:status=504", "DEADLINE_EXCEEDED", 504},
		{"mock:status=403", "PERMISSION_DENIED", 403},
		{"mock:nope", "INVALID_ARGUMENT", 400},
	} {
		for _, stream := range []bool{false, true} {
			_, err := gemAsk(t, c, "gemini-a", genai.Text(tc.prompt), nil, stream)
			var ae genai.APIError
			if !errors.As(err, &ae) || ae.Code != tc.code || ae.Status != tc.status || ae.Message == "" {
				t.Errorf("%s, stream=%v: %v", tc.prompt, stream, err)
			}
		}
	}
	var ae genai.APIError
	if _, err := gemAsk(t, c, "gemini-x", genai.Text("hi"), nil, false); !errors.As(err, &ae) || ae.Code != 404 || ae.Status != "NOT_FOUND" {
		t.Errorf("unknown model: %v", err)
	}
	if _, err := gemAsk(t, genaiSDK(t, ts, otherKey, ""), "gemini-a", genai.Text("hi"), nil, false); !errors.As(err, &ae) ||
		ae.Code != 400 || ae.Status != "INVALID_ARGUMENT" || !strings.Contains(ae.Message, "API key not valid") ||
		len(ae.Details) == 0 || ae.Details[0]["reason"] != "API_KEY_INVALID" {
		t.Errorf("wrong key: %v", err)
	}
	s.SetFaults([]Fault{{Key: testKey, Mode: FaultStatus, Status: 503, Times: 1}})
	if _, err := gemAsk(t, c, "gemini-a", genai.Text("hi"), nil, true); !errors.As(err, &ae) || ae.Code != 503 {
		t.Errorf("fault: %v", err)
	}

	n, err := c.Models.CountTokens(ctxT(t), "gemini-b", []*genai.Content{
		genai.NewContentFromText("How many tokens is this", genai.RoleUser),
		genai.NewContentFromText("Five", genai.RoleModel),
	}, nil)
	if err != nil || n.TotalTokens != 3+(4+5)+(4+1) {
		t.Errorf("count: %+v %v", n, err)
	}
	// generateContentRequest form, with a system instruction.
	res, body, _ := gemPost(t, ts, testKey, "/v1beta/models/gemini-b:countTokens",
		`{"generateContentRequest":{"model":"models/gemini-b","system_instruction":{"parts":[{"text":"Be brief."}]},"contents":[{"parts":[{"text":"How many tokens is this"}]}]}}`)
	if res.StatusCode != 200 || !strings.HasPrefix(string(body), `{"totalTokens":18,`) {
		t.Errorf("count with generateContentRequest: %d %s", res.StatusCode, body)
	}

	var names []string
	for m, err := range c.Models.All(ctxT(t)) {
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, m.Name)
	}
	if strings.Join(names, ",") != "models/gemini-a,models/gemini-b,models/gemini-c" {
		t.Errorf("list %v", names)
	}
	page, err := c.Models.List(ctxT(t), &genai.ListModelsConfig{PageSize: 2})
	if err != nil || len(page.Items) != 2 || page.NextPageToken == "" {
		t.Errorf("page: %+v %v", page, err)
	}
	m, err := c.Models.Get(ctxT(t), "gemini-c", nil)
	if err != nil || m.Name != "models/gemini-c" || m.InputTokenLimit == 0 || m.DisplayName != "Gemini C" {
		t.Errorf("get: %+v %v", m, err)
	}
	if _, err := c.Models.Get(ctxT(t), "nope", nil); !errors.As(err, &ae) || ae.Code != 404 || ae.Status != "NOT_FOUND" {
		t.Errorf("get unknown: %v", err)
	}
}

func TestGeminiStreamFraming(t *testing.T) {
	_, ts := start(t, Config{})
	const body = `{"contents":[{"parts":[{"text":"hi mock:tokens=3"}]}]}`
	// SSE: "data: " lines, each followed by a blank line, all CRLF.
	res, b, err := gemPost(t, ts, testKey, "/v1beta/models/gemini-x:streamGenerateContent?alt=sse", body)
	if err != nil || res.StatusCode != 200 || res.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("%v %d %q", err, res.StatusCode, res.Header.Get("Content-Type"))
	}
	raw := string(b)
	if strings.Count(raw, "\r\n\r\n") != 3 || strings.Count(raw, "\n") != 6 || !strings.HasSuffix(raw, "}\r\n\r\n") ||
		strings.Contains(raw, "event:") || strings.Contains(raw, "[DONE]") {
		t.Fatalf("framing %q", raw)
	}
	var elems []map[string]any
	for _, ev := range strings.Split(strings.TrimSuffix(raw, "\r\n\r\n"), "\r\n\r\n") {
		data, ok := strings.CutPrefix(ev, "data: ")
		var e map[string]any
		if !ok || json.Unmarshal([]byte(data), &e) != nil {
			t.Fatalf("event %q", ev)
		}
		elems = append(elems, e)
	}
	text := ""
	for i, e := range elems {
		cand := e["candidates"].([]any)[0].(map[string]any)
		text += cand["content"].(map[string]any)["parts"].([]any)[0].(map[string]any)["text"].(string)
		u := e["usageMetadata"].(map[string]any)
		if e["modelVersion"] != "gemini-x" || e["responseId"] != elems[0]["responseId"] || u["promptTokenCount"] != 9.0 ||
			u["candidatesTokenCount"] != float64(i+1) || u["totalTokenCount"] != float64(9+i+1) {
			t.Errorf("element %d %v", i, e)
		}
		if _, fin := cand["finishReason"]; fin != (i == 2) {
			t.Errorf("element %d finish %v", i, cand["finishReason"])
		}
	}
	if text != ReplyText(3) {
		t.Errorf("text %q", text)
	}

	// Without alt: one JSON array, written element by element.
	res, b, err = gemPost(t, ts, testKey, "/v1beta/models/gemini-x:streamGenerateContent", body)
	if err != nil || res.StatusCode != 200 || res.Header.Get("Content-Type") != "application/json" ||
		!bytes.HasPrefix(b, []byte("[{")) || !bytes.HasSuffix(b, []byte("}]")) {
		t.Fatalf("array: %v %q %s", err, res.Header.Get("Content-Type"), b)
	}
	var arr []map[string]any
	if err := json.Unmarshal(b, &arr); err != nil || len(arr) != 3 {
		t.Fatalf("array %s: %v", b, err)
	}

	// Mid-stream failures: an error element in each framing, a cut.
	_, b, err = gemPost(t, ts, testKey, "/v1beta/models/gemini-x:streamGenerateContent?alt=sse", `{"contents":[{"parts":[{"text":"x mock:tokens=3 mock:error_after=1"}]}]}`)
	if err != nil || !strings.HasSuffix(string(b), "\r\n\r\ndata: {\"error\":{\"code\":500,\"message\":\""+geminiInternalMessage+"\",\"status\":\"INTERNAL\"}}\r\n\r\n") ||
		strings.Count(string(b), "data: ") != 2 {
		t.Errorf("sse error_after: %v %q", err, b)
	}
	_, b, _ = gemPost(t, ts, testKey, "/v1beta/models/gemini-x:streamGenerateContent", `{"contents":[{"parts":[{"text":"x mock:tokens=3 mock:error_after=2"}]}]}`)
	if err := json.Unmarshal(b, &arr); err != nil || len(arr) != 3 || arr[2]["error"] == nil {
		t.Errorf("array error_after: %s", b)
	}
	_, b, err = gemPost(t, ts, testKey, "/v1beta/models/gemini-x:streamGenerateContent?alt=sse", `{"contents":[{"parts":[{"text":"x mock:tokens=3 mock:cut=2"}]}]}`)
	if !errors.Is(err, io.ErrUnexpectedEOF) || strings.Count(string(b), "data: ") != 2 || strings.Contains(string(b), "finishReason") {
		t.Errorf("cut: %v %q", err, b)
	}
	// The SDK surfaces the mid-stream error.
	c := genaiSDK(t, ts, testKey, "")
	if _, err := gemAsk(t, c, "gemini-x", genai.Text("x mock:error_after=1"), nil, true); err == nil {
		t.Error("sdk error_after: no error")
	}
	// no_usage: no usageMetadata anywhere.
	_, b, _ = gemPost(t, ts, testKey, "/v1beta/models/gemini-x:streamGenerateContent?alt=sse", `{"contents":[{"parts":[{"text":"x mock:tokens=2 mock:no_usage"}]}]}`)
	if strings.Contains(string(b), "usageMetadata") || !strings.Contains(string(b), "finishReason") {
		t.Errorf("no_usage %s", b)
	}
}

func TestGeminiValidation(t *testing.T) {
	_, ts := start(t, Config{Keys: []string{testKey}})
	const gen = "/v1beta/models/gemini-x:generateContent"
	call := `{"role":"model","parts":[{"functionCall":{"name":"get_weather","args":{"city":"Paris"}}}]}`
	resp := func(r string) string {
		return `{"role":"user","parts":[{"functionResponse":{"name":"get_weather","response":` + r + `}}]}`
	}
	user := `{"role":"user","parts":[{"text":"Weather?"}]}`
	for _, tc := range []struct {
		name, key, path, body string
		code                  int
		status, contains      string
	}{
		{"unknown field", testKey, gen, `{"contents":[` + user + `],"temperature":0.5}`, 400, "INVALID_ARGUMENT",
			`Invalid JSON payload received. Unknown name "temperature": Cannot find field.`},
		{"unknown nested field", testKey, gen, `{"contents":[` + user + `],"generationConfig":{"max_tokens":5}}`, 400, "INVALID_ARGUMENT",
			`Unknown name "max_tokens" at 'generation_config': Cannot find field.`},
		{"openai schema", testKey, gen, `{"contents":[` + user + `],"tools":[{"functionDeclarations":[{"name":"f","parameters":` +
			`{"type":"object","properties":{"a":{"type":"string"}},"additionalProperties":false}}]}]}`, 400, "INVALID_ARGUMENT",
			`Unknown name "additionalProperties" at 'tools[0].function_declarations[0].parameters'`},
		{"schema type list", testKey, gen, `{"contents":[` + user + `],"tools":[{"functionDeclarations":[{"name":"f","parameters":` +
			`{"type":"object","properties":{"a":{"type":["string","null"]}}}}]}]}`, 400, "INVALID_ARGUMENT",
			`Invalid value at 'tools[0].function_declarations[0].parameters.properties[0].value.type'`},
		{"no contents", testKey, gen, `{}`, 400, "INVALID_ARGUMENT", "contents is not specified"},
		{"empty contents", testKey, gen, `{"contents":[]}`, 400, "INVALID_ARGUMENT", "contents is not specified"},
		{"bad role", testKey, gen, `{"contents":[{"role":"assistant","parts":[{"text":"x"}]}]}`, 400, "INVALID_ARGUMENT",
			"Please use a valid role: user, model."},
		{"empty parts", testKey, gen, `{"contents":[{"role":"user","parts":[]}]}`, 400, "INVALID_ARGUMENT",
			"contents[0].parts: contents.parts must not be empty."},
		{"no data", testKey, gen, `{"contents":[{"parts":[{"thought":true}]}]}`, 400, "INVALID_ARGUMENT",
			"required oneof field 'data' must have one initialized field"},
		{"two data fields", testKey, gen, `{"contents":[{"parts":[{"text":"a","inlineData":{"mimeType":"image/png","data":"AA=="}}]}]}`,
			400, "INVALID_ARGUMENT", "oneof field 'data' is already set. Cannot set 'inline_data'"},
		{"response not an object", testKey, gen, `{"contents":[` + user + `,` + call + `,` + resp(`"18°C"`) + `]}`, 400, "INVALID_ARGUMENT",
			"Invalid value at 'contents[2].parts[0].function_response.response' (type.googleapis.com/google.protobuf.Struct)"},
		{"response without name", testKey, gen, `{"contents":[` + user + `,` + call + `,{"parts":[{"functionResponse":{"response":{}}}]}]}`,
			400, "INVALID_ARGUMENT", "function_response.name: Name cannot be empty."},
		{"response without call", testKey, gen, `{"contents":[` + user + `,` + resp(`{"output":"x"}`) + `]}`, 400, "INVALID_ARGUMENT",
			"function response turn comes immediately after a function call turn"},
		{"call without response", testKey, gen, `{"contents":[` + user + `,` + call + `,` + user + `]}`, 400, "INVALID_ARGUMENT",
			"number of function response parts is equal to the number of function call parts"},
		{"bad signature", testKey, gen, `{"contents":[{"parts":[{"text":"x","thoughtSignature":"not base64!"}]}]}`, 400,
			"INVALID_ARGUMENT", "Base64 decoding failed"},
		{"gemini 3 without signature", testKey, "/v1beta/models/gemini-3-pro:generateContent",
			`{"contents":[` + user + `,` + call + `,` + resp(`{"output":"x"}`) + `]}`, 400, "INVALID_ARGUMENT",
			"Function call is missing a thought_signature"},
		{"bad function name", testKey, gen, `{"contents":[` + user + `],"tools":[{"functionDeclarations":[{"name":"1f"}]}]}`, 400,
			"INVALID_ARGUMENT", "Invalid function name"},
		{"bad enum", testKey, gen, `{"contents":[` + user + `],"toolConfig":{"functionCallingConfig":{"mode":"REQUIRED"}}}`, 400,
			"INVALID_ARGUMENT", "Invalid value at 'tool_config.function_calling_config.mode'"},
		{"not json", testKey, gen, `{"contents":`, 400, "INVALID_ARGUMENT", "Invalid JSON payload received."},
		{"no key", "", gen, `{"contents":[` + user + `]}`, 403, "PERMISSION_DENIED", "Method doesn't allow unregistered callers"},
		{"wrong key", otherKey, gen, `{"contents":[` + user + `]}`, 400, "INVALID_ARGUMENT", "API key not valid. Please pass a valid API key."},
		{"unknown method", testKey, "/v1beta/models/gemini-x:embedContent", `{}`, 404, "NOT_FOUND", ""},
		{"unknown path", testKey, "/v1beta/files", `{}`, 404, "NOT_FOUND", ""},
		{"cached over prompt", testKey, gen, `{"contents":[{"parts":[{"text":"mock:cached=99"}]}]}`, 400, "INVALID_ARGUMENT", "mockupstream:"},
		// Accepted: snake_case, a full function round trip, signatures, lower-case enums, free-form JSON schema.
		{"snake case", testKey, gen, `{"system_instruction":{"parts":[{"text":"s"}]},"contents":[{"role":"user","parts":[{"text":"x"},` +
			`{"inline_data":{"mime_type":"image/png","data":"AA=="}}]}],"generation_config":{"max_output_tokens":5,"thinking_config":` +
			`{"include_thoughts":true,"thinking_budget":-1}},"safety_settings":[{"category":"HARM_CATEGORY_HARASSMENT","threshold":"BLOCK_NONE"}]}`,
			200, "", ""},
		{"round trip", testKey, "/v1beta/models/gemini-3-pro:generateContent", `{"contents":[` + user + `,` +
			`{"role":"model","parts":[{"functionCall":{"name":"get_weather","args":{"city":"Paris"}},"thought_signature":"skip_thought_signature_validator"},` +
			`{"functionCall":{"name":"get_time","args":{}}}]},{"role":"function","parts":[{"functionResponse":{"name":"get_weather","response":{"output":"18°C"}}},` +
			`{"functionResponse":{"name":"get_time","response":{"output":"noon"}}}]}],"tools":[{"function_declarations":[{"name":"get_weather",` +
			`"parameters":{"type":"object","properties":{"city":{"type":"string","description":"d"}},"required":["city"]}},` +
			`{"name":"get_time","parametersJsonSchema":{"type":"object","additionalProperties":false}}]}],` +
			`"toolConfig":{"functionCallingConfig":{"mode":"any","allowedFunctionNames":["get_weather"]}}}`, 200, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, b, err := gemPost(t, ts, tc.key, tc.path, tc.body)
			if err != nil {
				t.Fatal(err)
			}
			if res.StatusCode != tc.code {
				t.Fatalf("status %d: %s", res.StatusCode, b)
			}
			if tc.code == 200 {
				return
			}
			status, msg, _ := gemError(t, res, b)
			if status != tc.status || !strings.Contains(msg, tc.contains) {
				t.Errorf("got %s %q, want %s containing %q", status, msg, tc.status, tc.contains)
			}
		})
	}
}
