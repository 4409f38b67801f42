package gemini

import "strings"

// Function names (docs/translation.md, "Tool names"). Gemini allows letters,
// digits, '_', '.', ':' and '-', starting with a letter or '_', up to 128
// characters; OpenAI and Anthropic allow ^[a-zA-Z0-9_-]{1,64}$. A name that
// does not fit the side it goes to is mapped reversibly, and without any stored
// state, to mappedPrefix + an escaped form whose alphabet, [A-Za-z0-9_-], suits
// both sides:
//
//	'-' → "--"   '.' → "-d"   ':' → "-c"   any other byte → "-xHH"
//
// Every name that starts with mappedPrefix is mapped too, so that decoding
// (strip the prefix, unescape) applies exactly to the names that were
// encoded. Examples: "1tool" → "_mg_1tool" toward Gemini; "files.read" →
// "_mg_files-dread" toward OpenAI/Anthropic.
const mappedPrefix = "_mg_"

// geminiName reports a valid Gemini function name.
func geminiName[S ~string | ~[]byte](s S) bool {
	if len(s) == 0 || len(s) > 128 {
		return false
	}
	if c := s[0]; !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_') {
		return false
	}
	for i := 1; i < len(s); i++ {
		if c := s[i]; !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == ':' || c == '-') {
			return false
		}
	}
	return true
}

// safeName reports a name in the OpenAI/Anthropic intersection
// ^[a-zA-Z0-9_-]{1,64}$.
func safeName(s string) bool {
	if len(s) == 0 || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

const hexDigits = "0123456789ABCDEF"

func escapeName(s string) string {
	var b strings.Builder
	b.Grow(len(mappedPrefix) + len(s) + 8)
	b.WriteString(mappedPrefix)
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '-':
			b.WriteString("--")
		case c == '.':
			b.WriteString("-d")
		case c == ':':
			b.WriteString("-c")
		case c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_':
			b.WriteByte(c)
		default:
			b.WriteString("-x")
			b.WriteByte(hexDigits[c>>4])
			b.WriteByte(hexDigits[c&15])
		}
	}
	return b.String()
}

// unescapeName decodes a mapped name; any other name is returned as is.
func unescapeName(s string) string {
	rest, ok := strings.CutPrefix(s, mappedPrefix)
	if !ok {
		return s
	}
	b := make([]byte, 0, len(rest))
	for i := 0; i < len(rest); i++ {
		c := rest[i]
		if c != '-' || i+1 >= len(rest) {
			b = append(b, c)
			continue
		}
		switch rest[i+1] {
		case '-':
			b = append(b, '-')
			i++
		case 'd':
			b = append(b, '.')
			i++
		case 'c':
			b = append(b, ':')
			i++
		case 'x':
			if i+3 < len(rest) {
				hi, lo := unhex(rest[i+2]), unhex(rest[i+3])
				if hi >= 0 && lo >= 0 {
					b = append(b, byte(hi<<4|lo)) //nolint:gosec // two hex digits, at most 255
					i += 3
					continue
				}
			}
			b = append(b, c)
		default:
			b = append(b, c)
		}
	}
	return string(b)
}

func unhex(c byte) int {
	switch {
	case c >= '0' && c <= '9':
		return int(c - '0')
	case c >= 'A' && c <= 'F':
		return int(c - 'A' + 10)
	case c >= 'a' && c <= 'f':
		return int(c - 'a' + 10)
	}
	return -1
}

// toGemini maps a name from another format for a Gemini upstream. ok is
// false when even the mapped name is too long for Gemini.
func toGemini(s string) (string, bool) {
	if geminiName(s) && !strings.HasPrefix(s, mappedPrefix) {
		return s, true
	}
	m := escapeName(s)
	return m, len(m) <= 128
}

// toSafe maps a Gemini client's name for an OpenAI or Anthropic upstream.
// ok is false when the mapped name is longer than 64 characters.
func toSafe(s string) (string, bool) {
	if safeName(s) && !strings.HasPrefix(s, mappedPrefix) {
		return s, true
	}
	m := escapeName(s)
	return m, len(m) <= 64
}
