package gateway

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"holon.dev/holon"
	"holon.dev/holon/gateway/contract"
	"holon.dev/holon/journal"
)

// This file keeps the reservations of in-process calls in memory. By the
// durability rule a call to an in-process agent may leave no trace at all
// if the process dies before it settles: it had no effect anywhere. So on
// a store that allows it (holon.Writers), such a call's reservation, hold
// and Idempotency-Key claim live in the engine's ledger, and reach the
// store only inside the settlement's update: one store update per call.
// An agent that asks for durability (Ctx.Durable: an effect is about to
// leave the process) has its reservation written first, as any other
// call's is.
//
// On a store only this process writes (holon.SoleWriter) the ledger with
// the store is exact, and the admission below decides. On a store several
// gateways share (holon.SharedWriters, the PostgreSQL store) another
// gateway admits calls on the same money without seeing this ledger, so
// the decisive check moves into the settlement's transaction (recheck):
// it runs the call's admission again against what that transaction sees
// of every gateway (budgets, windows, stored holds, the payer's balance),
// the call itself excluded, and when it no longer passes writes what the
// durable path writes when admission denies the call, bills nothing and
// answers the caller as admission would have; the agent's output is
// discarded (it had no effect outside the process). There a call with an
// Idempotency-Key keeps its durable reservation: a claim in memory would
// let two gateways run the same key. On one gateway alone on such a store
// the re-check never denies: the admission below counted every
// reservation of this process that the store did not show, so the
// committed state a settlement sees, less its own call, fits the call, as
// it did at admission (reservations only become charges at most as large).
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
//
// On a store several gateways share, whose reads are round trips to a
// server, an in-memory admission does not read the store under the
// ledger's lock (every admission of the process would wait for the
// round trip): it decides on resolve's read (sharedRead), made with no
// lock, and then, under the ledger's lock, counts every reservation still
// in the ledger, whether the read shows it or not, and every one that
// left the ledger since the read began (the ledger keeps the last
// leftCap that left) unless the read shows it: its receipts counter
// reached the one its commit wrote. A reservation that left before the
// read began was committed before it, so the read shows it.

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

	// left are the last leftCap entries that left the ledger, a ring
	// (the one that left i-th at i % leftCap), and leftN how many ever
	// did: kept on a store several gateways share only (sharedRead).
	left  []leftEntry
	leftN uint64

	// ids are receipt ids taken from the store in blocks, in order, the
	// block taken at idsAt.
	idsMu sync.Mutex
	ids   []string
	idsAt time.Time
}

// leftEntry is an entry that left the ledger, as an admission that read
// the store before it left must count it (sharedRead).
type leftEntry struct {
	payer, mandate, window string
	held, reserved         journal.Amount
	seen                   uint64
	mem                    bool
}

// leftCap is how many of the entries that left the ledger it keeps: an
// admission whose read began before the oldest of them cannot tell what
// it missed, and takes the durable path.
const leftCap = 4096

// receiptIDBlock is how many receipt ids one store update takes for
// in-memory calls (unused ones are gaps after a restart).
const receiptIDBlock = 256

// receiptIDMaxAge is how long, on a store several gateways share, a block
// of receipt ids serves: receipts are numbered about in the order their
// calls start (a call's receipt is created as its id is handed out, from
// a block no older than this), which the receipts' filter by time relies
// on (ReceiptOrderSkew); on a store this process alone writes its blocks
// follow one another, and serve until used up.
const receiptIDMaxAge = 250 * time.Millisecond

// newLedger returns an empty ledger; shared keeps the entries that left
// it (a store several gateways share).
func newLedger(shared bool) *ledger {
	l := &ledger{
		memHeld: map[string]journal.Amount{}, memReserved: map[string]journal.Amount{},
		pendHeld: map[string]journal.Amount{}, pendReserved: map[string]journal.Amount{},
		written: map[*resv]struct{}{}, claims: map[string]Claim{},
	}
	if shared {
		l.left = make([]leftEntry, leftCap)
	}
	return l
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
	// gone: the entry left the ledger (under wmu). A transaction that
	// writes its receipt afterwards (a call answered 503 while the store
	// was down, closed once it is back) does not register it again: the
	// ledger's sums no longer hold it, and a written entry that stayed
	// would be subtracted from them by every later read that shows its
	// receipt.
	gone bool
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
	r.gone = true
	seen := r.seen
	l.wmu.Unlock()
	if l.left != nil && r.receipt != "" {
		l.left[l.leftN%leftCap] = leftEntry{payer: r.payer, mandate: r.mandate, window: r.window,
			held: r.held, reserved: r.reserved, seen: seen, mem: r.mem}
		l.leftN++
	}
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
	// A read whose receipts counter reaches seen shows the commit.
	tx.CounterAt("receipts", func(seen uint64) {
		l.wmu.Lock()
		if !r.gone {
			r.seen = seen
			l.written[r] = struct{}{}
		}
		l.wmu.Unlock()
	})
}

// unseen is what a transaction does not show of the ledger: what is
// reserved under a mandate, in its current budget window, and held on an
// account.
type unseen struct {
	reserved, windowReserved, held journal.Amount
}

// sumsLocked is what the ledger holds for a mandate, its budget window
// ("" for none) and an account: the in-memory reservations and, with
// pending, the pending durable ones. The caller holds l.mu.
func (l *ledger) sumsLocked(mandate, window, account string, pending bool) unseen {
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
	return u
}

// unseenLocked is what tx does not show of the ledger, for a mandate, its
// budget window ("" for none) and an account: the in-memory reservations
// (and, with pending, the pending durable ones), less those whose receipt
// tx already sees, whose money it shows. The caller holds l.mu.
func (l *ledger) unseenLocked(tx holon.Tx, mandate, window, account string, pending bool) unseen {
	u := l.sumsLocked(mandate, window, account, pending)
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

// mark is where the ledger's history of entries that left it stands: an
// admission takes it before its read of the store (sharedRead).
func (l *ledger) mark() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.leftN
}

// unseenSinceLocked is unseenLocked for a read of the store that began at
// mark start, made without the ledger's lock, whose receipts counter was
// n: every reservation in the ledger counts (the read may show it; it is
// then counted twice, which only makes an admission more careful), and
// so does every one that left since start, unless the read shows it: n
// reached the counter its commit wrote. (A left entry never written, its
// update failed, holds nothing.) False when the ledger no longer keeps
// every entry that left since start. The caller holds l.mu.
func (l *ledger) unseenSinceLocked(start, n uint64, mandate, window, account string, pending bool) (unseen, bool) {
	if l.left == nil || l.leftN-start > leftCap {
		return unseen{}, false
	}
	u := l.sumsLocked(mandate, window, account, pending)
	for i := start; i < l.leftN; i++ {
		e := &l.left[i%leftCap]
		if e.seen <= n || (!e.mem && !pending) {
			continue
		}
		if e.mandate == mandate {
			u.reserved += e.reserved
			if window != "" && e.window == window {
				u.windowReserved += e.reserved
			}
		}
		if e.payer == account {
			u.held += e.held
		}
	}
	return u, true
}

// unreadLocked is, for a mandate and its budget window, what a read of
// the store that began at mark start, with receipts counter n, does not
// show of the in-memory reservations, as a view shows it (sharedMandate):
// those in the ledger and those that left it since start, less those
// whose settlement's receipt n reaches. Never more than the read misses:
// an entry's counter is the one of its last run, so of its commit once
// it committed; it may count less, when a settlement failed after a run
// whose counter a later commit passed. The caller holds l.mu.
func (l *ledger) unreadLocked(start, n uint64, mandate, window string) unseen {
	u := unseen{reserved: l.memReserved[mandate]}
	if window != "" {
		u.windowReserved = l.memReserved[windowName(mandate, window)]
	}
	l.wmu.Lock()
	for r := range l.written {
		if r.mem && r.mandate == mandate && r.seen <= n {
			u.reserved -= r.reserved
			if window != "" && r.window == window {
				u.windowReserved -= r.reserved
			}
		}
	}
	l.wmu.Unlock()
	if l.left != nil && l.leftN-start <= leftCap {
		for i := start; i < l.leftN; i++ {
			if e := &l.left[i%leftCap]; e.mem && e.mandate == mandate && e.seen > n {
				u.reserved += e.reserved
				if window != "" && e.window == window {
					u.windowReserved += e.reserved
				}
			}
		}
	}
	return u
}

// memHold is an in-memory reservation: the hold a durable one would store.
type memHold struct {
	hold    *holon.Hold
	receipt *holon.Receipt
	claim   Claim
	entry   *resv
	// facts and req are what the call was admitted on: its settlement
	// checks it again on them, against the budgets and balance it sees
	// (recheck), on a store several gateways share.
	facts contract.AgentFacts
	req   contract.CallRequest
}

// InFlight counts the calls whose reservation is held in memory (not in
// the store's holds).
func (e *Engine) InFlight() int {
	e.led.mu.Lock()
	defer e.led.mu.Unlock()
	return e.led.inFlight
}

// inMemory reports whether a call may keep its reservation in memory: an
// in-process agent that delegates nothing, called at the root, with no
// approval to bind, on a store that allows it (and, on a store several
// gateways share, with no Idempotency-Key).
func (e *Engine) inMemory(v *AgentVersion, sp callSpec) bool {
	return e.memoryRoot(sp) && len(v.Manifest.Calls) == 0 && e.inProcess(v.Manifest.Runtime.Kind)
}

// memoryRoot is inMemory's part that the call's spec alone decides.
func (e *Engine) memoryRoot(sp callSpec) bool {
	return e.memory && sp.parent == nil && sp.approval == "" && !sp.preApproved && (sp.claim == nil || !e.recheck)
}

// sharedRead is what an in-memory admission on a store several gateways
// share decides on: resolve's read of the store, made without the
// ledger's lock (the header of this file), with what the ledger had seen
// leave it before the read began.
type sharedRead struct {
	start uint64
	// payer is whose account the read asks for ahead: the mandate's
	// issuer as the engine last parsed it ("" when it did not).
	payer string
	// done: the read found all of the below.
	done bool
	bs   contract.BudgetState
	acct holon.Account
	n    uint64 // the receipts counter
	rec  holon.Record
}

// recentMaxAge is how old the committed state an in-memory admission
// reads on a store several gateways share may be (holon.RecentViews):
// the store's writer learns what the other gateways committed each time
// it takes its turn, every group, so under load its state is a group's
// time old. An older one is read from the database. What another gateway
// committed meanwhile (money spent, a mandate replaced or revoked) is
// never missed: the settlement checks the call again against it
// (recheckTx) and denies what admission would have denied.
const recentMaxAge = 50 * time.Millisecond

// newSharedRead starts the read of an in-memory admission, on a store
// several gateways share, for a call that may be reserved in memory (nil
// otherwise).
func (e *Engine) newSharedRead(sp callSpec) *sharedRead {
	if !e.recheck || !e.memoryRoot(sp) {
		return nil
	}
	sr := &sharedRead{start: e.led.mark()}
	e.mandatesMu.RLock()
	if c, ok := e.mandates[sp.mandateID]; ok {
		sr.payer = c.m.Issuer
	}
	e.mandatesMu.RUnlock()
	return sr
}

// ahead asks tx to read the payer's account and the receipts counter with
// its first round trip.
func (sr *sharedRead) ahead(tx holon.Tx) {
	if sr == nil {
		return
	}
	if ra, ok := tx.(holon.ReadsAhead); ok {
		if sr.payer != "" {
			ra.AccountsAhead(sr.payer)
		}
		ra.CountersAhead("receipts")
	}
}

// read reads the rest of what the admission needs, in resolve's
// transaction: the budget it read, the payer's account, the counter.
func (sr *sharedRead) read(tx holon.Tx, m *contract.Mandate, bs contract.BudgetState) error {
	if sr == nil {
		return nil
	}
	acct, err := tx.Account(m.Issuer)
	if err != nil {
		return err
	}
	sr.bs, sr.acct, sr.n, sr.done = bs, acct, tx.Counter("receipts"), true
	return nil
}

// receiptID hands out the next receipt id of the engine's block, taking a
// new block from the store when it is used up. On a store several
// gateways share, a block older than receiptIDMaxAge is dropped too, and
// it returns the time it handed the id out at (zero on any other store).
func (e *Engine) receiptID(ctx context.Context) (string, time.Time, error) {
	l := e.led
	l.idsMu.Lock()
	defer l.idsMu.Unlock()
	var now time.Time
	if e.recheck {
		if now = e.now(); len(l.ids) > 0 && now.Sub(l.idsAt) > receiptIDMaxAge {
			l.ids = nil // gaps in the numbers, as after a restart
		}
	}
	if len(l.ids) == 0 {
		// Its age counts from before its update: a block numbered after
		// another gateway's began after that one's.
		at := now
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
			return "", time.Time{}, err
		}
		l.ids, l.idsAt = ids, at
		if e.recheck {
			now = e.now()
		}
	}
	id := l.ids[0]
	l.ids = l.ids[1:]
	return id, now, nil
}

// ReceiptOrderSkew is how much earlier than a receipt numbered below it a
// receipt may have been created: receipts are numbered in the order their
// calls start, but for in-memory calls on a store several gateways share,
// whose ids come in blocks (receiptIDMaxAge), and on a store whose
// writers take their numbers in blocks (holon.NumberSkew). Zero on any
// other store (beyond the clock's reads in one process).
func (e *Engine) ReceiptOrderSkew() time.Duration {
	skew := holon.NumberSkewOf(e.store)
	if e.recheck && e.memory {
		skew += receiptIDMaxAge
	}
	return skew
}

// notInMemory sends a call to the durable reservation: its admission did
// not allow it outright (a denial, an approval, missing funds), which the
// durable path decides and writes, under the receipt id already taken.
type notInMemory struct {
	id string
	// created is the receipt's time, when it is kept (sharedRead: the
	// time the id was handed out at, ReceiptOrderSkew); zero otherwise.
	created time.Time
}

func (e *notInMemory) Error() string { return "not reserved in memory" }

// reserveInMemory admits a call on the committed state and the ledger and,
// when it is allowed, reserves it in the ledger. A *notInMemory: the call
// takes the durable path. sr is resolve's read on a store several
// gateways share (nil on any other).
func (e *Engine) reserveInMemory(ctx context.Context, m *contract.Mandate, v *AgentVersion, sp callSpec, sr *sharedRead) (*reservation, error) {
	a := v.Manifest
	id, at, err := e.receiptID(ctx)
	if err != nil {
		return nil, err
	}
	r := e.newReceipt(id, m, sp, v)
	req := e.callRequest(m, sp)
	if sr != nil {
		r.Created, req.Now = at.UTC(), at // ReceiptOrderSkew
	}
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
	var got admission
	claim := sp.claim
	if sr != nil {
		err = e.admitShared(sr, m, v, r, req, &got)
	} else {
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
			got.facts = v.Measured(rec)
			got.d = contract.CheckCall(m, a, got.facts, got.bs, req)
			acct, err := tx.Account(r.Payer)
			if err != nil {
				return err
			}
			got.avail = acct.Available() - u.held
			return nil
		})
	}
	d := got.d
	switch {
	case errors.Is(err, errNotShared):
		return nil, &notInMemory{id: id, created: created(sr, r)}
	case err != nil:
		return nil, err
	case got.stop != nil:
		return nil, got.stop
	case d.Verdict != contract.VerdictAllow || got.avail < d.WorstCase:
		return nil, &notInMemory{id: id, created: created(sr, r)}
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
	n.mh = memHold{hold: &n.hold, receipt: r, claim: claim, entry: &n.entry, facts: got.facts, req: req}
	n.rs = reservation{receipt: r, mem: &n.mh}
	return &n.rs, nil
}

// admission is what an in-memory admission found.
type admission struct {
	stop  error
	d     contract.Decision
	avail journal.Amount
	bs    contract.BudgetState
	facts contract.AgentFacts
}

// created is the time a receipt taken to the durable path keeps: its id's
// on a store several gateways share (ReceiptOrderSkew).
func created(sr *sharedRead, r *holon.Receipt) time.Time {
	if sr == nil {
		return time.Time{}
	}
	return r.Created
}

// errNotShared: resolve's read does not let the admission decide (it did
// not complete, its budget window is not the call's, or the ledger no
// longer knows what left it since the read began): the durable path does.
var errNotShared = errors.New("the admission's read cannot decide")

// admitShared is an in-memory admission on a store several gateways share:
// resolve's read sr, and the ledger since it began. The caller holds l.mu.
func (e *Engine) admitShared(sr *sharedRead, m *contract.Mandate, v *AgentVersion, r *holon.Receipt, req contract.CallRequest, got *admission) error {
	window := ""
	if w, ok := m.WindowAt(r.Created); ok {
		window = w.Key
	}
	if !sr.done || sr.bs.Window.Key != window || r.Payer != m.Issuer {
		return errNotShared
	}
	u, ok := e.led.unseenSinceLocked(sr.start, sr.n, m.ID, window, r.Payer, true)
	if !ok {
		return errNotShared
	}
	got.bs = sr.bs
	got.bs.Reserved += u.reserved
	got.bs.WindowReserved += u.windowReserved
	got.facts = v.Measured(sr.rec)
	got.d = contract.CheckCall(m, v.Manifest, got.facts, got.bs, req)
	got.avail = sr.acct.Available() - u.held
	return nil
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
	var denied *denial
	err := e.store.Update(ctx, func(tx holon.Tx) error {
		denied = nil
		if e.recheck {
			var err error
			if denied, err = e.recheckTx(tx, st); err != nil || denied != nil {
				return err
			}
		}
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
	if denied != nil {
		// Another gateway spent the money: the reservation stays in
		// memory, and the settlement denies the call (recheck).
		return holon.Errorf(denied.code, "%s", denied.msg)
	}
	st.mem = nil
	e.led.leave(mh.entry)
	return nil
}
