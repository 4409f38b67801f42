package console

import (
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/modelgate/modelgate/accounts"
	"github.com/modelgate/modelgate/ledger"
	"github.com/modelgate/modelgate/web"
)

// A key's own limits in the console (docs/api.md, "Keys as projects"):
// set when the key is created, changed on its own page, and shown in the
// keys table with where its cap stands.

// limitsForm is a key's limits as its edit form starts.
func limitsForm(l *ledger.KeyLimits) web.KeyLimitsForm {
	f := web.KeyLimitsForm{Period: string(ledger.PeriodMonth), Models: strings.Join(l.Models, ", ")}
	if l.Capped() {
		f.Cap, f.Period = formAmount(l.Cap), string(l.Period)
	}
	if !l.ExpiresAt.IsZero() {
		f.Expires = l.ExpiresAt.UTC().Format(time.RFC3339)
	}
	if l.RPM > 0 {
		f.RPM = strconv.Itoa(l.RPM)
	}
	if l.Concurrency > 0 {
		f.Concurrency = strconv.Itoa(l.Concurrency)
	}
	return f
}

// postedLimits reads a key's limits from a posted form, and the form as
// it was sent. An empty cap is none (its period then resets nothing).
func postedLimits(r *http.Request) (ledger.KeyLimits, web.KeyLimitsForm, error) {
	v := r.PostForm
	f := web.KeyLimitsForm{Cap: strings.TrimSpace(v.Get("cap")), Period: v.Get("period"), Models: v.Get("models"),
		Expires: strings.TrimSpace(v.Get("expires")), RPM: strings.TrimSpace(v.Get("rpm")), Concurrency: strings.TrimSpace(v.Get("concurrency"))}
	var l ledger.KeyLimits
	if f.Cap != "" && !strings.EqualFold(f.Cap, "none") {
		m, err := ledger.ParseMoney(f.Cap)
		if err != nil || m <= 0 {
			return l, f, &accounts.InvalidError{Msg: "Spend cap: enter an amount such as 20.00 (at most 9 decimal places), or leave it empty for none."}
		}
		l.Cap, l.Period = m, ledger.Period(f.Period)
	}
	l.Models = accounts.ParseModelList(f.Models)
	t, err := accounts.ParseExpiry(f.Expires)
	if err != nil {
		return l, f, &accounts.InvalidError{Msg: "Expires: enter a date such as 2026-12-31 (00:00 UTC), a time such as 2026-12-31T18:00:00Z, or leave it empty for never."}
	}
	l.ExpiresAt = t
	for _, n := range []struct {
		name, s string
		to      *int
	}{{"Requests per minute", f.RPM, &l.RPM}, {"Requests at once", f.Concurrency, &l.Concurrency}} {
		if n.s == "" {
			continue
		}
		i, err := strconv.Atoi(n.s)
		if err != nil || i < 0 {
			return l, f, &accounts.InvalidError{Msg: n.name + ": enter a whole number, or leave it empty for your plan's."}
		}
		*n.to = i
	}
	return l, f, nil
}

// planLimits are the plan's rpm and concurrency for the forms ("" for
// none).
func (h *ConsoleHandler) planLimits(c *consoleRequest) (rpm, concurrency string) {
	p := h.app.AccountPlan(c.sess.account.Plan)
	if p == nil {
		return "", ""
	}
	if p.RPM > 0 {
		rpm = strconv.Itoa(p.RPM)
	}
	if p.Concurrency > 0 {
		concurrency = strconv.Itoa(p.Concurrency)
	}
	return rpm, concurrency
}

// refusal is the words of a refused key form: an *InvalidError's message
// as a sentence, with the first letter capitalised.
func refusal(err error) string {
	msg := err.Error()
	for from, to := range map[string]string{"rpm ": "Requests per minute ", "concurrency ": "Requests at once ", "cap ": "Spend cap ", "period ": "Cap resets "} {
		if rest, ok := strings.CutPrefix(msg, from); ok {
			msg = to + rest
		}
	}
	if msg != "" {
		msg = strings.ToUpper(msg[:1]) + msg[1:]
	}
	if !strings.HasSuffix(msg, ".") {
		msg += "."
	}
	return msg
}

// keyEditPage shows the form that changes a key's limits (f: as sent,
// after a refusal).
func (h *ConsoleHandler) keyEditPage(c *consoleRequest, status int, k ledger.Key, f web.KeyLimitsForm) {
	c.frame.Heading, c.frame.Page = "Key limits", "keys"
	p := &web.ConsoleKeyEdit{ConsoleFrame: c.frame, Key: consoleKey(k, h.app.KeyLeastRequest(c.sess.account.Plan, &k.Limits)), Form: f}
	p.PlanRPM, p.PlanConcurrency = h.planLimits(c)
	h.page(c, status, func(b io.Writer) error { return web.RenderConsoleKeyEdit(b, p) })
}

// serveKeyEdit shows (GET) and saves (POST) a key's limits.
func (h *ConsoleHandler) serveKeyEdit(c *consoleRequest, method string) {
	c.frame.Page = "keys"
	id := c.r.URL.Query().Get("id")
	if method == http.MethodPost {
		id = c.r.PostForm.Get("id")
	}
	k, ok := h.ownKey(c, id)
	if !ok {
		h.message(c, http.StatusNotFound, "No such key", "This key does not exist or is already deleted.")
		return
	}
	if method == http.MethodGet {
		h.keyEditPage(c, http.StatusOK, k, limitsForm(&k.Limits))
		return
	}
	l, f, err := postedLimits(c.r)
	if err == nil {
		_, err = h.app.Accounts().UpdateKey(c.r.Context(), k.ID, l)
	}
	switch {
	case accounts.IsInvalid(err):
		c.frame.Error = refusal(err)
		h.keyEditPage(c, http.StatusBadRequest, k, f)
		return
	case err != nil:
		h.logger.Error("changing a key's limits", zap.String("key_id", k.ID), zap.Error(err))
		c.frame.Error = "The limits could not be saved; try again."
		h.keyEditPage(c, http.StatusServiceUnavailable, k, f)
		return
	}
	http.Redirect(c.w, c.r, h.BasePath+"/keys?limits=1", http.StatusSeeOther)
}
