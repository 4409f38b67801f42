package ledger

// The SQLite engine's writes other than settles: each is a command for the
// writer, committed in its next batch (sqlite_batch.go), whose effects on
// the caches the batch applies once committed (apply).

import "context"

// run submits c and returns its outcome.
func (e *sqliteEngine) run(ctx context.Context, c *command) error {
	if err := e.s.submit(ctx, c); err != nil {
		return err
	}
	return c.err
}

func (e *sqliteEngine) createAccount(ctx context.Context, id, email, plan string, now int64) error {
	c := getCommand(cmdCreateAccount)
	defer putCommand(c)
	c.id, c.email, c.str, c.now = id, email, plan, now
	return e.run(ctx, c)
}

func (e *sqliteEngine) setAccount(ctx context.Context, id, column, value string) error {
	kind := cmdSetPlan
	if column == "state" {
		kind = cmdSetState
	}
	c := getCommand(kind)
	defer putCommand(c)
	c.id, c.str = id, value
	return e.run(ctx, c)
}

func (e *sqliteEngine) createKey(ctx context.Context, k *keyEntry, now int64) error {
	c := getCommand(cmdCreateKey)
	defer putCommand(c)
	c.key, c.now = k, now
	return e.run(ctx, c)
}

func (e *sqliteEngine) deleteKey(ctx context.Context, id string, now int64) error {
	c := getCommand(cmdDeleteKey)
	defer putCommand(c)
	c.id, c.now = id, now
	return e.run(ctx, c)
}

// registerModel returns the model's first registration, which the batch
// read into c.now.
func (e *sqliteEngine) registerModel(ctx context.Context, id string, now int64) (int64, error) {
	c := getCommand(cmdRegisterModel)
	defer putCommand(c)
	c.id, c.now = id, now
	if err := e.run(ctx, c); err != nil {
		return 0, err
	}
	return c.now, nil
}

func (e *sqliteEngine) recordAvailability(ctx context.Context, counts []MinuteCount) error {
	c := getCommand(cmdAvailability)
	defer putCommand(c)
	c.counts = counts
	return e.run(ctx, c)
}

func (e *sqliteEngine) openIncident(ctx context.Context, provider, cause string, start int64) (int64, error) {
	c := getCommand(cmdOpenIncident)
	defer putCommand(c)
	c.id, c.str, c.now = provider, cause, start
	if err := e.s.submit(ctx, c); err != nil {
		return 0, err
	}
	return c.n, c.err
}

func (e *sqliteEngine) closeIncident(ctx context.Context, provider string, end int64) error {
	c := getCommand(cmdCloseIncident)
	defer putCommand(c)
	c.id, c.now = provider, end
	return e.run(ctx, c)
}

func (e *sqliteEngine) pruneAvailability(ctx context.Context, now int64) error {
	c := getCommand(cmdPruneAvailability)
	defer putCommand(c)
	c.now = now
	return e.run(ctx, c)
}

func (e *sqliteEngine) execSQL(ctx context.Context, what string, fn func(ctx context.Context, conn execer) error) error {
	return e.execCommit(ctx, what, fn, nil)
}

// execCommit runs commit in the writer's turn, as its batch commits.
func (e *sqliteEngine) execCommit(ctx context.Context, what string, fn func(ctx context.Context, conn execer) error, commit func()) error {
	c := getCommand(cmdExec)
	defer putCommand(c)
	c.str, c.fn, c.commit = what, fn, commit
	return e.run(ctx, c)
}

// applyMoney runs the change in the writer's batch; the cached account
// follows it in memory.
func (e *sqliteEngine) applyMoney(ctx context.Context, ch *MoneyChange, fn func(ctx context.Context, conn execer) error, mem *moneyMem) error {
	s := e.s
	// a debit reserves what it takes in the in-memory account (moneyTx),
	// which it loads first; a credit changes the account if it is
	// cached when the change commits, as credits always did
	var pre *account
	if ch.Kind == KindRefund || ch.Kind == KindDispute || (ch.Kind == KindAdjustment && ch.Amount < 0) {
		a, lerr := s.loadAccount(ctx, ch.AccountID)
		if lerr != nil {
			return lerr
		}
		pre = a
	}
	c := getCommand(cmdExec)
	defer putCommand(c)
	c.str, c.fn = "money "+ch.Kind+" "+ch.AccountID, func(ctx context.Context, conn execer) error {
		mem.acct = pre
		return fn(ctx, conn)
	}
	c.undo = func() { mem.undo() }
	c.commit = func() { s.moneyApplied(ch.AccountID, mem) } // under loadMu, after the commit (apply)
	err := s.submit(ctx, c)
	if err == nil {
		err = c.err
	}
	if err != nil {
		mem.undo()
	}
	return err
}
