package gateway

import "holon.dev/holon"

// This file holds how the lifecycle keeps the durability rule (README
// "Durability"): a call's state is durable before any effect leaves the
// process (a request to a remote agent, an approval a human will see) and
// before the caller is answered; nothing else waits for an fsync.
//
// The reservation is written with holon.Store.Apply. A call to an in-process
// agent runs as soon as the reservation is applied: if the process dies
// before that commit, the call leaves no trace anywhere, and its
// settlement, which the caller waits for, is in the same commit or a later
// one. Every other outcome of the reservation step (a remote agent about to
// be sent the request, a pending approval, a refusal to answer) waits for
// the commit first. Settlements wait for theirs.

// Steps of a call's lifecycle, in order, as told to Config.OnStep.
const (
	// StepAdmitted: resolved, admitted and its input checked; nothing written.
	StepAdmitted = "admitted"
	// StepReserveApplied: the receipt and reservation are applied in the
	// write transaction, not yet committed.
	StepReserveApplied = "reserve-applied"
	// StepReserveDurable: the reservation is committed and fsynced (for a
	// call to an in-process agent, this step is not waited for: it is told
	// when the agent has returned, by which time the commit has long ended).
	StepReserveDurable = "reserve-durable"
	// StepRun: the runner is about to run the agent (for a remote agent:
	// to send the request).
	StepRun = "run"
	// StepRunReturned: the runner returned (the remote agent's answer was
	// received).
	StepRunReturned = "run-returned"
	// StepSettleApplied: the settlement is applied, not yet committed.
	StepSettleApplied = "settle-applied"
	// StepSettleDenied: just before StepSettleApplied, when the
	// settlement of an in-memory call on a store several gateways share
	// denied the call instead, its admission checked again (memory.go).
	StepSettleDenied = "settle-denied"
	// StepSettleDurable: the settlement is committed and fsynced; the
	// caller may be answered.
	StepSettleDurable = "settle-durable"
)

// Claim is a root call's Idempotency-Key (CallInput.Claim): it joins the
// call's own write transactions, so that an idempotent call costs no
// commit of its own.
type Claim interface {
	// Check runs first in the transaction that would write the call's
	// receipt. An error stops the call there: nothing is written, and Call
	// returns the error once that transaction is durable (so that what it
	// read of an earlier call is durable too).
	Check(tx holon.Tx) error
	// Record runs in every transaction that writes the call's receipt
	// after Check: the reservation (receipt running), or the receipt of
	// the call's end (a refusal, a pending approval, a settlement).
	Record(tx holon.Tx, r *holon.Receipt) error
	// Key names the Idempotency-Key: two claims with equal keys claim the
	// same key (its scope and the key itself).
	Key() string
	// Running is the refusal of this claim while a call that claimed the
	// same key (other) runs with no record of it in the store yet: its
	// reservation is held in memory, or not yet durable (memory.go).
	Running(other Claim) error
}

// InProcess is implemented by a Runner whose agents run inside the
// gateway's process (runtime.kind dev): a run sends nothing out, so it may
// start before its reservation is durable. Any other runner's runs wait.
type InProcess interface {
	InProcess() bool
}

// InProcess reports true: dev handlers run in the gateway's process.
func (r *DevRuntime) InProcess() bool { return true }

func (e *Engine) inProcess(kind string) bool {
	ip, ok := e.runners[kind].(InProcess)
	return ok && ip.InProcess()
}

// step tells Config.OnStep that a call reached a step.
func (e *Engine) step(name, receipt string) {
	if e.onStep != nil {
		e.onStep(name, receipt)
	}
}

// durable waits for a commit that an answer or an effect depends on; a
// failure breaks the store, and the process must stop.
func (e *Engine) durable(c holon.Commit) error {
	if err := c.Wait(); err != nil {
		e.fail(err)
		return err
	}
	return nil
}

// checkClaim runs a call's Idempotency-Key check, if it has one.
func checkClaim(tx holon.Tx, c Claim) error {
	if c == nil {
		return nil
	}
	return c.Check(tx)
}

// recordClaim records a call's receipt under its Idempotency-Key, if it
// has one.
func recordClaim(tx holon.Tx, c Claim, r *holon.Receipt) error {
	if c == nil {
		return nil
	}
	return c.Record(tx, r)
}

// reserved waits, when the rule wants it, for the reservation's commit:
// always, but for a call about to run an in-process agent.
// The ledger counts the reservation (dl) until its commit is durable.
func (e *Engine) reserved(rs *reservation, c holon.Commit, stop error, kind string, dl *durableLedger) (*reservation, error) {
	rs.commit = c
	if stop == nil {
		e.step(StepReserveApplied, rs.receipt.ID)
	}
	if stop == nil && rs.receipt.Status == holon.StatusRunning && e.inProcess(kind) {
		go func() {
			err := c.Wait()
			dl.release()
			if err == nil {
				e.step(StepReserveDurable, rs.receipt.ID)
			}
		}()
		return rs, nil
	}
	err := e.durable(c)
	dl.release()
	if err != nil {
		return nil, err
	}
	if stop != nil {
		return nil, stop
	}
	e.step(StepReserveDurable, rs.receipt.ID)
	return rs, nil
}
