package anthropic

import "github.com/modelgate/modelgate/formats"

// Codec is the Messages format as the gateway composes it: the format of
// Anthropic clients and of Anthropic upstreams, with a token-count API.
var Codec = formats.Codec{
	Provider:     "anthropic",
	ToolIDPrefix: "toolu_",

	Parse:             parseClient,
	AppendError:       AppendError,
	ErrorStatus:       Status,
	RenderResponse:    formats.RenderModel(RenderMessagesResponse),
	NewStreamEncoder:  func(o formats.AnswerOptions) formats.StreamEncoder { return NewStreamEncoder(o.Model) },
	StreamContentType: formats.EventStream,
	AppendCount:       AppendCountTokensResponse,

	Path: func(_ string, _, count bool) (string, string) {
		if count {
			return "/v1/messages/count_tokens", ""
		}
		return "/v1/messages", ""
	},
	Rewrite: func(dst, body []byte, o formats.RewriteOptions) ([]byte, error) {
		return RewriteMessagesRequest(dst, body, o.UpstreamModel, o.MaxTokens)
	},
	RewriteCount: func(body []byte, model string) ([]byte, error) {
		return RewriteCountTokensRequest(make([]byte, 0, len(body)+32), body, model)
	},
	Render: func(ir *formats.Request, model string, _ formats.SignatureStore) ([]byte, *formats.Error) {
		return RenderMessagesRequest(ir, model)
	},
	RenderCount: RenderCountTokensRequest,
	PassThrough: PassThroughResponse,
	NewPassThroughStream: func(o formats.AnswerOptions) formats.StreamTranslator {
		return NewPassThroughStream(o.Model)
	},
	Decode: func(body []byte, _ formats.DecodeOptions) (*formats.Response, *formats.Error) {
		return DecodeMessagesResponse(body)
	},
	NewStreamDecoder: func(formats.DecodeOptions) formats.StreamDecoder { return NewStreamDecoder() },
	ParseError:       ParseUpstreamError,
	ParseCount:       ParseCountTokensResponse,
	AuthHeader:       "X-Api-Key",
}

func init() { formats.Register(formats.WireMessages, &Codec) }

// parseClient reads a client's Messages (or count_tokens) request for the
// codec.
func parseClient(body []byte, o formats.ParseOptions) (formats.ClientRequest, *formats.Error) {
	req, ferr := parse(body, o.Count)
	if ferr != nil {
		return formats.ClientRequest{}, ferr
	}
	r := formats.ClientRequest{Model: req.Model, Stream: req.Stream, Choices: 1,
		InputBound: req.InputBound(), InputEstimate: req.InputEstimate(), ToIR: req.ToIR, Gated: req.Gated()}
	if !o.Count {
		r.MaxTokens = req.MaxTokens()
	}
	return r, nil
}
