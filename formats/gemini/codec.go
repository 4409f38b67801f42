package gemini

import (
	"net/url"

	"github.com/modelgate/modelgate/formats"
)

// Codec is the generateContent format as the gateway composes it: the
// format of Gemini clients and of Gemini upstreams, with a token-count API.
// Its streams are server-sent events or, for a client that did not ask for
// ?alt=sse, one JSON array.
var Codec = formats.Codec{
	Provider:     "gemini",
	ToolIDPrefix: "call_",

	Parse:          parseClient,
	AppendError:    AppendError,
	ErrorStatus:    Status,
	RenderResponse: formats.RenderModel(RenderGenerateResponse),
	NewStreamEncoder: func(o formats.AnswerOptions) formats.StreamEncoder {
		return NewStreamEncoder(o.Model, o.SSE)
	},
	StreamContentType: func(o formats.AnswerOptions) string {
		if !o.SSE {
			return "application/json"
		}
		return "text/event-stream"
	},
	AppendCount: AppendCountTokensResponse,

	Path: func(model string, stream, count bool) (string, string) {
		const models = "/v1beta/models/"
		switch {
		case count:
			return models + url.PathEscape(model) + ":countTokens", ""
		case stream:
			return models + url.PathEscape(model) + ":streamGenerateContent", "alt=sse"
		}
		return models + url.PathEscape(model) + ":generateContent", ""
	},
	Rewrite: func(dst, body []byte, o formats.RewriteOptions) ([]byte, error) {
		return RewriteGenerateRequest(dst, body, o.MaxTokens)
	},
	// a client's own countTokens body goes as it came: the model is in the URL
	RewriteCount: func(body []byte, _ string) ([]byte, error) { return body, nil },
	Render: func(ir *formats.Request, _ string, sigs formats.SignatureStore) ([]byte, *formats.Error) {
		return RenderGenerateRequest(ir, sigs)
	},
	RenderCount: RenderCountTokensRequest,
	PassThrough: PassThroughResponse,
	NewPassThroughStream: func(o formats.AnswerOptions) formats.StreamTranslator {
		return NewPassThroughStream(o.Model, o.SSE)
	},
	Decode: func(body []byte, o formats.DecodeOptions) (*formats.Response, *formats.Error) {
		return DecodeGenerateResponse(body, o.Signatures, o.ToolIDPrefix)
	},
	NewStreamDecoder: func(o formats.DecodeOptions) formats.StreamDecoder {
		return NewStreamDecoder(o.Signatures, o.ToolIDPrefix)
	},
	ParseError: ParseUpstreamError,
	ParseCount: ParseCountTokensResponse,
	AuthHeader: "X-Goog-Api-Key",
}

func init() { formats.Register(formats.WireGenerate, &Codec) }

// parseClient reads a client's generateContent or countTokens request for
// the codec; the model and the stream switch come from the URL.
func parseClient(body []byte, o formats.ParseOptions) (formats.ClientRequest, *formats.Error) {
	var req *GenerateRequest
	var ferr *formats.Error
	if o.Count {
		req, ferr = ParseCountTokensRequest(body, o.Model)
	} else {
		req, ferr = ParseGenerateRequest(body, o.Model, o.Stream)
	}
	if ferr != nil {
		return formats.ClientRequest{}, ferr
	}
	n, _ := req.MaxTokens()
	return formats.ClientRequest{Model: o.Model, Stream: o.Stream, Choices: req.Choices(), MaxTokens: n,
		InputBound: req.InputBound(), InputEstimate: req.InputEstimate(), ToIR: req.ToIR, Gated: req.Gated()}, nil
}
