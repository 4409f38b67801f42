package ledger

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Crossings of an account's alert thresholds (a low balance, a key's cap
// at 80 % and 100 %, a month's spend): each fires once per crossing,
// whichever instance sees it first, never once per request. The ledger
// keeps one row per armed-and-fired alert; firing is the insert of that
// row, which only one writer can make (the table's key), and re-arming is
// its removal, so that the next crossing fires again.
//
// An alert's name says what it watches and, for an alert of a period, the
// period ("low_balance", "month_spend:2026-11", "key_cap_80:key_…:<period
// start>:<cap>"): a period's alert fires once in the period and is never
// re-armed; the next period's has another name.

// alertStore keeps the alerts' crossings (Store embeds it).
type alertStore struct{ db sideDB }

// MaxAlertName bounds an alert's name.
const MaxAlertName = 200

// Fired is an alert that fired: when, and what the caller recorded of the
// crossing (the balance, the spend, the threshold: a short text for the
// messages that tell of it).
type Fired struct {
	AccountID, Alert, Detail string
	At                       time.Time
}

// FireAlert records that the account's alert fired at now, with detail,
// and reports whether this call fired it: false when it had fired already
// and was not re-armed since (another request, or another instance, saw
// the crossing first). Exactly one of any number of concurrent calls on
// every instance returns true.
func (a alertStore) FireAlert(ctx context.Context, accountID, alert, detail string, now time.Time) (bool, error) {
	return a.FireAlertWith(ctx, accountID, alert, detail, now, nil)
}

// RearmAlert arms the account's alert again (the balance is back above
// its threshold): its next crossing fires. It reports whether the alert
// had fired.
func (a alertStore) RearmAlert(ctx context.Context, accountID, alert string) (bool, error) {
	if err := checkAlertName(alert); err != nil {
		return false, err
	}
	var rearmed bool
	err := a.db.execCommand(ctx, "rearm alert "+alert+" of "+accountID, func(ctx context.Context, conn execer) error {
		res, err := conn.ExecContext(ctx, `DELETE FROM alerts_fired WHERE account_id = ? AND alert = ?`, accountID, alert)
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		rearmed = n == 1
		return err
	})
	if err != nil {
		return false, fmt.Errorf("ledger: rearm alert %s: %w", alert, err)
	}
	return rearmed, nil
}

// FiredAlerts lists the account's alerts that fired and are not re-armed,
// newest first.
func (a alertStore) FiredAlerts(ctx context.Context, accountID string) ([]Fired, error) {
	done, err := a.db.beginRead()
	if err != nil {
		return nil, err
	}
	defer done()
	rows, err := a.db.query(ctx, `SELECT alert, detail, fired_at FROM alerts_fired WHERE account_id = ? ORDER BY fired_at DESC, alert`, accountID)
	if err != nil {
		return nil, fmt.Errorf("ledger: fired alerts: %w", err)
	}
	defer rows.Close()
	out := []Fired{}
	for rows.Next() {
		f := Fired{AccountID: accountID}
		var at int64
		if err := rows.Scan(&f.Alert, &f.Detail, &at); err != nil {
			return nil, fmt.Errorf("ledger: fired alerts: %w", err)
		}
		f.At = time.UnixMilli(at).UTC()
		out = append(out, f)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("ledger: fired alerts: %w", err)
	}
	return out, nil
}

// checkAlertName refuses an empty or overlong name.
func checkAlertName(alert string) error {
	if strings.TrimSpace(alert) == "" || len(alert) > MaxAlertName {
		return errors.New("ledger: an alert needs a name of at most 200 bytes")
	}
	return nil
}
