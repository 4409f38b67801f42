package responses

import (
	"time"

	"github.com/modelgate/modelgate/formats"
	"github.com/modelgate/modelgate/formats/internal/upstream"
	"github.com/modelgate/modelgate/formats/rawjson"
)

// Rewrite appends to dst the body of a validated request for an OpenAI
// upstream: model set to upstreamModel and, when maxTokens > 0,
// max_output_tokens set to it; everything else byte for byte.
func Rewrite(dst, body []byte, upstreamModel string, maxTokens int) ([]byte, error) {
	var mq [96]byte
	out, err := rawjson.Set(make([]byte, 0, len(body)+48), body, "model", rawjson.AppendQuote(mq[:0], upstreamModel))
	if err != nil || maxTokens <= 0 {
		return append(dst, out...), err
	}
	var nb [24]byte
	return rawjson.Set(dst, out, "max_output_tokens", rawjson.AppendInt(nb[:0], int64(maxTokens)))
}

// parseUsage reads a Responses usage object: input_tokens includes
// cached_tokens, output_tokens includes reasoning_tokens.
func parseUsage(v []byte) (formats.Usage, bool) {
	return upstream.ParseUsage(v, &upstream.ResponsesUsage)
}

// appendUsage renders IR usage as a Responses usage object, with every
// count OpenAI's ResponseUsage requires (cache_write_tokens among them).
func appendUsage(dst []byte, u formats.Usage) []byte {
	dst = append(dst, `{"input_tokens":`...)
	dst = rawjson.AppendInt(dst, u.Input)
	dst = append(dst, `,"input_tokens_details":{"cached_tokens":`...)
	dst = rawjson.AppendInt(dst, u.CacheRead)
	dst = append(dst, `,"cache_write_tokens":`...)
	dst = rawjson.AppendInt(dst, u.CacheWrite)
	dst = append(dst, `},"output_tokens":`...)
	dst = rawjson.AppendInt(dst, u.Output)
	dst = append(dst, `,"output_tokens_details":{"reasoning_tokens":`...)
	dst = rawjson.AppendInt(dst, u.Reasoning)
	dst = append(dst, `},"total_tokens":`...)
	dst = rawjson.AppendInt(dst, u.Input+u.Output)
	return append(dst, '}')
}

// PassThrough appends an OpenAI upstream's Responses answer with its model
// replaced by the service model, and reads its usage.
func PassThrough(dst, body []byte, serviceModel string) ([]byte, formats.Usage, *formats.Error) {
	var u formats.Usage
	var seen formats.HostedUses
	out, err := upstream.PassThrough(dst, body, upstream.ModelMember, serviceModel, func(m rawjson.Member, v []byte) (bool, *formats.Error) {
		switch {
		case m.NameIs("output"):
			seen = hostedItems(v)
			return rawjson.Kind(v) == '[', nil
		case m.NameIs("usage"):
			u, _ = parseUsage(v)
		}
		return false, nil
	})
	if err != nil {
		return out, formats.Usage{}, err
	}
	u.Hosted = u.Hosted.Max(seen)
	return out, u, nil
}

// status is a Responses status and incomplete reason for an IR stop.
func status(stop formats.StopReason) (st, reason string) {
	switch stop {
	case formats.StopLength, formats.StopContextWindow:
		return "incomplete", "max_output_tokens"
	case formats.StopContentFilter:
		return "incomplete", "content_filter"
	}
	return "completed", ""
}

// Render appends a whole answer as a Responses object.
// req, when not nil, supplies the echoed settings and the namespaced tool
// names to restore.
func Render(dst []byte, resp *formats.Response, model string, req *Request) []byte {
	created := resp.Created
	if created <= 0 {
		created = time.Now().Unix()
	}
	st, reason := status(resp.Stop.Final(resp.HasToolCalls()))
	var names map[string]Native
	if req != nil {
		names = req.names
	}
	o := object{id: formats.NewID("resp_"), created: created, model: model, req: req}
	dst = o.open(dst, st)
	for i := range resp.Content {
		p := &resp.Content[i]
		switch p.Type {
		case formats.PartText, formats.PartRefusal:
			if o.msg == nil {
				o.msg = &message{id: formats.NewID("msg_")}
			}
			o.msg.parts = append(o.msg.parts, *p)
		case formats.PartToolCall:
			o.flushMessage()
			o.items = appendFunctionCall(o.items, formats.NewID("fc_"), p.ToolCall.ID, p.ToolCall.Name, p.ToolCall.Arguments, "completed", names)
		}
	}
	o.flushMessage()
	dst = append(dst, o.items...)
	return o.close(dst, st, reason, resp.Usage, true)
}

// object builds a Responses object: its opening members, output items and
// closing members.
type object struct {
	id      string
	created int64
	model   string
	req     *Request
	items   []byte // rendered output items, comma-separated
	msg     *message
}

// message is an assistant message item being collected.
type message struct {
	id    string
	parts []formats.Part
}

func (o *object) open(dst []byte, st string) []byte {
	dst = append(dst, `{"id":`...)
	dst = rawjson.AppendQuote(dst, o.id)
	dst = append(dst, `,"object":"response","created_at":`...)
	dst = rawjson.AppendInt(dst, o.created)
	dst = append(dst, `,"status":`...)
	dst = rawjson.AppendQuote(dst, st)
	dst = append(dst, `,"model":`...)
	dst = rawjson.AppendQuote(dst, o.model)
	return append(dst, `,"output":[`...)
}

// flushMessage renders the collected message item.
func (o *object) flushMessage() {
	if o.msg == nil {
		return
	}
	if len(o.items) > 0 {
		o.items = append(o.items, ',')
	}
	o.items = appendMessage(o.items, o.msg.id, "completed", o.msg.parts)
	o.msg = nil
}

// close ends the output list and renders the rest of the object. Without
// usage the usage member is left out: OpenAI's Response has no null usage.
func (o *object) close(dst []byte, st, reason string, u formats.Usage, hasUsage bool) []byte {
	dst = append(dst, ']')
	if hasUsage {
		dst = append(dst, `,"usage":`...)
		dst = appendUsage(dst, u)
	}
	dst = append(dst, `,"error":null,"incomplete_details":`...)
	if reason != "" {
		dst = append(dst, `{"reason":`...)
		dst = rawjson.AppendQuote(dst, reason)
		dst = append(dst, '}')
	} else {
		dst = append(dst, "null"...)
	}
	return o.echo(dst)
}

// echo renders the request settings a Responses object repeats.
func (o *object) echo(dst []byte) []byte {
	for _, m := range [...]struct{ name, def string }{
		{"instructions", "null"}, {"max_output_tokens", "null"}, {"parallel_tool_calls", "true"},
		{"previous_response_id", "null"}, {"temperature", "1"}, {"top_p", "1"}, {"tool_choice", `"auto"`},
		{"tools", "[]"}, {"text", `{"format":{"type":"text"}}`}, {"metadata", "{}"}, {"store", "false"},
	} {
		dst = append(dst, ',')
		dst = rawjson.AppendQuote(dst, m.name)
		dst = append(dst, ':')
		var v []byte
		if o.req != nil {
			v = o.req.top[m.name]
		}
		switch {
		case len(v) == 0:
			dst = append(dst, m.def...)
		case m.name == "tools":
			dst = appendTools(dst, v)
		default:
			dst = rawjson.Compact(dst, v)
		}
	}
	return append(dst, '}')
}

// appendTools echoes the request's tools, compacted. A function tool gets
// the members OpenAI's FunctionTool requires when the client left them out,
// as null: parameters, and strict (which the gateway did not ask of the
// upstream: docs/translation.md, "Tools").
func appendTools(dst, tools []byte) []byte {
	if rawjson.Kind(tools) != '[' {
		return rawjson.Compact(dst, tools)
	}
	dst = append(dst, '[')
	it := rawjson.Array(tools, 0)
	for it.Next() {
		if it.Len() > 1 {
			dst = append(dst, ',')
		}
		t := it.Value()
		start := len(dst)
		dst = rawjson.Compact(dst, t)
		if rawjson.Kind(t) != '{' || !rawjson.StringIs(rawjson.Get(t, "type"), "function") {
			continue
		}
		for _, name := range [...]string{"parameters", "strict"} {
			if rawjson.Get(t, name) == nil {
				// the compacted object ends in '}': the member goes before it
				at := len(dst) - 1
				dst = append(rawjson.AppendMember(dst[:at], at > start+1, name, lit.null), '}')
			}
		}
	}
	return append(dst, ']')
}

// lit holds literal bytes the encoders splice in.
var lit = struct{ null []byte }{null: []byte("null")}

// appendMessage renders an assistant message item.
func appendMessage(dst []byte, id, st string, parts []formats.Part) []byte {
	dst = append(dst, `{"type":"message","id":`...)
	dst = rawjson.AppendQuote(dst, id)
	dst = append(dst, `,"role":"assistant","status":`...)
	dst = rawjson.AppendQuote(dst, st)
	dst = append(dst, `,"content":[`...)
	for i := range parts {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendContentPart(dst, parts[i].Type, parts[i].Text)
	}
	return append(dst, "]}"...)
}

// appendContentPart renders an output_text or refusal part.
func appendContentPart(dst []byte, typ formats.PartType, text string) []byte {
	if typ == formats.PartRefusal {
		dst = append(dst, `{"type":"refusal","refusal":`...)
		dst = rawjson.AppendQuote(dst, text)
		return append(dst, '}')
	}
	dst = append(dst, `{"type":"output_text","text":`...)
	dst = rawjson.AppendQuote(dst, text)
	return append(dst, `,"annotations":[],"logprobs":[]}`...)
}

// appendFunctionCall renders a function_call item (comma first when dst
// already holds items), restoring a namespaced tool's own name.
func appendFunctionCall(dst []byte, id, callID, name, args, st string, names map[string]Native) []byte {
	if len(dst) > 0 && dst[len(dst)-1] != '[' && dst[len(dst)-1] != ',' {
		dst = append(dst, ',')
	}
	dst = append(dst, `{"type":"function_call","id":`...)
	dst = rawjson.AppendQuote(dst, id)
	dst = append(dst, `,"call_id":`...)
	dst = rawjson.AppendQuote(dst, callID)
	if n, ok := names[name]; ok {
		dst = append(dst, `,"namespace":`...)
		dst = rawjson.AppendQuote(dst, n.Namespace)
		name = n.Name
	}
	dst = append(dst, `,"name":`...)
	dst = rawjson.AppendQuote(dst, name)
	dst = append(dst, `,"arguments":`...)
	dst = rawjson.AppendQuote(dst, args)
	dst = append(dst, `,"status":`...)
	dst = rawjson.AppendQuote(dst, st)
	return append(dst, '}')
}

// hostedItems counts the hosted tool calls among the output items of a
// response: each web_search_call is a search, each
// image_generation_call an image, billed per use.
func hostedItems(output []byte) formats.HostedUses {
	var h formats.HostedUses
	it := rawjson.Array(output, 0)
	for it.Next() {
		h.Add(hostedItemKind(rawjson.Get(it.Value(), "type")), 1)
	}
	return h
}

// hostedItemKind is the fee kind of an output item's type.
func hostedItemKind(typ []byte) formats.HostedKind {
	switch {
	case rawjson.StringIs(typ, "web_search_call"):
		return formats.HostedWebSearch
	case rawjson.StringIs(typ, "image_generation_call"):
		return formats.HostedImageGeneration
	}
	return formats.HostedNone
}
