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
		return judged(fmt.Errorf("refund of %s off the record of %s, which billed %s", amount, agent, rec.Billed))
	}
	// Part 0 takes it (migration 24): the database judges the sum.
	if err := t.execTouching([]string{kRecord(agent)}, `INSERT INTO agent_records AS g (agent, part, runs, succeeded, billed, duration_ms)
		VALUES ($1, 0, 0, 0, -$2::numeric, 0) ON CONFLICT (agent, part) DO UPDATE SET billed = g.billed - $2::numeric`, agent, Numeric(amount)); err != nil {
		return err
	}
	t.forget(kRecord(agent)) // the database computed it
	return nil
}
