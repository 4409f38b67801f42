// Package accounts is the one way accounts are opened, funded and given
// keys, for the admin API, the `caddy modelgate` commands and the console
// alike: an account with an optional console login and an opening credit,
// credits with a reason and a unique reference, API keys created (with
// their own limits, checked against the plan), changed and
// deleted. It checks what the caller was given and leaves the writing to
// the ledger.
package accounts

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/modelgate/modelgate/ledger"
	"github.com/modelgate/modelgate/passwords"
)

// MaxLabel is the longest key label, in characters.
const MaxLabel = 64

// InvalidError is a request the caller must change: its message says what to
// send instead, in words for a person (the admin API answers it with a 400,
// the commands print it).
type InvalidError struct{ Msg string }

func (e *InvalidError) Error() string { return e.Msg }

// invalid makes an InvalidError.
func invalid(format string, args ...any) error {
	return &InvalidError{Msg: fmt.Sprintf(format, args...)}
}

// Service opens and funds accounts in one ledger.
type Service struct {
	Store *ledger.Store
	// DefaultPlan is the plan of accounts opened without one.
	DefaultPlan string
	// Plan reports whether a plan exists; nil accepts any name (a command
	// run without the configuration's plans).
	Plan func(name string) bool
	// Offer is what the plan named name offers its accounts' keys (nil:
	// no such plan); a nil Offer checks keys' limits only for their own
	// ranges (a command run without the configuration's catalogue).
	Offer func(name string) *PlanOffer
}

// Opening is what an account is opened with.
type Opening struct {
	Email string
	// Password gives the account a console login (it needs an email);
	// PasswordHash is one already hashed (passwords.Hash) by a caller that
	// queues its hashes.
	Password, PasswordHash string
	// Unverified marks the login's email as awaiting verification
	// (ledger.EmailPending): the console's sign-up while it sends mail.
	Unverified bool
	Plan       string       // "": the default plan
	Credit     ledger.Money // an opening credit, reason "opening credit"
}

// Open opens an account. A taken email is ledger.ErrDuplicate; a request to
// change is an *InvalidError. If the opening credit fails, the account exists
// and the error says so.
func (s *Service) Open(ctx context.Context, o Opening) (ledger.Account, error) {
	if o.Plan == "" {
		o.Plan = s.DefaultPlan
	}
	if s.Plan != nil && !s.Plan(o.Plan) {
		return ledger.Account{}, invalid("plan %q is not in the configuration", o.Plan)
	}
	if o.Credit < 0 {
		return ledger.Account{}, invalid("credit %s: want a positive amount, such as \"10.00\"", o.Credit)
	}
	if o.Email != "" && !plausibleEmail(o.Email) {
		return ledger.Account{}, invalid("%q is not an email address", o.Email)
	}
	hash := o.PasswordHash
	if o.Password != "" {
		if err := passwords.Check(o.Password); err != nil {
			return ledger.Account{}, invalid("%v", err)
		}
		h, err := passwords.Hash(o.Password)
		if err != nil {
			return ledger.Account{}, err
		}
		hash = h
	}
	var acct ledger.Account
	var err error
	if hash != "" {
		if o.Email == "" {
			return ledger.Account{}, invalid("a console login needs an email")
		}
		if o.Unverified {
			acct, err = s.Store.CreatePendingLogin(ctx, o.Email, o.Plan, hash)
		} else {
			acct, err = s.Store.CreateLogin(ctx, o.Email, o.Plan, hash)
		}
	} else {
		acct, err = s.Store.CreateAccount(ctx, o.Email, o.Plan)
	}
	if err != nil {
		return ledger.Account{}, err
	}
	if o.Credit > 0 {
		if _, err := s.Store.Credit(ctx, ledger.CreditRequest{AccountID: acct.ID, Amount: o.Credit,
			Reference: "opening:" + acct.ID, Reason: "opening credit"}); err != nil {
			return acct, fmt.Errorf("account %s was opened, but its opening credit failed: %w", acct.ID, err)
		}
	}
	return acct, nil
}

// plausibleEmail is the shape of an email address, leniently: something,
// one @, a domain with a dot, no spaces or angle brackets.
func plausibleEmail(s string) bool {
	s = strings.TrimSpace(s)
	local, domain, ok := strings.Cut(s, "@")
	return ok && local != "" && strings.Contains(domain, ".") && !strings.ContainsAny(s, " \t\r\n<>") &&
		!strings.ContainsRune(domain, '@') && !strings.HasPrefix(domain, ".") && !strings.HasSuffix(domain, ".") && len(s) <= 254
}

// Credit adds amount to an account's balance (an operator's credit), once
// per reference, and a script may send it again after a lost answer: the
// same reference again changes nothing and returns the first credit's
// result with replayed set, as Adjust does. A reference already used by
// another change (another account, kind or amount) is an error naming it,
// wrapping ledger.ErrDuplicate.
func (s *Service) Credit(ctx context.Context, accountID string, amount ledger.Money, reason, reference string) (res ledger.MoneyResult, replayed bool, err error) {
	if amount <= 0 {
		return res, false, invalid("amount %s: want a positive amount, such as \"5.00\"", amount)
	}
	res, err = s.Store.ApplyMoney(ctx, ledger.MoneyChange{AccountID: accountID, Kind: ledger.KindCredit, Amount: amount,
		Reason: reason, Reference: reference})
	if errors.Is(err, ledger.ErrDuplicate) && len(res.Entries) > 0 {
		first := res.Entries[0]
		if first.AccountID != accountID || first.Kind != ledger.KindCredit || first.Amount != amount {
			return ledger.MoneyResult{}, false, fmt.Errorf("reference %q was used already, for a %s of %s on account %s: give this credit a reference of its own: %w",
				reference, first.Kind, first.Amount, first.AccountID, ledger.ErrDuplicate)
		}
		return res, true, nil
	}
	return res, false, err
}

// TopUp is a payment to credit: what the payment provider says was paid.
type TopUp struct {
	AccountID string
	Amount    ledger.Money
	// Reference identifies the payment across its notifications (for
	// Stripe, the Checkout Session); it is the entry's unique reference.
	Reference string
	// Reason is the entry's words in the account's history.
	Reason string
	// Payment is the payment a refund or dispute of it will name.
	Payment string
}

// CreditTopUp credits a paid top-up once per reference: a redelivered or
// concurrently delivered notification of the same payment is
// ledger.ErrDuplicate and changes nothing more, since the reference is
// written in the same transaction as the balance change. It returns the
// new balance; an account the ledger does not have is ledger.ErrNotFound.
func (s *Service) CreditTopUp(ctx context.Context, t TopUp) (ledger.Money, error) {
	return s.Store.Credit(ctx, ledger.CreditRequest{AccountID: t.AccountID, Amount: t.Amount,
		Reference: t.Reference, Reason: t.Reason, Kind: ledger.KindTopup, Payment: t.Payment})
}

// Reversal is a paid top-up's reversal as the payment provider reports it:
// a refund, a dispute, or a dispute's outcome.
type Reversal struct {
	// Kind is ledger.KindRefund, KindDispute, KindDisputeWon or
	// KindDisputeLost.
	Kind string
	// Amount: a refund's total so far, a dispute's amount.
	Amount ledger.Money
	// Reference is the entry's unique reference: the refund's charge and
	// total, the dispute's id.
	Reference string
	// Reason is the entry's words in the account's history.
	Reason string
	// Payment is the payment the reversed top-up names; Dispute, for a
	// dispute's outcome, the dispute's reference.
	Payment, Dispute string
}

// ReversePayment applies a reversal exactly once: its unique reference is
// written in the same transaction as the balance change, so a redelivery is
// ledger.ErrDuplicate. What the balance does not cover is owed, and the
// account is suspended for debt until a payment covers it. A reversal of a
// payment the ledger holds no top-up of is ledger.ErrNotFound.
func (s *Service) ReversePayment(ctx context.Context, r Reversal) (ledger.MoneyResult, error) {
	switch r.Kind {
	case ledger.KindRefund, ledger.KindDispute, ledger.KindDisputeWon, ledger.KindDisputeLost:
	default:
		return ledger.MoneyResult{}, invalid("%q is not a reversal of a payment", r.Kind)
	}
	return s.Store.ApplyMoney(ctx, ledger.MoneyChange{Kind: r.Kind, Amount: r.Amount, Reference: r.Reference,
		Reason: r.Reason, Payment: r.Payment, Dispute: r.Dispute})
}

// DeleteKey deletes a key: the next request with it is refused (on other
// instances within a second).
func (s *Service) DeleteKey(ctx context.Context, keyID string) error {
	if keyID == "" {
		return invalid("which key? give its id (key_…)")
	}
	return s.Store.DeleteKey(ctx, keyID)
}

// IsInvalid reports whether err is a request to change (an *InvalidError).
func IsInvalid(err error) bool {
	var inv *InvalidError
	return errors.As(err, &inv)
}

// Limits of an adjustment's words.
const (
	MaxReason    = 500 // characters of a reason
	MaxReference = 200 // characters of a reference
)

// Adjustment is an operator's debit (a negative Amount) or correction of
// an account's balance.
type Adjustment struct {
	AccountID string
	Amount    ledger.Money // signed, not zero
	Reason    string       // required: why, kept in the account's history
	Reference string       // required: the idempotency key
	// AllowOwed lets a debit beyond the available balance take what there
	// is and record the rest as owed, which suspends the account until a
	// payment covers it; without it such a debit is refused.
	AllowOwed bool
}

// Adjust applies an adjustment once per reference: the same reference
// again changes nothing and returns the first result with replayed set
// (an *InvalidError if that reference was used for another account, amount or
// kind of entry). A debit
// the available balance does not cover without AllowOwed is refused with
// an error wrapping ledger.ErrInsufficientFunds.
func (s *Service) Adjust(ctx context.Context, a Adjustment) (res ledger.MoneyResult, replayed bool, err error) {
	a.Reason, a.Reference = strings.TrimSpace(a.Reason), strings.TrimSpace(a.Reference)
	switch {
	case a.AccountID == "":
		return res, false, invalid("which account? give its id (acct_…)")
	case a.Amount == 0:
		return res, false, invalid("amount: want a debit (\"-5.00\") or a credit (\"5.00\"), not zero")
	case a.Reason == "":
		return res, false, invalid("reason: every adjustment says why")
	case len([]rune(a.Reason)) > MaxReason:
		return res, false, invalid("reason: at most %d characters", MaxReason)
	case a.Reference == "":
		return res, false, invalid("reference: every adjustment has a unique reference, so that sending it again applies it once (e.g. a ticket number)")
	case len([]rune(a.Reference)) > MaxReference:
		return res, false, invalid("reference: at most %d characters", MaxReference)
	}
	res, err = s.Store.ApplyMoney(ctx, ledger.MoneyChange{AccountID: a.AccountID, Kind: ledger.KindAdjustment, Amount: a.Amount,
		Reason: a.Reason, Reference: a.Reference, AllowOwed: a.AllowOwed})
	if errors.Is(err, ledger.ErrDuplicate) && len(res.Entries) > 0 {
		first := res.Entries[0]
		// the amount asked for: what was taken (or credited) and what was owed
		if first.AccountID != a.AccountID || first.Kind != ledger.KindAdjustment || first.Amount-first.Owed != a.Amount {
			return ledger.MoneyResult{}, false, invalid("reference %q was used already, for a %s of %s on account %s: give this adjustment a reference of its own",
				a.Reference, first.Kind, first.Amount, first.AccountID)
		}
		return res, true, nil
	}
	return res, false, err
}

// History is a page of an account's money history, newest first (limit:
// 1 to 1000; before: the Next of the page before, or 0).
func (s *Service) History(ctx context.Context, accountID string, before int64, limit int) (ledger.HistoryPage, error) {
	if limit < 1 || limit > 1000 {
		return ledger.HistoryPage{}, invalid("limit %d: want 1 to 1000", limit)
	}
	if before < 0 {
		return ledger.HistoryPage{}, invalid("before %d: want the next of the previous page", before)
	}
	return s.Store.History(ctx, accountID, before, limit)
}
