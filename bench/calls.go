package bench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strings"
	"syscall"
	"time"

	"holon.dev/holon/kv"
)

// Targets of the calls row.
const (
	targetCallsRate = 10_000
	targetCallsP99  = 20 * time.Millisecond
	// targetUpdatesPerCall: an in-process call's reservation is held in
	// memory, its settlement is its one store update.
	targetUpdatesPerCall = 1.0
	// targetPageBytes is the pages a call may make its commit write.
	targetPageBytes = 5 << 10
)

// calls measures durable settled calls per second through POST /v0/calls:
// an in-process dev agent, Clients concurrent clients over loopback HTTP,
// the store fsyncing every commit. Every call must answer 200 (succeeded,
// billed); the money is checked after.
func (b *bench) calls(ctx context.Context) ([]*Result, error) {
	o := b.o
	dir := filepath.Join(o.Dir, "calls")
	g, err := openGateway(ctx, gatewayConfig{dir: dir})
	if err != nil {
		return nil, err
	}
	defer g.Close()
	res := &Result{
		Name:   fmt.Sprintf("[1] durable settled calls/s: POST /v0/calls, in-process dev agent, %d concurrent clients, fsync on", o.Clients),
		Target: fmt.Sprintf("≥ %s calls/s, p99 ≤ %s", thousands(targetCallsRate), ms(targetCallsP99)),
	}
	dc := newDevCaller(g.url, o.Clients)
	before, err := g.money()
	if err != nil {
		return nil, err
	}
	stop, err := startProfile(o, "calls.pprof")
	if err != nil {
		return nil, err
	}
	st0, cpu0, t0 := g.Store().Stats(), cpuTime(), time.Now()
	lr, err := runLoad(ctx, o.Clients, warmUp(o), o.Duration, dc.call)
	st1, cpu1, t1 := g.Store().Stats(), cpuTime(), time.Now()
	prof := stop()
	if err != nil {
		return nil, err
	}
	answered200 := dc.answered()
	checked, err := g.checkMoney(before, int(answered200))
	if err != nil {
		return nil, err
	}
	b.callsRate = lr.Rate()
	b.callsCPU = cpuShare{calls: answered200, cpu: cpu1 - cpu0, wall: t1.Sub(t0)}
	b.callsUpdates = float64(st1.Updates-st0.Updates) / float64(max(answered200, 1))
	p50, p99 := lr.Lat.P(0.50), lr.Lat.P(0.99)
	res.Measured = fmt.Sprintf("%s calls/s (%s calls in %.1fs), p50 %s, p99 %s",
		thousands(int64(lr.Rate())), thousands(int64(lr.Calls)), lr.Elapsed.Seconds(), ms(p50), ms(p99))
	w := writerShare(st0, st1)
	res.Notes = append(res.Notes, w.String(), fmt.Sprintf("%.1f store updates and %.2f commits per call answered; a caller waits for one durable commit, its settlement's (the reservation is applied in that commit or an earlier one, not waited for)",
		b.callsUpdates, float64(w.d.Commits)/float64(max(answered200, 1))), cpuNote(cpu1-cpu0, t1.Sub(t0), answered200), checked, "load average at the row's end"+strings.TrimPrefix(loadAverage(), ", load average"))
	if prof != "" {
		res.Notes = append(res.Notes, prof)
	}
	res.judge(lr.Rate() >= targetCallsRate && p99 <= targetCallsP99, w.why())
	upd := &Result{
		Name:     "[1c] store updates per in-process call (row 1)",
		Target:   fmt.Sprintf("≤ %.1f (and one update per 256 calls taking a block of receipt ids)", targetUpdatesPerCall),
		Measured: fmt.Sprintf("%.3f (%s updates for %s calls answered 200)", b.callsUpdates, thousands(int64(st1.Updates-st0.Updates)), thousands(answered200)),
		Notes:    []string{"the reservation and any Idempotency-Key claim are held in memory and written with the settlement; the receipt ids come from the store in blocks of 256 (one update each)"},
	}
	upd.judge(b.callsUpdates <= targetUpdatesPerCall+1.0/256+0.001, "an update beyond the settlement's: see the store writer note of row 1")
	perCall := float64(w.d.PageBytes) / float64(max(answered200, 1))
	pages := &Result{
		Name:     "[1d] pages written per call (row 1)",
		Target:   fmt.Sprintf("≤ %.0f KB", float64(targetPageBytes)/1024),
		Measured: fmt.Sprintf("%.1f KB (%.0f KB per commit of %.1f calls)", perCall/1024, float64(w.d.PageBytes)/1024/float64(max(w.d.Commits, 1)), float64(answered200)/float64(max(w.d.Commits, 1))),
	}
	if w.d.LogSyncs > 0 {
		pages.Notes = append(pages.Notes, fmt.Sprintf("what a commit waits for is its log record, %.2f KB per call; the pages reach the disk at the checkpoints, which sync them in the background", float64(w.d.LogBytes)/1024/float64(max(answered200, 1))))
	}
	if w.d.LogSyncs > 0 {
		pages.Notes = append(pages.Notes, "the balances, budgets, counters, agents' records, latency, earnings and rollups a commit changes reach bbolt's pages once per checkpoint (the log holds them until then), not with each commit")
	}
	pages.judge(perCall <= targetPageBytes, fmt.Sprintf("bbolt writes every page a commit touches whole (4 KB): a settlement appends the receipt, its mandate index, the journal row and its key, the call event and the idempotency key, each in its own bucket; %.1f calls share a commit here, and the fewer share it the more pages each pays for", float64(answered200)/float64(max(w.d.Commits, 1))))
	return []*Result{res, upd, pages}, nil
}

// devCaller makes row 1's calls: client c calls bench/echo under mandate
// c, each call required to answer 200, billed; it counts those answered.
type devCaller struct {
	client *http.Client
	url    string
	bodies [][]byte
	counts []int64
}

func newDevCaller(url string, clients int) *devCaller {
	d := &devCaller{client: httpClient(clients), url: url, bodies: make([][]byte, clients), counts: make([]int64, clients)}
	for c := range d.bodies {
		d.bodies[c] = fmt.Appendf(nil, `{"mandate":%q,"agent":%q,"input":{"n":%d}}`, mandateID(c), agentEcho, c)
	}
	return d
}

// call makes one call as client c (one goroutine per client).
func (d *devCaller) call(ctx context.Context, c int) error {
	if err := postBilledCall(ctx, d.client, d.url, d.bodies[c]); err != nil {
		return err
	}
	d.counts[c]++
	return nil
}

// openDevBeside opens a dev gateway for row 1's load beside another
// row's (rotate), in o.Dir/dir, with its caller and its money before.
func openDevBeside(ctx context.Context, o Options, dir string) (*benchGateway, *devCaller, moneyState, error) {
	dev, err := openGateway(ctx, gatewayConfig{dir: filepath.Join(o.Dir, dir)})
	if err != nil {
		return nil, nil, moneyState{}, err
	}
	before, err := dev.money()
	if err != nil {
		dev.Close()
		return nil, nil, moneyState{}, err
	}
	return dev, newDevCaller(dev.url, o.Clients), before, nil
}

// block runs a block of row 1's load beside another row's (rotate),
// adding what it measured to into.
func (d *devCaller) block(ctx context.Context, clients int, warm, dur time.Duration, into *loadResult, beside string) error {
	r, err := runLoad(ctx, clients, warm, dur, d.call)
	if err != nil {
		return fmt.Errorf("dev calls beside %s: %w", beside, err)
	}
	*into = into.add(r)
	return nil
}

// answered is how many calls answered 200, billed (once the load is over).
func (d *devCaller) answered() int64 {
	var n int64
	for _, c := range d.counts {
		n += c
	}
	return n
}

func warmUp(o Options) time.Duration {
	if o.Quick {
		return 200 * time.Millisecond
	}
	return 2 * time.Second
}

// writerStats is what the store's writer did during a load.
type writerStats struct {
	d kv.Stats
}

// writerShare is what the writer did between the stats a and b.
func writerShare(a, b kv.Stats) writerStats { return writerSpans([][2]kv.Stats{{a, b}}) }

// writerSpans is what the writer did over several spans of time (each
// the stats at its start and its end), as one: their counts and times
// summed, the free list as the last span left it.
func writerSpans(spans [][2]kv.Stats) writerStats {
	var d kv.Stats
	for _, s := range spans {
		a, b := s[0], s[1]
		d.Commits += b.Commits - a.Commits
		d.Updates += b.Updates - a.Updates
		d.Replays += b.Replays - a.Replays
		d.Elapsed += b.Elapsed - a.Elapsed
		d.UpdateTime += b.UpdateTime - a.UpdateTime
		d.CommitTime += b.CommitTime - a.CommitTime
		d.WriteTime += b.WriteTime - a.WriteTime
		d.PageBytes += b.PageBytes - a.PageBytes
		d.LogBytes += b.LogBytes - a.LogBytes
		d.LogSyncs += b.LogSyncs - a.LogSyncs
		d.LogSyncTime += b.LogSyncTime - a.LogSyncTime
		d.Checkpoints += b.Checkpoints - a.Checkpoints
		d.FreePages, d.FreelistBytes = b.FreePages, b.FreelistBytes
	}
	return writerStats{d: d}
}

func (w writerStats) busy() float64 {
	if w.d.Elapsed <= 0 {
		return 0
	}
	return float64(w.d.UpdateTime+w.d.CommitTime) / float64(w.d.Elapsed)
}

func (w writerStats) String() string {
	d := w.d
	if d.Commits == 0 {
		return "store: no commits"
	}
	head := fmt.Sprintf("store writer: %.1f updates per commit, %s commits/s; busy %.0f%% of the time: updates %.1f µs each, commit %s each",
		float64(d.Updates)/float64(d.Commits), thousands(int64(float64(d.Commits)/d.Elapsed.Seconds())), 100*w.busy(),
		float64(d.UpdateTime.Microseconds())/float64(d.Updates), ms(d.CommitTime/time.Duration(d.Commits)))
	if d.LogSyncs == 0 {
		return head + fmt.Sprintf(" (writing %.0f KB of pages and syncing: %s); free list %d pages",
			float64(d.PageBytes)/1024/float64(d.Commits), ms(d.WriteTime/time.Duration(d.Commits)), d.FreePages)
	}
	return head + fmt.Sprintf(" (its log record %.1f KB and its fdatasync: %s; writing %.0f KB of pages, synced by checkpoints: %s); %d checkpoints; free list %d pages",
		float64(d.LogBytes)/1024/float64(d.Commits), ms(d.LogSyncTime/time.Duration(d.LogSyncs)),
		float64(d.PageBytes)/1024/float64(d.Commits), ms(d.WriteTime/time.Duration(d.Commits)), d.Checkpoints, d.FreePages)
}

// why explains a miss of a throughput row from the writer's figures.
func (w writerStats) why() string {
	d := w.d
	if d.Commits == 0 {
		return ""
	}
	if w.busy() > 0.85 {
		return fmt.Sprintf("the store's one writer goroutine is the bottleneck (busy %.0f%%): %.0f%% of its time runs the updates (encoding, bbolt puts), %.0f%% commits (of which page writes and fsyncs %.0f%%)",
			100*w.busy(), 100*float64(d.UpdateTime)/float64(d.UpdateTime+d.CommitTime),
			100*float64(d.CommitTime)/float64(d.UpdateTime+d.CommitTime), 100*float64(d.WriteTime)/float64(d.UpdateTime+d.CommitTime))
	}
	return fmt.Sprintf("the store's writer is idle %.0f%% of the time: the CPU goes to HTTP, the engine and the clients (2 cores shared by all); profile with --cpuprofile", 100*(1-w.busy()))
}

// cpuTime is the CPU time this process has used (user and system).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func cpuNote(cpu, wall time.Duration, calls int64) string {
	return fmt.Sprintf("CPU: %.0f%% of %d cores busy, %.0f µs per call (gateway and its clients: one process)",
		100*cpu.Seconds()/wall.Seconds()/float64(runtime.NumCPU()), runtime.NumCPU(), float64(cpu.Microseconds())/float64(max(calls, 1)))
}

// startProfile starts a CPU profile into o.CPUProfile/name when profiles
// are asked for; stop ends it, writes beside it the allocations made since
// the process started (name with "-allocs": the rows run one after
// another, so an earlier row's are in it too, `-diff_base` the previous
// row's file to take them out) and says where it is.
func startProfile(o Options, name string) (stop func() string, err error) {
	if o.CPUProfile == "" {
		return func() string { return "" }, nil
	}
	if err := os.MkdirAll(o.CPUProfile, 0o755); err != nil {
		return nil, err
	}
	path := filepath.Join(o.CPUProfile, name)
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() string {
		pprof.StopCPUProfile()
		f.Close()
		allocs := strings.TrimSuffix(path, ".pprof") + "-allocs.pprof"
		if af, err := os.Create(allocs); err == nil {
			err = pprof.Lookup("allocs").WriteTo(af, 0)
			if cerr := af.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return fmt.Sprintf("CPU profile (gateway and clients, one process): go tool pprof -top %s (the allocations' profile: %v)", path, err)
			}
		}
		return fmt.Sprintf("CPU profile (gateway and clients, one process): go tool pprof -top %s; allocations since the process started: go tool pprof -sample_index=alloc_space -top %s", path, allocs)
	}, nil
}

// postBilledCall makes one POST /v0/calls and requires a billed success.
// Headers, when given, are sent too (name, value, name, value…).
func postBilledCall(ctx context.Context, client *http.Client, base string, body []byte, headers ...string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v0/calls", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	answer, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK || !bytes.Contains(answer, []byte(`"billed":true`)) {
		return fmt.Errorf("POST /v0/calls: %s: %s", resp.Status, answer)
	}
	return nil
}
