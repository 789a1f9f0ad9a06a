package kv

import (
	"fmt"

	"holon.dev/holon/journal"
)

// RefundRecord takes a refund off an agent version's record: its Billed
// goes down by amount, never below zero; its runs stay counted.
func (tx *Tx) RefundRecord(agent string, amount journal.Amount) error {
	if amount < 0 {
		return fmt.Errorf("refund of %s off the record of %s: want 0 or more", amount, agent)
	}
	rec, err := tx.Record(agent)
	if err != nil {
		return err
	}
	if rec.Billed < amount {
		return fmt.Errorf("refund of %s off the record of %s, which billed %s", amount, agent, rec.Billed)
	}
	rec.Billed -= amount
	if tx.cache != nil {
		cachedPut(tx, &tx.cache.records, agent, rec)
		return nil
	}
	return tx.putJSON(bucketRecords, []byte(agent), rec)
}
