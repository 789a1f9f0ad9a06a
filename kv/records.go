package kv

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"holon.dev/holon/journal"
)

// Receipt is what a call leaves behind (gateway.md §4, receipts.md): never
// its input or output. Every field is present on every receipt, null where
// it does not apply.
type Receipt struct {
	ID         string          `json:"id"`
	Parent     *string         `json:"parent"`
	Mandate    string          `json:"mandate"`
	Caller     string          `json:"caller"`
	Agent      *string         `json:"agent"`
	Status     string          `json:"status"`
	Error      *string         `json:"error"`
	Approval   *string         `json:"approval"`
	WorstCase  *journal.Amount `json:"worst_case"`
	Currency   string          `json:"currency"`
	Payer      string          `json:"payer"`
	SubMandate *string         `json:"sub_mandate"`
	Billed     bool            `json:"billed"`
	Cost       Cost            `json:"cost"`
	Splits     []journal.Share `json:"splits"`
	Children   []string        `json:"children"`
	DurationMS int64           `json:"duration_ms"`
	Created    time.Time       `json:"created"`
}

// Cost is what a call cost its payer: its own work, and the billed
// downstream calls made on its behalf.
type Cost struct {
	Own        journal.Amount `json:"own"`
	Downstream journal.Amount `json:"downstream"`
	Total      journal.Amount `json:"total"`
}

// ReceiptSeq turns a receipt id ("r42") into its sequence number.
func ReceiptSeq(id string) (uint64, bool) {
	if !strings.HasPrefix(id, "r") {
		return 0, false
	}
	n, err := strconv.ParseUint(id[1:], 10, 64)
	return n, err == nil && n > 0
}

// NewReceiptID reserves the next receipt id.
func (tx *Tx) NewReceiptID() (string, error) {
	n, err := tx.nextSeq(bucketReceipts)
	if err != nil {
		return "", err
	}
	return "r" + strconv.FormatUint(n, 10), nil
}

// PutReceipt writes a receipt (a new one, or the final state of one).
func (tx *Tx) PutReceipt(r *Receipt) error {
	seq, ok := ReceiptSeq(r.ID)
	if !ok {
		return fmt.Errorf("receipt id %q is not r<number>", r.ID)
	}
	key := u64(seq)
	isNew := tx.btx.Bucket(bucketReceipts).Get(key) == nil
	if err := tx.putJSON(bucketReceipts, key, r); err != nil {
		return err
	}
	if !isNew {
		return nil
	}
	if err := tx.put(tx.btx.Bucket(bucketReceiptsByMand), mandateIndexKey(r.Mandate, seq), nil); err != nil {
		return err
	}
	if _, err := tx.AddCounter("receipts", 1); err != nil {
		return err
	}
	_, err := tx.AddCounter("receipts:"+r.Mandate, 1)
	return err
}

func mandateIndexKey(mandate string, seq uint64) []byte {
	k := make([]byte, 0, len(mandate)+9)
	k = append(k, mandate...)
	k = append(k, 0)
	return binary.BigEndian.AppendUint64(k, seq)
}

// Receipt reads one receipt.
func (tx *Tx) Receipt(id string) (*Receipt, error) {
	seq, ok := ReceiptSeq(id)
	if !ok {
		return nil, ErrNotFound
	}
	r := new(Receipt)
	if err := tx.getJSON(bucketReceipts, u64(seq), r); err != nil {
		return nil, err
	}
	return r, nil
}

// ReceiptPage is one page of receipts, newest first.
type ReceiptPage struct {
	Receipts []*Receipt `json:"receipts"`
	// Next is the cursor for the following (older) page, "" at the end.
	Next string `json:"next"`
}

// Receipts lists receipts newest first, all of them or those of one mandate,
// starting before the receipt id `before` ("" for the newest), at most limit.
// It reads only the page: a cursor from the end, never a scan.
func (tx *Tx) Receipts(mandate, before string, limit int) (ReceiptPage, error) {
	var page ReceiptPage
	if limit <= 0 {
		limit = 50
	}
	var start uint64 = 1<<64 - 1
	if before != "" {
		n, ok := ReceiptSeq(before)
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
		r := new(Receipt)
		if err := tx.getJSON(bucketReceipts, u64(seq), r); err != nil {
			return false, err
		}
		page.Receipts = append(page.Receipts, r)
		return true, nil
	}
	if mandate == "" {
		c := tx.btx.Bucket(bucketReceipts).Cursor()
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
	prefix := append([]byte(mandate), 0)
	c := tx.btx.Bucket(bucketReceiptsByMand).Cursor()
	k, _ := c.Seek(mandateIndexKey(mandate, start))
	if k == nil || !bytes.Equal(k, mandateIndexKey(mandate, start)) {
		k, _ = c.Prev()
	}
	for ; k != nil && bytes.HasPrefix(k, prefix) && len(k) == len(prefix)+8; k, _ = c.Prev() {
		if more, err := add(binary.BigEndian.Uint64(k[len(prefix):])); err != nil || !more {
			return page, err
		}
	}
	return page, nil
}

// Budget is a mandate's spending: what was billed under it (and its
// sub-mandates, when the same payer paid) and what is reserved for calls in
// flight.
type Budget struct {
	Spent    journal.Amount `json:"spent"`
	Reserved journal.Amount `json:"reserved"`
}

// Budget reads a mandate's budget (zero when nothing happened under it yet).
func (tx *Tx) Budget(mandate string) (Budget, error) {
	if tx.cache != nil {
		return cachedGet(&tx.cache.budgets, mandate, func() (Budget, error) { return tx.readBudget(mandate) })
	}
	return tx.readBudget(mandate)
}

func (tx *Tx) readBudget(mandate string) (Budget, error) {
	var b Budget
	if err := tx.getJSON(bucketBudgets, []byte(mandate), &b); err != nil && !errors.Is(err, ErrNotFound) {
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
	if b.Spent, err = b.Spent.Add(spent); err != nil {
		return err
	}
	if b.Reserved, err = b.Reserved.Add(reserved); err != nil {
		return err
	}
	if b.Spent < 0 || b.Reserved < 0 {
		return fmt.Errorf("budget of %s would go below zero (spent %s, reserved %s)", mandate, b.Spent, b.Reserved)
	}
	if tx.cache != nil {
		cachedPut(tx, &tx.cache.budgets, mandate, b)
		return nil
	}
	return tx.putJSON(bucketBudgets, []byte(mandate), b)
}

// Doc is a stored document (a mandate, a manifest) with what the platform
// knows about it. The document itself is opaque JSON to the store.
type Doc struct {
	Doc     json.RawMessage `json:"doc"`
	Created time.Time       `json:"created"`
	// Published is true for an agent version listed through the API.
	Published bool `json:"published,omitempty"`
	// Yanked is set when a version stops being listed.
	Yanked string `json:"yanked,omitempty"`
	// Revoked is set when a mandate is revoked.
	Revoked bool `json:"revoked,omitempty"`
}

// PutMandate stores a mandate document under its id.
func (tx *Tx) PutMandate(id string, d Doc) error {
	return tx.putJSON(bucketMandates, []byte(id), d)
}

// Mandate reads a stored mandate document.
func (tx *Tx) Mandate(id string) (Doc, error) {
	var d Doc
	err := tx.getJSON(bucketMandates, []byte(id), &d)
	return d, err
}

// MandateEncoding returns a mandate's record as stored (its document and
// what the platform knows of it), nil when there is none. It is valid only
// during the transaction: a caller that keeps what it parsed from a mandate
// keeps a copy, and compares, to know whether the mandate changed since.
func (tx *Tx) MandateEncoding(id string) []byte {
	return tx.btx.Bucket(bucketMandates).Get([]byte(id))
}

// ForEachMandate calls fn for every stored mandate, in id order.
func (tx *Tx) ForEachMandate(fn func(id string, d Doc) error) error {
	return tx.btx.Bucket(bucketMandates).ForEach(func(k, v []byte) error {
		var d Doc
		if err := decodeValue(v, &d); err != nil {
			return err
		}
		return fn(string(k), d)
	})
}

// PutAgent stores an agent version under ns/name@version.
func (tx *Tx) PutAgent(ref string, d Doc) error {
	return tx.putJSON(bucketAgents, []byte(ref), d)
}

// Agent reads a stored agent version.
func (tx *Tx) Agent(ref string) (Doc, error) {
	var d Doc
	err := tx.getJSON(bucketAgents, []byte(ref), &d)
	return d, err
}

// ForEachAgent calls fn for every stored agent version.
func (tx *Tx) ForEachAgent(fn func(ref string, d Doc) error) error {
	return tx.btx.Bucket(bucketAgents).ForEach(func(k, v []byte) error {
		var d Doc
		if err := decodeValue(v, &d); err != nil {
			return err
		}
		return fn(string(k), d)
	})
}
