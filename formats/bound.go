package formats

// Token bounds. Before an upstream call the gateway holds funds for an upper
// bound of the input tokens. The bound must never be below what
// any upstream tokenizer counts, for any model the request may be routed to,
// so it is computed from bytes: every tokenizer the gateway meets (byte-level
// BPE at OpenAI and Anthropic, SentencePiece with byte fallback at Google)
// yields at most one token per UTF-8 byte of text. Per-message, per-tool and
// per-request allowances cover the vendors' own framing tokens, and media get
// a fixed bound because their token cost does not follow their byte size.
const (
	// BaseTokens covers per-request framing (OpenAI adds 3 tokens to prime
	// the reply; Anthropic and Gemini add a few).
	BaseTokens = 64
	// MessageTokens covers one message's framing (role markers, separators;
	// OpenAI counts 3–4, Anthropic a few).
	MessageTokens = 16
	// ToolTokens covers one tool definition's framing beyond the bytes of
	// its JSON (OpenAI renders tools as a TypeScript namespace, which is
	// shorter than the JSON but adds a few tokens per tool).
	ToolTokens = 32
	// ToolsOverheadTokens is added once when a request offers tools:
	// Anthropic prepends a tool-use system prompt of up to 346 tokens
	// (documented for Claude 3.5 to 4.x), others a few tokens.
	ToolsOverheadTokens = 512
	// ImageTokens bounds one image. It is generous on purpose: OpenAI
	// charges gpt-4o-mini images at 2,833 tokens base + 5,667 per 512-px
	// tile, and a high-detail image has up to 8 tiles (2048×768 after
	// scaling), so 48,169 tokens; every other model seen costs far less
	// (gpt-4o ≤ 1,445; patch-based gpt-4.1/o4/gpt-5 models ≤ ~3,800;
	// Claude ≤ ~4,800; Gemini ≤ ~2,300). A caller that knows the routed
	// model may pass a smaller per-image bound to InputSize.Bound.
	ImageTokens = 49152
	// FileTokens is the fixed part of a document's bound (PDF pages are
	// also rendered as images by OpenAI and Anthropic); the bytes of its
	// data are added on top. A pathological PDF (hundreds of near-empty
	// pages) can exceed it: the row is then marked over_hold.
	FileTokens = 65536
	// AudioTokens is the fixed part of an audio clip's bound; the bytes of
	// its data are added (audio costs ~10 tokens a second, far below its
	// byte size).
	AudioTokens = 1024

	// estImageTokens is a typical image (gpt-4o high detail, 1024×1024),
	// for estimates only.
	estImageTokens = 765
	// estFileTokens is a typical short document, for estimates only.
	estFileTokens = 1500
)

// InputSize is what a request's input bound is computed from. Each vendor
// parser fills one while it validates the request.
type InputSize struct {
	// TextBytes is the UTF-8 bytes of all text: system and message
	// content, names, tool-call arguments, tool definitions, schemas. A
	// parser may count escaped JSON bytes instead: never fewer.
	TextBytes int64
	// Messages counts messages (system ones included).
	Messages int64
	// Tools counts tool definitions.
	Tools int64
	// Images counts images; Files documents; Audio clips.
	Images, Files, Audio int64
	// MediaBytes is the size of the documents' and audio clips' data.
	MediaBytes int64
}

// Bound is a generous upper bound of the input tokens for any tokenizer,
// with imageTokens per image (ImageTokens when <= 0).
func (s InputSize) Bound(imageTokens int64) int64 {
	if imageTokens <= 0 {
		imageTokens = ImageTokens
	}
	n := BaseTokens + s.TextBytes + s.Messages*MessageTokens +
		s.Images*imageTokens + s.Files*FileTokens + s.Audio*AudioTokens + s.MediaBytes
	if s.Tools > 0 {
		n += ToolsOverheadTokens + s.Tools*ToolTokens
	}
	return n
}

// Estimate is a plausible input token count for when the upstream reported
// none (usage_source=estimated).
func (s InputSize) Estimate() int64 {
	return EstimateTokens(s.TextBytes) + 3 + s.Messages*4 + s.Tools*8 +
		s.Images*estImageTokens + s.Files*estFileTokens + EstimateTokens(s.MediaBytes/8)
}

// EstimateTokens estimates the tokens of n bytes of text as ceil(n/4), the
// usual rule of thumb for English with BPE tokenizers. It serves only rows
// marked usage_source=estimated (the upstream reported no usage); a real
// tokenizer arrives with count_tokens.
func EstimateTokens(n int64) int64 {
	if n <= 0 {
		return 0
	}
	return (n + 3) / 4
}
