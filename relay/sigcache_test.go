package relay

import (
	"strconv"
	"testing"
	"time"
)

func TestSignatureCache(t *testing.T) {
	c := NewSignatureCache(3, time.Hour)
	for i := range 5 {
		c.Put("call_"+strconv.Itoa(i), "sig"+strconv.Itoa(i))
	}
	for i := range 5 {
		sig, ok := c.Get("call_" + strconv.Itoa(i))
		if want := i >= 2; ok != want || (ok && sig != "sig"+strconv.Itoa(i)) {
			t.Errorf("call_%d: %q %v", i, sig, ok)
		}
	}
	if len(c.items) != 3 {
		t.Fatalf("%d items, want the bound of 3", len(c.items))
	}
	c.Put("call_4", "again") // an update does not grow the cache
	if sig, _ := c.Get("call_4"); sig != "again" || len(c.items) != 3 {
		t.Fatalf("update: %q, %d items", sig, len(c.items))
	}
	old := NewSignatureCache(10, -time.Second)
	old.Put("x", "y")
	if _, ok := old.Get("x"); ok {
		t.Fatal("an expired signature was returned")
	}
}
