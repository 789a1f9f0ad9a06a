package pg

import (
	"fmt"

	"holon.dev/holon/journal"
)

// RefundRecord takes a refund off an agent version's record: its billed
// goes down by amount, never below zero; its runs stay counted.
func (t *Tx) RefundRecord(agent string, amount journal.Amount) error {
	defer t.inside()()
	if amount < 0 {
		return fmt.Errorf("refund of %s off the record of %s: want 0 or more", amount, agent)
	}
	rec, err := t.Record(agent)
	if err != nil {
		return err
	}
	if rec.Billed < amount {
		return fmt.Errorf("refund of %s off the record of %s, which billed %s", amount, agent, rec.Billed)
	}
	if err := t.execTouching([]string{kRecord(agent)}, `UPDATE agent_records SET billed = billed - $2 WHERE agent = $1`, agent, Numeric(amount)); err != nil {
		return err
	}
	t.forget(kRecord(agent)) // the database computed it
	return nil
}
