package relay

import (
	"net/http"
	"strconv"

	"github.com/modelgate/modelgate/formats"
	"github.com/modelgate/modelgate/formats/gemini"
	"github.com/modelgate/modelgate/upstream"

	// the vendor packages register their codecs in the table of formats
	_ "github.com/modelgate/modelgate/formats/anthropic"
	_ "github.com/modelgate/modelgate/formats/images"
	_ "github.com/modelgate/modelgate/formats/openai"
	_ "github.com/modelgate/modelgate/formats/responses"
)

// This file maps the gateway's client formats and upstream formats onto the
// codec table of formats/: the client's codec parses its request and
// writes its answer and errors, the upstream's codec writes the request
// and reads the answer, and for a (client, upstream) pair of the same
// format the client's codec passes both through.

// Format is the wire format a client speaks.
type Format uint8

// The client formats: each is its wire format in the codec table.
const (
	FormatChat      = Format(formats.WireChat)      // Chat Completions
	FormatMessages  = Format(formats.WireMessages)  // Messages
	FormatGemini    = Format(formats.WireGenerate)  // generateContent
	FormatResponses = Format(formats.WireResponses) // OpenAI Responses
	FormatImages    = Format(formats.WireImages)    // OpenAI Images (generations and edits)
)

// String names the format in usage rows and logs.
func (f Format) String() string { return formats.Wire(f).String() }

// codec is the format's codec.
func (f Format) codec() *formats.Codec { return formats.CodecOf(formats.Wire(f)) }

// toolIDPrefix is how the format's tool call ids start, for ids the gateway
// makes (docs/translation.md, "Tool call ids and arguments").
func (f Format) toolIDPrefix() string { return f.codec().ToolIDPrefix }

// providerCodec is the codec of the wire a provider format speaks; a
// provider of no known format is served as OpenAI.
func providerCodec(f upstream.Format) *formats.Codec {
	if c := formats.ProviderCodec(string(f)); c != nil {
		return c
	}
	return formats.CodecOf(formats.WireChat)
}

// WriteError writes e in the client's error envelope.
func WriteError(w http.ResponseWriter, f Format, e *formats.Error) {
	if e.RequestID == "" {
		e.RequestID = w.Header().Get("X-Request-Id")
	}
	if e.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(e.RetryAfter))
	}
	WriteJSON(w, errorStatus(f, e), appendError(nil, f, e))
}

// appendError renders e in the client's error envelope.
func appendError(dst []byte, f Format, e *formats.Error) []byte {
	return f.codec().AppendError(dst, e)
}

// errorStatus is the HTTP status of e for the client's format (Anthropic
// clients get 529 when overloaded; Gemini clients never see 413 or 502).
func errorStatus(f Format, e *formats.Error) int { return f.codec().ErrorStatus(e) }

// genRequest is a parsed generation (or token count) request, whatever the
// client's format: what the gateway needs to route, hold and forward it.
type genRequest struct {
	format        Format
	model         string
	stream        bool
	includeUsage  bool // OpenAI: the client wants the usage chunk
	sse           bool // Gemini: SSE framing rather than a JSON array
	maxTokens     int  // the client's output cap; 0 when it gave none
	choices       int
	inputBound    int64
	inputEstimate int64
	body          []byte
	toIR          func() (*formats.Request, *formats.Error)
	anthropicBeta []string        // anthropic-beta header values of an Anthropic client
	own           any             // the codec's own parsed request, for its answer renderers
	count         bool            // a token count
	gated         []formats.Gated // hosted tools and upstream state the request asks for
	plan          *hostedPlan     // the model's decision on them (admitGated)
}

// parseRequest reads a client's request with its format's codec.
func parseRequest(f Format, body []byte, o formats.ParseOptions) (*genRequest, *formats.Error) {
	req, ferr := f.codec().Parse(body, o)
	if ferr != nil {
		return nil, ferr
	}
	return &genRequest{format: f, model: req.Model, stream: req.Stream, includeUsage: req.IncludeUsage,
		maxTokens: req.MaxTokens, choices: req.Choices, inputBound: req.InputBound, inputEstimate: req.InputEstimate,
		body: body, toIR: req.ToIR, own: req.Own, count: o.Count, gated: req.Gated}, nil
}

// parseChat reads an OpenAI Chat Completions request.
func parseChat(body []byte) (*genRequest, *formats.Error) {
	return parseRequest(FormatChat, body, formats.ParseOptions{})
}

// parseResponses reads an OpenAI Responses request.
func parseResponses(body []byte) (*genRequest, *formats.Error) {
	return parseRequest(FormatResponses, body, formats.ParseOptions{})
}

// parseMessages reads an Anthropic Messages request (count selects the
// count_tokens body).
func parseMessages(body []byte, count bool, h http.Header) (*genRequest, *formats.Error) {
	g, ferr := parseRequest(FormatMessages, body, formats.ParseOptions{Count: count})
	if ferr != nil {
		return nil, ferr
	}
	g.anthropicBeta = h.Values("Anthropic-Beta")
	return g, nil
}

// parseGenerate reads a Gemini generateContent or countTokens request; the
// model and the stream switch come from the URL.
func parseGenerate(body []byte, model string, stream, sse, count bool) (*genRequest, *formats.Error) {
	g, ferr := parseRequest(FormatGemini, body, formats.ParseOptions{Model: model, Stream: stream, Count: count})
	if ferr != nil {
		return nil, ferr
	}
	g.sse = sse
	return g, nil
}

// samePath reports whether a client's request goes to the provider as it
// came (model and cap rewritten): same format, and for Responses clients an
// OpenAI provider that has the Responses API.
func samePath(f Format, p *Provider) bool {
	if f == FormatResponses {
		return p.Format == upstream.FormatOpenAI && p.ResponsesAPI
	}
	return f.codec().Provider == string(p.Format)
}

// upstreamBody renders the request for the route's upstream: the client's
// own bytes with the model and the output cap rewritten when the formats
// match (and the hosted-tool plan's edits made), a translation through
// the IR otherwise. It returns the names of what was dropped, for
// x-modelgate-dropped.
func upstreamBody(req *genRequest, m *Model, rt *Route, outputCap int, sigs gemini.SignatureStore) (body []byte, dropped string, passThrough bool, ferr *formats.Error) {
	uf := rt.Provider.Format
	if samePath(req.format, rt.Provider) {
		var err error
		src := req.body
		var names []string
		if req.plan != nil {
			if !req.plan.edits.Empty() {
				if src, err = req.plan.edits.Apply(make([]byte, 0, len(src)+64), src); err != nil {
					return nil, "", false, formats.InvalidRequest("", "The request could not be prepared for the upstream: "+err.Error())
				}
			}
			names = append(names, req.plan.dropped...)
		}
		if uf == upstream.FormatAnthropic {
			_, betas := splitBetas(req.anthropicBeta, rt.Provider.AnthropicBetas)
			for _, b := range betas {
				names = append(names, "anthropic-beta:"+b)
			}
		}
		body, err = req.format.codec().Rewrite(make([]byte, 0, len(src)+64), src,
			formats.RewriteOptions{UpstreamModel: rt.UpstreamModel, MaxTokens: outputCap, Stream: req.stream})
		if err != nil {
			return nil, "", false, formats.InvalidRequest("", "The request could not be prepared for the upstream: "+err.Error())
		}
		return body, formats.DroppedHeaderValue(names, 0), true, nil
	}
	ir, ferr := req.toIR()
	if ferr != nil {
		return nil, "", false, ferr
	}
	ir.MaxTokens = outputCap
	ir.Stream = req.stream
	if len(req.anthropicBeta) > 0 {
		ir.Drop("anthropic-beta")
	}
	if ir.Reasoning != nil && !m.Reasoning {
		// a model without reasoning refuses thinking settings: drop them
		ir.Reasoning = nil
		ir.DropField(formats.FieldReasoning)
	}
	ir.StructuredOutputs = m.StructuredOutputs
	body, ferr = providerCodec(uf).Render(ir, rt.UpstreamModel, sigs)
	if ferr != nil {
		return nil, "", false, ferr
	}
	return body, ir.DroppedHeader(), false, nil
}

// countBody renders a token-count request for the route's upstream, which
// has a count API (Anthropic, Gemini): the client's own body rewritten when
// the formats match, a translation through the IR otherwise.
func countBody(req *genRequest, rt *Route) ([]byte, *formats.Error) {
	uc := providerCodec(rt.Provider.Format)
	if req.format.codec() == uc {
		body, err := uc.RewriteCount(req.body, rt.UpstreamModel)
		if err != nil {
			return nil, formats.InvalidRequest("", "The request could not be prepared for the upstream: "+err.Error())
		}
		return body, nil
	}
	ir, ferr := req.toIR()
	if ferr != nil {
		return nil, ferr
	}
	return uc.RenderCount(ir, rt.UpstreamModel)
}

// upstreamURL is the path and query of a call at the provider; responsesAPI
// selects an OpenAI upstream's Responses API.
func upstreamURL(p *upstream.Provider, upstreamModel string, stream, count, responsesAPI bool) (path, query string) {
	c := providerCodec(p.Format)
	if responsesAPI && c == formats.CodecOf(formats.WireChat) {
		c = formats.CodecOf(formats.WireResponses)
	}
	path, query = c.Path(upstreamModel, stream, count)
	return p.PathPrefix + path, query
}

// SetUpstreamAuth adds the provider's credentials in its vendor's way, and
// for an Anthropic provider its API version and the client's anthropic-beta
// values that the provider allows.
func SetUpstreamAuth(h http.Header, p *Provider, secret string, beta []string) {
	c := providerCodec(p.Format)
	h[c.AuthHeader] = []string{c.AuthPrefix + secret}
	if p.Format == upstream.FormatAnthropic {
		h["Anthropic-Version"] = []string{p.AnthropicVersion}
		betaHeader(h, beta, p.AnthropicBetas)
	}
}

// parseUpstreamError reads an upstream's error answer.
func parseUpstreamError(f upstream.Format, status int, body []byte) *formats.Error {
	return providerCodec(f).ParseError(status, body)
}

// translateResponse turns a whole upstream answer into the client's format.
// hasUsage is false when the upstream reported no usage.
func (c *call) translateResponse(data []byte) (out []byte, u formats.Usage, hasUsage bool, outputBytes int64, ferr *formats.Error) {
	cc := c.format.codec()
	dst := make([]byte, 0, len(data)+64)
	if c.passThrough {
		out, u, ferr = cc.PassThrough(dst, data, c.model.ID)
		if ferr != nil {
			return nil, u, false, 0, ferr
		}
		c.hosted.answer = u.Hosted
		hasUsage = u.Tokens() != (formats.Usage{})
		if !hasUsage {
			// the output is measured from the decoded answer, or from its
			// bytes when the format has no decoder (Responses) or the
			// answer does not decode
			outputBytes = int64(len(data))
			if cc.Decode != nil {
				if r, err := cc.Decode(data, c.decodeOptions()); err == nil {
					outputBytes = r.OutputBytes()
				}
			}
		}
		return out, u, hasUsage, outputBytes, nil
	}
	resp, ferr := decodeResponse(c.route.Provider.Format, data, c.svc.Signatures, c.format.toolIDPrefix())
	if ferr != nil {
		return nil, u, false, 0, ferr
	}
	c.hosted.answer = resp.Usage.Hosted
	out = cc.RenderResponse(dst, resp, c.answerOptions())
	return out, resp.Usage, resp.HasUsage, resp.OutputBytes(), nil
}

// decodeResponse parses a whole upstream answer into the IR.
func decodeResponse(f upstream.Format, data []byte, sigs gemini.SignatureStore, idPrefix string) (*formats.Response, *formats.Error) {
	return providerCodec(f).Decode(data, formats.DecodeOptions{Signatures: sigs, ToolIDPrefix: idPrefix})
}

// decodeOptions is what the upstream's decoders need of this call.
func (c *call) decodeOptions() formats.DecodeOptions {
	return formats.DecodeOptions{Signatures: c.svc.Signatures, ToolIDPrefix: c.format.toolIDPrefix()}
}

// answerOptions is what the client's codec needs of this call to write
// its answer.
func (c *call) answerOptions() formats.AnswerOptions {
	o := formats.AnswerOptions{Model: c.model.ID, IncludeUsage: c.includeUsage, SSE: c.sse}
	if c.req != nil {
		o.Request = c.req.own
	}
	return o
}

// streamTranslator is the translator of a streamed answer for this call;
// it also counts the answer's hosted-tool uses for the bill.
func (c *call) streamTranslator() formats.StreamTranslator {
	tr := c.newStreamTranslator()
	c.hosted.meter, _ = tr.(formats.HostedMeter)
	return tr
}

// newStreamTranslator picks the translator of a streamed answer: the
// client's pass-through stream, or the upstream's decoder composed with
// the client's encoder.
func (c *call) newStreamTranslator() formats.StreamTranslator {
	if c.passThrough {
		return c.format.codec().NewPassThroughStream(c.answerOptions())
	}
	dec := providerCodec(c.route.Provider.Format).NewStreamDecoder(c.decodeOptions())
	return formats.Translate(dec, c.format.codec().NewStreamEncoder(c.answerOptions()))
}

// streamContentType is the Content-Type of a streamed answer to the client.
func (c *call) streamContentType() string {
	return c.format.codec().StreamContentType(c.answerOptions())
}

// countResponse turns an upstream's token count answer into the client's
// (count clients are Anthropic's and Gemini's, count upstreams too).
func (c *call) countResponse(data []byte) ([]byte, *formats.Error) {
	n, ferr := providerCodec(c.route.Provider.Format).ParseCount(data)
	if ferr != nil {
		return nil, ferr
	}
	return appendCount(nil, c.format, n), nil
}

// appendCount renders a token count in the client's format.
func appendCount(dst []byte, f Format, n int64) []byte { return f.codec().AppendCount(dst, n) }
