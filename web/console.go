package web

import "io"

// ConsoleFrame is what every console page shares: the site's title, where
// the console lives, the signed-in account (empty on the sign-in pages),
// the session's form token, and one-line messages.
type ConsoleFrame struct {
	Title    string // the console's name, e.g. "modelgate console"
	Heading  string // the page's own heading
	Base     string // the console's path prefix, e.g. "/console"; links are Base+"/keys"
	Page     string // "overview", "keys", "usage", "billing", "topup" or "alerts": the current tab
	Email    string // the signed-in account's email
	CSRF     string // the form token every POST form carries
	Currency string
	Notice   string // what just happened
	Error    string // why the last action failed
	// Unverified: the signed-in account's email awaits verification (its
	// link was mailed at sign-up); every page says so, with a form that
	// mails the link again
	Unverified bool
}

// ConsoleAuthPage is the sign-in or the sign-up form.
type ConsoleAuthPage struct {
	ConsoleFrame
	SignUp     bool // the sign-up form rather than the sign-in form
	SignUpOpen bool // visitors may create accounts
	// WillVerify says that a sign-up mails a link to verify the email
	// (smtp configured)
	WillVerify bool
	FormEmail  string
}

// ConsoleOverview is the account's home: its money and state.
type ConsoleOverview struct {
	ConsoleFrame
	Balance, Held, Available Amount
	Plan, State              string
	Suspended                bool
	Keys                     int // live keys
	// Owed is what the account owes after a reversal; Owing is
	// set when that is more than zero, and ForDebt when the debt is what
	// suspended the account (a top-up resumes it).
	Owed           Amount
	Owing, ForDebt bool
	// Empty says that nothing is available: requests are refused until
	// a top-up
	Empty bool
}

// BillingLine is one entry of the account's money history.
type BillingLine struct {
	When, WhenISO string // UTC, "2006-01-02 15:04", and RFC 3339 for <time>
	Kind, What    string // the entry's kind ("topup") and its name for people ("Top-up")
	Amount        Amount // the change of the balance
	Owed          Amount // the change of what is owed
	HasOwed       bool   // Owed is not zero
	BalanceAfter  Amount
	HasBalance    bool // BalanceAfter is known (entries before it was recorded have none)
	Detail        string
}

// ConsoleBilling is the account's money history, newest first, a page at
// a time, with a CSV download of all of it.
type ConsoleBilling struct {
	ConsoleFrame
	Balance, Owed Amount
	Owing         bool
	Lines         []BillingLine
	OlderHref     string // the next (older) page, "" on the last
	NewestHref    string // the first page, "" on it
	CSVHref       string
	// AutoTopup is the automatic top-up section, nil without a payment
	// provider.
	AutoTopup *AutoTopupView
}

// AutoTopupForm is the automatic top-up's settings as its form holds
// them: as typed, so that a refused form comes back as it was sent.
type AutoTopupForm struct {
	On                      bool
	Below, Amount, MonthMax string
}

// AutoTopupView is the Billing page's automatic top-up: the saved card,
// the settings, why the gateway turned it off, and its last charges.
type AutoTopupView struct {
	// Card is the saved card for people ("Visa •••• 4242"), "" when none
	// is saved.
	Card    string
	Form    AutoTopupForm
	Minimum string // the payment provider's smallest top-up
	// OffReason is why the gateway turned it off (a declined card), ""
	// when it is on or the customer turned it off.
	OffReason string
	History   []DeliveryLine
}

// AlertsForm is the alerts' settings as the form holds them: as typed.
type AlertsForm struct {
	LowBalance, MonthSpend, WebhookURL string
	KeyCaps, Mail                      bool
}

// DeliveryLine is one delivery of an alert (a mail, a webhook, an
// automatic top-up's charge) as the console lists it.
type DeliveryLine struct {
	ID            string
	When, WhenISO string // UTC, "2006-01-02 15:04", and RFC 3339 for <time>
	What          string // what fired, for people ("Low balance")
	Channel       string // "mail", "webhook" or "topup"
	Target        string // the mail address or the webhook's URL
	// Status is the delivery's ("pending", "done", "failed"), StatusText
	// its words for people
	Status, StatusText string
	Attempts           int
	// Outcome is the last error, or what the other side answered (an
	// HTTP status, a payment's id); Failed when it is an error
	Outcome string
	Failed  bool
	Amount  Amount // a top-up's
}

// WebhookDocs is where the docs say how to verify a webhook's signature.
const WebhookDocs = "https://github.com/modelgate/modelgate/blob/main/docs/api.md#alert-webhooks"

// ConsoleAlerts is the alerts page: the thresholds and where alerts go,
// the webhook's signing secret (shown once when just made), and the last
// deliveries.
type ConsoleAlerts struct {
	ConsoleFrame
	Form   AlertsForm
	MailTo string // the account's email
	// CanMail says that the gateway sends mail (smtp configured)
	CanMail bool
	// SecretSet says that the account has a signing secret; NewSecret is
	// the one just made, shown this once
	SecretSet  bool
	NewSecret  string
	Deliveries []DeliveryLine
	DocsHref   string
}

// ConsoleKey is one API key as listed: never its secret.
type ConsoleKey struct {
	ID, Prefix, Label   string
	Created, LastUsed   string // UTC, "2006-01-02 15:04"; LastUsed "never"
	Deleted             bool
	CreatedISO, UsedISO string // machine-readable times for <time>
	KeyLimits
}

// KeyLimitsForm is a key's limits as a form holds them: as typed, so that
// a refused form comes back as it was sent.
type KeyLimitsForm struct {
	Cap, Period, Models, Expires, RPM, Concurrency string
}

// ConsoleKeys lists the account's keys, with the key just created, whose
// secret this page shows exactly once.
type ConsoleKeys struct {
	ConsoleFrame
	NewKey      string
	NewKeyLabel string
	Keys        []ConsoleKey
	CanCreate   bool // the account is active
	// FormLabel and Form are the create form's label and limits (as
	// sent, after a refusal)
	FormLabel string
	Form      KeyLimitsForm
	// PlanRPM and PlanConcurrency are the plan's limits ("" for none),
	// which a key's own are below
	PlanRPM, PlanConcurrency string
	// BaseURL is where clients reach the gateway, and Setups how to point
	// each client at it (ClientSetups): with the new key in them when the
	// page shows one, else reading it from $MODELGATE_API_KEY
	BaseURL string
	Setups  []ClientSetup
}

// ConsoleKeyEdit is the form that changes a key's limits.
type ConsoleKeyEdit struct {
	ConsoleFrame
	Key  ConsoleKey
	Form KeyLimitsForm
	// PlanRPM and PlanConcurrency are the plan's limits ("" for none)
	PlanRPM, PlanConcurrency string
}

// ConsoleKeyDelete asks to confirm the deletion of a key.
type ConsoleKeyDelete struct {
	ConsoleFrame
	Key ConsoleKey
}

// UsageLine is one row of a usage table: a day, a key or a model.
type UsageLine struct {
	Name, Detail                        string
	Requests, InputTokens, OutputTokens string
	Spent                               Amount
	// Discount is what the plan's discounts, its volume tier's included,
	// took off the list price; Spent is after it (docs/billing.md,
	// "Plan discounts and volume tiers").
	Discount Amount
}

// ConsoleMonth is the account's spend in the current calendar month (UTC)
// and where it stands among its plan's volume tiers.
type ConsoleMonth struct {
	Month string // "November 2026"
	Spent Amount
	// Tier is the tier in force ("5% off, above 1,000.00"), "" below the
	// first; Next is the next one, "" at the top.
	Tier, Next string
}

// UsageTable is one breakdown of the usage: its heading, the heading of
// its first column, its name (the table's data-table attribute) and rows.
type UsageTable struct {
	Title, Column, Name string
	Lines               []UsageLine
}

// ConsoleUsage is the account's usage over a range of days, by day, key and
// model, with charts and a CSV export of the same rows.
type ConsoleUsage struct {
	ConsoleFrame
	From, To string // the range, UTC dates
	KeyID    string // the key chosen, "" for all
	Keys     []ConsoleKey
	Charts   []Chart
	Tables   []UsageTable // by day (newest first), by key, by model
	Total    UsageLine
	// Month is shown when the account's plan has volume tiers.
	Month *ConsoleMonth
	// CSVHref is the address of the CSV export of this view, its query
	// included (a whole URL, so that the template escapes it as one and
	// not as a value in a query)
	CSVHref string
}

// ConsoleTopUp is the top-up page: a form that starts a checkout with the
// payment provider, or a note that the operator credits accounts.
type ConsoleTopUp struct {
	ConsoleFrame
	Provider string // "" without a payment provider
	Minimum  string
	Amount   string
}

// ConsoleForgot asks for the email of a forgotten password's account, or
// says that the operator hands out reset links when the gateway sends no
// mail.
type ConsoleForgot struct {
	ConsoleFrame
	CanMail   bool // the gateway has an smtp option
	FormEmail string
}

// ConsolePassword sets a password: the signed-in account's new one (with
// its current one), or, with Token, the one of a reset link's account.
type ConsolePassword struct {
	ConsoleFrame
	Token    string // the reset link's token, sent back with the form
	ForEmail string // the reset link's account's email
}

// ConsoleMessage is a page with a message only (not found, form expired).
type ConsoleMessage struct {
	ConsoleFrame
	Message string
}

// RenderConsoleAuth writes the sign-in or sign-up page.
func RenderConsoleAuth(w io.Writer, p *ConsoleAuthPage) error { return render(w, "console_auth", p) }

// RenderConsoleOverview writes the account's home page.
func RenderConsoleOverview(w io.Writer, p *ConsoleOverview) error {
	return render(w, "console_overview", p)
}

// RenderConsoleKeys writes the keys page.
func RenderConsoleKeys(w io.Writer, p *ConsoleKeys) error { return render(w, "console_keys", p) }

// RenderConsoleKeyDelete writes the confirmation of a key's deletion.
func RenderConsoleKeyDelete(w io.Writer, p *ConsoleKeyDelete) error {
	return render(w, "console_keydelete", p)
}

// RenderConsoleKeyEdit writes the form that changes a key's limits.
func RenderConsoleKeyEdit(w io.Writer, p *ConsoleKeyEdit) error {
	return render(w, "console_keyedit", p)
}

// RenderConsoleUsage writes the usage page.
func RenderConsoleUsage(w io.Writer, p *ConsoleUsage) error { return render(w, "console_usage", p) }

// RenderConsoleBilling writes the billing page.
func RenderConsoleBilling(w io.Writer, p *ConsoleBilling) error {
	return render(w, "console_billing", p)
}

// RenderConsoleAlerts writes the alerts page.
func RenderConsoleAlerts(w io.Writer, p *ConsoleAlerts) error { return render(w, "console_alerts", p) }

// RenderConsoleTopUp writes the top-up page.
func RenderConsoleTopUp(w io.Writer, p *ConsoleTopUp) error { return render(w, "console_topup", p) }

// RenderConsoleForgot writes the forgotten-password page.
func RenderConsoleForgot(w io.Writer, p *ConsoleForgot) error { return render(w, "console_forgot", p) }

// RenderConsolePassword writes the page that sets a password.
func RenderConsolePassword(w io.Writer, p *ConsolePassword) error {
	return render(w, "console_password", p)
}

// RenderConsoleMessage writes a page that only says something.
func RenderConsoleMessage(w io.Writer, p *ConsoleMessage) error {
	return render(w, "console_message", p)
}
