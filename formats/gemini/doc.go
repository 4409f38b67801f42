// Package gemini is the Gemini generateContent wire format,
// as a client format (the Google GenAI SDKs and Gemini
// CLI talk to the gateway) and as an upstream format (the gateway calls
// generativelanguage.googleapis.com): request validation and measurement,
// the byte-level pass-through of same-format traffic, the IR codecs used
// when the other side speaks another format, stream translators, and the
// error envelope. The model is in the URL path and streaming is chosen by
// the method, so the caller passes both in.
//
// Same-format path (client and upstream both Gemini):
//
//	req, ferr := ParseGenerateRequest(body, model, stream) // 400s like Google's
//	hold(req.InputBound(), cap*req.Choices())
//	up, _ := RewriteGenerateRequest(buf, body, cap)        // maxOutputTokens
//	// non-stream answer:
//	out, usage, ferr := PassThroughResponse(buf, answer, req.Model)
//	// stream answer (the upstream is always called with ?alt=sse):
//	tr := NewPassThroughStream(req.Model, clientWantsSSE)
//
// Translated path: (*GenerateRequest).ToIR and RenderGenerateRequest for
// requests, DecodeGenerateResponse and RenderGenerateResponse for whole
// answers, NewStreamDecoder and NewStreamEncoder composed with
// formats.Translate for streams. Thought signatures of Gemini function
// calls survive a trip through a client of another format by way of a
// SignatureStore.
//
// Streams to Gemini clients are framed as SSE ("data: <json>\r\n\r\n", as
// Google sends them) or, without ?alt=sse, as one JSON array written
// progressively ("[" with the first element, ",\n" between elements, "]"
// at the end).
package gemini
