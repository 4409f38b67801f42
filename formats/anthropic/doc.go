// Package anthropic is the Anthropic Messages wire format,
// on both sides of the gateway: request validation and
// measurement for Anthropic clients (the SDKs, Claude Code), the byte-level
// pass-through of same-format traffic, the IR codecs used when the other
// side speaks another format, stream translators, and the error envelope.
//
// Same-format path (client and upstream both Anthropic):
//
//	req, ferr := ParseMessagesRequest(body)          // 400s like Anthropic's
//	hold(req.InputBound(), min(req.MaxTokens(), cap))
//	up, _ := RewriteMessagesRequest(buf, body, upstreamModel, cap)
//	// non-stream answer:
//	out, usage, ferr := PassThroughResponse(buf, answer, req.Model)
//	// stream answer:
//	tr := NewPassThroughStream(req.Model)
//
// Translated path, Anthropic client: (*MessagesRequest).ToIR, then the
// upstream format's renderer; RenderMessagesResponse for whole answers and
// NewStreamEncoder (composed with another format's decoder by
// formats.Translate) for streams. Anthropic upstream:
// RenderMessagesRequest, DecodeMessagesResponse and NewStreamDecoder.
//
// Errors are Anthropic's envelope (AppendError, Status) for the client, and
// ParseUpstreamError for what api.anthropic.com answers.
//
// Field paths in 400s are Anthropic's ("messages.0.content.1.text"), both
// at the start of the message ("max_tokens: Field required") and in
// formats.Error.Param.
package anthropic
