package relay

import (
	"sync"
	"time"
)

// Limits of the thought-signature cache.
const (
	SignatureCacheSize = 100_000
	SignatureTTL       = 24 * time.Hour
)

// SignatureCache keeps the Gemini thought signature of each tool call the
// gateway gave to a client that cannot carry it, so that it can be put back
// when the call returns in the conversation's history (docs/translation.md,
// "Thought signatures"). It is bounded: the oldest entries go first, and entries expire.
type SignatureCache struct {
	mu    sync.Mutex
	max   int
	ttl   time.Duration
	items map[string]signatureEntry
	order []string // insertion order, oldest first, for eviction
	head  int
}

type signatureEntry struct {
	sig     string
	expires time.Time
}

// NewSignatureCache returns a cache of at most max signatures, each kept
// for ttl.
func NewSignatureCache(max int, ttl time.Duration) *SignatureCache {
	return &SignatureCache{max: max, ttl: ttl, items: make(map[string]signatureEntry)}
}

// Put remembers the signature of a call.
func (c *SignatureCache) Put(callID, signature string) {
	if callID == "" || signature == "" {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.items[callID]; !ok {
		if len(c.items) >= c.max {
			c.evictOldest()
		}
		c.order = append(c.order, callID)
	}
	c.items[callID] = signatureEntry{sig: signature, expires: time.Now().Add(c.ttl)}
}

// Get returns the signature of a call, if it is known and fresh.
func (c *SignatureCache) Get(callID string) (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.items[callID]
	if !ok || time.Now().After(e.expires) {
		return "", false
	}
	return e.sig, true
}

// evictOldest drops the oldest entry; c.mu is held.
func (c *SignatureCache) evictOldest() {
	for c.head < len(c.order) {
		id := c.order[c.head]
		c.order[c.head] = ""
		c.head++
		if _, ok := c.items[id]; ok {
			delete(c.items, id)
			break
		}
	}
	if c.head > len(c.order)/2 { // compact the queue now and then
		c.order = append(c.order[:0], c.order[c.head:]...)
		c.head = 0
	}
}

// Destruct implements caddy.Destructor.
func (c *SignatureCache) Destruct() error { return nil }
