package relay

import (
	"fmt"
	"net/http"
	"strings"

	"go.uber.org/zap"

	"github.com/modelgate/modelgate/formats"
	"github.com/modelgate/modelgate/ledger"
)

// Hosted tools and upstream state (docs/billing.md, "Hosted tools and
// state at the provider"). A request may make the upstream
// do work that the tokens of the answer do not show (web searches, page
// fetches, images made by a hosted tool, each billed per use by the
// vendor) or reach state kept in the operator's account at the provider
// (stored responses, files, vector stores, containers, MCP servers,
// caches). The vendor parsers list these (formats.Gated); admitGated
// decides, per model, before anything is held:
//
//   - a fee-bearing hosted tool is served only when the model prices it
//     (price … web_search <per 1,000 uses>); it is then held for (its cap
//     of uses × (fee + an allowance of input tokens for its results)),
//     capped upstream where the vendor has a cap, and billed per use as
//     the answer reports. An unpriced one is dropped and named in
//     x-modelgate-dropped, or refused with a 400 when tool_choice forces
//     it.
//   - a use of upstream state is refused with a 400 naming the field
//     unless the model allows it (allow_stateful). Background responses
//     and documents the upstream fetches by URL are always refused.
//   - Responses requests go upstream with store false unless the client
//     says otherwise (OpenAI stores every response by default).

// defaultAnthropicBetas are the anthropic-beta values an Anthropic provider
// receives when its block sets none: what Claude Code and the SDKs send for
// features billed by tokens alone. Left out on purpose: betas that change
// prices (context-1m-*: long-context rates above 200k input tokens;
// extended-cache-ttl-*: one-hour cache writes at twice the input price),
// that reach state in the operator's account (files-api-*, mcp-client-*,
// code-execution-*, skills-*), that run another model (advisor-tool-*) and
// oauth-* (the gateway's keys are API keys).
var defaultAnthropicBetas = []string{
	"claude-code-20250219",
	"interleaved-thinking-2025-05-14",
	"fine-grained-tool-streaming-2025-05-14",
	"context-management-2025-06-27",
	"prompt-caching-2024-07-31",
	"prompt-caching-scope-2026-01-05",
	"token-efficient-tools-2025-02-19",
	"effort-2025-11-24",
	"structured-outputs-2025-11-13",
	"advanced-tool-use-2025-11-20",
	"output-128k-2025-02-19",
	"model-context-window-exceeded-2025-08-26",
	"thinking-token-count-2026-05-13",
	"mid-conversation-system-2026-04-07",
	"web-fetch-2025-09-10",
}

// AnthropicBetas builds a provider's allow-list from its anthropic_beta
// setting: "default" stands for defaultAnthropicBetas, "none" for nothing.
func AnthropicBetas(list []string) (map[string]bool, error) {
	if len(list) == 0 {
		list = []string{"default"}
	}
	out := map[string]bool{}
	for _, v := range list {
		switch {
		case v == "default":
			for _, d := range defaultAnthropicBetas {
				out[d] = true
			}
		case v == "none":
			if len(list) > 1 {
				return nil, fmt.Errorf("anthropic_beta: none excludes other values")
			}
		case v == "" || strings.ContainsAny(v, ", \t"):
			return nil, fmt.Errorf("anthropic_beta %q: want one beta name per argument", v)
		default:
			out[v] = true
		}
	}
	return out, nil
}

// splitBetas splits anthropic-beta header values ("a,b", or several
// headers) into names, keeping those the provider allows and the others
// apart.
func splitBetas(values []string, allowed map[string]bool) (keep, dropped []string) {
	for _, v := range values {
		for _, b := range strings.Split(v, ",") {
			b = strings.TrimSpace(b)
			switch {
			case b == "":
			case allowed[b]:
				keep = append(keep, b)
			default:
				dropped = append(dropped, b)
			}
		}
	}
	return keep, dropped
}

// HostedPrices are the fees of a model's hosted tools, in currency units
// per 1,000 uses as vendors publish them ("" when the tool is not served).
type HostedPrices struct {
	WebSearch, WebFetch, ImageGeneration string
}

// SetHosted reads the model's hosted-tool prices and the upstream state it
// allows (allow_stateful).
func (m *Model) SetHosted(prices HostedPrices, allowStateful []string) error {
	for _, p := range []struct {
		kind formats.HostedKind
		in   string
		out  *ledger.Money
	}{
		{formats.HostedWebSearch, prices.WebSearch, &m.hostedPrice.WebSearch},
		{formats.HostedWebFetch, prices.WebFetch, &m.hostedPrice.WebFetch},
		{formats.HostedImageGeneration, prices.ImageGeneration, &m.hostedPrice.ImageGeneration},
	} {
		if p.in == "" {
			continue
		}
		v, err := ledger.ParsePerThousand(p.in)
		if err != nil {
			return fmt.Errorf("price %s %s: %w", p.kind, p.in, err)
		}
		*p.out, m.hostedPriced[p.kind] = v, true
	}
	for _, name := range allowStateful {
		s, ok := formats.ParseState(name)
		if !ok {
			return fmt.Errorf("allow_stateful: unknown state %q (want %s)", name, StateNames())
		}
		m.stateful[s] = true
	}
	return nil
}

// StateNames lists the states a model may allow, for messages.
func StateNames() string {
	var b strings.Builder
	for s := formats.StateStore; s < formats.StateBackground; s++ {
		if b.Len() > 0 {
			b.WriteString(", ")
		}
		b.WriteString(s.String())
	}
	return b.String()
}

// hostedUsePrice is the fee of one use of a kind (0 when unpriced).
func (m *Model) hostedUsePrice(k formats.HostedKind) ledger.Money {
	switch k {
	case formats.HostedWebSearch:
		return m.hostedPrice.WebSearch
	case formats.HostedWebFetch:
		return m.hostedPrice.WebFetch
	case formats.HostedImageGeneration:
		return m.hostedPrice.ImageGeneration
	}
	return 0
}

// hostedPlan is a model's decision on a request's hosted tools and state.
type hostedPlan struct {
	// edits are made to the body when it goes to an upstream of its own
	// format: unpriced tools removed, caps added, store false.
	edits formats.BodyEdits
	// dropped names the unpriced tools removed.
	dropped []string
	// hold is what the served hosted tools may cost: their uses × (fee +
	// result tokens at the dearest input price).
	hold ledger.Money
	// fixed are the uses billed whatever the answer shows (a Chat
	// Completions web search: one per request).
	fixed formats.HostedUses
}

// admitGated applies the model's prices and allowed state to a request's
// hosted tools and state (see the top of this file). A refusal is a 400
// naming the field; nothing is held or sent upstream.
func (m *Model) admitGated(req *genRequest) (*hostedPlan, *formats.Error) {
	plan := &hostedPlan{}
	if req.format == FormatResponses {
		// OpenAI stores responses unless told not to
		plan.edits.AddTop(formats.Member{Name: "store", Value: []byte("false")})
	}
	for i := range req.gated {
		g := &req.gated[i]
		if g.State != formats.StateNone && (!g.State.Configurable() || !m.stateful[g.State]) {
			return nil, stateRefused(g, m.ID)
		}
		if g.Hosted == formats.HostedNone || req.count {
			continue
		}
		if !m.hostedPriced[g.Hosted] {
			if g.Forced {
				return nil, formats.InvalidRequest("tool_choice", "Unsupported value for 'tool_choice': it forces the hosted tool "+
					g.Label+" ("+g.Param+"), which the model "+m.ID+" does not serve (the operator has set no price for "+
					g.Hosted.String()+").")
			}
			plan.drop(g)
			continue
		}
		uses := g.Uses()
		if g.Fixed {
			plan.fixed.Add(g.Hosted, uses)
		}
		plan.hold = addMoney(plan.hold, m.hostedBound(g.Hosted, uses))
		if g.Tool >= 0 && len(g.ToolAdd) > 0 {
			plan.edits.Tools = append(plan.edits.Tools, formats.ToolEdit{Index: g.Tool, Add: g.ToolAdd})
		}
		for _, t := range g.TopAdd {
			plan.edits.AddTop(t)
		}
	}
	return plan, nil
}

// drop removes an unpriced hosted tool from the body.
func (p *hostedPlan) drop(g *formats.Gated) {
	switch {
	case g.Top != "":
		p.edits.Delete = append(p.edits.Delete, g.Top)
	case g.Tool >= 0:
		p.edits.Tools = append(p.edits.Tools, formats.ToolEdit{Index: g.Tool, Drop: g.Member == "", DropMember: g.Member})
	}
	p.dropped = append(p.dropped, g.Label)
}

// stateRefused is the 400 for a use of upstream state the model does not
// allow.
func stateRefused(g *formats.Gated, modelID string) *formats.Error {
	p := g.Param
	var why string
	switch g.State {
	case formats.StateBackground:
		why = "background responses are not served: the gateway bills a response as it is delivered, and a background response is generated after the call ends."
	case formats.StateDocumentURL:
		why = "documents the provider fetches by URL are not accepted (nothing bounds their pages when the cost is held); send the document inline (base64)."
	default:
		why = "it reaches state kept in this gateway's account at the provider (" + g.State.String() +
			"), which the model " + modelID + " does not allow."
		if g.State == formats.StateStore {
			why += " Send 'store': false."
		}
	}
	return formats.InvalidRequest(p, "Unsupported parameter '"+p+"': "+why)
}

// hostedTally is what a call learns of its hosted-tool uses: the stream
// translator that counts them, or a whole answer's count.
type hostedTally struct {
	meter  formats.HostedMeter
	answer formats.HostedUses
}

// hostedUses merges every reading of the call's hosted-tool uses: the usage
// the caller settles with, the translator's count (which survives a stream
// cut before its usage), a whole answer's count, and the fixed uses of the
// request when it went upstream in its own format (a translation drops the
// tools).
func (c *call) hostedUses(u formats.Usage) formats.HostedUses {
	h := u.Hosted.Max(c.hosted.answer)
	if c.hosted.meter != nil {
		h = h.Max(c.hosted.meter.HostedUses())
	}
	if c.passThrough && c.req != nil && c.req.plan != nil {
		h = h.Max(c.req.plan.fixed)
	}
	return h
}

// hostedCost prices the call's hosted-tool uses at the model's fees; uses
// of an unpriced kind cost nothing (they are shown on the row).
func (c *call) hostedCost(u formats.Usage) (ledger.HostedUses, ledger.Money) {
	h := c.hostedUses(u)
	uses := ledger.HostedUses{WebSearch: h.WebSearch, WebFetch: h.WebFetch, ImageGeneration: h.ImageGeneration}
	cost, err := c.model.hostedPrice.Cost(uses)
	if err != nil {
		c.logger.Error("hosted-tool uses do not price", zap.String("request_id", c.reqID), zap.Error(err))
		return uses, 0
	}
	return uses, cost
}

// hostedHold is what the request's served hosted tools may cost.
func (c *call) hostedHold() ledger.Money {
	if c.req == nil || c.req.plan == nil {
		return 0
	}
	return c.req.plan.hold
}

// betaHeader filters the anthropic-beta values of an Anthropic client for
// an Anthropic provider.
func betaHeader(h http.Header, values []string, allowed map[string]bool) {
	keep, _ := splitBetas(values, allowed)
	if len(keep) > 0 {
		h["Anthropic-Beta"] = []string{strings.Join(keep, ",")}
	}
}
