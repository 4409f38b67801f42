package ledger

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"strconv"
	"testing"
	"time"
)

func TestListAccounts(t *testing.T) { backends(t, testListAccounts) }

func testListAccounts(t *testing.T, b backend) {
	ctx := context.Background()
	db := b.db(t)
	s := b.openAt(t, db)
	raw := b.raw(t, db)
	mk := func(email, plan string) Account {
		t.Helper()
		a, err := s.CreateAccount(ctx, email, plan)
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	ada := mk("Ada@Example.com", "basic")
	bob := mk("bob@example.org", "pro")
	carol := mk("carol@example.com", "pro")
	anon := mk("", "basic")
	odd := mk("x_y%z!@example.com", "basic")
	dave := mk("dave@example.net", "basic")
	all := []string{ada.ID, bob.ID, carol.ID, anon.ID, odd.ID, dave.ID}
	// four accounts created in the same millisecond: their order, and the
	// pages' boundaries between them, rest on the id
	same := time.Date(2026, 11, 3, 12, 0, 0, 0, time.UTC).UnixMilli()
	for i, id := range all {
		at := same
		if i == 0 {
			at = same - 1000
		} else if i == len(all)-1 {
			at = same + 1000
		}
		if _, err := raw.Exec(`UPDATE accounts SET created_at = ? WHERE id = ?`, at, id); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.SetAccountState(ctx, bob.ID, StateSuspended); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Credit(ctx, CreditRequest{AccountID: carol.ID, Amount: 1_234_567_891, Reference: "r1", Reason: "test"}); err != nil {
		t.Fatal(err)
	}
	h, err := s.Reserve(carol.ID, 1, 1_000_000_000)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Release()

	list := func(q AccountQuery) AccountPage {
		t.Helper()
		p, err := s.ListAccounts(ctx, q)
		if err != nil {
			t.Fatalf("ListAccounts(%+v): %v", q, err)
		}
		return p
	}
	ids := func(as []Account) []string {
		var out []string
		for _, a := range as {
			out = append(out, a.ID)
		}
		return out
	}

	whole := list(AccountQuery{Limit: MaxAccountPage})
	if whole.Next != "" || len(whole.Accounts) != len(all) {
		t.Fatalf("one page of everything: %d accounts, next %q", len(whole.Accounts), whole.Next)
	}
	if got := ids(whole.Accounts); got[0] != ada.ID || got[5] != dave.ID {
		t.Fatalf("not by creation time: %v", got)
	}
	// the database's own order of the ids (PostgreSQL's collation may not
	// be Go's byte order), which must be the listing's in the tie
	rows, err := raw.Query(`SELECT id FROM accounts WHERE created_at = ? ORDER BY id`, same)
	if err != nil {
		t.Fatal(err)
	}
	var tie []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		tie = append(tie, id)
	}
	rows.Close()
	if got := ids(whole.Accounts)[1:5]; !slices.Equal(got, tie) || len(tie) != 4 {
		t.Fatalf("the tie is not ordered by id: %v, want %v", got, tie)
	}
	for _, a := range whole.Accounts {
		switch a.ID {
		case ada.ID:
			if a.Email != "ada@example.com" || a.Plan != "basic" || a.State != StateActive || !a.CreatedAt.Equal(time.UnixMilli(same-1000)) {
				t.Errorf("ada: %+v", a)
			}
		case bob.ID:
			if a.State != StateSuspended || a.Plan != "pro" {
				t.Errorf("bob: %+v", a)
			}
		case carol.ID:
			// held as GetAccount gives it
			if a.Balance != 1_234_567_891 || a.Held != 1_000_000_000 || a.Held != balanceOf(t, s, carol.ID).Held {
				t.Errorf("carol: %+v", a)
			}
		}
	}

	// pages of two, then of one: the same accounts, in the same order, each once
	for _, size := range []int{1, 2, 4} {
		var got []string
		cursor, pages := "", 0
		for {
			p := list(AccountQuery{Limit: size, Cursor: cursor})
			pages++
			if len(p.Accounts) > size || (p.Next != "" && len(p.Accounts) != size) {
				t.Fatalf("page of %d: %d accounts, next %q", size, len(p.Accounts), p.Next)
			}
			got = append(got, ids(p.Accounts)...)
			if p.Next == "" {
				break
			}
			if pages > len(all)+1 {
				t.Fatalf("pages of %d never end", size)
			}
			cursor = p.Next
		}
		if !slices.Equal(got, ids(whole.Accounts)) {
			t.Fatalf("pages of %d: %v, want %v", size, got, ids(whole.Accounts))
		}
	}
	// an account created while paging comes on a later page
	p1 := list(AccountQuery{Limit: 3})
	late := mk("late@example.com", "basic")
	p2 := list(AccountQuery{Limit: 10, Cursor: p1.Next})
	if got := ids(p2.Accounts); len(got) != 4 || got[3] != late.ID {
		t.Fatalf("after an account was created: %v", got)
	}

	// filters: the accounts that match, in the listing's order
	everyone := ids(list(AccountQuery{}).Accounts)
	ordered := func(set ...string) []string {
		var out []string
		for _, id := range everyone {
			if slices.Contains(set, id) {
				out = append(out, id)
			}
		}
		return out
	}
	for _, c := range []struct {
		q    AccountQuery
		want []string
	}{
		{AccountQuery{Email: "EXAMPLE.COM"}, ordered(ada.ID, carol.ID, odd.ID, late.ID)},
		{AccountQuery{Email: " bob@"}, ordered(bob.ID)},
		{AccountQuery{Email: "_"}, ordered(odd.ID)}, // not a wildcard
		{AccountQuery{Email: "%"}, ordered(odd.ID)},
		{AccountQuery{Email: "z!@"}, ordered(odd.ID)},
		{AccountQuery{Email: "nobody"}, nil},
		{AccountQuery{State: StateSuspended}, ordered(bob.ID)},
		{AccountQuery{Plan: "pro"}, ordered(bob.ID, carol.ID)},
		{AccountQuery{Plan: "pro", State: StateActive}, ordered(carol.ID)},
		{AccountQuery{Plan: "basic", Email: "example.", Limit: 1}, ordered(ada.ID)},
	} {
		p := list(c.q)
		if got := ids(p.Accounts); !slices.Equal(got, c.want) {
			t.Errorf("%+v: %v, want %v", c.q, got, c.want)
		}
	}
	// a filtered listing pages too
	p := list(AccountQuery{Plan: "basic", Limit: 2})
	if got := ids(p.Accounts); !slices.Equal(got, []string{ada.ID, anon.ID}) && !slices.Equal(got, []string{ada.ID, odd.ID}) {
		t.Fatalf("first page of basic: %v", got)
	}
	rest := list(AccountQuery{Plan: "basic", Limit: 10, Cursor: p.Next})
	if n := len(p.Accounts) + len(rest.Accounts); n != 5 || rest.Next != "" {
		t.Fatalf("basic accounts over two pages: %d", n)
	}

	for _, bad := range []string{"x", "a1.", "a1.!!", cursorPrefix + "bm9jb2xvbg", accountCursor(1, "")[:len(cursorPrefix)+2]} {
		if _, err := s.ListAccounts(ctx, AccountQuery{Cursor: bad}); !errors.Is(err, ErrBadCursor) {
			t.Errorf("cursor %q: %v", bad, err)
		}
	}
	if _, err := s.ListAccounts(ctx, AccountQuery{State: "closed"}); err == nil {
		t.Error("an unknown state was accepted")
	}
	if _, err := s.ListAccounts(ctx, AccountQuery{Limit: -1}); err == nil {
		t.Error("a negative limit was accepted")
	}
	if big := list(AccountQuery{Limit: MaxAccountPage + 5}); len(big.Accounts) != len(all)+1 {
		t.Errorf("a limit beyond the maximum: %d accounts", len(big.Accounts))
	}
	if s.HeldEverywhere() != b.pg {
		t.Errorf("HeldEverywhere = %v on %v", s.HeldEverywhere(), b.pg)
	}
}

// TestListAccountsMoney: a listed account says what GetAccount says of its
// debt, the suspension for it and its month's spend.
func TestListAccountsMoney(t *testing.T) { backends(t, testListAccountsMoney) }

func testListAccountsMoney(t *testing.T, b backend) {
	ctx := context.Background()
	s := b.open(t)
	a := mustAccount(t, s, 1000)
	_, k, err := s.CreateKey(ctx, a.ID, "k")
	if err != nil {
		t.Fatal(err)
	}
	h, err := s.Reserve(a.ID, 1, 500)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Settle(ctx, usage("req-list-money", k.ID, 400)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ApplyMoney(ctx, MoneyChange{AccountID: a.ID, Kind: KindAdjustment, Amount: -2000, Reference: "fee-list",
		Reason: "fee", AllowOwed: true}); err != nil {
		t.Fatal(err)
	}
	want, err := s.GetAccount(ctx, a.ID)
	if err != nil {
		t.Fatal(err)
	}
	if want.Owed == 0 || want.SuspendedFor != SuspendedForDebt || want.MonthSpend == 0 {
		t.Fatalf("the account to list: %+v", want)
	}
	page, err := s.ListAccounts(ctx, AccountQuery{})
	if err != nil {
		t.Fatal(err)
	}
	for _, got := range page.Accounts {
		if got.ID == a.ID {
			if got.Owed != want.Owed || got.SuspendedFor != want.SuspendedFor || got.MonthSpend != want.MonthSpend ||
				got.Balance != want.Balance || got.State != want.State {
				t.Fatalf("listed %+v, GetAccount %+v", got, want)
			}
			return
		}
	}
	t.Fatal("the account is not listed")
}

func TestAccountCursorRoundTrip(t *testing.T) {
	for _, c := range []struct {
		ms int64
		id string
	}{{0, "acct_x"}, {1764072000123, "acct_AbC"}, {-5, "a:b"}} {
		ms, id, err := parseAccountCursor(accountCursor(c.ms, c.id))
		if err != nil || ms != c.ms || id != c.id {
			t.Errorf("%d %q: %d %q %v", c.ms, c.id, ms, id, err)
		}
	}
}

func TestListKeySummaries(t *testing.T) { backends(t, testListKeySummaries) }

func testListKeySummaries(t *testing.T, b backend) {
	ctx := context.Background()
	s := b.open(t)
	a := mustAccount(t, s, 1_000_000)
	_, k1, err := s.CreateKey(ctx, a.ID, "laptop")
	if err != nil {
		t.Fatal(err)
	}
	_, k2, err := s.CreateKey(ctx, a.ID, "ci")
	if err != nil {
		t.Fatal(err)
	}
	for i, cost := range []Money{10, 32} {
		h, err := s.Reserve(a.ID, 1, 1000)
		if err != nil {
			t.Fatal(err)
		}
		if err := h.Settle(ctx, usage("r"+string(rune('0'+i)), k1.ID, cost)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.DeleteKey(ctx, k2.ID); err != nil {
		t.Fatal(err)
	}
	other := mustAccount(t, s, 0)
	if _, _, err := s.CreateKey(ctx, other.ID, "theirs"); err != nil {
		t.Fatal(err)
	}

	keys, err := s.ListKeySummaries(ctx, a.ID)
	if err != nil || len(keys) != 2 {
		t.Fatalf("ListKeySummaries = %+v, %v", keys, err)
	}
	one, two := keys[0], keys[1]
	if one.ID != k1.ID || one.Label != "laptop" || one.Prefix != k1.Prefix || one.Deleted ||
		one.Requests != 2 || one.InputTokens != 200 || one.OutputTokens != 40 || one.Spent != 42 || one.LastUsedAt.IsZero() {
		t.Errorf("the used key: %+v", one)
	}
	if two.ID != k2.ID || !two.Deleted || two.DeletedAt.IsZero() || two.Requests != 0 || two.Spent != 0 || !two.LastUsedAt.IsZero() {
		t.Errorf("the deleted key: %+v", two)
	}
	// the totals are KeyUsage's, and the keys ListKeys's
	u, err := s.KeyUsage(ctx, k1.ID)
	if err != nil || u.Requests != one.Requests || u.Spent != one.Spent || !u.LastUsedAt.Equal(one.LastUsedAt) {
		t.Errorf("KeyUsage %+v, %v; summary %+v", u, err, one)
	}
	plain, err := s.ListKeys(ctx, a.ID)
	if err != nil || len(plain) != 2 || !reflect.DeepEqual(plain[0], one.Key) || !reflect.DeepEqual(plain[1], two.Key) {
		t.Errorf("ListKeys %+v, %v", plain, err)
	}
	if _, err := s.ListKeySummaries(ctx, "acct_nope"); !errors.Is(err, ErrNotFound) {
		t.Errorf("an unknown account: %v", err)
	}
	if keys, err := s.ListKeySummaries(ctx, other.ID); err != nil || len(keys) != 1 || keys[0].Label != "theirs" {
		t.Errorf("the other account's keys: %+v, %v", keys, err)
	}
}

func TestEachUsage(t *testing.T) { backends(t, testEachUsage) }

func testEachUsage(t *testing.T, b backend) {
	ctx := context.Background()
	s := b.open(t)
	a := mustAccount(t, s, 1_000_000)
	_, k1, _ := s.CreateKey(ctx, a.ID, "one")
	_, k2, _ := s.CreateKey(ctx, a.ID, "two")
	other := mustAccount(t, s, 1_000_000)
	_, ko, _ := s.CreateKey(ctx, other.ID, "other")
	nov1 := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	dec1 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	settle := func(acct, id, key string, at time.Time, cost Money) {
		t.Helper()
		h, err := s.Reserve(acct, 1, 1000)
		if err != nil {
			t.Fatal(err)
		}
		r := usage(id, key, cost)
		r.CreatedAt = at
		if err := h.Settle(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	settle(a.ID, "before", k1.ID, nov1.Add(-time.Millisecond), 1)
	settle(a.ID, "first", k2.ID, nov1, 2) // the start is in the range
	settle(a.ID, "keyless", "", nov1.Add(time.Hour), 3)
	settle(a.ID, "tie-a", k1.ID, nov1.Add(2*time.Hour), 4) // same time: insertion order
	settle(a.ID, "tie-b", k2.ID, nov1.Add(2*time.Hour), 5)
	settle(other.ID, "theirs", ko.ID, nov1.Add(3*time.Hour), 6)
	settle(other.ID, "theirs-keyless", "", nov1.Add(3*time.Hour), 6)
	settle(a.ID, "last", k1.ID, dec1.Add(-time.Millisecond), 7)
	settle(a.ID, "end", k2.ID, dec1, 8) // the end is not
	if err := s.DeleteKey(ctx, k2.ID); err != nil {
		t.Fatal(err)
	}

	each := func(acct string, from, to time.Time) ([]string, error) {
		var got []string
		err := s.EachUsage(ctx, acct, from, to, func(r *UsageRecord) error {
			if r.AccountID != acct {
				t.Errorf("a row of %s in %s's export", r.AccountID, acct)
			}
			got = append(got, r.RequestID)
			return nil
		})
		return got, err
	}
	got, err := each(a.ID, nov1, dec1)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"first", "keyless", "tie-a", "tie-b", "last"}; !slices.Equal(got, want) {
		t.Fatalf("November: %v, want %v", got, want)
	}
	if got, _ := each(a.ID, time.Time{}, time.Time{}); len(got) != 7 || got[0] != "before" || got[6] != "end" {
		t.Fatalf("open range: %v", got)
	}
	if got, _ := each(other.ID, nov1, dec1); !slices.Equal(got, []string{"theirs", "theirs-keyless"}) && !slices.Equal(got, []string{"theirs-keyless", "theirs"}) {
		t.Fatalf("the other account: %v", got)
	}
	// a row as stored
	var row UsageRecord
	if err := s.EachUsage(ctx, a.ID, dec1.Add(-time.Millisecond), dec1, func(r *UsageRecord) error { row = *r; return nil }); err != nil {
		t.Fatal(err)
	}
	want := *usage("last", k1.ID, 7)
	want.AccountID, want.CreatedAt, want.Hold, want.Charged = a.ID, dec1.Add(-time.Millisecond), 1000, 7
	if row != want {
		t.Fatalf("row\n got %+v\nwant %+v", row, want)
	}
	// fn's error stops the reading
	stop := errors.New("stop")
	n := 0
	if err := s.EachUsage(ctx, a.ID, time.Time{}, time.Time{}, func(*UsageRecord) error { n++; return stop }); !errors.Is(err, stop) || n != 1 {
		t.Fatalf("stop: %v after %d rows", err, n)
	}
	if _, err := each("acct_nope", nov1, dec1); !errors.Is(err, ErrNotFound) {
		t.Fatalf("an unknown account: %v", err)
	}
	if _, err := each(a.ID, dec1, nov1); err == nil {
		t.Fatal("a range that ends before it starts was accepted")
	}
	// the store still reads after a stopped export (the read was closed)
	if _, err := s.GetAccount(ctx, a.ID); err != nil {
		t.Fatal(err)
	}
}

// TestEachUsageChunks: the chunks of each key, read after one another and
// merged, give every row of the range once, in order, whatever the chunk
// size, with rows of several keys and of one key in the same millisecond
// on either side of the chunks' boundaries.
func TestEachUsageChunks(t *testing.T) { backends(t, testEachUsageChunks) }

func testEachUsageChunks(t *testing.T, b backend) {
	ctx := context.Background()
	db := b.db(t)
	s := b.openAt(t, db)
	raw := b.raw(t, db)
	a := mustAccount(t, s, 1_000_000_000)
	var keys []string
	for _, label := range []string{"a", "b", "c"} {
		_, k, err := s.CreateKey(ctx, a.ID, label)
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, k.ID)
	}
	other := mustAccount(t, s, 1_000_000)
	_, ko, _ := s.CreateKey(ctx, other.ID, "other")
	start := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	n := 0
	settle := func(acct, key string, at time.Time) {
		t.Helper()
		h, err := s.Reserve(acct, 1, 1000)
		if err != nil {
			t.Fatal(err)
		}
		r := usage("r"+strconv.Itoa(n), key, Money(n%7+1))
		n++
		r.CreatedAt = at
		if err := h.Settle(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 40 {
		at := start.Add(time.Duration(i/3) * time.Millisecond) // three rows a millisecond
		settle(a.ID, append(keys, "")[i%4], at)
		if i%5 == 0 {
			settle(a.ID, keys[0], at) // a key's own ties
			settle(other.ID, ko.ID, at)
		}
	}
	from, to := start.Add(2*time.Millisecond), start.Add(11*time.Millisecond)
	var want []string
	rows, err := raw.Query(`SELECT request_id FROM usage WHERE account_id = ? AND created_at >= ? AND created_at < ? ORDER BY created_at, id`,
		a.ID, from.UnixMilli(), to.UnixMilli())
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		want = append(want, id)
	}
	rows.Close()
	if len(want) < 25 {
		t.Fatalf("only %d rows in the range", len(want))
	}
	sources, err := s.usageKeys(ctx, a.ID)
	if err != nil || len(sources) != 4 {
		t.Fatalf("sources %v, %v", sources, err)
	}
	for _, chunk := range []int{1, 2, 3, 7, 1000} {
		var got []string
		err := s.eachUsage(ctx, a.ID, sources, from, to, chunk, func(r *UsageRecord) error {
			got = append(got, r.RequestID)
			// no read stays open: fn may use the store
			_, err := s.GetAccount(ctx, a.ID)
			return err
		})
		if err != nil || !slices.Equal(got, want) {
			t.Fatalf("chunks of %d: %v, %v\nwant %v", chunk, got, err, want)
		}
	}
	var got []string
	if err := s.EachUsage(ctx, a.ID, from, to, func(r *UsageRecord) error { got = append(got, r.RequestID); return nil }); err != nil || !slices.Equal(got, want) {
		t.Fatalf("EachUsage: %v, %v", got, err)
	}
}
