package gemini

import (
	"bytes"

	"github.com/modelgate/modelgate/formats"
	"github.com/modelgate/modelgate/formats/internal/emit"
	"github.com/modelgate/modelgate/formats/internal/jsonval"
	"github.com/modelgate/modelgate/formats/internal/upstream"
	"github.com/modelgate/modelgate/formats/rawjson"
)

// parseUsage reads usageMetadata (docs/translation.md, "Usage", GEM row):
// Input = promptTokenCount (which includes cachedContentTokenCount) +
// toolUsePromptTokenCount, CacheRead = cachedContentTokenCount, Output =
// candidatesTokenCount + thoughtsTokenCount, Reasoning =
// thoughtsTokenCount. ok is false when v is not an object with a count.
func parseUsage(v []byte) (u formats.Usage, ok bool) {
	var prompt, cached, cand, thoughts, toolUse int64
	it := rawjson.Object(v, 0)
	for it.Next() {
		val := it.Value()
		switch m := it.Member(); {
		case m.NameIs("promptTokenCount"), m.NameIs("prompt_token_count"):
			prompt, ok = count(val), true
		case m.NameIs("cachedContentTokenCount"), m.NameIs("cached_content_token_count"):
			cached, ok = count(val), true
		case m.NameIs("candidatesTokenCount"), m.NameIs("candidates_token_count"):
			cand, ok = count(val), true
		case m.NameIs("thoughtsTokenCount"), m.NameIs("thoughts_token_count"):
			thoughts, ok = count(val), true
		case m.NameIs("toolUsePromptTokenCount"), m.NameIs("tool_use_prompt_token_count"):
			toolUse, ok = count(val), true
		case m.NameIs("totalTokenCount"), m.NameIs("total_token_count"):
			ok = true
		}
	}
	if it.Err() != nil {
		return formats.Usage{}, false
	}
	u = formats.Usage{Input: prompt + toolUse, CacheRead: cached, Output: cand + thoughts, Reasoning: thoughts}
	return u.Normalized(), ok
}

// appendUsage renders IR usage as usageMetadata (§5.3, "To GEM").
func appendUsage(dst []byte, u formats.Usage) []byte {
	dst = append(dst, `{"promptTokenCount":`...)
	dst = rawjson.AppendInt(dst, u.Input)
	if u.CacheRead > 0 {
		dst = append(dst, `,"cachedContentTokenCount":`...)
		dst = rawjson.AppendInt(dst, u.CacheRead)
	}
	dst = append(dst, `,"candidatesTokenCount":`...)
	dst = rawjson.AppendInt(dst, u.Output-u.Reasoning)
	if u.Reasoning > 0 {
		dst = append(dst, `,"thoughtsTokenCount":`...)
		dst = rawjson.AppendInt(dst, u.Reasoning)
	}
	dst = append(dst, `,"totalTokenCount":`...)
	dst = rawjson.AppendInt(dst, u.Input+u.Output)
	return append(dst, '}')
}

// finishToIR maps a finishReason (§5.2, "Upstream GEM").
func finishToIR(v []byte) formats.StopReason {
	if rawjson.Kind(v) != '"' {
		return formats.StopUnset
	}
	var buf [40]byte
	s, _ := rawjson.AppendUnquote(buf[:0], v)
	for i, c := range s {
		if c >= 'a' && c <= 'z' {
			s[i] = c - ('a' - 'A')
		}
	}
	switch string(s) {
	case "MAX_TOKENS":
		return formats.StopLength
	case "SAFETY", "RECITATION", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII",
		"IMAGE_SAFETY", "IMAGE_PROHIBITED_CONTENT", "IMAGE_RECITATION", "IMAGE_OTHER":
		return formats.StopContentFilter
	}
	return formats.StopEnd // STOP, tool-call problems, LANGUAGE, OTHER, …
}

// finishFromIR maps an IR stop reason to a finishReason (§5.2).
func finishFromIR(s formats.StopReason) string {
	switch s {
	case formats.StopLength, formats.StopContextWindow:
		return "MAX_TOKENS"
	case formats.StopContentFilter:
		return "SAFETY"
	}
	return "STOP"
}

// blocked reports a promptFeedback with a blockReason.
func blocked(pf []byte) bool {
	br := rawjson.Get(pf, "blockReason")
	if br == nil {
		br = rawjson.Get(pf, "block_reason")
	}
	return rawjson.Kind(br) == '"' && !enumIs(br, "BLOCKED_REASON_UNSPECIFIED")
}

// PassThroughResponse appends to dst a non-streamed upstream
// GenerateContentResponse for the client: modelVersion set to serviceModel
// (inserted if missing), everything else byte-identical. u is the
// normalised usage (zero when the upstream reported none). A body that is
// not a GenerateContentResponse (or that carries an error) yields a
// *formats.Error.
func PassThroughResponse(dst, body []byte, serviceModel string) (out []byte, u formats.Usage, err *formats.Error) {
	var hosted formats.HostedUses
	out, err = upstream.PassThrough(dst, body, modelVersion, serviceModel, func(m rawjson.Member, v []byte) (bool, *formats.Error) {
		switch {
		case m.NameIs("candidates"):
			hosted = candidatesHosted(v)
			return rawjson.Kind(v) == '[', nil
		case m.NameIs("promptFeedback"), m.NameIs("prompt_feedback"):
			return rawjson.Kind(v) == '{', nil
		case m.NameIs("usageMetadata"), m.NameIs("usage_metadata"):
			u, _ = parseUsage(v)
			return rawjson.Kind(v) == '{', nil
		case m.NameIs("error"):
			if !rawjson.IsNull(v) {
				return false, upstreamErr(0, parseErrorObject(v))
			}
		}
		return false, nil
	})
	if err != nil {
		return out, formats.Usage{}, err
	}
	u.Hosted = hosted
	return out, u, nil
}

// modelVersion names the model member of an answer, in both spellings.
var modelVersion = []string{"modelVersion", "model_version"}

// wirePart is what the decoders read from a response Part.
type wirePart struct {
	text      []byte // raw string
	thought   bool
	call      []byte // functionCall object
	signature []byte // raw string
}

func readPart(v []byte) (p wirePart) {
	it := rawjson.Object(v, 0)
	for it.Next() {
		val := it.Value()
		switch m := it.Member(); {
		case m.NameIs("text"):
			if rawjson.Kind(val) == '"' {
				p.text = val
			}
		case m.NameIs("thought"):
			p.thought = rawjson.Kind(val) == 't'
		case m.NameIs("functionCall"), m.NameIs("function_call"):
			if rawjson.Kind(val) == '{' {
				p.call = val
			}
		case m.NameIs("thoughtSignature"), m.NameIs("thought_signature"):
			if rawjson.Kind(val) == '"' {
				p.signature = val
			}
		}
	}
	return p
}

// readCall reads a functionCall object.
func readCall(v []byte) (id, name, args []byte) {
	it := rawjson.Object(v, 0)
	for it.Next() {
		val := it.Value()
		switch {
		case it.NameIs("id"):
			if rawjson.Kind(val) == '"' && len(val) > 2 {
				id = val
			}
		case it.NameIs("name"):
			if rawjson.Kind(val) == '"' {
				name = val
			}
		case it.NameIs("args"):
			if rawjson.Kind(val) == '{' {
				args = val
			}
		}
	}
	return id, name, args
}

// callID is the id of an upstream call: its own, else a new id with the
// client format's prefix ("call_" when empty; "toolu_" for Anthropic
// clients, docs/translation.md, "Tool call ids and arguments").
func callID(id []byte, prefix string) string {
	if id != nil {
		return jsonval.Str(id)
	}
	if prefix == "" {
		prefix = "call_"
	}
	return formats.NewID(prefix)
}

// firstCandidate returns candidate 0 of a candidates list (the IR answer has
// one choice), or nil.
func firstCandidate(cands []byte) []byte {
	it := rawjson.Array(cands, 0)
	for it.Next() {
		c := it.Value()
		if rawjson.Kind(c) != '{' {
			continue
		}
		if idx := rawjson.Get(c, "index"); idx != nil && count(idx) != 0 {
			continue
		}
		return c
	}
	return nil
}

// candidateParts returns the content.parts and finishReason of a candidate.
func candidateParts(c []byte) (parts, finish []byte) {
	it := rawjson.Object(c, 0)
	for it.Next() {
		switch m := it.Member(); {
		case m.NameIs("content"):
			parts = rawjson.Get(it.Value(), "parts")
		case m.NameIs("finishReason"), m.NameIs("finish_reason"):
			finish = it.Value()
		}
	}
	return parts, finish
}

// DecodeGenerateResponse parses an upstream GenerateContentResponse into
// the IR (candidate 0 only). Thought parts become thinking parts; each
// functionCall a tool call whose id is the call's own or a new one with
// idPrefix (the client format's: "call_" when empty, "toolu_"),
// with its thoughtSignature kept in sigs (when not nil) under that id and
// its name restored if the gateway mapped it. A blocked prompt is an empty
// answer stopped by the content filter.
func DecodeGenerateResponse(body []byte, sigs SignatureStore, idPrefix string) (*formats.Response, *formats.Error) {
	body, ok := upstream.Object(body)
	if !ok {
		return nil, upstream.Unusable()
	}
	resp := &formats.Response{}
	var cands, feedback []byte
	usable := false
	it := rawjson.Object(body, 0)
	for it.Next() {
		v := it.Value()
		switch m := it.Member(); {
		case m.NameIs("responseId"), m.NameIs("response_id"):
			jsonval.SetStr(&resp.ID, v)
		case m.NameIs("modelVersion"), m.NameIs("model_version"):
			jsonval.SetStr(&resp.Model, v)
		case m.NameIs("candidates"):
			if rawjson.Kind(v) == '[' {
				cands, usable = v, true
			}
		case m.NameIs("promptFeedback"), m.NameIs("prompt_feedback"):
			feedback, usable = v, usable || rawjson.Kind(v) == '{'
		case m.NameIs("usageMetadata"), m.NameIs("usage_metadata"):
			resp.Usage, resp.HasUsage = parseUsage(v)
			usable = usable || rawjson.Kind(v) == '{'
		case m.NameIs("error"):
			if !rawjson.IsNull(v) {
				return nil, upstreamErr(0, parseErrorObject(v))
			}
		}
	}
	if !usable {
		return nil, upstream.Unusable()
	}
	resp.Usage.Hosted = candidatesHosted(cands)
	c := firstCandidate(cands)
	if c == nil {
		if blocked(feedback) {
			resp.Stop = formats.StopContentFilter
		}
		resp.Stop = resp.Stop.Final(false)
		return resp, nil
	}
	parts, finish := candidateParts(c)
	pi := rawjson.Array(parts, 0)
	for pi.Next() {
		p := readPart(pi.Value())
		switch {
		case p.call != nil:
			id, name, args := readCall(p.call)
			tc := &formats.ToolCall{ID: callID(id, idPrefix), Name: unescapeName(jsonval.Str(name)), Arguments: "{}"}
			if args != nil {
				tc.Arguments = string(rawjson.Compact(nil, args))
			}
			if p.signature != nil {
				tc.Signature = jsonval.Str(p.signature)
				if sigs != nil {
					sigs.Put(tc.ID, tc.Signature)
				}
			}
			resp.Content = append(resp.Content, formats.Part{Type: formats.PartToolCall, ToolCall: tc})
		case len(p.text) > 2:
			typ := formats.PartText
			if p.thought {
				typ = formats.PartThinking
			}
			resp.Content = append(resp.Content, formats.Part{Type: typ, Text: jsonval.Str(p.text)})
		}
	}
	resp.Stop = finishToIR(finish).Final(resp.HasToolCalls())
	return resp, nil
}

// RenderGenerateResponse appends an IR answer as a GenerateContentResponse
// for the service model: text and refusal parts as text, tool calls as
// functionCall parts (args an object, id when known, names the gateway
// mapped restored), reasoning dropped, usageMetadata per §5.3, a new
// responseId.
func RenderGenerateResponse(dst []byte, resp *formats.Response, model string) []byte {
	dst = append(dst, `{"candidates":[{"content":{"role":"model","parts":[`...)
	n := 0
	for i := range resp.Content {
		p := &resp.Content[i]
		switch p.Type {
		case formats.PartText, formats.PartRefusal:
			if p.Text == "" {
				continue
			}
			if n > 0 {
				dst = append(dst, ',')
			}
			dst = append(dst, `{"text":`...)
			dst = rawjson.AppendQuote(dst, p.Text)
			dst = append(dst, '}')
		case formats.PartToolCall:
			if n > 0 {
				dst = append(dst, ',')
			}
			dst = appendFunctionCall(dst, p.ToolCall.ID, p.ToolCall.Name, p.ToolCall.Arguments)
		default:
			continue
		}
		n++
	}
	if n == 0 {
		dst = append(dst, `{"text":""}`...)
	}
	dst = append(dst, `]},"finishReason":`...)
	dst = rawjson.AppendQuote(dst, finishFromIR(resp.Stop.Final(resp.HasToolCalls())))
	dst = append(dst, `,"index":0}]`...)
	if resp.HasUsage {
		dst = append(dst, `,"usageMetadata":`...)
		dst = appendUsage(dst, resp.Usage)
	}
	dst = append(dst, `,"modelVersion":`...)
	dst = rawjson.AppendQuote(dst, model)
	dst = append(dst, `,"responseId":`...)
	dst = rawjson.AppendQuote(dst, formats.NewID(""))
	return append(dst, '}')
}

// appendFunctionCall appends a functionCall part for a Gemini client.
func appendFunctionCall[S ~string | ~[]byte](dst []byte, id string, name string, args S) []byte {
	dst = append(dst, `{"functionCall":{`...)
	if id != "" {
		dst = append(dst, `"id":`...)
		dst = rawjson.AppendQuote(dst, id)
		dst = append(dst, ',')
	}
	dst = append(dst, `"name":`...)
	dst = rawjson.AppendQuote(dst, unescapeName(name))
	dst = append(dst, `,"args":`...)
	dst = emit.AppendArgs(dst, args)
	return append(dst, "}}"...)
}

// groundingNames are the spellings of the members that report grounding.
var groundingNames = [...][]byte{[]byte("groundingMetadata"), []byte("grounding_metadata"),
	[]byte("urlContextMetadata"), []byte("url_context_metadata")}

// mayGround reports whether candidates may carry grounding metadata (a
// cheap test before the walk).
func mayGround(cands []byte) bool {
	for _, n := range groundingNames {
		if bytes.Contains(cands, n) {
			return true
		}
	}
	return false
}

// candidatesHosted counts the grounding of an answer's candidates:
// Google bills Search grounding per search query (Gemini 3) or per grounded
// prompt (Gemini 2.x), so each query of groundingMetadata.webSearchQueries
// is a use, and a grounded candidate that lists none is one; each URL of
// urlContextMetadata.urlMetadata is a fetch.
func candidatesHosted(cands []byte) formats.HostedUses {
	var h formats.HostedUses
	if !mayGround(cands) {
		return h
	}
	var nameBuf [32]byte
	ci := rawjson.Array(cands, 0)
	for ci.Next() {
		oi := rawjson.Object(ci.Value(), 0)
		for oi.Next() {
			v := oi.Value()
			switch string(key(&oi, nameBuf[:0])) {
			case "groundingMetadata", "grounding_metadata":
				if rawjson.Kind(v) != '{' {
					continue
				}
				queries := rawjson.Get(v, "webSearchQueries")
				if queries == nil {
					queries = rawjson.Get(v, "web_search_queries")
				}
				n := int64(jsonval.Len(queries))
				if n == 0 && groundedAnswer(v) {
					n = 1
				}
				h.WebSearch += n
			case "urlContextMetadata", "url_context_metadata":
				urls := rawjson.Get(v, "urlMetadata")
				if urls == nil {
					urls = rawjson.Get(v, "url_metadata")
				}
				h.WebFetch += int64(jsonval.Len(urls))
			}
		}
	}
	return h
}

// groundedAnswer reports grounding metadata that shows a search: chunks,
// supports or a search entry point.
func groundedAnswer(v []byte) bool {
	it := rawjson.Object(v, 0)
	for it.Next() {
		if rawjson.IsNull(it.Value()) {
			continue
		}
		name := string(it.AppendName(nil))
		switch name {
		case "groundingChunks", "grounding_chunks", "groundingSupports", "grounding_supports",
			"searchEntryPoint", "search_entry_point", "retrievalQueries", "retrieval_queries":
			return true
		}
	}
	return false
}
