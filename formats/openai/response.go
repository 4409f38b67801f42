package openai

import (
	"bytes"
	"strings"
	"time"

	"github.com/modelgate/modelgate/formats"
	"github.com/modelgate/modelgate/formats/internal/jsonval"
	"github.com/modelgate/modelgate/formats/internal/upstream"
	"github.com/modelgate/modelgate/formats/rawjson"
)

// PassThroughResponse appends to dst a non-streamed upstream chat completion
// for the client: model replaced by serviceModel (inserted if missing),
// everything else byte-identical. u is the normalised usage; a zero Usage
// means the upstream reported none. A body that is not a chat completion (or
// that carries an error) yields a *formats.Error.
func PassThroughResponse(dst, body []byte, serviceModel string) (out []byte, u formats.Usage, err *formats.Error) {
	var searched bool
	out, err = upstream.PassThrough(dst, body, upstream.ModelMember, serviceModel, func(m rawjson.Member, v []byte) (bool, *formats.Error) {
		switch {
		case m.NameIs("choices"):
			searched = citesWeb(v)
			return rawjson.Kind(v) == '[', nil
		case m.NameIs("usage"):
			u, _ = parseUsage(v)
		case m.NameIs("error"):
			if !rawjson.IsNull(v) {
				return false, streamError(errorValue(v))
			}
		}
		return false, nil
	})
	if err != nil {
		return out, formats.Usage{}, err
	}
	if searched {
		u.Hosted.WebSearch = 1
	}
	return out, u, nil
}

// DecodeChatResponse parses an upstream chat completion into the IR (first
// choice only: the IR answer has one choice). Non-standard reasoning
// fields (reasoning_content, reasoning) become a thinking part.
func DecodeChatResponse(body []byte) (*formats.Response, *formats.Error) {
	body, ok := upstream.Object(body)
	if !ok {
		return nil, upstream.Unusable()
	}
	resp := &formats.Response{}
	var choices []byte
	it := rawjson.Object(body, 0)
	for it.Next() {
		v := it.Value()
		switch {
		case it.NameIs("id"):
			jsonval.SetStr(&resp.ID, v)
		case it.NameIs("model"):
			jsonval.SetStr(&resp.Model, v)
		case it.NameIs("created"):
			resp.Created = jsonval.Count(v)
		case it.NameIs("choices"):
			choices = v
		case it.NameIs("usage"):
			resp.Usage, resp.HasUsage = parseUsage(v)
		case it.NameIs("error"):
			if !rawjson.IsNull(v) {
				return nil, streamError(errorValue(v))
			}
		}
	}
	if rawjson.Kind(choices) != '[' {
		return nil, upstream.Unusable()
	}
	ci := rawjson.Array(choices, 0)
	if ci.Next() {
		choice := ci.Value()
		msg := rawjson.Get(choice, "message")
		resp.Stop = finishToIR(rawjson.Get(choice, "finish_reason"))
		if rawjson.Kind(msg) == '{' {
			var content, refusal, calls, reasoning []byte
			mi := rawjson.Object(msg, 0)
			for mi.Next() {
				switch {
				case mi.NameIs("content"):
					content = mi.Value()
				case mi.NameIs("refusal"):
					refusal = mi.Value()
				case mi.NameIs("tool_calls"):
					calls = mi.Value()
				case mi.NameIs("reasoning_content"), mi.NameIs("reasoning"):
					if rawjson.Kind(mi.Value()) == '"' {
						reasoning = mi.Value()
					}
				}
			}
			if len(reasoning) > 2 {
				resp.Content = append(resp.Content, formats.Part{Type: formats.PartThinking, Text: jsonval.Str(reasoning)})
			}
			switch rawjson.Kind(content) {
			case '"':
				if len(content) > 2 {
					resp.Content = append(resp.Content, formats.Part{Type: formats.PartText, Text: jsonval.Str(content)})
				}
			case '[': // some servers answer with text parts
				pi := rawjson.Array(content, 0)
				for pi.Next() {
					if t := rawjson.Get(pi.Value(), "text"); rawjson.Kind(t) == '"' && len(t) > 2 {
						resp.Content = append(resp.Content, formats.Part{Type: formats.PartText, Text: jsonval.Str(t)})
					}
				}
			}
			if rawjson.Kind(refusal) == '"' && len(refusal) > 2 {
				resp.Content = append(resp.Content, formats.Part{Type: formats.PartRefusal, Text: jsonval.Str(refusal)})
			}
			if rawjson.Kind(calls) == '[' {
				ti := rawjson.Array(calls, 0)
				for ti.Next() {
					c := ti.Value()
					fn := rawjson.Get(c, "function")
					tc := &formats.ToolCall{}
					if id := rawjson.Get(c, "id"); rawjson.Kind(id) == '"' {
						tc.ID = jsonval.Str(id)
					}
					if n := rawjson.Get(fn, "name"); rawjson.Kind(n) == '"' {
						tc.Name = jsonval.Str(n)
					}
					if a := rawjson.Get(fn, "arguments"); rawjson.Kind(a) == '"' {
						tc.Arguments = jsonval.Str(a)
					}
					if tc.Name == "" {
						continue
					}
					resp.Content = append(resp.Content, formats.Part{Type: formats.PartToolCall, ToolCall: tc})
				}
			}
		}
	}
	resp.Stop = resp.Stop.Final(resp.HasToolCalls())
	return resp, nil
}

// responseID keeps an upstream id that suits OpenAI clients, else makes one.
func responseID(id string) string {
	if strings.HasPrefix(id, "chatcmpl-") && len(id) <= 128 {
		return id
	}
	return formats.NewID("chatcmpl-")
}

// RenderChatResponse appends an IR answer as an OpenAI chat completion for the
// service model. Reasoning is dropped (docs/translation.md, "Answer content");
// tool calls without an id get one.
func RenderChatResponse(dst []byte, resp *formats.Response, model string) []byte {
	created := resp.Created
	if created == 0 {
		created = time.Now().Unix()
	}
	dst = append(dst, `{"id":`...)
	dst = rawjson.AppendQuote(dst, responseID(resp.ID))
	dst = append(dst, `,"object":"chat.completion","created":`...)
	dst = rawjson.AppendInt(dst, created)
	dst = append(dst, `,"model":`...)
	dst = rawjson.AppendQuote(dst, model)
	dst = append(dst, `,"choices":[{"index":0,"message":{"role":"assistant","content":`...)
	hasText, hasCalls := false, false
	for i := range resp.Content {
		switch resp.Content[i].Type {
		case formats.PartText:
			hasText = true
		case formats.PartToolCall:
			hasCalls = true
		}
	}
	if hasText {
		dst = rawjson.AppendQuote(dst, resp.Text())
	} else {
		dst = append(dst, "null"...)
	}
	dst = append(dst, `,"refusal":`...)
	refusal := false
	for i := range resp.Content {
		if p := &resp.Content[i]; p.Type == formats.PartRefusal {
			dst = rawjson.AppendQuote(dst, p.Text)
			refusal = true
			break
		}
	}
	if !refusal {
		dst = append(dst, "null"...)
	}
	if hasCalls {
		dst = append(dst, `,"tool_calls":[`...)
		k := 0
		for i := range resp.Content {
			p := &resp.Content[i]
			if p.Type != formats.PartToolCall {
				continue
			}
			if k > 0 {
				dst = append(dst, ',')
			}
			dst = appendToolCall(dst, p.ToolCall)
			k++
		}
		dst = append(dst, ']')
	}
	dst = append(dst, `,"annotations":[]},"logprobs":null,"finish_reason":`...)
	dst = rawjson.AppendQuote(dst, finishFromIR(resp.Stop.Final(hasCalls)))
	dst = append(dst, `}],"usage":`...)
	dst = appendUsage(dst, resp.Usage)
	return append(dst, '}')
}

func appendToolCall(dst []byte, tc *formats.ToolCall) []byte {
	id := tc.ID
	if id == "" {
		id = formats.NewID("call_")
	}
	dst = append(dst, `{"id":`...)
	dst = rawjson.AppendQuote(dst, id)
	dst = append(dst, `,"type":"function","function":{"name":`...)
	dst = rawjson.AppendQuote(dst, tc.Name)
	dst = append(dst, `,"arguments":`...)
	dst = rawjson.AppendQuote(dst, tc.Arguments)
	return append(dst, "}}"...)
}

// urlCitation is the annotation type of a web search result in a chat
// completion. Quotes inside JSON strings are escaped, so the quoted token
// appears only as a JSON string of its own.
var urlCitation = []byte(`"url_citation"`)

// citesWeb reports whether a chat answer (or chunk) carries url_citation
// annotations: OpenAI's search models searched the web for it, a fee per
// request.
func citesWeb(b []byte) bool { return bytes.Contains(b, urlCitation) }
