// Package formats holds the gateway's wire formats: the internal
// representation (IR) of requests, answers and stream events, and one
// sub-package per vendor format (openai, and next anthropic and gemini) with
// request and response codecs, stream decoders and encoders, pass-through
// rewriters and error envelopes. sse reads and writes server-sent events;
// rawjson edits JSON objects by byte offsets for pass-through.
//
// The package is plain Go: it never imports Caddy.
//
// A request flows as: client bytes → the client format's parser (validate,
// measure the input bound) → either a byte-level pass-through rewrite (same
// format upstream) or IR → the upstream format's renderer. The answer flows
// back through a StreamTranslator (pass-through or Translate(decoder,
// encoder)) or a whole-response codec. See docs/translation.md.
package formats
