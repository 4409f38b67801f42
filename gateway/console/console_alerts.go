package console

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/modelgate/modelgate/accounts"
	"github.com/modelgate/modelgate/gateway"
	"github.com/modelgate/modelgate/ledger"
	"github.com/modelgate/modelgate/web"
)

// The alerts page (a low balance, a month's spend, a key's cap at 80 %
// and 100 %; by mail and by a signed webhook, whose secret is shown once;
// the last deliveries) and the Billing page's automatic top-up (the saved
// card, the settings, why the gateway turned it off, the last charges).
// Every change goes through the App (gateway/alertsettings.go), which
// checks it and tells the alerts watcher.

// secretSealPrefix starts the sealed id of a webhook secret, followed by
// when it was made (unix seconds), so that an old cookie shows nothing.
const secretSealPrefix = "webhook-secret:"

// deliveriesShown is how many deliveries the pages list.
const deliveriesShown = 20

// shownSecrets remembers which new webhook secrets were shown (see
// shownKeys), by the SHA-256 of each: the secret itself is not kept.
var shownSecrets = &onceSet{seen: make(map[string]time.Time)}

// amountField reads an optional amount of a form: empty (or "off",
// "none") is zero; what is no amount, or a negative one, is an
// *accounts.InvalidError naming the field as the page does.
func amountField(raw, name string) (ledger.Money, error) {
	raw = strings.TrimSpace(raw)
	if raw == "" || strings.EqualFold(raw, "off") || strings.EqualFold(raw, "none") {
		return 0, nil
	}
	m, err := ledger.ParseMoney(raw)
	if err != nil || m < 0 {
		return 0, &accounts.InvalidError{Msg: name + ": enter an amount such as 5.00 (at most 9 decimal places), or leave it empty for off."}
	}
	return m, nil
}

// formAmount is an amount as a form starts with it: "" for zero, else
// its decimals without trailing zeros (20.000000000 → 20).
func formAmount(m ledger.Money) string {
	if m == 0 {
		return ""
	}
	s := m.String()
	return strings.TrimRight(strings.TrimRight(s, "0"), ".")
}

// serveAlerts shows the alerts page, and once the webhook secret whose
// sealed cookie came back from its making.
func (h *ConsoleHandler) serveAlerts(c *consoleRequest) {
	h.alertsPage(c, http.StatusOK, nil)
}

// alertsPage renders the alerts page; f is the form as sent after a
// refusal (nil: the account's settings).
func (h *ConsoleHandler) alertsPage(c *consoleRequest, status int, f *web.AlertsForm) {
	ctx := c.r.Context()
	acct := c.sess.account.ID
	s, err := h.app.Store().AlertSettingsOf(ctx, acct)
	var list []ledger.Delivery
	if err == nil {
		list, err = h.app.Store().Deliveries(ctx, acct, "", deliveriesShown)
	}
	if err != nil {
		h.logger.Error("reading alert settings", zap.String("account", acct), zap.Error(err))
		h.message(c, http.StatusServiceUnavailable, "Unavailable", "The alerts could not be read; try again.")
		return
	}
	c.frame.Heading, c.frame.Page = "Alerts", "alerts"
	p := &web.ConsoleAlerts{MailTo: c.sess.account.Email, CanMail: h.app.Mailer() != nil, SecretSet: s.WebhookSecret != "",
		DocsHref: web.WebhookDocs}
	if f != nil {
		p.Form = *f
	} else {
		p.Form = web.AlertsForm{LowBalance: formAmount(s.LowBalance), MonthSpend: formAmount(s.MonthSpend), WebhookURL: s.WebhookURL,
			KeyCaps: s.KeyCaps, Mail: s.Mail}
	}
	if ck, err := c.r.Cookie(newSigningCookie); err == nil {
		h.setCookie(c.w, newSigningCookie, "", h.cookiePath+"alerts", -1, http.SameSiteStrictMode)
		if secret, ok := h.openNewSecret(c, ck.Value); ok && secret == s.WebhookSecret {
			p.NewSecret = secret
			c.frame.Notice = "Webhook signing secret created."
		}
	}
	if c.r.URL.Query().Get("saved") != "" && c.frame.Notice == "" {
		c.frame.Notice = "Alerts saved."
	}
	for i := range list {
		p.Deliveries = append(p.Deliveries, deliveryLine(&list[i]))
	}
	p.ConsoleFrame = c.frame
	h.page(c, status, func(b io.Writer) error { return web.RenderConsoleAlerts(b, p) })
}

// openNewSecret opens a sealed webhook secret of the session: made less
// than consoleNewKeyTTL ago, and shown for the first time.
func (h *ConsoleHandler) openNewSecret(c *consoleRequest, sealed string) (string, bool) {
	id, secret, ok := openNewKey(c.sess, sealed)
	made, isSecret := strings.CutPrefix(id, secretSealPrefix)
	if !ok || !isSecret {
		return "", false
	}
	unix, err := strconv.ParseInt(made, 10, 64)
	if err != nil || time.Since(time.Unix(unix, 0)) >= consoleNewKeyTTL || !shownSecrets.first(secretDigest(secret)) {
		return "", false
	}
	return secret, true
}

// secretDigest is the hex SHA-256 of a secret, what shownSecrets keeps.
func secretDigest(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
}

// saveAlerts saves the alerts form.
func (h *ConsoleHandler) saveAlerts(c *consoleRequest) {
	v := c.r.PostForm
	f := web.AlertsForm{LowBalance: strings.TrimSpace(v.Get("low_balance")), MonthSpend: strings.TrimSpace(v.Get("month_spend")),
		WebhookURL: strings.TrimSpace(v.Get("webhook_url")), KeyCaps: v.Get("key_caps") != "", Mail: v.Get("mail") != ""}
	al := ledger.Alerts{KeyCaps: f.KeyCaps, Mail: f.Mail, WebhookURL: f.WebhookURL}
	var err error
	if al.LowBalance, err = amountField(f.LowBalance, "Low balance"); err == nil {
		al.MonthSpend, err = amountField(f.MonthSpend, "Month's spend")
	}
	if err == nil {
		err = h.app.SetAlerts(c.r.Context(), c.sess.account.ID, al)
	}
	switch {
	case accounts.IsInvalid(err):
		c.frame.Error = refusal(err)
		h.alertsPage(c, http.StatusBadRequest, &f)
		return
	case err != nil:
		h.logger.Error("saving alert settings", zap.String("account", c.sess.account.ID), zap.Error(err))
		c.frame.Error = "The alerts could not be saved; try again."
		h.alertsPage(c, http.StatusServiceUnavailable, &f)
		return
	}
	http.Redirect(c.w, c.r, h.BasePath+"/alerts?saved=1", http.StatusSeeOther)
}

// rotateSecret makes the account a new webhook signing secret and
// redirects to the alerts page, which shows it once: it crosses the
// redirect in a cookie sealed as a new key's is, deleted as the page is
// shown.
func (h *ConsoleHandler) rotateSecret(c *consoleRequest) {
	secret, err := h.app.RotateWebhookSecret(c.r.Context(), c.sess.account.ID)
	if err != nil {
		h.logger.Error("making a webhook secret", zap.String("account", c.sess.account.ID), zap.Error(err))
		c.frame.Error = "The secret could not be made; try again."
		h.alertsPage(c, http.StatusServiceUnavailable, nil)
		return
	}
	id := secretSealPrefix + strconv.FormatInt(time.Now().Unix(), 10)
	h.setCookie(c.w, newSigningCookie, sealNewKey(c.sess, id, secret), h.cookiePath+"alerts",
		int(consoleNewKeyTTL/time.Second), http.SameSiteStrictMode)
	http.Redirect(c.w, c.r, h.BasePath+"/alerts", http.StatusSeeOther)
}

// eventNames name the webhook events for people.
var eventNames = map[string]string{
	"balance.low":      "Low balance",
	"spend.month":      "Month's spend",
	"key.cap_80":       "Key at 80 % of its cap",
	"key.cap_100":      "Key at its cap",
	"autotopup.failed": "Automatic top-up failed",
	"autotopup.limit":  "Automatic top-up stopped by its monthly maximum",
}

// alertNames name the alerts by the start of their names, for a delivery
// whose payload has no known type.
var alertNames = []struct{ prefix, name string }{
	{"low_balance", "Low balance"},
	{"month_spend", "Month's spend"},
	{"key_cap_80", "Key at 80 % of its cap"},
	{"key_cap_100", "Key at its cap"},
	{"auto_topup", "Automatic top-up"},
	{"autotopup_failed", "Automatic top-up failed"},
}

// whatFired says for people what a delivery tells of: its payload's
// event type, else its alert's name.
func whatFired(d *ledger.Delivery) string {
	var ev struct {
		Type string `json:"type"`
		Data struct {
			Key struct {
				Label, Prefix string
			} `json:"key"`
		} `json:"data"`
	}
	if json.Unmarshal(d.Payload, &ev) == nil {
		if name, ok := eventNames[ev.Type]; ok {
			if k := ev.Data.Key; k.Label != "" || k.Prefix != "" {
				name += " (" + strings.TrimSpace(k.Label+" "+k.Prefix) + ")"
			}
			return name
		}
	}
	for _, a := range alertNames {
		if strings.HasPrefix(d.Alert, a.prefix) {
			return a.name
		}
	}
	return d.Alert
}

// deliveryLine is a delivery as the pages list it.
func deliveryLine(d *ledger.Delivery) web.DeliveryLine {
	l := web.DeliveryLine{ID: d.ID, When: d.CreatedAt.UTC().Format("2006-01-02 15:04"), WhenISO: d.CreatedAt.UTC().Format(time.RFC3339),
		What: whatFired(d), Channel: d.Channel, Target: d.Target, Status: d.Status, Attempts: d.Attempts, Amount: web.AmountOf(d.Amount)}
	switch d.Status {
	case ledger.DeliveryDone:
		l.StatusText, l.Outcome = "delivered", d.Result
		if d.Channel == ledger.ChannelTopup {
			l.StatusText = "charged"
		}
	case ledger.DeliveryFailed:
		l.StatusText, l.Outcome, l.Failed = "failed", d.LastError, true
	default:
		l.StatusText = "waiting"
		if d.Attempts > 0 {
			l.StatusText = "retrying"
		}
		if d.LastError != "" {
			l.Outcome, l.Failed = d.LastError, true
		}
	}
	if l.Outcome == "" {
		l.Outcome = "–"
	}
	return l
}

// cardBrands name card brands as the payment provider spells them.
var cardBrands = map[string]string{"visa": "Visa", "mastercard": "Mastercard", "amex": "American Express",
	"discover": "Discover", "diners": "Diners Club", "jcb": "JCB", "unionpay": "UnionPay", "cartes_bancaires": "Cartes Bancaires"}

// cardName is a saved card for people: "Visa •••• 4242".
func cardName(c ledger.SavedCard) string {
	brand := cardBrands[strings.ToLower(c.Brand)]
	if brand == "" {
		brand = c.Brand
		if brand == "" {
			brand = "Card"
		}
		brand = strings.ToUpper(brand[:1]) + brand[1:]
	}
	if c.Last4 == "" {
		return brand
	}
	return brand + " •••• " + c.Last4
}

// autoTopupView is the Billing page's automatic top-up section of the
// account, or nil without a payment provider; f is the form as sent after
// a refusal (nil: the account's settings).
func (h *ConsoleHandler) autoTopupView(c *consoleRequest, f *web.AutoTopupForm) (*web.AutoTopupView, error) {
	pay := h.app.PaymentProvider()
	if pay == nil {
		return nil, nil
	}
	ctx := c.r.Context()
	s, err := h.app.Store().AlertSettingsOf(ctx, c.sess.account.ID)
	if err != nil {
		return nil, err
	}
	list, err := h.app.Store().Deliveries(ctx, c.sess.account.ID, ledger.ChannelTopup, deliveriesShown)
	if err != nil {
		return nil, err
	}
	t := &s.AutoTopup
	v := &web.AutoTopupView{Minimum: pay.Minimum().Rounded(), OffReason: t.OffReason}
	if t.Card.Saved() {
		v.Card = cardName(t.Card)
	}
	if f != nil {
		v.Form = *f
	} else {
		v.Form = web.AutoTopupForm{On: t.On, Below: formAmount(t.Below), Amount: formAmount(t.Amount), MonthMax: formAmount(t.MonthMax)}
	}
	if v.OffReason != "" && !strings.HasSuffix(v.OffReason, ".") {
		v.OffReason += "."
	}
	for i := range list {
		v.History = append(v.History, deliveryLine(&list[i]))
	}
	return v, nil
}

// saveAutoTopup saves the automatic top-up form.
func (h *ConsoleHandler) saveAutoTopup(c *consoleRequest) {
	if h.app.PaymentProvider() == nil {
		h.message(c, http.StatusNotFound, "Not found", "Automatic top-up needs a payment provider, and this gateway has none.")
		return
	}
	v := c.r.PostForm
	f := web.AutoTopupForm{On: v.Get("on") != "", Below: strings.TrimSpace(v.Get("below")), Amount: strings.TrimSpace(v.Get("amount")),
		MonthMax: strings.TrimSpace(v.Get("month_max"))}
	s := gateway.AutoTopupSettings{On: f.On}
	var err error
	if s.Below, err = amountField(f.Below, "When the balance falls below"); err == nil {
		if s.Amount, err = amountField(f.Amount, "Add"); err == nil {
			s.MonthMax, err = amountField(f.MonthMax, "At most, in a month")
		}
	}
	if err == nil {
		err = h.app.SetAutoTopup(c.r.Context(), c.sess.account.ID, s)
	}
	switch {
	case errors.Is(err, ledger.ErrNoCard):
		c.frame.Error = "Save a card first: automatic top-up charges it."
		h.billingPage(c, http.StatusBadRequest, &f)
		return
	case accounts.IsInvalid(err):
		c.frame.Error = refusal(err)
		h.billingPage(c, http.StatusBadRequest, &f)
		return
	case err != nil:
		h.logger.Error("saving automatic top-up", zap.String("account", c.sess.account.ID), zap.Error(err))
		c.frame.Error = "Automatic top-up could not be saved; try again."
		h.billingPage(c, http.StatusServiceUnavailable, &f)
		return
	}
	to := "on"
	if !s.On {
		to = "off"
	}
	http.Redirect(c.w, c.r, h.BasePath+"/billing?autotopup="+to, http.StatusSeeOther)
}

// saveCard starts saving a card with the payment provider and sends the
// visitor there; the provider's notification saves it.
func (h *ConsoleHandler) saveCard(c *consoleRequest) {
	if h.app.PaymentProvider() == nil {
		h.message(c, http.StatusNotFound, "Not found", "Saving a card needs a payment provider, and this gateway has none.")
		return
	}
	origin, ok := h.publicOrigin(c.r)
	if !ok {
		h.logger.Error("saving a card needs the public_url option: this site has no host name to send customers back to")
		c.frame.Error = "Saving a card is not available right now; try again later."
		h.billingPage(c, http.StatusServiceUnavailable, nil)
		return
	}
	base := origin + h.BasePath + "/billing"
	to, err := h.app.StartCardSetup(c.r.Context(), c.sess.account.ID, c.sess.account.Email, base+"?card=saved", base+"?card=cancelled")
	switch {
	case errors.Is(err, gateway.ErrCardSetupUnavailable):
		c.frame.Error = "Saving a card is not available on this gateway yet."
		h.billingPage(c, http.StatusServiceUnavailable, nil)
		return
	case err != nil:
		h.logger.Error("starting to save a card", zap.String("account", c.sess.account.ID), zap.Error(err))
		c.frame.Error = "Saving a card could not be started; try again later."
		h.billingPage(c, http.StatusBadGateway, nil)
		return
	}
	http.Redirect(c.w, c.r, to, http.StatusSeeOther)
}
