package drill

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"holon.dev/holon/backup/pgserver"
	"holon.dev/holon/journal"
)

// localAgent is the manifest of drill/lookup: the company register
// shipped with the gateway, run in its process, 0.01 a call.
const localAgent = `id: drill/lookup
version: 1.0.0
summary: Looks a company up in the register shipped with the gateway, in its process.
license: proprietary
interface:
  input: {type: object, required: [name], additionalProperties: false, properties: {name: {type: string, minLength: 1, maxLength: 200}}}
  output: {type: object}
  errors:
    not_found: {billed: false}
pricing: {model: per_run, amount: "0.01", currency: EUR}
runtime: {kind: dev, tool: company-lookup}
`

// outageCredit tops the cluster drill's spender up just before each
// PostgreSQL crash: a few calls' worth.
const outageCredit = "0.30"

// clusterLease is the gateways' lease in the cluster drill (--store-lease):
// a killed gateway's calls are closed by the others within 1.5 of it.
const clusterLease = 2 * time.Second

// clusterDrill runs three gateways on one PostgreSQL (holon serve --hosted
// --store postgres://…) under the crash drill's mixed load spread over
// them (plain, slow, delegated and approved calls, idempotent calls whose
// retries and re-sends go to another gateway, approvals decided on
// another gateway than the one that asked), and a second account whose
// balance runs out under calls through every gateway. Meanwhile it
// SIGKILLs gateways at random, restarting each on the same database, and
// crashes PostgreSQL itself (pg_ctl stop -m immediate, then start), once
// for less than a settlement waits and once for longer, each time just
// after the spender's balance was topped up by a few calls' worth. A watcher on every
// gateway samples budgets and balances throughout. At the end, with every
// gateway stopped: holon verify passes on the database, the journal sums
// to zero, every call answered 200 has its billed receipt and one settle:
// entry, the calls in flight at a kill were closed gateway_restarted and
// unbilled by the others, no Idempotency-Key ran twice, no hold is left,
// and no budget or balance was ever overspent.
func clusterDrill(ctx context.Context, d *drill) error {
	const gateways = 3
	kills := pick(d.o.Kills, d.o.Long, 6, 40)
	pgCrashes := pick(0, d.o.Long, 2, 8)
	clients := pick(d.o.Clients, d.o.Long, 12, 32)
	rng := rand.New(rand.NewPCG(uint64(d.o.Seed), 1))

	srv, err := pgserver.Start(ctx, pgserver.Options{Settings: []string{"synchronous_commit=on"}})
	if errors.Is(err, pgserver.ErrNotInstalled) {
		if d.o.Strict {
			return fmt.Errorf("the cluster drill needs PostgreSQL (HOLON_TEST_STRICT=1): %w; install it with: %s", err, pgserver.Install)
		}
		d.skipped = true
		d.note("skipped: the cluster drill needs PostgreSQL: %v; install it with: %s", err, pgserver.Install)
		return nil
	}
	if err != nil {
		return err
	}
	defer srv.Stop()
	url, err := createDB(ctx, srv, "holon")
	if err != nil {
		return err
	}

	agents, registry, err := d.startStandardAgents()
	if err != nil {
		return err
	}
	defer agents.close()
	if err := agents.writeRegistry(registry, agents.readerAgent()); err != nil {
		return err
	}
	// drill/lookup runs inside each gateway (the company register shipped
	// with it): its calls' reservations live in the gateway's memory.
	if err := writeManifest(registry, "lookup", localAgent); err != nil {
		return err
	}
	gs := make([]*gatewayProc, gateways)
	for i := range gs {
		dir := filepath.Join(d.dir, fmt.Sprintf("gateway%d", i+1))
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return err
		}
		g, err := d.newGateway(filepath.Join(dir, "holon.db"), registry)
		if err != nil {
			return err
		}
		g.args, g.keepLogs = []string{"--store", url, "--store-lease", clusterLease.String()}, true
		gs[i] = g
		defer func() {
			g.kill()
			// Kept with the work directory when the drill fails.
			_ = os.WriteFile(filepath.Join(dir, "stderr.log"), []byte(g.logs()), 0o600)
		}()
	}
	// They start at once: migrations, shipped agents and the start-up
	// recovery run on all three together.
	errs := make(chan error, gateways)
	for _, g := range gs {
		go func() { errs <- g.start(ctx) }()
	}
	for range gs {
		if err := <-errs; err != nil {
			return fmt.Errorf("start the gateways together: %w", err)
		}
	}
	apis := make([]*api, gateways)
	for i, g := range gs {
		apis[i] = newAPI(g.url, clients*2)
	}
	acc, err := apis[0].signup(ctx, "crasher", gs[0].adminKey, "100000.00")
	if err != nil {
		return err
	}
	totals := map[string]journal.Amount{
		"crasher/main":  journal.MustParseAmount("50000.00"),
		"crasher/tight": journal.MustParseAmount("0.30"),
	}
	spends := map[string]journal.Amount{"spender/all": journal.MustParseAmount("50.00")}
	if err := apis[1].mandate(ctx, acc, "main", "50000.00", "1.00", "0.50"); err != nil {
		return err
	}
	if err := apis[2].mandate(ctx, acc, "tight", "0.30", "1.00", ""); err != nil {
		return err
	}
	// spender holds the signup credit only (5.00): its balance runs out.
	spender, err := apis[2].signup(ctx, "spender", "", "")
	if err != nil {
		return err
	}
	if err := apis[0].mandate(ctx, spender, "all", "50.00", "1.00", ""); err != nil {
		return err
	}

	l := newCrashLoad(d, apis, acc, agents)
	l.local = "drill/lookup"
	loadCtx, stopLoad := context.WithCancel(ctx)
	var wg sync.WaitGroup
	l.start(loadCtx, &wg, clients)
	files := &clusterFiles{l: l, files: map[string]string{}}
	for w := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			files.run(loadCtx, rand.New(rand.NewPCG(uint64(d.o.Seed), uint64(w)+2000)))
		}()
	}
	for w := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l.spend(loadCtx, spender, rand.New(rand.NewPCG(uint64(d.o.Seed), uint64(w)+1000)))
		}()
	}
	for i := range apis {
		wg.Add(2)
		go func() {
			defer wg.Done()
			d.watch(loadCtx, apis[i], acc, totals)
		}()
		go func() {
			defer wg.Done()
			d.watch(loadCtx, apis[i], spender, spends)
		}()
	}
	stop := func() {
		stopLoad()
		wg.Wait()
	}

	// The blows, one after another: kills of a gateway at random, and
	// PostgreSQL's crashes spread among them.
	var inFlight []string
	events := kills + pgCrashes
	crashes := 0
	for e := range events {
		select {
		case <-time.After(time.Duration(400+rng.IntN(800)) * time.Millisecond):
		case <-ctx.Done():
			stop()
			return ctx.Err()
		}
		for i, g := range gs {
			select {
			case <-g.done():
				stop()
				return fmt.Errorf("gateway %d exited on its own before blow %d: %v\n%s", i+1, e+1, g.exitErr(), crashLog(g.logs()))
			default:
			}
		}
		if crashes < pgCrashes && rng.IntN(events-e) < pgCrashes-crashes {
			// Shorter than a settlement waits for the store, then longer.
			down := 1500 * time.Millisecond
			if crashes%2 == 1 {
				down = 6500 * time.Millisecond
			}
			crashes++
			// The spender's balance is topped up just before the crash,
			// so that calls on it are in flight when PostgreSQL goes down
			// and what is left of it runs out right after it is back: a
			// balance spent down across an outage (its watcher and the
			// end's checks see it never below zero).
			if _, err := apis[0].must(ctx, http.StatusOK, "POST", "/v0/admin/credit", gs[0].adminKey,
				map[string]string{"account": spender.handle, "amount": outageCredit, "reason": "drill: spent down across an outage"}); err != nil {
				stop()
				return fmt.Errorf("top the spender up before a PostgreSQL crash: %w", err)
			}
			d.count("spender top-ups just before a PostgreSQL crash", 1)
			time.Sleep(time.Duration(rng.IntN(20)) * time.Millisecond)
			d.countDeadlocks(ctx, url) // the crash forgets them
			if err := d.crashPostgres(ctx, srv, down); err != nil {
				stop()
				return err
			}
			continue
		}
		i := rng.IntN(gateways)
		g := gs[i]
		g.kill()
		d.count("SIGKILLs of a gateway (restarted on the same database)", 1)
		ids, err := heldBy(ctx, url, g.pid())
		if err != nil {
			stop()
			return fmt.Errorf("read the killed gateway's calls: %w", err)
		}
		inFlight = append(inFlight, ids...)
		d.count("calls in flight at a kill", int64(len(ids)))
		time.Sleep(time.Duration(rng.IntN(1000)) * time.Millisecond)
		if err := g.start(ctx); err != nil {
			stop()
			return fmt.Errorf("restart gateway %d after kill: %w", i+1, err)
		}
		if err := l.checkAPI(ctx, apis[(i+1)%gateways], totals); err != nil {
			stop()
			return err
		}
	}
	// The load runs on until the last killed gateway's calls are closed
	// by the others (its lease runs out) and those cut by an outage are
	// closed by their own gateway.
	time.Sleep(clusterLease*2 + 500*time.Millisecond)
	d.countDeadlocks(ctx, url)
	d.countLockWaits(srv)
	stop()
	for i, g := range gs {
		if err := g.stop(); err != nil {
			return fmt.Errorf("gateway %d: %w", i+1, err)
		}
	}
	for i, g := range gs {
		noted := 0
		for _, line := range strings.Split(g.logs(), "\n") {
			if strings.Contains(line, "settlement failed") && noted < 3 {
				d.note("gateway %d logged: %.500s", i+1, line)
				noted++
			}
		}
	}
	out, err := verifyPG(ctx, d.o.Holon, url)
	d.check("holon verify passes", err == nil, "%v:\n%s", err, tail(out, 1500))
	maps.Copy(spends, totals)
	v, err := readPG(ctx, url, spends)
	if err != nil {
		return err
	}
	d.checkView(v, spends)
	var sum journal.Amount
	for _, a := range v.accounts {
		sum += a.Balance
	}
	d.check("the journal sums to zero over every account", sum == 0, "the balances sum to %s", sum)
	d.check("the journal's hash chain verifies", v.chainErr == nil, "%v", v.chainErr)
	d.checkRestarted(v, inFlight, kills)
	l.checkAnswers(v, agents)
	d.floor("calls answered 200", int64(20*events))
	d.floor("calls in flight at a kill", int64(max(kills/3, 1)))
	d.floor("approvals decided on another gateway", 1)
	d.floor("idempotent calls re-sent to another gateway after their 200", 1)
	d.floor("calls answered 503 store_unavailable (PostgreSQL down)", int64(pgCrashes))
	d.floor("spender calls refused insufficient_funds", 1)
	d.floor("spender top-ups just before a PostgreSQL crash", int64(pgCrashes))
	d.floor("spender calls to an agent inside the gateway answered 200", 1)
	d.floor("files read through another gateway than their upload's", 5)
	d.note("%d gateways on one PostgreSQL (lease %v), %d kills, %d PostgreSQL crashes", gateways, clusterLease, kills, pgCrashes)
	return nil
}

// crashPostgres stops PostgreSQL at once (pg_ctl stop -m immediate),
// keeps it down for down, and starts it again.
func (d *drill) crashPostgres(ctx context.Context, srv *pgserver.Server, down time.Duration) error {
	if err := srv.Crash(); err != nil {
		return err
	}
	d.count("PostgreSQL crashes (pg_ctl stop -m immediate, then start)", 1)
	d.logf("PostgreSQL down for %v", down)
	select {
	case <-time.After(down):
	case <-ctx.Done():
		return ctx.Err()
	}
	return srv.Restart(ctx)
}

// createDB creates an empty database on srv and returns its URL.
func createDB(ctx context.Context, srv *pgserver.Server, name string) (string, error) {
	conn, err := pgx.Connect(ctx, srv.URL("postgres"))
	if err != nil {
		return "", err
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		return "", err
	}
	return srv.URL(name), nil
}

// countDeadlocks counts the deadlocks PostgreSQL detected between the
// gateways' transactions on url's database since the server started
// (pg_stat_database, which a backend updates about once a second, so the
// count is a floor; a crash forgets them, so it is read before each
// one): each held its transactions for deadlock_timeout (a second by
// default) before one of them was refused and its group ran again. A
// gateways' group gives up a wait before that (countLockWaits), so a
// deadlock counted here had a transaction of another kind in it. A
// figure, not a check.
func (d *drill) countDeadlocks(ctx context.Context, url string) {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return
	}
	defer conn.Close(ctx)
	var n int64
	if conn.QueryRow(ctx, `SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()`).Scan(&n) == nil {
		d.count("deadlocks PostgreSQL detected between gateways' transactions", n)
	}
}

// countLockWaits counts the waits for a row's lock that the gateways'
// groups gave up (the store's lock_timeout, which PostgreSQL logs as the
// statement's error) and ran again: a deadlock between two groups ends
// in one of these, well within deadlock_timeout. A figure, not a check.
func (d *drill) countLockWaits(srv *pgserver.Server) {
	log, err := srv.Log()
	if err != nil {
		return
	}
	d.count("waits for a row's lock the gateways' groups gave up and ran again", int64(bytes.Count(log, []byte("canceling statement due to lock timeout"))))
}

// heldBy lists the calls in flight (holds) of the gateway process pid:
// the store names each handle host/pid/random. It reads them once the
// killed gateway's server processes have ended (the store names them
// "holon <handle>" in pg_stat_activity), and under the writers' lock: a
// COMMIT it sent before the kill still lands (its backend runs what it
// received), so its calls are read as they end.
func heldBy(ctx context.Context, url string, pid int) ([]string, error) {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return nil, err
	}
	defer conn.Close(ctx)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		var n int
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE application_name LIKE $1`,
			"holon %/"+strconv.Itoa(pid)+"/%").Scan(&n); err != nil {
			return nil, err
		}
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("%d server processes of the killed gateway %d still run after 30s", n, pid)
		}
	}
	var ids []string
	err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `LOCK TABLE writer_log IN EXCLUSIVE MODE`); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, `SELECT receipt FROM holds WHERE gateway LIKE $1`, "%/"+strconv.Itoa(pid)+"/%")
		if err != nil {
			return err
		}
		ids, err = pgx.CollectRows(rows, pgx.RowTo[string])
		return err
	})
	return ids, err
}
