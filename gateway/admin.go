package gateway

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/netip"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"

	"github.com/modelgate/modelgate/accounts"
	"github.com/modelgate/modelgate/ledger"
)

func init() {
	caddy.RegisterModule(AdminAPI{})
}

// AdminAPI serves the operator's operations as JSON on Caddy's admin
// endpoint, under /modelgate/: the CLI's commands for a running gateway.
//
//	POST   /modelgate/accounts                 {"email", "password", "plan", "credit"} → the account (a password: with a console login)
//	GET    /modelgate/accounts/{id}            → the account (balance, held, plan, state)
//	POST   /modelgate/accounts/{id}/suspend    → the account
//	POST   /modelgate/accounts/{id}/resume     → the account
//	PUT    /modelgate/accounts/{id}/plan       {"plan"} → the account
//	POST   /modelgate/accounts/{id}/credits    {"amount", "reason", "reference"} → {"balance", "replayed"}
//	POST   /modelgate/accounts/{id}/adjustments {"amount", "reason", "reference", "allow_owed"} → the result
//	GET    /modelgate/accounts/{id}/history    ?limit=100&before=ID → a page of the money history, newest first
//	GET    /modelgate/accounts/{id}/keys       → the keys (never their secrets)
//	POST   /modelgate/accounts/{id}/keys       {"label", "cap", "period", "models", "expires_at", "rpm", "concurrency"} → the key, with its secret, this once
//	GET    /modelgate/keys/{id}                → the key with its totals and limits
//	PATCH  /modelgate/keys/{id}                {"cap", "period", "models", "expires_at", "rpm", "concurrency"} → the key (fields left out stay; null clears)
//	DELETE /modelgate/keys/{id}
//
// Amounts are decimal strings in the currency ("5.00"). Changes reach every
// instance sharing Redis at once, like the CLI's. The operator's views
// (account listing and search, key totals, usage export) are in admin_views.go,
// an account's alerts and automatic top-up in admin_alerts.go.
type AdminAPI struct {
	ctx    caddy.Context
	routes *http.ServeMux
}

// CaddyModule returns the Caddy module information.
func (AdminAPI) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "admin.api.modelgate",
		New: func() caddy.Module { return new(AdminAPI) },
	}
}

// Provision keeps the config's context, to find the modelgate app when a
// request comes (the app is provisioned after the admin endpoint).
func (a *AdminAPI) Provision(ctx caddy.Context) error {
	a.ctx = ctx
	a.routes = a.mux()
	return nil
}

// Routes returns the admin routes.
func (a *AdminAPI) Routes() []caddy.AdminRoute {
	return []caddy.AdminRoute{{Pattern: "/modelgate/", Handler: caddy.AdminHandlerFunc(a.serve)}}
}

// adminAccount is an account as the admin API shows it.
type adminAccount struct {
	ID      string       `json:"id"`
	Email   string       `json:"email,omitempty"`
	Plan    string       `json:"plan"`
	State   ledger.State `json:"state"`
	Balance ledger.Money `json:"balance"`
	Held    ledger.Money `json:"held"`
	// Owed is what the account owes; SuspendedFor is "owed" when
	// the debt suspended it (a payment resumes it).
	Owed         ledger.Money `json:"owed"`
	SuspendedFor string       `json:"suspended_for,omitempty"`
	CreatedAt    time.Time    `json:"created_at"`
	// MonthSpend is what the account was charged in the current calendar
	// month (UTC), which its plan's volume tiers read.
	MonthSpend ledger.Money `json:"month_spend"`
}

// adminKey is a key as the admin API shows it; Secret only when created.
type adminKey struct {
	ID         string     `json:"id"`
	AccountID  string     `json:"account_id"`
	Label      string     `json:"label,omitempty"`
	Prefix     string     `json:"prefix"`
	CreatedAt  time.Time  `json:"created_at"`
	LastUsedAt *time.Time `json:"last_used_at,omitempty"`
	Secret     string     `json:"key,omitempty"`
	keyLimitsView
}

// adminFunc serves one admin route for the running app.
type adminFunc func(w http.ResponseWriter, r *http.Request, app *App) error

// adminRoutes are the routes by method and path pattern.
func (a *AdminAPI) adminRoutes() map[string]adminFunc {
	return map[string]adminFunc{
		"POST /modelgate/accounts":                  a.createAccount,
		"GET /modelgate/accounts/{id}":              a.getAccount,
		"POST /modelgate/accounts/{id}/suspend":     a.setState(ledger.StateSuspended),
		"POST /modelgate/accounts/{id}/resume":      a.setState(ledger.StateActive),
		"PUT /modelgate/accounts/{id}/plan":         a.setPlan,
		"POST /modelgate/accounts/{id}/plan":        a.setPlan,
		"POST /modelgate/accounts/{id}/credits":     a.credit,
		"POST /modelgate/accounts/{id}/adjustments": a.adjust,
		"GET /modelgate/accounts/{id}/history":      a.history,
		"GET /modelgate/accounts/{id}/keys":         a.listKeys,
		"POST /modelgate/accounts/{id}/keys":        a.createKey,
		"GET /modelgate/keys/{id}":                  a.getKey,
		"PATCH /modelgate/keys/{id}":                a.updateKey,
		"DELETE /modelgate/keys/{id}":               a.deleteKey,
	}
}

// adminCall is one admin request on its way through the mux: the app it
// serves and the error its route returned.
type adminCall struct {
	app *App
	err error
}

type adminCallKey struct{}

// mux routes admin requests by method and path; a path it knows called
// with another method is a 405 naming the allowed ones, any other a 404.
func (a *AdminAPI) mux() *http.ServeMux {
	m := http.NewServeMux()
	routes := a.adminRoutes()
	maps.Copy(routes, a.viewRoutes())  // the operator's views, admin_views.go
	maps.Copy(routes, a.alertRoutes()) // accounts' alerts and automatic top-up, admin_alerts.go
	for pattern, f := range routes {
		m.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
			c := r.Context().Value(adminCallKey{}).(*adminCall)
			c.err = f(w, r, c.app)
		})
	}
	m.HandleFunc("/modelgate/", func(_ http.ResponseWriter, r *http.Request) {
		c := r.Context().Value(adminCallKey{}).(*adminCall)
		var allow []string
		for _, method := range []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
			probe := r.Clone(r.Context())
			probe.Method = method
			if _, pattern := m.Handler(probe); pattern != "/modelgate/" && pattern != "" {
				allow = append(allow, method)
			}
		}
		if len(allow) > 0 {
			c.err = caddy.APIError{HTTPStatus: http.StatusMethodNotAllowed, Err: fmt.Errorf("method not allowed; use %s", strings.Join(allow, ", "))}
			return
		}
		c.err = caddy.APIError{HTTPStatus: http.StatusNotFound, Err: fmt.Errorf("no such modelgate admin route: %s %s", r.Method, r.URL.Path)}
	})
	return m
}

// serve routes one admin request.
func (a *AdminAPI) serve(w http.ResponseWriter, r *http.Request) error {
	app, err := a.app()
	if err != nil {
		return err
	}
	if !app.AllowRemoteUnauthenticatedAdmin && !adminPrivate(r) {
		return caddy.APIError{HTTPStatus: http.StatusForbidden, Err: errors.New("the /modelgate/ admin routes mint API keys and credit money " +
			"with no authentication of their own, so they are served only when the admin endpoint listens on loopback or a unix socket " +
			"(or on Caddy's remote admin endpoint, with client certificates); to serve them here anyway, set the modelgate option " +
			"allow_remote_unauthenticated_admin")}
	}
	c := &adminCall{app: app}
	a.routes.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), adminCallKey{}, c)))
	return c.err
}

func (a *AdminAPI) getAccount(w http.ResponseWriter, r *http.Request, app *App) error {
	return a.writeAccount(w, r, app, r.PathValue("id"), http.StatusOK)
}

// setState suspends or resumes an account.
func (a *AdminAPI) setState(st ledger.State) adminFunc {
	return func(w http.ResponseWriter, r *http.Request, app *App) error {
		id := r.PathValue("id")
		if err := app.store.SetAccountState(r.Context(), id, st); err != nil {
			return ledgerError(err)
		}
		return a.writeAccount(w, r, app, id, http.StatusOK)
	}
}

func (a *AdminAPI) setPlan(w http.ResponseWriter, r *http.Request, app *App) error {
	var body struct {
		Plan string `json:"plan"`
	}
	if err := decodeAdmin(r, &body); err != nil {
		return err
	}
	if app.plans[body.Plan] == nil {
		return adminBadRequest("plan %q is not in the configuration %s", body.Plan, known("plans", body.Plan, slices.Collect(maps.Keys(app.plans))))
	}
	id := r.PathValue("id")
	if err := app.store.SetAccountPlan(r.Context(), id, body.Plan); err != nil {
		return ledgerError(err)
	}
	return a.writeAccount(w, r, app, id, http.StatusOK)
}

func (a *AdminAPI) deleteKey(w http.ResponseWriter, r *http.Request, app *App) error {
	if err := app.accounts.DeleteKey(r.Context(), r.PathValue("id")); err != nil {
		return ledgerError(err)
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// adminPrivate reports whether an admin request came to an endpoint only
// this machine can reach: one that listens on a loopback address
// (localhost, 127.0.0.1, ::1) or a unix socket, as Caddy's default
// localhost:2019 does; or Caddy's remote admin endpoint, whose clients
// present a verified certificate. An endpoint on all interfaces (":2019",
// "0.0.0.0:2019") or a public address is not private, even to a request
// that reached it through loopback.
func adminPrivate(r *http.Request) bool {
	if r.TLS != nil && len(r.TLS.VerifiedChains) > 0 {
		return true
	}
	// the address the endpoint listens on, as Caddy gives it to its admin
	// server ("tcp/localhost:2019", "unix//run/caddy.sock")
	if srv, _ := r.Context().Value(http.ServerContextKey).(*http.Server); srv != nil && srv.Addr != "" {
		na, err := caddy.ParseNetworkAddress(srv.Addr)
		if err != nil {
			return false
		}
		if na.IsUnixNetwork() || na.IsFdNetwork() || na.Host == "localhost" {
			return true
		}
		ip, err := netip.ParseAddr(na.Host)
		return err == nil && ip.IsLoopback()
	}
	// else, the address the request came to
	switch a := r.Context().Value(http.LocalAddrContextKey).(type) {
	case *net.UnixAddr:
		return true
	case *net.TCPAddr:
		return a.IP.IsLoopback()
	}
	return false
}

// app finds the running modelgate app of this config.
func (a *AdminAPI) app() (*App, error) {
	v, err := a.ctx.AppIfConfigured("modelgate")
	if err != nil {
		return nil, caddy.APIError{HTTPStatus: http.StatusNotFound, Err: fmt.Errorf("modelgate is not configured: %v", err)}
	}
	app, ok := v.(*App)
	if !ok || !app.Serving() {
		return nil, caddy.APIError{HTTPStatus: http.StatusServiceUnavailable, Err: errors.New("modelgate is not running")}
	}
	return app, nil
}

func (a *AdminAPI) createAccount(w http.ResponseWriter, r *http.Request, app *App) error {
	var body struct {
		Email    string       `json:"email"`
		Password string       `json:"password"` // gives the account a console login
		Plan     string       `json:"plan"`
		Credit   ledger.Money `json:"credit"`
	}
	if err := decodeAdmin(r, &body); err != nil {
		return err
	}
	acct, err := app.accounts.Open(r.Context(), accounts.Opening{Email: body.Email, Password: body.Password, Plan: body.Plan, Credit: body.Credit})
	if errors.Is(err, ledger.ErrDuplicate) {
		return caddy.APIError{HTTPStatus: http.StatusConflict,
			Err: fmt.Errorf("an account with the email %q exists already", body.Email)}
	}
	if err != nil && acct.ID == "" {
		return ledgerError(err)
	}
	if err != nil {
		return caddy.APIError{HTTPStatus: http.StatusInternalServerError, Err: err}
	}
	return a.writeAccount(w, r, app, acct.ID, http.StatusCreated)
}

func (a *AdminAPI) credit(w http.ResponseWriter, r *http.Request, app *App) error {
	id := r.PathValue("id")
	var body struct {
		Amount    ledger.Money `json:"amount"`
		Reason    string       `json:"reason"`
		Reference string       `json:"reference"`
	}
	if err := decodeAdmin(r, &body); err != nil {
		return err
	}
	if strings.TrimSpace(body.Reason) == "" {
		return adminBadRequest("reason: every credit says why")
	}
	if body.Reference == "" {
		body.Reference = "admin:" + rand.Text()
	}
	res, replayed, err := app.accounts.Credit(r.Context(), id, body.Amount, body.Reason, body.Reference)
	if errors.Is(err, ledger.ErrDuplicate) {
		// the reference names another change: sending it again cannot help
		return caddy.APIError{HTTPStatus: http.StatusConflict, Err: err}
	}
	if err != nil {
		return ledgerError(err)
	}
	// a credit sent again with its reference answers the first result
	return writeAdminJSON(w, http.StatusOK, map[string]any{"account_id": id, "balance": res.Balance, "replayed": replayed})
}

// moneyEntryJSON is a money history entry as the admin API shows it:
// amounts exact, as decimal strings.
type moneyEntryJSON struct {
	ID           int64         `json:"id"`
	Kind         string        `json:"kind"`
	Amount       ledger.Money  `json:"amount"`
	Owed         ledger.Money  `json:"owed"`
	BalanceAfter *ledger.Money `json:"balance_after"` // null before migration 7 recorded it
	OwedAfter    ledger.Money  `json:"owed_after"`
	Reference    string        `json:"reference"`
	Reason       string        `json:"reason,omitempty"`
	Payment      string        `json:"payment,omitempty"`
	CreatedAt    time.Time     `json:"created_at"`
}

// moneyEntriesJSON converts entries for JSON.
func moneyEntriesJSON(entries []ledger.MoneyEntry) []moneyEntryJSON {
	out := make([]moneyEntryJSON, 0, len(entries))
	for _, e := range entries {
		out = append(out, moneyEntryJSON{ID: e.ID, Kind: e.Kind, Amount: e.Amount, Owed: e.Owed, BalanceAfter: e.BalanceAfter,
			OwedAfter: e.OwedAfter, Reference: e.Reference, Reason: e.Reason, Payment: e.Payment, CreatedAt: e.CreatedAt})
	}
	return out
}

// adjust applies an operator's debit or correction, once per reference
// (docs/operations.md, "Adjustments").
func (a *AdminAPI) adjust(w http.ResponseWriter, r *http.Request, app *App) error {
	id := r.PathValue("id")
	var body struct {
		Amount    ledger.Money `json:"amount"`
		Reason    string       `json:"reason"`
		Reference string       `json:"reference"`
		AllowOwed bool         `json:"allow_owed"`
	}
	if err := decodeAdmin(r, &body); err != nil {
		return err
	}
	res, replayed, err := app.accounts.Adjust(r.Context(), accounts.Adjustment{AccountID: id, Amount: body.Amount,
		Reason: body.Reason, Reference: body.Reference, AllowOwed: body.AllowOwed})
	if err != nil {
		return ledgerError(err)
	}
	return writeAdminJSON(w, http.StatusOK, map[string]any{"account_id": id, "balance": res.Balance, "owed": res.Owed,
		"entries": moneyEntriesJSON(res.Entries), "replayed": replayed})
}

// history answers a page of an account's money history, newest first;
// next_before, when set, is the before of the next (older) page.
func (a *AdminAPI) history(w http.ResponseWriter, r *http.Request, app *App) error {
	id := r.PathValue("id")
	limit, before := 100, int64(0)
	q := r.URL.Query()
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			return adminBadRequest("limit %q: want a number of entries from 1 to 1000", v)
		}
		limit = n
	}
	if v := q.Get("before"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n <= 0 {
			return adminBadRequest("before %q: want the next_before of the previous page", v)
		}
		before = n
	}
	page, err := app.accounts.History(r.Context(), id, before, limit)
	if err != nil {
		return ledgerError(err)
	}
	acct, err := app.store.GetAccount(r.Context(), id)
	if err != nil {
		return ledgerError(err)
	}
	out := map[string]any{"account_id": id, "balance": acct.Balance, "owed": acct.Owed, "state": acct.State,
		"suspended_for": acct.SuspendedFor, "entries": moneyEntriesJSON(page.Entries)}
	if page.Next != 0 {
		out["next_before"] = page.Next
	}
	return writeAdminJSON(w, http.StatusOK, out)
}

func (a *AdminAPI) listKeys(w http.ResponseWriter, r *http.Request, app *App) error {
	id, err := pathAccount(r, app)
	if err != nil {
		return err
	}
	return writeKeySummaries(w, r, app, id) // with their totals (admin_views.go)
}

// pathAccount is the id of the account the path names ({id}), which must
// exist: an unknown account is a 404.
func pathAccount(r *http.Request, app *App) (string, error) {
	id := r.PathValue("id")
	if _, err := app.store.GetAccount(r.Context(), id); err != nil {
		return "", ledgerError(err)
	}
	return id, nil
}

func (a *AdminAPI) createKey(w http.ResponseWriter, r *http.Request, app *App) error {
	id := r.PathValue("id")
	var body struct {
		Label string `json:"label"`
		keyLimitsBody
	}
	if err := decodeAdmin(r, &body); err != nil {
		return err
	}
	l, err := body.apply(ledger.KeyLimits{})
	if err != nil {
		return ledgerError(err)
	}
	secret, k, err := app.accounts.CreateKeyWithLimits(r.Context(), id, body.Label, l)
	if err != nil {
		return ledgerError(err)
	}
	w.Header().Set("Cache-Control", "no-store")
	return writeAdminJSON(w, http.StatusCreated, toAdminKey(k, secret))
}

func (a *AdminAPI) getKey(w http.ResponseWriter, r *http.Request, app *App) error {
	return writeKey(w, r, app, r.PathValue("id"))
}

// updateKey changes a key's own limits: the fields sent change (null
// clears one), the others stay.
func (a *AdminAPI) updateKey(w http.ResponseWriter, r *http.Request, app *App) error {
	id := r.PathValue("id")
	var body keyLimitsBody
	if err := decodeAdmin(r, &body); err != nil {
		return err
	}
	k, err := app.store.KeyByID(r.Context(), id)
	if err != nil {
		return ledgerError(err)
	}
	l, err := body.apply(k.Limits)
	if err == nil {
		_, err = app.accounts.UpdateKey(r.Context(), id, l)
	}
	if err != nil {
		return ledgerError(err)
	}
	return writeKey(w, r, app, id)
}

func toAdminKey(k ledger.Key, secret string) adminKey {
	ak := adminKey{ID: k.ID, AccountID: k.AccountID, Label: k.Label, Prefix: k.Prefix, CreatedAt: k.CreatedAt, Secret: secret,
		keyLimitsView: toKeyLimitsView(&k, time.Now())}
	if !k.LastUsedAt.IsZero() {
		t := k.LastUsedAt
		ak.LastUsedAt = &t
	}
	return ak
}

// writeAccount answers with the account as it now is.
func (a *AdminAPI) writeAccount(w http.ResponseWriter, r *http.Request, app *App, id string, status int) error {
	acct, err := app.store.GetAccount(r.Context(), id)
	if err != nil {
		return ledgerError(err)
	}
	return writeAdminJSON(w, status, toAccountView(acct))
}

// decodeAdmin reads a JSON body (at most 64 KiB, no unknown fields).
func decodeAdmin(r *http.Request, v any) error {
	dec := json.NewDecoder(io.LimitReader(r.Body, 64<<10))
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if err == nil || errors.Is(err, io.EOF) {
		return nil
	}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) && te.Field != "" {
		typ := te.Type
		for typ.Kind() == reflect.Pointer {
			typ = typ.Elem()
		}
		// a field of an embedded struct is named by its path
		field := te.Field[strings.LastIndexByte(te.Field, '.')+1:]
		want := "a " + typ.String()
		switch typ {
		case reflect.TypeFor[ledger.Money]():
			want = `an amount as a decimal string, such as "5.00"`
		case reflect.TypeFor[string]():
			want = "a string"
		}
		return adminBadRequest("%q: want %s, not a JSON %s", field, want, te.Value)
	}
	if strings.Contains(err.Error(), "parse money") {
		return adminBadRequest("%s: amounts are decimal strings in the currency, such as \"5.00\"", strings.TrimPrefix(err.Error(), "ledger: "))
	}
	if strings.HasPrefix(err.Error(), "json: unknown field ") {
		return adminBadRequest("%s is not a field of this request", strings.TrimPrefix(err.Error(), "json: unknown field "))
	}
	return adminBadRequest("the body is not the JSON this route takes: %v", err)
}

func writeAdminJSON(w http.ResponseWriter, status int, v any) error {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	return json.NewEncoder(w).Encode(v)
}

func adminBadRequest(format string, args ...any) error {
	return caddy.APIError{HTTPStatus: http.StatusBadRequest, Err: fmt.Errorf(format, args...)}
}

// ledgerError maps an error to its status: 400 for a request to change
// (an amount the balance cannot hold included),
// 404 for an unknown account or key, 409 for a duplicate or a debit the
// balance does not cover, 500 otherwise.
func ledgerError(err error) error {
	status := http.StatusInternalServerError
	switch {
	case accounts.IsInvalid(err), errors.Is(err, ledger.ErrOverflow):
		status = http.StatusBadRequest
	case errors.Is(err, ledger.ErrNotFound):
		status = http.StatusNotFound
	case errors.Is(err, ledger.ErrDuplicate), errors.Is(err, ledger.ErrInsufficientFunds):
		status = http.StatusConflict
	}
	return caddy.APIError{HTTPStatus: status, Err: errors.New(sentence(err))}
}

// Interface guards
var (
	_ caddy.AdminRouter = (*AdminAPI)(nil)
	_ caddy.Provisioner = (*AdminAPI)(nil)
)
