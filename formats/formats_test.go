package formats

import (
	"strings"
	"testing"
)

// fakeDecoder turns "t:text", "u:in,out", "f", "e", "x" (error) events into
// IR events.
type fakeDecoder struct{}

func (fakeDecoder) Decode(dst []Event, _, data []byte) ([]Event, *Error) {
	s := string(data)
	switch {
	case s == "start":
		return append(dst, Event{Type: EventStart, ID: "id1"}), nil
	case strings.HasPrefix(s, "t:"):
		return append(dst, Event{Type: EventText, Delta: []byte(s[2:])}), nil
	case strings.HasPrefix(s, "a:"):
		return append(dst, Event{Type: EventToolArgs, Delta: []byte(s[2:])}), nil
	case s == "u":
		return append(dst, Event{Type: EventUsage, Usage: Usage{Input: 10, Output: 5}, Final: true}), nil
	case s == "fin":
		return append(dst, Event{Type: EventFinish, Stop: StopLength}), nil
	case s == "end":
		return append(dst, Event{Type: EventEnd}), nil
	case s == "err":
		return append(dst, Event{Type: EventError, Err: NewError(KindOverloaded, "busy")}), nil
	}
	return dst, NewError(KindUpstream, "bad")
}

// fakeEncoder writes one line per event.
type fakeEncoder struct{}

func (fakeEncoder) Encode(dst []byte, ev *Event) []byte {
	dst = append(dst, ev.Type.String()...)
	switch ev.Type {
	case EventText, EventToolArgs:
		dst = append(dst, ':')
		dst = append(dst, ev.Delta...)
	case EventFinish:
		dst = append(dst, ':')
		dst = append(dst, ev.Stop.String()...)
	case EventError:
		dst = append(dst, ':')
		dst = append(dst, ev.Err.Message...)
	}
	return append(dst, '\n')
}

func TestTranslate(t *testing.T) {
	tr := Translate(fakeDecoder{}, fakeEncoder{})
	var out []byte
	for _, in := range []string{"start", "t:hello", "a:{}", "u", "fin"} {
		var done bool
		var err *Error
		out, done, err = tr.Feed(out, nil, []byte(in))
		if done || err != nil {
			t.Fatalf("%s: done %v err %v", in, done, err)
		}
	}
	if got := string(out); got != "start\ntext:hello\ntool_args:{}\n" {
		t.Fatalf("before end: %q", got)
	}
	out, done, err := tr.Feed(out[:0], nil, []byte("end"))
	if !done || err != nil || len(out) != 0 {
		t.Fatalf("end: %q %v %v", out, done, err)
	}
	if u, ok := tr.Usage(); !ok || u.Input != 10 || u.Output != 5 {
		t.Fatalf("usage %v %v", u, ok)
	}
	if n := tr.OutputBytes(); n != 7 {
		t.Fatalf("output bytes %d", n)
	}
	if got := string(tr.Finish(nil)); got != "finish:length\nusage\nend\n" {
		t.Fatalf("finish: %q", got)
	}

	tr = Translate(fakeDecoder{}, fakeEncoder{})
	if _, _, err := tr.Feed(nil, nil, []byte("err")); err == nil || err.Kind != KindOverloaded {
		t.Fatalf("error event: %v", err)
	}
	if got := string(tr.Fail(nil, NewError(KindOverloaded, "busy"))); got != "error:busy\n" {
		t.Fatalf("fail: %q", got)
	}
	if _, _, err := tr.Feed(nil, nil, []byte("???")); err == nil || err.Kind != KindUpstream {
		t.Fatalf("bad event: %v", err)
	}
}

func TestNormalized(t *testing.T) {
	for _, tc := range []struct{ in, want Usage }{
		{Usage{Input: 100, CacheRead: 40, Output: 10, Reasoning: 4}, Usage{Input: 100, CacheRead: 40, Output: 10, Reasoning: 4}},
		{Usage{Input: 10, CacheRead: 40, CacheWrite: 5, Output: 3, Reasoning: 8}, Usage{Input: 55, CacheRead: 40, CacheWrite: 5, Output: 11, Reasoning: 8}},
		{Usage{Input: -1, Output: -5}, Usage{}},
	} {
		if got := tc.in.Normalized(); got != tc.want {
			t.Errorf("%+v.Normalized() = %+v, want %+v", tc.in, got, tc.want)
		}
	}
}

func TestStopFinal(t *testing.T) {
	for _, tc := range []struct {
		in    StopReason
		calls bool
		want  StopReason
	}{
		{StopEnd, true, StopToolUse},
		{StopLength, true, StopLength},
		{StopUnset, false, StopEnd},
		{StopContentFilter, false, StopContentFilter},
	} {
		if got := tc.in.Final(tc.calls); got != tc.want {
			t.Errorf("%v.Final(%v) = %v", tc.in, tc.calls, got)
		}
	}
}

func TestBound(t *testing.T) {
	s := InputSize{TextBytes: 1000, Messages: 3, Tools: 2, Images: 1}
	want := int64(BaseTokens + 1000 + 3*MessageTokens + ToolsOverheadTokens + 2*ToolTokens + ImageTokens)
	if got := s.Bound(0); got != want {
		t.Errorf("Bound = %d, want %d", got, want)
	}
	if got := s.Bound(100); got != want-ImageTokens+100 {
		t.Errorf("Bound(100) = %d", got)
	}
	if e := s.Estimate(); e <= 0 || e >= s.Bound(0) {
		t.Errorf("Estimate = %d", e)
	}
	if EstimateTokens(0) != 0 || EstimateTokens(1) != 1 || EstimateTokens(8) != 2 || EstimateTokens(9) != 3 {
		t.Error("EstimateTokens")
	}
}

func TestFillToolIDs(t *testing.T) {
	r := &Request{Messages: []Message{
		{Role: RoleAssistant, Parts: []Part{
			{Type: PartToolCall, ToolCall: &ToolCall{Name: "f"}},
			{Type: PartToolCall, ToolCall: &ToolCall{Name: "f"}},
			{Type: PartToolCall, ToolCall: &ToolCall{ID: "x", Name: "g"}},
		}},
		{Role: RoleTool, Parts: []Part{
			{Type: PartToolResult, ToolResult: &ToolResult{Name: "f"}},
			{Type: PartToolResult, ToolResult: &ToolResult{Name: "f"}},
			{Type: PartToolResult, ToolResult: &ToolResult{CallID: "x", Name: "g"}},
		}},
	}}
	r.FillToolIDs("call_")
	calls, results := r.Messages[0].Parts, r.Messages[1].Parts
	if calls[0].ToolCall.ID != "call_0_0" || calls[1].ToolCall.ID != "call_0_1" {
		t.Fatalf("ids %q %q", calls[0].ToolCall.ID, calls[1].ToolCall.ID)
	}
	if results[0].ToolResult.CallID != "call_0_0" || results[1].ToolResult.CallID != "call_0_1" || results[2].ToolResult.CallID != "x" {
		t.Fatalf("pairing %q %q", results[0].ToolResult.CallID, results[1].ToolResult.CallID)
	}
	if r.ToolName("x") != "g" {
		t.Fatal("ToolName")
	}
}

func TestDataURL(t *testing.T) {
	mt, data, ok := ParseDataURL("data:image/PNG;base64,iVBOR")
	if !ok || mt != "image/png" || data != "iVBOR" {
		t.Fatalf("%q %q %v", mt, data, ok)
	}
	if _, _, ok := ParseDataURL("https://x/y.png"); ok {
		t.Fatal("url")
	}
	if _, _, ok := ParseDataURL("data:text/plain,hello"); ok {
		t.Fatal("not base64")
	}
	m := Media{MediaType: "image/png", Data: "iVBOR"}
	if m.DataURL() != "data:image/png;base64,iVBOR" {
		t.Fatal("DataURL")
	}
}

func TestDropAndNames(t *testing.T) {
	names := DefaultFieldNames
	names[FieldTopK] = "generationConfig.topK"
	r := &Request{Names: &names}
	r.DropField(FieldTopK)
	r.Drop("seed")
	r.Drop("seed")
	if h := r.DroppedHeader(); h != "generationConfig.topK,seed" {
		t.Fatalf("header %q", h)
	}
	if e := r.Reject(FieldN, "no"); e.Param != "n" || e.Status() != 400 {
		t.Fatalf("reject %+v", e)
	}
}

func TestNewID(t *testing.T) {
	a, b := NewID("chatcmpl-"), NewID("chatcmpl-")
	if a == b || len(a) != len("chatcmpl-")+24 || !strings.HasPrefix(a, "chatcmpl-") {
		t.Fatalf("%q %q", a, b)
	}
}
