package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"holon.dev/holon"
	"holon.dev/holon/gateway"
	"holon.dev/holon/kv"
)

// Targets of the reports row.
const (
	targetReport90 = 50 * time.Millisecond
	// reportSpanDays are the days the row's receipts are spread over; the
	// report reads the last reportDays of them.
	reportSpanDays = 180
	reportDays     = 90
	reportRuns     = 21
	// The row's store: reportPayers accounts, each calling through
	// reportMandates mandates, reportAgents agent versions and reportKeys
	// keys.
	reportPayers   = 4 // openFunded's
	reportMandates = 8
	reportAgents   = 16
	reportKeys     = 8
)

// reportsRow builds a store of ReportReceipts settled calls spread over
// 180 days, their rollups written through the settlement's own rollup
// update (gateway.AddSettlementRollups) in the transactions that write
// the receipts and their settle entries, as a gateway's settlements
// would have left them; then it times a 90-day spend report of one payer
// through the engine, by day (the target) and by mandate, agent and key.
// The store is removed after the row.
func (b *bench) reportsRow(ctx context.Context) ([]*Result, error) {
	o := b.o
	name := fmt.Sprintf("[5c] a 90-day spend report by day with %s settled calls in the store", thousands(int64(o.ReportReceipts)))
	dir := filepath.Join(o.Dir, "reports")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "holon.db")
	t := time.Now()
	// The calls end with yesterday (UTC), the report's last day: ended
	// now, a report run in the first minutes of a day would find none of
	// a payer's calls on it (they are minutes apart at --quick's size).
	end := time.Now().UTC().Truncate(24 * time.Hour).Add(-time.Nanosecond)
	size, err := buildReportStore(ctx, path, o.ReportReceipts, end)
	if err != nil {
		return nil, fmt.Errorf("build the store: %w", err)
	}
	built := fmt.Sprintf("store of %s settled calls over %d days (receipts, settle entries, budgets, rollups; %s file) built in %.1fs",
		thousands(int64(o.ReportReceipts)), reportSpanDays, mb(float64(size)), time.Since(t).Seconds())
	s, err := kv.OpenStore(path, holon.StoreOptions{NoSync: true})
	if err != nil {
		return nil, err
	}
	defer s.Close()
	eng := gateway.New(gateway.Config{Store: s, Registry: gateway.NewRegistry()})
	to := holon.DayOf(end)
	from := to - reportDays + 1
	times := map[string][]time.Duration{}
	rows := map[string]int{}
	for run := range reportRuns {
		for _, by := range []string{"day", "mandate", "agent", "key"} {
			t := time.Now()
			rep, err := eng.SpendReport("m0", by, "", from, to)
			if err != nil {
				return nil, err
			}
			times[by] = append(times[by], time.Since(t))
			if run == 0 {
				rows[by] = len(rep.Rows)
				if by == "day" && len(rep.Rows) != reportDays {
					return nil, fmt.Errorf("the report by day has %d rows, want %d", len(rep.Rows), reportDays)
				}
			}
		}
	}
	med := func(by string) time.Duration { slices.Sort(times[by]); return times[by][len(times[by])/2] }
	worst := func(by string) time.Duration { return slices.Max(times[by]) }
	r := &Result{
		Name:   name,
		Target: fmt.Sprintf("≤ %s for the report by day (the median of %d; the slowest is shown)", ms(targetReport90), reportRuns),
		Measured: fmt.Sprintf("by day %s median, %s slowest (%d rows); by mandate %s, by agent %s, by key %s (medians, %d, %d and %d rows)",
			ms(med("day")), ms(worst("day")), rows["day"], ms(med("mandate")), ms(med("agent")), ms(med("key")), rows["mandate"], rows["agent"], rows["key"]),
		Notes: []string{built, "GET /v0/reports/spend's engine call (Engine.SpendReport) on the store reopened, one payer of 4 (a quarter of the calls), warm page cache"},
	}
	r.judge(med("day") <= targetReport90, "a report reads one rollup row per day and group, never the receipts: its time grows with the days and groups, not with the calls")
	return []*Result{r}, nil
}

// buildReportStore writes n settled calls spread evenly over the
// reportSpanDays days to end, over reportPayers payers, reportMandates
// mandates each, reportAgents agent versions and reportKeys keys
// (buildSettled: each with its rollups, written through the
// settlement's own update).
func buildReportStore(ctx context.Context, path string, n int, end time.Time) (int64, error) {
	start := end.Add(-reportSpanDays * 24 * time.Hour)
	step := time.Duration(int64(reportSpanDays*24*time.Hour) / int64(max(n, 1)))
	return buildSettled(ctx, path, n, func(i int) settledCall {
		payer := fmt.Sprintf("m%d", i%reportPayers)
		return settledCall{
			mandate: fmt.Sprintf("%s/bench-%d", payer, (i/reportPayers)%reportMandates),
			payer:   payer,
			agent:   fmt.Sprintf("bench/echo-%d@1.0.0", (i/7)%reportAgents),
			created: start.Add(time.Duration(i) * step),
			key:     fmt.Sprintf("hlk_a_%08d", (i/3)%reportKeys),
		}
	})
}
