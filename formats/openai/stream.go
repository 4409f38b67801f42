package openai

import (
	"bytes"

	"github.com/modelgate/modelgate/formats"
	"github.com/modelgate/modelgate/formats/internal/upstream"
	"github.com/modelgate/modelgate/formats/rawjson"
	"github.com/modelgate/modelgate/formats/sse"
)

// passThrough is the same-format stream translator (OpenAI upstream, OpenAI
// client). It rewrites each chunk by splicing, meters usage, and holds the
// usage chunk and [DONE] until Finish.
type passThrough struct {
	model     []byte // the quoted service model id
	wantUsage bool

	usage    formats.Usage
	hasUsage bool
	held     []byte // the upstream's usage chunk, rewritten, when the client wants it
	synth    bool   // usage came inside a content chunk: Finish makes the usage chunk
	id       []byte // raw id and created of the first chunk, to make one
	created  []byte
	done     bool
	outBytes int64
	searched bool // a url_citation annotation came: the model searched the web

	// last is the last chunk walked whole that held one generated string,
	// and lastShape what its walk found: a chunk of the same shape is
	// metered and rewritten without a walk.
	last      textShape
	lastShape chunkShape

	meter formats.TokenMeter // nil when no bill needs a count
	cost  string             // the settled cost, for usage.cost
}

// SetCost gives the usage chunk the answer's settled cost.
func (t *passThrough) SetCost(cost string) { t.cost = cost }

// SetTokenMeter makes the stream report its generated strings to m.
func (t *passThrough) SetTokenMeter(m formats.TokenMeter) { t.meter = m }

// NewPassThroughStream returns the translator of an OpenAI chat stream to an
// OpenAI client. The upstream was asked for usage (RewriteChatRequest); the
// usage chunk is metered and reaches the client only if it asked
// (clientWantsUsage), in which case the other chunks keep their
// "usage":null, as OpenAI's own do; otherwise that member is removed, as
// OpenAI omits it then.
func NewPassThroughStream(serviceModel string, clientWantsUsage bool) formats.StreamTranslator {
	return &passThrough{
		model:     rawjson.AppendQuote(nil, serviceModel),
		wantUsage: clientWantsUsage,
	}
}

func (t *passThrough) Feed(dst []byte, event, data []byte) ([]byte, bool, *formats.Error) {
	data = rawjson.TrimSpace(data)
	if t.done {
		return dst, true, nil
	}
	if len(data) == 0 {
		return dst, false, nil
	}
	if string(data) == "[DONE]" {
		t.done = true
		return dst, true, nil
	}
	var w chunkShape
	if text, ok := t.reuse(data, &w); ok {
		t.outBytes += int64(rawjson.UnquotedLen(text))
		if t.meter != nil {
			t.meter.Quoted(text)
		}
	} else {
		w = chunkShape{second: -1, noChoices: true}
		it := rawjson.Object(data, 0)
		for it.NextLazy() {
			if ferr := t.member(&it, &w, data); ferr != nil {
				return dst, false, ferr
			}
		}
		if it.Err() != nil {
			return dst, false, upstream.BadEvent()
		}
		if w.text.count == 1 {
			t.last.set(data, w.text.start, w.text.end)
			t.lastShape = w
		}
	}

	var edits [2]rawjson.Edit
	n := 0
	if w.hasModel {
		edits[n] = rawjson.Edit{Start: w.model.ValueStart, End: w.model.ValueEnd, Text: t.model}
		n++
	}
	if w.hasUsage {
		uv := data[w.usage.ValueStart:w.usage.ValueEnd]
		if !rawjson.IsNull(uv) {
			if u, ok := parseUsage(uv); ok {
				t.usage, t.hasUsage = u, true
			}
			if w.noChoices { // the usage chunk: hold it
				if t.wantUsage {
					t.held = rawjson.Apply(t.held[:0], data, edits[:n]...)
					if hasLineBreak(t.held) {
						t.held = rawjson.Compact(nil, t.held)
					}
					t.synth = false
				}
				return dst, false, nil
			}
			// usage inside a content chunk (some servers): strip it here
			// and make the usage chunk at Finish
			if t.held == nil {
				t.synth = true
			}
			if t.wantUsage {
				edits[n] = rawjson.Edit{Start: w.usage.ValueStart, End: w.usage.ValueEnd, Text: null}
				n++
			}
		}
		if !t.wantUsage {
			next := -1
			if w.usageOrd == 1 {
				next = w.second
			}
			s, e := rawjson.DeleteSpan(&w.usage, w.usageOrd == 1, next)
			edits[n] = rawjson.Edit{Start: s, End: e}
			n++
		}
	}
	if n == 2 && edits[1].Start < edits[0].Start {
		edits[0], edits[1] = edits[1], edits[0]
	}
	dst = append(dst, "data: "...)
	mark := len(dst)
	dst = rawjson.Apply(dst, data, edits[:n]...)
	if hasLineBreak(dst[mark:]) {
		// a chunk spread over several data: lines upstream: one line here
		// (line breaks in JSON are only whitespace; a chunk that cannot be
		// compacted keeps its lines, each framed as data)
		compact := rawjson.Compact(nil, dst[mark:])
		return sse.AppendData(dst[:mark-len("data: ")], compact), false, nil
	}
	return append(dst, "\n\n"...), false, nil
}

// chunkShape is where a chunk's members are, as Feed's walk found them.
type chunkShape struct {
	model, usage rawjson.Member // offsets only: Name may be a past chunk's
	hasModel     bool
	hasUsage     bool
	usageOrd     int  // usage's ordinal (1 for the first member)
	second       int  // the second member's start, -1 if none
	noChoices    bool // choices absent or []
	text         generated
}

// generated is what a walk found of a chunk's generated strings (content,
// refusal, reasoning, tool-call arguments): how many, and where the last
// one is.
type generated struct{ count, start, end int }

// shift moves the offsets at or past at by n bytes.
func (w *chunkShape) shift(at, n int) {
	move := func(x *int) {
		if *x >= at {
			*x += n
		}
	}
	for _, m := range []*rawjson.Member{&w.model, &w.usage} {
		move(&m.Start)
		move(&m.ValueStart)
		move(&m.ValueEnd)
		move(&m.Prev)
	}
	move(&w.second)
	move(&w.text.end)
}

// reuse reports whether data is the last chunk walked whole with another
// generated string; then w is data's shape, and text its string.
func (t *passThrough) reuse(data []byte, w *chunkShape) (text []byte, ok bool) {
	text, ok = t.last.match(data)
	if !ok {
		return nil, false
	}
	*w = t.lastShape
	w.shift(w.text.end, len(data)-len(t.last.tail)-w.text.end)
	return text, true
}

// member takes the member the walk stopped at (NextLazy).
func (t *passThrough) member(it *rawjson.Iter, w *chunkShape, data []byte) *formats.Error {
	m := it.Member()
	if it.Len() == 2 {
		w.second = m.Start
	}
	switch {
	case m.NameIs("choices"):
		// walked in place: generated bytes are counted on the way
		d := deltaBytes(data, it.Start(), t.meter)
		if d.end > 0 {
			it.SetEnd(d.end)
		}
		t.outBytes += d.n
		t.searched = t.searched || d.cites
		w.noChoices = d.empty
		w.text = d.text
	case m.NameIs("model"):
		it.Value()
		w.model, w.hasModel = *m, true
	case m.NameIs("usage"):
		it.Value()
		w.usage, w.hasUsage, w.usageOrd = *m, true, it.Len()
	case m.NameIs("id"):
		if t.id == nil {
			t.id = append([]byte(nil), it.Value()...)
		}
	case m.NameIs("created"):
		if t.created == nil {
			t.created = append([]byte(nil), it.Value()...)
		}
	case m.NameIs("error"):
		if v := it.Value(); !rawjson.IsNull(v) {
			return streamError(errorValue(v))
		}
	}
	return nil
}

var null = []byte("null")

// hasLineBreak reports whether b holds a CR or LF (two vectorized scans;
// bytes.ContainsAny tests a byte at a time).
func hasLineBreak(b []byte) bool {
	return bytes.IndexByte(b, '\n') >= 0 || bytes.IndexByte(b, '\r') >= 0
}

// deltas is what deltaBytes found in a chunk's choices.
type deltas struct {
	n     int64 // generated bytes
	end   int   // just past the array, -1 if it is malformed
	empty bool
	cites bool // a delta's annotations cite the web (url_citation: the model searched)
	text  generated
	meter formats.TokenMeter // nil, or told every generated string
}

// count adds the generated string v, sliced from b (nil when absent).
func (d *deltas) count(b, v []byte) {
	d.n += int64(rawjson.UnquotedLen(v))
	if d.meter != nil && len(v) > 0 {
		d.meter.Quoted(v)
	}
	if off, ok := offsetIn(b, v); ok {
		d.text = generated{d.text.count + 1, off, off + len(v)}
	}
}

// deltaBytes walks the choices array at b[start] and counts the generated
// bytes in it: content, refusal, reasoning and tool-call argument fragments
// (unescaped length).
func deltaBytes(b []byte, start int, meter formats.TokenMeter) (d deltas) {
	d.end, d.meter = -1, meter
	if b[start] != '[' {
		return d
	}
	ci := rawjson.Array(b, start)
	for ci.NextLazy() {
		if b[ci.Start()] != '{' {
			continue // skipped by the next call
		}
		oi := rawjson.Object(b, ci.Start())
		for oi.NextLazy() {
			if !oi.NameIs("delta") || b[oi.Start()] != '{' {
				continue
			}
			di := rawjson.Object(b, oi.Start())
			for di.Next() {
				v := di.Value()
				switch {
				case di.NameIs("content"), di.NameIs("refusal"), di.NameIs("reasoning_content"), di.NameIs("reasoning"):
					d.count(b, v)
				case di.NameIs("tool_calls"):
					ti := rawjson.Array(v, 0)
					for ti.Next() {
						d.count(b, rawjson.Get(rawjson.Get(ti.Value(), "function"), "arguments"))
					}
				case di.NameIs("function_call"):
					d.count(b, rawjson.Get(v, "arguments"))
				case di.NameIs("annotations"):
					d.cites = d.cites || citesWeb(v)
				}
			}
			if di.Err() == nil {
				oi.SetEnd(di.End() + 1)
			}
		}
		if oi.Err() == nil {
			ci.SetEnd(oi.End() + 1)
		}
	}
	if ci.Err() != nil {
		return deltas{end: -1, cites: d.cites, meter: meter}
	}
	d.end, d.empty = ci.End()+1, ci.Len() == 0
	return d
}

// Usage is final once [DONE] has come after a usage chunk.
func (t *passThrough) Usage() (formats.Usage, bool) {
	u := t.usage
	u.Hosted = t.HostedUses()
	return u, t.hasUsage && t.done
}

// HostedUses is one web search when the answer cites web pages.
func (t *passThrough) HostedUses() formats.HostedUses {
	if t.searched {
		return formats.HostedUses{WebSearch: 1}
	}
	return formats.HostedUses{}
}

func (t *passThrough) Finish(dst []byte) []byte {
	if t.wantUsage {
		switch {
		case t.held != nil && t.cost != "":
			dst = sse.AppendData(dst, withCost(t.held, t.cost))
		case t.held != nil:
			dst = sse.AppendData(dst, t.held)
		case t.synth && t.hasUsage:
			dst = append(dst, `data: {"id":`...)
			dst = appendRawOr(dst, t.id, `"chatcmpl-0"`)
			dst = append(dst, `,"object":"chat.completion.chunk","created":`...)
			dst = appendRawOr(dst, t.created, "0")
			dst = append(dst, `,"model":`...)
			dst = append(dst, t.model...)
			dst = append(dst, `,"choices":[],"usage":`...)
			dst = appendUsageCost(dst, t.usage, t.cost)
			dst = append(dst, "}\n\n"...)
		}
	}
	return append(dst, "data: [DONE]\n\n"...)
}

func appendRawOr(dst, raw []byte, def string) []byte {
	if len(raw) == 0 {
		return append(dst, def...)
	}
	return append(dst, raw...)
}

func (t *passThrough) Fail(dst []byte, e *formats.Error) []byte {
	dst = append(dst, "data: "...)
	dst = AppendError(dst, e)
	return append(dst, "\n\n"...)
}

func (t *passThrough) OutputBytes() int64 { return t.outBytes }

var (
	_ formats.StreamTranslator = (*passThrough)(nil)
	_ formats.HostedMeter      = (*passThrough)(nil)
)
