package pg

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"holon.dev/holon"
	"holon.dev/holon/backup/pgserver"
	"holon.dev/holon/backup/pgtest"
)

// BenchmarkWriterTurns measures, on PostgreSQL with its durable defaults,
// what three writers' groups cost the database in the store's design and
// in one whose turns overlap, the statements as the store sends them: a
// group of 20 settled calls (their receipts, journal entries and lines,
// events, rollup additions, the counters, the budget, three balances,
// the writers' log). "lock" is the store's: REPEATABLE READ, the writers'
// lock and the log read in a round trip of their own, then the writes and
// the COMMIT (lock-one-trip sends all in one). "overlapping" is the
// design the store does not have: READ COMMITTED, no writers' lock, each
// writer its own chain of entries and its own ids, the hot rows changed
// by a delta in the last statements, so that a group waits for another
// only on those rows, from its update to the other's COMMIT. No gateway
// runs: the figure is the database's side of a turn, what the one lock
// costs on this machine. Overlapping, the budget and the balances are
// changed with their guards in SQL (within the total, never below zero),
// which the store's writer checks on the rows it knows.
func BenchmarkWriterTurns(b *testing.B) {
	ctx := context.Background()
	url, c0 := benchDB(b, "bench_turns")
	var ws []*turnWriter
	for i := range 3 {
		c, err := pgx.Connect(ctx, url)
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close(ctx)
		ws = append(ws, &turnWriter{c: c, id: int64(i + 1)})
	}
	var gen atomic.Int64
	for _, mode := range []turnMode{lockTwoTrips, lockOneTrip, overlapping} {
		b.Run(mode.String(), func(b *testing.B) {
			var left atomic.Int64
			left.Store(int64(b.N))
			var wg sync.WaitGroup
			errs := make(chan error, len(ws))
			start := time.Now()
			for _, w := range ws {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for left.Add(-1) >= 0 {
						if err := w.group(ctx, mode, &gen); err != nil {
							errs <- err
							return
						}
					}
				}()
			}
			wg.Wait()
			elapsed := time.Since(start)
			close(errs)
			for err := range errs {
				b.Fatal(err)
			}
			b.ReportMetric(float64(b.N*turnCalls)/elapsed.Seconds(), "calls/s")
			if _, err := c0.Exec(ctx, `DELETE FROM writer_log WHERE gen <= $1 OR gen < 0`, gen.Load()-logKeep); err != nil {
				b.Fatal(err)
			}
		})
	}
}

// benchDB starts PostgreSQL with its durable defaults, creates database
// name with the store's schema, and returns its URL and a connection to
// it (closed when b ends), with the rows a settled call moves: the
// payer's, the platform's and the author's accounts, the mandate's
// budget, the counters.
func benchDB(b *testing.B, name string) (string, *pgx.Conn) {
	url := pgtest.StartWith(b, pgserver.Options{Durable: true}).CreateDB(b, name)
	ctx := context.Background()
	s, err := Open(ctx, url, holon.StoreOptions{})
	if err != nil {
		b.Fatal(err)
	}
	s.Close()
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close(context.Background()) })
	for _, q := range []string{
		`INSERT INTO accounts (name, balance, held) VALUES ('payer', 1000000, 0), ('platform', 0, 0), ('author', 0, 0)`,
		`INSERT INTO budgets (mandate, spent, reserved) VALUES ('m', 0, 0)`,
		`INSERT INTO counters (name, value) VALUES ('receipts', 0), ('journal_entries', 0)`,
	} {
		if _, err := c.Exec(ctx, q); err != nil {
			b.Fatal(err)
		}
	}
	return url, c
}

// turnCalls is how many settled calls a group of BenchmarkWriterTurns
// holds: a gateway's third of 64 clients.
const turnCalls = 20

type turnMode int

const (
	lockTwoTrips turnMode = iota
	lockOneTrip
	overlapping
)

func (m turnMode) String() string {
	return [...]string{"lock", "lock-one-trip", "overlapping"}[m]
}

// turnWriter is one writer of BenchmarkWriterTurns, on its connection:
// its ids and entries numbered in a range of its own.
type turnWriter struct {
	c    *pgx.Conn
	id   int64
	k    int64
	prev string
	gen  int64
}

// settled is the rows of n settled calls: their receipts, journal
// entries (extending the writer's chain), lines and call events, each
// receipt 3.00 paid by payer under mandate m, split between the platform
// and the author; and their receipts' ids.
func (w *turnWriter) settled(n int) (rec, ent, line, ev [][]any, ids []string) {
	now := time.Now().UTC().Format(time.RFC3339Nano)
	for range n {
		w.k++
		num := w.id*1_000_000_000_000 + w.k
		id := fmt.Sprintf("r%d", num)
		splits := `[{"to": "platform", "amount": "0.000001"}, {"to": "author", "amount": "0.000002"}]`
		rec = append(rec, []any{id, num, (*string)(nil), "m", "payer", "acme/a@1.0.0", "succeeded", (*string)(nil), (*string)(nil), (*int64)(nil),
			"EUR", "payer", (*string)(nil), true, int64(3), int64(0), int64(3), &splits, (*string)(nil), int64(5), now})
		hash := fmt.Sprintf("h%d", num)
		ent = append(ent, []any{num, "settle:" + id, now, w.prev, hash})
		w.prev = hash
		line = append(line, []any{num, int64(1), "payer", int64(-3)}, []any{num, int64(2), "platform", int64(1)}, []any{num, int64(3), "author", int64(2)})
		ev = append(ev, []any{num, id, "acme/a@1.0.0", "succeeded", (*string)(nil), int64(5), int64(3), "EUR", false, now})
		ids = append(ids, id)
	}
	return rec, ent, line, ev, ids
}

// group commits one group of turnCalls settled calls in mode.
func (w *turnWriter) group(ctx context.Context, mode turnMode, gen *atomic.Int64) error {
	b := &pgx.Batch{}
	if mode == overlapping {
		b.Queue(`BEGIN ISOLATION LEVEL READ COMMITTED`)
	} else {
		b.Queue(`BEGIN ISOLATION LEVEL REPEATABLE READ`)
		b.Queue(`LOCK TABLE writer_log IN EXCLUSIVE MODE`)
		b.Queue(`SELECT gen, keys, vals FROM writer_log WHERE gen > $1 ORDER BY gen`, w.gen)
		if mode == lockTwoTrips {
			if err := w.c.SendBatch(ctx, b).Close(); err != nil {
				return err
			}
			b = &pgx.Batch{}
		}
	}
	rec, ent, line, ev, ids := w.settled(turnCalls)
	var keys []string
	var vals []*string
	for _, id := range ids {
		for _, k := range []string{kReceipt(id), kEntry("settle:" + id)} {
			v := `{}`
			keys, vals = append(keys, k), append(vals, &v)
		}
	}
	b.Queue(rowSQL[rowReceiptNew], columns(rec)...)
	b.Queue(rowSQL[rowEntry], columns(ent)...)
	b.Queue(rowSQL[rowLine], columns(line)...)
	b.Queue(rowSQL[rowEvent], columns(ev)...)
	b.Queue(rollupDeltaSQL, []string{"spend", "spend", "spend", "earn"}, []string{"payer", "payer", "payer", "author"},
		[]string{"day", "mandate", "agent", "day"}, []int32{1, 1, 1, 1}, []string{"", "m", "acme/a", ""}, []string{"EUR", "EUR", "EUR", "EUR"},
		[]int64{turnCalls, turnCalls, turnCalls, turnCalls}, []int64{3 * turnCalls, 3 * turnCalls, 3 * turnCalls, 2 * turnCalls}, []int64{0, 0, 0, 0})
	b.Queue(`UPDATE counters SET value = value + $1 WHERE name IN ('receipts', 'journal_entries')`, int64(turnCalls))
	guards := map[int]string{} // a guarded statement's index: the tag it must answer
	if mode == overlapping {
		guards[b.Len()], guards[b.Len()+1] = "UPDATE 1", "UPDATE 3"
		// Guarded, as a design without the writers' cache must: the
		// budget within its total, no balance below zero (the store's
		// writer checks both on the rows it knows, under the lock).
		b.Queue(`UPDATE budgets SET spent = spent + $1 / 1000000.0 WHERE mandate = 'm' AND spent + reserved + $1 / 1000000.0 <= $2`,
			int64(3*turnCalls), int64(1e12))
		b.Queue(`UPDATE accounts AS a SET balance = a.balance + x.d / 1000000.0 FROM unnest($1::text[], $2::bigint[]) AS x (n, d)
			WHERE a.name = x.n AND a.balance - a.held + x.d / 1000000.0 >= 0`,
			[]string{"author", "payer", "platform"}, []int64{2 * turnCalls, -3 * turnCalls, turnCalls})
	} else {
		b.Queue(`UPDATE budgets SET spent = spent + $1 / 1000000.0 WHERE mandate = 'm'`, int64(3*turnCalls))
		b.Queue(`UPDATE accounts AS a SET balance = a.balance + x.d / 1000000.0 FROM unnest($1::text[], $2::bigint[]) AS x (n, d) WHERE a.name = x.n`,
			[]string{"author", "payer", "platform"}, []int64{2 * turnCalls, -3 * turnCalls, turnCalls})
	}
	g := gen.Add(1)
	if mode == overlapping {
		g = -g // no order of groups: a log of its own would be needed
	} else {
		w.gen = g
	}
	b.Queue(`INSERT INTO writer_log (gen, keys, vals) VALUES ($1, $2, $3)`, g, keys, vals)
	b.Queue(`COMMIT`)
	br := w.c.SendBatch(ctx, b)
	for i := range b.Len() {
		tag, err := br.Exec()
		if want, ok := guards[i]; ok && err == nil && tag.String() != want {
			err = fmt.Errorf("a guard refused a group: %s, want %s", tag, want)
		}
		if err != nil {
			br.Close()
			w.c.Exec(ctx, `ROLLBACK`)
			return err
		}
	}
	return br.Close()
}
