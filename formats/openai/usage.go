package openai

import (
	"github.com/modelgate/modelgate/formats"
	"github.com/modelgate/modelgate/formats/internal/upstream"
	"github.com/modelgate/modelgate/formats/rawjson"
)

// parseUsage reads a Chat Completions usage object: prompt_tokens includes
// cached_tokens (and cache_write_tokens, when a server reports it);
// completion_tokens includes reasoning_tokens. ok is false when v is not an
// object with at least one count.
func parseUsage(v []byte) (formats.Usage, bool) { return upstream.ParseUsage(v, &upstream.ChatUsage) }

// appendUsage renders IR usage as an OpenAI usage object.
func appendUsage(dst []byte, u formats.Usage) []byte {
	dst = append(dst, `{"prompt_tokens":`...)
	dst = rawjson.AppendInt(dst, u.Input)
	dst = append(dst, `,"completion_tokens":`...)
	dst = rawjson.AppendInt(dst, u.Output)
	dst = append(dst, `,"total_tokens":`...)
	dst = rawjson.AppendInt(dst, u.Input+u.Output)
	dst = append(dst, `,"prompt_tokens_details":{"cached_tokens":`...)
	dst = rawjson.AppendInt(dst, u.CacheRead)
	if u.CacheWrite > 0 {
		dst = append(dst, `,"cache_write_tokens":`...)
		dst = rawjson.AppendInt(dst, u.CacheWrite)
	}
	dst = append(dst, `},"completion_tokens_details":{"reasoning_tokens":`...)
	dst = rawjson.AppendInt(dst, u.Reasoning)
	return append(dst, "}}"...)
}

// appendUsageCost is appendUsage with the answer's settled cost as
// usage.cost, a number in the gateway's currency (as OpenRouter reports
// it); without a cost, appendUsage.
func appendUsageCost(dst []byte, u formats.Usage, cost string) []byte {
	dst = appendUsage(dst, u)
	if cost == "" {
		return dst
	}
	dst = append(dst[:len(dst)-1], `,"cost":`...)
	dst = append(dst, cost...)
	return append(dst, '}')
}

// withCost is a usage chunk with the settled cost set as usage.cost (the
// chunk as it was when it has no usage object).
func withCost(chunk []byte, cost string) []byte {
	start, end, err := rawjson.Find(chunk, "usage")
	if err != nil || start < 0 || chunk[start] != '{' {
		return chunk
	}
	out := append([]byte(nil), chunk[:start]...)
	out, err = rawjson.Set(out, chunk[start:end], "cost", []byte(cost))
	if err != nil {
		return chunk
	}
	return append(out, chunk[end:]...)
}

// finishToIR maps an OpenAI finish_reason.
func finishToIR(v []byte) formats.StopReason {
	switch {
	case rawjson.StringIs(v, "stop"):
		return formats.StopEnd
	case rawjson.StringIs(v, "length"):
		return formats.StopLength
	case rawjson.StringIs(v, "tool_calls"), rawjson.StringIs(v, "function_call"):
		return formats.StopToolUse
	case rawjson.StringIs(v, "content_filter"):
		return formats.StopContentFilter
	case rawjson.Kind(v) == '"':
		return formats.StopEnd
	}
	return formats.StopUnset
}

// finishFromIR maps an IR stop reason to an OpenAI finish_reason
// (docs/translation.md, "Stop reasons").
func finishFromIR(s formats.StopReason) string {
	switch s {
	case formats.StopLength, formats.StopContextWindow:
		return "length"
	case formats.StopToolUse:
		return "tool_calls"
	case formats.StopContentFilter:
		return "content_filter"
	}
	return "stop"
}
