package formats

import (
	"strconv"
	"strings"
)

// The internal representation (IR) of a generation request. Each vendor package
// parses its client format into a Request and renders a Request into its
// upstream format (docs/translation.md, "Principles", "Request mapping"). The
// IR holds what at least two formats can express; a feature only one vendor has
// is passed through on same-format routes and dropped (and named in Dropped)
// when translating.
//
// Optional settings are pointers or carry a zero value that no format
// accepts, so that "absent" is never confused with zero.

// Role is the author of a message.
type Role uint8

// The roles. Tool results travel in RoleTool messages (an OpenAI tool
// message; an Anthropic user turn of tool_result blocks; a Gemini user turn
// of functionResponse parts).
const (
	RoleUser Role = iota
	RoleAssistant
	RoleTool
	// RoleSystem is a system or developer message in the middle of the
	// conversation (leading ones go to Request.System). Formats with a
	// single system prompt hoist it there (documented emulation).
	RoleSystem
)

var roleNames = [...]string{RoleUser: "user", RoleAssistant: "assistant", RoleTool: "tool", RoleSystem: "system"}

// String is the role's OpenAI name.
func (r Role) String() string {
	if int(r) < len(roleNames) {
		return roleNames[r]
	}
	return "unknown"
}

// PartType discriminates a Part.
type PartType uint8

// The part types.
const (
	PartText PartType = iota
	PartImage
	PartFile // a document (PDF, text)
	PartAudio
	PartToolCall
	PartToolResult
	PartThinking // reasoning text, with an opaque signature
	PartRedactedThinking
	PartRefusal
)

// Part is one piece of a message's content.
type Part struct {
	Type PartType
	// Text is the text of PartText, PartRefusal and PartThinking.
	Text string
	// Signature is PartThinking's opaque signature (Anthropic) or
	// PartRedactedThinking's data; echoed only toward the same vendor.
	Signature string
	// Media is set for PartImage, PartFile and PartAudio.
	Media *Media
	// ToolCall is set for PartToolCall.
	ToolCall *ToolCall
	// ToolResult is set for PartToolResult.
	ToolResult *ToolResult
}

// Media is an image, document or audio clip: inline data, a URL, or a
// vendor file reference.
type Media struct {
	// MediaType is the MIME type ("image/png", "application/pdf",
	// "audio/wav"), when known.
	MediaType string
	// Data is the base64 payload (standard alphabet, no data: prefix).
	Data string
	// URL is a remote http(s) address.
	URL string
	// FileID is a vendor file reference (OpenAI file_id, Gemini fileUri,
	// Anthropic file_id); other vendors cannot read it.
	FileID string
	// Filename is the document's name, when given.
	Filename string
	// Detail is the image detail hint (auto, low, high).
	Detail string
	// Text is the content of a plain-text document (Anthropic text source).
	Text string
}

// DataURL renders inline data as a data: URL.
func (m *Media) DataURL() string {
	return "data:" + m.MediaType + ";base64," + m.Data
}

// ParseDataURL splits "data:<type>;base64,<data>". ok is false for anything
// else (including non-base64 data URLs).
func ParseDataURL(u string) (mediaType, data string, ok bool) {
	rest, ok := strings.CutPrefix(u, "data:")
	if !ok {
		return "", "", false
	}
	meta, data, ok := strings.Cut(rest, ",")
	if !ok {
		return "", "", false
	}
	meta, ok = strings.CutSuffix(meta, ";base64")
	if !ok {
		return "", "", false
	}
	if i := strings.IndexByte(meta, ';'); i >= 0 { // drop parameters such as charset
		meta = meta[:i]
	}
	return strings.ToLower(meta), data, true
}

// ToolCall is a call the model made.
type ToolCall struct {
	// ID links the call to its result. It may be empty for a Gemini call
	// without id; renderers then synthesize a deterministic one.
	ID   string
	Name string
	// Arguments is the JSON text of the arguments (an OpenAI arguments
	// string, or the compact JSON of an Anthropic/Gemini object). It is not
	// guaranteed to be valid JSON.
	Arguments string
	// Signature is Gemini's thoughtSignature of the functionCall part.
	Signature string
}

// ToolResult is the answer to a tool call.
type ToolResult struct {
	CallID string
	// Name is the called tool's name, when known (Gemini needs it).
	Name string
	// Parts are text, image or file parts.
	Parts   []Part
	IsError bool
}

// Message is one turn of the conversation.
type Message struct {
	Role Role
	// Name is the OpenAI participant name (dropped by other formats).
	Name  string
	Parts []Part
}

// Tool is a function the model may call.
type Tool struct {
	Name        string
	Description string
	// Parameters is the JSON Schema of the arguments (raw JSON), nil when
	// the tool takes none.
	Parameters []byte
	// Strict asks for schema-exact arguments (OpenAI; Anthropic newer
	// models).
	Strict *bool
}

// ToolChoiceMode says whether and how the model must call tools.
type ToolChoiceMode uint8

// The tool-choice modes (docs/translation.md, "Tool choice").
const (
	ToolChoiceUnset    ToolChoiceMode = iota
	ToolChoiceAuto                    // the model decides
	ToolChoiceNone                    // never call a tool
	ToolChoiceRequired                // call at least one tool (ANT any, GEM ANY)
	ToolChoiceNamed                   // call the tool named Name
)

// ToolChoice is the request's tool choice.
type ToolChoice struct {
	Mode ToolChoiceMode
	// Name is the forced tool of ToolChoiceNamed.
	Name string
	// Allowed restricts Auto or Required to these tools (OpenAI
	// allowed_tools, Gemini allowedFunctionNames); nil means all.
	Allowed []string
}

// ResponseFormatType is the requested output shape.
type ResponseFormatType uint8

// The response formats.
const (
	FormatUnset ResponseFormatType = iota
	FormatText
	FormatJSONObject // any JSON object
	FormatJSONSchema // JSON matching Schema
)

// ResponseFormat is structured-output configuration.
type ResponseFormat struct {
	Type        ResponseFormatType
	Name        string
	Description string
	Schema      []byte // raw JSON Schema of FormatJSONSchema
	Strict      *bool
}

// Reasoning configures thinking / reasoning effort.
type Reasoning struct {
	// Effort is a level: none, minimal, low, medium, high, xhigh, max
	// (OpenAI reasoning_effort, Anthropic output_config.effort, Gemini
	// thinkingLevel lower-cased). Empty when given as a budget.
	Effort string
	// Budget is a token budget (Anthropic budget_tokens, Gemini
	// thinkingBudget); 0 when unset, -1 for Gemini's dynamic budget.
	Budget int
	// Disabled is an explicit "no thinking" (Anthropic disabled, Gemini
	// budget 0).
	Disabled bool
	// Adaptive is Anthropic's adaptive thinking.
	Adaptive bool
	// IncludeThoughts asks for reasoning text in the answer (Gemini
	// includeThoughts).
	IncludeThoughts bool
}

// Field names a request feature that a target format may have to drop or
// reject; Request.Param gives the client's own name for it.
type Field uint8

// The fields a renderer may name in an error or in Dropped.
const (
	FieldModel Field = iota
	FieldMessages
	FieldSystem
	FieldMaxTokens
	FieldTemperature
	FieldTopP
	FieldTopK
	FieldStop
	FieldN
	FieldSeed
	FieldPresencePenalty
	FieldFrequencyPenalty
	FieldLogprobs
	FieldTopLogprobs
	FieldLogitBias
	FieldTools
	FieldToolChoice
	FieldParallelToolCalls
	FieldResponseFormat
	FieldReasoning
	FieldUser
	FieldMetadata
	FieldServiceTier
	FieldAudioOutput
	FieldCount // number of fields
)

// FieldNames maps each Field to a format's own parameter name.
type FieldNames [FieldCount]string

// DefaultFieldNames are the IR's own names (OpenAI Chat's).
var DefaultFieldNames = FieldNames{
	FieldModel:             "model",
	FieldMessages:          "messages",
	FieldSystem:            "system",
	FieldMaxTokens:         "max_tokens",
	FieldTemperature:       "temperature",
	FieldTopP:              "top_p",
	FieldTopK:              "top_k",
	FieldStop:              "stop",
	FieldN:                 "n",
	FieldSeed:              "seed",
	FieldPresencePenalty:   "presence_penalty",
	FieldFrequencyPenalty:  "frequency_penalty",
	FieldLogprobs:          "logprobs",
	FieldTopLogprobs:       "top_logprobs",
	FieldLogitBias:         "logit_bias",
	FieldTools:             "tools",
	FieldToolChoice:        "tool_choice",
	FieldParallelToolCalls: "parallel_tool_calls",
	FieldResponseFormat:    "response_format",
	FieldReasoning:         "reasoning_effort",
	FieldUser:              "user",
	FieldMetadata:          "metadata",
	FieldServiceTier:       "service_tier",
	FieldAudioOutput:       "modalities",
}

// With returns a copy of n with some names changed (a vendor's names are
// the defaults but for a few).
func (n FieldNames) With(changes map[Field]string) FieldNames {
	for f, name := range changes {
		n[f] = name
	}
	return n
}

// Request is a generation request in the IR.
type Request struct {
	// Model is the model the client asked for (the service model id).
	Model string
	// System is the system prompt: text parts, in order.
	System []Part
	// Messages is the conversation, oldest first, without the leading
	// system messages.
	Messages []Message

	Tools      []Tool
	ToolChoice ToolChoice
	// ParallelToolCalls false allows at most one call per turn.
	ParallelToolCalls *bool

	// MaxTokens is the output cap; 0 when the client gave none.
	MaxTokens int
	// Sampling.
	Temperature      *float64
	TopP             *float64
	TopK             *int
	Stop             []string // nil when absent
	Seed             *int64
	PresencePenalty  *float64
	FrequencyPenalty *float64
	// N is the number of choices; 0 when absent. The IR answer has one
	// choice, so renderers reject N > 1.
	N int
	// Logprobs asks for token log-probabilities; TopLogprobs for
	// alternatives.
	Logprobs    bool
	TopLogprobs *int
	// LogitBias is OpenAI's token bias map (raw JSON), nil when absent.
	LogitBias []byte
	// AudioOutput is set when the client asked for audio output.
	AudioOutput bool

	Stream       bool
	IncludeUsage bool // the client asked for usage in the stream (OpenAI)

	ResponseFormat ResponseFormat
	Reasoning      *Reasoning

	// User is the end-user id (OpenAI safety_identifier/user, Anthropic
	// metadata.user_id).
	User string
	// Metadata is OpenAI's string map; other vendors drop it.
	Metadata    map[string]string
	ServiceTier string

	// StructuredOutputs says that the routed model takes a JSON schema for
	// its output natively (Anthropic output_config.format). The caller sets
	// it from the model's configuration before rendering; a renderer whose
	// vendor's support varies by model emulates json_schema otherwise
	// (docs/translation.md, "What cannot be mapped").
	StructuredOutputs bool

	// Names maps Fields to the client format's parameter names; nil means
	// DefaultFieldNames.
	Names *FieldNames

	// Dropped lists the client's fields that were not carried to the
	// upstream, for the x-modelgate-dropped header.
	Dropped []string
	// droppedMore holds the distinct dropped names past MaxDroppedNames.
	droppedMore map[string]struct{}
}

// Param is the client's name for a field.
func (r *Request) Param(f Field) string {
	if r.Names != nil && r.Names[f] != "" {
		return r.Names[f]
	}
	return DefaultFieldNames[f]
}

// Drop records a dropped field (once). The first MaxDroppedNames distinct
// names are kept for the header; further ones are only counted.
func (r *Request) Drop(name string) {
	for _, d := range r.Dropped {
		if d == name {
			return
		}
	}
	if len(r.Dropped) < MaxDroppedNames {
		r.Dropped = append(r.Dropped, name)
		return
	}
	if r.droppedMore == nil {
		r.droppedMore = make(map[string]struct{})
	}
	r.droppedMore[name] = struct{}{}
}

// DropField records a dropped field by its client name.
func (r *Request) DropField(f Field) { r.Drop(r.Param(f)) }

// DroppedHeader is the x-modelgate-dropped header value ("" when nothing
// was dropped): the names, made safe for a header, bounded in length, and
// a count of those left out (DroppedHeaderValue).
func (r *Request) DroppedHeader() string {
	return DroppedHeaderValue(r.Dropped, len(r.droppedMore))
}

// Reject is the 400 for a field the target cannot honour.
func (r *Request) Reject(f Field, why string) *Error {
	p := r.Param(f)
	return InvalidRequest(p, "Unsupported parameter '"+p+"': "+why)
}

// ToolName returns the name of the tool call with the given id found in the
// conversation so far, or "".
func (r *Request) ToolName(callID string) string {
	for i := len(r.Messages) - 1; i >= 0; i-- {
		for j := range r.Messages[i].Parts {
			if p := &r.Messages[i].Parts[j]; p.Type == PartToolCall && p.ToolCall.ID == callID {
				return p.ToolCall.Name
			}
		}
	}
	return ""
}

// FillToolIDs gives every tool call without an id a deterministic one,
// prefix + "<message>_<part>" (Gemini calls may have none), and pairs every
// tool result without a call id with the earliest unanswered call of the
// same name before it (Gemini pairs by name and order). Renderers whose
// format needs ids call it first; it is idempotent.
func (r *Request) FillToolIDs(prefix string) {
	type pending struct {
		name, id string
		used     bool
	}
	var calls []pending
	for i := range r.Messages {
		parts := r.Messages[i].Parts
		for j := range parts {
			p := &parts[j]
			switch p.Type {
			case PartToolCall:
				if p.ToolCall.ID == "" {
					p.ToolCall.ID = prefix + strconv.Itoa(i) + "_" + strconv.Itoa(j)
				}
				calls = append(calls, pending{name: p.ToolCall.Name, id: p.ToolCall.ID})
			case PartToolResult:
				res := p.ToolResult
				if res.CallID != "" {
					for k := range calls {
						if calls[k].id == res.CallID {
							calls[k].used = true
							break
						}
					}
					continue
				}
				for k := range calls {
					if !calls[k].used && calls[k].name == res.Name {
						calls[k].used = true
						res.CallID = calls[k].id
						break
					}
				}
			}
		}
	}
}
