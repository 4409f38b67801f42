// Package responses speaks the OpenAI Responses wire format (POST
// /v1/responses): it validates requests, converts them to the IR for upstreams
// of other formats, rewrites them for OpenAI upstreams, and renders answers and
// event streams in the Responses shape (docs/translation.md, "Request mapping",
// "Answers", "Writing client streams"). Errors use the OpenAI envelope
// (formats/openai).
package responses

import (
	"encoding/json"
	"strconv"
	"strings"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/modelgate/modelgate/formats"
	"github.com/modelgate/modelgate/formats/internal/jsonval"
	"github.com/modelgate/modelgate/formats/internal/walk"
	"github.com/modelgate/modelgate/formats/rawjson"
)

// Request is a validated Responses request. It keeps the body, which the
// caller must not modify while the Request is in use.
type Request struct {
	// Model is the requested (service) model id.
	Model string
	// Stream is the request's stream flag.
	Stream bool

	maxOutput int
	size      formats.InputSize
	body      []byte
	top       map[string]json.RawMessage
	items     []item
	tools     []formats.Tool
	hosted    []string          // hosted tool types offered (web_search, ...)
	names     map[string]Native // flattened namespace tool name → its parts
	gated     []formats.Gated
}

// Gated lists the request's hosted tools with fees and its uses of state in
// the operator's account (stored responses, conversations, prompts, files,
// vector stores, containers, MCP servers, background), for the gateway's
// policy.
func (r *Request) Gated() []formats.Gated { return r.gated }

// Native is a namespaced tool's own name: the Responses API nests function
// tools in namespaces, other formats have only flat names, so the gateway
// sends Namespace + "__" + Name and restores the pair in the answer.
type Native struct{ Namespace, Name string }

// namespaceSep joins a namespace and a tool name into one flat name.
const namespaceSep = "__"

// MaxTokens is the client's max_output_tokens; ok is false when absent.
func (r *Request) MaxTokens() (n int, ok bool) { return r.maxOutput, r.maxOutput > 0 }

// InputBound is a generous upper bound of the input tokens.
func (r *Request) InputBound() int64 { return r.size.Bound(0) }

// InputEstimate is a plausible input token count, for usage rows when the
// upstream reported none.
func (r *Request) InputEstimate() int64 { return r.size.Estimate() }

// Names maps the flattened names of namespaced tools back to their
// namespace and name, for rendering the answer; nil when there are none.
func (r *Request) Names() map[string]Native { return r.names }

// item is one input item, decoded.
type item struct {
	Type      string          `json:"type"`
	Role      string          `json:"role"`
	Content   json.RawMessage `json:"content"`
	CallID    string          `json:"call_id"`
	Name      string          `json:"name"`
	Namespace string          `json:"namespace"`
	Arguments string          `json:"arguments"`
	Output    json.RawMessage `json:"output"`
}

// contentPart is one part of a message item's content.
type contentPart struct {
	Type     string          `json:"type"`
	Text     string          `json:"text"`
	Refusal  string          `json:"refusal"`
	ImageURL json.RawMessage `json:"image_url"`
	FileID   string          `json:"file_id"`
	FileData string          `json:"file_data"`
	FileURL  string          `json:"file_url"`
	Filename string          `json:"filename"`
	Detail   string          `json:"detail"`
}

// tool is one entry of tools.
type tool struct {
	Type        string          `json:"type"`
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
	Strict      *bool           `json:"strict"`
	Tools       json.RawMessage `json:"tools"` // a namespace's tools
}

// responsesNames are the Responses API's names for the IR fields.
var responsesNames = formats.DefaultFieldNames.With(map[formats.Field]string{
	formats.FieldMessages:       "input",
	formats.FieldSystem:         "instructions",
	formats.FieldMaxTokens:      "max_output_tokens",
	formats.FieldLogprobs:       "include",
	formats.FieldResponseFormat: "text.format",
	formats.FieldReasoning:      "reasoning.effort",
	formats.FieldUser:           "safety_identifier",
})

// invalid is a 400 naming param.
func invalid(param, msg string) *formats.Error {
	return &formats.Error{Kind: formats.KindInvalidRequest, Param: param, Message: msg, Code: "invalid_value"}
}

// invalidType is a 400 for a value of the wrong JSON type.
func invalidType(param, want string) *formats.Error {
	return &formats.Error{Kind: formats.KindInvalidRequest, Param: param, Code: "invalid_type",
		Message: "Invalid type for '" + param + "': expected " + want + "."}
}

// ParseRequest validates a Responses body: a 400 names the offending field
// in Param the way OpenAI does (input[2].content). Unknown fields are
// allowed. The body must stay unmodified while the result is in use.
func ParseRequest(body []byte) (*Request, *formats.Error) {
	if !jsontext.Value(body).IsValid() {
		return nil, &formats.Error{Kind: formats.KindInvalidRequest, Code: "invalid_json",
			Message: "We could not parse the JSON body of your request. The OpenAI API expects a JSON payload."}
	}
	if rawjson.Kind(rawjson.TrimSpace(body)) != '{' {
		return nil, invalidType("body", "an object")
	}
	r := &Request{body: body}
	if err := json.Unmarshal(body, &r.top); err != nil {
		return nil, invalid("", "We could not parse the JSON body of your request.")
	}
	var err *formats.Error
	if r.Model, err = r.reqString("model"); err != nil {
		return nil, err
	}
	if r.Stream, _, err = r.optBool("stream"); err != nil {
		return nil, err
	}
	if n, ok, err := r.optInt("max_output_tokens", 16); err != nil {
		return nil, err
	} else if ok {
		r.maxOutput = n
	}
	if _, _, err := r.optNumber("temperature", 0, 2); err != nil {
		return nil, err
	}
	if _, _, err := r.optNumber("top_p", 0, 1); err != nil {
		return nil, err
	}
	for _, name := range []string{"parallel_tool_calls", "store", "background"} {
		if _, _, err := r.optBool(name); err != nil {
			return nil, err
		}
	}
	for _, name := range []string{"instructions", "previous_response_id", "user", "safety_identifier", "service_tier", "prompt_cache_key", "truncation"} {
		if _, _, err := r.optString(name); err != nil {
			return nil, err
		}
	}
	if err := r.parseInput(); err != nil {
		return nil, err
	}
	if err := r.parseTools(); err != nil {
		return nil, err
	}
	if _, err := r.toolChoice(); err != nil {
		return nil, err
	}
	if err := r.gateState(); err != nil {
		return nil, err
	}
	if _, err := r.textFormat(); err != nil {
		return nil, err
	}
	if _, err := r.reasoning(); err != nil {
		return nil, err
	}
	if v := r.top["metadata"]; len(v) > 0 && !rawjson.IsNull(v) {
		var m map[string]string
		if json.Unmarshal(v, &m) != nil {
			return nil, invalidType("metadata", "an object of strings")
		}
	}
	// everything but media data counts as text, generously
	r.size.TextBytes += int64(len(body))
	r.size.Messages++
	if inst := r.top["instructions"]; len(inst) > 0 {
		r.size.Messages++
	}
	return r, nil
}

// present reports whether a member is there and not null.
func (r *Request) present(name string) bool {
	v, ok := r.top[name]
	return ok && !rawjson.IsNull(v)
}

// dialect words the typed readers' errors as the Responses API does.
var dialect = &walk.Dialect{Missing: missing, Type: wrongType, Range: outOfRange}

// wants names the JSON types as the Responses API's messages do.
var wants = [...]string{
	walk.String:  "a string",
	walk.Bool:    "a boolean",
	walk.Number:  "a number",
	walk.Integer: "an integer",
	walk.Object:  "an object",
	walk.Array:   "an array",
}

// missing is the error of a required member that is absent.
func missing(_, param string) *formats.Error {
	return &formats.Error{Kind: formats.KindInvalidRequest, Param: param, Code: "missing_required_parameter",
		Message: "Missing required parameter: '" + param + "'."}
}

// wrongType is the error of a value of the wrong JSON type.
func wrongType(_, param string, _ []byte, want walk.Want) *formats.Error {
	return invalidType(param, wants[want])
}

// outOfRange is the error of a number out of its range.
func outOfRange(_, param string, v []byte, integer bool, min, max, _ float64) *formats.Error {
	num := func(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }
	if integer {
		return invalid(param, "Invalid '"+param+"': integer below minimum value. Expected a value >= "+num(min)+", but got "+string(v)+" instead.")
	}
	return invalid(param, "Invalid '"+param+"': "+string(v)+" is out of range ["+num(min)+", "+num(max)+"].")
}

// fields reads the top-level members (a null one is absent, even a required
// one). It is only read: its path stays empty.
var fields = func() walk.Reader {
	r := walk.New(walk.Brackets, dialect)
	r.NullMissing = true
	return r
}()

func (r *Request) reqString(name string) (string, *formats.Error) {
	v := r.top[name]
	if err := fields.ReqString(name, v); err != nil {
		return "", err
	}
	s := jsonval.Str(v)
	if s == "" {
		return "", invalid(name, "Invalid '"+name+"': empty string.")
	}
	return s, nil
}

func (r *Request) optString(name string) (string, bool, *formats.Error) {
	v := r.top[name]
	if ok, err := fields.OptString(name, v); !ok {
		return "", false, err
	}
	return jsonval.Str(v), true, nil
}

func (r *Request) optBool(name string) (bool, bool, *formats.Error) {
	return fields.OptBool(name, r.top[name])
}

func (r *Request) optInt(name string, min int64) (int, bool, *formats.Error) {
	n, ok, err := fields.OptInt(name, r.top[name], min, 1<<31-1)
	return int(n), ok, err
}

func (r *Request) optNumber(name string, lo, hi float64) (float64, bool, *formats.Error) {
	return fields.OptNumber(name, r.top[name], lo, hi)
}

// parseInput decodes input: a string (one user message) or an item list.
func (r *Request) parseInput() *formats.Error {
	v, ok := r.top["input"]
	if !ok || rawjson.IsNull(v) {
		return &formats.Error{Kind: formats.KindInvalidRequest, Param: "input", Code: "missing_required_parameter",
			Message: "Missing required parameter: 'input'."}
	}
	switch rawjson.Kind(v) {
	case '"':
		s, _ := rawjson.Unquote(v)
		content, _ := json.Marshal(s)
		r.items = []item{{Type: "message", Role: "user", Content: content}}
		return nil
	case '[':
	default:
		return invalidType("input", "a string or an array of input items")
	}
	var raw []json.RawMessage
	if json.Unmarshal(v, &raw) != nil {
		return invalidType("input", "an array of input items")
	}
	if len(raw) == 0 {
		return invalid("input", "Invalid 'input': empty array. Expected an array with minimum length 1, but got an empty array instead.")
	}
	r.items = make([]item, len(raw))
	for i, rv := range raw {
		p := "input[" + strconv.Itoa(i) + "]"
		if rawjson.Kind(rv) != '{' {
			return invalidType(p, "an object")
		}
		it := &r.items[i]
		if err := json.Unmarshal(rv, it); err != nil {
			return invalidType(p, "an input item ("+jsonProblem(err)+")")
		}
		if it.Type == "" && it.Role != "" {
			it.Type = "message"
		}
		r.size.Messages++
		switch it.Type {
		case "message":
			switch it.Role {
			case "user", "assistant", "system", "developer":
			default:
				return invalid(p+".role", "Invalid value: '"+it.Role+"'. Supported values are: 'user', 'assistant', 'system', and 'developer'.")
			}
			if err := r.checkContent(p+".content", it); err != nil {
				return err
			}
		case "function_call":
			if it.CallID == "" {
				return invalid(p+".call_id", "Missing required parameter: '"+p+".call_id'.")
			}
			if it.Name == "" {
				return invalid(p+".name", "Missing required parameter: '"+p+".name'.")
			}
		case "function_call_output":
			if it.CallID == "" {
				return invalid(p+".call_id", "Missing required parameter: '"+p+".call_id'.")
			}
			switch rawjson.Kind(it.Output) {
			case '"', '[':
			default:
				return invalidType(p+".output", "a string or an array of content parts")
			}
		case "item_reference":
			r.gated = append(r.gated, formats.Gated{State: formats.StateConversation, Param: p, Tool: -1})
		case "":
			return invalid(p+".type", "Missing required parameter: '"+p+".type'.")
		}
	}
	return nil
}

// checkContent validates a message's content and counts its media.
func (r *Request) checkContent(p string, it *item) *formats.Error {
	switch rawjson.Kind(it.Content) {
	case '"':
		return nil
	case '[':
	default:
		return invalidType(p, "a string or an array of content parts")
	}
	var parts []contentPart
	if err := json.Unmarshal(it.Content, &parts); err != nil {
		return invalidType(p, "an array of content parts ("+jsonProblem(err)+")")
	}
	for j := range parts {
		cp := &parts[j]
		pp := p + "[" + strconv.Itoa(j) + "]"
		switch cp.Type {
		case "input_text", "output_text", "text", "refusal", "summary_text", "reasoning_text":
		case "input_image":
			r.size.Images++
			if rawjson.Kind(cp.ImageURL) == '"' {
				u, _ := rawjson.Unquote(cp.ImageURL)
				r.size.TextBytes -= int64(len(u))
			} else if cp.FileID == "" {
				return invalid(pp+".image_url", "Invalid '"+pp+"': an input_image needs an image_url (a URL or a data URL) or a file_id.")
			}
			if cp.FileID != "" {
				r.gated = append(r.gated, formats.Gated{State: formats.StateFiles, Param: pp + ".file_id", Tool: -1})
			}
		case "input_file":
			r.size.Files++
			r.size.MediaBytes += int64(len(cp.FileData))
			r.size.TextBytes -= int64(len(cp.FileData))
			if cp.FileID != "" {
				r.gated = append(r.gated, formats.Gated{State: formats.StateFiles, Param: pp + ".file_id", Tool: -1})
			}
			if cp.FileURL != "" {
				// the upstream fetches it: nothing bounds its pages
				r.gated = append(r.gated, formats.Gated{State: formats.StateDocumentURL, Param: pp + ".file_url", Tool: -1})
			}
		default:
			return invalid(pp+".type", "Invalid value: '"+cp.Type+"'. Supported values are: 'input_text', 'input_image', 'input_file', 'output_text' and 'refusal'.")
		}
	}
	return nil
}

// jsonProblem shortens a decoding error for a message.
func jsonProblem(err error) string {
	s := err.Error()
	s = strings.TrimPrefix(s, "json: ")
	return s
}

// parseTools decodes tools: function tools, namespaces of function tools
// (flattened), and hosted tools (only noted).
func (r *Request) parseTools() *formats.Error {
	v, ok := r.top["tools"]
	if !ok || rawjson.IsNull(v) {
		return nil
	}
	var raw []json.RawMessage
	if rawjson.Kind(v) != '[' || json.Unmarshal(v, &raw) != nil {
		return invalidType("tools", "an array of tools")
	}
	for i, rv := range raw {
		p := "tools[" + strconv.Itoa(i) + "]"
		var t tool
		if rawjson.Kind(rv) != '{' || json.Unmarshal(rv, &t) != nil {
			return invalidType(p, "a tool object")
		}
		switch t.Type {
		case "function":
			if err := r.addFunction(p, "", &t); err != nil {
				return err
			}
		case "namespace":
			if t.Name == "" {
				return invalid(p+".name", "Missing required parameter: '"+p+".name'.")
			}
			var inner []tool
			if json.Unmarshal(t.Tools, &inner) != nil {
				return invalidType(p+".tools", "an array of tools")
			}
			for j := range inner {
				q := p + ".tools[" + strconv.Itoa(j) + "]"
				if inner[j].Type != "function" {
					r.hosted = append(r.hosted, inner[j].Type) // custom tools inside a namespace: dropped when translating
					continue
				}
				if err := r.addFunction(q, t.Name, &inner[j]); err != nil {
					return err
				}
			}
		case "":
			return invalid(p+".type", "Missing required parameter: '"+p+".type'.")
		default:
			r.hosted = append(r.hosted, t.Type)
			if g, ok := hostedGate(t.Type); ok {
				g.Param, g.Label, g.Tool = p, t.Type, i
				r.gated = append(r.gated, g)
			}
		}
	}
	return nil
}

// hostedGate classifies a hosted tool type: web search and image
// generation cost a fee per use; file_search reads the operator's vector
// stores, code_interpreter runs in its containers, mcp calls remote
// servers with its connectors. Other types (custom, computer_use_preview,
// local_shell, shell, apply_patch) run on the client.
func hostedGate(typ string) (formats.Gated, bool) {
	var g formats.Gated
	switch {
	case strings.HasPrefix(typ, "web_search"):
		g.Hosted = formats.HostedWebSearch
	case typ == "image_generation":
		g.Hosted = formats.HostedImageGeneration
	case typ == "file_search":
		g.State = formats.StateFileSearch
	case typ == "code_interpreter":
		g.State = formats.StateCodeExecution
	case typ == "mcp":
		g.State = formats.StateMCP
	default:
		return g, false
	}
	return g, true
}

// gateState records the request's uses of stored state and, for its
// hosted tools, the cap on their uses (max_tool_calls, which covers every
// built-in tool) and whether tool_choice forces them. Responses
// stores every response at OpenAI unless store is false; the gateway sends
// store false when the client does not say, and a stored response, a
// conversation, a stored prompt and background work are the operator's
// state.
func (r *Request) gateState() *formats.Error {
	if b, _, _ := r.optBool("background"); b {
		r.gated = append(r.gated, formats.Gated{State: formats.StateBackground, Param: "background", Tool: -1})
	}
	if b, _, _ := r.optBool("store"); b {
		r.gated = append(r.gated, formats.Gated{State: formats.StateStore, Param: "store", Tool: -1})
	}
	for _, name := range []string{"previous_response_id", "conversation"} {
		if r.present(name) {
			r.gated = append(r.gated, formats.Gated{State: formats.StateConversation, Param: name, Tool: -1})
		}
	}
	if r.present("prompt") {
		r.gated = append(r.gated, formats.Gated{State: formats.StatePrompt, Param: "prompt", Tool: -1})
	}
	maxCalls, hasMax, err := r.optInt("max_tool_calls", 1)
	if err != nil {
		return err
	}
	forced := r.forcedHosted()
	for i := range r.gated {
		g := &r.gated[i]
		if g.Tool < 0 {
			continue
		}
		g.Forced = forced[g.Label] || (g.Hosted == formats.HostedWebSearch && forced["web_search*"])
		if g.Hosted != formats.HostedNone {
			if hasMax {
				g.MaxUses = int64(maxCalls)
			} else {
				g.TopAdd = []formats.Member{formats.IntMember("max_tool_calls", formats.DefaultHostedUses)}
			}
		}
	}
	return nil
}

// forcedHosted is the set of hosted tool types that tool_choice forces by
// type, or lists among its allowed tools (which OpenAI refuses when the
// tool is not offered).
func (r *Request) forcedHosted() map[string]bool {
	v := r.top["tool_choice"]
	if rawjson.Kind(v) != '{' {
		return nil
	}
	var c struct {
		Type  string `json:"type"`
		Tools []struct {
			Type string `json:"type"`
		} `json:"tools"`
	}
	if json.Unmarshal(v, &c) != nil {
		return nil
	}
	out := map[string]bool{}
	add := func(typ string) {
		out[typ] = true
		if strings.HasPrefix(typ, "web_search") { // web_search_preview forces web_search too
			out["web_search*"] = true
		}
	}
	switch c.Type {
	case "function", "custom":
	case "allowed_tools":
		for _, t := range c.Tools {
			add(t.Type)
		}
	default:
		add(c.Type)
	}
	return out
}

func (r *Request) addFunction(p, namespace string, t *tool) *formats.Error {
	if t.Name == "" {
		return invalid(p+".name", "Missing required parameter: '"+p+".name'.")
	}
	name := t.Name
	if namespace != "" {
		name = namespace + namespaceSep + t.Name
		if r.names == nil {
			r.names = map[string]Native{}
		}
		r.names[name] = Native{Namespace: namespace, Name: t.Name}
	}
	params := []byte(t.Parameters)
	if rawjson.IsNull(params) || len(params) == 0 {
		params = nil
	} else if rawjson.Kind(params) != '{' {
		return invalidType(p+".parameters", "an object (a JSON Schema)")
	}
	// strict only when the client said so: Responses' default (strict)
	// is not every upstream's to honour
	r.tools = append(r.tools, formats.Tool{Name: name, Description: t.Description, Parameters: params, Strict: t.Strict})
	r.size.Tools++
	return nil
}

// toolChoice reads tool_choice. A forced hosted tool comes back as a named
// choice whose name is NUL followed by the tool's type.
func (r *Request) toolChoice() (formats.ToolChoice, *formats.Error) {
	v, ok := r.top["tool_choice"]
	if !ok || rawjson.IsNull(v) {
		return formats.ToolChoice{}, nil
	}
	if rawjson.Kind(v) == '"' {
		s, _ := rawjson.Unquote(v)
		switch s {
		case "auto":
			return formats.ToolChoice{Mode: formats.ToolChoiceAuto}, nil
		case "none":
			return formats.ToolChoice{Mode: formats.ToolChoiceNone}, nil
		case "required":
			return formats.ToolChoice{Mode: formats.ToolChoiceRequired}, nil
		}
		return formats.ToolChoice{}, invalid("tool_choice", "Invalid value: '"+s+"'. Supported values are: 'none', 'auto', and 'required'.")
	}
	var c struct {
		Type  string `json:"type"`
		Name  string `json:"name"`
		Mode  string `json:"mode"`
		Tools []struct {
			Type string `json:"type"`
			Name string `json:"name"`
		} `json:"tools"`
	}
	if rawjson.Kind(v) != '{' || json.Unmarshal(v, &c) != nil {
		return formats.ToolChoice{}, invalidType("tool_choice", "a string or an object")
	}
	switch c.Type {
	case "function":
		if c.Name == "" {
			return formats.ToolChoice{}, invalid("tool_choice.name", "Missing required parameter: 'tool_choice.name'.")
		}
		return formats.ToolChoice{Mode: formats.ToolChoiceNamed, Name: c.Name}, nil
	case "allowed_tools":
		tc := formats.ToolChoice{Mode: formats.ToolChoiceAuto, Allowed: []string{}}
		if c.Mode == "required" {
			tc.Mode = formats.ToolChoiceRequired
		}
		for _, t := range c.Tools {
			if t.Type == "function" {
				tc.Allowed = append(tc.Allowed, t.Name)
			}
		}
		return tc, nil
	}
	// a hosted tool forced by name: only OpenAI can run it
	return formats.ToolChoice{Mode: formats.ToolChoiceNamed, Name: "\x00" + c.Type}, nil
}

// textFormat reads text.format.
func (r *Request) textFormat() (formats.ResponseFormat, *formats.Error) {
	v, ok := r.top["text"]
	if !ok || rawjson.IsNull(v) {
		return formats.ResponseFormat{}, nil
	}
	var t struct {
		Format *struct {
			Type        string          `json:"type"`
			Name        string          `json:"name"`
			Description string          `json:"description"`
			Schema      json.RawMessage `json:"schema"`
			Strict      *bool           `json:"strict"`
		} `json:"format"`
	}
	if rawjson.Kind(v) != '{' || json.Unmarshal(v, &t) != nil {
		return formats.ResponseFormat{}, invalidType("text", "an object")
	}
	if t.Format == nil {
		return formats.ResponseFormat{}, nil
	}
	f := t.Format
	switch f.Type {
	case "text":
		return formats.ResponseFormat{Type: formats.FormatText}, nil
	case "json_object":
		return formats.ResponseFormat{Type: formats.FormatJSONObject}, nil
	case "json_schema":
		if rawjson.Kind(f.Schema) != '{' {
			return formats.ResponseFormat{}, invalid("text.format.schema", "Missing required parameter: 'text.format.schema'.")
		}
		if f.Name == "" {
			return formats.ResponseFormat{}, invalid("text.format.name", "Missing required parameter: 'text.format.name'.")
		}
		return formats.ResponseFormat{Type: formats.FormatJSONSchema, Name: f.Name, Description: f.Description,
			Schema: []byte(f.Schema), Strict: f.Strict}, nil
	}
	return formats.ResponseFormat{}, invalid("text.format.type", "Invalid value: '"+f.Type+"'. Supported values are: 'text', 'json_object', and 'json_schema'.")
}

// reasoning reads reasoning.effort.
func (r *Request) reasoning() (*formats.Reasoning, *formats.Error) {
	v, ok := r.top["reasoning"]
	if !ok || rawjson.IsNull(v) {
		return nil, nil
	}
	var re struct {
		Effort *string `json:"effort"`
	}
	if rawjson.Kind(v) != '{' || json.Unmarshal(v, &re) != nil {
		return nil, invalidType("reasoning", "an object")
	}
	if re.Effort == nil {
		return nil, nil
	}
	switch *re.Effort {
	case "none", "minimal", "low", "medium", "high", "xhigh":
		return &formats.Reasoning{Effort: *re.Effort}, nil
	}
	return nil, invalid("reasoning.effort", "Invalid value: '"+*re.Effort+"'. Supported values are: 'none', 'minimal', 'low', 'medium', 'high' and 'xhigh'.")
}
