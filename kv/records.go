package kv

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"holon.dev/holon"
	"holon.dev/holon/journal"
)

// NewReceiptID reserves the next receipt id.
func (tx *Tx) NewReceiptID() (string, error) {
	n, err := tx.nextSeq(bucketReceipts)
	if err != nil {
		return "", err
	}
	return "r" + strconv.FormatUint(n, 10), nil
}

// PutReceipt writes a receipt (a new one, or the final state of one).
func (tx *Tx) PutReceipt(r *holon.Receipt) error {
	seq, ok := holon.ReceiptSeq(r.ID)
	if !ok {
		return fmt.Errorf("receipt id %q is not r<number>", r.ID)
	}
	if !tx.writable {
		return errors.New("write in a read-only transaction")
	}
	key := u64(seq)
	b := tx.bucket(bucketReceipts)
	prev := b.Get(key)
	enc, err := tx.encode(r)
	if err != nil {
		return fmt.Errorf("encode receipt %s: %w", r.ID, err)
	}
	if err := tx.putOver(b, key, prev, enc); err != nil {
		return err
	}
	if prev != nil {
		return nil
	}
	// A new receipt's index key is new too: it is written with the
	// receipt, into the index's log (receipts_index.go).
	if err := tx.indexReceipt(r.Mandate, seq); err != nil {
		return err
	}
	if _, err := tx.AddCounter("receipts", 1); err != nil {
		return err
	}
	_, err = tx.AddCounter("receipts:"+r.Mandate, 1)
	return err
}

func mandateIndexKey(mandate string, seq uint64) []byte {
	k := make([]byte, 0, len(mandate)+9)
	k = append(k, mandate...)
	k = append(k, 0)
	return binary.BigEndian.AppendUint64(k, seq)
}

// Receipt reads one receipt.
func (tx *Tx) Receipt(id string) (*holon.Receipt, error) {
	seq, ok := holon.ReceiptSeq(id)
	if !ok {
		return nil, holon.ErrNotFound
	}
	r := new(holon.Receipt)
	if err := tx.getJSON(bucketReceipts, u64(seq), r); err != nil {
		return nil, err
	}
	return r, nil
}

// Receipts lists receipts newest first, all of them or those of one mandate,
// starting before the receipt id `before` ("" for the newest), at most limit.
// It reads only the page: a cursor from the end, never a scan.
func (tx *Tx) Receipts(mandate, before string, limit int) (holon.ReceiptPage, error) {
	var page holon.ReceiptPage
	if limit <= 0 {
		limit = 50
	}
	var start uint64 = 1<<64 - 1
	if before != "" {
		n, ok := holon.ReceiptSeq(before)
		if !ok {
			return page, fmt.Errorf("cursor %q is not a receipt id", before)
		}
		start = n - 1
	}
	add := func(seq uint64) (bool, error) {
		if len(page.Receipts) == limit {
			// There is an older one: the page has a next, read no further.
			page.Next = page.Receipts[limit-1].ID
			return false, nil
		}
		r := new(holon.Receipt)
		if err := tx.getJSON(bucketReceipts, u64(seq), r); err != nil {
			return false, err
		}
		page.Receipts = append(page.Receipts, r)
		return true, nil
	}
	if mandate == "" {
		c := tx.bkt(bucketReceipts).Cursor()
		k, _ := c.Seek(u64(start))
		if k == nil || binary.BigEndian.Uint64(k) > start {
			k, _ = c.Prev()
		}
		for ; k != nil; k, _ = c.Prev() {
			if more, err := add(binary.BigEndian.Uint64(k)); err != nil || !more {
				return page, err
			}
		}
		return page, nil
	}
	run := tx.newReceiptRun(mandate, start)
	for seq := run.next(); seq != 0; seq = run.next() {
		if more, err := add(seq); err != nil || !more {
			return page, err
		}
	}
	return page, nil
}

// Budget reads a mandate's budget (zero when nothing happened under it yet).
func (tx *Tx) Budget(mandate string) (holon.Budget, error) {
	if tx.cache != nil {
		return cachedGet(&tx.cache.budgets, tx.cache.hot.budgets, mandate, func() (holon.Budget, error) { return tx.readBudget(mandate) })
	}
	return tx.readBudget(mandate)
}

func (tx *Tx) readBudget(mandate string) (holon.Budget, error) {
	var b holon.Budget
	if err := tx.getJSON(bucketBudgets, []byte(mandate), &b); err != nil && !errors.Is(err, holon.ErrNotFound) {
		return b, err
	}
	return b, nil
}

// AddBudget moves a mandate's spent and reserved amounts; neither may go below zero.
func (tx *Tx) AddBudget(mandate string, spent, reserved journal.Amount) error {
	b, err := tx.Budget(mandate)
	if err != nil {
		return err
	}
	tx.limits.Before(holon.BudgetKey{Mandate: mandate}, b)
	if err := b.Add(spent, reserved); err != nil {
		return fmt.Errorf("budget of %s %w", mandate, err)
	}
	if tx.cache != nil {
		cachedPut(tx, &tx.cache.budgets, mandate, b)
		return nil
	}
	return tx.putJSON(bucketBudgets, []byte(mandate), b)
}

// windowKey is a budget window's key in its bucket: the mandate's id, 0x00
// and the window's key (a mandate id never holds 0x00).
func windowKey(mandate, window string) string { return mandate + "\x00" + window }

// WindowBudget reads a mandate's spending in one budget window (zero when
// nothing happened in it).
func (tx *Tx) WindowBudget(mandate, window string) (holon.Budget, error) {
	k := windowKey(mandate, window)
	read := func() (holon.Budget, error) {
		var b holon.Budget
		if err := tx.getJSON(bucketBudgetWindows, []byte(k), &b); err != nil && !errors.Is(err, holon.ErrNotFound) {
			return b, err
		}
		return b, nil
	}
	if tx.cache != nil {
		return cachedGet(&tx.cache.windows, tx.cache.hot.windows, k, read)
	}
	return read()
}

// AddWindowBudget moves a mandate's spent and reserved in one budget
// window; neither may go below zero.
func (tx *Tx) AddWindowBudget(mandate, window string, spent, reserved journal.Amount) error {
	if window == "" || strings.ContainsRune(mandate, 0) {
		return fmt.Errorf("budget window %q of %q: not a window key", window, mandate)
	}
	b, err := tx.WindowBudget(mandate, window)
	if err != nil {
		return err
	}
	tx.limits.Before(holon.BudgetKey{Mandate: mandate, Window: window}, b)
	if err := b.Add(spent, reserved); err != nil {
		return fmt.Errorf("budget of %s in %s %w", mandate, window, err)
	}
	k := windowKey(mandate, window)
	if tx.cache != nil {
		cachedPut(tx, &tx.cache.windows, k, b)
		return nil
	}
	return tx.putJSON(bucketBudgetWindows, []byte(k), b)
}

// LimitBudget declares a budget's limit for the rest of the update
// (holon.BudgetLimits).
func (tx *Tx) LimitBudget(mandate, window string, limit journal.Amount) {
	if tx.writable {
		tx.limits.Limit(holon.BudgetKey{Mandate: mandate, Window: window}, limit)
	}
}

// budgetOf reads a budget by its key.
func (tx *Tx) budgetOf(k holon.BudgetKey) (holon.Budget, error) {
	if k.Window == "" {
		return tx.Budget(k.Mandate)
	}
	return tx.WindowBudget(k.Mandate, k.Window)
}

// PutMandate stores a mandate document under its id.
func (tx *Tx) PutMandate(id string, d holon.Doc) error {
	return tx.putJSON(bucketMandates, []byte(id), d)
}

// Mandate reads a stored mandate document.
func (tx *Tx) Mandate(id string) (holon.Doc, error) {
	var d holon.Doc
	err := tx.getJSON(bucketMandates, []byte(id), &d)
	return d, err
}

// MandateRevision is holon.Tx's revision of a mandate: here, its record
// exactly as stored (the bytes change whenever the record does), nil when
// there is none. The slice is bbolt's, valid only during the transaction.
func (tx *Tx) MandateRevision(id string) []byte {
	return tx.bkt(bucketMandates).Get([]byte(id))
}

// ForEachMandate calls fn for every stored mandate, in id order.
func (tx *Tx) ForEachMandate(fn func(id string, d holon.Doc) error) error {
	return tx.bkt(bucketMandates).ForEach(func(k, v []byte) error {
		var d holon.Doc
		if err := decodeValue(v, &d); err != nil {
			return err
		}
		return fn(string(k), d)
	})
}

// PutAgent stores an agent version under ns/name@version.
func (tx *Tx) PutAgent(ref string, d holon.Doc) error {
	return tx.putJSON(bucketAgents, []byte(ref), d)
}

// Agent reads a stored agent version.
func (tx *Tx) Agent(ref string) (holon.Doc, error) {
	var d holon.Doc
	err := tx.getJSON(bucketAgents, []byte(ref), &d)
	return d, err
}

// ForEachAgent calls fn for every stored agent version.
func (tx *Tx) ForEachAgent(fn func(ref string, d holon.Doc) error) error {
	return tx.bkt(bucketAgents).ForEach(func(k, v []byte) error {
		var d holon.Doc
		if err := decodeValue(v, &d); err != nil {
			return err
		}
		return fn(string(k), d)
	})
}
