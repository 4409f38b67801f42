package sse

import (
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

type ev struct{ name, data string }

func readAll(r *Reader) ([]ev, error) {
	var out []ev
	for {
		name, data, err := r.Next()
		if err != nil {
			return out, err
		}
		out = append(out, ev{string(name), string(data)})
	}
}

func TestReader(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     []ev
		err      error
	}{
		{"lf", "data: a\n\ndata: b\n\n", []ev{{"", "a"}, {"", "b"}}, io.EOF},
		{"crlf", "data: a\r\n\r\nevent: x\r\ndata: b\r\n\r\n", []ev{{"", "a"}, {"x", "b"}}, io.EOF},
		{"cr", "data: a\r\rdata: b\r\r", []ev{{"", "a"}, {"", "b"}}, io.EOF},
		{"multiline", "data: a\ndata:b\ndata:  c\n\n", []ev{{"", "a\nb\n c"}}, io.EOF},
		{"comments and ids", ": ping\nid: 7\nretry: 100\nevent: e\ndata: {}\n\n: bye\n\n", []ev{{"e", "{}"}}, io.EOF},
		{"no data is no event", "event: x\n\ndata: y\n\n", []ev{{"", "y"}}, io.EOF},
		{"empty data", "data:\n\n", []ev{{"", ""}}, io.EOF},
		{"field without colon", "data\n\n", []ev{{"", ""}}, io.EOF},
		{"final event without blank line", "data: a\n\ndata: [DONE]\n", []ev{{"", "a"}, {"", "[DONE]"}}, io.EOF},
		{"cut mid line", "data: a\n\ndata: {\"x", []ev{{"", "a"}}, io.ErrUnexpectedEOF},
		{"bom", "\xef\xbb\xbfdata: a\n\n", []ev{{"", "a"}}, io.EOF},
		{"empty", "", nil, io.EOF},
		{"only blank lines", "\n\n\r\n", nil, io.EOF},
		{"event name reset", "event: a\ndata: 1\n\ndata: 2\n\n", []ev{{"a", "1"}, {"", "2"}}, io.EOF},
	} {
		for _, slow := range []bool{false, true} {
			var r io.Reader = strings.NewReader(tc.in)
			if slow {
				r = iotest.OneByteReader(r)
			}
			got, err := readAll(NewReader(r, 1024))
			if !errors.Is(err, tc.err) || !equal(got, tc.want) {
				t.Errorf("%s (slow %v): got %v, %v; want %v, %v", tc.name, slow, got, err, tc.want, tc.err)
			}
		}
	}
}

func equal(a, b []ev) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// stagedReader returns its parts one Read each, then io.EOF, counting reads.
type stagedReader struct {
	parts [][]byte
	reads int
}

func (s *stagedReader) Read(p []byte) (int, error) {
	s.reads++
	if len(s.parts) == 0 {
		return 0, io.EOF
	}
	n := copy(p, s.parts[0])
	if s.parts[0] = s.parts[0][n:]; len(s.parts[0]) == 0 {
		s.parts = s.parts[1:]
	}
	return n, nil
}

func TestReady(t *testing.T) {
	// what Ready says once the first event was read, with everything
	// arrived in one read and the stream still open
	for _, tc := range []struct {
		name, in string
		ready    bool
	}{
		{"next event whole", "data: a\n\ndata: b\n\n", true},
		{"crlf", "data: a\r\n\r\nevent: x\r\ndata: b\r\n\r\n", true},
		{"cr", "data: a\r\rdata: b\r\r", true},
		{"field without colon", "data: a\n\ndata\n\n", true},
		{"next event without its blank line", "data: a\n\ndata: b\n", false},
		{"next event cut", "data: a\n\ndata: b", false},
		{"only a comment", "data: a\n\n: ping\n\n", false},
		{"no data line", "data: a\n\nevent: x\nid: 3\n\n", false},
		{"a field that is not data", "data: a\n\ndatum: b\n\n", false},
		{"nothing more", "data: a\n\n", false},
	} {
		r := NewReader(&stagedReader{parts: [][]byte{[]byte(tc.in)}}, 1024)
		if _, _, err := r.Next(); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got := r.Ready(); got != tc.ready {
			t.Errorf("%s: Ready() = %v, want %v", tc.name, got, tc.ready)
		}
	}

	// Whenever Ready says true, Next reads nothing: every input of
	// TestReader's kind, cut into two reads at every byte.
	inputs := []string{
		"data: a\n\ndata: b\n\n", "data: a\r\n\r\nevent: x\r\ndata: b\r\n\r\n", "data: a\r\rdata: b\r\r",
		": ping\nid: 7\nretry: 100\nevent: e\ndata: {}\n\n: bye\n\n", "event: x\n\ndata: y\n\n", "data:\n\n", "data\n\n",
		"data: a\n\ndata: [DONE]\n", "data: a\n\ndata: {\"x", "\xef\xbb\xbfdata: a\n\n", "\n\n\r\n", "data: a\r\n\r\n\r\ndata: b\r\n\r\n",
	}
	for _, in := range inputs {
		for cut := 0; cut <= len(in); cut++ {
			checkReady(t, in, cut)
		}
	}
}

// checkReady reads in, arriving in two reads cut at cut, and fails when
// Ready says true and the Next after it reads from the stream, or when
// asking Ready changes what Next returns.
func checkReady(t testing.TB, in string, cut int) {
	t.Helper()
	src := &stagedReader{parts: [][]byte{[]byte(in[:cut]), []byte(in[cut:])}}
	r := NewReader(src, 64)
	var got []ev
	for {
		ready, before := r.Ready(), src.reads
		name, data, err := r.Next()
		if ready && src.reads != before {
			t.Fatalf("%q cut at %d: Ready said true, then Next read from the stream", in, cut)
		}
		if err != nil {
			want, werr := readAll(NewReader(&stagedReader{parts: [][]byte{[]byte(in[:cut]), []byte(in[cut:])}}, 64))
			if !equal(got, want) || !errors.Is(err, werr) {
				t.Fatalf("%q cut at %d: with Ready %v, %v; without %v, %v", in, cut, got, err, want, werr)
			}
			return
		}
		got = append(got, ev{string(name), string(data)})
	}
}

// FuzzReady: Ready's promise (Next reads nothing after a true) on any
// stream, arriving in two reads.
func FuzzReady(f *testing.F) {
	for _, in := range []string{"data: a\n\ndata: b\n\n", "data: a\r\rdata\r\n\r\n: c\n\n", "event: x\n\ndata: y\n\n"} {
		f.Add(in, uint16(len(in)/2))
	}
	f.Fuzz(func(t *testing.T, in string, cut uint16) {
		checkReady(t, in, int(cut)%(len(in)+1))
	})
}

func TestReaderBound(t *testing.T) {
	// one long line
	r := NewReader(strings.NewReader("data: "+strings.Repeat("x", 5000)+"\n\n"), 1000)
	if _, _, err := r.Next(); !errors.Is(err, ErrEventTooLarge) {
		t.Fatalf("long line: %v", err)
	}
	// many short lines in one event
	r = NewReader(strings.NewReader(strings.Repeat("data: xxxxxxxxx\n", 200)+"\n"), 1000)
	if _, _, err := r.Next(); !errors.Is(err, ErrEventTooLarge) {
		t.Fatalf("many lines: %v", err)
	}
	// sticky
	if _, _, err := r.Next(); !errors.Is(err, ErrEventTooLarge) {
		t.Fatalf("not sticky: %v", err)
	}
	// events just under the bound pass, one after another
	in := strings.Repeat("data: "+strings.Repeat("y", 900)+"\n\n", 10)
	got, err := readAll(NewReader(iotest.HalfReader(strings.NewReader(in)), 1000))
	if err != io.EOF || len(got) != 10 {
		t.Fatalf("under bound: %d events, %v", len(got), err)
	}
}

func TestReaderError(t *testing.T) {
	boom := errors.New("boom")
	r := NewReader(io.MultiReader(strings.NewReader("data: a\n\ndata: b"), iotest.ErrReader(boom)), 100)
	if _, d, err := r.Next(); err != nil || string(d) != "a" {
		t.Fatalf("first: %q %v", d, err)
	}
	if _, _, err := r.Next(); !errors.Is(err, boom) {
		t.Fatalf("second: %v", err)
	}
}

func TestWriters(t *testing.T) {
	if got := string(AppendData([]byte("x"), []byte(`{"a":1}`))); got != "x"+"data: {\"a\":1}\n\n" {
		t.Errorf("AppendData = %q", got)
	}
	if got := string(AppendEvent(nil, "message_stop", []byte(`{}`))); got != "event: message_stop\ndata: {}\n\n" {
		t.Errorf("AppendEvent = %q", got)
	}
	// a line break in data round-trips through the reader
	b := AppendEvent(nil, "e", []byte("a\nb\r\nc"))
	name, data, err := NewReader(strings.NewReader(string(b)), 100).Next()
	if err != nil || string(name) != "e" || string(data) != "a\nb\nc" {
		t.Errorf("round trip: %q %q %v", name, data, err)
	}
}

func BenchmarkReader(b *testing.B) {
	chunk := "data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1735689600,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hel\"},\"logprobs\":null,\"finish_reason\":null}],\"usage\":null}\n\n"
	in := strings.Repeat(chunk, 100)
	sr := strings.NewReader(in)
	b.ReportAllocs()
	b.SetBytes(int64(len(in)))
	for b.Loop() {
		sr.Reset(in)
		r := NewReader(sr, 1<<20)
		for {
			if _, _, err := r.Next(); err != nil {
				break
			}
		}
	}
}
