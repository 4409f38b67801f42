// Package openai is the OpenAI Chat Completions wire format:
// request validation and measurement, the byte-level
// pass-through of same-format traffic, the IR codecs used when the other
// side speaks another format, stream translators, and the error envelope.
// The Responses API and images come later, beside these files.
//
// Same-format path (client and upstream both OpenAI chat):
//
//	req, ferr := ParseChatRequest(body)            // 400s like OpenAI's
//	hold(req.InputBound(), cap*req.N)
//	up, _ := RewriteChatRequest(buf, body, upstreamModel, cap, req.Stream)
//	// non-stream answer:
//	out, usage, ferr := PassThroughResponse(buf, answer, req.Model)
//	// stream answer:
//	tr := NewPassThroughStream(req.Model, req.IncludeUsage)
//
// Translated path: (*ChatRequest).ToIR and RenderChatRequest for requests,
// DecodeChatResponse and RenderChatResponse for whole answers,
// NewStreamDecoder and NewStreamEncoder composed with formats.Translate for
// streams.
package openai
