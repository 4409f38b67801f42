package relay

import (
	"bytes"
	"context"
	"errors"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"go.uber.org/zap"

	"github.com/modelgate/modelgate/formats"
	"github.com/modelgate/modelgate/formats/images"
	"github.com/modelgate/modelgate/upstream"
)

// The OpenAI images routes (docs/api.md): POST /v1/images/generations
// (JSON) and POST /v1/images/edits (a multipart form, forwarded as it
// arrives). Only a model's OpenAI-format routes make images; the request
// goes to them with the model rewritten, and the answer, whose usage comes
// last, is read whole, billed, then sent.

// imageCall is one images request on its way through the gateway.
type imageCall struct {
	request
	req  *images.Request
	body []byte       // a generation's JSON body
	form *images.Form // an edit's form
}

// Images serves POST /v1/images/generations, or /v1/images/edits when
// edit is set, for p (authenticated and admitted by the caller).
func (s *Service) Images(w http.ResponseWriter, r *http.Request, p Principal, edit bool, reqID string) {
	ic := &imageCall{request: request{svc: s, logger: s.Logger, reqID: reqID, start: time.Now(), principal: p, format: FormatImages}}
	if !edit {
		body, ferr := ReadBody(r, s.MaxRequestBody)
		if ferr == nil {
			ic.req, ferr = images.ParseGeneration(body)
		}
		if ferr != nil {
			WriteError(w, FormatImages, ferr)
			return
		}
		ic.body = body
	} else {
		boundary, ferr := formBoundary(r.Header.Get("Content-Type"))
		if ferr == nil {
			ic.form, ferr = images.ReadForm(r.Body, boundary, images.FormOptions{
				Limit:       s.imageBodyLimit(),
				Spool:       s.ImageSpool,
				BeforeSpool: func() *formats.Error { return s.beforeSpool(r.Context(), p) },
			})
		}
		if ferr != nil {
			WriteError(w, FormatImages, ferr)
			return
		}
		defer ic.form.Close()
		ic.req = &ic.form.Request
	}
	m, ok := s.ModelFor(p, ic.req.Model)
	if !ok {
		WriteError(w, FormatImages, ModelNotFound(ic.req.Model))
		return
	}
	if !m.MakesImages() {
		WriteError(w, FormatImages, formats.InvalidRequest("model", "The model "+strconv.Quote(m.ID)+
			" is not served by an OpenAI-format provider, so it cannot make images. Use an image model such as one routed to OpenAI."))
		return
	}
	ic.model = m
	ic.report = reportOf(r.Context())
	ic.report.setModel(m.ID)
	if ferr := ic.takeHold(w.Header(), imageQuote(m, ic.req, ic.form)); ferr != nil {
		WriteError(w, FormatImages, ferr)
		return
	}
	defer ic.bill.Release()
	if ic.form != nil {
		ic.form.Late = ic.late
	}
	ic.run(w, r, m.imageRoutes, ic)
}

// beforeSpool lets an edit form spool the files it sends before its model
// only if the balance covers the cheapest edit any image model could be
// held for: the model is not known yet, the account is.
func (s *Service) beforeSpool(ctx context.Context, p Principal) *formats.Error {
	if len(s.imageModels) == 0 {
		return formats.InvalidRequest("model", "No model of this gateway makes images.")
	}
	acct, err := s.Store.GetAccount(ctx, p.AccountID)
	if err != nil {
		s.Logger.Error("reading a balance", zap.String("account", p.AccountID), zap.Error(err))
		return formats.NewError(formats.KindInternal, "The gateway could not read your balance; try again.")
	}
	least := s.imageModels[0].leastEdit()
	for _, m := range s.imageModels[1:] {
		least = min(least, m.leastEdit())
	}
	if acct.Balance-acct.Held < least {
		return &formats.Error{Kind: formats.KindInsufficientQuota,
			Message: "Your balance does not cover one image edit at this gateway's cheapest image model. Top up your balance and try again."}
	}
	return nil
}

// formBoundary checks an edit's Content-Type.
func formBoundary(contentType string) (string, *formats.Error) {
	mt, params, err := mime.ParseMediaType(contentType)
	if err != nil || mt != "multipart/form-data" || params["boundary"] == "" {
		return "", formats.InvalidRequest("", "POST /v1/images/edits takes a multipart/form-data body (with a boundary), not "+
			strconv.Quote(contentType)+".")
	}
	return params["boundary"], nil
}

// imageBodyLimit is the largest edit form accepted: twice the request body
// limit (64 MiB by default).
func (s *Service) imageBodyLimit() int64 { return 2 * s.MaxRequestBody }

// late checks a part of an edit form that arrived after the hold was taken
// (Form.Late), once it is applied: the request as it now stands must still
// be covered by the hold, or the part is refused, unsent, naming its field.
// So whatever the upstream is asked was held for.
func (ic *imageCall) late(name string) *formats.Error {
	if ic.model.imageNow(ic.req, ic.form) <= ic.bill.Held() {
		return nil
	}
	return formats.InvalidRequest(name, "The form field '"+name+"' came after the first image file that follows the model, "+
		"when this request's funds were already held, and asks for more than was held ("+ic.bill.Held().String()+
		" "+ic.svc.Currency+"). Send model, n, size, quality and prompt before the image files, or top up your balance.")
}

// replayable reports whether the request can still go upstream: an edit
// whose parts were forwarded straight from the client cannot be sent
// again, so it gets no second attempt.
func (ic *imageCall) replayable() bool { return ic.form == nil || ic.form.Replayable() }

// errAttemptOver ends the forwarding of a form once its attempt is over.
var errAttemptOver = errors.New("the upstream attempt is over")

// try makes one attempt at the request's route, one of the model's
// OpenAI-format routes (see exchange). The answer, whose usage comes last,
// is read whole, billed, then sent.
func (ic *imageCall) try(w http.ResponseWriter, r *http.Request, _ int) error {
	p := ic.route.Provider
	ic.svc.Metrics.Attempt(p.Name, ic.upstreamKeyID)

	// Once sent, the upstream call outlives a client that goes away: the
	// provider makes (and charges for) the images whether or not anyone
	// reads them, so the gateway reads the answer and bills it. An edit
	// whose client leaves before the form is whole breaks the form, and the
	// upstream makes nothing.
	if r.Context().Err() != nil {
		return nil // nothing sent: nothing made
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), p.ResponseTimeout)
	defer cancel()
	up, ferr := ic.upload()
	if ferr != nil {
		WriteError(w, FormatImages, ferr)
		return nil
	}
	defer func() { _ = up.finish() }() // ends the form's forwarding on every path; its result was taken where it could be answered
	u := &url.URL{Scheme: p.Scheme, Host: p.DialAddress, Path: p.PathPrefix + up.path}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), up.body)
	if err != nil {
		ic.logger.Error("building an upstream request", zap.String("provider", p.Name), zap.Error(err))
		WriteError(w, FormatImages, formats.NewError(formats.KindInternal, "The gateway could not build the upstream request."))
		return nil
	}
	req.Host = p.Host
	req.Header = upstreamHeader(p, ic.attempt.Key.Secret(), up.contentType, "application/json", nil)

	sent := time.Now()
	resp, err := p.Upstream.RoundTrip(req)
	timedOut := func() bool { return errors.Is(ctx.Err(), context.DeadlineExceeded) }
	if err != nil {
		if r.Context().Err() != nil {
			_ = up.finish() // a broken form has nobody to be told of it
			return nil      // the client left
		}
		c, hint, e := transportFailure(err, timedOut())
		return ic.failed(w, up, c, hint, e)
	}
	defer resp.Body.Close()
	ic.svc.Metrics.Headers(p.Name, ic.upstreamKeyID, time.Since(sent))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		uerr, c, hint, failed := ic.classifyUpstreamError(resp)
		if !failed {
			ic.attempt.Succeeded(0) // the upstream is fine; the request was not
			if ce := up.finish(); ce != nil {
				uerr = ce // it was the client's broken form
			}
			WriteError(w, FormatImages, uerr)
			return nil
		}
		return ic.failed(w, up, c, hint, uerr)
	}
	data, err := readAll(resp.Body, maxResponseBody)
	if err != nil {
		c, hint, e := brokeOff(timedOut(), "The upstream provider's answer broke off.")
		return ic.failed(w, up, c, hint, e)
	}
	_ = up.finish() // the upstream has answered: it read the whole form, and the images it made are billed
	ans, err := images.ParseAnswer(data)
	if err != nil {
		return ic.failed(w, up, upstream.CauseServer, 0, formats.NewError(formats.KindUpstream, "The upstream provider sent an unusable answer."))
	}
	ic.attempt.Succeeded(time.Since(sent))
	ic.answer(w, r, ans, data)
	return nil
}

// answer bills an images answer and sends it. A client that left while the
// images were made is billed all the same.
func (ic *imageCall) answer(w http.ResponseWriter, r *http.Request, ans images.Answer, data []byte) {
	if r.Context().Err() != nil {
		_ = ic.settle(ans, true)
		return
	}
	if err := ic.settle(ans, false); err != nil {
		WriteError(w, FormatImages, billingFailed())
		return
	}
	ic.bill.setCostHeader(w.Header())
	WriteJSON(w, http.StatusOK, data)
}

// failed reports the attempt's failure (fail), unless the client's side of
// an edit's form failed: that is the client's answer, and the upstream is
// not to blame.
func (ic *imageCall) failed(w http.ResponseWriter, up *imageUpload, c upstream.Cause, retryAfter time.Duration, e *formats.Error) error {
	if ce := up.finish(); ce != nil {
		WriteError(w, FormatImages, ce)
		return nil
	}
	return ic.fail(c, retryAfter, e)
}

// imageUpload is an images request on its way to the route's upstream: its
// path, body and Content-Type, and for an edit the forwarding of its form.
type imageUpload struct {
	path, contentType string
	body              io.Reader
	// finish, for an edit, ends the forwarding of the form (if the
	// upstream stopped reading it) and reports a failure on the client's
	// side of it; it may be called more than once.
	finish func() *formats.Error
}

// upload builds the request for the route: a generation's JSON body with
// the model rewritten, or an edit's form forwarded as it arrives, through
// a pipe, with the model rewritten.
func (ic *imageCall) upload() (*imageUpload, *formats.Error) {
	if ic.form == nil {
		out, err := images.RewriteGeneration(make([]byte, 0, len(ic.body)+32), ic.body, ic.route.UpstreamModel)
		if err != nil {
			// validated already: cannot happen
			return nil, formats.InvalidRequest("", "The request body is not a JSON object.")
		}
		return &imageUpload{path: "/v1/images/generations", contentType: "application/json", body: bytes.NewReader(out),
			finish: func() *formats.Error { return nil }}, nil
	}
	pr, pw := io.Pipe()
	mw := multipart.NewWriter(pw)
	written := make(chan error, 1)
	form, upstreamModel := ic.form, ic.route.UpstreamModel
	go func() {
		err := form.WriteTo(mw, upstreamModel)
		if err == nil {
			err = mw.Close()
		}
		pw.CloseWithError(err)
		written <- err
	}()
	var werr error
	finished := false
	finish := func() *formats.Error {
		if !finished {
			finished = true
			pr.CloseWithError(errAttemptOver)
			werr = <-written
		}
		var ce *images.ClientError
		if errors.As(werr, &ce) {
			return ce.Err
		}
		return nil
	}
	return &imageUpload{path: "/v1/images/edits", contentType: mw.FormDataContentType(), body: pr, finish: finish}, nil
}

// settle bills the answer (Bill.SettleImages). clientGone marks an answer
// whose client left before it came (outcome client_closed, collected even
// when the ledger is slow to take it).
func (ic *imageCall) settle(ans images.Answer, clientGone bool) error {
	ic.ttft = time.Since(ic.start) // an image answer arrives whole
	e := End{Status: http.StatusOK, Outcome: outcomeOK}
	if clientGone {
		e.Status, e.Outcome, e.Collect = statusClientClosed, outcomeClientClosed, true
	}
	return ic.bill.SettleImages(ans, ic.req, e)
}
