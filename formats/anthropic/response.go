package anthropic

import (
	"strings"

	"github.com/modelgate/modelgate/formats"
	"github.com/modelgate/modelgate/formats/internal/emit"
	"github.com/modelgate/modelgate/formats/internal/jsonval"
	"github.com/modelgate/modelgate/formats/internal/upstream"
	"github.com/modelgate/modelgate/formats/rawjson"
)

// PassThroughResponse appends to dst a non-streamed upstream Message for an
// Anthropic client: model replaced by serviceModel (inserted if missing),
// everything else byte-identical. u is the normalised usage (input_tokens
// plus both cache buckets, docs/translation.md, "Usage"); a zero Usage means
// the upstream reported none. A body that is not a Message (or that is an
// error) yields a *formats.Error.
func PassThroughResponse(dst, body []byte, serviceModel string) (out []byte, u formats.Usage, err *formats.Error) {
	var seen formats.HostedUses
	out, err = upstream.PassThrough(dst, body, upstream.ModelMember, serviceModel, func(m rawjson.Member, v []byte) (bool, *formats.Error) {
		switch {
		case m.NameIs("content"):
			seen = serverToolUses(v)
			return rawjson.Kind(v) == '[', nil
		case m.NameIs("usage"):
			u, _ = parseUsage(v)
		case m.NameIs("error"):
			if rawjson.Kind(v) == '{' {
				return false, streamError(parseErrorObject(v))
			}
		}
		return false, nil
	})
	if err != nil {
		return out, formats.Usage{}, err
	}
	u.Hosted = u.Hosted.Max(seen)
	return out, u, nil
}

// DecodeMessagesResponse parses an upstream Message into the IR: text,
// thinking (with its signature), redacted thinking and tool calls, in
// order; server-tool blocks and citations are dropped. A tool_use of the
// gateway's JSON-output tool (the json_schema emulation of
// RenderMessagesRequest) becomes the answer's text. HasUsage is set when
// the body has a usage object.
func DecodeMessagesResponse(body []byte) (*formats.Response, *formats.Error) {
	body, ok := upstream.Object(body)
	if !ok {
		return nil, upstream.Unusable()
	}
	resp := &formats.Response{}
	var content, stop, seq []byte
	it := rawjson.Object(body, 0)
	for it.Next() {
		v := it.Value()
		switch {
		case it.NameIs("id"):
			jsonval.SetStr(&resp.ID, v)
		case it.NameIs("model"):
			jsonval.SetStr(&resp.Model, v)
		case it.NameIs("content"):
			content = v
		case it.NameIs("stop_reason"):
			stop = v
		case it.NameIs("stop_sequence"):
			seq = v
		case it.NameIs("usage"):
			resp.Usage, resp.HasUsage = parseUsage(v)
		case it.NameIs("error"):
			if rawjson.Kind(v) == '{' {
				return nil, streamError(parseErrorObject(v))
			}
		}
	}
	if rawjson.Kind(content) != '[' {
		return nil, upstream.Unusable()
	}
	resp.Usage.Hosted = resp.Usage.Hosted.Max(serverToolUses(content))
	jsonOut := false
	ci := rawjson.Array(content, 0)
	for ci.Next() {
		f := readBlock(ci.Value())
		switch {
		case rawjson.StringIs(f.typ, "text"):
			if rawjson.Kind(f.text) == '"' && len(f.text) > 2 {
				resp.Content = append(resp.Content, formats.Part{Type: formats.PartText, Text: jsonval.Str(f.text)})
			}
		case rawjson.StringIs(f.typ, "thinking"):
			p := formats.Part{Type: formats.PartThinking}
			jsonval.SetStr(&p.Text, f.thinking)
			jsonval.SetStr(&p.Signature, f.signature)
			resp.Content = append(resp.Content, p)
		case rawjson.StringIs(f.typ, "redacted_thinking"):
			if rawjson.Kind(f.data) == '"' {
				resp.Content = append(resp.Content, formats.Part{Type: formats.PartRedactedThinking, Signature: jsonval.Str(f.data)})
			}
		case rawjson.StringIs(f.typ, "tool_use"):
			args := "{}"
			if rawjson.Kind(f.input) == '{' {
				args = string(rawjson.Compact(nil, f.input))
			}
			if rawjson.StringIs(f.name, jsonToolName) {
				jsonOut = true
				resp.Content = append(resp.Content, formats.Part{Type: formats.PartText, Text: args})
				continue
			}
			tc := &formats.ToolCall{Arguments: args}
			jsonval.SetStr(&tc.ID, f.id)
			jsonval.SetStr(&tc.Name, f.name)
			resp.Content = append(resp.Content, formats.Part{Type: formats.PartToolCall, ToolCall: tc})
		}
	}
	if ci.Err() != nil {
		return nil, upstream.Unusable()
	}
	resp.Stop = stopToIR(stop)
	if resp.Stop == formats.StopSequence && rawjson.Kind(seq) == '"' {
		resp.StopSequence = jsonval.Str(seq)
	}
	hasCalls := resp.HasToolCalls()
	if jsonOut && !hasCalls && resp.Stop == formats.StopToolUse {
		resp.Stop = formats.StopEnd
	}
	resp.Stop = resp.Stop.Final(hasCalls)
	return resp, nil
}

// messageID keeps an upstream id that suits Anthropic clients, else makes
// one.
func messageID(id string) string {
	if strings.HasPrefix(id, "msg_") && len(id) <= 128 && validID(id) {
		return id
	}
	return formats.NewID("msg_")
}

// toolUseID keeps an upstream tool call id that Anthropic clients accept,
// else makes one (docs/translation.md, "Tool call ids and arguments").
func toolUseID(id string) string {
	if validID(id) && len(id) <= 128 {
		return id
	}
	return formats.NewID("toolu_")
}

// RenderMessagesResponse appends an IR answer as an Anthropic Message for the
// service model (docs/translation.md, "Answers"): text and refusal parts as
// text blocks, tool calls as tool_use blocks (ids kept when valid, else
// toolu_…), thinking only when it carries an Anthropic signature (reasoning of
// other vendors is dropped), the stop reason of §5.2 and the four usage counts.
func RenderMessagesResponse(dst []byte, resp *formats.Response, model string) []byte {
	dst = append(dst, `{"id":`...)
	dst = rawjson.AppendQuote(dst, messageID(resp.ID))
	dst = append(dst, `,"type":"message","role":"assistant","model":`...)
	dst = rawjson.AppendQuote(dst, model)
	dst = append(dst, `,"content":[`...)
	n := 0
	sep := func() {
		if n > 0 {
			dst = append(dst, ',')
		}
		n++
	}
	for i := range resp.Content {
		p := &resp.Content[i]
		switch p.Type {
		case formats.PartText, formats.PartRefusal:
			if p.Text == "" {
				continue
			}
			sep()
			dst = append(dst, `{"type":"text","text":`...)
			dst = rawjson.AppendQuote(dst, p.Text)
			dst = append(dst, '}')
		case formats.PartThinking:
			if p.Signature == "" {
				continue
			}
			sep()
			dst = append(dst, `{"type":"thinking","thinking":`...)
			dst = rawjson.AppendQuote(dst, p.Text)
			dst = append(dst, `,"signature":`...)
			dst = rawjson.AppendQuote(dst, p.Signature)
			dst = append(dst, '}')
		case formats.PartRedactedThinking:
			if p.Signature == "" {
				continue
			}
			sep()
			dst = append(dst, `{"type":"redacted_thinking","data":`...)
			dst = rawjson.AppendQuote(dst, p.Signature)
			dst = append(dst, '}')
		case formats.PartToolCall:
			sep()
			dst = append(dst, `{"type":"tool_use","id":`...)
			dst = rawjson.AppendQuote(dst, toolUseID(p.ToolCall.ID))
			dst = append(dst, `,"name":`...)
			dst = rawjson.AppendQuote(dst, p.ToolCall.Name)
			dst = append(dst, `,"input":`...)
			dst = emit.AppendArgs(dst, p.ToolCall.Arguments)
			dst = append(dst, '}')
		}
	}
	dst = append(dst, "],"...)
	dst = appendStop(dst, resp.Stop.Final(resp.HasToolCalls()), resp.StopSequence)
	dst = append(dst, `,"usage":`...)
	dst = appendUsage(dst, resp.Usage)
	return append(dst, '}')
}

// AppendCountTokensResponse appends a count_tokens answer,
// {"input_tokens":n}.
func AppendCountTokensResponse(dst []byte, inputTokens int64) []byte {
	dst = append(dst, `{"input_tokens":`...)
	dst = rawjson.AppendInt(dst, inputTokens)
	return append(dst, '}')
}

// ParseCountTokensResponse reads an upstream count_tokens answer.
func ParseCountTokensResponse(body []byte) (int64, *formats.Error) {
	body, ok := upstream.Object(body)
	if !ok {
		return 0, upstream.Unusable()
	}
	if ev := rawjson.Get(body, "error"); rawjson.Kind(ev) == '{' {
		return 0, streamError(parseErrorObject(ev))
	}
	v := rawjson.Get(body, "input_tokens")
	n, ok := rawjson.ParseInt(v)
	if rawjson.Kind(v) != '0' || !ok || n < 0 {
		return 0, upstream.Unusable()
	}
	return n, nil
}

// serverToolUses counts the server_tool_use blocks of a content array by
// the hosted tool they call: each web_search or web_fetch block is a
// use, whatever the usage says.
func serverToolUses(content []byte) formats.HostedUses {
	var h formats.HostedUses
	it := rawjson.Array(content, 0)
	for it.Next() {
		v := it.Value()
		if rawjson.StringIs(rawjson.Get(v, "type"), "server_tool_use") {
			h.Add(serverToolKind(rawjson.Get(v, "name")), 1)
		}
	}
	return h
}

// serverToolKind is the hosted kind of a server_tool_use block's name.
func serverToolKind(name []byte) formats.HostedKind {
	switch {
	case rawjson.StringIs(name, "web_search"):
		return formats.HostedWebSearch
	case rawjson.StringIs(name, "web_fetch"):
		return formats.HostedWebFetch
	}
	return formats.HostedNone
}
