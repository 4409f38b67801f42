package mockupstream

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// POST /v1/responses: the same plans as chat completions, answered as a
// Responses object or event stream that follow OpenAI's published OpenAPI
// schemas (Response, ResponseStreamEvent; responses_spec_test.go checks
// them).

// responsesRequest is the part of a Responses request the mock reads.
type responsesRequest struct {
	Model           *string         `json:"model"`
	Input           json.RawMessage `json:"input"`
	Instructions    *string         `json:"instructions"`
	Stream          *bool           `json:"stream"`
	MaxOutputTokens *int64          `json:"max_output_tokens"`
	Tools           []struct {
		Type string `json:"type"`
		Name string `json:"name"`
	} `json:"tools"`
	ToolChoice json.RawMessage `json:"tool_choice"`
	Background *bool           `json:"background"`
}

type responsesItem struct {
	Type      string          `json:"type"`
	Role      string          `json:"role"`
	Content   json.RawMessage `json:"content"`
	CallID    *string         `json:"call_id"`
	Name      string          `json:"name"`
	Arguments string          `json:"arguments"`
	Output    json.RawMessage `json:"output"`
}

// ResponsesPromptTokens is the input_tokens the server bills for a
// Responses request body (the token rules of the package doc).
func ResponsesPromptTokens(body []byte) (int, error) {
	q, err := parseResponses(body)
	if err != nil {
		return 0, errors.New(err.message)
	}
	return InputTokens(q.texts), nil
}

// parseResponses validates a Responses request the way OpenAI does, as far
// as the mock needs: model, input items, call/output pairing.
func parseResponses(body []byte) (chat, *apiError) {
	var q chat
	var req responsesRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return q, invalid("", "", "%s", openAIBadJSON)
	}
	if req.Stream != nil {
		q.stream = *req.Stream
	}
	if req.Model == nil || *req.Model == "" {
		return q, invalid("model", "missing_required_parameter", "Missing required parameter: 'model'.")
	}
	q.model = *req.Model
	if req.MaxOutputTokens != nil {
		if *req.MaxOutputTokens < 16 {
			return q, invalid("max_output_tokens", "integer_below_min_value",
				"Invalid 'max_output_tokens': integer below minimum value. Expected a value >= 16, but got %d instead.", *req.MaxOutputTokens)
		}
		q.maxTokens = int(min(*req.MaxOutputTokens, maxDirectiveTokens*10))
	}
	if req.Instructions != nil {
		q.texts = append(q.texts, []string{*req.Instructions})
	}
	var items []responsesItem
	var s string
	switch {
	case len(req.Input) == 0 || isNull(req.Input):
		return q, invalid("input", "missing_required_parameter", "Missing required parameter: 'input'.")
	case json.Unmarshal(req.Input, &s) == nil:
		items = []responsesItem{{Type: "message", Role: "user", Content: req.Input}}
	case json.Unmarshal(req.Input, &items) != nil:
		return q, invalid("input", "invalid_type", "Invalid type for 'input': expected a string or an array of input items.")
	}
	calls := map[string]bool{}
	for i, it := range items {
		param := "input[" + strconv.Itoa(i) + "]"
		if it.Type == "" && it.Role != "" {
			it.Type = "message"
		}
		var texts []string
		switch it.Type {
		case "message":
			switch it.Role {
			case "user", "assistant", "system", "developer":
			default:
				return q, invalid(param+".role", "invalid_value", "Invalid value: '%s'. Supported values are: 'user', 'assistant', 'system', and 'developer'.", truncate(it.Role, 64))
			}
			t, err := responsesTexts(it.Content, param+".content")
			if err != nil {
				return q, err
			}
			texts = t
			if it.Role == "user" {
				q.lastUser = texts
			}
		case "function_call":
			if it.CallID == nil {
				return q, invalid(param+".call_id", "missing_required_parameter", "Missing required parameter: '%s.call_id'.", param)
			}
			calls[*it.CallID] = true
			texts = []string{it.Arguments}
		case "function_call_output":
			if it.CallID == nil {
				return q, invalid(param+".call_id", "missing_required_parameter", "Missing required parameter: '%s.call_id'.", param)
			}
			if !calls[*it.CallID] {
				return q, invalid("input", "", "No tool call found for function call output with call_id %s.", truncate(*it.CallID, 64))
			}
			var out string
			if json.Unmarshal(it.Output, &out) == nil {
				texts = []string{out}
			}
		case "reasoning":
		default:
			return q, invalid(param+".type", "invalid_value", "Invalid value: '%s'.", truncate(it.Type, 64))
		}
		q.texts = append(q.texts, texts)
	}
	var tc struct {
		Type string `json:"type"`
	}
	_ = json.Unmarshal(req.ToolChoice, &tc)
	for _, t := range req.Tools {
		if t.Type == "function" && q.firstTool == "" {
			q.firstTool = t.Name
		}
		// the hosted tools the mock plays
		switch {
		case strings.HasPrefix(t.Type, "web_search"):
			q.hosted.search = true
			q.hosted.forceSearch = q.hosted.forceSearch || strings.HasPrefix(tc.Type, "web_search")
		case t.Type == "image_generation":
			q.hosted.image = true
			q.hosted.forceImage = q.hosted.forceImage || tc.Type == "image_generation"
		}
	}
	q.background = req.Background != nil && *req.Background
	return q, nil
}

// responsesTexts is the texts of a message's content: a string, or the text
// of its text parts.
func responsesTexts(raw json.RawMessage, param string) ([]string, *apiError) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return []string{s}, nil
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &parts) != nil {
		return nil, invalid(param, "invalid_type", "Invalid type for '%s': expected a string or an array of content parts.", param)
	}
	var texts []string
	for _, p := range parts {
		switch p.Type {
		case "input_text", "output_text":
			texts = append(texts, p.Text)
		}
	}
	return texts, nil
}

type responsesUsage struct {
	InputTokens        int `json:"input_tokens"`
	InputTokensDetails struct {
		CachedTokens     int `json:"cached_tokens"`
		CacheWriteTokens int `json:"cache_write_tokens"` // 0: the mock's cache writes are Anthropic's
	} `json:"input_tokens_details"`
	OutputTokens        int `json:"output_tokens"`
	OutputTokensDetails struct {
		ReasoningTokens int `json:"reasoning_tokens"`
	} `json:"output_tokens_details"`
	TotalTokens int `json:"total_tokens"`
}

func (s *Server) openAIResponses(c *call) {
	q, perr := parseResponses(c.body)
	g := q.gen()
	p, prompt := s.prepare(c, &g, perr, s.openAIAuth, genOptions{})
	if p == nil {
		return
	}
	var u responsesUsage
	u.InputTokens, u.OutputTokens = prompt, p.output
	u.InputTokensDetails.CachedTokens = p.cached
	u.OutputTokensDetails.ReasoningTokens = p.reasoning
	u.TotalTokens = u.InputTokens + u.OutputTokens
	if q.background {
		s.responsesQueued(c, p, q.stream)
		return
	}
	if q.stream {
		s.responsesStream(c, p, u)
	} else {
		s.responsesComplete(c, p, u)
	}
}

func (c *call) responseID() string { return "resp_mock" + strconv.FormatUint(c.id, 10) }

// responsesObject is the response object in a state: its output items so
// far, and the usage when final (none before: OpenAI's schema has no null
// usage).
func (c *call) responsesObject(p *plan, st string, output []json.RawMessage, u *responsesUsage) []byte {
	var incomplete any
	if st == "incomplete" {
		incomplete = map[string]string{"reason": "max_output_tokens"}
	}
	if output == nil {
		output = []json.RawMessage{}
	}
	obj := map[string]any{
		"id": c.responseID(), "object": "response", "created_at": time.Now().Unix(), "status": st,
		"model": p.model, "output": output, "error": nil, "incomplete_details": incomplete,
		"instructions": nil, "metadata": map[string]string{}, "temperature": 1, "top_p": 1,
		"parallel_tool_calls": true, "tool_choice": "auto", "tools": []any{}, "store": false,
		"text": map[string]any{"format": map[string]string{"type": "text"}},
	}
	if u != nil {
		obj["usage"] = u
	}
	return marshal(obj)
}

// responsesQueued answers a background request as OpenAI does: the
// response is queued, without output or usage, and generated later at the
// account's cost. A stream gets response.created and response.queued,
// then ends.
func (s *Server) responsesQueued(c *call, p *plan, stream bool) {
	if !c.beforeHeaders(0) {
		return
	}
	obj := json.RawMessage(c.responsesObject(p, "queued", nil, nil))
	if !stream {
		c.writeJSON(obj)
		return
	}
	h := c.w.Header()
	h.Set("Content-Type", "text/event-stream; charset=utf-8")
	h.Set("Cache-Control", "no-cache")
	c.writeHeader(http.StatusOK)
	for i, typ := range []string{"response.created", "response.queued"} {
		if !c.event([]byte("event: " + typ + "\ndata: " + string(marshal(map[string]any{"type": typ, "sequence_number": i, "response": obj})) + "\n\n")) {
			return
		}
	}
	c.complete()
}

// responsesHosted are the hosted tool calls of the plan, as output
// items in a state: web_search_call per search, image_generation_call per
// image, in that order, before the message.
func (c *call) responsesHosted(p *plan, st string) []json.RawMessage {
	var items []json.RawMessage
	id := strconv.FormatUint(c.id, 10)
	for i := range p.searches {
		items = append(items, marshal(map[string]any{"type": "web_search_call", "id": "ws_mock" + id + "_" + strconv.Itoa(i), "status": st,
			"action": map[string]any{"type": "search", "query": "mock search"}}))
	}
	for i := range p.images {
		item := map[string]any{"type": "image_generation_call", "id": "ig_mock" + id + "_" + strconv.Itoa(i), "status": st, "result": nil}
		if st == "completed" {
			item["result"] = "iVBORw0KGgo="
		}
		items = append(items, marshal(item))
	}
	return items
}

func responsesMessage(id, st, text string) json.RawMessage {
	return marshal(map[string]any{"type": "message", "id": id, "role": "assistant", "status": st,
		"content": []any{outputText(text)}})
}

// outputText is an output_text content part.
func outputText(text string) map[string]any {
	return map[string]any{"type": "output_text", "text": text, "annotations": []any{}, "logprobs": []any{}}
}

func responsesCall(tc toolCall, args, st string) json.RawMessage {
	return marshal(map[string]any{"type": "function_call", "id": "fc_mock_" + strconv.FormatUint(tc.seq, 10),
		"call_id": tc.openAIID(), "name": tc.name, "arguments": args, "status": st})
}

// responsesStatus is the status of a finished plan.
func responsesStatus(p *plan) string {
	if p.finish == finishLength {
		return "incomplete"
	}
	return "completed"
}

func (s *Server) responsesComplete(c *call, p *plan, u responsesUsage) {
	if p.fail == failError {
		c.writeErrorRetry(openAI{}.statusError(c, http.StatusInternalServerError, ""), p.retryAfterSeconds(500))
		return
	}
	if !c.beforeHeaders(p.streamDelay(p.tokens + p.argumentChunks())) {
		return
	}
	output := c.responsesHosted(p, "completed")
	if text := ReplyText(p.tokens); text != "" || len(p.calls) == 0 {
		output = append(output, responsesMessage("msg_mock"+strconv.FormatUint(c.id, 10), "completed", text))
	}
	for _, tc := range p.calls {
		output = append(output, responsesCall(tc, ToolArguments, "completed"))
	}
	var up *responsesUsage
	if !p.noUsage {
		up = &u
	}
	body := c.responsesObject(p, responsesStatus(p), output, up)
	if p.fail == failCut {
		c.writeCut(body)
		return
	}
	c.writeJSON(body)
}

func (s *Server) responsesStream(c *call, p *plan, u responsesUsage) {
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
	seq := 0
	send := func(typ string, fields map[string]any) bool {
		fields["type"], fields["sequence_number"] = typ, seq
		seq++
		return c.event([]byte("event: " + typ + "\ndata: " + string(marshal(fields)) + "\n\n"))
	}
	if !send("response.created", map[string]any{"response": json.RawMessage(c.responsesObject(p, "in_progress", nil, nil))}) ||
		!send("response.in_progress", map[string]any{"response": json.RawMessage(c.responsesObject(p, "in_progress", nil, nil))}) {
		return
	}
	c.produce(p.reasoning) // the hidden reasoning, done before the answer
	var output []json.RawMessage
	index := 0
	// hosted tool calls first: added, progress, done
	done := c.responsesHosted(p, "completed")
	for i, item := range c.responsesHosted(p, "in_progress") {
		var it struct{ Type, ID string }
		_ = json.Unmarshal(item, &it)
		if !send("response.output_item.added", map[string]any{"output_index": index, "item": item}) ||
			!send("response."+it.Type+".in_progress", map[string]any{"output_index": index, "item_id": it.ID}) ||
			!send("response."+it.Type+".completed", map[string]any{"output_index": index, "item_id": it.ID}) ||
			!send("response.output_item.done", map[string]any{"output_index": index, "item": done[i]}) {
			return
		}
		output = append(output, done[i])
		index++
	}
	msgID := "msg_mock" + strconv.FormatUint(c.id, 10)
	if p.tokens > 0 || len(p.calls) == 0 {
		if !send("response.output_item.added", map[string]any{"output_index": index, "item": json.RawMessage(marshal(map[string]any{
			"type": "message", "id": msgID, "role": "assistant", "status": "in_progress", "content": []any{}}))}) ||
			!send("response.content_part.added", map[string]any{"item_id": msgID, "output_index": index, "content_index": 0,
				"part": outputText("")}) {
			return
		}
		for i := range p.tokens {
			if p.cutHere(i) {
				break
			}
			if !c.generate(p, 1) || !send("response.output_text.delta", map[string]any{"item_id": msgID, "output_index": index, "content_index": 0,
				"delta": streamToken(ReplyToken, i), "logprobs": []any{}}) {
				return
			}
			c.streamedText()
		}
		switch p.fail {
		case failCut:
			c.abort()
			return
		case failError:
			send("error", map[string]any{"code": "server_error", "message": openAIServerErrorMessage, "param": nil})
			return
		}
		text := ReplyText(p.tokens)
		if !send("response.output_text.done", map[string]any{"item_id": msgID, "output_index": index, "content_index": 0, "text": text, "logprobs": []any{}}) ||
			!send("response.content_part.done", map[string]any{"item_id": msgID, "output_index": index, "content_index": 0,
				"part": outputText(text)}) {
			return
		}
		item := responsesMessage(msgID, "completed", text)
		output = append(output, item)
		if !send("response.output_item.done", map[string]any{"output_index": index, "item": item}) {
			return
		}
		index++
	}
	for _, tc := range p.calls {
		id := "fc_mock_" + strconv.FormatUint(tc.seq, 10)
		if !send("response.output_item.added", map[string]any{"output_index": index, "item": responsesCall(tc, "", "in_progress")}) {
			return
		}
		for j, frag := range toolArgumentFragments {
			if !c.generate(p, fragmentTokens(j)) ||
				!send("response.function_call_arguments.delta", map[string]any{"item_id": id, "output_index": index, "delta": frag}) {
				return
			}
		}
		if !send("response.function_call_arguments.done", map[string]any{"item_id": id, "output_index": index, "name": tc.name, "arguments": ToolArguments}) {
			return
		}
		item := responsesCall(tc, ToolArguments, "completed")
		output = append(output, item)
		if !send("response.output_item.done", map[string]any{"output_index": index, "item": item}) {
			return
		}
		index++
	}
	c.produce(p.unsent())
	var up *responsesUsage
	if !p.noUsage {
		up = &u
	}
	st := responsesStatus(p)
	if send("response."+st, map[string]any{"response": json.RawMessage(c.responsesObject(p, st, output, up))}) {
		c.complete()
	}
}
