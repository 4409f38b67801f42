package gemini

import (
	"strings"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/modelgate/modelgate/formats"
	"github.com/modelgate/modelgate/formats/internal/emit"
	"github.com/modelgate/modelgate/formats/rawjson"
)

// RenderGenerateRequest renders an IR request (from a client of another format)
// as a generateContent body for a Gemini upstream; the model goes in the URL.
// What Gemini cannot take is rejected or dropped per docs/translation.md,
// "What cannot be mapped", drops being recorded in ir.Dropped:
//
//   - system prompts (leading and mid-conversation, hoisted) →
//     systemInstruction; consecutive same-role turns merged; no empty turn
//     or text part is ever sent.
//   - tool calls → functionCall parts with args objects, without ids
//     (Gemini pairs calls and responses by name and order), each with its
//     thoughtSignature restored from the call itself or sigs, else Google's
//     placeholder on the first functionCall part of each model turn.
//   - tool results → functionResponse parts of one user turn, in the order
//     of the calls, named after their call (REJECT when no call matches);
//     images inside results follow as inlineData parts (emulation).
//   - inline images, PDFs and audio → inlineData; remote URLs and file
//     references → REJECT (the gateway does not fetch).
//   - tools → one Tool of functionDeclarations with parametersJsonSchema
//     (lossless); names outside Gemini's rules are mapped (names.go) and
//     restored by the decoders; tool_choice → functionCallingConfig
//     (allowed tools with auto: only those declared).
//   - generationConfig: maxOutputTokens (ir.MaxTokens, which the caller
//     sets), temperature, topP, topK, seed (folded into int32), non-zero
//     penalties, stopSequences (more than 5 → REJECT), JSON schema →
//     responseMimeType + responseJsonSchema, reasoning → thinkingConfig.
//   - n > 1, logprobs, logit_bias, audio output → REJECT (the IR answer
//     has one choice and no log-probabilities); parallel_tool_calls false,
//     user, metadata, service_tier → DROP.
func RenderGenerateRequest(ir *formats.Request, sigs SignatureStore) ([]byte, *formats.Error) {
	return render(ir, sigs, "")
}

// RenderCountTokensRequest renders an IR request as a countTokens body for
// model: {"generateContentRequest":{"model":"models/<model>",…}} with the
// system instruction and tools, or {"contents":[…]} when the conversation
// is all there is.
func RenderCountTokensRequest(ir *formats.Request, model string) ([]byte, *formats.Error) {
	return render(ir, nil, model)
}

// checkGemini rejects what the gateway cannot get from Gemini for the
// client.
func checkGemini(ir *formats.Request) *formats.Error {
	switch {
	case ir.N > 1:
		return ir.Reject(formats.FieldN, "only one choice per request is supported when translating to this model's provider.")
	case ir.AudioOutput:
		return ir.Reject(formats.FieldAudioOutput, "audio output is not supported for this model.")
	case ir.Logprobs || ir.TopLogprobs != nil:
		return ir.Reject(formats.FieldLogprobs, "log probabilities cannot be returned when translating to this model's provider.")
	case len(ir.LogitBias) > 0 && string(rawjson.TrimSpace(ir.LogitBias)) != "{}":
		return ir.Reject(formats.FieldLogitBias, "this model's provider has no logit bias.")
	}
	n := 0
	for _, s := range ir.Stop {
		if s != "" {
			n++
		}
	}
	if n > 5 {
		return ir.Reject(formats.FieldStop, "at most 5 stop sequences are supported by this model's provider.")
	}
	return nil
}

func render(ir *formats.Request, sigs SignatureStore, countModel string) ([]byte, *formats.Error) {
	count := countModel != ""
	if !count {
		if err := checkGemini(ir); err != nil {
			return nil, err
		}
	}
	r := renderer{ir: ir, sigs: sigs}
	system := r.appendSystem(nil)
	r.b = make([]byte, 0, 1024)
	for i := range ir.Messages {
		if err := r.message(&ir.Messages[i]); err != nil {
			return nil, err
		}
	}
	if r.turns == 0 {
		return nil, ir.Reject(formats.FieldMessages, "the conversation has no content that this model's provider can take.")
	}
	contents := r.close()
	tools, err := appendTools(nil, ir)
	if err != nil {
		return nil, err
	}

	b := make([]byte, 0, len(system)+len(contents)+len(tools)+256)
	switch {
	case count && len(system) == 0 && len(tools) == 0:
		b = append(b, `{"contents":[`...)
		b = append(b, contents...)
		return append(b, "]}"...), nil
	case count:
		b = append(b, `{"generateContentRequest":{"model":`...)
		b = rawjson.AppendQuote(b, "models/"+countModel)
		b = append(b, ',')
	default:
		b = append(b, '{')
	}
	if len(system) > 0 {
		b = append(b, system...)
		b = append(b, ',')
	}
	b = append(b, `"contents":[`...)
	b = append(b, contents...)
	b = append(b, ']')
	b = append(b, tools...)
	if count {
		return append(b, "}}"...), nil
	}
	if len(tools) > 0 {
		if b, err = appendToolConfig(b, ir); err != nil {
			return nil, err
		}
	}
	b = appendGenerationConfig(b, ir)
	if ir.ParallelToolCalls != nil && !*ir.ParallelToolCalls {
		ir.DropField(formats.FieldParallelToolCalls)
	}
	if ir.User != "" {
		ir.DropField(formats.FieldUser)
	}
	if len(ir.Metadata) > 0 {
		ir.DropField(formats.FieldMetadata)
	}
	if ir.ServiceTier != "" {
		ir.DropField(formats.FieldServiceTier)
	}
	return append(b, '}'), nil
}

type renderer struct {
	ir   *formats.Request
	sigs SignatureStore
	b    []byte

	role  string // the open turn's role, "" when none
	turns int
	calls int // functionCall parts in the open model turn
	// lastCalls are the calls of the latest model message, to order the
	// responses that follow.
	lastCalls []*formats.ToolCall
}

// appendSystem renders the system prompt: leading system parts, then
// mid-conversation system messages (hoisted, in order).
func (r *renderer) appendSystem(b []byte) []byte {
	n := 0
	add := func(parts []formats.Part) {
		for i := range parts {
			p := &parts[i]
			if p.Type != formats.PartText || p.Text == "" {
				continue
			}
			if n == 0 {
				b = append(b, `"systemInstruction":{"parts":[`...)
			} else {
				b = append(b, ',')
			}
			n++
			b = append(b, `{"text":`...)
			b = rawjson.AppendQuote(b, p.Text)
			b = append(b, '}')
		}
	}
	add(r.ir.System)
	for i := range r.ir.Messages {
		if m := &r.ir.Messages[i]; m.Role == formats.RoleSystem {
			add(m.Parts)
		}
	}
	if n > 0 {
		b = append(b, "]}"...)
	}
	return b
}

// open starts a part in a turn of role, merging it into the open turn when
// the role is the same.
func (r *renderer) open(role string) {
	if r.role == role {
		r.b = append(r.b, ',')
		return
	}
	if r.role != "" {
		r.b = append(r.b, "]}"...)
	}
	if r.turns > 0 {
		r.b = append(r.b, ',')
	}
	r.turns++
	r.role, r.calls = role, 0
	r.b = append(r.b, `{"role":"`...)
	r.b = append(r.b, role...)
	r.b = append(r.b, `","parts":[`...)
}

// close ends the open turn and returns the buffer.
func (r *renderer) close() []byte {
	if r.role != "" {
		r.b = append(r.b, "]}"...)
		r.role = ""
	}
	return r.b
}

func (r *renderer) text(role, text string) {
	if text == "" {
		return
	}
	r.open(role)
	r.b = append(r.b, `{"text":`...)
	r.b = rawjson.AppendQuote(r.b, text)
	r.b = append(r.b, '}')
}

func (r *renderer) message(m *formats.Message) *formats.Error {
	switch m.Role {
	case formats.RoleSystem: // hoisted
		return nil
	case formats.RoleAssistant:
		return r.model(m)
	}
	// a user or tool message: tool results first (in the order of the
	// calls), then the rest
	if err := r.toolResults(m); err != nil {
		return err
	}
	for i := range m.Parts {
		if err := r.userPart(&m.Parts[i]); err != nil {
			return err
		}
	}
	return nil
}

// userPart renders one part of a user turn; thinking and the like do not
// travel across vendors.
func (r *renderer) userPart(p *formats.Part) *formats.Error {
	ir := r.ir
	switch p.Type {
	case formats.PartText, formats.PartRefusal:
		r.text("user", p.Text)
	case formats.PartImage:
		m := p.Media
		switch {
		case m.Data != "":
			mt := m.MediaType
			if mt == "" {
				if mt = emit.SniffImage(m.Data); mt == "" {
					mt = "image/png" // Gemini reads the bytes; PNG is a label it takes
				}
			}
			r.inline(mt, m.Data)
		case m.URL != "":
			return ir.Reject(formats.FieldMessages, "image URLs cannot be read by this model's provider; send the image inline (base64).")
		default:
			return ir.Reject(formats.FieldMessages, "file references cannot be read by this model's provider; send the image inline (base64).")
		}
	case formats.PartFile:
		m := p.Media
		switch {
		case m.Text != "":
			r.text("user", m.Text)
		case m.Data != "":
			mt := m.MediaType
			if mt == "" {
				mt = "application/pdf"
			}
			r.inline(mt, m.Data)
		default:
			return ir.Reject(formats.FieldMessages, "documents must be sent inline (file references and URLs cannot be read by this model's provider).")
		}
	case formats.PartAudio:
		m := p.Media
		if m.Data == "" {
			return ir.Reject(formats.FieldMessages, "audio must be sent inline (file references and URLs cannot be read by this model's provider).")
		}
		mt := m.MediaType
		if mt == "" {
			mt = "audio/wav"
		}
		r.inline(mt, m.Data)
	}
	return nil
}

func (r *renderer) inline(mediaType, data string) {
	r.open("user")
	r.b = append(r.b, `{"inlineData":{"mimeType":`...)
	r.b = rawjson.AppendQuote(r.b, mediaType)
	r.b = append(r.b, `,"data":`...)
	r.b = rawjson.AppendQuote(r.b, data)
	r.b = append(r.b, "}}"...)
}

// model renders an assistant message: text, refusals and tool calls;
// thinking is dropped (its signatures belong to another vendor).
func (r *renderer) model(m *formats.Message) *formats.Error {
	r.lastCalls = r.lastCalls[:0]
	for i := range m.Parts {
		p := &m.Parts[i]
		switch p.Type {
		case formats.PartText, formats.PartRefusal:
			r.text("model", p.Text)
		case formats.PartToolCall:
			tc := p.ToolCall
			r.lastCalls = append(r.lastCalls, tc)
			name, ok := toGemini(tc.Name)
			if !ok {
				return r.ir.Reject(formats.FieldMessages, "the function name '"+tc.Name+"' is too long for this model's provider.")
			}
			sig := tc.Signature
			if sig == "" && r.sigs != nil && tc.ID != "" {
				sig, _ = r.sigs.Get(tc.ID)
			}
			r.open("model")
			if sig == "" && r.calls == 0 {
				sig = PlaceholderSignature
			}
			r.calls++
			r.b = append(r.b, `{"functionCall":{"name":`...)
			r.b = rawjson.AppendQuote(r.b, name)
			r.b = append(r.b, `,"args":`...)
			r.b = emit.AppendArgs(r.b, tc.Arguments)
			r.b = append(r.b, '}')
			if sig != "" {
				r.b = append(r.b, `,"thoughtSignature":`...)
				r.b = rawjson.AppendQuote(r.b, sig)
			}
			r.b = append(r.b, '}')
		}
	}
	return nil
}

// toolResults renders the tool results of a message: one functionResponse
// per result, in the order of the calls of the preceding model turn, then
// the images and documents inside the results.
func (r *renderer) toolResults(m *formats.Message) *formats.Error {
	ir := r.ir
	var order []int
	for i := range m.Parts {
		if m.Parts[i].Type == formats.PartToolResult {
			order = append(order, i)
		}
	}
	pos := func(i int) int {
		id := m.Parts[i].ToolResult.CallID
		for k, c := range r.lastCalls {
			if id != "" && c.ID == id {
				return k
			}
		}
		return len(r.lastCalls)
	}
	for i := 1; i < len(order); i++ { // stable insertion sort: a handful of results
		for j := i; j > 0 && pos(order[j]) < pos(order[j-1]); j-- {
			order[j], order[j-1] = order[j-1], order[j]
		}
	}
	var media []formats.Part
	for _, i := range order {
		res := m.Parts[i].ToolResult
		name := res.Name
		if name == "" {
			name = ir.ToolName(res.CallID)
		}
		if name == "" {
			return ir.Reject(formats.FieldMessages, "the tool result for call id '"+res.CallID+"' has no matching tool call in the conversation.")
		}
		gname, ok := toGemini(name)
		if !ok {
			return ir.Reject(formats.FieldMessages, "the function name '"+name+"' is too long for this model's provider.")
		}
		var text strings.Builder
		media = emit.ToolResultText(&text, res, media)
		r.open("user")
		r.b = append(r.b, `{"functionResponse":{"name":`...)
		r.b = rawjson.AppendQuote(r.b, gname)
		r.b = append(r.b, `,"response":`...)
		r.b = appendResponse(r.b, text.String(), res.IsError)
		r.b = append(r.b, "}}"...)
	}
	for i := range media {
		if err := r.userPart(&media[i]); err != nil {
			return err
		}
	}
	return nil
}

// appendResponse renders a tool result's content as a functionResponse
// response object (§3.3): a JSON object → {"output": <object>}, other
// text → {"output": "<text>"}, an error → {"error": "<text>"}.
func appendResponse(dst []byte, text string, isErr bool) []byte {
	if isErr {
		dst = append(dst, `{"error":`...)
		dst = rawjson.AppendQuote(dst, text)
		return append(dst, '}')
	}
	dst = append(dst, `{"output":`...)
	t := strings.TrimSpace(text)
	if len(t) > 0 && t[0] == '{' && jsontext.Value(t).IsValid() {
		dst = rawjson.Compact(dst, []byte(t))
	} else {
		dst = rawjson.AppendQuote(dst, text)
	}
	return append(dst, '}')
}

// declared reports whether a tool is sent: with tool_choice allowed_tools
// in auto mode, only the allowed ones are (§4.4, emulation).
func declared(ir *formats.Request, name string) bool {
	tc := &ir.ToolChoice
	if tc.Mode != formats.ToolChoiceAuto || tc.Allowed == nil {
		return true
	}
	for _, a := range tc.Allowed {
		if a == name {
			return true
		}
	}
	return false
}

func appendTools(b []byte, ir *formats.Request) ([]byte, *formats.Error) {
	n := 0
	for i := range ir.Tools {
		t := &ir.Tools[i]
		if !declared(ir, t.Name) {
			continue
		}
		name, ok := toGemini(t.Name)
		if !ok {
			return nil, ir.Reject(formats.FieldTools, "the function name '"+t.Name+"' is too long for this model's provider.")
		}
		if n == 0 {
			b = append(b, `,"tools":[{"functionDeclarations":[`...)
		} else {
			b = append(b, ',')
		}
		n++
		b = append(b, `{"name":`...)
		b = rawjson.AppendQuote(b, name)
		if t.Description != "" {
			b = append(b, `,"description":`...)
			b = rawjson.AppendQuote(b, t.Description)
		}
		if len(t.Parameters) > 0 {
			b = append(b, `,"parametersJsonSchema":`...)
			b = rawjson.Compact(b, t.Parameters)
		}
		b = append(b, '}')
	}
	if n > 0 {
		b = append(b, "]}]"...)
	}
	return b, nil
}

func appendToolConfig(b []byte, ir *formats.Request) ([]byte, *formats.Error) {
	tc := &ir.ToolChoice
	var mode string
	var names []string
	switch tc.Mode {
	case formats.ToolChoiceAuto:
		mode = "AUTO"
	case formats.ToolChoiceNone:
		mode = "NONE"
	case formats.ToolChoiceRequired:
		mode = "ANY"
		names = tc.Allowed
	case formats.ToolChoiceNamed:
		mode = "ANY"
		names = []string{tc.Name}
	default:
		return b, nil
	}
	b = append(b, `,"toolConfig":{"functionCallingConfig":{"mode":"`...)
	b = append(b, mode...)
	b = append(b, '"')
	if len(names) > 0 {
		b = append(b, `,"allowedFunctionNames":[`...)
		for i, n := range names {
			gn, ok := toGemini(n)
			if !ok {
				return nil, ir.Reject(formats.FieldToolChoice, "the function name '"+n+"' is too long for this model's provider.")
			}
			if i > 0 {
				b = append(b, ',')
			}
			b = rawjson.AppendQuote(b, gn)
		}
		b = append(b, ']')
	}
	return append(b, "}}"...), nil
}

// thinkingLevel maps an effort name to Gemini's thinkingLevel (§9: by
// level name); "" when it has none.
func thinkingLevel(effort string) string {
	switch strings.ToLower(effort) {
	case "minimal":
		return "MINIMAL"
	case "low":
		return "LOW"
	case "medium":
		return "MEDIUM"
	case "high", "xhigh", "max":
		return "HIGH"
	}
	return ""
}

func appendGenerationConfig(b []byte, ir *formats.Request) []byte {
	start := len(b)
	b = append(b, `,"generationConfig":{`...)
	open := len(b)
	sep := func() {
		if len(b) > open {
			b = append(b, ',')
		}
	}
	if ir.MaxTokens > 0 {
		sep()
		b = append(b, `"maxOutputTokens":`...)
		b = rawjson.AppendInt(b, int64(ir.MaxTokens))
	}
	float := func(name string, f *float64, omitZero bool) {
		if f == nil || omitZero && *f == 0 {
			return
		}
		sep()
		b = rawjson.AppendQuote(b, name)
		b = append(b, ':')
		b = rawjson.AppendFloat(b, *f)
	}
	float("temperature", ir.Temperature, false)
	float("topP", ir.TopP, false)
	if ir.TopK != nil && *ir.TopK > 0 {
		sep()
		b = append(b, `"topK":`...)
		b = rawjson.AppendInt(b, int64(*ir.TopK))
	}
	if ir.Seed != nil {
		sep()
		b = append(b, `"seed":`...)
		b = rawjson.AppendInt(b, int64(int32(uint32(*ir.Seed)))) //nolint:gosec // Gemini's seed is an int32: a larger seed wraps into it on purpose
	}
	float("presencePenalty", ir.PresencePenalty, true)
	float("frequencyPenalty", ir.FrequencyPenalty, true)
	if len(ir.Stop) > 0 {
		n := 0
		for _, s := range ir.Stop {
			if s == "" {
				continue
			}
			if n == 0 {
				sep()
				b = append(b, `"stopSequences":[`...)
			} else {
				b = append(b, ',')
			}
			n++
			b = rawjson.AppendQuote(b, s)
		}
		if n > 0 {
			b = append(b, ']')
		}
	}
	switch rf := &ir.ResponseFormat; rf.Type {
	case formats.FormatJSONObject:
		sep()
		b = append(b, `"responseMimeType":"application/json"`...)
	case formats.FormatJSONSchema:
		sep()
		b = append(b, `"responseMimeType":"application/json"`...)
		if len(rf.Schema) > 0 {
			b = append(b, `,"responseJsonSchema":`...)
			b = rawjson.Compact(b, rf.Schema)
		}
	}
	if r := ir.Reasoning; r != nil {
		budget, hasBudget, level := 0, false, ""
		switch {
		case r.Disabled:
			hasBudget = true
		case r.Effort != "":
			level = thinkingLevel(r.Effort)
			switch {
			case strings.EqualFold(r.Effort, "none"):
				hasBudget = true
			case level == "":
				ir.DropField(formats.FieldReasoning)
			}
		case r.Budget != 0:
			budget, hasBudget = r.Budget, true
		case r.Adaptive:
			budget, hasBudget = -1, true
		}
		if hasBudget || level != "" || r.IncludeThoughts {
			sep()
			b = append(b, `"thinkingConfig":{`...)
			k := len(b)
			if r.IncludeThoughts {
				b = append(b, `"includeThoughts":true`...)
			}
			if hasBudget {
				if len(b) > k {
					b = append(b, ',')
				}
				b = append(b, `"thinkingBudget":`...)
				b = rawjson.AppendInt(b, int64(budget))
			}
			if level != "" {
				if len(b) > k {
					b = append(b, ',')
				}
				b = append(b, `"thinkingLevel":"`...)
				b = append(b, level...)
				b = append(b, '"')
			}
			b = append(b, '}')
		}
	}
	if len(b) == open {
		return b[:start]
	}
	return append(b, '}')
}
