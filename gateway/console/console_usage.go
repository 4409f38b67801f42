package console

import (
	"bytes"
	"cmp"
	"encoding/csv"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"time"

	"go.uber.org/zap"

	"github.com/modelgate/modelgate/gateway"
	"github.com/modelgate/modelgate/ledger"
	"github.com/modelgate/modelgate/relay"
	"github.com/modelgate/modelgate/web"
)

// Ranges of the usage views.
const (
	usageDefaultDays = 30
	usageMaxDays     = 366
	dayLayout        = "2006-01-02"
)

// usageQuery is the range and key a usage view shows.
type usageQuery struct {
	from, to time.Time
	keyID    string
	problem  string // why the asked range was changed, if it was
}

// days is the number of days of the range.
func (q usageQuery) days() int { return int(q.to.Sub(q.from)/(24*time.Hour)) + 1 }

// values is the query string of the range.
func (q usageQuery) values() string {
	v := url.Values{"from": {q.from.Format(dayLayout)}, "to": {q.to.Format(dayLayout)}}
	if q.keyID != "" {
		v.Set("key", q.keyID)
	}
	return v.Encode()
}

// parseUsageQuery reads from, to (UTC dates) and key of a usage view: by
// default the last 30 days, at most 366 days, the key one of keys.
func parseUsageQuery(v url.Values, keys []ledger.Key, now time.Time) usageQuery {
	today := now.UTC().Truncate(24 * time.Hour)
	q := usageQuery{to: today}
	if s := v.Get("to"); s != "" {
		if t, err := time.Parse(dayLayout, s); err == nil {
			q.to = t
		} else {
			q.problem = "The dates are written YYYY-MM-DD."
		}
	}
	q.from = q.to.AddDate(0, 0, -(usageDefaultDays - 1))
	if s := v.Get("from"); s != "" {
		if t, err := time.Parse(dayLayout, s); err == nil {
			q.from = t
		} else {
			q.problem = "The dates are written YYYY-MM-DD."
		}
	}
	if q.from.After(q.to) {
		q.from, q.to = q.to, q.from
	}
	if q.days() > usageMaxDays {
		q.from = q.to.AddDate(0, 0, -(usageMaxDays - 1))
		q.problem = "A range has at most 366 days: the last 366 days of it are shown."
	}
	if id := v.Get("key"); id != "" {
		for _, k := range keys {
			if k.ID == id {
				q.keyID = id
			}
		}
		if q.keyID == "" {
			q.problem = "That key is not one of yours: all keys are shown."
		}
	}
	return q
}

// usageTotals adds up usage.
type usageTotals struct {
	requests, input, output int64
	spent, discount         ledger.Money
}

func (t *usageTotals) add(d ledger.DailyUsage) {
	t.requests += d.Requests
	t.input += d.InputTokens
	t.output += d.OutputTokens
	t.spent += d.Spent
	t.discount += d.Discount
}

// line formats totals as a table row.
func (t usageTotals) line(name, detail string) web.UsageLine {
	return web.UsageLine{Name: name, Detail: detail, Requests: strconv.FormatInt(t.requests, 10),
		InputTokens: strconv.FormatInt(t.input, 10), OutputTokens: strconv.FormatInt(t.output, 10), Spent: web.AmountOf(t.spent),
		Discount: web.AmountOf(t.discount)}
}

// usageRows reads the account's rollup rows of the query's range.
func (h *ConsoleHandler) usageRows(c *consoleRequest) (usageQuery, []ledger.Key, []ledger.DailyUsage, bool) {
	ctx := c.r.Context()
	keys, err := h.app.Store().ListKeys(ctx, c.sess.account.ID)
	var rows []ledger.DailyUsage
	q := parseUsageQuery(c.r.URL.Query(), keys, time.Now())
	if err == nil {
		rows, err = h.app.Store().DailyUsageRows(ctx, c.sess.account.ID, q.keyID, q.from.Format(dayLayout))
	}
	if err != nil {
		h.logger.Error("reading usage", zap.String("account", c.sess.account.ID), zap.Error(err))
		h.message(c, http.StatusServiceUnavailable, "Unavailable", "The usage could not be read; try again.")
		return q, nil, nil, false
	}
	last := q.to.Format(dayLayout)
	rows = slices.DeleteFunc(rows, func(d ledger.DailyUsage) bool { return d.Day > last })
	return q, keys, rows, true
}

// serveUsage shows usage by day, key and model over a range, with charts.
func (h *ConsoleHandler) serveUsage(c *consoleRequest) {
	q, keys, rows, ok := h.usageRows(c)
	if !ok {
		return
	}
	c.frame.Heading, c.frame.Page, c.frame.Error = "Usage", "usage", q.problem
	p := &web.ConsoleUsage{From: q.from.Format(dayLayout), To: q.to.Format(dayLayout), KeyID: q.keyID,
		CSVHref: h.BasePath + "/usage.csv?" + q.values()}
	byID := make(map[string]ledger.Key, len(keys))
	for _, k := range keys {
		byID[k.ID] = k
		p.Keys = append(p.Keys, consoleKey(k, 0))
	}

	n := q.days()
	days := make([]string, n)
	perDay := make([]usageTotals, n)
	for i := range n {
		days[i] = q.from.AddDate(0, 0, i).Format(dayLayout)
	}
	perKey := map[string]*usageTotals{}
	perModel := map[string]*usageTotals{}
	var total usageTotals
	for _, d := range rows {
		t, err := time.Parse(dayLayout, d.Day)
		if i := int(t.Sub(q.from) / (24 * time.Hour)); err == nil && i >= 0 && i < n {
			perDay[i].add(d)
		}
		total.add(d)
		addTo(perKey, d.KeyID, d)
		addTo(perModel, d.Model, d)
	}

	byDay := web.UsageTable{Title: "By day", Column: "Day (UTC)", Name: "days"}
	for i := n - 1; i >= 0; i-- {
		if perDay[i].requests > 0 {
			byDay.Lines = append(byDay.Lines, perDay[i].line(days[i], ""))
		}
	}
	byKey := web.UsageTable{Title: "By key", Column: "Key", Name: "keys"}
	for _, id := range sortedBySpend(perKey) {
		name, detail := "(no key)", ""
		if k, ok := byID[id]; ok {
			name, detail = k.Prefix, k.Label
			if k.Deleted {
				detail = joinNonEmpty(detail, "deleted")
			}
		}
		byKey.Lines = append(byKey.Lines, perKey[id].line(name, detail))
	}
	byModel := web.UsageTable{Title: "By model", Column: "Model", Name: "models"}
	for _, m := range sortedBySpend(perModel) {
		byModel.Lines = append(byModel.Lines, perModel[m].line(m, ""))
	}
	p.Tables = []web.UsageTable{byDay, byKey, byModel}
	p.Total = total.line("Total", "")
	p.Month = consoleMonth(h.app.AccountPlan(c.sess.account.Plan), c.sess.account.MonthSpend, time.Now())

	series := func(name, class string, value func(usageTotals) int64, label func(int64) string) web.ChartSeries {
		s := web.ChartSeries{Name: name, Class: class, Values: make([]int64, n), Labels: make([]string, n)}
		for i := range perDay {
			s.Values[i] = value(perDay[i])
			s.Labels[i] = label(s.Values[i])
		}
		return s
	}
	count := func(v int64) string { return strconv.FormatInt(v, 10) }
	money := func(v int64) string { return ledger.Money(v).Display() + " " + h.app.Currency }
	p.Charts = []web.Chart{
		web.NewChart("requests", "Requests", days, count,
			series("requests", "s-requests", func(t usageTotals) int64 { return t.requests }, count)),
		web.NewChart("tokens", "Tokens", days, count,
			series("input tokens", "s-input", func(t usageTotals) int64 { return t.input }, count),
			series("output tokens", "s-output", func(t usageTotals) int64 { return t.output }, count)),
		web.NewChart("spent", "Spent ("+h.app.Currency+")", days, money,
			series("spent", "s-spent", func(t usageTotals) int64 { return int64(t.spent) }, money)),
	}
	p.ConsoleFrame = c.frame
	h.page(c, http.StatusOK, func(b io.Writer) error { return web.RenderConsoleUsage(b, p) })
}

// addTo adds a rollup row to the totals of name.
func addTo(m map[string]*usageTotals, name string, d ledger.DailyUsage) {
	t := m[name]
	if t == nil {
		t = new(usageTotals)
		m[name] = t
	}
	t.add(d)
}

// sortedBySpend returns the names of m, the biggest spender first.
func sortedBySpend(m map[string]*usageTotals) []string {
	names := make([]string, 0, len(m))
	for name := range m {
		names = append(names, name)
	}
	slices.SortFunc(names, func(a, b string) int {
		if c := cmp.Compare(m[b].spent, m[a].spent); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	})
	return names
}

// joinNonEmpty joins the non-empty strings with ", ".
func joinNonEmpty(a, b string) string {
	if a == "" {
		return b
	}
	return a + ", " + b
}

// serveUsageCSV exports the rollup rows of the range: one line per day,
// key and model, money as exact decimals.
func (h *ConsoleHandler) serveUsageCSV(c *consoleRequest) {
	q, keys, rows, ok := h.usageRows(c)
	if !ok {
		return
	}
	byID := make(map[string]ledger.Key, len(keys))
	for _, k := range keys {
		byID[k.ID] = k
	}
	var b bytes.Buffer
	w := csv.NewWriter(&b)
	_ = w.Write([]string{"day", "key_id", "key_prefix", "key_label", "model", "requests", "input_tokens",
		"output_tokens", "cache_read_tokens", "cache_write_tokens", "spent", "currency", "discount"})
	for _, d := range rows {
		k := byID[d.KeyID]
		_ = w.Write([]string{d.Day, d.KeyID, k.Prefix, csvText(k.Label), csvText(d.Model),
			strconv.FormatInt(d.Requests, 10), strconv.FormatInt(d.InputTokens, 10), strconv.FormatInt(d.OutputTokens, 10),
			strconv.FormatInt(d.CacheRead, 10), strconv.FormatInt(d.CacheWrite, 10), d.Spent.String(), h.app.Currency,
			d.Discount.String()})
	}
	w.Flush()
	hdr := c.w.Header()
	hdr.Set("Content-Type", "text/csv; charset=utf-8")
	hdr.Set("Content-Disposition", `attachment; filename="usage-`+q.from.Format(dayLayout)+`-to-`+q.to.Format(dayLayout)+`.csv"`)
	_, _ = c.w.Write(b.Bytes())
}

// csvText keeps a spreadsheet from reading a customer's text as a formula.
func csvText(s string) string {
	if s != "" && (s[0] == '=' || s[0] == '+' || s[0] == '-' || s[0] == '@' || s[0] == '\t' || s[0] == '\r') {
		return "'" + s
	}
	return s
}

// consoleMonth is the month's spend and volume tier of an account on plan
// p, nil when p has no tiers.
func consoleMonth(p *relay.Plan, spend ledger.Money, now time.Time) *web.ConsoleMonth {
	if p == nil || len(p.Tiers) == 0 {
		return nil
	}
	m := &web.ConsoleMonth{Month: now.UTC().Format("January 2006"), Spent: web.AmountOf(spend)}
	tier := func(t relay.Tier) string {
		return gateway.Percent(t.Bps) + " off, above " + t.Above.Rounded()
	}
	for _, t := range p.Tiers {
		if spend > t.Above {
			m.Tier = tier(t)
			continue
		}
		m.Next = tier(t)
		break
	}
	return m
}
