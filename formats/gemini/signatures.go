package gemini

import "github.com/modelgate/modelgate/formats"

// SignatureStore keeps Gemini thought signatures for clients that cannot
// carry them (docs/translation.md, "Thought signatures"): the decoders Put the
// thoughtSignature of each functionCall under the tool-call id they give
// the client, and RenderGenerateRequest Gets it back when that id returns
// in the history. It is formats.SignatureStore, which the codec table
// passes on.
type SignatureStore = formats.SignatureStore

// PlaceholderSignature is Google's documented thoughtSignature for
// function calls whose real signature is unknown (histories from other
// vendors, cache misses); Gemini 3 accepts it, with possibly lower quality.
const PlaceholderSignature = "skip_thought_signature_validator"
