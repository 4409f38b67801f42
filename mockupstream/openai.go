package mockupstream

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The OpenAI routes (see doc.go).

const (
	openAIFingerprint = "fp_mock"
	modelCreated      = 1700000000
	openAIKeysURL     = "https://platform.openai.com/account/api-keys"
)

func (s *Server) openAIRoute(r *http.Request) func(*call) {
	switch p := r.URL.Path; {
	case p == "/v1/chat/completions":
		if r.Method != http.MethodPost {
			return s.openAIMethodNotAllowed
		}
		return s.openAIChat
	case p == "/v1/responses":
		if r.Method != http.MethodPost {
			return s.openAIMethodNotAllowed
		}
		return s.openAIResponses
	case p == "/v1/images/generations", p == "/v1/images/edits":
		if r.Method != http.MethodPost {
			return s.openAIMethodNotAllowed
		}
		return s.openAIImageGeneration
	case p == "/v1/models", strings.HasPrefix(p, "/v1/models/"):
		if r.Method != http.MethodGet {
			return s.openAIMethodNotAllowed
		}
		return s.openAIModels
	}
	return nil
}

// bearerKey is the key of "Authorization: Bearer K", or "".
func bearerKey(r *http.Request) string {
	scheme, tok, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return ""
	}
	return strings.TrimSpace(tok)
}

// openAI renders OpenAI's error envelope and headers.
type openAI struct{}

func (openAI) setHeaders(c *call) {
	h := c.w.Header()
	h.Set("X-Request-Id", c.requestID())
	h.Set("Openai-Version", "2020-10-01")
	h.Set("Openai-Organization", "org-mock")
	h.Set("Openai-Project", "proj_mock")
	h.Set("Openai-Processing-Ms", strconv.FormatInt(time.Since(c.start).Milliseconds(), 10))
}

// openAIErrorEnvelope is {"error":{"message","type","param","code"}}.
type openAIErrorEnvelope struct {
	Error openAIError `json:"error"`
}

type openAIError struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}

func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func (openAI) errorBody(_ *call, e apiError) []byte {
	return marshal(openAIErrorEnvelope{openAIError{
		Message: e.message, Type: e.typ, Param: nullable(e.param), Code: nullable(e.code),
	}})
}

const openAIServerErrorMessage = "The server had an error while processing your request. Sorry about that!"

func (openAI) statusError(c *call, status int, retryAfter string) apiError {
	e := apiError{status: status, typ: "invalid_request_error"}
	switch {
	case status == http.StatusUnauthorized:
		e.code = "invalid_api_key"
		e.message = "Incorrect API key provided: " + maskKey(c.key) + ". You can find your API key at " + openAIKeysURL + "."
	case status == http.StatusForbidden:
		e.typ, e.code = "request_forbidden", "unsupported_country_region_territory"
		e.message = "Country, region, or territory not supported"
	case status == http.StatusNotFound:
		e.code = "model_not_found"
		e.message = "The model `" + c.model + "` does not exist or you do not have access to it."
	case status == http.StatusTooManyRequests:
		e.typ, e.code = "requests", "rate_limit_exceeded"
		if retryAfter == "" {
			retryAfter = "1"
		}
		e.message = "Rate limit reached for " + c.model + " in organization org-mock on requests per min (RPM): " +
			"Limit 3, Used 3, Requested 1. Please try again in " + retryAfter + "s. " +
			"Visit https://platform.openai.com/account/rate-limits to learn more."
	case status == http.StatusInternalServerError:
		e.typ, e.message = "server_error", openAIServerErrorMessage
	case status == http.StatusServiceUnavailable:
		e.typ, e.message = "server_error", "The server is overloaded or not ready yet."
	case status >= 500:
		e.typ, e.message = "server_error", http.StatusText(status)+"."
	default:
		e.message = http.StatusText(status) + "."
	}
	if strings.HasPrefix(e.message, ".") {
		e.message = "Error " + strconv.Itoa(status) + "."
	}
	return e
}

func (s *Server) openAINotFound(c *call) {
	c.writeError(apiError{status: http.StatusNotFound, typ: "invalid_request_error",
		message: "Invalid URL (" + c.r.Method + " " + c.r.URL.Path + ")"})
}

func (s *Server) openAIMethodNotAllowed(c *call) {
	c.writeError(apiError{status: http.StatusMethodNotAllowed, typ: "invalid_request_error",
		message: "Invalid method for URL (" + c.r.Method + " " + c.r.URL.Path + ")"})
}

// openAIAuth answers 401 and returns false unless the key is accepted.
func (s *Server) openAIAuth(c *call) bool {
	e := apiError{status: http.StatusUnauthorized, typ: "invalid_request_error", code: "invalid_api_key"}
	switch {
	case c.key == "":
		e.message = "You didn't provide an API key. You need to provide your API key in an Authorization header " +
			"using Bearer auth (i.e. Authorization: Bearer YOUR_KEY). You can obtain an API key from " + openAIKeysURL + "."
	case !s.keyOK(c.key):
		e.message = "Incorrect API key provided: " + maskKey(c.key) + ". You can find your API key at " + openAIKeysURL + "."
	default:
		return true
	}
	c.writeError(e)
	return false
}

func (s *Server) keyOK(key string) bool {
	if s.keys == nil {
		return key != ""
	}
	_, ok := s.keys[key]
	return ok
}

func (s *Server) modelOK(model string) bool {
	return s.models == nil || slices.Contains(s.models, model)
}

// ---------------------------------------------------------------------------
// GET /v1/models, GET /v1/models/{id}

type openAIModel struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
}

func newOpenAIModel(id string) openAIModel {
	return openAIModel{ID: id, Object: "model", Created: modelCreated, OwnedBy: "mock"}
}

func (s *Server) openAIModels(c *call) {
	if !s.openAIAuth(c) {
		return
	}
	p := failurePlan(s.takeFault(c.key), noDirectives())
	c.latency += p.latency
	var body []byte
	if id, one := strings.CutPrefix(c.r.URL.Path, "/v1/models/"); one {
		c.model = id
		if !s.modelOK(id) || id == "" {
			if !c.act(&p) {
				c.writeError(openAI{}.statusError(c, http.StatusNotFound, ""))
			}
			return
		}
		body = marshal(newOpenAIModel(id))
	} else {
		ids := s.listed
		list := struct {
			Object string        `json:"object"`
			Data   []openAIModel `json:"data"`
		}{Object: "list", Data: make([]openAIModel, 0, len(ids))}
		for _, id := range ids {
			list.Data = append(list.Data, newOpenAIModel(id))
		}
		body = marshal(list)
	}
	if c.act(&p) {
		return
	}
	if p.fail == failError {
		c.writeError(openAI{}.statusError(c, http.StatusInternalServerError, ""))
		return
	}
	if !c.beforeHeaders(0) {
		return
	}
	if p.fail == failCut {
		c.writeCut(body)
		return
	}
	c.writeJSON(body)
}

// ---------------------------------------------------------------------------
// POST /v1/chat/completions: request

// chatRequest is the part of a chat completion request the mock reads.
type chatRequest struct {
	Model               *string          `json:"model"`
	Messages            *[]chatMessage   `json:"messages"`
	Stream              *bool            `json:"stream"`
	StreamOptions       *json.RawMessage `json:"stream_options"`
	MaxTokens           *int64           `json:"max_tokens"`
	MaxCompletionTokens *int64           `json:"max_completion_tokens"`
	N                   *int64           `json:"n"`
	ServiceTier         *string          `json:"service_tier"`
	Tools               []struct {
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	} `json:"tools"`
	WebSearchOptions json.RawMessage `json:"web_search_options"`
}

type chatMessage struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content"`
	ToolCallID *string         `json:"tool_call_id"`
	ToolCalls  []struct {
		ID       *string `json:"id"`
		Function struct {
			Name      *string `json:"name"`
			Arguments string  `json:"arguments"`
		} `json:"function"`
	} `json:"tool_calls"`
}

type chatContentPart struct {
	Type string  `json:"type"`
	Text *string `json:"text"`
}

// chat is a parsed, validated chat request.
type chat struct {
	model        string
	stream       bool
	includeUsage bool
	maxTokens    int // 0 = no cap
	serviceTier  string
	texts        [][]string // per message, the texts whose words count
	lastUser     []string   // the texts of the last user message
	firstTool    string     // the name of the first tool, or ""
	hosted       hostedAsk  // the hosted tools offered
	background   bool       // Responses: a background response
}

// gen is the vendor-neutral part of q.
func (q *chat) gen() genRequest {
	return genRequest{model: q.model, stream: q.stream, maxTokens: q.maxTokens, turns: q.texts,
		lastUser: q.lastUser, firstTool: q.firstTool, hosted: q.hosted}
}

var chatRoles = []string{"system", "developer", "user", "assistant", "tool", "function"}

func invalid(param, code, format string, args ...any) *apiError {
	return &apiError{status: http.StatusBadRequest, typ: "invalid_request_error",
		message: fmt.Sprintf(format, args...), param: param, code: code}
}

const openAIBadJSON = "We could not parse the JSON body of your request. (HINT: This likely means you aren't using " +
	"your HTTP library correctly. The OpenAI API expects a JSON payload, but what was sent was not valid JSON. " +
	"If you have trouble figuring out how to fix this, please contact us through our help center at help.openai.com.)"

// parseChat parses and validates a chat completion request the way OpenAI
// does. The stream flag is set even when validation fails.
func parseChat(body []byte) (chat, *apiError) {
	var q chat
	var req chatRequest
	if err := json.Unmarshal(body, &req); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return q, invalid(te.Field, "invalid_type", "Invalid type for '%s': expected %s, but got %s instead.",
				te.Field, jsonKind(te.Type.Kind().String()), te.Value)
		}
		return q, invalid("", "", "%s", openAIBadJSON)
	}
	if req.Stream != nil {
		q.stream = *req.Stream
	}
	if req.Model == nil || *req.Model == "" {
		return q, invalid("", "", "you must provide a model parameter")
	}
	q.model = *req.Model
	if req.Messages == nil {
		return q, invalid("messages", "missing_required_parameter", "Missing required parameter: 'messages'.")
	}
	msgs := *req.Messages
	if len(msgs) == 0 {
		return q, invalid("messages", "empty_array",
			"Invalid 'messages': empty array. Expected an array with minimum length 1, but got an empty array instead.")
	}
	if req.StreamOptions != nil && !isNull(*req.StreamOptions) {
		if !q.stream {
			return q, invalid("stream_options", "",
				"The 'stream_options' parameter is only allowed when 'stream' is enabled.")
		}
		var so struct {
			IncludeUsage *bool `json:"include_usage"`
		}
		if err := json.Unmarshal(*req.StreamOptions, &so); err != nil {
			return q, invalid("stream_options", "invalid_type",
				"Invalid type for 'stream_options': expected an object with a boolean 'include_usage'.")
		}
		q.includeUsage = so.IncludeUsage != nil && *so.IncludeUsage
	}
	for _, f := range []struct {
		name string
		v    *int64
	}{{"max_completion_tokens", req.MaxCompletionTokens}, {"max_tokens", req.MaxTokens}, {"n", req.N}} {
		if f.v != nil && *f.v < 1 {
			return q, invalid(f.name, "integer_below_min_value",
				"Invalid '%s': integer below minimum value. Expected a value >= 1, but got %d instead.", f.name, *f.v)
		}
	}
	if req.N != nil && *req.N > 1 {
		return q, invalid("n", "unsupported_value", "mockupstream: n > 1 is not supported.")
	}
	switch {
	case req.MaxCompletionTokens != nil:
		q.maxTokens = int(min(*req.MaxCompletionTokens, maxDirectiveTokens*10))
	case req.MaxTokens != nil:
		q.maxTokens = int(min(*req.MaxTokens, maxDirectiveTokens*10))
	}
	q.serviceTier = "default"
	if req.ServiceTier != nil {
		switch *req.ServiceTier {
		case "flex", "priority", "scale":
			q.serviceTier = *req.ServiceTier
		}
	}
	q.texts = make([][]string, len(msgs))
	for i, m := range msgs {
		param := "messages[" + strconv.Itoa(i) + "]"
		if m.Role == "" {
			return q, invalid(param+".role", "missing_required_parameter", "Missing required parameter: '%s.role'.", param)
		}
		if !slices.Contains(chatRoles, m.Role) {
			return q, invalid(param+".role", "invalid_value", "Invalid value: '%s'. Supported values are: "+
				"'system', 'assistant', 'user', 'function', 'tool', and 'developer'.", truncate(m.Role, 64))
		}
		texts, err := contentTexts(m.Content, m.Role != "assistant", param+".content")
		if err != nil {
			return q, err
		}
		for j, tc := range m.ToolCalls {
			tp := fmt.Sprintf("%s.tool_calls[%d]", param, j)
			switch {
			case tc.ID == nil:
				return q, invalid(tp+".id", "missing_required_parameter", "Missing required parameter: '%s.id'.", tp)
			case tc.Function.Name == nil:
				return q, invalid(tp+".function.name", "missing_required_parameter", "Missing required parameter: '%s.function.name'.", tp)
			}
			texts = append(texts, tc.Function.Arguments)
		}
		if m.Role == "tool" && m.ToolCallID == nil {
			return q, invalid(param+".tool_call_id", "missing_required_parameter", "Missing required parameter: '%s.tool_call_id'.", param)
		}
		q.texts[i] = texts
		if m.Role == "user" {
			q.lastUser = texts
		}
	}
	if err := chatToolPairs(msgs); err != nil {
		return q, err
	}
	if len(req.Tools) > 0 {
		q.firstTool = req.Tools[0].Function.Name
	}
	if present(req.WebSearchOptions) {
		// a search model searches once for every request
		q.hosted.search, q.hosted.forceSearch = true, true
	}
	return q, nil
}

// chatToolPairs checks OpenAI's tool-call pairing: each tool message answers
// a call of the assistant message before it (tool messages in between), and
// every such call has its tool message before the next other message.
func chatToolPairs(msgs []chatMessage) *apiError {
	var pending []string // ids of the last assistant message still unanswered
	at := -1             // that assistant message, or -1 when tool messages are not allowed
	unanswered := func() *apiError {
		return invalid(fmt.Sprintf("messages.[%d].role", at), "", "An assistant message with 'tool_calls' must be followed by "+
			"tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: %s",
			strings.Join(pending, ", "))
	}
	for i, m := range msgs {
		if m.Role == "tool" {
			if at < 0 {
				return invalid(fmt.Sprintf("messages.[%d].role", i), "", "Invalid parameter: messages with role 'tool' "+
					"must be a response to a preceeding message with 'tool_calls'.") //nolint:misspell // OpenAI's own message, spelling included
			}
			j := slices.Index(pending, *m.ToolCallID)
			if j < 0 {
				return invalid(fmt.Sprintf("messages.[%d].tool_call_id", i), "", "Invalid parameter: 'tool_call_id' of '%s' "+
					"not found in 'tool_calls' of previous message.", truncate(*m.ToolCallID, 64))
			}
			pending = slices.Delete(pending, j, j+1)
			continue
		}
		if len(pending) > 0 {
			return unanswered()
		}
		at, pending = -1, nil
		if m.Role == "assistant" && len(m.ToolCalls) > 0 {
			at = i
			for _, tc := range m.ToolCalls {
				pending = append(pending, *tc.ID)
			}
		}
	}
	if len(pending) > 0 {
		return unanswered()
	}
	return nil
}

// contentTexts is the texts of a message content: a string, or the text of
// every "text" part of an array.
func contentTexts(raw json.RawMessage, required bool, param string) ([]string, *apiError) {
	if len(raw) == 0 || isNull(raw) {
		if required {
			return nil, invalid(param, "missing_required_parameter", "Missing required parameter: '%s'.", param)
		}
		return nil, nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return []string{s}, nil
	}
	var parts []chatContentPart
	if err := json.Unmarshal(raw, &parts); err != nil {
		return nil, invalid(param, "invalid_type",
			"Invalid type for '%s': expected one of a string or array of objects, but got %s instead.", param, jsonValueKind(raw))
	}
	var texts []string
	for j, p := range parts {
		if p.Type == "" {
			return nil, invalid(fmt.Sprintf("%s[%d].type", param, j), "missing_required_parameter",
				"Missing required parameter: '%s[%d].type'.", param, j)
		}
		if p.Type != "text" {
			continue
		}
		if p.Text == nil {
			return nil, invalid(fmt.Sprintf("%s[%d].text", param, j), "missing_required_parameter",
				"Missing required parameter: '%s[%d].text'.", param, j)
		}
		texts = append(texts, *p.Text)
	}
	return texts, nil
}

func isNull(raw []byte) bool { return string(bytes.TrimSpace(raw)) == "null" }

func jsonValueKind(raw []byte) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return "nothing"
	}
	switch raw[0] {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}

func jsonKind(goKind string) string {
	switch goKind {
	case "bool":
		return "a boolean"
	case "string":
		return "a string"
	case "slice", "array":
		return "an array"
	case "struct", "map":
		return "an object"
	case "ptr":
		return "a value"
	}
	return "a number"
}

// ChatPromptTokens is the prompt_tokens the server bills for a chat
// completion request body (the token rules of the package doc).
func ChatPromptTokens(body []byte) (int, error) {
	q, err := parseChat(body)
	if err != nil {
		return 0, errors.New(err.message)
	}
	return InputTokens(q.texts), nil
}

// ---------------------------------------------------------------------------
// POST /v1/chat/completions: answer

func (s *Server) openAIChat(c *call) {
	q, perr := parseChat(c.body)
	g := q.gen()
	p, prompt := s.prepare(c, &g, perr, s.openAIAuth, genOptions{})
	if p == nil {
		return
	}
	u := openAIUsage(prompt, p)
	if q.stream {
		s.openAIStream(c, p, &q, u)
	} else {
		s.openAIComplete(c, p, &q, u)
	}
}

func (openAI) badRequest(message string) apiError {
	return *invalid("messages", "invalid_value", "%s", message)
}

type chatUsage struct {
	PromptTokens        int `json:"prompt_tokens"`
	CompletionTokens    int `json:"completion_tokens"`
	TotalTokens         int `json:"total_tokens"`
	PromptTokensDetails struct {
		CachedTokens int `json:"cached_tokens"`
		AudioTokens  int `json:"audio_tokens"`
	} `json:"prompt_tokens_details"`
	CompletionTokensDetails struct {
		ReasoningTokens          int `json:"reasoning_tokens"`
		AudioTokens              int `json:"audio_tokens"`
		AcceptedPredictionTokens int `json:"accepted_prediction_tokens"`
		RejectedPredictionTokens int `json:"rejected_prediction_tokens"`
	} `json:"completion_tokens_details"`
}

func openAIUsage(prompt int, p *plan) chatUsage {
	var u chatUsage
	u.PromptTokens = prompt
	u.CompletionTokens = p.output
	u.TotalTokens = u.PromptTokens + u.CompletionTokens
	u.PromptTokensDetails.CachedTokens = p.cached
	u.CompletionTokensDetails.ReasoningTokens = p.reasoning
	return u
}

type chatCompletion struct {
	ID                string       `json:"id"`
	Object            string       `json:"object"`
	Created           int64        `json:"created"`
	Model             string       `json:"model"`
	Choices           []chatChoice `json:"choices"`
	Usage             *chatUsage   `json:"usage,omitempty"`
	ServiceTier       string       `json:"service_tier"`
	SystemFingerprint string       `json:"system_fingerprint"`
}

type chatChoice struct {
	Index        int             `json:"index"`
	Message      chatReply       `json:"message"`
	Logprobs     json.RawMessage `json:"logprobs"`
	FinishReason string          `json:"finish_reason"`
}

type chatReply struct {
	Role        string          `json:"role"`
	Content     *string         `json:"content"`
	Refusal     *string         `json:"refusal"`
	Annotations json.RawMessage `json:"annotations"`
	ToolCalls   []chatToolCall  `json:"tool_calls,omitempty"`
}

// chatAnnotations are the url_citation annotations of an answer that
// searched the web, or none.
func chatAnnotations(p *plan) json.RawMessage {
	if p.searches == 0 {
		return json.RawMessage(`[]`)
	}
	return json.RawMessage(`[{"type":"url_citation","url_citation":{"start_index":0,"end_index":5,` +
		`"url":"https://example.com/","title":"Example"}}]`)
}

type chatToolCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

var jsonNull = json.RawMessage("null")

func (c *call) completionID() string { return "chatcmpl-mock" + strconv.FormatUint(c.id, 10) }

// openAIFinish is the finish_reason of a vendor-neutral finish.
func openAIFinish(f string) string {
	if f == finishStopSequence {
		return finishStop
	}
	return f
}

func (s *Server) openAIComplete(c *call, p *plan, q *chat, u chatUsage) {
	if p.fail == failError {
		c.writeErrorRetry(openAI{}.statusError(c, http.StatusInternalServerError, ""), p.retryAfterSeconds(500))
		return
	}
	if !c.beforeHeaders(p.streamDelay(p.tokens + p.argumentChunks())) {
		return
	}
	reply := chatReply{Role: "assistant", Annotations: chatAnnotations(p)}
	if text := ReplyText(p.tokens); text != "" || len(p.calls) == 0 {
		reply.Content = &text
	}
	for _, tc := range p.calls {
		call := chatToolCall{ID: tc.openAIID(), Type: "function"}
		call.Function.Name, call.Function.Arguments = tc.name, ToolArguments
		reply.ToolCalls = append(reply.ToolCalls, call)
	}
	body := marshal(chatCompletion{
		ID:      c.completionID(),
		Object:  "chat.completion",
		Created: time.Now().Unix(),
		Model:   p.model,
		Choices: []chatChoice{{
			Message:      reply,
			Logprobs:     jsonNull,
			FinishReason: openAIFinish(p.finish),
		}},
		Usage:             usageUnless(u, p.noUsage),
		ServiceTier:       q.serviceTier,
		SystemFingerprint: openAIFingerprint,
	})
	if p.fail == failCut {
		c.writeCut(body)
		return
	}
	c.writeJSON(body)
}

func (s *Server) openAIStream(c *call, p *plan, q *chat, u chatUsage) {
	if !c.beforeHeaders(0) {
		return
	}
	h := c.w.Header()
	h.Set("Content-Type", "text/event-stream; charset=utf-8")
	h.Set("Cache-Control", "no-cache")
	if p.fail != failNone {
		c.fail()
	}
	c.writeHeader(http.StatusOK)

	// Every chunk is prefix + choices + suffix.
	var prefix []byte
	prefix = append(prefix, `{"id":`...)
	prefix = append(prefix, jsonString(c.completionID())...)
	prefix = append(prefix, `,"object":"chat.completion.chunk","created":`...)
	prefix = strconv.AppendInt(prefix, time.Now().Unix(), 10)
	prefix = append(prefix, `,"model":`...)
	prefix = append(prefix, jsonString(p.model)...)
	prefix = append(prefix, `,"service_tier":`...)
	prefix = append(prefix, jsonString(q.serviceTier)...)
	prefix = append(prefix, `,"system_fingerprint":"`+openAIFingerprint+`","choices":[`...)
	suffix := "]}"
	if q.includeUsage {
		suffix = `],"usage":null}`
	}
	buf := make([]byte, 0, len(prefix)+256)
	chunk := func(choice string) bool {
		buf = append(append(append(append(buf[:0], "data: "...), prefix...), choice...), suffix+"\n\n"...)
		return c.event(buf)
	}
	const tail = `},"logprobs":null,"finish_reason":null}`
	// header is the first delta of tool call k: index, id, type, name, "".
	header := func(k int) string {
		return `{"index":` + strconv.Itoa(k) + `,"id":` + string(jsonString(p.calls[k].openAIID())) +
			`,"type":"function","function":{"name":` + string(jsonString(p.calls[k].name)) + `,"arguments":""}}`
	}

	first := `{"index":0,"delta":{"role":"assistant","content":""` + tail
	toolFirst := p.tokens == 0 && len(p.calls) > 0 && p.fail != failCut && p.fail != failError
	if toolFirst {
		// An answer that opens with a tool call: content null, the first
		// call's header in the role chunk, as OpenAI does.
		first = `{"index":0,"delta":{"role":"assistant","content":null,"tool_calls":[` + header(0) + `]` + tail
	}
	if !chunk(first) {
		return
	}
	c.produce(p.reasoning) // the hidden reasoning, done before the answer
	for i := range p.tokens {
		if p.cutHere(i) {
			break
		}
		if !c.generate(p, 1) || !chunk(`{"index":0,"delta":{"content":`+string(jsonString(streamToken(ReplyToken, i)))+tail) {
			return
		}
		c.streamedText()
	}
	switch p.fail {
	case failCut:
		c.abort()
		return
	case failError:
		c.event([]byte("data: " + string(openAI{}.errorBody(c, apiError{typ: "server_error", message: openAIServerErrorMessage})) + "\n\n"))
		return
	}
	// Tool calls: every header, then the argument fragments interleaved
	// across the calls (call 0 fragment 0, call 1 fragment 0, ...), which
	// OpenAI may do with parallel calls.
	for k := range p.calls {
		if k == 0 && toolFirst {
			continue
		}
		if !chunk(`{"index":0,"delta":{"tool_calls":[` + header(k) + `]` + tail) {
			return
		}
	}
	for j, frag := range toolArgumentFragments {
		for k := range p.calls {
			if !c.generate(p, fragmentTokens(j)) || !chunk(`{"index":0,"delta":{"tool_calls":[{"index":`+strconv.Itoa(k)+
				`,"function":{"arguments":`+string(jsonString(frag))+`}}]`+tail) {
				return
			}
		}
	}
	c.produce(p.unsent())
	if p.searches > 0 && !chunk(`{"index":0,"delta":{"annotations":`+string(chatAnnotations(p))+tail) {
		return
	}
	if !chunk(`{"index":0,"delta":{},"logprobs":null,"finish_reason":` + string(jsonString(openAIFinish(p.finish))) + `}`) {
		return
	}
	if q.includeUsage && !p.noUsage {
		b := append(append(append(append([]byte("data: "), prefix...), `],"usage":`...), marshal(u)...), "}\n\n"...)
		if !c.event(b) {
			return
		}
	}
	if c.event([]byte("data: [DONE]\n\n")) {
		c.complete()
	}
}

// usageUnless is &u, or nil when the plan reports no usage.
func usageUnless(u chatUsage, none bool) *chatUsage {
	if none {
		return nil
	}
	return &u
}

// event writes one whole SSE event and flushes it; false (and the call
// canceled) when the client went away.
func (c *call) event(b []byte) bool {
	if c.ctx.Err() != nil {
		c.cancel()
		return false
	}
	if _, err := c.w.Write(b); err != nil {
		c.cancel()
		return false
	}
	if err := c.rc.Flush(); err != nil {
		c.cancel()
		return false
	}
	return true
}
