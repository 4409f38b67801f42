package web

import "github.com/modelgate/modelgate/ledger"

// Amount is money as a page shows it, the one way every page and the
// CLI's tables do (ledger.Money.Display: six decimals, cut toward zero, so
// that a column lines up on its decimal point and a sub-cent amount is not
// shown as a round figure), with the exact figure in a title to hover
// over. CSV exports and the APIs keep the exact decimals.
type Amount struct {
	Shown, Exact string
}

// AmountOf is m as a page shows it.
func AmountOf(m ledger.Money) Amount { return Amount{Shown: m.Display(), Exact: m.String()} }
