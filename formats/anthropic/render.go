package anthropic

import (
	"encoding/base64"
	"strings"

	"github.com/modelgate/modelgate/formats"
	"github.com/modelgate/modelgate/formats/internal/emit"
	"github.com/modelgate/modelgate/formats/rawjson"
)

// Translation constants (docs/translation.md, "Value rules",
// "What cannot be mapped").
const (
	// DefaultMaxTokens is sent when the IR has no output cap (the gateway
	// always sets one; Anthropic requires it).
	DefaultMaxTokens = 4096
	// Thinking budgets for reasoning efforts.
	budgetLow    = 2048
	budgetMedium = 8192
	budgetHigh   = 24576
	// minBudget is Anthropic's smallest thinking budget.
	minBudget = 1024
	// jsonToolName is the tool of the json_schema emulation: a forced call
	// whose input is the answer. The decoders turn its tool_use back into
	// text, so the name is reserved.
	jsonToolName = "modelgate_json_response"
	// jsonObjectPrompt is the json_object emulation (appended to system).
	jsonObjectPrompt = "Respond only with a JSON object."
)

// RenderMessagesRequest renders an IR request (from a client of another format)
// as a Messages body for model (docs/translation.md, "Request mapping",
// "Tools", "What cannot be mapped"):
//
//   - max_tokens is always sent (ir.MaxTokens, else DefaultMaxTokens).
//   - system and system/developer messages anywhere in the conversation
//     become the top-level system, in order (hoisting); tool results are
//     grouped into one user message, results first; consecutive same-role
//     messages are merged; empty text is skipped and a trailing assistant
//     prefill loses its trailing whitespace.
//   - Tool call ids are sanitised to ^[a-zA-Z0-9_-]+$ (deterministically,
//     in calls and results alike); arguments become input objects
//     ({"_raw_arguments": …} when not a JSON object).
//   - Images must be JPEG, PNG, GIF or WebP; documents PDF or text; audio,
//     file references and other media are rejected.
//   - tool_choice maps to auto/any/tool/none; an allowed-tools list is
//     emulated by sending only those tools; parallel_tool_calls false is
//     disable_parallel_tool_use.
//   - temperature is clamped to [0, 1]; with both temperature and top_p,
//     top_p is dropped; with thinking on, temperature and top_k are dropped
//     (and top_p below 0.95); a forced tool choice with thinking is
//     rejected.
//   - reasoning effort maps to a thinking budget (low 2048, medium 8192,
//     high and above 24576; a budget as is), capped at max_tokens − 1;
//     below 1024 thinking is off.
//   - json_schema goes to output_config.format when ir.StructuredOutputs,
//     else to a forced tool (modelgate_json_response) whose input the
//     response decoders turn back into text; a non-object schema, and
//     json_object, append "Respond only with a JSON object." to system.
//   - n > 1, logprobs, logit_bias, audio output and whitespace-only stop
//     sequences are rejected; seed, penalties, OpenAI metadata and
//     service_tier are dropped (recorded in ir.Dropped).
func RenderMessagesRequest(ir *formats.Request, model string) ([]byte, *formats.Error) {
	return render(ir, model, false)
}

// RenderCountTokensRequest renders the count_tokens body of an IR request:
// model, system, messages, tools and tool_choice as RenderMessagesRequest
// would send them (the JSON emulations included, since they are input),
// without the members count_tokens rejects, and without thinking.
func RenderCountTokensRequest(ir *formats.Request, model string) ([]byte, *formats.Error) {
	return render(ir, model, true)
}

// jsonMode is how a response format is carried.
type jsonMode uint8

const (
	jsonNone   jsonMode = iota
	jsonNative          // output_config.format
	jsonTool            // a forced tool
	jsonPrompt          // a system prompt line
)

func render(ir *formats.Request, model string, count bool) ([]byte, *formats.Error) {
	if !count {
		if err := checkMessages(ir); err != nil {
			return nil, err
		}
	}
	ir.FillToolIDs("toolu_")
	maxTokens := ir.MaxTokens
	if maxTokens <= 0 {
		maxTokens = DefaultMaxTokens
	}

	// structured output
	mode := jsonNone
	rf := &ir.ResponseFormat
	switch rf.Type {
	case formats.FormatJSONObject:
		mode = jsonPrompt
	case formats.FormatJSONSchema:
		switch {
		case len(rf.Schema) == 0 || !rawjson.StringIs(rawjson.Get(rf.Schema, "type"), "object"):
			mode = jsonPrompt
		case ir.StructuredOutputs:
			mode = jsonNative
		default:
			mode = jsonTool
		}
	}

	// thinking
	budget, adaptive := 0, false
	if !count {
		budget, adaptive = thinkingConfig(ir, maxTokens)
		thinking := budget > 0 || adaptive
		forced := ir.ToolChoice.Mode == formats.ToolChoiceRequired || ir.ToolChoice.Mode == formats.ToolChoiceNamed
		if thinking && forced && len(ir.Tools) > 0 {
			return nil, ir.Reject(formats.FieldToolChoice, "forcing a tool is not supported together with extended thinking by this model's provider.")
		}
		if thinking && mode == jsonTool { // the emulation forces a tool
			budget, adaptive = 0, false
			ir.DropField(formats.FieldReasoning)
		}
	}
	thinking := budget > 0 || adaptive

	r := renderer{ir: ir, b: make([]byte, 0, 1024)}
	b := append(r.b, `{"model":`...)
	b = rawjson.AppendQuote(b, model)
	if !count {
		b = append(b, `,"max_tokens":`...)
		b = rawjson.AppendInt(b, int64(maxTokens))
	}

	// system: the prompt, hoisted system messages, the JSON line
	var sys []string
	for i := range ir.System {
		if p := &ir.System[i]; p.Type == formats.PartText && p.Text != "" {
			sys = append(sys, p.Text)
		}
	}
	for i := range ir.Messages {
		if m := &ir.Messages[i]; m.Role == formats.RoleSystem {
			for j := range m.Parts {
				if p := &m.Parts[j]; p.Type == formats.PartText && p.Text != "" {
					sys = append(sys, p.Text)
				}
			}
		}
	}
	if mode == jsonPrompt {
		line := jsonObjectPrompt
		if rf.Type == formats.FormatJSONSchema && len(rf.Schema) > 0 {
			line = "Respond only with JSON that matches this JSON Schema: " + string(rawjson.Compact(nil, rf.Schema))
		}
		sys = append(sys, line)
	}
	switch len(sys) {
	case 0:
	case 1:
		b = append(b, `,"system":`...)
		b = rawjson.AppendQuote(b, sys[0])
	default:
		b = append(b, `,"system":[`...)
		for i, s := range sys {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"type":"text","text":`...)
			b = rawjson.AppendQuote(b, s)
			b = append(b, '}')
		}
		b = append(b, ']')
	}

	// messages
	b = append(b, `,"messages":[`...)
	r.b = b
	if err := r.messages(); err != nil {
		return nil, err
	}
	b = append(r.b, ']')

	// tools and tool_choice
	b, err := appendTools(b, ir, mode == jsonTool)
	if err != nil {
		return nil, err
	}
	if count {
		return append(b, '}'), nil
	}

	// stop sequences
	n := 0
	for _, s := range ir.Stop {
		if s == "" {
			continue
		}
		if n == 0 {
			b = append(b, `,"stop_sequences":[`...)
		} else {
			b = append(b, ',')
		}
		n++
		b = rawjson.AppendQuote(b, s)
	}
	if n > 0 {
		b = append(b, ']')
	}

	// sampling
	temp := ir.Temperature != nil
	if temp && thinking {
		ir.DropField(formats.FieldTemperature)
		temp = false
	}
	if temp {
		t := min(max(*ir.Temperature, 0), 1)
		b = append(b, `,"temperature":`...)
		b = rawjson.AppendFloat(b, t)
	}
	if ir.TopP != nil {
		switch {
		case temp:
			ir.DropField(formats.FieldTopP)
		case thinking && *ir.TopP < 0.95:
			ir.DropField(formats.FieldTopP)
		default:
			b = append(b, `,"top_p":`...)
			b = rawjson.AppendFloat(b, *ir.TopP)
		}
	}
	if ir.TopK != nil {
		if thinking {
			ir.DropField(formats.FieldTopK)
		} else {
			b = append(b, `,"top_k":`...)
			b = rawjson.AppendInt(b, int64(max(*ir.TopK, 0)))
		}
	}

	// thinking, structured output, user
	switch {
	case adaptive:
		b = append(b, `,"thinking":{"type":"adaptive"}`...)
	case budget > 0:
		b = append(b, `,"thinking":{"type":"enabled","budget_tokens":`...)
		b = rawjson.AppendInt(b, int64(budget))
		b = append(b, '}')
	}
	if mode == jsonNative {
		b = append(b, `,"output_config":{"format":{"type":"json_schema","schema":`...)
		b = rawjson.Compact(b, rf.Schema)
		b = append(b, "}}"...)
	}
	if ir.User != "" {
		b = append(b, `,"metadata":{"user_id":`...)
		b = rawjson.AppendQuote(b, ir.User)
		b = append(b, '}')
	}
	if ir.Stream {
		b = append(b, `,"stream":true`...)
	}

	// what Anthropic has no use for
	if ir.Seed != nil {
		ir.DropField(formats.FieldSeed)
	}
	if ir.PresencePenalty != nil && *ir.PresencePenalty != 0 {
		ir.DropField(formats.FieldPresencePenalty)
	}
	if ir.FrequencyPenalty != nil && *ir.FrequencyPenalty != 0 {
		ir.DropField(formats.FieldFrequencyPenalty)
	}
	if len(ir.Metadata) > 0 {
		ir.DropField(formats.FieldMetadata)
	}
	if ir.ServiceTier != "" {
		ir.DropField(formats.FieldServiceTier)
	}
	return append(b, '}'), nil
}

// checkMessages rejects what Anthropic cannot produce
// (docs/translation.md, "What cannot be mapped").
func checkMessages(ir *formats.Request) *formats.Error {
	switch {
	case ir.N > 1:
		return ir.Reject(formats.FieldN, "only one choice per request is supported by this model's provider.")
	case ir.Logprobs || ir.TopLogprobs != nil:
		p := formats.FieldLogprobs
		if !ir.Logprobs {
			p = formats.FieldTopLogprobs
		}
		return ir.Reject(p, "log probabilities are not supported by this model's provider.")
	case len(ir.LogitBias) > 0 && !rawjson.IsNull(ir.LogitBias) && string(rawjson.TrimSpace(ir.LogitBias)) != "{}":
		return ir.Reject(formats.FieldLogitBias, "token biases are not supported by this model's provider.")
	case ir.AudioOutput:
		return ir.Reject(formats.FieldAudioOutput, "audio output is not supported by this model's provider.")
	}
	for _, s := range ir.Stop {
		if s != "" && strings.TrimSpace(s) == "" {
			return ir.Reject(formats.FieldStop, "whitespace-only stop sequences are not supported by this model's provider.")
		}
	}
	return nil
}

// thinkingConfig maps IR reasoning to a thinking budget or adaptive
// thinking (docs/translation.md, "What cannot be mapped").
func thinkingConfig(ir *formats.Request, maxTokens int) (budget int, adaptive bool) {
	r := ir.Reasoning
	if r == nil || r.Disabled {
		return 0, false
	}
	if r.Adaptive {
		return 0, true
	}
	switch {
	case r.Budget > 0:
		budget = r.Budget
	case r.Budget < 0: // Gemini's dynamic budget
		budget = budgetMedium
	default:
		switch strings.ToLower(r.Effort) {
		case "", "none", "minimal":
			return 0, false
		case "low":
			budget = budgetLow
		case "medium":
			budget = budgetMedium
		case "high", "xhigh", "max":
			budget = budgetHigh
		default:
			budget = budgetMedium
		}
	}
	budget = min(budget, maxTokens-1)
	if budget < minBudget {
		ir.DropField(formats.FieldReasoning)
		return 0, false
	}
	return budget, false
}

// renderer renders the conversation.
type renderer struct {
	ir *formats.Request
	b  []byte
}

// turn is one Anthropic message: IR parts of one role, merged.
type turn struct {
	assistant bool
	parts     []*formats.Part
}

// renders reports whether a part yields a block (empty text and thinking
// without an Anthropic signature do not).
func renders(p *formats.Part) bool {
	switch p.Type {
	case formats.PartText, formats.PartRefusal:
		return p.Text != ""
	case formats.PartThinking, formats.PartRedactedThinking:
		return p.Signature != ""
	}
	return true
}

func (r *renderer) messages() *formats.Error {
	var turns []turn
	for i := range r.ir.Messages {
		m := &r.ir.Messages[i]
		if m.Role == formats.RoleSystem {
			continue // hoisted
		}
		if m.Name != "" {
			r.ir.Drop("name") // participant names: OpenAI only
		}
		assistant := m.Role == formats.RoleAssistant
		for j := range m.Parts {
			p := &m.Parts[j]
			if !renders(p) {
				continue
			}
			if n := len(turns); n == 0 || turns[n-1].assistant != assistant {
				turns = append(turns, turn{assistant: assistant})
			}
			t := &turns[len(turns)-1]
			t.parts = append(t.parts, p)
		}
	}
	// a trailing assistant prefill may not end in whitespace
	if n := len(turns); n > 0 && turns[n-1].assistant {
		t := &turns[n-1]
		if k := len(t.parts) - 1; t.parts[k].Type == formats.PartText || t.parts[k].Type == formats.PartRefusal {
			trimmed := strings.TrimRight(t.parts[k].Text, " \t\r\n")
			if trimmed == "" {
				t.parts = t.parts[:k]
			} else if trimmed != t.parts[k].Text {
				cp := *t.parts[k]
				cp.Text = trimmed
				t.parts[k] = &cp
			}
			if len(t.parts) == 0 {
				turns = turns[:n-1]
			}
		}
	}
	for i := range turns {
		if i > 0 {
			r.b = append(r.b, ',')
		}
		if err := r.turn(&turns[i]); err != nil {
			return err
		}
	}
	return nil
}

func (r *renderer) turn(t *turn) *formats.Error {
	if t.assistant {
		r.b = append(r.b, `{"role":"assistant","content":`...)
	} else {
		r.b = append(r.b, `{"role":"user","content":`...)
		// tool results first (Anthropic requires them at the start)
		results := 0
		for _, p := range t.parts {
			if p.Type == formats.PartToolResult {
				results++
			}
		}
		if results > 0 && results < len(t.parts) {
			sorted := make([]*formats.Part, 0, len(t.parts))
			for _, p := range t.parts {
				if p.Type == formats.PartToolResult {
					sorted = append(sorted, p)
				}
			}
			for _, p := range t.parts {
				if p.Type != formats.PartToolResult {
					sorted = append(sorted, p)
				}
			}
			t.parts = sorted
		}
	}
	if len(t.parts) == 1 && (t.parts[0].Type == formats.PartText || t.parts[0].Type == formats.PartRefusal) {
		r.b = rawjson.AppendQuote(r.b, t.parts[0].Text)
		r.b = append(r.b, '}')
		return nil
	}
	r.b = append(r.b, '[')
	for i, p := range t.parts {
		if i > 0 {
			r.b = append(r.b, ',')
		}
		if err := r.block(p); err != nil {
			return err
		}
	}
	r.b = append(r.b, "]}"...)
	return nil
}

// block renders one content block.
func (r *renderer) block(p *formats.Part) *formats.Error {
	switch p.Type {
	case formats.PartText, formats.PartRefusal:
		r.b = append(r.b, `{"type":"text","text":`...)
		r.b = rawjson.AppendQuote(r.b, p.Text)
		r.b = append(r.b, '}')
	case formats.PartImage:
		return r.image(p.Media)
	case formats.PartFile:
		return r.document(p.Media)
	case formats.PartAudio:
		return r.ir.Reject(formats.FieldMessages, "audio input is not supported by this model's provider.")
	case formats.PartToolCall:
		tc := p.ToolCall
		r.b = append(r.b, `{"type":"tool_use","id":`...)
		r.b = rawjson.AppendQuote(r.b, SanitizeToolID(tc.ID))
		r.b = append(r.b, `,"name":`...)
		r.b = rawjson.AppendQuote(r.b, tc.Name)
		r.b = append(r.b, `,"input":`...)
		r.b = emit.AppendArgs(r.b, tc.Arguments)
		r.b = append(r.b, '}')
	case formats.PartToolResult:
		return r.toolResult(p.ToolResult)
	case formats.PartThinking:
		r.b = append(r.b, `{"type":"thinking","thinking":`...)
		r.b = rawjson.AppendQuote(r.b, p.Text)
		r.b = append(r.b, `,"signature":`...)
		r.b = rawjson.AppendQuote(r.b, p.Signature)
		r.b = append(r.b, '}')
	case formats.PartRedactedThinking:
		r.b = append(r.b, `{"type":"redacted_thinking","data":`...)
		r.b = rawjson.AppendQuote(r.b, p.Signature)
		r.b = append(r.b, '}')
	}
	return nil
}

func (r *renderer) toolResult(res *formats.ToolResult) *formats.Error {
	r.b = append(r.b, `{"type":"tool_result","tool_use_id":`...)
	r.b = rawjson.AppendQuote(r.b, SanitizeToolID(res.CallID))
	var parts []*formats.Part
	for i := range res.Parts {
		p := &res.Parts[i]
		switch p.Type {
		case formats.PartText, formats.PartRefusal:
			if p.Text != "" {
				parts = append(parts, p)
			}
		case formats.PartImage, formats.PartFile, formats.PartAudio:
			parts = append(parts, p)
		}
	}
	switch {
	case len(parts) == 0:
	case len(parts) == 1 && parts[0].Type != formats.PartImage && parts[0].Type != formats.PartFile && parts[0].Type != formats.PartAudio:
		r.b = append(r.b, `,"content":`...)
		r.b = rawjson.AppendQuote(r.b, parts[0].Text)
	default:
		r.b = append(r.b, `,"content":[`...)
		for i, p := range parts {
			if i > 0 {
				r.b = append(r.b, ',')
			}
			if err := r.block(p); err != nil {
				return err
			}
		}
		r.b = append(r.b, ']')
	}
	if res.IsError {
		r.b = append(r.b, `,"is_error":true`...)
	}
	r.b = append(r.b, '}')
	return nil
}

func (r *renderer) image(m *formats.Media) *formats.Error {
	data, mt, url := m.Data, strings.ToLower(m.MediaType), m.URL
	if data == "" && url != "" {
		if t, d, ok := formats.ParseDataURL(url); ok {
			data, mt, url = d, t, ""
		}
	}
	switch {
	case data != "":
		if mt == "" {
			mt = emit.SniffImage(data)
		}
		if mt == "image/jpg" {
			mt = "image/jpeg"
		}
		switch mt {
		case "image/jpeg", "image/png", "image/gif", "image/webp":
		default:
			return r.ir.Reject(formats.FieldMessages, "images must be JPEG, PNG, GIF or WebP for this model's provider (got '"+mt+"').")
		}
		r.b = append(r.b, `{"type":"image","source":{"type":"base64","media_type":`...)
		r.b = rawjson.AppendQuote(r.b, mt)
		r.b = append(r.b, `,"data":`...)
		r.b = rawjson.AppendQuote(r.b, data)
		r.b = append(r.b, "}}"...)
	case strings.HasPrefix(url, "https://") || strings.HasPrefix(url, "http://"):
		r.b = append(r.b, `{"type":"image","source":{"type":"url","url":`...)
		r.b = rawjson.AppendQuote(r.b, url)
		r.b = append(r.b, "}}"...)
	default:
		return r.ir.Reject(formats.FieldMessages, "images must be sent inline or by http(s) URL (file references cannot be read by this model's provider).")
	}
	return nil
}

func (r *renderer) document(m *formats.Media) *formats.Error {
	start := len(r.b)
	mt := strings.ToLower(m.MediaType)
	switch {
	case m.Text != "":
		r.b = append(r.b, `{"type":"document","source":{"type":"text","media_type":"text/plain","data":`...)
		r.b = rawjson.AppendQuote(r.b, m.Text)
	case m.Data != "" && (mt == "" || mt == "application/pdf"):
		r.b = append(r.b, `{"type":"document","source":{"type":"base64","media_type":"application/pdf","data":`...)
		r.b = rawjson.AppendQuote(r.b, m.Data)
	case m.Data != "" && strings.HasPrefix(mt, "text/"):
		text, err := base64.StdEncoding.DecodeString(m.Data)
		if err != nil {
			return r.ir.Reject(formats.FieldMessages, "a text document's data is not valid base64.")
		}
		r.b = append(r.b, `{"type":"document","source":{"type":"text","media_type":"text/plain","data":`...)
		r.b = rawjson.AppendQuote(r.b, text)
	case m.URL != "" && (strings.HasPrefix(m.URL, "https://") || strings.HasPrefix(m.URL, "http://")):
		r.b = append(r.b, `{"type":"document","source":{"type":"url","url":`...)
		r.b = rawjson.AppendQuote(r.b, m.URL)
	case m.Data != "":
		r.b = r.b[:start]
		return r.ir.Reject(formats.FieldMessages, "documents must be PDF or plain text for this model's provider (got '"+mt+"').")
	default:
		return r.ir.Reject(formats.FieldMessages, "documents must be sent inline or by URL (file references cannot be read by this model's provider).")
	}
	r.b = append(r.b, '}')
	if m.Filename != "" {
		r.b = append(r.b, `,"title":`...)
		r.b = rawjson.AppendQuote(r.b, m.Filename)
	}
	r.b = append(r.b, '}')
	return nil
}

// appendTools renders tools and tool_choice (docs/translation.md, "Tools"):
// allowed-tools lists are emulated by sending only those tools; jsonTool
// adds the json_schema emulation's tool and forces a tool call.
func appendTools(b []byte, ir *formats.Request, jsonTool bool) ([]byte, *formats.Error) {
	tc := &ir.ToolChoice
	allowed := func(name string) bool {
		if tc.Allowed == nil || tc.Mode == formats.ToolChoiceNone {
			return true
		}
		for _, a := range tc.Allowed {
			if a == name {
				return true
			}
		}
		return false
	}
	n := 0
	for i := range ir.Tools {
		t := &ir.Tools[i]
		if !allowed(t.Name) {
			continue
		}
		if !validToolName(t.Name) || t.Name == jsonToolName {
			return nil, ir.Reject(formats.FieldTools, "tool name '"+t.Name+"' is not accepted by this model's provider (it must match ^[a-zA-Z0-9_-]{1,128}$).")
		}
		if n == 0 {
			b = append(b, `,"tools":[`...)
		} else {
			b = append(b, ',')
		}
		n++
		b = append(b, `{"name":`...)
		b = rawjson.AppendQuote(b, t.Name)
		if t.Description != "" {
			b = append(b, `,"description":`...)
			b = rawjson.AppendQuote(b, t.Description)
		}
		b = append(b, `,"input_schema":`...)
		var err *formats.Error
		if b, err = appendSchema(b, ir, t); err != nil {
			return nil, err
		}
		if t.Strict != nil {
			b = append(b, `,"strict":`...)
			b = rawjson.AppendBool(b, *t.Strict)
		}
		b = append(b, '}')
	}
	clientTools := n
	if jsonTool {
		rf := &ir.ResponseFormat
		if n == 0 {
			b = append(b, `,"tools":[`...)
		} else {
			b = append(b, ',')
		}
		n++
		b = append(b, `{"name":"`+jsonToolName+`","description":`...)
		desc := "Give the final answer by calling this tool exactly once; its input is the answer, as JSON matching the schema."
		if rf.Description != "" {
			desc += " " + rf.Description
		}
		b = rawjson.AppendQuote(b, desc)
		b = append(b, `,"input_schema":`...)
		b = rawjson.Compact(b, rf.Schema)
		b = append(b, '}')
	}
	if n > 0 {
		b = append(b, ']')
	}

	disable := ir.ParallelToolCalls != nil && !*ir.ParallelToolCalls
	var typ, name string
	switch tc.Mode {
	case formats.ToolChoiceUnset, formats.ToolChoiceAuto:
		switch {
		case jsonTool && clientTools > 0:
			typ = "any" // a client tool, or the answer
		case jsonTool:
			typ, name = "tool", jsonToolName
		case tc.Mode == formats.ToolChoiceAuto || disable:
			typ = "auto"
		}
	case formats.ToolChoiceNone:
		typ = "none"
		if jsonTool {
			typ, name = "tool", jsonToolName
		}
	case formats.ToolChoiceRequired:
		typ = "any"
		if clientTools == 0 && !jsonTool {
			return nil, ir.Reject(formats.FieldToolChoice, "a tool call is required but no tool is available.")
		}
	case formats.ToolChoiceNamed:
		typ, name = "tool", tc.Name
		if clientTools == 0 {
			return nil, ir.Reject(formats.FieldToolChoice, "the forced tool '"+tc.Name+"' is not among the tools.")
		}
	}
	if n == 0 || typ == "" {
		return b, nil
	}
	b = append(b, `,"tool_choice":{"type":`...)
	b = rawjson.AppendQuote(b, typ)
	if name != "" {
		b = append(b, `,"name":`...)
		b = rawjson.AppendQuote(b, name)
	}
	if disable && typ != "none" {
		b = append(b, `,"disable_parallel_tool_use":true`...)
	}
	return append(b, '}'), nil
}

// appendSchema renders a tool's input_schema: {"type":"object",
// "properties":{}} when it has none, "type":"object" added when the
// schema has no type; a schema of another type is rejected.
func appendSchema(b []byte, ir *formats.Request, t *formats.Tool) ([]byte, *formats.Error) {
	s := rawjson.TrimSpace(t.Parameters)
	if len(s) == 0 || rawjson.IsNull(s) {
		return append(b, `{"type":"object","properties":{}}`...), nil
	}
	typ := rawjson.Get(s, "type")
	switch {
	case rawjson.StringIs(typ, "object"):
		return rawjson.Compact(b, s), nil
	case typ == nil && rawjson.Kind(s) == '{':
		c := rawjson.Compact(nil, s)
		if len(c) == 2 { // {}
			return append(b, `{"type":"object","properties":{}}`...), nil
		}
		b = append(b, `{"type":"object",`...)
		return append(b, c[1:]...), nil
	}
	return nil, ir.Reject(formats.FieldTools, "the parameters of tool '"+t.Name+"' must be an object schema for this model's provider.")
}
