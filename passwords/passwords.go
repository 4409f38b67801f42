// Package passwords hashes console passwords with Argon2id (RFC 9106, the
// x/crypto implementation) and stores them in the PHC string format:
// $argon2id$v=19$m=<KiB>,t=<passes>,p=<lanes>$<salt>$<hash>, base64 without
// padding. The parameters travel with each hash, so raising them later
// leaves existing hashes verifiable.
package passwords

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"

	"golang.org/x/crypto/argon2"
)

// The parameters of new hashes: RFC 9106's second recommended option
// (64 MiB, 3 passes), with 2 lanes.
const (
	memoryKiB = 64 << 10
	passes    = 3
	lanes     = 2
	saltLen   = 16
	keyLen    = 32
)

// Limits of a password.
const (
	MinLength = 10
	MaxLength = 1024
)

// ErrMalformed is returned for a stored hash that is not an Argon2id PHC string.
var ErrMalformed = errors.New("passwords: malformed hash")

// Hash returns the PHC string of password under a fresh random salt.
func Hash(password string) (string, error) {
	salt := make([]byte, saltLen)
	if _, err := rand.Read(salt); err != nil {
		return "", err
	}
	key := argon2.IDKey([]byte(password), salt, passes, memoryKiB, lanes, keyLen)
	enc := base64.RawStdEncoding
	return fmt.Sprintf("$argon2id$v=%d$m=%d,t=%d,p=%d$%s$%s", argon2.Version, memoryKiB, passes, lanes,
		enc.EncodeToString(salt), enc.EncodeToString(key)), nil
}

// Verify reports whether password matches the PHC string encoded, in
// constant time.
func Verify(password, encoded string) (bool, error) {
	parts := strings.Split(encoded, "$")
	if len(parts) != 6 || parts[0] != "" || parts[1] != "argon2id" {
		return false, ErrMalformed
	}
	var version int
	var memory, time uint32
	var threads uint8
	if _, err := fmt.Sscanf(parts[2], "v=%d", &version); err != nil || version != argon2.Version {
		return false, ErrMalformed
	}
	if _, err := fmt.Sscanf(parts[3], "m=%d,t=%d,p=%d", &memory, &time, &threads); err != nil ||
		memory == 0 || memory > 1<<22 || time == 0 || time > 64 || threads == 0 {
		return false, ErrMalformed
	}
	enc := base64.RawStdEncoding
	salt, err := enc.DecodeString(parts[4])
	if err != nil || len(salt) < 8 {
		return false, ErrMalformed
	}
	want, err := enc.DecodeString(parts[5])
	if err != nil || len(want) < 16 || len(want) > 128 {
		return false, ErrMalformed
	}
	got := argon2.IDKey([]byte(password), salt, time, memory, threads, uint32(len(want))) //nolint:gosec // len(want) is 16 to 128, checked above
	return subtle.ConstantTimeCompare(got, want) == 1, nil
}

// Check refuses a password too short or too long to be used.
func Check(password string) error {
	switch n := len([]rune(password)); {
	case n < MinLength:
		return fmt.Errorf("a password needs at least %d characters", MinLength)
	case len(password) > MaxLength:
		return fmt.Errorf("a password may have at most %d bytes", MaxLength)
	}
	return nil
}
