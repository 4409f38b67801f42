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

// Values calls set with each known value, by placeholder name (model,
// provider, upstream_model, input_tokens, output_tokens, cost, usage_source,
// outcome); the usage ones only once the request is settled.
func (rp *Report) Values(set func(name string, value any)) {
	rp.mu.Lock()
	defer rp.mu.Unlock()
	if rp.model != "" {
		set("model", rp.model)
	}
	if !rp.settled {
		return
	}
	set("provider", rp.provider)
	set("upstream_model", rp.upstreamModel)
	set("input_tokens", rp.inputTokens)
	set("output_tokens", rp.outputTokens)
	set("cost", rp.charged.String())
	set("usage_source", rp.usageSource)
	set("outcome", rp.outcome)
}

// MarshalLogObject writes the report as a log object (zapcore.ObjectMarshaler).
func (rp *Report) MarshalLogObject(enc zapcore.ObjectEncoder) error {
	rp.Values(func(name string, value any) {
		switch v := value.(type) {
		case string:
			enc.AddString(name, v)
		case int64:
			enc.AddInt64(name, v)
		}
	})
	return nil
}
