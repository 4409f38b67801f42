package relay

import (
	"net/http"
	"net/url"
	"strconv"

	"github.com/modelgate/modelgate/formats"
	"github.com/modelgate/modelgate/formats/anthropic"
	"github.com/modelgate/modelgate/formats/gemini"
	"github.com/modelgate/modelgate/formats/openai"
	"github.com/modelgate/modelgate/formats/responses"
	"github.com/modelgate/modelgate/upstream"
)

// This file maps the gateway's three client formats and three upstream
// formats onto the vendor packages of formats/: which parser, renderer,
// stream translator and error envelope serve a (client, upstream) pair.

// Format is the wire format a client speaks.
type Format uint8

// The client formats.
const (
	FormatChat      Format = iota // Chat Completions
	FormatMessages                // Messages
	FormatGemini                  // generateContent
	FormatResponses               // OpenAI Responses
	FormatImages                  // OpenAI Images (generations and edits)
)

// String names the format in usage rows and logs.
func (f Format) String() string {
	switch f {
	case FormatMessages:
		return "anthropic"
	case FormatGemini:
		return "gemini"
	case FormatResponses:
		return "openai.responses"
	case FormatImages:
		return "openai.images"
	}
	return "openai.chat"
}

// toolIDPrefix is how the format's tool call ids start, for ids the gateway
// makes (docs/translation.md, "Tool call ids and arguments").
func (f Format) toolIDPrefix() string {
	if f == FormatMessages {
		return "toolu_"
	}
	return "call_"
}

// upstreamFormat is the provider format that speaks like the client.
func (f Format) upstreamFormat() upstream.Format {
	switch f {
	case FormatMessages:
		return upstream.FormatAnthropic
	case FormatGemini:
		return upstream.FormatGemini
	}
	return upstream.FormatOpenAI
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
	switch f {
	case FormatMessages:
		return anthropic.AppendError(dst, e)
	case FormatGemini:
		return gemini.AppendError(dst, e)
	}
	return openai.AppendError(dst, e)
}

// errorStatus is the HTTP status of e for the client's format (Anthropic
// clients get 529 when overloaded; Gemini clients never see 413 or 502).
func errorStatus(f Format, e *formats.Error) int {
	switch f {
	case FormatMessages:
		return anthropic.Status(e)
	case FormatGemini:
		return gemini.Status(e)
	}
	return e.Status()
}

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
	anthropicBeta []string // anthropic-beta header values of an Anthropic client
	responses     *responses.Request
	count         bool            // a token count
	gated         []formats.Gated // hosted tools and upstream state (#16)
	plan          *hostedPlan     // the model's decision on them (admitGated)
}

// parseChat reads an OpenAI Chat Completions request.
func parseChat(body []byte) (*genRequest, *formats.Error) {
	req, ferr := openai.ParseChatRequest(body)
	if ferr != nil {
		return nil, ferr
	}
	g := &genRequest{format: FormatChat, model: req.Model, stream: req.Stream, includeUsage: req.IncludeUsage,
		choices: req.N, inputBound: req.InputBound(), inputEstimate: req.InputEstimate(), body: body, toIR: req.ToIR,
		gated: req.Gated()}
	if n, ok := req.MaxTokens(); ok {
		g.maxTokens = n
	}
	return g, nil
}

// parseResponses reads an OpenAI Responses request.
func parseResponses(body []byte) (*genRequest, *formats.Error) {
	req, ferr := responses.ParseRequest(body)
	if ferr != nil {
		return nil, ferr
	}
	g := &genRequest{format: FormatResponses, model: req.Model, stream: req.Stream, choices: 1,
		inputBound: req.InputBound(), inputEstimate: req.InputEstimate(), body: body, toIR: req.ToIR, responses: req,
		gated: req.Gated()}
	if n, ok := req.MaxTokens(); ok {
		g.maxTokens = n
	}
	return g, nil
}

// parseMessages reads an Anthropic Messages request (count selects the
// count_tokens body).
func parseMessages(body []byte, count bool, h http.Header) (*genRequest, *formats.Error) {
	parse := anthropic.ParseMessagesRequest
	if count {
		parse = anthropic.ParseCountTokensRequest
	}
	req, ferr := parse(body)
	if ferr != nil {
		return nil, ferr
	}
	g := &genRequest{format: FormatMessages, model: req.Model, stream: req.Stream, choices: 1,
		inputBound: req.InputBound(), inputEstimate: req.InputEstimate(), body: body, toIR: req.ToIR,
		anthropicBeta: h.Values("Anthropic-Beta"), count: count, gated: req.Gated()}
	if !count {
		g.maxTokens = req.MaxTokens()
	}
	return g, nil
}

// parseGenerate reads a Gemini generateContent or countTokens request; the
// model and the stream switch come from the URL.
func parseGenerate(body []byte, model string, stream, sse, count bool) (*genRequest, *formats.Error) {
	var req *gemini.GenerateRequest
	var ferr *formats.Error
	if count {
		req, ferr = gemini.ParseCountTokensRequest(body, model)
	} else {
		req, ferr = gemini.ParseGenerateRequest(body, model, stream)
	}
	if ferr != nil {
		return nil, ferr
	}
	g := &genRequest{format: FormatGemini, model: model, stream: stream, sse: sse, choices: req.Choices(),
		inputBound: req.InputBound(), inputEstimate: req.InputEstimate(), body: body, toIR: req.ToIR,
		count: count, gated: req.Gated()}
	if n, ok := req.MaxTokens(); ok {
		g.maxTokens = n
	}
	return g, nil
}

// samePath reports whether a client's request goes to the provider as it
// came (model and cap rewritten): same format, and for Responses clients an
// OpenAI provider that has the Responses API.
func samePath(f Format, p *Provider) bool {
	if f == FormatResponses {
		return p.Format == upstream.FormatOpenAI && p.ResponsesAPI
	}
	return p.Format == f.upstreamFormat()
}

// upstreamBody renders the request for the route's upstream: the client's
// own bytes with the model and the output cap rewritten when the formats
// match (and the hosted-tool plan's edits made, #16), a translation through
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
		dst := make([]byte, 0, len(src)+64)
		switch {
		case req.format == FormatResponses:
			body, err = responses.Rewrite(dst, src, rt.UpstreamModel, outputCap)
		case uf == upstream.FormatAnthropic:
			body, err = anthropic.RewriteMessagesRequest(dst, src, rt.UpstreamModel, outputCap)
		case uf == upstream.FormatGemini:
			body, err = gemini.RewriteGenerateRequest(dst, src, outputCap)
		default:
			body, err = openai.RewriteChatRequest(dst, src, rt.UpstreamModel, outputCap, req.stream)
		}
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
	switch uf {
	case upstream.FormatAnthropic:
		body, ferr = anthropic.RenderMessagesRequest(ir, rt.UpstreamModel)
	case upstream.FormatGemini:
		body, ferr = gemini.RenderGenerateRequest(ir, sigs)
	default:
		body, ferr = openai.RenderChatRequest(ir, rt.UpstreamModel)
	}
	if ferr != nil {
		return nil, "", false, ferr
	}
	return body, ir.DroppedHeader(), false, nil
}

// countBody renders a token-count request for the route's upstream, which
// has a count API (Anthropic, Gemini).
func countBody(req *genRequest, rt *Route) ([]byte, *formats.Error) {
	uf := rt.Provider.Format
	if uf == upstream.FormatAnthropic && req.format == FormatMessages {
		body, err := anthropic.RewriteCountTokensRequest(make([]byte, 0, len(req.body)+32), req.body, rt.UpstreamModel)
		if err != nil {
			return nil, formats.InvalidRequest("", "The request could not be prepared for the upstream: "+err.Error())
		}
		return body, nil
	}
	if uf == upstream.FormatGemini && req.format == FormatGemini {
		// the client's own countTokens body: the model is in the URL
		return req.body, nil
	}
	ir, ferr := req.toIR()
	if ferr != nil {
		return nil, ferr
	}
	if uf == upstream.FormatAnthropic {
		return anthropic.RenderCountTokensRequest(ir, rt.UpstreamModel)
	}
	return gemini.RenderCountTokensRequest(ir, rt.UpstreamModel)
}

// upstreamURL is the path and query of a call at the provider.
func upstreamURL(p *upstream.Provider, upstreamModel string, stream, count, responsesAPI bool) (path, query string) {
	switch p.Format {
	case upstream.FormatAnthropic:
		if count {
			return p.PathPrefix + "/v1/messages/count_tokens", ""
		}
		return p.PathPrefix + "/v1/messages", ""
	case upstream.FormatGemini:
		base := p.PathPrefix + "/v1beta/models/" + url.PathEscape(upstreamModel)
		switch {
		case count:
			return base + ":countTokens", ""
		case stream:
			return base + ":streamGenerateContent", "alt=sse"
		}
		return base + ":generateContent", ""
	}
	if responsesAPI {
		return p.PathPrefix + "/v1/responses", ""
	}
	return p.PathPrefix + "/v1/chat/completions", ""
}

// SetUpstreamAuth adds the provider's credentials in its vendor's way, and
// the client's anthropic-beta values that the provider allows (#16).
func SetUpstreamAuth(h http.Header, p *Provider, secret string, beta []string) {
	switch p.Format {
	case upstream.FormatAnthropic:
		h["X-Api-Key"] = []string{secret}
		h["Anthropic-Version"] = []string{p.AnthropicVersion}
		betaHeader(h, beta, p.AnthropicBetas)
	case upstream.FormatGemini:
		h["X-Goog-Api-Key"] = []string{secret}
	default:
		h["Authorization"] = []string{"Bearer " + secret}
	}
}

// parseUpstreamError reads an upstream's error answer.
func parseUpstreamError(f upstream.Format, status int, body []byte) *formats.Error {
	switch f {
	case upstream.FormatAnthropic:
		return anthropic.ParseUpstreamError(status, body)
	case upstream.FormatGemini:
		return gemini.ParseUpstreamError(status, body)
	}
	return openai.ParseUpstreamError(status, body)
}

// translateResponse turns a whole upstream answer into the client's format.
// hasUsage is false when the upstream reported no usage.
func (c *call) translateResponse(data []byte) (out []byte, u formats.Usage, hasUsage bool, outputBytes int64, ferr *formats.Error) {
	uf := c.route.Provider.Format
	dst := make([]byte, 0, len(data)+64)
	if c.passThrough {
		switch {
		case c.format == FormatResponses:
			out, u, ferr = responses.PassThrough(dst, data, c.model.ID)
		case uf == upstream.FormatAnthropic:
			out, u, ferr = anthropic.PassThroughResponse(dst, data, c.model.ID)
		case uf == upstream.FormatGemini:
			out, u, ferr = gemini.PassThroughResponse(dst, data, c.model.ID)
		default:
			out, u, ferr = openai.PassThroughResponse(dst, data, c.model.ID)
		}
		if ferr != nil {
			return nil, u, false, 0, ferr
		}
		c.hosted.answer = u.Hosted
		hasUsage = u.Tokens() != (formats.Usage{})
		if !hasUsage && c.format == FormatResponses {
			outputBytes = int64(len(data))
		} else if !hasUsage {
			if r, err := decodeResponse(uf, data, c.svc.Signatures, c.format.toolIDPrefix()); err == nil {
				outputBytes = r.OutputBytes()
			} else {
				outputBytes = int64(len(data))
			}
		}
		return out, u, hasUsage, outputBytes, nil
	}
	resp, ferr := decodeResponse(uf, data, c.svc.Signatures, c.format.toolIDPrefix())
	if ferr != nil {
		return nil, u, false, 0, ferr
	}
	c.hosted.answer = resp.Usage.Hosted
	switch c.format {
	case FormatMessages:
		out = anthropic.RenderMessagesResponse(dst, resp, c.model.ID)
	case FormatGemini:
		out = gemini.RenderGenerateResponse(dst, resp, c.model.ID)
	case FormatResponses:
		out = responses.Render(dst, resp, c.model.ID, c.req.responses)
	default:
		out = openai.RenderChatResponse(dst, resp, c.model.ID)
	}
	return out, resp.Usage, resp.HasUsage, resp.OutputBytes(), nil
}

// decodeResponse parses a whole upstream answer into the IR.
func decodeResponse(f upstream.Format, data []byte, sigs gemini.SignatureStore, idPrefix string) (*formats.Response, *formats.Error) {
	switch f {
	case upstream.FormatAnthropic:
		return anthropic.DecodeMessagesResponse(data)
	case upstream.FormatGemini:
		return gemini.DecodeGenerateResponse(data, sigs, idPrefix)
	}
	return openai.DecodeChatResponse(data)
}

// streamTranslator is the translator of a streamed answer for this call;
// it also counts the answer's hosted-tool uses for the bill (#16).
func (c *call) streamTranslator() formats.StreamTranslator {
	tr := c.newStreamTranslator()
	c.hosted.meter, _ = tr.(formats.HostedMeter)
	return tr
}

// newStreamTranslator picks the translator of a streamed answer.
func (c *call) newStreamTranslator() formats.StreamTranslator {
	uf := c.route.Provider.Format
	if c.passThrough {
		switch {
		case c.format == FormatResponses:
			return responses.NewPassThroughStream(c.model.ID)
		case uf == upstream.FormatAnthropic:
			return anthropic.NewPassThroughStream(c.model.ID)
		case uf == upstream.FormatGemini:
			return gemini.NewPassThroughStream(c.model.ID, c.sse)
		}
		return openai.NewPassThroughStream(c.model.ID, c.includeUsage)
	}
	var dec formats.StreamDecoder
	switch uf {
	case upstream.FormatAnthropic:
		dec = anthropic.NewStreamDecoder()
	case upstream.FormatGemini:
		dec = gemini.NewStreamDecoder(c.svc.Signatures, c.format.toolIDPrefix())
	default:
		dec = openai.NewStreamDecoder()
	}
	var enc formats.StreamEncoder
	switch c.format {
	case FormatMessages:
		enc = anthropic.NewStreamEncoder(c.model.ID)
	case FormatGemini:
		enc = gemini.NewStreamEncoder(c.model.ID, c.sse)
	case FormatResponses:
		enc = responses.NewStreamEncoder(c.model.ID, c.req.responses)
	default:
		enc = openai.NewStreamEncoder(c.model.ID, c.includeUsage)
	}
	return formats.Translate(dec, enc)
}

// streamContentType is the Content-Type of a streamed answer to the client.
func (c *call) streamContentType() string {
	if c.format == FormatGemini && !c.sse {
		return "application/json"
	}
	return "text/event-stream"
}

// countResponse turns an upstream's token count answer into the client's.
func (c *call) countResponse(data []byte) ([]byte, *formats.Error) {
	var n int64
	var ferr *formats.Error
	if c.route.Provider.Format == upstream.FormatAnthropic {
		n, ferr = anthropic.ParseCountTokensResponse(data)
	} else {
		n, ferr = gemini.ParseCountTokensResponse(data)
	}
	if ferr != nil {
		return nil, ferr
	}
	return appendCount(nil, c.format, n), nil
}

// appendCount renders a token count in the client's format.
func appendCount(dst []byte, f Format, n int64) []byte {
	if f == FormatGemini {
		return gemini.AppendCountTokensResponse(dst, n)
	}
	return anthropic.AppendCountTokensResponse(dst, n)
}
