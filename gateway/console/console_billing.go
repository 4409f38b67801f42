package console

import (
	"bytes"
	"io"
	"net/http"
	"strconv"
	"time"

	"go.uber.org/zap"

	"github.com/modelgate/modelgate/accounts"
	"github.com/modelgate/modelgate/ledger"
	"github.com/modelgate/modelgate/web"
)

// billingPage is how many entries of the money history a page lists.
const billingPage = 50

// kindNames name the kinds of money entries for people.
var kindNames = map[string]string{
	ledger.KindCredit:      "Credit",
	ledger.KindTopup:       "Top-up",
	ledger.KindRefund:      "Refund",
	ledger.KindDispute:     "Dispute",
	ledger.KindDisputeWon:  "Dispute won",
	ledger.KindDisputeLost: "Dispute lost",
	ledger.KindAdjustment:  "Adjustment",
	ledger.KindDebtPayment: "Debt paid",
}

// serveBilling lists the account's money history, newest first, a page at
// a time (?before= the id the previous page ended at), with the balance
// and what it owes, and, with a payment provider, the automatic top-up
// (console_alerts.go).
func (h *ConsoleHandler) serveBilling(c *consoleRequest) {
	q := c.r.URL.Query()
	switch {
	case q.Get("autotopup") == "on":
		c.frame.Notice = "Automatic top-up is on."
	case q.Get("autotopup") == "off":
		c.frame.Notice = "Automatic top-up is off."
	case q.Get("card") == "saved":
		c.frame.Notice = "Thank you. The card shows here as soon as the payment provider confirms it."
	case q.Get("card") == "cancelled":
		c.frame.Notice = "No card was saved."
	}
	h.billingPage(c, http.StatusOK, nil)
}

// billingPage renders the Billing page; f is the automatic top-up's form
// as sent after a refusal (nil: the account's settings).
func (h *ConsoleHandler) billingPage(c *consoleRequest, status int, f *web.AutoTopupForm) {
	a := c.sess.account
	var before int64
	if v := c.r.URL.Query().Get("before"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n <= 0 {
			c.frame.Error = "That page does not exist: the newest entries are shown."
		} else {
			before = n
		}
	}
	page, err := h.app.Store().History(c.r.Context(), a.ID, before, billingPage)
	if err != nil {
		h.logger.Error("reading the money history", zap.String("account", a.ID), zap.Error(err))
		h.message(c, http.StatusServiceUnavailable, "Unavailable", "The billing history could not be read; try again.")
		return
	}
	top, err := h.autoTopupView(c, f)
	if err != nil {
		h.logger.Error("reading automatic top-up", zap.String("account", a.ID), zap.Error(err))
		h.message(c, http.StatusServiceUnavailable, "Unavailable", "The billing page could not be read; try again.")
		return
	}
	if top != nil {
		// the Save a card form is answered with a redirect to the
		// provider's page, which browsers hold to form-action
		c.csp = web.ContentSecurityPolicyFormTo(h.app.PaymentProvider().CheckoutOrigin())
	}
	c.frame.Heading, c.frame.Page = "Billing", "billing"
	p := &web.ConsoleBilling{AutoTopup: top, ConsoleFrame: c.frame, Balance: web.AmountOf(a.Balance), Owed: web.AmountOf(a.Owed), Owing: a.Owed > 0,
		CSVHref: h.BasePath + "/billing.csv"}
	if before != 0 {
		p.NewestHref = h.BasePath + "/billing"
	}
	if page.Next != 0 {
		p.OlderHref = h.BasePath + "/billing?before=" + strconv.FormatInt(page.Next, 10)
	}
	for _, e := range page.Entries {
		l := web.BillingLine{When: e.CreatedAt.UTC().Format("2006-01-02 15:04"), WhenISO: e.CreatedAt.UTC().Format(time.RFC3339),
			Kind: e.Kind, What: kindNames[e.Kind], Amount: web.AmountOf(e.Amount), Owed: web.AmountOf(e.Owed), HasOwed: e.Owed != 0,
			Detail: e.Reason}
		if l.What == "" {
			l.What = e.Kind
		}
		if e.BalanceAfter != nil {
			l.BalanceAfter, l.HasBalance = web.AmountOf(*e.BalanceAfter), true
		}
		p.Lines = append(p.Lines, l)
	}
	h.page(c, status, func(b io.Writer) error { return web.RenderConsoleBilling(b, p) })
}

// serveBillingCSV downloads the account's whole money history as CSV,
// amounts exact (accounts.WriteHistoryCSV, as the CLI prints it).
func (h *ConsoleHandler) serveBillingCSV(c *consoleRequest) {
	entries, err := h.app.Accounts().AllHistory(c.r.Context(), c.sess.account.ID)
	var b bytes.Buffer
	if err == nil {
		err = accounts.WriteHistoryCSV(&b, entries)
	}
	if err != nil {
		h.logger.Error("reading the money history", zap.String("account", c.sess.account.ID), zap.Error(err))
		h.message(c, http.StatusServiceUnavailable, "Unavailable", "The billing history could not be read; try again.")
		return
	}
	hdr := c.w.Header()
	hdr.Set("Content-Type", "text/csv; charset=utf-8")
	hdr.Set("Content-Disposition", `attachment; filename="billing-`+time.Now().UTC().Format(dayLayout)+`.csv"`)
	_, _ = c.w.Write(b.Bytes())
}
