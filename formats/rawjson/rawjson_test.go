package rawjson

import (
	"bytes"
	"testing"
	"unicode/utf8"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

func TestFind(t *testing.T) {
	obj := []byte(` { "a" : 1, "b\"c": {"x":[1,"]}",{"y":"\\"}]}, "m\u006fdel":"gpt", "z":"q\"" } `)
	for _, tc := range []struct {
		name, want string
	}{
		{"a", "1"},
		{`b"c`, `{"x":[1,"]}",{"y":"\\"}]}`},
		{"model", `"gpt"`},
		{"z", `"q\""`},
		{"nope", ""},
	} {
		s, e, err := Find(obj, tc.name)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		got := ""
		if s >= 0 {
			got = string(obj[s:e])
		}
		if got != tc.want {
			t.Errorf("Find(%q) = %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestIterErrors(t *testing.T) {
	for _, in := range []string{``, `[]`, `{`, `{"a"}`, `{"a":}`, `{"a":1,}`, `{"a":1 "b":2}`, `{"a":"x}`, `{"a":{"b":1}`, `{,}`, `{1:2}`} {
		it := Object([]byte(in), 0)
		for it.Next() {
		}
		if it.Err() == nil {
			t.Errorf("%q: no error", in)
		}
	}
	it := Object([]byte(`{}`), 0)
	if it.Next() || it.Err() != nil || it.End() != 1 || it.Last() != 1 {
		t.Errorf("empty object: next/err/end/last wrong")
	}
}

func TestSetDelete(t *testing.T) {
	for _, tc := range []struct {
		op, in, name, val, want string
	}{
		{"set", `{"a":1,"b":2}`, "a", `"x"`, `{"a":"x","b":2}`},
		{"set", `{"a":1,"b":2}`, "c", `true`, `{"a":1,"b":2,"c":true}`},
		{"set", `{ }`, "c", `3`, `{"c":3 }`},
		{"set", `{"a":1 }`, "c", `3`, `{"a":1,"c":3 }`},
		{"del", `{"a":1,"b":2,"c":3}`, "a", ``, `{"b":2,"c":3}`},
		{"del", `{"a":1,"b":2,"c":3}`, "b", ``, `{"a":1,"c":3}`},
		{"del", `{"a":1,"b":2,"c":3}`, "c", ``, `{"a":1,"b":2}`},
		{"del", `{"a":1}`, "a", ``, `{}`},
		{"del", `{ "a" : 1 , "b" : 2 }`, "a", ``, `{ "b" : 2 }`},
		{"del", `{"a":1}`, "x", ``, `{"a":1}`},
	} {
		var out []byte
		var err error
		if tc.op == "set" {
			out, err = Set(nil, []byte(tc.in), tc.name, []byte(tc.val))
		} else {
			out, err = Delete(nil, []byte(tc.in), tc.name)
		}
		if err != nil || string(out) != tc.want {
			t.Errorf("%s(%s, %s) = %s, %v; want %s", tc.op, tc.in, tc.name, out, err, tc.want)
		}
	}
}

func TestUnquotedLen(t *testing.T) {
	for _, s := range []string{"", "abc", "é", "日本", "😀", "a\nb\t\"\\/", "\u2028", "x\x00y"} {
		q, _ := json.Marshal(s)
		if got := UnquotedLen(q); got != len(s) {
			t.Errorf("UnquotedLen(%s) = %d, want %d", q, got, len(s))
		}
		// the \u-escaped form too
		var esc []byte
		esc = append(esc, '"')
		for _, r := range s {
			if r > 0xFFFF {
				r1, r2 := 0xD800+((r-0x10000)>>10), 0xDC00+((r-0x10000)&0x3FF)
				esc = appendU(appendU(esc, r1), r2)
				continue
			}
			esc = appendU(esc, r)
		}
		esc = append(esc, '"')
		if got := UnquotedLen(esc); got != len(s) {
			t.Errorf("UnquotedLen(%s) = %d, want %d", esc, got, len(s))
		}
	}
}

func appendU(b []byte, r rune) []byte {
	const hex = "0123456789abcdef"
	return append(b, '\\', 'u', hex[r>>12&15], hex[r>>8&15], hex[r>>4&15], hex[r&15])
}

func TestParseInt(t *testing.T) {
	for in, want := range map[string]int64{"0": 0, "-5": -5, "123456789012": 123456789012, "1e3": 1000, "5.0": 5} {
		if n, ok := ParseInt([]byte(in)); !ok || n != want {
			t.Errorf("ParseInt(%s) = %d, %v", in, n, ok)
		}
	}
	for _, in := range []string{"1.5", "", "x", "1e400"} {
		if _, ok := ParseInt([]byte(in)); ok {
			t.Errorf("ParseInt(%s) ok", in)
		}
	}
}

func TestAppendQuote(t *testing.T) {
	for _, s := range []string{"plain", "q\"b\\", "ctl\x01", "é", "bad\xff"} {
		q := AppendQuote(nil, s)
		if !jsontext.Value(q).IsValid() {
			t.Errorf("AppendQuote(%q) = %s: invalid", s, q)
		}
	}
}

// FuzzEdit checks, on any valid JSON object, that Find agrees with the JSON
// decoder and that Set and Delete keep the object valid with the expected
// members.
func FuzzEdit(f *testing.F) {
	for _, s := range []string{
		`{}`, `{"a":1}`, `{"model":"x","messages":[{"role":"user","content":"hi \"there\" }"}],"stream":true}`,
		` { "a" : [ 1 , { "b" : "}" } ] , "c\u0041" : null } `, `{"k":"\\","l":"\\\"","m":{"n":{"o":[[[]]]}}}`,
		`{"a":-1.5e+3,"b":true,"c":false,"d":"😀\ud83d\ude00"}`,
	} {
		f.Add([]byte(s), "a", []byte(`"v"`))
		f.Add([]byte(s), "model", []byte(`{"x":[1,2]}`))
	}
	f.Fuzz(func(t *testing.T, obj []byte, name string, val []byte) {
		if !jsontext.Value(obj).IsValid() || jsontext.Value(obj).Kind() != '{' || !utf8.ValidString(name) {
			return
		}
		var m map[string]jsontext.Value
		if err := json.Unmarshal(obj, &m); err != nil {
			return
		}
		// Find agrees with the decoder for every member
		for k, v := range m {
			s, e, err := Find(obj, k)
			if err != nil || s < 0 {
				t.Fatalf("Find(%q) in %s: %d %v", k, obj, s, err)
			}
			if !bytes.Equal(obj[s:e], v) {
				t.Fatalf("Find(%q) = %s, want %s", k, obj[s:e], v)
			}
		}
		// Delete
		out, err := Delete(nil, obj, name)
		if err != nil {
			t.Fatalf("Delete: %v", err)
		}
		var after map[string]jsontext.Value
		if err := json.Unmarshal(out, &after); err != nil {
			t.Fatalf("Delete(%s, %q) = %s: %v", obj, name, out, err)
		}
		if _, ok := after[name]; ok || len(after) != len(m)-b2i(m[name] != nil) {
			t.Fatalf("Delete(%s, %q) = %s", obj, name, out)
		}
		// Set, with a valid value
		if !jsontext.Value(val).IsValid() {
			return
		}
		out, err = Set(nil, obj, name, val)
		if err != nil {
			t.Fatalf("Set: %v", err)
		}
		after = nil
		if err := json.Unmarshal(out, &after); err != nil {
			t.Fatalf("Set(%s, %q, %s) = %s: %v", obj, name, val, out, err)
		}
		if !bytes.Equal(after[name], jsontext.Value(bytes.TrimSpace(val))) || len(after) != len(m)+b2i(m[name] == nil) {
			t.Fatalf("Set(%s, %q, %s) = %s", obj, name, val, out)
		}
	})
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

func BenchmarkFind(b *testing.B) {
	obj := []byte(`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1735689600,"model":"m","choices":[{"index":0,"delta":{"content":"Hel"},"logprobs":null,"finish_reason":null}],"usage":null}`)
	b.ReportAllocs()
	for b.Loop() {
		if s, _, _ := Find(obj, "usage"); s < 0 {
			b.Fatal("not found")
		}
	}
}

func TestNextLazy(t *testing.T) {
	obj := []byte(` {"a": [1, {"b": "]"}], "c" : {"d":[]} , "e":"x", "f": 2 } `)
	var want []string
	it := Object(obj, 0)
	for it.Next() {
		want = append(want, string(it.Value()))
	}
	for _, mode := range []string{"skip", "setend", "value"} {
		var got []string
		it := Object(obj, 0)
		for it.NextLazy() {
			switch v := it.Start(); {
			case mode == "setend" && (obj[v] == '[' || obj[v] == '{'):
				child := Object(obj, v)
				if obj[v] == '[' {
					child = Array(obj, v)
				}
				for child.Next() {
				}
				it.SetEnd(child.End() + 1)
				got = append(got, string(obj[v:it.Member().ValueEnd]))
			case mode == "value":
				got = append(got, string(it.Value()))
			default:
				got = append(got, "?")
			}
		}
		if it.Err() != nil || it.Len() != 4 {
			t.Fatalf("%s: err %v len %d", mode, it.Err(), it.Len())
		}
		for i := range got {
			if got[i] != "?" && got[i] != want[i] {
				t.Errorf("%s: member %d = %s, want %s", mode, i, got[i], want[i])
			}
		}
	}
}
