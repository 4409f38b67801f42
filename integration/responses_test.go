package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"

	"github.com/modelgate/modelgate/mockupstream"
)

// askResponses sends one turn through the Responses API with the OpenAI
// SDK. A stream is checked event by event (sequence numbers from 0, one
// terminal event) and accumulated with the SDK's accumulator.
func (g *testGateway) askResponses(t *testing.T, key, model, system, prompt string, stream, tools bool) (turn, *responses.Response) {
	t.Helper()
	p := responses.ResponseNewParams{
		Model:           model,
		Instructions:    openai.String(system),
		Input:           responses.ResponseNewParamsInputUnion{OfString: openai.String(prompt)},
		MaxOutputTokens: openai.Int(100),
		Store:           openai.Bool(false),
	}
	if tools {
		p.Tools = []responses.ToolUnionParam{responses.ToolParamOfFunction("get_weather", weatherSchema, false)}
	}
	c := g.client(key)
	var r *responses.Response
	if stream {
		s := c.Responses.NewStreaming(context.Background(), p)
		var acc responses.ResponseAccumulator
		var seq int64
		var deltas strings.Builder
		var final *responses.Response
		for s.Next() {
			ev := s.Current()
			if ev.SequenceNumber != seq {
				t.Fatalf("%s: event %s has sequence_number %d, want %d", model, ev.Type, ev.SequenceNumber, seq)
			}
			seq++
			if final != nil {
				t.Fatalf("%s: event %s after the terminal event", model, ev.Type)
			}
			var se responses.ResponsesServerEventUnion
			if err := json.Unmarshal([]byte(ev.RawJSON()), &se); err != nil {
				t.Fatalf("%s: %v in %s", model, err, ev.RawJSON())
			}
			if err := acc.AddEvent(se); err != nil {
				t.Fatalf("%s: the accumulator refused %s: %v", model, ev.RawJSON(), err)
			}
			switch ev.Type {
			case "response.output_text.delta":
				deltas.WriteString(ev.Delta)
			case "response.completed", "response.incomplete":
				resp := ev.Response
				final = &resp
			}
		}
		if err := s.Err(); err != nil {
			t.Fatalf("responses stream via %s: %v", model, err)
		}
		if final == nil {
			t.Fatalf("%s: no terminal event", model)
		}
		rebuilt, err := acc.ReconstructedResponse()
		if err != nil {
			t.Fatalf("%s: reconstructing: %v", model, err)
		}
		if rebuilt.OutputText() != final.OutputText() || deltas.String() != final.OutputText() {
			t.Fatalf("%s: accumulated %q, deltas %q, final %q", model, rebuilt.OutputText(), deltas.String(), final.OutputText())
		}
		r = final
	} else {
		var err error
		r, err = c.Responses.New(context.Background(), p)
		if err != nil {
			t.Fatalf("responses via %s: %v", model, err)
		}
	}
	tr := turn{text: r.OutputText(), in: r.Usage.InputTokens, out: r.Usage.OutputTokens, model: r.Model, finish: string(r.Status)}
	for _, item := range r.Output {
		if item.Type == "function_call" {
			tr.toolID, tr.toolName, tr.args = item.CallID, item.Name, item.Arguments.OfString
			break
		}
	}
	return tr, r
}

// TestResponsesEveryUpstream: the Responses API through the OpenAI SDK to
// models of each upstream format (passed through to the OpenAI one,
// translated to the others), streamed and not: the same text, the usage
// the client sees, and an exact debit with its usage row.
func TestResponsesEveryUpstream(t *testing.T) {
	g := startGateway(t, gatewayOptions{})
	acct, key := g.account("1.00")
	const system, prompt = "Be brief.", "Tell me something about the sea"
	wantIn := mockTokensSys(system, prompt)
	for _, model := range everyUpstream {
		for _, stream := range []bool{false, true} {
			name := fmt.Sprintf("responses → %s upstream, stream=%v", upstreamOf(model), stream)
			before, _ := g.balance(acct)
			tr, _ := g.askResponses(t, key, model, system, prompt, stream, false)
			after, held := g.balance(acct)
			switch {
			case tr.text != mockupstream.ReplyText(12):
				t.Errorf("%s: text %q", name, tr.text)
			case tr.in != wantIn || tr.out != 12:
				t.Errorf("%s: usage %d/%d, want %d/12", name, tr.in, tr.out, wantIn)
			case tr.model != model:
				t.Errorf("%s: model %q", name, tr.model)
			case tr.finish != "completed":
				t.Errorf("%s: status %q", name, tr.finish)
			case before-after != cost(wantIn, 12) || held != 0:
				t.Errorf("%s: debit %s, want %s (held %s)", name, before-after, cost(wantIn, 12), held)
			}
			row := g.rows(acct)[0]
			if row.ClientFormat != "openai.responses" || row.Stream != stream || row.UsageSource != "upstream" ||
				row.Provider != map[string]string{"openai": "mock", "anthropic": "mock-anthropic", "gemini": "mock-gemini"}[upstreamOf(model)] {
				t.Errorf("%s: row %+v", name, row)
			}
		}
	}
	// the OpenAI upstream got the Responses API itself
	paths := map[string]int{}
	for _, r := range g.mock.Requests() {
		paths[r.Path]++
	}
	if paths["/v1/responses"] != 2 || paths["/v1/chat/completions"] != 0 {
		t.Errorf("upstream paths %v", paths)
	}
	if n := len(g.rows(acct)); n != 6 {
		t.Errorf("%d rows, want 6", n)
	}
	g.audit()
}

// TestResponsesToolCalls: a function call made by any upstream reaches a
// Responses client as a function_call item with its call id, name and
// arguments; the answer to it goes back as function_call_output.
func TestResponsesToolCalls(t *testing.T) {
	g := startGateway(t, gatewayOptions{})
	_, key := g.account("1.00")
	for _, model := range everyUpstream {
		for _, stream := range []bool{false, true} {
			name := fmt.Sprintf("responses → %s upstream, stream=%v", upstreamOf(model), stream)
			tr, r := g.askResponses(t, key, model, "Use tools.", "What is the weather in Paris? mock:tool=get_weather", stream, true)
			var args map[string]any
			if tr.toolName != "get_weather" || json.Unmarshal([]byte(tr.args), &args) != nil || args["city"] != "Paris" ||
				tr.toolID == "" || tr.finish != "completed" {
				t.Errorf("%s: call %+v", name, tr)
				continue
			}
			// the second turn: the call and its output
			output := responses.ResponseInputItemParamOfFunctionCallOutput("18°C and cloudy")
			output.OfFunctionCallOutput.CallID = openai.String(tr.toolID)
			p := responses.ResponseNewParams{
				Model: model,
				Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{
					responses.ResponseInputItemParamOfMessage("What is the weather in Paris?", responses.EasyInputMessageRoleUser),
					responses.ResponseInputItemParamOfFunctionCall(tr.args, tr.toolID, tr.toolName),
					output,
				}},
				Tools: []responses.ToolUnionParam{responses.ToolParamOfFunction("get_weather", weatherSchema, false)},
				Store: openai.Bool(false),
			}
			r2, err := g.client(key).Responses.New(context.Background(), p)
			if err != nil || r2.OutputText() == "" {
				t.Errorf("%s: second turn: %v", name, err)
			}
			_ = r
		}
	}
}
