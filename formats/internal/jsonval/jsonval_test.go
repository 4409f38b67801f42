package jsonval

import "testing"

func TestReaders(t *testing.T) {
	for _, tc := range []struct {
		in    string
		str   string
		count int64
		len   int
	}{
		{`"a\"b"`, `a"b`, 0, 0},
		{`"plain"`, "plain", 0, 0},
		{`42`, "", 42, 0},
		{`4.0`, "", 4, 0},
		{`4.5`, "", 0, 0},
		{`-1`, "", 0, 0},
		{`"7"`, "7", 0, 0},
		{`[1,[2,3],{"a":4}]`, "", 0, 3},
		{`[]`, "", 0, 0},
		{`[1,2`, "", 0, 2},
		{`null`, "", 0, 0},
		{``, "", 0, 0},
	} {
		v := []byte(tc.in)
		if got := Str(v); got != tc.str {
			t.Errorf("Str(%s) = %q, want %q", tc.in, got, tc.str)
		}
		if got := Count(v); got != tc.count {
			t.Errorf("Count(%s) = %d, want %d", tc.in, got, tc.count)
		}
		got := "old"
		SetStr(&got, v)
		if want := map[bool]string{true: tc.str, false: "old"}[len(v) > 0 && v[0] == '"']; got != want {
			t.Errorf("SetStr(%s) = %q, want %q", tc.in, got, want)
		}
		if got := Len(v); got != tc.len {
			t.Errorf("Len(%s) = %d, want %d", tc.in, got, tc.len)
		}
	}
}
