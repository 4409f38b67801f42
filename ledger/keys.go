package ledger

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// Key is an API key's stored record. The secret itself is never stored.
type Key struct {
	ID, AccountID, Label, Prefix string
	CreatedAt, LastUsedAt        time.Time
	Deleted                      bool
	DeletedAt                    time.Time
	// Limits are the key's own limits (keylimits.go).
	Limits KeyLimits
	// PeriodSpent is what a capped key was charged in the period that
	// starts at PeriodStart (unix ms); see Spent.
	PeriodSpent Money
	PeriodStart int64
}

// SpentThisPeriod is what a capped key was charged in its cap's period
// at now (zero once a new period began).
func (k *Key) SpentThisPeriod(now time.Time) Money {
	if !k.Limits.Capped() {
		return 0
	}
	return periodSpend{k.PeriodStart, k.PeriodSpent}.in(k.Limits.period().Start(now))
}

// Left is what a capped key's cap leaves at now, never below zero
// (requests under way hold part of it too).
func (k *Key) Left(now time.Time) Money {
	return max(k.Limits.Cap-k.SpentThisPeriod(now), 0)
}

// ResetsAt is when a capped key's cap starts afresh after now (zero for a
// cap that never resets, or no cap).
func (k *Key) ResetsAt(now time.Time) time.Time {
	if !k.Limits.Capped() {
		return time.Time{}
	}
	return k.Limits.period().Next(now)
}

// Principal is who an authenticated request acts for.
type Principal struct {
	KeyID, AccountID, Label, Prefix string
	// Limits are the key's own limits when it has any (nil: none), as they
	// were when the request was authenticated. Read only.
	Limits *KeyLimits
}

// keyEntry is one key in the in-memory cache. principal is immutable;
// limits change when the key is updated.
type keyEntry struct {
	hash      [32]byte
	principal Principal // Limits unset: see limits
	limits    atomic.Pointer[KeyLimits]
	deleted   atomic.Bool
	budget    keyBudget // SQLite: a capped key's period spend and holds
}

// entryColumns are the columns a key's cache entry is read from.
const entryColumns = `id, account_id, label, prefix, hash, deleted_at, ` + limitColumns

// limitColumns are a key's limits and its period spend.
const limitColumns = `cap, cap_period, models, expires_at, rpm, concurrency, period_start, period_spent`

// limitScan reads limitColumns' values (models is a JSON array or NULL).
type limitScan struct {
	cap, start, spent Money
	period            string
	models            sql.NullString
	expires           sql.NullInt64
	rpm, conc         int64
}

func (ls *limitScan) dest() []any {
	return []any{&ls.cap, &ls.period, &ls.models, &ls.expires, &ls.rpm, &ls.conc, &ls.start, &ls.spent}
}

// limits are the scanned limits; a malformed model list is an error.
func (ls *limitScan) limits() (KeyLimits, error) {
	l := KeyLimits{Cap: ls.cap, Period: Period(ls.period), ExpiresAt: fromMilli(ls.expires), RPM: int(ls.rpm), Concurrency: int(ls.conc)}
	if ls.models.Valid {
		if err := json.Unmarshal([]byte(ls.models.String), &l.Models); err != nil {
			return KeyLimits{}, fmt.Errorf("malformed model list: %w", err)
		}
		if l.Models == nil {
			l.Models = []string{}
		}
	}
	return l, nil
}

// scanEntry reads a cache entry from entryColumns (deleted_at sets its
// deleted flag).
func scanEntry(sc interface{ Scan(...any) error }) (*keyEntry, error) {
	e := &keyEntry{}
	var hash []byte
	var del sql.NullInt64
	var ls limitScan
	p := &e.principal
	if err := sc.Scan(append([]any{&p.KeyID, &p.AccountID, &p.Label, &p.Prefix, &hash, &del}, ls.dest()...)...); err != nil {
		return nil, err
	}
	if len(hash) != len(e.hash) {
		return nil, fmt.Errorf("key %s has a malformed hash", p.KeyID)
	}
	copy(e.hash[:], hash)
	l, err := ls.limits()
	if err != nil {
		return nil, fmt.Errorf("key %s: %w", p.KeyID, err)
	}
	e.setLimits(l)
	e.budget.spend = periodSpend{start: int64(ls.start), spend: ls.spent}
	e.deleted.Store(del.Valid)
	return e, nil
}

// setLimits stores the key's limits (nil when they limit nothing).
func (e *keyEntry) setLimits(l KeyLimits) {
	if l.None() {
		e.limits.Store(nil)
		return
	}
	e.limits.Store(&l)
}

// refreshLocked brings the cached entry of fresh's key, if any, to fresh's
// state (read from the database), else caches fresh unless it is
// deleted. The budget's holds are this process's and are kept. Caller
// holds mu, and loadMu exclusively (so that the spend read is the one the
// committed settles left).
func (kc *keyCache) refreshLocked(fresh *keyEntry) {
	deleted := fresh.deleted.Load()
	e := kc.byID[fresh.principal.KeyID]
	if e == nil {
		if !deleted {
			kc.putLocked(fresh)
		}
		return
	}
	e.deleted.Store(deleted)
	e.takeLimits(fresh)
}

// takeLimits gives e the limits and period spend of from, a fresh read or
// write of the same key; the budget's holds are this process's and are
// kept.
func (e *keyEntry) takeLimits(from *keyEntry) {
	e.limits.Store(from.limits.Load())
	e.budget.mu.Lock()
	e.budget.spend = from.budget.spend
	e.budget.mu.Unlock()
}

// maxNegativeKeys bounds the cache of hashes known not to be keys.
const maxNegativeKeys = 8192

// keyCache maps SHA-256(secret) to keys. Negative entries (hashes that are
// no key) are valid until the next reload after a change by another process.
type keyCache struct {
	mu     sync.RWMutex
	byHash map[[32]byte]*keyEntry
	byID   map[string]*keyEntry
	neg    map[[32]byte]struct{}
	gen    uint64 // bumped when neg is cleared
}

func newKeyCache() keyCache {
	return keyCache{
		byHash: make(map[[32]byte]*keyEntry),
		byID:   make(map[string]*keyEntry),
		neg:    make(map[[32]byte]struct{}),
	}
}

// put adds e unless a key with that hash is cached; it returns the cached entry.
// Caller holds mu.
func (kc *keyCache) putLocked(e *keyEntry) *keyEntry {
	if old := kc.byHash[e.hash]; old != nil {
		return old
	}
	kc.byHash[e.hash] = e
	kc.byID[e.principal.KeyID] = e
	delete(kc.neg, e.hash)
	return e
}

// hashKey is SHA-256 of the secret, computed without allocating.
func hashKey(secret string) [32]byte {
	var buf [200]byte
	n := copy(buf[:], secret)
	return sha256.Sum256(buf[:n])
}

// Authenticate returns the principal for an API key. Malformed keys are
// refused without touching the database; a cache miss costs one indexed
// read (keys created by another process), then the key is cached. Unknown
// and deleted keys give ErrUnauthorized.
func (s *Store) Authenticate(secret string) (Principal, error) {
	if !WellFormedKey(secret) {
		return Principal{}, ErrUnauthorized
	}
	sum := hashKey(secret)
	kc := &s.keys
	kc.mu.RLock()
	e := kc.byHash[sum]
	var negative bool
	var gen uint64
	if e == nil {
		_, negative = kc.neg[sum]
		gen = kc.gen
	}
	kc.mu.RUnlock()
	if e == nil {
		if negative {
			return Principal{}, ErrUnauthorized
		}
		var err error
		e, err = s.lookupKey(sum, gen)
		if err != nil {
			return Principal{}, err
		}
		if e == nil {
			return Principal{}, ErrUnauthorized
		}
	}
	if subtle.ConstantTimeCompare(e.hash[:], sum[:]) != 1 || e.deleted.Load() {
		return Principal{}, ErrUnauthorized
	}
	p := e.principal
	p.Limits = e.limits.Load()
	return p, nil
}

// lookupKey reads a key by hash from the read pool and caches the answer.
// It returns nil for an unknown hash.
func (s *Store) lookupKey(sum [32]byte, gen uint64) (*keyEntry, error) {
	e, err := s.readKeyEntry("hash", sum[:])
	if err != nil || e != nil {
		return e, err
	}
	kc := &s.keys
	kc.mu.Lock()
	if kc.gen == gen {
		if len(kc.neg) >= maxNegativeKeys {
			clear(kc.neg)
		}
		kc.neg[sum] = struct{}{}
	}
	kc.mu.Unlock()
	return nil, nil
}

// keyEntryByID returns the cached entry of a key, reading it on a miss
// (a key another instance created, not yet authenticated here); nil for
// no key or a key without an id.
func (s *Store) keyEntryByID(id string) (*keyEntry, error) {
	kc := &s.keys
	kc.mu.RLock()
	e := kc.byID[id]
	kc.mu.RUnlock()
	if e != nil || id == "" {
		return e, nil
	}
	return s.readKeyEntry("id", id)
}

// readKeyEntry reads the key whose column (a constant: "id" or "hash") is
// value from the read pool and caches it; nil if there is none.
func (s *Store) readKeyEntry(column string, value any) (*keyEntry, error) {
	done, err := s.beginRead()
	if err != nil {
		return nil, err
	}
	defer done()
	s.loadMu.RLock()
	defer s.loadMu.RUnlock()
	e, err := scanEntry(s.queryRow(context.Background(), `SELECT `+entryColumns+` FROM keys WHERE `+column+` = ?`, value))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("ledger: read key: %w", err)
	}
	kc := &s.keys
	kc.mu.Lock()
	e = kc.putLocked(e)
	kc.mu.Unlock()
	return e, nil
}

// loadLiveKeys fills the key cache with every key not deleted.
func (s *Store) loadLiveKeys(ctx context.Context) error {
	q := `SELECT ` + entryColumns + ` FROM keys WHERE deleted_at IS NULL`
	rows, err := s.eng.writerQuery(ctx, q)
	if err != nil {
		return fmt.Errorf("ledger: load keys: %w", err)
	}
	defer rows.Close()
	kc := &s.keys
	kc.mu.Lock()
	defer kc.mu.Unlock()
	for rows.Next() {
		e, err := scanEntry(rows)
		if err != nil {
			return fmt.Errorf("ledger: load keys: %w", err)
		}
		kc.putLocked(e)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("ledger: load keys: %w", err)
	}
	return nil
}

// CreateKey creates an API key for an existing account and returns its
// secret, which is never stored and cannot be shown again.
func (s *Store) CreateKey(ctx context.Context, accountID, label string) (secret string, k Key, err error) {
	return s.CreateKeyWithLimits(ctx, accountID, label, KeyLimits{})
}

// CreateKeyWithLimits is CreateKey for a key with its own limits.
func (s *Store) CreateKeyWithLimits(ctx context.Context, accountID, label string, l KeyLimits) (secret string, k Key, err error) {
	if err := l.normalize(); err != nil {
		return "", Key{}, fmt.Errorf("ledger: create key: %w", err)
	}
	secret, err = newSecret()
	if err != nil {
		return "", Key{}, err
	}
	id, err := newID("key_")
	if err != nil {
		return "", Key{}, err
	}
	e := keyEntryFor(id, accountID, label, secret)
	e.setLimits(l)
	now := s.now()
	var start int64
	if l.Capped() {
		start = l.period().Start(now)
	}
	e.budget.spend.start = start // before the entry is cached: a reload may refresh it after
	if err := s.eng.createKey(ctx, e, now.UnixMilli()); err != nil {
		return "", Key{}, err
	}
	p := e.principal
	return secret, Key{ID: p.KeyID, AccountID: p.AccountID, Label: p.Label, Prefix: p.Prefix,
		CreatedAt: time.UnixMilli(now.UnixMilli()).UTC(), Limits: l, PeriodStart: start}, nil
}

// limitArgs are the values of limitColumns for e (its budget's spend
// included).
func limitArgs(e *keyEntry) ([]any, error) {
	var l KeyLimits
	if p := e.limits.Load(); p != nil {
		l = *p
	}
	var models, expires any
	if l.Models != nil {
		b, err := json.Marshal(l.Models)
		if err != nil {
			return nil, err
		}
		models = string(b)
	}
	if !l.ExpiresAt.IsZero() {
		expires = l.ExpiresAt.UnixMilli()
	}
	return []any{int64(l.Cap), string(l.period()), models, expires, int64(l.RPM), int64(l.Concurrency),
		e.budget.spend.start, int64(e.budget.spend.spend)}, nil
}

func keyEntryFor(id, accountID, label, secret string) *keyEntry {
	return &keyEntry{
		hash:      sha256.Sum256([]byte(secret)),
		principal: Principal{KeyID: id, AccountID: accountID, Label: label, Prefix: displayPrefix(secret)},
	}
}

// SetKeyLimits replaces a key's limits and returns the key. A cap set on
// a key that had none, or a new period, starts counting from the spend
// the key's usage rows already have in the period (docs/api.md, "Keys as
// projects"); a changed amount keeps the period's spend, so that a cap
// lowered below it refuses the key's next request. A deleted key's limits
// can be set (they no longer matter); an unknown key is ErrNotFound.
func (s *Store) SetKeyLimits(ctx context.Context, keyID string, l KeyLimits) (Key, error) {
	if err := l.normalize(); err != nil {
		return Key{}, fmt.Errorf("ledger: key %s: %w", keyID, err)
	}
	now := s.now()
	e := &keyEntry{principal: Principal{KeyID: keyID}}
	e.setLimits(l)
	err := s.eng.execCommit(ctx, "set limits of key "+keyID, func(ctx context.Context, conn execer) error {
		var oldCap, start, spent Money
		var oldPeriod string
		err := conn.QueryRowContext(ctx, `SELECT cap, cap_period, period_start, period_spent FROM keys WHERE id = ?`+s.eng.forUpdate(), keyID).
			Scan(&oldCap, &oldPeriod, &start, &spent)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("ledger: key %q: %w", keyID, ErrNotFound)
		}
		if err != nil {
			return err
		}
		e.budget.spend = periodSpend{int64(start), spent}
		switch {
		case !l.Capped():
			e.budget.spend = periodSpend{}
		case oldCap == 0 || Period(oldPeriod) != l.period():
			// the period's spend so far, from the rows (on SQLite the
			// rollup's tail included: the usage rows are written with
			// their debit, the derived tables later)
			ps := l.period().Start(now)
			var sum Money
			err := conn.QueryRowContext(ctx, `SELECT coalesce((SELECT sum(spent) FROM usage_daily WHERE key_id = ? AND day >= ?), 0)
				+ coalesce((SELECT sum(charged) FROM usage WHERE key_id = ? AND created_at >= ? AND NOT (`+s.eng.rolledUsage()+`)), 0)`,
				keyID, time.UnixMilli(ps).UTC().Format(time.DateOnly), keyID, ps).Scan(&sum)
			if err != nil {
				return err
			}
			e.budget.spend = periodSpend{ps, sum}
		}
		args, err := limitArgs(e)
		if err != nil {
			return err
		}
		_, err = conn.ExecContext(ctx, `UPDATE keys SET cap = ?, cap_period = ?, models = ?, expires_at = ?, rpm = ?, concurrency = ?,
			period_start = ?, period_spent = ? WHERE id = ?`, append(args, keyID)...)
		return err
	}, func() { s.keyLimitsSet(keyID, e) })
	if err != nil {
		return Key{}, err
	}
	s.changed("key:" + keyID)
	return s.KeyByID(ctx, keyID)
}

// DeleteKey marks a key deleted. Authenticate refuses it in this process as
// soon as DeleteKey returns (other processes within their PollInterval;
// with PostgreSQL, as soon as its notification reaches them).
// Deleting a deleted key is a no-op; an unknown key is ErrNotFound.
func (s *Store) DeleteKey(ctx context.Context, keyID string) error {
	if err := s.eng.deleteKey(ctx, keyID, time.Now().UnixMilli()); err != nil {
		return err
	}
	s.changed("key:" + keyID)
	return nil
}

const keyColumns = `id, account_id, label, prefix, created_at, last_used_at, deleted_at, ` + limitColumns

func scanKey(sc interface{ Scan(...any) error }, more ...any) (Key, error) {
	var k Key
	var created, used, deleted sql.NullInt64
	var ls limitScan
	dest := append(append([]any{&k.ID, &k.AccountID, &k.Label, &k.Prefix, &created, &used, &deleted}, ls.dest()...), more...)
	if err := sc.Scan(dest...); err != nil {
		return Key{}, err
	}
	k.CreatedAt, k.LastUsedAt, k.DeletedAt = fromMilli(created), fromMilli(used), fromMilli(deleted)
	k.Deleted = deleted.Valid
	l, err := ls.limits()
	if err != nil {
		return Key{}, err
	}
	k.Limits, k.PeriodStart, k.PeriodSpent = l, int64(ls.start), ls.spent
	return k, nil
}

// ListKeys lists an account's keys, deleted ones included, oldest first.
func (s *Store) ListKeys(ctx context.Context, accountID string) ([]Key, error) {
	if err := s.eng.catchUp(ctx); err != nil {
		return nil, err
	}
	done, err := s.beginRead()
	if err != nil {
		return nil, err
	}
	defer done()
	var one int
	err = s.queryRow(ctx, `SELECT 1 FROM accounts WHERE id = ?`, accountID).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("ledger: account %q: %w", accountID, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("ledger: list keys: %w", err)
	}
	rows, err := s.query(ctx, `SELECT `+keyColumns+` FROM keys WHERE account_id = ? ORDER BY created_at, `+s.eng.keyInsertionOrder(), accountID)
	if err != nil {
		return nil, fmt.Errorf("ledger: list keys: %w", err)
	}
	defer rows.Close()
	keys := []Key{}
	for rows.Next() {
		k, err := scanKey(rows)
		if err != nil {
			return nil, fmt.Errorf("ledger: list keys: %w", err)
		}
		keys = append(keys, k)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("ledger: list keys: %w", err)
	}
	return keys, nil
}

// KeyByID reads one key (ErrNotFound if unknown).
func (s *Store) KeyByID(ctx context.Context, keyID string) (Key, error) {
	if err := s.eng.catchUp(ctx); err != nil {
		return Key{}, err
	}
	return s.KeyLimitsByID(ctx, keyID)
}

// KeyLimitsByID is KeyByID without bringing the derived usage tables up to
// date first (on SQLite a rollup): the key's limits and its period spend
// are exact (a settle writes the spend with its debit), its LastUsedAt may
// lag by the rollup's second. It is for the reads a client's requests make
// (GET /api/usage), which never cost a rollup.
func (s *Store) KeyLimitsByID(ctx context.Context, keyID string) (Key, error) {
	done, err := s.beginRead()
	if err != nil {
		return Key{}, err
	}
	defer done()
	k, err := scanKey(s.queryRow(ctx, `SELECT `+keyColumns+` FROM keys WHERE id = ?`, keyID))
	if errors.Is(err, sql.ErrNoRows) {
		return Key{}, fmt.Errorf("ledger: key %q: %w", keyID, ErrNotFound)
	}
	if err != nil {
		return Key{}, fmt.Errorf("ledger: key %q: %w", keyID, err)
	}
	return k, nil
}

// CappedKeys lists the account's live keys that have a spend cap, with
// their period spend, oldest first. Like KeyLimitsByID it reads the keys'
// rows without bringing the derived usage tables up to date first (on
// SQLite a rollup): the alerts' watcher reads them once a tick for each
// account that spent, which must never cost one.
func (s *Store) CappedKeys(ctx context.Context, accountID string) ([]Key, error) {
	done, err := s.beginRead()
	if err != nil {
		return nil, err
	}
	defer done()
	rows, err := s.query(ctx, `SELECT `+keyColumns+` FROM keys WHERE account_id = ? AND cap > 0 AND deleted_at IS NULL
		ORDER BY created_at, id`, accountID)
	if err != nil {
		return nil, fmt.Errorf("ledger: capped keys: %w", err)
	}
	defer rows.Close()
	var keys []Key
	for rows.Next() {
		k, err := scanKey(rows)
		if err != nil {
			return nil, fmt.Errorf("ledger: capped keys: %w", err)
		}
		keys = append(keys, k)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("ledger: capped keys: %w", err)
	}
	return keys, nil
}

// KeyUsage is a key's running totals.
type KeyUsage struct {
	Requests, InputTokens, OutputTokens int64
	Spent                               Money
	LastUsedAt                          time.Time
}

// KeyUsage reads a key's running totals, kept on the key row (O(1); on
// SQLite with the rows the rollup has yet to add).
func (s *Store) KeyUsage(ctx context.Context, keyID string) (KeyUsage, error) {
	done, err := s.beginRead()
	if err != nil {
		return KeyUsage{}, err
	}
	defer done()
	q := s.eng.keyTotalsQuery()
	var u KeyUsage
	var used sql.NullInt64
	err = s.queryRow(ctx, q, keyID).Scan(&u.Requests, &u.InputTokens, &u.OutputTokens, &u.Spent, &used)
	if errors.Is(err, sql.ErrNoRows) {
		return KeyUsage{}, fmt.Errorf("ledger: key %q: %w", keyID, ErrNotFound)
	}
	if err != nil {
		return KeyUsage{}, fmt.Errorf("ledger: key usage %q: %w", keyID, err)
	}
	u.LastUsedAt = fromMilli(used)
	return u, nil
}
