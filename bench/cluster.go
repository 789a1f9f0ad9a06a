package bench

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"holon.dev/holon"
	"holon.dev/holon/backup/pgserver"
	"holon.dev/holon/journal"
	"holon.dev/holon/kv/pg"
)

// Targets of the cluster rows.
const (
	targetOneOnPG    = 0.8 // one gateway on the PostgreSQL store, as a share of row [2]
	targetThreeOnOne = 1.0 // three gateways on one database, as a share of one
)

// cluster measures gateways on the PostgreSQL store (one database, fsync
// on): one gateway at Clients clients, as a share of PostgreSQL built by
// its experts (row [2], the same database doing the same work); three
// gateways with the same load spread over them, as a share of one; and the
// store's own ceiling, settlements through holon.Store from three writers
// with no HTTP, with the capacity model it gives.
func (b *bench) cluster(ctx context.Context) ([]*Result, error) {
	o := b.o
	one := &Result{
		Name:   fmt.Sprintf("[10] one gateway on the PostgreSQL store: POST /v0/calls, in-process dev agent, %d clients, fsync on", o.Clients),
		Target: fmt.Sprintf("≥ %.1f× row [2]'s design (PostgreSQL built by its experts) on the same server, in alternating blocks", targetOneOnPG),
	}
	three := &Result{
		Name:   fmt.Sprintf("[11] three gateways on one PostgreSQL store, the same %d clients spread over them", o.Clients),
		Target: fmt.Sprintf("≥ %.1f× row [10]", targetThreeOnOne),
	}
	ceiling := &Result{
		Name:   "[12] the PostgreSQL store's ceiling: a call's updates through holon.Store from three writers at once, no HTTP",
		Target: "printed, with the capacity model it gives",
	}
	rows := []*Result{one, three, ceiling}
	srv, err := pgserver.Start(ctx, pgserver.Options{Durable: true})
	if errors.Is(err, pgserver.ErrNotInstalled) {
		for _, r := range rows {
			r.Verdict = "skipped: install postgresql (" + pgserver.Install + ")"
		}
		return rows, nil
	}
	if err != nil {
		return nil, err
	}
	defer srv.Stop()
	createDB := func(name string) (string, error) {
		c, err := pgx.Connect(ctx, srv.URL("postgres"))
		if err != nil {
			return "", err
		}
		defer c.Close(context.Background())
		_, err = c.Exec(ctx, "CREATE DATABASE "+name)
		return srv.URL(name), err
	}

	// [10] and [11]: the same database, one gateway then three.
	url, err := createDB("gateways")
	if err != nil {
		return nil, err
	}
	var gws []*benchGateway
	defer func() {
		for _, g := range gws {
			g.Close()
		}
	}()
	for i := range 3 {
		g, err := openGateway(ctx, gatewayConfig{dir: fmt.Sprintf("%s/cluster/g%d", o.Dir, i), store: url})
		if err != nil {
			return nil, err
		}
		gws = append(gws, g)
	}
	var pgCPU time.Duration // PostgreSQL's server's CPU in the last measure (-1: not known)
	// The machine's CPU in the last measure, every process: busy and in
	// all (both 0: not known).
	var mBusy, mAll time.Duration
	// perCall is the last measure's store updates per call answered, over
	// its gateways' writers (warm-up included).
	var perCall float64
	updates := func(gs []*benchGateway) (n uint64) {
		for _, g := range gs {
			n += g.app.Engine().Store().Stats().Updates
		}
		return n
	}
	pid, pidErr := srv.PID()
	// The blocks [10]'s window and row [2]'s design's alternate in.
	blocks, blockDur, blockWarm := alternatingBlocks(o, hostedBlocks)
	// measure runs the gateways' load: in one window, or (other not nil)
	// in blocks alternating with other's. It returns what the gateways'
	// blocks measured, the CPU this process used in them, their time and
	// the calls answered in them (warm-ups included, as in the CPU).
	measure := func(gs []*benchGateway, other func(int) error) (lr loadResult, cpu, wall time.Duration, answered int64, checked string, err error) {
		callers := make([]*devCaller, len(gs))
		for i, g := range gs {
			callers[i] = newDevCaller(g.url, o.Clients)
		}
		before, err := gs[0].money()
		if err != nil {
			return lr, 0, 0, 0, "", err
		}
		updates0 := updates(gs)
		pgCPU, mBusy, mAll = 0, 0, 0
		pgOK, mOK := pidErr == nil, true
		run := func(warm, dur time.Duration) error {
			c0, t0 := cpuTime(), time.Now()
			p0, ok0 := treeCPU(pid)
			b0, a0, okm0 := machineCPU()
			r, err := runLoad(ctx, o.Clients, warm, dur, func(ctx context.Context, c int) error {
				return callers[c%len(gs)].call(ctx, c)
			})
			p1, ok1 := treeCPU(pid)
			b1, a1, okm1 := machineCPU()
			cpu, wall, pgCPU = cpu+cpuTime()-c0, wall+time.Since(t0), pgCPU+p1-p0
			mBusy, mAll = mBusy+b1-b0, mAll+a1-a0
			pgOK, mOK = pgOK && ok0 && ok1, mOK && okm0 && okm1
			lr = lr.add(r)
			return err
		}
		if other == nil {
			err = run(warmUp(o), o.Duration)
		} else {
			err = alternate(blocks, func(int) error { return run(blockWarm, blockDur) }, other)
		}
		if !pgOK {
			pgCPU = -1
		}
		if !mOK {
			mBusy, mAll = 0, 0
		}
		if err != nil {
			return lr, cpu, wall, 0, "", err
		}
		for _, dc := range callers {
			answered += dc.answered()
		}
		perCall = float64(updates(gs)-updates0) / float64(max(answered, 1))
		checked, err = gs[0].checkMoney(before, int(answered))
		return lr, cpu, wall, answered, checked, err
	}
	// [10]'s window alternates with row [2]'s design on a database of its
	// own on the same server, block by block, as row [2] alternates with
	// row 1: this VM's disk answers PostgreSQL's flushes at speeds that
	// differ by two in runs minutes apart, and both sides wait for them.
	exURL, err := createDB("experts")
	if err != nil {
		return nil, err
	}
	ex, err := openExperts(ctx, exURL, o)
	if err != nil {
		return nil, err
	}
	defer ex.Close()
	exConns, exProbes := b.pgConns, []string(nil)
	if exConns == 0 {
		if exConns, exProbes, err = ex.probe(ctx); err != nil {
			return nil, err
		}
	}
	var (
		exLoad          loadResult
		exCPU, exServer time.Duration // this process's (its clients') and the server's, in its blocks
		exN             int64         // calls settled in its blocks, warm-ups included
		exOK            = pidErr == nil
	)
	exBlock := func(int) error {
		c0, n0 := cpuTime(), ex.sum()
		p0, ok0 := treeCPU(pid)
		r, err := ex.load(ctx, exConns, blockWarm, blockDur)
		p1, ok1 := treeCPU(pid)
		exCPU, exServer, exN = exCPU+cpuTime()-c0, exServer+p1-p0, exN+ex.sum()-n0
		exOK = exOK && ok0 && ok1
		exLoad = exLoad.add(r)
		return err
	}
	stop, err := startProfile(o, "cluster.pprof")
	if err != nil {
		return nil, err
	}
	var reads0 pg.Reads
	if ps, ok := gws[0].app.Engine().Store().(*pg.Store); ok {
		reads0 = ps.Reads()
	}
	lr1, cpu1, wall1, all1, checked1, err := measure(gws[:1], exBlock)
	prof := stop()
	if err != nil {
		return nil, fmt.Errorf("one gateway on PostgreSQL: %w", err)
	}
	exChecked, err := ex.check(ctx)
	if err != nil {
		return nil, fmt.Errorf("row [2]'s design beside one gateway: %w", err)
	}
	rate1 := lr1.Rate()
	one.Measured = fmt.Sprintf("%s calls/s, p50 %s, p99 %s", thousands(int64(rate1)), ms(lr1.Lat.P(0.5)), ms(lr1.Lat.P(0.99)))
	st := gws[0].app.Engine().Store().Stats()
	var trips, stmts uint64
	if ps, ok := gws[0].app.Engine().Store().(*pg.Store); ok {
		trips, stmts = ps.RoundTrips()
	}
	one.Notes = append(one.Notes, checked1, fmt.Sprintf("the store's writer: %.2f updates per call answered, %.1f updates per commit, %s, %d groups ran again after a serialization conflict",
		perCall, float64(st.Updates)/float64(max(st.Commits, 1)), tripsNote(trips, stmts, st.Updates), st.Replays),
		cpuNote(cpu1, wall1, all1))
	if pgCPU >= 0 {
		wall := wall1
		one.Notes = append(one.Notes, fmt.Sprintf("PostgreSQL's server: %.0f%% of %d cores, %.0f µs per call (row [2]'s design's below)",
			100*pgCPU.Seconds()/wall.Seconds()/float64(runtime.NumCPU()), runtime.NumCPU(), float64(pgCPU.Microseconds())/float64(max(all1, 1))))
	}
	pgCPU1, cpuPer1 := pgCPU, float64(cpu1.Microseconds())/float64(max(all1, 1))
	if mAll > 0 {
		one.Notes = append(one.Notes, machineNote(mBusy, mAll))
	}
	if ps, ok := gws[0].app.Engine().Store().(*pg.Store); ok {
		used, idle := ps.HeadStarts()
		sg, su, sd := ps.Speculated()
		one.Notes = append(one.Notes, timesNote(ps.Times(), st.Commits)+fmt.Sprintf("; %.0f%% of groups begun in the COMMIT's round trip of the group before (%d more begun so and ended unused), %d run again safely; %d groups (%d updates) ran while the COMMIT before them was in flight, %d such runs dropped",
			100*float64(used)/float64(max(st.Commits, 1)), idle, ps.SafeRuns(), sg, su, sd), readsNote(reads0, ps.Reads(), lr1.Calls))
	}
	if ps, ok := gws[0].app.Engine().Store().(*pg.Store); ok {
		p := ps.Pool()
		one.Notes = append(one.Notes, fmt.Sprintf("the store's connections: %d at most; %d taken since it opened, %.0f%% of them waited for one, %.0f µs on average",
			p.Max, p.Acquires, 100*float64(p.Waited)/float64(max(p.Acquires, 1)), float64(p.Waiting.Microseconds())/float64(max(p.Acquires, 1))))
	}
	if prof != "" {
		one.Notes = append(one.Notes, prof)
	}
	ratio := rate1 / exLoad.Rate()
	one.Measured += fmt.Sprintf("; row [2]'s design on the same server in the blocks between, %s calls/s (a pool of %d): %.2f×", thousands(int64(exLoad.Rate())), exConns, ratio)
	if b.pgRate > 0 {
		one.Measured += fmt.Sprintf("; row [2]'s own run, %s calls/s: %.2f×", thousands(int64(b.pgRate)), rate1/b.pgRate)
	}
	one.Notes = append(one.Notes, fmt.Sprintf("%d blocks of %s on each side, this gateway's load and row [2]'s design (a database of its own on this row's server) alternately, each side first in every other block; %s",
		blocks, blockDur, exChecked))
	if exOK && exN > 0 {
		one.Notes = append(one.Notes, fmt.Sprintf("CPU per call of row [2]'s design in its blocks: its server %.0f µs, its clients in this process %.0f µs",
			float64(exServer.Microseconds())/float64(exN), float64(exCPU.Microseconds())/float64(exN)))
	}
	if len(exProbes) > 0 {
		one.Notes = append(one.Notes, "row [2]'s pool, the best of a short probe (connections: calls/s): "+strings.Join(exProbes, ", "))
	}
	if prof != "" {
		one.Notes = append(one.Notes, "the profile covers row [2]'s design's blocks too: its clients' work is under bench.(*experts).load")
	}
	one.judge(ratio >= targetOneOnPG, "one writer at a time (the journal's one chain): a group's statements and its COMMIT's deferred checks run one after the other on one server process (a group's time above), where row [2] sends one prepared function per call on many connections at once and keeps no chain, holds, counters or event log; and the gateway, its clients and PostgreSQL share this machine's cores: the gateway's HTTP, JSON, engine and driver (its CPU per call above) come on top of the database's work, where row [2]'s clients cost little (both designs' CPU per call above)")
	type writerAt struct {
		st    holon.StoreStats
		times pg.WriterTimes
		heads uint64
		// runs while waiting for the lock: groups, updates run, kept, rows moved
		waits [4]uint64
		reads pg.Reads
	}
	writers := func() (w writerAt) {
		for _, g := range gws {
			st := g.app.Engine().Store().Stats()
			w.st.Commits, w.st.Updates = w.st.Commits+st.Commits, w.st.Updates+st.Updates
			if ps, ok := g.app.Engine().Store().(*pg.Store); ok {
				t := ps.Times()
				w.times.Groups, w.times.Begin, w.times.Trips, w.times.Commit = w.times.Groups+t.Groups, w.times.Begin+t.Begin, w.times.Trips+t.Trips, w.times.Commit+t.Commit
				used, _ := ps.HeadStarts()
				w.heads += used
				wg, wu, wk, wm := ps.WaitRuns()
				w.waits = [4]uint64{w.waits[0] + wg, w.waits[1] + wu, w.waits[2] + wk, w.waits[3] + wm}
				r := ps.Reads()
				w.reads.Views, w.reads.Begun, w.reads.Trips = w.reads.Views+r.Views, w.reads.Begun+r.Begun, w.reads.Trips+r.Trips
				w.reads.Recent, w.reads.Stale, w.reads.Missed = w.reads.Recent+r.Recent, w.reads.Stale+r.Stale, w.reads.Missed+r.Missed
			}
		}
		return w
	}
	w0 := writers()
	stop3, err := startProfile(o, "cluster3.pprof")
	if err != nil {
		return nil, err
	}
	lr3, cpu3, wall3, all3, checked3, err := measure(gws, nil)
	prof3 := stop3()
	if err != nil {
		return nil, fmt.Errorf("three gateways on PostgreSQL: %w", err)
	}
	rate3 := lr3.Rate()
	var replays uint64
	for _, g := range gws {
		replays += g.app.Engine().Store().Stats().Replays
	}
	three.Measured = fmt.Sprintf("%s calls/s, p50 %s, p99 %s: %.2f× one gateway", thousands(int64(rate3)), ms(lr3.Lat.P(0.5)), ms(lr3.Lat.P(0.99)), rate3/rate1)
	w1 := writers()
	commits3 := w1.st.Commits - w0.st.Commits
	three.Notes = append(three.Notes, checked3, fmt.Sprintf("%d groups ran again after a serialization conflict, over all three gateways and both loads", replays),
		fmt.Sprintf("the three writers: %.2f updates per call answered, %.1f updates per commit, %.0f groups a second in all; ", perCall, float64(w1.st.Updates-w0.st.Updates)/float64(max(commits3, 1)), float64(commits3)/(lr3.Elapsed+warmUp(o)).Seconds())+
			timesNote(pg.WriterTimes{Groups: w1.times.Groups - w0.times.Groups, Begin: w1.times.Begin - w0.times.Begin, Trips: w1.times.Trips - w0.times.Trips, Commit: w1.times.Commit - w0.times.Commit}, commits3)+
			fmt.Sprintf("; %.0f%% of groups begun in the COMMIT's round trip of the group before", 100*float64(w1.heads-w0.heads)/float64(max(commits3, 1)))+
			fmt.Sprintf("; %d groups ran %d updates while their writer waited for the lock, %d of which stood once it held it (%d rows moved onto the other writers' values)",
				w1.waits[0]-w0.waits[0], w1.waits[1]-w0.waits[1], w1.waits[2]-w0.waits[2], w1.waits[3]-w0.waits[3]),
		readsNote(w0.reads, w1.reads, lr3.Calls),
		fmt.Sprintf("CPU: %.0f%% of %d cores busy, %.0f µs per call answered, warm-up included (the three gateways and their clients: one process)",
			100*cpu3.Seconds()/wall3.Seconds()/float64(runtime.NumCPU()), runtime.NumCPU(), float64(cpu3.Microseconds())/float64(max(all3, 1))))
	if pgCPU >= 0 {
		three.Notes = append(three.Notes, fmt.Sprintf("PostgreSQL's server: %.0f%% of %d cores, %.0f µs per call answered (one gateway's above)",
			100*pgCPU.Seconds()/wall3.Seconds()/float64(runtime.NumCPU()), runtime.NumCPU(), float64(pgCPU.Microseconds())/float64(max(all3, 1))))
	}
	if mAll > 0 {
		three.Notes = append(three.Notes, machineNote(mBusy, mAll))
	}
	// What a call cost the machine's cores, the gateways' process and
	// PostgreSQL's server, in [11] and in [10].
	perCall3 := float64(cpu3.Microseconds()) / float64(max(all3, 1))
	costs := ""
	if pgCPU >= 0 && pgCPU1 >= 0 {
		perCall3 += float64(pgCPU.Microseconds()) / float64(max(all3, 1))
		per1 := cpuPer1 + float64(pgCPU1.Microseconds())/float64(max(all1, 1))
		costs = fmt.Sprintf(": a call cost %.0f µs of CPU here (the gateways' process and PostgreSQL's server), %.0f µs with one gateway (%+.0f%%)", perCall3, per1, 100*(perCall3/per1-1))
	}
	three.Notes = append(three.Notes, "three gateways share this machine's two cores with PostgreSQL and the clients: the row shows what contention costs, not the sum of three machines")
	if prof3 != "" {
		three.Notes = append(three.Notes, prof3)
	}
	three.judge(rate3 >= targetThreeOnOne*rate1, "the gateways' writers take turns under one lock (the journal's one chain), a group at a time, each begun in a round trip of its own; three writers commit smaller groups than one (updates per commit above), each reading the others' log and moving its run onto their changes"+costs)

	// [12]: the store alone, three writers.
	url, err = createDB("ceiling")
	if err != nil {
		return nil, err
	}
	rate, note, err := storeCeiling(ctx, url, o)
	if err != nil {
		return nil, fmt.Errorf("the store's ceiling: %w", err)
	}
	perCore := rate1 / max(cpu1.Seconds()/wall1.Seconds(), 0.01)
	ceiling.Measured = fmt.Sprintf("%s settlements/s", thousands(int64(rate)))
	ceiling.Notes = append(ceiling.Notes, note, fmt.Sprintf("capacity model: N gateways give min(N × %s calls/s per core of a gateway (row [10]: calls/s over the cores its process used) × its cores, %s/s); on this 2-core machine, with PostgreSQL beside them, N gateways cannot show their sum",
		thousands(int64(perCore)), thousands(int64(rate))))
	ceiling.Verdict = "ok"
	return rows, nil
}

// storeCeiling settles calls through holon.Store from three handles on one
// database, Clients goroutines over them, each call the updates a settled
// call writes: its receipt, its hold and reservation, then its
// settlement, budget, event and release.
func storeCeiling(ctx context.Context, url string, o Options) (float64, string, error) {
	var stores []*pg.Store
	for range 3 {
		s, err := pg.Open(ctx, url, holon.StoreOptions{})
		if err != nil {
			return 0, "", err
		}
		defer s.Close()
		stores = append(stores, s)
	}
	price := journal.MustParseAmount(callPrice)
	shares, err := journal.Split(price, "bench", nil)
	if err != nil {
		return 0, "", err
	}
	var settled atomic.Int64
	lr, err := runLoad(ctx, o.Clients, warmUp(o), o.Duration, func(ctx context.Context, c int) error {
		s := stores[c%len(stores)]
		payer, mandate := fmt.Sprintf("p%02d", c%benchPayers), mandateID(c)
		var id string
		err := s.Update(ctx, func(tx holon.Tx) (err error) {
			if id, err = tx.NewReceiptID(); err != nil {
				return err
			}
			if err := tx.PutReceipt(&holon.Receipt{ID: id, Mandate: mandate, Caller: payer, Status: holon.StatusRunning, Payer: payer, Currency: "EUR", Created: tx.Now()}); err != nil {
				return err
			}
			if err := tx.AddBudget(mandate, 0, price); err != nil {
				return err
			}
			if err := tx.AddHeld(payer, price); err != nil {
				return err
			}
			return tx.PutHold(&holon.Hold{Receipt: id, Payer: payer, Amount: price, Mandate: mandate, Reserved: price, Started: tx.Now()})
		})
		if err != nil {
			return err
		}
		err = s.Update(ctx, func(tx holon.Tx) error {
			e, err := journal.Settlement("settle:"+id, payer, shares)
			if err != nil {
				return err
			}
			if err := tx.PostEntry(e); err != nil {
				return err
			}
			if err := tx.AddBudget(mandate, price, -price); err != nil {
				return err
			}
			if err := tx.AddHeld(payer, -price); err != nil {
				return err
			}
			if err := tx.PostEvent(holon.Event{Receipt: id, Agent: agentEcho + "@1.0.0", Status: holon.StatusSucceeded, Billed: price, Currency: "EUR", Time: tx.Now()}, true); err != nil {
				return err
			}
			return tx.DeleteHold(id)
		})
		if err == nil {
			settled.Add(1)
		}
		return err
	})
	if err != nil {
		return 0, "", err
	}
	var replays, commits, updates, trips, stmts uint64
	var waits [4]uint64
	var times pg.WriterTimes
	for _, s := range stores {
		wg, wu, wk, wm := s.WaitRuns()
		waits = [4]uint64{waits[0] + wg, waits[1] + wu, waits[2] + wk, waits[3] + wm}
		wt := s.Times()
		times.Groups, times.Begin, times.Trips, times.Commit = times.Groups+wt.Groups, times.Begin+wt.Begin, times.Trips+wt.Trips, times.Commit+wt.Commit
		st := s.Stats()
		replays, commits, updates = replays+st.Replays, commits+st.Commits, updates+st.Updates
		t, n := s.RoundTrips()
		trips, stmts = trips+t, stmts+n
	}
	err = stores[0].View(func(tx holon.Tx) error {
		if hs, err := tx.Holds(); err != nil || len(hs) != 0 {
			return fmt.Errorf("%d holds left (%v)", len(hs), err)
		}
		return tx.(*pg.Tx).VerifyJournal()
	})
	if err != nil {
		return 0, "", err
	}
	return lr.Rate(), fmt.Sprintf("%s calls settled in two updates each from %d clients over 3 handles (%d cores): %.1f updates per commit, %s; %d groups ran again after a serialization conflict; journal verified, no hold left; %s; %d groups ran %d updates while their writer waited for the lock, %d of which stood once it held it (%d rows moved: a reservation takes a receipt id, which it sees, so it stands only where no other writer wrote in between)",
		thousands(settled.Load()), o.Clients, runtime.NumCPU(), float64(updates)/float64(max(commits, 1)), tripsNote(trips, stmts, updates), replays, timesNote(times, commits),
		waits[0], waits[1], waits[2], waits[3]), nil
}

// machineNote says how busy the machine's cores were in a row's windows,
// every process's work counted (the load's, the database's, the kernel's).
func machineNote(busy, all time.Duration) string {
	return fmt.Sprintf("the machine's %d cores, every process: %.0f%% busy in the row's windows", runtime.NumCPU(), 100*busy.Seconds()/all.Seconds())
}

// tripsNote says how many round trips and statements an update of the
// PostgreSQL store took.
func tripsNote(trips, stmts, updates uint64) string {
	u := float64(max(updates, 1))
	return fmt.Sprintf("%.1f round trips per update carrying %.1f statements", float64(trips)/u, float64(stmts)/u)
}

// readsNote says what the PostgreSQL store's reads (View) cost between
// two of its counts, over calls measured calls (warm-up included in the
// counts, so per call is an upper bound).
func readsNote(before, after pg.Reads, calls int) string {
	v, trips := after.Views-before.Views, after.Trips-before.Trips
	return fmt.Sprintf("the store's reads: %.1f round trips per View (its end included), %.0f%% of Views reached the database, %.1f read round trips per measured call; admissions read from the writer's memory: %s (%s declined as too old, %s for a row it did not hold)",
		float64(trips)/float64(max(v, 1)), 100*float64(after.Begun-before.Begun)/float64(max(v, 1)), float64(trips)/float64(max(calls, 1)),
		thousands(int64(after.Recent-before.Recent)), thousands(int64(after.Stale-before.Stale)), thousands(int64(after.Missed-before.Missed)))
}

// timesNote says where the PostgreSQL store's writers spent a commit's
// time.
func timesNote(t pg.WriterTimes, commits uint64) string {
	c := time.Duration(max(commits, 1))
	return fmt.Sprintf("a group's time: %s in all, %s beginning it (the writers' lock and log), %s in its updates' round trips, %s committing, %s in the updates' own work",
		ms(t.Groups/c), ms(t.Begin/c), ms(t.Trips/c), ms(t.Commit/c), ms((t.Groups-t.Begin-t.Trips-t.Commit)/c))
}
