package mockupstream

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The Anthropic routes (see doc.go).

// DefaultAnthropicModels is the model list of GET /v1/models (Anthropic
// shape) when Config.Models is empty.
var DefaultAnthropicModels = []string{"claude-sonnet-4-5", "claude-opus-4-1", "claude-haiku-4-5"}

// anthropicModelCreated is the created_at of every listed model.
const anthropicModelCreated = "2025-09-29T00:00:00Z"

// isAnthropic reports whether r is an Anthropic request: the messages
// routes, or the model list with an anthropic-version header.
func isAnthropic(r *http.Request) bool {
	p := r.URL.Path
	if p == "/v1/messages" || strings.HasPrefix(p, "/v1/messages/") {
		return true
	}
	return (p == "/v1/models" || strings.HasPrefix(p, "/v1/models/")) && r.Header.Get("Anthropic-Version") != ""
}

// anthropicKey is the key of "x-api-key: K", else of "Authorization: Bearer K".
func anthropicKey(r *http.Request) string {
	if k := strings.TrimSpace(r.Header.Get("X-Api-Key")); k != "" {
		return k
	}
	return bearerKey(r)
}

func (s *Server) anthropicRoute(r *http.Request) func(*call) {
	var h func(*call)
	method := http.MethodPost
	switch p := r.URL.Path; {
	case p == "/v1/messages":
		h = s.anthropicMessages
	case p == "/v1/messages/count_tokens":
		h = s.anthropicCountTokens
	case p == "/v1/models", strings.HasPrefix(p, "/v1/models/"):
		h, method = s.anthropicModels, http.MethodGet
	default:
		return func(c *call) {
			c.writeError(apiError{status: http.StatusNotFound, typ: "not_found_error", message: "Not Found"})
		}
	}
	if r.Method != method {
		return func(c *call) {
			c.writeError(apiError{status: http.StatusMethodNotAllowed, typ: "invalid_request_error", message: "Method Not Allowed"})
		}
	}
	return h
}

// anthropicAPI renders Anthropic's error envelope and headers.
type anthropicAPI struct{}

func (anthropicAPI) setHeaders(c *call) {
	h := c.w.Header()
	h.Set("Request-Id", c.requestID())
	h.Set("Anthropic-Organization-Id", "00000000-0000-4000-8000-000000000000")
	h.Set("Anthropic-Ratelimit-Requests-Limit", "4000")
	h.Set("Anthropic-Ratelimit-Requests-Remaining", "3999")
	h.Set("Anthropic-Ratelimit-Requests-Reset", time.Now().UTC().Add(time.Minute).Format(time.RFC3339))
}

type anthropicErrorObject struct {
	Type    string `json:"type"`
	Message string `json:"message"`
}

func (anthropicAPI) errorBody(c *call, e apiError) []byte {
	return marshal(struct {
		Type      string               `json:"type"`
		Error     anthropicErrorObject `json:"error"`
		RequestID string               `json:"request_id"`
	}{"error", anthropicErrorObject{e.typ, e.message}, c.requestID()})
}

func (anthropicAPI) badRequest(message string) apiError {
	return apiError{status: http.StatusBadRequest, typ: "invalid_request_error", message: message}
}

const anthropicServerErrorMessage = "Internal server error"

func (anthropicAPI) statusError(c *call, status int, _ string) apiError {
	e := apiError{status: status}
	switch status {
	case http.StatusBadRequest:
		e.typ, e.message = "invalid_request_error", "Invalid request"
	case http.StatusUnauthorized:
		e.typ, e.message = "authentication_error", "invalid x-api-key"
	case http.StatusPaymentRequired:
		e.typ, e.message = "billing_error", "Your credit balance is too low to access the Anthropic API. "+
			"Please go to Plans & Billing to upgrade or purchase credits."
	case http.StatusForbidden:
		e.typ, e.message = "permission_error", "Your API key does not have permission to use the specified resource."
	case http.StatusNotFound:
		e.typ, e.message = "not_found_error", "model: "+c.model
	case http.StatusRequestEntityTooLarge:
		e.typ, e.message = "request_too_large", "Request exceeds the maximum allowed number of bytes."
	case http.StatusTooManyRequests:
		e.typ, e.message = "rate_limit_error", "This request would exceed the rate limit for your organization "+
			"(mock) of 50 requests per minute. For details, refer to: https://docs.claude.com/en/api/rate-limits. "+
			"You can see the response headers for current usage. Please reduce the prompt length or the maximum "+
			"tokens requested, or try again later."
	case http.StatusInternalServerError:
		e.typ, e.message = "api_error", anthropicServerErrorMessage
	case http.StatusGatewayTimeout:
		e.typ, e.message = "timeout_error", "Request timeout"
	case statusOverloaded:
		e.typ, e.message = "overloaded_error", "Overloaded"
	default:
		e.typ, e.message = "invalid_request_error", orDefault(http.StatusText(status), "Error "+strconv.Itoa(status))
		if status >= 500 {
			e.typ = "api_error"
		}
	}
	return e
}

// anthropicAuth answers 401 unless the key is accepted, and 400 when the
// anthropic-version header is missing.
func (s *Server) anthropicAuth(c *call) bool {
	e := apiError{status: http.StatusUnauthorized, typ: "authentication_error"}
	switch {
	case c.key == "":
		e.message = "x-api-key header is required"
	case !s.keyOK(c.key):
		e.message = "invalid x-api-key"
	case c.r.Header.Get("Anthropic-Version") == "":
		e = apiError{status: http.StatusBadRequest, typ: "invalid_request_error", message: "anthropic-version: header is required"}
	default:
		return true
	}
	c.writeError(e)
	return false
}

// answer sends body as a simple route's answer, after the faults of p.
func (c *call) answer(p *plan, body []byte) {
	if c.act(p) {
		return
	}
	if p.fail == failError {
		c.writeError(c.vendor.statusError(c, http.StatusInternalServerError, ""))
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
// GET /v1/models (Anthropic shape)

type anthropicModel struct {
	Type        string `json:"type"`
	ID          string `json:"id"`
	DisplayName string `json:"display_name"`
	CreatedAt   string `json:"created_at"`
}

func newAnthropicModel(id string) anthropicModel {
	return anthropicModel{Type: "model", ID: id, DisplayName: displayName(id), CreatedAt: anthropicModelCreated}
}

// displayName makes "Claude Sonnet 4.5" of "claude-sonnet-4-5".
func displayName(id string) string {
	var b strings.Builder
	prevNum := false
	for i, w := range strings.FieldsFunc(id, func(r rune) bool { return r == '-' || r == '_' || r == '/' }) {
		_, err := strconv.Atoi(w)
		num := err == nil
		switch {
		case i == 0:
		case num && prevNum:
			b.WriteByte('.')
		default:
			b.WriteByte(' ')
		}
		b.WriteString(strings.ToUpper(w[:1]) + w[1:])
		prevNum = num
	}
	return b.String()
}

func (s *Server) anthropicModels(c *call) {
	if !s.anthropicAuth(c) {
		return
	}
	p := failurePlan(s.takeFault(c.key), noDirectives())
	c.latency += p.latency
	if id, one := strings.CutPrefix(c.r.URL.Path, "/v1/models/"); one {
		c.model = id
		if id == "" || !s.modelOK(id) {
			if !c.act(&p) {
				c.writeError(anthropicAPI{}.statusError(c, http.StatusNotFound, ""))
			}
			return
		}
		c.answer(&p, marshal(newAnthropicModel(id)))
		return
	}
	ids := s.listed
	if s.models == nil {
		ids = DefaultAnthropicModels
	}
	q := c.r.URL.Query()
	limit := 20
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1000 {
			if !c.act(&p) {
				c.writeError(apiError{status: http.StatusBadRequest, typ: "invalid_request_error",
					message: "limit: Input should be greater than or equal to 1 and less than or equal to 1000"})
			}
			return
		}
		limit = n
	}
	// A page of at most limit models after after_id, or just before
	// before_id; has_more tells whether more lie beyond it that way.
	from, to := 0, len(ids)
	if a := q.Get("after_id"); a != "" {
		if i := slices.Index(ids, a); i >= 0 {
			from = i + 1
		}
	}
	var more bool
	if i := slices.Index(ids, q.Get("before_id")); i >= 0 && q.Get("before_id") != "" {
		to = i
		from = max(from, to-limit)
		more = from > 0
	} else {
		to = min(to, from+limit)
		more = to < len(ids)
	}
	page := ids[min(from, to):to]
	list := struct {
		Data    []anthropicModel `json:"data"`
		HasMore bool             `json:"has_more"`
		FirstID *string          `json:"first_id"`
		LastID  *string          `json:"last_id"`
	}{Data: make([]anthropicModel, 0, len(page)), HasMore: more}
	for _, id := range page {
		list.Data = append(list.Data, newAnthropicModel(id))
	}
	if len(page) > 0 {
		list.FirstID, list.LastID = &page[0], &page[len(page)-1]
	}
	c.answer(&p, marshal(list))
}

// ---------------------------------------------------------------------------
// POST /v1/messages, /v1/messages/count_tokens: request

// anthropicFields are the top-level fields of a messages request; the
// count_tokens request accepts those marked true.
var anthropicFields = map[string]bool{
	"model": true, "messages": true, "system": true, "tools": true, "tool_choice": true, "thinking": true,
	"cache_control": true, "output_config": true, "speed": true, "context_management": true, "mcp_servers": true,
	"max_tokens": false, "stream": false, "temperature": false, "top_p": false, "top_k": false, "stop_sequences": false,
	"metadata": false, "service_tier": false, "container": false, "inference_geo": false, "diagnostics": false,
}

// anthropicBlockFields are the fields of each content block type; nil: not
// checked (server-tool blocks).
var anthropicBlockFields = map[string][]string{
	"text":                                   {"type", "text", "cache_control", "citations"},
	"image":                                  {"type", "source", "cache_control"},
	"document":                               {"type", "source", "title", "context", "citations", "cache_control"},
	"search_result":                          {"type", "source", "title", "content", "citations", "cache_control"},
	"tool_use":                               {"type", "id", "name", "input", "cache_control", "caller"},
	"tool_result":                            {"type", "tool_use_id", "content", "is_error", "cache_control"},
	"thinking":                               {"type", "thinking", "signature"},
	"redacted_thinking":                      {"type", "data"},
	"server_tool_use":                        nil,
	"web_search_tool_result":                 nil,
	"web_fetch_tool_result":                  nil,
	"code_execution_tool_result":             nil,
	"bash_code_execution_tool_result":        nil,
	"text_editor_code_execution_tool_result": nil,
	"tool_search_tool_result":                nil,
	"container_upload":                       nil,
	"mcp_tool_use":                           nil,
	"mcp_tool_result":                        nil,
}

// anthropicToolFields are the fields of a custom tool definition.
var anthropicToolFields = []string{"type", "name", "description", "input_schema", "cache_control", "strict",
	"eager_input_streaming", "defer_loading", "input_examples", "allowed_callers"}

var (
	anthropicToolUseID = regexp.MustCompile(`^[a-zA-Z0-9_-]+$`)
	anthropicToolName  = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,128}$`)
)

type anthropicRequest struct {
	Model         *string            `json:"model"`
	MaxTokens     *int64             `json:"max_tokens"`
	Messages      *[]json.RawMessage `json:"messages"`
	System        json.RawMessage    `json:"system"`
	Temperature   *float64           `json:"temperature"`
	TopP          *float64           `json:"top_p"`
	TopK          *int64             `json:"top_k"`
	StopSequences []string           `json:"stop_sequences"`
	Stream        *bool              `json:"stream"`
	Tools         []json.RawMessage  `json:"tools"`
	ToolChoice    json.RawMessage    `json:"tool_choice"`
	Thinking      json.RawMessage    `json:"thinking"`
	Metadata      json.RawMessage    `json:"metadata"`
	ServiceTier   *string            `json:"service_tier"`
}

type anthropicBlock struct {
	Type      string          `json:"type"`
	Text      *string         `json:"text"`
	ID        *string         `json:"id"`
	Name      *string         `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID *string         `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
	Thinking  *string         `json:"thinking"`
	Signature *string         `json:"signature"`
	Data      *string         `json:"data"`
	Source    json.RawMessage `json:"source"`
}

func antInvalid(format string, args ...any) *apiError {
	return &apiError{status: http.StatusBadRequest, typ: "invalid_request_error", message: fmt.Sprintf(format, args...)}
}

// antTypeError is pydantic's message for a JSON value of the wrong type.
func antTypeError(prefix string, err error) *apiError {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		field := te.Field
		if prefix != "" {
			field = strings.TrimSuffix(prefix+"."+field, ".")
		}
		return antInvalid("%s: Input should be %s", field, pydanticKind(te.Type.Kind().String()))
	}
	return antInvalid("There was an error parsing the body of your request: the body is not valid JSON.")
}

func pydanticKind(goKind string) string {
	switch goKind {
	case "bool":
		return "a valid boolean"
	case "string":
		return "a valid string"
	case "slice", "array":
		return "a valid list"
	case "struct", "map":
		return "a valid dictionary"
	case "float32", "float64":
		return "a valid number"
	}
	return "a valid integer"
}

// extraField returns the first key of the object raw not in allowed.
func extraField(raw []byte, allowed func(string) bool) string {
	keys, _ := objectKeys(raw)
	for _, k := range keys {
		if !allowed(k) {
			return k
		}
	}
	return ""
}

// antParse is a parsed messages or count_tokens request.
type antParse struct {
	genRequest
	thinking bool // thinking enabled or adaptive
}

// parseMessages parses and validates a messages request (count: a
// count_tokens request) the way Anthropic does. The stream flag is set even
// when validation fails.
func parseMessages(body []byte, count bool) (antParse, *apiError) {
	var q antParse
	var req anthropicRequest
	if !isObject(body) {
		return q, antInvalid("There was an error parsing the body of your request: the body is not a JSON object.")
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return q, antTypeError("", err)
	}
	q.stream = req.Stream != nil && *req.Stream && !count
	if f := extraField(body, func(k string) bool { ok, known := anthropicFields[k]; return known && (ok || !count) }); f != "" {
		return q, antInvalid("%s: Extra inputs are not permitted", f)
	}
	switch {
	case req.Model == nil:
		return q, antInvalid("model: Field required")
	case req.MaxTokens == nil && !count:
		return q, antInvalid("max_tokens: Field required")
	case req.Messages == nil:
		return q, antInvalid("messages: Field required")
	}
	q.model = *req.Model
	if !count {
		if *req.MaxTokens < 1 {
			return q, antInvalid("max_tokens: Input should be greater than or equal to 1")
		}
		q.maxTokens = int(min(*req.MaxTokens, maxDirectiveTokens*10))
	}
	if err := antSampling(&req); err != nil {
		return q, err
	}
	msgs := *req.Messages
	if len(msgs) == 0 {
		return q, antInvalid("messages: List should have at least 1 item after validation, not 0")
	}
	if req.System != nil && !isNull(req.System) {
		texts, err := antSystem(req.System)
		if err != nil {
			return q, err
		}
		q.turns = append(q.turns, texts)
	}
	var pending []string // tool_use ids of the previous assistant message
	pendingAt := -1
	for i, raw := range msgs {
		turns, last, err := antMessage(i, raw, i == len(msgs)-1, &pending, &pendingAt)
		if err != nil {
			return q, err
		}
		q.turns = append(q.turns, turns...)
		if last != nil {
			q.lastUser = last
		}
	}
	if len(pending) > 0 {
		return q, antUnanswered(pendingAt, pending)
	}
	var err *apiError
	if q.firstTool, err = antTools(req.Tools); err != nil {
		return q, err
	}
	if q.thinking, err = antThinking(&req, count); err != nil {
		return q, err
	}
	if err := antToolChoice(req.ToolChoice, len(req.Tools) > 0, q.thinking); err != nil {
		return q, err
	}
	q.hosted = antHosted(req.Tools, req.ToolChoice)
	q.stopSequences = req.StopSequences
	return q, nil
}

// antHosted finds the server tools the mock plays: web_search_* and
// web_fetch_* (named web_search and web_fetch), forced by a tool_choice of
// type tool with their name.
func antHosted(tools []json.RawMessage, choice json.RawMessage) hostedAsk {
	var h hostedAsk
	var tc struct {
		Type string `json:"type"`
		Name string `json:"name"`
	}
	_ = json.Unmarshal(choice, &tc)
	for _, raw := range tools {
		var t struct {
			Type string `json:"type"`
			Name string `json:"name"`
		}
		_ = json.Unmarshal(raw, &t)
		forced := tc.Type == "tool" && tc.Name == t.Name
		switch {
		case strings.HasPrefix(t.Type, "web_search_"):
			h.search, h.forceSearch = true, h.forceSearch || forced
		case strings.HasPrefix(t.Type, "web_fetch_"):
			h.fetch, h.forceFetch = true, h.forceFetch || forced
		}
	}
	return h
}

// antServerToolUse is a server_tool_use block of the answer.
type antServerToolUse struct {
	Type  string          `json:"type"`
	ID    string          `json:"id"`
	Name  string          `json:"name"`
	Input json.RawMessage `json:"input"`
}

// antServerToolBlocks are the blocks of the plan's searches and fetches:
// per use, a server_tool_use and its result, as Anthropic writes them
// before the text that uses them.
func (c *call) antServerToolBlocks(p *plan) (uses []antServerToolUse, results []any) {
	add := func(name, resultType string, n int, input, content string) {
		for i := range n {
			id := "srvtoolu_mock_" + strconv.FormatUint(c.id, 10) + "_" + name + "_" + strconv.Itoa(i)
			uses = append(uses, antServerToolUse{"server_tool_use", id, name, json.RawMessage(input)})
			results = append(results, map[string]any{"type": resultType, "tool_use_id": id, "content": json.RawMessage(content)})
		}
	}
	add("web_search", "web_search_tool_result", p.searches, `{"query":"mock search"}`,
		`[{"type":"web_search_result","url":"https://example.com/","title":"Example","encrypted_content":"ZW5j","page_age":null}]`)
	add("web_fetch", "web_fetch_tool_result", p.fetches, `{"url":"https://example.com/"}`,
		`{"type":"web_fetch_result","url":"https://example.com/","content":{"type":"document","source":{"type":"text","media_type":"text/plain","data":"Example"}}}`)
	return uses, results
}

// antServerToolUsage is usage.server_tool_use for the plan, or nil.
func antServerToolUsage(p *plan) *anthropicServerToolUsage {
	if p.searches == 0 && p.fetches == 0 {
		return nil
	}
	return &anthropicServerToolUsage{WebSearchRequests: p.searches, WebFetchRequests: p.fetches}
}

// antSampling checks the sampling fields.
func antSampling(req *anthropicRequest) *apiError {
	for _, f := range []struct {
		name string
		v    *float64
	}{{"temperature", req.Temperature}, {"top_p", req.TopP}} {
		switch {
		case f.v == nil:
		case *f.v < 0:
			return antInvalid("%s: Input should be greater than or equal to 0", f.name)
		case *f.v > 1:
			return antInvalid("%s: Input should be less than or equal to 1", f.name)
		}
	}
	if req.TopK != nil && *req.TopK < 0 {
		return antInvalid("top_k: Input should be greater than or equal to 0")
	}
	for _, s := range req.StopSequences {
		if strings.TrimSpace(s) == "" {
			return antInvalid("stop_sequences: each stop sequence must contain non-whitespace")
		}
	}
	if req.ServiceTier != nil && *req.ServiceTier != "auto" && *req.ServiceTier != "standard_only" {
		return antInvalid("service_tier: Input should be 'auto' or 'standard_only'")
	}
	if req.Metadata != nil && !isNull(req.Metadata) {
		if !isObject(req.Metadata) {
			return antInvalid("metadata: Input should be a valid dictionary")
		}
		if f := extraField(req.Metadata, func(k string) bool { return k == "user_id" }); f != "" {
			return antInvalid("metadata.%s: Extra inputs are not permitted", f)
		}
	}
	return nil
}

// antSystem is the texts of the system field: a string or text blocks.
func antSystem(raw json.RawMessage) ([]string, *apiError) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return []string{s}, nil
	}
	var blocks []json.RawMessage
	if err := json.Unmarshal(raw, &blocks); err != nil {
		return nil, antInvalid("system: Input should be a valid string or a valid list")
	}
	var texts []string
	for j, b := range blocks {
		var blk anthropicBlock
		if !isObject(b) || json.Unmarshal(b, &blk) != nil {
			return nil, antInvalid("system.%d: Input should be a valid dictionary", j)
		}
		if blk.Type != "text" {
			return nil, antInvalid("system.%d.type: Input should be 'text'", j)
		}
		if f := extraField(b, func(k string) bool { return slices.Contains(anthropicBlockFields["text"], k) }); f != "" {
			return nil, antInvalid("system.%d.%s: Extra inputs are not permitted", j, f)
		}
		if blk.Text == nil {
			return nil, antInvalid("system.%d.text: Field required", j)
		}
		if *blk.Text == "" {
			return nil, antInvalid("system: text content blocks must be non-empty")
		}
		texts = append(texts, *blk.Text)
	}
	return texts, nil
}

func antUnanswered(at int, ids []string) *apiError {
	return antInvalid("messages.%d: `tool_use` ids were found without `tool_result` blocks immediately after: %s. "+
		"Each `tool_use` block must have a corresponding `tool_result` block in the next message.", at, strings.Join(ids, ", "))
}

// antMessage validates message i and returns its turns (see the token rules)
// and, for a user message, its texts (the directives' source). pending holds
// the tool_use ids of the previous assistant message (at pendingAt), which
// this message must answer; an assistant message sets its own.
func antMessage(i int, raw json.RawMessage, last bool, pending *[]string, pendingAt *int) ([][]string, []string, *apiError) {
	var m struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	}
	if !isObject(raw) || json.Unmarshal(raw, &m) != nil {
		return nil, nil, antInvalid("messages.%d: Input should be a valid dictionary", i)
	}
	if f := extraField(raw, func(k string) bool { return k == "role" || k == "content" }); f != "" {
		return nil, nil, antInvalid("messages.%d.%s: Extra inputs are not permitted", i, f)
	}
	switch m.Role {
	case "user", "assistant":
	case "":
		return nil, nil, antInvalid("messages.%d.role: Field required", i)
	case "system":
		return nil, nil, antInvalid("messages: Unexpected role \"system\". The Messages API accepts a top-level `system` " +
			"parameter, not \"system\" as an input message role.")
	default:
		return nil, nil, antInvalid("messages.%d.role: Input should be 'user' or 'assistant'", i)
	}
	if m.Content == nil {
		return nil, nil, antInvalid("messages.%d.content: Field required", i)
	}
	empty := antInvalid("messages.%d: all messages must have non-empty content except for the optional final assistant message", i)
	var blocks []json.RawMessage
	var str string
	if json.Unmarshal(m.Content, &str) == nil {
		if str == "" && !(last && m.Role == "assistant") {
			return nil, nil, empty
		}
		b, _ := json.Marshal(map[string]string{"type": "text", "text": str})
		if str != "" {
			blocks = []json.RawMessage{b}
		}
	} else if err := json.Unmarshal(m.Content, &blocks); err != nil {
		return nil, nil, antInvalid("messages.%d.content: Input should be a valid string or a valid list", i)
	} else if len(blocks) == 0 && !(last && m.Role == "assistant") {
		return nil, nil, empty
	}

	var turns [][]string
	var rest, all []string
	hasRest := len(blocks) == 0
	var uses, results []string
	for j, b := range blocks {
		path := fmt.Sprintf("messages.%d.content.%d", i, j)
		var blk anthropicBlock
		if !isObject(b) {
			return nil, nil, antInvalid("%s: Input should be a valid dictionary", path)
		}
		if err := json.Unmarshal(b, &blk); err != nil {
			return nil, nil, antTypeError(path, err)
		}
		fields, known := anthropicBlockFields[blk.Type]
		if !known {
			return nil, nil, antInvalid("%s: Input tag '%s' found using 'type' does not match any of the expected tags: "+
				"'text', 'image', 'document', 'search_result', 'tool_use', 'tool_result', 'thinking', 'redacted_thinking'",
				path, truncate(blk.Type, 64))
		}
		if fields != nil {
			if f := extraField(b, func(k string) bool { return slices.Contains(fields, k) }); f != "" {
				return nil, nil, antInvalid("%s.%s.%s: Extra inputs are not permitted", path, blk.Type, f)
			}
		}
		texts, err := antBlock(path, m.Role, &blk)
		if err != nil {
			return nil, nil, err
		}
		all = append(all, texts...)
		switch blk.Type {
		case "tool_result":
			if hasRest && len(*pending) > 0 {
				// tool_result blocks must come first in a user message
				return nil, nil, antUnanswered(*pendingAt, *pending)
			}
			results = append(results, *blk.ToolUseID)
			turns = append(turns, texts)
		case "tool_use":
			uses = append(uses, *blk.ID)
			rest = append(rest, texts...)
			hasRest = true
		default:
			rest = append(rest, texts...)
			hasRest = true
		}
		if blk.Type == "text" && last && m.Role == "assistant" && j == len(blocks)-1 &&
			strings.TrimRightFunc(*blk.Text, isSpace) != *blk.Text {
			return nil, nil, antInvalid("messages: final assistant content cannot end with trailing whitespace")
		}
	}
	if hasRest {
		turns = append(turns, rest)
	}

	// Tool pairing: the previous assistant's tool_use ids are answered here.
	for j, id := range results {
		if !slices.Contains(*pending, id) {
			return nil, nil, antInvalid("messages.%d.content.%d: unexpected `tool_use_id` found in `tool_result` blocks: %s. "+
				"Each `tool_result` block must have a corresponding `tool_use` block in the previous message.", i, j, truncate(id, 64))
		}
	}
	for _, id := range *pending {
		if !slices.Contains(results, id) {
			return nil, nil, antUnanswered(*pendingAt, *pending)
		}
	}
	*pending, *pendingAt = uses, i
	if m.Role == "user" {
		return turns, append([]string{}, all...), nil // non-nil: the last user message
	}
	return turns, nil, nil
}

// antBlock validates one content block of a message with role and returns
// the texts whose words count.
func antBlock(path, role string, b *anthropicBlock) ([]string, *apiError) {
	onlyIn := func(want string) *apiError {
		if role != want {
			return antInvalid("%s: `%s` blocks can only be in `%s` messages", path, b.Type, want)
		}
		return nil
	}
	switch b.Type {
	case "text":
		return antText(path, b.Text)
	case "image", "document":
		if b.Source == nil {
			return nil, antInvalid("%s.%s.source: Field required", path, b.Type)
		}
	case "tool_use":
		if err := onlyIn("assistant"); err != nil {
			return nil, err
		}
		switch {
		case b.ID == nil:
			return nil, antInvalid("%s.tool_use.id: Field required", path)
		case !anthropicToolUseID.MatchString(*b.ID):
			return nil, antInvalid("%s.tool_use.id: String should match pattern '^[a-zA-Z0-9_-]+$'", path)
		case b.Name == nil:
			return nil, antInvalid("%s.tool_use.name: Field required", path)
		case b.Input == nil:
			return nil, antInvalid("%s.tool_use.input: Field required", path)
		case !isObject(b.Input):
			return nil, antInvalid("%s.tool_use.input: Input should be a valid dictionary", path)
		}
		return []string{compactJSON(b.Input)}, nil
	case "tool_result":
		if err := onlyIn("user"); err != nil {
			return nil, err
		}
		switch {
		case b.ToolUseID == nil:
			return nil, antInvalid("%s.tool_result.tool_use_id: Field required", path)
		case !anthropicToolUseID.MatchString(*b.ToolUseID):
			return nil, antInvalid("%s.tool_result.tool_use_id: String should match pattern '^[a-zA-Z0-9_-]+$'", path)
		}
		return antToolResult(path+".tool_result.content", b.Content)
	case "thinking":
		if err := onlyIn("assistant"); err != nil {
			return nil, err
		}
		switch {
		case b.Thinking == nil:
			return nil, antInvalid("%s.thinking.thinking: Field required", path)
		case b.Signature == nil:
			return nil, antInvalid("%s.thinking.signature: Field required", path)
		}
	case "redacted_thinking":
		if err := onlyIn("assistant"); err != nil {
			return nil, err
		}
		if b.Data == nil {
			return nil, antInvalid("%s.redacted_thinking.data: Field required", path)
		}
	}
	return nil, nil
}

func antText(path string, text *string) ([]string, *apiError) {
	switch {
	case text == nil:
		return nil, antInvalid("%s.text.text: Field required", path)
	case *text == "":
		return nil, antInvalid("messages: text content blocks must be non-empty")
	case strings.TrimFunc(*text, isSpace) == "":
		return nil, antInvalid("messages: text content blocks must contain non-whitespace text")
	}
	return []string{*text}, nil
}

// antToolResult is the texts of a tool_result content: a string, or blocks
// of which the text blocks count.
func antToolResult(path string, raw json.RawMessage) ([]string, *apiError) {
	if raw == nil || isNull(raw) {
		return nil, nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return []string{s}, nil
	}
	var blocks []json.RawMessage
	if err := json.Unmarshal(raw, &blocks); err != nil {
		return nil, antInvalid("%s: Input should be a valid string or a valid list", path)
	}
	var texts []string
	for j, b := range blocks {
		p := fmt.Sprintf("%s.%d", path, j)
		var blk anthropicBlock
		if !isObject(b) || json.Unmarshal(b, &blk) != nil {
			return nil, antInvalid("%s: Input should be a valid dictionary", p)
		}
		switch blk.Type {
		case "text":
			t, err := antText(p, blk.Text)
			if err != nil {
				return nil, err
			}
			texts = append(texts, t...)
		case "image", "document", "search_result":
		default:
			return nil, antInvalid("%s: Input tag '%s' found using 'type' does not match any of the expected tags: "+
				"'text', 'image', 'document', 'search_result'", p, truncate(blk.Type, 64))
		}
	}
	return texts, nil
}

// antTools validates the tool definitions and returns the first custom
// tool's name.
func antTools(tools []json.RawMessage) (string, *apiError) {
	var first string
	seen := map[string]bool{}
	for i, raw := range tools {
		var t struct {
			Type        string          `json:"type"`
			Name        *string         `json:"name"`
			InputSchema json.RawMessage `json:"input_schema"`
		}
		if !isObject(raw) || json.Unmarshal(raw, &t) != nil {
			return "", antInvalid("tools.%d: Input should be a valid dictionary", i)
		}
		if t.Type != "" && t.Type != "custom" {
			// A server or typed tool (web_search_20250305, bash_20250124, ...).
			if t.Name != nil {
				seen[*t.Name] = true
			}
			continue
		}
		p := fmt.Sprintf("tools.%d.custom", i)
		if f := extraField(raw, func(k string) bool { return slices.Contains(anthropicToolFields, k) }); f != "" {
			return "", antInvalid("%s.%s: Extra inputs are not permitted", p, f)
		}
		switch {
		case t.Name == nil:
			return "", antInvalid("%s.name: Field required", p)
		case !anthropicToolName.MatchString(*t.Name):
			return "", antInvalid("%s.name: String should match pattern '^[a-zA-Z0-9_-]{1,128}$'", p)
		case t.InputSchema == nil:
			return "", antInvalid("%s.input_schema: Field required", p)
		case !isObject(t.InputSchema):
			return "", antInvalid("%s.input_schema: Input should be a valid dictionary", p)
		}
		var schema struct {
			Type *string `json:"type"`
		}
		_ = json.Unmarshal(t.InputSchema, &schema)
		if schema.Type == nil {
			return "", antInvalid("%s.input_schema.type: Field required", p)
		}
		if *schema.Type != "object" {
			return "", antInvalid("%s.input_schema.type: Input should be 'object'", p)
		}
		if seen[*t.Name] {
			return "", antInvalid("tools: Tool names must be unique.")
		}
		seen[*t.Name] = true
		if first == "" {
			first = *t.Name
		}
	}
	return first, nil
}

// antThinking validates the thinking configuration and what it excludes; it
// reports whether thinking is on.
func antThinking(req *anthropicRequest, count bool) (bool, *apiError) {
	if req.Thinking == nil || isNull(req.Thinking) {
		return false, nil
	}
	var th struct {
		Type   string `json:"type"`
		Budget *int64 `json:"budget_tokens"`
	}
	if !isObject(req.Thinking) || json.Unmarshal(req.Thinking, &th) != nil {
		return false, antInvalid("thinking: Input should be a valid dictionary")
	}
	const doc = " Please consult our documentation at https://docs.claude.com/en/docs/build-with-claude/extended-thinking"
	switch th.Type {
	case "disabled":
		return false, nil
	case "adaptive":
	case "enabled":
		switch {
		case th.Budget == nil:
			return false, antInvalid("thinking.enabled.budget_tokens: Field required")
		case *th.Budget < 1024:
			return false, antInvalid("thinking.enabled.budget_tokens: Input should be greater than or equal to 1024")
		case !count && *th.Budget >= *req.MaxTokens:
			return false, antInvalid("`max_tokens` must be greater than `thinking.budget_tokens`." + doc + "#max-tokens-and-context-window-size")
		}
	default:
		return false, antInvalid("thinking: Input tag '%s' found using 'type' does not match any of the expected tags: "+
			"'enabled', 'disabled', 'adaptive'", truncate(th.Type, 64))
	}
	switch {
	case req.Temperature != nil && *req.Temperature != 1:
		return false, antInvalid("`temperature` may only be set to 1 when thinking is enabled." + doc + "#feature-compatibility")
	case req.TopK != nil:
		return false, antInvalid("`top_k` may not be set when thinking is enabled." + doc + "#feature-compatibility")
	case req.TopP != nil && *req.TopP < 0.95:
		return false, antInvalid("`top_p` must be greater than or equal to 0.95 or unset when thinking is enabled." + doc + "#feature-compatibility")
	}
	return true, nil
}

func antToolChoice(raw json.RawMessage, tools, thinking bool) *apiError {
	if raw == nil || isNull(raw) {
		return nil
	}
	var tc struct {
		Type string  `json:"type"`
		Name *string `json:"name"`
	}
	if !isObject(raw) || json.Unmarshal(raw, &tc) != nil {
		return antInvalid("tool_choice: Input should be a valid dictionary")
	}
	switch tc.Type {
	case "auto", "none":
		return nil
	case "any", "tool":
	default:
		return antInvalid("tool_choice: Input tag '%s' found using 'type' does not match any of the expected tags: "+
			"'auto', 'any', 'tool', 'none'", truncate(tc.Type, 64))
	}
	switch {
	case tc.Type == "tool" && tc.Name == nil:
		return antInvalid("tool_choice.tool.name: Field required")
	case !tools:
		return antInvalid("tool_choice may only be specified while providing tools.")
	case thinking:
		return antInvalid("Thinking may not be enabled when tool_choice forces tool use.")
	}
	return nil
}

// MessagesInputTokens is the total input tokens (input_tokens plus the two
// cache fields) the server bills for an Anthropic messages or count_tokens
// request body (the token rules of the package doc).
func MessagesInputTokens(body []byte) (int, error) {
	q, err := parseMessages(body, false)
	if err != nil {
		if q2, err2 := parseMessages(body, true); err2 == nil {
			return InputTokens(q2.turns), nil
		}
		return 0, errors.New(err.message)
	}
	return InputTokens(q.turns), nil
}

// ---------------------------------------------------------------------------
// POST /v1/messages/count_tokens

func (s *Server) anthropicCountTokens(c *call) {
	q, perr := parseMessages(c.body, true)
	c.model = q.model
	if !s.anthropicAuth(c) {
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
	case !s.modelOK(q.model):
		c.writeError(anthropicAPI{}.statusError(c, http.StatusNotFound, ""))
	default:
		c.answer(&p, marshal(struct {
			InputTokens int `json:"input_tokens"`
		}{InputTokens(q.turns)}))
	}
}

// ---------------------------------------------------------------------------
// POST /v1/messages: answer

type anthropicUsage struct {
	InputTokens              int                       `json:"input_tokens"`
	CacheCreationInputTokens int                       `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int                       `json:"cache_read_input_tokens"`
	CacheCreation            *anthropicCacheCreation   `json:"cache_creation,omitempty"`
	OutputTokens             int                       `json:"output_tokens"`
	ServerToolUse            *anthropicServerToolUsage `json:"server_tool_use,omitempty"`
	ServiceTier              string                    `json:"service_tier,omitempty"`
}

// anthropicServerToolUsage counts the server tools' uses.
type anthropicServerToolUsage struct {
	WebSearchRequests int `json:"web_search_requests"`
	WebFetchRequests  int `json:"web_fetch_requests"`
}

type anthropicCacheCreation struct {
	Ephemeral5m int `json:"ephemeral_5m_input_tokens"`
	Ephemeral1h int `json:"ephemeral_1h_input_tokens"`
}

type anthropicReply struct {
	ID           string          `json:"id"`
	Type         string          `json:"type"`
	Role         string          `json:"role"`
	Model        string          `json:"model"`
	Content      []any           `json:"content"`
	StopReason   *string         `json:"stop_reason"`
	StopSequence *string         `json:"stop_sequence"`
	Usage        *anthropicUsage `json:"usage,omitempty"`
}

type antTextOut struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

type antThinkingOut struct {
	Type      string `json:"type"`
	Thinking  string `json:"thinking"`
	Signature string `json:"signature"`
}

type antToolUseOut struct {
	Type  string          `json:"type"`
	ID    string          `json:"id"`
	Name  string          `json:"name"`
	Input json.RawMessage `json:"input"`
}

// anthropicStop is the stop_reason of a vendor-neutral finish.
func anthropicStop(f string) string {
	switch f {
	case finishLength:
		return "max_tokens"
	case finishContentFilter:
		return "refusal"
	case finishToolCalls:
		return "tool_use"
	case finishStopSequence:
		return "stop_sequence"
	}
	return "end_turn"
}

func (s *Server) anthropicMessages(c *call) {
	q, perr := parseMessages(c.body, false)
	p, prompt := s.prepare(c, &q.genRequest, perr, s.anthropicAuth, genOptions{stopSequences: true})
	if p == nil {
		return
	}
	u := anthropicUsage{
		InputTokens:              prompt - p.cached - p.cacheWrite,
		CacheCreationInputTokens: p.cacheWrite,
		CacheReadInputTokens:     p.cached,
		CacheCreation:            &anthropicCacheCreation{Ephemeral5m: p.cacheWrite},
		OutputTokens:             p.output,
		ServerToolUse:            antServerToolUsage(p),
		ServiceTier:              "standard",
	}
	if q.stream {
		s.anthropicStream(c, p, u)
	} else {
		s.anthropicComplete(c, p, u)
	}
}

func (c *call) messageID() string { return "msg_mock" + strconv.FormatUint(c.id, 10) }

func (s *Server) anthropicComplete(c *call, p *plan, u anthropicUsage) {
	if p.fail == failError {
		c.writeErrorRetry(anthropicAPI{}.statusError(c, http.StatusInternalServerError, ""), p.retryAfterSeconds(500))
		return
	}
	if !c.beforeHeaders(p.streamDelay(p.reasoning + p.tokens + p.argumentChunks())) {
		return
	}
	content := []any{}
	if p.reasoning > 0 {
		content = append(content, antThinkingOut{"thinking", ThinkingText(p.reasoning), ThinkingSignature})
	}
	uses, results := c.antServerToolBlocks(p)
	for i := range uses {
		content = append(content, uses[i], results[i])
	}
	if p.tokens > 0 {
		content = append(content, antTextOut{"text", ReplyText(p.tokens)})
	}
	for _, tc := range p.calls {
		content = append(content, antToolUseOut{"tool_use", tc.anthropicID(), tc.name, json.RawMessage(ToolArguments)})
	}
	stop := anthropicStop(p.finish)
	m := anthropicReply{ID: c.messageID(), Type: "message", Role: "assistant", Model: p.model, Content: content,
		StopReason: &stop, StopSequence: nullable(p.stopSequence)}
	if !p.noUsage {
		m.Usage = &u
	}
	body := marshal(m)
	if p.fail == failCut {
		c.writeCut(body)
		return
	}
	c.writeJSON(body)
}

func (s *Server) anthropicStream(c *call, p *plan, u anthropicUsage) {
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

	var buf []byte
	event := func(name string, data ...string) bool {
		buf = append(append(append(buf[:0], "event: "...), name...), "\ndata: "...)
		for _, d := range data {
			buf = append(buf, d...)
		}
		buf = append(buf, "\n\n"...)
		return c.event(buf)
	}
	pinged := false
	index := -1
	// start opens the next block, with the ping after the first.
	start := func(block any) bool {
		index++
		if !event("content_block_start", `{"type":"content_block_start","index":`, strconv.Itoa(index),
			`,"content_block":`, string(marshal(block)), `}`) {
			return false
		}
		if !pinged {
			pinged = true
			return event("ping", `{"type":"ping"}`)
		}
		return true
	}
	delta := func(d string) bool {
		return event("content_block_delta", `{"type":"content_block_delta","index":`, strconv.Itoa(index), `,"delta":`, d, `}`)
	}
	stop := func() bool {
		return event("content_block_stop", `{"type":"content_block_stop","index":`, strconv.Itoa(index), `}`)
	}

	start0 := anthropicReply{ID: c.messageID(), Type: "message", Role: "assistant", Model: p.model, Content: []any{}}
	if !p.noUsage {
		u0 := u
		u0.OutputTokens = min(1, u.OutputTokens)
		u0.ServerToolUse = nil // counted in message_delta
		start0.Usage = &u0
	}
	if !event("message_start", `{"type":"message_start","message":`, string(marshal(start0)), `}`) {
		return
	}
	if p.reasoning > 0 {
		if !start(antThinkingOut{Type: "thinking"}) {
			return
		}
		for i := range p.reasoning {
			if !c.generate(p, 1) || !delta(`{"type":"thinking_delta","thinking":`+string(jsonString(streamToken(ThinkingToken, i)))+`}`) {
				return
			}
		}
		if !delta(`{"type":"signature_delta","signature":"`+ThinkingSignature+`"}`) || !stop() {
			return
		}
	}
	// server tools run before the text that uses them
	uses, results := c.antServerToolBlocks(p)
	for i := range uses {
		input := uses[i].Input
		uses[i].Input = json.RawMessage(`{}`)
		if !start(uses[i]) || !delta(`{"type":"input_json_delta","partial_json":`+string(jsonString(string(input)))+`}`) ||
			!stop() || !start(results[i]) || !stop() {
			return
		}
	}
	if p.tokens > 0 {
		if !start(antTextOut{Type: "text"}) {
			return
		}
		for i := range p.tokens {
			if p.cutHere(i) {
				break
			}
			if !c.generate(p, 1) || !delta(`{"type":"text_delta","text":`+string(jsonString(streamToken(ReplyToken, i)))+`}`) {
				return
			}
			c.streamedText()
		}
	}
	switch p.fail {
	case failCut:
		c.abort()
		return
	case failError:
		event("error", string(anthropicAPI{}.errorBody(c, apiError{typ: "api_error", message: anthropicServerErrorMessage})))
		return
	}
	if p.tokens > 0 && !stop() {
		return
	}
	for _, tc := range p.calls {
		if !start(antToolUseOut{"tool_use", tc.anthropicID(), tc.name, json.RawMessage(`{}`)}) {
			return
		}
		if !delta(`{"type":"input_json_delta","partial_json":""}`) {
			return
		}
		for j, frag := range toolArgumentFragments {
			if !c.generate(p, fragmentTokens(j)) || !delta(`{"type":"input_json_delta","partial_json":`+string(jsonString(frag))+`}`) {
				return
			}
		}
		if !stop() {
			return
		}
	}
	c.produce(p.unsent())
	if !pinged && !event("ping", `{"type":"ping"}`) {
		return
	}
	md := struct {
		Type  string `json:"type"`
		Delta struct {
			StopReason   string  `json:"stop_reason"`
			StopSequence *string `json:"stop_sequence"`
		} `json:"delta"`
		Usage *struct {
			InputTokens              int                       `json:"input_tokens"`
			CacheCreationInputTokens int                       `json:"cache_creation_input_tokens"`
			CacheReadInputTokens     int                       `json:"cache_read_input_tokens"`
			OutputTokens             int                       `json:"output_tokens"`
			ServerToolUse            *anthropicServerToolUsage `json:"server_tool_use,omitempty"`
		} `json:"usage,omitempty"`
	}{Type: "message_delta"}
	md.Delta.StopReason, md.Delta.StopSequence = anthropicStop(p.finish), nullable(p.stopSequence)
	if !p.noUsage {
		md.Usage = &struct {
			InputTokens              int                       `json:"input_tokens"`
			CacheCreationInputTokens int                       `json:"cache_creation_input_tokens"`
			CacheReadInputTokens     int                       `json:"cache_read_input_tokens"`
			OutputTokens             int                       `json:"output_tokens"`
			ServerToolUse            *anthropicServerToolUsage `json:"server_tool_use,omitempty"`
		}{u.InputTokens, u.CacheCreationInputTokens, u.CacheReadInputTokens, u.OutputTokens, u.ServerToolUse}
	}
	if !event("message_delta", string(marshal(md))) {
		return
	}
	if event("message_stop", `{"type":"message_stop"}`) {
		c.complete()
	}
}
