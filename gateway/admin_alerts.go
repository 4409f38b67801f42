package gateway

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/caddyserver/caddy/v2"

	"github.com/modelgate/modelgate/ledger"
)

// An account's alerts and automatic top-up on the admin API (docs/api.md,
// "Alert settings in the admin API"):
//
//	GET   /modelgate/accounts/{id}/alerts                → the settings (never the webhook secret)
//	PATCH /modelgate/accounts/{id}/alerts                {"low_balance", "month_spend", "key_caps", "mail", "webhook_url", "auto_topup": {"on", "below", "amount", "month_max"}} → the settings (fields left out stay; null clears)
//	POST  /modelgate/accounts/{id}/alerts/webhook-secret → {"webhook_secret": "whsec_…"}, this once
//	GET   /modelgate/accounts/{id}/alerts/deliveries     ?channel=&limit= → the last deliveries, newest first

// alertRoutes are the admin routes of the alerts.
func (a *AdminAPI) alertRoutes() map[string]adminFunc {
	return map[string]adminFunc{
		"GET /modelgate/accounts/{id}/alerts":                 a.getAlerts,
		"PATCH /modelgate/accounts/{id}/alerts":               a.patchAlerts,
		"POST /modelgate/accounts/{id}/alerts/webhook-secret": a.rotateWebhookSecret,
		"GET /modelgate/accounts/{id}/alerts/deliveries":      a.listDeliveries,
	}
}

// alertsJSON is an account's alert settings as the admin API shows
// them: an amount that is off (zero) and a setting never made are null.
type alertsJSON struct {
	AccountID        string        `json:"account_id"`
	LowBalance       *ledger.Money `json:"low_balance"`
	MonthSpend       *ledger.Money `json:"month_spend"`
	KeyCaps          bool          `json:"key_caps"`
	Mail             bool          `json:"mail"`
	WebhookURL       *string       `json:"webhook_url"`
	WebhookSecretSet bool          `json:"webhook_secret_set"`
	AutoTopup        autoTopupJSON `json:"auto_topup"`
}

// autoTopupJSON is the automatic top-up as the admin API shows it.
type autoTopupJSON struct {
	On        bool          `json:"on"`
	Below     *ledger.Money `json:"below"`
	Amount    *ledger.Money `json:"amount"`
	MonthMax  *ledger.Money `json:"month_max"`
	Card      *cardJSON     `json:"card"`
	OffReason *string       `json:"off_reason"`
}

// cardJSON is the saved card as the customer is shown it: never the
// payment provider's ids.
type cardJSON struct {
	Brand string `json:"brand"`
	Last4 string `json:"last4"`
}

// orNull is a pointer to v, or nil when v is its type's zero.
func orNull[T comparable](v T) *T {
	var zero T
	if v == zero {
		return nil
	}
	return &v
}

// toAlertsJSON is s as the admin API shows it.
func toAlertsJSON(s *ledger.AlertSettings) alertsJSON {
	t := &s.AutoTopup
	out := alertsJSON{AccountID: s.AccountID, LowBalance: orNull(s.LowBalance), MonthSpend: orNull(s.MonthSpend), KeyCaps: s.KeyCaps,
		Mail: s.Mail, WebhookURL: orNull(s.WebhookURL), WebhookSecretSet: s.WebhookSecret != "",
		AutoTopup: autoTopupJSON{On: t.On, Below: orNull(t.Below), Amount: orNull(t.Amount), MonthMax: orNull(t.MonthMax),
			OffReason: orNull(t.OffReason)}}
	if t.Card.Saved() {
		out.AutoTopup.Card = &cardJSON{Brand: t.Card.Brand, Last4: t.Card.Last4}
	}
	return out
}

// alertSettings reads the settings of the account with the path's id: an
// unknown account is a 404.
func alertSettings(r *http.Request, app *App) (ledger.AlertSettings, error) {
	id, err := pathAccount(r, app)
	if err != nil {
		return ledger.AlertSettings{}, err
	}
	s, err := app.store.AlertSettingsOf(r.Context(), id)
	if err != nil {
		return s, ledgerError(err)
	}
	return s, nil
}

func (a *AdminAPI) getAlerts(w http.ResponseWriter, r *http.Request, app *App) error {
	s, err := alertSettings(r, app)
	if err != nil {
		return err
	}
	return writeAdminJSON(w, http.StatusOK, toAlertsJSON(&s))
}

// alertsPatch is a change of the alert settings: the fields sent change,
// null clears one (an amount to off, a switch to off, the URL to none),
// the others stay.
type alertsPatch struct {
	LowBalance patchField[ledger.Money] `json:"low_balance"`
	MonthSpend patchField[ledger.Money] `json:"month_spend"`
	KeyCaps    patchField[bool]         `json:"key_caps"`
	Mail       patchField[bool]         `json:"mail"`
	WebhookURL patchField[string]       `json:"webhook_url"`
	// AutoTopup null turns it off and clears its amounts.
	AutoTopup patchField[autoTopupPatch] `json:"auto_topup"`
}

// autoTopupPatch is a change of the automatic top-up.
type autoTopupPatch struct {
	On       patchField[bool]         `json:"on"`
	Below    patchField[ledger.Money] `json:"below"`
	Amount   patchField[ledger.Money] `json:"amount"`
	MonthMax patchField[ledger.Money] `json:"month_max"`
}

// patch sets *to from f when f was sent (null: the zero value).
func patch[T any](to *T, f patchField[T]) {
	if f.Set {
		*to = f.V // a null leaves V zero
	}
}

// UnmarshalJSON refuses fields that are not the automatic top-up's (the
// decoder's DisallowUnknownFields does not reach inside a patchField).
func (p *autoTopupPatch) UnmarshalJSON(b []byte) error {
	type plain autoTopupPatch
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	return dec.Decode((*plain)(p))
}

func (a *AdminAPI) patchAlerts(w http.ResponseWriter, r *http.Request, app *App) error {
	var body alertsPatch
	if err := decodeAdmin(r, &body); err != nil {
		return err
	}
	s, err := alertSettings(r, app)
	if err != nil {
		return err
	}
	al := ledger.Alerts{LowBalance: s.LowBalance, MonthSpend: s.MonthSpend, KeyCaps: s.KeyCaps, Mail: s.Mail, WebhookURL: s.WebhookURL}
	patch(&al.LowBalance, body.LowBalance)
	patch(&al.MonthSpend, body.MonthSpend)
	patch(&al.KeyCaps, body.KeyCaps)
	patch(&al.Mail, body.Mail)
	patch(&al.WebhookURL, body.WebhookURL)
	t := s.AutoTopup
	top := AutoTopupSettings{On: t.On, Below: t.Below, Amount: t.Amount, MonthMax: t.MonthMax}
	if f := body.AutoTopup; f.Set {
		patch(&top.On, f.V.On)
		patch(&top.Below, f.V.Below)
		patch(&top.Amount, f.V.Amount)
		patch(&top.MonthMax, f.V.MonthMax)
		if f.Null {
			top = AutoTopupSettings{}
		}
	}
	// everything is checked before anything is written, so that a refused
	// change changes nothing
	if err := al.Check(); err != nil {
		return adminBadRequest("%s", sentence(err))
	}
	if body.AutoTopup.Set {
		if err := app.checkAutoTopup(top); err != nil {
			return ledgerError(err)
		}
		if top.On && !t.Card.Saved() {
			return caddy.APIError{HTTPStatus: http.StatusConflict,
				Err: errors.New("automatic top-up needs a saved card: the customer saves one on the console's Billing page")}
		}
	}
	id := r.PathValue("id")
	if err := app.SetAlerts(r.Context(), id, al); err != nil {
		return ledgerError(err)
	}
	if body.AutoTopup.Set {
		if err := app.SetAutoTopup(r.Context(), id, top); err != nil {
			return ledgerError(err)
		}
	}
	return a.getAlerts(w, r, app)
}

func (a *AdminAPI) rotateWebhookSecret(w http.ResponseWriter, r *http.Request, app *App) error {
	id, err := pathAccount(r, app)
	if err != nil {
		return err
	}
	secret, err := app.RotateWebhookSecret(r.Context(), id)
	if err != nil {
		return ledgerError(err)
	}
	w.Header().Set("Cache-Control", "no-store")
	return writeAdminJSON(w, http.StatusOK, map[string]string{"account_id": id, "webhook_secret": secret})
}

// deliveryJSON is one delivery of an alert as the admin API shows it: the
// payload as JSON, never a secret.
type deliveryJSON struct {
	ID        string          `json:"id"`
	Alert     string          `json:"alert"`
	Channel   string          `json:"channel"`
	Target    string          `json:"target,omitempty"`
	Payload   json.RawMessage `json:"payload"`
	Amount    *ledger.Money   `json:"amount,omitempty"`
	Status    string          `json:"status"`
	Attempts  int             `json:"attempts"`
	LastError string          `json:"last_error,omitempty"`
	Result    string          `json:"result,omitempty"`
	CreatedAt time.Time       `json:"created_at"`
	NextAt    *time.Time      `json:"next_at,omitempty"`
	DoneAt    *time.Time      `json:"done_at,omitempty"`
}

// toDeliveryJSON is d as the admin API shows it; a payload that is not
// JSON is shown as a JSON string.
func toDeliveryJSON(d *ledger.Delivery) deliveryJSON {
	out := deliveryJSON{ID: d.ID, Alert: d.Alert, Channel: d.Channel, Target: d.Target, Payload: d.Payload,
		Amount: orNull(d.Amount), Status: d.Status, Attempts: d.Attempts, LastError: d.LastError, Result: d.Result, CreatedAt: d.CreatedAt}
	if !json.Valid(d.Payload) {
		out.Payload, _ = json.Marshal(string(d.Payload))
	}
	if d.Status == ledger.DeliveryPending {
		t := d.NextAt
		out.NextAt = &t
	}
	if !d.DoneAt.IsZero() {
		t := d.DoneAt
		out.DoneAt = &t
	}
	return out
}

// maxDeliveries is the most deliveries one listing answers.
const maxDeliveries = 500

func (a *AdminAPI) listDeliveries(w http.ResponseWriter, r *http.Request, app *App) error {
	v := r.URL.Query()
	if err := viewParams(v, "channel", "limit"); err != nil {
		return err
	}
	channel := v.Get("channel")
	switch channel {
	case "", ledger.ChannelMail, ledger.ChannelWebhook, ledger.ChannelTopup:
	default:
		return adminBadRequest("channel %q: want %s, %s or %s, or none for all", channel, ledger.ChannelMail, ledger.ChannelWebhook, ledger.ChannelTopup)
	}
	limit := 50
	if s := v.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > maxDeliveries {
			return adminBadRequest("limit %q: want a number of deliveries from 1 to %d", s, maxDeliveries)
		}
		limit = n
	}
	id, err := pathAccount(r, app)
	if err != nil {
		return err
	}
	list, err := app.store.Deliveries(r.Context(), id, channel, limit)
	if err != nil {
		return ledgerError(err)
	}
	out := make([]deliveryJSON, 0, len(list))
	for i := range list {
		out = append(out, toDeliveryJSON(&list[i]))
	}
	return writeAdminJSON(w, http.StatusOK, map[string]any{"account_id": id, "deliveries": out})
}
