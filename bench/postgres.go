package bench

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"holon.dev/holon/backup"
	"holon.dev/holon/journal"
)

// targetPGRatio is how many times the PostgreSQL design's throughput Holon
// must reach.
const targetPGRatio = 2.5

// errNoPostgres says no PostgreSQL server is installed.
var errNoPostgres = errors.New("no PostgreSQL server (initdb, pg_ctl) in /usr/lib/postgresql/*/bin or PATH")

// postgres measures the same settlement in a PostgreSQL-backed design: the
// schema Holon ships for PostgreSQL (backup/schema.sql, with the journal's
// rules as constraints), one transaction per settlement sent as one
// pipelined batch, Clients connections, on a server with its durable
// defaults (fsync on, synchronous_commit on), started the way backup/pgtest
// starts one.
func (b *bench) postgres(ctx context.Context) ([]*Result, error) {
	o := b.o
	res := &Result{
		Name:   fmt.Sprintf("[2] the same settlement in a PostgreSQL-backed design: one transaction each, pipelined, %d connections, fsync on", o.Clients),
		Target: fmt.Sprintf("Holon (row 1) ≥ %.1f× its throughput", targetPGRatio),
	}
	pg, err := startPostgres(ctx, filepath.Join(o.Dir, "pg"))
	if errors.Is(err, errNoPostgres) {
		res.Verdict = "skipped: install postgresql (apt-get install -y --no-install-recommends postgresql)"
		return []*Result{res}, nil
	}
	if err != nil {
		return nil, err
	}
	defer pg.stop()
	url := pg.url("postgres")
	// Enough calls seeded that the run cannot run out of them.
	seeded := int(o.Duration.Seconds()+warmUp(o).Seconds()+1) * 12_000
	if err := seedPostgres(ctx, url, seeded); err != nil {
		return nil, err
	}
	conns := make([]*pgx.Conn, o.Clients)
	for i := range conns {
		if conns[i], err = pgx.Connect(ctx, url); err != nil {
			return nil, err
		}
		defer conns[i].Close(context.Background())
	}
	// Connection c settles calls c+1, c+1+n, c+1+2n, …: no two touch the same call.
	done := make([]int, o.Clients)
	settleNext := func(ctx context.Context, c int, shared bool) error {
		seq := c + 1 + done[c]*o.Clients
		done[c]++
		if seq > seeded {
			return fmt.Errorf("the %d seeded calls ran out", seeded)
		}
		return pgSettle(ctx, conns[c], seq, shared)
	}
	lr, err := runLoad(ctx, o.Clients, warmUp(o), o.Duration, func(ctx context.Context, c int) error { return settleNext(ctx, c, true) })
	if err != nil {
		return nil, fmt.Errorf("postgres settlements: %w", err)
	}
	if err := checkPostgres(ctx, conns[0]); err != nil {
		return nil, err
	}
	// The same without the rows every settlement shares, the most a
	// PostgreSQL design could get by giving up updating them in the
	// settlement's transaction.
	lean, err := runLoad(ctx, o.Clients, warmUp(o)/2, o.Duration/2, func(ctx context.Context, c int) error { return settleNext(ctx, c, false) })
	if err != nil {
		return nil, fmt.Errorf("postgres settlements without the shared rows: %w", err)
	}
	res.Measured = fmt.Sprintf("PostgreSQL %s: %s settlements/s (p50 %s, p99 %s)", pgVersion(ctx, conns[0]), thousands(int64(lr.Rate())), ms(lr.Lat.P(0.5)), ms(lr.Lat.P(0.99)))
	res.Notes = append(res.Notes,
		"money checked in PostgreSQL: every entry sums to zero (deferred constraint triggers), balances equal the sums of their lines, no hold left for a settled call",
		fmt.Sprintf("without the rows every settlement shares (the platform's and the author's balances, the journal head, the agent's record, the counter): %s settlements/s (p50 %s, p99 %s), an upper bound for a PostgreSQL design that gives them up",
			thousands(int64(lean.Rate())), ms(lean.Lat.P(0.5)), ms(lean.Lat.P(0.99))))
	if b.callsRate == 0 {
		res.Verdict = "skipped: the ratio needs row 1 (--rows calls,postgres)"
		return []*Result{res}, nil
	}
	ratio := b.callsRate / lr.Rate()
	res.Measured += fmt.Sprintf("; Holon %s calls/s through HTTP: %.1f×", thousands(int64(b.callsRate)), ratio)
	res.Notes = append(res.Notes, "Holon's figure is whole calls over HTTP (reserve, run, settle: two durable commits each); PostgreSQL's is the settlement transaction alone")
	res.judge(ratio >= targetPGRatio, "PostgreSQL settles each call in its own commit, but the shared rows (the platform's and the author's accounts, the agent's record, the journal head) serialize them; Holon groups them in one bbolt commit per batch")
	return []*Result{res}, nil
}

// pgSettle is one settlement, as the store does it (settleTx): the receipt's
// final state, the journal entry (hash-chained on the journal head) and its
// three lines, the balances, the hold released and deleted, the budget, the
// call event and the agent's record, in one transaction sent as one batch.
func pgSettle(ctx context.Context, conn *pgx.Conn, seq int, shared bool) error {
	price, worst := journal.MustParseAmount(callPrice), journal.MustParseAmount("0.01")
	shares, err := journal.Split(price, "bench", nil)
	if err != nil {
		return err
	}
	payer := fmt.Sprintf("p%02d", seq%benchPayers)
	rid := fmt.Sprintf("r%d", seq)
	key := "settle:" + rid
	splits := `[`
	for i, s := range shares {
		if i > 0 {
			splits += ","
		}
		splits += fmt.Sprintf(`{"to":%q,"amount":%q}`, s.To, s.Amount)
	}
	splits += `]`
	b := &pgx.Batch{}
	b.Queue("BEGIN")
	b.Queue(`UPDATE receipts SET status = 'succeeded', billed = true, cost_own = $2, cost_downstream = 0, cost_total = $2,
		splits = $3, duration_ms = 1 WHERE id = $1 AND status = 'running'`, rid, price.String(), splits)
	if shared {
		b.Queue(`WITH head AS (
			UPDATE meta SET value = encode(sha256(convert_to(value || $1, 'UTF8')), 'hex') WHERE key = 'journal_head' RETURNING value)
		INSERT INTO journal_entries (seq, key, time, prev, hash)
		SELECT nextval('bench_journal_seq'), $1, now(), '', head.value FROM head`, key)
	} else {
		b.Queue(`INSERT INTO journal_entries (seq, key, time, prev, hash)
		VALUES (nextval('bench_journal_seq'), $1, now(), '', encode(sha256(convert_to($1, 'UTF8')), 'hex'))`, key)
	}
	b.Queue(`INSERT INTO journal_lines (entry, position, account, amount) VALUES
		(currval('bench_journal_seq'), 1, $1, -$2::numeric)`, payer, price.String())
	for i, s := range shares {
		b.Queue(`INSERT INTO journal_lines (entry, position, account, amount) VALUES
			(currval('bench_journal_seq'), $1, $2, $3::numeric)`, i+2, s.To, s.Amount.String())
		if shared {
			b.Queue(`UPDATE accounts SET balance = balance + $2::numeric WHERE name = $1`, s.To, s.Amount.String())
		}
	}
	b.Queue(`UPDATE accounts SET balance = balance - $2::numeric, held = held - $3::numeric WHERE name = $1`, payer, price.String(), worst.String())
	b.Queue(`UPDATE budgets SET spent = spent + $2::numeric, reserved = reserved - $3::numeric WHERE mandate = $1`, mandateID(seq), price.String(), worst.String())
	b.Queue(`DELETE FROM holds WHERE receipt = $1`, rid)
	b.Queue(`INSERT INTO call_events (seq, receipt, agent, status, duration_ms, billed, currency, delegated, time)
		VALUES (nextval('bench_event_seq'), $1, 'bench/echo@1.0.0', 'succeeded', 1, $2::numeric, 'EUR', false, now())`, rid, price.String())
	if shared {
		b.Queue(`UPDATE agent_records SET runs = runs + 1, succeeded = succeeded + 1, billed = billed + $1::numeric, duration_ms = duration_ms + 1
		WHERE agent = 'bench/echo@1.0.0'`, price.String())
		b.Queue(`UPDATE counters SET value = value + 1 WHERE name = 'journal_entries'`)
	}
	b.Queue("COMMIT")
	return conn.SendBatch(ctx, b).Close()
}

// seedPostgres applies Holon's PostgreSQL schema and writes what the gateway
// has written by the time a call comes back to be settled: n running
// receipts with their holds, the held amounts and reservations, funded
// payers, mandates and their budgets.
func seedPostgres(ctx context.Context, url string, n int) error {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, backup.Schema); err != nil {
		return fmt.Errorf("apply backup/schema.sql: %w", err)
	}
	tx, err := conn.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(context.Background())
	worst := journal.MustParseAmount("0.01")
	perPayer := (n + benchPayers - 1) / benchPayers
	held := journal.Amount(int64(worst) * int64(perPayer))
	setup := []string{
		`CREATE SEQUENCE bench_journal_seq`,
		`CREATE SEQUENCE bench_event_seq`,
		`INSERT INTO meta VALUES ('journal_head', '')`,
		`INSERT INTO counters VALUES ('journal_entries', 0)`,
		`INSERT INTO accounts VALUES ('holon', 0, 0), ('bench', 0, 0), ('external:demo-credit', -64000000, 0)`,
		`INSERT INTO agent_records VALUES ('bench/echo@1.0.0', 0, 0, 0, 0)`,
	}
	for _, q := range setup {
		if _, err := tx.Exec(ctx, q); err != nil {
			return fmt.Errorf("%s: %w", q, err)
		}
	}
	for i := range benchPayers {
		p := fmt.Sprintf("p%02d", i)
		// The payer's credit is journaled, so that balances are the sums of their lines.
		if _, err := tx.Exec(ctx, `INSERT INTO accounts VALUES ($1, 1000000, $2::numeric)`, p, held.String()); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO journal_entries VALUES (nextval('bench_journal_seq'), $1, now(), '', $1)`, "signup:"+p); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO journal_lines VALUES (currval('bench_journal_seq'), 1, 'external:demo-credit', -1000000), (currval('bench_journal_seq'), 2, $1, 1000000)`, p); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO mandates (id, doc, created, published, revoked) VALUES ($1, $2, now(), false, false)`,
			mandateID(i), fmt.Sprintf(`{"id":%q,"issuer":%q}`, mandateID(i), p)); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO budgets VALUES ($1, 0, $2::numeric)`, mandateID(i), held.String()); err != nil {
			return err
		}
	}
	// The calls: receipts and holds, copied in.
	rows := make([][]any, 0, n)
	now := time.Now().UTC()
	for seq := 1; seq <= n; seq++ {
		p := fmt.Sprintf("p%02d", seq%benchPayers)
		rows = append(rows, []any{fmt.Sprintf("r%d", seq), int64(seq), mandateID(seq), p + "/client", "bench/echo@1.0.0", "running",
			worst.String(), "EUR", p, false, "0", "0", "0", "[]", []string{}, int64(0), now})
	}
	if _, err := tx.CopyFrom(ctx, pgx.Identifier{"receipts"},
		[]string{"id", "seq", "mandate", "caller", "agent", "status", "worst_case", "currency", "payer", "billed",
			"cost_own", "cost_downstream", "cost_total", "splits", "children", "duration_ms", "created"},
		pgx.CopyFromRows(rows)); err != nil {
		return fmt.Errorf("seed receipts: %w", err)
	}
	rows = rows[:0]
	for seq := 1; seq <= n; seq++ {
		p := fmt.Sprintf("p%02d", seq%benchPayers)
		rows = append(rows, []any{fmt.Sprintf("r%d", seq), p, worst.String(), mandateID(seq), worst.String(), []string{}, "0", now})
	}
	if _, err := tx.CopyFrom(ctx, pgx.Identifier{"holds"},
		[]string{"receipt", "payer", "amount", "mandate", "reserved", "children", "downstream", "started"},
		pgx.CopyFromRows(rows)); err != nil {
		return fmt.Errorf("seed holds: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("seed: %w", err)
	}
	// Start clean: statistics for the planner, and the seed's pages written
	// out, so that the run does not pay for them.
	for _, q := range []string{`ANALYZE`, `CHECKPOINT`} {
		if _, err := conn.Exec(ctx, q); err != nil {
			return fmt.Errorf("%s: %w", q, err)
		}
	}
	return nil
}

// checkPostgres checks the money after the run: balances are the sums of
// their journal lines, and no settled call kept its hold.
func checkPostgres(ctx context.Context, conn *pgx.Conn) error {
	var bad int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM accounts a LEFT JOIN journal_balances j ON j.account = a.name
		WHERE a.balance <> coalesce(j.balance, 0)`).Scan(&bad); err != nil {
		return err
	}
	if bad != 0 {
		return fmt.Errorf("postgres: %d balances differ from the sums of their journal lines", bad)
	}
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM receipts r JOIN holds h ON h.receipt = r.id WHERE r.status <> 'running'`).Scan(&bad); err != nil {
		return err
	}
	if bad != 0 {
		return fmt.Errorf("postgres: %d settled calls kept their hold", bad)
	}
	return nil
}

// pgServer is a throwaway PostgreSQL server.
type pgServer struct {
	bin, dir string
	port     int
	cred     *syscall.Credential
}

// startPostgres starts a server in dir as backup/pgtest does (initdb, then
// pg_ctl on a free loopback port; as root, as the postgres user), but with
// PostgreSQL's durable defaults: fsync, synchronous_commit and
// full_page_writes stay on, as a production design would run.
func startPostgres(ctx context.Context, dir string) (*pgServer, error) {
	bin, err := findPGBin()
	if err != nil {
		return nil, err
	}
	s := &pgServer{bin: bin, dir: dir}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			return nil, fmt.Errorf("%w: running as root and there is no postgres user to run the server as", errNoPostgres)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		s.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	}
	// The socket lives in the directory: keep its path short.
	if s.dir, err = os.MkdirTemp("", "holon-bench-pg-"); err != nil {
		return nil, err
	}
	if s.cred != nil {
		if err := os.Chown(s.dir, int(s.cred.Uid), int(s.cred.Gid)); err != nil {
			return nil, err
		}
	}
	data := filepath.Join(s.dir, "data")
	if out, err := s.run(ctx, "initdb", "-D", data, "-A", "trust", "-U", "postgres", "-E", "UTF8", "--locale=C", "--no-sync"); err != nil {
		os.RemoveAll(s.dir)
		return nil, fmt.Errorf("initdb: %v\n%s", err, out)
	}
	var lastErr error
	for range 3 {
		addr, err := freePort()
		if err != nil {
			return nil, err
		}
		_, port, _ := net.SplitHostPort(addr)
		s.port, _ = strconv.Atoi(port)
		opts := fmt.Sprintf("-c listen_addresses=127.0.0.1 -p %d -k %s -c max_connections=200", s.port, s.dir)
		out, err := s.run(ctx, "pg_ctl", "-D", data, "-l", filepath.Join(s.dir, "log"), "-o", opts, "-w", "-t", "60", "start")
		if err == nil {
			return s, nil
		}
		log, _ := os.ReadFile(filepath.Join(s.dir, "log"))
		lastErr = fmt.Errorf("pg_ctl start: %v\n%s\n%s", err, out, log)
	}
	os.RemoveAll(s.dir)
	return nil, lastErr
}

func (s *pgServer) url(db string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", s.port, db)
}

func (s *pgServer) stop() {
	_, _ = s.run(context.Background(), "pg_ctl", "-D", filepath.Join(s.dir, "data"), "-m", "immediate", "-w", "stop")
	os.RemoveAll(s.dir)
}

func (s *pgServer) run(ctx context.Context, name string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(s.bin, name), args...)
	cmd.Dir = s.dir
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	if s.cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred}
	}
	return cmd.CombinedOutput()
}

// findPGBin finds initdb and pg_ctl: Debian keeps them in
// /usr/lib/postgresql/<version>/bin, out of PATH.
func findPGBin() (string, error) {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	version := func(dir string) int {
		n, _ := strconv.Atoi(filepath.Base(filepath.Dir(dir)))
		return n
	}
	sort.Slice(dirs, func(i, j int) bool { return version(dirs[i]) > version(dirs[j]) })
	if p, err := exec.LookPath("initdb"); err == nil {
		dirs = append(dirs, filepath.Dir(p))
	}
	for _, d := range dirs {
		if isExec(filepath.Join(d, "initdb")) && isExec(filepath.Join(d, "pg_ctl")) {
			return d, nil
		}
	}
	return "", errNoPostgres
}

func isExec(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0
}

// pgVersion is the server's version, for the report.
func pgVersion(ctx context.Context, conn *pgx.Conn) string {
	var v string
	if err := conn.QueryRow(ctx, `SHOW server_version`).Scan(&v); err != nil {
		return "?"
	}
	return strings.Fields(v)[0]
}
