package bench

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"holon.dev/holon/backup/pgserver"
	"holon.dev/holon/journal"
)

// targetPGRatio is how many times the PostgreSQL design's throughput Holon
// must reach.
const targetPGRatio = 2.5

// pgSchema is the PostgreSQL design of a settled call, as its experts
// would build it (see the file's comments).
//
//go:embed postgres.sql
var pgSchema string

// postgres measures a settled call in PostgreSQL built the way its experts
// build it (postgres.sql): one transaction per call through a prepared
// function; the entry's lines as two arrays with a CHECK that they sum to
// zero, no trigger; credits appended as lines, never updating a shared
// balance; each payer's balance and each budget split over one row per
// pool connection, debited by a guarded UPDATE; every foreign-key column
// indexed; prepared statements; the server's durable defaults (fsync,
// synchronous_commit on). Clients goroutines share a pool whose size is
// the best of a short probe from one connection per core to one per
// client: with
// synchronous commits, more backends share each WAL flush, and on a slow
// disk that can beat a pool sized to the cores.
func (b *bench) postgres(ctx context.Context) ([]*Result, error) {
	o := b.o
	res := &Result{
		Name:   fmt.Sprintf("[2] a settled call in PostgreSQL built by its experts: one transaction through a prepared function, %d clients on a pool of connections, fsync on", o.Clients),
		Target: fmt.Sprintf("Holon (row 1) ≥ %.1f× its throughput", targetPGRatio),
	}
	pg, err := pgserver.Start(ctx, pgserver.Options{Durable: true})
	if errors.Is(err, pgserver.ErrNotInstalled) {
		res.Verdict = "skipped: install postgresql (" + pgserver.Install + ")"
		return []*Result{res}, nil
	}
	if err != nil {
		return nil, err
	}
	defer pg.Stop()
	ex, err := openExperts(ctx, pg.URL("postgres"), o)
	if err != nil {
		return nil, err
	}
	defer ex.Close()
	conns, probes, err := ex.probe(ctx)
	if err != nil {
		return nil, err
	}
	b.pgConns = conns
	pid, pidErr := pg.PID()
	// The measured window alternates with row 1's load on a dev gateway,
	// block by block, each side first in every other block, so that the
	// machine's drift (this VM's disk answers PostgreSQL's flushes at
	// speeds that differ by two in runs minutes apart) falls on both
	// sides alike: the ratio is read against those blocks, and against
	// row 1's own run.
	dev, dc, devBefore, err := openDevBeside(ctx, o, "postgres-dev")
	if err != nil {
		return nil, err
	}
	defer dev.Close()
	blocks, blockDur, warm := alternatingBlocks(o, hostedBlocks)
	var (
		lr, dr     loadResult
		pgCPU, own time.Duration
		n0, n      int64
		pgOK       = pidErr == nil
		wall       time.Duration
	)
	runPG := func(int) error {
		p0, ok0 := treeCPU(pid)
		c0, t0, s0 := cpuTime(), time.Now(), ex.sum()
		r, err := ex.load(ctx, conns, warm, blockDur)
		if err != nil {
			return fmt.Errorf("postgres settlements: %w", err)
		}
		p1, ok1 := treeCPU(pid)
		pgCPU += p1 - p0
		own += cpuTime() - c0
		wall += time.Since(t0)
		n0, n = n0+s0, n+ex.sum()
		pgOK = pgOK && ok0 && ok1
		lr = lr.add(r)
		return nil
	}
	runDev := func(int) error { return dc.block(ctx, o.Clients, warm, blockDur, &dr, "PostgreSQL's") }
	if err := rotate(blocks, runDev, runPG); err != nil {
		return nil, err
	}
	checked, err := ex.check(ctx)
	if err != nil {
		return nil, err
	}
	if _, err := dev.checkMoney(devBefore, int(dc.answered())); err != nil {
		return nil, fmt.Errorf("the dev gateway beside PostgreSQL: %w", err)
	}
	res.Measured = fmt.Sprintf("PostgreSQL %s, a pool of %d connections: %s settled calls/s (p50 %s, p99 %s)", pgVersion(ctx, ex.all[0].Conn), conns, thousands(int64(lr.Rate())), ms(lr.Lat.P(0.5)), ms(lr.Lat.P(0.99)))
	res.Notes = append(res.Notes, "the pool's size, the best of a short probe (connections: calls/s): "+strings.Join(probes, ", "), checked,
		"PostgreSQL's figure is the call's transaction alone, from clients in this process; Holon's (row 1) is whole calls over HTTP: its JSON, admission, the in-process agent's run, the call event, the agent's record, latency, earnings and the journal's hash chain, which row [2] does not do")
	if pgOK {
		calls := n - n0
		b.pgCPU = cpuShare{calls: calls, cpu: pgCPU + own, wall: wall}
		res.Notes = append(res.Notes, fmt.Sprintf("CPU during the load: PostgreSQL's server %.0f%% of %d cores (%d backends), its clients in this process %.0f%%; %s calls per CPU-second in all",
			100*pgCPU.Seconds()/wall.Seconds()/float64(runtime.NumCPU()), runtime.NumCPU(), conns, 100*own.Seconds()/wall.Seconds()/float64(runtime.NumCPU()), thousands(int64(b.pgCPU.perSecond()))))
	}
	res.Notes = append(res.Notes, "load average at the row's end"+strings.TrimPrefix(loadAverage(), ", load average"))
	b.pgRate = lr.Rate()
	ratio := dr.Rate() / lr.Rate()
	res.Measured += fmt.Sprintf("; Holon: row 1's load on a dev gateway in the blocks between, %s calls/s: %.2f×", thousands(int64(dr.Rate())), ratio)
	if b.callsRate > 0 {
		res.Measured += fmt.Sprintf("; row 1's own run, %s calls/s: %.2f×", thousands(int64(b.callsRate)), b.callsRate/lr.Rate())
	}
	res.Notes = append(res.Notes, fmt.Sprintf("%d blocks of %s on each side, PostgreSQL's load and row 1's load on a dev gateway alternately, each side first in every other block", blocks, blockDur))
	if b.callsCPU.cpu > 0 && b.pgCPU.cpu > 0 {
		// A share of the machine is not the design's: on a loaded machine
		// the scheduler shares the cores per thread, and PostgreSQL's
		// backends are as many processes as connections, where Holon runs
		// on GOMAXPROCS threads. Per CPU-second, each is measured on the
		// CPU it got.
		res.Notes = append(res.Notes, fmt.Sprintf("per CPU-second (the cores each got: Holon's row 1 %.0f%% of %d, PostgreSQL's server and clients %.0f%%): Holon %s calls, PostgreSQL %s: %.2f×",
			100*b.callsCPU.share(), runtime.NumCPU(), 100*b.pgCPU.share(), thousands(int64(b.callsCPU.perSecond())), thousands(int64(b.pgCPU.perSecond())), b.callsCPU.perSecond()/b.pgCPU.perSecond()))
	}
	res.judge(ratio >= targetPGRatio, "each PostgreSQL call waits for one commit, whose WAL flush its backends share; each Holon call of row 1 waits for one durable bbolt commit too, its settlement's (the reservation is applied in the same commit or an earlier one, without the caller waiting for it), writing one store update to PostgreSQL's one transaction: row 1's writer note")
	return []*Result{res}, nil
}

// cpuShare is the CPU a load got: calls made, CPU time used, wall time.
type cpuShare struct {
	calls     int64
	cpu, wall time.Duration
}

// share is the part of the machine's cores the load used.
func (c cpuShare) share() float64 {
	return c.cpu.Seconds() / c.wall.Seconds() / float64(runtime.NumCPU())
}

// perSecond is the calls per CPU-second.
func (c cpuShare) perSecond() float64 { return float64(c.calls) / c.cpu.Seconds() }

// experts is PostgreSQL built by its experts (postgres.sql) on one
// database: a connection per client at most, and the calls each client
// settled.
type experts struct {
	o          Options
	all        []pgConn
	settled    []int64
	price      journal.Amount
	credTo     []string
	credAmt    []int64
	probeSizes []int
}

// openExperts creates the design in the database at url, funds the
// bench's payers and opens its connections.
func openExperts(ctx context.Context, url string, o Options) (*experts, error) {
	// The pool's size is the best of a short probe from one connection per
	// core up to one per client, as its experts would size it on this
	// machine.
	sizes := []int{min(runtime.NumCPU(), o.Clients)}
	for n := 2 * sizes[0]; n <= o.Clients; n *= 2 {
		sizes = append(sizes, n)
	}
	most := slices.Max(sizes)
	if err := seedPG(ctx, url, most); err != nil {
		return nil, err
	}
	e := &experts{o: o, settled: make([]int64, o.Clients), price: journal.MustParseAmount(callPrice), probeSizes: sizes}
	for slot := range most {
		c, err := pgx.Connect(ctx, url)
		if err != nil {
			e.Close()
			return nil, err
		}
		e.all = append(e.all, pgConn{c, slot})
	}
	shares, err := journal.Split(e.price, "bench", nil)
	if err != nil {
		e.Close()
		return nil, err
	}
	for _, s := range shares {
		e.credTo, e.credAmt = append(e.credTo, s.To), append(e.credAmt, int64(s.Amount))
	}
	return e, nil
}

// Close closes the connections.
func (e *experts) Close() {
	for _, c := range e.all {
		c.Close(context.Background())
	}
}

// load settles calls from the bench's clients over conns connections: a
// warm-up, then a window of dur.
func (e *experts) load(ctx context.Context, conns int, warm, dur time.Duration) (loadResult, error) {
	pool := make(chan pgConn, conns)
	for _, c := range e.all[:conns] {
		pool <- c
	}
	return runLoad(ctx, e.o.Clients, warm, dur, func(ctx context.Context, c int) error {
		pc := <-pool
		defer func() { pool <- pc }()
		var receipt int64
		err := pc.QueryRow(ctx, `SELECT settle_call($1, $2, $3, $4, $5, $6, $7)`,
			mandateID(c), fmt.Sprintf("p%02d", c%benchPayers), pc.slot, agentEcho+"@1.0.0", int64(e.price), e.credTo, e.credAmt).Scan(&receipt)
		if err != nil {
			return fmt.Errorf("settle_call: %w", err)
		}
		e.settled[c]++
		return nil
	})
}

// probe picks the pool's size: the one of the probe's sizes that settled
// the most calls in a short load. It returns each size's figure.
func (e *experts) probe(ctx context.Context) (conns int, probes []string, err error) {
	best := 0.0
	for _, n := range e.probeSizes {
		lr, err := e.load(ctx, n, warmUp(e.o)/4, max(e.o.Duration/5, 200*time.Millisecond))
		if err != nil {
			return 0, nil, fmt.Errorf("postgres settlements, %d connections: %w", n, err)
		}
		probes = append(probes, fmt.Sprintf("%d: %s/s", n, thousands(int64(lr.Rate()))))
		if lr.Rate() > best {
			conns, best = n, lr.Rate()
		}
	}
	return conns, probes, nil
}

// sum is the calls settled so far.
func (e *experts) sum() (n int64) {
	for _, s := range e.settled {
		n += s
	}
	return n
}

// check checks the money of every call settled.
func (e *experts) check(ctx context.Context) (string, error) {
	return checkPG(ctx, e.all[0].Conn, e.sum(), int64(e.price))
}

// pgConn is a pool connection and the balance and budget rows it owns.
type pgConn struct {
	*pgx.Conn
	slot int
}

// seedPG creates the design and funds the bench's payers: each payer's
// credit is a journal entry, its balance and its mandate's budget split
// evenly over slots rows.
func seedPG(ctx context.Context, url string, slots int) error {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, pgSchema); err != nil {
		return fmt.Errorf("apply bench/postgres.sql: %w", err)
	}
	credit := int64(journal.MustParseAmount("1000000.00"))
	for i := range benchPayers {
		payer, m := fmt.Sprintf("p%02d", i), mandateID(i)
		if _, err := conn.Exec(ctx, `SELECT seed_payer($1, $2, $3, $4)`, payer, m, credit, slots); err != nil {
			return fmt.Errorf("seed %s: %w", payer, err)
		}
	}
	// The journal's rule is the database's: an unbalanced entry is refused.
	_, err = conn.Exec(ctx, `INSERT INTO journal_entries (key, accounts, amounts) VALUES ('bench:unbalanced', ARRAY['p00', 'holon'], ARRAY[-1, 2]::bigint[])`)
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "23514" {
		return fmt.Errorf("an unbalanced entry was not refused by its CHECK: %v", err)
	}
	for _, q := range []string{`ANALYZE`, `CHECKPOINT`} {
		if _, err := conn.Exec(ctx, q); err != nil {
			return fmt.Errorf("%s: %w", q, err)
		}
	}
	return nil
}

// checkPG checks the money after the run: every settled call has its
// receipt and its entry, the lines of all entries sum to zero, every
// balance split over rows equals the sum of its account's lines, and the
// budgets spent what was billed.
func checkPG(ctx context.Context, conn *pgx.Conn, settled, price int64) (string, error) {
	var receipts, entries, lineSum, spent, bad int64
	err := conn.QueryRow(ctx, `SELECT
		(SELECT count(*) FROM receipts),
		(SELECT count(*) FROM journal_entries WHERE receipt IS NOT NULL),
		(SELECT coalesce(sum(a), 0) FROM journal_entries, unnest(amounts) a),
		(SELECT coalesce(sum(spent), 0) FROM budget_slots),
		(SELECT count(*) FROM (SELECT account, sum(balance) b FROM balance_slots GROUP BY account) s
			LEFT JOIN account_balances l USING (account) WHERE s.b <> coalesce(l.balance, 0))`).Scan(&receipts, &entries, &lineSum, &spent, &bad)
	if err != nil {
		return "", err
	}
	if receipts != settled || entries != settled || lineSum != 0 || spent != settled*price || bad != 0 {
		return "", fmt.Errorf("postgres: %d calls settled, but %d receipts, %d entries, lines sum to %d, budgets spent %d, %d balances differ from their lines",
			settled, receipts, entries, lineSum, spent, bad)
	}
	return fmt.Sprintf("money checked in PostgreSQL: %s receipts and entries for %s calls settled, lines sum to zero (and an unbalanced entry was refused by the CHECK), split balances equal their accounts' lines, budgets spent what was billed",
		thousands(receipts), thousands(settled)), nil
}

// pgVersion is the server's version, for the report.
func pgVersion(ctx context.Context, conn *pgx.Conn) string {
	var v string
	if err := conn.QueryRow(ctx, `SHOW server_version`).Scan(&v); err != nil {
		return "?"
	}
	return strings.Fields(v)[0]
}
