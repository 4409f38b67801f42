package responses

import (
	"strconv"
	"time"

	"github.com/modelgate/modelgate/formats"
	"github.com/modelgate/modelgate/formats/internal/upstream"
	"github.com/modelgate/modelgate/formats/openai"
	"github.com/modelgate/modelgate/formats/rawjson"
)

// NewStreamEncoder renders IR stream events as Responses events
// (docs/translation.md, "Writing client streams", RSP client): response.created
// and response.in_progress at the start; a message item opened at the first
// text and closed before a tool call or at the end; each tool call a
// function_call item; response.completed (or response.incomplete) with the
// whole response and its usage at the end; on an error, an error event and
// response.failed. Every event carries the next sequence_number. req, when not
// nil, supplies the echoed settings and namespaced tool names.
func NewStreamEncoder(model string, req *Request) formats.StreamEncoder {
	e := &encoder{o: object{id: formats.NewID("resp_"), model: model, req: req}}
	if req != nil {
		e.names = req.names
	}
	return e
}

type encoder struct {
	o     object
	names map[string]Native
	seq   int64
	index int // output_index of the next item

	started bool
	// the open message item
	msgOpen bool
	msgID   string
	text    []byte
	// the open function call
	callOpen bool
	call     struct {
		id, callID, name string
		args             []byte
	}
	stop     formats.StopReason
	usage    formats.Usage
	hasUsage bool
	scratch  []byte
}

// event appends `event: <typ>` and the data line's start, through the
// sequence number; the caller appends the rest of the object and ends it
// with end.
func (e *encoder) event(dst []byte, typ string) []byte {
	dst = append(dst, "event: "...)
	dst = append(dst, typ...)
	dst = append(dst, "\ndata: {\"type\":"...)
	dst = rawjson.AppendQuote(dst, typ)
	dst = append(dst, `,"sequence_number":`...)
	dst = rawjson.AppendInt(dst, e.seq)
	e.seq++
	return dst
}

func end(dst []byte) []byte { return append(dst, "}\n\n"...) }

// response renders the response object in its current state.
func (e *encoder) response(dst []byte, st, reason string, final bool) []byte {
	dst = e.o.open(dst, st)
	if final {
		dst = append(dst, e.o.items...)
	}
	return e.o.close(dst, st, reason, e.usage, final && e.hasUsage)
}

func (e *encoder) start(dst []byte, ev *formats.Event) []byte {
	e.started = true
	e.o.created = ev.Created
	if e.o.created <= 0 {
		e.o.created = time.Now().Unix()
	}
	dst = e.event(dst, "response.created")
	dst = append(dst, `,"response":`...)
	dst = end(e.response(dst, "in_progress", "", false))
	dst = e.event(dst, "response.in_progress")
	dst = append(dst, `,"response":`...)
	return end(e.response(dst, "in_progress", "", false))
}

// ids appends `,"item_id":…,"output_index":…` of the open item.
func (e *encoder) ids(dst []byte, itemID string, content bool) []byte {
	dst = append(dst, `,"item_id":`...)
	dst = rawjson.AppendQuote(dst, itemID)
	dst = append(dst, `,"output_index":`...)
	dst = strconv.AppendInt(dst, int64(e.index), 10)
	if content {
		dst = append(dst, `,"content_index":0`...)
	}
	return dst
}

func (e *encoder) openMessage(dst []byte) []byte {
	e.msgOpen, e.msgID, e.text = true, formats.NewID("msg_"), e.text[:0]
	dst = e.event(dst, "response.output_item.added")
	dst = append(dst, `,"output_index":`...)
	dst = strconv.AppendInt(dst, int64(e.index), 10)
	dst = append(dst, `,"item":{"type":"message","id":`...)
	dst = rawjson.AppendQuote(dst, e.msgID)
	dst = end(append(dst, `,"role":"assistant","status":"in_progress","content":[]}`...))
	dst = e.event(dst, "response.content_part.added")
	dst = e.ids(dst, e.msgID, true)
	return end(append(dst, `,"part":{"type":"output_text","text":"","annotations":[],"logprobs":[]}`...))
}

func (e *encoder) closeMessage(dst []byte) []byte {
	if !e.msgOpen {
		return dst
	}
	e.msgOpen = false
	text := string(e.text)
	dst = e.event(dst, "response.output_text.done")
	dst = e.ids(dst, e.msgID, true)
	dst = append(dst, `,"text":`...)
	dst = rawjson.AppendQuote(dst, text)
	dst = end(append(dst, `,"logprobs":[]`...))
	dst = e.event(dst, "response.content_part.done")
	dst = e.ids(dst, e.msgID, true)
	dst = append(dst, `,"part":`...)
	dst = end(appendContentPart(dst, formats.PartText, text))
	if len(e.o.items) > 0 {
		e.o.items = append(e.o.items, ',')
	}
	e.o.items = appendMessage(e.o.items, e.msgID, "completed", []formats.Part{{Type: formats.PartText, Text: text}})
	dst = e.event(dst, "response.output_item.done")
	dst = append(dst, `,"output_index":`...)
	dst = strconv.AppendInt(dst, int64(e.index), 10)
	dst = append(dst, `,"item":`...)
	dst = end(appendMessage(dst, e.msgID, "completed", []formats.Part{{Type: formats.PartText, Text: text}}))
	e.index++
	return dst
}

func (e *encoder) openCall(dst []byte, ev *formats.Event) []byte {
	e.callOpen = true
	e.call.id, e.call.callID, e.call.name, e.call.args = formats.NewID("fc_"), ev.ID, ev.Name, e.call.args[:0]
	if e.call.callID == "" {
		e.call.callID = formats.NewID("call_")
	}
	dst = e.event(dst, "response.output_item.added")
	dst = append(dst, `,"output_index":`...)
	dst = strconv.AppendInt(dst, int64(e.index), 10)
	dst = append(dst, `,"item":`...)
	e.scratch = appendFunctionCall(e.scratch[:0], e.call.id, e.call.callID, e.call.name, "", "in_progress", e.names)
	return end(append(dst, e.scratch...))
}

func (e *encoder) closeCall(dst []byte) []byte {
	if !e.callOpen {
		return dst
	}
	e.callOpen = false
	args := string(e.call.args)
	dst = e.event(dst, "response.function_call_arguments.done")
	dst = e.ids(dst, e.call.id, false)
	name := e.call.name
	if n, ok := e.names[name]; ok {
		name = n.Name
	}
	dst = append(dst, `,"name":`...)
	dst = rawjson.AppendQuote(dst, name)
	dst = append(dst, `,"arguments":`...)
	dst = end(rawjson.AppendQuote(dst, args))
	e.scratch = appendFunctionCall(e.scratch[:0], e.call.id, e.call.callID, e.call.name, args, "completed", e.names)
	if len(e.o.items) > 0 {
		e.o.items = append(e.o.items, ',')
	}
	e.o.items = append(e.o.items, e.scratch...)
	dst = e.event(dst, "response.output_item.done")
	dst = append(dst, `,"output_index":`...)
	dst = strconv.AppendInt(dst, int64(e.index), 10)
	dst = append(dst, `,"item":`...)
	dst = end(append(dst, e.scratch...))
	e.index++
	return dst
}

// Encode implements formats.StreamEncoder.
func (e *encoder) Encode(dst []byte, ev *formats.Event) []byte {
	if !e.started && ev.Type != formats.EventError {
		dst = e.start(dst, ev)
		if ev.Type == formats.EventStart {
			return dst
		}
	}
	switch ev.Type {
	case formats.EventText:
		dst = e.closeCall(dst)
		if !e.msgOpen {
			dst = e.openMessage(dst)
		}
		e.text = append(e.text, ev.Delta...)
		dst = e.event(dst, "response.output_text.delta")
		dst = e.ids(dst, e.msgID, true)
		dst = append(dst, `,"delta":`...)
		dst = rawjson.AppendQuote(dst, ev.Delta)
		return end(append(dst, `,"logprobs":[]`...))
	case formats.EventToolStart:
		dst = e.closeMessage(dst)
		dst = e.closeCall(dst)
		return e.openCall(dst, ev)
	case formats.EventToolArgs:
		if !e.callOpen {
			return dst
		}
		e.call.args = append(e.call.args, ev.Delta...)
		dst = e.event(dst, "response.function_call_arguments.delta")
		dst = e.ids(dst, e.call.id, false)
		dst = append(dst, `,"delta":`...)
		return end(rawjson.AppendQuote(dst, ev.Delta))
	case formats.EventToolEnd:
		return e.closeCall(dst)
	case formats.EventFinish:
		e.stop = ev.Stop
	case formats.EventUsage:
		e.usage, e.hasUsage = ev.Usage, true
	case formats.EventEnd:
		dst = e.closeMessage(dst)
		dst = e.closeCall(dst)
		hasCalls := false
		for i := 0; i+len(`"type":"function_call"`) <= len(e.o.items); i++ {
			if string(e.o.items[i:i+len(`"type":"function_call"`)]) == `"type":"function_call"` {
				hasCalls = true
				break
			}
		}
		st, reason := status(e.stop.Final(hasCalls))
		typ := "response.completed"
		if st == "incomplete" {
			typ = "response.incomplete"
		}
		dst = e.event(dst, typ)
		dst = append(dst, `,"response":`...)
		return end(e.response(dst, st, reason, true))
	case formats.EventError:
		return e.fail(dst, ev.Err)
	}
	return dst
}

// fail appends an error event and response.failed.
func (e *encoder) fail(dst []byte, fe *formats.Error) []byte {
	if fe == nil {
		fe = formats.NewError(formats.KindUpstream, "The upstream provider reported an error.")
	}
	env := openai.AppendError(nil, fe) // {"error":{"message","type","param","code"}}
	inner := rawjson.Get(env, "error")
	code := rawjson.Get(inner, "code")
	if len(code) == 0 || rawjson.IsNull(code) {
		code = rawjson.Get(inner, "type")
	}
	msg := rawjson.Get(inner, "message")
	dst = e.event(dst, "error")
	dst = append(dst, `,"code":`...)
	dst = append(dst, code...)
	dst = append(dst, `,"message":`...)
	dst = append(dst, msg...)
	dst = end(append(dst, `,"param":null`...))
	if !e.started {
		return dst
	}
	dst = e.event(dst, "response.failed")
	dst = append(dst, `,"response":`...)
	dst = e.o.open(dst, "failed")
	dst = append(dst, e.o.items...)
	dst = append(dst, `],"error":{"code":`...)
	dst = rawjson.AppendQuote(dst, failedCode(fe.Kind))
	dst = append(dst, `,"message":`...)
	dst = append(dst, msg...)
	dst = append(dst, `},"incomplete_details":null`...)
	return end(e.o.echo(dst))
}

// failedCode is the code of a failed response's error for an error kind:
// one of those OpenAI's ResponseError allows (the error event before it
// carries the envelope's own code).
func failedCode(k formats.ErrorKind) string {
	switch k {
	case formats.KindRateLimited, formats.KindOverloaded:
		return "rate_limit_exceeded"
	case formats.KindInvalidRequest, formats.KindRequestTooLarge:
		return "invalid_prompt"
	}
	return "server_error"
}

var _ formats.StreamEncoder = (*encoder)(nil)

// NewPassThroughStream passes an OpenAI upstream's Responses event stream
// through: the model inside each response object becomes the service
// model, usage is read from the terminal event (response.completed or
// response.incomplete), which is held back until Finish so that the bill is
// settled first; response.failed and error events end the stream with an
// error.
func NewPassThroughStream(serviceModel string) formats.StreamTranslator {
	return &passThrough{model: rawjson.AppendQuote(nil, serviceModel)}
}

type passThrough struct {
	model    []byte
	held     []byte
	done     bool
	usage    formats.Usage
	hasUsage bool
	final    bool // a terminal event was seen
	outBytes int64
	seq      int64 // the next sequence number, for an error the gateway adds
	// hosted tool calls: the items added so far, and those of the
	// terminal response
	added, terminal formats.HostedUses
	meter           formats.TokenMeter // nil when no bill needs a count
}

// SetTokenMeter makes the stream report its generated deltas to m.
func (t *passThrough) SetTokenMeter(m formats.TokenMeter) { t.meter = m }

func (t *passThrough) Feed(dst []byte, event, data []byte) ([]byte, bool, *formats.Error) {
	data = rawjson.TrimSpace(data)
	if t.done || len(data) == 0 {
		return dst, t.done, nil
	}
	if rawjson.Kind(data) != '{' {
		return dst, false, upstream.BadEvent()
	}
	var typ, item []byte
	var resp rawjson.Member
	hasResp := false
	it := rawjson.Object(data, 0)
	for it.Next() {
		m := it.Member()
		switch {
		case m.NameIs("type"):
			typ = it.Value()
		case m.NameIs("response"):
			resp, hasResp = *m, true
		case m.NameIs("sequence_number"):
			if n, ok := rawjson.ParseInt(it.Value()); ok {
				t.seq = n + 1
			}
		case m.NameIs("delta"):
			v := it.Value()
			t.outBytes += int64(rawjson.UnquotedLen(v))
			if t.meter != nil {
				t.meter.Quoted(v)
			}
		case m.NameIs("item"):
			item = it.Value()
		}
	}
	if it.Err() != nil {
		return dst, false, upstream.BadEvent()
	}
	name, _ := rawjson.Unquote(typ)
	if name == "" {
		name = string(event)
	}
	if hasResp {
		// a failed response is billed what it used, like a completed one
		rv := data[resp.ValueStart:resp.ValueEnd]
		if u := rawjson.Get(rv, "usage"); len(u) > 0 && !rawjson.IsNull(u) {
			if uu, ok := parseUsage(u); ok {
				t.usage, t.hasUsage = uu, true
			}
		}
		if o := rawjson.Get(rv, "output"); rawjson.Kind(o) == '[' {
			t.terminal = t.terminal.Max(hostedItems(o))
		}
	}
	switch name {
	case "error":
		return dst, false, upstreamStreamError(data)
	case "response.failed":
		t.final = true
		var inner []byte
		if hasResp {
			inner = rawjson.Get(data[resp.ValueStart:resp.ValueEnd], "error")
		}
		return dst, false, upstreamStreamError(inner)
	}
	if name == "response.output_item.added" {
		t.added.Add(hostedItemKind(rawjson.Get(item, "type")), 1)
	}
	out := data
	var scratch []byte
	if hasResp {
		rv := data[resp.ValueStart:resp.ValueEnd]
		if rawjson.Kind(rv) == '{' {
			start, end, err := rawjson.Find(rv, "model")
			if err == nil && start >= 0 {
				abs := resp.ValueStart
				scratch = rawjson.Apply(nil, data, rawjson.Edit{Start: abs + start, End: abs + end, Text: t.model})
				out = scratch
			}
		}
	}
	frame := func(dst []byte) []byte {
		dst = append(dst, "event: "...)
		dst = append(dst, name...)
		dst = append(dst, "\ndata: "...)
		dst = append(dst, out...)
		return append(dst, "\n\n"...)
	}
	switch name {
	case "response.completed", "response.incomplete":
		t.held = frame(t.held[:0])
		t.done, t.final = true, true
		return dst, true, nil
	}
	return frame(dst), false, nil
}

// upstreamStreamError reads an error object of a Responses stream (flat
// or nested under "error").
func upstreamStreamError(v []byte) *formats.Error {
	if nested := rawjson.Get(v, "error"); rawjson.Kind(nested) == '{' {
		v = nested
	}
	msg, _ := rawjson.Unquote(rawjson.Get(v, "message"))
	code, _ := rawjson.Unquote(rawjson.Get(v, "code"))
	e := formats.NewError(formats.KindUpstream, "The upstream provider reported an error during the stream.")
	if msg != "" {
		e.Message = "The upstream provider reported an error during the stream: " + msg
	}
	switch code {
	case "rate_limit_exceeded", "server_is_overloaded", "slow_down":
		e.Kind = formats.KindOverloaded
	}
	return e
}

// Usage is final when a terminal event (response.completed, .incomplete or
// .failed) carried it; it includes the hosted tool calls.
func (t *passThrough) Usage() (formats.Usage, bool) {
	u := t.usage
	u.Hosted = t.HostedUses()
	return u, t.hasUsage && t.final
}

// HostedUses counts the hosted tool calls the stream made: the items added,
// or those of the terminal response if more.
func (t *passThrough) HostedUses() formats.HostedUses { return t.added.Max(t.terminal) }

func (t *passThrough) Finish(dst []byte) []byte { return append(dst, t.held...) }

func (t *passThrough) Fail(dst []byte, fe *formats.Error) []byte {
	e := &encoder{seq: t.seq}
	return e.fail(dst, fe)
}

func (t *passThrough) OutputBytes() int64 { return t.outBytes }

var (
	_ formats.StreamTranslator = (*passThrough)(nil)
	_ formats.HostedMeter      = (*passThrough)(nil)
)
