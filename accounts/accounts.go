// Package accounts is the one way accounts are opened, funded and given
// keys, for the admin API, the `caddy modelgate` commands and the console
// alike: an account with an optional console login and an opening credit,
// credits with a reason and a unique reference, API keys created and
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

// Invalid is a request the caller must change: its message says what to
// send instead, in words for a person (the admin API answers it with a 400,
// the commands print it).
type Invalid struct{ Msg string }

func (e *Invalid) Error() string { return e.Msg }

// invalid makes an Invalid.
func invalid(format string, args ...any) error { return &Invalid{Msg: fmt.Sprintf(format, args...)} }

// Service opens and funds accounts in one ledger.
type Service struct {
	Store *ledger.Store
	// DefaultPlan is the plan of accounts opened without one.
	DefaultPlan string
	// Plan reports whether a plan exists; nil accepts any name (a command
	// run without the configuration's plans).
	Plan func(name string) bool
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
// change is an *Invalid. If the opening credit fails, the account exists
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

// Credit adds amount to an account's balance, once per reference (a
// second credit with the same reference is ledger.ErrDuplicate and changes
// nothing); it returns the new balance.
func (s *Service) Credit(ctx context.Context, accountID string, amount ledger.Money, reason, reference string) (ledger.Money, error) {
	if amount <= 0 {
		return 0, invalid("amount %s: want a positive amount, such as \"5.00\"", amount)
	}
	return s.Store.Credit(ctx, ledger.CreditRequest{AccountID: accountID, Amount: amount, Reference: reference, Reason: reason})
}

// CreateKey makes a key for an account and returns it, the only time it is
// ever seen whole.
func (s *Service) CreateKey(ctx context.Context, accountID, label string) (secret string, k ledger.Key, err error) {
	label = strings.TrimSpace(label)
	if n := len([]rune(label)); n > MaxLabel {
		return "", ledger.Key{}, invalid("a key's label has at most %d characters, not %d", MaxLabel, n)
	}
	return s.Store.CreateKey(ctx, accountID, label)
}

// DeleteKey deletes a key: the next request with it is refused (on other
// instances within a second).
func (s *Service) DeleteKey(ctx context.Context, keyID string) error {
	if keyID == "" {
		return invalid("which key? give its id (key_…)")
	}
	return s.Store.DeleteKey(ctx, keyID)
}

// IsInvalid reports whether err is a request to change (an *Invalid).
func IsInvalid(err error) bool {
	var inv *Invalid
	return errors.As(err, &inv)
}
