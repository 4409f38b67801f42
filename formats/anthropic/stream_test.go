package anthropic

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/modelgate/modelgate/formats"
	"github.com/modelgate/modelgate/formats/sse"
)

// decodeAll runs an SSE fixture through the decoder and describes the IR
// events.
func decodeAll(t *testing.T, in []byte) string {
	t.Helper()
	d := NewStreamDecoder()
	var evs []formats.Event
	var got []string
	r := sse.NewReader(bytes.NewReader(in), 1<<16)
	for {
		event, data, err := r.Next()
		if err != nil {
			break
		}
		var ferr *formats.Error
		evs, ferr = d.Decode(evs[:0], event, data)
		if ferr != nil {
			t.Fatal(ferr)
		}
		for _, ev := range evs {
			s := ev.Type.String()
			switch ev.Type {
			case formats.EventStart:
				s += fmt.Sprintf("(%s,%s,%d)", ev.ID, ev.Model, ev.Usage.Input)
			case formats.EventText, formats.EventReasoning:
				s += fmt.Sprintf("(%s%s)", ev.Delta, ev.Signature)
			case formats.EventToolStart:
				s += fmt.Sprintf("(%d,%s,%s)", ev.Index, ev.ID, ev.Name)
			case formats.EventToolArgs:
				s += fmt.Sprintf("(%d,%s)", ev.Index, ev.Delta)
			case formats.EventToolEnd:
				s += fmt.Sprintf("(%d)", ev.Index)
			case formats.EventFinish:
				s += "(" + ev.Stop.String() + "," + ev.StopSequence + ")"
			case formats.EventUsage:
				s += fmt.Sprintf("(%d,%d,%d,%d)", ev.Usage.Input, ev.Usage.CacheRead, ev.Usage.CacheWrite, ev.Usage.Output)
			case formats.EventError:
				s += "(" + ev.Err.Message + ")"
			}
			got = append(got, s)
		}
	}
	return strings.Join(got, " ")
}

func TestStreamDecoderEvents(t *testing.T) {
	for file, want := range map[string]string{
		"tools": `start(msg_014p7gG3wDgGV9EUtLvn,claude-sonnet-4-5-20250929,472) text(Checking.) tool_start(0,toolu_01A,get_weather) tool_args(0,{"city": "Pa) tool_args(0,ris"}) tool_end(0) ` +
			`tool_start(1,toolu_01B,get_time) tool_args(1,{}) tool_end(1) usage(472,400,50,89) finish(tool_use,) end`,
		"thinking": `start(msg_01Th,claude-sonnet-4-5-20250929,40) reasoning(The user wants a haiku.) reasoning(EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds) text(Autumn moonlight) usage(40,0,0,120) finish(stop_sequence,END) end`,
		"error":    `start(msg_01Er,claude-sonnet-4-5-20250929,10) text(Hello) error(Overloaded)`,
		"json":     `start(msg_01Js,claude-sonnet-4-5-20250929,30) text({"a": ) text("yes"}) usage(30,0,0,12) finish(end,) end`,
		"text":     `start(msg_01XFDUDYJgAACzvnptvVoY,claude-sonnet-4-5-20250929,25) text(Hello) text(! été` + "\n" + `"ok") usage(25,0,0,15) finish(end,) end`,
	} {
		t.Run(file, func(t *testing.T) {
			if got := decodeAll(t, read(t, "stream/"+file+".sse")); got != want {
				t.Fatalf("events:\n got %s\nwant %s", got, want)
			}
		})
	}
}

func TestStreamDecoderEdges(t *testing.T) {
	// no event: lines (the type comes from the data), blocks out of order,
	// events before message_start, a server tool block, garbage
	in := "data: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"server_tool_use\",\"id\":\"srvtoolu_1\",\"name\":\"web_search\",\"input\":{}}}\n\n" +
		"data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"q\\\":1}\"}}\n\n" +
		"data: {\"type\":\"content_block_stop\",\"index\":0}\n\n" +
		"data: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"tool_use\",\"id\":\"toolu_x\",\"name\":\"f\",\"input\":{\"a\":1}}}\n\n" +
		"data: {\"type\":\"content_block_delta\",\"index\":7,\"delta\":{\"type\":\"text_delta\",\"text\":\"lost\"}}\n\n" +
		"data: {\"type\":\"content_block_stop\",\"index\":1}\n\n" +
		"data: {\"type\":\"content_block_stop\",\"index\":1}\n\n" +
		"event: whatever\ndata: not json\n\n" +
		"data: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"refusal\"},\"usage\":{\"output_tokens\":3}}\n\n" +
		"data: {\"type\":\"message_stop\"}\n\n" +
		"data: {\"type\":\"content_block_start\",\"index\":2,\"content_block\":{\"type\":\"text\",\"text\":\"after\"}}\n\n"
	want := `start(,,0) tool_start(0,toolu_x,f) tool_args(0,{"a":1}) tool_end(0) usage(0,0,0,3) finish(content_filter,) end`
	if got := decodeAll(t, []byte(in)); got != want {
		t.Fatalf("events:\n got %s\nwant %s", got, want)
	}
	d := NewStreamDecoder()
	if _, err := d.Decode(nil, []byte("message_start"), []byte(`{"type":`)); err == nil || err.Kind != formats.KindUpstream {
		t.Fatalf("malformed event: %v", err)
	}
}

// encodeAll feeds IR events to a fresh encoder.
func encodeAll(evs ...formats.Event) string {
	e := NewStreamEncoder("svc")
	var out []byte
	for i := range evs {
		out = e.Encode(out, &evs[i])
	}
	return string(pin(out))
}

// blocks summarises an Anthropic stream: one letter per block event (s
// start, d delta, x stop) with the block index, then message events.
func blocks(s string) string {
	var b strings.Builder
	r := sse.NewReader(strings.NewReader(s), 1<<16)
	for {
		ev, data, err := r.Next()
		if err != nil {
			break
		}
		i := bytes.Index(data, []byte(`"index":`))
		idx := ""
		if i >= 0 {
			idx = string(data[i+8 : i+9])
		}
		switch string(ev) {
		case "content_block_start":
			b.WriteString("s" + idx + " ")
		case "content_block_delta":
			b.WriteString("d" + idx + " ")
		case "content_block_stop":
			b.WriteString("x" + idx + " ")
		default:
			b.WriteString(string(ev) + " ")
		}
	}
	return strings.TrimSpace(b.String())
}

func TestStreamEncoderInterleaved(t *testing.T) {
	ev := func(typ formats.EventType, k int, delta string) formats.Event {
		return formats.Event{Type: typ, Index: k, Delta: []byte(delta), ID: fmt.Sprintf("call_%d", k), Name: "f"}
	}
	out := encodeAll(
		formats.Event{Type: formats.EventStart, ID: "chatcmpl-1"},
		formats.Event{Type: formats.EventReasoning, Delta: []byte("hidden")},
		ev(formats.EventText, 0, "a"),
		ev(formats.EventToolStart, 0, ""),
		ev(formats.EventToolArgs, 0, `{"x":`),
		ev(formats.EventToolStart, 1, ""),
		ev(formats.EventToolArgs, 1, `{"y":`),
		ev(formats.EventText, 0, "late text"),
		ev(formats.EventToolArgs, 0, `1}`),
		ev(formats.EventToolStart, 2, ""),
		ev(formats.EventToolArgs, 1, `2}`),
		ev(formats.EventToolEnd, 1, ""),
		ev(formats.EventToolArgs, 2, `{}`),
		ev(formats.EventToolEnd, 0, ""),
		ev(formats.EventToolEnd, 2, ""),
		formats.Event{Type: formats.EventFinish, Stop: formats.StopEnd},
		formats.Event{Type: formats.EventUsage, Usage: formats.Usage{Input: 100, CacheRead: 60, Output: 7}},
		formats.Event{Type: formats.EventEnd},
		ev(formats.EventText, 0, "after the end"),
	)
	if got, want := blocks(out), "message_start ping s0 d0 x0 s1 d1 d1 x1 s2 d2 x2 s3 d3 x3 s4 d4 x4 message_delta message_stop"; got != want {
		t.Fatalf("blocks\n got %s\nwant %s\n%s", got, want, out)
	}
	for _, w := range []string{
		`"partial_json":"{\"y\":2}"`, // tool 1 written whole
		`"text":"late text"`,
		`"stop_reason":"tool_use"`, // tool calls: the tool reason
		`"usage":{"input_tokens":40,"cache_creation_input_tokens":0,"cache_read_input_tokens":60,"output_tokens":7}`,
		`"id":"msg_GENERATED"`,
	} {
		if !strings.Contains(out, w) {
			t.Errorf("missing %s in\n%s", w, out)
		}
	}
	if strings.Contains(out, "hidden") || strings.Contains(out, "after the end") {
		t.Errorf("unexpected content:\n%s", out)
	}
	// an error ends the stream at once
	out = encodeAll(ev(formats.EventText, 0, "x"), formats.Event{Type: formats.EventError, Err: formats.NewError(formats.KindTimeout, "")}, formats.Event{Type: formats.EventEnd})
	if got := blocks(out); got != "message_start ping s0 d0 error" || !strings.Contains(out, `"timeout_error"`) {
		t.Fatalf("error stream %s\n%s", got, out)
	}
	// a stop sequence is reported only when known
	out = encodeAll(formats.Event{Type: formats.EventFinish, Stop: formats.StopSequence, StopSequence: "END"}, formats.Event{Type: formats.EventEnd})
	if !strings.Contains(out, `"stop_reason":"stop_sequence","stop_sequence":"END"`) {
		t.Fatalf("stop sequence: %s", out)
	}
}

func TestPassThroughEdges(t *testing.T) {
	tr := NewPassThroughStream("svc")
	// no event: lines; message_start without a model
	out, done, err := tr.Feed(nil, nil, []byte(`{"type":"message_start","message":{"id":"msg_1","usage":{"input_tokens":3,"cache_read_input_tokens":2}}}`))
	if err != nil || done {
		t.Fatal(err)
	}
	if want := "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"usage\":{\"input_tokens\":3,\"cache_read_input_tokens\":2},\"model\":\"svc\"}}\n\n"; string(out) != want {
		t.Fatalf("got %q", out)
	}
	if _, _, err := tr.Feed(nil, []byte("content_block_delta"), []byte(`{"type":"content_block_delta","index":0,"delta":`)); err == nil {
		t.Fatal("malformed delta accepted")
	}
	out, done, err = tr.Feed(nil, []byte("message_delta"), []byte(`{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":9,"input_tokens":4}}`))
	if err != nil || done || len(out) == 0 {
		t.Fatal(err)
	}
	// message_delta's count, but not final before message_stop
	if u, final := tr.Usage(); final || u != (formats.Usage{Input: 6, CacheRead: 2, Output: 9}) {
		t.Fatalf("usage %+v final %v", u, final)
	}
	out, done, err = tr.Feed(nil, []byte("message_stop"), []byte(`{"type":"message_stop"}`))
	if err != nil || !done || len(out) != 0 {
		t.Fatalf("stop: %q %v %v", out, done, err)
	}
	if u, final := tr.Usage(); !final || u != (formats.Usage{Input: 6, CacheRead: 2, Output: 9}) {
		t.Fatalf("usage %+v final %v", u, final)
	}
	if out, done, _ = tr.Feed(nil, []byte("ping"), []byte(`{"type":"ping"}`)); !done || len(out) != 0 {
		t.Fatal("event after the end written")
	}
	if got := string(tr.Finish(nil)); got != "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n" {
		t.Fatalf("finish %q", got)
	}
	if got := string(tr.Fail(nil, formats.NewError(formats.KindOverloaded, ""))); got != "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n" {
		t.Fatalf("fail %q", got)
	}
}
