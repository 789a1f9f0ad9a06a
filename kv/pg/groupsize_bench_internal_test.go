package pg

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// BenchmarkGroupSize measures what a writer's group costs as its size
// changes: one writer on one connection, synchronous_commit off (so that
// the figure is the statements' work, not the disk's), a group of n
// settled calls with the settlement's statements as the store sends them
// (receipts, journal entries and lines, call events, rollup additions,
// counters, the budget's and balances' moves, the writers' log), or
// only one family of them beside BEGIN and COMMIT ("none": those alone).
// What a group costs whatever its size is paid once a group: three
// gateways' writers, each with a third of the clients, pay it three
// times as often a call as one gateway's (the manual's performance
// page).
func BenchmarkGroupSize(b *testing.B) {
	ctx := context.Background()
	_, c := benchDB(b, "bench_group_size")
	if _, err := c.Exec(ctx, `SET synchronous_commit = off`); err != nil {
		b.Fatal(err)
	}
	w := &turnWriter{c: c, id: 1}
	for _, n := range []int{1, 10, 30} {
		for _, only := range []string{"all", "receipts", "journal", "events", "rollups", "counters", "moves", "log", "none"} {
			b.Run(fmt.Sprintf("calls=%d/%s", n, only), func(b *testing.B) {
				start := time.Now()
				for range b.N {
					if err := w.sized(ctx, n, only); err != nil {
						b.Fatal(err)
					}
				}
				per := float64(time.Since(start).Microseconds()) / float64(b.N)
				b.ReportMetric(per, "µs/group")
				b.ReportMetric(per/float64(n), "µs/call")
			})
		}
	}
}

// sized commits one group of n settled calls, with the statements of
// family only ("all": every one).
func (w *turnWriter) sized(ctx context.Context, n int, only string) error {
	rec, ent, line, ev, ids := w.settled(n)
	var keys []string
	for _, id := range ids {
		keys = append(keys, kReceipt(id), kOthers)
	}
	is := func(k string) bool { return only == "all" || only == k }
	b := &pgx.Batch{}
	b.Queue(`BEGIN ISOLATION LEVEL READ COMMITTED`)
	if is("receipts") {
		b.Queue(rowSQL[rowReceiptNew], columns(rec)...)
	}
	if is("journal") {
		// An entry is checked at the commit for its lines: both or none.
		b.Queue(rowSQL[rowEntry], columns(ent)...)
		b.Queue(rowSQL[rowLine], columns(line)...)
	}
	if is("events") {
		b.Queue(rowSQL[rowEvent], columns(ev)...)
	}
	if is("rollups") {
		b.Queue(rollupDeltaSQL, []string{"spend", "spend", "spend", "earn"}, []string{"payer", "payer", "payer", "author"},
			[]string{"day", "mandate", "agent", "day"}, []int32{1, 1, 1, 1}, []string{"", "m", "acme/a", ""}, []string{"EUR", "EUR", "EUR", "EUR"},
			[]int64{int64(n), int64(n), int64(n), int64(n)}, []int64{int64(3 * n), int64(3 * n), int64(3 * n), int64(2 * n)}, []int64{0, 0, 0, 0})
	}
	if is("counters") {
		b.Queue(rowSQL[rowCounterMove], []string{"journal_entries", "receipts"}, []int64{int64(n), int64(n)}, int32(1))
	}
	if is("moves") {
		b.Queue(rowSQL[rowBudgetMove], []string{"m"}, []int64{int64(3 * n)}, []int64{0}, []*int64{nil})
		b.Queue(rowSQL[rowAccountMove], []string{"author", "payer", "platform"}, []int64{int64(2 * n), int64(-3 * n), int64(n)}, []int64{0, 0, 0}, int32(1))
	}
	if is("log") {
		b.Queue(`INSERT INTO writer_log (gen, keys, writer) VALUES (nextval('writer_log_gen'), $1, $2)`, keys, int32(1))
	}
	b.Queue(`COMMIT`)
	br := w.c.SendBatch(ctx, b)
	for range b.Len() {
		if _, err := br.Exec(); err != nil {
			br.Close()
			w.c.Exec(ctx, `ROLLBACK`)
			return err
		}
	}
	return br.Close()
}
