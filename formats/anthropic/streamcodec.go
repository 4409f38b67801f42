package anthropic

import (
	"bytes"

	"github.com/modelgate/modelgate/formats"
	"github.com/modelgate/modelgate/formats/internal/jsonval"
	"github.com/modelgate/modelgate/formats/internal/upstream"
	"github.com/modelgate/modelgate/formats/rawjson"
)

// The kinds of a streamed content block, for the decoder.
const (
	sbOther    uint8 = iota // server tools and unknown blocks: ignored
	sbText                  // text
	sbTool                  // a client tool call
	sbJSON                  // the json_schema emulation's tool: its input is text
	sbThinking              // thinking (and redacted thinking)
)

type streamBlock struct {
	index int64 // the upstream's block index
	kind  uint8
	k     int // tool ordinal
}

// streamDecoder turns an Anthropic stream into IR events
// (docs/translation.md, "Reading upstream streams", ANT row).
type streamDecoder struct {
	buf      []byte // unescaped deltas of the current event
	blocks   []streamBlock
	nextK    int
	usage    usage
	started  bool
	sawTools bool
	jsonOut  bool
	done     bool
}

// NewStreamDecoder returns a decoder of an Anthropic Messages stream:
// message_start → start (with the input usage), text and thinking deltas →
// text and reasoning, tool_use blocks → tool_start/tool_args/tool_end with
// k the tool's ordinal (not the block index), message_delta → cumulative
// usage and finish, message_stop → end, error → error; ping and unknown
// events are ignored. The json_schema emulation's tool streams as text.
func NewStreamDecoder() formats.StreamDecoder { return &streamDecoder{} }

func (d *streamDecoder) Decode(dst []formats.Event, event, data []byte) ([]formats.Event, *formats.Error) {
	data = rawjson.TrimSpace(data)
	if d.done || len(data) == 0 {
		return dst, nil
	}
	d.buf = d.buf[:0]
	name := eventName(event, data)
	switch string(name) {
	case "ping", "content_block_stop", "content_block_start", "content_block_delta",
		"message_start", "message_delta", "message_stop", "error":
	default:
		return dst, nil // unknown events are ignored
	}
	if rawjson.Kind(data) != '{' {
		return dst, upstream.BadEvent()
	}
	var index, block, delta, message, usageV, errV []byte
	it := rawjson.Object(data, 0)
	for it.Next() {
		switch v := it.Value(); {
		case it.NameIs("index"):
			index = v
		case it.NameIs("content_block"):
			block = v
		case it.NameIs("delta"):
			delta = v
		case it.NameIs("message"):
			message = v
		case it.NameIs("usage"):
			usageV = v
		case it.NameIs("error"):
			errV = v
		}
	}
	if it.Err() != nil {
		return dst, upstream.BadEvent()
	}
	if !d.started && string(name) != "error" && string(name) != "ping" {
		d.started = true
		ev := formats.Event{Type: formats.EventStart}
		if rawjson.Kind(message) == '{' {
			mi := rawjson.Object(message, 0)
			for mi.Next() {
				switch v := mi.Value(); {
				case mi.NameIs("id"):
					jsonval.SetStr(&ev.ID, v)
				case mi.NameIs("model"):
					jsonval.SetStr(&ev.Model, v)
				case mi.NameIs("usage"):
					d.usage.merge(v)
				}
			}
		}
		ev.Usage, ev.HasUsage = d.usage.ir(), d.usage.seen
		dst = append(dst, ev)
	}
	switch string(name) {
	case "content_block_start":
		return d.blockStart(dst, jsonval.Count(index), block), nil
	case "content_block_delta":
		return d.blockDelta(dst, jsonval.Count(index), delta), nil
	case "content_block_stop":
		if b := d.block(jsonval.Count(index)); b != nil && b.kind == sbTool {
			b.kind = sbOther // a second stop is ignored
			dst = append(dst, formats.Event{Type: formats.EventToolEnd, Index: b.k})
		}
	case "message_delta":
		if rawjson.Kind(usageV) == '{' && d.usage.merge(usageV) {
			dst = append(dst, formats.Event{Type: formats.EventUsage, Usage: d.usage.ir(), HasUsage: true, Final: true})
		}
		if rawjson.Kind(delta) == '{' {
			reason := rawjson.Get(delta, "stop_reason")
			if rawjson.Kind(reason) == '"' {
				ev := formats.Event{Type: formats.EventFinish, Stop: stopToIR(reason)}
				if ev.Stop == formats.StopSequence {
					if s := rawjson.Get(delta, "stop_sequence"); rawjson.Kind(s) == '"' {
						ev.StopSequence = jsonval.Str(s)
					}
				}
				if ev.Stop == formats.StopToolUse && d.jsonOut && !d.sawTools {
					ev.Stop = formats.StopEnd
				}
				dst = append(dst, ev)
			}
		}
	case "message_stop":
		d.done = true
		dst = append(dst, formats.Event{Type: formats.EventEnd})
	case "error":
		ue := upstreamError{}
		if rawjson.Kind(errV) == '{' {
			ue = parseErrorObject(errV)
		}
		dst = append(dst, formats.Event{Type: formats.EventError, Err: streamError(ue)})
	}
	return dst, nil
}

// block finds the state of the block with the upstream index i.
func (d *streamDecoder) block(i int64) *streamBlock {
	for j := len(d.blocks) - 1; j >= 0; j-- {
		if d.blocks[j].index == i {
			return &d.blocks[j]
		}
	}
	return nil
}

// text returns the value of a raw JSON string: a slice of the event's
// data when it has no escapes, else unescaped into the decoder's buffer.
func (d *streamDecoder) text(v []byte) []byte {
	if len(v) < 2 || v[0] != '"' {
		return nil
	}
	body := v[1 : len(v)-1]
	if bytes.IndexByte(body, '\\') < 0 {
		return body[:len(body):len(body)]
	}
	start := len(d.buf)
	d.buf, _ = rawjson.AppendUnquote(d.buf, v)
	return d.buf[start:len(d.buf):len(d.buf)]
}

func (d *streamDecoder) blockStart(dst []formats.Event, index int64, cb []byte) []formats.Event {
	b := streamBlock{index: index, kind: sbOther}
	f := readBlock(cb)
	switch {
	case rawjson.StringIs(f.typ, "text"):
		b.kind = sbText
		if t := d.text(f.text); len(t) > 0 {
			dst = append(dst, formats.Event{Type: formats.EventText, Delta: t})
		}
	case rawjson.StringIs(f.typ, "tool_use") && rawjson.StringIs(f.name, jsonToolName):
		b.kind = sbJSON
		d.jsonOut = true
	case rawjson.StringIs(f.typ, "tool_use"):
		b.kind, b.k = sbTool, d.nextK
		d.nextK++
		d.sawTools = true
		ev := formats.Event{Type: formats.EventToolStart, Index: b.k}
		jsonval.SetStr(&ev.ID, f.id)
		jsonval.SetStr(&ev.Name, f.name)
		dst = append(dst, ev)
		// Anthropic starts with "input":{} and streams the input; an
		// input given whole comes as one fragment
		if rawjson.Kind(f.input) == '{' && len(bytes.TrimSpace(f.input[1:len(f.input)-1])) > 0 {
			dst = append(dst, formats.Event{Type: formats.EventToolArgs, Index: b.k, Delta: f.input})
		}
	case rawjson.StringIs(f.typ, "thinking"):
		b.kind = sbThinking
		if t := d.text(f.thinking); len(t) > 0 {
			dst = append(dst, formats.Event{Type: formats.EventReasoning, Delta: t})
		}
	case rawjson.StringIs(f.typ, "redacted_thinking"):
		b.kind = sbThinking
	}
	if len(d.blocks) < 4096 {
		d.blocks = append(d.blocks, b)
	} else { // bound the state of a hostile stream
		d.blocks[len(d.blocks)-1] = b
	}
	return dst
}

func (d *streamDecoder) blockDelta(dst []formats.Event, index int64, delta []byte) []formats.Event {
	b := d.block(index)
	if b == nil || rawjson.Kind(delta) != '{' {
		return dst
	}
	var typ, text, partial, thinking, sig []byte
	it := rawjson.Object(delta, 0)
	for it.Next() {
		switch v := it.Value(); {
		case it.NameIs("type"):
			typ = v
		case it.NameIs("text"):
			text = v
		case it.NameIs("partial_json"):
			partial = v
		case it.NameIs("thinking"):
			thinking = v
		case it.NameIs("signature"):
			sig = v
		}
	}
	switch {
	case rawjson.StringIs(typ, "text_delta") && b.kind == sbText:
		if t := d.text(text); len(t) > 0 {
			dst = append(dst, formats.Event{Type: formats.EventText, Delta: t})
		}
	case rawjson.StringIs(typ, "input_json_delta") && b.kind == sbTool:
		if t := d.text(partial); len(t) > 0 {
			dst = append(dst, formats.Event{Type: formats.EventToolArgs, Index: b.k, Delta: t})
		}
	case rawjson.StringIs(typ, "input_json_delta") && b.kind == sbJSON:
		if t := d.text(partial); len(t) > 0 {
			dst = append(dst, formats.Event{Type: formats.EventText, Delta: t})
		}
	case rawjson.StringIs(typ, "thinking_delta") && b.kind == sbThinking:
		if t := d.text(thinking); len(t) > 0 {
			dst = append(dst, formats.Event{Type: formats.EventReasoning, Delta: t})
		}
	case rawjson.StringIs(typ, "signature_delta") && b.kind == sbThinking:
		if rawjson.Kind(sig) == '"' {
			dst = append(dst, formats.Event{Type: formats.EventReasoning, Signature: jsonval.Str(sig)})
		}
	}
	return dst
}

// pendingTool is a tool call the encoder holds back because another
// block is open (an upstream that interleaves calls).
type pendingTool struct {
	k        int
	id, name string
	args     []byte
	ended    bool
}

// The block the encoder has open.
const (
	openNone uint8 = iota
	openText
	openTool
)

// streamEncoder renders IR events as an Anthropic stream
// (docs/translation.md, "Writing client streams", "ANT client").
type streamEncoder struct {
	model    string
	started  bool
	ended    bool
	index    int   // the next block index
	open     uint8 // the open block
	live     int   // k of the open tool block
	pending  []pendingTool
	heldText []byte // text that arrived while tool calls were open

	stop     formats.StopReason
	seq      string
	hasStop  bool
	usage    formats.Usage
	hasUsage bool
	sawTools bool
}

// NewStreamEncoder returns an encoder of IR events into an Anthropic
// stream for the service model: message_start (ids msg_… unless the
// upstream's is one) and one ping; text blocks opened lazily; each tool call
// a tool_use block with input_json_delta fragments; strictly sequential
// blocks (calls whose fragments interleave are held and written whole);
// message_delta with the stop reason and all four usage counts
// (cumulative: an OpenAI upstream's input, known only at the end, goes
// there, message_start carrying 0); message_stop. Reasoning is dropped.
func NewStreamEncoder(model string) formats.StreamEncoder {
	return &streamEncoder{model: model, live: -1}
}

func (e *streamEncoder) Encode(dst []byte, ev *formats.Event) []byte {
	if e.ended {
		return dst
	}
	if !e.started && ev.Type != formats.EventError {
		var start formats.Event
		if ev.Type == formats.EventStart {
			start = *ev
		}
		dst = e.start(dst, &start)
	}
	switch ev.Type {
	case formats.EventText:
		if len(ev.Delta) == 0 {
			return dst
		}
		if e.open == openTool || len(e.pending) > 0 {
			e.heldText = append(e.heldText, ev.Delta...)
			return dst
		}
		return e.text(dst, ev.Delta)
	case formats.EventToolStart:
		e.sawTools = true
		if e.open == openTool || len(e.pending) > 0 {
			e.pending = append(e.pending, pendingTool{k: ev.Index, id: ev.ID, name: ev.Name})
			return dst
		}
		dst = e.closeBlock(dst)
		return e.openTool(dst, ev.Index, ev.ID, ev.Name)
	case formats.EventToolArgs:
		if len(ev.Delta) == 0 {
			return dst
		}
		if e.open == openTool && e.live == ev.Index {
			return e.argsDelta(dst, ev.Delta)
		}
		if p := e.pendingTool(ev.Index); p != nil {
			p.args = append(p.args, ev.Delta...)
		}
	case formats.EventToolEnd:
		if e.open == openTool && e.live == ev.Index {
			dst = e.closeBlock(dst)
			return e.promote(dst, false)
		}
		if p := e.pendingTool(ev.Index); p != nil {
			p.ended = true
		}
	case formats.EventUsage:
		e.usage, e.hasUsage = ev.Usage, true
	case formats.EventFinish:
		e.stop, e.seq, e.hasStop = ev.Stop, ev.StopSequence, true
	case formats.EventEnd:
		return e.end(dst)
	case formats.EventError:
		e.ended = true
		err := ev.Err
		if err == nil {
			err = formats.NewError(formats.KindUpstream, "")
		}
		return appendErrorEvent(dst, err)
	}
	// start (written above) and reasoning: nothing
	return dst
}

func (e *streamEncoder) start(dst []byte, ev *formats.Event) []byte {
	e.started = true
	if ev.HasUsage {
		e.usage = ev.Usage
	}
	dst = append(dst, "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":"...)
	dst = rawjson.AppendQuote(dst, messageID(ev.ID))
	dst = append(dst, `,"type":"message","role":"assistant","model":`...)
	dst = rawjson.AppendQuote(dst, e.model)
	dst = append(dst, `,"content":[],"stop_reason":null,"stop_sequence":null,"usage":`...)
	u := formats.Usage{}
	if ev.HasUsage {
		u = ev.Usage
		u.Output, u.Reasoning = 0, 0
	}
	dst = appendUsage(dst, u)
	dst = append(dst, "}}\n\n"...)
	return append(dst, lit.ping...)
}

// blockEvent opens an event of the given type for the block at index.
func (e *streamEncoder) blockEvent(dst []byte, typ string, index int) []byte {
	dst = append(dst, "event: "...)
	dst = append(dst, typ...)
	dst = append(dst, "\ndata: {\"type\":\""...)
	dst = append(dst, typ...)
	dst = append(dst, `","index":`...)
	return rawjson.AppendInt(dst, int64(index))
}

func (e *streamEncoder) text(dst, delta []byte) []byte {
	if e.open != openText {
		dst = e.closeBlock(dst)
		e.open = openText
		dst = e.blockEvent(dst, "content_block_start", e.index)
		dst = append(dst, `,"content_block":{"type":"text","text":""}}`+"\n\n"...)
	}
	dst = e.blockEvent(dst, "content_block_delta", e.index)
	dst = append(dst, `,"delta":{"type":"text_delta","text":`...)
	dst = rawjson.AppendQuote(dst, delta)
	return append(dst, "}}\n\n"...)
}

func (e *streamEncoder) openTool(dst []byte, k int, id, name string) []byte {
	e.open, e.live = openTool, k
	dst = e.blockEvent(dst, "content_block_start", e.index)
	dst = append(dst, `,"content_block":{"type":"tool_use","id":`...)
	dst = rawjson.AppendQuote(dst, toolUseID(id))
	dst = append(dst, `,"name":`...)
	dst = rawjson.AppendQuote(dst, name)
	return append(dst, `,"input":{}}}`+"\n\n"...)
}

func (e *streamEncoder) argsDelta(dst, frag []byte) []byte {
	dst = e.blockEvent(dst, "content_block_delta", e.index)
	dst = append(dst, `,"delta":{"type":"input_json_delta","partial_json":`...)
	dst = rawjson.AppendQuote(dst, frag)
	return append(dst, "}}\n\n"...)
}

// closeBlock stops the open block.
func (e *streamEncoder) closeBlock(dst []byte) []byte {
	if e.open == openNone {
		return dst
	}
	dst = e.blockEvent(dst, "content_block_stop", e.index)
	dst = append(dst, "}\n\n"...)
	e.open, e.live = openNone, -1
	e.index++
	return dst
}

func (e *streamEncoder) pendingTool(k int) *pendingTool {
	for i := range e.pending {
		if e.pending[i].k == k {
			return &e.pending[i]
		}
	}
	return nil
}

// promote writes the held tool calls in order after the open tool block
// was stopped: each whole if it ended (or all is ending), the first one
// that has not ended then stays open; held text follows the calls.
func (e *streamEncoder) promote(dst []byte, all bool) []byte {
	for len(e.pending) > 0 {
		p := e.pending[0]
		e.pending = e.pending[1:]
		dst = e.openTool(dst, p.k, p.id, p.name)
		if len(p.args) > 0 {
			dst = e.argsDelta(dst, p.args)
		}
		if !p.ended && !all {
			return dst
		}
		dst = e.closeBlock(dst)
	}
	e.pending = nil
	if len(e.heldText) > 0 {
		dst = e.text(dst, e.heldText)
		e.heldText = e.heldText[:0]
	}
	return dst
}

// end closes the blocks and writes message_delta and message_stop.
func (e *streamEncoder) end(dst []byte) []byte {
	dst = e.closeBlock(dst)
	dst = e.promote(dst, true)
	dst = e.closeBlock(dst)
	e.ended = true
	stop := formats.StopEnd
	if e.hasStop {
		stop = e.stop
	}
	dst = append(dst, "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{"...)
	dst = appendStop(dst, stop.Final(e.sawTools), e.seq)
	dst = append(dst, `},"usage":`...)
	dst = appendUsage(dst, e.usage)
	dst = append(dst, "}\n\n"...)
	return append(dst, "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"...)
}
