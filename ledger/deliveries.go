package ledger

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// The outbox of the alerts: what a fired alert must still do (a mail, a
// webhook POST, an automatic top-up's charge) is written in the same
// transaction that fires it, so that a crossing is delivered exactly once
// even when the instance that saw it stops before it sends anything. Any
// instance's worker claims a due delivery for a lease, tries it, and
// finishes it (done, failed for good, or due again later); a delivery
// whose lease lapsed (its worker stopped) is claimed again.

// Channels of a delivery.
const (
	ChannelMail    = "mail"
	ChannelWebhook = "webhook"
	ChannelTopup   = "topup"
)

// Statuses of a delivery.
const (
	DeliveryPending = "pending"
	DeliveryDone    = "done"
	DeliveryFailed  = "failed"
)

// Delivery is one thing a fired alert must do.
type Delivery struct {
	// ID identifies the delivery; a top-up's is its charge's idempotency
	// key ("topup:<account>:<crossing>").
	ID, AccountID, Alert string
	Channel              string // ChannelMail, ChannelWebhook, ChannelTopup
	// Target is where it goes: the mail address or the webhook's URL.
	Target string
	// Payload is the event, as JSON: the webhook's body, what the mail
	// says.
	Payload []byte
	// Amount is a top-up's amount.
	Amount Money
	Status string
	// Attempts counts the tries so far, the current one included once
	// claimed.
	Attempts int
	// LastError is the last failed try's cause; Result what the
	// successful one answered (an HTTP status, a payment's id).
	LastError, Result         string
	CreatedAt, NextAt, DoneAt time.Time
}

// FireAlertWith is FireAlert that, when this call fires the alert, also
// writes deliveries into the outbox, in the same transaction: a
// crossing's deliveries are written once, by the one caller that fired
// it. Each delivery needs an ID, a channel and an account (the alert's);
// NextAt zero means now.
func (a alertStore) FireAlertWith(ctx context.Context, accountID, alert, detail string, now time.Time, deliveries []Delivery) (bool, error) {
	if err := checkAlertName(alert); err != nil {
		return false, err
	}
	for _, d := range deliveries {
		if d.ID == "" || (d.Channel != ChannelMail && d.Channel != ChannelWebhook && d.Channel != ChannelTopup) {
			return false, fmt.Errorf("ledger: fire alert %s: a delivery needs an id and a known channel", alert)
		}
	}
	var fired bool
	err := a.db.execCommand(ctx, "fire alert "+alert+" of "+accountID, func(ctx context.Context, conn execer) error {
		fired = false
		res, err := conn.ExecContext(ctx, `INSERT INTO alerts_fired (account_id, alert, detail, fired_at) VALUES (?, ?, ?, ?)
			ON CONFLICT (account_id, alert) DO NOTHING`, accountID, alert, detail, now.UnixMilli())
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		if err != nil || n != 1 {
			return err
		}
		fired = true
		for _, d := range deliveries {
			next := d.NextAt
			if next.IsZero() {
				next = now
			}
			if _, err := conn.ExecContext(ctx, `INSERT INTO alert_deliveries
				(id, account_id, alert, channel, target, payload, amount, status, next_at, created_at)
				VALUES (?, ?, ?, ?, ?, ?, ?, 'pending', ?, ?)`,
				d.ID, accountID, alert, d.Channel, d.Target, string(d.Payload), d.Amount, next.UnixMilli(), now.UnixMilli()); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("ledger: fire alert %s: %w", alert, err)
	}
	return fired, nil
}

// deliveryColumns are alert_deliveries' columns in scanDelivery's order.
const deliveryColumns = `id, account_id, alert, channel, target, payload, amount, status, attempts, last_error, result,
	created_at, next_at, done_at`

// scanDelivery reads one row of deliveryColumns.
func scanDelivery(row interface{ Scan(...any) error }) (Delivery, error) {
	var d Delivery
	var payload string
	var created, next int64
	var doneAt sql.NullInt64
	err := row.Scan(&d.ID, &d.AccountID, &d.Alert, &d.Channel, &d.Target, &payload, &d.Amount, &d.Status, &d.Attempts,
		&d.LastError, &d.Result, &created, &next, &doneAt)
	d.Payload = []byte(payload)
	d.CreatedAt, d.NextAt, d.DoneAt = time.UnixMilli(created).UTC(), time.UnixMilli(next).UTC(), fromMilli(doneAt)
	return d, err
}

// ClaimDelivery takes the most overdue pending delivery whose lease (if
// any) lapsed, for owner until now+lease, and counts the attempt. ok is
// false when none is due. Of workers claiming at once on any number of
// instances, one gets each delivery: the claim's UPDATE checks the lease
// again on the row it locks.
func (a alertStore) ClaimDelivery(ctx context.Context, owner string, now time.Time, lease time.Duration) (d Delivery, ok bool, err error) {
	at := now.UnixMilli()
	// a read first: an idle instance, asking every second, costs the
	// ledger no write
	if due, err := a.anyDue(ctx, at); err != nil || !due {
		return Delivery{}, false, err
	}
	err = a.db.execCommand(ctx, "claim a delivery", func(ctx context.Context, conn execer) error {
		var e error
		d, e = scanDelivery(conn.QueryRowContext(ctx, `UPDATE alert_deliveries
			SET lease_until = ?, leased_by = ?, attempts = attempts + 1
			WHERE id = (SELECT id FROM alert_deliveries WHERE `+dueDelivery+` ORDER BY next_at, id LIMIT 1)
			AND status = 'pending' AND lease_until <= ?
			RETURNING `+deliveryColumns, now.Add(lease).UnixMilli(), owner, at, at, at))
		ok = e == nil
		if errors.Is(e, sql.ErrNoRows) {
			return nil
		}
		return e
	})
	if err != nil {
		return Delivery{}, false, fmt.Errorf("ledger: claim a delivery: %w", err)
	}
	return d, ok, nil
}

// dueDelivery is the condition of a delivery due and unleased at ?, ?
// (both the same unix ms): the claim's and anyDue's, so that the read
// that spares an idle instance's worker a write never says none while
// the claim would find one.
const dueDelivery = `status = 'pending' AND next_at <= ? AND lease_until <= ?`

// anyDue reports whether a delivery is due and unleased at at (unix ms).
func (a alertStore) anyDue(ctx context.Context, at int64) (bool, error) {
	done, err := a.db.beginRead()
	if err != nil {
		return false, err
	}
	defer done()
	var one int
	err = a.db.queryRow(ctx, `SELECT 1 FROM alert_deliveries WHERE `+dueDelivery+` LIMIT 1`, at, at).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("ledger: claim a delivery: %w", err)
	}
	return true, nil
}

// DeliveryOutcome is how a try of a delivery ended.
type DeliveryOutcome struct {
	// Done: delivered; Result says what the other side answered.
	Done   bool
	Result string
	// Error is a failed try's cause. With RetryAt set the delivery is due
	// again then; without, it failed for good.
	Error   string
	RetryAt time.Time
}

// ErrLeaseLost is a delivery finished by a worker whose lease lapsed and
// that another worker claimed since.
var ErrLeaseLost = errors.New("ledger: the delivery's lease was lost to another worker")

// FinishDelivery records a try's outcome of a delivery owner claimed.
func (a alertStore) FinishDelivery(ctx context.Context, id, owner string, now time.Time, o DeliveryOutcome) error {
	status, next := DeliveryFailed, now.UnixMilli()
	var doneAt any = now.UnixMilli()
	switch {
	case o.Done:
		status = DeliveryDone
	case !o.RetryAt.IsZero():
		status, next, doneAt = DeliveryPending, o.RetryAt.UnixMilli(), nil
	}
	var n int64
	err := a.db.execCommand(ctx, "finish delivery "+id, func(ctx context.Context, conn execer) error {
		res, err := conn.ExecContext(ctx, `UPDATE alert_deliveries SET status = ?, next_at = ?, done_at = ?, lease_until = 0,
			last_error = CASE WHEN ? = '' THEN last_error ELSE ? END, result = ?
			WHERE id = ? AND leased_by = ? AND status = 'pending'`,
			status, next, doneAt, o.Error, truncate(o.Error, 500), truncate(o.Result, 200), id, owner)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return fmt.Errorf("ledger: finish delivery %s: %w", id, err)
	}
	if n == 0 {
		return ErrLeaseLost
	}
	return nil
}

// truncate cuts s to at most n bytes, on a rune boundary.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && s[n]&0xc0 == 0x80 {
		n--
	}
	return s[:n]
}

// Deliveries lists the account's last deliveries, newest first: of one
// channel, or of all when channel is "".
func (a alertStore) Deliveries(ctx context.Context, accountID, channel string, limit int) ([]Delivery, error) {
	done, err := a.db.beginRead()
	if err != nil {
		return nil, err
	}
	defer done()
	if limit <= 0 || limit > 500 {
		limit = 50
	}
	rows, err := a.db.query(ctx, `SELECT `+deliveryColumns+` FROM alert_deliveries
		WHERE account_id = ? AND (? = '' OR channel = ?) ORDER BY created_at DESC, id DESC LIMIT ?`, accountID, channel, channel, limit)
	if err != nil {
		return nil, fmt.Errorf("ledger: deliveries: %w", err)
	}
	defer rows.Close()
	out := []Delivery{}
	for rows.Next() {
		d, err := scanDelivery(rows)
		if err != nil {
			return nil, fmt.Errorf("ledger: deliveries: %w", err)
		}
		out = append(out, d)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("ledger: deliveries: %w", err)
	}
	return out, nil
}

// AutoTopupsInMonth is what the account's automatic top-ups created in
// now's calendar month (UTC) charge or may still charge: those not failed.
func (a alertStore) AutoTopupsInMonth(ctx context.Context, accountID string, now time.Time) (Money, error) {
	done, err := a.db.beginRead()
	if err != nil {
		return 0, err
	}
	defer done()
	now = now.UTC()
	start := time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC)
	var sum Money
	err = a.db.queryRow(ctx, `SELECT coalesce(sum(amount), 0) FROM alert_deliveries
		WHERE account_id = ? AND channel = 'topup' AND status <> 'failed' AND created_at >= ?`, accountID, start.UnixMilli()).Scan(&sum)
	if err != nil {
		return 0, fmt.Errorf("ledger: automatic top-ups of %s: %w", accountID, err)
	}
	return sum, nil
}

// FailTopup marks an automatic top-up's delivery failed after it was
// made: the provider reported its charge failed later (a bank's decline
// or a required authentication after the charge was created). It then
// no longer counts in the month's top-ups. It reports whether the
// delivery was not failed already.
func (a alertStore) FailTopup(ctx context.Context, id, reason string, now time.Time) (bool, error) {
	var n int64
	err := a.db.execCommand(ctx, "fail top-up "+id, func(ctx context.Context, conn execer) error {
		res, err := conn.ExecContext(ctx, `UPDATE alert_deliveries SET status = 'failed', last_error = ?, done_at = ?, lease_until = 0
			WHERE id = ? AND channel = 'topup' AND status <> 'failed'`, truncate(reason, 500), now.UnixMilli(), id)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return false, fmt.Errorf("ledger: fail top-up %s: %w", id, err)
	}
	return n == 1, nil
}
