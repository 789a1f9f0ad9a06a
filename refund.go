package holon

import (
	"encoding/json"
	"fmt"
	"time"

	"holon.dev/holon/journal"
)

// BucketRefunds holds the refunds of billed calls: "<receipt id>/<n>", n
// counting from 1 in six digits, → Refund. A refund is a new journal
// entry, refund:<receipt id>:<n>; the call's settle entry and its receipt
// are never touched.
const BucketRefunds = "refunds"

// The refusals of a refund.
const (
	// CodeReceiptNotBilled: the receipt's call was not billed (or moved
	// no money): there is nothing to give back.
	CodeReceiptNotBilled = "receipt_not_billed"
	// CodeRefundTooLarge: more than is left to refund of the receipt.
	CodeRefundTooLarge = "refund_exceeds_receipt"
)

// Refund is money given back to the payer of a billed call, in part or in
// full, by the agent's author or the operator: each account the call paid
// gives back its part, in proportion (journal.RefundTaken).
type Refund struct {
	// ID is "<receipt id>/<n>".
	ID      string         `json:"id"`
	Receipt string         `json:"receipt"`
	Amount  journal.Amount `json:"amount"`
	Reason  string         `json:"reason"`
	// By is the account that refunded, or "operator".
	By string `json:"by"`
	// Entry is the journal entry's key, refund:<receipt id>:<n>.
	Entry string `json:"entry"`
	// Parts is what each account gave back: the receipt's splits, in
	// proportion (those that gave nothing left out).
	Parts   []journal.Share `json:"parts"`
	Created time.Time       `json:"created"`
}

// RefundKey is the key of a receipt's n-th refund in BucketRefunds.
func RefundKey(receipt string, n int) string { return fmt.Sprintf("%s/%06d", receipt, n) }

// RefundEntryKey is the journal key of a receipt's n-th refund.
func RefundEntryKey(receipt string, n int) string { return fmt.Sprintf("refund:%s:%d", receipt, n) }

// Refunds reads a receipt's refunds, oldest first.
func Refunds(tx DocsTx, receipt string) ([]*Refund, error) {
	var out []*Refund
	err := tx.ForEach(BucketRefunds, receipt+"/", func(_ string, raw json.RawMessage) (bool, error) {
		r := new(Refund)
		if err := json.Unmarshal(raw, r); err != nil {
			return false, fmt.Errorf("refund of %s: %w", receipt, err)
		}
		out = append(out, r)
		return true, nil
	})
	return out, err
}

// Refunded is what the refunds give back in all.
func Refunded(rs []*Refund) journal.Amount {
	var n journal.Amount
	for _, r := range rs {
		n += r.Amount
	}
	return n
}
