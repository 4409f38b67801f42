package web

import "io"

// LookupPage is the public usage lookup page: a form that takes a key,
// and after a POST either the key's figures or why there are none.
type LookupPage struct {
	Title  string
	Action string // the form's target: the page's own path
	Error  string // why the lookup failed, if it did
	Result *LookupResult
}

// LookupResult is one key's figures (docs/api.md), formatted.
type LookupResult struct {
	Label, Prefix                    string
	Requests, InputTokens, OutputTok string
	Spent, Balance, Held             Amount
	Currency, Plan, State            string
	// Limits are the key's own limits, if it has any
	Limits *KeyLimits
}

// RenderLookup writes the lookup page.
func RenderLookup(w io.Writer, p *LookupPage) error { return render(w, "lookup", p) }
