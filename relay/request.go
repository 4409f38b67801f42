package relay

import (
	"net/http"
	"time"

	"go.uber.org/zap"

	"github.com/modelgate/modelgate/formats"
	"github.com/modelgate/modelgate/upstream"
)

// request is what every route knows of one API request once its model is
// found: who asks, for which model, in which format, its bill and the
// upstream attempt under way. A generation's call and an images call embed
// it, and its bill points to it: each fact about the request is kept once.
type request struct {
	svc       *Service
	logger    *zap.Logger
	reqID     string
	start     time.Time
	principal Principal
	model     *Model
	format    Format
	stream    bool
	// inputEstimate is the request's own estimate of its input tokens,
	// billed when the upstream reported none.
	inputEstimate int64
	report        *Report // what the access log shows of the request, if anything

	bill *Bill // the money side, once the hold is taken

	// The upstream attempts (see run): every one so far, the current one,
	// its route and key; ttft is when the client had its first bytes (0
	// before).
	tried         []*upstream.Attempt
	attempt       *upstream.Attempt
	route         *Route
	upstreamKeyID string
	ttft          time.Duration
}

// takeHold opens the request's bill with a hold sized by q and names, on
// every answer the request gets from then on, the usage row that bills it
// (X-Modelgate-Request-Id, for GET /api/usage/requests/{id}: a stream's
// cost is known only after its headers went). A balance that does not
// cover q.least is the client's 403, for the caller to write.
func (rq *request) takeHold(h http.Header, q quote) *formats.Error {
	bill, ferr := rq.svc.openBill(rq, q)
	if ferr != nil {
		return ferr
	}
	rq.bill = bill
	h.Set("X-Modelgate-Request-Id", rq.reqID)
	return nil
}
