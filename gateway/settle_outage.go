package gateway

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"holon.dev/holon"
	"holon.dev/holon/gateway/contract"
)

// A call's settlement is its one write after its agent ran. On a store
// that can be unreachable for a while (PostgreSQL restarting), or that
// another gateway closes calls in (its lease lapsed), the settlement can
// fail without the store being broken; what the caller is told must still
// be true:
//
//   - the store comes back within settleOutageWait: the call settles as
//     it ran, and the caller gets its receipt;
//   - the call was closed meanwhile (a gateway that found this one's lease
//     lapsed closed it gateway_restarted, unbilled; or the settlement's
//     commit landed though its answer was lost): the receipt as it is
//     closed is the answer, and nothing is billed a second time;
//   - the store stays away: the caller is answered 503 store_unavailable,
//     naming the receipt, and the call is closed failed and unbilled as
//     soon as the store is back (closeLater), by this gateway, or by the
//     others once its lease runs out if it dies first.

// settleOutageWait bounds how long a settlement waits for an unreachable
// store before its caller is answered 503.
const settleOutageWait = 5 * time.Second

// closeLaterEvery is how often a call whose settlement could not be
// stored is tried again, closed unbilled.
const closeLaterEvery = time.Second

// closeLaterFor bounds how long this gateway keeps trying to close such a
// call; past it the call is left to the others (once this gateway's lease
// runs out, or at its next start).
const closeLaterFor = time.Hour

// storeUnavailable reports whether err says the store cannot be reached
// for now (holon.CodeStoreUnavailable), as opposed to broken or refusing.
func storeUnavailable(err error) bool {
	var ge *holon.Error
	return errors.As(err, &ge) && ge.Code == holon.CodeStoreUnavailable
}

// settleFailed finishes a call whose settlement (bill) failed with err:
// see above. st's reservation is in the store, or, on a store several
// gateways share, in memory (st.mem): nothing is then stored of the call
// until a settlement commits, and the call closed later is its receipt
// written failed and unbilled.
func (e *Engine) settleFailed(ctx context.Context, st *runState, bill contract.Bill, d time.Duration, err error) (*holon.Receipt, error) {
	ctx = context.WithoutCancel(ctx)
	if storeUnavailable(err) {
		wait := 50 * time.Millisecond
		for end := time.Now().Add(settleOutageWait); storeUnavailable(err) && time.Now().Before(end); wait = min(2*wait, time.Second) {
			time.Sleep(wait)
			var r *holon.Receipt
			if r, err = e.settleOrRead(ctx, st, bill, d); err == nil {
				return r, nil
			}
		}
		if storeUnavailable(err) {
			go e.closeLater(st, d)
			return nil, outage(st.rid, err)
		}
	}
	if r, ok := e.closedElsewhere(st.rid); ok {
		return r, nil
	}
	e.log.Error("settlement failed; releasing the hold", "receipt", st.rid, "err", err)
	failed := contract.Bill{Status: holon.StatusFailed, Error: holon.CodeGatewayError}
	r, err := e.settleOrRead(ctx, st, failed, d)
	switch {
	case err == nil:
		return r, nil
	case storeUnavailable(err):
		go e.closeLater(st, d)
		return nil, outage(st.rid, err)
	}
	e.fail(fmt.Errorf("release hold of %s: %w", st.rid, err))
	return nil, err
}

// settleOrRead settles the call as bill says, in one transaction, unless
// it is closed already: then it returns its receipt as it was closed.
func (e *Engine) settleOrRead(ctx context.Context, st *runState, bill contract.Bill, d time.Duration) (*holon.Receipt, error) {
	var r *holon.Receipt
	err := e.store.Update(ctx, func(tx holon.Tx) error {
		var err error
		if st.mem != nil {
			// No hold: its receipt is stored once a settlement of it
			// committed (one whose answer was lost).
			if r, err = tx.Receipt(st.rid); !errors.Is(err, holon.ErrNotFound) {
				return err
			}
		} else if _, err = tx.Hold(st.rid); errors.Is(err, holon.ErrNotFound) {
			r, err = tx.Receipt(st.rid)
			if err == nil && !ended(r) {
				err = fmt.Errorf("receipt %s is %s with no hold", st.rid, r.Status)
			}
			return err
		} else if err != nil {
			return err
		}
		r, err = e.settleTx(tx, st, bill, d)
		return err
	})
	return r, err
}

// closedElsewhere returns the receipt of a call whose hold is gone: closed
// by another gateway, or settled by a commit whose answer was lost.
func (e *Engine) closedElsewhere(rid string) (*holon.Receipt, bool) {
	var r *holon.Receipt
	err := e.store.View(func(tx holon.Tx) error {
		if _, err := tx.Hold(rid); !errors.Is(err, holon.ErrNotFound) {
			if err == nil {
				err = errors.New("held")
			}
			return err
		}
		var err error
		r, err = tx.Receipt(rid)
		return err
	})
	if err != nil || !ended(r) {
		return nil, false
	}
	return r, true
}

// ended reports whether a receipt is final.
func ended(r *holon.Receipt) bool {
	return r.Status != holon.StatusRunning && r.Status != holon.StatusPendingApproval
}

// closeLater closes, failed and unbilled, a call whose caller was answered
// 503 because the store could not be reached: as soon as it can be
// reached again.
func (e *Engine) closeLater(st *runState, d time.Duration) {
	failed := contract.Bill{Status: holon.StatusFailed, Error: holon.CodeGatewayError}
	for end := time.Now().Add(closeLaterFor); time.Now().Before(end); {
		time.Sleep(closeLaterEvery)
		r, err := e.settleOrRead(context.Background(), st, failed, d)
		if err == nil {
			e.log.Warn("closed a call whose settlement could not be stored while the store was unreachable",
				"receipt", st.rid, "status", r.Status, "billed", r.Billed)
			return
		}
		if errors.Is(err, holon.ErrClosed) {
			return // the gateway stops: the next start, or another gateway, closes it
		}
		if !storeUnavailable(err) {
			e.fail(fmt.Errorf("close %s after the store came back: %w", st.rid, err))
			return
		}
	}
	e.log.Error("gave up closing a call while the store stays unreachable: the next start, or another gateway once this one's lease runs out, closes it", "receipt", st.rid)
}

// outage is the caller's answer when a call ran but the store could not
// be reached to settle it.
func outage(rid string, err error) error {
	return &holon.Error{Code: holon.CodeStoreUnavailable, Err: err,
		Msg: fmt.Sprintf("the call ran, but the gateway's database could not be reached to settle it: "+
			"once the database is back its receipt %s says how it ended (failed and unbilled, unless the settlement "+
			"reached the database just before the connection broke); try again in a few seconds", rid)}
}

// doubts are the receipts of calls whose reservation failed with the store
// unreachable: the commit may have landed with its answer lost. The call
// never runs, so a hold under one of them is no running call's, even
// while this gateway's lease lives: closeDoubts closes it (failed
// store_unavailable, unbilled, released, its Idempotency-Key recorded as
// so ended) as soon as the store answers again, and Recover does if it
// runs first.
type doubts struct {
	mu      sync.Mutex
	ids     map[string]Claim // the call's claim, nil without a key
	closing bool             // closeDoubts runs
}

// add puts id in doubt and reports whether a closer must start.
func (d *doubts) add(id string, c Claim) (start bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.ids == nil {
		d.ids = map[string]Claim{}
	}
	d.ids[id] = c
	start, d.closing = !d.closing, true
	return start
}

// snapshot is the receipts in doubt now.
func (d *doubts) snapshot() map[string]Claim {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make(map[string]Claim, len(d.ids))
	for id, c := range d.ids {
		out[id] = c
	}
	return out
}

// drop forgets receipts whose doubt is resolved.
func (d *doubts) drop(ids map[string]Claim) {
	d.mu.Lock()
	for id := range ids {
		delete(d.ids, id)
	}
	d.mu.Unlock()
}

// idle reports, for the closer, whether no doubt is left (or stop says
// the closer gives up): then the closer ends, and the next add starts one.
func (d *doubts) idle(stop bool) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.ids) == 0 || stop {
		d.closing = false
		return true
	}
	return false
}

// doubt puts a call in doubt (see doubts) and starts the closer if none runs.
func (e *Engine) doubt(rid string, c Claim) {
	if e.doubtful.add(rid, c) {
		go e.closeDoubts()
	}
}

// closeDoubts closes the calls in doubt, every closeLaterEvery, until none
// is left; it gives up while the store stays unreachable for
// closeLaterFor (the next start, or another gateway once this one's lease
// runs out, closes them), and when the store closes.
func (e *Engine) closeDoubts() {
	reached := time.Now()
	for {
		time.Sleep(closeLaterEvery)
		doubtful := e.doubtful.snapshot()
		resolved := make(map[string]Claim, len(doubtful))
		var err error
		for id, c := range doubtful {
			err = e.store.Update(context.Background(), func(tx holon.Tx) error {
				h, err := tx.Hold(id)
				if errors.Is(err, holon.ErrNotFound) {
					return nil // the reservation did not land, or its call is closed already
				} else if err != nil {
					return err
				}
				return e.closeDoubtTx(tx, h, c)
			})
			if err != nil {
				break
			}
			resolved[id] = c
		}
		e.doubtful.drop(resolved)
		switch {
		case err == nil || !storeUnavailable(err):
			reached = time.Now()
		}
		if err != nil && !storeUnavailable(err) && !errors.Is(err, holon.ErrClosed) {
			e.log.Error("close a call whose reservation's answer was lost", "err", err)
		}
		if e.doubtful.idle(errors.Is(err, holon.ErrClosed) || time.Since(reached) > closeLaterFor) {
			if n := len(e.doubtful.snapshot()); n > 0 && !errors.Is(err, holon.ErrClosed) {
				e.log.Error("gave up closing calls in doubt while the store stays unreachable: the next start, or another gateway once this one's lease runs out, closes them", "calls", n)
			}
			return
		}
	}
}

// closeDoubtTx closes, in tx, the call in doubt whose hold is h: it never
// ran (its caller was answered 503), so it ends failed store_unavailable,
// unbilled, and its Idempotency-Key, if any, records that end.
func (e *Engine) closeDoubtTx(tx holon.Tx, h *holon.Hold, c Claim) error {
	r, err := e.closeHeld(tx, h, holon.CodeStoreUnavailable)
	if err != nil {
		return err
	}
	return recordClaim(tx, c, r)
}
