package relay

import (
	"context"
	"sync"

	"go.uber.org/zap/zapcore"

	"github.com/modelgate/modelgate/ledger"
)

// Report is what one API request's access log line and placeholders show of
// it, filled in as the request goes: the model once the body is parsed, the
// rest once it is settled. The caller puts one in the request's context
// (WithReport) and reads it when the relay is done; a bill the ledger takes
// later (collected in the background) fills it in then.
type Report struct {
	mu            sync.Mutex
	model         string
	provider      string
	upstreamModel string
	usageSource   string
	outcome       string
	inputTokens   int64
	outputTokens  int64
	charged       ledger.Money
	settled       bool
}

type reportKey struct{}

// WithReport returns ctx carrying a new Report, and the report.
func WithReport(ctx context.Context) (context.Context, *Report) {
	rp := new(Report)
	return context.WithValue(ctx, reportKey{}, rp), rp
}

// reportOf is ctx's report, or nil.
func reportOf(ctx context.Context) *Report {
	rp, _ := ctx.Value(reportKey{}).(*Report)
	return rp
}

// setModel records the requested model.
func (rp *Report) setModel(id string) {
	if rp == nil {
		return
	}
	rp.mu.Lock()
	rp.model = id
	rp.mu.Unlock()
}

// settled records a settled usage row.
func (rp *Report) setSettled(rec *ledger.UsageRecord) {
	if rp == nil {
		return
	}
	rp.mu.Lock()
	defer rp.mu.Unlock()
	rp.model, rp.provider, rp.upstreamModel = rec.Model, rec.Provider, rec.UpstreamModel
	rp.usageSource, rp.outcome = rec.UsageSource, rec.Outcome
	rp.inputTokens, rp.outputTokens, rp.charged = rec.Tokens.Input, rec.Tokens.Output, rec.Charged
	rp.settled = true
}

// Value is the value of the placeholder name (model, provider,
// upstream_model, input_tokens, output_tokens, cost, usage_source,
// outcome), if known: the usage ones only once the request is settled.
func (rp *Report) Value(name string) (any, bool) {
	rp.mu.Lock()
	defer rp.mu.Unlock()
	if name == "model" {
		return rp.model, rp.model != ""
	}
	if !rp.settled {
		return nil, false
	}
	switch name {
	case "provider":
		return rp.provider, true
	case "upstream_model":
		return rp.upstreamModel, true
	case "input_tokens":
		return rp.inputTokens, true
	case "output_tokens":
		return rp.outputTokens, true
	case "cost":
		return rp.charged.String(), true
	case "usage_source":
		return rp.usageSource, true
	case "outcome":
		return rp.outcome, true
	}
	return nil, false
}

// MarshalLogObject writes the report as a log object (zapcore.ObjectMarshaler).
func (rp *Report) MarshalLogObject(enc zapcore.ObjectEncoder) error {
	rp.mu.Lock()
	defer rp.mu.Unlock()
	if rp.model != "" {
		enc.AddString("model", rp.model)
	}
	if !rp.settled {
		return nil
	}
	enc.AddString("provider", rp.provider)
	enc.AddString("upstream_model", rp.upstreamModel)
	enc.AddInt64("input_tokens", rp.inputTokens)
	enc.AddInt64("output_tokens", rp.outputTokens)
	enc.AddString("cost", rp.charged.String())
	enc.AddString("usage_source", rp.usageSource)
	enc.AddString("outcome", rp.outcome)
	return nil
}
