// Package bench is `holon bench`: it measures the gateway against the
// targets of its performance issue, on the machine it runs on, and prints
// every figure beside its target.
//
// Each row sets up what it needs in a temporary directory (stores, agents,
// mandates, a PostgreSQL server) and drives the load from its own pool of
// goroutines over real loopback HTTP:
//
//	calls     durable settled calls/s through POST /v0/calls, in-process dev agent, 64 clients, fsync on
//	limit     the same load on the smallest durable server doing the same durable work (kv/limit): row 1 as a share of it
//	hosted    the same load on a hosted gateway, agent keys and an Idempotency-Key on every call: a share of row 1
//	postgres  a settled call in PostgreSQL built by its experts (postgres.sql: one transaction through a prepared function, a pool of one connection per core)
//	cluster   gateways on the PostgreSQL store: one against row [2], three against one, three on databases of their own (the bound for turns that overlap), and the store's ceiling from three writers (cluster.go)
//	mcp       a real MCP agent on loopback, through the gateway against directly: latency at 1 client, throughput at 32
//	startup   start-up of the real binary on a store of 1,000,000 receipts, its RSS, and the newest 50 receipts of a mandate
//	startup10m  start-up of the real binary on a store of 10,000,000 settled calls, and its RSS
//	inflight  memory for 2,000 calls in flight to a slow agent, in a child gateway process
//	catalog   GET /v0/agents?q= and GET /v0/catalog with 10,000 registered versions (catalog.go); settled calls' p99 with versions published beside them against without (publish.go)
//	backup    settled calls' p99 during a live backup of a store of 1,000,000 settled calls; then restoring it: time and peak heap
//
// Before the rows, the physical floor (floor.go): the fdatasync latency of
// a small write on the work directory's filesystem, alone and two in a row.
//
// A row that misses its target says MISSED, with what the measurements
// around it show. The bench fails (an error) only when something is wrong
// with the gateway: a call that did not settle, money that does not add up.
package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strings"
	"time"

	"holon.dev/holon/appliance"
)

// Rows are the rows a bench can run, in the order it runs them.
var Rows = []string{"calls", "limit", "hosted", "postgres", "cluster", "mcp", "startup", "startup10m", "reports", "inflight", "catalog", "backup"}

// Options size and select a bench run.
type Options struct {
	// Quick scales every row down to seconds in all (for CI).
	Quick bool
	// Duration is how long each throughput measurement runs, after a warm-up.
	Duration time.Duration
	// Clients is the concurrency of the calls and postgres rows (64).
	Clients int
	// MCPClients is the concurrency of the MCP throughput comparison (32).
	MCPClients int
	// LatencyCalls is how many calls each side makes at concurrency 1.
	LatencyCalls int
	// Receipts is the size of the start-up and backup stores (1,000,000).
	Receipts int
	// InFlight is how many calls the memory row holds in flight (2,000).
	InFlight int
	// BigReceipts is the size of the large start-up row's store
	// (10,000,000).
	BigReceipts int
	// ReportReceipts is the size of the reports row's store (10,000,000).
	ReportReceipts int
	// FloorSamples is how many fdatasyncs the floor row times (200).
	FloorSamples int
	// Rows selects rows by name (nil: all of Rows).
	Rows []string
	// Dir is the work directory; "" makes a temporary one, removed after.
	Dir string
	// Holon is the holon binary the startup and inflight rows execute.
	Holon string
	// CPUProfile, when set, is a directory for CPU profiles of the calls
	// and hosted rows, of the load of one and of three gateways on the
	// PostgreSQL store (rows [10] and [11]) and of the MCP row's load
	// through the gateway (gateway, agent and clients: they share the
	// process).
	CPUProfile string
	// PGStatements loads pg_stat_statements into the cluster rows'
	// server and prints, for rows [10] and [11], what their statements
	// cost the server per call, the largest first.
	PGStatements bool
	// PGLockHolder samples what the server process holding the writers'
	// lock does, in rows [10] and [11]'s blocks, and prints it.
	PGLockHolder bool
	// Out receives the report; Log the progress (io.Discard when nil).
	Out, Log io.Writer
}

// Defaults are the sizes of the targets; Quick ones take seconds.
func (o *Options) setDefaults() {
	def := func(v *int, full, quick int) {
		if *v <= 0 {
			*v = full
			if o.Quick {
				*v = quick
			}
		}
	}
	if o.Duration <= 0 {
		o.Duration = 10 * time.Second
		if o.Quick {
			o.Duration = time.Second
		}
	}
	def(&o.Clients, 64, 64)
	def(&o.MCPClients, 32, 32)
	def(&o.LatencyCalls, 2000, 200)
	def(&o.Receipts, 1_000_000, 20_000)
	def(&o.InFlight, 2000, 200)
	def(&o.BigReceipts, 10_000_000, 20_000)
	def(&o.ReportReceipts, 10_000_000, 20_000)
	def(&o.FloorSamples, 200, 30)
	if o.Log == nil {
		o.Log = io.Discard
	}
	if len(o.Rows) == 0 {
		o.Rows = Rows
	}
}

// Result is one row of the report.
type Result struct {
	// Name is what was measured, Target what the issue asks.
	Name, Target string
	// Measured is the figure, with what qualifies it.
	Measured string
	// Verdict is "ok", "MISSED", "skipped: …" or "error: …".
	Verdict string
	// Why explains a miss from the measurements around it.
	Why string
	// Notes are further figures (breakdowns, checks done).
	Notes []string
}

func (r *Result) judge(ok bool, why string) {
	if ok {
		r.Verdict = "ok"
		return
	}
	r.Verdict, r.Why = "MISSED", why
}

// Run runs the selected rows and writes the report to o.Out. It returns an
// error when a row could not be measured because something failed.
func Run(ctx context.Context, o Options) error {
	o.setDefaults()
	for _, r := range o.Rows {
		if !slices.Contains(Rows, r) {
			return fmt.Errorf("unknown row %q (want some of %s)", r, strings.Join(Rows, ", "))
		}
	}
	if o.Dir == "" {
		d, err := os.MkdirTemp("", "holon-bench-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(d)
		o.Dir = d
	}
	mode := "full"
	if o.Quick {
		mode = "quick (scaled down: figures are not comparable with the targets)"
	}
	fmt.Fprintf(o.Out, "holon bench, %s: %s %s/%s, %d CPUs, GOMAXPROCS %d, work dir %s%s\n\n",
		mode, runtime.Version(), runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), runtime.GOMAXPROCS(0), o.Dir, loadAverage())
	// The gateways of the rows run in this process: with the collector's
	// settings of holon serve.
	b := &bench{o: o, untune: appliance.TuneCollector(os.Getenv)}
	defer func() { b.untune() }()
	var results []*Result
	var failed []string
	// The floor first: every durable row is read against it.
	fl, err := measureFloor(o.Dir, o.FloorSamples)
	if err != nil {
		return fmt.Errorf("the fdatasync floor: %w", err)
	}
	b.floor = fl
	fr := fl.result(o.Dir)
	writeResult(o.Out, fr)
	results = append(results, fr)
	for _, row := range Rows {
		if !slices.Contains(o.Rows, row) {
			continue
		}
		fmt.Fprintf(o.Log, "bench: %s…\n", row)
		rs, err := b.run(ctx, row)
		if err != nil {
			failed = append(failed, fmt.Sprintf("%s: %v", row, err))
			rs = append(rs, &Result{Name: row, Verdict: "error: " + err.Error()})
		}
		for _, r := range rs {
			writeResult(o.Out, r)
		}
		results = append(results, rs...)
		if ctx.Err() != nil {
			break
		}
	}
	writeSummary(o.Out, results)
	if la := loadAverage(); la != "" {
		fmt.Fprintf(o.Out, "   %s at the end (other work on the machine slows every figure)\n", strings.TrimPrefix(la, ", "))
	}
	if len(failed) > 0 {
		return fmt.Errorf("%d row(s) failed: %s", len(failed), strings.Join(failed, "; "))
	}
	return ctx.Err()
}

// bench carries what one row leaves for another: the calls row's
// throughput for the ratios of the rows after it.
type bench struct {
	o         Options
	callsRate float64
	// pgRate is row [2]'s settled calls/s (PostgreSQL built by its experts).
	pgRate float64
	// pgConns is the pool size row [2]'s probe chose (0: not probed).
	pgConns int
	// callsUpdates is row 1's store updates per call.
	callsUpdates float64
	// callsCPU and pgCPU are the CPU rows 1 and 2 got for their calls.
	callsCPU, pgCPU cpuShare
	// floor is the run's fdatasync latency (floor.go).
	floor floor
	// untune puts back the collector's settings as they were before Run
	// set those of holon serve (appliance.TuneCollector).
	untune func()
}

func (b *bench) run(ctx context.Context, row string) ([]*Result, error) {
	switch row {
	case "calls":
		return b.calls(ctx)
	case "limit":
		return b.limitRow(ctx)
	case "hosted":
		return b.hosted(ctx)
	case "postgres":
		return b.postgres(ctx)
	case "cluster":
		return b.cluster(ctx)
	case "mcp":
		return b.mcp(ctx)
	case "startup":
		return b.startup(ctx)
	case "startup10m":
		return b.startupBig(ctx)
	case "reports":
		return b.reportsRow(ctx)
	case "backup":
		return b.liveBackup(ctx)
	case "inflight":
		return b.inflight(ctx)
	case "catalog":
		return b.catalog(ctx)
	}
	return nil, fmt.Errorf("no row %s", row)
}

func writeResult(w io.Writer, r *Result) {
	fmt.Fprintf(w, "%s\n", r.Name)
	if r.Measured != "" {
		fmt.Fprintf(w, "    measured: %s\n", r.Measured)
	}
	if r.Target != "" {
		fmt.Fprintf(w, "    target:   %s\n", r.Target)
	}
	fmt.Fprintf(w, "    verdict:  %s\n", r.Verdict)
	if r.Why != "" {
		fmt.Fprintf(w, "    why:      %s\n", r.Why)
	}
	for _, n := range r.Notes {
		fmt.Fprintf(w, "    note:     %s\n", n)
	}
	fmt.Fprintln(w)
}

func writeSummary(w io.Writer, rs []*Result) {
	fmt.Fprintln(w, "summary")
	for _, r := range rs {
		v := r.Verdict
		if i := strings.IndexByte(v, ':'); i > 0 && !strings.HasPrefix(v, "skipped") {
			v = v[:i]
		}
		fmt.Fprintf(w, "    %-8s %s\n", v, r.Name)
	}
}

// loadAverage is the machine's load average (", load average 1m 5m 15m"),
// or "" where /proc does not say.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) >= 3 {
		return fmt.Sprintf(", load average %s %s %s", f[0], f[1], f[2])
	}
	return ""
}
