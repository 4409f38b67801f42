package mockupstream

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// The Gemini routes (see doc.go).

// DefaultGeminiModels is the model list of GET /v1beta/models when
// Config.Models is empty.
var DefaultGeminiModels = []string{"gemini-2.5-flash", "gemini-2.5-pro", "gemini-2.5-flash-lite"}

// isGemini reports whether r is a Gemini request: anything under /v1beta/,
// a generation method under /v1/models/ (the SDKs' API version v1), or the
// model list with a Gemini key and no Authorization header.
func isGemini(r *http.Request) bool {
	p := r.URL.Path
	if p == "/v1beta" || strings.HasPrefix(p, "/v1beta/") {
		return true
	}
	if p != "/v1/models" && !strings.HasPrefix(p, "/v1/models/") {
		return false
	}
	if strings.Contains(strings.TrimPrefix(p, "/v1/models/"), ":") {
		return true
	}
	return r.Header.Get("Authorization") == "" && (r.Header.Get("X-Goog-Api-Key") != "" || r.URL.Query().Has("key"))
}

// geminiKey is the key of "x-goog-api-key: K", else of "?key=K".
func geminiKey(r *http.Request) string {
	if k := strings.TrimSpace(r.Header.Get("X-Goog-Api-Key")); k != "" {
		return k
	}
	return r.URL.Query().Get("key")
}

// geminiPath splits a Gemini path into the API version, the model (without
// "models/") and the method ("" for GET of a model, "-" for the list).
func geminiPath(p string) (version, model, method string, ok bool) {
	version, rest, _ := strings.Cut(strings.TrimPrefix(p, "/"), "/")
	switch {
	case rest == "models":
		return version, "", "-", true
	case !strings.HasPrefix(rest, "models/"):
		return version, "", "", false
	}
	rest = strings.TrimPrefix(strings.TrimPrefix(rest, "models/"), "models/")
	if i := strings.LastIndexByte(rest, ':'); i >= 0 {
		return version, rest[:i], rest[i+1:], rest[:i] != ""
	}
	return version, rest, "", rest != "" && !strings.Contains(rest, "/")
}

func (s *Server) geminiRoute(r *http.Request) func(*call) {
	_, model, method, ok := geminiPath(r.URL.Path)
	want := http.MethodPost
	var h func(*call)
	switch {
	case !ok:
	case method == "-", method == "":
		h, want = s.geminiModels, http.MethodGet
	case method == "generateContent":
		h = func(c *call) { s.geminiGenerate(c, model, false) }
	case method == "streamGenerateContent":
		h = func(c *call) { s.geminiGenerate(c, model, true) }
	case method == "countTokens":
		h = func(c *call) { s.geminiCountTokens(c, model) }
	}
	if h == nil || r.Method != want {
		return func(c *call) {
			c.writeError(apiError{status: http.StatusNotFound, typ: "NOT_FOUND",
				message: "The requested URL " + c.r.URL.Path + " was not found on this server."})
		}
	}
	return h
}

// geminiAPI renders Google's error envelope and headers.
type geminiAPI struct{}

func (geminiAPI) setHeaders(c *call) {
	h := c.w.Header()
	h.Set("Vary", "Origin, X-Origin, Referer")
	h.Set("Server-Timing", "gfet4t7; dur=1")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "SAMEORIGIN")
	h.Set("X-Xss-Protection", "0")
}

func (geminiAPI) errorBody(_ *call, e apiError) []byte {
	type body struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
		Status  string `json:"status"`
		Details []any  `json:"details,omitempty"`
	}
	return marshal(struct {
		Error body `json:"error"`
	}{body{e.status, e.message, e.typ, e.details}})
}

func (geminiAPI) badRequest(message string) apiError {
	return *gInvalid("", "%s", message)
}

// gInvalid is a 400 INVALID_ARGUMENT with a BadRequest detail for field.
func gInvalid(field, format string, args ...any) *apiError {
	msg := fmt.Sprintf(format, args...)
	v := map[string]string{"description": msg}
	if field != "" {
		v["field"] = field
	}
	return &apiError{status: http.StatusBadRequest, typ: "INVALID_ARGUMENT", message: msg, details: []any{
		map[string]any{"@type": "type.googleapis.com/google.rpc.BadRequest", "fieldViolations": []any{v}},
	}}
}

func gBadJSON() *apiError {
	return &apiError{status: http.StatusBadRequest, typ: "INVALID_ARGUMENT",
		message: "Invalid JSON payload received. Unexpected token."}
}

// geminiStatus is the canonical status name of an HTTP status.
func geminiStatus(status int) string {
	switch status {
	case 400:
		return "INVALID_ARGUMENT"
	case 401:
		return "UNAUTHENTICATED"
	case 403:
		return "PERMISSION_DENIED"
	case 404:
		return "NOT_FOUND"
	case 409:
		return "ABORTED"
	case 412:
		return "FAILED_PRECONDITION"
	case 416:
		return "OUT_OF_RANGE"
	case 429:
		return "RESOURCE_EXHAUSTED"
	case 499:
		return "CANCELLED"
	case 500:
		return "INTERNAL"
	case 501:
		return "UNIMPLEMENTED"
	case 503:
		return "UNAVAILABLE"
	case 504:
		return "DEADLINE_EXCEEDED"
	}
	return "UNKNOWN"
}

const (
	geminiInternalMessage = "An internal error has occurred. Please retry or report in https://developers.generativeai.google/guide/troubleshooting"
	geminiUnauthenticated = "Request had invalid authentication credentials. Expected OAuth 2 access token, login cookie " +
		"or other valid authentication credential. See https://developers.google.com/identity/sign-in/web/devconsole-project."
	geminiKeyInvalid = "API key not valid. Please pass a valid API key."
)

func (geminiAPI) statusError(c *call, status int, retryAfter string) apiError {
	e := apiError{status: status, typ: geminiStatus(status)}
	switch status {
	case 400:
		e.message = "Request contains an invalid argument."
	case 401:
		e.message = geminiUnauthenticated
	case 403:
		e.message = "The caller does not have permission"
	case 404:
		_, _, method, _ := geminiPath(c.r.URL.Path)
		if method == "" || method == "-" {
			method = "get"
		}
		e.message = "models/" + c.model + " is not found for API version v1beta, or is not supported for " + method +
			". Call ListModels to see the list of available models and their supported methods."
	case 429:
		e.message = "You exceeded your current quota, please check your plan and billing details. For more information " +
			"on this error, head to: https://ai.google.dev/gemini-api/docs/rate-limits."
		if retryAfter == "" {
			retryAfter = "1"
		}
		e.details = []any{map[string]any{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": retryAfter + "s"}}
	case 500:
		e.message = geminiInternalMessage
	case 503:
		e.message = "The model is overloaded. Please try again later."
	case 504:
		e.message = "Deadline expired before operation could complete."
	default:
		e.message = orDefault(http.StatusText(status), "Error "+strconv.Itoa(status)) + "."
	}
	return e
}

// geminiAuth answers unless the key is accepted: Google answers a missing
// key with 403 PERMISSION_DENIED, a wrong one with 400 INVALID_ARGUMENT
// (reason API_KEY_INVALID), and a Bearer token that is not an OAuth token
// with 401 UNAUTHENTICATED.
func (s *Server) geminiAuth(c *call) bool {
	var e apiError
	switch {
	case c.key == "" && bearerKey(c.r) != "":
		e = apiError{status: http.StatusUnauthorized, typ: "UNAUTHENTICATED", message: geminiUnauthenticated,
			details: []any{map[string]any{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "ACCESS_TOKEN_TYPE_UNSUPPORTED",
				"metadata": map[string]string{"service": "generativelanguage.googleapis.com"}}}}
	case c.key == "":
		e = apiError{status: http.StatusForbidden, typ: "PERMISSION_DENIED",
			message: "Method doesn't allow unregistered callers (callers without established identity). " +
				"Please use API Key or other form of API consumer identity to call this API."}
	case !s.keyOK(c.key):
		e = apiError{status: http.StatusBadRequest, typ: "INVALID_ARGUMENT", message: geminiKeyInvalid, details: []any{
			map[string]any{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "API_KEY_INVALID",
				"domain": "googleapis.com", "metadata": map[string]string{"service": "generativelanguage.googleapis.com"}},
			map[string]any{"@type": "type.googleapis.com/google.rpc.LocalizedMessage", "locale": "en-US", "message": geminiKeyInvalid},
		}}
	default:
		return true
	}
	c.writeError(e)
	return false
}

// ---------------------------------------------------------------------------
// GET /v1beta/models, GET /v1beta/models/{model}

type geminiModel struct {
	Name                       string   `json:"name"`
	Version                    string   `json:"version"`
	DisplayName                string   `json:"displayName"`
	Description                string   `json:"description"`
	InputTokenLimit            int      `json:"inputTokenLimit"`
	OutputTokenLimit           int      `json:"outputTokenLimit"`
	SupportedGenerationMethods []string `json:"supportedGenerationMethods"`
	Temperature                float64  `json:"temperature"`
	MaxTemperature             float64  `json:"maxTemperature"`
	TopP                       float64  `json:"topP"`
	TopK                       int      `json:"topK"`
	Thinking                   bool     `json:"thinking"`
}

func newGeminiModel(id string) geminiModel {
	return geminiModel{Name: "models/" + id, Version: "001", DisplayName: displayName(id),
		Description: "Mock model " + id + ".", InputTokenLimit: 1048576, OutputTokenLimit: 65536,
		SupportedGenerationMethods: []string{"generateContent", "countTokens", "streamGenerateContent"},
		Temperature:                1, MaxTemperature: 2, TopP: 0.95, TopK: 64, Thinking: true}
}

func (s *Server) geminiModels(c *call) {
	if !s.geminiAuth(c) {
		return
	}
	p := failurePlan(s.takeFault(c.key), noDirectives())
	c.latency += p.latency
	_, model, method, _ := geminiPath(c.r.URL.Path)
	if method == "" {
		c.model = model
		if !s.modelOK(model) {
			if !c.act(&p) {
				c.writeError(geminiAPI{}.statusError(c, http.StatusNotFound, ""))
			}
			return
		}
		c.answer(&p, marshal(newGeminiModel(model)))
		return
	}
	ids := s.listed
	if s.models == nil {
		ids = DefaultGeminiModels
	}
	q := c.r.URL.Query()
	size, from := 50, 0
	bad := func(msg string) {
		if !c.act(&p) {
			c.writeError(*gInvalid("", "%s", msg))
		}
	}
	if v := q.Get("pageSize"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			bad("Invalid value for page_size.")
			return
		}
		if n > 0 {
			size = min(n, 1000)
		}
	}
	if v := q.Get("pageToken"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n > len(ids) {
			bad("Invalid page token.")
			return
		}
		from = n
	}
	to := min(from+size, len(ids))
	list := struct {
		Models        []geminiModel `json:"models"`
		NextPageToken string        `json:"nextPageToken,omitempty"`
	}{Models: make([]geminiModel, 0, to-from)}
	for _, id := range ids[from:to] {
		list.Models = append(list.Models, newGeminiModel(id))
	}
	if to < len(ids) {
		list.NextPageToken = strconv.Itoa(to)
	}
	c.answer(&p, marshal(list))
}

// ---------------------------------------------------------------------------
// Requests

type gRequest struct {
	Contents          *[]gContent `json:"contents"`
	SystemInstruction *gContent   `json:"systemInstruction"`
	GenerationConfig  *struct {
		CandidateCount  *int64   `json:"candidateCount"`
		MaxOutputTokens *int64   `json:"maxOutputTokens"`
		StopSequences   []string `json:"stopSequences"`
		ThinkingConfig  *struct {
			IncludeThoughts *bool `json:"includeThoughts"`
		} `json:"thinkingConfig"`
	} `json:"generationConfig"`
	Tools []struct {
		FunctionDeclarations []struct {
			Name                 *string         `json:"name"`
			Parameters           json.RawMessage `json:"parameters"`
			ParametersJSONSchema json.RawMessage `json:"parametersJsonSchema"`
		} `json:"functionDeclarations"`
		GoogleSearch          json.RawMessage `json:"googleSearch"`
		GoogleSearchRetrieval json.RawMessage `json:"googleSearchRetrieval"`
		URLContext            json.RawMessage `json:"urlContext"`
	} `json:"tools"`
	GenerateContentRequest *gRequest `json:"generateContentRequest"`
}

type gContent struct {
	Role  *string  `json:"role"`
	Parts *[]gPart `json:"parts"`
}

type gPart struct {
	Text                *string         `json:"text"`
	InlineData          json.RawMessage `json:"inlineData"`
	FileData            json.RawMessage `json:"fileData"`
	FunctionCall        *gFunction      `json:"functionCall"`
	FunctionResponse    *gFunction      `json:"functionResponse"`
	ExecutableCode      json.RawMessage `json:"executableCode"`
	CodeExecutionResult json.RawMessage `json:"codeExecutionResult"`
	ToolCall            json.RawMessage `json:"toolCall"`
	ToolResponse        json.RawMessage `json:"toolResponse"`
	Thought             *bool           `json:"thought"`
	ThoughtSignature    *string         `json:"thoughtSignature"`
}

// gFunction is a functionCall (Args) or a functionResponse (Response).
type gFunction struct {
	ID       *string         `json:"id"`
	Name     *string         `json:"name"`
	Args     json.RawMessage `json:"args"`
	Response json.RawMessage `json:"response"`
}

// data is the names of the part's data fields that are set.
func (p *gPart) data() []string {
	var set []string
	for _, f := range []struct {
		name string
		set  bool
	}{
		{"text", p.Text != nil}, {"inline_data", present(p.InlineData)}, {"file_data", present(p.FileData)},
		{"function_call", p.FunctionCall != nil}, {"function_response", p.FunctionResponse != nil},
		{"executable_code", present(p.ExecutableCode)}, {"code_execution_result", present(p.CodeExecutionResult)},
		{"tool_call", present(p.ToolCall)}, {"tool_response", present(p.ToolResponse)},
	} {
		if f.set {
			set = append(set, f.name)
		}
	}
	return set
}

func present(raw json.RawMessage) bool { return raw != nil && !isNull(raw) }

var geminiFunctionName = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_.:-]{0,127}$`)

// gParse is a parsed Gemini request.
type gParse struct {
	genRequest
	includeThoughts bool
}

// parseGemini parses and validates a generateContent request (count: a
// countTokens request) for model the way Google does.
func parseGemini(body []byte, model string, count bool) (gParse, *apiError) {
	q := gParse{genRequest: genRequest{model: model}}
	if !isObject(body) {
		if len(body) == 0 && count {
			return q, gInvalid("", "* CountTokensRequest.contents: contents is not specified")
		}
		return q, gBadJSON()
	}
	spec := gGenerateSpec
	if count {
		spec = gCountSpec
	}
	norm, perr := gNormalize(body, spec, "")
	if perr != nil {
		return q, perr
	}
	var req gRequest
	if err := json.Unmarshal(norm, &req); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return q, gInvalid(snake(te.Field), "Invalid value at '%s' (%s), %s", snake(te.Field), protoKind(te.Type.Kind().String()), te.Value)
		}
		return q, gBadJSON()
	}
	if count {
		switch {
		case req.Contents != nil && req.GenerateContentRequest != nil:
			return q, gInvalid("", "* CountTokensRequest: contents and generate_content_request are mutually exclusive")
		case req.GenerateContentRequest != nil:
			req = *req.GenerateContentRequest
		case req.Contents == nil || len(*req.Contents) == 0:
			return q, gInvalid("contents", "* CountTokensRequest.contents: contents is not specified")
		}
	}
	if req.Contents == nil || len(*req.Contents) == 0 {
		return q, gInvalid("contents", "* GenerateContentRequest.contents: contents is not specified")
	}
	if si := req.SystemInstruction; si != nil {
		var texts []string
		if si.Parts != nil {
			for _, p := range *si.Parts {
				if p.Text != nil {
					texts = append(texts, *p.Text)
				}
			}
		}
		q.turns = append(q.turns, texts)
	}
	if err := gContents(&q, *req.Contents, strings.Contains(model, "gemini-3")); err != nil {
		return q, err
	}
	for i, t := range req.Tools {
		// the built-in tools the mock plays; Gemini cannot force them
		q.hosted.search = q.hosted.search || present(t.GoogleSearch) || present(t.GoogleSearchRetrieval)
		q.hosted.fetch = q.hosted.fetch || present(t.URLContext)
		for j, fd := range t.FunctionDeclarations {
			path := fmt.Sprintf("tools[%d].function_declarations[%d]", i, j)
			switch {
			case fd.Name == nil || !geminiFunctionName.MatchString(*fd.Name):
				return q, gInvalid(path+".name", "* GenerateContentRequest.%s.name: Invalid function name. Must start with a letter or an "+
					"underscore. Must be alphameric (a-z, A-Z, 0-9), underscores (_), dots (.), colons (:), or dashes (-), "+
					"with a maximum length of 128.", path)
			case present(fd.Parameters) && present(fd.ParametersJSONSchema):
				return q, gInvalid(path, "* GenerateContentRequest.%s: parameters and parameters_json_schema are mutually exclusive.", path)
			}
			if q.firstTool == "" {
				q.firstTool = *fd.Name
			}
		}
	}
	if gc := req.GenerationConfig; gc != nil {
		if gc.CandidateCount != nil && *gc.CandidateCount > 1 {
			return q, gInvalid("generation_config.candidate_count", "mockupstream: candidateCount > 1 is not supported.")
		}
		if gc.MaxOutputTokens != nil && *gc.MaxOutputTokens > 0 {
			q.maxTokens = int(min(*gc.MaxOutputTokens, maxDirectiveTokens*10))
		}
		q.stopSequences = gc.StopSequences
		q.includeThoughts = gc.ThinkingConfig != nil && gc.ThinkingConfig.IncludeThoughts != nil && *gc.ThinkingConfig.IncludeThoughts
	}
	return q, nil
}

func protoKind(goKind string) string {
	switch goKind {
	case "bool":
		return "TYPE_BOOL"
	case "string", "ptr":
		return "TYPE_STRING"
	case "slice", "array":
		return "list"
	case "struct", "map":
		return "message"
	case "float32", "float64":
		return "TYPE_FLOAT"
	}
	return "TYPE_INT32"
}

// gContents validates the conversation and fills q's turns (see the token
// rules) and directives' source. gemini3 enforces Gemini 3's thought
// signatures on the current turn's function calls.
func gContents(q *gParse, contents []gContent, gemini3 bool) *apiError {
	prevCalls := 0 // function calls of the previous content, a model turn
	turnStart := 0 // the current turn: from the last user content with text
	for i, c := range contents {
		if (c.Role == nil || *c.Role != "model") && c.Parts != nil &&
			slices.ContainsFunc(*c.Parts, func(p gPart) bool { return p.Text != nil }) {
			turnStart = i
		}
	}
	for i, c := range contents {
		role := ""
		if c.Role != nil {
			role = *c.Role
		}
		switch role {
		case "", "user", "function":
			role = "user"
		case "model":
		default:
			return gInvalid(fmt.Sprintf("contents[%d].role", i), "Please use a valid role: user, model.")
		}
		if c.Parts == nil || len(*c.Parts) == 0 {
			return gInvalid(fmt.Sprintf("contents[%d].parts", i), "* GenerateContentRequest.contents[%d].parts: contents.parts must not be empty.", i)
		}
		var rest, all []string
		var turns [][]string
		hasRest, calls, responses := false, 0, 0
		for j, p := range *c.Parts {
			path := fmt.Sprintf("contents[%d].parts[%d]", i, j)
			switch data := p.data(); {
			case len(data) == 0:
				return gInvalid(path+".data", "* GenerateContentRequest.%s.data: required oneof field 'data' must have one initialized field", path)
			case len(data) > 1:
				return gInvalid(path, "Invalid value at '%s' (oneof), oneof field 'data' is already set. Cannot set '%s'", path, data[1])
			}
			if s := p.ThoughtSignature; s != nil && !validBase64(*s) {
				return gInvalid(path+".thought_signature", "Invalid value at '%s.thought_signature' (TYPE_BYTES), Base64 decoding failed for %q", path, truncate(*s, 40))
			}
			switch {
			case p.FunctionCall != nil:
				fc := p.FunctionCall
				if fc.Name == nil || *fc.Name == "" {
					return gInvalid(path+".function_call.name", "* GenerateContentRequest.%s.function_call.name: Name cannot be empty.", path)
				}
				if present(fc.Args) && !isObject(fc.Args) {
					return gInvalidValue(path+".function_call.args", "type.googleapis.com/google.protobuf.Struct", fc.Args)
				}
				if gemini3 && calls == 0 && i > turnStart && p.ThoughtSignature == nil {
					return gInvalid(path, "Function call is missing a thought_signature in functionCall parts. This is required for "+
						"tools to work correctly, and missing thought_signature may lead to degraded model performance. Additional "+
						"data, function call `default_api:%s` , position %d. Please refer to "+
						"https://ai.google.dev/gemini-api/docs/thought-signatures for more details.", *fc.Name, i+1)
				}
				calls++
				if present(fc.Args) {
					rest = append(rest, compactJSON(fc.Args))
				}
				hasRest = true
			case p.FunctionResponse != nil:
				fr := p.FunctionResponse
				if fr.Name == nil || *fr.Name == "" {
					return gInvalid(path+".function_response.name", "* GenerateContentRequest.%s.function_response.name: Name cannot be empty.", path)
				}
				if present(fr.Response) && !isObject(fr.Response) {
					return gInvalidValue(path+".function_response.response", "type.googleapis.com/google.protobuf.Struct", fr.Response)
				}
				responses++
				var texts []string
				if present(fr.Response) {
					texts = []string{compactJSON(fr.Response)}
				}
				turns = append(turns, texts)
				all = append(all, texts...)
			case p.Text != nil:
				hasRest = true
				if p.Thought == nil || !*p.Thought {
					rest = append(rest, *p.Text)
					all = append(all, *p.Text)
				}
			default:
				hasRest = true
			}
		}
		if hasRest {
			turns = append(turns, rest)
		}
		// Function responses answer the calls of the turn just before.
		switch {
		case responses > 0 && prevCalls == 0:
			return gInvalid("contents", "Please ensure that function response turn comes immediately after a function call turn.")
		case prevCalls > 0 && responses != prevCalls:
			return gInvalid("contents", "Please ensure that the number of function response parts is equal to the number of "+
				"function call parts of the function call turn.")
		}
		prevCalls = 0
		if role == "model" {
			prevCalls = calls
		}
		if role == "user" {
			q.lastUser = all
		}
		q.turns = append(q.turns, turns...)
	}
	return nil
}

// validBase64 reports whether s is base64, standard or URL-safe, with or
// without padding.
func validBase64(s string) bool {
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding, base64.RawStdEncoding, base64.RawURLEncoding} {
		if _, err := enc.DecodeString(s); err == nil {
			return true
		}
	}
	return false
}

// GeminiPromptTokens is the promptTokenCount the server bills for a Gemini
// generateContent or countTokens request body (the token rules of the
// package doc).
func GeminiPromptTokens(body []byte) (int, error) {
	q, err := parseGemini(body, "", false)
	if err != nil {
		if q2, err2 := parseGemini(body, "", true); err2 == nil {
			return InputTokens(q2.turns), nil
		}
		return 0, errors.New(err.message)
	}
	return InputTokens(q.turns), nil
}

// ---------------------------------------------------------------------------
// :countTokens

func (s *Server) geminiCountTokens(c *call, model string) {
	q, perr := parseGemini(c.body, model, true)
	c.model = model
	if !s.geminiAuth(c) {
		return
	}
	p := failurePlan(s.takeFault(c.key), noDirectives())
	c.latency += p.latency
	if c.act(&p) {
		return
	}
	switch {
	case perr != nil:
		c.writeError(*perr)
	case !s.modelOK(model):
		c.writeError(geminiAPI{}.statusError(c, http.StatusNotFound, ""))
	default:
		n := InputTokens(q.turns)
		c.answer(&p, marshal(struct {
			TotalTokens         int             `json:"totalTokens"`
			PromptTokensDetails []geminiModally `json:"promptTokensDetails"`
		}{n, []geminiModally{{"TEXT", n}}}))
	}
}

// ---------------------------------------------------------------------------
// :generateContent, :streamGenerateContent

type geminiResponse struct {
	Candidates    []geminiCandidate `json:"candidates"`
	UsageMetadata *geminiUsage      `json:"usageMetadata,omitempty"`
	ModelVersion  string            `json:"modelVersion"`
	ResponseID    string            `json:"responseId"`
}

type geminiCandidate struct {
	Content            geminiContent   `json:"content"`
	FinishReason       string          `json:"finishReason,omitempty"`
	Index              int             `json:"index"`
	GroundingMetadata  json.RawMessage `json:"groundingMetadata,omitempty"`
	URLContextMetadata json.RawMessage `json:"urlContextMetadata,omitempty"`
}

// grounding is the candidate's grounding metadata for the plan's searches
// and fetches: one webSearchQueries entry per search, one urlMetadata
// entry per fetched page.
func grounding(p *plan) (search, urls json.RawMessage) {
	if p.searches > 0 {
		queries := make([]string, p.searches)
		for i := range queries {
			queries[i] = "mock search " + strconv.Itoa(i+1)
		}
		search = marshal(map[string]any{
			"webSearchQueries": queries,
			"searchEntryPoint": map[string]string{"renderedContent": "<div>mock</div>"},
			"groundingChunks":  []any{map[string]any{"web": map[string]string{"uri": "https://example.com/", "title": "Example"}}},
		})
	}
	if p.fetches > 0 {
		meta := make([]any, p.fetches)
		for i := range meta {
			meta[i] = map[string]string{"retrievedUrl": "https://example.com/" + strconv.Itoa(i),
				"urlRetrievalStatus": "URL_RETRIEVAL_STATUS_SUCCESS"}
		}
		urls = marshal(map[string]any{"urlMetadata": meta})
	}
	return search, urls
}

type geminiContent struct {
	Parts []geminiPart `json:"parts,omitempty"`
	Role  string       `json:"role"`
}

type geminiPart struct {
	Text             *string         `json:"text,omitempty"`
	Thought          bool            `json:"thought,omitempty"`
	FunctionCall     *geminiCallPart `json:"functionCall,omitempty"`
	ThoughtSignature string          `json:"thoughtSignature,omitempty"`
}

type geminiCallPart struct {
	Name string          `json:"name"`
	Args json.RawMessage `json:"args"`
}

type geminiModally struct {
	Modality   string `json:"modality"`
	TokenCount int    `json:"tokenCount"`
}

type geminiUsage struct {
	PromptTokenCount        int             `json:"promptTokenCount"`
	CandidatesTokenCount    int             `json:"candidatesTokenCount,omitempty"`
	TotalTokenCount         int             `json:"totalTokenCount"`
	CachedContentTokenCount int             `json:"cachedContentTokenCount,omitempty"`
	PromptTokensDetails     []geminiModally `json:"promptTokensDetails,omitempty"`
	CacheTokensDetails      []geminiModally `json:"cacheTokensDetails,omitempty"`
	ThoughtsTokenCount      int             `json:"thoughtsTokenCount,omitempty"`
}

// geminiFinish is the finishReason of a vendor-neutral finish.
func geminiFinish(f string) string {
	switch f {
	case finishLength:
		return "MAX_TOKENS"
	case finishContentFilter:
		return "SAFETY"
	}
	return "STOP"
}

// geminiAnswer renders the elements of one answer.
type geminiAnswer struct {
	c       *call
	p       *plan
	prompt  int
	thought bool // thoughts are shown (includeThoughts)
	gemini3 bool
}

// usage is the usage after thoughts thinking and candidates visible tokens.
func (a *geminiAnswer) usage(thoughts, candidates int) *geminiUsage {
	if a.p.noUsage {
		return nil
	}
	u := &geminiUsage{PromptTokenCount: a.prompt, CandidatesTokenCount: candidates, ThoughtsTokenCount: thoughts,
		TotalTokenCount: a.prompt + thoughts + candidates, CachedContentTokenCount: a.p.cached,
		PromptTokensDetails: []geminiModally{{"TEXT", a.prompt}}}
	if a.p.cached > 0 {
		u.CacheTokensDetails = []geminiModally{{"TEXT", a.p.cached}}
	}
	return u
}

func (a *geminiAnswer) final() *geminiUsage { return a.usage(a.p.reasoning, a.p.output-a.p.reasoning) }

// element is one answer element; the last one (with a finish) carries the
// grounding metadata, as Google sends it.
func (a *geminiAnswer) element(parts []geminiPart, finish string, u *geminiUsage) []byte {
	cand := geminiCandidate{Content: geminiContent{Parts: parts, Role: "model"}, FinishReason: finish}
	if finish != "" {
		cand.GroundingMetadata, cand.URLContextMetadata = grounding(a.p)
	}
	return marshal(geminiResponse{
		Candidates:    []geminiCandidate{cand},
		UsageMetadata: u,
		ModelVersion:  a.p.model,
		ResponseID:    "mockresp" + strconv.FormatUint(a.c.id, 10),
	})
}

func textPart(s string, thought bool) geminiPart { return geminiPart{Text: &s, Thought: thought} }

// callParts are the answer's functionCall parts; the first carries the
// thought signature when thinking was asked for (always on Gemini 3).
func (a *geminiAnswer) callParts() []geminiPart {
	var parts []geminiPart
	for i, tc := range a.p.calls {
		part := geminiPart{FunctionCall: &geminiCallPart{Name: tc.name, Args: json.RawMessage(ToolArguments)}}
		if i == 0 && (a.p.reasoning > 0 || a.gemini3) {
			part.ThoughtSignature = GeminiThoughtSignature
		}
		parts = append(parts, part)
	}
	return parts
}

func (s *Server) geminiGenerate(c *call, model string, stream bool) {
	q, perr := parseGemini(c.body, model, false)
	q.model, q.stream = model, stream
	p, prompt := s.prepare(c, &q.genRequest, perr, s.geminiAuth, genOptions{})
	if p == nil {
		return
	}
	a := &geminiAnswer{c: c, p: p, prompt: prompt, thought: q.includeThoughts, gemini3: strings.Contains(model, "gemini-3")}
	if stream {
		s.geminiStream(c, a, c.r.URL.Query().Get("alt") == "sse")
		return
	}
	if p.fail == failError {
		c.writeErrorRetry(geminiAPI{}.statusError(c, http.StatusInternalServerError, ""), p.retryAfterSeconds(500))
		return
	}
	chunks := p.tokens
	if a.thought {
		chunks += p.reasoning
	}
	if len(p.calls) > 0 {
		chunks++ // the element of calls
	}
	if !c.beforeHeaders(p.streamDelay(chunks)) {
		return
	}
	var parts []geminiPart
	if a.thought && p.reasoning > 0 {
		parts = append(parts, textPart(ThinkingText(p.reasoning), true))
	}
	if p.tokens > 0 {
		parts = append(parts, textPart(ReplyText(p.tokens), false))
	}
	parts = append(parts, a.callParts()...)
	body := a.element(parts, geminiFinish(p.finish), a.final())
	if p.fail == failCut {
		c.writeCut(body)
		return
	}
	c.writeJSON(body)
}

// geminiStream streams an answer: with sse as "data: " events ending in a
// blank CRLF line, else as one JSON array written element by element.
func (s *Server) geminiStream(c *call, a *geminiAnswer, sse bool) {
	p := a.p
	if !c.beforeHeaders(0) {
		return
	}
	h := c.w.Header()
	if sse {
		h.Set("Content-Type", "text/event-stream")
	} else {
		h.Set("Content-Type", "application/json")
	}
	h.Set("Cache-Control", "no-cache")
	if p.fail != failNone {
		c.fail()
	}
	c.writeHeader(http.StatusOK)

	n := 0
	var buf []byte
	write := func(elem []byte, last bool) bool {
		buf = buf[:0]
		switch {
		case sse:
			buf = append(append(append(buf, "data: "...), elem...), "\r\n\r\n"...)
		case n == 0:
			buf = append(append(buf, '['), elem...)
		default:
			buf = append(append(buf, ",\r\n"...), elem...)
		}
		if last && !sse {
			buf = append(buf, ']')
		}
		n++
		return c.event(buf)
	}

	thoughts := 0 // thought tokens reported so far
	if !a.thought {
		thoughts = p.reasoning // hidden thinking is done before the first element
		c.produce(p.reasoning)
	}
	if a.thought {
		for i := range p.reasoning {
			if !c.generate(p, 1) {
				return
			}
			thoughts = i + 1
			if !write(a.element([]geminiPart{textPart(streamToken(ThinkingToken, i), true)}, "", a.usage(thoughts, 0)), false) {
				return
			}
		}
	}
	failing := p.fail == failCut || p.fail == failError
	finalOnText := len(p.calls) == 0 && p.tokens > 0 && !failing
	for i := range p.tokens {
		if p.cutHere(i) {
			break
		}
		if !c.generate(p, 1) {
			return
		}
		part := []geminiPart{textPart(streamToken(ReplyToken, i), false)}
		if finalOnText && i == p.tokens-1 {
			c.produce(p.unsent())
			if write(a.element(part, geminiFinish(p.finish), a.final()), true) {
				c.streamedText()
				c.complete()
			}
			return
		}
		if !write(a.element(part, "", a.usage(thoughts, i+1)), false) {
			return
		}
		c.streamedText()
	}
	switch p.fail {
	case failCut:
		c.abort()
		return
	case failError:
		write(geminiAPI{}.errorBody(c, geminiAPI{}.statusError(c, http.StatusInternalServerError, "")), true)
		return
	}
	parts := a.callParts()
	if len(parts) == 0 {
		parts = []geminiPart{textPart("", false)}
	} else if !c.generate(p, len(p.calls)*ToolCallTokens) {
		return
	}
	c.produce(p.unsent())
	if write(a.element(parts, geminiFinish(p.finish), a.final()), true) {
		c.complete()
	}
}
