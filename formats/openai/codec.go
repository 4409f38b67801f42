package openai

import "github.com/modelgate/modelgate/formats"

// Codec is the Chat Completions format as the gateway composes it: the
// format of OpenAI clients and of OpenAI upstreams.
var Codec = formats.Codec{
	Provider:     "openai",
	ToolIDPrefix: "call_",

	Parse:          parseClient,
	AppendError:    AppendError,
	ErrorStatus:    (*formats.Error).Status,
	RenderResponse: formats.RenderModel(RenderChatResponse),
	NewStreamEncoder: func(o formats.AnswerOptions) formats.StreamEncoder {
		return NewStreamEncoder(o.Model, o.IncludeUsage)
	},
	StreamContentType: formats.EventStream,

	Path: func(string, bool, bool) (string, string) { return "/v1/chat/completions", "" },
	Rewrite: func(dst, body []byte, o formats.RewriteOptions) ([]byte, error) {
		return RewriteChatRequest(dst, body, o.UpstreamModel, o.MaxTokens, o.Stream)
	},
	Render: func(ir *formats.Request, model string, _ formats.SignatureStore) ([]byte, *formats.Error) {
		return RenderChatRequest(ir, model)
	},
	PassThrough: PassThroughResponse,
	NewPassThroughStream: func(o formats.AnswerOptions) formats.StreamTranslator {
		return NewPassThroughStream(o.Model, o.IncludeUsage)
	},
	Decode: func(body []byte, _ formats.DecodeOptions) (*formats.Response, *formats.Error) {
		return DecodeChatResponse(body)
	},
	NewStreamDecoder: func(formats.DecodeOptions) formats.StreamDecoder { return NewStreamDecoder() },
	ParseError:       ParseUpstreamError,
	AuthHeader:       "Authorization",
	AuthPrefix:       "Bearer ",
}

func init() {
	formats.Register(formats.WireChat, &Codec)
}

// parseClient reads a client's Chat Completions request for the codec.
func parseClient(body []byte, _ formats.ParseOptions) (formats.ClientRequest, *formats.Error) {
	req, ferr := ParseChatRequest(body)
	if ferr != nil {
		return formats.ClientRequest{}, ferr
	}
	n, _ := req.MaxTokens()
	return formats.ClientRequest{Model: req.Model, Stream: req.Stream, IncludeUsage: req.IncludeUsage,
		Choices: req.N, MaxTokens: n, InputBound: req.InputBound(), InputEstimate: req.InputEstimate(),
		ToIR: req.ToIR, Gated: req.Gated()}, nil
}
