package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// Targets of the large start-up row.
const (
	targetStartupBig = 100 * time.Millisecond
	targetRSSBig     = 64 << 20
)

// startupBig starts the real binary on a store of BigReceipts settled
// calls (10,000,000: built directly through kv in large transactions
// without fsync, as buildReceipts does) and measures the warm start and
// the RSS. The store is removed after the row: it is large.
func (b *bench) startupBig(ctx context.Context) ([]*Result, error) {
	o := b.o
	name := fmt.Sprintf("[5b] start-up of holon serve with %s settled calls in the store", thousands(int64(o.BigReceipts)))
	if o.Holon == "" {
		return []*Result{{Name: name, Verdict: "skipped: no holon binary to start (run it as holon bench)"}}, nil
	}
	dir := filepath.Join(o.Dir, "startup-big")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "holon.db")
	t := time.Now()
	size, err := buildReceipts(ctx, path, o.BigReceipts)
	if err != nil {
		return nil, fmt.Errorf("build the store: %w", err)
	}
	built := fmt.Sprintf("store of %s settled calls (receipts, journal, events; %s file) built in %.1fs", thousands(int64(o.BigReceipts)), mb(float64(size)), time.Since(t).Seconds())
	var times, cpus []time.Duration
	var rss []int64
	for run := range startupRuns + 1 {
		p, err := startServe(ctx, o.Holon, path, dir)
		if err != nil {
			return nil, err
		}
		if run > 0 { // the first start journals the demo credit: not measured
			times = append(times, p.ready)
			cpus = append(cpus, p.cpu)
			rss = append(rss, p.rss())
		}
		if err := p.stop(); err != nil {
			return nil, err
		}
	}
	slices.Sort(times)
	med, maxRSS := times[len(times)/2], slices.Max(rss)
	up := &Result{
		Name:   name,
		Target: fmt.Sprintf("≤ %s to serving warm, RSS ≤ %s after start", ms(targetStartupBig), mb(targetRSSBig)),
		Measured: fmt.Sprintf("%s to serving warm (median of %d: %s), RSS %s after start (largest)",
			ms(med), len(times), joinMS(times), mb(float64(maxRSS))),
		Notes: []string{built, "measured from exec to the first 200 on /healthz, the real process's VmRSS from /proc; the store is removed after the row", cpuToServing(cpus)},
	}
	up.judge(med <= targetStartupBig && maxRSS <= targetRSSBig,
		"start-up reads no receipt (counts are counters, holds are few): what it spends is the registry, opening the store (bbolt maps the file: its size costs address space, not RSS) and its first commits")
	return []*Result{up}, nil
}
