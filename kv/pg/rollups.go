package pg

import (
	"fmt"

	"github.com/jackc/pgx/v5"
	"holon.dev/holon"
	"holon.dev/holon/journal"
)

// metaRollupsKept is the meta row that says the rollups count every
// receipt (migrations/0010_rollups.sql).
const metaRollupsKept = "rollups_kept"

// AddRollup adds d to a rollup row in currency: one statement, which the
// table's checks refuse if a sum would go below zero.
func (t *Tx) AddRollup(k holon.RollupKey, currency string, d holon.Tally) error {
	if currency == "" {
		return fmt.Errorf("rollup: no currency")
	}
	// Sent with the other rollups of its round trip, summed (rows.go).
	return t.queue(queued{roll: &rollupAdd{k: k, currency: currency, d: d}})
}

// ForEachRollup calls fn for the rows of one kind, owner and dimension
// from day from to day to, in day and value order.
func (t *Tx) ForEachRollup(kind byte, owner string, dim byte, from, to holon.Day, fn func(k holon.RollupKey, t holon.Tallies) error) error {
	type row struct {
		k   holon.RollupKey
		cur string
		x   holon.Tally
	}
	var rows []row
	err := t.all(`SELECT day, value, currency, calls, (amount * 1000000)::bigint, (refunded * 1000000)::bigint FROM rollups
		WHERE kind = $1 AND owner = $2 AND dim = $3 AND day BETWEEN $4 AND $5 ORDER BY day, value, currency`,
		[]any{string(kind), owner, string(dim), int32(from), int32(to)}, func(r pgx.Rows) error {
			x := row{k: holon.RollupKey{Kind: kind, Owner: owner, Dim: dim}}
			var day int32
			var amount, refunded int64
			if err := r.Scan(&day, &x.k.Value, &x.cur, &x.x.Calls, &amount, &refunded); err != nil {
				return err
			}
			x.k.Day, x.x.Amount, x.x.Refunded = holon.Day(day), journal.Amount(amount), journal.Amount(refunded)
			rows = append(rows, x)
			return nil
		})
	if err != nil {
		return err
	}
	for i := 0; i < len(rows); {
		k, ts := rows[i].k, holon.Tallies{}
		for ; i < len(rows) && rows[i].k == k; i++ {
			ts[rows[i].cur] = rows[i].x
		}
		if err := fn(k, ts); err != nil {
			return err
		}
	}
	return nil
}

// RollupsKept reports whether the rollups count every receipt.
func (t *Tx) RollupsKept() bool {
	_, ok := t.meta(metaRollupsKept)
	return ok
}

// MarkRollupsKept records that they do.
func (t *Tx) MarkRollupsKept() error { return t.putMeta(metaRollupsKept, "1") }

// ClearRollups deletes every row and the mark, for a rebuild.
func (t *Tx) ClearRollups() error {
	if err := t.exec(`DELETE FROM rollups`); err != nil {
		return err
	}
	if err := t.exec(`DELETE FROM meta WHERE key = $1`, metaRollupsKept); err != nil {
		return err
	}
	t.wroteAbsent(kMeta(metaRollupsKept))
	return nil
}
