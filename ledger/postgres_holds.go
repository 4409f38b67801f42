package ledger

// The PostgreSQL engine's holds: rows of holds, reserved in groups by the
// reserver (mg_reserve), extended by mg_extend, released with the writer's
// batches (postgres.go, "Holds").

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// reserveReq is one Reserve waiting for the reserver.
type reserveReq struct {
	acct     *account
	min, max Money
	// adv, if set, is the advance the reserve makes or raises by up to ask
	// (postgres_advance.go): the grant is carved from it
	adv *advance
	ask Money
	// bound, if set, is the key's cap that bounds the grant
	bound *keyCap
	// outputs
	status int // 0 reserved, 1 no account, 2 not enough, 3 no lease, 4 the key's cap
	hold   int64
	amount Money
	extra  Money      // what the advance was raised by beyond amount
	avail  Money      // what the account had available after
	spend  monthSpend // the account's month's spend (spend.go)
	err    error
	done   chan struct{} // nil for a top-up nobody waits for
}

// maxReserveGroup bounds the reserves made in one transaction.
const maxReserveGroup = 256

// reserve is Store.Reserve on PostgreSQL: a hold carved from the
// account's advance, or else the request handed to the reserver, waited
// for. fresh (ReserveWithMonthSpend) skips the advances.
func (p *pgEngine) reserve(a *account, bound *keyCap, min, max Money, fresh bool) (*Hold, error) {
	s := p.s
	done, err := s.beginRead()
	if err != nil {
		return nil, err
	}
	defer done()
	var want *advance
	var ask Money
	if !fresh && bound == nil {
		var h *Hold
		if h, want, ask = p.fromAdvance(a, max); h != nil {
			return h, nil
		}
	}
	r := &reserveReq{acct: a, min: min, max: max, adv: want, ask: ask, bound: bound, done: make(chan struct{})}
	select {
	case p.reserves <- r:
	case <-p.bgCtx.Done():
		return nil, ErrClosed
	}
	<-r.done
	switch {
	case r.err != nil:
		return nil, fmt.Errorf("ledger: reserve on %q: %w: %w", a.id, ErrWriteFailed, r.err)
	case r.status == 1:
		return nil, fmt.Errorf("ledger: account %q: %w", a.id, ErrNotFound)
	case r.status == 2:
		return nil, ErrInsufficientFunds
	case r.status == 3:
		return nil, fmt.Errorf("ledger: reserve on %q: %w: this instance has no lease", a.id, ErrWriteFailed)
	case r.status == 4:
		return nil, capError(bound.e, bound.lim, bound.now)
	}
	s.outstanding.Add(int64(r.amount))
	s.openHolds.Add(1)
	h := &Hold{s: s, acct: a, amount: r.amount, id: r.hold, adv: want, spendMonth: r.spend.month, spent: r.spend.spend}
	if bound != nil {
		h.key = bound.e
	}
	if want != nil {
		h.id = randomHoldID() // its own, for its usage row; r.hold is the advance's
	}
	return h, nil
}

// reserver makes the reserves waiting, in groups, on a connection of its own.
func (p *pgEngine) reserver() {
	defer p.bg.Done()
	var conn *pgxpool.Conn
	defer func() {
		if conn != nil {
			dropOwn(conn)
		}
	}()
	group := make([]*reserveReq, 0, maxReserveGroup)
	for {
		var r *reserveReq
		select {
		case <-p.bgCtx.Done():
			return
		case r = <-p.reserves:
		}
		group = append(group[:0], r)
	drain:
		for len(group) < maxReserveGroup {
			select {
			case r := <-p.reserves:
				group = append(group, r)
			default:
				break drain
			}
		}
		err := p.reserveGroup(&conn, group)
		for _, r := range group {
			if err != nil {
				r.err = err
			}
			p.answered(r)
			if r.done != nil {
				close(r.done)
			}
		}
		clear(group)
	}
}

// reserveGroup makes a group of reserves in one transaction; a lapsed
// lease is taken again and the group tried once more.
func (p *pgEngine) reserveGroup(conn **pgxpool.Conn, group []*reserveReq) error {
	ctx, cancel := context.WithTimeout(p.bgCtx, p.s.opts.BusyTimeout+pgOpTimeout)
	defer cancel()
	for attempt := 0; ; attempt++ {
		if *conn == nil {
			c, err := p.acquireOwn(ctx)
			if err != nil {
				return err
			}
			*conn = c
		}
		err := p.reserveTx(ctx, (*conn).Conn(), group)
		if err != nil {
			dropOwn(*conn)
			*conn = nil
			return err
		}
		if group[0].status != 3 || attempt > 0 {
			return nil
		}
		// the lease lapsed: the advances' rows were released with it
		p.leaseLost.Add(1)
		p.spoilAdvances()
		if err := p.register(ctx); err != nil {
			return err
		}
	}
}

// reserveTx makes the group's reserves in one statement (mg_reserve, one
// round trip: the accounts are locked only while the server runs it).
// Every request gets its status.
func (p *pgEngine) reserveTx(ctx context.Context, conn *pgx.Conn, group []*reserveReq) error {
	n := len(group)
	holds, accts := make([]int64, n), make([]string, n)
	mins, maxs, asks := make([]int64, n), make([]int64, n), make([]int64, n)
	keys, starts := make([]string, n), make([]int64, n)
	for i, r := range group {
		holds[i], accts[i], mins[i], maxs[i], asks[i] = randomHoldID(), r.acct.id, int64(r.min), int64(r.max), int64(r.ask)
		if r.adv != nil {
			holds[i] = r.adv.id
		}
		if r.bound != nil {
			keys[i], starts[i] = r.bound.e.principal.KeyID, r.bound.start()
		}
	}
	p.dbReserves.Add(uint64(n))
	var status, months []int32
	var granted, extras, avails, spends []int64
	err := conn.QueryRow(ctx, `SELECT status, granted, extras, avails, months, spends FROM mg_reserve($1, $2, $3, $4, $5, $6, $7, $8)`,
		p.id, holds, accts, mins, maxs, asks, keys, starts).Scan(&status, &granted, &extras, &avails, &months, &spends)
	if err != nil {
		return err
	}
	if len(status) != n || len(granted) != n || len(extras) != n || len(avails) != n || len(months) != n || len(spends) != n {
		return fmt.Errorf("mg_reserve answered %d results for %d reserves", len(status), n)
	}
	for i, r := range group {
		r.status, r.avail = int(status[i]), Money(avails[i])
		if r.status == 0 {
			r.amount, r.extra, r.hold = Money(granted[i]), Money(extras[i]), holds[i]
			r.spend = monthSpend{month: months[i], spend: Money(spends[i])}
		}
	}
	return nil
}

// randomHoldID returns a random positive hold id (ids are chosen here, so
// that a group's holds need no round trip to learn theirs).
func randomHoldID() int64 {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return int64(binary.BigEndian.Uint64(b[:])>>1) | 1
}

// sharedHolds is true: every instance's holds are rows.
func (p *pgEngine) sharedHolds() bool { return true }

// unhold gives a hold carved from an advance back to the advance; the
// others' rows go in releaseRow.
func (p *pgEngine) unhold(h *Hold) {
	if h.adv != nil {
		p.closeCarved(h, 0)
	}
}

// releaseRow deletes the hold's row with the writer's next batch; a
// failed release is tried again by the lease loop (until then the amount
// stays held). A hold carved from an advance has no row of its own.
func (p *pgEngine) releaseRow(h *Hold) {
	if h.adv != nil {
		return
	}
	c := getCommand(cmdRelease)
	defer putCommand(c)
	c.hold = h
	err := p.s.submit(context.Background(), c)
	if err == nil {
		err = c.err
	}
	if err != nil && !errors.Is(err, ErrClosed) {
		p.pendingMu.Lock()
		p.pending = append(p.pending, h.id)
		p.pendingMu.Unlock()
	}
}

// localHeld does nothing: Held was read from the database.
func (p *pgEngine) localHeld(*Account) {}

// heldOf does nothing: balance and held were read together from the
// database.
func (p *pgEngine) heldOf(context.Context, []Account) error { return nil }

// extend takes the extra first from what the hold's advance has free, in
// memory, then from the account's available balance on the hold's row
// (its advance's, for a hold carved from one).
func (p *pgEngine) extend(h *Hold, extra Money) (Money, error) {
	s := p.s
	a := h.acct
	var added Money
	if adv := h.adv; adv != nil {
		a.mu.Lock()
		t := max(min(extra, adv.free), 0)
		adv.free -= t
		h.amount += t
		h.over = true
		a.mu.Unlock()
		s.outstanding.Add(int64(t))
		added, extra = t, extra-t
	}
	if extra <= 0 {
		return added, nil
	}
	g, err := p.extendRow(h, extra)
	if err != nil {
		if retry, _ := pgRetryable(err); retry {
			return 0, err
		}
		g = 0
	}
	if g < 0 {
		return -1, nil
	}
	a.mu.Lock()
	h.amount += g
	a.mu.Unlock()
	s.outstanding.Add(int64(g))
	return added + g, nil
}

// extendRow adds up to extra to the hold's row (its advance's, for a hold
// carved from one), as far as the available balance goes. It returns what
// was added, or -1 if the row has lapsed.
func (p *pgEngine) extendRow(h *Hold, extra Money) (Money, error) {
	ctx, cancel := context.WithTimeout(context.Background(), p.s.opts.BusyTimeout+pgOpTimeout)
	defer cancel()
	id := h.id
	if h.adv != nil {
		id = h.adv.id
	}
	var g int64
	var err error
	if l := keyLimitsOf(h.key); l.Capped() {
		err = p.pool.QueryRow(ctx, `SELECT mg_extend_key($1, $2, $3, $4)`, id, int64(extra), h.key.principal.KeyID,
			l.period().Start(p.s.now())).Scan(&g)
	} else {
		err = p.pool.QueryRow(ctx, `SELECT mg_extend($1, $2)`, id, int64(extra)).Scan(&g)
	}
	if err != nil {
		return 0, err
	}
	return Money(g), nil
}

// settled marks the hold settled once its batch deleted its row (a hold
// carved from an advance: once the advance's row paid what it took).
func (p *pgEngine) settled(h *Hold, c *command, amount Money) {
	a := h.acct
	a.mu.Lock()
	h.state = holdSettled
	if h.adv != nil {
		p.closeCarved(h, c.covered)
	}
	a.mu.Unlock()
	p.s.outstanding.Add(-int64(amount))
	p.s.openHolds.Add(-1)
}
