package openai

import (
	"crypto/sha256"
	"encoding/hex"
	"maps"
	"slices"
	"strings"

	"github.com/modelgate/modelgate/formats"
	"github.com/modelgate/modelgate/formats/internal/emit"
	"github.com/modelgate/modelgate/formats/rawjson"
)

// RenderChatRequest renders an IR request (from a client of another format) as
// a Chat Completions body for model. The output cap is always
// max_completion_tokens (set ir.MaxTokens to the cap the gateway allows first);
// a streamed request always asks for usage. What Chat Completions cannot take
// is rejected or dropped per docs/translation.md, "What cannot be mapped",
// drops being recorded in ir.Dropped.
func RenderChatRequest(ir *formats.Request, model string) ([]byte, *formats.Error) {
	if err := checkChat(ir); err != nil {
		return nil, err
	}
	ir.FillToolIDs("call_")
	b := make([]byte, 0, 1024)
	b = append(b, `{"model":`...)
	b = rawjson.AppendQuote(b, model)
	b = append(b, `,"messages":[`...)
	r := renderer{b: b}
	if len(ir.System) > 0 {
		r.textMessage("system", "", ir.System)
	}
	for i := range ir.Messages {
		if err := r.message(ir, &ir.Messages[i]); err != nil {
			return nil, err
		}
	}
	b = append(r.b, ']')

	if ir.Stream {
		b = append(b, `,"stream":true,"stream_options":{"include_usage":true}`...)
	}
	if ir.MaxTokens > 0 {
		b = append(b, `,"max_completion_tokens":`...)
		b = rawjson.AppendInt(b, int64(ir.MaxTokens))
	}
	b = appendFloatMember(b, "temperature", ir.Temperature)
	b = appendFloatMember(b, "top_p", ir.TopP)
	if ir.TopK != nil {
		ir.DropField(formats.FieldTopK)
	}
	b = appendFloatMember(b, "presence_penalty", ir.PresencePenalty)
	b = appendFloatMember(b, "frequency_penalty", ir.FrequencyPenalty)
	if ir.Seed != nil {
		b = append(b, `,"seed":`...)
		b = rawjson.AppendInt(b, *ir.Seed)
	}
	if len(ir.Stop) > 0 {
		b = append(b, `,"stop":[`...)
		for i, s := range ir.Stop {
			if i > 0 {
				b = append(b, ',')
			}
			b = rawjson.AppendQuote(b, s)
		}
		b = append(b, ']')
	}
	if ir.Logprobs {
		b = append(b, `,"logprobs":true`...)
		if ir.TopLogprobs != nil {
			b = append(b, `,"top_logprobs":`...)
			b = rawjson.AppendInt(b, int64(*ir.TopLogprobs))
		}
	}
	if len(ir.LogitBias) > 0 {
		b = append(b, `,"logit_bias":`...)
		b = rawjson.Compact(b, ir.LogitBias)
	}

	b = appendTools(b, ir)
	b = appendResponseFormat(b, &ir.ResponseFormat)
	if effort := reasoningEffort(ir.Reasoning); effort != "" {
		b = append(b, `,"reasoning_effort":`...)
		b = rawjson.AppendQuote(b, effort)
	}
	if ir.User != "" {
		b = append(b, `,"safety_identifier":`...)
		b = rawjson.AppendQuote(b, safetyIdentifier(ir.User))
	}
	if len(ir.Metadata) > 0 {
		b = append(b, `,"metadata":{`...)
		for i, k := range slices.Sorted(maps.Keys(ir.Metadata)) {
			if i > 0 {
				b = append(b, ',')
			}
			b = rawjson.AppendQuote(b, k)
			b = append(b, ':')
			b = rawjson.AppendQuote(b, ir.Metadata[k])
		}
		b = append(b, '}')
	}
	switch ir.ServiceTier {
	case "":
	case "auto", "default", "flex", "scale", "priority":
		b = append(b, `,"service_tier":`...)
		b = rawjson.AppendQuote(b, ir.ServiceTier)
	default:
		ir.DropField(formats.FieldServiceTier)
	}
	return append(b, '}'), nil
}

// checkChat rejects what Chat Completions cannot produce for this gateway.
func checkChat(ir *formats.Request) *formats.Error {
	if ir.N > 1 {
		return ir.Reject(formats.FieldN, "only one choice per request is supported when translating to this model's provider.")
	}
	if ir.AudioOutput {
		return ir.Reject(formats.FieldAudioOutput, "audio output is not supported for this model.")
	}
	if n := 0; len(ir.Stop) > 4 {
		for _, s := range ir.Stop {
			if s != "" {
				n++
			}
		}
		if n > 4 {
			return ir.Reject(formats.FieldStop, "at most 4 stop sequences are supported by this model's provider.")
		}
	}
	return nil
}

func appendFloatMember(b []byte, name string, f *float64) []byte {
	if f == nil {
		return b
	}
	b = append(b, ',')
	b = rawjson.AppendQuote(b, name)
	b = append(b, ':')
	return rawjson.AppendFloat(b, *f)
}

// reasoningEffort maps IR reasoning to reasoning_effort (docs/translation.md,
// "What cannot be mapped": budgets ≤4096 low, ≤16384 medium, else high).
func reasoningEffort(r *formats.Reasoning) string {
	switch {
	case r == nil || r.Disabled:
		return ""
	case r.Effort != "":
		return r.Effort
	case r.Budget > 16384:
		return "high"
	case r.Budget > 4096:
		return "medium"
	case r.Budget > 0:
		return "low"
	}
	return ""
}

type renderer struct {
	b     []byte
	count int
}

func (r *renderer) sep() {
	if r.count > 0 {
		r.b = append(r.b, ',')
	}
	r.count++
}

// textMessage renders a message of text parts, content as a string when
// there is one part.
func (r *renderer) textMessage(role, name string, parts []formats.Part) {
	r.sep()
	r.b = append(r.b, `{"role":`...)
	r.b = rawjson.AppendQuote(r.b, role)
	if name != "" {
		r.b = append(r.b, `,"name":`...)
		r.b = rawjson.AppendQuote(r.b, name)
	}
	r.b = append(r.b, `,"content":`...)
	texts := 0
	for i := range parts {
		if parts[i].Type == formats.PartText {
			texts++
		}
	}
	if texts == 1 {
		for i := range parts {
			if parts[i].Type == formats.PartText {
				r.b = rawjson.AppendQuote(r.b, parts[i].Text)
			}
		}
	} else {
		r.b = append(r.b, '[')
		k := 0
		for i := range parts {
			if parts[i].Type != formats.PartText {
				continue
			}
			if k > 0 {
				r.b = append(r.b, ',')
			}
			k++
			r.b = append(r.b, `{"type":"text","text":`...)
			r.b = rawjson.AppendQuote(r.b, parts[i].Text)
			r.b = append(r.b, '}')
		}
		r.b = append(r.b, ']')
	}
	r.b = append(r.b, '}')
}

func (r *renderer) message(ir *formats.Request, m *formats.Message) *formats.Error {
	switch m.Role {
	case formats.RoleSystem:
		r.textMessage("system", m.Name, m.Parts)
		return nil
	case formats.RoleAssistant:
		r.assistant(m)
		return nil
	case formats.RoleTool:
		return r.toolResults(ir, m)
	}
	return r.user(ir, m.Name, m.Parts)
}

// user renders a user message; media that OpenAI cannot read is rejected.
func (r *renderer) user(ir *formats.Request, name string, parts []formats.Part) *formats.Error {
	simple := true
	for i := range parts {
		if parts[i].Type != formats.PartText {
			simple = false
		}
	}
	if simple {
		r.textMessage("user", name, parts)
		return nil
	}
	r.sep()
	r.b = append(r.b, `{"role":"user"`...)
	if name != "" {
		r.b = append(r.b, `,"name":`...)
		r.b = rawjson.AppendQuote(r.b, name)
	}
	r.b = append(r.b, `,"content":[`...)
	k := 0
	for i := range parts {
		p := &parts[i]
		start := len(r.b)
		if k > 0 {
			r.b = append(r.b, ',')
		}
		switch p.Type {
		case formats.PartText, formats.PartRefusal:
			r.b = append(r.b, `{"type":"text","text":`...)
			r.b = rawjson.AppendQuote(r.b, p.Text)
			r.b = append(r.b, '}')
		case formats.PartImage:
			if err := r.image(ir, p.Media); err != nil {
				return err
			}
		case formats.PartAudio:
			m := p.Media
			format := audioFormat(m.MediaType)
			if m.Data == "" || format == "" {
				return ir.Reject(formats.FieldMessages, "audio input must be inline WAV or MP3 data for this model.")
			}
			r.b = append(r.b, `{"type":"input_audio","input_audio":{"data":`...)
			r.b = rawjson.AppendQuote(r.b, m.Data)
			r.b = append(r.b, `,"format":`...)
			r.b = rawjson.AppendQuote(r.b, format)
			r.b = append(r.b, "}}"...)
		case formats.PartFile:
			m := p.Media
			switch {
			case m.Text != "": // a plain-text document: its text
				r.b = append(r.b, `{"type":"text","text":`...)
				r.b = rawjson.AppendQuote(r.b, m.Text)
				r.b = append(r.b, '}')
			case m.Data != "":
				mt := m.MediaType
				if mt == "" {
					mt = "application/pdf"
				}
				name := m.Filename
				if name == "" {
					name = "document.pdf"
				}
				r.b = append(r.b, `{"type":"file","file":{"filename":`...)
				r.b = rawjson.AppendQuote(r.b, name)
				r.b = append(r.b, `,"file_data":`...)
				r.b = rawjson.AppendQuote(r.b, "data:"+mt+";base64,"+m.Data)
				r.b = append(r.b, "}}"...)
			default:
				return ir.Reject(formats.FieldMessages, "documents must be sent inline (file references and URLs cannot be read by this model's provider).")
			}
		default: // thinking and the like do not travel across vendors
			r.b = r.b[:start]
			continue
		}
		k++
	}
	r.b = append(r.b, "]}"...)
	return nil
}

func (r *renderer) image(ir *formats.Request, m *formats.Media) *formats.Error {
	var url string
	switch {
	case m.Data != "":
		mt := m.MediaType
		if mt == "" {
			mt = "image/png"
		}
		url = "data:" + mt + ";base64," + m.Data
	case m.URL != "":
		url = m.URL
	default:
		return ir.Reject(formats.FieldMessages, "images must be sent inline or by URL (file references cannot be read by this model's provider).")
	}
	r.b = append(r.b, `{"type":"image_url","image_url":{"url":`...)
	r.b = rawjson.AppendQuote(r.b, url)
	if m.Detail != "" {
		r.b = append(r.b, `,"detail":`...)
		r.b = rawjson.AppendQuote(r.b, m.Detail)
	}
	r.b = append(r.b, "}}"...)
	return nil
}

func audioFormat(mt string) string {
	switch strings.ToLower(mt) {
	case "audio/wav", "audio/x-wav", "audio/wave":
		return "wav"
	case "audio/mpeg", "audio/mp3":
		return "mp3"
	}
	return ""
}

// assistant renders text (concatenated), refusal and tool calls; thinking
// is dropped.
func (r *renderer) assistant(m *formats.Message) {
	r.sep()
	r.b = append(r.b, `{"role":"assistant"`...)
	if m.Name != "" {
		r.b = append(r.b, `,"name":`...)
		r.b = rawjson.AppendQuote(r.b, m.Name)
	}
	var text strings.Builder
	hasText, calls := false, 0
	refusal := ""
	for i := range m.Parts {
		switch p := &m.Parts[i]; p.Type {
		case formats.PartText:
			text.WriteString(p.Text)
			hasText = hasText || p.Text != ""
		case formats.PartRefusal:
			refusal = p.Text
		case formats.PartToolCall:
			calls++
		}
	}
	r.b = append(r.b, `,"content":`...)
	switch {
	case hasText:
		r.b = rawjson.AppendQuote(r.b, text.String())
	case calls > 0 || refusal != "":
		r.b = append(r.b, "null"...)
	default:
		r.b = append(r.b, `""`...)
	}
	if refusal != "" {
		r.b = append(r.b, `,"refusal":`...)
		r.b = rawjson.AppendQuote(r.b, refusal)
	}
	if calls > 0 {
		r.b = append(r.b, `,"tool_calls":[`...)
		k := 0
		for i := range m.Parts {
			if p := &m.Parts[i]; p.Type == formats.PartToolCall {
				if k > 0 {
					r.b = append(r.b, ',')
				}
				k++
				r.b = appendToolCall(r.b, p.ToolCall)
			}
		}
		r.b = append(r.b, ']')
	}
	r.b = append(r.b, '}')
}

// toolResults renders one tool message per result. Images inside results
// follow in a user message (OpenAI tool messages are text only); an error
// result is prefixed "Error: " (docs/translation.md, "Messages and roles").
func (r *renderer) toolResults(ir *formats.Request, m *formats.Message) *formats.Error {
	var media []formats.Part
	for i := range m.Parts {
		p := &m.Parts[i]
		if p.Type != formats.PartToolResult {
			continue
		}
		res := p.ToolResult
		var text strings.Builder
		if res.IsError {
			text.WriteString("Error: ")
		}
		media = emit.ToolResultText(&text, res, media)
		r.sep()
		r.b = append(r.b, `{"role":"tool","tool_call_id":`...)
		r.b = rawjson.AppendQuote(r.b, res.CallID)
		r.b = append(r.b, `,"content":`...)
		r.b = rawjson.AppendQuote(r.b, text.String())
		r.b = append(r.b, '}')
	}
	if len(media) > 0 {
		return r.user(ir, "", media)
	}
	return nil
}

func appendTools(b []byte, ir *formats.Request) []byte {
	if len(ir.Tools) > 0 {
		b = append(b, `,"tools":[`...)
		for i := range ir.Tools {
			t := &ir.Tools[i]
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"type":"function","function":{"name":`...)
			b = rawjson.AppendQuote(b, t.Name)
			if t.Description != "" {
				b = append(b, `,"description":`...)
				b = rawjson.AppendQuote(b, t.Description)
			}
			if len(t.Parameters) > 0 {
				b = append(b, `,"parameters":`...)
				b = rawjson.Compact(b, t.Parameters)
			}
			if t.Strict != nil {
				b = append(b, `,"strict":`...)
				b = rawjson.AppendBool(b, *t.Strict)
			}
			b = append(b, "}}"...)
		}
		b = append(b, ']')
	}
	tc := &ir.ToolChoice
	switch tc.Mode {
	case formats.ToolChoiceUnset:
	case formats.ToolChoiceNamed:
		b = append(b, `,"tool_choice":{"type":"function","function":{"name":`...)
		b = rawjson.AppendQuote(b, tc.Name)
		b = append(b, "}}"...)
	default:
		mode := "auto"
		switch tc.Mode {
		case formats.ToolChoiceNone:
			mode = "none"
		case formats.ToolChoiceRequired:
			mode = "required"
		}
		if tc.Allowed != nil && tc.Mode != formats.ToolChoiceNone {
			b = append(b, `,"tool_choice":{"type":"allowed_tools","allowed_tools":{"mode":`...)
			b = rawjson.AppendQuote(b, mode)
			b = append(b, `,"tools":[`...)
			for i, name := range tc.Allowed {
				if i > 0 {
					b = append(b, ',')
				}
				b = append(b, `{"type":"function","function":{"name":`...)
				b = rawjson.AppendQuote(b, name)
				b = append(b, "}}"...)
			}
			b = append(b, "]}}"...)
		} else {
			b = append(b, `,"tool_choice":`...)
			b = rawjson.AppendQuote(b, mode)
		}
	}
	if ir.ParallelToolCalls != nil && len(ir.Tools) > 0 {
		b = append(b, `,"parallel_tool_calls":`...)
		b = rawjson.AppendBool(b, *ir.ParallelToolCalls)
	}
	return b
}

func appendResponseFormat(b []byte, rf *formats.ResponseFormat) []byte {
	switch rf.Type {
	case formats.FormatText:
		return append(b, `,"response_format":{"type":"text"}`...)
	case formats.FormatJSONObject:
		return append(b, `,"response_format":{"type":"json_object"}`...)
	case formats.FormatJSONSchema:
		name := rf.Name
		if name == "" {
			name = "response"
		}
		b = append(b, `,"response_format":{"type":"json_schema","json_schema":{"name":`...)
		b = rawjson.AppendQuote(b, name)
		if rf.Description != "" {
			b = append(b, `,"description":`...)
			b = rawjson.AppendQuote(b, rf.Description)
		}
		if len(rf.Schema) > 0 {
			b = append(b, `,"schema":`...)
			b = rawjson.Compact(b, rf.Schema)
		}
		if rf.Strict != nil {
			b = append(b, `,"strict":`...)
			b = rawjson.AppendBool(b, *rf.Strict)
		}
		return append(b, "}}"...)
	}
	return b
}

// maxSafetyIdentifier is the longest safety_identifier sent as is; OpenAI
// limits the field, and other vendors' user ids (Claude Code's run to about
// 150 characters) can be longer.
const maxSafetyIdentifier = 64

// safetyIdentifier keeps a user id short enough for OpenAI: a longer one is
// replaced by a hash of it, which identifies the same user just as well.
func safetyIdentifier(user string) string {
	if len(user) <= maxSafetyIdentifier {
		return user
	}
	sum := sha256.Sum256([]byte(user))
	return "sha256-" + hex.EncodeToString(sum[:24])
}
