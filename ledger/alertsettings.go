package ledger

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"time"
)

// An account's alert settings: the thresholds that warn it (a low
// balance, a month's spend, its keys' caps), where the warnings go (mail
// to the account's address, a signed webhook), and its automatic top-up
// (when the balance falls below a threshold, charge a saved card). One row
// per account that set any (alert_settings); an account without one has
// every alert off and pays nothing for them.

// AlertSettings is what an account set. Zero amounts are off.
type AlertSettings struct {
	AccountID string
	// LowBalance warns when the balance falls below it.
	LowBalance Money
	// MonthSpend warns when the calendar month's spend (UTC) reaches it.
	MonthSpend Money
	// KeyCaps warns when a capped key has spent 80 % and 100 % of its cap
	// in a period.
	KeyCaps bool
	// Mail delivers the warnings by mail to the account's address.
	Mail bool
	// WebhookURL, if set, receives each warning as a signed POST.
	WebhookURL string
	// WebhookSecret signs the webhook's deliveries (RotateWebhookSecret
	// makes one); it is shown to the customer once.
	WebhookSecret string
	// AutoTopup is the automatic top-up.
	AutoTopup AutoTopup
	UpdatedAt time.Time
}

// Any reports whether any alert or the automatic top-up is on: an
// account with none needs no watching.
func (a AlertSettings) Any() bool {
	return a.LowBalance > 0 || a.MonthSpend > 0 || a.KeyCaps || a.AutoTopup.On
}

// AutoTopup is an account's automatic top-up: when the balance falls
// below Below, charge Amount to the saved card, at most MonthMax in a
// calendar month (UTC).
type AutoTopup struct {
	On                      bool
	Below, Amount, MonthMax Money
	// OffReason says why the gateway turned it off (a declined card, a
	// payment that needs the customer's authentication); "" when the
	// customer did, or it is on.
	OffReason string
	Card      SavedCard
}

// SavedCard is a card saved with the payment provider for charges made
// while the customer is away.
type SavedCard struct {
	Customer, PaymentMethod string // the provider's ids
	Brand, Last4            string // what the customer is shown
}

// Saved reports whether there is a card.
func (c SavedCard) Saved() bool { return c.PaymentMethod != "" }

// Alerts is the part of the settings the customer sets on the alerts
// page (SetAlerts).
type Alerts struct {
	LowBalance, MonthSpend Money
	KeyCaps, Mail          bool
	WebhookURL             string
}

// MaxWebhookURL bounds a webhook's URL.
const MaxWebhookURL = 2000

// Check refuses negative thresholds and a webhook URL that is not an
// absolute http(s) URL.
func (a Alerts) Check() error {
	if a.LowBalance < 0 || a.MonthSpend < 0 {
		return errors.New("alert thresholds must not be negative")
	}
	if a.WebhookURL == "" {
		return nil
	}
	u, err := url.Parse(a.WebhookURL)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || len(a.WebhookURL) > MaxWebhookURL {
		return errors.New("the webhook URL must be an absolute http or https URL of at most 2000 characters")
	}
	return nil
}

// alertSettingsColumns are alert_settings' columns in scanSettings' order.
const alertSettingsColumns = `account_id, low_balance, month_spend, key_caps, mail, webhook_url, webhook_secret,
	topup_on, topup_below, topup_amount, topup_month_max, topup_off_reason,
	card_customer, card_method, card_brand, card_last4, updated_at`

// scanSettings reads one row of alertSettingsColumns.
func scanSettings(row interface{ Scan(...any) error }) (AlertSettings, error) {
	var a AlertSettings
	var keyCaps, mail, on int64
	var updated int64
	t := &a.AutoTopup
	err := row.Scan(&a.AccountID, &a.LowBalance, &a.MonthSpend, &keyCaps, &mail, &a.WebhookURL, &a.WebhookSecret,
		&on, &t.Below, &t.Amount, &t.MonthMax, &t.OffReason,
		&t.Card.Customer, &t.Card.PaymentMethod, &t.Card.Brand, &t.Card.Last4, &updated)
	a.KeyCaps, a.Mail, t.On = keyCaps != 0, mail != 0, on != 0
	a.UpdatedAt = time.UnixMilli(updated).UTC()
	return a, err
}

// AlertSettingsOf returns the account's settings: every alert off, mail
// on, when it set none.
func (s *Store) AlertSettingsOf(ctx context.Context, accountID string) (AlertSettings, error) {
	done, err := s.beginRead()
	if err != nil {
		return AlertSettings{}, err
	}
	defer done()
	a, err := scanSettings(s.queryRow(ctx, `SELECT `+alertSettingsColumns+` FROM alert_settings WHERE account_id = ?`, accountID))
	if errors.Is(err, sql.ErrNoRows) {
		return AlertSettings{AccountID: accountID, Mail: true}, nil
	}
	if err != nil {
		return AlertSettings{}, fmt.Errorf("ledger: alert settings of %s: %w", accountID, err)
	}
	return a, nil
}

// WatchedAccounts returns the settings of every account with an alert or
// the automatic top-up on, for a watcher's cache.
func (s *Store) WatchedAccounts(ctx context.Context) ([]AlertSettings, error) {
	done, err := s.beginRead()
	if err != nil {
		return nil, err
	}
	defer done()
	rows, err := s.query(ctx, `SELECT `+alertSettingsColumns+` FROM alert_settings
		WHERE low_balance > 0 OR month_spend > 0 OR key_caps <> 0 OR topup_on <> 0 ORDER BY account_id`)
	if err != nil {
		return nil, fmt.Errorf("ledger: watched accounts: %w", err)
	}
	defer rows.Close()
	var out []AlertSettings
	for rows.Next() {
		a, err := scanSettings(rows)
		if err != nil {
			return nil, fmt.Errorf("ledger: watched accounts: %w", err)
		}
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("ledger: watched accounts: %w", err)
	}
	return out, nil
}

// ensureSettings makes the account's settings row if it has none (mail
// on, everything else off), so that the setters below update one row.
const ensureSettings = `INSERT INTO alert_settings (account_id, updated_at) VALUES (?, ?) ON CONFLICT (account_id) DO NOTHING`

// updateSettings runs one UPDATE of the account's settings row, made
// first if missing. An unknown account is ErrNotFound.
func (s *Store) updateSettings(ctx context.Context, what, accountID, set string, args ...any) error {
	if _, err := s.loadAccount(ctx, accountID); err != nil {
		return err
	}
	now := s.now().UnixMilli()
	err := s.execCommand(ctx, what+" of "+accountID, func(ctx context.Context, conn execer) error {
		if _, err := conn.ExecContext(ctx, ensureSettings, accountID, now); err != nil {
			return err
		}
		_, err := conn.ExecContext(ctx, `UPDATE alert_settings SET `+set+`, updated_at = ? WHERE account_id = ?`,
			append(args, now, accountID)...)
		return err
	})
	if err != nil {
		return fmt.Errorf("ledger: %s: %w", what, err)
	}
	s.changed("alerts:" + accountID)
	return nil
}

// SetAlerts sets the account's thresholds, mail and webhook URL.
func (s *Store) SetAlerts(ctx context.Context, accountID string, a Alerts) error {
	if err := a.Check(); err != nil {
		return fmt.Errorf("ledger: %w", err)
	}
	return s.updateSettings(ctx, "set alerts", accountID,
		`low_balance = ?, month_spend = ?, key_caps = ?, mail = ?, webhook_url = ?`,
		a.LowBalance, a.MonthSpend, boolInt(a.KeyCaps), boolInt(a.Mail), a.WebhookURL)
}

// WebhookSecretPrefix starts every webhook signing secret.
const WebhookSecretPrefix = "whsec_"

// RotateWebhookSecret makes the account a new webhook signing secret and
// returns it; the old one signs nothing from now on.
func (s *Store) RotateWebhookSecret(ctx context.Context, accountID string) (string, error) {
	r, err := randomBase62(40)
	if err != nil {
		return "", err
	}
	secret := WebhookSecretPrefix + r
	if err := s.updateSettings(ctx, "rotate webhook secret", accountID, `webhook_secret = ?`, secret); err != nil {
		return "", err
	}
	return secret, nil
}

// ErrNoCard is an automatic top-up turned on without a saved card.
var ErrNoCard = errors.New("ledger: automatic top-up needs a saved card")

// SetAutoTopup sets the account's automatic top-up: on, when the balance
// falls below below, add amount, at most monthMax a month. Turning it on
// needs a saved card, an amount above zero and a monthly maximum of at
// least one top-up; it clears the reason it was turned off.
func (s *Store) SetAutoTopup(ctx context.Context, accountID string, on bool, below, amount, monthMax Money) error {
	if below < 0 || amount < 0 || monthMax < 0 {
		return errors.New("ledger: automatic top-up amounts must not be negative")
	}
	if on {
		if amount <= 0 || below <= 0 {
			return errors.New("ledger: automatic top-up needs a threshold and an amount above zero")
		}
		if monthMax < amount {
			return errors.New("ledger: automatic top-up's monthly maximum must be at least its amount")
		}
		cur, err := s.AlertSettingsOf(ctx, accountID)
		if err != nil {
			return err
		}
		if !cur.AutoTopup.Card.Saved() {
			return ErrNoCard
		}
	}
	return s.updateSettings(ctx, "set automatic top-up", accountID,
		`topup_on = ?, topup_below = ?, topup_amount = ?, topup_month_max = ?, topup_off_reason = ''`,
		boolInt(on), below, amount, monthMax)
}

// SaveCard keeps the card the customer saved for automatic top-ups (in
// place of any earlier one).
func (s *Store) SaveCard(ctx context.Context, accountID string, c SavedCard) error {
	if c.PaymentMethod == "" {
		return errors.New("ledger: a saved card needs its payment method")
	}
	return s.updateSettings(ctx, "save card", accountID,
		`card_customer = ?, card_method = ?, card_brand = ?, card_last4 = ?`,
		c.Customer, c.PaymentMethod, c.Brand, c.Last4)
}

// TurnOffAutoTopup turns the account's automatic top-up off, saying why
// (a declined card…); the customer turns it on again.
func (s *Store) TurnOffAutoTopup(ctx context.Context, accountID, reason string) error {
	return s.updateSettings(ctx, "turn off automatic top-up", accountID, `topup_on = 0, topup_off_reason = ?`, reason)
}

// SpendSince is what the account was charged from since until now, for
// the burn rate of a low-balance warning. It reads the usage rows through
// the keys' index.
func (s *Store) SpendSince(ctx context.Context, accountID string, since time.Time) (Money, error) {
	done, err := s.beginRead()
	if err != nil {
		return 0, err
	}
	defer done()
	var spent Money
	err = s.queryRow(ctx, `SELECT coalesce(sum(charged), 0) FROM usage
		WHERE key_id IN (SELECT id FROM keys WHERE account_id = ?) AND created_at >= ?`, accountID, since.UnixMilli()).Scan(&spent)
	if err != nil {
		return 0, fmt.Errorf("ledger: spend of %s: %w", accountID, err)
	}
	return spent, nil
}
