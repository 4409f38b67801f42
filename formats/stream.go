package formats

// A StreamTranslator rewrites an upstream event stream, event by event, into
// the client's format while it meters usage. Same-format traffic uses a
// pass-through translator that still meters; other pairs compose a vendor
// decoder (upstream events to IR events) with an encoder (IR events to client
// events).
//
// The caller feeds each upstream SSE event in order and writes what the
// translator appends to dst to the client at once. When the upstream's
// terminal event arrives, Feed reports done and holds the client's terminal
// bytes back: the caller settles the bill first, then appends them with
// Finish, so that the debit is durable before the last byte is sent.
type StreamTranslator interface {
	// Feed translates one upstream event (its SSE event name, possibly
	// empty, and its data) and appends client bytes to dst. done reports
	// that the upstream's terminal event was seen. A non-nil *Error is an
	// error the upstream reported inside the stream; the caller ends the
	// stream with Fail.
	Feed(dst []byte, event, data []byte) (out []byte, done bool, err *Error)

	// Usage returns the usage the upstream reported so far and whether it
	// is final: the vendor's terminal count (Anthropic's message_delta,
	// OpenAI's usage chunk, the Responses terminal event, Gemini's last
	// chunk), in a stream that reached its terminal event. Before that, u
	// holds only what was reported on the way (Anthropic's message_start
	// input count and its placeholder output of 1 token, Gemini's running
	// counts), which is never a bill on its own (docs/billing.md, "When a
	// usage figure is final").
	Usage() (u Usage, final bool)

	// Finish appends the client's terminal bytes (for example an OpenAI
	// usage chunk and "data: [DONE]").
	Finish(dst []byte) []byte

	// Fail appends the client-format error event that ends a broken stream.
	Fail(dst []byte, e *Error) []byte

	// OutputBytes is the number of bytes of generated text and tool
	// arguments seen so far, for estimating usage when the upstream
	// reported none.
	OutputBytes() int64
}

// HostedUses is the hosted-tool uses of the decoder's usage events.
func (t *translator) HostedUses() HostedUses { return t.usage.Hosted }

var _ HostedMeter = (*translator)(nil)

// A TokenMeter counts the tokens of a stream's generated output (text, tool
// arguments, reasoning) as the translator sees it, for a bill that has to
// be counted because the stream was stopped before the vendor's final
// usage (docs/billing.md, "When the client hangs up").
type TokenMeter interface {
	// Text counts a piece of generated output.
	Text(p []byte)
	// Quoted counts a JSON string as it came on the wire, quotes
	// included, unescaping it.
	Quoted(v []byte)
}

// A Costed stream translator puts the answer's cost into the final usage it
// writes, for client formats whose usage object takes the extra member
// (OpenAI chat's usage.cost): SetCost, before Finish, with the settled cost
// as a decimal in the ledger's currency.
type Costed interface {
	SetCost(cost string)
}

// A Metered stream translator reports every piece of generated output it
// sees to a TokenMeter: the same pieces whose bytes OutputBytes counts.
type Metered interface {
	SetTokenMeter(m TokenMeter)
}
