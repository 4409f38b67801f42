package openai

import (
	"github.com/modelgate/modelgate/formats/rawjson"
)

// RewriteChatRequest appends to dst the body of a validated Chat Completions
// request for an OpenAI-compatible upstream, spliced rather than
// re-encoded: everything but these members stays byte-identical.
//
//   - model is set to upstreamModel.
//   - When maxTokens > 0 the output cap is set to it: in max_tokens if the
//     client used only that, else in max_completion_tokens; the other of the
//     two is removed, so the upstream sees exactly one.
//   - When stream is true, stream_options.include_usage is set to true (other
//     stream_options members are kept), so that the upstream reports usage.
//
// body must be a JSON object (ParseChatRequest checked it); the error
// reports one that is not.
func RewriteChatRequest(dst, body []byte, upstreamModel string, maxTokens int, stream bool) ([]byte, error) {
	var model, mct, mt, so rawjson.Member
	var hasModel, hasMCT, hasMT, hasSO bool
	var ordMCT, ordMT int
	second := -1 // Start of the second member, to cut a first one
	it := rawjson.Object(body, 0)
	for it.Next() {
		m := it.Member()
		if it.Len() == 2 {
			second = m.Start
		}
		switch {
		case m.NameIs("model"):
			model, hasModel = *m, true
		case m.NameIs("max_completion_tokens"):
			mct, hasMCT, ordMCT = *m, true, it.Len()
		case m.NameIs("max_tokens"):
			mt, hasMT, ordMT = *m, true, it.Len()
		case m.NameIs("stream_options"):
			so, hasSO = *m, true
		}
	}
	if err := it.Err(); err != nil {
		return dst, err
	}
	last, n := it.Last(), it.Len()

	var edits [8]rawjson.Edit
	ne := 0
	var tail [3]rawjson.Edit // insertions at the end, in this order
	nt := 0
	var tb [3][64]byte // their text

	var mq [96]byte
	quoted := rawjson.AppendQuote(mq[:0], upstreamModel)
	if hasModel {
		edits[ne] = rawjson.Edit{Start: model.ValueStart, End: model.ValueEnd, Text: quoted}
		ne++
	} else {
		tail[nt] = rawjson.Edit{Start: last, End: last, Text: memberText(tb[nt][:0], n+nt > 0, "model", quoted)}
		nt++
	}

	if maxTokens > 0 {
		var nb [24]byte
		num := rawjson.AppendInt(nb[:0], int64(maxTokens))
		useMT := hasMT && !rawjson.IsNull(body[mt.ValueStart:mt.ValueEnd]) &&
			(!hasMCT || rawjson.IsNull(body[mct.ValueStart:mct.ValueEnd]))
		keep, drop, hasKeep, hasDrop, dropOrd, keepName := mct, mt, hasMCT, hasMT, ordMT, "max_completion_tokens"
		if useMT {
			keep, drop, hasKeep, hasDrop, dropOrd, keepName = mt, mct, hasMT, hasMCT, ordMCT, "max_tokens"
		}
		if hasKeep {
			edits[ne] = rawjson.Edit{Start: keep.ValueStart, End: keep.ValueEnd, Text: num}
			ne++
		} else {
			tail[nt] = rawjson.Edit{Start: last, End: last, Text: memberText(tb[nt][:0], n+nt > 0, keepName, num)}
			nt++
		}
		if hasDrop {
			next := -1
			if dropOrd == 1 {
				next = second
			}
			s, e := rawjson.DeleteSpan(&drop, dropOrd == 1, next)
			edits[ne] = rawjson.Edit{Start: s, End: e}
			ne++
		}
	}

	if stream {
		switch {
		case hasSO && rawjson.Kind(body[so.ValueStart:so.ValueEnd]) == '{':
			inner := rawjson.Object(body, so.ValueStart)
			found := false
			for inner.Next() {
				if inner.NameIs("include_usage") {
					m := inner.Member()
					edits[ne] = rawjson.Edit{Start: m.ValueStart, End: m.ValueEnd, Text: lit.true}
					ne++
					found = true
					break
				}
			}
			if !found {
				if err := inner.Err(); err != nil {
					return dst, err
				}
				at := inner.Last()
				text := lit.includeUsage[1:]
				if inner.Len() > 0 {
					text = lit.includeUsage
				}
				edits[ne] = rawjson.Edit{Start: at, End: at, Text: text}
				ne++
			}
		case hasSO:
			edits[ne] = rawjson.Edit{Start: so.ValueStart, End: so.ValueEnd, Text: lit.usageObject}
			ne++
		default:
			tail[nt] = rawjson.Edit{Start: last, End: last, Text: memberText(tb[nt][:0], n+nt > 0, "stream_options", lit.usageObject)}
			nt++
		}
	}

	// sort the in-place edits by position (at most a handful)
	for i := 1; i < ne; i++ {
		for j := i; j > 0 && edits[j].Start < edits[j-1].Start; j-- {
			edits[j], edits[j-1] = edits[j-1], edits[j]
		}
	}
	for i := 0; i < nt; i++ {
		edits[ne] = tail[i]
		ne++
	}
	return rawjson.Apply(dst, body, edits[:ne]...), nil
}

// memberText is `,"name":value` (or without the comma).
func memberText(dst []byte, comma bool, name string, value []byte) []byte {
	return rawjson.AppendMember(dst, comma, name, value)
}

// lit holds the literal bytes the rewrite splices in (package-level so
// that no edit allocates).
var lit = struct {
	true, includeUsage, usageObject []byte
}{
	true:         []byte("true"),
	includeUsage: []byte(`,"include_usage":true`),
	usageObject:  []byte(`{"include_usage":true}`),
}
