package gateway_test

import (
	"context"
	"encoding/json"
	"runtime"
	"testing"
	"time"

	"holon.dev/holon/gateway"
)

// BenchmarkEngine_Call measures the whole lifecycle of a paid call (resolve,
// admit, reserve, run, settle with its journal entry) with 64 concurrent
// callers on a store that fsyncs every commit, as a gateway runs. It reports
// calls/s and the store's mean batch (updates per commit).
func BenchmarkEngine_Call(b *testing.B) {
	te := openEngine(b, engineConfig{
		manifests: []string{agentEcho},
		handlers:  testHandlers(),
		mandates:  []string{mandateWith("bench", `budget: {total: "1000000.00"}`)},
		credit:    "1000000.00",
	})
	in := gateway.CallInput{Mandate: "alice/bench", Agent: "acme/echo", Input: json.RawMessage(`{"n":1}`)}
	const callers = 64
	b.SetParallelism((callers + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
	before := te.store.Stats()
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			res, err := te.eng.Call(context.Background(), in)
			if err != nil {
				b.Error(err)
				return
			}
			if res.Receipt.Status != gateway.StatusSucceeded {
				b.Errorf("%s: %s/%s", res.Receipt.ID, res.Receipt.Status, errCode(res.Receipt))
				return
			}
		}
	})
	elapsed := time.Since(start)
	b.StopTimer()
	after := te.store.Stats()
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "calls/s")
	if commits := after.Commits - before.Commits; commits > 0 {
		b.ReportMetric(float64(after.Updates-before.Updates)/float64(commits), "updates/commit")
	}
}
