package kv

import (
	"encoding/binary"
	"encoding/json"
	"strconv"
	"strings"
	"time"

	"holon.dev/holon/journal"
)

// Approval is a call held for a human's decision (mandate.md §6), bound to
// the mandate, the exact agent version, the input's hash and max_cost.
type Approval struct {
	ID      string `json:"id"`
	Mandate string `json:"mandate"`
	Caller  string `json:"caller"`
	Agent   string `json:"agent"`
	// Capability is set when the held call asked for a capability, so that
	// approve-and-run admits it as the same capability call.
	Capability string          `json:"capability,omitempty"`
	InputHash  string          `json:"input_hash"`
	MaxCost    *journal.Amount `json:"max_cost"`
	WorstCase  journal.Amount  `json:"worst_case"`
	Currency   string          `json:"currency"`
	Receipt    string          `json:"receipt"`
	// Status is pending, granted (run: false), used, rejected or expired.
	Status  string    `json:"status"`
	Created time.Time `json:"created"`
	Expires time.Time `json:"expires"`
	// Decided is when a human approved, granted or rejected it.
	Decided *time.Time `json:"decided"`
	// Run is the receipt of the call it let through, once used.
	Run *string `json:"run"`
	// Input is kept only while the approval is pending or granted, and
	// deleted when it is used, rejected or expires.
	Input json.RawMessage `json:"input,omitempty"`
}

// Approval statuses.
const (
	ApprovalPending  = "pending"
	ApprovalGranted  = "granted"
	ApprovalUsed     = "used"
	ApprovalRejected = "rejected"
	ApprovalExpired  = "expired"
)

// ApprovalSeq turns an approval id ("a3") into its sequence number.
func ApprovalSeq(id string) (uint64, bool) {
	if !strings.HasPrefix(id, "a") {
		return 0, false
	}
	n, err := strconv.ParseUint(id[1:], 10, 64)
	return n, err == nil && n > 0
}

// NewApprovalID reserves the next approval id.
func (tx *Tx) NewApprovalID() (string, error) {
	n, err := tx.nextSeq(bucketApprovals)
	if err != nil {
		return "", err
	}
	return "a" + strconv.FormatUint(n, 10), nil
}

// PutApproval writes an approval (a new one, or its new state), and
// indexes a new one under its mandate.
func (tx *Tx) PutApproval(a *Approval) error {
	seq, ok := ApprovalSeq(a.ID)
	if !ok {
		return ErrNotFound
	}
	isNew := tx.btx.Bucket(bucketApprovals).Get(u64(seq)) == nil
	if err := tx.putJSON(bucketApprovals, u64(seq), a); err != nil {
		return err
	}
	if !isNew {
		return nil
	}
	return tx.indexApproval(a, seq)
}

// Approval reads one approval.
func (tx *Tx) Approval(id string) (*Approval, error) {
	seq, ok := ApprovalSeq(id)
	if !ok {
		return nil, ErrNotFound
	}
	a := new(Approval)
	if err := tx.getJSON(bucketApprovals, u64(seq), a); err != nil {
		return nil, err
	}
	return a, nil
}

// Approvals lists approvals newest first, those for which keep returns true,
// at most limit.
func (tx *Tx) Approvals(keep func(*Approval) bool, limit int) ([]*Approval, error) {
	var out []*Approval
	c := tx.btx.Bucket(bucketApprovals).Cursor()
	for k, v := c.Last(); k != nil && len(out) < limit; k, v = c.Prev() {
		a := new(Approval)
		if err := json.Unmarshal(v, a); err != nil {
			return nil, err
		}
		if keep(a) {
			out = append(out, a)
		}
	}
	return out, nil
}

// Hold is a call in flight: what it reserved and what it holds, so that
// settlement, or a restart, releases exactly that. It is the authoritative
// state of a running call's money.
type Hold struct {
	Receipt string `json:"receipt"`
	// Payer is the account the call's cost is taken from.
	Payer string `json:"payer"`
	// Amount is what is still held on Payer's balance by this call: the
	// worst case at the start, less what its passthrough descendants have
	// spent. Zero for a passthrough child, which draws on its parent's hold.
	Amount journal.Amount `json:"amount"`
	// Mandate is the mandate the call runs under; Reserved is what is still
	// reserved in its budget for the call.
	Mandate  string         `json:"mandate"`
	Reserved journal.Amount `json:"reserved"`
	// Funder is the receipt of the parent call whose hold and reservation
	// this call draws on (passthrough), "" for a call that holds its own.
	Funder string `json:"funder,omitempty"`
	// Parent is the parent call's receipt in the tree, for a delegated call.
	Parent string `json:"parent,omitempty"`
	// Children are the delegated calls made so far; Downstream is what the
	// same payer was billed for them (their cost.total).
	Children   []string       `json:"children,omitempty"`
	Downstream journal.Amount `json:"downstream"`
	// SubMandate is the derived mandate of an orchestrator's run.
	SubMandate string    `json:"sub_mandate,omitempty"`
	Started    time.Time `json:"started"`
}

// PutHold records a call in flight.
func (tx *Tx) PutHold(h *Hold) error { return tx.putJSON(bucketHolds, []byte(h.Receipt), h) }

// Hold reads the hold of a call in flight.
func (tx *Tx) Hold(receipt string) (*Hold, error) {
	h := new(Hold)
	if err := tx.getJSON(bucketHolds, []byte(receipt), h); err != nil {
		return nil, err
	}
	return h, nil
}

// DeleteHold forgets a settled call's hold.
func (tx *Tx) DeleteHold(receipt string) error {
	return tx.btx.Bucket(bucketHolds).Delete([]byte(receipt))
}

// Holds lists every call in flight (few: they only exist while calls run).
func (tx *Tx) Holds() ([]*Hold, error) {
	var out []*Hold
	err := tx.btx.Bucket(bucketHolds).ForEach(func(k, v []byte) error {
		h := new(Hold)
		if err := decodeValue(v, h); err != nil {
			return err
		}
		out = append(out, h)
		return nil
	})
	return out, err
}

// Event is one finished run, as the platform measures it (gateway.md §7
// "call_events"): append-only.
type Event struct {
	Seq        uint64         `json:"seq"`
	Receipt    string         `json:"receipt"`
	Agent      string         `json:"agent"`
	Status     string         `json:"status"`
	Error      string         `json:"error,omitempty"`
	DurationMS int64          `json:"duration_ms"`
	Billed     journal.Amount `json:"billed"`
	Currency   string         `json:"currency"`
	Delegated  bool           `json:"delegated"`
	Time       time.Time      `json:"time"`
}

// Record is an agent version's measured record, kept as counters from the
// events so that nobody scans the events to rank agents.
type Record struct {
	Runs       int64          `json:"runs"`
	Succeeded  int64          `json:"succeeded"`
	Billed     journal.Amount `json:"billed"`
	DurationMS int64          `json:"duration_ms"`
}

// AppendEvent records a finished run and updates the agent's record.
func (tx *Tx) AppendEvent(ev *Event, succeeded bool) error {
	seq, err := tx.nextSeq(bucketEvents)
	if err != nil {
		return err
	}
	ev.Seq = seq
	if err := tx.putJSON(bucketEvents, u64(seq), ev); err != nil {
		return err
	}
	rec, err := tx.Record(ev.Agent)
	if err != nil {
		return err
	}
	rec.Runs++
	if succeeded {
		rec.Succeeded++
	}
	rec.DurationMS += ev.DurationMS
	if rec.Billed, err = rec.Billed.Add(ev.Billed); err != nil {
		return err
	}
	if tx.cache != nil {
		cachedPut(&tx.cache.records, ev.Agent, rec)
		return nil
	}
	return tx.putJSON(bucketRecords, []byte(ev.Agent), rec)
}

// Record reads an agent version's measured record.
func (tx *Tx) Record(agent string) (Record, error) {
	if tx.cache != nil {
		return cachedGet(&tx.cache.records, agent, func() (Record, error) { return tx.readRecord(agent) })
	}
	return tx.readRecord(agent)
}

func (tx *Tx) readRecord(agent string) (Record, error) {
	var r Record
	if err := tx.getJSON(bucketRecords, []byte(agent), &r); err != nil && err != ErrNotFound {
		return r, err
	}
	return r, nil
}

// Events lists call events newest first, before seq `before` (0 for the
// newest), at most limit.
func (tx *Tx) Events(before uint64, limit int) ([]*Event, error) {
	var out []*Event
	c := tx.btx.Bucket(bucketEvents).Cursor()
	var k, v []byte
	if before == 0 {
		k, v = c.Last()
	} else {
		k, v = c.Seek(u64(before))
		if k == nil {
			k, v = c.Last()
		}
		for k != nil && binary.BigEndian.Uint64(k) >= before {
			k, v = c.Prev()
		}
	}
	for ; k != nil && len(out) < limit; k, v = c.Prev() {
		ev := new(Event)
		if err := json.Unmarshal(v, ev); err != nil {
			return nil, err
		}
		out = append(out, ev)
	}
	return out, nil
}
