package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/caddyserver/caddy/v2"
	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	"github.com/spf13/cobra"

	"github.com/modelgate/modelgate/accounts"
	"github.com/modelgate/modelgate/ledger"
)

// The operator's views on the CLI (docs/operations.md,
// "Finding accounts and exporting usage"): they read the configuration's
// ledger as the other commands do, beside a running gateway, and print a
// table, or with --json the admin API's JSON (admin_views.go).

// viewUsage is the help of the view commands, after the others'.
const viewUsage = `
  caddy modelgate account list [--email S] [--state active|suspended] [--plan P] [--limit N] [--cursor C] [--json]
  caddy modelgate account show ID [--json]
  caddy modelgate key list ID [--json]
  caddy modelgate usage export --account ID --from 2026-11-01 --to 2026-12-01 > usage.csv
`

// addViewCommands adds the view commands to the modelgate command and its
// account and key commands.
func addViewCommands(cmd, account, key *cobra.Command) {
	cmd.Long = strings.TrimRight(cmd.Long, "\n") + viewUsage

	list := leaf("list", "Lists and searches accounts, a page at a time, oldest first", cmdAccountList)
	list.Flags().String("email", "", "only accounts whose email contains this, in any case")
	list.Flags().String("state", "", "only accounts in this state: active or suspended")
	list.Flags().String("plan", "", "only accounts on this plan")
	list.Flags().String("limit", "", fmt.Sprintf("accounts per page (default %d, at most %d)", ledger.DefaultAccountPage, ledger.MaxAccountPage))
	list.Flags().String("cursor", "", "the cursor printed after the previous page, for the next one")
	show := leafWithAccount("show", "Shows an account: balance, held, plan, state and its keys", cmdAccountShow)
	account.AddCommand(list, show)

	keyList := leafWithAccount("list", "Lists an account's keys with their totals (never the keys themselves)", cmdKeyList)
	key.AddCommand(keyList)

	usage := &cobra.Command{Use: "usage", Short: "Exports usage"}
	export := leaf("export", "Writes an account's usage rows in a time range as CSV on standard output", cmdUsageExport)
	export.Flags().String("account", "", "the account ID")
	export.Flags().String("from", "", "the range's start, included: a date (2026-11-01, UTC) or an RFC 3339 time")
	export.Flags().String("to", "", "the range's end, excluded: a date (2026-12-01, UTC) or an RFC 3339 time")
	usage.AddCommand(export)
	cmd.AddCommand(usage)

	for _, c := range []*cobra.Command{list, show, keyList} {
		c.Flags().Bool("json", false, "print JSON (as the admin API answers) instead of a table")
	}
	for _, c := range []*cobra.Command{list, show, keyList, export} {
		c.Flags().StringP("config", "c", "", "the Caddyfile (or JSON config) naming the ledger")
		c.Flags().StringP("adapter", "a", "", "the config adapter")
		c.Flags().String("db", "", "the SQLite ledger file (instead of --config)")
		// read by openCLILedger; a view never needs it
		c.Flags().Bool("create-ledger", false, "")
		_ = c.Flags().MarkHidden("create-ledger")
	}
}

// leafWithAccount is a leaf whose account is its argument or --account.
func leafWithAccount(use, short string, f func(fl caddycmd.Flags, account string) (int, error)) *cobra.Command {
	var args []string
	c := leaf(use+" ID", short, func(fl caddycmd.Flags) (int, error) {
		account := fl.String("account")
		switch {
		case len(args) == 1 && account != "" && account != args[0]:
			return caddy.ExitCodeFailedStartup, fmt.Errorf("two accounts given: %s and --account %s", args[0], account)
		case len(args) == 1:
			account = args[0]
		case account == "":
			return caddy.ExitCodeFailedStartup, errors.New("which account? give its ID (acct_…)")
		}
		return f(fl, account)
	})
	c.Flags().String("account", "", "the account ID (or give it as the argument)")
	c.Args = cobra.MaximumNArgs(1)
	run := c.RunE
	c.RunE = func(cmd *cobra.Command, a []string) error {
		args = a
		return run(cmd, a)
	}
	return c
}

// printViewJSON writes v as indented JSON on standard output.
func printViewJSON(v any) error {
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// viewTime is a time in a table: UTC to the second, "-" for never.
func viewTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format("2006-01-02 15:04:05")
}

// heldNote says why a SQLite ledger's holds are not shown by the CLI.
const heldNote = "held: n/a with a SQLite ledger: a running gateway keeps its holds in its own memory; " +
	"GET /modelgate/accounts/ID on its admin API shows them"

// viewAccount is an account as the CLI's --json shows it: the admin API's,
// without held when this process cannot know it (a SQLite ledger).
type viewAccount struct {
	adminAccount
	Held *ledger.Money `json:"held,omitempty"`
}

func toViewAccount(a ledger.Account, s *ledger.Store) viewAccount {
	ca := viewAccount{adminAccount: toAccountView(a)}
	if s.HeldEverywhere() {
		held := a.Held
		ca.Held = &held
	}
	return ca
}

// viewHeld is an account's held amount in a table.
func viewHeld(a ledger.Account, s *ledger.Store) string {
	if s.HeldEverywhere() {
		return a.Held.Display()
	}
	return "n/a"
}

func cmdAccountList(fl caddycmd.Flags) (int, error) {
	q, err := accountQuery(fl.String("email"), fl.String("state"), fl.String("plan"), fl.String("limit"), fl.String("cursor"))
	if err != nil {
		return caddy.ExitCodeFailedStartup, errors.New("--" + err.Error())
	}
	return withStore(fl, func(ctx context.Context, s *ledger.Store, _ *accounts.Service, _ cliConfig) error {
		page, err := s.ListAccounts(ctx, q)
		if errors.Is(err, ledger.ErrBadCursor) {
			return errors.New("--cursor: not a cursor this command printed; start again without one")
		}
		if err != nil {
			return err
		}
		if fl.Bool("json") {
			out := struct {
				Accounts []viewAccount `json:"accounts"`
				Next     string        `json:"next,omitempty"`
			}{Accounts: []viewAccount{}, Next: page.Next}
			for _, a := range page.Accounts {
				out.Accounts = append(out.Accounts, toViewAccount(a, s))
			}
			return printViewJSON(out)
		}
		rows := [][]string{{"ID", "EMAIL", "PLAN", "STATE", "BALANCE", "HELD", "OWED", "CREATED (UTC)"}}
		for _, a := range page.Accounts {
			email := a.Email
			if email == "" {
				email = "-"
			}
			rows = append(rows, []string{a.ID, email, a.Plan, string(a.State), a.Balance.Display(), viewHeld(a, s), a.Owed.Display(), viewTime(a.CreatedAt)})
		}
		if err := printTable(os.Stdout, rows, 4, 5, 6); err != nil {
			return err
		}
		switch {
		case page.Next != "":
			fmt.Fprintf(os.Stderr, "%s; more with --cursor %s\n", viewCount(len(page.Accounts), "account"), page.Next)
		default:
			fmt.Fprintf(os.Stderr, "%s; the last page\n", viewCount(len(page.Accounts), "account"))
		}
		if !s.HeldEverywhere() && len(page.Accounts) > 0 {
			fmt.Fprintln(os.Stderr, heldNote)
		}
		return nil
	})
}

func cmdAccountShow(fl caddycmd.Flags, id string) (int, error) {
	return withStore(fl, func(ctx context.Context, s *ledger.Store, _ *accounts.Service, _ cliConfig) error {
		a, err := s.GetAccount(ctx, id)
		if err != nil {
			return err
		}
		keys, err := s.ListKeySummaries(ctx, id)
		if err != nil {
			return err
		}
		if fl.Bool("json") {
			out := struct {
				viewAccount
				Keys []keySummary `json:"keys"`
			}{viewAccount: toViewAccount(a, s), Keys: []keySummary{}}
			for _, k := range keys {
				out.Keys = append(out.Keys, toKeySummary(k))
			}
			return printViewJSON(out)
		}
		tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
		email := a.Email
		if email == "" {
			email = "-"
		}
		state := string(a.State)
		if a.SuspendedFor != "" {
			state += " (for debt)"
		}
		for _, row := range [][2]string{{"account", a.ID}, {"email", email}, {"plan", a.Plan}, {"state", state},
			{"balance", a.Balance.Display()}, {"held", viewHeld(a, s)}, {"owed", a.Owed.Display()}, {"spent this month", a.MonthSpend.Display()},
			{"created", viewTime(a.CreatedAt) + " UTC"}, {"keys", strconv.Itoa(len(keys))}} {
			fmt.Fprintf(tw, "%s\t%s\n", row[0], row[1])
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		if len(keys) > 0 {
			fmt.Println()
			if err := printKeys(os.Stdout, keys); err != nil {
				return err
			}
		}
		if !s.HeldEverywhere() {
			fmt.Fprintln(os.Stderr, heldNote)
		}
		return nil
	})
}

func cmdKeyList(fl caddycmd.Flags, id string) (int, error) {
	return withStore(fl, func(ctx context.Context, s *ledger.Store, _ *accounts.Service, _ cliConfig) error {
		keys, err := s.ListKeySummaries(ctx, id)
		if err != nil {
			return err
		}
		if fl.Bool("json") {
			out := make([]keySummary, 0, len(keys))
			for _, k := range keys {
				out = append(out, toKeySummary(k))
			}
			return printViewJSON(out)
		}
		if len(keys) == 0 {
			fmt.Fprintf(os.Stderr, "account %s has no keys\n", id)
			return nil
		}
		return printKeys(os.Stdout, keys)
	})
}

// printKeys writes a table of keys with their totals and limits: never a
// key or its hash, only the prefix shown when it was created.
func printKeys(w io.Writer, keys []ledger.KeySummary) error {
	rows := [][]string{{"KEY ID", "LABEL", "PREFIX", "CREATED (UTC)", "LAST USED (UTC)", "REQUESTS", "INPUT TOKENS", "OUTPUT TOKENS", "SPENT",
		"CAP", "SPENT THIS PERIOD", "LEFT", "RESETS (UTC)", "LIMITS", "DELETED (UTC)"}}
	now := time.Now()
	for _, k := range keys {
		label := k.Label
		if label == "" {
			label = "-"
		}
		deleted := "-"
		if k.Deleted {
			deleted = viewTime(k.DeletedAt)
		}
		capped, spent, left, resets := viewCap(&k.Key, now)
		rows = append(rows, []string{k.ID, label, k.Prefix, viewTime(k.CreatedAt), viewTime(k.LastUsedAt),
			strconv.FormatInt(k.Requests, 10), strconv.FormatInt(k.InputTokens, 10), strconv.FormatInt(k.OutputTokens, 10),
			k.Spent.Display(), capped, spent, left, resets, viewLimits(&k.Limits, now), deleted})
	}
	return printTable(w, rows, 5, 6, 7, 8, 9, 10, 11)
}

// printTable writes rows (the first is the header) as a table, its
// columns separated by two spaces; the columns numbered right (counts and
// amounts, which show six decimals: Money.Display) are aligned right, so
// that their figures and decimal points line up under the header's end.
func printTable(w io.Writer, rows [][]string, right ...int) error {
	width := map[int]int{}
	for _, row := range rows {
		for _, c := range right {
			width[c] = max(width[c], utf8.RuneCountInString(row[c]))
		}
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, row := range rows {
		for _, c := range right {
			row[c] = strings.Repeat(" ", width[c]-utf8.RuneCountInString(row[c])) + row[c]
		}
		fmt.Fprintln(tw, strings.Join(row, "\t"))
	}
	return tw.Flush()
}

func cmdUsageExport(fl caddycmd.Flags) (int, error) {
	id, err := required(fl, "account")
	if err != nil {
		return caddy.ExitCodeFailedStartup, err
	}
	from, to, err := usageRange("--from", fl.String("from"), "--to", fl.String("to"))
	if err != nil {
		return caddy.ExitCodeFailedStartup, err
	}
	return withStore(fl, func(ctx context.Context, s *ledger.Store, _ *accounts.Service, _ cliConfig) error {
		keys, err := s.ListKeySummaries(ctx, id)
		if err != nil {
			return err
		}
		// an export takes as long as it takes, not withStore's minute
		n, err := writeUsageCSV(context.WithoutCancel(ctx), os.Stdout, s, id, from, to, keys)
		if err != nil {
			return fmt.Errorf("usage export: %w", err)
		}
		fmt.Fprintf(os.Stderr, "%s of %s from %s to %s (excluded)\n", viewCount(n, "usage row"), id,
			from.UTC().Format(time.RFC3339), to.UTC().Format(time.RFC3339))
		return nil
	})
}

// viewCount is "1 account", "2 accounts".
func viewCount(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.Itoa(n) + " " + noun + "s"
}
