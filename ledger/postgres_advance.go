package ledger

// Advances on busy accounts (PostgreSQL, docs/design.md "Advances on busy
// accounts"). A reserve on PostgreSQL is a transaction on the account's
// row that every instance shares; on an account that many requests use
// at once, that transaction per request is most of the server's work. So
// an instance that sees an account busy (two reserves within advanceBusy)
// and rich (what it has available is at least advanceShare times the
// advance) asks, with one request's reserve, for an extra amount on the
// same hold: an advance, a holds row like any other, under this
// instance's lease. The account's next holds on this instance are carved
// from the advance in memory (each is its own Hold, with its own id on
// its usage row), with no round trip; a settle lowers the advance by what
// it charged, in the settle's batch (pgTakeStrict), and a release gives the
// hold back to the advance in memory. The advance is topped up in the
// background when half of it is granted, growing while it empties fast,
// and given back (its row released) once unused for advanceIdle, when the
// account can no longer grant it (a reserve refused or granted no extra),
// and when this instance's lease lapsed.
//
// What stays true: an advance is part of the account's held, so the
// holds of all instances never exceed the balance; an advance's row is at
// most a 64th of what the account had available beside it when last
// raised (mg_reserve enforces it), so other instances can still reserve
// nearly all of the rest, and an account near empty has no advances (a
// raise that can add nothing retires it) and gets exact holds;
// a settle whose advance is gone or short (lapsed, or a raise lost with
// a crashed server) is charged to the available balance like any lapsed
// settle (the batch runs again carefully, see pgEngine.batchTx). What
// changes: the account's held includes the advances' unused part, and a
// hold from an advance carries the month's spend as the advance's last
// raise read it (ReserveWithMonthSpend never uses an advance).

import (
	"context"
	"time"
)

const (
	// advanceShare: an advance's row is at most this fraction (1/64) of
	// what the account has available beside it (mg_reserve's "/ 64").
	advanceShare = 64
	// advanceFirst is a new advance's size, in requests of the size of the
	// one that asks for it; it doubles at each top-up that comes within
	// advanceFast of the last, up to advanceMost.
	advanceFirst = 16
	advanceMost  = 1024
	advanceFast  = time.Second
	// advanceBusy: two reserves on an account this close make it busy. An
	// advance costs one write more than exact holds (its release, once
	// idle), and saves a reserve's transaction per request after the first
	// two: worth it from about one request a second.
	advanceBusy = time.Second
	// advanceIdle: an advance unused this long is given back.
	advanceIdle = 2 * time.Second
)

// advance is an instance's advance on an account. Its fields are guarded
// by the account's mu.
type advance struct {
	acct *account
	id   int64 // its holds row
	// free is what it can still grant (its row holds free plus the open
	// carved holds' amounts, as this instance knows them), open how many
	// carved holds are open.
	free Money
	open int32
	// unit is the max of the request that asked for it, size what a top-up
	// brings free back to.
	unit, size Money
	lastUse    time.Time // the last hold carved from it
	lastTopUp  time.Time
	spend      monthSpend // the account's month's spend, as its last raise read it
	// topping: a reserve that raises it is on its way (one at a time);
	// retiring: it grants no more and its row is released once no hold
	// carved from it is open; bad: a settle found its row gone or short,
	// so free is not to be trusted.
	topping, retiring, bad bool
}

// fromAdvance carves a hold of max from the account's advance, when it has
// that much free, and starts a top-up when half of it is granted. It
// returns nil when the reserve must go to the database, after noting
// whether the account is busy: then want says what advance the reserve
// should ask for (one made here, or the account's to top up), or nil.
func (p *pgEngine) fromAdvance(a *account, max Money) (h *Hold, want *advance, extra Money) {
	now := time.Now()
	a.mu.Lock()
	busy := now.Sub(a.lastReserve) < advanceBusy
	a.lastReserve = now
	adv := a.adv
	if adv != nil && !adv.retiring && max > 0 && adv.free >= max {
		adv.free -= max
		adv.open++
		adv.lastUse = now
		var top Money
		if !adv.topping && adv.free < adv.size/2 {
			top = adv.topUp(now)
		}
		h = &Hold{s: p.s, acct: a, amount: max, id: randomHoldID(), adv: adv, spendMonth: adv.spend.month, spent: adv.spend.spend}
		a.mu.Unlock()
		p.s.outstanding.Add(int64(max))
		p.s.openHolds.Add(1)
		p.carved.Add(1)
		if top > 0 {
			p.sendTopUp(adv, top)
		}
		return h, nil, 0
	}
	created := false
	switch {
	case !busy || max <= 0:
	case adv == nil:
		// rich enough for an advance of advanceFirst such requests, as far
		// as the last reserve saw (mg_reserve checks it again)
		if max <= a.availSeen/(advanceShare*(advanceFirst+1)) {
			want = &advance{acct: a, id: randomHoldID(), unit: max, size: advanceFirst * max, lastUse: now, topping: true}
			a.adv, extra, created = want, want.size, true
		}
	case !adv.topping && !adv.retiring:
		want, extra = adv, adv.topUp(now)
	}
	a.mu.Unlock()
	if created {
		p.advMu.Lock()
		p.live[want] = struct{}{}
		p.advMu.Unlock()
	}
	return nil, want, extra
}

// topUp marks the advance as being topped up (caller holds the account's
// mu) and returns the extra to ask for: what brings free back to its
// size, which doubles when the last top-up was recent.
func (adv *advance) topUp(now time.Time) Money {
	if now.Sub(adv.lastTopUp) < advanceFast && adv.size < advanceMost*adv.unit {
		adv.size *= 2
	}
	adv.lastTopUp = now
	adv.topping = true
	return max(adv.size-adv.free, 0)
}

// sendTopUp hands a top-up to the reserver without waiting for it; when
// the reserver is busy with a full queue, the next hold carved tries again.
func (p *pgEngine) sendTopUp(adv *advance, extra Money) {
	r := &reserveReq{acct: adv.acct, adv: adv, ask: extra}
	select {
	case p.reserves <- r:
	default:
		adv.acct.mu.Lock()
		adv.topping = false
		adv.acct.mu.Unlock()
	}
}

// answered applies what a reserve learnt about its account (on the
// reserver goroutine, before its caller wakes): what the account has
// available, which decides whether it may have an advance, the answer to
// the advance the reserve made or raised, and a refusal, after which the
// account's advance is given back.
func (p *pgEngine) answered(r *reserveReq) {
	a := r.acct
	if r.err == nil && (r.status == 0 || r.status == 2) {
		a.mu.Lock()
		a.availSeen = r.avail
		adv := a.adv
		a.mu.Unlock()
		if r.status == 2 && adv != nil && adv != r.adv {
			p.retire(adv)
		}
	}
	if r.adv != nil {
		p.advanced(r)
	}
}

// advanced applies a reserve's answer to its advance (on the reserver
// goroutine): what was granted on its row, or, when the reserve failed or
// the account could give no extra, its retirement.
func (p *pgEngine) advanced(r *reserveReq) {
	a, adv := r.acct, r.adv
	a.mu.Lock()
	adv.topping = false
	if adv.retiring && adv.open == 0 {
		p.wakeTend()
	}
	if r.err != nil || r.status != 0 {
		a.mu.Unlock()
		// refused or not known: a row the reserve may have written is
		// released with the advance (a refused one wrote none)
		p.retire(adv)
		return
	}
	if !adv.bad {
		adv.free += r.extra
	}
	if r.max > 0 {
		adv.open++
	}
	if r.spend.month > adv.spend.month || (r.spend.month == adv.spend.month && r.spend.spend > adv.spend.spend) {
		adv.spend = r.spend
	}
	poor := r.extra == 0
	a.mu.Unlock()
	if poor {
		p.retire(adv)
	}
}

// retire stops the advance granting and queues its row's release for
// when no hold carved from it is open (the lease loop's releaseRetired).
func (p *pgEngine) retire(adv *advance) {
	a := adv.acct
	a.mu.Lock()
	if a.adv == adv {
		a.adv = nil
	}
	was := adv.retiring
	adv.retiring = true
	empty := adv.open == 0 && !adv.topping
	a.mu.Unlock()
	if !was {
		p.advMu.Lock()
		delete(p.live, adv)
		p.retired = append(p.retired, adv)
		p.advMu.Unlock()
		if empty {
			p.wakeTend()
		}
	}
}

// spoil marks the advance bad (its row was found gone or short) and
// retires it.
func (p *pgEngine) spoil(adv *advance) {
	a := adv.acct
	a.mu.Lock()
	adv.bad, adv.free = true, 0
	a.mu.Unlock()
	p.retire(adv)
}

// closeCarved ends a hold carved from an advance, which took taken from
// the advance's row (0 for a release): the rest of the hold is free again.
// When it was the last open hold of a retired advance, the lease loop is
// woken to release the row. Caller holds the account's mu.
func (p *pgEngine) closeCarved(h *Hold, taken Money) {
	adv := h.adv
	adv.open--
	if !adv.bad {
		adv.free += h.amount - taken
	}
	if adv.retiring && adv.open == 0 {
		p.wakeTend()
	}
}

// wakeTend has the lease loop run tendAdvances now, so that a retired
// advance's row is released as soon as it can be, not at the next tick.
func (p *pgEngine) wakeTend() {
	select {
	case p.tend <- struct{}{}:
	default:
	}
}

// tendAdvances (the lease loop, about once a second and when woken)
// retires the advances unused for advanceIdle, and releases the rows of
// the retired ones that have no open hold left, all in one statement (so
// that thousands of accounts going quiet at once cost the lease loop one
// round trip, not one each); should it fail, they are tried again with
// the other failed releases.
func (p *pgEngine) tendAdvances() {
	now := time.Now()
	idleFor := time.Duration(p.idle.Load())
	for _, adv := range p.liveAdvances() {
		a := adv.acct
		a.mu.Lock()
		idle := !adv.topping && now.Sub(adv.lastUse) >= idleFor
		a.mu.Unlock()
		if idle {
			p.retire(adv)
		}
	}
	p.advMu.Lock()
	retired := p.retired
	p.retired = nil
	p.advMu.Unlock()
	var keep []*advance
	var ids []int64
	for _, adv := range retired {
		a := adv.acct
		a.mu.Lock()
		done := adv.open == 0 && !adv.topping
		a.mu.Unlock()
		if done {
			ids = append(ids, adv.id)
		} else {
			keep = append(keep, adv)
		}
	}
	if len(ids) > 0 {
		// deleted, and whatever they still hold given back
		ctx, cancel := context.WithTimeout(p.bgCtx, pgOpTimeout)
		err := p.releaseIDs(ctx, ids)
		cancel()
		if err != nil {
			p.pendingMu.Lock()
			p.pending = append(p.pending, ids...)
			p.pendingMu.Unlock()
		}
	}
	if len(keep) > 0 {
		p.advMu.Lock()
		p.retired = append(p.retired, keep...)
		p.advMu.Unlock()
	}
}

// spoilAdvances marks every advance of this instance bad: its lease had
// lapsed, so their rows were released by another instance.
func (p *pgEngine) spoilAdvances() {
	for _, adv := range p.liveAdvances() {
		p.spoil(adv)
	}
}

// liveAdvances lists the advances not retired.
func (p *pgEngine) liveAdvances() []*advance {
	p.advMu.Lock()
	defer p.advMu.Unlock()
	l := make([]*advance, 0, len(p.live))
	for adv := range p.live {
		l = append(l, adv)
	}
	return l
}
