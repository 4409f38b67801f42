package openai

import (
	"errors"
	"strconv"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/modelgate/modelgate/formats"
	"github.com/modelgate/modelgate/formats/internal/jsonval"
	"github.com/modelgate/modelgate/formats/internal/walk"
	"github.com/modelgate/modelgate/formats/rawjson"
)

// ChatRequest is a validated Chat Completions request. It keeps the body
// (which the caller must not modify while the ChatRequest is in use) and
// what the gateway needs to route, hold and rewrite it.
type ChatRequest struct {
	// Model is the requested (service) model id.
	Model string
	// Stream is the request's stream flag.
	Stream bool
	// IncludeUsage is stream_options.include_usage: the client wants the
	// usage chunk.
	IncludeUsage bool
	// N is the number of choices (1 when absent). The output a request
	// may produce is N times its output cap.
	N int

	maxCompletionTokens int
	maxTokens           int
	size                formats.InputSize
	body                []byte
	gated               []formats.Gated
}

// Gated lists the request's hosted web search (web_search_options: one
// search per request, billed per use) and its uses of state in the
// operator's account (store: true, Files API file ids), for the gateway's
// policy.
func (r *ChatRequest) Gated() []formats.Gated { return r.gated }

// MaxTokens is the client's output cap: max_completion_tokens, else
// max_tokens. ok is false when the client gave none.
func (r *ChatRequest) MaxTokens() (n int, ok bool) {
	if r.maxCompletionTokens > 0 {
		return r.maxCompletionTokens, true
	}
	if r.maxTokens > 0 {
		return r.maxTokens, true
	}
	return 0, false
}

// InputSize is what the input bound is computed from.
func (r *ChatRequest) InputSize() formats.InputSize { return r.size }

// InputBound is a generous upper bound of the input tokens for any
// tokenizer (formats.InputSize.Bound with the default per-image bound).
func (r *ChatRequest) InputBound() int64 { return r.size.Bound(0) }

// InputEstimate is a plausible input token count, for usage rows when the
// upstream reported none.
func (r *ChatRequest) InputEstimate() int64 { return r.size.Estimate() }

// Body is the request body the ChatRequest was parsed from.
func (r *ChatRequest) Body() []byte { return r.body }

// Top-level members the parser knows. Anything else is passed through on
// same-format routes and dropped (and named) when translating.
const (
	fModel = iota
	fMessages
	fStream
	fStreamOptions
	fMaxCompletionTokens
	fMaxTokens
	fTemperature
	fTopP
	fN
	fStop
	fPresencePenalty
	fFrequencyPenalty
	fSeed
	fLogprobs
	fTopLogprobs
	fLogitBias
	fResponseFormat
	fTools
	fToolChoice
	fParallelToolCalls
	fReasoningEffort
	fUser
	fSafetyIdentifier
	fPromptCacheKey
	fMetadata
	fStore
	fServiceTier
	fModalities
	fAudio
	fFunctions
	fFunctionCall
	nFields
)

var topNames = [nFields]string{
	fModel:               "model",
	fMessages:            "messages",
	fStream:              "stream",
	fStreamOptions:       "stream_options",
	fMaxCompletionTokens: "max_completion_tokens",
	fMaxTokens:           "max_tokens",
	fTemperature:         "temperature",
	fTopP:                "top_p",
	fN:                   "n",
	fStop:                "stop",
	fPresencePenalty:     "presence_penalty",
	fFrequencyPenalty:    "frequency_penalty",
	fSeed:                "seed",
	fLogprobs:            "logprobs",
	fTopLogprobs:         "top_logprobs",
	fLogitBias:           "logit_bias",
	fResponseFormat:      "response_format",
	fTools:               "tools",
	fToolChoice:          "tool_choice",
	fParallelToolCalls:   "parallel_tool_calls",
	fReasoningEffort:     "reasoning_effort",
	fUser:                "user",
	fSafetyIdentifier:    "safety_identifier",
	fPromptCacheKey:      "prompt_cache_key",
	fMetadata:            "metadata",
	fStore:               "store",
	fServiceTier:         "service_tier",
	fModalities:          "modalities",
	fAudio:               "audio",
	fFunctions:           "functions",
	fFunctionCall:        "function_call",
}

func topField(name []byte) int {
	switch string(name) {
	case "model":
		return fModel
	case "messages":
		return fMessages
	case "stream":
		return fStream
	case "stream_options":
		return fStreamOptions
	case "max_completion_tokens":
		return fMaxCompletionTokens
	case "max_tokens":
		return fMaxTokens
	case "temperature":
		return fTemperature
	case "top_p":
		return fTopP
	case "n":
		return fN
	case "stop":
		return fStop
	case "presence_penalty":
		return fPresencePenalty
	case "frequency_penalty":
		return fFrequencyPenalty
	case "seed":
		return fSeed
	case "logprobs":
		return fLogprobs
	case "top_logprobs":
		return fTopLogprobs
	case "logit_bias":
		return fLogitBias
	case "response_format":
		return fResponseFormat
	case "tools":
		return fTools
	case "tool_choice":
		return fToolChoice
	case "parallel_tool_calls":
		return fParallelToolCalls
	case "reasoning_effort":
		return fReasoningEffort
	case "user":
		return fUser
	case "safety_identifier":
		return fSafetyIdentifier
	case "prompt_cache_key":
		return fPromptCacheKey
	case "metadata":
		return fMetadata
	case "store":
		return fStore
	case "service_tier":
		return fServiceTier
	case "modalities":
		return fModalities
	case "audio":
		return fAudio
	case "functions":
		return fFunctions
	case "function_call":
		return fFunctionCall
	}
	return -1
}

// chatNames are Chat Completions' names for the IR fields.
var chatNames = formats.DefaultFieldNames.With(map[formats.Field]string{
	formats.FieldSystem:    "messages",
	formats.FieldMaxTokens: "max_completion_tokens",
	formats.FieldUser:      "safety_identifier",
})

// ParseChatRequest validates a Chat Completions body the way OpenAI does:
// a 400 names the offending field in Param (OpenAI style,
// "messages[2].content") with OpenAI's message and code. Unknown fields are
// allowed. The body must stay unmodified while the result is in use.
func ParseChatRequest(body []byte) (*ChatRequest, *formats.Error) {
	if !jsontext.Value(body).IsValid() {
		return nil, syntaxError(body)
	}
	req := &ChatRequest{body: body, N: 1}
	w := walker{Reader: walk.New(walk.Brackets, dialect), req: req}
	if err := w.top(body); err != nil {
		return nil, err
	}
	return req, nil
}

// ToIR converts the request to the IR for an upstream of another format.
// Fields no other format can express are dropped and listed in Dropped;
// history that cannot be carried (custom tool calls) is rejected.
func (r *ChatRequest) ToIR() (*formats.Request, *formats.Error) {
	ir := &formats.Request{Names: &chatNames}
	tmp := ChatRequest{body: r.body, N: 1}
	w := walker{Reader: walk.New(walk.Brackets, dialect), req: &tmp, ir: ir}
	if err := w.top(r.body); err != nil {
		return nil, err
	}
	return ir, nil
}

// syntaxError explains why a body is not valid JSON.
func syntaxError(body []byte) *formats.Error {
	const hint = "We could not parse the JSON body of your request. (HINT: This likely means you aren't using your HTTP client correctly. The OpenAI API expects a JSON payload, but what was sent was not valid JSON.)"
	var se *jsontext.SyntacticError
	if errors.As(walk.SyntaxError(body), &se) {
		param := walk.PointerParam(se.JSONPointer)
		if errors.Is(se.Err, jsontext.ErrDuplicateName) {
			return errCode(param, "Duplicate key in the JSON body at '"+param+"'.", "invalid_json")
		}
		msg := hint
		if se.Err != nil {
			msg += " Detail: " + se.Err.Error() + " at byte " + strconv.FormatInt(se.ByteOffset, 10) + "."
		}
		return errCode("", msg, "invalid_json")
	}
	return errCode("", hint, "invalid_json")
}

// walker validates a request body (known to be syntactically valid JSON)
// and, when ir is set, builds the IR at the same time, so that validation
// and translation can never disagree.
type walker struct {
	walk.Reader
	req *ChatRequest
	ir  *formats.Request
	// conversation state while building the IR
	sawTurn bool // a non-system message was seen
}

func (w *walker) top(body []byte) *formats.Error {
	if rawjson.Kind(rawjson.TrimSpace(body)) != '{' {
		return errCode("", "Invalid type for body: expected an object, but got "+kindName(rawjson.TrimSpace(body))+" instead.", "invalid_type")
	}
	var f [nFields][]byte
	var nameBuf [64]byte
	it := rawjson.Object(body, 0)
	// messages and tools are walked in place (NextLazy: no scan before the
	// walk); their errors are reported in field order below
	msgCount, hasTools := -1, false
	var msgErr, toolsErr *formats.Error
	for it.NextLazy() {
		name := it.AppendName(nameBuf[:0])
		switch i := topField(name); i {
		case fMessages:
			msgCount, msgErr = w.messages(&it)
			w.Truncate(0) // an error leaves the path where it was found
		case fTools:
			hasTools, toolsErr = true, w.tools(&it)
			w.Truncate(0)
		case -1:
			if w.ir != nil {
				w.ir.Drop(string(name))
			}
		default:
			f[i] = it.Value()
		}
	}
	if it.Err() != nil {
		return errCode("", "We could not parse the JSON body of your request.", "invalid_json")
	}
	req, ir := w.req, w.ir

	// model
	if err := w.ReqString("model", f[fModel]); err != nil {
		return err
	}
	if len(f[fModel]) == 2 {
		return errCode("model", "You must provide a model parameter.", "invalid_value")
	}
	req.Model = jsonval.Str(f[fModel])
	if ir != nil {
		ir.Model = req.Model
	}

	// stream, stream_options
	if v, ok, err := w.OptBool("stream", f[fStream]); err != nil {
		return err
	} else if ok {
		req.Stream = v
	}
	if so := f[fStreamOptions]; so != nil && !rawjson.IsNull(so) {
		if rawjson.Kind(so) != '{' {
			return w.errType("stream_options", so, "an object")
		}
		if !req.Stream {
			return errCode("stream_options", "The 'stream_options' parameter is only allowed when 'stream' is enabled.", "invalid_value")
		}
		w.Push("stream_options")
		it := rawjson.Object(so, 0)
		for it.Next() {
			switch {
			case it.NameIs("include_usage"):
				v, _, err := w.OptBool("include_usage", it.Value())
				if err != nil {
					return err
				}
				req.IncludeUsage = v
			case it.NameIs("include_obfuscation"):
				if _, _, err := w.OptBool("include_obfuscation", it.Value()); err != nil {
					return err
				}
			}
		}
		w.Pop()
	}
	if ir != nil {
		ir.Stream, ir.IncludeUsage = req.Stream, req.IncludeUsage
	}

	// output caps
	if n, ok, err := w.OptInt("max_completion_tokens", f[fMaxCompletionTokens], 1, 1<<31-1); err != nil {
		return err
	} else if ok {
		req.maxCompletionTokens = int(n)
	}
	if n, ok, err := w.OptInt("max_tokens", f[fMaxTokens], 1, 1<<31-1); err != nil {
		return err
	} else if ok {
		req.maxTokens = int(n)
	}
	if ir != nil {
		ir.MaxTokens, _ = req.MaxTokens()
	}

	// messages
	switch {
	case msgCount < 0:
		return w.errMissing("messages")
	case msgErr != nil:
		return msgErr
	case msgCount == 0:
		return w.errEmpty("messages")
	}

	// sampling
	if v, ok, err := w.OptNumber("temperature", f[fTemperature], 0, 2); err != nil {
		return err
	} else if ok && ir != nil {
		ir.Temperature = walk.Ptr(v)
	}
	if v, ok, err := w.OptNumber("top_p", f[fTopP], 0, 1); err != nil {
		return err
	} else if ok && ir != nil {
		ir.TopP = walk.Ptr(v)
	}
	if v, ok, err := w.OptNumber("presence_penalty", f[fPresencePenalty], -2, 2); err != nil {
		return err
	} else if ok && ir != nil {
		ir.PresencePenalty = walk.Ptr(v)
	}
	if v, ok, err := w.OptNumber("frequency_penalty", f[fFrequencyPenalty], -2, 2); err != nil {
		return err
	} else if ok && ir != nil {
		ir.FrequencyPenalty = walk.Ptr(v)
	}
	if n, ok, err := w.OptInt("n", f[fN], 1, 128); err != nil {
		return err
	} else if ok {
		req.N = int(n)
		if ir != nil {
			ir.N = int(n)
		}
	}
	if n, ok, err := w.OptInt("seed", f[fSeed], -1<<62, 1<<62); err != nil {
		return err
	} else if ok && ir != nil {
		ir.Seed = walk.Ptr(n)
	}
	if err := w.stop(f[fStop]); err != nil {
		return err
	}
	logprobs, _, err := w.OptBool("logprobs", f[fLogprobs])
	if err != nil {
		return err
	}
	if ir != nil {
		ir.Logprobs = logprobs
	}
	if n, ok, err := w.OptInt("top_logprobs", f[fTopLogprobs], 0, 20); err != nil {
		return err
	} else if ok {
		if !logprobs {
			return errCode("top_logprobs", "Invalid value for 'top_logprobs': 'logprobs' must be set to true when 'top_logprobs' is used.", "invalid_value")
		}
		if ir != nil {
			k := int(n)
			ir.TopLogprobs = walk.Ptr(k)
		}
	}
	if err := w.logitBias(f[fLogitBias]); err != nil {
		return err
	}

	// tools
	if hasTools && toolsErr != nil {
		return toolsErr
	}
	if err := w.functions(f[fFunctions]); err != nil {
		return err
	}
	if err := w.toolChoice(f[fToolChoice]); err != nil {
		return err
	}
	if err := w.functionCall(f[fFunctionCall]); err != nil {
		return err
	}
	if v, ok, err := w.OptBool("parallel_tool_calls", f[fParallelToolCalls]); err != nil {
		return err
	} else if ok && ir != nil {
		ir.ParallelToolCalls = walk.Ptr(v)
	}

	// output shape
	if err := w.responseFormat(f[fResponseFormat]); err != nil {
		return err
	}
	if ok, err := w.OptString("reasoning_effort", f[fReasoningEffort]); err != nil {
		return err
	} else if ok && ir != nil {
		ir.Reasoning = &formats.Reasoning{Effort: jsonval.Str(f[fReasoningEffort])}
	}
	if err := w.modalities(f[fModalities], f[fAudio]); err != nil {
		return err
	}

	// bookkeeping
	for _, i := range [...]int{fUser, fSafetyIdentifier, fPromptCacheKey, fServiceTier} {
		ok, err := w.OptString(topNames[i], f[i])
		if err != nil {
			return err
		}
		if !ok || ir == nil {
			continue
		}
		switch i {
		case fUser:
			if ir.User == "" {
				ir.User = jsonval.Str(f[i])
			}
		case fSafetyIdentifier:
			ir.User = jsonval.Str(f[i])
		case fServiceTier:
			ir.ServiceTier = jsonval.Str(f[i])
		case fPromptCacheKey:
			ir.Drop("prompt_cache_key")
		}
	}
	if v, ok, err := w.OptBool("store", f[fStore]); err != nil {
		return err
	} else if ok && ir != nil {
		ir.Drop("store")
	} else if v && ir == nil {
		req.gated = append(req.gated, formats.Gated{State: formats.StateStore, Param: "store", Tool: -1})
	}
	if ir == nil {
		if v := rawjson.Get(body, "web_search_options"); v != nil && !rawjson.IsNull(v) {
			// OpenAI's search models search once per request
			req.gated = append(req.gated, formats.Gated{Hosted: formats.HostedWebSearch, Param: "web_search_options",
				Label: "web_search_options", Tool: -1, Top: "web_search_options", MaxUses: 1, Fixed: true})
		}
	}
	return w.metadata(f[fMetadata])
}

// stop validates stop: a string or at most 4 strings.
func (w *walker) stop(v []byte) *formats.Error {
	switch rawjson.Kind(v) {
	case 0, 'n':
		return nil
	case '"':
		if w.ir != nil {
			if s := jsonval.Str(v); s != "" {
				w.ir.Stop = []string{s}
			} else {
				w.ir.Stop = []string{}
			}
		}
		return nil
	case '[':
	default:
		return w.errType("stop", v, "one of a string or array of strings")
	}
	w.Push("stop")
	it := rawjson.Array(v, 0)
	for it.Next() {
		if rawjson.Kind(it.Value()) != '"' {
			w.PushIndex(it.Len() - 1)
			return w.errType("", it.Value(), "a string")
		}
		if it.Len() > 4 {
			w.Pop()
			return errCode("stop", "Invalid 'stop': array too long. Expected an array with maximum length 4, but got an array with length "+strconv.Itoa(jsonval.Len(v))+" instead.", "array_above_max_length")
		}
		if w.ir != nil {
			if s := jsonval.Str(it.Value()); s != "" {
				w.ir.Stop = append(w.ir.Stop, s)
			}
		}
	}
	w.Pop()
	if w.ir != nil && w.ir.Stop == nil {
		w.ir.Stop = []string{}
	}
	return nil
}

func (w *walker) logitBias(v []byte) *formats.Error {
	if ok, err := w.OptObject("logit_bias", v); !ok {
		return err
	}
	w.Push("logit_bias")
	it := rawjson.Object(v, 0)
	for it.Next() {
		if _, _, err := w.OptNumber(string(it.AppendName(nil)), it.Value(), -100, 100); err != nil {
			return err
		}
	}
	w.Pop()
	if w.ir != nil && it.Len() > 0 {
		w.ir.LogitBias = v
	}
	return nil
}

func (w *walker) metadata(v []byte) *formats.Error {
	if ok, err := w.OptObject("metadata", v); !ok {
		return err
	}
	w.Push("metadata")
	it := rawjson.Object(v, 0)
	for it.Next() {
		name := string(it.AppendName(nil))
		if rawjson.Kind(it.Value()) != '"' {
			return w.errType(name, it.Value(), "a string")
		}
		if it.Len() > 16 {
			w.Pop()
			return errCode("metadata", "Invalid 'metadata': too many properties. Expected an object with at most 16 properties.", "object_above_max_properties")
		}
		if w.ir != nil {
			if w.ir.Metadata == nil {
				w.ir.Metadata = make(map[string]string)
			}
			w.ir.Metadata[name] = jsonval.Str(it.Value())
		}
	}
	w.Pop()
	return nil
}

// modalities and audio: audio output cannot be translated.
func (w *walker) modalities(mod, audio []byte) *formats.Error {
	switch rawjson.Kind(mod) {
	case 0, 'n':
	case '[':
		w.Push("modalities")
		it := rawjson.Array(mod, 0)
		for it.Next() {
			v := it.Value()
			w.PushIndex(it.Len() - 1)
			if rawjson.Kind(v) != '"' {
				return w.errType("", v, "a string")
			}
			if !rawjson.StringIs(v, "text") && !rawjson.StringIs(v, "audio") {
				return w.errEnum("", v, "text", "audio")
			}
			w.Pop()
			if w.ir != nil && rawjson.StringIs(v, "audio") {
				w.ir.AudioOutput = true
			}
		}
		w.Pop()
	default:
		return w.errType("modalities", mod, "an array")
	}
	switch rawjson.Kind(audio) {
	case 0, 'n':
	case '{':
		if w.ir != nil {
			w.ir.AudioOutput = true
		}
	default:
		return w.errType("audio", audio, "an object")
	}
	return nil
}
