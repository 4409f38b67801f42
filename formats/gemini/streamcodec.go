package gemini

import (
	"github.com/modelgate/modelgate/formats"
	"github.com/modelgate/modelgate/formats/internal/jsonval"
	"github.com/modelgate/modelgate/formats/internal/upstream"
	"github.com/modelgate/modelgate/formats/rawjson"
)

// streamDecoder turns a Gemini stream (SSE elements) into IR events
// (docs/translation.md, "Reading upstream streams", GEM row). Only candidate 0
// is read: the IR answer has one choice.
type streamDecoder struct {
	sigs     SignatureStore
	idPrefix string
	started  bool
	done     bool
	buf      []byte // unescaped deltas of the current element
	k        int    // the next tool call's ordinal
	sawTools bool
}

// NewStreamDecoder returns a decoder of Gemini stream elements. The first
// element yields start; text parts text, thought parts reasoning; each
// functionCall (which Gemini sends whole) tool_start + one tool_args (the
// compact JSON of its args) + tool_end, with the call's own id or a new
// one made with idPrefix (the client format's prefix: "call_" when empty,
// "toolu_" for Anthropic clients), its thoughtSignature stored in sigs (when not nil)
// under that id, and its name restored if the gateway mapped it;
// usageMetadata yields usage (cumulative). Gemini has no terminal event:
// the element with the finish reason (or a blocked prompt) yields finish
// and end. An element with a top-level error yields an error event.
func NewStreamDecoder(sigs SignatureStore, idPrefix string) formats.StreamDecoder {
	return &streamDecoder{sigs: sigs, idPrefix: idPrefix}
}

func (d *streamDecoder) Decode(dst []formats.Event, event, data []byte) ([]formats.Event, *formats.Error) {
	data = rawjson.TrimSpace(data)
	if d.done || len(data) == 0 {
		return dst, nil
	}
	d.buf = d.buf[:0]
	var id, model, cands, usage, feedback []byte
	it := rawjson.Object(data, 0)
	for it.Next() {
		v := it.Value()
		switch m := it.Member(); {
		case m.NameIs("candidates"):
			cands = v
		case m.NameIs("usageMetadata"), m.NameIs("usage_metadata"):
			usage = v
		case m.NameIs("responseId"), m.NameIs("response_id"):
			id = v
		case m.NameIs("modelVersion"), m.NameIs("model_version"):
			model = v
		case m.NameIs("promptFeedback"), m.NameIs("prompt_feedback"):
			feedback = v
		case m.NameIs("error"):
			if !rawjson.IsNull(v) {
				return append(dst, formats.Event{Type: formats.EventError, Err: upstreamErr(0, errorValue(v))}), nil
			}
		}
	}
	if it.Err() != nil {
		return dst, upstream.BadEvent()
	}
	if !d.started {
		d.started = true
		ev := formats.Event{Type: formats.EventStart}
		jsonval.SetStr(&ev.ID, id)
		jsonval.SetStr(&ev.Model, model)
		dst = append(dst, ev)
	}
	var finish []byte
	c := firstCandidate(cands)
	if c != nil {
		var parts []byte
		parts, finish = candidateParts(c)
		pi := rawjson.Array(parts, 0)
		for pi.Next() {
			dst = d.part(dst, pi.Value())
		}
	}
	if u, ok := parseUsage(usage); ok {
		// the finishing chunk carries the final counts; earlier ones are
		// running figures
		final := rawjson.Kind(finish) == '"' || c == nil && blocked(feedback)
		dst = append(dst, formats.Event{Type: formats.EventUsage, Usage: u, HasUsage: true, Final: final})
	}
	switch {
	case rawjson.Kind(finish) == '"':
		d.done = true
		dst = append(dst, formats.Event{Type: formats.EventFinish, Stop: finishToIR(finish).Final(d.sawTools)})
		return append(dst, formats.Event{Type: formats.EventEnd}), nil
	case c == nil && blocked(feedback):
		d.done = true
		dst = append(dst, formats.Event{Type: formats.EventFinish, Stop: formats.StopContentFilter})
		return append(dst, formats.Event{Type: formats.EventEnd}), nil
	}
	return dst, nil
}

// part turns one response part into events.
func (d *streamDecoder) part(dst []formats.Event, v []byte) []formats.Event {
	p := readPart(v)
	switch {
	case p.call != nil:
		id, name, args := readCall(p.call)
		k := d.k
		d.k++
		d.sawTools = true
		ev := formats.Event{Type: formats.EventToolStart, Index: k, ID: callID(id, d.idPrefix), Name: unescapeName(jsonval.Str(name))}
		if p.signature != nil {
			ev.Signature = jsonval.Str(p.signature)
			if d.sigs != nil {
				d.sigs.Put(ev.ID, ev.Signature)
			}
		}
		dst = append(dst, ev)
		start := len(d.buf)
		if args != nil {
			d.buf = rawjson.Compact(d.buf, args)
		} else {
			d.buf = append(d.buf, "{}"...)
		}
		dst = append(dst, formats.Event{Type: formats.EventToolArgs, Index: k, Delta: d.buf[start:len(d.buf):len(d.buf)]})
		return append(dst, formats.Event{Type: formats.EventToolEnd, Index: k})
	case len(p.text) > 2:
		start := len(d.buf)
		d.buf, _ = rawjson.AppendUnquote(d.buf, p.text)
		typ := formats.EventText
		if p.thought {
			typ = formats.EventReasoning
		}
		return append(dst, formats.Event{Type: typ, Delta: d.buf[start:len(d.buf):len(d.buf)]})
	}
	return dst
}

// streamEncoder renders IR events as a Gemini stream
// (docs/translation.md, "Writing client streams", "GEM client").
type streamEncoder struct {
	model  string
	sse    bool
	suffix []byte // `]},"index":0}],"modelVersion":…,"responseId":…}`

	opened   bool // array mode: "[" written
	sent     int  // elements written
	calls    []pendingCall
	sawTools bool
	stop     formats.StopReason
	usage    formats.Usage
	hasUsage bool
	ended    bool
}

// pendingCall is a tool call being buffered until its tool_end.
type pendingCall struct {
	k        int
	id, name string
	args     []byte
}

// NewStreamEncoder returns an encoder of IR events into a Gemini stream for
// the service model, in SSE framing (sse true) or as a JSON array (where
// "[" is written at start, so the client sees progress). Text becomes
// elements of one text part; each tool call one element with a whole
// functionCall (args parsed to an object, the id, the name the gateway
// mapped restored); the end a final element with the finishReason and the
// full usageMetadata. Reasoning is dropped. Every element has the service
// model as modelVersion and one responseId.
func NewStreamEncoder(model string, sse bool) formats.StreamEncoder {
	return &streamEncoder{model: model, sse: sse}
}

const elementPrefix = `{"candidates":[{"content":{"role":"model","parts":[`

func (e *streamEncoder) init() {
	if e.suffix != nil {
		return
	}
	s := append([]byte(nil), `]},"index":0}],"modelVersion":`...)
	s = rawjson.AppendQuote(s, e.model)
	s = append(s, `,"responseId":`...)
	s = rawjson.AppendQuote(s, formats.NewID(""))
	e.suffix = append(s, '}')
}

// begin opens an element in the client's framing.
func (e *streamEncoder) begin(dst []byte) []byte {
	if e.sse {
		return append(dst, sseOpen...)
	}
	switch {
	case !e.opened:
		e.opened = true
		dst = append(dst, arrayOpen...)
	case e.sent > 0:
		dst = append(dst, arraySep...)
	}
	return dst
}

// end closes an element opened by begin.
func (e *streamEncoder) end(dst []byte) []byte {
	e.sent++
	if e.sse {
		return append(dst, sseClose...)
	}
	return dst
}

func (e *streamEncoder) Encode(dst []byte, ev *formats.Event) []byte {
	if e.ended {
		return dst
	}
	e.init()
	switch ev.Type {
	case formats.EventStart:
		if !e.sse && !e.opened {
			e.opened = true
			dst = append(dst, arrayOpen...)
		}
	case formats.EventText:
		if len(ev.Delta) == 0 {
			return dst
		}
		dst = e.begin(dst)
		dst = append(dst, elementPrefix...)
		dst = append(dst, `{"text":`...)
		dst = rawjson.AppendQuote(dst, ev.Delta)
		dst = append(dst, '}')
		dst = append(dst, e.suffix...)
		return e.end(dst)
	case formats.EventToolStart:
		e.sawTools = true
		e.calls = append(e.calls, pendingCall{k: ev.Index, id: ev.ID, name: ev.Name})
	case formats.EventToolArgs:
		if c := e.call(ev.Index); c != nil {
			c.args = append(c.args, ev.Delta...)
		}
	case formats.EventToolEnd:
		for i := range e.calls {
			if e.calls[i].k == ev.Index {
				dst = e.emitCall(dst, &e.calls[i])
				e.calls = append(e.calls[:i], e.calls[i+1:]...)
				break
			}
		}
	case formats.EventFinish:
		e.stop = ev.Stop
	case formats.EventUsage:
		e.usage, e.hasUsage = ev.Usage, true
	case formats.EventEnd:
		for i := range e.calls { // calls the upstream never ended
			dst = e.emitCall(dst, &e.calls[i])
		}
		e.calls = e.calls[:0]
		e.ended = true
		dst = e.begin(dst)
		dst = append(dst, elementPrefix...)
		dst = append(dst, `{"text":""}]},"finishReason":`...)
		dst = rawjson.AppendQuote(dst, finishFromIR(e.stop.Final(e.sawTools)))
		dst = append(dst, `,"index":0}]`...)
		if e.hasUsage {
			dst = append(dst, `,"usageMetadata":`...)
			dst = appendUsage(dst, e.usage)
		}
		dst = append(dst, e.suffix[len(`]},"index":0}]`):]...)
		dst = e.end(dst)
		if !e.sse {
			dst = append(dst, arrayEnd...)
		}
	case formats.EventError:
		e.ended = true
		err := ev.Err
		if err == nil {
			err = formats.NewError(formats.KindUpstream, "")
		}
		dst = e.begin(dst)
		dst = AppendError(dst, err)
		dst = e.end(dst)
		if !e.sse {
			dst = append(dst, arrayEnd...)
		}
	}
	// reasoning: dropped (docs/translation.md, "Answer content")
	return dst
}

func (e *streamEncoder) call(k int) *pendingCall {
	for i := range e.calls {
		if e.calls[i].k == k {
			return &e.calls[i]
		}
	}
	return nil
}

// emitCall writes the element of one whole function call.
func (e *streamEncoder) emitCall(dst []byte, c *pendingCall) []byte {
	dst = e.begin(dst)
	dst = append(dst, elementPrefix...)
	dst = appendFunctionCall(dst, c.id, c.name, c.args)
	dst = append(dst, e.suffix...)
	return e.end(dst)
}
