package accounts

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelgate/modelgate/ledger"
)

func testService(t *testing.T) *Service {
	t.Helper()
	s, err := ledger.Open(context.Background(), ledger.Options{Path: filepath.Join(t.TempDir(), "ledger.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return &Service{Store: s, DefaultPlan: "developer", Plan: func(n string) bool { return n == "developer" || n == "enterprise" }}
}

func TestOpen(t *testing.T) {
	ctx := context.Background()
	svc := testService(t)
	for _, tc := range []struct {
		name    string
		o       Opening
		invalid string // the refusal's message, in part
		plan    string
		balance ledger.Money
		login   bool
	}{
		{name: "bare", o: Opening{}, plan: "developer"},
		{name: "email, plan and credit", o: Opening{Email: "A@Example.com", Plan: "enterprise", Credit: 10_000_000_000}, plan: "enterprise", balance: 10_000_000_000},
		{name: "with a login", o: Opening{Email: "b@example.com", Password: "a long enough password"}, plan: "developer", login: true},
		{name: "unknown plan", o: Opening{Plan: "gold"}, invalid: `plan "gold" is not in the configuration`},
		{name: "negative credit", o: Opening{Credit: -1}, invalid: "want a positive amount"},
		{name: "not an email", o: Opening{Email: "not an email"}, invalid: "is not an email address"},
		{name: "login without email", o: Opening{Password: "a long enough password"}, invalid: "needs an email"},
		{name: "short password", o: Opening{Email: "c@example.com", Password: "short"}, invalid: "password"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			acct, err := svc.Open(ctx, tc.o)
			if tc.invalid != "" {
				if !IsInvalid(err) || !strings.Contains(err.Error(), tc.invalid) || acct.ID != "" {
					t.Fatalf("%v, %+v; want a refusal saying %q", err, acct, tc.invalid)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got, err := svc.Store.GetAccount(ctx, acct.ID)
			if err != nil || got.Plan != tc.plan || got.Balance != tc.balance || got.Email != strings.ToLower(tc.o.Email) {
				t.Fatalf("%+v, %v", got, err)
			}
			if tc.login {
				if _, _, err := svc.Store.Login(ctx, tc.o.Email); err != nil {
					t.Fatalf("no login: %v", err)
				}
			}
		})
	}
	if _, err := svc.Open(ctx, Opening{Email: "a@example.com"}); !errors.Is(err, ledger.ErrDuplicate) {
		t.Fatalf("a taken email: %v", err)
	}
}

func TestCreditAndKeys(t *testing.T) {
	ctx := context.Background()
	svc := testService(t)
	acct, err := svc.Open(ctx, Opening{})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := svc.Credit(ctx, acct.ID, 0, "nothing", "r0"); !IsInvalid(err) {
		t.Fatalf("a zero credit: %v", err)
	}
	if res, _, err := svc.Credit(ctx, acct.ID, 5, "invoice 1", "r1"); err != nil || res.Balance != 5 {
		t.Fatalf("credit: %s, %v", res.Balance, err)
	}
	if _, _, err := svc.Credit(ctx, acct.ID, 6, "invoice 1 again", "r1"); !errors.Is(err, ledger.ErrDuplicate) {
		t.Fatalf("the same reference twice: %v", err)
	}
	if _, _, err := svc.CreateKey(ctx, acct.ID, strings.Repeat("é", MaxLabel+1)); !IsInvalid(err) {
		t.Fatalf("a long label: %v", err)
	}
	secret, k, err := svc.CreateKey(ctx, acct.ID, "  laptop ")
	if err != nil || !ledger.WellFormedKey(secret) || k.Label != "laptop" {
		t.Fatalf("%q %+v %v", secret, k, err)
	}
	if err := svc.DeleteKey(ctx, k.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Store.Authenticate(secret); !errors.Is(err, ledger.ErrUnauthorized) {
		t.Fatalf("a deleted key: %v", err)
	}
	if err := svc.DeleteKey(ctx, ""); !IsInvalid(err) {
		t.Fatalf("no key id: %v", err)
	}
}

func TestCreditTopUp(t *testing.T) {
	ctx := context.Background()
	svc := testService(t)
	acct, err := svc.Open(ctx, Opening{})
	if err != nil {
		t.Fatal(err)
	}
	paid := TopUp{AccountID: acct.ID, Amount: 5_000_000_000, Reference: "stripe:cs_1", Reason: "top-up", Payment: "stripe:pi_1"}
	for _, tc := range []struct {
		name    string
		t       TopUp
		err     error // nil: credited
		balance ledger.Money
	}{
		{name: "first delivery", t: paid, balance: 5_000_000_000},
		{name: "redelivered", t: paid, err: ledger.ErrDuplicate},
		{name: "redelivered with another amount", t: TopUp{AccountID: acct.ID, Amount: 1, Reference: "stripe:cs_1"}, err: ledger.ErrDuplicate},
		{name: "unknown account", t: TopUp{AccountID: "acct_none", Amount: 1, Reference: "stripe:cs_2"}, err: ledger.ErrNotFound},
	} {
		bal, err := svc.CreditTopUp(ctx, tc.t)
		if tc.err != nil {
			if !errors.Is(err, tc.err) {
				t.Errorf("%s: %v, want %v", tc.name, err, tc.err)
			}
			continue
		}
		if err != nil || bal != tc.balance {
			t.Errorf("%s: balance %s, %v; want %s", tc.name, bal, err, tc.balance)
		}
	}
	page, err := svc.History(ctx, acct.ID, 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Entries) != 1 {
		t.Fatalf("history %+v, want the one top-up", page.Entries)
	}
	if e := page.Entries[0]; e.Kind != ledger.KindTopup || e.Amount != paid.Amount || e.Reference != paid.Reference || e.Payment != paid.Payment {
		t.Fatalf("entry %+v, want the top-up %+v", e, paid)
	}
}

// TestReversePayment: a paid top-up's refund and dispute, each once; what the
// balance does not cover is owed; a reversal of no known payment, or of a
// kind that is no reversal, changes nothing.
func TestReversePayment(t *testing.T) {
	ctx := context.Background()
	svc := testService(t)
	acct, err := svc.Open(ctx, Opening{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.CreditTopUp(ctx, TopUp{AccountID: acct.ID, Amount: 5_000_000_000, Reference: "stripe:cs_1", Payment: "stripe:pi_1"}); err != nil {
		t.Fatal(err)
	}
	refund := Reversal{Kind: ledger.KindRefund, Amount: 2_000_000_000, Reference: "stripe:ch_1:2.00", Reason: "refund", Payment: "stripe:pi_1"}
	dispute := Reversal{Kind: ledger.KindDispute, Amount: 5_000_000_000, Reference: "stripe:dispute:dp_1", Reason: "dispute", Payment: "stripe:pi_1"}
	won := Reversal{Kind: ledger.KindDisputeWon, Reason: "dispute won", Payment: "stripe:pi_1", Dispute: "stripe:dispute:dp_1"}
	for _, tc := range []struct {
		name           string
		r              Reversal
		err            error // nil: applied
		balance, owed  ledger.Money
		invalidRequest bool
	}{
		{name: "refund", r: refund, balance: 3_000_000_000},
		{name: "refund redelivered", r: refund, err: ledger.ErrDuplicate},
		// after a debit of 2: the dispute reverses the 3 the refund left
		{name: "dispute beyond the balance", r: dispute, balance: 0, owed: 2_000_000_000},
		{name: "dispute redelivered", r: dispute, err: ledger.ErrDuplicate},
		{name: "dispute won: the 3 given back, the debt of 2 paid first", r: won, balance: 1_000_000_000},
		{name: "dispute won redelivered", r: won, err: ledger.ErrDuplicate},
		{name: "no such payment", r: Reversal{Kind: ledger.KindRefund, Amount: 1, Reference: "stripe:ch_9:0.01", Payment: "stripe:pi_9"}, err: ledger.ErrNotFound},
		{name: "not a reversal", r: Reversal{Kind: ledger.KindTopup, Amount: 1, Reference: "x", Payment: "stripe:pi_1"}, invalidRequest: true},
	} {
		if tc.r.Kind == ledger.KindDispute && tc.err == nil {
			if _, _, err := svc.Adjust(ctx, Adjustment{AccountID: acct.ID, Amount: -2_000_000_000, Reason: "usage", Reference: "debit-1"}); err != nil {
				t.Fatal(err)
			}
		}
		res, err := svc.ReversePayment(ctx, tc.r)
		switch {
		case tc.invalidRequest:
			if !IsInvalid(err) {
				t.Errorf("%s: %v, want a request to change", tc.name, err)
			}
		case tc.err != nil:
			if !errors.Is(err, tc.err) {
				t.Errorf("%s: %v, want %v", tc.name, err, tc.err)
			}
		case err != nil || res.Balance != tc.balance || res.Owed != tc.owed:
			t.Errorf("%s: balance %s owed %s, %v; want %s and %s", tc.name, res.Balance, res.Owed, err, tc.balance, tc.owed)
		}
	}
}

// TestCreditReplayed: an operator's credit sent again with its reference
// answers the first result, replayed, and credits nothing more, also when
// it paid a debt; the reference used by another change is refused.
func TestCredit(t *testing.T) {
	ctx := context.Background()
	svc := testService(t)
	acct, err := svc.Open(ctx, Opening{})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := svc.Adjust(ctx, Adjustment{AccountID: acct.ID, Amount: -1_000_000_000, Reason: "usage", Reference: "debt-1", AllowOwed: true}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name             string
		amount           ledger.Money
		reference        string
		replayed, refuse bool
		balance          ledger.Money
	}{
		{name: "first, paying the debt of 1 first", amount: 5_000_000_000, reference: "ticket-7", balance: 4_000_000_000},
		{name: "sent again", amount: 5_000_000_000, reference: "ticket-7", replayed: true, balance: 4_000_000_000},
		{name: "another amount on the same reference", amount: 6_000_000_000, reference: "ticket-7", refuse: true},
		{name: "the reference of an adjustment", amount: 1_000_000_000, reference: "debt-1", refuse: true},
	} {
		res, replayed, err := svc.Credit(ctx, acct.ID, tc.amount, "goodwill", tc.reference)
		if tc.refuse {
			if !errors.Is(err, ledger.ErrDuplicate) || replayed {
				t.Errorf("%s: %v (replayed %v), want the reference refused", tc.name, err, replayed)
			}
			continue
		}
		if err != nil || replayed != tc.replayed || res.Balance != tc.balance || res.Owed != 0 {
			t.Errorf("%s: balance %s owed %s replayed %v, %v; want %s, replayed %v", tc.name, res.Balance, res.Owed, replayed, err, tc.balance, tc.replayed)
		}
	}
	a, err := svc.Store.GetAccount(ctx, acct.ID)
	if err != nil || a.Balance != 4_000_000_000 {
		t.Fatalf("account %+v, %v: credited more than once", a, err)
	}
}
