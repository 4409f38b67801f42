package ledger

// The effects of committed writes on the in-memory caches (accounts, keys),
// the same whichever engine committed them. The caller holds loadMu
// exclusively, after the commit, so that a cache fill racing with the write
// cannot leave the old value behind.

// accountSet applies a change of an account's state or plan (column) to
// its cached copy; the operator's state ends a suspension for debt.
func (s *Store) accountSet(id, column, value string) {
	a := s.cachedAccount(id)
	if a == nil {
		return
	}
	a.mu.Lock()
	if column == "state" {
		a.state, a.debt = State(value), false
	} else {
		a.plan = value
	}
	a.mu.Unlock()
}

// keyAdded puts a new key in the key cache.
func (s *Store) keyAdded(e *keyEntry) {
	kc := &s.keys
	kc.mu.Lock()
	kc.putLocked(e)
	kc.mu.Unlock()
}

// keyLimitsSet applies a key's new limits and period spend (set's) to its
// cached entry, if any; the holds it keeps are this process's.
func (s *Store) keyLimitsSet(id string, set *keyEntry) {
	kc := &s.keys
	kc.mu.RLock()
	e := kc.byID[id]
	kc.mu.RUnlock()
	if e != nil {
		e.takeLimits(set)
	}
}

// keyDeleted marks a cached key deleted.
func (s *Store) keyDeleted(id string) {
	kc := &s.keys
	kc.mu.RLock()
	e := kc.byID[id]
	kc.mu.RUnlock()
	if e != nil {
		e.deleted.Store(true)
	}
}

// moneyApplied applies a money change to the account it reserved on
// (mem.acct), else to the cached account, if any: what it reserved is no
// longer held, its balance and state are the change's.
func (s *Store) moneyApplied(accountID string, mem *moneyMem) {
	a := mem.acct
	if a == nil {
		a = s.cachedAccount(accountID)
	}
	if a == nil {
		return
	}
	a.mu.Lock()
	a.held -= mem.reserved
	a.balance += mem.delta
	a.state, a.debt = mem.state, mem.debt
	a.mu.Unlock()
	mem.reserved = 0
}
