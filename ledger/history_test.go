package ledger

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
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
	if debt := s.SuspendedForDebt(id); debt != (suspendedFor == SuspendedForDebt) {
		t.Fatalf("SuspendedForDebt = %v, want %v", debt, !debt)
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
	if _, err := s.Credit(ctx, CreditRequest{AccountID: a.ID, Amount: 20 * unit, Reference: "stripe:cs_1", Kind: KindTopup,
		Payment: "stripe:pi_1"}); err != nil {
		t.Fatal(err)
	}
	// partial refunds: amount_refunded is cumulative
	refund := func(ref string, total Money) (MoneyResult, error) {
		return s.ApplyMoney(ctx, MoneyChange{Kind: KindRefund, Payment: "stripe:pi_1", Amount: total, Reference: ref})
	}
	res, err := refund("stripe:refund:ch_1:4", 4*unit)
	if err != nil || res.Balance != 16*unit || len(res.Entries) != 1 || res.Entries[0].Amount != -4*unit || res.Entries[0].AccountID != a.ID {
		t.Fatalf("refund 4 = %+v, %v", res, err)
	}
	if res, err := refund("stripe:refund:ch_1:4", 4*unit); !errors.Is(err, ErrDuplicate) || res.Entries[0].Amount != -4*unit || res.Balance != 16*unit {
		t.Fatalf("the same refund again = %+v, %v (want the first result and ErrDuplicate)", res, err)
	}
	if _, err := refund("stripe:refund:ch_1:4-again", 4*unit); !errors.Is(err, ErrDuplicate) {
		t.Fatalf("a refund total already reversed = %v, want ErrDuplicate", err)
	}
	if res, err := refund("stripe:refund:ch_1:6", 6*unit); err != nil || res.Entries[0].Amount != -2*unit || res.Balance != 14*unit {
		t.Fatalf("refund up to 6 = %+v, %v (want only the new 2 reversed)", res, err)
	}
	if _, err := refund("stripe:refund:ch_1:1-late", unit); !errors.Is(err, ErrDuplicate) {
		t.Fatalf("an older refund total delivered late = %v, want ErrDuplicate", err)
	}
	if _, err := s.ApplyMoney(ctx, MoneyChange{Kind: KindRefund, Payment: "stripe:pi_nope", Amount: unit, Reference: "r"}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("refund of an unknown payment = %v", err)
	}
	wantAccount(t, s, a.ID, 14*unit, 0, StateActive, "")
	if _, err := s.ApplyMoney(ctx, MoneyChange{AccountID: a.ID, Kind: KindAdjustment, Amount: -10 * unit, Reference: "spent", Reason: "x"}); err != nil {
		t.Fatal(err)
	}

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
	if want := "topup refund refund adjustment dispute credit debt_payment dispute_won debt_payment dispute dispute_lost "; kinds != want {
		t.Fatalf("history kinds = %q, want %q", kinds, want)
	}
	if _, err := s.History(ctx, "acct_nope", 0, 10); !errors.Is(err, ErrNotFound) {
		t.Fatalf("History of an unknown account = %v", err)
	}

	// never more reversed than the top-up: 6 refunded, 7 disputed and
	// given back, 1 disputed and lost leave 13 of the 20
	if res, err := refund("stripe:refund:ch_1:100", 100*unit); err != nil || res.Entries[0].Amount != -5*unit || res.Entries[0].Owed != 8*unit {
		t.Fatalf("a refund beyond the top-up = %+v, %v (want 13 reversed: 5 taken, 8 owed)", res, err)
	}
	if _, err := refund("stripe:refund:ch_1:200", 200*unit); !errors.Is(err, ErrDuplicate) {
		t.Fatalf("a refund of a top-up all reversed = %v", err)
	}
	if _, err := s.ApplyMoney(ctx, MoneyChange{Kind: KindDispute, Payment: "stripe:pi_1", Amount: unit, Reference: "stripe:dispute:dp_3"}); !errors.Is(err, ErrDuplicate) {
		t.Fatalf("a dispute of a top-up all reversed = %v", err)
	}
	wantAccount(t, s, a.ID, 0, 8*unit, StateSuspended, SuspendedForDebt)
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

func TestMoneyMigration(t *testing.T) { backends(t, testMoneyMigration) }

// A ledger written before the money history (SQLite migration 7,
// PostgreSQL 2) keeps its credits as history entries: top-ups told by
// their reference, no balance after them (it cannot be known), nothing
// owed; it audits clean and new entries carry their balance after.
func testMoneyMigration(t *testing.T, b backend) {
	list := migrations
	if b.pg {
		list = pgMigrations
	}
	n := -1
	for i, m := range list {
		if strings.Contains(m, "suspended_for") {
			n = i
		}
	}
	if n < 0 {
		t.Fatal("no money migration")
	}
	db := b.db(t)
	if !b.pg {
		if err := os.MkdirAll(filepath.Dir(db.path), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	raw := b.raw(t, db)
	for i, m := range list[:n] {
		if _, err := raw.Exec(m); err != nil {
			t.Fatalf("migration %d: %v", i+1, err)
		}
	}
	version := fmt.Sprintf("PRAGMA user_version = %d", n)
	if b.pg {
		version = fmt.Sprintf("CREATE TABLE ledger_schema (version integer NOT NULL); INSERT INTO ledger_schema VALUES (%d)", n)
	}
	for _, q := range []string{
		version,
		`INSERT INTO accounts (id, email, plan, state, balance, created_at) VALUES ('acct_old', '', 'basic', 'active', 8000, 0)`,
		`INSERT INTO credits (account_id, amount, reference, reason, created_at) VALUES ('acct_old', 3000, 'opening:acct_old', 'opening credit', 1000)`,
		`INSERT INTO credits (account_id, amount, reference, reason, created_at) VALUES ('acct_old', 5000, 'stripe:cs_old', 'Stripe Checkout cs_old', 2000)`,
	} {
		if _, err := raw.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	s := b.openAt(t, db)
	ctx := context.Background()
	wantAccount(t, s, "acct_old", 8000, 0, StateActive, "")
	page, err := s.History(ctx, "acct_old", 0, 10)
	if err != nil || len(page.Entries) != 2 {
		t.Fatalf("History = %+v, %v", page, err)
	}
	for i, want := range []string{KindTopup, KindCredit} {
		if e := page.Entries[i]; e.Kind != want || e.BalanceAfter != nil || e.Owed != 0 || e.OwedAfter != 0 || e.Payment != "" {
			t.Fatalf("migrated entry %d = %+v, want kind %s and no balance after", i, e, want)
		}
	}
	res, err := s.ApplyMoney(ctx, MoneyChange{AccountID: "acct_old", Kind: KindAdjustment, Amount: -1000, Reference: "adj", Reason: "x"})
	if err != nil || *res.Entries[0].BalanceAfter != 7000 {
		t.Fatalf("an adjustment after the migration = %+v, %v", res, err)
	}
	wantAccount(t, s, "acct_old", 7000, 0, StateActive, "")
}

func TestMoneyRaces(t *testing.T) { backends(t, testMoneyRaces) }

// Debits beyond the balance, credits and requests at once on one account:
// every request settles in full (a debit never takes what a hold
// reserved), nothing goes below zero, the same reference sent at once
// applies once, and everything audits clean.
func testMoneyRaces(t *testing.T, b backend) {
	ctx := context.Background()
	s := b.open(t)
	a := mustAccount(t, s, 300*unit)
	var wg sync.WaitGroup
	var settled, refused, applied, dups atomic.Int64
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 25 {
				h, err := s.Reserve(a.ID, 1, 3*unit)
				if errors.Is(err, ErrInsufficientFunds) {
					refused.Add(1)
					continue
				}
				if err != nil {
					t.Error(err)
					return
				}
				if err := h.Settle(ctx, usage(fmt.Sprintf("race-%d-%d", w, i), "", h.Amount())); err != nil {
					t.Errorf("settle: %v", err)
					return
				}
				settled.Add(1)
			}
		}()
	}
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 20 {
				amt := -40 * unit // debits: some beyond what is available
				if i%4 == 3 {
					amt = 50 * unit
				}
				_, err := s.ApplyMoney(ctx, MoneyChange{AccountID: a.ID, Kind: KindAdjustment, Amount: amt,
					Reference: fmt.Sprintf("adj-%d", i), Reason: "race", AllowOwed: true})
				switch {
				case err == nil:
					applied.Add(1)
				case errors.Is(err, ErrDuplicate):
					dups.Add(1) // the same reference from another goroutine
				default:
					t.Errorf("adjustment %d by %d: %v", i, w, err)
				}
			}
		}()
	}
	wg.Wait()
	if applied.Load() != 20 || dups.Load() != 60 {
		t.Fatalf("applied %d, duplicates %d: want each of the 20 references applied once", applied.Load(), dups.Load())
	}
	acct := balanceOf(t, s, a.ID)
	if acct.Balance < 0 || acct.Owed < 0 || acct.Held != 0 || (acct.Owed > 0) != (acct.State == StateSuspended) {
		t.Fatalf("after the race: %+v", acct)
	}
	t.Logf("settled %d, refused %d; balance %s, owed %s, %s", settled.Load(), refused.Load(), acct.Balance, acct.Owed, acct.State)
	if settled.Load()+refused.Load() != 200 {
		t.Fatalf("settled %d + refused %d requests, want 200", settled.Load(), refused.Load())
	}
	// the debits (600) exceed all that came in (550): some were owed
	page, err := s.History(ctx, a.ID, 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	var owedAny bool
	for _, e := range page.Entries {
		owedAny = owedAny || e.Owed > 0
	}
	if !owedAny {
		t.Fatal("no debit was owed: the race did not test debts")
	}
	mustAudit(t, s)
}

func TestDebtSeenByOthers(t *testing.T) { backends(t, testDebtSeenByOthers) }

// A debt made through another store (the CLI beside a server; another
// instance) suspends the account in this store's memory too, as a debt,
// and its payment through the other store resumes it here.
func testDebtSeenByOthers(t *testing.T, b backend) {
	ctx := context.Background()
	db := b.db(t)
	s1 := b.openAt(t, db)
	s2 := b.openAt(t, db)
	a := mustAccount(t, s1, unit)
	if st, _, err := s1.AccountState(a.ID); err != nil || st != StateActive {
		t.Fatalf("state %s %v", st, err)
	}
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); !ok(); {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not seen by the other store", what)
			}
			s1.Refresh()
			time.Sleep(10 * time.Millisecond)
		}
	}
	if _, err := s2.ApplyMoney(ctx, MoneyChange{AccountID: a.ID, Kind: KindAdjustment, Amount: -3 * unit, Reference: "x", Reason: "x", AllowOwed: true}); err != nil {
		t.Fatal(err)
	}
	waitFor("the debt", func() bool {
		st, _, _ := s1.AccountState(a.ID)
		return st == StateSuspended && s1.SuspendedForDebt(a.ID)
	})
	if _, err := s2.Credit(ctx, CreditRequest{AccountID: a.ID, Amount: 5 * unit, Reference: "y"}); err != nil {
		t.Fatal(err)
	}
	waitFor("the payment", func() bool {
		st, _, _ := s1.AccountState(a.ID)
		return st == StateActive && !s1.SuspendedForDebt(a.ID)
	})
	wantAccount(t, s1, a.ID, 3*unit, 0, StateActive, "")
}
