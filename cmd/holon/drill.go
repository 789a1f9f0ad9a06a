package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"holon.dev/holon/bench/drill"
)

// drillCommand is `holon drill`: the drills that attack the real binary.
type drillCommand struct {
	stdout, stderr io.Writer
	getenv         func(string) string
}

func (c *drillCommand) Name() string { return "drill" }
func (c *drillCommand) Synopsis() string {
	return "attack the gateway: crashes, store faults, overspend, hostile input, bad agents, power cuts, a cluster"
}

func (c *drillCommand) Run(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("drill", flag.ContinueOnError)
	fs.SetOutput(c.stderr)
	var o drill.Options
	fs.BoolVar(&o.Long, "long", false, "the long form (minutes) instead of the short one (seconds, as CI runs it)")
	fs.DurationVar(&o.Duration, "duration", 0, "bound the load phase (default: the form's)")
	fs.IntVar(&o.Kills, "kills", 0, "crash: how many SIGKILLs (default 20, 100 with --long); powerloss: how many power cuts (default 8, 60 with --long); cluster: how many gateway SIGKILLs (default 6, 40 with --long)")
	fs.IntVar(&o.Clients, "clients", 0, "concurrent clients of the load (default: the drill's)")
	fs.IntVar(&o.Calls, "calls", 0, "overspend: calls aimed at one budget (default 2000, 10000 with --long)")
	fs.Int64Var(&o.Seed, "seed", 0, "seed of the random moments and choices (default: the clock; printed)")
	fs.StringVar(&o.Dir, "dir", "", "work directory, kept (default: a temporary one, removed when the drill held)")
	fs.Func("gateway-env", "add `NAME=value` to the gateway's environment (repeatable): to plant a bug, e.g. HOLON_TEST_STORE_FAULT=nosync:0, and see a drill catch it", func(v string) error {
		if !strings.Contains(v, "=") {
			return fmt.Errorf("want NAME=value, got %q", v)
		}
		o.GatewayEnv = append(o.GatewayEnv, v)
		return nil
	})
	verbose := fs.Bool("v", false, "print progress")
	fs.Usage = func() {
		fmt.Fprintf(c.stderr, `Usage: holon drill [flags] <%s|all>

Runs the real gateway (this binary, holon serve --hosted) in a child process
on a temporary store, with loopback webhook agents, and attacks it:

  crash      SIGKILL at random moments under concurrent load (plain, slow,
             delegated, approved and idempotent calls), restarted on the same
             store; after each kill and restart: holon verify, every 200 has
             its billed receipt and one settle: entry, calls in flight end
             gateway_restarted unbilled, no hold left, no budget overspent,
             no Idempotency-Key run twice (counted on the agents' side)
  faults     store writes that fail (commit error, short write, fsync error,
             a full disk): the process stops, no caller is told 200 for a
             call not durable, the next start recovers
  overspend  thousands of concurrent calls, retries and delegated runs at one
             mandate and one balance, a watcher sampling both
  hostile    malformed, nested, oversized, slow and forged requests on every
             endpoint: each refused with its code, nothing stored or billed,
             a normal client's p99 measured meanwhile
  agents     remote agents that hang, close mid-answer, flood, answer
             garbage, lie about units or redirect: each a clear unbilled
             failure, other agents' p99 measured meanwhile
  powerloss  power cuts: the data directory on a FUSE filesystem that
             loses every write and name not fsynced, under the crash load
             plus uploads, a live backup and a restore; after each cut:
             holon verify, bbolt's check, every 200 billed, every upload
             answered 201 there with its SHA-256, every backup reported
             done whole, every restore complete or not begun (needs root
             and /dev/fuse; skipped without, failed under strict)
  cluster    three gateways on one PostgreSQL (--store, lease 2s) under
             the crash load spread over them (idempotent retries, re-sends
             and approvals on another gateway than the first) and a
             balance that runs out; gateways SIGKILLed at random and
             restarted, PostgreSQL itself crashed (pg_ctl stop -m
             immediate, then start); a watcher on every gateway; at the
             end: holon verify, the journal zero-sum with its chain, every
             200 billed with one settle: entry, calls in flight at a kill
             closed gateway_restarted by the others, no key run twice, no
             hold left (needs PostgreSQL; skipped without, failed under
             strict)

Prints what each tried and which invariants held, and its seed (--seed
replays a run); exits 1 naming the invariant that broke, or the floor of
real work a drill did not reach. HOLON_TEST_STRICT=1 makes a part that cannot run here
(a tmpfs mount needs root) fail instead of skip.

Flags:
`, strings.Join(drill.Names, "|"))
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return errUsage
	}
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	o.Holon, o.Out = exe, c.stdout
	if *verbose {
		o.Log = c.stderr
	}
	o.Strict = c.getenv("HOLON_TEST_STRICT") == "1"
	return drill.Run(ctx, fs.Arg(0), o)
}
