package passwords

import (
	"strings"
	"testing"
)

func TestHashVerify(t *testing.T) {
	h, err := Hash("correct horse battery staple")
	if err != nil || !strings.HasPrefix(h, "$argon2id$v=19$m=65536,t=3,p=2$") {
		t.Fatalf("%q %v", h, err)
	}
	if h2, _ := Hash("correct horse battery staple"); h2 == h {
		t.Fatal("two hashes of one password are equal: no salt")
	}
	for pw, want := range map[string]bool{"correct horse battery staple": true, "correct horse battery stapl": false, "": false} {
		if ok, err := Verify(pw, h); ok != want || err != nil {
			t.Errorf("Verify(%q) = %v, %v", pw, ok, err)
		}
	}
	for _, bad := range []string{"", "plain", "$argon2i$v=19$m=65536,t=3,p=2$c2FsdHNhbHQ$aGFzaGhhc2hoYXNoaGFzaA",
		"$argon2id$v=19$m=0,t=3,p=2$c2FsdHNhbHQ$aGFzaGhhc2hoYXNoaGFzaA", "$argon2id$v=19$m=99999999,t=3,p=2$c2FsdHNhbHQ$aGFzaGhhc2hoYXNoaGFzaA",
		strings.Replace(h, "$v=19$", "$v=16$", 1)} {
		if _, err := Verify("x", bad); err != ErrMalformed {
			t.Errorf("Verify(%q): %v", bad, err)
		}
	}
	if Check("short") == nil || Check(strings.Repeat("x", MaxLength+1)) == nil || Check("long enough pw") != nil {
		t.Error("Check")
	}
}
