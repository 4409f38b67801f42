package gateway

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	"github.com/redis/go-redis/v9"
	"github.com/spf13/cobra"

	"github.com/modelgate/modelgate/accounts"
	"github.com/modelgate/modelgate/ledger"
	"github.com/modelgate/modelgate/passwords"
)

func init() {
	caddycmd.RegisterCommand(caddycmd.Command{
		Name:  "modelgate",
		Usage: "<account|key|credit|ledger> ...",
		Short: "Manages modelgate accounts, API keys and credits",
		Long: `
Works on the ledger of a modelgate configuration: the one named by the
Caddyfile given with --config (or ./Caddyfile), or the SQLite file given
with --db; each command says on stderr which ledger it opened. A SQLite
ledger that does not exist yet is created only with --create-ledger. A
running gateway sees the changes within a second.

  caddy modelgate account create --email E [--plan P] [--credit 10.00]
  caddy modelgate account plan --account ID --plan P
  caddy modelgate account reset-link <ID|EMAIL> [--expires-in 1h] [--url URL]
  caddy modelgate account suspend --account ID
  caddy modelgate account resume --account ID
  caddy modelgate account adjust --account ID --amount -5.00 --reason TEXT --reference REF [--allow-owed]
  caddy modelgate account history ID [--csv]
  caddy modelgate key create --account ID [--label L] [--cap 20.00 --period day|week|month|never]
                             [--models gpt-4o,claude-*] [--expires 2026-12-31] [--rpm N] [--concurrency N]
  caddy modelgate key update --key-id ID [the limit flags of key create: only those given change]
  caddy modelgate key delete --key-id ID
  caddy modelgate credit --account ID --amount 5.00 --reason TEXT
  caddy modelgate ledger copy --from ledger.db --to postgres://…
`,
		CobraFunc: func(cmd *cobra.Command) {
			account := &cobra.Command{Use: "account", Short: "Creates, suspends and resumes accounts"}
			create := leaf("create", "Creates an account and prints its ID", cmdAccountCreate)
			create.Flags().String("email", "", "the account's email address")
			create.Flags().String("plan", "", "the account's plan (default: the configured default_plan)")
			create.Flags().String("credit", "", "an opening credit, e.g. 10.00")
			create.Flags().Bool("password-stdin", false, "give the account a console login: read its password from the first line of standard input")
			suspend := leaf("suspend", "Suspends an account: its requests get 403", cmdAccountState(ledger.StateSuspended))
			suspend.Flags().String("account", "", "the account ID")
			resume := leaf("resume", "Resumes a suspended account", cmdAccountState(ledger.StateActive))
			resume.Flags().String("account", "", "the account ID")
			setPlan := leaf("plan", "Changes an account's plan", cmdAccountPlan)
			setPlan.Flags().String("account", "", "the account ID")
			setPlan.Flags().String("plan", "", "the plan's name")
			resetLink := &cobra.Command{Use: "reset-link <account ID or email>", Args: cobra.ExactArgs(1),
				Short: "Prints a one-time link that sets the account's console password (and ends its sessions)"}
			resetLink.RunE = func(cmd *cobra.Command, args []string) error {
				return runLeaf(cmd, func(fl caddycmd.Flags) (int, error) { return cmdAccountResetLink(fl, args[0]) })
			}
			resetLink.Flags().Duration("expires-in", accounts.ResetLinkLifetime, "how long the link works (at most 72h)")
			resetLink.Flags().String("url", "", "the console's public address, e.g. https://api.example.com/console (default: public_url and the console's path in the configuration)")
			adjust := leaf("adjust", "Debits or corrects an account's balance, once per reference", cmdAccountAdjust)
			adjust.Flags().String("account", "", "the account ID")
			adjust.Flags().String("amount", "", "the change: a debit such as -5.00, or a correction such as 5.00")
			adjust.Flags().String("reason", "", "why (required; kept in the account's money history)")
			adjust.Flags().String("reference", "", "a unique reference, such as a ticket number (required): the same reference again applies once")
			adjust.Flags().Bool("allow-owed", false, "a debit beyond the available balance takes what there is and records the rest as owed, suspending the account until a payment covers it")
			history := &cobra.Command{Use: "history ID", Short: "Prints an account's money history, newest first", Args: cobra.ExactArgs(1),
				RunE: leaf("history", "", cmdAccountHistory).RunE}
			history.Flags().Bool("csv", false, "print CSV with exact amounts (for a spreadsheet)")
			account.AddCommand(create, setPlan, suspend, resume, resetLink, adjust, history)

			key := &cobra.Command{Use: "key", Short: "Creates, changes and deletes API keys"}
			keyCreate := leaf("create", "Creates an API key and prints it (shown only this once)", cmdKeyCreate)
			keyCreate.Flags().String("account", "", "the account ID")
			keyCreate.Flags().String("label", "", "a label for the key")
			addKeyLimitFlags(keyCreate)
			keyUpdate := leaf("update", "Changes an API key's own limits: those given change, the others stay", cmdKeyUpdate)
			keyUpdate.Flags().String("key-id", "", "the key's ID (key_…)")
			addKeyLimitFlags(keyUpdate)
			keyDelete := leaf("delete", "Deletes an API key: its next request gets 401", cmdKeyDelete)
			keyDelete.Flags().String("key-id", "", "the key's ID (key_…)")
			key.AddCommand(keyCreate, keyUpdate, keyDelete)

			credit := leaf("credit", "Credits an account", cmdCredit)
			credit.Flags().String("account", "", "the account ID")
			credit.Flags().String("amount", "", "the amount, e.g. 5.00")
			credit.Flags().String("reason", "", "why (kept with the credit)")
			credit.Flags().String("reference", "", "a unique reference; a second credit with the same reference is refused (default: random)")

			cmd.PersistentFlags().BoolP("verbose", "v", false, "also print Caddy's own log lines (such as loading the configuration) on stderr")
			cmd.AddCommand(account, key, credit)
			addViewCommands(cmd, account, key) // list, show, export: command_views.go
			ledgerCmd := &cobra.Command{Use: "ledger", Short: "Moves a ledger"}
			ledgerCopy := leaf("copy", "Copies a SQLite ledger into an empty PostgreSQL ledger, checking every total", cmdLedgerCopy)
			ledgerCopy.Flags().String("from", "", "the SQLite ledger file (stop the gateway using it first)")
			ledgerCopy.Flags().String("to", "", "the PostgreSQL DSN of an empty ledger (postgres://user:pass@host/db)")
			ledgerCmd.AddCommand(ledgerCopy)
			cmd.AddCommand(ledgerCmd)

			for _, c := range []*cobra.Command{create, setPlan, suspend, resume, resetLink, adjust, history, keyCreate, keyUpdate, keyDelete, credit} {
				c.Flags().StringP("config", "c", "", "the Caddyfile (or JSON config) naming the ledger")
				c.Flags().StringP("adapter", "a", "", "the config adapter")
				c.Flags().String("db", "", "the SQLite ledger file (instead of --config)")
				c.Flags().Bool("create-ledger", false, "create the SQLite ledger if it does not exist yet")
			}
		},
	})
}

// leaf makes a subcommand that runs f. An error is printed as a sentence
// on stderr ("modelgate: there is no ledger at …"), not as a log line.
func leaf(use, short string, f caddycmd.CommandFunc) *cobra.Command {
	return &cobra.Command{Use: use, Short: short, Args: cobra.NoArgs, RunE: func(cmd *cobra.Command, _ []string) error {
		return runLeaf(cmd, f)
	}}
}

// runLeaf runs f with cmd's flags, printing its error as a sentence.
func runLeaf(cmd *cobra.Command, f caddycmd.CommandFunc) error {
	_, err := f(caddycmd.Flags{FlagSet: cmd.Flags()})
	if err != nil {
		cmd.SilenceErrors, cmd.SilenceUsage = true, true
		fmt.Fprintln(os.Stderr, "modelgate: "+sentence(err))
	}
	return err
}

// sentence is err's message for a person: without the package prefixes
// that wrapping repeats ("ledger: account …: ledger: not found" →
// "account …: not found"), ending in a full stop.
func sentence(err error) string {
	msg := strings.ReplaceAll(err.Error(), "ledger: ", "")
	msg = strings.TrimSpace(msg)
	if msg != "" && !strings.HasSuffix(msg, ".") {
		msg += "."
	}
	return msg
}

// cliConfig is what the CLI needs from a configuration.
type cliConfig struct {
	dbPath   string          // a SQLite ledger
	postgres string          // or a PostgreSQL ledger's DSN
	plans    map[string]bool // nil when no configuration was read
	// offer is what a plan offers keys, nil when the configuration's
	// catalogue could not be read (offerErr says why)
	offer       func(plan string) *accounts.PlanOffer
	offerErr    error
	defaultPlan string
	redisURL    string // the configured Redis, if any
	// console is the console's public address (public_url and the
	// console's path), or "" when the configuration names none
	console string
}

// announce tells the running instances through Redis, when the
// configuration has one, that a key or an account changed (what: "key:ID",
// "account:ID"), so that they apply it at once. Without Redis, or if Redis
// cannot be reached, they see it at their next ledger poll.
func (cc cliConfig) announce(ctx context.Context, what string) {
	if cc.redisURL == "" {
		return
	}
	opts, err := redis.ParseURL(cc.redisURL)
	if err == nil {
		opts.DialTimeout = 2 * time.Second
		rdb := redis.NewClient(opts)
		err = announce(ctx, rdb, what)
		rdb.Close()
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "warning: could not announce the change through redis (%v); running instances apply it at their next ledger poll\n", err)
	}
}

// loadConfigFile reads and adapts the configuration at path (./Caddyfile
// when path is empty and there is one) as `caddy run` would, without
// Caddy's own log lines on stderr unless verbose: a command's output is
// its answer and the sentences it prints.
func loadConfigFile(path, adapter string, verbose bool) ([]byte, error) {
	if verbose {
		raw, _, _, err := caddycmd.LoadConfig(path, adapter)
		return raw, err
	}
	if path == "" {
		if _, err := os.Stat("Caddyfile"); err != nil {
			return nil, nil //nolint:nilerr // no configuration given and none here: the caller says so
		}
		path = "Caddyfile"
	}
	body, err := os.ReadFile(path) //nolint:gosec // G304: the operator's own configuration file
	if err != nil {
		return nil, err
	}
	base := filepath.Base(path)
	if adapter == "" && (strings.HasPrefix(base, "Caddyfile") || filepath.Ext(base) == ".caddyfile") {
		adapter = "caddyfile"
	}
	if adapter == "" {
		return body, nil // JSON
	}
	a := caddyconfig.GetAdapter(adapter)
	if a == nil {
		return nil, fmt.Errorf("unknown config adapter %q", adapter)
	}
	raw, _, err := a.Adapt(body, map[string]any{"filename": path})
	return raw, err
}

// loadCLIConfig finds the ledger from --db or the configuration.
func loadCLIConfig(fl caddycmd.Flags) (cliConfig, error) {
	cc := cliConfig{defaultPlan: defaultPlanName}
	if db := fl.String("db"); db != "" {
		cc.dbPath = db
		return cc, nil
	}
	verbose, _ := fl.GetBool("verbose")
	raw, err := loadConfigFile(fl.String("config"), fl.String("adapter"), verbose)
	if err != nil {
		return cc, fmt.Errorf("reading the configuration: %w", err)
	}
	if len(raw) == 0 {
		return cc, errors.New("no configuration found: give --config Caddyfile or --db PATH")
	}
	var cfg struct {
		Apps struct {
			Modelgate *App `json:"modelgate"`
		} `json:"apps"`
	}
	if err := json.Unmarshal(raw, &cfg); err != nil {
		return cc, fmt.Errorf("reading the configuration: %w", err)
	}
	app := cfg.Apps.Modelgate
	if app == nil {
		return cc, errors.New("the configuration has no modelgate global option")
	}
	if err := app.setDefaults(); err != nil {
		return cc, err
	}
	if app.Ledger.Driver == "postgres" {
		dsn, err := caddy.NewReplacer().ReplaceOrErr(app.Ledger.DSN, true, true)
		if err != nil {
			return cc, fmt.Errorf("the ledger's dsn: %w", err)
		}
		cc.postgres = dsn
	} else {
		cc.dbPath = app.Ledger.Path
	}
	cc.defaultPlan = app.DefaultPlan
	if app.Redis != nil {
		cc.redisURL = caddy.NewReplacer().ReplaceKnown(app.Redis.URL, "")
	}
	cc.plans = map[string]bool{}
	for _, p := range app.Plans {
		cc.plans[p.Name] = true
	}
	if cc.offerErr = app.buildCatalogue(); cc.offerErr == nil {
		cc.offer = func(name string) *accounts.PlanOffer { return planOffer(app.plan(name), app.models) }
	}
	if app.PublicURL != "" {
		if u, err := parsePublicURL(caddy.NewReplacer().ReplaceKnown(app.PublicURL, "")); err == nil {
			var whole any
			_ = json.Unmarshal(raw, &whole)
			if base, ok := consolePath(whole); ok {
				cc.console = u.String() + base
			}
		}
	}
	return cc, nil
}

// consolePath finds the base_path of the first modelgate_console handler
// in a JSON configuration.
func consolePath(v any) (string, bool) {
	switch v := v.(type) {
	case map[string]any:
		if v["handler"] == "modelgate_console" {
			base, _ := v["base_path"].(string)
			return strings.TrimRight(base, "/"), true
		}
		for _, k := range slices.Sorted(maps.Keys(v)) {
			if p, ok := consolePath(v[k]); ok {
				return p, true
			}
		}
	case []any:
		for _, e := range v {
			if p, ok := consolePath(e); ok {
				return p, true
			}
		}
	}
	return "", false
}

// withStore runs f on the configured ledger, with the accounts service of
// the configuration's plans.
func withStore(fl caddycmd.Flags, f func(ctx context.Context, s *ledger.Store, acc *accounts.Service, cc cliConfig) error) (int, error) {
	cc, err := loadCLIConfig(fl)
	if err != nil {
		return caddy.ExitCodeFailedStartup, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := openCLILedger(ctx, fl, cc)
	if err != nil {
		return caddy.ExitCodeFailedStartup, err
	}
	acc := &accounts.Service{Store: s, DefaultPlan: cc.defaultPlan}
	if cc.plans != nil {
		acc.Plan = func(name string) bool { return cc.plans[name] }
	}
	acc.Offer = cc.offer
	err = f(ctx, s, acc, cc)
	if cerr := s.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return 1, err
	}
	return 0, nil
}

// required reads a flag that must be given.
func required(fl caddycmd.Flags, name string) (string, error) {
	v := fl.String(name)
	if v == "" {
		return "", fmt.Errorf("--%s is required", name)
	}
	return v, nil
}

func cmdAccountCreate(fl caddycmd.Flags) (int, error) {
	return withStore(fl, func(ctx context.Context, s *ledger.Store, acc *accounts.Service, cc cliConfig) error {
		o := accounts.Opening{Email: fl.String("email"), Plan: fl.String("plan")}
		if c := fl.String("credit"); c != "" {
			m, err := ledger.ParseMoney(c)
			if err != nil || m <= 0 {
				return fmt.Errorf("--credit %q: want a positive amount such as 10.00", c)
			}
			o.Credit = m
		}
		if fl.Bool("password-stdin") {
			if o.Email == "" {
				return errors.New("a console login needs --email")
			}
			var err error
			if o.PasswordHash, err = readPassword(os.Stdin); err != nil {
				return err
			}
		}
		acct, err := acc.Open(ctx, o)
		if errors.Is(err, ledger.ErrDuplicate) {
			return &wrapped{msg: "an account with the email " + strings.TrimSpace(o.Email) + " exists already", err: err}
		}
		if err != nil {
			return err
		}
		fmt.Println(acct.ID)
		return nil
	})
}

// readPassword reads a password from the first line of r and hashes it.
func readPassword(r io.Reader) (string, error) {
	line, err := bufio.NewReader(io.LimitReader(r, passwords.MaxLength+2)).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return "", fmt.Errorf("reading the password: %w", err)
	}
	pw := strings.TrimRight(line, "\r\n")
	if err := passwords.Check(pw); err != nil {
		return "", err
	}
	return passwords.Hash(pw)
}

func cmdAccountState(st ledger.State) caddycmd.CommandFunc {
	return func(fl caddycmd.Flags) (int, error) {
		return withStore(fl, func(ctx context.Context, s *ledger.Store, acc *accounts.Service, cc cliConfig) error {
			id, err := required(fl, "account")
			if err != nil {
				return err
			}
			if err := s.SetAccountState(ctx, id, st); err != nil {
				return err
			}
			cc.announce(ctx, "account:"+id)
			fmt.Fprintf(os.Stderr, "account %s is now %s\n", id, st)
			return nil
		})
	}
}

func cmdAccountPlan(fl caddycmd.Flags) (int, error) {
	return withStore(fl, func(ctx context.Context, s *ledger.Store, acc *accounts.Service, cc cliConfig) error {
		id, err := required(fl, "account")
		if err != nil {
			return err
		}
		plan, err := required(fl, "plan")
		if err != nil {
			return err
		}
		if cc.plans != nil && !cc.plans[plan] {
			return fmt.Errorf("plan %s is not in the configuration %s", plan, known("plans", plan, slices.Collect(maps.Keys(cc.plans))))
		}
		if err := s.SetAccountPlan(ctx, id, plan); err != nil {
			return err
		}
		cc.announce(ctx, "account:"+id)
		fmt.Fprintf(os.Stderr, "account %s is now on plan %s\n", id, plan)
		return nil
	})
}

// cmdAccountResetLink prints a one-time link that sets the account's
// console password: how an operator lets a customer back in without mail
// (docs/operations.md, "Console self-service"). Using the link ends the account's sessions.
func cmdAccountResetLink(fl caddycmd.Flags, who string) (int, error) {
	return withStore(fl, func(ctx context.Context, s *ledger.Store, acc *accounts.Service, cc cliConfig) error {
		lifetime := fl.Duration("expires-in")
		if lifetime <= 0 || lifetime > accounts.MaxResetLinkLifetime {
			return fmt.Errorf("--expires-in %s: want a duration up to %s", lifetime, accounts.MaxResetLinkLifetime)
		}
		console := fl.String("url")
		if console == "" {
			console = cc.console
		}
		if console == "" {
			return errors.New("the link needs the console's public address: set public_url in the modelgate option " +
				"(and serve modelgate_console), or give --url https://your.host/console")
		}
		u, err := url.Parse(console)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("--url %q: want the console's address, such as https://api.example.com/console", console)
		}
		id, err := acc.FindAccount(ctx, who)
		if errors.Is(err, ledger.ErrNotFound) {
			return &wrapped{msg: "there is no account " + who, err: err}
		}
		if err != nil {
			return err
		}
		token, err := acc.IssueToken(ctx, id, ledger.TokenReset, lifetime)
		if err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "a one-time link for account %s, valid for %s; it sets a new password and ends the account's sessions:\n", id, lifetime)
		fmt.Println(accounts.ResetLink(console, token))
		return nil
	})
}

func cmdKeyCreate(fl caddycmd.Flags) (int, error) {
	return withStore(fl, func(ctx context.Context, s *ledger.Store, acc *accounts.Service, cc cliConfig) error {
		id, err := required(fl, "account")
		if err != nil {
			return err
		}
		body, err := keyLimitFlags(fl)
		if err != nil {
			return err
		}
		l, err := body.apply(ledger.KeyLimits{})
		if err != nil {
			return err
		}
		cc.warnUnchecked(l)
		secret, k, err := acc.CreateKeyWithLimits(ctx, id, fl.String("label"), l)
		if err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "key %s (%s) created; it is shown only this once:\n", k.ID, k.Prefix)
		if !k.Limits.None() {
			printKeyLimits(&k)
		}
		fmt.Println(secret)
		return nil
	})
}

// cmdKeyUpdate changes the limits given by flags of a key; the others
// stay.
func cmdKeyUpdate(fl caddycmd.Flags) (int, error) {
	return withStore(fl, func(ctx context.Context, s *ledger.Store, acc *accounts.Service, cc cliConfig) error {
		id, err := required(fl, "key-id")
		if err != nil {
			return err
		}
		body, err := keyLimitFlags(fl)
		if err != nil {
			return err
		}
		if !body.any() {
			return errors.New("nothing to change: give one or more of --cap, --period, --models, --expires, --rpm, --concurrency")
		}
		k, err := s.KeyByID(ctx, id)
		if err != nil {
			return err
		}
		l, err := body.apply(k.Limits)
		if err != nil {
			return err
		}
		cc.warnUnchecked(l)
		if k, err = acc.UpdateKey(ctx, id, l); err != nil {
			return err
		}
		cc.announce(ctx, "key:"+id)
		fmt.Fprintf(os.Stderr, "key %s updated\n", id)
		printKeyLimits(&k)
		return nil
	})
}

// warnUnchecked says when limits that the plan bounds could not be
// checked against it.
func (cc cliConfig) warnUnchecked(l ledger.KeyLimits) {
	if cc.offer == nil && (l.Models != nil || l.RPM > 0 || l.Concurrency > 0) {
		why := "the command was given --db, not the configuration"
		if cc.offerErr != nil {
			why = "the configuration's catalogue could not be read: " + cc.offerErr.Error()
		}
		fmt.Fprintf(os.Stderr, "warning: the key's models, rpm and concurrency are not checked against the account's plan (%s)\n", why)
	}
}

func cmdKeyDelete(fl caddycmd.Flags) (int, error) {
	return withStore(fl, func(ctx context.Context, s *ledger.Store, acc *accounts.Service, cc cliConfig) error {
		id, err := required(fl, "key-id")
		if err != nil {
			return err
		}
		if err := acc.DeleteKey(ctx, id); err != nil {
			return err
		}
		cc.announce(ctx, "key:"+id)
		fmt.Fprintf(os.Stderr, "key %s deleted\n", id)
		return nil
	})
}

func cmdCredit(fl caddycmd.Flags) (int, error) {
	return withStore(fl, func(ctx context.Context, s *ledger.Store, acc *accounts.Service, cc cliConfig) error {
		id, err := required(fl, "account")
		if err != nil {
			return err
		}
		amountFlag, err := required(fl, "amount")
		if err != nil {
			return err
		}
		reason, err := required(fl, "reason")
		if err != nil {
			return err
		}
		amount, err := ledger.ParseMoney(amountFlag)
		if err != nil || amount <= 0 {
			return fmt.Errorf("--amount %q: want a positive amount such as 5.00", amountFlag)
		}
		ref := fl.String("reference")
		if ref == "" {
			ref = "cli:" + rand.Text()
		}
		res, replayed, err := acc.Credit(ctx, id, amount, reason, ref)
		if err != nil {
			return err
		}
		if replayed {
			fmt.Fprintf(os.Stderr, "reference %q was credited already (%s to %s); nothing more was credited; balance then %s\n", ref, amount, id, res.Balance)
			return nil
		}
		cc.announce(ctx, "account:"+id) // it may have paid a debt and resumed the account
		fmt.Fprintf(os.Stderr, "credited %s to %s; balance %s\n", amount, id, res.Balance)
		return nil
	})
}

// cmdAccountAdjust applies an operator's debit or correction.
func cmdAccountAdjust(fl caddycmd.Flags) (int, error) {
	return withStore(fl, func(ctx context.Context, s *ledger.Store, acc *accounts.Service, cc cliConfig) error {
		id, err := required(fl, "account")
		if err != nil {
			return err
		}
		amountFlag, err := required(fl, "amount")
		if err != nil {
			return err
		}
		amount, err := ledger.ParseMoney(amountFlag)
		if err != nil || amount == 0 {
			return fmt.Errorf("--amount %q: want a debit such as -5.00 or a correction such as 5.00", amountFlag)
		}
		res, replayed, err := acc.Adjust(ctx, accounts.Adjustment{AccountID: id, Amount: amount, Reason: fl.String("reason"),
			Reference: fl.String("reference"), AllowOwed: fl.Bool("allow-owed")})
		if errors.Is(err, ledger.ErrInsufficientFunds) {
			return fmt.Errorf("%s; to record the rest as owed, add --allow-owed", strings.TrimSuffix(sentence(err), "."))
		}
		if err != nil {
			return err
		}
		if replayed {
			fmt.Fprintf(os.Stderr, "reference %s was applied already, on %s; nothing changed\n", res.Entries[0].Reference,
				res.Entries[0].CreatedAt.Format(time.RFC3339))
		} else {
			cc.announce(ctx, "account:"+id)
		}
		e := res.Entries[0]
		fmt.Fprintf(os.Stderr, "adjusted %s by %s", id, e.Amount)
		if e.Owed > 0 {
			fmt.Fprintf(os.Stderr, " and %s owed", e.Owed)
		}
		fmt.Fprintf(os.Stderr, "; balance %s, owed %s\n", res.Balance, res.Owed)
		if res.Owed > 0 && !replayed {
			fmt.Fprintf(os.Stderr, "account %s is suspended until a payment covers what it owes\n", id)
		}
		return nil
	})
}

// cmdAccountHistory prints an account's money history: a table for
// people, or with --csv exact CSV.
func cmdAccountHistory(fl caddycmd.Flags) (int, error) {
	return withStore(fl, func(ctx context.Context, s *ledger.Store, acc *accounts.Service, _ cliConfig) error {
		id := fl.Arg(0)
		entries, err := acc.AllHistory(ctx, id)
		if err != nil {
			return err
		}
		if fl.Bool("csv") {
			return accounts.WriteHistoryCSV(os.Stdout, entries)
		}
		tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "time\tkind\tamount\towed\tbalance after\towed after\treference\treason\t")
		for _, e := range entries {
			after := "?"
			if e.BalanceAfter != nil {
				after = e.BalanceAfter.String()
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", e.CreatedAt.Format(time.DateTime), e.Kind, e.Amount, e.Owed,
				after, e.OwedAfter, e.Reference, strings.ReplaceAll(e.Reason, "\t", " "))
		}
		return tw.Flush()
	})
}

// wrapped is an error whose message is written for a person, keeping the
// error it stands for (errors.Is still finds ledger.ErrDuplicate).
type wrapped struct {
	msg string
	err error
}

func (w *wrapped) Error() string { return w.msg }
func (w *wrapped) Unwrap() error { return w.err }

// openCLILedger opens the configuration's ledger and says which on stderr.
// A SQLite file that does not exist yet is created only with
// --create-ledger: a relative path resolves against the current
// directory, and a command run from elsewhere would otherwise work on a new,
// empty ledger without a word.
func openCLILedger(ctx context.Context, fl caddycmd.Flags, cc cliConfig) (*ledger.Store, error) {
	if cc.postgres != "" {
		fmt.Fprintln(os.Stderr, "ledger: postgres ("+redactDSN(cc.postgres)+")")
		s, err := ledger.Open(ctx, ledger.Options{Postgres: cc.postgres})
		if err != nil {
			return nil, fmt.Errorf("opening the PostgreSQL ledger: %w", err)
		}
		return s, nil
	}
	path, err := filepath.Abs(cc.dbPath)
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) && !fl.Bool("create-ledger") {
		return nil, fmt.Errorf("there is no ledger at %s (relative paths resolve against the current directory: "+
			"run the command where the gateway runs, or give --db with the full path); to create a new, empty ledger there, add --create-ledger", path)
	}
	fmt.Fprintln(os.Stderr, "ledger: "+path)
	s, err := ledger.Open(ctx, ledger.Options{Path: path})
	if err != nil {
		return nil, fmt.Errorf("opening the ledger %s: %w", path, err)
	}
	return s, nil
}

// redactDSN is a PostgreSQL DSN without its password (in the user
// information or a password parameter), for messages and the log.
func redactDSN(dsn string) string {
	if u, err := url.Parse(dsn); err == nil && u.Scheme != "" {
		if q := u.Query(); q.Has("password") {
			q.Set("password", "xxxxx")
			u.RawQuery = q.Encode()
		}
		return u.Redacted()
	}
	// key=value form: drop the password pair
	fields := strings.Fields(dsn)
	for i, f := range fields {
		if strings.HasPrefix(f, "password=") {
			fields[i] = "password=xxxxx"
		}
	}
	return strings.Join(fields, " ")
}

// cmdLedgerCopy copies a single-machine ledger into PostgreSQL: the
// source opened as a server would (so that a running gateway on it is
// refused first), the destination empty, every total checked before the
// copy commits.
func cmdLedgerCopy(fl caddycmd.Flags) (int, error) {
	from, err := required(fl, "from")
	if err != nil {
		return caddy.ExitCodeFailedStartup, err
	}
	to, err := required(fl, "to")
	if err != nil {
		return caddy.ExitCodeFailedStartup, err
	}
	ctx := context.Background()
	if _, err := os.Stat(from); err != nil {
		return caddy.ExitCodeFailedStartup, fmt.Errorf("--from %s: %w", from, err)
	}
	src, err := ledger.Open(ctx, ledger.Options{Path: from, ServerLock: true})
	if errors.Is(err, ledger.ErrInUse) {
		return caddy.ExitCodeFailedStartup, errors.New("a gateway is using " + from + ": stop it first, so that nothing changes during the copy")
	}
	if err != nil {
		return caddy.ExitCodeFailedStartup, fmt.Errorf("opening %s: %w", from, err)
	}
	defer src.Close()
	dst, err := ledger.Open(ctx, ledger.Options{Postgres: to})
	if err != nil {
		return caddy.ExitCodeFailedStartup, fmt.Errorf("opening the PostgreSQL ledger (%s): %w", redactDSN(to), err)
	}
	defer dst.Close()
	fmt.Fprintf(os.Stderr, "copying %s into %s\n", from, redactDSN(to))
	rep, err := ledger.Copy(ctx, dst, src)
	if err != nil {
		return 1, err
	}
	fmt.Println(rep.String())
	return 0, nil
}
