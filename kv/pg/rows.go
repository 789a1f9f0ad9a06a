package pg

import (
	"fmt"
	"slices"
	"strings"

	"holon.dev/holon"
)

// Writes of hot rows. Accounts, budgets, budget windows, counters and
// agents' records are moved by what the updates changed, not written with
// the writer's idea of their new value: within a round trip the moves of a
// row are summed into one, and the rows of one table go in one multi-row
// statement, so that a move keeps whatever another gateway moved the row
// by, and the database judges the sum (migrations 18 and 19: no overdraft,
// no budget over its declared limit). Sequences and the chains' heads are
// written with their last value. A group that runs without savepoints (the
// first run of every group, see group.go) sends each hot row once per
// round trip, however many of its updates moved it, and its rollups summed
// in one statement. Rows appended (journal entries and lines, call events,
// documents) or deleted (holds) by many updates go the same way, one
// statement per table; a write of one of those rows that does not go this
// way (a hold put, a document deleted) sends the rows waiting before it. A
// group that runs safely, each update under its own savepoint, sends every
// write where its update made it.

// rowKind is the table a row write goes to.
type rowKind uint8

const (
	// Rows moved by what the updates changed (moves): their key
	// columns, then amounts added.
	rowAccountMove rowKind = iota // name, balance µ, held µ
	rowBudgetMove                 // mandate, spent µ, reserved µ, its limit µ (*int64)
	rowWindowMove                 // mandate, win, spent µ, reserved µ, its limit µ (*int64)
	rowCounterMove                // name, value
	rowRecordMove                 // agent, runs, succeeded, billed µ, duration_ms
	// Rows written with their new value.
	rowMeta // key, value
	// Rows appended (or deleted) rather than rewritten: not hot, but the
	// rows of many updates go in one statement all the same.
	rowEntry    // seq, key, time, prev, hash
	rowLine     // entry, position, account, amount µ
	rowEvent    // seq, receipt, agent, status, error, duration_ms, billed µ, currency, delegated, time
	rowHoldGone // receipt
	rowAppDoc   // bucket, key, key_bytes, doc, raw
	// Receipts (new ones, and new states of known ones) and holds put:
	// whole rows under their key, the receipts' columns those of
	// receiptRow, the holds' those of holdRow.
	rowReceiptNew
	rowReceiptPut
	rowHold
	rowKinds
)

// rowsOf is a FROM item, x, of the rows a statement's first array
// parameters hold, an array a column: cols names each column and its
// element type ("n text, b bigint"), $1 holding the first column, $2
// the next, and so on. The arrays are unnested in a select list, which
// PostgreSQL zips as it reads them. unnest($1, $2, …) in FROM would do
// the same, but first fills a tuplestore with each array's elements:
// memory taken and given back to the system at each statement, which
// cost a one-row insert of a receipt three times the insert's own work
// (BenchmarkGroupSize).
func rowsOf(cols string) string {
	var b strings.Builder
	b.WriteString("(SELECT ")
	for i, c := range strings.Split(cols, ", ") {
		name, typ, ok := strings.Cut(c, " ")
		if !ok {
			panic("rowsOf: a column without its type: " + c)
		}
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "unnest($%d::%s[]) AS %s", i+1, typ, name)
	}
	b.WriteString(") AS x")
	return b.String()
}

// rowSQL are the statements of each kind: one row per element of their
// arrays (amounts in micro-units, as bigint), each row's whole new value.
var rowSQL = [rowKinds]string{
	// Accounts are moved, not written: what a group changed in an
	// account reaches it whatever another gateway changed since the
	// writer read it, and the database's check (migration 18) judges the
	// sum. Accounts not there yet are inserted.
	// A move that only credits goes to the writer's part ($4), any other
	// to part 0 (migration 24).
	rowAccountMove: `WITH x AS (SELECT n, CASE WHEN b > 0 AND h = 0 THEN $4::int ELSE 0 END AS p, b, h
			FROM ` + rowsOf("n text, b bigint, h bigint") + `),
		u AS (UPDATE accounts a SET balance = a.balance + x.b / 1000000.0, held = a.held + x.h / 1000000.0
			FROM x WHERE (a.name, a.part) = (x.n, x.p) RETURNING a.name, a.part)
		INSERT INTO accounts (name, part, balance, held) SELECT n, p, b / 1000000.0, h / 1000000.0 FROM x
		WHERE NOT EXISTS (SELECT FROM u WHERE (u.name, u.part) = (x.n, x.p))`,
	// Budgets carry the limit their update declared (NULL: none), which a
	// check at the commit judges a raised budget against (migration 19).
	rowBudgetMove: `WITH x AS (SELECT * FROM ` + rowsOf("m text, s bigint, r bigint, c bigint") + `),
		u AS (UPDATE budgets b SET spent = b.spent + x.s / 1000000.0, reserved = b.reserved + x.r / 1000000.0, cap = x.c / 1000000.0
			FROM x WHERE b.mandate = x.m RETURNING b.mandate)
		INSERT INTO budgets (mandate, spent, reserved, cap) SELECT m, s / 1000000.0, r / 1000000.0, c / 1000000.0 FROM x
		WHERE NOT EXISTS (SELECT FROM u WHERE u.mandate = x.m)`,
	rowWindowMove: `WITH x AS (SELECT * FROM ` + rowsOf("m text, w text, s bigint, r bigint, c bigint") + `),
		u AS (UPDATE budget_windows b SET spent = b.spent + x.s / 1000000.0, reserved = b.reserved + x.r / 1000000.0, cap = x.c / 1000000.0
			FROM x WHERE (b.mandate, b.win) = (x.m, x.w) RETURNING b.mandate, b.win)
		INSERT INTO budget_windows (mandate, win, spent, reserved, cap) SELECT m, w, s / 1000000.0, r / 1000000.0, c / 1000000.0 FROM x
		WHERE NOT EXISTS (SELECT FROM u WHERE (u.mandate, u.win) = (x.m, x.w))`,
	// A counter's rise goes to the writer's part ($3), any other move to
	// part 0 (migration 25).
	rowCounterMove: `WITH x AS (SELECT n, CASE WHEN v > 0 THEN $3::int ELSE 0 END AS p, v FROM ` + rowsOf("n text, v bigint") + `),
		u AS (UPDATE counters c SET value = c.value + x.v FROM x WHERE (c.name, c.part) = (x.n, x.p) RETURNING c.name, c.part)
		INSERT INTO counters (name, part, value) SELECT n, p, v FROM x WHERE NOT EXISTS (SELECT FROM u WHERE (u.name, u.part) = (x.n, x.p))`,
	// A record's additions go to the writer's part ($6).
	rowRecordMove: `WITH x AS (SELECT * FROM ` + rowsOf("a text, r bigint, s bigint, b bigint, d bigint") + `),
		u AS (UPDATE agent_records g SET runs = g.runs + x.r, succeeded = g.succeeded + x.s, billed = g.billed + x.b / 1000000.0,
			duration_ms = g.duration_ms + x.d FROM x WHERE (g.agent, g.part) = (x.a, $6::int) RETURNING g.agent)
		INSERT INTO agent_records (agent, part, runs, succeeded, billed, duration_ms) SELECT a, $6::int, r, s, b / 1000000.0, d FROM x
		WHERE NOT EXISTS (SELECT FROM u WHERE u.agent = x.a)`,
	rowMeta: `INSERT INTO meta (key, value) SELECT * FROM ` + rowsOf("k text, v text") + `
		ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value`,
	rowEntry: `INSERT INTO journal_entries (seq, key, time, prev, hash)
		SELECT * FROM ` + rowsOf("s bigint, k text, t text, p text, h text"),
	rowLine: `INSERT INTO journal_lines (entry, position, account, amount)
		SELECT e, p, a, m / 1000000.0 FROM ` + rowsOf("e bigint, p bigint, a text, m bigint"),
	rowEvent: `INSERT INTO call_events (seq, receipt, agent, status, error, duration_ms, billed, currency, delegated, time)
		SELECT s, r, a, st, e, d, b / 1000000.0, c, dl, t
		FROM ` + rowsOf("s bigint, r text, a text, st text, e text, d bigint, b bigint, c text, dl bool, t text"),
	// A hold is deleted once: a hold another gateway deleted since the
	// writer read it (a call it closed) refuses the group (migration 22),
	// which its release of the hold's amount would otherwise count twice.
	rowHoldGone: `WITH d AS (DELETE FROM holds WHERE receipt = ANY($1::text[]) RETURNING receipt)
		SELECT holon_all_gone('holds', $1::text[], array_agg(receipt)) FROM d`,
	rowAppDoc: `INSERT INTO app_docs (bucket, key, key_bytes, doc, raw)
		SELECT b, k, kb, d::json, r FROM ` + rowsOf("b text, k text, kb bytea, d text, r bytea") + `
		ON CONFLICT (bucket, key_bytes) DO UPDATE SET doc = EXCLUDED.doc, raw = EXCLUDED.raw`,
	rowReceiptNew: receiptRowsInsert,
	rowReceiptPut: receiptRowsInsert + receiptOnConflict,
	rowHold: `INSERT INTO holds (receipt, payer, amount, mandate, reserved, funder, parent, children, downstream, sub_mandate, started, gateway,
			budget_window)
		SELECT r, p, a / 1000000.0, m, rs / 1000000.0, f, pa, ARRAY(SELECT c FROM json_array_elements_text(ch::json) WITH ORDINALITY AS e (c, n) ORDER BY n),
			d / 1000000.0, sm, st, g, w
		FROM ` + rowsOf("r text, p text, a bigint, m text, rs bigint, f text, pa text, ch text, d bigint, sm text, st text, g text, w text") + `
		` + holdOnConflict,
}

// receiptRowsInsert inserts receipts given as receiptRow's columns: the
// children a JSON array (NULL for none), the amounts in micro-units.
var receiptRowsInsert = `INSERT INTO receipts AS r (id, seq, parent, mandate, caller, agent, status, error, approval, worst_case, currency, payer,
			sub_mandate, billed, cost_own, cost_downstream, cost_total, splits, children, duration_ms, created)
		SELECT i, q, pa, m, ca, ag, st, er, ap, w / 1000000.0, cu, py, sm, bi, co / 1000000.0, cd / 1000000.0, ct / 1000000.0, sp::jsonb,
			CASE WHEN ch IS NOT NULL THEN ARRAY(SELECT c FROM json_array_elements_text(ch::json) WITH ORDINALITY AS e (c, n) ORDER BY n) END,
			d, cr
		FROM ` + rowsOf("i text, q bigint, pa text, m text, ca text, ag text, st text, er text, ap text, w bigint, "+
	"cu text, py text, sm text, bi bool, co bigint, cd bigint, ct bigint, sp text, ch text, d bigint, cr text")

// The holds released are deleted by their keys, planned without
// sequential scans. The holds table churns (each call puts its hold and
// deletes it), so that between two of autovacuum's visits (a minute
// apart) it grows by thousands of dead rows a second, while the plan that
// PostgreSQL caches for a prepared statement is made once, on the few
// pages the table had when the connection first deleted holds: a
// sequential scan, which then reads every dead page for each group's
// deletion (300 µs a group after ten seconds of load, on the writer's
// one connection that every other gateway's writer waits for). Planned
// with sequential scans off, the plan is the primary key's, whatever the
// table's size when it was made. The setting is the transaction's own
// and put back at once, so no other statement is planned under it.
const (
	seqScanOff = `SET LOCAL enable_seqscan = off`
	seqScanOn  = `SET LOCAL enable_seqscan = on`
)

// rowWrite is rows of one kind: their columns in the order of its
// statement, each a string, *string, int64, bool or []byte.
type rowWrite struct {
	kind rowKind
	rows [][]any
}

// writeRow queues a hot row's new value (an account's move) under its
// cache key k.
func (t *Tx) writeRow(k string, kind rowKind, vals ...any) error {
	return t.queue(queued{key: k, row: &rowWrite{kind: kind, rows: [][]any{vals}}})
}

// appendRows queues rows of a kind that appends or deletes rows, under
// the cache key k of the one row they change ("" for new rows, which no
// other write touches), wrap saying what PostgreSQL's refusal means.
func (t *Tx) appendRows(k string, kind rowKind, wrap func(error) error, rows ...[]any) error {
	return t.queue(queued{key: k, row: &rowWrite{kind: kind, rows: rows}, wrap: wrap})
}

// rollupAdd is one AddRollup: added to its row's sums.
type rollupAdd struct {
	k        holon.RollupKey
	currency string
	d        holon.Tally
}

// rollupDeltaSQL adds a group's rollup additions, none below zero, as
// one row of arrays, which the leader of rollupsFold folds into rollups
// (migrations/0015_rollup_deltas.sql).
const rollupDeltaSQL = `INSERT INTO rollup_deltas (kinds, owners, dims, days, vals, currencies, calls, amounts, refunded)
		VALUES ($1::text[], $2::text[], $3::text[], $4::int[], $5::text[], $6::text[], $7::bigint[], $8::bigint[], $9::bigint[])`

// foldSQL folds every addition in rollup_deltas into rollups.
const foldSQL = `SELECT holon_fold_rollups()`

// rollupCols are a rollup row's columns as rollupSumSQL and foldedSQL
// take them (rowsOf): its key, then its calls, amount and refunded.
const rollupCols = "k text, o text, d text, y int, v text, c text, n bigint, a bigint, f bigint"

// rollupSumSQL adds to rollups rows, once rollup_deltas is folded, so
// that their CHECKs judge the sums: rows that exist are updated (an
// INSERT … ON CONFLICT would check the row it proposes, the addition
// alone), the others inserted.
var rollupSumSQL = `WITH x AS (
			SELECT * FROM ` + rowsOf(rollupCols) + `
		), u AS (
			UPDATE rollups r SET calls = r.calls + x.n, amount = r.amount + x.a / 1000000.0, refunded = r.refunded + x.f / 1000000.0
			FROM x WHERE (r.kind, r.owner, r.dim, r.day, r.value, r.currency) = (x.k, x.o, x.d, x.y, x.v, x.c)
			RETURNING r.kind, r.owner, r.dim, r.day, r.value, r.currency
		)
		INSERT INTO rollups (kind, owner, dim, day, value, currency, calls, amount, refunded)
		SELECT k, o, d, y, v, c, n, a / 1000000.0, f / 1000000.0 FROM x
		WHERE NOT EXISTS (SELECT FROM u WHERE (u.kind, u.owner, u.dim, u.day, u.value, u.currency) = (x.k, x.o, x.d, x.y, x.v, x.c))`

type rollupRow struct {
	k        holon.RollupKey
	currency string
}

// render turns pending writes into the statements sent. In a fast run
// (merge), a hot row written several times is sent once with its last
// value, the rows of a kind in one statement, and the rollups' additions
// summed in one statement; they are sent before the next statement that
// is not known to leave them alone (a barrier: one that changes them by
// what the database holds, deletes them, …), else at the end. In a safe
// run every write is its own statement, in its place. part is the part
// of the rows every settlement credits that the writer moves (migration
// 24: its journal chain).
func render(pend []queued, merge bool, part int32) []queued {
	special := false
	for _, q := range pend {
		if q.row != nil || q.roll != nil {
			special = true
			break
		}
	}
	if !special {
		return pend
	}
	out := make([]queued, 0, len(pend))
	var rows [rowKinds][]queued
	var per [rowKinds]int
	for _, q := range pend {
		if q.row != nil {
			per[q.row.kind]++
		}
	}
	for kind, n := range per {
		rows[kind] = make([]queued, 0, n)
	}
	last := map[string]int{}         // a hot row's last write in rows
	lastKind := map[string]rowKind{} // and its kind
	var rolls []rollupRow
	sums := map[rollupRow]holon.Tally{}
	rollOwner := -1
	flush := func() {
		for kind, qs := range rows {
			if len(qs) == 0 {
				continue
			}
			kept := make([][]any, 0, len(qs))
			owner := -1
			var wrap func(error) error
			keys := moveKeys[kind]
			if keys > 0 {
				// Moves add up: one row a key, their sum.
				kept = sumMoves(qs, keys)
				owner, wrap = qs[len(qs)-1].owner, qs[len(qs)-1].wrap
			}
			for i, q := range qs {
				if keys == 0 && (q.key == "" || last[q.key] == i) {
					kept = append(kept, q.row.rows...)
					owner, wrap = q.owner, q.wrap
				}
			}
			args := columns(kept)
			if inParts[kind] {
				args = append(args, part)
			}
			q := queued{sql: rowSQL[kind], args: args, owner: owner, free: true, wrap: wrap}
			if rowKind(kind) == rowHoldGone {
				// Planned without sequential scans (holdsPlanned).
				out = append(out, queued{sql: seqScanOff, owner: owner, free: true}, q, queued{sql: seqScanOn, owner: owner, free: true})
			} else {
				out = append(out, q)
			}
			rows[kind] = qs[:0]
		}
		clear(last)
		clear(lastKind)
		if len(rolls) > 0 {
			if below := belowZero(rolls, sums); below {
				// rollups' CHECKs judge it on the sums, folded first.
				out = append(out, queued{sql: foldSQL, owner: rollOwner, free: true},
					queued{sql: rollupSumSQL, args: rollupColumns(rolls, sums), owner: rollOwner, free: true})
			} else {
				out = append(out, queued{sql: rollupDeltaSQL, args: rollupColumns(rolls, sums), owner: rollOwner, free: true})
			}
			rolls = rolls[:0]
			clear(sums)
		}
	}
	for _, q := range pend {
		switch {
		case q.row != nil:
			if k, ok := lastKind[q.key]; ok && k == rowReceiptNew && q.row.kind == rowReceiptPut {
				// A new receipt's final state: still a new one.
				q.row = &rowWrite{kind: rowReceiptNew, rows: q.row.rows}
			}
			if k, ok := lastKind[q.key]; ok && k != q.row.kind {
				// A row written as another kind (a receipt put after its
				// insert, a hold deleted after its put): those go first.
				flush()
			}
			if q.key != "" {
				last[q.key] = len(rows[q.row.kind])
				lastKind[q.key] = q.row.kind
			}
			rows[q.row.kind] = append(rows[q.row.kind], q)
		case q.roll != nil:
			r := rollupRow{q.roll.k, q.roll.currency}
			s, ok := sums[r]
			if !ok {
				rolls = append(rolls, r)
			}
			s.Calls += q.roll.d.Calls
			s.Amount += q.roll.d.Amount
			s.Refunded += q.roll.d.Refunded
			sums[r], rollOwner = s, q.owner
		default:
			if !q.free && (q.touches == nil || touched(last, q.touches)) || q.key != "" && touched(last, []string{q.key}) {
				// It changes rows waiting to be written: they go first.
				flush()
			}
			out = append(out, q)
			continue
		}
		if !merge {
			flush()
		}
	}
	flush()
	return out
}

// inParts are the kinds of rows kept in one part per gateway, whose
// statement takes the writer's part after their columns.
var inParts = [rowKinds]bool{rowAccountMove: true, rowRecordMove: true, rowCounterMove: true}

// moveKeys is, for each kind of rows moved, how many of its columns are
// its key (0: a kind written with new values, or appended).
var moveKeys = [rowKinds]int{rowAccountMove: 1, rowBudgetMove: 1, rowWindowMove: 2, rowCounterMove: 1, rowRecordMove: 1}

// sumMoves sums moves of rows (their keys columns, then amounts moved),
// one row a key, in the order of their keys: every writer's statement
// then locks a table's rows in one order, so that two groups moving the
// same rows at once (writers that overlap, overlap.go) wait for each
// other rather than deadlock.
func sumMoves(qs []queued, keys int) [][]any {
	out := sumMovesInOrder(qs, keys)
	slices.SortFunc(out, func(a, b []any) int {
		for c := range keys {
			if d := strings.Compare(a[c].(string), b[c].(string)); d != 0 {
				return d
			}
		}
		return 0
	})
	return out
}

// sumMovesInOrder is sumMoves in the order of the rows' first moves.
func sumMovesInOrder(qs []queued, keys int) [][]any {
	out := make([][]any, 0, len(qs))
	at := map[string]int{}
	for _, q := range qs {
		for _, r := range q.row.rows {
			k := r[0].(string)
			if keys == 2 {
				k += "\x00" + r[1].(string)
			}
			i, ok := at[k]
			if !ok {
				at[k] = len(out)
				out = append(out, slices.Clone(r))
				continue
			}
			for c := keys; c < len(r); c++ {
				switch v := r[c].(type) {
				case int64:
					out[i][c] = out[i][c].(int64) + v
				case *int64:
					// A limit: the lowest declared.
					if was := out[i][c].(*int64); v != nil && (was == nil || *v < *was) {
						out[i][c] = v
					}
				}
			}
		}
	}
	return out
}

// touched reports whether a write waiting in last is one of keys.
func touched(last map[string]int, keys []string) bool {
	for _, k := range keys {
		if _, ok := last[k]; ok {
			return true
		}
	}
	return false
}

// columns turns rows of one kind into its statement's arrays.
func columns(rows [][]any) []any {
	n := len(rows[0])
	args := make([]any, n)
	for c := range n {
		switch rows[0][c].(type) {
		case string:
			args[c] = column[string](rows, c)
		case *string:
			args[c] = column[*string](rows, c)
		case int64:
			args[c] = column[int64](rows, c)
		case *int64:
			args[c] = column[*int64](rows, c)
		case bool:
			args[c] = column[bool](rows, c)
		case []byte:
			args[c] = column[[]byte](rows, c)
		default:
			panic(fmt.Sprintf("row column of type %T", rows[0][c]))
		}
	}
	return args
}

func column[T any](rows [][]any, c int) []T {
	col := make([]T, len(rows))
	for i, r := range rows {
		col[i] = r[c].(T)
	}
	return col
}

// belowZero reports whether an addition in sums is below zero.
func belowZero(rolls []rollupRow, sums map[rollupRow]holon.Tally) bool {
	for _, r := range rolls {
		if s := sums[r]; s.Calls < 0 || s.Amount < 0 || s.Refunded < 0 {
			return true
		}
	}
	return false
}

func rollupColumns(rolls []rollupRow, sums map[rollupRow]holon.Tally) []any {
	n := len(rolls)
	kind, owner, dim, value, cur := make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	day := make([]int32, n)
	calls, amount, refunded := make([]int64, n), make([]int64, n), make([]int64, n)
	for i, r := range rolls {
		s := sums[r]
		kind[i], owner[i], dim[i], day[i], value[i], cur[i] = string(r.k.Kind), r.k.Owner, string(r.k.Dim), int32(r.k.Day), r.k.Value, r.currency
		calls[i], amount[i], refunded[i] = s.Calls, s.Amount.Micros(), s.Refunded.Micros()
	}
	return []any{kind, owner, dim, day, value, cur, calls, amount, refunded}
}
