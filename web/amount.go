package web

import "github.com/modelgate/modelgate/ledger"

// Amount is money as a page shows it: rounded for people (to the cent, or
// to three significant digits below a cent), with the exact figure in a
// title to hover over. CSV exports and the APIs keep the exact decimals.
type Amount struct {
	Shown, Exact string
}

// AmountOf is m as a page shows it.
func AmountOf(m ledger.Money) Amount { return Amount{Shown: m.Rounded(), Exact: m.String()} }
