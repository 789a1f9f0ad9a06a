package pg

import (
	"fmt"
	"testing"

	"holon.dev/holon"
	"holon.dev/holon/journal"
)

// BenchmarkGroupWrites queues the writes of a group of 29 settlements,
// as the writer's updates queue them (a receipt, an entry and its three
// lines, an event, the hot rows each moves, five rollups), and renders
// them into the statements sent with the COMMIT.
func BenchmarkGroupWrites(b *testing.B) {
	s := &Store{}
	b.ReportAllocs()
	for b.Loop() {
		g := &group{s: s, conf: layer{}, rerun: -1, pending: s.pendingBuf()}
		for i := range 29 {
			t := &Tx{s: s, g: g, idx: i, l: layer{}}
			payer := fmt.Sprintf("p%02d", i)
			rid := fmt.Sprintf("r%d", 1000+i)
			must := func(err error) {
				if err != nil {
					b.Fatal(err)
				}
			}
			agent := "bench/echo@1.0.0"
			row, err := receiptRow(&holon.Receipt{ID: rid, Mandate: payer + "/bench", Caller: payer, Agent: &agent, Status: holon.StatusSucceeded, Payer: payer, Currency: "EUR"}, int64(1000+i), nil)
			must(err)
			must(t.appendRows(kReceipt(rid), rowReceiptNew, nil, row))
			must(t.writeRow(kCounter("receipts"), rowCounterMove, "receipts", int64(i)))
			must(t.writeRow(kCounter("receipts:"+payer), rowCounterMove, "receipts:"+payer, int64(i)))
			must(t.appendRows("", rowEntry, nil, []any{int64(i), "settle:" + rid, "t", "prev", "hash"}))
			must(t.appendRows("", rowLine, nil, []any{int64(i), int64(1), payer, int64(-10)}, []any{int64(i), int64(2), "holon", int64(1)}, []any{int64(i), int64(3), "bench", int64(9)}))
			for _, a := range []string{payer, "holon", "bench"} {
				must(t.writeRow(kAccount(a), rowAccountMove, a, int64(i), int64(0)))
			}
			must(t.writeRow(kMeta("journal_head"), rowMeta, "journal_head", "hash"))
			must(t.writeRow(kCounter("journal_entries"), rowCounterMove, "journal_entries", int64(i)))
			must(t.writeRow(kBudget(payer+"/bench"), rowBudgetMove, payer+"/bench", int64(10), int64(0), (*int64)(nil)))
			must(t.appendRows("", rowEvent, nil, []any{int64(i), rid, "bench/echo@1.0.0", "succeeded", (*string)(nil), int64(1), int64(10), "EUR", false, "t"}))
			must(t.writeRow(kRecord("bench/echo@1.0.0"), rowRecordMove, "bench/echo@1.0.0", int64(i), int64(i), int64(i), int64(i)))
			for _, d := range []byte{holon.ByDay, holon.ByMandate, holon.ByAgent, holon.ByKey} {
				must(t.AddRollup(holon.RollupKey{Kind: holon.RollupSpend, Owner: payer, Dim: d, Value: "v"}, "EUR", holon.Tally{Calls: 1, Amount: journal.Amount(10)}))
			}
			must(t.AddRollup(holon.RollupKey{Kind: holon.RollupEarnings, Owner: "bench", Dim: holon.ByVersion, Value: "bench/echo@1.0.0"}, "EUR", holon.Tally{Calls: 1, Amount: journal.Amount(9)}))
		}
		s.pendingHint = max(len(g.pending), s.pendingHint*7/8)
		if out := render(g.pending, true, 0); len(out) == 0 {
			b.Fatal("nothing rendered")
		}
	}
}
