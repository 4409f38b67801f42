package ledger

import (
	"context"
	"database/sql"
	"fmt"
)

// migrations are applied in order at Open; PRAGMA user_version records how
// many have run. Never edit a shipped migration: append a new one.
//
// Units: money columns are int64 nanos; timestamps (*_at) are unix
// milliseconds, UTC; durations (latency_us, ttft_us) are microseconds;
// usage_daily.day is the UTC date as 'YYYY-MM-DD'.
//
// Availability (migration 3): availability_minutes.minute is the unix time in
// seconds of the UTC minute's start; availability_daily.day is the UTC date as
// 'YYYY-MM-DD'; incidents.ended_at is NULL while the incident is ongoing (at
// most one per provider, enforced by incidents_ongoing). Both count tables
// are keyed provider first, for per-provider range reads.
//
// After migration 2 the usage table has one secondary index besides
// request_id's: (key_id, created_at). Every index whose key is random per
// request (an account, a key) costs about one WAL page per debit; the one on
// (account_id, created_at) cost ~40% of the writer's throughput. Account-wide
// listings merge the per-key index ranges of the account's keys instead
// (UsageRows), and account totals come from accounts.balance and usage_daily.
// After migration 11 that index is the table usage_by_key, filled with the
// keys' totals and usage_daily by the rollup (sqlite_rollup.go), in large groups:
// a settle writes its usage row and its account's balance, nothing else.
var migrations = []string{
	// 1: initial schema.
	`
CREATE TABLE accounts (
	id         TEXT PRIMARY KEY,
	email      TEXT NOT NULL DEFAULT '',
	plan       TEXT NOT NULL DEFAULT '',
	state      TEXT NOT NULL DEFAULT 'active' CHECK (state IN ('active', 'suspended')),
	balance    INTEGER NOT NULL DEFAULT 0 CHECK (balance >= 0),
	created_at INTEGER NOT NULL
) WITHOUT ROWID;
CREATE UNIQUE INDEX accounts_email ON accounts (email) WHERE email <> '';

CREATE TABLE keys (
	id            TEXT PRIMARY KEY,
	account_id    TEXT NOT NULL REFERENCES accounts (id),
	hash          BLOB NOT NULL UNIQUE,
	label         TEXT NOT NULL DEFAULT '',
	prefix        TEXT NOT NULL,
	created_at    INTEGER NOT NULL,
	deleted_at    INTEGER,
	last_used_at  INTEGER,
	requests      INTEGER NOT NULL DEFAULT 0,
	input_tokens  INTEGER NOT NULL DEFAULT 0,
	output_tokens INTEGER NOT NULL DEFAULT 0,
	spent         INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX keys_account ON keys (account_id, created_at);

CREATE TABLE credits (
	id         INTEGER PRIMARY KEY,
	account_id TEXT NOT NULL REFERENCES accounts (id),
	amount     INTEGER NOT NULL,
	reference  TEXT NOT NULL UNIQUE,
	reason     TEXT NOT NULL DEFAULT '',
	created_at INTEGER NOT NULL
);
CREATE INDEX credits_account ON credits (account_id, created_at);

CREATE TABLE usage (
	id                 INTEGER PRIMARY KEY,
	request_id         TEXT NOT NULL UNIQUE,
	account_id         TEXT NOT NULL,
	key_id             TEXT NOT NULL,
	model              TEXT NOT NULL,
	provider           TEXT NOT NULL,
	upstream_model     TEXT NOT NULL,
	upstream_key_id    TEXT NOT NULL,
	client_format      TEXT NOT NULL,
	stream             INTEGER NOT NULL,
	input_tokens       INTEGER NOT NULL,
	output_tokens      INTEGER NOT NULL,
	cache_read_tokens  INTEGER NOT NULL,
	cache_write_tokens INTEGER NOT NULL,
	reasoning_tokens   INTEGER NOT NULL,
	cost               INTEGER NOT NULL,
	charged            INTEGER NOT NULL,
	hold               INTEGER NOT NULL,
	discount_bps       INTEGER NOT NULL,
	over_hold          INTEGER NOT NULL,
	usage_source       TEXT NOT NULL,
	status             INTEGER NOT NULL,
	outcome            TEXT NOT NULL,
	latency_us         INTEGER NOT NULL,
	ttft_us            INTEGER NOT NULL,
	created_at         INTEGER NOT NULL
);
CREATE INDEX usage_key ON usage (key_id, created_at);
CREATE INDEX usage_account ON usage (account_id, created_at);

CREATE TABLE usage_daily (
	day                TEXT NOT NULL,
	key_id             TEXT NOT NULL,
	model              TEXT NOT NULL,
	account_id         TEXT NOT NULL,
	requests           INTEGER NOT NULL,
	input_tokens       INTEGER NOT NULL,
	output_tokens      INTEGER NOT NULL,
	cache_read_tokens  INTEGER NOT NULL,
	cache_write_tokens INTEGER NOT NULL,
	spent              INTEGER NOT NULL,
	PRIMARY KEY (day, key_id, model)
) WITHOUT ROWID;
CREATE INDEX usage_daily_account ON usage_daily (account_id, day);

CREATE TABLE models (
	id         TEXT PRIMARY KEY,
	created_at INTEGER NOT NULL
);
`,
	// 2: the account index on usage cost more write throughput than it saved (see above).
	`DROP INDEX IF EXISTS usage_account;`,
	// 3: availability history (status page): outcome counts of upstream
	// attempts and probes per provider and UTC minute, their per-day rollup,
	// and incidents. The fail_* columns follow CauseNames.
	`
CREATE TABLE availability_minutes (
	provider          TEXT NOT NULL,
	minute            INTEGER NOT NULL,
	ok                INTEGER NOT NULL,
	fail_connect      INTEGER NOT NULL,
	fail_timeout      INTEGER NOT NULL,
	fail_server       INTEGER NOT NULL,
	fail_overloaded   INTEGER NOT NULL,
	fail_rate_limited INTEGER NOT NULL,
	fail_auth         INTEGER NOT NULL,
	fail_closed       INTEGER NOT NULL,
	PRIMARY KEY (provider, minute)
) WITHOUT ROWID;

CREATE TABLE availability_daily (
	provider          TEXT NOT NULL,
	day               TEXT NOT NULL,
	ok                INTEGER NOT NULL,
	fail_connect      INTEGER NOT NULL,
	fail_timeout      INTEGER NOT NULL,
	fail_server       INTEGER NOT NULL,
	fail_overloaded   INTEGER NOT NULL,
	fail_rate_limited INTEGER NOT NULL,
	fail_auth         INTEGER NOT NULL,
	fail_closed       INTEGER NOT NULL,
	PRIMARY KEY (provider, day)
) WITHOUT ROWID;

CREATE TABLE incidents (
	id         INTEGER PRIMARY KEY,
	provider   TEXT NOT NULL,
	cause      TEXT NOT NULL,
	started_at INTEGER NOT NULL,
	ended_at   INTEGER
);
CREATE INDEX incidents_provider ON incidents (provider, started_at);
CREATE UNIQUE INDEX incidents_ongoing ON incidents (provider) WHERE ended_at IS NULL;
`,
	// 4: console logins (the account's email is its login name) and
	// console sessions, kept by the hash of their cookie token.
	`
CREATE TABLE logins (
	account_id    TEXT PRIMARY KEY REFERENCES accounts (id),
	password_hash TEXT NOT NULL,
	created_at    INTEGER NOT NULL
) WITHOUT ROWID;

CREATE TABLE sessions (
	token_hash BLOB PRIMARY KEY,
	account_id TEXT NOT NULL REFERENCES accounts (id),
	csrf       TEXT NOT NULL,
	created_at INTEGER NOT NULL,
	expires_at INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX sessions_account ON sessions (account_id);
`,
	// 5: hosted tools billed per use: web searches, pages fetched and
	// images generated by a hosted tool, and their part of the cost (nanos,
	// before the discount).
	`
ALTER TABLE usage ADD COLUMN web_searches INTEGER NOT NULL DEFAULT 0;
ALTER TABLE usage ADD COLUMN web_fetches INTEGER NOT NULL DEFAULT 0;
ALTER TABLE usage ADD COLUMN hosted_images INTEGER NOT NULL DEFAULT 0;
ALTER TABLE usage ADD COLUMN hosted_cost INTEGER NOT NULL DEFAULT 0;
`,
	// 6: emails are login names, kept trimmed and in lower case and unique in
	// that form. Existing rows are normalized; if two would then
	// share an email (an operator-made Mixed@Case and a console sign-up
	// mixed@case), the migration refuses, and with it the ledger, until the
	// operator gives each a distinct email: which one is genuine is theirs
	// to decide. The check raises from a trigger on a scratch table, since
	// SQLite has no other way to fail a script with a message.
	`
CREATE TEMP TABLE email_check (x INTEGER);
CREATE TEMP TRIGGER email_check_collisions BEFORE INSERT ON email_check
WHEN EXISTS (SELECT 1 FROM main.accounts WHERE email <> '' GROUP BY lower(trim(email)) HAVING count(*) > 1)
BEGIN
	SELECT RAISE(ABORT, 'accounts share an email that differs only in case or surrounding spaces: give each account a distinct email, then start again (README.md, "Emails are login names")');
END;
INSERT INTO email_check VALUES (1);
DROP TABLE email_check;
UPDATE accounts SET email = lower(trim(email)) WHERE email <> lower(trim(email));
CREATE UNIQUE INDEX accounts_email_nocase ON accounts (lower(email)) WHERE email <> '';
`,
	// 7: money history, reversals and debts.
	moneyMigration,
	// 8: console self-service. logins.email_state says whether
	// the login's email was shown to reach its owner: 'unchecked' (nobody
	// asked: logins made by the operator, before this migration, or while
	// no mail was configured), 'pending' (signed up while mail was
	// configured, the link not followed yet) or 'verified'. login_tokens
	// are the one-time links of password resets and email verification,
	// kept by the SHA-256 of their token and deleted as they are used.
	`
ALTER TABLE logins ADD COLUMN email_state TEXT NOT NULL DEFAULT 'unchecked'
	CHECK (email_state IN ('unchecked', 'pending', 'verified'));

CREATE TABLE login_tokens (
	token_hash BLOB PRIMARY KEY,
	account_id TEXT NOT NULL REFERENCES accounts (id),
	purpose    TEXT NOT NULL CHECK (purpose IN ('reset', 'verify')),
	created_at INTEGER NOT NULL,
	expires_at INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX login_tokens_account ON login_tokens (account_id, purpose);
CREATE INDEX login_tokens_expiry ON login_tokens (expires_at);
`,
	// 9: plans' volume tiers (numbered after the other migrations of
	// the money history). Each usage row says the tier's discount (tier_bps, on top of
	// discount_bps) and what the discounts took off the list price
	// (discount, nanos), which the daily rollup adds up; each account
	// keeps its spend in the current calendar month (UTC) with the month
	// it counts (spend_month, year·100 + month), updated with each debit
	// (spend.go). The current month's spend is counted from the rows.
	`
ALTER TABLE usage ADD COLUMN tier_bps INTEGER NOT NULL DEFAULT 0;
ALTER TABLE usage ADD COLUMN discount INTEGER NOT NULL DEFAULT 0;
ALTER TABLE usage_daily ADD COLUMN discount INTEGER NOT NULL DEFAULT 0;
ALTER TABLE accounts ADD COLUMN spend_month INTEGER NOT NULL DEFAULT 0;
ALTER TABLE accounts ADD COLUMN month_spend INTEGER NOT NULL DEFAULT 0;
UPDATE accounts SET spend_month = CAST(strftime('%Y%m', 'now') AS INTEGER);
UPDATE accounts SET month_spend = m.spent FROM (
	SELECT account_id, sum(charged) AS spent FROM usage
	WHERE created_at >= CAST(strftime('%s', 'now', 'start of month') AS INTEGER) * 1000
	GROUP BY account_id
) AS m WHERE accounts.id = m.account_id;
`,
	// 10: account listings page in creation order (ListAccounts): an
	// index on it, so that a page reads its rows instead of sorting every
	// matching account.
	accountsCreatedIndex,
	// 11: what is derived from usage rows is written in large groups off
	// the settle path (sqlite_rollup.go): usage_by_key replaces the usage_key
	// index, and usage_rollup.rolled is the last usage row whose effects
	// are in usage_daily, the keys' totals and usage_by_key.
	`
CREATE TABLE usage_by_key (
	key_id     TEXT NOT NULL,
	account_id TEXT NOT NULL,
	created_at INTEGER NOT NULL,
	id         INTEGER NOT NULL,
	PRIMARY KEY (key_id, account_id, created_at, id)
) WITHOUT ROWID;
INSERT INTO usage_by_key (key_id, account_id, created_at, id)
	SELECT key_id, account_id, created_at, id FROM usage ORDER BY 1, 2, 3, 4;
DROP INDEX usage_key;
CREATE TABLE usage_rollup (
	one    INTEGER PRIMARY KEY CHECK (one = 1),
	rolled INTEGER NOT NULL
);
INSERT INTO usage_rollup (one, rolled) SELECT 1, coalesce(max(id), 0) FROM usage;
`,
	// 12: keys' own limits (keylimits.go), PostgreSQL's migration 8.
	keyLimitsMigration,
	// 13: the alerts that fired (alerts.go), PostgreSQL's migration 9.
	alertsMigration,
	// 14: alert settings and the alerts' outbox (alertsettings.go,
	// deliveries.go), PostgreSQL's migration 10.
	alertSettingsMigration,
}

// alertsMigration is the table of the alerts that fired and are not
// re-armed: one row per account and alert, so that only one writer fires
// a crossing (docs/design.md, "Alerts fire once per crossing").
const alertsMigration = `
CREATE TABLE alerts_fired (
	account_id TEXT NOT NULL REFERENCES accounts (id),
	alert      TEXT NOT NULL,
	detail     TEXT NOT NULL DEFAULT '',
	fired_at   INTEGER NOT NULL,
	PRIMARY KEY (account_id, alert)
);
`

// alertSettingsMigration adds an account's alert settings and automatic
// top-up (one row per account that set any; amounts in nanos, 0: off;
// flags 0/1), and the outbox of the fired alerts' deliveries: a mail, a
// webhook POST or a top-up's charge, pending until a worker finishes it
// (times in unix ms; lease_until: a claiming worker's lease).
const alertSettingsMigration = `
CREATE TABLE alert_settings (
	account_id       TEXT PRIMARY KEY REFERENCES accounts (id),
	low_balance      INTEGER NOT NULL DEFAULT 0 CHECK (low_balance >= 0),
	month_spend      INTEGER NOT NULL DEFAULT 0 CHECK (month_spend >= 0),
	key_caps         INTEGER NOT NULL DEFAULT 0,
	mail             INTEGER NOT NULL DEFAULT 1,
	webhook_url      TEXT NOT NULL DEFAULT '',
	webhook_secret   TEXT NOT NULL DEFAULT '',
	topup_on         INTEGER NOT NULL DEFAULT 0,
	topup_below      INTEGER NOT NULL DEFAULT 0 CHECK (topup_below >= 0),
	topup_amount     INTEGER NOT NULL DEFAULT 0 CHECK (topup_amount >= 0),
	topup_month_max  INTEGER NOT NULL DEFAULT 0 CHECK (topup_month_max >= 0),
	topup_off_reason TEXT NOT NULL DEFAULT '',
	card_customer    TEXT NOT NULL DEFAULT '',
	card_method      TEXT NOT NULL DEFAULT '',
	card_brand       TEXT NOT NULL DEFAULT '',
	card_last4       TEXT NOT NULL DEFAULT '',
	updated_at       INTEGER NOT NULL
);

CREATE TABLE alert_deliveries (
	id          TEXT PRIMARY KEY,
	account_id  TEXT NOT NULL REFERENCES accounts (id),
	alert       TEXT NOT NULL,
	channel     TEXT NOT NULL CHECK (channel IN ('mail', 'webhook', 'topup')),
	target      TEXT NOT NULL DEFAULT '',
	payload     TEXT NOT NULL DEFAULT '',
	amount      INTEGER NOT NULL DEFAULT 0 CHECK (amount >= 0),
	status      TEXT NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'done', 'failed')),
	attempts    INTEGER NOT NULL DEFAULT 0,
	next_at     INTEGER NOT NULL,
	lease_until INTEGER NOT NULL DEFAULT 0,
	leased_by   TEXT NOT NULL DEFAULT '',
	last_error  TEXT NOT NULL DEFAULT '',
	result      TEXT NOT NULL DEFAULT '',
	created_at  INTEGER NOT NULL,
	done_at     INTEGER
);
CREATE INDEX alert_deliveries_due ON alert_deliveries (next_at) WHERE status = 'pending';
CREATE INDEX alert_deliveries_account ON alert_deliveries (account_id, created_at);
`

// keyLimitsMigration adds a key's own limits: its spend cap (nanos, 0:
// none) and the period that resets it ('never', 'day', 'week', 'month'),
// its model list (a JSON array of ids and patterns; NULL: all), when it
// expires (unix ms; NULL: never), its own rpm and concurrency (0: the
// plan's), and, while it has a cap, what it was charged in the period that
// starts at period_start (unix ms), moved by each settle's transaction.
const keyLimitsMigration = `
ALTER TABLE keys ADD COLUMN cap INTEGER NOT NULL DEFAULT 0 CHECK (cap >= 0);
ALTER TABLE keys ADD COLUMN cap_period TEXT NOT NULL DEFAULT 'never';
ALTER TABLE keys ADD COLUMN models TEXT;
ALTER TABLE keys ADD COLUMN expires_at INTEGER;
ALTER TABLE keys ADD COLUMN rpm INTEGER NOT NULL DEFAULT 0 CHECK (rpm >= 0);
ALTER TABLE keys ADD COLUMN concurrency INTEGER NOT NULL DEFAULT 0 CHECK (concurrency >= 0);
ALTER TABLE keys ADD COLUMN period_start INTEGER NOT NULL DEFAULT 0;
ALTER TABLE keys ADD COLUMN period_spent INTEGER NOT NULL DEFAULT 0;
`

// accountsCreatedIndex is SQLite's migration 10 and PostgreSQL's 5.
const accountsCreatedIndex = `CREATE INDEX IF NOT EXISTS accounts_created ON accounts (created_at, id);`

// moneyMigration is SQLite's migration 7 and, but for its types,
// PostgreSQL's migration 2: the credits table becomes the account's
// money history, one row per change of its balance or of what it owes,
// with what the change was (kind: credit, topup, refund, dispute,
// dispute_won, dispute_lost, adjustment, debt_payment), its change of what
// the account owes (owed; amount stays the change of the balance, signed),
// the balance and owed amount just after it, and the payment it belongs to
// (payment: "stripe:pi_…" on a top-up and on its reversals, indexed).
// Accounts get owed (what a reversal or a debit could not take from the
// balance; never negative) and suspended_for ('owed' when a debt suspended
// the account, so that paying it resumes the account; an operator's
// suspension has ”).
//
// Rows written before it are credits, or top-ups by their reference (a
// Stripe top-up's is "stripe:cs_…"); their balance_after is NULL, since
// the balance just after them cannot be told from the rows (usage debits
// interleave at the millisecond), and their payment is unknown. Nothing
// was owed before, so their owed and owed_after are 0.
const moneyMigration = `
ALTER TABLE accounts ADD COLUMN owed INTEGER NOT NULL DEFAULT 0 CHECK (owed >= 0);
ALTER TABLE accounts ADD COLUMN suspended_for TEXT NOT NULL DEFAULT '';
ALTER TABLE credits ADD COLUMN kind TEXT NOT NULL DEFAULT 'credit';
ALTER TABLE credits ADD COLUMN owed INTEGER NOT NULL DEFAULT 0;
ALTER TABLE credits ADD COLUMN balance_after INTEGER;
ALTER TABLE credits ADD COLUMN owed_after INTEGER NOT NULL DEFAULT 0;
ALTER TABLE credits ADD COLUMN payment TEXT NOT NULL DEFAULT '';
UPDATE credits SET kind = 'topup' WHERE reference LIKE 'stripe:%';
CREATE INDEX credits_history ON credits (account_id, id);
CREATE INDEX credits_payment ON credits (payment) WHERE payment <> '';
`

// migrateFile brings the schema of the database at dsn up to date, on a
// connection of its own that it closes.
func migrateFile(ctx context.Context, dsn string) error {
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return fmt.Errorf("ledger: open: %w", err)
	}
	defer db.Close()
	conn, err := db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("ledger: open: %w", err)
	}
	defer conn.Close()
	return migrate(ctx, conn)
}

// migrate brings the schema up to date on conn.
// Each migration runs in its own IMMEDIATE transaction together with its
// user_version bump, so concurrent openers of the same file cannot apply one twice.
func migrate(ctx context.Context, conn *sql.Conn) error {
	for {
		done, err := migrateOne(ctx, conn)
		if err != nil || done {
			return err
		}
	}
}

func migrateOne(ctx context.Context, conn *sql.Conn) (done bool, err error) {
	if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		return false, fmt.Errorf("ledger: migrate: begin: %w", err)
	}
	defer func() {
		if err != nil {
			_, _ = conn.ExecContext(context.WithoutCancel(ctx), "ROLLBACK")
		}
	}()
	var version int
	if err := conn.QueryRowContext(ctx, "PRAGMA user_version").Scan(&version); err != nil {
		return false, fmt.Errorf("ledger: migrate: read user_version: %w", err)
	}
	if version > len(migrations) {
		return false, fmt.Errorf("ledger: database schema version %d is newer than this build knows (%d)", version, len(migrations))
	}
	if version == len(migrations) {
		if _, err := conn.ExecContext(ctx, "COMMIT"); err != nil {
			return false, fmt.Errorf("ledger: migrate: commit: %w", err)
		}
		return true, nil
	}
	if _, err := conn.ExecContext(ctx, migrations[version]); err != nil {
		return false, fmt.Errorf("ledger: migration %d: %w", version+1, err)
	}
	if _, err := conn.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", version+1)); err != nil {
		return false, fmt.Errorf("ledger: migration %d: set user_version: %w", version+1, err)
	}
	if _, err := conn.ExecContext(ctx, "COMMIT"); err != nil {
		return false, fmt.Errorf("ledger: migration %d: commit: %w", version+1, err)
	}
	return false, nil
}
