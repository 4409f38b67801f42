package accounts

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/modelgate/modelgate/ledger"
)

// PlanOffer is what an account's plan lets its keys have: a key's own
// limits narrow the plan's, never widen them.
type PlanOffer struct {
	// RPM and Concurrency are the plan's (0: unlimited); a key's own may
	// not be higher.
	RPM, Concurrency int
	// Offers reports whether a model id, or a pattern in which * stands
	// for any run of characters, names or matches a model the plan offers.
	// nil: any entry is taken.
	Offers func(pattern string) bool
}

// CreateKey makes a key for an account and returns it, the only time it is
// ever seen whole.
func (s *Service) CreateKey(ctx context.Context, accountID, label string) (secret string, k ledger.Key, err error) {
	return s.CreateKeyWithLimits(ctx, accountID, label, ledger.KeyLimits{})
}

// CreateKeyWithLimits is CreateKey for a key with its own limits (all
// optional): they are checked as UpdateKey checks them, and an expiry must
// be in the future.
func (s *Service) CreateKeyWithLimits(ctx context.Context, accountID, label string, l ledger.KeyLimits) (secret string, k ledger.Key, err error) {
	label = strings.TrimSpace(label)
	if n := len([]rune(label)); n > MaxLabel {
		return "", ledger.Key{}, invalid("a key's label has at most %d characters, not %d", MaxLabel, n)
	}
	offer, err := s.offerOf(ctx, accountID, &l)
	if err != nil {
		return "", ledger.Key{}, err
	}
	if l, err = CheckKeyLimits(l, nil, offer, time.Now()); err != nil {
		return "", ledger.Key{}, err
	}
	return s.Store.CreateKeyWithLimits(ctx, accountID, label, l)
}

// UpdateKey replaces a key's own limits with l (the zero KeyLimits: none)
// and returns the key as it now is. The limits are checked against the
// account's plan; an expiry that changes must be in the future (one left
// as it was may have passed). A cap set where there was none, or a new
// period, counts the key's spend so far in the period; a changed amount
// keeps it, so that a cap lowered below the spend refuses the key's next
// request. A deleted key cannot be changed; an unknown one is
// ledger.ErrNotFound.
func (s *Service) UpdateKey(ctx context.Context, keyID string, l ledger.KeyLimits) (ledger.Key, error) {
	if keyID == "" {
		return ledger.Key{}, invalid("which key? give its id (key_…)")
	}
	k, err := s.Store.KeyByID(ctx, keyID)
	if err != nil {
		return ledger.Key{}, err
	}
	if k.Deleted {
		return ledger.Key{}, invalid("key %s is deleted: its limits can no longer change", keyID)
	}
	offer, err := s.offerOf(ctx, k.AccountID, &l)
	if err != nil {
		return ledger.Key{}, err
	}
	if l, err = CheckKeyLimits(l, &k.Limits, offer, time.Now()); err != nil {
		return ledger.Key{}, err
	}
	return s.Store.SetKeyLimits(ctx, keyID, l)
}

// offerOf is what the plan of the account offers limits l (nil when the
// service has no plans, or l asks nothing of the plan).
func (s *Service) offerOf(ctx context.Context, accountID string, l *ledger.KeyLimits) (*PlanOffer, error) {
	if s.Offer == nil || (l.Models == nil && l.RPM == 0 && l.Concurrency == 0) {
		return nil, nil
	}
	acct, err := s.Store.GetAccount(ctx, accountID)
	if err != nil {
		return nil, err
	}
	return s.Offer(acct.Plan), nil
}

// CheckKeyLimits checks a key's limits as a customer or an operator sent
// them and returns them tidied: the period named in full, model entries trimmed and without repeats, the expiry to the
// millisecond (as the ledger keeps it). old is the key's limits before
// (nil for a new key): an expiry kept as it was is not checked against
// now. offer is what the account's plan offers (nil: not checked). The
// refusals are *InvalidErrors, in words for a person.
func CheckKeyLimits(l ledger.KeyLimits, old *ledger.KeyLimits, offer *PlanOffer, now time.Time) (ledger.KeyLimits, error) {
	p, err := ledger.ParsePeriod(string(l.Period))
	if err != nil {
		return l, invalid("%v", err)
	}
	l.Period = p
	switch {
	case l.Cap < 0:
		return l, invalid("cap %s: want a positive amount, such as \"20.00\", or none", l.Cap)
	case l.Cap == 0 && l.Period != ledger.PeriodNever:
		return l, invalid("period %s: a reset period is the cap's; give a cap too", l.Period)
	}
	switch {
	case l.RPM < 0:
		return l, invalid("rpm %d: want a number of requests a minute, or 0 for the plan's", l.RPM)
	case l.Concurrency < 0:
		return l, invalid("concurrency %d: want a number of requests at once, or 0 for the plan's", l.Concurrency)
	case offer != nil && offer.RPM > 0 && l.RPM > offer.RPM:
		return l, invalid("rpm %d: the plan allows at most %d requests a minute; a key's own limit can only be lower", l.RPM, offer.RPM)
	case offer != nil && offer.Concurrency > 0 && l.Concurrency > offer.Concurrency:
		return l, invalid("concurrency %d: the plan allows at most %d requests at once; a key's own limit can only be lower", l.Concurrency, offer.Concurrency)
	}
	if l.Models, err = tidyModels(l.Models, offer); err != nil {
		return l, err
	}
	if !l.ExpiresAt.IsZero() {
		l.ExpiresAt = time.UnixMilli(l.ExpiresAt.UnixMilli()).UTC()
		kept := old != nil && old.ExpiresAt.Equal(l.ExpiresAt)
		if !kept && !l.ExpiresAt.After(now) {
			return l, invalid("expires %s: want a time in the future (to stop a key now, delete it)", l.ExpiresAt.Format(time.RFC3339))
		}
	}
	if err := l.Validate(); err != nil {
		return l, invalid("%s", strings.TrimPrefix(err.Error(), "ledger: "))
	}
	return l, nil
}

// tidyModels checks a key's model list: nil is every model of the plan;
// otherwise at least one entry, each naming or matching a model the plan
// offers, trimmed, repeats dropped.
func tidyModels(models []string, offer *PlanOffer) ([]string, error) {
	if models == nil {
		return nil, nil
	}
	out := make([]string, 0, len(models))
	seen := make(map[string]bool, len(models))
	for _, m := range models {
		m = strings.TrimSpace(m)
		switch {
		case m == "":
			return nil, invalid("models: an entry is empty; name a model id such as gpt-4o-mini, or a pattern such as claude-*")
		case len(m) > 200 || strings.ContainsAny(m, " \t\r\n,"):
			return nil, invalid("models: %q is not a model id or pattern", m)
		case seen[m]:
			continue
		case offer != nil && offer.Offers != nil && !offer.Offers(m):
			if strings.Contains(m, "*") {
				return nil, invalid("models: %s matches no model the plan offers", m)
			}
			return nil, invalid("models: %s is not a model the plan offers", m)
		}
		seen[m] = true
		out = append(out, m)
	}
	if len(out) == 0 {
		return nil, invalid("models: name at least one model or pattern, or give no list for every model of the plan")
	}
	if len(out) > ledger.MaxKeyModels {
		return nil, invalid("models: at most %d entries, not %d", ledger.MaxKeyModels, len(out))
	}
	return out, nil
}

// ParseExpiry reads when a key expires, as a person writes it: an RFC
// 3339 time, or a date (its start, 00:00 UTC); "" or "never" is never.
func ParseExpiry(s string) (time.Time, error) {
	s = strings.TrimSpace(s)
	if s == "" || strings.EqualFold(s, "never") {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t.UTC(), nil
	}
	if t, err := time.Parse(time.DateOnly, s); err == nil {
		return t, nil
	}
	return time.Time{}, fmt.Errorf("%q: want an RFC 3339 time such as 2026-12-31T18:00:00Z, a date such as 2026-12-31 (00:00 UTC), or never", s)
}

// ParseModelList reads a key's model list as a person writes it: ids and
// patterns separated by commas or spaces; none (or "all") is nil, every
// model of the plan.
func ParseModelList(s string) []string {
	models := strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' || r == '\r' || r == '\n' })
	if len(models) == 0 || (len(models) == 1 && strings.EqualFold(models[0], "all")) {
		return nil
	}
	return models
}
