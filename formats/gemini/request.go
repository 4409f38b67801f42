package gemini

import (
	"errors"
	"strconv"
	"strings"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/modelgate/modelgate/formats"
	"github.com/modelgate/modelgate/formats/internal/jsonval"
	"github.com/modelgate/modelgate/formats/internal/walk"
	"github.com/modelgate/modelgate/formats/rawjson"
)

// Token bounds beyond formats.InputSize: what a Gemini request can make the
// model read without the bytes being in the body.
const (
	// refTokens bounds one file reference (fileData that is not an image:
	// video, audio, PDF uploaded to the Files API, YouTube URLs) and one
	// cachedContent: Gemini's input window (1,048,576 tokens on current
	// models) holds the whole prompt, so no single reference can cost more.
	refTokens = 1 << 20
	// builtinToolTokens is added per built-in tool offered (googleSearch,
	// urlContext, codeExecution…): what they feed back to the model is
	// billed as input (toolUsePromptTokenCount). It is an allowance, not a
	// bound: a larger read marks the row over_hold.
	builtinToolTokens = 32768
	// maxDeclarations is Gemini's limit on function declarations.
	maxDeclarations = 512
)

// GenerateRequest is a validated generateContent (or countTokens) request.
// It keeps the body, which the caller must not modify while the
// GenerateRequest is in use.
type GenerateRequest struct {
	// Model is the requested (service) model id, from the URL.
	Model string
	// Stream is true for :streamGenerateContent.
	Stream bool

	candidates      int
	maxOutputTokens int
	size            formats.InputSize
	refs            int64 // non-image file references, cachedContent
	builtins        int64 // built-in tools offered
	body            []byte
	gen             []byte // the GenerateContentRequest: body, or countTokens' generateContentRequest
	count           bool   // a countTokens request
	contentsOnly    bool   // countTokens' {"contents":[…]} form
	gated           []formats.Gated
}

// Gated lists the request's built-in tools with fees (Google Search
// grounding, URL context, Google Maps) and its uses of state in the
// operator's project (cachedContent, fileData, fileSearch), for the
// gateway's policy.
func (r *GenerateRequest) Gated() []formats.Gated { return r.gated }

// Choices is generationConfig.candidateCount (1 when absent): the output a
// request may produce is Choices times its output cap.
func (r *GenerateRequest) Choices() int { return r.candidates }

// MaxTokens is generationConfig.maxOutputTokens; ok is false when the
// client gave none.
func (r *GenerateRequest) MaxTokens() (n int, ok bool) {
	return r.maxOutputTokens, r.maxOutputTokens > 0
}

// InputSize is what the input bound is computed from (file references and
// built-in tools come on top, see InputBound).
func (r *GenerateRequest) InputSize() formats.InputSize { return r.size }

// InputBound is a generous upper bound of the input tokens for any
// tokenizer: formats.InputSize.Bound (text bytes, per-content and per-tool
// allowances, inline media) plus Gemini's input window for each file
// reference and cachedContent, and an allowance per built-in tool.
func (r *GenerateRequest) InputBound() int64 {
	return r.size.Bound(0) + r.refs*refTokens + r.builtins*builtinToolTokens
}

// InputEstimate is a plausible input token count, for usage rows when the
// upstream reported none.
func (r *GenerateRequest) InputEstimate() int64 {
	return r.size.Estimate() + r.refs*1500
}

// Body is the request body the GenerateRequest was parsed from.
func (r *GenerateRequest) Body() []byte { return r.body }

// Top-level members the parser knows. Anything else is passed through on
// same-format routes and dropped (and named) when translating.
const (
	fContents = iota
	fSystem
	fGeneration
	fTools
	fToolConfig
	fSafety
	fCached
	fServiceTier
	fModel
	nTop
)

// topSnake are the proto names used in error paths.
var topSnake = [nTop]string{
	fContents:    "contents",
	fSystem:      "system_instruction",
	fGeneration:  "generation_config",
	fTools:       "tools",
	fToolConfig:  "tool_config",
	fSafety:      "safety_settings",
	fCached:      "cached_content",
	fServiceTier: "service_tier",
	fModel:       "model",
}

func topField(name []byte) int {
	switch string(name) {
	case "contents":
		return fContents
	case "systemInstruction", "system_instruction":
		return fSystem
	case "generationConfig", "generation_config":
		return fGeneration
	case "tools":
		return fTools
	case "toolConfig", "tool_config":
		return fToolConfig
	case "safetySettings", "safety_settings":
		return fSafety
	case "cachedContent", "cached_content":
		return fCached
	case "serviceTier", "service_tier":
		return fServiceTier
	case "model":
		return fModel
	}
	return -1
}

// geminiNames are the Gemini client's names for the IR fields (lowerCamelCase
// JSON paths), used when another format's renderer rejects or drops one.
var geminiNames = formats.DefaultFieldNames.With(map[formats.Field]string{
	formats.FieldMessages:          "contents",
	formats.FieldSystem:            "systemInstruction",
	formats.FieldMaxTokens:         "generationConfig.maxOutputTokens",
	formats.FieldTemperature:       "generationConfig.temperature",
	formats.FieldTopP:              "generationConfig.topP",
	formats.FieldTopK:              "generationConfig.topK",
	formats.FieldStop:              "generationConfig.stopSequences",
	formats.FieldN:                 "generationConfig.candidateCount",
	formats.FieldSeed:              "generationConfig.seed",
	formats.FieldPresencePenalty:   "generationConfig.presencePenalty",
	formats.FieldFrequencyPenalty:  "generationConfig.frequencyPenalty",
	formats.FieldLogprobs:          "generationConfig.responseLogprobs",
	formats.FieldTopLogprobs:       "generationConfig.logprobs",
	formats.FieldLogitBias:         "logitBias",
	formats.FieldToolChoice:        "toolConfig.functionCallingConfig",
	formats.FieldParallelToolCalls: "parallelToolCalls",
	formats.FieldResponseFormat:    "generationConfig.responseMimeType",
	formats.FieldReasoning:         "generationConfig.thinkingConfig",
	formats.FieldServiceTier:       "serviceTier",
	formats.FieldAudioOutput:       "generationConfig.responseModalities",
})

// ParseGenerateRequest validates a generateContent body the way Google
// does: a 400 (INVALID_ARGUMENT) names the offending field in its message
// and in Param, as a proto path ("contents[1].parts[0].inline_data.data").
// Field names are accepted in lowerCamelCase and snake_case, enums in any
// case, bytes in both base64 alphabets; unknown fields are allowed. model
// (from the URL path) and stream (the method) are the caller's. The body
// must stay unmodified while the result is in use.
func ParseGenerateRequest(body []byte, model string, stream bool) (*GenerateRequest, *formats.Error) {
	if !jsontext.Value(body).IsValid() {
		return nil, syntaxError(body)
	}
	req := &GenerateRequest{Model: model, Stream: stream, candidates: 1, body: body, gen: body}
	w := walker{Reader: newReader("GenerateContentRequest"), req: req}
	if err := w.top(body); err != nil {
		return nil, err
	}
	return req, nil
}

// ParseCountTokensRequest validates a countTokens body:
// {"contents":[…]} or {"generateContentRequest":{…}} (a whole
// GenerateContentRequest). The result has no output cap and Choices 1.
func ParseCountTokensRequest(body []byte, model string) (*GenerateRequest, *formats.Error) {
	if !jsontext.Value(body).IsValid() {
		return nil, syntaxError(body)
	}
	req := &GenerateRequest{Model: model, candidates: 1, body: body, count: true}
	w := walker{Reader: newReader("CountTokensRequest"), req: req}
	if err := w.countTop(body); err != nil {
		return nil, err
	}
	return req, nil
}

// countTop finds which form a countTokens body has and walks it.
func (w *walker) countTop(body []byte) *formats.Error {
	if rawjson.Kind(rawjson.TrimSpace(body)) != '{' {
		return w.errType("", rawjson.TrimSpace(body), "object")
	}
	var contents, gcr []byte
	it := rawjson.Object(body, 0)
	var nameBuf [64]byte
	for it.Next() {
		switch string(key(&it, nameBuf[:0])) {
		case "contents":
			contents = it.Value()
		case "generateContentRequest", "generate_content_request":
			gcr = it.Value()
		}
	}
	req := w.req
	switch {
	case !absent(gcr) && !absent(contents):
		return w.errValue("generate_content_request", "contents and generate_content_request cannot both be set.")
	case !absent(gcr):
		if rawjson.Kind(gcr) != '{' {
			return w.errType("generate_content_request", gcr, "object")
		}
		w.Push("generate_content_request")
		w.base = 1
		req.gen = gcr
		return w.top(gcr)
	}
	req.gen, req.contentsOnly, w.contentsOnly = body, true, true
	return w.top(body)
}

// ToIR converts the request to the IR for an upstream of another format.
// Fields no other format can express are dropped and listed in Dropped
// (safetySettings, built-in tools, unknown fields); what would change the
// meaning of the request is rejected (cachedContent, fileData, video, image
// output, text/x.enum). Function names outside ^[a-zA-Z0-9_-]{1,64}$ are
// mapped reversibly (see names.go); the stream encoder and
// RenderGenerateResponse restore them.
func (r *GenerateRequest) ToIR() (*formats.Request, *formats.Error) {
	ir := &formats.Request{Model: r.Model, Stream: r.Stream, Names: &geminiNames}
	tmp := GenerateRequest{Model: r.Model, candidates: 1, body: r.body, gen: r.gen, count: r.count, contentsOnly: r.contentsOnly}
	w := walker{Reader: newReader("GenerateContentRequest"), req: &tmp, ir: ir, contentsOnly: r.contentsOnly}
	if r.count {
		w.Scope = "CountTokensRequest"
		if !r.contentsOnly {
			w.Push("generate_content_request")
			w.base = 1
		}
	}
	if err := w.top(r.gen); err != nil {
		return nil, err
	}
	unpairOrphans(ir)
	return ir, nil
}

// unpairOrphans clears result call ids that match no call, so that
// FillToolIDs pairs those results by name and order (a Gemini client may
// put ids on responses only).
func unpairOrphans(ir *formats.Request) {
	for i := range ir.Messages {
		for j := range ir.Messages[i].Parts {
			p := &ir.Messages[i].Parts[j]
			if p.Type != formats.PartToolResult || p.ToolResult.CallID == "" {
				continue
			}
			if ir.ToolName(p.ToolResult.CallID) == "" {
				p.ToolResult.CallID = ""
			}
		}
	}
}

// syntaxError explains why a body is not valid JSON, in Google's words.
func syntaxError(body []byte) *formats.Error {
	const prefix = "Invalid JSON payload received."
	err := walk.SyntaxError(body)
	var se *jsontext.SyntacticError
	if errors.As(err, &se) {
		param := walk.PointerParam(se.JSONPointer)
		if errors.Is(se.Err, jsontext.ErrDuplicateName) {
			return invalid(param, prefix+" Duplicate field '"+param+"'.")
		}
		msg := prefix
		if se.Err != nil {
			msg += " " + se.Err.Error() + " at byte " + strconv.FormatInt(se.ByteOffset, 10) + "."
		}
		return invalid("", msg)
	}
	if strings.Contains(err.Error(), "EOF") {
		return invalid("", prefix+" Unexpected end of input.")
	}
	return invalid("", prefix)
}

// newReader is the walk.Reader of a request whose message is scope.
func newReader(scope string) walk.Reader {
	r := walk.New(walk.Brackets, dialect)
	r.Scope, r.NullMissing, r.QuotedNumbers = scope, true, true
	return r
}

// walker validates a request body (known to be syntactically valid JSON)
// and, when ir is set, builds the IR at the same time, so that validation
// and translation can never disagree.
type walker struct {
	walk.Reader
	req *GenerateRequest
	ir  *formats.Request
	// base is the path depth of the GenerateContentRequest (1 inside
	// countTokens' generateContentRequest).
	base int
	// contentsOnly: countTokens' {"contents"} form, where the other
	// GenerateContentRequest fields do not exist.
	contentsOnly bool
	decls        int // function declarations so far

	// IR state: the parts of the content being walked (one per wire part,
	// skipPart for those that carry nothing).
	scratch []formats.Part
}

// skipPart marks a scratch part that is not carried to the IR.
const skipPart formats.PartType = 255

// dupError reports a field given twice (in both spellings).
func (w *walker) dupError(name string) *formats.Error {
	param := w.Param(name)
	return invalid(param, "Invalid JSON payload received. Duplicate field '"+param+"'.")
}

// reject is the 400 for a valid field that the routed upstream cannot take.
func (w *walker) reject(child, why string) *formats.Error {
	param := w.Param(child)
	return invalid(param, "Unsupported parameter '"+param+"': "+why)
}

// gate records a hosted tool or a use of upstream state on the validation
// walk (the IR walk repeats it).
func (w *walker) gate(g formats.Gated) {
	if w.ir == nil {
		w.req.gated = append(w.req.gated, g)
	}
}

// drop records a dropped field by its client (camelCase) path.
func (w *walker) drop(name string) {
	if w.ir != nil {
		w.ir.Drop(name)
	}
}

func (w *walker) top(b []byte) *formats.Error {
	if rawjson.Kind(rawjson.TrimSpace(b)) != '{' {
		return w.errType("", rawjson.TrimSpace(b), "object")
	}
	var f [nTop][]byte
	var seen [nTop]bool
	var nameBuf [64]byte
	var dupErr, contentsErr, toolsErr *formats.Error
	nContents := -1
	it := rawjson.Object(b, 0)
	for it.NextLazy() {
		name := key(&it, nameBuf[:0])
		i := topField(name)
		if w.contentsOnly && i != fContents {
			i = -1
		}
		if i >= 0 {
			if seen[i] && dupErr == nil { //nolint:gosec // topField returns -1 or a field below nTop
				dupErr = w.dupError(topSnake[i])
			}
			seen[i] = true //nolint:gosec // i is below nTop here
		}
		switch i {
		case fContents:
			nContents, contentsErr = w.contents(&it)
			w.Truncate(w.base)
		case fTools:
			toolsErr = w.tools(&it)
			w.Truncate(w.base)
		case -1:
			if w.ir != nil && !w.contentsOnly {
				w.ir.Drop(string(name))
			}
		default:
			f[i] = it.Value() //nolint:gosec // i is below nTop here
		}
	}
	if it.Err() != nil {
		return invalid("", "Invalid JSON payload received.")
	}
	if dupErr != nil {
		return dupErr
	}
	switch {
	case contentsErr != nil:
		return contentsErr
	case nContents <= 0:
		return w.errMissing("contents")
	}
	if err := w.systemInstruction(f[fSystem]); err != nil {
		return err
	}
	if err := w.generationConfig(f[fGeneration]); err != nil {
		return err
	}
	if toolsErr != nil {
		return toolsErr
	}
	if err := w.toolConfig(f[fToolConfig]); err != nil {
		return err
	}
	if err := w.safetySettings(f[fSafety]); err != nil {
		return err
	}
	if ok, err := w.OptString("cached_content", f[fCached]); err != nil {
		return err
	} else if ok {
		w.req.refs++
		if w.ir != nil {
			return w.reject("cached_content", "it refers to a Gemini cache that this model's provider cannot read.")
		}
		w.gate(formats.Gated{State: formats.StateCachedContent, Param: w.Param("cached_content"), Tool: -1})
	}
	if ok, err := w.OptString("service_tier", f[fServiceTier]); err != nil {
		return err
	} else if ok {
		w.drop("serviceTier")
	}
	if _, err := w.OptString("model", f[fModel]); err != nil {
		return err
	}
	return nil
}

// generationConfig members.
const (
	gStop = iota
	gMime
	gSchema
	gJSONSchema
	gModalities
	gCandidates
	gMaxTokens
	gTemperature
	gTopP
	gTopK
	gSeed
	gPresence
	gFrequency
	gResponseLogprobs
	gLogprobs
	gThinking
	nGen
)

var genSnake = [nGen]string{
	gStop:             "stop_sequences",
	gMime:             "response_mime_type",
	gSchema:           "response_schema",
	gJSONSchema:       "response_json_schema",
	gModalities:       "response_modalities",
	gCandidates:       "candidate_count",
	gMaxTokens:        "max_output_tokens",
	gTemperature:      "temperature",
	gTopP:             "top_p",
	gTopK:             "top_k",
	gSeed:             "seed",
	gPresence:         "presence_penalty",
	gFrequency:        "frequency_penalty",
	gResponseLogprobs: "response_logprobs",
	gLogprobs:         "logprobs",
	gThinking:         "thinking_config",
}

func genField(name []byte) int {
	switch string(name) {
	case "stopSequences", "stop_sequences":
		return gStop
	case "responseMimeType", "response_mime_type":
		return gMime
	case "responseSchema", "response_schema":
		return gSchema
	case "responseJsonSchema", "response_json_schema", "_responseJsonSchema":
		return gJSONSchema
	case "responseModalities", "response_modalities":
		return gModalities
	case "candidateCount", "candidate_count":
		return gCandidates
	case "maxOutputTokens", "max_output_tokens":
		return gMaxTokens
	case "temperature":
		return gTemperature
	case "topP", "top_p":
		return gTopP
	case "topK", "top_k":
		return gTopK
	case "seed":
		return gSeed
	case "presencePenalty", "presence_penalty":
		return gPresence
	case "frequencyPenalty", "frequency_penalty":
		return gFrequency
	case "responseLogprobs", "response_logprobs":
		return gResponseLogprobs
	case "logprobs":
		return gLogprobs
	case "thinkingConfig", "thinking_config":
		return gThinking
	}
	return -1
}

var mimeTypes = []string{"TEXT/PLAIN", "APPLICATION/JSON", "APPLICATION/XML", "APPLICATION/YAML", "TEXT/X.ENUM"}

var modalities = []string{"MODALITY_UNSPECIFIED", "TEXT", "IMAGE", "AUDIO"}

var thinkingLevels = []string{"THINKING_LEVEL_UNSPECIFIED", "MINIMAL", "LOW", "MEDIUM", "HIGH"}

func (w *walker) generationConfig(v []byte) *formats.Error {
	if ok, err := w.OptObject("generation_config", v); !ok {
		return err
	}
	w.Push("generation_config")
	defer w.Pop()
	var g [nGen][]byte
	var nameBuf [64]byte
	it := rawjson.Object(v, 0)
	for it.Next() {
		name := key(&it, nameBuf[:0])
		i := genField(name)
		if i < 0 {
			if w.ir != nil {
				w.ir.Drop("generationConfig." + string(name))
			}
			continue
		}
		if g[i] != nil {
			return w.dupError(genSnake[i])
		}
		g[i] = it.Value()
	}
	req, ir := w.req, w.ir

	if n, ok, err := w.OptInt("max_output_tokens", g[gMaxTokens], 1, 1<<31-1); err != nil {
		return err
	} else if ok {
		req.maxOutputTokens = int(n)
		if ir != nil {
			ir.MaxTokens = int(n)
		}
	}
	if n, ok, err := w.OptInt("candidate_count", g[gCandidates], 1, 8); err != nil {
		return err
	} else if ok {
		req.candidates = int(n)
		if ir != nil {
			ir.N = int(n)
		}
	}
	if f, ok, err := w.OptNumber("temperature", g[gTemperature], 0, 2); err != nil {
		return err
	} else if ok && ir != nil {
		ir.Temperature = walk.Ptr(f)
	}
	if f, ok, err := w.OptNumber("top_p", g[gTopP], 0, 1); err != nil {
		return err
	} else if ok && ir != nil {
		ir.TopP = walk.Ptr(f)
	}
	if n, ok, err := w.OptInt("top_k", g[gTopK], 0, 1<<31-1); err != nil {
		return err
	} else if ok && n > 0 && ir != nil {
		ir.TopK = walk.Ptr(int(n))
	}
	if n, ok, err := w.OptInt("seed", g[gSeed], -1<<31, 1<<31-1); err != nil {
		return err
	} else if ok && ir != nil {
		ir.Seed = walk.Ptr(n)
	}
	if f, ok, err := w.OptNumber("presence_penalty", g[gPresence], -2, 2); err != nil {
		return err
	} else if ok && ir != nil {
		ir.PresencePenalty = walk.Ptr(f)
	}
	if f, ok, err := w.OptNumber("frequency_penalty", g[gFrequency], -2, 2); err != nil {
		return err
	} else if ok && ir != nil {
		ir.FrequencyPenalty = walk.Ptr(f)
	}
	if err := w.stopSequences(g[gStop]); err != nil {
		return err
	}
	logprobs, _, err := w.OptBool("response_logprobs", g[gResponseLogprobs])
	if err != nil {
		return err
	}
	if ir != nil {
		ir.Logprobs = logprobs
	}
	if n, ok, err := w.OptInt("logprobs", g[gLogprobs], 0, 20); err != nil {
		return err
	} else if ok && ir != nil && logprobs {
		ir.TopLogprobs = walk.Ptr(int(n))
	}
	if err := w.responseModalities(g[gModalities]); err != nil {
		return err
	}
	if err := w.responseFormat(g[gMime], g[gSchema], g[gJSONSchema]); err != nil {
		return err
	}
	return w.thinkingConfig(g[gThinking])
}

func (w *walker) stopSequences(v []byte) *formats.Error {
	if ok, err := w.OptArray("stop_sequences", v); !ok {
		return err
	}
	w.Push("stop_sequences")
	it := rawjson.Array(v, 0)
	for it.Next() {
		if rawjson.Kind(it.Value()) != '"' {
			w.PushIndex(it.Len() - 1)
			return w.errType("", it.Value(), "TYPE_STRING")
		}
		w.req.size.TextBytes += int64(len(it.Value()) - 2)
		if w.ir != nil {
			if s := jsonval.Str(it.Value()); s != "" {
				w.ir.Stop = append(w.ir.Stop, s)
			}
		}
	}
	w.Pop()
	if it.Len() > 5 {
		return w.errValue("stop_sequences", "stop_sequences must have at most 5 entries, got "+strconv.Itoa(it.Len())+".")
	}
	if w.ir != nil && w.ir.Stop == nil {
		w.ir.Stop = []string{}
	}
	return nil
}

func (w *walker) responseModalities(v []byte) *formats.Error {
	if ok, err := w.OptArray("response_modalities", v); !ok {
		return err
	}
	w.Push("response_modalities")
	it := rawjson.Array(v, 0)
	for it.Next() {
		w.PushIndex(it.Len() - 1)
		i, err := w.optEnum("", it.Value(), modalities...)
		if err != nil {
			return err
		}
		if i < 0 {
			return w.errType("", it.Value(), "TYPE_ENUM")
		}
		switch {
		case w.ir == nil:
		case modalities[i] == "AUDIO":
			w.ir.AudioOutput = true
		case modalities[i] == "IMAGE":
			return w.reject("", "image output cannot be produced by this model's provider.")
		}
		w.Pop()
	}
	w.Pop()
	return nil
}

// responseFormat validates responseMimeType, responseSchema (Google's
// OpenAPI subset) and responseJsonSchema, and maps them to the IR's
// response format.
func (w *walker) responseFormat(mime, schema, jsonSchema []byte) *formats.Error {
	mi, err := w.optEnum("response_mime_type", mime, mimeTypes...)
	if err != nil {
		if rawjson.Kind(mime) == '"' {
			return w.errValue("response_mime_type", "allowed mimetypes are `text/plain`, `application/json`, `application/xml`, `application/yaml` and `text/x.enum`.")
		}
		return err
	}
	hasSchema, err := w.OptObject("response_schema", schema)
	if err != nil {
		return err
	}
	if hasSchema {
		w.Push("response_schema")
		err := w.schema(schema)
		w.Pop()
		if err != nil {
			return err
		}
		w.req.size.TextBytes += int64(len(schema))
	}
	hasJSONSchema := !absent(jsonSchema)
	if hasJSONSchema {
		if k := rawjson.Kind(jsonSchema); k != '{' && k != 't' && k != 'f' {
			return w.errType("response_json_schema", jsonSchema, "object")
		}
		w.req.size.TextBytes += int64(len(jsonSchema))
	}
	if hasSchema && hasJSONSchema {
		return w.errValue("response_json_schema", "response_schema and response_json_schema cannot both be set.")
	}
	ir := w.ir
	if ir == nil || mi < 0 && !hasSchema && !hasJSONSchema {
		return nil
	}
	switch {
	case mi >= 0 && mimeTypes[mi] == "TEXT/X.ENUM":
		return w.reject("response_mime_type", "text/x.enum output cannot be produced by this model's provider.")
	case mi >= 0 && (mimeTypes[mi] == "APPLICATION/XML" || mimeTypes[mi] == "APPLICATION/YAML"):
		return w.reject("response_mime_type", jsonval.Str(mime)+" output cannot be produced by this model's provider.")
	case hasJSONSchema:
		ir.ResponseFormat = formats.ResponseFormat{Type: formats.FormatJSONSchema, Schema: jsonSchema}
	case hasSchema:
		ir.ResponseFormat = formats.ResponseFormat{Type: formats.FormatJSONSchema, Schema: openAPIToJSONSchema(nil, schema, 0)}
	case mimeTypes[mi] == "APPLICATION/JSON":
		ir.ResponseFormat = formats.ResponseFormat{Type: formats.FormatJSONObject}
	default:
		ir.ResponseFormat = formats.ResponseFormat{Type: formats.FormatText}
	}
	return nil
}

func (w *walker) thinkingConfig(v []byte) *formats.Error {
	if ok, err := w.OptObject("thinking_config", v); !ok {
		return err
	}
	w.Push("thinking_config")
	defer w.Pop()
	var include, budget, level []byte
	var nameBuf [64]byte
	it := rawjson.Object(v, 0)
	for it.Next() {
		name := key(&it, nameBuf[:0])
		switch string(name) {
		case "includeThoughts", "include_thoughts":
			if include != nil {
				return w.dupError("include_thoughts")
			}
			include = it.Value()
		case "thinkingBudget", "thinking_budget":
			if budget != nil {
				return w.dupError("thinking_budget")
			}
			budget = it.Value()
		case "thinkingLevel", "thinking_level":
			if level != nil {
				return w.dupError("thinking_level")
			}
			level = it.Value()
		default:
			if w.ir != nil {
				w.ir.Drop("generationConfig.thinkingConfig." + string(name))
			}
		}
	}
	inc, _, err := w.OptBool("include_thoughts", include)
	if err != nil {
		return err
	}
	b, hasBudget, err := w.OptInt("thinking_budget", budget, -1, 1<<31-1)
	if err != nil {
		return err
	}
	li, err := w.optEnum("thinking_level", level, thinkingLevels...)
	if err != nil {
		return err
	}
	if w.ir == nil {
		return nil
	}
	r := &formats.Reasoning{IncludeThoughts: inc}
	if hasBudget {
		if b == 0 {
			r.Disabled = true
		} else {
			r.Budget = int(b)
		}
	}
	if li > 0 {
		r.Effort = strings.ToLower(thinkingLevels[li])
	}
	w.ir.Reasoning = r
	return nil
}

var harmThresholds = []string{"HARM_BLOCK_THRESHOLD_UNSPECIFIED", "BLOCK_LOW_AND_ABOVE", "BLOCK_MEDIUM_AND_ABOVE", "BLOCK_ONLY_HIGH", "BLOCK_NONE", "OFF"}

var harmMethods = []string{"HARM_BLOCK_METHOD_UNSPECIFIED", "SEVERITY", "PROBABILITY"}

// safetySettings validates the list; translation drops it (no other format
// has it).
func (w *walker) safetySettings(v []byte) *formats.Error {
	if ok, err := w.OptArray("safety_settings", v); !ok {
		return err
	}
	w.Push("safety_settings")
	it := rawjson.Array(v, 0)
	for it.Next() {
		s := it.Value()
		w.PushIndex(it.Len() - 1)
		if rawjson.Kind(s) != '{' {
			return w.errType("", s, "object")
		}
		var category, threshold, method []byte
		var nameBuf [32]byte
		si := rawjson.Object(s, 0)
		for si.Next() {
			switch string(key(&si, nameBuf[:0])) {
			case "category":
				category = si.Value()
			case "threshold":
				threshold = si.Value()
			case "method":
				method = si.Value()
			}
		}
		if ok, err := w.OptString("category", category); err != nil {
			return err
		} else if ok && !harmCategory(category) {
			return w.errEnum("category", category, "HARM_CATEGORY_HARASSMENT", "HARM_CATEGORY_HATE_SPEECH", "HARM_CATEGORY_SEXUALLY_EXPLICIT", "HARM_CATEGORY_DANGEROUS_CONTENT", "HARM_CATEGORY_CIVIC_INTEGRITY")
		}
		if _, err := w.optEnum("threshold", threshold, harmThresholds...); err != nil {
			return err
		}
		if _, err := w.optEnum("method", method, harmMethods...); err != nil {
			return err
		}
		w.Pop()
	}
	w.Pop()
	if it.Len() > 0 {
		w.drop("safetySettings")
	}
	return nil
}

// harmCategory accepts any HARM_CATEGORY_* value (Google adds categories).
func harmCategory(v []byte) bool {
	const p = "HARM_CATEGORY_"
	if len(v) < len(p)+3 || v[len(v)-1] != '"' {
		return false
	}
	if !equalFold(v[1:1+len(p)], p) {
		return false
	}
	for _, c := range v[1+len(p) : len(v)-1] {
		if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c == '_') {
			return false
		}
	}
	return true
}
