package ledger

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"database/sql"
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
}

// Principal is who an authenticated request acts for.
type Principal struct {
	KeyID, AccountID, Label, Prefix string
}

// keyEntry is one key in the in-memory cache; everything but deleted is immutable.
type keyEntry struct {
	hash      [32]byte
	principal Principal
	deleted   atomic.Bool
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
	return e.principal, nil
}

// lookupKey reads a key by hash from the read pool and caches the answer.
// It returns nil for an unknown hash.
func (s *Store) lookupKey(sum [32]byte, gen uint64) (*keyEntry, error) {
	done, err := s.beginRead()
	if err != nil {
		return nil, err
	}
	defer done()
	s.loadMu.RLock()
	defer s.loadMu.RUnlock()
	e := &keyEntry{hash: sum}
	var deleted sql.NullInt64
	err = s.queryRow(context.Background(),
		`SELECT id, account_id, label, prefix, deleted_at FROM keys WHERE hash = ?`, sum[:]).
		Scan(&e.principal.KeyID, &e.principal.AccountID, &e.principal.Label, &e.principal.Prefix, &deleted)
	kc := &s.keys
	if errors.Is(err, sql.ErrNoRows) {
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
	if err != nil {
		return nil, fmt.Errorf("ledger: authenticate: read key: %w", err)
	}
	e.deleted.Store(deleted.Valid)
	kc.mu.Lock()
	e = kc.putLocked(e)
	kc.mu.Unlock()
	return e, nil
}

// loadLiveKeys fills the key cache with every key not deleted.
func (s *Store) loadLiveKeys(ctx context.Context) error {
	q := `SELECT id, account_id, label, prefix, hash FROM keys WHERE deleted_at IS NULL`
	rows, err := s.eng.writerQuery(ctx, q)
	if err != nil {
		return fmt.Errorf("ledger: load keys: %w", err)
	}
	defer rows.Close()
	kc := &s.keys
	kc.mu.Lock()
	defer kc.mu.Unlock()
	for rows.Next() {
		e := &keyEntry{}
		var hash []byte
		if err := rows.Scan(&e.principal.KeyID, &e.principal.AccountID, &e.principal.Label, &e.principal.Prefix, &hash); err != nil {
			return fmt.Errorf("ledger: load keys: %w", err)
		}
		if len(hash) != len(e.hash) {
			return fmt.Errorf("ledger: load keys: key %s has a malformed hash", e.principal.KeyID)
		}
		copy(e.hash[:], hash)
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
	secret, err = newSecret()
	if err != nil {
		return "", Key{}, err
	}
	id, err := newID("key_")
	if err != nil {
		return "", Key{}, err
	}
	e := keyEntryFor(id, accountID, label, secret)
	now := time.Now().UnixMilli()
	if err := s.eng.createKey(ctx, e, now); err != nil {
		return "", Key{}, err
	}
	p := e.principal
	return secret, Key{ID: p.KeyID, AccountID: p.AccountID, Label: p.Label, Prefix: p.Prefix, CreatedAt: time.UnixMilli(now).UTC()}, nil
}

func keyEntryFor(id, accountID, label, secret string) *keyEntry {
	return &keyEntry{
		hash:      sha256.Sum256([]byte(secret)),
		principal: Principal{KeyID: id, AccountID: accountID, Label: label, Prefix: displayPrefix(secret)},
	}
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

const keyColumns = `id, account_id, label, prefix, created_at, last_used_at, deleted_at`

func scanKey(sc interface{ Scan(...any) error }) (Key, error) {
	var k Key
	var created, used, deleted sql.NullInt64
	if err := sc.Scan(&k.ID, &k.AccountID, &k.Label, &k.Prefix, &created, &used, &deleted); err != nil {
		return Key{}, err
	}
	k.CreatedAt, k.LastUsedAt, k.DeletedAt = fromMilli(created), fromMilli(used), fromMilli(deleted)
	k.Deleted = deleted.Valid
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
