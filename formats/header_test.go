package formats

import (
	"strconv"
	"strings"
	"testing"
)

func TestHeaderSafe(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"max_output_tokens", "max_output_tokens"},
		{"max_out\x7fut_tokens", "max_out%7Fut_tokens"}, // a DEL, found by fuzzing
		{"a\r\nX-Injected: 1", "a%0D%0AX-Injected:%201"},
		{"\x00\x01\t", "%00%01%09"},
		{"café", "caf%C3%A9"},
		{"a,b", "a%2Cb"},
		{"100%", "100%25"},
		{"\xff\xfe", "%FF%FE"},
		{"", ""},
		{strings.Repeat("x", 64), strings.Repeat("x", 64)},
		{strings.Repeat("x", 65), strings.Repeat("x", 61) + "..."},
		{strings.Repeat("é", 40), strings.Repeat("%C3%A9", 10) + "..."},
		{strings.Repeat("x", 60) + "\x7f", strings.Repeat("x", 60) + "%7F"},
		{strings.Repeat("x", 62) + "\x7f", strings.Repeat("x", 61) + "..."},
	} {
		got := HeaderSafe(tc.in, 64)
		if got != tc.want {
			t.Errorf("HeaderSafe(%q) = %q, want %q", tc.in, got, tc.want)
		}
		if len(got) > 64 || !printableASCII(got) {
			t.Errorf("HeaderSafe(%q) = %q: not a safe header value of at most 64 bytes", tc.in, got)
		}
	}
}

func TestDroppedHeaderValue(t *testing.T) {
	many := func(n int, name func(int) string) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = name(i)
		}
		return out
	}
	long := strings.Repeat("q", 5000)
	for _, tc := range []struct {
		name  string
		names []string
		more  int
		want  string // exact, or a prefix when it ends in "*"
	}{
		{"none", nil, 0, ""},
		{"one", []string{"seed"}, 0, "seed"},
		{"two", []string{"tools.googleSearch", "labels"}, 0, "tools.googleSearch,labels"},
		{"control characters", []string{"a\x7fb", "c\x00"}, 0, "a%7Fb,c%00"},
		{"non-ASCII", []string{"température"}, 0, "temp%C3%A9rature"},
		{"counted only", nil, 7, "+7 more"},
		{"kept and counted", []string{"a", "b"}, 19998, "a,b,+19998 more"},
		{"long names", many(32, func(int) string { return long }), 0, "*"},
		{"huge count", many(32, func(i int) string { return "field_" + strconv.Itoa(i) }), 1 << 40, "field_0,field_1,*"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := DroppedHeaderValue(tc.names, tc.more)
			if w, ok := strings.CutSuffix(tc.want, "*"); ok {
				if !strings.HasPrefix(got, w) {
					t.Errorf("got %q, want it to start %q", got, w)
				}
			} else if got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
			if len(got) > maxDroppedHeader || !printableASCII(got) {
				t.Errorf("%d bytes, %q: not a safe header value of at most %d bytes", len(got), got, maxDroppedHeader)
			}
			// every name is either shown or counted
			shown := 0
			if got != "" {
				shown = strings.Count(got, ",") + 1
			}
			counted := 0
			if i := strings.LastIndex(got, "+"); i >= 0 && strings.HasSuffix(got, " more") {
				shown--
				counted, _ = strconv.Atoi(got[i+1 : len(got)-len(" more")])
			}
			if shown+counted != len(tc.names)+tc.more {
				t.Errorf("%q shows %d and counts %d of %d names", got, shown, counted, len(tc.names)+tc.more)
			}
		})
	}
}

func TestDropKeepsABoundedList(t *testing.T) {
	r := &Request{}
	for i := range 20000 {
		r.Drop("unknown_field_with_a_long_name_" + strconv.Itoa(i))
		r.Drop("unknown_field_with_a_long_name_" + strconv.Itoa(i)) // once
	}
	if len(r.Dropped) != MaxDroppedNames {
		t.Fatalf("%d names kept", len(r.Dropped))
	}
	h := r.DroppedHeader()
	if len(h) > maxDroppedHeader || !strings.HasSuffix(h, " more") {
		t.Fatalf("%d bytes: %.200q", len(h), h)
	}
	if !strings.HasSuffix(h, ",+"+strconv.Itoa(20000-strings.Count(h, ","))+" more") {
		t.Fatalf("count wrong: %q", h[len(h)-40:])
	}
}

// printableASCII reports whether s holds only bytes 0x20..0x7e.
func printableASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return true
}
