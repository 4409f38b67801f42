package formats

import "crypto/rand"

const base62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

// NewID returns prefix followed by 24 random base62 characters (about 143
// bits), e.g. NewID("chatcmpl-").
func NewID(prefix string) string {
	var raw [24]byte
	_, _ = rand.Read(raw[:]) // never fails (crypto/rand panics instead)
	b := make([]byte, len(prefix)+len(raw))
	n := copy(b, prefix)
	for i, c := range raw {
		b[n+i] = base62[int(c)%len(base62)]
	}
	return string(b)
}
