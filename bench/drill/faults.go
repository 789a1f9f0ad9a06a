package drill

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"holon.dev/holon/journal"
	"holon.dev/holon/kv"
)

// faultsDrill makes the real gateway's store writes fail under load: an
// error from the commit, a short (torn) write, an fsync error (injected at
// kv's write path, kv.FaultEnv), and a full disk (a file size limit on the
// process, and a full tmpfs when this process may mount one). Each time the
// process must stop on its own (gateway.md §7, "a failed write stops the
// process"), no caller may have been answered 200 for a call the store does
// not hold, billed, with its settle: entry, and the next start (without the
// fault) must recover with nothing lost or doubled.
func faultsDrill(ctx context.Context, d *drill) error {
	rounds := pick(0, d.o.Long, 2, 6)
	rng := rand.New(rand.NewPCG(uint64(d.o.Seed), 3))
	agents, registry, err := d.startStandardAgents()
	if err != nil {
		return err
	}
	defer agents.close()
	f := &faultRun{d: d, agents: agents, registry: registry, answered: map[string]string{}}
	for _, kind := range []string{"commit", "short-write", "fsync"} {
		for r := range rounds {
			after := 20 + rng.IntN(150)
			name := fmt.Sprintf("%s-%d", kind, r)
			err := f.round(ctx, name, func(g *gatewayProc) {
				g.env = append(g.env, kv.FaultEnv+"="+fmt.Sprintf("%s:%d", kind, after))
			})
			if err != nil {
				return fmt.Errorf("%s fault after %d commits: %w", kind, after, err)
			}
			d.count("faults injected: "+kind, 1)
		}
	}
	// A full disk without privilege: the file may not grow past its size.
	// The store's file only grows once its free pages are used up, which
	// the round's calls alone need not do in 20 s: calls that wait for an
	// approval, whose large inputs the store keeps, make it grow.
	for r := range rounds {
		f.grow = true
		err := f.round(ctx, fmt.Sprintf("fsize-%d", r), func(g *gatewayProc) {
			if st, err := os.Stat(g.db); err == nil {
				g.limitFile = uint64(st.Size())
			}
		})
		f.grow = false
		if err != nil {
			return fmt.Errorf("file size limit: %w", err)
		}
		d.count("faults injected: file size limit (EFBIG)", 1)
	}
	if err := f.fullTmpfs(ctx); err != nil {
		return err
	}
	d.floor("calls answered 200", int64(10*(4*rounds)))
	return nil
}

// faultRun is the state the faults drill keeps across its rounds: one
// account, one mandate, and every answer given.
type faultRun struct {
	d        *drill
	agents   *agentServer
	registry string
	acc      *account
	db       string
	totals   map[string]journal.Amount
	// grow makes a round also send calls that wait for an approval, each
	// with an input of growInput bytes the store keeps until it is
	// decided: the file must grow.
	grow bool

	mu       sync.Mutex
	answered map[string]string
}

// setup creates the store, the account and its mandate, on a gateway
// without faults, in dir.
func (f *faultRun) setup(ctx context.Context, db string) error {
	g, err := f.d.newGateway(db, f.registry)
	if err != nil {
		return err
	}
	if err := g.start(ctx); err != nil {
		return err
	}
	defer g.kill()
	c := newAPI(g.url, 4)
	if f.acc, err = c.signup(ctx, "faulty", g.adminKey, "1000.00"); err != nil {
		return err
	}
	if err := c.mandate(ctx, f.acc, "main", "900.00", "1.00", ""); err != nil {
		return err
	}
	// Every call under "held" waits for an approval.
	if err := c.mandate(ctx, f.acc, "held", "50.00", "1.00", "0.005"); err != nil {
		return err
	}
	f.totals = map[string]journal.Amount{"faulty/main": journal.MustParseAmount("900.00"), "faulty/held": journal.MustParseAmount("50.00")}
	return g.stop()
}

// round runs the gateway with a fault (set by arm) under load until it
// stops on its own, then restarts it without the fault and checks.
func (f *faultRun) round(ctx context.Context, name string, arm func(*gatewayProc)) error {
	d := f.d
	if f.db == "" {
		f.db = filepath.Join(d.dir, "holon.db")
		if err := f.setup(ctx, f.db); err != nil {
			return err
		}
	}
	return f.roundOn(ctx, name, f.db, arm)
}

func (f *faultRun) roundOn(ctx context.Context, name, db string, arm func(*gatewayProc)) error {
	d := f.d
	g, err := d.newGateway(db, f.registry)
	if err != nil {
		return err
	}
	arm(g)
	if err := g.start(ctx); err != nil {
		return err
	}
	defer g.kill()
	c := newAPI(g.url, 32)
	loadCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for w := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; loadCtx.Err() == nil; i++ {
				agent, in := "drill/echo", agentInput{N: fmt.Sprintf("%s-%d-%d", name, w, i)}
				if i%3 == 0 {
					agent = "drill/orch"
				}
				a, err := c.call(loadCtx, f.acc.human, "faulty/main", agent, in, "")
				d.count("calls made", 1)
				if err != nil {
					time.Sleep(10 * time.Millisecond)
					continue
				}
				if a.Status == http.StatusOK && a.Receipt != nil {
					f.mu.Lock()
					f.answered[a.Receipt.ID] = a.Receipt.Cost.Total
					f.mu.Unlock()
					d.count("calls answered 200", 1)
				} else {
					d.count(fmt.Sprintf("calls answered %d %s", a.Status, a.code()), 1)
				}
			}
		}()
	}
	if f.grow {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f.growStore(loadCtx, c, name)
		}()
	}
	var stopped bool
	select {
	case <-g.done():
		stopped = true
	case <-time.After(20 * time.Second):
	case <-ctx.Done():
	}
	stop()
	wg.Wait()
	d.check("a failed write stops the process", stopped, "%s: still serving 20s into the load", name)
	if !stopped {
		return fmt.Errorf("%s: the fault never stopped the gateway:\n%s", name, tail(g.logs(), 1500))
	}
	exit := g.exitErr()
	var ee *exec.ExitError
	d.check("the process stops with a non-zero exit, naming the store", errors.As(exit, &ee) && strings.Contains(g.logs(), "store"),
		"%s: exit %v:\n%s", name, exit, tail(g.logs(), 800))
	// The next start, without the fault, recovers.
	g2, err := d.newGateway(db, f.registry)
	if err != nil {
		return err
	}
	if err := g2.start(ctx); err != nil {
		d.check("the next start recovers", false, "%s: %v", name, err)
		return err
	}
	d.count("restarts after a fault", 1)
	if err := g2.stop(); err != nil {
		return err
	}
	v, err := d.checkStore(ctx, db, f.totals)
	if err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for id, cost := range f.answered {
		r := v.receipts[id]
		ok := r != nil && r.Status == "succeeded" && r.Billed == (cost != "0.00") && r.Cost.Total.String() == cost && (!r.Billed || v.settles[id] == 1)
		d.check("no caller is answered 200 for a call the store does not hold, billed", ok, "%s (%s): answered %s, store %+v settles %d", name, id, cost, r, v.settles[id])
	}
	byCall, _, _ := f.agents.counts()
	for id, n := range byCall {
		d.check("an agent runs once per receipt", n == 1, "%s ran %d times", id, n)
	}
	f.answered = map[string]string{} // checked; the next round's store may be another
	return nil
}

// growInput is the size of the inputs growStore sends: the store keeps
// each while its approval is pending.
const growInput = 1 << 20

// growStore sends calls under the mandate that needs an approval for
// every call, each with a large input, until ctx ends: each leaves a
// pending approval that keeps its input in the store, so the store's file
// must grow within a few calls.
func (f *faultRun) growStore(ctx context.Context, c *api, name string) {
	pad := strings.Repeat("x", growInput)
	for i := 0; ctx.Err() == nil; i++ {
		a, err := c.do(ctx, "POST", "/v0/calls", f.acc.human, map[string]any{"mandate": "faulty/held", "agent": "drill/echo",
			"input": map[string]string{"n": fmt.Sprintf("%s-grow-%d", name, i), "pad": pad}})
		if err != nil {
			time.Sleep(10 * time.Millisecond)
			continue
		}
		f.d.count(fmt.Sprintf("calls waiting for an approval, to grow the store (answered %d)", a.Status), 1)
	}
}

// fullTmpfs runs a round on a store in a small tmpfs filled to its last
// few hundred kilobytes: the real ENOSPC of a full disk. It needs the
// privilege to mount; without it the part is skipped (failed when Strict).
func (f *faultRun) fullTmpfs(ctx context.Context) error {
	d := f.d
	mnt := filepath.Join(d.dir, "tmpfs")
	if err := os.MkdirAll(mnt, 0o700); err != nil {
		return err
	}
	if out, err := exec.CommandContext(ctx, "mount", "-t", "tmpfs", "-o", "size=8m", "holon-drill", mnt).CombinedOutput(); err != nil {
		msg := fmt.Sprintf("full disk on tmpfs skipped: mount -t tmpfs needs root (%v: %s); the file size limit rounds stand in", err, strings.TrimSpace(string(out)))
		if d.o.Strict {
			return errors.New(msg + " (HOLON_TEST_STRICT=1)")
		}
		d.note("%s", msg)
		return nil
	}
	defer exec.Command("umount", "-l", mnt).Run()
	db := filepath.Join(mnt, "holon.db")
	f.agents.reset()
	if err := f.setup(ctx, db); err != nil {
		return err
	}
	// Leave ~256 KB free.
	if out, err := exec.CommandContext(ctx, "sh", "-c", "dd if=/dev/zero of="+filepath.Join(mnt, "filler")+" bs=64k 2>/dev/null; rm -f "+filepath.Join(mnt, "filler")+"; dd if=/dev/zero of="+filepath.Join(mnt, "filler")+" bs=64k count=$(( ($(df -k --output=avail "+mnt+" | tail -1) - 256) / 64 )) 2>/dev/null").CombinedOutput(); err != nil {
		return fmt.Errorf("fill the tmpfs: %v: %s", err, out)
	}
	f.answered = map[string]string{}
	if err := f.roundOn(ctx, "tmpfs-full", db, func(*gatewayProc) {}); err != nil {
		return fmt.Errorf("full tmpfs: %w", err)
	}
	d.count("faults injected: full disk (tmpfs, ENOSPC)", 1)
	return nil
}
