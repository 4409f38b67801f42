package formats

import (
	"strconv"

	"github.com/modelgate/modelgate/formats/rawjson"
)

// Hosted tools and upstream state. Some request features make the
// upstream do work, or reach data, that the tokens of the answer do not
// show: hosted tools that cost a fee per use (web search, web fetch, image
// generation), and state kept in the operator's account at the provider
// (stored responses, uploaded files, vector stores, containers, MCP
// servers, cached contents). Each vendor parser reports every such feature
// of a request as a Gated use; the gateway serves a fee-bearing tool only
// when the model prices it, and a state feature only when the model allows
// it, and otherwise drops the tool (named in x-modelgate-dropped) or refuses
// the request with a 400 naming the field.

// HostedKind is a hosted tool that costs a fee per use.
type HostedKind uint8

// The hosted tool kinds. HostedNone marks a Gated use that is not a
// fee-bearing tool; HostedUnmetered a fee-bearing tool the gateway cannot
// count (Gemini's Google Maps grounding), which is never served.
const (
	HostedNone HostedKind = iota
	HostedWebSearch
	HostedWebFetch
	HostedImageGeneration
	HostedUnmetered
)

var hostedNames = [...]string{"", "web_search", "web_fetch", "image_generation", "unmetered"}

// String is the kind's name in the Caddyfile's price line and in logs.
func (k HostedKind) String() string {
	if int(k) < len(hostedNames) {
		return hostedNames[k]
	}
	return "unknown"
}

// PricedHostedKinds are the kinds a model may price, in price-line order.
var PricedHostedKinds = [...]HostedKind{HostedWebSearch, HostedWebFetch, HostedImageGeneration}

// ParseHostedKind reads a priced kind's name (web_search, web_fetch,
// image_generation).
func ParseHostedKind(s string) (HostedKind, bool) {
	for _, k := range PricedHostedKinds {
		if k.String() == s {
			return k, true
		}
	}
	return HostedNone, false
}

// Hosted-tool bounds, for holds and for the caps the gateway sends upstream.
const (
	// DefaultHostedUses is the number of uses of each hosted tool a request
	// is held for when it sets no cap of its own (Anthropic max_uses,
	// Responses max_tool_calls); the gateway sends it upstream as the cap
	// where the vendor has one.
	DefaultHostedUses = 5
	// MaxHostedUses bounds a request's own cap.
	MaxHostedUses = 1000
	// SearchResultTokens is the input allowance held for the results of one
	// web search, which the upstream feeds back to the model and bills as
	// input (OpenAI counts a fixed 8,000-token block per search for some
	// models; Anthropic's result blocks are of that order).
	SearchResultTokens = 16384
	// FetchTokens is the input allowance held for one fetched page; the
	// gateway sends it upstream as Anthropic's max_content_tokens when the
	// client set none.
	FetchTokens = 65536
)

// ResultTokens is the input allowance held for one use of the kind.
func (k HostedKind) ResultTokens() int64 {
	switch k {
	case HostedWebSearch:
		return SearchResultTokens
	case HostedWebFetch:
		return FetchTokens
	}
	return 0
}

// State is a feature that reaches state kept in the operator's account at
// the upstream provider.
type State uint8

// The state features. The ones before StateBackground may be allowed per
// model in the Caddyfile; background responses and documents the upstream
// fetches by URL are never served (the gateway cannot bill what happens
// after the call, nor bound what a URL holds).
const (
	StateNone          State = iota
	StateStore               // store: true (Responses, Chat Completions)
	StateConversation        // previous_response_id, conversation, item_reference
	StatePrompt              // a stored prompt template (Responses prompt)
	StateFiles               // Files API references (file_id, fileData)
	StateFileSearch          // vector stores (OpenAI file_search, Gemini fileSearch)
	StateCodeExecution       // containers (OpenAI code_interpreter, Anthropic code_execution and container)
	StateMCP                 // remote MCP servers (OpenAI mcp tools, Anthropic mcp_servers)
	StateCachedContent       // Gemini cachedContent
	StateBackground          // Responses background: never served
	StateDocumentURL         // a document the upstream fetches by URL: never served
)

var stateNames = [...]string{"", "store", "conversation", "prompt", "files", "file_search", "code_execution", "mcp",
	"cached_content", "background", "document_url"}

// String is the state's name in the Caddyfile (allow_stateful) and in
// messages.
func (s State) String() string {
	if int(s) < len(stateNames) {
		return stateNames[s]
	}
	return "unknown"
}

// Configurable reports whether a model may allow the state.
func (s State) Configurable() bool { return s > StateNone && s < StateBackground }

// ParseState reads a configurable state's name.
func ParseState(name string) (State, bool) {
	for s := StateStore; s < StateBackground; s++ {
		if s.String() == name {
			return s, true
		}
	}
	return StateNone, false
}

// Gated is one use in a request of a fee-bearing hosted tool or of upstream
// state, as the vendor parser found it.
type Gated struct {
	// Hosted is the tool's fee kind (HostedNone for a state feature
	// alone).
	Hosted HostedKind
	// State is the state the feature reaches (StateNone for a stateless
	// tool).
	State State
	// Param is the client's path of the field, for a 400.
	Param string
	// Label names it in x-modelgate-dropped when it is dropped.
	Label string
	// Tool is the feature's index in the top-level tools array, or -1.
	Tool int
	// Member, for a tool, is the member of the tools element that holds it
	// (Gemini puts built-in tools in members of a Tool object); dropping
	// it removes that member, and the element when nothing is left. Empty:
	// dropping removes the whole element.
	Member string
	// Top, for a feature that is a top-level member (Chat Completions'
	// web_search_options), is its name; dropping deletes it.
	Top string
	// Forced says that tool_choice forces the tool: an unpriced forced tool
	// is a 400, not a drop.
	Forced bool
	// MaxUses is the request's own cap on the tool's uses, 0 when none.
	MaxUses int64
	// Fixed says that the feature costs exactly MaxUses uses whenever it is
	// sent (Chat Completions' web search: one search per request).
	Fixed bool
	// ToolAdd are members added to the tools element, when absent, if the
	// tool is served (Anthropic max_uses, max_content_tokens): they make
	// the hold a bound.
	ToolAdd []Member
	// TopAdd are top-level members added, when absent, if the tool is
	// served (Responses max_tool_calls).
	TopAdd []Member
}

// Member is a JSON member: a name and its raw value.
type Member struct {
	Name  string
	Value []byte
}

// Uses is the number of uses a request is held for: its own cap, or
// DefaultHostedUses.
func (g *Gated) Uses() int64 {
	if g.MaxUses > 0 {
		return min(g.MaxUses, MaxHostedUses)
	}
	return DefaultHostedUses
}

// HostedUses counts the uses of fee-bearing hosted tools in one answer.
type HostedUses struct {
	WebSearch       int64 // searches (Anthropic web_search_requests, OpenAI web_search_call items, Gemini search queries)
	WebFetch        int64 // pages fetched (Anthropic web_fetch_requests, Gemini urlContext URLs)
	ImageGeneration int64 // images made by a hosted tool (OpenAI image_generation_call items)
}

// Get returns the count of a kind.
func (h HostedUses) Get(k HostedKind) int64 {
	switch k {
	case HostedWebSearch:
		return h.WebSearch
	case HostedWebFetch:
		return h.WebFetch
	case HostedImageGeneration:
		return h.ImageGeneration
	}
	return 0
}

// Add adds n uses of a kind.
func (h *HostedUses) Add(k HostedKind, n int64) {
	switch k {
	case HostedWebSearch:
		h.WebSearch += n
	case HostedWebFetch:
		h.WebFetch += n
	case HostedImageGeneration:
		h.ImageGeneration += n
	}
}

// Max is the count of each kind in h or o, whichever is larger: two
// readings of one answer (its usage counts and its tool items) are merged
// so that the bill covers both.
func (h HostedUses) Max(o HostedUses) HostedUses {
	return HostedUses{max(h.WebSearch, o.WebSearch), max(h.WebFetch, o.WebFetch), max(h.ImageGeneration, o.ImageGeneration)}
}

// IsZero reports whether no use was counted.
func (h HostedUses) IsZero() bool { return h == HostedUses{} }

// A HostedMeter counts the hosted-tool uses seen so far in an answer, from
// its usage figures and from the tool items themselves, whether or not the
// answer reported token usage: a stream cut before its usage still shows
// the searches it made. Stream translators of formats with hosted tools
// implement it.
type HostedMeter interface {
	HostedUses() HostedUses
}

// ToolEdit is the gateway's change to one element of a request's tools
// array.
type ToolEdit struct {
	Index int
	// Drop removes the element.
	Drop bool
	// DropMember removes a member of the element, and the element when no
	// member is left.
	DropMember string
	// Add are members added to the element when it has none of that name.
	Add []Member
}

// BodyEdits are the gateway's own changes to a request body it passes
// through to an upstream of the same format: hosted tools removed
// or capped, top-level members removed or added.
type BodyEdits struct {
	Tools []ToolEdit
	// Delete removes these top-level members.
	Delete []string
	// SetIfAbsent adds these top-level members when the body has none of
	// that name (or it is null).
	SetIfAbsent []Member
}

// Empty reports whether there is nothing to change.
func (e *BodyEdits) Empty() bool {
	return len(e.Tools) == 0 && len(e.Delete) == 0 && len(e.SetIfAbsent) == 0
}

// AddTop adds a top-level member to set when absent, once per name.
func (e *BodyEdits) AddTop(m Member) {
	for _, x := range e.SetIfAbsent {
		if x.Name == m.Name {
			return
		}
	}
	e.SetIfAbsent = append(e.SetIfAbsent, m)
}

// Apply appends body with the edits applied to dst. body must be a JSON
// object; members and elements not edited stay byte-identical.
func (e *BodyEdits) Apply(dst, body []byte) ([]byte, error) {
	if e.Empty() {
		return append(dst, body...), nil
	}
	out := body
	if len(e.Tools) > 0 {
		start, end, err := rawjson.Find(out, "tools")
		if err != nil {
			return dst, err
		}
		if start >= 0 && out[start] == '[' {
			arr, err := e.editTools(nil, out[start:end])
			if err != nil {
				return dst, err
			}
			out = rawjson.Apply(make([]byte, 0, len(out)), out, rawjson.Edit{Start: start, End: end, Text: arr})
		}
	}
	for _, name := range e.Delete {
		b, err := rawjson.Delete(make([]byte, 0, len(out)), out, name)
		if err != nil {
			return dst, err
		}
		out = b
	}
	for _, m := range e.SetIfAbsent {
		if v := rawjson.Get(out, m.Name); v != nil && !rawjson.IsNull(v) {
			continue
		}
		b, err := rawjson.Set(make([]byte, 0, len(out)+len(m.Name)+len(m.Value)+4), out, m.Name, m.Value)
		if err != nil {
			return dst, err
		}
		out = b
	}
	return append(dst, out...), nil
}

// editTools appends the tools array arr with the tool edits applied.
func (e *BodyEdits) editTools(dst, arr []byte) ([]byte, error) {
	dst = append(dst, '[')
	n := 0
	it := rawjson.Array(arr, 0)
	for it.Next() {
		v := it.Value()
		var ed *ToolEdit
		for i := range e.Tools {
			if e.Tools[i].Index == it.Len()-1 {
				ed = &e.Tools[i]
				break
			}
		}
		if ed != nil {
			if ed.Drop {
				continue
			}
			var err error
			var keep bool
			if v, keep, err = ed.apply(v); err != nil {
				return dst, err
			} else if !keep {
				continue
			}
		}
		if n > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, v...)
		n++
	}
	if it.Err() != nil {
		return dst, it.Err()
	}
	return append(dst, ']'), nil
}

// apply edits one tools element (an object); keep is false when nothing is
// left of it.
func (ed *ToolEdit) apply(v []byte) (out []byte, keep bool, err error) {
	if rawjson.Kind(v) != '{' {
		return v, true, nil
	}
	out = append(make([]byte, 0, len(v)+32), '{')
	n := 0
	have := map[string]bool{}
	it := rawjson.Object(v, 0)
	for it.Next() {
		m := it.Member()
		name := string(it.AppendName(nil))
		if ed.DropMember != "" && name == ed.DropMember {
			continue
		}
		have[name] = true
		if n > 0 {
			out = append(out, ',')
		}
		out = append(out, v[m.Start:m.ValueEnd]...)
		n++
	}
	if it.Err() != nil {
		return v, true, it.Err()
	}
	if n == 0 && ed.DropMember != "" {
		return nil, false, nil
	}
	for _, a := range ed.Add {
		if have[a.Name] {
			continue
		}
		out = rawjson.AppendMember(out, n > 0, a.Name, a.Value)
		n++
	}
	return append(out, '}'), true, nil
}

// IntMember is a member with an integer value.
func IntMember(name string, n int64) Member {
	return Member{Name: name, Value: strconv.AppendInt(nil, n, 10)}
}
