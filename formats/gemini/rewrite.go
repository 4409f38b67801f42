package gemini

import (
	"github.com/modelgate/modelgate/formats/rawjson"
)

// RewriteGenerateRequest appends to dst the body of a validated
// generateContent request for a Gemini upstream, spliced rather than
// re-encoded: when maxTokens > 0, generationConfig.maxOutputTokens is set to
// it, in whichever spelling the client used (generationConfig or
// generation_config, maxOutputTokens or max_output_tokens; a new member
// follows the spelling of its object), and generationConfig is created when
// absent (or null). Everything else stays byte-identical; the model is in
// the URL. body must be a JSON object (ParseGenerateRequest checked it);
// the error reports one that is not.
func RewriteGenerateRequest(dst, body []byte, maxTokens int) ([]byte, error) {
	if maxTokens <= 0 {
		if rawjson.Kind(rawjson.TrimSpace(body)) != '{' {
			return dst, rawjson.ErrNotObject
		}
		return append(dst, body...), nil
	}
	var gc rawjson.Member
	hasGC, snake := false, false
	it := rawjson.Object(body, 0)
	for it.Next() {
		m := it.Member()
		switch {
		case m.NameIs("generationConfig"):
			gc, hasGC, snake = *m, true, false
		case m.NameIs("generation_config"):
			gc, hasGC, snake = *m, true, true
		}
	}
	if err := it.Err(); err != nil {
		return dst, err
	}
	var nb [24]byte
	num := rawjson.AppendInt(nb[:0], int64(maxTokens))
	var tb [64]byte

	if !hasGC {
		at := it.Last()
		text := append(tb[:0], ',')
		if it.Len() == 0 {
			text = text[:0]
		}
		text = append(text, `"generationConfig":{"maxOutputTokens":`...)
		text = append(text, num...)
		text = append(text, '}')
		return rawjson.Apply(dst, body, rawjson.Edit{Start: at, End: at, Text: text}), nil
	}
	name := "maxOutputTokens"
	if snake {
		name = "max_output_tokens"
	}
	if rawjson.Kind(body[gc.ValueStart:gc.ValueEnd]) != '{' { // null
		text := append(tb[:0], '{')
		text = rawjson.AppendMember(text, false, name, num)
		text = append(text, '}')
		return rawjson.Apply(dst, body, rawjson.Edit{Start: gc.ValueStart, End: gc.ValueEnd, Text: text}), nil
	}
	inner := rawjson.Object(body, gc.ValueStart)
	for inner.Next() {
		if inner.NameIs("maxOutputTokens") || inner.NameIs("max_output_tokens") {
			m := inner.Member()
			return rawjson.Apply(dst, body, rawjson.Edit{Start: m.ValueStart, End: m.ValueEnd, Text: num}), nil
		}
	}
	if err := inner.Err(); err != nil {
		return dst, err
	}
	at := inner.Last()
	text := rawjson.AppendMember(tb[:0], inner.Len() > 0, name, num)
	return rawjson.Apply(dst, body, rawjson.Edit{Start: at, End: at, Text: text}), nil
}
