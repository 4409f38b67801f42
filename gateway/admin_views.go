package gateway

import (
	"bufio"
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/modelgate/modelgate/ledger"
)

// The operator's views of accounts (docs/operations.md,
// "Finding accounts and exporting usage"), on the admin API:
//
//	GET /modelgate/accounts?email=&state=&plan=&limit=&cursor= → {"accounts": […], "next": "…"}
//	GET /modelgate/accounts/{id}/keys                          → the keys with their totals and limits (never a key or its hash)
//	GET /modelgate/accounts/{id}/usage?from=&to=               → the usage rows as CSV, streamed
//
// (the keys route is registered with the others, in admin.go), and,
// sharing their formats, on the CLI (command_views.go).

// viewRoutes are the admin routes of the operator's views.
func (a *AdminAPI) viewRoutes() map[string]adminFunc {
	return map[string]adminFunc{
		"GET /modelgate/accounts":            a.listAccounts,
		"GET /modelgate/accounts/{id}/usage": a.exportUsage,
	}
}

// accountList is a page of accounts as the admin API and `account list
// --json` show it.
type accountList struct {
	Accounts []adminAccount `json:"accounts"`
	// Next is the cursor of the next page; absent on the last page.
	Next string `json:"next,omitempty"`
}

// keySummary is a key with its running totals, as the admin API and `key
// list --json` show it: never the key or its hash, only the prefix that
// was shown when it was created.
type keySummary struct {
	ID           string       `json:"id"`
	AccountID    string       `json:"account_id"`
	Label        string       `json:"label,omitempty"`
	Prefix       string       `json:"prefix"`
	CreatedAt    time.Time    `json:"created_at"`
	LastUsedAt   *time.Time   `json:"last_used_at,omitempty"`
	DeletedAt    *time.Time   `json:"deleted_at,omitempty"`
	Requests     int64        `json:"requests"`
	InputTokens  int64        `json:"input_tokens"`
	OutputTokens int64        `json:"output_tokens"`
	Spent        ledger.Money `json:"spent"`
	keyLimitsView
}

func toAccountView(a ledger.Account) adminAccount {
	return adminAccount{ID: a.ID, Email: a.Email, Plan: a.Plan, State: a.State, Balance: a.Balance, Held: a.Held,
		Owed: a.Owed, SuspendedFor: a.SuspendedFor, CreatedAt: a.CreatedAt, MonthSpend: a.MonthSpend}
}

func toKeySummary(k ledger.KeySummary) keySummary {
	ks := keySummary{ID: k.ID, AccountID: k.AccountID, Label: k.Label, Prefix: k.Prefix, CreatedAt: k.CreatedAt,
		Requests: k.Requests, InputTokens: k.InputTokens, OutputTokens: k.OutputTokens, Spent: k.Spent,
		keyLimitsView: toKeyLimitsView(&k.Key, time.Now())}
	if !k.LastUsedAt.IsZero() {
		t := k.LastUsedAt
		ks.LastUsedAt = &t
	}
	if k.Deleted {
		t := k.DeletedAt
		ks.DeletedAt = &t
	}
	return ks
}

// accountQuery reads a listing's parameters (the admin API's query, the
// CLI's flags), refusing what ListAccounts would not take.
func accountQuery(email, state, plan, limit, cursor string) (ledger.AccountQuery, error) {
	q := ledger.AccountQuery{Email: email, State: ledger.State(state), Plan: plan, Cursor: cursor}
	switch q.State {
	case "", ledger.StateActive, ledger.StateSuspended:
	default:
		return q, fmt.Errorf("state %q: want %s or %s", state, ledger.StateActive, ledger.StateSuspended)
	}
	if limit != "" {
		n, err := strconv.Atoi(limit)
		if err != nil || n < 1 || n > ledger.MaxAccountPage {
			return q, fmt.Errorf("limit %q: want a number of accounts from 1 to %d", limit, ledger.MaxAccountPage)
		}
		q.Limit = n
	}
	return q, nil
}

// viewParams refuses a query with a parameter not in names (a misspelt
// filter would otherwise list every account).
func viewParams(v url.Values, names ...string) error {
	for k := range v {
		known := false
		for _, n := range names {
			known = known || k == n
		}
		if !known {
			return adminBadRequest("%q is not a parameter of this route (it takes %s)", k, strings.Join(names, ", "))
		}
	}
	return nil
}

func (a *AdminAPI) listAccounts(w http.ResponseWriter, r *http.Request, app *App) error {
	v := r.URL.Query()
	if err := viewParams(v, "email", "state", "plan", "limit", "cursor"); err != nil {
		return err
	}
	q, err := accountQuery(v.Get("email"), v.Get("state"), v.Get("plan"), v.Get("limit"), v.Get("cursor"))
	if err != nil {
		return adminBadRequest("%v", err)
	}
	page, err := app.store.ListAccounts(r.Context(), q)
	if errors.Is(err, ledger.ErrBadCursor) {
		return adminBadRequest("cursor: not the next cursor of a listing; start again without one")
	}
	if err != nil {
		return ledgerError(err)
	}
	out := accountList{Accounts: make([]adminAccount, 0, len(page.Accounts)), Next: page.Next}
	for _, acct := range page.Accounts {
		out.Accounts = append(out.Accounts, toAccountView(acct))
	}
	return writeAdminJSON(w, http.StatusOK, out)
}

// writeKeySummaries answers with an account's keys and their running
// totals.
func writeKeySummaries(w http.ResponseWriter, r *http.Request, app *App, id string) error {
	keys, err := app.store.ListKeySummaries(r.Context(), id)
	if err != nil {
		return ledgerError(err)
	}
	out := make([]keySummary, 0, len(keys))
	for _, k := range keys {
		out = append(out, toKeySummary(k))
	}
	return writeAdminJSON(w, http.StatusOK, out)
}

// writeKey answers with one key, its running totals and its limits.
func writeKey(w http.ResponseWriter, r *http.Request, app *App, id string) error {
	k, err := app.store.KeyByID(r.Context(), id)
	if err != nil {
		return ledgerError(err)
	}
	u, err := app.store.KeyUsage(r.Context(), id)
	if err != nil {
		return ledgerError(err)
	}
	return writeAdminJSON(w, http.StatusOK, toKeySummary(ledger.KeySummary{Key: k, Requests: u.Requests,
		InputTokens: u.InputTokens, OutputTokens: u.OutputTokens, Spent: u.Spent}))
}

// usageRange reads an export's range, its ends named fromName and toName
// in messages: dates (2026-11-01, UTC midnight) or RFC 3339 times; from
// included, to excluded; both required.
func usageRange(fromName, from, toName, to string) (time.Time, time.Time, error) {
	parse := func(name, s string) (time.Time, error) {
		if s == "" {
			return time.Time{}, fmt.Errorf("%s is required: a date such as 2026-11-01 (UTC) or an RFC 3339 time", name)
		}
		if t, err := time.Parse(time.DateOnly, s); err == nil {
			return t, nil
		}
		if t, err := time.Parse(time.RFC3339, s); err == nil {
			return t, nil
		}
		return time.Time{}, fmt.Errorf("%s %q: want a date such as 2026-11-01 (UTC) or an RFC 3339 time", name, s)
	}
	f, err := parse(fromName, from)
	if err != nil {
		return f, f, err
	}
	t, err := parse(toName, to)
	if err != nil {
		return f, t, err
	}
	if !f.Before(t) {
		return f, t, fmt.Errorf("the range is empty: %s %s is not before %s %s (the end is excluded)", fromName, from, toName, to)
	}
	return f, t, nil
}

// exportUsage streams an account's usage rows in a range as CSV. The
// status and header are sent with the first row, so that an unknown
// account is still a 404.
func (a *AdminAPI) exportUsage(w http.ResponseWriter, r *http.Request, app *App) error {
	v := r.URL.Query()
	if err := viewParams(v, "from", "to"); err != nil {
		return err
	}
	from, to, err := usageRange("from", v.Get("from"), "to", v.Get("to"))
	if err != nil {
		return adminBadRequest("%v", err)
	}
	id := r.PathValue("id")
	keys, err := app.store.ListKeySummaries(r.Context(), id)
	if err != nil {
		return ledgerError(err)
	}
	hdr := w.Header()
	hdr.Set("Content-Type", "text/csv; charset=utf-8")
	hdr.Set("Content-Disposition", `attachment; filename="usage-`+id+`-`+from.UTC().Format(time.DateOnly)+`-to-`+to.UTC().Format(time.DateOnly)+`.csv"`)
	w.WriteHeader(http.StatusOK)
	if _, err := writeUsageCSV(r.Context(), w, app.store, id, from, to, keys); err != nil {
		// The status is sent: the connection is cut, so that the client
		// sees an incomplete answer rather than a short export.
		if r.Context().Err() == nil {
			app.logger.Error("usage export cut short", zap.String("account", id), zap.Error(err))
		}
		panic(http.ErrAbortHandler)
	}
	return nil
}

// usageCSVHeader is the header line of a usage export.
var usageCSVHeader = []string{"created_at", "request_id", "key_id", "key_prefix", "key_label", "model", "provider",
	"upstream_model", "client_format", "stream", "status", "outcome", "usage_source", "input_tokens", "output_tokens",
	"cache_read_tokens", "cache_write_tokens", "reasoning_tokens", "web_searches", "web_fetches", "generated_images",
	"hosted_cost", "discount_bps", "tier_bps", "discount", "cost", "charged", "uncollected", "latency_ms", "ttft_ms"}

// writeUsageCSV writes the header line, then each usage row of the account
// in [from, to), oldest first, as the ledger reads them: never all in
// memory. It returns the number of rows written. Money is exact decimals (ledger.Money's String: "0.000146400"),
// times UTC with milliseconds; keys are named by id, prefix and label.
func writeUsageCSV(ctx context.Context, w io.Writer, s *ledger.Store, accountID string, from, to time.Time, keys []ledger.KeySummary) (rows int, err error) {
	byID := make(map[string]ledger.KeySummary, len(keys))
	for _, k := range keys {
		byID[k.ID] = k
	}
	bw := bufio.NewWriterSize(w, 64<<10)
	cw := csv.NewWriter(bw)
	if err := cw.Write(usageCSVHeader); err != nil {
		return 0, err
	}
	rec := make([]string, len(usageCSVHeader))
	itoa := func(n int64) string { return strconv.FormatInt(n, 10) }
	ms := func(d time.Duration) string { return strconv.FormatFloat(float64(d.Microseconds())/1000, 'f', 3, 64) }
	err = s.EachUsage(ctx, accountID, from, to, func(u *ledger.UsageRecord) error {
		k := byID[u.KeyID]
		rec = append(rec[:0], u.CreatedAt.UTC().Format("2006-01-02T15:04:05.000Z"), u.RequestID, u.KeyID, k.Prefix,
			viewCSVText(k.Label), viewCSVText(u.Model), u.Provider, viewCSVText(u.UpstreamModel), u.ClientFormat,
			strconv.FormatBool(u.Stream), strconv.Itoa(u.Status), u.Outcome, u.UsageSource,
			itoa(u.Tokens.Input), itoa(u.Tokens.Output), itoa(u.Tokens.CacheRead), itoa(u.Tokens.CacheWrite),
			itoa(u.Tokens.Reasoning), itoa(u.Hosted.WebSearch), itoa(u.Hosted.WebFetch), itoa(u.Hosted.ImageGeneration),
			u.HostedCost.String(), strconv.Itoa(u.DiscountBps), strconv.Itoa(u.TierBps), u.Discount.String(),
			u.Cost.String(), u.Charged.String(), u.Uncollected().String(),
			ms(u.Latency), ms(u.TTFT))
		rows++
		return cw.Write(rec)
	})
	cw.Flush()
	if err == nil {
		err = cw.Error()
	}
	if ferr := bw.Flush(); err == nil {
		err = ferr
	}
	return rows, err
}

// viewCSVText keeps a spreadsheet from reading a customer's text as a formula
// (as the console's CSV export does).
func viewCSVText(s string) string {
	if s != "" && (s[0] == '=' || s[0] == '+' || s[0] == '-' || s[0] == '@' || s[0] == '\t' || s[0] == '\r') {
		return "'" + s
	}
	return s
}
