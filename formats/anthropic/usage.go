package anthropic

import (
	"github.com/modelgate/modelgate/formats"
	"github.com/modelgate/modelgate/formats/internal/jsonval"
	"github.com/modelgate/modelgate/formats/rawjson"
)

// usage accumulates an Anthropic usage object. While streaming,
// message_start carries the input side and message_delta cumulative
// values; the last value seen of each field wins.
type usage struct {
	in, cacheWrite, cacheRead, out, thinking int64
	searches, fetches                        int64 // server_tool_use
	seen                                     bool
}

// merge reads the counts present in the usage object v; ok is false when
// v has none.
func (u *usage) merge(v []byte) (ok bool) {
	it := rawjson.Object(v, 0)
	for it.Next() {
		val := it.Value()
		switch {
		case it.NameIs("input_tokens"):
			ok = setCount(&u.in, val) || ok
		case it.NameIs("cache_creation_input_tokens"):
			ok = setCount(&u.cacheWrite, val) || ok
		case it.NameIs("cache_read_input_tokens"):
			ok = setCount(&u.cacheRead, val) || ok
		case it.NameIs("output_tokens"):
			ok = setCount(&u.out, val) || ok
		case it.NameIs("output_tokens_details"):
			if t := rawjson.Get(val, "thinking_tokens"); rawjson.Kind(t) == '0' {
				u.thinking = jsonval.Count(t)
			}
		case it.NameIs("server_tool_use"):
			// {"web_search_requests": n, "web_fetch_requests": n}: the
			// server tools' uses, billed per use
			if n := rawjson.Get(val, "web_search_requests"); rawjson.Kind(n) == '0' {
				u.searches = max(u.searches, jsonval.Count(n))
			}
			if n := rawjson.Get(val, "web_fetch_requests"); rawjson.Kind(n) == '0' {
				u.fetches = max(u.fetches, jsonval.Count(n))
			}
		}
	}
	if it.Err() != nil {
		return false
	}
	u.seen = u.seen || ok
	return ok
}

// setCount sets *dst to the count v and reports true when v is a number;
// anything else leaves *dst as it was (a later event's null is no reset).
func setCount(dst *int64, v []byte) bool {
	if rawjson.Kind(v) != '0' {
		return false
	}
	*dst = jsonval.Count(v)
	return true
}

// ir is the normalised IR usage (docs/translation.md, "Usage"): Anthropic's
// input_tokens excludes both cache buckets.
func (u *usage) ir() formats.Usage {
	return formats.Usage{
		Input:      u.in + u.cacheWrite + u.cacheRead,
		CacheWrite: u.cacheWrite,
		CacheRead:  u.cacheRead,
		Output:     u.out,
		Reasoning:  u.thinking,
		Hosted:     formats.HostedUses{WebSearch: u.searches, WebFetch: u.fetches},
	}.Normalized()
}

// parseUsage reads a whole usage object.
func parseUsage(v []byte) (formats.Usage, bool) {
	var u usage
	if !u.merge(v) {
		return formats.Usage{}, false
	}
	return u.ir(), true
}

// appendUsage renders IR usage as Anthropic's four counts.
func appendUsage(dst []byte, u formats.Usage) []byte {
	in := u.Input - u.CacheRead - u.CacheWrite
	if in < 0 {
		in = 0
	}
	dst = append(dst, `{"input_tokens":`...)
	dst = rawjson.AppendInt(dst, in)
	dst = append(dst, `,"cache_creation_input_tokens":`...)
	dst = rawjson.AppendInt(dst, u.CacheWrite)
	dst = append(dst, `,"cache_read_input_tokens":`...)
	dst = rawjson.AppendInt(dst, u.CacheRead)
	dst = append(dst, `,"output_tokens":`...)
	dst = rawjson.AppendInt(dst, u.Output)
	return append(dst, '}')
}

// stopToIR maps an Anthropic stop_reason (docs/translation.md, "Stop reasons").
func stopToIR(v []byte) formats.StopReason {
	switch {
	case rawjson.StringIs(v, "end_turn"):
		return formats.StopEnd
	case rawjson.StringIs(v, "stop_sequence"):
		return formats.StopSequence
	case rawjson.StringIs(v, "max_tokens"):
		return formats.StopLength
	case rawjson.StringIs(v, "tool_use"):
		return formats.StopToolUse
	case rawjson.StringIs(v, "pause_turn"):
		return formats.StopPause
	case rawjson.StringIs(v, "refusal"):
		return formats.StopContentFilter
	case rawjson.StringIs(v, "model_context_window_exceeded"):
		return formats.StopContextWindow
	case rawjson.Kind(v) == '"':
		return formats.StopEnd
	}
	return formats.StopUnset
}

// stopFromIR maps an IR stop reason to an Anthropic stop_reason.
func stopFromIR(s formats.StopReason) string {
	switch s {
	case formats.StopSequence:
		return "stop_sequence"
	case formats.StopLength:
		return "max_tokens"
	case formats.StopToolUse:
		return "tool_use"
	case formats.StopContentFilter:
		return "refusal"
	case formats.StopPause:
		return "pause_turn"
	case formats.StopContextWindow:
		return "model_context_window_exceeded"
	}
	return "end_turn"
}

// appendStop appends "stop_reason":…,"stop_sequence":… for a final
// reason; the sequence only goes with stop_sequence (OpenAI and Gemini do
// not say which one matched: end_turn and null then).
func appendStop(dst []byte, s formats.StopReason, seq string) []byte {
	if s == formats.StopSequence && seq == "" {
		s = formats.StopEnd
	}
	dst = append(dst, `"stop_reason":`...)
	dst = rawjson.AppendQuote(dst, stopFromIR(s))
	dst = append(dst, `,"stop_sequence":`...)
	if s == formats.StopSequence {
		return rawjson.AppendQuote(dst, seq)
	}
	return append(dst, "null"...)
}
