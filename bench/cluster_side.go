package bench

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"time"

	"holon.dev/holon/kv/pg"
)

// side is one load of the cluster rows, on a set of gateways, measured in
// blocks taken in turns with the others (rotate): what its blocks
// measured and cost, and what the writers of every gateway did in them.
type side struct {
	gs      []*benchGateway
	callers []*devCaller
	lr      loadResult
	// cpu is this process's CPU in the side's blocks, wall their time;
	// pg PostgreSQL's server's (-1: not known); mBusy and mAll the
	// machine's, every process (mAll -1: not known).
	cpu, wall, pg, mBusy, mAll time.Duration
	w                          writerAt
	// rates are each block's settled calls/s, in the order they ran.
	rates []float64
	// sched is how long this process's goroutines waited to run in the
	// side's blocks.
	sched schedLatency
}

func newSide(gs []*benchGateway, clients int) *side {
	sd := &side{gs: gs}
	for _, g := range gs {
		sd.callers = append(sd.callers, newDevCaller(g.url, clients))
	}
	return sd
}

// block runs the side's load for a warm-up and a window, client c on
// gateway c mod n, adding what it measured and cost; all are the cluster's
// gateways, whose writers it counts.
func (sd *side) block(ctx context.Context, clients, pid int, all []*benchGateway, warm, dur time.Duration) error {
	w0 := writersOf(all)
	c0, t0 := cpuTime(), time.Now()
	p0, ok0 := treeCPU(pid)
	b0, a0, okm0 := machineCPU()
	s0 := schedNow()
	r, err := runLoad(ctx, clients, warm, dur, func(ctx context.Context, c int) error {
		return sd.callers[c%len(sd.gs)].call(ctx, c)
	})
	p1, ok1 := treeCPU(pid)
	b1, a1, okm1 := machineCPU()
	sd.sched = sd.sched.plus(schedNow().minus(s0))
	sd.cpu, sd.wall = sd.cpu+cpuTime()-c0, sd.wall+time.Since(t0)
	if sd.pg >= 0 {
		sd.pg += p1 - p0
		if !ok0 || !ok1 {
			sd.pg = -1
		}
	}
	if sd.mAll >= 0 {
		sd.mBusy, sd.mAll = sd.mBusy+b1-b0, sd.mAll+a1-a0
		if !okm0 || !okm1 {
			sd.mAll = -1
		}
	}
	sd.lr = sd.lr.add(r)
	sd.rates = append(sd.rates, r.Rate())
	sd.w = sd.w.plus(writersOf(all).minus(w0))
	return err
}

// writersNote says what the writers of a side of three gateways did in
// its blocks.
func (sd *side) writersNote() string {
	w := sd.w
	return fmt.Sprintf("the three writers: %.2f updates per call answered, %.1f updates per commit, %.0f groups a second in all; ",
		float64(w.updates)/float64(max(sd.answered(), 1)), float64(w.updates)/float64(max(w.commits, 1)), float64(w.commits)/sd.wall.Seconds()) +
		timesNote(w.times(), uint64(w.commits)) +
		fmt.Sprintf("; %.0f%% of groups begun in the COMMIT's round trip of the group before", 100*float64(w.heads)/float64(max(w.commits, 1)))
}

// machineNotes say what a side of three gateways cost the machine in its
// blocks: this process's CPU, PostgreSQL's server's (than: what to
// compare it with), how busy the cores were and how long goroutines
// waited to run.
func (sd *side) machineNotes(than string) []string {
	notes := []string{fmt.Sprintf("CPU: %.0f%% of %d cores busy, %.0f µs per call (the three gateways and their clients: one process)",
		100*sd.cpu.Seconds()/sd.wall.Seconds()/float64(runtime.NumCPU()), runtime.NumCPU(), sd.perCall(sd.cpu))}
	if sd.pg >= 0 {
		notes = append(notes, fmt.Sprintf("PostgreSQL's server: %.0f%% of %d cores, %.0f µs per call%s",
			100*sd.pg.Seconds()/sd.wall.Seconds()/float64(runtime.NumCPU()), runtime.NumCPU(), sd.perCall(sd.pg), than))
	}
	if sd.mAll > 0 {
		notes = append(notes, machineNote(sd.mBusy, sd.mAll))
	}
	return append(notes, sd.sched.note())
}

// answered is how many calls the side's clients had answered 200,
// warm-ups included.
func (sd *side) answered() (n int64) {
	for _, dc := range sd.callers {
		n += dc.answered()
	}
	return n
}

// perCall is what a call answered cost, d over the side's calls.
func (sd *side) perCall(d time.Duration) float64 {
	return float64(d.Microseconds()) / float64(max(sd.answered(), 1))
}

// writerAt is what the PostgreSQL stores of gateways did, summed: their
// counters at a moment, or what they did between two moments (minus).
type writerAt struct {
	commits, updates, replays, safe int64
	trips, stmts                    int64
	groups, begin, tripsT, commit   int64 // pg.WriterTimes, ns
	heads, idleHeads                int64
	specGroups, specUpdates, specD  int64
	// runs while waiting for the lock: groups, updates run, kept, rows moved
	waitG, waitU, waitK, waitM        int64
	views, begun, viewTrips           int64
	recent, stale, missed             int64
	acquires, waited, waiting, opened int64
	maxConns                          int32
}

func (w *writerAt) fields() []*int64 {
	return []*int64{&w.commits, &w.updates, &w.replays, &w.safe, &w.trips, &w.stmts, &w.groups, &w.begin, &w.tripsT, &w.commit,
		&w.heads, &w.idleHeads, &w.specGroups, &w.specUpdates, &w.specD, &w.waitG, &w.waitU, &w.waitK, &w.waitM,
		&w.views, &w.begun, &w.viewTrips, &w.recent, &w.stale, &w.missed, &w.acquires, &w.waited, &w.waiting, &w.opened}
}

func (w writerAt) combine(o writerAt, sign int64) writerAt {
	out := w
	of := o.fields()
	for i, f := range out.fields() {
		*f += sign * *of[i]
	}
	out.maxConns = max(w.maxConns, o.maxConns)
	return out
}

func (w writerAt) plus(o writerAt) writerAt  { return w.combine(o, 1) }
func (w writerAt) minus(o writerAt) writerAt { return w.combine(o, -1) }

func (w writerAt) times() pg.WriterTimes {
	return pg.WriterTimes{Groups: time.Duration(w.groups), Begin: time.Duration(w.begin), Trips: time.Duration(w.tripsT), Commit: time.Duration(w.commit)}
}

func (w writerAt) reads() pg.Reads {
	return pg.Reads{Views: uint64(w.views), Begun: uint64(w.begun), Trips: uint64(w.viewTrips), Recent: uint64(w.recent), Stale: uint64(w.stale), Missed: uint64(w.missed)}
}

// poolNote says how the gateways' stores waited for their connections.
func (w writerAt) poolNote() string {
	return fmt.Sprintf("the stores' connections: %d at most each; %d taken in the row's blocks (every gateway's), %.0f%% of them waited for one, %.0f µs on average; %d opened",
		w.maxConns, w.acquires, 100*float64(w.waited)/float64(max(w.acquires, 1)), float64(time.Duration(w.waiting).Microseconds())/float64(max(w.acquires, 1)), w.opened)
}

// writersOf sums the counters of the gateways' stores now.
func writersOf(gs []*benchGateway) (w writerAt) {
	for _, g := range gs {
		st := g.app.Engine().Store().Stats()
		w.commits, w.updates, w.replays = w.commits+int64(st.Commits), w.updates+int64(st.Updates), w.replays+int64(st.Replays)
		ps, ok := g.app.Engine().Store().(*pg.Store)
		if !ok {
			continue
		}
		w.safe += int64(ps.SafeRuns())
		t, n := ps.RoundTrips()
		w.trips, w.stmts = w.trips+int64(t), w.stmts+int64(n)
		tm := ps.Times()
		w.groups, w.begin, w.tripsT, w.commit = w.groups+int64(tm.Groups), w.begin+int64(tm.Begin), w.tripsT+int64(tm.Trips), w.commit+int64(tm.Commit)
		used, idle := ps.HeadStarts()
		w.heads, w.idleHeads = w.heads+int64(used), w.idleHeads+int64(idle)
		sg, su, sdr := ps.Speculated()
		w.specGroups, w.specUpdates, w.specD = w.specGroups+int64(sg), w.specUpdates+int64(su), w.specD+int64(sdr)
		wg, wu, wk, wm := ps.WaitRuns()
		w.waitG, w.waitU, w.waitK, w.waitM = w.waitG+int64(wg), w.waitU+int64(wu), w.waitK+int64(wk), w.waitM+int64(wm)
		r := ps.Reads()
		w.views, w.begun, w.viewTrips = w.views+int64(r.Views), w.begun+int64(r.Begun), w.viewTrips+int64(r.Trips)
		w.recent, w.stale, w.missed = w.recent+int64(r.Recent), w.stale+int64(r.Stale), w.missed+int64(r.Missed)
		p := ps.Pool()
		w.acquires, w.waited, w.waiting, w.opened = w.acquires+p.Acquires, w.waited+p.Waited, w.waiting+int64(p.Waiting), w.opened+p.Opened
		w.maxConns = max(w.maxConns, p.Max)
	}
	return w
}

// roundRatios says a's rate over b's in each round of blocks: how far the
// machine moved the ratio from round to round.
func roundRatios(a, b []float64) string {
	parts := make([]string, 0, len(a))
	for i := range min(len(a), len(b)) {
		if b[i] > 0 {
			parts = append(parts, fmt.Sprintf("%.2f×", a[i]/b[i]))
		}
	}
	return strings.Join(parts, ", ")
}
