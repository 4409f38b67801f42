package relay

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/modelgate/modelgate/ledger"
	"github.com/modelgate/modelgate/upstream"
)

// TestImagesBill: an images answer is billed its usage when the upstream
// reports it, else the model's per-image price, else the estimate of its
// images and prompt; never nothing.
func TestImagesBill(t *testing.T) {
	const body = `{"model":"m","prompt":"abcd","n":2,"size":"1024x1024","quality":"low"}`
	for _, tc := range []struct {
		name       string
		answer     string
		imagePrice ledger.Money
		tokens     ledger.Tokens
		charged    ledger.Money
		source     string
	}{
		{"usage reported", `{"created":1,"data":[{"b64_json":"x"},{"b64_json":"y"}],"usage":{"input_tokens":5,"output_tokens":10}}`,
			1000, ledger.Tokens{Input: 5, Output: 10}, 5 + 2*10, "upstream"},
		{"no usage: the per-image price", `{"created":1,"data":[{"b64_json":"x"},{"b64_json":"y"}]}`,
			1000, ledger.Tokens{}, 2 * 1000, "image_price"},
		// 4 prompt bytes: 1 token; 2 low-quality squares: 272 tokens each
		{"no usage, no per-image price: the estimate", `{"created":1,"data":[{"b64_json":"x"},{"b64_json":"y"}]}`,
			0, ledger.Tokens{Input: 1, Output: 2 * 272}, 1 + 2*2*272, "estimated"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fake := &fakeUpstream{status: 200, header: http.Header{"Content-Type": {"application/json"}}, body: tc.answer}
			svc, p := testService(t, upstream.FormatOpenAI, fake, 1_000_000)
			svc.Models["m"].ImagePrice = tc.imagePrice
			w := httptest.NewRecorder()
			svc.Images(w, httptest.NewRequest("POST", "/v1/images/generations", strings.NewReader(body)), p, false, "req_1")
			if w.Code != 200 || w.Header().Get("X-Modelgate-Request-Id") != "req_1" {
				t.Fatalf("%d %v %s", w.Code, w.Header(), w.Body.String())
			}
			rs := rows(t, svc, p.AccountID)
			if len(rs) != 1 {
				t.Fatalf("%d rows", len(rs))
			}
			row := rs[0]
			if row.Tokens != tc.tokens || row.Charged != tc.charged || row.UsageSource != tc.source ||
				row.ClientFormat != "openai.images" || row.Provider != "fake" || row.UpstreamModel != "up-m" || row.UpstreamKeyID == "" {
				t.Fatalf("row %+v", row)
			}
			if got := w.Header().Get("X-Modelgate-Cost"); got != tc.charged.String() {
				t.Fatalf("X-Modelgate-Cost %q, want %s", got, tc.charged)
			}
		})
	}
}
