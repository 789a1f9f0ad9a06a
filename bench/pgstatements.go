package bench

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// pgStatementsSettings load pg_stat_statements into the cluster rows'
// server (Options.PGStatements), counting the statements that functions
// and triggers run too, and the time spent planning them.
var pgStatementsSettings = []string{"shared_preload_libraries=pg_stat_statements", "pg_stat_statements.track=all", "pg_stat_statements.track_planning=on"}

// pgStatements reads and resets pg_stat_statements for one database of
// the cluster rows' server, so that each load's blocks count their own
// statements.
type pgStatements struct {
	conn *pgx.Conn // to the server's postgres database, which holds the view
	db   string
}

// openPGStatements creates the extension in the postgres database at
// adminURL and watches the statements run in database db.
func openPGStatements(ctx context.Context, adminURL, db string) (*pgStatements, error) {
	c, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return nil, err
	}
	if _, err := c.Exec(ctx, `CREATE EXTENSION IF NOT EXISTS pg_stat_statements`); err != nil {
		c.Close(ctx)
		return nil, fmt.Errorf("pg_stat_statements: %w", err)
	}
	return &pgStatements{conn: c, db: db}, nil
}

func (p *pgStatements) Close() { p.conn.Close(context.Background()) }

// reset forgets what was counted.
func (p *pgStatements) reset(ctx context.Context) error {
	_, err := p.conn.Exec(ctx, `SELECT pg_stat_statements_reset()`)
	return err
}

// stmtStat is one statement's count, its execution time, and how often
// and how long it was planned.
type stmtStat struct {
	calls, plans int64
	exec, plan   time.Duration
}

// stmtKey is a statement's text, as pg_stat_statements normalised it,
// and whether the client sent it (rather than a function or trigger).
type stmtKey struct {
	q        string
	toplevel bool
}

// stmtStats are statements by their key.
type stmtStats map[stmtKey]stmtStat

// add adds what the database's statements did since the last reset.
func (p *pgStatements) add(ctx context.Context, into stmtStats) error {
	rows, err := p.conn.Query(ctx, `SELECT query, toplevel, calls, total_exec_time, plans, total_plan_time FROM pg_stat_statements
		WHERE dbid = (SELECT oid FROM pg_database WHERE datname = $1)`, p.db)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var k stmtKey
		var calls, plans int64
		var ms, planMS float64
		if err := rows.Scan(&k.q, &k.toplevel, &calls, &ms, &plans, &planMS); err != nil {
			return err
		}
		s := into[k]
		s.calls += calls
		s.exec += time.Duration(ms * float64(time.Millisecond))
		s.plans += plans
		s.plan += time.Duration(planMS * float64(time.Millisecond))
		into[k] = s
	}
	return rows.Err()
}

// around runs block between a reset and adding what its statements did.
func (p *pgStatements) around(ctx context.Context, into stmtStats, block func() error) error {
	if p == nil {
		return block()
	}
	if err := p.reset(ctx); err != nil {
		return err
	}
	if err := block(); err != nil {
		return err
	}
	return p.add(ctx, into)
}

var spaces = regexp.MustCompile(`\s+`)

// note says what the statements cost the server per call answered: the
// client's statements in all (a function's or trigger's statements count
// in the statement that ran them), executing and planning, and the
// largest, top of them by the two together, each by its first words (one
// run inside another marked so).
func (s stmtStats) note(calls int64, top int) string {
	type row struct {
		stmtKey
		stmtStat
	}
	var rows []row
	var all, planned time.Duration
	var plans, stmts int64
	for k, st := range s {
		rows = append(rows, row{k, st})
		if k.toplevel {
			all += st.exec
			planned += st.plan
			plans += st.plans
			stmts += st.calls
		}
	}
	slices.SortFunc(rows, func(a, b row) int { return int((b.exec + b.plan) - (a.exec + a.plan)) })
	per := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 / float64(max(calls, 1)) }
	parts := make([]string, 0, top)
	for _, r := range rows[:min(top, len(rows))] {
		words := strings.Fields(spaces.ReplaceAllString(r.q, " "))
		inside := ""
		if !r.toplevel {
			inside = ", inside another"
		}
		text := strings.Join(words[:min(8, len(words))], " ")
		if len(words) > 8 {
			text += "…"
		}
		parts = append(parts, fmt.Sprintf("%s %.1f µs + %.1f µs planning (%.2f a call, planned %.2f a call%s)",
			text, per(r.exec), per(r.plan), float64(r.calls)/float64(max(calls, 1)), float64(r.plans)/float64(max(calls, 1)), inside))
	}
	return fmt.Sprintf("the statements on the server (pg_stat_statements): %.1f µs executing and %.1f µs planning per call answered in the row's blocks, %.2f statements a call of which %.2f planned; the largest: %s",
		per(all), per(planned), float64(stmts)/float64(max(calls, 1)), float64(plans)/float64(max(calls, 1)), strings.Join(parts, "; "))
}
