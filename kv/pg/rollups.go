package pg

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

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
	// A row's value is its rollups row plus its additions not folded yet
	// (migrations/0015_rollup_deltas.sql), read in one snapshot.
	err := t.all(`SELECT day, value, currency, sum(calls)::bigint, sum(amount)::bigint, sum(refunded)::bigint FROM (
			SELECT day, value, currency, calls, (amount * 1000000)::bigint AS amount, (refunded * 1000000)::bigint AS refunded FROM rollups
			WHERE kind = $1 AND owner = $2 AND dim = $3 AND day BETWEEN $4 AND $5
			UNION ALL
			SELECT d.days[i], d.vals[i], d.currencies[i], d.calls[i], d.amounts[i], d.refunded[i]
			FROM rollup_deltas d, unnest(array_positions(d.owners, $2)) AS i
			WHERE d.kinds[i] = $1 AND d.dims[i] = $3 AND d.days[i] BETWEEN $4 AND $5
		) r GROUP BY day, value, currency ORDER BY day, value, currency`,
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
	if err := t.exec(`DELETE FROM rollup_deltas`); err != nil {
		return err
	}
	if err := t.exec(`DELETE FROM meta WHERE key = $1`, metaRollupsKept); err != nil {
		return err
	}
	t.wroteAbsent(kMeta(metaRollupsKept))
	return nil
}

// rollupsFold is the job that folds the rollups' additions into their
// rows (migrations/0015_rollup_deltas.sql), and foldEvery how often its
// leader does.
const (
	rollupsFold = "rollups_fold"
	foldEvery   = 250 * time.Millisecond
)

// foldRollups leads the job rollupsFold until ctx ends, folding every
// foldEvery while it leads.
func (s *Store) foldRollups(ctx context.Context, done chan<- struct{}) {
	defer close(done)
	s.Lead(ctx, rollupsFold, func(ctx context.Context) {
		t := time.NewTicker(s.foldEvery)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			// A fold that fails (the database away, another fold's rows
			// refused by a serialization conflict) leaves its rows to
			// the next.
			s.fold(ctx)
		}
	})
}

// fold folds the rollups' additions into their rows, once: in
// transactions of up to foldBatch rows each, it deletes rows of
// additions, sums them here by rollup row and adds the sums to rollups
// in key order, bytewise (so that two folds at once, and the SQL fold of
// a writer's addition below zero, which orders by the "C" collation, wait
// for each other rather than deadlock). A row another fold
// deleted first is left to it: the DELETE skips it once that fold
// commits. Summing here rather than in SQL (holon_fold_rollups, which a
// writer's addition below zero runs) costs the server a fifth: PostgreSQL
// unnesting and grouping the arrays took 3.8 µs of its time per addition
// in `holon bench` row [10].
func (s *Store) fold(ctx context.Context) error {
	for {
		n, err := s.foldSome(ctx)
		if err != nil {
			return err
		}
		s.folds.Add(1)
		if n < foldBatch {
			return nil
		}
	}
}

// foldBatch bounds the rows of additions one fold's transaction takes
// (about a hundred additions each), and so its memory, after a backlog.
const foldBatch = 1000

// foldSome folds up to foldBatch rows of additions and returns how many
// it deleted.
func (s *Store) foldSome(ctx context.Context) (n int, err error) {
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `DELETE FROM rollup_deltas WHERE id IN (SELECT id FROM rollup_deltas ORDER BY id LIMIT $1)
			RETURNING kinds, owners, dims, days, vals, currencies, calls, amounts, refunded`, foldBatch)
		if err != nil {
			return err
		}
		sums := map[rollupRow]holon.Tally{}
		var keys []rollupRow
		var kinds, owners, dims, vals, curs []string
		var days []int32
		var calls, amounts, refunded []int64
		for rows.Next() {
			n++
			if err := rows.Scan(&kinds, &owners, &dims, &days, &vals, &curs, &calls, &amounts, &refunded); err != nil {
				rows.Close()
				return err
			}
			for i := range kinds {
				if len(kinds[i]) != 1 || len(dims[i]) != 1 {
					rows.Close()
					return fmt.Errorf("rollup addition of kind %q, dimension %q", kinds[i], dims[i])
				}
				r := rollupRow{holon.RollupKey{Kind: kinds[i][0], Owner: owners[i], Dim: dims[i][0], Day: holon.Day(days[i]), Value: vals[i]}, curs[i]}
				t, ok := sums[r]
				if !ok {
					keys = append(keys, r)
				}
				t.Calls += calls[i]
				t.Amount += journal.Amount(amounts[i])
				t.Refunded += journal.Amount(refunded[i])
				sums[r] = t
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil || len(keys) == 0 {
			return err
		}
		slices.SortFunc(keys, func(a, b rollupRow) int {
			return cmp.Or(cmp.Compare(a.k.Kind, b.k.Kind), cmp.Compare(a.k.Owner, b.k.Owner), cmp.Compare(a.k.Dim, b.k.Dim),
				cmp.Compare(a.k.Day, b.k.Day), cmp.Compare(a.k.Value, b.k.Value), cmp.Compare(a.currency, b.currency))
		})
		_, err = tx.Exec(ctx, foldedSQL, rollupColumns(keys, sums)...)
		return err
	})
	return n, err
}

// foldedSQL adds a fold's sums, none below zero, to their rows, in the
// order given.
var foldedSQL = `INSERT INTO rollups AS r (kind, owner, dim, day, value, currency, calls, amount, refunded)
		SELECT k, o, d, y, v, c, n, a / 1000000.0, f / 1000000.0
		FROM ` + rowsOf(rollupCols) + `
		ON CONFLICT (kind, owner, dim, day, value, currency) DO UPDATE SET calls = r.calls + EXCLUDED.calls,
			amount = r.amount + EXCLUDED.amount, refunded = r.refunded + EXCLUDED.refunded`

// Folds is how many folds of the rollups' additions this handle ran.
func (s *Store) Folds() uint64 { return s.folds.Load() }
