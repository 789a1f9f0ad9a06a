package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"sort"
	"sync"
	"time"

	"holon.dev/holon"
	"holon.dev/holon/gateway/contract"
	"holon.dev/holon/journal"
)

// runState is a call being run: the delegation context its agent's
// downstream calls go through, and the wait for them.
type runState struct {
	e        *Engine
	rid      string
	manifest *contract.Manifest
	version  *AgentVersion
	mandate  *contract.Mandate
	sub      *contract.Mandate
	payer    string
	account  string
	// claim is the root call's Idempotency-Key (nil when none, and for a
	// delegated call); reserved is its reservation's commit.
	claim    Claim
	reserved holon.Commit
	// mem is the reservation when it is held in memory (memory.go): nil
	// once it is written to the store, and for any other call.
	mem *memHold
	// denied is why the settlement denied the call instead, its admission
	// checked again (recheck): "" when it did not.
	denied string
	// parent is the run that made this downstream call (nil at the root);
	// alerts are the budget alerts its settlement recorded (alerts.go),
	// and childAlerts those of its downstream calls' (under mu).
	parent      *runState
	alerts      []*holon.Alert
	childAlerts []*holon.Alert
	// rollup is the mandate and key the call's spend counts under
	// (rollups.go).
	rollup CallRollup

	mu       sync.Mutex
	closed   bool
	children sync.WaitGroup
}

// childPayer is who pays this run's downstream calls: its own payer under
// passthrough, the orchestrator's author under included.
func (s *runState) childPayer() string {
	if s.manifest.Passthrough() {
		return s.payer
	}
	return s.manifest.NS()
}

// fits checks a downstream candidate against the orchestrator's declared
// calls: it must match an entry, and its worst case (in the mandate's
// currency) must fit that entry's max_cost.
func (s *runState) fits(m *contract.Mandate, v *AgentVersion, capability string, worst journal.Amount) error {
	rate, ok := m.Rate(s.manifest.Currency())
	if !ok {
		return holon.Errorf(holon.CodeNoFxRate, "no fx rate for %s", s.manifest.Currency())
	}
	w, err := convertBackUp(worst, rate)
	if err != nil {
		return holon.Errorf(holon.CodeNotDeclared, "worst case out of range")
	}
	_, err = s.manifest.Slot(v.Manifest, capability, w)
	return err
}

// convertBackUp is ceil(a / r): a worst case in the mandate's currency
// expressed in the orchestrator's, never rounded in the agent's favour.
func convertBackUp(a journal.Amount, r journal.Rate) (journal.Amount, error) {
	if r <= 0 || a < 0 {
		return 0, errors.New("bad operands")
	}
	n := new(big.Int).Mul(big.NewInt(int64(a)), big.NewInt(journal.Micro))
	q, rem := new(big.Int).QuoRem(n, big.NewInt(int64(r)), new(big.Int))
	if rem.Sign() != 0 {
		q.Add(q, big.NewInt(1))
	}
	if !q.IsInt64() {
		return 0, journal.ErrOverflow
	}
	return journal.Amount(q.Int64()), nil
}

// Call makes one downstream call under the run's sub-mandate. The child
// runs detached from the parent's cancellation, with its own hard timeout:
// a parent that times out still waits for it before it settles.
func (s *runState) Call(ctx context.Context, t Target, input json.RawMessage) CallOutcome {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return CallOutcome{Status: holon.StatusDenied, Error: holon.CodeGatewayError,
			Message: fmt.Sprintf("run %s has ended: no new downstream calls", s.rid)}
	}
	s.children.Add(1)
	s.mu.Unlock()
	defer s.children.Done()
	if (t.Agent == "") == (t.Capability == "") {
		return CallOutcome{Status: holon.StatusDenied, Error: holon.CodeInvalidRequest, Message: "name exactly one of agent and capability"}
	}
	sp := callSpec{
		mandate:    s.sub,
		mandateID:  s.sub.ID,
		caller:     s.manifest.Ref(),
		agent:      t.Agent,
		capability: t.Capability,
		input:      input,
		parent:     s,
	}
	if t.MaxCost != nil {
		rate, _ := s.mandate.Rate(s.manifest.Currency())
		mc, err := journal.ConvertUp(*t.MaxCost, rate)
		if err != nil {
			return CallOutcome{Status: holon.StatusDenied, Error: holon.CodeInvalidRequest, Message: "max_cost out of range"}
		}
		sp.maxCost = &mc
	}
	res, err := s.e.call(context.WithoutCancel(ctx), sp)
	if err != nil {
		return CallOutcome{Status: holon.StatusFailed, Error: holon.CodeGatewayError, Message: err.Error()}
	}
	r := res.Receipt
	out := CallOutcome{OK: r.Status == holon.StatusSucceeded, Output: res.Output, Receipt: r.ID, Status: r.Status, Message: res.Message}
	if r.Error != nil {
		out.Error = *r.Error
	}
	return out
}

// durable waits until the run's reservation is committed and fsynced: an
// in-process agent calls it (Ctx.Durable) before any effect of its own
// leaves the process.
func (s *runState) durable() error {
	if s.mem != nil {
		return s.e.promote(context.Background(), s)
	}
	if s.reserved == nil {
		return nil
	}
	return s.e.durable(s.reserved)
}

// finish refuses new downstream calls and waits for those in flight.
func (s *runState) finish() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.children.Wait()
}

// settle charges the real cost, splits it, releases the rest of the hold
// and reservation (and passes the charge up to the calls it draws on),
// writes the final receipt and the call event, in one transaction. If that
// fails, the call is closed as gateway_error with nothing billed.
func (e *Engine) settle(ctx context.Context, st *runState, bill contract.Bill, d time.Duration) (*holon.Receipt, error) {
	var r *holon.Receipt
	if mh := st.mem; mh != nil {
		// Out of the ledger once the settlement is durable, or failed.
		defer e.led.leave(mh.entry)
	}
	c, err := e.store.Apply(ctx, func(tx holon.Tx) error {
		var err error
		r, err = e.settleTx(tx, st, bill, d)
		return err
	})
	if err == nil {
		if st.denied != "" {
			e.step(StepSettleDenied, st.rid)
		}
		e.step(StepSettleApplied, st.rid)
		if err := e.durable(c); err != nil {
			return nil, err
		}
		e.step(StepSettleDurable, st.rid)
		e.tell(st)
		return r, nil
	}
	// What the failed transaction recorded was rolled back; the paths
	// below record again what they commit.
	st.alerts = nil
	if errors.Is(err, holon.ErrBroken) {
		e.fail(err)
		return nil, err
	}
	if st.mem == nil || e.recheck {
		// The store unreachable, or the call closed by another gateway
		// (settle_outage.go); on a store several gateways share, an
		// in-memory call's settlement may meet the same outage.
		r, err := e.settleFailed(ctx, st, bill, d, err)
		if err == nil {
			e.tell(st)
		}
		return r, err
	}
	e.log.Error("settlement failed; releasing the hold", "receipt", st.rid, "err", err)
	failed := contract.Bill{Status: holon.StatusFailed, Error: holon.CodeGatewayError}
	err = e.store.Update(ctx, func(tx holon.Tx) error {
		var err error
		r, err = e.settleTx(tx, st, failed, d)
		return err
	})
	if err != nil {
		e.fail(fmt.Errorf("release hold of %s: %w", st.rid, err))
		return nil, err
	}
	return r, nil
}

// tell passes on the alerts a durable settlement recorded: to the parent
// run (the root call's answer lists them) and to OnAlerts.
func (e *Engine) tell(st *runState) {
	if len(st.alerts) == 0 {
		return
	}
	if p := st.parent; p != nil {
		p.mu.Lock()
		p.childAlerts = append(p.childAlerts, st.alerts...)
		p.mu.Unlock()
	}
	if e.onAlerts != nil {
		e.onAlerts(st.alerts)
	}
}

func (e *Engine) settleTx(tx holon.Tx, st *runState, bill contract.Bill, d time.Duration) (*holon.Receipt, error) {
	h, r, err := st.holdAndReceipt(tx)
	if err != nil {
		return nil, err
	}
	st.denied = ""
	if st.mem != nil && e.recheck {
		den, err := e.recheckTx(tx, st)
		if err != nil {
			return nil, err
		}
		if den != nil {
			return r, e.deniedTx(tx, st, r, den)
		}
	}
	var charge journal.Amount
	if bill.Billed {
		// Never above what is left of the worst case once the passthrough
		// children are paid: the own price and the cap, converted apart,
		// can round up past it by a micro-unit.
		charge = journal.Min(bill.Charge, h.Reserved)
	}
	r.Splits = []journal.Share{}
	journaled := false
	if charge > 0 {
		shares, err := journal.Split(charge, st.manifest.NS(), st.version.Chain)
		if err != nil {
			return nil, err
		}
		entry, err := journal.Settlement("settle:"+r.ID, h.Payer, shares)
		switch {
		case errors.Is(err, journal.ErrTooFewLines):
			// The payer receives every share (the platform calling its own
			// agent): nothing moves.
		case err != nil:
			return nil, err
		default:
			if err := tx.PostEntry(entry); err != nil {
				return nil, err
			}
			journaled = true
		}
		r.Splits = shares
	}
	var spent []charged
	if err := e.release(tx, h, charge, st.mem == nil, func(c charged) { spent = append(spent, c) }); err != nil {
		return nil, err
	}
	if st.alerts, err = e.alertsReached(tx, st, spent, charge); err != nil {
		return nil, err
	}
	r.Status = bill.Status
	r.Error = nil
	if bill.Error != "" {
		code := bill.Error
		r.Error = &code
	}
	r.Billed = bill.Billed
	r.Cost = holon.Cost{Own: charge, Downstream: h.Downstream}
	if r.Cost.Total, err = charge.Add(h.Downstream); err != nil {
		return nil, err
	}
	r.Children = append([]string{}, h.Children...)
	r.DurationMS = d.Milliseconds()
	if err := e.creditParent(tx, h, r); err != nil {
		return nil, err
	}
	if err := tx.PutReceipt(r); err != nil {
		return nil, err
	}
	if st.mem != nil {
		e.led.wrote(tx, st.mem.entry)
	}
	if err := e.settled(tx, st, h, r, charge, journaled); err != nil {
		return nil, err
	}
	if st.mem != nil {
		return r, nil
	}
	return r, tx.DeleteHold(h.Receipt)
}

// denial is why admission, run again at settlement (recheck), denies a
// call: the code and message the durable path's admission gives, and
// whether the receipt keeps the worst case (as it does there).
type denial struct {
	code, msg string
	worst     bool
}

// recheckTx runs an in-memory call's admission again in tx, on a store
// several gateways share: on what it was admitted on (the mandate, the
// agent's facts, the request and its time, so its budget window), against
// the budgets and the payer's balance tx sees, the committed and this
// group's state of every gateway. The call itself is not in them: its
// reservation was never stored. Nil when the call still passes; on one
// gateway alone on the store it always does (memory.go).
func (e *Engine) recheckTx(tx holon.Tx, st *runState) (*denial, error) {
	mh := st.mem
	// The mandate as it is now: another gateway may have replaced or
	// revoked it since admission read it.
	m, err := e.loadMandate(tx, st.mandate.ID)
	if err != nil {
		return nil, err
	}
	bs, err := budgetState(tx, m, mh.req.Now)
	if err != nil {
		return nil, err
	}
	d := contract.CheckCall(m, st.manifest, mh.facts, bs, mh.req)
	if d.Verdict == contract.VerdictDeny {
		return &denial{code: d.Reason, msg: d.Msg, worst: d.WorstCase > 0}, nil
	}
	acct, err := tx.Account(mh.hold.Payer)
	if err != nil {
		return nil, err
	}
	if avail, w := acct.Available(), mh.hold.Amount; avail < w {
		return &denial{code: holon.CodeInsufficientFunds, worst: true,
			msg: fmt.Sprintf("%s has %s available, the worst case is %s", mh.hold.Payer, avail, w)}, nil
	}
	return nil, nil
}

// deniedTx writes, instead of r's settlement, what the durable path
// writes when admission denies the call: its receipt denied with the
// denial's code, nothing billed, no event.
func (e *Engine) deniedTx(tx holon.Tx, st *runState, r *holon.Receipt, den *denial) error {
	code := den.code
	r.Status, r.Error = holon.StatusDenied, &code
	if !den.worst {
		r.WorstCase = nil
	}
	if err := tx.PutReceipt(r); err != nil {
		return err
	}
	e.led.wrote(tx, st.mem.entry)
	if err := recordClaim(tx, st.claim, r); err != nil {
		return err
	}
	st.denied, st.alerts = den.msg, nil
	return nil
}

// holdAndReceipt reads a run's hold and receipt: from the store, or copies
// of the in-memory reservation's (a settlement that runs twice starts from
// them again).
func (s *runState) holdAndReceipt(tx holon.Tx) (*holon.Hold, *holon.Receipt, error) {
	if mh := s.mem; mh != nil {
		h, r := *mh.hold, *mh.receipt
		return &h, &r, nil
	}
	h, err := tx.Hold(s.rid)
	if err != nil {
		return nil, nil, fmt.Errorf("hold of %s: %w", s.rid, err)
	}
	r, err := tx.Receipt(s.rid)
	if err != nil {
		return nil, nil, err
	}
	return h, r, nil
}

// settled writes what else a settlement records, in its transaction: the
// call event (and the agent's record), the version's earnings and latency
// counters (journaled: the charge moved money), and the call's
// Idempotency-Key. A
// write that must commit with the settlement, or not at all, joins here.
func (e *Engine) settled(tx holon.Tx, st *runState, h *holon.Hold, r *holon.Receipt, charge journal.Amount, journaled bool) error {
	ev := holon.Event{Receipt: r.ID, Agent: st.manifest.Ref(), Status: r.Status, DurationMS: r.DurationMS,
		Billed: charge, Currency: r.Currency, Delegated: h.Parent != "", Time: e.now().UTC()}
	if r.Error != nil {
		ev.Error = *r.Error
	}
	if err := tx.PostEvent(ev, r.Status == holon.StatusSucceeded); err != nil {
		return err
	}
	if err := countSettled(tx, st.version, r, st.rollup, charge, journaled); err != nil {
		return err
	}
	return recordClaim(tx, st.claim, r)
}

// release ends a call's hold: the charge becomes spent in its mandate and,
// for each call it draws on (passthrough), moves from that call's
// reservation and hold to spent; the rest of its own reservation and hold
// is released (stored: a hold held in memory was never in the store).
// spent, when set, is told each budget the charge was spent in.
func (e *Engine) release(tx holon.Tx, h *holon.Hold, charge journal.Amount, stored bool, spent func(charged)) error {
	reserved := -h.Reserved
	if !stored {
		reserved = 0
	}
	if err := tx.AddBudget(h.Mandate, charge, reserved); err != nil {
		return err
	}
	if h.Window != "" {
		// The window the call was reserved in pays, even once the next
		// one has begun (contract/window.go).
		if err := tx.AddWindowBudget(h.Mandate, h.Window, charge, reserved); err != nil {
			return err
		}
	}
	if h.Amount > 0 && stored {
		if err := tx.AddHeld(h.Payer, -h.Amount); err != nil {
			return err
		}
	}
	if charge == 0 {
		return nil
	}
	if spent == nil {
		spent = func(charged) {}
	}
	spent(charged{h.Mandate, h.Window})
	for f := h.Funder; f != ""; {
		fh, err := tx.Hold(f)
		if err != nil {
			return fmt.Errorf("funder %s of %s: %w", f, h.Receipt, err)
		}
		if fh.Reserved < charge {
			return fmt.Errorf("funder %s has %s reserved, %s charged below it", f, fh.Reserved, charge)
		}
		if err := tx.AddBudget(fh.Mandate, charge, -charge); err != nil {
			return err
		}
		spent(charged{fh.Mandate, fh.Window})
		if fh.Window != "" {
			if err := tx.AddWindowBudget(fh.Mandate, fh.Window, charge, -charge); err != nil {
				return err
			}
		}
		fh.Reserved -= charge
		if fh.Amount > 0 {
			if fh.Amount < charge {
				return fmt.Errorf("funder %s holds %s, %s charged below it", f, fh.Amount, charge)
			}
			fh.Amount -= charge
			if err := tx.AddHeld(fh.Payer, -charge); err != nil {
				return err
			}
		}
		if err := tx.PutHold(fh); err != nil {
			return err
		}
		f = fh.Funder
	}
	return nil
}

// creditParent adds a child's billed total to its parent's downstream cost
// when the same payer paid it.
func (e *Engine) creditParent(tx holon.Tx, h *holon.Hold, r *holon.Receipt) error {
	if h.Parent == "" || r.Cost.Total == 0 {
		return nil
	}
	ph, err := tx.Hold(h.Parent)
	if err != nil {
		return fmt.Errorf("parent %s of %s: %w", h.Parent, h.Receipt, err)
	}
	if ph.Payer != h.Payer {
		return nil
	}
	if ph.Downstream, err = ph.Downstream.Add(r.Cost.Total); err != nil {
		return err
	}
	return tx.PutHold(ph)
}

// closeHeld closes the call in flight whose hold is h, in tx: failed with
// code, never billed; its hold and reservations released, its finished
// downstream passed up to its parent when that is in flight too.
func (e *Engine) closeHeld(tx holon.Tx, h *holon.Hold, code string) (*holon.Receipt, error) {
	r, err := tx.Receipt(h.Receipt)
	if err != nil {
		return nil, err
	}
	if err := e.release(tx, h, 0, true, nil); err != nil {
		return nil, err
	}
	r.Status, r.Error, r.Billed = holon.StatusFailed, &code, false
	r.Cost = holon.Cost{Downstream: h.Downstream, Total: h.Downstream}
	r.Children = append([]string{}, h.Children...)
	r.DurationMS = e.now().Sub(h.Started).Milliseconds()
	if _, err := tx.Hold(h.Parent); h.Parent != "" && err == nil {
		if err := e.creditParent(tx, h, r); err != nil {
			return nil, err
		}
	}
	if err := tx.PutReceipt(r); err != nil {
		return nil, err
	}
	agent := ""
	if r.Agent != nil {
		agent = *r.Agent
	}
	if err := tx.PostEvent(holon.Event{Receipt: r.ID, Agent: agent, Status: r.Status, Error: code,
		DurationMS: r.DurationMS, Currency: r.Currency, Delegated: h.Parent != "", Time: e.now().UTC()}, false); err != nil {
		return nil, err
	}
	return r, tx.DeleteHold(h.Receipt)
}

// Recover closes the calls that were in flight when the gateway stopped:
// failed with gateway_restarted, never billed; holds and reservations
// released. Downstream calls that had finished stay paid. It returns how
// many calls it closed. On a store several gateways share (its
// transactions are holon.SharedTx) it closes only the calls no running
// gateway holds, and may run at any time: a call another gateway closed
// meanwhile is left alone.
func (e *Engine) Recover(ctx context.Context) (int, error) {
	// The calls in doubt as the pass starts: each is resolved by it (its
	// hold closed, or none there), unless the pass fails.
	doubtful := e.doubtful.snapshot()
	var holds []*holon.Hold
	if err := e.store.View(func(tx holon.Tx) error {
		var err error
		holds, err = tx.Holds()
		return err
	}); err != nil {
		return 0, err
	}
	// Children first: a closed child's billed downstream (its finished
	// grandchildren) is passed up to its parent, still in flight too.
	inFlight := map[string]*holon.Hold{}
	for _, h := range holds {
		inFlight[h.Receipt] = h
	}
	depth := func(h *holon.Hold) int {
		d := 0
		for p := h.Parent; p != "" && d <= len(holds); d++ {
			ph, ok := inFlight[p]
			if !ok {
				break
			}
			p = ph.Parent
		}
		return d
	}
	sort.SliceStable(holds, func(i, j int) bool { return depth(holds[i]) > depth(holds[j]) })
	closed := 0
	for _, h := range holds {
		var closes bool
		err := e.store.Update(ctx, func(tx holon.Tx) error {
			closes = false
			h, err := tx.Hold(h.Receipt)
			if errors.Is(err, holon.ErrNotFound) {
				return nil // settled or closed meanwhile
			}
			if err != nil {
				return err
			}
			if c, ok := doubtful[h.Receipt]; ok {
				closes = true // never ran: its reservation's answer was lost
				return e.closeDoubtTx(tx, h, c)
			}
			if st, ok := tx.(holon.SharedTx); ok {
				orphaned, err := st.Orphaned(h.Receipt)
				if err != nil || !orphaned {
					return err // a running gateway's call
				}
			}
			closes = true
			_, err = e.closeHeld(tx, h, holon.CodeGatewayRestarted)
			return err
		})
		if err != nil {
			return closed, fmt.Errorf("close %s after restart: %w", h.Receipt, err)
		}
		if closes {
			closed++
		}
	}
	e.doubtful.drop(doubtful)
	return closed, nil
}
