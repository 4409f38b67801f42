package walk

import (
	"errors"
	"io"
	"strconv"
	"strings"
	"testing"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/modelgate/modelgate/formats"
	"github.com/modelgate/modelgate/formats/rawjson"
)

// testDialect spells out what the readers report.
var testDialect = &Dialect{Missing: testMissing, Type: testType, Range: testRange}

func testMissing(scope, param string) *formats.Error {
	return formats.InvalidRequest(param, scope+" missing "+param)
}

func testType(scope, param string, v []byte, want Want) *formats.Error {
	return formats.InvalidRequest(param, scope+" type "+param+" "+string(v)+" want "+strconv.Itoa(int(want)))
}

func testRange(scope, param string, _ []byte, integer bool, min, max, got float64) *formats.Error {
	return formats.InvalidRequest(param, scope+" range "+param+" "+strconv.FormatBool(integer)+" "+
		strconv.FormatFloat(min, 'g', -1, 64)+" "+strconv.FormatFloat(max, 'g', -1, 64)+" "+strconv.FormatFloat(got, 'g', -1, 64))
}

func TestParam(t *testing.T) {
	raw := []byte("key.x")
	for _, tc := range []struct {
		style      Style
		child      string
		want, bare string
	}{
		{Brackets, "type", "messages[2].content[0][key.x].type", "messages[2].content[0][key.x]"},
		{Dots, "type", "messages.2.content.0.key.x.type", "messages.2.content.0.key.x"},
	} {
		r := New(tc.style, testDialect)
		r.Push("messages")
		r.PushIndex(2)
		r.Push("content")
		r.PushIndex(0)
		r.PushRaw(raw)
		if got := r.Param(tc.child); got != tc.want {
			t.Errorf("style %d: Param = %q, want %q", tc.style, got, tc.want)
		}
		if got := r.Param(""); got != tc.bare {
			t.Errorf("style %d: Param(\"\") = %q, want %q", tc.style, got, tc.bare)
		}
		r.Pop()
		r.Pop()
		if got, want := r.Param("x"), map[Style]string{Brackets: "messages[2].content.x", Dots: "messages.2.content.x"}[tc.style]; got != want {
			t.Errorf("style %d: after Pop, Param = %q, want %q", tc.style, got, want)
		}
		r.Truncate(0)
		if got := r.Param("model"); got != "model" || r.Depth() != 0 {
			t.Errorf("style %d: after Truncate, Param = %q, depth %d", tc.style, got, r.Depth())
		}
	}
}

func TestParamDeep(t *testing.T) {
	r := New(Dots, testDialect)
	for i := 0; i < maxDepth+3; i++ {
		r.PushIndex(i)
	}
	if got, want := r.Param("c"), "0.1.2.3.4.5.6.7.8.9.10.11.c"; got != want {
		t.Errorf("Param = %q, want %q", got, want)
	}
}

// read runs one reader on v and renders its result.
func read(r *Reader, reader, v string) string {
	var b []byte
	if v != "-" {
		b = []byte(v)
	}
	out := func(val string, ok bool, err *formats.Error) string {
		if err != nil {
			return "error: " + err.Message
		}
		if !ok {
			return "absent"
		}
		return val
	}
	switch reader {
	case "OptString":
		ok, err := r.OptString("s", b)
		return out("ok", ok, err)
	case "ReqString":
		err := r.ReqString("s", b)
		return out("ok", true, err)
	case "OptBool":
		val, ok, err := r.OptBool("b", b)
		return out(strconv.FormatBool(val), ok, err)
	case "OptNumber":
		f, ok, err := r.OptNumber("f", b, -2, 2)
		return out(strconv.FormatFloat(f, 'g', -1, 64), ok, err)
	case "OptInt":
		n, ok, err := r.OptInt("n", b, 1, 10)
		return out(strconv.FormatInt(n, 10), ok, err)
	case "Int":
		n, err := r.Int("n", b, 1, 10)
		return out(strconv.FormatInt(n, 10), true, err)
	case "ReqObject":
		err := r.ReqObject("o", b)
		return out("ok", true, err)
	case "OptObject":
		ok, err := r.OptObject("o", b)
		return out("ok", ok, err)
	case "OptArray":
		ok, err := r.OptArray("a", b)
		return out("ok", ok, err)
	}
	panic(reader)
}

func TestReaders(t *testing.T) {
	for _, tc := range []struct {
		reader, v  string
		want, prot string // plain JSON rules; proto3 rules ("=" when the same)
	}{
		{"OptString", "-", "absent", "="},
		{"OptString", "null", "absent", "="},
		{"OptString", `"x"`, "ok", "="},
		{"OptString", `1`, "error: S type p.s 1 want 0", "="},
		{"ReqString", "-", "error: S missing p.s", "="},
		{"ReqString", "null", "error: S type p.s null want 0", "error: S missing p.s"},
		{"ReqString", `""`, "ok", "="},
		{"ReqString", `{}`, "error: S type p.s {} want 0", "="},
		{"OptBool", "-", "absent", "="},
		{"OptBool", "null", "absent", "="},
		{"OptBool", "true", "true", "="},
		{"OptBool", "false", "false", "="},
		{"OptBool", `"true"`, `error: S type p.b "true" want 1`, "="},
		{"OptNumber", "null", "absent", "="},
		{"OptNumber", "1.5", "1.5", "="},
		{"OptNumber", "-2", "-2", "="},
		{"OptNumber", "2.5", "error: S range p.f false -2 2 2.5", "="},
		{"OptNumber", "-3", "error: S range p.f false -2 2 -3", "="},
		{"OptNumber", `"1.5"`, `error: S type p.f "1.5" want 2`, "1.5"},
		{"OptNumber", `"1.5x"`, `error: S type p.f "1.5x" want 2`, "="},
		{"OptNumber", `"0x1"`, `error: S type p.f "0x1" want 2`, "="},
		{"OptInt", "-", "absent", "="},
		{"OptInt", "null", "absent", "="},
		{"OptInt", "7", "7", "="},
		{"OptInt", "7.0", "7", "="},
		{"OptInt", "7.5", "error: S type p.n 7.5 want 3", "="},
		{"OptInt", "0", "error: S range p.n true 1 10 0", "="},
		{"OptInt", "11", "error: S range p.n true 1 10 11", "="},
		{"OptInt", `"7"`, `error: S type p.n "7" want 3`, "7"},
		{"OptInt", `"07"`, `error: S type p.n "07" want 3`, "="},
		{"Int", "null", "error: S type p.n null want 3", "="},
		{"Int", "3", "3", "="},
		{"ReqObject", "-", "error: S missing p.o", "="},
		{"ReqObject", "null", "error: S type p.o null want 4", "error: S missing p.o"},
		{"ReqObject", "{}", "ok", "="},
		{"ReqObject", "1", "error: S type p.o 1 want 4", "="},
		{"OptObject", "null", "absent", "="},
		{"OptObject", "{}", "ok", "="},
		{"OptObject", "[]", "error: S type p.o [] want 4", "="},
		{"OptArray", "-", "absent", "="},
		{"OptArray", "[1]", "ok", "="},
		{"OptArray", `"a"`, `error: S type p.a "a" want 5`, "="},
	} {
		for _, proto := range []bool{false, true} {
			r := New(Brackets, testDialect)
			r.Scope, r.NullMissing, r.QuotedNumbers = "S", proto, proto
			r.Push("p")
			want := tc.want
			if proto && tc.prot != "=" {
				want = tc.prot
			}
			if got := read(&r, tc.reader, tc.v); got != want {
				t.Errorf("%s(%s) proto %v = %q, want %q", tc.reader, tc.v, proto, got, want)
			}
		}
	}
}

func TestSyntax(t *testing.T) {
	for _, tc := range []struct{ body, param string }{
		{`{"messages":[{"role":"user","role":"x"}]}`, "messages[0].role"},
		{`{"a":1} x`, ""},
		{`{"a":`, "a"},
	} {
		err := SyntaxError([]byte(tc.body))
		if err == nil {
			t.Fatalf("SyntaxError(%s) = nil", tc.body)
		}
		var se *jsontext.SyntacticError
		if errors.As(err, &se) {
			if got := PointerParam(se.JSONPointer); got != tc.param {
				t.Errorf("PointerParam of %s = %q, want %q", tc.body, got, tc.param)
			}
		} else if tc.param != "" {
			t.Errorf("SyntaxError(%s) = %v, not a SyntacticError", tc.body, err)
		}
	}
	if err := SyntaxError([]byte(`{"a":[1,2]}`)); !errors.Is(err, io.EOF) {
		t.Errorf("SyntaxError of a valid value = %v, want EOF", err)
	}
}

func TestObjects(t *testing.T) {
	for _, tc := range []struct {
		body string
		want string // the walk, rendered
	}{
		{`{"m":[{"a":1},{"b":2}],"z":0}`, "m[0]@6 m[1]@14 end 2 ok next z"},
		{`{"m":[],"z":0}`, "end 0 ok next z"},
		{`{"m":[{"a":1},7]}`, "m[0]@6 error: S type m[1] 7 want 4"},
		{`{"m":{"a":1}}`, `error: S type m {"a":1} want 5`},
		{`{"m":[{"a":1} {"b":2}]}`, "m[0]@6 end 1 malformed"},
	} {
		b := []byte(tc.body)
		r := New(Brackets, testDialect)
		r.Scope = "S"
		top := rawjson.Object(b, 0)
		top.NextLazy()
		var got []string
		func() {
			it, err := r.Objects(&top, "m")
			if err != nil {
				got = append(got, "error: "+err.Message)
				return
			}
			for r.NextObject(&it) {
				got = append(got, r.Param("")+"@"+strconv.Itoa(it.Start()))
				it.Value() // walks the element (no SetEnd)
			}
			if err := r.ObjectsErr(&it); err != nil {
				got = append(got, "error: "+err.Message)
				return
			}
			n, ok := r.EndObjects(&top, &it)
			got = append(got, "end "+strconv.Itoa(n)+map[bool]string{true: " ok", false: " malformed"}[ok])
			if r.Depth() != 0 {
				got = append(got, "path left at "+r.Param(""))
			}
			if ok && top.Next() {
				got = append(got, "next "+string(top.Member().Name))
			}
		}()
		if s := strings.Join(got, " "); s != tc.want {
			t.Errorf("%s: %s, want %s", tc.body, s, tc.want)
		}
	}
}
