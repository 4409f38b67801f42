package accounts

import (
	"context"
	"encoding/csv"
	"io"
	"strconv"
	"time"

	"github.com/modelgate/modelgate/ledger"
)

// HistoryCSVHeader is the header row of a money history in CSV.
var HistoryCSVHeader = []string{"id", "time", "kind", "amount", "owed", "balance_after", "owed_after", "reference", "reason", "payment"}

// WriteHistoryCSV writes a money history as CSV, a header row first, for
// the CLI and the console's download alike: amounts exact, in the
// currency with 9 decimals (ledger.Money's String); times in RFC 3339,
// UTC; an empty balance_after for entries made before it was recorded.
func WriteHistoryCSV(w io.Writer, entries []ledger.MoneyEntry) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(HistoryCSVHeader); err != nil {
		return err
	}
	for _, e := range entries {
		after := ""
		if e.BalanceAfter != nil {
			after = e.BalanceAfter.String()
		}
		if err := cw.Write([]string{strconv.FormatInt(e.ID, 10), e.CreatedAt.UTC().Format(time.RFC3339Nano), e.Kind,
			e.Amount.String(), e.Owed.String(), after, e.OwedAfter.String(), csvSafe(e.Reference), csvSafe(e.Reason), csvSafe(e.Payment)}); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

// csvSafe keeps a text cell from being read as a formula by a spreadsheet
// (OWASP, "CSV Injection"): one starting with = + - @ or a tab gets a
// leading apostrophe. Amounts are never changed.
func csvSafe(s string) string {
	if s != "" && (s[0] == '=' || s[0] == '+' || s[0] == '-' || s[0] == '@' || s[0] == '\t' || s[0] == '\r') {
		return "'" + s
	}
	return s
}

// AllHistory reads an account's whole money history, newest first.
func (s *Service) AllHistory(ctx context.Context, accountID string) ([]ledger.MoneyEntry, error) {
	var all []ledger.MoneyEntry
	for before := int64(0); ; {
		page, err := s.Store.History(ctx, accountID, before, 1000)
		if err != nil {
			return nil, err
		}
		all = append(all, page.Entries...)
		if page.Next == 0 {
			return all, nil
		}
		before = page.Next
	}
}
