package kv

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"

	bolt "go.etcd.io/bbolt"

	"holon.dev/holon"
)

// The approvals of a mandate, newest first, without reading anyone else's:
// approvals_by_mandate holds a key (mandate, 0x00, sequence) per approval,
// written by PutApproval when the approval is new (an approval never
// changes mandate, and none is deleted). The index is derived: Export
// leaves it out, and buildApprovalIndex writes it again from the approvals
// at Open (a store from before the index) and at the end of a Restore.

// ApprovalsOf lists the approvals of the given mandates newest first, from
// the index: those before the approval id `before` ("" for the newest) that
// keep accepts, at most limit (50 when 0). It decodes at most scan
// approvals (at least limit): past that, the page ends with a Next.
func (tx *Tx) ApprovalsOf(mandates []string, before string, keep func(*holon.Approval) bool, limit, scan int) (holon.ApprovalPage, error) {
	start, err := approvalStart(before)
	if err != nil {
		return holon.ApprovalPage{}, err
	}
	idx := tx.bkt(bucketApprovalsByMand)
	if idx == nil {
		// A store from before the index, opened read-only: scan.
		return tx.ApprovalsBefore(before, func(a *holon.Approval) bool { return slices.Contains(mandates, a.Mandate) && keep(a) }, limit, scan)
	}
	var heads []*indexHead
	for i, m := range mandates {
		if slices.Contains(mandates[:i], m) {
			continue
		}
		if h := newIndexHead(idx.Cursor(), m, start); h.seq != 0 {
			heads = append(heads, h)
		}
	}
	// The mandates' newest-first runs merged: each step takes the newest
	// of their heads (a human has at most a hundred mandates).
	next := func() uint64 {
		best := -1
		for i, h := range heads {
			if h.seq != 0 && (best < 0 || h.seq > heads[best].seq) {
				best = i
			}
		}
		if best < 0 {
			return 0
		}
		seq := heads[best].seq
		heads[best].prev()
		return seq
	}
	return tx.approvalPage(next, keep, limit, scan)
}

// ApprovalsBefore lists every mandate's approvals newest first, as
// ApprovalsOf does for some.
func (tx *Tx) ApprovalsBefore(before string, keep func(*holon.Approval) bool, limit, scan int) (holon.ApprovalPage, error) {
	start, err := approvalStart(before)
	if err != nil {
		return holon.ApprovalPage{}, err
	}
	c := tx.bkt(bucketApprovals).Cursor()
	k, _ := c.Seek(u64(start))
	if k == nil || binary.BigEndian.Uint64(k) > start {
		k, _ = c.Prev()
	}
	next := func() uint64 {
		if k == nil {
			return 0
		}
		seq := binary.BigEndian.Uint64(k)
		k, _ = c.Prev()
		return seq
	}
	return tx.approvalPage(next, keep, limit, scan)
}

// approvalStart is the newest sequence a page starting before the approval
// id `before` may hold.
func approvalStart(before string) (uint64, error) {
	if before == "" {
		return 1<<64 - 1, nil
	}
	n, ok := holon.ApprovalSeq(before)
	if !ok {
		return 0, fmt.Errorf("cursor %q is not an approval id", before)
	}
	return n - 1, nil
}

// approvalPage reads the approvals next yields (sequence numbers, newest
// first, 0 at the end) into a page.
func (tx *Tx) approvalPage(next func() uint64, keep func(*holon.Approval) bool, limit, scan int) (holon.ApprovalPage, error) {
	if limit <= 0 {
		limit = 50
	}
	scan = max(scan, limit)
	var page holon.ApprovalPage
	var read int
	var last uint64
	b := tx.bkt(bucketApprovals)
	for seq := next(); seq != 0; seq = next() {
		if len(page.Approvals) == limit || read == scan {
			// There is an older one: everything up to the last one read
			// was looked at, the next page starts below it.
			page.Next = "a" + strconv.FormatUint(last, 10)
			break
		}
		v := b.Get(u64(seq))
		if v == nil {
			return page, fmt.Errorf("the approvals index names a%d, which does not exist", seq)
		}
		a := new(holon.Approval)
		if err := json.Unmarshal(v, a); err != nil {
			return page, fmt.Errorf("decode approval a%d: %w", seq, err)
		}
		read, last = read+1, seq
		if keep(a) {
			page.Approvals = append(page.Approvals, a)
		}
	}
	return page, nil
}

// indexHead walks one mandate's keys of approvals_by_mandate backwards;
// seq is the current one, 0 past the mandate's oldest.
type indexHead struct {
	c      *bolt.Cursor
	prefix []byte
	seq    uint64
}

func newIndexHead(c *bolt.Cursor, mandate string, start uint64) *indexHead {
	h := &indexHead{c: c, prefix: append([]byte(mandate), 0)}
	from := mandateIndexKey(mandate, start)
	k, _ := c.Seek(from)
	if k == nil || !bytes.Equal(k, from) {
		k, _ = c.Prev()
	}
	h.at(k)
	return h
}

func (h *indexHead) prev() {
	k, _ := h.c.Prev()
	h.at(k)
}

func (h *indexHead) at(k []byte) {
	h.seq = 0
	if k != nil && bytes.HasPrefix(k, h.prefix) && len(k) == len(h.prefix)+8 {
		h.seq = binary.BigEndian.Uint64(k[len(h.prefix):])
	}
}

// indexApproval adds a new approval to the index.
func (tx *Tx) indexApproval(a *holon.Approval, seq uint64) error {
	return tx.put(tx.bkt(bucketApprovalsByMand), mandateIndexKey(a.Mandate, seq), nil)
}

// buildApprovalIndex writes approvals_by_mandate from the approvals, in
// one transaction, replacing what it held. It runs outside the writer (at
// Open, and at the end of a Restore into its new file), so its writes are
// not in the undo log. The keys are sorted first, so
// that they go in in order, into full pages.
func buildApprovalIndex(btx *bolt.Tx) error {
	if btx.Bucket(bucketApprovalsByMand) != nil {
		if err := btx.DeleteBucket(bucketApprovalsByMand); err != nil {
			return err
		}
	}
	idx, err := btx.CreateBucket(bucketApprovalsByMand)
	if err != nil {
		return fmt.Errorf("create bucket %s: %w", bucketApprovalsByMand, err)
	}
	var keys [][]byte
	err = btx.Bucket(bucketApprovals).ForEach(func(k, v []byte) error {
		var a struct {
			Mandate string `json:"mandate"`
		}
		if len(k) != 8 {
			return fmt.Errorf("approval key %x is not a sequence number", k)
		}
		if err := json.Unmarshal(v, &a); err != nil {
			return fmt.Errorf("decode approval %x: %w", k, err)
		}
		keys = append(keys, mandateIndexKey(a.Mandate, binary.BigEndian.Uint64(k)))
		return nil
	})
	if err != nil {
		return fmt.Errorf("index the approvals: %w", err)
	}
	slices.SortFunc(keys, bytes.Compare)
	idx.FillPercent = 1.0
	for _, k := range keys {
		if err := idx.Put(k, nil); err != nil {
			return fmt.Errorf("index the approvals: %w", err)
		}
	}
	return nil
}

// ApprovalIndexed reports whether the approvals index lists approval id
// under mandate, for holon verify.
func (tx *Tx) ApprovalIndexed(mandate, id string) bool {
	seq, ok := holon.ApprovalSeq(id)
	idx := tx.bkt(bucketApprovalsByMand)
	return ok && idx != nil && idx.Get(mandateIndexKey(mandate, seq)) != nil
}

// ApprovalIndexRows is how many keys the approvals index holds, -1 when
// the store has none yet (one from before the index, opened read-only: the
// next Open writes it).
func (tx *Tx) ApprovalIndexRows() int64 {
	idx := tx.bkt(bucketApprovalsByMand)
	if idx == nil {
		return -1
	}
	return int64(idx.Stats().KeyN)
}
