package holon

import (
	"encoding/json"
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

// ReceiptPage is one page of receipts, newest first.
type ReceiptPage struct {
	Receipts []*Receipt `json:"receipts"`
	// Next is the cursor for the following (older) page, "" at the end.
	Next string `json:"next"`
}

// Budget is a mandate's spending: what was billed under it (and its
// sub-mandates, when the same payer paid) and what is reserved for calls in
// flight.
type Budget struct {
	Spent    journal.Amount `json:"spent"`
	Reserved journal.Amount `json:"reserved"`
}

// Add moves the budget's spent and reserved amounts; it refuses, changing
// nothing, a move that would leave either below zero.
func (b *Budget) Add(spent, reserved journal.Amount) error {
	s, err := b.Spent.Add(spent)
	if err != nil {
		return err
	}
	r, err := b.Reserved.Add(reserved)
	if err != nil {
		return err
	}
	if s < 0 || r < 0 {
		return fmt.Errorf("would go below zero (spent %s, reserved %s)", s, r)
	}
	b.Spent, b.Reserved = s, r
	return nil
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

// Receipt statuses (receipts.md): where a call stands or how it ended.
const (
	StatusSucceeded       = "succeeded"
	StatusFailed          = "failed"
	StatusDenied          = "denied"
	StatusPendingApproval = "pending_approval"
	StatusRejected        = "rejected"
	StatusRunning         = "running"
)
