package formats

// Wire is a wire format the gateway speaks, to its clients or to its
// upstreams: the key of the codec table.
type Wire uint8

// The wire formats.
const (
	WireChat      Wire = iota // OpenAI Chat Completions
	WireMessages              // Anthropic Messages
	WireGenerate              // Gemini generateContent
	WireResponses             // OpenAI Responses
	WireImages                // OpenAI Images (generations and edits)
	wireCount
)

// wireNames name the wire formats in usage rows and logs.
var wireNames = [wireCount]string{
	WireChat:      "openai.chat",
	WireMessages:  "anthropic",
	WireGenerate:  "gemini",
	WireResponses: "openai.responses",
	WireImages:    "openai.images",
}

// String names the wire format in usage rows and logs; a value outside the
// table is named as Chat Completions, the gateway's default format.
func (w Wire) String() string {
	if w < wireCount {
		return wireNames[w]
	}
	return wireNames[WireChat]
}

// A Codec is what one vendor package gives the gateway for one wire format:
// the client side (read a request, write an answer, a stream, a count and
// an error) and the upstream side (write a request, read an answer, a
// stream, a count and an error). The gateway composes two codecs for a
// call, the client's and the upstream's, and calls them once per request;
// a nil func is a direction the format does not have.
type Codec struct {
	// Provider is the upstream format name (as providers are configured)
	// whose upstreams speak this wire; empty for a wire the gateway reaches
	// only by pass-through (Responses).
	Provider string
	// ToolIDPrefix is how the format's tool call ids start, for ids the
	// gateway makes (docs/translation.md, "Tool call ids and arguments").
	ToolIDPrefix string

	// Parse reads a client's request (by value: the caller keeps what it
	// needs, without one more allocation a request).
	Parse func(body []byte, o ParseOptions) (ClientRequest, *Error)
	// AppendError renders e in the format's error envelope.
	AppendError func(dst []byte, e *Error) []byte
	// ErrorStatus is the HTTP status of e for the format's clients.
	ErrorStatus func(e *Error) int
	// RenderResponse renders a whole IR answer for the client.
	RenderResponse func(dst []byte, resp *Response, o AnswerOptions) []byte
	// NewStreamEncoder writes IR stream events for the client.
	NewStreamEncoder func(o AnswerOptions) StreamEncoder
	// StreamContentType is the Content-Type of a stream to the client.
	StreamContentType func(o AnswerOptions) string
	// AppendCount renders a token count for the client.
	AppendCount func(dst []byte, n int64) []byte

	// Path is the path (after the provider's prefix) and query of a call
	// at an upstream.
	Path func(upstreamModel string, stream, count bool) (path, query string)
	// Rewrite prepares a client's request of this same format for the
	// upstream, byte for byte but for the model and the output cap.
	Rewrite func(dst, body []byte, o RewriteOptions) ([]byte, error)
	// RewriteCount prepares a client's token-count request of this same
	// format for the upstream.
	RewriteCount func(body []byte, upstreamModel string) ([]byte, error)
	// Render writes an IR request for the upstream.
	Render func(ir *Request, upstreamModel string, sigs SignatureStore) ([]byte, *Error)
	// RenderCount writes an IR token-count request for the upstream.
	RenderCount func(ir *Request, upstreamModel string) ([]byte, *Error)
	// PassThrough rewrites a whole upstream answer for a client of the
	// same format and reads its usage (zero when it reported none).
	PassThrough func(dst, body []byte, serviceModel string) ([]byte, Usage, *Error)
	// NewPassThroughStream rewrites an upstream stream for a client of the
	// same format.
	NewPassThroughStream func(o AnswerOptions) StreamTranslator
	// Decode reads a whole upstream answer into the IR.
	Decode func(body []byte, o DecodeOptions) (*Response, *Error)
	// NewStreamDecoder reads upstream stream events into IR events.
	NewStreamDecoder func(o DecodeOptions) StreamDecoder
	// ParseError reads an upstream's error answer.
	ParseError func(status int, body []byte) *Error
	// ParseCount reads an upstream's token-count answer.
	ParseCount func(body []byte) (int64, *Error)
	// AuthHeader and AuthPrefix are where an upstream takes its key.
	AuthHeader, AuthPrefix string
}

// ParseOptions is what a client's request says outside its body: the
// model and the stream switch of a Gemini URL, and whether it is a token
// count.
type ParseOptions struct {
	Model  string
	Stream bool
	Count  bool
}

// ClientRequest is a client's parsed request, whatever its format: what the
// gateway needs to route, hold and forward it.
type ClientRequest struct {
	Model        string
	Stream       bool
	IncludeUsage bool // OpenAI chat: the client wants the usage chunk
	Choices      int
	// MaxTokens is the client's output cap; 0 when it gave none.
	MaxTokens     int
	InputBound    int64
	InputEstimate int64
	// ToIR translates the request into the IR.
	ToIR func() (*Request, *Error)
	// Gated lists the hosted tools and upstream state the request asks for.
	Gated []Gated
	// Own is the vendor's own parsed request, which its answer renderers
	// take back in AnswerOptions.Request (the Responses request).
	Own any
}

// AnswerOptions is what a codec needs of a call to write its answer.
type AnswerOptions struct {
	Model        string // the model name the client sees
	IncludeUsage bool   // OpenAI chat: the client wants the usage chunk
	SSE          bool   // Gemini: SSE framing rather than a JSON array
	Request      any    // the client's ClientRequest.Own
}

// RewriteOptions is what a pass-through rewrite changes.
type RewriteOptions struct {
	UpstreamModel string
	MaxTokens     int
	Stream        bool
}

// DecodeOptions is what a decoder needs beyond the upstream's bytes.
type DecodeOptions struct {
	Signatures   SignatureStore // Gemini thought signatures; nil for none
	ToolIDPrefix string         // how the client's tool call ids start
}

// SignatureStore keeps Gemini thought signatures for clients that cannot
// carry them (docs/translation.md, "Thought signatures"): the decoders Put the
// thoughtSignature of each functionCall under the tool-call id they give
// the client, and the Gemini renderer Gets it back when that id returns
// in the history. The gateway provides a bounded cache with a TTL; nil
// means none. Implementations must be safe for concurrent use.
type SignatureStore interface {
	// Put remembers the signature of the call with the given id.
	Put(callID, signature string)
	// Get returns the signature of the call with the given id.
	Get(callID string) (string, bool)
}

// codecs is the codec table, filled by the vendor packages' init.
var codecs [wireCount]*Codec

// Register enters the codec of a wire format in the table; each vendor
// package registers its own from init. Registering a wire twice is a bug.
func Register(w Wire, c *Codec) {
	if codecs[w] != nil {
		panic("formats: codec of " + w.String() + " registered twice")
	}
	codecs[w] = c
}

// CodecOf is the codec of a wire format; nil when its vendor package is not
// linked in. A wire outside the table is served as Chat Completions, as
// String names it.
func CodecOf(w Wire) *Codec {
	if w < wireCount {
		return codecs[w]
	}
	return codecs[WireChat]
}

// ProviderCodec is the codec of the wire an upstream of the named provider
// format speaks ("openai", "anthropic", "gemini"); nil for another name.
func ProviderCodec(provider string) *Codec {
	for _, c := range codecs {
		if c != nil && c.Provider == provider {
			return c
		}
	}
	return nil
}

// EventStream is the Content-Type of a stream of server-sent events, for
// codecs whose streams are never framed otherwise.
func EventStream(AnswerOptions) string { return "text/event-stream" }

// RenderModel adapts a renderer of a whole answer that needs only the
// client's model name to RenderResponse.
func RenderModel(render func(dst []byte, resp *Response, model string) []byte) func(dst []byte, resp *Response, o AnswerOptions) []byte {
	return func(dst []byte, resp *Response, o AnswerOptions) []byte { return render(dst, resp, o.Model) }
}
