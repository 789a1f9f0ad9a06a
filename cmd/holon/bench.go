package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"holon.dev/holon/bench"
)

// benchCommand is `holon bench`: the performance targets, measured here.
type benchCommand struct {
	stdout, stderr io.Writer
}

func (c *benchCommand) Name() string { return "bench" }
func (c *benchCommand) Synopsis() string {
	return "measure the gateway against its performance targets"
}

func (c *benchCommand) Run(ctx context.Context, args []string) error {
	if len(args) == 2 && args[0] == bench.ChildGatewayFlag {
		// The inflight row's gateway, in a process of its own.
		return bench.ServeChildGateway(ctx, args[1], c.stdout)
	}
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(c.stderr)
	var o bench.Options
	fs.BoolVar(&o.Quick, "quick", false, "scale every row down to a few seconds in all (CI)")
	fs.DurationVar(&o.Duration, "duration", 0, "how long each throughput measurement runs (default 10s, 1s with --quick)")
	fs.IntVar(&o.Clients, "clients", 0, "concurrent clients of the calls and postgres rows (default 64)")
	fs.IntVar(&o.MCPClients, "mcp-clients", 0, "concurrent clients of the MCP throughput comparison (default 32)")
	fs.IntVar(&o.LatencyCalls, "latency-calls", 0, "calls on each side of the MCP latency comparison (default 2000, 200 with --quick)")
	fs.IntVar(&o.Receipts, "receipts", 0, "receipts in the start-up and backup stores (default 1000000, 20000 with --quick)")
	fs.IntVar(&o.BigReceipts, "big-receipts", 0, "settled calls in the large start-up row's store (default 10000000, 20000 with --quick)")
	fs.IntVar(&o.ReportReceipts, "report-receipts", 0, "settled calls in the reports row's store (default 10000000, 20000 with --quick)")
	fs.IntVar(&o.InFlight, "inflight", 0, "calls held in flight by the memory row (default 2000, 200 with --quick)")
	rows := fs.String("rows", strings.Join(bench.Rows, ","), "the rows to run")
	fs.StringVar(&o.Dir, "dir", "", "work directory (default: a temporary one, removed after)")
	fs.BoolVar(&o.PGStatements, "pg-statements", false, "load pg_stat_statements into the cluster rows' PostgreSQL and print what rows [10] and [11]'s statements cost its server per call")
	fs.BoolVar(&o.PGLockHolder, "pg-lock-holder", false, "sample every millisecond what the cluster rows' PostgreSQL process holding the writers' lock does, and print it for rows [10] and [11]")
	fs.StringVar(&o.CPUProfile, "cpuprofile", "", "write CPU profiles (and allocations) of the calls and hosted rows, of rows [10] and [11]'s gateways on PostgreSQL and of the MCP row's gateway load into this directory")
	fs.Usage = func() {
		fmt.Fprintln(c.stderr, `Usage: holon bench [--quick] [--rows calls,limit,hosted,postgres,cluster,mcp,startup,startup10m,inflight,catalog,backup] [flags]

Measures the gateway on this machine against its performance targets and
prints each figure beside its target, MISSED when it misses, with what the
measurements say. Every row sets up its own temporary store, agents and
mandates and drives the load from its own goroutines over loopback HTTP
(first, the floor: fdatasync of a small write on the work directory's
filesystem):

  calls     durable settled calls/s through POST /v0/calls (dev agent, 64 clients, fsync on)
  limit     the same load on the smallest durable server doing the same work: row 1 as a share of it
  hosted    the same through a hosted gateway, agent keys and an Idempotency-Key on every call
  postgres  a settled call in PostgreSQL built by its experts (needs PostgreSQL installed)
  cluster   gateways on the PostgreSQL store: one against postgres, three against one, the store's ceiling
  mcp       a real MCP agent through the gateway against directly (1 and 32 clients)
  startup   start-up of holon serve on 1,000,000 receipts, its RSS, the newest 50 receipts
  startup10m  start-up of holon serve on 10,000,000 settled calls, its RSS
  inflight  memory per call with 2,000 calls in flight to a slow agent
  backup    settled calls' p99 during a live backup of 1,000,000 settled calls; restoring it

Exits 1 when a row fails (a call that did not settle, money that does not
add up), never for a missed target.

Flags:`)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		fs.Usage()
		return errUsage
	}
	for _, r := range strings.Split(*rows, ",") {
		if r = strings.TrimSpace(r); r != "" {
			o.Rows = append(o.Rows, r)
		}
	}
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	o.Holon, o.Out, o.Log = exe, c.stdout, c.stderr
	return bench.Run(ctx, o)
}
