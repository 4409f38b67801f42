package ledger

import (
	"crypto/rand"
	"fmt"
	"time"
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

// NewRequestID returns a unique request id whose lexical order follows
// time: "req_" + 9 base62 digits of the unix time in milliseconds + 12
// random base62 characters (≈71 bits). Time-ordered ids keep the usage
// table's unique index on request_id append-only; random ids would cost
// the writer about one extra page write per debit.
func NewRequestID() string {
	var b [4 + 9 + 12]byte
	copy(b[:], "req_")
	ms := uint64(time.Now().UnixMilli())
	for i := 4 + 8; i >= 4; i-- {
		b[i] = base62[ms%62]
		ms /= 62
	}
	// crypto/rand.Read does not fail (Go ≥ 1.24); randomBase62 only
	// reports errors for the older contract.
	r, err := randomBase62(12)
	if err != nil {
		panic(err)
	}
	copy(b[13:], r)
	return string(b[:])
}
