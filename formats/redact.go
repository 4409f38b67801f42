package formats

import "strings"

// secretPrefixes start tokens that are keys or account, project and request
// ids of upstream vendors.
var secretPrefixes = [...]string{
	"sk-", "sk_", "pk-", "rk-", "rk_", "org-", "org_", "proj_", "proj-", "req_", "req-",
	"user-", "acct_", "acct-", "key-", "key_", "AIza", "ya29.", "gsk_", "xai-",
}

// Redact replaces anything that looks like a key or an upstream account,
// organisation, project or request id with "[redacted]", and caps the
// message's length.
func Redact(s string) string {
	if len(s) > 2000 {
		s = s[:2000] + "…"
	}
	var b []byte
	last := 0
	for i := 0; i < len(s); {
		if !tokenByte(s[i]) {
			i++
			continue
		}
		j := i
		for j < len(s) && tokenByte(s[j]) {
			j++
		}
		k := j // a sentence's full stop is not part of the word
		for k > i && s[k-1] == '.' {
			k--
		}
		if secretToken(s[i:k]) {
			if b == nil {
				b = make([]byte, 0, len(s))
			}
			b = append(b, s[last:i]...)
			b = append(b, "[redacted]"...)
			last = k
		}
		i = j
	}
	if b == nil {
		return s
	}
	return string(append(b, s[last:]...))
}

// randomish reports a word with a digit, an upper-case letter or a mask:
// an id rather than an English word ("user-friendly").
func randomish(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c >= '0' && c <= '9' || c >= 'A' && c <= 'Z' || c == '*' {
			return true
		}
	}
	return false
}

func tokenByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '*' || c == '.'
}

// secretToken reports a word that is a key or an id.
func secretToken(t string) bool {
	if len(t) < 6 {
		return false
	}
	for _, p := range secretPrefixes {
		if rest, ok := strings.CutPrefix(t, p); ok && len(rest) >= 4 && randomish(rest) {
			return true
		}
	}
	if strings.Contains(t, "***") {
		return true // a masked key
	}
	// long random-looking words: letters and digits mixed
	if len(t) >= 32 {
		var letters, digits bool
		for i := 0; i < len(t); i++ {
			switch c := t[i]; {
			case c >= '0' && c <= '9':
				digits = true
			case c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z':
				letters = true
			}
		}
		return letters && digits
	}
	return false
}
