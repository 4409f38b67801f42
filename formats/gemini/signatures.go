package gemini

// SignatureStore keeps Gemini thought signatures for clients that cannot
// carry them (docs/translation.md, "Thought signatures"): the decoders Put the
// thoughtSignature of each functionCall under the tool-call id they give
// the client, and RenderGenerateRequest Gets it back when that id returns
// in the history. The gateway provides a bounded cache with a TTL; nil
// means none. Implementations must be safe for concurrent use.
type SignatureStore interface {
	// Put remembers the signature of the call with the given id.
	Put(callID, signature string)
	// Get returns the signature of the call with the given id.
	Get(callID string) (string, bool)
}

// PlaceholderSignature is Google's documented thoughtSignature for
// function calls whose real signature is unknown (histories from other
// vendors, cache misses); Gemini 3 accepts it, with possibly lower quality.
const PlaceholderSignature = "skip_thought_signature_validator"
