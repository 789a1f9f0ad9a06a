package pg

import (
	"context"
	"fmt"
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
			SELECT u.y, u.v, u.c, u.n, u.a, u.f
			FROM rollup_deltas d, unnest(d.kinds, d.owners, d.dims, d.days, d.vals, d.currencies, d.calls, d.amounts, d.refunded)
				AS u (k, o, dm, y, v, c, n, a, f)
			WHERE u.k = $1 AND u.o = $2 AND u.dm = $3 AND u.y BETWEEN $4 AND $5
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

// foldRollups leads the job rollupsFold until stop is closed, folding
// every foldEvery while it leads.
func (s *Store) foldRollups(stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-stop
		cancel()
	}()
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

// fold folds the rollups' additions into their rows, once.
func (s *Store) fold(ctx context.Context) error {
	_, err := s.pool.Exec(ctx, foldSQL)
	if err == nil {
		s.folds.Add(1)
	}
	return err
}

// Folds is how many folds of the rollups' additions this handle ran.
func (s *Store) Folds() uint64 { return s.folds.Load() }
