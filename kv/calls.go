package kv

import (
	"encoding/binary"
	"encoding/json"
	"strconv"

	"holon.dev/holon"
)

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
func (tx *Tx) PutApproval(a *holon.Approval) error {
	seq, ok := holon.ApprovalSeq(a.ID)
	if !ok {
		return holon.ErrNotFound
	}
	isNew := tx.bkt(bucketApprovals).Get(u64(seq)) == nil
	if err := tx.putJSON(bucketApprovals, u64(seq), a); err != nil {
		return err
	}
	if !isNew {
		return nil
	}
	return tx.indexApproval(a, seq)
}

// Approval reads one approval.
func (tx *Tx) Approval(id string) (*holon.Approval, error) {
	seq, ok := holon.ApprovalSeq(id)
	if !ok {
		return nil, holon.ErrNotFound
	}
	a := new(holon.Approval)
	if err := tx.getJSON(bucketApprovals, u64(seq), a); err != nil {
		return nil, err
	}
	return a, nil
}

// Approvals lists approvals newest first, those for which keep returns true,
// at most limit.
func (tx *Tx) Approvals(keep func(*holon.Approval) bool, limit int) ([]*holon.Approval, error) {
	var out []*holon.Approval
	c := tx.bkt(bucketApprovals).Cursor()
	for k, v := c.Last(); k != nil && len(out) < limit; k, v = c.Prev() {
		a := new(holon.Approval)
		if err := json.Unmarshal(v, a); err != nil {
			return nil, err
		}
		if keep(a) {
			out = append(out, a)
		}
	}
	return out, nil
}

// PutHold records a call in flight.
func (tx *Tx) PutHold(h *holon.Hold) error { return tx.putJSON(bucketHolds, []byte(h.Receipt), h) }

// Hold reads the hold of a call in flight.
func (tx *Tx) Hold(receipt string) (*holon.Hold, error) {
	h := new(holon.Hold)
	if err := tx.getJSON(bucketHolds, []byte(receipt), h); err != nil {
		return nil, err
	}
	return h, nil
}

// DeleteHold forgets a settled call's hold.
func (tx *Tx) DeleteHold(receipt string) error {
	return tx.del(tx.bkt(bucketHolds), []byte(receipt))
}

// Holds lists every call in flight (few: they only exist while calls run).
func (tx *Tx) Holds() ([]*holon.Hold, error) {
	var out []*holon.Hold
	err := tx.bkt(bucketHolds).ForEach(func(k, v []byte) error {
		h := new(holon.Hold)
		if err := decodeValue(v, h); err != nil {
			return err
		}
		out = append(out, h)
		return nil
	})
	return out, err
}

// PostEvent records a finished run as AppendEvent does, without its Seq.
func (tx *Tx) PostEvent(ev holon.Event, succeeded bool) error {
	return tx.AppendEvent(&ev, succeeded)
}

// AppendEvent records a finished run and updates the agent's record.
func (tx *Tx) AppendEvent(ev *holon.Event, succeeded bool) error {
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
		cachedPut(tx, &tx.cache.records, ev.Agent, rec)
		return nil
	}
	return tx.putJSON(bucketRecords, []byte(ev.Agent), rec)
}

// Record reads an agent version's measured record.
func (tx *Tx) Record(agent string) (holon.Record, error) {
	if tx.cache != nil {
		return cachedGet(&tx.cache.records, tx.cache.hot.records, agent, func() (holon.Record, error) { return tx.readRecord(agent) })
	}
	return tx.readRecord(agent)
}

func (tx *Tx) readRecord(agent string) (holon.Record, error) {
	var r holon.Record
	if err := tx.getJSON(bucketRecords, []byte(agent), &r); err != nil && err != holon.ErrNotFound {
		return r, err
	}
	return r, nil
}

// Events lists call events newest first, before seq `before` (0 for the
// newest), at most limit.
func (tx *Tx) Events(before uint64, limit int) ([]*holon.Event, error) {
	var out []*holon.Event
	c := tx.bkt(bucketEvents).Cursor()
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
		ev := new(holon.Event)
		if err := json.Unmarshal(v, ev); err != nil {
			return nil, err
		}
		out = append(out, ev)
	}
	return out, nil
}
