package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"sort"
	"time"

	"holon.dev/holon"
	"holon.dev/holon/gateway/contract"
	"holon.dev/holon/journal"
)

// CallInput is a request to call an agent (POST /v0/calls).
type CallInput struct {
	// Mandate is the id of the mandate the call runs under.
	Mandate string
	// Agent (ns/name[@range]) or Capability names what to call.
	Agent      string
	Capability string
	// Input is the call's input, a JSON document.
	Input json.RawMessage
	// MaxCost is the caller's ceiling, in the mandate's currency.
	MaxCost *journal.Amount
	// Approval is the id of a granted approval this call uses.
	Approval string
	// Caller is who calls; the mandate's grantee when empty.
	Caller string
	// Claim, when set, is the call's Idempotency-Key: checked and recorded
	// in the call's own transactions.
	Claim Claim
	// Key is the prefix of the API key that makes the call, for the
	// spend reports by key ("" when none).
	Key string
}

// CallResult is the answer to a call: the output on success, and the
// receipt always.
type CallResult struct {
	Output   json.RawMessage
	Receipt  *holon.Receipt
	Approval *holon.Approval
	// Message says in words why a call failed or was denied; it comes from
	// the gateway or the agent and is never stored.
	Message string
	// Alerts are the budget alerts the call's settlement, and those of
	// its downstream calls, recorded: the thresholds their charges made a
	// budget reach (alerts.go).
	Alerts []*holon.Alert
}

// callSpec is one call, at the root or delegated.
type callSpec struct {
	mandate    *contract.Mandate // nil: load mandateID
	mandateID  string
	caller     string
	agent      string
	capability string
	input      json.RawMessage
	// inValue is input decoded (checkedValue), when inDecoded.
	inValue   any
	inDecoded bool
	maxCost   *journal.Amount // mandate currency
	approval  string
	// preApproved lets a pending approval through: the human just approved
	// this exact call (approve-and-run).
	preApproved bool
	parent      *runState
	// claim is a root call's Idempotency-Key; nil for delegated calls.
	claim Claim
	// key is a root call's API key prefix (CallInput.Key).
	key string
}

// Call runs one call through the whole lifecycle: resolve, admit, check
// input, reserve, run, check output, settle, receipt. The run is detached
// from ctx's cancellation: a caller that goes away does not leave a hold
// behind, the call settles as it would have.
func (e *Engine) Call(ctx context.Context, in CallInput) (*CallResult, error) {
	if (in.Agent == "") == (in.Capability == "") {
		return nil, holon.Errorf(holon.CodeInvalidRequest, "name exactly one of agent and capability")
	}
	if in.Mandate == "" {
		return nil, holon.Errorf(holon.CodeInvalidRequest, "mandate is required")
	}
	if len(in.Input) == 0 {
		in.Input = json.RawMessage("{}")
	}
	inValue, err := checkedValue(in.Input, "input")
	if err != nil {
		return nil, err
	}
	ctx = context.WithoutCancel(ctx)
	if ex, ok := e.store.(expecter); ok {
		// Counted by the store's writer as in flight until it returns,
		// or runs an agent that is not in-process (run).
		done := ex.Expect()
		defer done()
		ctx = context.WithValue(ctx, expectKey{}, done)
	}
	return e.call(ctx, callSpec{
		mandateID:  in.Mandate,
		caller:     in.Caller,
		agent:      in.Agent,
		capability: in.Capability,
		input:      in.Input,
		inValue:    inValue,
		inDecoded:  true,
		maxCost:    in.MaxCost,
		approval:   in.Approval,
		claim:      in.Claim,
		key:        in.Key,
	})
}

// expecter is a store whose writer can be told of a caller about to
// submit an update (kv.Store.Expect), so that a commit waits a bounded
// time for it rather than go with fewer.
type expecter interface {
	Expect() (done func())
}

// expectKey is the context key of a call's done func from Expect.
type expectKey struct{}

func (e *Engine) call(ctx context.Context, sp callSpec) (res *CallResult, err error) {
	start := e.now()
	if e.onCall != nil {
		defer func() {
			if err == nil && res != nil && res.Receipt != nil {
				e.onCall(res.Receipt, e.now().Sub(start))
			}
		}()
	}
	sr := e.newSharedRead(sp)
	m, v, d, err := e.resolve(sp, sr)
	var noMandate *mandateError
	switch {
	case errors.As(err, &noMandate) && errors.Is(noMandate.err, holon.ErrNotFound):
		return e.refuse(ctx, sp, nil, nil, holon.StatusDenied, holon.CodeMandateInactive, fmt.Sprintf("no mandate %s", sp.mandateID))
	case errors.As(err, &noMandate):
		return nil, noMandate.err
	case err != nil:
		return e.refuse(ctx, sp, m, nil, holon.StatusDenied, holon.ErrorCode(err), holon.ErrorMessage(err))
	}
	if d.Verdict == contract.VerdictDeny {
		return e.refuse(ctx, sp, m, v, holon.StatusDenied, d.Reason, d.Msg)
	}
	if err := validateInput(v.Manifest.InputSchema(), sp); err != nil {
		return e.refuse(ctx, sp, m, v, holon.StatusRejected, holon.CodeRejectedInput,
			fmt.Sprintf("input does not match %s's interface.input: %v", v.Manifest.Ref(), err))
	}
	e.step(StepAdmitted, "")
	rs, err := e.reserve(ctx, m, v, sp, sr)
	if err != nil {
		return nil, err
	}
	if rs.receipt.Status != holon.StatusRunning {
		return &CallResult{Receipt: rs.receipt, Approval: rs.approval, Message: rs.msg}, nil
	}
	return e.run(ctx, m, v, sp, rs, start)
}

// validateInput checks a call's input against its agent's interface.input.
func validateInput(s *contract.Schema, sp callSpec) error {
	if sp.inDecoded {
		return s.ValidateDecoded(sp.inValue)
	}
	return s.ValidateJSON(sp.input)
}

// mandateError is a failure to load the mandate a call names, which comes
// before any other refusal.
type mandateError struct{ err error }

func (e *mandateError) Error() string { return e.err.Error() }

// resolve picks the agent version for a call: the highest listed version of
// a named agent, or the best-ranked implementer of a capability that the
// mandate allows (cost per successful run, from the measured record). It
// returns the mandate (loaded, when sp names it by id, in the same read as
// the budget and the records: a *mandateError when that fails) and the
// admission preview for the chosen version; the decisive check runs again
// when the budget is reserved. With sr (an in-memory admission on a store
// several gateways share), the same read finds what that admission needs
// (sharedRead), in the same round trip.
func (e *Engine) resolve(sp callSpec, sr *sharedRead) (*contract.Mandate, *AgentVersion, contract.Decision, error) {
	// What the read below finds, in one variable its closure takes by
	// reference (it takes nothing of sp, which would move all of it to the
	// heap), with room for the one candidate of a named agent.
	var got struct {
		m       *contract.Mandate
		budget  contract.BudgetState
		loadErr error
		one     [1]*AgentVersion
		rec     [1]holon.Record
	}
	var cands []*AgentVersion
	var candErr error
	if sp.agent != "" {
		v, err := e.registry.Resolve(sp.agent)
		candErr = err
		got.one[0] = v
		cands = got.one[:]
	} else if !contract.ValidCapability(sp.capability) {
		candErr = holon.Errorf(holon.CodeInvalidRequest, "%q is not a capability", sp.capability)
	} else if cands = e.registry.Implementers(sp.capability); len(cands) == 0 {
		candErr = holon.Errorf(holon.CodeNotFound, "no listed agent implements %s", sp.capability)
	}
	given := sp.mandate
	mandateID := sp.mandateID
	records := got.rec[:]
	if len(cands) != 1 {
		records = make([]holon.Record, len(cands))
	}
	read := func(tx holon.Tx) error {
		// From the start each time: a recent view stopped part way runs
		// again on the database.
		got.m, got.loadErr, got.budget = given, nil, contract.BudgetState{}
		if ra, ok := tx.(holon.RecordsAhead); ok && candErr == nil {
			refs := make([]string, len(cands))
			for i, v := range cands {
				refs[i] = v.Manifest.Ref()
			}
			ra.RecordsAhead(refs...)
		}
		sr.ahead(tx)
		if got.m == nil {
			if got.m, got.loadErr = e.loadMandate(tx, mandateID); got.loadErr != nil {
				return nil
			}
		}
		if candErr != nil {
			return nil
		}
		var err error
		if got.budget, err = budgetState(tx, got.m, e.now()); err != nil {
			return err
		}
		for i, v := range cands {
			if records[i], err = tx.Record(v.Manifest.Ref()); err != nil {
				return err
			}
		}
		return sr.read(tx, got.m, got.budget)
	}
	var err error
	near := false
	if sr != nil && e.recent != nil {
		// An in-memory admission's read: its settlement checks it again
		// (memory.go), so it may be a few milliseconds old.
		near, err = e.recent.ViewRecent(recentMaxAge, read)
	}
	if !near {
		err = e.store.View(read)
	}
	m, loadErr := got.m, got.loadErr
	switch {
	case loadErr != nil && err != nil:
		// The View failed: a mandate it read empty may be there, so the
		// store's error, not the mandate's absence.
		return nil, nil, contract.Decision{}, &mandateError{err: err}
	case loadErr != nil:
		return nil, nil, contract.Decision{}, &mandateError{err: loadErr}
	case err != nil && m == nil:
		return nil, nil, contract.Decision{}, &mandateError{err: err}
	case candErr != nil:
		return m, nil, contract.Decision{}, candErr
	case err != nil:
		return m, nil, contract.Decision{}, err
	}
	req := e.callRequest(m, sp)
	if len(cands) == 1 { // nothing to rank
		if sr != nil {
			sr.rec = records[0]
		}
		return m, cands[0], e.preview(m, cands[0], records[0], got.budget, req, &sp), nil
	}
	type ranked struct {
		v   *AgentVersion
		d   contract.Decision
		cps *big.Rat // cost per successful run; nil = unknown rate or never succeeded
	}
	rs := make([]ranked, len(cands))
	for i, v := range cands {
		d := e.preview(m, v, records[i], got.budget, req, &sp)
		rs[i] = ranked{v: v, d: d, cps: costPerSuccess(d.WorstCase, records[i])}
	}
	key := func(r ranked) rankKey {
		return rankKey{denied: r.d.Verdict == contract.VerdictDeny, cps: r.cps, id: r.v.Manifest.ID}
	}
	sort.SliceStable(rs, func(i, j int) bool { return compareRank(key(rs[i]), key(rs[j])) < 0 })
	if sr != nil {
		for i, v := range cands {
			if v == rs[0].v {
				sr.rec = records[i]
			}
		}
	}
	return m, rs[0].v, rs[0].d, nil
}

// preview is resolve's admission of one candidate version, with its
// measured record rec, on the budget read.
func (e *Engine) preview(m *contract.Mandate, v *AgentVersion, rec holon.Record, budget contract.BudgetState, req contract.CallRequest, sp *callSpec) contract.Decision {
	d := contract.CheckCall(m, v.Manifest, v.Measured(rec), budget, req)
	if sp.parent != nil {
		switch {
		case d.Verdict != contract.VerdictDeny:
			if err := sp.parent.fits(m, v, sp.capability, d.WorstCase); err != nil {
				d = contract.Denied(holon.ErrorCode(err), "%s", holon.ErrorMessage(err))
			}
		case d.Reason == holon.CodeNotAllowed:
			// The sub-mandate allows exactly the declared calls: a target
			// outside them is the orchestrator's omission, not the caller's
			// refusal.
			if _, err := sp.parent.manifest.Slot(v.Manifest, sp.capability, 0); err != nil {
				d = contract.Denied(holon.CodeNotDeclared, "%s", holon.ErrorMessage(err))
			}
		}
	}
	return d
}

// Measured is what admission knows of a version: its facts, with the runs
// and successes of its measured record rec (require.min_success_rate).
// Calls are admitted on it, and listings that say whether a mandate
// allows a version (CheckListing) must use it too.
func (v *AgentVersion) Measured(rec holon.Record) contract.AgentFacts {
	f := v.Facts
	f.Runs, f.Succeeded = rec.Runs, rec.Succeeded
	return f
}

// costPerSuccess ranks implementers: the call's worst case times runs over
// successful runs; an agent without a record counts as always succeeding.
func costPerSuccess(worst journal.Amount, rec holon.Record) *big.Rat {
	if rec.Runs == 0 {
		return new(big.Rat).SetInt64(int64(worst))
	}
	if rec.Succeeded == 0 {
		return nil
	}
	return new(big.Rat).SetFrac(new(big.Int).Mul(big.NewInt(int64(worst)), big.NewInt(rec.Runs)), big.NewInt(rec.Succeeded))
}

func (e *Engine) callRequest(m *contract.Mandate, sp callSpec) contract.CallRequest {
	req := contract.CallRequest{Capability: sp.capability, MaxCost: sp.maxCost, Now: e.now()}
	if sp.parent != nil {
		req.Delegated = true
		req.Account = sp.parent.account
	}
	return req
}

// newReceipt starts a receipt with every field set.
func (e *Engine) newReceipt(id string, m *contract.Mandate, sp callSpec, v *AgentVersion) *holon.Receipt {
	r := &holon.Receipt{
		ID:       id,
		Mandate:  sp.mandateID,
		Caller:   sp.caller,
		Children: []string{},
		Splits:   []journal.Share{},
		Created:  e.now().UTC(),
	}
	if m != nil {
		r.Mandate, r.Currency, r.Payer = m.ID, m.Currency, m.Issuer
		if r.Caller == "" {
			r.Caller = m.Grantee
		}
	}
	if sp.parent != nil {
		p := sp.parent.rid
		r.Parent = &p
		r.Payer = sp.parent.childPayer()
	}
	if v != nil {
		ref := v.Manifest.Ref()
		r.Agent = &ref
	}
	return r
}

// refuse writes the receipt of a call that never ran: denied, rejected
// input, or unresolvable.
func (e *Engine) refuse(ctx context.Context, sp callSpec, m *contract.Mandate, v *AgentVersion, status, code, msg string) (*CallResult, error) {
	var r *holon.Receipt
	var stop error
	dl := &durableLedger{l: e.led}
	defer dl.release()
	err := e.store.Update(ctx, func(tx holon.Tx) error {
		defer dl.unlock()
		if stop = dl.checkClaim(tx, sp.claim); stop != nil {
			return nil
		}
		dl.pend(tx, nil, sp.claim)
		id, err := tx.NewReceiptID()
		if err != nil {
			return err
		}
		r = e.newReceipt(id, m, sp, v)
		r.Status, r.Error = status, &code
		if err := linkChild(tx, sp.parent, r.ID); err != nil {
			return err
		}
		if err := tx.PutReceipt(r); err != nil {
			return err
		}
		return recordClaim(tx, sp.claim, r)
	})
	switch {
	case err != nil:
		return nil, err
	case stop != nil:
		return nil, stop
	}
	return &CallResult{Receipt: r, Message: msg}, nil
}

// reservation is what the reserve step decided and wrote.
type reservation struct {
	receipt  *holon.Receipt
	approval *holon.Approval
	sub      *contract.Mandate
	msg      string
	// commit is the reservation's durability: done already, unless the
	// call runs an in-process agent.
	commit holon.Commit
	// hold is the durable reservation's hold; mem the reservation held in
	// memory instead (memory.go), which nothing in the store knows of.
	hold *holon.Hold
	mem  *memHold
}

// reserve runs admission again on the live budget and, in the same
// transaction, writes the receipt and either a denial, a pending approval,
// or the reservation and hold of a call about to run. It returns once that
// is durable, except for a call about to run an in-process agent, which
// may start as soon as its reservation is applied (durability.go). sr is
// resolve's read for an in-memory admission on a store several gateways
// share (nil on any other).
func (e *Engine) reserve(ctx context.Context, m *contract.Mandate, v *AgentVersion, sp callSpec, sr *sharedRead) (*reservation, error) {
	a := v.Manifest
	var preID string
	var preCreated time.Time
	if e.inMemory(v, sp) && (sr != nil) == e.recheck {
		rs, err := e.reserveInMemory(ctx, m, v, sp, sr)
		if err == nil {
			e.step(StepReserveApplied, rs.receipt.ID)
			return rs, nil
		}
		var nim *notInMemory
		if !errors.As(err, &nim) {
			return nil, err
		}
		preID, preCreated = nim.id, nim.created
	}
	var rs *reservation
	req := e.callRequest(m, sp)
	dl := &durableLedger{l: e.led}
	write := func(tx holon.Tx) error {
		m := m
		if e.recheck && sp.mandate == nil {
			// The mandate as it is now: on a store several gateways
			// share, resolve may have read it a moment ago (recentMaxAge).
			fresh, err := e.loadMandate(tx, m.ID)
			if err != nil {
				return err
			}
			m = fresh
		}
		id := preID
		if id == "" {
			var err error
			if id, err = tx.NewReceiptID(); err != nil {
				return err
			}
		}
		r := e.newReceipt(id, m, sp, v)
		if !preCreated.IsZero() {
			r.Created = preCreated
		}
		rs.receipt = r
		if err := linkChild(tx, sp.parent, r.ID); err != nil {
			return err
		}
		finish := func(status, code, msg string) error {
			r.Status, r.Error, rs.msg = status, &code, msg
			return tx.PutReceipt(r)
		}
		bs, err := budgetState(tx, m, r.Created)
		if err != nil {
			return err
		}
		rec, err := tx.Record(a.Ref())
		if err != nil {
			return err
		}
		// What the transaction cannot see: the reservations held in memory.
		u := dl.unseen(tx, m.ID, bs.Window.Key, r.Payer)
		bs.Reserved += u.reserved
		bs.WindowReserved += u.windowReserved
		memHeld := u.held
		d := contract.CheckCall(m, a, v.Measured(rec), bs, req)
		if d.WorstCase > 0 || d.Verdict != contract.VerdictDeny {
			w := d.WorstCase
			r.WorstCase = &w
		}
		var appr *holon.Approval
		if sp.approval != "" && d.Verdict != contract.VerdictDeny {
			var code, msg string
			appr, code, msg = e.bindApproval(tx, sp, m, a)
			if appr == nil {
				return finish(holon.StatusDenied, code, msg)
			}
			r.Approval = &appr.ID
			d.Verdict = contract.VerdictAllow
		}
		switch d.Verdict {
		case contract.VerdictDeny:
			return finish(holon.StatusDenied, d.Reason, d.Msg)
		case contract.VerdictApprove:
			if rs.approval, err = e.newApproval(tx, r, m, a, sp, d.WorstCase); err != nil {
				return err
			}
			r.Approval = &rs.approval.ID
			r.Status = holon.StatusPendingApproval
			rs.msg = fmt.Sprintf("the worst case %s %s is above the mandate's approval threshold: approval %s is pending", d.WorstCase, m.Currency, rs.approval.ID)
			return tx.PutReceipt(r)
		}
		w := d.WorstCase
		funder := ""
		if sp.parent != nil && sp.parent.manifest.Passthrough() {
			funder = sp.parent.rid
		}
		if funder == "" {
			acct, err := tx.Account(r.Payer)
			if err != nil {
				return err
			}
			if avail := acct.Available() - memHeld; avail < w {
				return finish(holon.StatusDenied, holon.CodeInsufficientFunds,
					fmt.Sprintf("%s has %s available, the worst case is %s", r.Payer, avail, w))
			}
		}
		if len(a.Calls) > 0 {
			sub, err := contract.DeriveSubMandate(m, a, r.ID, sp.maxCost, bs.Left(m))
			if err != nil {
				return finish(holon.StatusFailed, holon.CodeGatewayError, holon.ErrorMessage(err))
			}
			raw, err := json.Marshal(sub)
			if err != nil {
				return err
			}
			if err := tx.PutMandate(sub.ID, holon.Doc{Doc: raw, Created: r.Created}); err != nil {
				return err
			}
			rs.sub = sub
			r.SubMandate = &sub.ID
		}
		hold := &holon.Hold{Receipt: r.ID, Payer: r.Payer, Mandate: m.ID, Window: bs.Window.Key, Reserved: w, Funder: funder, Started: r.Created}
		if funder == "" {
			hold.Amount = w
			if err := tx.AddHeld(r.Payer, w); err != nil {
				return err
			}
		}
		if err := tx.AddBudget(m.ID, 0, w); err != nil {
			return err
		}
		if hold.Window != "" {
			if err := tx.AddWindowBudget(m.ID, hold.Window, 0, w); err != nil {
				return err
			}
		}
		if sp.parent != nil {
			hold.Parent = sp.parent.rid
		}
		if rs.sub != nil {
			hold.SubMandate = rs.sub.ID
		}
		if err := tx.PutHold(hold); err != nil {
			return err
		}
		if appr != nil {
			now := e.now().UTC()
			appr.Status, appr.Input, appr.Run = holon.ApprovalUsed, nil, &r.ID
			if appr.Decided == nil {
				appr.Decided = &now
			}
			if err := tx.PutApproval(appr); err != nil {
				return err
			}
		}
		r.Status = holon.StatusRunning
		rs.hold = hold
		return tx.PutReceipt(r)
	}
	var stop error
	c, err := e.store.Apply(ctx, func(tx holon.Tx) error {
		defer dl.unlock()
		rs = &reservation{}
		if stop = dl.checkClaim(tx, sp.claim); stop != nil {
			return nil
		}
		if err := write(tx); err != nil {
			return err
		}
		if err := recordClaim(tx, sp.claim, rs.receipt); err != nil {
			return err
		}
		// Until this commit is durable, reads do not see it: in-memory
		// admissions count it from the ledger.
		dl.pend(tx, rs.hold, sp.claim)
		return nil
	})
	if err != nil {
		dl.release()
		if storeUnavailable(err) && rs != nil && rs.hold != nil {
			// Its commit may have landed, its answer lost: the call
			// never runs here, so its hold, if it is there, is closed
			// as soon as the store answers again.
			e.doubt(rs.receipt.ID, sp.claim)
		}
		return nil, err
	}
	return e.reserved(rs, c, stop, a.Runtime.Kind, dl)
}

// run runs a reserved call with its hard timeout, checks the output, waits
// for its children and settles.
func (e *Engine) run(ctx context.Context, m *contract.Mandate, v *AgentVersion, sp callSpec, rs *reservation, start time.Time) (*CallResult, error) {
	a := v.Manifest
	rate, _ := m.Rate(a.Currency())
	st := &runState{e: e, rid: rs.receipt.ID, manifest: a, version: v, sub: rs.sub, mandate: m, payer: rs.receipt.Payer, account: m.Issuer,
		claim: sp.claim, reserved: rs.commit, mem: rs.mem}
	st.rollup = CallRollup{Root: m.ID, Key: sp.key}
	if sp.parent != nil {
		st.account = sp.parent.account
		st.parent = sp.parent
		if st.payer == sp.parent.payer {
			st.rollup = sp.parent.rollup
		} else {
			st.rollup = CallRollup{Root: m.ID}
		}
	}
	inv := &Invocation{Manifest: a, Input: sp.input, Receipt: rs.receipt.ID, Shipped: v.Shipped, Durable: st.durable}
	if sp.maxCost != nil {
		if mc, err := journal.ConvertBackDown(*sp.maxCost, rate); err == nil {
			inv.MaxCost = &mc
		}
	}
	if rs.sub != nil {
		inv.Delegate = st
	}
	var res RunResult
	files, fres, filesOK := e.fileLinks(ctx, sp.input, st.account)
	inv.Files = files
	if !filesOK {
		res = fres
	} else if runner := e.runners[a.Runtime.Kind]; runner == nil {
		res = RunResult{Outcome: contract.Outcome{Kind: contract.OutcomeUnavailable}, Message: "no runtime for kind " + a.Runtime.Kind}
	} else {
		rctx, cancel := context.WithTimeout(ctx, time.Duration(a.Timeout())*time.Second)
		if st.mem == nil {
			// Not in-process: the store's writer is not to wait for
			// this call while it runs.
			if done, ok := ctx.Value(expectKey{}).(func()); ok {
				done()
			}
		}
		e.step(StepRun, st.rid)
		res = runner.Run(rctx, inv)
		cancel()
		e.step(StepRunReturned, st.rid)
	}
	st.finish()
	checkOutput(a, &res)
	bill := contract.DecideBilling(a, res.Outcome, sp.maxCost, rate)
	r, err := e.settle(ctx, st, bill, e.now().Sub(start))
	if err != nil {
		return nil, err
	}
	st.mu.Lock()
	out := &CallResult{Receipt: r, Message: res.Message, Alerts: append(st.childAlerts, st.alerts...)}
	st.mu.Unlock()
	if st.denied != "" {
		// Denied at settlement (recheck): the answer admission would
		// have given; the agent's output had no effect, and is dropped.
		return &CallResult{Receipt: r, Message: st.denied}, nil
	}
	if r.Status == holon.StatusSucceeded {
		out.Output = res.Output
	} else if out.Message == "" && r.Error != nil {
		out.Message = *r.Error
	}
	return out, nil
}

// linkChild adds a downstream call to its parent's tree, whatever became of
// it: refused and failed children are part of the receipt tree too.
func linkChild(tx holon.Tx, parent *runState, id string) error {
	if parent == nil {
		return nil
	}
	ph, err := tx.Hold(parent.rid)
	if err != nil {
		return fmt.Errorf("parent %s of %s: %w", parent.rid, id, err)
	}
	ph.Children = append(ph.Children, id)
	return tx.PutHold(ph)
}

// checkOutput turns an answer that is not strict JSON, or does not match
// the manifest's output schema, into invalid_output. Only strict JSON is
// validated and passed on: with a duplicate key the schema and the caller
// could read different values.
func checkOutput(a *contract.Manifest, res *RunResult) {
	if res.Outcome.Kind != contract.OutcomeOutput {
		return
	}
	if out, err := checkedValue(res.Output, "output"); err != nil {
		res.Outcome.Kind = contract.OutcomeInvalidOutput
		res.Message = fmt.Sprintf("the answer of %s is not strict JSON (RFC 7493): %v", a.Ref(), holon.ErrorMessage(err))
	} else if err := a.OutputSchema().ValidateDecoded(out); err != nil {
		res.Outcome.Kind = contract.OutcomeInvalidOutput
		res.Message = fmt.Sprintf("output does not match %s's interface.output: %v", a.Ref(), err)
	}
}
