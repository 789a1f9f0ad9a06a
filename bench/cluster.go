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
// gateways with the same load spread over them, as a share of one; three
// gateways each on a database of its own on the same server, the bound
// for writers whose turns overlap on this machine; and the store's own
// ceiling, settlements through holon.Store from three writers
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
	apart := &Result{
		Name:   fmt.Sprintf("[11b] three gateways, each on a database of its own on [11]'s server, the same %d clients spread over them: no row and no lock shared", o.Clients),
		Target: "printed: the bound for writers whose turns overlap on this machine (its cores, its disk's flushes and one server's WAL shared as in [11])",
	}
	ceiling := &Result{
		Name:   "[12] the PostgreSQL store's ceiling: a call's updates through holon.Store from three writers at once, no HTTP",
		Target: "printed, with the capacity model it gives",
	}
	rows := []*Result{one, three, apart, ceiling}
	srvOpts := pgserver.Options{Durable: true}
	if o.PGStatements {
		srvOpts.Settings = pgStatementsSettings
	}
	srv, err := pgserver.Start(ctx, srvOpts)
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

	// [10] and [11]: the same database, one gateway and three.
	url, err := createDB("gateways")
	if err != nil {
		return nil, err
	}
	// Each load's statements, counted in its own blocks.
	var stmts *pgStatements
	stmts1, stmts3 := stmtStats{}, stmtStats{}
	if o.PGStatements {
		if stmts, err = openPGStatements(ctx, srv.URL("postgres"), "gateways"); err != nil {
			return nil, err
		}
		defer stmts.Close()
	}
	var holder *lockHolder
	holder1, holder3 := lockSamples{}, lockSamples{}
	if o.PGLockHolder {
		holder = &lockHolder{url: url}
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
	// [11b]: three more gateways, each on a database of its own, so that
	// no row, no lock and no writers' log is shared; what they still
	// share with [11] is the machine: its cores, the server and its WAL.
	var apartGws []*benchGateway
	defer func() {
		for _, g := range apartGws {
			g.Close()
		}
	}()
	for i := range 3 {
		u, err := createDB(fmt.Sprintf("apart%d", i))
		if err != nil {
			return nil, err
		}
		g, err := openGateway(ctx, gatewayConfig{dir: fmt.Sprintf("%s/cluster/apart%d", o.Dir, i), store: u})
		if err != nil {
			return nil, err
		}
		apartGws = append(apartGws, g)
	}
	pid, pidErr := srv.PID()
	if pidErr != nil {
		pid = -1 // no process is: its CPU is not known
	}
	// [10], row [2]'s design (a database of its own on this row's server)
	// and [11] run in blocks, in turns, a different one first in each
	// round: this VM's disk answers PostgreSQL's flushes at speeds that
	// differ by two in runs minutes apart, and every load waits for them,
	// so each ratio compares loads run side by side.
	blocks, blockDur, blockWarm := alternatingBlocks(o, hostedBlocks)
	one1, three3, apart3 := newSide(gws[:1], o.Clients), newSide(gws, o.Clients), newSide(apartGws, o.Clients)
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
		exRates         []float64     // each block's calls/s
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
		exRates = append(exRates, r.Rate())
		return err
	}
	before, err := gws[0].money()
	if err != nil {
		return nil, err
	}
	apartBefore := make([]moneyState, len(apartGws))
	for i, g := range apartGws {
		if apartBefore[i], err = g.money(); err != nil {
			return nil, err
		}
	}
	stop, err := startProfile(o, "cluster.pprof")
	if err != nil {
		return nil, err
	}
	err = rotate(blocks,
		func(int) error {
			return holder.around(ctx, holder1, func() error {
				return stmts.around(ctx, stmts1, func() error { return one1.block(ctx, o.Clients, pid, gws, blockWarm, blockDur) })
			})
		},
		exBlock,
		func(int) error {
			return holder.around(ctx, holder3, func() error {
				return stmts.around(ctx, stmts3, func() error { return three3.block(ctx, o.Clients, pid, gws, blockWarm, blockDur) })
			})
		},
		func(int) error { return apart3.block(ctx, o.Clients, pid, apartGws, blockWarm, blockDur) })
	prof := stop()
	if err != nil {
		return nil, fmt.Errorf("gateways on PostgreSQL: %w", err)
	}
	checked, err := gws[0].checkMoney(before, int(one1.answered()+three3.answered()))
	if err != nil {
		return nil, fmt.Errorf("gateways on PostgreSQL: %w", err)
	}
	checked += " (both rows' calls)"
	var apartChecked []string
	for i, g := range apartGws {
		c, err := g.checkMoney(apartBefore[i], int(apart3.callers[i].answered()))
		if err != nil {
			return nil, fmt.Errorf("gateway %d of [11b]: %w", i, err)
		}
		apartChecked = append(apartChecked, c)
	}
	exChecked, err := ex.check(ctx)
	if err != nil {
		return nil, fmt.Errorf("row [2]'s design beside the gateways: %w", err)
	}
	rate1, rate3 := one1.lr.Rate(), three3.lr.Rate()
	blocksNote := fmt.Sprintf("%d rounds of blocks of %s (after %s of warm-up), one gateway's load, row [2]'s design's (a database of its own on this row's server), three gateways' and [11b]'s three on databases of their own, in turns, a different one first in each round",
		blocks, blockDur, blockWarm)

	// [10]
	w := one1.w
	one.Measured = fmt.Sprintf("%s calls/s, p50 %s, p99 %s", thousands(int64(rate1)), ms(one1.lr.Lat.P(0.5)), ms(one1.lr.Lat.P(0.99)))
	one.Notes = append(one.Notes, checked, fmt.Sprintf("the store's writer: %.2f updates per call answered, %.1f updates per commit, %s, %d groups ran again after a serialization conflict",
		float64(w.updates)/float64(max(one1.answered(), 1)), float64(w.updates)/float64(max(w.commits, 1)), tripsNote(uint64(w.trips), uint64(w.stmts), uint64(w.updates)), w.replays),
		cpuNote(one1.cpu, one1.wall, one1.answered()))
	if one1.pg >= 0 {
		one.Notes = append(one.Notes, fmt.Sprintf("PostgreSQL's server: %.0f%% of %d cores, %.0f µs per call (row [2]'s design's below)",
			100*one1.pg.Seconds()/one1.wall.Seconds()/float64(runtime.NumCPU()), runtime.NumCPU(), one1.perCall(one1.pg)))
	}
	if one1.mAll > 0 {
		one.Notes = append(one.Notes, machineNote(one1.mBusy, one1.mAll))
	}
	one.Notes = append(one.Notes, one1.sched.note())
	one.Notes = append(one.Notes, timesNote(w.times(), uint64(w.commits))+fmt.Sprintf("; %.0f%% of groups begun in the COMMIT's round trip of the group before (%d more begun so and ended unused), %d run again safely; %d groups (%d updates) ran while the COMMIT before them was in flight, %d such runs dropped",
		100*float64(w.heads)/float64(max(w.commits, 1)), w.idleHeads, w.safe, w.specGroups, w.specUpdates, w.specD),
		readsNote(pg.Reads{}, w.reads(), one1.lr.Calls), w.poolNote())
	if prof != "" {
		one.Notes = append(one.Notes, prof, "the profile covers the blocks of row [2]'s design (its clients' work is under bench.(*experts).load) and of [11] too")
	}
	ratio := rate1 / exLoad.Rate()
	one.Measured += fmt.Sprintf("; row [2]'s design on the same server in the blocks between, %s calls/s (a pool of %d): %.2f× (round by round: %s)", thousands(int64(exLoad.Rate())), exConns, ratio,
		roundRatios(one1.rates, exRates))
	if b.pgRate > 0 {
		one.Measured += fmt.Sprintf("; row [2]'s own run, %s calls/s: %.2f×", thousands(int64(b.pgRate)), rate1/b.pgRate)
	}
	if stmts != nil {
		one.Notes = append(one.Notes, stmts1.note(one1.answered(), 8))
	}
	if holder != nil {
		one.Notes = append(one.Notes, holder1.note(10))
	}
	one.Notes = append(one.Notes, blocksNote+"; "+exChecked)
	if exOK && exN > 0 {
		one.Notes = append(one.Notes, fmt.Sprintf("CPU per call of row [2]'s design in its blocks: its server %.0f µs, its clients in this process %.0f µs",
			float64(exServer.Microseconds())/float64(exN), float64(exCPU.Microseconds())/float64(exN)))
	}
	if len(exProbes) > 0 {
		one.Notes = append(one.Notes, "row [2]'s pool, the best of a short probe (connections: calls/s): "+strings.Join(exProbes, ", "))
	}
	one.judge(ratio >= targetOneOnPG, "one writer, a group at a time: a group's statements and its COMMIT's deferred checks run one after the other on one server process (a group's time above), where row [2] sends one prepared function per call on many connections at once and keeps no chain, holds, counters or event log; and the gateway, its clients and PostgreSQL share this machine's cores: the gateway's HTTP, JSON, engine and driver (its CPU per call above) come on top of the database's work, where row [2]'s clients cost little (both designs' CPU per call above)")

	// [11]
	w = three3.w
	three.Measured = fmt.Sprintf("%s calls/s, p50 %s, p99 %s: %.2f× one gateway in the blocks between (round by round: %s)", thousands(int64(rate3)), ms(three3.lr.Lat.P(0.5)), ms(three3.lr.Lat.P(0.99)), rate3/rate1,
		roundRatios(three3.rates, one1.rates))
	three.Notes = append(three.Notes, checked, fmt.Sprintf("%d groups ran again after a serialization conflict, over all three gateways", w.replays),
		three3.writersNote()+
			fmt.Sprintf("; %d groups ran %d updates while their writer waited for the lock, %d of which stood once it held it (%d rows moved onto the other writers' values)",
				w.waitG, w.waitU, w.waitK, w.waitM),
		readsNote(pg.Reads{}, w.reads(), three3.lr.Calls), w.poolNote())
	three.Notes = append(three.Notes, three3.machineNotes(" (one gateway's above)")...)
	costs := ""
	if three3.pg >= 0 {
		if one1.pg >= 0 {
			// What a call cost the machine's cores, the gateways' process
			// and PostgreSQL's server, here and with one gateway.
			per3, per1 := three3.perCall(three3.cpu+three3.pg), one1.perCall(one1.cpu+one1.pg)
			costs = fmt.Sprintf(": a call cost %.0f µs of CPU here (the gateways' process and PostgreSQL's server), %.0f µs with one gateway (%+.0f%%)", per3, per1, 100*(per3/per1-1))
		}
	}
	if stmts != nil {
		three.Notes = append(three.Notes, stmts3.note(three3.answered(), 8))
	}
	if holder != nil {
		three.Notes = append(three.Notes, holder3.note(10))
	}
	three.Notes = append(three.Notes, blocksNote,
		"three gateways share this machine's two cores with PostgreSQL and the clients: the row shows what contention costs, not the sum of three machines")
	why := "the gateways' writers overlap, with no lock between them (each gateway's groups run and commit while the others' do, and the database judges every balance and budget at each commit; a writer's idea of the rows the others move lags by up to a second: the manual's performance page); each gateway has a third of the clients, so its groups are smaller than one gateway's (updates per commit above) and what a group costs whatever its size is paid more often, on two cores that the three gateways, their clients and PostgreSQL share (how busy they were above): row [11b], three gateways that share nothing, is what this machine gives such writers"
	if pg.TurnsFromEnv() {
		why = turnsWhy
	}
	three.judge(rate3 >= targetThreeOnOne*rate1, why+costs)

	// [11b]
	rateApart := apart3.lr.Rate()
	apart.Measured = fmt.Sprintf("%s calls/s, p50 %s, p99 %s: %.2f× one gateway in the blocks between (round by round: %s); [11] is %.2f× this",
		thousands(int64(rateApart)), ms(apart3.lr.Lat.P(0.5)), ms(apart3.lr.Lat.P(0.99)), rateApart/rate1, roundRatios(apart3.rates, one1.rates), rate3/rateApart)
	apart.Notes = append(apart.Notes, strings.Join(apartChecked, "; "), apart3.writersNote())
	apart.Notes = append(apart.Notes, apart3.machineNotes("")...)
	apart.Notes = append(apart.Notes, blocksNote,
		"each gateway is alone on its database, so each writer pipelines its groups as [10]'s does (its next group begun in its COMMIT's round trip) and none waits for another's turn: what [11] would be if its writers' turns overlapped whole, with no row, lock or chain between them; the machine they share is what is left")
	apart.Verdict = "ok"

	// [12]: the store alone, three writers.
	url, err = createDB("ceiling")
	if err != nil {
		return nil, err
	}
	rate, note, err := storeCeiling(ctx, url, o)
	if err != nil {
		return nil, fmt.Errorf("the store's ceiling: %w", err)
	}
	perCore := rate1 / max(one1.cpu.Seconds()/one1.wall.Seconds(), 0.01)
	ceiling.Measured = fmt.Sprintf("%s settlements/s", thousands(int64(rate)))
	ceiling.Notes = append(ceiling.Notes, note, fmt.Sprintf("capacity model: N gateways give min(N × %s calls/s per core of a gateway (row [10]: calls/s over the cores its process used) × its cores, %s/s); on this 2-core machine, with PostgreSQL beside them, N gateways cannot show their sum",
		thousands(int64(perCore)), thousands(int64(rate))))
	ceiling.Verdict = "ok"
	return rows, nil
}

// turnsWhy is [11]'s reason when the writers take turns under the
// writers' lock (HOLON_PG_TURNS=1).
const turnsWhy = "the gateways' writers take turns under one lock (which keeps each writer's memory of the rows true; taken out with nothing in its place, three gateways measured 0.90-0.97× one, but their memories were then wrong; built whole without it, each group reading the others' changes as it begins (three variants), they measured 0.31-0.41×, before the moved rows were left out of the log, their groups half as large, rows read again and waited for: the manual's performance page), a group at a time: each turn holds the lock for a round trip to its gateway (the others' log read, its run moved onto their changes, its writes rendered and sent) and for its COMMIT, whatever the group's size; each gateway has a third of the clients, so its groups are smaller than one gateway's (updates per commit above) and a call waits for the turns of all three, where one gateway's waits for two of its own groups"

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
	// The payers are funded first, as a gateway's are: a store refuses
	// a reservation beyond what is available (holon.Overdrafts).
	err = stores[0].Update(ctx, func(tx holon.Tx) error {
		for i := range benchPayers {
			e, err := journal.Transfer(fmt.Sprintf("signup:p%02d", i), "external:demo-credit", fmt.Sprintf("p%02d", i), journal.MustParseAmount("1000000"))
			if err != nil {
				return err
			}
			if err := tx.PostEntry(e); err != nil {
				return err
			}
		}
		return nil
	})
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
	return lr.Rate(), fmt.Sprintf("%s calls settled in two updates each from %d clients over 3 handles (%d cores): %.1f updates per commit, %s; %d groups ran again after a serialization conflict; journal verified, no hold left; %s; %d groups ran %d updates while their writer waited for the lock, %d of which stood once it held it (%d rows moved onto the other writers' values)",
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
