package openai

import (
	"strings"
	"time"

	"github.com/modelgate/modelgate/formats"
	"github.com/modelgate/modelgate/formats/internal/jsonval"
	"github.com/modelgate/modelgate/formats/internal/upstream"
	"github.com/modelgate/modelgate/formats/rawjson"
)

// streamDecoder turns an OpenAI chat stream into IR events
// (docs/translation.md, "Reading upstream streams"). Only the first choice is
// read: the IR answer has one.
type streamDecoder struct {
	started  bool
	buf      []byte // unescaped deltas of the current chunk
	calls    []openCall
	current  int // index into calls of the last call seen, for servers that omit index
	finish   formats.StopReason
	finished bool
	sawTools bool
	done     bool

	raw []byte // the raw string of the last text, reasoning or argument event
	// last is the last chunk decoded whole into one text, reasoning or
	// argument event that changed nothing else, and lastEvent that event:
	// a chunk of the same shape decodes into the same event with its own
	// string.
	last      textShape
	lastEvent formats.Event
}

// decoderMark is the decoder's state that a chunk may change without an event.
type decoderMark struct {
	started, finished, sawTools bool
	finish                      formats.StopReason
	calls, current              int
}

func (d *streamDecoder) mark() decoderMark {
	return decoderMark{d.started, d.finished, d.sawTools, d.finish, len(d.calls), d.current}
}

type openCall struct {
	index int // the upstream's tool_calls index
	k     int // the IR ordinal
	open  bool
}

// NewStreamDecoder returns a decoder of OpenAI chat completion chunks.
func NewStreamDecoder() formats.StreamDecoder { return &streamDecoder{current: -1} }

func (d *streamDecoder) Decode(dst []formats.Event, event, data []byte) ([]formats.Event, *formats.Error) {
	data = rawjson.TrimSpace(data)
	if d.done || len(data) == 0 {
		return dst, nil
	}
	d.buf = d.buf[:0]
	if string(data) == "[DONE]" {
		d.done = true
		dst = d.closeCalls(dst)
		dst = append(dst, formats.Event{Type: formats.EventFinish, Stop: d.finish.Final(d.sawTools)})
		return append(dst, formats.Event{Type: formats.EventEnd}), nil
	}
	if text, ok := d.last.match(data); ok {
		if len(text) > 2 {
			ev := d.lastEvent
			ev.Delta = d.text(text)
			dst = append(dst, ev)
		}
		return dst, nil
	}
	n, before := len(dst), d.mark()
	d.raw = nil
	dst, ferr := d.decode(dst, data)
	d.last.reset()
	if ferr == nil && len(dst) == n+1 && d.mark() == before {
		switch ev := dst[n]; ev.Type {
		case formats.EventText, formats.EventReasoning, formats.EventToolArgs:
			if off, ok := offsetIn(data, d.raw); ok {
				d.last.set(data, off, off+len(d.raw))
				d.lastEvent = formats.Event{Type: ev.Type, Index: ev.Index}
			}
		}
	}
	return dst, ferr
}

// decode decodes one chunk (not [DONE]).
func (d *streamDecoder) decode(dst []formats.Event, data []byte) ([]formats.Event, *formats.Error) {
	var id, model, choices, usage, created []byte
	it := rawjson.Object(data, 0)
	for it.Next() {
		v := it.Value()
		switch {
		case it.NameIs("id"):
			id = v
		case it.NameIs("created"):
			created = v
		case it.NameIs("model"):
			model = v
		case it.NameIs("choices"):
			choices = v
		case it.NameIs("usage"):
			usage = v
		case it.NameIs("error"):
			if !rawjson.IsNull(v) {
				return append(dst, formats.Event{Type: formats.EventError, Err: streamError(errorValue(v))}), nil
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
		ev.Created = jsonval.Count(created)
		dst = append(dst, ev)
	}
	if rawjson.Kind(choices) == '[' {
		ci := rawjson.Array(choices, 0)
		for ci.Next() {
			c := ci.Value()
			if idx := rawjson.Get(c, "index"); idx != nil && !rawjson.IsNull(idx) && jsonval.Count(idx) != 0 {
				continue // not the first choice
			}
			dst = d.choice(dst, c)
		}
	}
	if rawjson.Kind(usage) == '{' {
		if u, ok := parseUsage(usage); ok {
			// cumulative: the last one before [DONE] is the final count
			dst = append(dst, formats.Event{Type: formats.EventUsage, Usage: u, HasUsage: true, Final: true})
		}
	}
	return dst, nil
}

// text unescapes a raw string into the chunk's buffer.
func (d *streamDecoder) text(v []byte) []byte {
	d.raw = v
	start := len(d.buf)
	d.buf, _ = rawjson.AppendUnquote(d.buf, v)
	return d.buf[start:len(d.buf):len(d.buf)]
}

func (d *streamDecoder) choice(dst []formats.Event, c []byte) []formats.Event {
	var delta, finish []byte
	it := rawjson.Object(c, 0)
	for it.Next() {
		switch {
		case it.NameIs("delta"):
			delta = it.Value()
		case it.NameIs("finish_reason"):
			finish = it.Value()
		}
	}
	if rawjson.Kind(delta) == '{' {
		di := rawjson.Object(delta, 0)
		for di.Next() {
			v := di.Value()
			switch {
			case di.NameIs("reasoning_content"), di.NameIs("reasoning"):
				if rawjson.Kind(v) == '"' && len(v) > 2 {
					dst = append(dst, formats.Event{Type: formats.EventReasoning, Delta: d.text(v)})
				}
			case di.NameIs("content"), di.NameIs("refusal"):
				if rawjson.Kind(v) == '"' && len(v) > 2 {
					dst = append(dst, formats.Event{Type: formats.EventText, Delta: d.text(v)})
				}
			case di.NameIs("tool_calls"):
				ti := rawjson.Array(v, 0)
				for ti.Next() {
					dst = d.toolDelta(dst, ti.Value())
				}
			}
		}
	}
	if rawjson.Kind(finish) == '"' {
		d.finish, d.finished = finishToIR(finish), true
		dst = d.closeCalls(dst)
	}
	return dst
}

func (d *streamDecoder) toolDelta(dst []formats.Event, tc []byte) []formats.Event {
	var idx, id, fn []byte
	it := rawjson.Object(tc, 0)
	for it.Next() {
		switch {
		case it.NameIs("index"):
			idx = it.Value()
		case it.NameIs("id"):
			id = it.Value()
		case it.NameIs("function"):
			fn = it.Value()
		}
	}
	var name, args []byte
	fi := rawjson.Object(fn, 0)
	for fi.Next() {
		switch {
		case fi.NameIs("name"):
			name = fi.Value()
		case fi.NameIs("arguments"):
			args = fi.Value()
		}
	}
	// find the call this fragment belongs to
	ci := -1
	if rawjson.Kind(idx) == '0' {
		n := int(jsonval.Count(idx))
		for i := range d.calls {
			if d.calls[i].index == n {
				ci = i
				break
			}
		}
		if ci < 0 {
			ci = d.startCall(n)
		}
	} else { // no index: a new id starts a new call
		if rawjson.Kind(id) == '"' && len(id) > 2 || d.current < 0 {
			ci = d.startCall(-1 - len(d.calls))
		} else {
			ci = d.current
		}
	}
	d.current = ci
	call := &d.calls[ci]
	if !call.open && call.k < 0 { // first fragment: tool_start
		call.k, call.open = d.nextK(), true
		d.sawTools = true
		ev := formats.Event{Type: formats.EventToolStart, Index: call.k}
		jsonval.SetStr(&ev.ID, id)
		jsonval.SetStr(&ev.Name, name)
		dst = append(dst, ev)
	}
	if rawjson.Kind(args) == '"' && len(args) > 2 && call.open {
		dst = append(dst, formats.Event{Type: formats.EventToolArgs, Index: call.k, Delta: d.text(args)})
	}
	return dst
}

func (d *streamDecoder) startCall(index int) int {
	d.calls = append(d.calls, openCall{index: index, k: -1})
	return len(d.calls) - 1
}

func (d *streamDecoder) nextK() int {
	k := 0
	for i := range d.calls {
		if d.calls[i].k >= k {
			k = d.calls[i].k + 1
		}
	}
	return k
}

// closeCalls ends every open tool call.
func (d *streamDecoder) closeCalls(dst []formats.Event) []formats.Event {
	for i := range d.calls {
		if d.calls[i].open {
			d.calls[i].open = false
			dst = append(dst, formats.Event{Type: formats.EventToolEnd, Index: d.calls[i].k})
		}
	}
	return dst
}

// streamEncoder renders IR events as an OpenAI chat stream
// (docs/translation.md, "Writing client streams", "OAI client").
type streamEncoder struct {
	model        string
	includeUsage bool
	prefix       []byte // {"id":…,"object":"chat.completion.chunk","created":…,"model":…,"choices":[
	sawTools     bool
	finished     bool
	ended        bool
	usage        formats.Usage
	cost         string // the settled cost, for usage.cost
	hasUsage     bool
}

// NewStreamEncoder returns an encoder of IR events into an OpenAI chat
// stream for the service model. The usage chunk is written only when the
// client asked for it (includeUsage), and then every other chunk carries
// "usage":null.
func NewStreamEncoder(model string, includeUsage bool) formats.StreamEncoder {
	return &streamEncoder{model: model, includeUsage: includeUsage}
}

func (e *streamEncoder) start(id string, created int64) {
	if e.prefix != nil {
		return
	}
	if created <= 0 {
		created = time.Now().Unix()
	}
	if !strings.HasPrefix(id, "chatcmpl-") || len(id) > 128 {
		id = formats.NewID("chatcmpl-")
	}
	p := append([]byte(nil), `{"id":`...)
	p = rawjson.AppendQuote(p, id)
	p = append(p, `,"object":"chat.completion.chunk","created":`...)
	p = rawjson.AppendInt(p, created)
	p = append(p, `,"model":`...)
	p = rawjson.AppendQuote(p, e.model)
	e.prefix = append(p, `,"choices":[`...)
}

// chunk opens a chunk whose delta follows.
func (e *streamEncoder) open(dst []byte) []byte {
	dst = append(dst, "data: "...)
	dst = append(dst, e.prefix...)
	return append(dst, `{"index":0,"delta":`...)
}

// close ends a chunk opened by open.
func (e *streamEncoder) close(dst []byte, finish string) []byte {
	dst = append(dst, `,"logprobs":null,"finish_reason":`...)
	if finish == "" {
		dst = append(dst, "null"...)
	} else {
		dst = rawjson.AppendQuote(dst, finish)
	}
	dst = append(dst, "}]"...)
	if e.includeUsage {
		dst = append(dst, `,"usage":null`...)
	}
	return append(dst, "}\n\n"...)
}

func (e *streamEncoder) Encode(dst []byte, ev *formats.Event) []byte {
	if e.ended {
		return dst
	}
	if ev.Type != formats.EventError && e.prefix == nil {
		id, created := "", int64(0)
		if ev.Type == formats.EventStart {
			id, created = ev.ID, ev.Created
		}
		e.start(id, created)
		dst = e.open(dst)
		dst = append(dst, `{"role":"assistant","content":""}`...)
		dst = e.close(dst, "")
	}
	switch ev.Type {
	case formats.EventText:
		if len(ev.Delta) == 0 {
			return dst
		}
		dst = e.open(dst)
		dst = append(dst, `{"content":`...)
		dst = rawjson.AppendQuote(dst, ev.Delta)
		dst = append(dst, '}')
		return e.close(dst, "")
	case formats.EventToolStart:
		e.sawTools = true
		id := ev.ID
		if id == "" {
			id = formats.NewID("call_")
		}
		dst = e.open(dst)
		dst = append(dst, `{"tool_calls":[{"index":`...)
		dst = rawjson.AppendInt(dst, int64(ev.Index))
		dst = append(dst, `,"id":`...)
		dst = rawjson.AppendQuote(dst, id)
		dst = append(dst, `,"type":"function","function":{"name":`...)
		dst = rawjson.AppendQuote(dst, ev.Name)
		dst = append(dst, `,"arguments":""}}]}`...)
		return e.close(dst, "")
	case formats.EventToolArgs:
		if len(ev.Delta) == 0 {
			return dst
		}
		dst = e.open(dst)
		dst = append(dst, `{"tool_calls":[{"index":`...)
		dst = rawjson.AppendInt(dst, int64(ev.Index))
		dst = append(dst, `,"function":{"arguments":`...)
		dst = rawjson.AppendQuote(dst, ev.Delta)
		dst = append(dst, `}}]}`...)
		return e.close(dst, "")
	case formats.EventFinish:
		return e.finish(dst, ev.Stop)
	case formats.EventUsage:
		e.usage, e.hasUsage, e.cost = ev.Usage, true, ev.Cost
	case formats.EventEnd:
		dst = e.finish(dst, formats.StopEnd)
		if e.includeUsage && e.hasUsage {
			dst = append(dst, "data: "...)
			dst = append(dst, e.prefix[:len(e.prefix)-len(`[`)]...)
			dst = append(dst, `[],"usage":`...)
			dst = appendUsageCost(dst, e.usage, e.cost)
			dst = append(dst, "}\n\n"...)
		}
		e.ended = true
		return append(dst, "data: [DONE]\n\n"...)
	case formats.EventError:
		e.ended = true
		err := ev.Err
		if err == nil {
			err = formats.NewError(formats.KindUpstream, "")
		}
		dst = append(dst, "data: "...)
		dst = AppendError(dst, err)
		return append(dst, "\n\n"...)
	}
	// start (written above), tool_end and reasoning: nothing
	return dst
}

func (e *streamEncoder) finish(dst []byte, stop formats.StopReason) []byte {
	if e.finished {
		return dst
	}
	e.finished = true
	dst = e.open(dst)
	dst = append(dst, "{}"...)
	return e.close(dst, finishFromIR(stop.Final(e.sawTools)))
}
