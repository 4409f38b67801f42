// Package formats holds the gateway's wire formats: the internal
// representation (IR) of requests, answers and stream events, and one
// sub-package per vendor format (openai, and next anthropic and gemini) with
// request and response codecs, stream decoders and encoders, pass-through
// rewriters and error envelopes. sse reads and writes server-sent events;
// rawjson edits JSON objects by byte offsets for pass-through.
//
// What the vendor packages share lives once, in formats/internal: walk (the
// JSON path of a request being validated and the typed readers, each vendor
// wording their errors), upstream (the table from an upstream's HTTP status
// to an error kind, the errors of unusable answers, the pass-through
// rewrite of an answer's model, the OpenAI usage parser), emit (default
// error messages, tool arguments as an object, tool-result text, image
// types) and jsonval (reading strings and counts).
//
// The package is plain Go: it never imports Caddy.
//
// Each vendor package registers one Codec per wire format it serves in the
// table of codec.go (openai: Chat Completions, anthropic: Messages, gemini:
// generateContent, responses: Responses, images: the Images errors), and
// the gateway composes a call from the table, keyed by the client's wire
// and the upstream's, rather than naming the vendor packages.
//
// A request flows as: client bytes → the client format's parser (validate,
// measure the input bound) → either a byte-level pass-through rewrite (same
// format upstream) or IR → the upstream format's renderer. The answer flows
// back through a StreamTranslator (pass-through or Translate(decoder,
// encoder)) or a whole-response codec. See docs/translation.md.
package formats
