package anthropic

import (
	"errors"

	"github.com/modelgate/modelgate/formats/rawjson"
)

// errNotObject reports a body that is not a JSON object.
var errNotObject = errors.New("anthropic: the request body is not a JSON object")

// RewriteMessagesRequest appends to dst the body of a validated Messages
// request for an Anthropic upstream, spliced rather than re-encoded:
// everything but these members stays byte-identical.
//
//   - model is set to upstreamModel.
//   - max_tokens is set to maxTokens when it is positive and below the
//     client's value (the gateway's cap never raises the client's). If that
//     leaves an enabled thinking budget at or above the cap, the budget is
//     lowered to cap − 1, or thinking is disabled when that is below
//     Anthropic's minimum of 1024.
//   - role "system" messages (Claude Code's, which Anthropic rejects) are
//     removed from messages and their text appended, in order, to the
//     top-level system as text blocks (cache_control kept).
//
// body must be a JSON object (ParseMessagesRequest checked it); the error
// reports one that is not.
func RewriteMessagesRequest(dst, body []byte, upstreamModel string, maxTokens int) ([]byte, error) {
	return rewrite(dst, body, upstreamModel, maxTokens, false)
}

// RewriteCountTokensRequest appends to dst a validated count_tokens body for
// an Anthropic upstream: model replaced, the members count_tokens rejects
// removed (max_tokens, stream, temperature, top_p, top_k, stop_sequences,
// metadata, service_tier), role "system" messages
// hoisted as in RewriteMessagesRequest. The rest is byte-identical.
func RewriteCountTokensRequest(dst, body []byte, upstreamModel string) ([]byte, error) {
	return rewrite(dst, body, upstreamModel, 0, true)
}

// countRejects reports the members count_tokens rejects as extra inputs.
func countRejects(m *rawjson.Member) bool {
	for _, n := range [...]string{"max_tokens", "stream", "temperature", "top_p", "top_k", "stop_sequences", "metadata", "service_tier"} {
		if m.NameIs(n) {
			return true
		}
	}
	return false
}

// sysMsg is a role "system" message found in messages.
type sysMsg struct {
	m       rawjson.Member // the array element
	content []byte
}

func rewrite(dst, body []byte, upstreamModel string, maxTokens int, count bool) ([]byte, error) {
	var model, maxT, system, thinking rawjson.Member
	var hasModel, hasMax, hasSystem, hasThinking bool
	// Edits that splice text in (a fixed array: their text lives on the
	// stack) and deletions (no text, any number) are kept apart and merged
	// when applied.
	var fx [8]rawjson.Edit
	nf := 0
	var db [16]rawjson.Edit
	dels := db[:0]
	var sb [4]sysMsg
	sys := sb[:0]
	// deletions (count_tokens): the members before the first kept one go
	// in one span
	firstKept, leadStart, kept := -1, -1, 0

	it := rawjson.Object(body, 0)
	for it.NextLazy() {
		m := it.Member()
		if count && countRejects(m) {
			it.Value()
			if firstKept < 0 {
				if leadStart < 0 {
					leadStart = m.Start
				}
			} else {
				dels = append(dels, rawjson.Edit{Start: m.Prev, End: m.ValueEnd})
			}
			continue
		}
		if firstKept < 0 {
			firstKept = m.Start
			if leadStart >= 0 {
				dels = append(dels, rawjson.Edit{Start: leadStart, End: m.Start})
			}
		}
		kept++
		switch {
		case m.NameIs("messages"):
			var err error
			if sys, dels, err = scanMessages(&it, sys, dels); err != nil {
				return dst, err
			}
		case m.NameIs("model"):
			it.Value()
			model, hasModel = *m, true
		case m.NameIs("max_tokens"):
			it.Value()
			maxT, hasMax = *m, true
		case m.NameIs("system"):
			it.Value()
			system, hasSystem = *m, true
		case m.NameIs("thinking"):
			it.Value()
			thinking, hasThinking = *m, true
		default:
			it.Value()
		}
	}
	if err := it.Err(); err != nil {
		if errors.Is(err, rawjson.ErrNotObject) {
			return dst, errNotObject
		}
		return dst, err
	}
	if firstKept < 0 && leadStart >= 0 { // every member deleted
		dels = append(dels, rawjson.Edit{Start: leadStart, End: it.Last()})
	}
	last := it.Last()
	var tail [3]rawjson.Edit // insertions at the end, in this order
	nt := 0
	var tb [2][96]byte

	var mq [96]byte
	quoted := rawjson.AppendQuote(mq[:0], upstreamModel)
	if hasModel {
		fx[nf] = rawjson.Edit{Start: model.ValueStart, End: model.ValueEnd, Text: quoted}
		nf++
	} else {
		tail[nt] = rawjson.Edit{Start: last, End: last, Text: rawjson.AppendMember(tb[0][:0], kept+nt > 0, "model", quoted)}
		nt++
	}

	var nb, bb [24]byte
	if !count {
		effective := 0
		if hasMax {
			effective, _ = intValue(body[maxT.ValueStart:maxT.ValueEnd])
		}
		if maxTokens > 0 && (effective <= 0 || maxTokens < effective) {
			num := rawjson.AppendInt(nb[:0], int64(maxTokens))
			if hasMax {
				fx[nf] = rawjson.Edit{Start: maxT.ValueStart, End: maxT.ValueEnd, Text: num}
				nf++
			} else {
				tail[nt] = rawjson.Edit{Start: last, End: last, Text: rawjson.AppendMember(tb[1][:0], kept+nt > 0, "max_tokens", num)}
				nt++
			}
			effective = maxTokens
		}
		if hasThinking && effective > 0 {
			if e, ok := fitThinking(body, &thinking, effective, bb[:0]); ok {
				fx[nf] = e
				nf++
			}
		}
	}

	if len(sys) > 0 {
		e, insert, ok := hoistSystem(body, &system, hasSystem, sys)
		switch {
		case !ok:
		case insert:
			text := rawjson.AppendMember(nil, kept+nt > 0, "system", e.Text)
			tail[nt] = rawjson.Edit{Start: last, End: last, Text: text}
			nt++
		default:
			fx[nf] = e
			nf++
		}
	}

	// sort the in-place edits by position (at most four)
	for i := 1; i < nf; i++ {
		for j := i; j > 0 && fx[j].Start < fx[j-1].Start; j-- {
			fx[j], fx[j-1] = fx[j-1], fx[j]
		}
	}
	for i := 0; i < nt; i++ {
		fx[nf] = tail[i]
		nf++
	}
	return applyMerged(dst, body, fx[:nf], dels), nil
}

// applyMerged is rawjson.Apply of two lists of edits, each sorted by
// Start, that do not overlap.
func applyMerged(dst, src []byte, a, b []rawjson.Edit) []byte {
	pos := 0
	for len(a) > 0 || len(b) > 0 {
		var e rawjson.Edit
		if len(b) == 0 || len(a) > 0 && a[0].Start <= b[0].Start {
			e, a = a[0], a[1:]
		} else {
			e, b = b[0], b[1:]
		}
		dst = append(dst, src[pos:e.Start]...)
		dst = append(dst, e.Text...)
		pos = e.End
	}
	return append(dst, src[pos:]...)
}

// intValue reads a raw JSON integer.
func intValue(v []byte) (int, bool) {
	n, ok := rawjson.ParseInt(v)
	if !ok || n < 0 || n > 1<<31-1 {
		return 0, false
	}
	return int(n), true
}

// scanMessages walks the messages array of the top-level iterator in
// place, recording its role "system" elements and the edits that remove
// them.
func scanMessages(top *rawjson.Iter, sys []sysMsg, edits []rawjson.Edit) ([]sysMsg, []rawjson.Edit, error) {
	b, start := top.Bytes(), top.Start()
	if b[start] != '[' {
		return sys, edits, nil
	}
	firstKept, leadStart := -1, -1
	it := rawjson.Array(b, start)
	for it.NextLazy() {
		m := it.Member()
		isSys := false
		var content []byte
		if b[m.ValueStart] == '{' {
			oi := rawjson.Object(b, m.ValueStart)
			for oi.Next() {
				switch {
				case oi.NameIs("role"):
					isSys = rawjson.StringIs(oi.Value(), "system")
				case oi.NameIs("content"):
					content = oi.Value()
				}
			}
			if oi.Err() != nil {
				return sys, edits, oi.Err()
			}
			it.SetEnd(oi.End() + 1)
		} else {
			it.Value()
		}
		if !isSys {
			if firstKept < 0 {
				firstKept = m.Start
				if leadStart >= 0 {
					edits = append(edits, rawjson.Edit{Start: leadStart, End: m.Start})
				}
			}
			continue
		}
		sys = append(sys, sysMsg{m: *m, content: content})
		if firstKept < 0 {
			if leadStart < 0 {
				leadStart = m.Start
			}
		} else {
			edits = append(edits, rawjson.Edit{Start: m.Prev, End: m.ValueEnd})
		}
	}
	if it.Err() != nil {
		return sys, edits, it.Err()
	}
	if firstKept < 0 && leadStart >= 0 {
		edits = append(edits, rawjson.Edit{Start: leadStart, End: it.Last()})
	}
	top.SetEnd(it.End() + 1)
	return sys, edits, nil
}

// appendHoisted appends the text blocks of the system messages, comma
// separated (with a leading comma when comma is set), and reports whether
// it appended any.
func appendHoisted(dst []byte, sys []sysMsg, comma bool) ([]byte, bool) {
	n := 0
	for i := range sys {
		c := sys[i].content
		switch rawjson.Kind(c) {
		case '"':
			if len(c) <= 2 {
				continue
			}
			if comma || n > 0 {
				dst = append(dst, ',')
			}
			dst = append(dst, `{"type":"text","text":`...)
			dst = append(dst, c...)
			dst = append(dst, '}')
			n++
		case '[':
			ai := rawjson.Array(c, 0)
			for ai.Next() {
				v := ai.Value()
				if rawjson.Kind(v) != '{' {
					continue
				}
				if comma || n > 0 {
					dst = append(dst, ',')
				}
				dst = append(dst, v...)
				n++
			}
		}
	}
	return dst, n > 0
}

// hoistSystem makes the edit that appends the system messages' blocks to
// the top-level system: a new array value to insert when insert is set
// (Text is the value), else an edit of the body. ok is false when there is
// nothing to hoist or the system member is malformed.
func hoistSystem(body []byte, system *rawjson.Member, has bool, sys []sysMsg) (e rawjson.Edit, insert, ok bool) {
	if !has {
		v, some := appendHoisted([]byte{'['}, sys, false)
		return rawjson.Edit{Text: append(v, ']')}, true, some
	}
	old := body[system.ValueStart:system.ValueEnd]
	switch rawjson.Kind(old) {
	case 'n':
		v, some := appendHoisted([]byte{'['}, sys, false)
		return rawjson.Edit{Start: system.ValueStart, End: system.ValueEnd, Text: append(v, ']')}, false, some
	case '"':
		v := []byte{'['}
		first := len(old) > 2
		if first {
			v = append(v, `{"type":"text","text":`...)
			v = append(v, old...)
			v = append(v, '}')
		}
		v, some := appendHoisted(v, sys, first)
		return rawjson.Edit{Start: system.ValueStart, End: system.ValueEnd, Text: append(v, ']')}, false, some
	case '[':
		ai := rawjson.Array(body, system.ValueStart)
		for ai.Next() {
		}
		if ai.Err() != nil {
			return e, false, false
		}
		at := ai.Last()
		v, some := appendHoisted(nil, sys, ai.Len() > 0)
		return rawjson.Edit{Start: at, End: at, Text: v}, false, some
	}
	return e, false, false
}

// fitThinking lowers an enabled thinking budget that is not below the
// output cap: to cap − 1, or thinking disabled when that is under 1024.
func fitThinking(body []byte, thinking *rawjson.Member, maxTokens int, buf []byte) (rawjson.Edit, bool) {
	v := body[thinking.ValueStart:thinking.ValueEnd]
	if rawjson.Kind(v) != '{' {
		return rawjson.Edit{}, false
	}
	enabled := false
	var budget rawjson.Member
	hasBudget := false
	it := rawjson.Object(body, thinking.ValueStart)
	for it.Next() {
		switch {
		case it.NameIs("type"):
			enabled = rawjson.StringIs(it.Value(), "enabled")
		case it.NameIs("budget_tokens"):
			budget, hasBudget = *it.Member(), true
		}
	}
	if !enabled || !hasBudget {
		return rawjson.Edit{}, false
	}
	n, ok := intValue(body[budget.ValueStart:budget.ValueEnd])
	if !ok || n < maxTokens {
		return rawjson.Edit{}, false
	}
	if maxTokens-1 < 1024 {
		return rawjson.Edit{Start: thinking.ValueStart, End: thinking.ValueEnd, Text: lit.disabled}, true
	}
	return rawjson.Edit{Start: budget.ValueStart, End: budget.ValueEnd, Text: rawjson.AppendInt(buf, int64(maxTokens-1))}, true
}

// lit holds literal bytes the rewrites and streams splice in.
var lit = struct{ disabled, messageStop, messageStopName, ping []byte }{
	disabled:        []byte(`{"type":"disabled"}`),
	messageStop:     []byte(`{"type":"message_stop"}`),
	messageStopName: []byte("message_stop"),
	ping:            []byte("event: ping\ndata: {\"type\":\"ping\"}\n\n"),
}
