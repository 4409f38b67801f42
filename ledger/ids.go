package ledger

import (
	"crypto/rand"
	"fmt"
)

const base62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

// KeyPrefix starts every API key.
const KeyPrefix = "mg-"

// keyRandomLen is the number of random base62 characters in a new key (≈256 bits).
const keyRandomLen = 43

// randomBase62 returns n characters drawn uniformly from base62 using
// crypto/rand. Bytes ≥ 248 (= 4·62) are rejected so that b%62 is unbiased.
func randomBase62(n int) (string, error) {
	out := make([]byte, 0, n)
	var buf [64]byte
	for len(out) < n {
		if _, err := rand.Read(buf[:]); err != nil {
			return "", fmt.Errorf("ledger: random: %w", err)
		}
		for _, b := range buf {
			if b >= 248 {
				continue
			}
			out = append(out, base62[b%62])
			if len(out) == n {
				break
			}
		}
	}
	return string(out), nil
}

// newID returns prefix followed by 16 random base62 characters.
func newID(prefix string) (string, error) {
	r, err := randomBase62(16)
	if err != nil {
		return "", err
	}
	return prefix + r, nil
}

// newSecret returns a fresh API key: "mg-" + 43 random base62 characters.
func newSecret() (string, error) {
	r, err := randomBase62(keyRandomLen)
	if err != nil {
		return "", err
	}
	return KeyPrefix + r, nil
}

// displayPrefix is the shown form of a key: "mg-" + 4 chars + "…" + last 4 chars.
func displayPrefix(secret string) string {
	return KeyPrefix + secret[3:7] + "…" + secret[len(secret)-4:]
}

// isBase62 reports whether c is one of [0-9A-Za-z].
func isBase62(c byte) bool {
	return ('0' <= c && c <= '9') || ('A' <= c && c <= 'Z') || ('a' <= c && c <= 'z')
}

// WellFormedKey reports whether secret has the shape of an API key:
// "mg-" followed by at least 40 base62 characters, at most 200 bytes in all.
func WellFormedKey(secret string) bool {
	if len(secret) < len(KeyPrefix)+40 || len(secret) > 200 || secret[:len(KeyPrefix)] != KeyPrefix {
		return false
	}
	for i := len(KeyPrefix); i < len(secret); i++ {
		if !isBase62(secret[i]) {
			return false
		}
	}
	return true
}
