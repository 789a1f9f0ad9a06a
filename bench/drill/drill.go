// Package drill is `holon drill`: programs that attack the real gateway
// binary the way production will (killed under load, its writes failing,
// thousands of clients aimed at one budget, strangers sending garbage,
// agents that misbehave) and check, after each blow, that nothing was lost,
// doubled or overspent.
//
// Each drill starts `holon serve --hosted` as a child process on a store in
// a temporary directory, with its own loopback webhook agents (which count
// every execution they are asked for, by the gateway's request id), drives
// it over loopback HTTP, and checks its invariants over the API and over the
// store itself (opened read-only while the gateway is down). A drill prints
// what it tried and what held; when an invariant breaks it names it and
// fails.
//
//	crash      SIGKILL under concurrent load, restart on the same store, check everything
//	faults     injected write failures (commit error, short write, fsync error) and a full disk
//	overspend  thousands of concurrent calls at one mandate and one balance, a watcher sampling both
//	hostile    malformed, oversized, slow and forged requests on every endpoint
//	agents     remote agents that hang, close, flood, lie about units or redirect
//	powerloss  power cuts: the data directory on a filesystem that loses what was not synced
//	cluster    three gateways on one PostgreSQL, gateways SIGKILLed and PostgreSQL crashed under load
//
// Each drill also checks a floor of real work (calls settled, uploads
// stored, kills landing with calls in flight…) and fails below it: a
// gateway that refused everything would otherwise hold every invariant
// over nothing.
package drill

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"sync"
	"time"
)

// Names are the drills, in the order `holon drill all` runs them.
var Names = []string{"crash", "faults", "overspend", "hostile", "agents", "powerloss", "cluster"}

// Options size and select a drill run.
type Options struct {
	// Holon is the holon binary to run as the gateway.
	Holon string
	// Long runs the long form (minutes); the default is the short form
	// (seconds), the one CI runs.
	Long bool
	// Duration bounds the drill's load phase (0: the form's default).
	Duration time.Duration
	// Kills is how many times the crash drill kills the gateway (0: 20
	// short, 100 long).
	Kills int
	// Clients is the concurrency of the load (0: the drill's default).
	Clients int
	// Calls is how many calls the overspend drill aims at one budget (0:
	// 2,000 short, 10,000 long).
	Calls int
	// Seed seeds the random moments and choices (0: the clock).
	Seed int64
	// Dir is the work directory; "" makes a temporary one, removed after
	// a drill that held (kept, and named, when one failed).
	Dir string
	// Strict makes a drill that cannot run here (no permission to mount a
	// filesystem) fail instead of skipping that part (HOLON_TEST_STRICT=1).
	Strict bool
	// GatewayEnv is added to the gateway's environment: for tests that
	// plant a bug (kv.FaultEnv=nosync:0) or make the gateway refuse
	// every call, and see the drill fail.
	GatewayEnv []string
	// Out receives the report; Log the progress (io.Discard when nil).
	Out, Log io.Writer
}

// ErrBroken is returned (wrapped) when a drill saw an invariant break.
var ErrBroken = errors.New("invariant broken")

// Run runs the named drill ("all" for every one).
func Run(ctx context.Context, name string, o Options) error {
	if o.Out == nil {
		o.Out = io.Discard
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	if o.Holon == "" {
		return errors.New("no holon binary to drill (Options.Holon)")
	}
	if o.Seed == 0 {
		o.Seed = time.Now().UnixNano()
	}
	names := []string{name}
	if name == "all" {
		names = Names
	}
	var failed []string
	for _, n := range names {
		run, ok := drills[n]
		if !ok {
			return fmt.Errorf("no drill %q (the drills: %s, all)", n, strings.Join(Names, ", "))
		}
		if err := runOne(ctx, n, run, o); err != nil {
			if len(names) == 1 {
				return err
			}
			fmt.Fprintf(o.Out, "drill %s: FAILED: %v\n\n", n, err)
			failed = append(failed, n)
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("%w: drills %s failed", ErrBroken, strings.Join(failed, ", "))
	}
	return nil
}

var drills = map[string]func(ctx context.Context, d *drill) error{
	"crash":     crashDrill,
	"faults":    faultsDrill,
	"overspend": overspendDrill,
	"hostile":   hostileDrill,
	"agents":    agentsDrill,
	"powerloss": powerlossDrill,
	"cluster":   clusterDrill,
}

func runOne(ctx context.Context, name string, run func(context.Context, *drill) error, o Options) error {
	dir := o.Dir
	keep := dir != ""
	if dir == "" {
		var err error
		if dir, err = os.MkdirTemp("", "holon-drill-"+name+"-"); err != nil {
			return err
		}
	} else {
		dir = dir + string(os.PathSeparator) + name
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return err
		}
	}
	d := &drill{name: name, o: o, dir: dir, counts: map[string]int64{}, started: time.Now()}
	form := "short"
	if o.Long {
		form = "long"
	}
	fmt.Fprintf(o.Out, "drill %s (%s form, seed %d; --seed %d replays it)\n", name, form, o.Seed, o.Seed)
	err := run(ctx, d)
	d.report()
	if len(d.broken) > 0 {
		// What broke is the finding, also when a later step could not
		// go on because of it (a key lost with the rest of the store,
		// say): it comes first, that step's error after it.
		broken := fmt.Errorf("%w: %s", ErrBroken, strings.Join(d.broken, "; "))
		if n := d.brokenN - int64(len(d.broken)); n > 0 {
			broken = fmt.Errorf("%w (and %d more)", broken, n)
		}
		if err != nil {
			broken = fmt.Errorf("%w; then: %v", broken, err)
		}
		err = broken
	}
	if err != nil {
		fmt.Fprintf(o.Out, "drill %s: FAILED after %.1fs (work directory kept: %s)\n\n", name, time.Since(d.started).Seconds(), dir)
		return err
	}
	if d.skipped {
		fmt.Fprintf(o.Out, "drill %s: skipped, in %.1fs\n\n", name, time.Since(d.started).Seconds())
	} else {
		fmt.Fprintf(o.Out, "drill %s: held, in %.1fs\n\n", name, time.Since(d.started).Seconds())
	}
	if !keep {
		_ = os.RemoveAll(dir)
	}
	return nil
}

// drill is one drill's run: its options, work directory, and what it counts.
type drill struct {
	name    string
	o       Options
	dir     string
	started time.Time

	mu     sync.Mutex
	counts map[string]int64
	order  []string
	held   []string // invariants checked, with how often
	checks map[string]int64
	broken []string
	// brokenN counts every broken check (broken keeps the first few);
	// brokenBy names every invariant broken at least once.
	brokenN  int64
	brokenBy map[string]bool
	notes    []string
	// skipped is set by a drill that could not run here (and said why in
	// a note).
	skipped bool
}

// count adds n to a counter printed in the report ("calls made").
func (d *drill) count(what string, n int64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := d.counts[what]; !ok {
		d.order = append(d.order, what)
	}
	d.counts[what] += n
}

// check records one check of an invariant: held when ok, else broken with
// the detail given. It returns ok.
func (d *drill) check(invariant string, ok bool, detail string, args ...any) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.checks == nil {
		d.checks = map[string]int64{}
	}
	if _, seen := d.checks[invariant]; !seen {
		d.held = append(d.held, invariant)
	}
	d.checks[invariant]++
	if !ok {
		d.brokenN++
		if d.brokenBy == nil {
			d.brokenBy = map[string]bool{}
		}
		d.brokenBy[invariant] = true
		msg := invariant + ": " + tail(fmt.Sprintf(detail, args...), 600)
		if len(d.broken) < 5 {
			d.broken = append(d.broken, msg)
		}
		if d.brokenN <= 20 {
			fmt.Fprintf(d.o.Out, "  BROKEN %s\n", msg)
		}
	}
	return ok
}

// floor checks that the counter what reached at least least: below it the
// drill did too little real work for its invariants to mean anything (a
// gateway refusing every call holds them all, over nothing).
func (d *drill) floor(what string, least int64) {
	d.mu.Lock()
	got := d.counts[what]
	d.mu.Unlock()
	d.check(fmt.Sprintf("floor of real work, at least %d %s", least, what), got >= least,
		"%d %s, below the floor of %d: too little real work for the invariants to mean anything", got, what, least)
}

// note adds a line to the report.
func (d *drill) note(format string, args ...any) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.notes = append(d.notes, fmt.Sprintf(format, args...))
}

// logf reports progress.
func (d *drill) logf(format string, args ...any) {
	fmt.Fprintf(d.o.Log, "drill %s: %s\n", d.name, fmt.Sprintf(format, args...))
}

func (d *drill) report() {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := d.o.Out
	if len(d.order) > 0 {
		fmt.Fprintln(out, "  tried:")
		for _, k := range d.order {
			fmt.Fprintf(out, "    %-52s %d\n", k, d.counts[k])
		}
	}
	if len(d.held) > 0 {
		fmt.Fprintln(out, "  invariants checked (times):")
		// Every invariant broken, not only those of the first messages kept.
		for _, k := range d.held {
			verdict := "held"
			if d.brokenBy[k] {
				verdict = "BROKEN"
			}
			fmt.Fprintf(out, "    %-52s %6d  %s\n", k, d.checks[k], verdict)
		}
	}
	sort.Strings(d.notes)
	for _, n := range d.notes {
		fmt.Fprintf(out, "  note: %s\n", n)
	}
}

// pick returns a short- or long-form default, unless v is set.
func pick[T comparable](v T, long bool, short, longV T) T {
	var zero T
	if v != zero {
		return v
	}
	if long {
		return longV
	}
	return short
}
