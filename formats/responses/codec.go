package responses

import (
	"github.com/modelgate/modelgate/formats"
	"github.com/modelgate/modelgate/formats/openai"
)

// Codec is the Responses format as the gateway composes it: the format of
// Responses clients, which goes as it came only to an OpenAI upstream that
// has the Responses API and is otherwise translated to that upstream's
// format. Its errors are OpenAI's.
var Codec = formats.Codec{
	ToolIDPrefix: openai.Codec.ToolIDPrefix,

	Parse:       parseClient,
	AppendError: openai.AppendError,
	ErrorStatus: (*formats.Error).Status,
	RenderResponse: func(dst []byte, resp *formats.Response, o formats.AnswerOptions) []byte {
		req, _ := o.Request.(*Request)
		return Render(dst, resp, o.Model, req)
	},
	NewStreamEncoder: func(o formats.AnswerOptions) formats.StreamEncoder {
		req, _ := o.Request.(*Request)
		return NewStreamEncoder(o.Model, req)
	},
	StreamContentType: formats.EventStream,

	Path: func(string, bool, bool) (string, string) { return "/v1/responses", "" },
	Rewrite: func(dst, body []byte, o formats.RewriteOptions) ([]byte, error) {
		return Rewrite(dst, body, o.UpstreamModel, o.MaxTokens)
	},
	PassThrough:          PassThrough,
	NewPassThroughStream: func(o formats.AnswerOptions) formats.StreamTranslator { return NewPassThroughStream(o.Model) },
	ParseError:           openai.ParseUpstreamError,
}

func init() { formats.Register(formats.WireResponses, &Codec) }

// parseClient reads a client's Responses request for the codec.
func parseClient(body []byte, _ formats.ParseOptions) (formats.ClientRequest, *formats.Error) {
	req, ferr := ParseRequest(body)
	if ferr != nil {
		return formats.ClientRequest{}, ferr
	}
	n, _ := req.MaxTokens()
	return formats.ClientRequest{Model: req.Model, Stream: req.Stream, Choices: 1, MaxTokens: n,
		InputBound: req.InputBound(), InputEstimate: req.InputEstimate(), ToIR: req.ToIR, Gated: req.Gated(),
		Own: req}, nil
}
