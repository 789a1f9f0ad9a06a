package gateway

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"holon.dev/holon"
	"holon.dev/holon/gateway/contract"
	"holon.dev/holon/journal"
)

// This file keeps the reservations of in-process calls in memory. By the
// durability rule a call to an in-process agent may leave no trace at all
// if the process dies before it settles: it had no effect anywhere. So on
// a store only this process writes (holon.SoleWriter), such a call's
// reservation, hold and Idempotency-Key claim live in the engine's ledger,
// and reach the store only inside the settlement's update: one store
// update per call. An agent that asks for durability (Ctx.Durable: an
// effect is about to leave the process) has its reservation written first,
// as any other call's is.
//
// Lock order: the ledger's lock, then a read of the store (View), then the
// lock of the written receipts, never the other way round: bbolt's writer,
// growing the file, waits for every read to end, and a read waiting for
// the ledger would wait for an admission that waits for the writer. (An
// admission preview, resolve, reads the store alone: the decisive check is
// the reservation's.) A settlement, in the writer's transaction, takes
// only the lock of the written receipts, held for a few map operations:
// the writer never waits for an admission's read of the store.
//
// The ledger is visible to every admission exactly as a stored hold is:
//
//   - An in-memory admission reads the committed state and the ledger
//     under the ledger's lock, and counts both the in-memory reservations
//     and the pending ones: durable reservations applied in the writer's
//     transaction and not yet visible to a read.
//   - A durable reservation's check, in the writer's transaction, counts
//     what that transaction sees and the in-memory reservations, and
//     registers itself as pending, under the same lock; it stays pending
//     until its commit is durable (so visible to reads).
//   - An in-memory reservation leaves the ledger only once its
//     settlement's commit is durable, and so visible.
//
// So between two admissions every reservation is counted at least once
// (twice for a moment, which only makes an admission more careful), and
// nothing can be overspent at any instant. Idempotency-Keys are claimed the
// same way: a key running in memory, or pending in a durable reservation,
// refuses a second run until the store shows the key.

// ledger is the engine's in-memory reservations and claims.
type ledger struct {
	mu sync.Mutex
	// memHeld (per account) and memReserved (per mandate, and per
	// mandate's budget window: windowName) sum the in-memory
	// reservations; pendHeld and pendReserved the pending durable ones.
	memHeld, memReserved   map[string]journal.Amount
	pendHeld, pendReserved map[string]journal.Amount
	// written are the entries whose receipt a transaction wrote (perhaps
	// not committed yet, perhaps undone): a transaction that sees that
	// receipt sees the entry's money in the store, and does not count it
	// again. Guarded by wmu, not mu (an entry's seen too), so that the
	// writer notes a settlement without waiting for the ledger's lock.
	wmu     sync.Mutex
	written map[*resv]struct{}
	// claims are the Idempotency-Keys running in memory or pending.
	claims map[string]Claim
	// inFlight counts the in-memory reservations.
	inFlight int

	// ids are receipt ids taken from the store in blocks, in order.
	idsMu sync.Mutex
	ids   []string
}

// receiptIDBlock is how many receipt ids one store update takes for
// in-memory calls (unused ones are gaps after a restart).
const receiptIDBlock = 256

func newLedger() *ledger {
	return &ledger{
		memHeld: map[string]journal.Amount{}, memReserved: map[string]journal.Amount{},
		pendHeld: map[string]journal.Amount{}, pendReserved: map[string]journal.Amount{},
		written: map[*resv]struct{}{}, claims: map[string]Claim{},
	}
}

// resv is one entry of the ledger: an in-memory reservation, or a pending
// durable one.
type resv struct {
	receipt        string
	payer, mandate string
	// window is the mandate's budget window the reservation also counts
	// in ("" for none).
	window         string
	held, reserved journal.Amount
	claim          Claim
	mem            bool
	// seen is the store's receipts counter just after a transaction wrote
	// the entry's receipt (0: none did): a transaction whose counter is
	// lower cannot see that receipt.
	seen uint64
}

// add moves an amount in a per-name sum, forgetting names back at zero.
func add(m map[string]journal.Amount, name string, d journal.Amount) {
	if v := m[name] + d; v == 0 {
		delete(m, name)
	} else {
		m[name] = v
	}
}

// windowName is a budget window's name in the ledger's per-mandate sums
// (a mandate id never holds 0x00).
func windowName(mandate, window string) string { return mandate + "\x00" + window }

// enterLocked counts an entry; the caller holds l.mu.
func (l *ledger) enterLocked(r *resv) {
	held, reserved := l.pendHeld, l.pendReserved
	if r.mem {
		held, reserved = l.memHeld, l.memReserved
		l.inFlight++
	}
	add(held, r.payer, r.held)
	add(reserved, r.mandate, r.reserved)
	if r.window != "" {
		add(reserved, windowName(r.mandate, r.window), r.reserved)
	}
	if r.claim != nil {
		l.claims[r.claim.Key()] = r.claim
	}
}

// leaveLocked forgets an entry (nil: nothing); the caller holds l.mu.
func (l *ledger) leaveLocked(r *resv) {
	if r == nil {
		return
	}
	held, reserved := l.pendHeld, l.pendReserved
	if r.mem {
		held, reserved = l.memHeld, l.memReserved
		l.inFlight--
	}
	add(held, r.payer, -r.held)
	add(reserved, r.mandate, -r.reserved)
	if r.window != "" {
		add(reserved, windowName(r.mandate, r.window), -r.reserved)
	}
	if r.claim != nil && l.claims[r.claim.Key()] == r.claim {
		delete(l.claims, r.claim.Key())
	}
	l.wmu.Lock()
	delete(l.written, r)
	l.wmu.Unlock()
}

// leave forgets an entry once the store shows it to every read: its
// commit is durable (or failed, and the process stops).
func (l *ledger) leave(r *resv) {
	l.mu.Lock()
	l.leaveLocked(r)
	l.mu.Unlock()
}

// wrote notes that tx has just written r's receipt. It takes only the
// lock of the written receipts: the writer calls it in a settlement's
// transaction, and must not wait for an admission holding the ledger.
func (l *ledger) wrote(tx holon.Tx, r *resv) {
	seen := tx.Counter("receipts")
	l.wmu.Lock()
	r.seen = seen
	l.written[r] = struct{}{}
	l.wmu.Unlock()
}

// unseen is what a transaction does not show of the ledger: what is
// reserved under a mandate, in its current budget window, and held on an
// account.
type unseen struct {
	reserved, windowReserved, held journal.Amount
}

// unseenLocked is what tx does not show of the ledger, for a mandate, its
// budget window ("" for none) and an account: the in-memory reservations
// (and, with pending, the pending durable ones), less those whose receipt
// tx already sees, whose money it shows. The caller holds l.mu.
func (l *ledger) unseenLocked(tx holon.Tx, mandate, window, account string, pending bool) unseen {
	u := unseen{reserved: l.memReserved[mandate], held: l.memHeld[account]}
	if window != "" {
		u.windowReserved = l.memReserved[windowName(mandate, window)]
	}
	if pending {
		u.reserved += l.pendReserved[mandate]
		u.held += l.pendHeld[account]
		if window != "" {
			u.windowReserved += l.pendReserved[windowName(mandate, window)]
		}
	}
	type written struct {
		r    *resv
		seen uint64
	}
	var maybe []written
	l.wmu.Lock()
	for r := range l.written {
		if (!r.mem && !pending) || (r.mandate != mandate && r.payer != account) {
			continue
		}
		maybe = append(maybe, written{r, r.seen})
	}
	l.wmu.Unlock()
	var n uint64
	if len(maybe) > 0 {
		// Read only when an entry needs it (not under wmu: the writer
		// takes wmu for a few map operations only).
		n = tx.Counter("receipts")
	}
	for _, w := range maybe {
		r := w.r
		if w.seen > n || !receiptShown(tx, r.receipt) {
			continue
		}
		if r.mandate == mandate {
			u.reserved -= r.reserved
			if window != "" && r.window == window {
				u.windowReserved -= r.reserved
			}
		}
		if r.payer == account {
			u.held -= r.held
		}
	}
	return u
}

// receiptShown reports whether tx shows a receipt: without decoding it
// where the store can say (holon.ReceiptChecker), else by reading it.
func receiptShown(tx holon.Tx, id string) bool {
	if rc, ok := tx.(holon.ReceiptChecker); ok {
		return rc.HasReceipt(id)
	}
	_, err := tx.Receipt(id)
	return err == nil
}

// memHold is an in-memory reservation: the hold a durable one would store.
type memHold struct {
	hold    *holon.Hold
	receipt *holon.Receipt
	claim   Claim
	entry   *resv
}

// InFlight counts the calls whose reservation is held in memory (not in
// the store's holds).
func (e *Engine) InFlight() int {
	e.led.mu.Lock()
	defer e.led.mu.Unlock()
	return e.led.inFlight
}

// soleWriter reports whether the store is written by this process only.
func soleWriter(s holon.Store) bool {
	sw, ok := s.(holon.SoleWriter)
	return ok && sw.SoleWriter()
}

// inMemory reports whether a call may keep its reservation in memory: an
// in-process agent that delegates nothing, called at the root, with no
// approval to bind, on a store only this process writes.
func (e *Engine) inMemory(v *AgentVersion, sp callSpec) bool {
	return e.memory && sp.parent == nil && sp.approval == "" && !sp.preApproved &&
		len(v.Manifest.Calls) == 0 && e.inProcess(v.Manifest.Runtime.Kind)
}

// receiptID hands out the next receipt id of the engine's block, taking a
// new block from the store when it is used up.
func (e *Engine) receiptID(ctx context.Context) (string, error) {
	l := e.led
	l.idsMu.Lock()
	defer l.idsMu.Unlock()
	if len(l.ids) == 0 {
		var ids []string
		err := e.store.Update(ctx, func(tx holon.Tx) error {
			ids = ids[:0]
			for range receiptIDBlock {
				id, err := tx.NewReceiptID()
				if err != nil {
					return err
				}
				ids = append(ids, id)
			}
			return nil
		})
		if err != nil {
			return "", err
		}
		l.ids = ids
	}
	id := l.ids[0]
	l.ids = l.ids[1:]
	return id, nil
}

// notInMemory sends a call to the durable reservation: its admission did
// not allow it outright (a denial, an approval, missing funds), which the
// durable path decides and writes, under the receipt id already taken.
type notInMemory struct{ id string }

func (e *notInMemory) Error() string { return "not reserved in memory" }

// reserveInMemory admits a call on the committed state and the ledger and,
// when it is allowed, reserves it in the ledger. A *notInMemory: the call
// takes the durable path.
func (e *Engine) reserveInMemory(ctx context.Context, m *contract.Mandate, v *AgentVersion, sp callSpec) (*reservation, error) {
	a := v.Manifest
	id, err := e.receiptID(ctx)
	if err != nil {
		return nil, err
	}
	r := e.newReceipt(id, m, sp, v)
	req := e.callRequest(m, sp)
	l := e.led
	l.mu.Lock()
	defer l.mu.Unlock()
	if sp.claim != nil {
		if other := l.claims[sp.claim.Key()]; other != nil {
			return nil, sp.claim.Running(other)
		}
	}
	// What the read finds, in one variable its closure takes by reference
	// (it takes nothing of sp, which would move all of it to the heap).
	var got struct {
		stop  error
		d     contract.Decision
		avail journal.Amount
		bs    contract.BudgetState
	}
	claim := sp.claim
	err = e.store.View(func(tx holon.Tx) error {
		if got.stop = checkClaim(tx, claim); got.stop != nil {
			return nil
		}
		var err error
		if got.bs, err = budgetState(tx, m, r.Created); err != nil {
			return err
		}
		rec, err := tx.Record(a.Ref())
		if err != nil {
			return err
		}
		u := l.unseenLocked(tx, m.ID, got.bs.Window.Key, r.Payer, true)
		got.bs.Reserved += u.reserved
		got.bs.WindowReserved += u.windowReserved
		got.d = contract.CheckCall(m, a, v.Measured(rec), got.bs, req)
		acct, err := tx.Account(r.Payer)
		if err != nil {
			return err
		}
		got.avail = acct.Available() - u.held
		return nil
	})
	d := got.d
	switch {
	case err != nil:
		return nil, err
	case got.stop != nil:
		return nil, got.stop
	case d.Verdict != contract.VerdictAllow || got.avail < d.WorstCase:
		return nil, &notInMemory{id: id}
	}
	// The reservation's parts, allocated together.
	n := &struct {
		rs    reservation
		mh    memHold
		hold  holon.Hold
		entry resv
		w     journal.Amount
	}{w: d.WorstCase}
	w := n.w
	r.WorstCase = &n.w
	r.Status = holon.StatusRunning
	n.hold = holon.Hold{Receipt: r.ID, Payer: r.Payer, Mandate: m.ID, Window: got.bs.Window.Key, Reserved: w, Amount: w, Started: r.Created}
	n.entry = resv{receipt: r.ID, payer: r.Payer, mandate: m.ID, window: n.hold.Window, held: w, reserved: w, claim: claim, mem: true}
	l.enterLocked(&n.entry)
	n.mh = memHold{hold: &n.hold, receipt: r, claim: claim, entry: &n.entry}
	n.rs = reservation{receipt: r, mem: &n.mh}
	return &n.rs, nil
}

// durableLedger is what a durable reservation's transaction sees of the
// ledger: it is taken in the writer's transaction, checked against and
// registered in (as pending) under the ledger's lock, which the
// transaction holds from the check to its end.
type durableLedger struct {
	l      *ledger
	locked bool
	p      *resv
}

// lock takes the ledger for the rest of the transaction and forgets what
// an earlier run of the same update registered.
func (dl *durableLedger) lock() {
	if dl == nil || dl.l == nil || dl.locked {
		return
	}
	dl.l.mu.Lock()
	dl.locked = true
	dl.l.leaveLocked(dl.p)
	dl.p = nil
}

// unlock ends the transaction's hold on the ledger.
func (dl *durableLedger) unlock() {
	if dl == nil || !dl.locked {
		return
	}
	dl.locked = false
	dl.l.mu.Unlock()
}

// checkClaim refuses a key running in memory or pending in another
// reservation, then checks it in tx.
func (dl *durableLedger) checkClaim(tx holon.Tx, c Claim) error {
	if c == nil {
		return nil
	}
	if dl != nil && dl.l != nil {
		dl.lock()
		if other := dl.l.claims[c.Key()]; other != nil && other != c {
			return c.Running(other)
		}
	}
	return c.Check(tx)
}

// unseen is what tx does not show of the in-memory reservations, for a
// mandate, its budget window and an account (pending durable ones are in
// tx, or will be checked in their own transaction after this one).
func (dl *durableLedger) unseen(tx holon.Tx, mandate, window, account string) unseen {
	if dl == nil || dl.l == nil {
		return unseen{}
	}
	dl.lock()
	return dl.l.unseenLocked(tx, mandate, window, account, false)
}

// pend registers the transaction's reservation, the hold it wrote (nil for
// none), and its claim as pending.
func (dl *durableLedger) pend(tx holon.Tx, h *holon.Hold, c Claim) {
	if dl == nil || dl.l == nil {
		return
	}
	dl.lock()
	p := &resv{claim: c}
	if h != nil {
		p.receipt, p.payer, p.mandate, p.window, p.held, p.reserved = h.Receipt, h.Payer, h.Mandate, h.Window, h.Amount, h.Reserved
	}
	dl.l.enterLocked(p)
	if h != nil {
		dl.l.wrote(tx, p)
	}
	dl.p = p
}

// release forgets the transaction's pending reservation: once its commit
// is durable (visible to reads), or once its update failed.
func (dl *durableLedger) release() {
	if dl == nil || dl.l == nil {
		return
	}
	dl.l.leave(dl.p)
}

// promote writes an in-memory reservation to the store, as a durable
// reservation would have written it, and waits for it: an in-process agent
// asked for durability before an effect of its own leaves the process.
// The ledger counts the reservation until the write is durable.
func (e *Engine) promote(ctx context.Context, st *runState) error {
	mh := st.mem
	err := e.store.Update(ctx, func(tx holon.Tx) error {
		h := *mh.hold
		if err := tx.AddHeld(h.Payer, h.Amount); err != nil {
			return err
		}
		if err := tx.AddBudget(h.Mandate, 0, h.Reserved); err != nil {
			return err
		}
		if h.Window != "" {
			if err := tx.AddWindowBudget(h.Mandate, h.Window, 0, h.Reserved); err != nil {
				return err
			}
		}
		if err := tx.PutHold(&h); err != nil {
			return err
		}
		if err := tx.PutReceipt(mh.receipt); err != nil {
			return err
		}
		e.led.wrote(tx, mh.entry)
		return recordClaim(tx, mh.claim, mh.receipt)
	})
	if err != nil {
		if errors.Is(err, holon.ErrBroken) {
			e.fail(err)
		}
		return fmt.Errorf("write the reservation of %s: %w", st.rid, err)
	}
	st.mem = nil
	e.led.leave(mh.entry)
	return nil
}
