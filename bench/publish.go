package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"holon.dev/holon"
	"holon.dev/holon/kv"
)

// targetPublishP99 bounds settled calls' p99 while versions are published
// beside them, as a multiple of their p99 without.
const targetPublishP99 = 1.5

// publishCapability is the capability of the versions published beside
// the calls: one with a shipped evaluation suite, so that each publish
// queues an evaluation and the evaluator runs it, as for an author's.
const publishCapability = "company.lookup"

// publishBeside measures settled calls (row 1's caller, POST /v0/calls) on
// the catalogue's gateway without, then with, versions being published
// beside them one after another through the path publishing takes
// (App.RegisterVersion → listVersion: the store record, the registry, the
// evaluation queued and run).
func (b *bench) publishBeside(ctx context.Context, g *benchGateway) (*Result, error) {
	o := b.o
	res := &Result{
		Name:   fmt.Sprintf("settled calls (POST /v0/calls, %d clients) while versions are published beside them, one after another, each evaluated", o.Clients),
		Target: fmt.Sprintf("p99 with ≤ %.1f × p99 without", targetPublishP99),
	}
	dc := newDevCaller(g.url, o.Clients)
	before, err := g.money()
	if err != nil {
		return nil, err
	}
	without, err := runLoad(ctx, o.Clients, warmUp(o), o.Duration, dc.call)
	if err != nil {
		return nil, fmt.Errorf("calls without publishing: %w", err)
	}
	var (
		published int
		pubLat    latencies
		pubErr    error
	)
	with, err := runLoadDuring(ctx, o.Clients, warmUp(o), func(ctx context.Context) {
		end := time.Now().Add(o.Duration)
		for time.Now().Before(end) && ctx.Err() == nil {
			t := time.Now()
			if pubErr = publishOne(ctx, g, fmt.Sprintf("pub%05d/agent", published), published, publishCapability); pubErr != nil {
				return
			}
			pubLat = append(pubLat, time.Since(t))
			published++
		}
	}, dc.call)
	if err != nil {
		return nil, fmt.Errorf("calls while publishing: %w", err)
	}
	if pubErr != nil {
		return nil, fmt.Errorf("publish beside calls: %w", pubErr)
	}
	// The evaluations queued meanwhile finish before the money is checked
	// (they are never billed).
	evalStart := time.Now()
	if err := g.app.WaitEvaluations(ctx); err != nil {
		return nil, fmt.Errorf("evaluations of the versions published: %w", err)
	}
	evalWait := time.Since(evalStart)
	var evaluated int
	if err := g.Store().View(func(tx *kv.Tx) error {
		return tx.ForEach(holon.BucketEvals, "pub", func(string, json.RawMessage) (bool, error) {
			evaluated++
			return true, nil
		})
	}); err != nil {
		return nil, err
	}
	if evaluated != published {
		return nil, fmt.Errorf("%d versions published beside the calls, but %d evaluations recorded", published, evaluated)
	}
	checked, err := g.checkMoney(before, int(dc.answered()))
	if err != nil {
		return nil, err
	}
	slices.Sort(pubLat)
	ratio := float64(with.Lat.P(0.99)) / float64(max(without.Lat.P(0.99), 1))
	res.Measured = fmt.Sprintf("p50 %s, p99 %s with (%s calls/s) against p50 %s, p99 %s without (%s calls/s): p99 %.2f ×",
		ms(with.Lat.P(0.5)), ms(with.Lat.P(0.99)), thousands(int64(with.Rate())),
		ms(without.Lat.P(0.5)), ms(without.Lat.P(0.99)), thousands(int64(without.Rate())), ratio)
	res.Notes = append(res.Notes,
		fmt.Sprintf("%d versions published in %.1fs (%.0f/s), each publish p50 %s, p99 %s; their %d evaluations (%s suite) all recorded, the last %s after the window",
			published, o.Duration.Seconds(), float64(published)/o.Duration.Seconds(), ms(pubLat.P(0.5)), ms(pubLat.P(0.99)), evaluated, publishCapability, evalWait.Round(time.Millisecond)),
		checked)
	res.judge(ratio <= targetPublishP99, "what a publish adds beside the calls: its store updates (the version's record, its evaluation queued, later its result), grouped with the calls' in the one writer; the registry's update; and the evaluation's runs, on the same cores"+loadAverage())
	return res, nil
}
