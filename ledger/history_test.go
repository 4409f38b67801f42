package ledger

import (
	"context"
	"errors"
	"testing"
)

const unit = Money(NanosPerUnit)

// wantAccount checks an account's balance, owed amount and state.
func wantAccount(t *testing.T, s *Store, id string, balance, owed Money, st State, suspendedFor string) {
	t.Helper()
	a := balanceOf(t, s, id)
	if a.Balance != balance || a.Owed != owed || a.State != st || a.SuspendedFor != suspendedFor {
		t.Fatalf("account = balance %s owed %s state %s/%q, want %s %s %s/%q",
			a.Balance, a.Owed, a.State, a.SuspendedFor, balance, owed, st, suspendedFor)
	}
	if mem, _, err := s.AccountState(id); err != nil || mem != st {
		t.Fatalf("in-memory state = %s %v, want %s", mem, err, st)
	}
	mustAudit(t, s)
}

func TestReversalsAndDebt(t *testing.T) { backends(t, testReversalsAndDebt) }

// A top-up refunded in parts, disputed beyond the balance (owed, suspended
// for debt), paid back by a credit and by the dispute won (resumed).
func testReversalsAndDebt(t *testing.T, b backend) {
	ctx := context.Background()
	s := b.open(t)
	a := mustAccount(t, s, 0)
	if _, err := s.Credit(ctx, CreditRequest{AccountID: a.ID, Amount: 10 * unit, Reference: "stripe:cs_1", Kind: KindTopup,
		Payment: "stripe:pi_1"}); err != nil {
		t.Fatal(err)
	}
	// partial refunds: amount_refunded is cumulative
	refund := func(ref string, total Money) (MoneyResult, error) {
		return s.ApplyMoney(ctx, MoneyChange{Kind: KindRefund, Payment: "stripe:pi_1", Amount: total, Reference: ref})
	}
	res, err := refund("stripe:refund:ch_1:4", 4*unit)
	if err != nil || res.Balance != 6*unit || len(res.Entries) != 1 || res.Entries[0].Amount != -4*unit || res.Entries[0].AccountID != a.ID {
		t.Fatalf("refund 4 = %+v, %v", res, err)
	}
	if res, err := refund("stripe:refund:ch_1:4", 4*unit); !errors.Is(err, ErrDuplicate) || res.Entries[0].Amount != -4*unit || res.Balance != 6*unit {
		t.Fatalf("the same refund again = %+v, %v (want the first result and ErrDuplicate)", res, err)
	}
	if _, err := refund("stripe:refund:ch_1:4-again", 4*unit); !errors.Is(err, ErrDuplicate) {
		t.Fatalf("a refund total already reversed = %v, want ErrDuplicate", err)
	}
	if res, err := refund("stripe:refund:ch_1:6", 6*unit); err != nil || res.Entries[0].Amount != -2*unit || res.Balance != 4*unit {
		t.Fatalf("refund up to 6 = %+v, %v (want only the new 2 reversed)", res, err)
	}
	if _, err := refund("stripe:refund:ch_1:1-late", unit); !errors.Is(err, ErrDuplicate) {
		t.Fatalf("an older refund total delivered late = %v, want ErrDuplicate", err)
	}
	if _, err := s.ApplyMoney(ctx, MoneyChange{Kind: KindRefund, Payment: "stripe:pi_nope", Amount: unit, Reference: "r"}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("refund of an unknown payment = %v", err)
	}
	wantAccount(t, s, a.ID, 4*unit, 0, StateActive, "")

	// a dispute beyond the balance: what there is, the rest owed, suspended
	res, err = s.ApplyMoney(ctx, MoneyChange{Kind: KindDispute, Payment: "stripe:pi_1", Amount: 7 * unit, Reference: "stripe:dispute:dp_1"})
	if err != nil || res.Entries[0].Amount != -4*unit || res.Entries[0].Owed != 3*unit || res.Owed != 3*unit || res.Balance != 0 {
		t.Fatalf("dispute = %+v, %v", res, err)
	}
	wantAccount(t, s, a.ID, 0, 3*unit, StateSuspended, SuspendedForDebt)
	if _, err := s.Reserve(a.ID, 1, 1); !errors.Is(err, ErrInsufficientFunds) {
		t.Fatalf("Reserve while owing = %v", err)
	}

	// a credit pays the debt first; still owing, still suspended
	res, err = s.ApplyMoney(ctx, MoneyChange{AccountID: a.ID, Kind: KindCredit, Amount: 2 * unit, Reference: "goodwill", Reason: "x"})
	if err != nil || len(res.Entries) != 2 || res.Entries[1].Kind != KindDebtPayment || res.Entries[1].Amount != -2*unit ||
		res.Entries[1].Owed != -2*unit || res.Balance != 0 || res.Owed != unit {
		t.Fatalf("credit while owing = %+v, %v", res, err)
	}
	wantAccount(t, s, a.ID, 0, unit, StateSuspended, SuspendedForDebt)

	// the dispute won gives the 7 back: pays the last 1, resumes
	res, err = s.ApplyMoney(ctx, MoneyChange{Kind: KindDisputeWon, Dispute: "stripe:dispute:dp_1"})
	if err != nil || len(res.Entries) != 2 || res.Entries[0].Amount != 7*unit || res.Balance != 6*unit || res.Owed != 0 || res.State != StateActive {
		t.Fatalf("dispute won = %+v, %v", res, err)
	}
	wantAccount(t, s, a.ID, 6*unit, 0, StateActive, "")
	if _, err := s.ApplyMoney(ctx, MoneyChange{Kind: KindDisputeLost, Dispute: "stripe:dispute:dp_1"}); !errors.Is(err, ErrDuplicate) {
		t.Fatalf("a dispute closed twice = %v", err)
	}
	if _, err := s.ApplyMoney(ctx, MoneyChange{Kind: KindDisputeWon, Dispute: "stripe:dispute:dp_nope"}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("an unknown dispute closed = %v", err)
	}
	// a lost dispute stays reversed: an entry of nothing
	if _, err := s.ApplyMoney(ctx, MoneyChange{Kind: KindDispute, Payment: "stripe:pi_1", Amount: unit, Reference: "stripe:dispute:dp_2"}); err != nil {
		t.Fatal(err)
	}
	res, err = s.ApplyMoney(ctx, MoneyChange{Kind: KindDisputeLost, Dispute: "stripe:dispute:dp_2"})
	if err != nil || res.Entries[0].Amount != 0 || res.Balance != 5*unit {
		t.Fatalf("dispute lost = %+v, %v", res, err)
	}
	wantAccount(t, s, a.ID, 5*unit, 0, StateActive, "")

	// the history, newest first, with the balance after each, in pages
	page, err := s.History(ctx, a.ID, 0, 3)
	if err != nil || len(page.Entries) != 3 || page.Next == 0 {
		t.Fatalf("History = %+v, %v", page, err)
	}
	if e := page.Entries[0]; e.Kind != KindDisputeLost || e.Payment != "stripe:pi_1" || e.BalanceAfter == nil || *e.BalanceAfter != 5*unit {
		t.Fatalf("newest entry = %+v", e)
	}
	var all []MoneyEntry
	for before := int64(0); ; {
		p, err := s.History(ctx, a.ID, before, 3)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, p.Entries...)
		if p.Next == 0 {
			break
		}
		before = p.Next
	}
	kinds := ""
	var sum Money
	for i := len(all) - 1; i >= 0; i-- {
		kinds += all[i].Kind + " "
		sum += all[i].Amount
		if *all[i].BalanceAfter != sum {
			t.Fatalf("entry %+v: balance after %s, want the running sum %s", all[i], *all[i].BalanceAfter, sum)
		}
	}
	if want := "topup refund refund dispute credit debt_payment dispute_won debt_payment dispute dispute_lost "; kinds != want {
		t.Fatalf("history kinds = %q, want %q", kinds, want)
	}
	if _, err := s.History(ctx, "acct_nope", 0, 10); !errors.Is(err, ErrNotFound) {
		t.Fatalf("History of an unknown account = %v", err)
	}
}

func TestAdjustments(t *testing.T) { backends(t, testAdjustments) }

// Operator debits: refused beyond the balance unless owed is allowed, never
// taking what holds reserve; an operator's suspension is not lifted by a
// payment.
func testAdjustments(t *testing.T, b backend) {
	ctx := context.Background()
	s := b.open(t)
	a := mustAccount(t, s, 10*unit)
	adjust := func(ref string, amt Money, owed bool) (MoneyResult, error) {
		return s.ApplyMoney(ctx, MoneyChange{AccountID: a.ID, Kind: KindAdjustment, Amount: amt, Reference: ref, Reason: "test", AllowOwed: owed})
	}
	if res, err := adjust("adj-1", -3*unit, false); err != nil || res.Balance != 7*unit {
		t.Fatalf("debit 3 = %+v, %v", res, err)
	}
	if res, err := adjust("adj-1", -3*unit, false); !errors.Is(err, ErrDuplicate) || res.Balance != 7*unit || res.Entries[0].Amount != -3*unit {
		t.Fatalf("the same debit again = %+v, %v", res, err)
	}
	if _, err := s.ApplyMoney(ctx, MoneyChange{AccountID: a.ID, Kind: KindAdjustment, Amount: -unit, Reference: "no-reason"}); err == nil {
		t.Fatal("an adjustment without a reason was applied")
	}
	if _, err := s.ApplyMoney(ctx, MoneyChange{AccountID: a.ID, Kind: KindAdjustment, Amount: -unit, Reason: "x"}); err == nil {
		t.Fatal("an adjustment without a reference was applied")
	}
	if _, err := adjust("adj-zero", 0, false); err == nil {
		t.Fatal("a zero adjustment was applied")
	}
	if _, err := adjust("adj-nope", -unit, false); err != nil {
		t.Fatal(err)
	}
	// a hold reserves 4 of the 6: a debit may take only the 2 left
	h, err := s.Reserve(a.ID, 4*unit, 4*unit)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := adjust("adj-big", -3*unit, false); !errors.Is(err, ErrInsufficientFunds) {
		t.Fatalf("a debit beyond the available balance = %v", err)
	}
	wantAccount(t, s, a.ID, 6*unit, 0, StateActive, "") // refused: nothing written
	res, err := adjust("adj-big", -3*unit, true)
	if err != nil || res.Entries[0].Amount != -2*unit || res.Owed != unit || res.State != StateSuspended {
		t.Fatalf("a debit with owed allowed = %+v, %v", res, err)
	}
	// the hold still settles in full
	if err := h.Settle(ctx, &UsageRecord{KeyID: "", Model: "m", Cost: 4 * unit, UsageSource: "upstream", Outcome: "ok", Status: 200}); err != nil {
		t.Fatalf("settle after the debit: %v", err)
	}
	wantAccount(t, s, a.ID, 0, unit, StateSuspended, SuspendedForDebt)

	// the operator suspends it too: paying the debt does not resume it
	if err := s.SetAccountState(ctx, a.ID, StateSuspended); err != nil {
		t.Fatal(err)
	}
	if res, err := adjust("adj-correct", 3*unit, false); err != nil || res.Balance != 2*unit || res.Owed != 0 || res.State != StateSuspended {
		t.Fatalf("a correction paying the debt = %+v, %v", res, err)
	}
	wantAccount(t, s, a.ID, 2*unit, 0, StateSuspended, "")
	if _, err := adjust("adj-unknown", -unit, false); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ApplyMoney(ctx, MoneyChange{AccountID: "acct_nope", Kind: KindAdjustment, Amount: unit, Reference: "x", Reason: "x"}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("an adjustment of an unknown account = %v", err)
	}
	wantAccount(t, s, a.ID, unit, 0, StateSuspended, "")
}
