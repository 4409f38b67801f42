package anthropic

import (
	"errors"
	"strconv"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/modelgate/modelgate/formats"
	"github.com/modelgate/modelgate/formats/internal/jsonval"
	"github.com/modelgate/modelgate/formats/internal/walk"
	"github.com/modelgate/modelgate/formats/rawjson"
)

// MessagesRequest is a validated Messages (or count_tokens) request. It
// keeps the body, which the caller must not modify while the
// MessagesRequest is in use, and what the gateway needs to route, hold and
// rewrite it.
type MessagesRequest struct {
	// Model is the requested (service) model id.
	Model string
	// Stream is the request's stream flag.
	Stream bool

	count     bool // a count_tokens body
	maxTokens int
	size      formats.InputSize
	body      []byte
	gated     []formats.Gated
}

// Gated lists the request's hosted tools with fees and its uses of state in
// the operator's account (server tools, container, mcp_servers, Files API
// sources, documents by URL), for the gateway's policy.
func (r *MessagesRequest) Gated() []formats.Gated { return r.gated }

// MaxTokens is the client's output cap (max_tokens, required by
// Anthropic); 0 for a count_tokens body.
func (r *MessagesRequest) MaxTokens() int { return r.maxTokens }

// InputSize is what the input bound is computed from.
func (r *MessagesRequest) InputSize() formats.InputSize { return r.size }

// InputBound is a generous upper bound of the input tokens for any
// tokenizer (formats.InputSize.Bound with the default per-image bound): the
// UTF-8 bytes of the system prompt, message text, tool definitions, tool
// inputs and results and thinking text, plus per-message and per-tool
// allowances and fixed bounds for media. Tools that Anthropic expands
// server-side (mcp_servers, skills in a container) are not visible here.
func (r *MessagesRequest) InputBound() int64 { return r.size.Bound(0) }

// InputEstimate is a plausible input token count, for usage rows when the
// upstream reported none.
func (r *MessagesRequest) InputEstimate() int64 { return r.size.Estimate() }

// Body is the request body the MessagesRequest was parsed from.
func (r *MessagesRequest) Body() []byte { return r.body }

// Top-level members the parser looks at. Anything else is passed through on
// same-format routes and dropped (and named) when translating.
const (
	fModel = iota
	fMaxTokens
	fSystem
	fTemperature
	fTopP
	fTopK
	fStopSequences
	fStream
	fToolChoice
	fThinking
	fMetadata
	fServiceTier
	fCacheControl
	fOutputConfig
	fOutputFormat
	fContainer
	fInferenceGeo
	fContextManagement
	fMCPServers
	nFields
)

var topNames = [nFields]string{
	fModel:             "model",
	fMaxTokens:         "max_tokens",
	fSystem:            "system",
	fTemperature:       "temperature",
	fTopP:              "top_p",
	fTopK:              "top_k",
	fStopSequences:     "stop_sequences",
	fStream:            "stream",
	fToolChoice:        "tool_choice",
	fThinking:          "thinking",
	fMetadata:          "metadata",
	fServiceTier:       "service_tier",
	fCacheControl:      "cache_control",
	fOutputConfig:      "output_config",
	fOutputFormat:      "output_format",
	fContainer:         "container",
	fInferenceGeo:      "inference_geo",
	fContextManagement: "context_management",
	fMCPServers:        "mcp_servers",
}

// Members walked in place rather than collected.
const (
	fMessages = -2
	fTools    = -3
)

func topField(name []byte) int {
	switch string(name) {
	case "model":
		return fModel
	case "messages":
		return fMessages
	case "max_tokens":
		return fMaxTokens
	case "system":
		return fSystem
	case "temperature":
		return fTemperature
	case "top_p":
		return fTopP
	case "top_k":
		return fTopK
	case "stop_sequences":
		return fStopSequences
	case "stream":
		return fStream
	case "tools":
		return fTools
	case "tool_choice":
		return fToolChoice
	case "thinking":
		return fThinking
	case "metadata":
		return fMetadata
	case "service_tier":
		return fServiceTier
	case "cache_control":
		return fCacheControl
	case "output_config":
		return fOutputConfig
	case "output_format":
		return fOutputFormat
	case "container":
		return fContainer
	case "inference_geo":
		return fInferenceGeo
	case "context_management":
		return fContextManagement
	case "mcp_servers":
		return fMCPServers
	}
	return -1
}

// messagesNames are the Messages API's names for the IR fields.
var messagesNames = formats.DefaultFieldNames.With(map[formats.Field]string{
	formats.FieldStop:              "stop_sequences",
	formats.FieldParallelToolCalls: "tool_choice.disable_parallel_tool_use",
	formats.FieldResponseFormat:    "output_config.format",
	formats.FieldReasoning:         "thinking",
	formats.FieldUser:              "metadata.user_id",
})

// ParseMessagesRequest validates a Messages body the way Anthropic does: a
// 400 invalid_request_error whose message starts with the offending field's
// path ("max_tokens: Field required"), the path also in Param. Beyond
// Anthropic's own API it accepts role "system" messages inside messages
// (Claude Code sends them for models it does not know; they are hoisted
// into the system prompt). Unknown top-level fields and Anthropic-only
// features are accepted. The body must stay unmodified while the result is
// in use.
func ParseMessagesRequest(body []byte) (*MessagesRequest, *formats.Error) {
	return parse(body, false)
}

// ParseCountTokensRequest validates a count_tokens body: model and messages
// required; system, tools, tool_choice, thinking and the rest as in a
// Messages body; max_tokens is not required (and not checked against the
// thinking budget).
func ParseCountTokensRequest(body []byte) (*MessagesRequest, *formats.Error) {
	return parse(body, true)
}

func parse(body []byte, count bool) (*MessagesRequest, *formats.Error) {
	if !jsontext.Value(body).IsValid() {
		return nil, syntaxError(body)
	}
	req := &MessagesRequest{body: body, count: count}
	w := walker{Reader: walk.New(walk.Dots, dialect), req: req, count: count}
	if err := w.top(body); err != nil {
		return nil, err
	}
	return req, nil
}

// ToIR converts the request to the IR for an upstream of another format.
// Anthropic-only features (cache_control, server tools and their blocks,
// container, context_management, mcp_servers, service_tier, citations) and
// unknown fields are dropped and listed in Dropped; a server tool forced by
// tool_choice is rejected.
func (r *MessagesRequest) ToIR() (*formats.Request, *formats.Error) {
	ir := &formats.Request{Names: &messagesNames}
	tmp := MessagesRequest{body: r.body, count: r.count}
	w := walker{Reader: walk.New(walk.Dots, dialect), req: &tmp, ir: ir, count: r.count}
	if err := w.top(r.body); err != nil {
		return nil, err
	}
	return ir, nil
}

// syntaxError explains why a body is not valid JSON, in Anthropic's words.
func syntaxError(body []byte) *formats.Error {
	err := walk.SyntaxError(body)
	msg := "The request body is not valid JSON"
	var se *jsontext.SyntacticError
	switch {
	case errors.As(err, &se):
		if se.Err != nil { // the cause only: the whole error quotes names from the body
			msg += ": " + se.Err.Error() + " at byte " + strconv.FormatInt(se.ByteOffset, 10)
		}
	default:
		msg += ": " + err.Error()
	}
	return invalid("", msg)
}

// walker validates a request body (known to be syntactically valid JSON)
// and, when ir is set, builds the IR at the same time, so that validation
// and translation never disagree.
type walker struct {
	walk.Reader
	req   *MessagesRequest
	ir    *formats.Request
	count bool

	// conversation state while building the IR
	sawTurn     bool     // a user or assistant message was seen
	serverTools []string // names (or types) of server tools, for tool_choice
}

// gate records a hosted tool or a use of upstream state, once, on the
// validation walk (the IR walk repeats it).
func (w *walker) gate(g formats.Gated) {
	if w.ir == nil {
		if g.Param == "" {
			g.Param = w.Param("")
		}
		w.req.gated = append(w.req.gated, g)
	}
}

// drop records a dropped feature when building the IR.
func (w *walker) drop(name string) {
	if w.ir != nil {
		w.ir.Drop(name)
	}
}

func (w *walker) top(body []byte) *formats.Error {
	if k := rawjson.Kind(rawjson.TrimSpace(body)); k != '{' {
		return invalid("", "Input should be a valid dictionary or object to extract fields from")
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
		return invalid("", "The request body is not valid JSON")
	}
	req, ir := w.req, w.ir

	// model
	if err := w.ReqString("model", f[fModel]); err != nil {
		return err
	}
	req.Model = jsonval.Str(f[fModel])
	if req.Model == "" {
		return w.errAt("model", "String should have at least 1 character")
	}
	if ir != nil {
		ir.Model = req.Model
	}

	// max_tokens
	if !w.count {
		v := f[fMaxTokens]
		if v == nil {
			return w.errMissing("max_tokens")
		}
		n, err := w.Int("max_tokens", v, 1, 1<<31-1)
		if err != nil {
			return err
		}
		req.maxTokens = int(n)
		if ir != nil {
			ir.MaxTokens = req.maxTokens
		}
	}

	// messages, system
	switch {
	case msgCount < 0:
		return w.errMissing("messages")
	case msgErr != nil:
		return msgErr
	case msgCount == 0:
		return w.errAt("messages", "at least one message is required")
	}
	if err := w.system(f[fSystem]); err != nil {
		return err
	}

	// stream
	if v, ok, err := w.OptBool("stream", f[fStream]); err != nil {
		return err
	} else if ok {
		req.Stream = v
	}
	if ir != nil {
		ir.Stream = req.Stream
	}

	// sampling
	if v, ok, err := w.OptNumber("temperature", f[fTemperature], 0, 1); err != nil {
		return err
	} else if ok && ir != nil {
		ir.Temperature = walk.Ptr(v)
	}
	if v, ok, err := w.OptNumber("top_p", f[fTopP], 0, 1); err != nil {
		return err
	} else if ok && ir != nil {
		ir.TopP = walk.Ptr(v)
	}
	if n, ok, err := w.OptInt("top_k", f[fTopK], 0, 1<<31-1); err != nil {
		return err
	} else if ok && ir != nil {
		ir.TopK = walk.Ptr(int(n))
	}
	if err := w.stopSequences(f[fStopSequences]); err != nil {
		return err
	}

	// tools
	if hasTools && toolsErr != nil {
		return toolsErr
	}
	if err := w.toolChoice(f[fToolChoice]); err != nil {
		return err
	}

	// output shape
	if err := w.thinking(f[fThinking]); err != nil {
		return err
	}
	if err := w.outputConfig(f[fOutputConfig]); err != nil {
		return err
	}
	if err := w.outputFormat(f[fOutputFormat]); err != nil {
		return err
	}

	// bookkeeping and Anthropic-only features
	if err := w.metadata(f[fMetadata]); err != nil {
		return err
	}
	if ok, err := w.OptString("service_tier", f[fServiceTier]); err != nil {
		return err
	} else if ok {
		w.drop("service_tier")
	}
	if ok, err := w.OptString("inference_geo", f[fInferenceGeo]); err != nil {
		return err
	} else if ok {
		w.drop("inference_geo")
	}
	for _, i := range [...]int{fCacheControl, fContextManagement} {
		if ok, err := w.OptObject(topNames[i], f[i]); err != nil {
			return err
		} else if ok {
			w.drop(topNames[i])
		}
	}
	if ok, err := w.OptArray("mcp_servers", f[fMCPServers]); err != nil {
		return err
	} else if ok {
		w.drop("mcp_servers")
		if !rawjson.IsNull(f[fMCPServers]) && jsonval.Len(f[fMCPServers]) > 0 {
			w.gate(formats.Gated{State: formats.StateMCP, Param: "mcp_servers", Tool: -1})
		}
	}
	switch rawjson.Kind(f[fContainer]) {
	case 0, 'n':
	case '"', '{':
		w.drop("container")
		w.gate(formats.Gated{State: formats.StateCodeExecution, Param: "container", Tool: -1})
	default:
		return w.errType("container", tString)
	}
	w.markForced(f[fToolChoice])
	return nil
}

// markForced flags the server tool that tool_choice forces by name.
func (w *walker) markForced(tc []byte) {
	if w.ir != nil || !rawjson.StringIs(rawjson.Get(tc, "type"), "tool") {
		return
	}
	name := rawjson.Get(tc, "name")
	for i := range w.req.gated {
		if g := &w.req.gated[i]; g.Tool >= 0 && g.Label == "tools."+jsonval.Str(name) {
			g.Forced = true
		}
	}
}

// stopSequences validates stop_sequences: a list of strings.
func (w *walker) stopSequences(v []byte) *formats.Error {
	if ok, err := w.OptArray("stop_sequences", v); !ok {
		return err
	}
	w.Push("stop_sequences")
	it := rawjson.Array(v, 0)
	for it.Next() {
		s := it.Value()
		if rawjson.Kind(s) != '"' {
			return w.errType(strconv.Itoa(it.Len()-1), tString)
		}
		if w.ir != nil {
			w.ir.Stop = append(w.ir.Stop, jsonval.Str(s))
		}
	}
	w.Pop()
	if w.ir != nil && w.ir.Stop == nil {
		w.ir.Stop = []string{}
	}
	return nil
}

// metadata validates metadata: an object whose user_id is a string.
func (w *walker) metadata(v []byte) *formats.Error {
	if ok, err := w.OptObject("metadata", v); !ok {
		return err
	}
	w.Push("metadata")
	it := rawjson.Object(v, 0)
	for it.Next() {
		if !it.NameIs("user_id") {
			w.drop("metadata")
			continue
		}
		ok, err := w.OptString("user_id", it.Value())
		if err != nil {
			return err
		}
		if ok && w.ir != nil {
			w.ir.User = jsonval.Str(it.Value())
		}
	}
	w.Pop()
	return nil
}
