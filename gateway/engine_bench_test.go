package gateway_test

import (
	"context"
	"encoding/json"
	"runtime"
	"syscall"
	"testing"
	"time"

	"holon.dev/holon"
	"holon.dev/holon/gateway"
)

// BenchmarkEngine_Call measures the whole lifecycle of a paid call (resolve,
// admit, reserve, run, settle with its journal entry) with 64 concurrent
// callers, on a store that fsyncs every commit as a gateway runs, and
// without fsync for the CPU path alone (with one caller, the cost of one
// call end to end). It reports calls/s, the store's mean batch (updates
// per commit) and the process's CPU time per call, which the disk's noise
// does not move, and the pages the store wrote per call and per commit;
// and the store's writer: how busy it was (updates and commits over the
// run's time), its time per update (the updates' functions) and per
// commit (page writes and syncs included).
func BenchmarkEngine_Call(b *testing.B) {
	b.Run("fsync", func(b *testing.B) { benchmarkEngineCall(b, 64, false) })
	b.Run("nosync", func(b *testing.B) { benchmarkEngineCall(b, 64, true) })
	b.Run("callers=1,nosync", func(b *testing.B) { benchmarkEngineCall(b, 1, true) })
	b.Run("callers=1,fsync", func(b *testing.B) { benchmarkEngineCall(b, 1, false) })
	b.Run("callers=2,fsync", func(b *testing.B) { benchmarkEngineCall(b, 2, false) })
}

func benchmarkEngineCall(b *testing.B, callers int, noSync bool) {
	te := openEngine(b, engineConfig{
		manifests: []string{agentEcho},
		handlers:  testHandlers(),
		mandates:  []string{mandateWith("bench", `budget: {total: "1000000.00"}`)},
		credit:    "1000000.00",
		noSync:    noSync,
	})
	in := gateway.CallInput{Mandate: "alice/bench", Agent: "acme/echo", Input: json.RawMessage(`{"n":1}`)}
	b.SetParallelism((callers + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
	before := te.kv.Stats()
	cpu0 := cpuTime()
	b.ResetTimer()
	start := time.Now()
	call := func() bool {
		res, err := te.eng.Call(context.Background(), in)
		if err != nil {
			b.Error(err)
			return false
		}
		if res.Receipt.Status != holon.StatusSucceeded {
			b.Errorf("%s: %s/%s", res.Receipt.ID, res.Receipt.Status, errCode(res.Receipt))
			return false
		}
		return true
	}
	if callers == 1 {
		// RunParallel runs at least GOMAXPROCS goroutines: one caller
		// calls from here.
		for i := 0; i < b.N && call(); i++ {
		}
	} else {
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() && call() {
			}
		})
	}
	elapsed := time.Since(start)
	b.StopTimer()
	cpu := cpuTime() - cpu0
	after := te.kv.Stats()
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "calls/s")
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-µs/call")
	if commits := after.Commits - before.Commits; commits > 0 {
		b.ReportMetric(float64(after.Updates-before.Updates)/float64(commits), "updates/commit")
		b.ReportMetric(float64(commits)/float64(b.N), "commits/call")
		b.ReportMetric(float64(after.PageBytes-before.PageBytes)/1024/float64(commits), "page-KB/commit")
		update, commit := after.UpdateTime-before.UpdateTime, after.CommitTime-before.CommitTime
		b.ReportMetric(100*float64(update+commit)/float64(after.Elapsed-before.Elapsed), "writer-busy-%")
		b.ReportMetric(float64(update.Nanoseconds())/1e3/float64(after.Updates-before.Updates), "writer-µs/update")
		b.ReportMetric(float64(commit.Nanoseconds())/1e3/float64(commits), "writer-µs/commit")
		if syncs := after.LogSyncs - before.LogSyncs; syncs > 0 {
			b.ReportMetric(float64(after.LogBytes-before.LogBytes)/1024/float64(b.N), "log-KB/call")
			b.ReportMetric(float64((after.LogSyncTime-before.LogSyncTime).Microseconds())/float64(syncs), "log-sync-µs")
		}
	}
	b.ReportMetric(float64(after.PageBytes-before.PageBytes)/1024/float64(b.N), "page-KB/call")
}

// cpuTime is the CPU time the process has used (user and system).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
