package backup_test

import (
	"bytes"
	"context"
	"errors"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"holon.dev/holon"
	"holon.dev/holon/backup"
	"holon.dev/holon/backup/pgtest"
	"holon.dev/holon/journal"
	"holon.dev/holon/kv"
)

// Ensure that a backup loads into a real PostgreSQL, where SQL gives the
// store's balances, receipts and counters, and the journal sums to zero;
// that PostgreSQL itself refuses an update or delete of a journal row, an
// unbalanced or one-line entry and a repeated idempotency key; and that a
// non-empty database or a bad file leaves the database as it was.
func TestLoadPostgres(t *testing.T) {
	srv := pgtest.Start(t)
	ctx := context.Background()
	s := openStore(t, "")
	fixture(t, s)
	good := writeBackup(t, s)

	url := srv.CreateDB(t, "holon")
	sum, err := backup.LoadPostgres(ctx, bytes.NewReader(good), url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Tables["receipts"] != 10 || sum.Tables["journal_entries"] != 7 || sum.Tables["journal_lines"] != 19 {
		t.Errorf("loaded %v", sum.Tables)
	}
	conn := srv.Connect(t, url)

	t.Run("same money", func(t *testing.T) {
		want := map[string][2]int64{}
		var counters = map[string]uint64{}
		mustView(t, s, func(tx *kv.Tx) error {
			if err := tx.ForEachAccount(func(name string, a holon.Account) error {
				want[name] = [2]int64{a.Balance.Micros(), a.Held.Micros()}
				return nil
			}); err != nil {
				return err
			}
			return tx.ForEachCounter(func(name string, n uint64) error { counters[name] = n; return nil })
		})
		got := map[string][2]int64{}
		rows, _ := conn.Query(ctx, `SELECT name, (balance * 1000000)::bigint, (held * 1000000)::bigint FROM accounts`)
		for rows.Next() {
			var name string
			var bal, held int64
			if err := rows.Scan(&name, &bal, &held); err != nil {
				t.Fatal(err)
			}
			got[name] = [2]int64{bal, held}
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("balances in PostgreSQL %v, in the store %v", got, want)
		}
		var text string
		queryRow(t, conn, `SELECT balance::text FROM accounts WHERE name = 'holon-labs'`, &text)
		if text != "0.316800" {
			t.Errorf("holon-labs balance %s, want 0.316800 exactly", text)
		}
		var n int64
		queryRow(t, conn, `SELECT count(*) FROM receipts`, &n)
		if uint64(n) != counters["receipts"] {
			t.Errorf("%d receipts in PostgreSQL, counter says %d", n, counters["receipts"])
		}
		queryRow(t, conn, `SELECT count(*) FROM receipts WHERE mandate = 'alice/sandbox'`, &n)
		if uint64(n) != counters["receipts:alice/sandbox"] {
			t.Errorf("%d receipts of alice/sandbox, counter says %d", n, counters["receipts:alice/sandbox"])
		}
		var total string
		queryRow(t, conn, `SELECT sum(amount)::text FROM journal_lines`, &total)
		if total != "0.000000" {
			t.Errorf("journal lines sum to %s, want 0", total)
		}
		queryRow(t, conn, `SELECT count(*) FROM (SELECT entry FROM journal_lines GROUP BY entry HAVING sum(amount) <> 0) u`, &n)
		if n != 0 {
			t.Errorf("%d unbalanced entries", n)
		}
		queryRow(t, conn, `SELECT count(*) FROM accounts a JOIN journal_balances j ON j.account = a.name WHERE a.balance = j.balance`, &n)
		if n != int64(len(want)) {
			t.Errorf("%d of %d balances equal their lines", n, len(want))
		}
		queryRow(t, conn, `SELECT value::bigint FROM counters WHERE name = 'journal_entries'`, &n)
		if n != 7 {
			t.Errorf("journal_entries counter %d", n)
		}
		queryRow(t, conn, `SELECT value::bigint FROM sequences WHERE bucket = 'receipts'`, &n)
		if n != 10 {
			t.Errorf("receipts sequence %d", n)
		}
		var cost string
		queryRow(t, conn, `SELECT cost_own || ' ' || cost_downstream || ' ' || cost_total || ' ' || array_to_string(children, ',') FROM receipts WHERE id = 'r3'`, &cost)
		if cost != "0.100000 0.092000 0.192000 r4,r5" {
			t.Errorf("r3: %s", cost)
		}
		var splits string
		queryRow(t, conn, `SELECT string_agg(account || ' ' || amount, ', ' ORDER BY position) FROM receipt_splits WHERE receipt = 'r1'`, &splits)
		if splits != "holon 0.008000, holon-labs 0.072000" {
			t.Errorf("r1 splits: %s", splits)
		}
		var doc string
		queryRow(t, conn, `SELECT key || ' ' || (doc ->> 'reason') FROM app_docs WHERE bucket = 'modlog'`, &doc)
		if doc != "1 spam" {
			t.Errorf("modlog: %s", doc)
		}
		queryRow(t, conn, `SELECT capability || ' ' || (input ->> 'text') FROM approvals WHERE id = 'a1'`, &doc)
		if doc != "extraction.invoice ACME <Corp> & co" {
			t.Errorf("a1 input: %s", doc)
		}
		queryRow(t, conn, `SELECT sha256 FROM holon_backup`, &doc)
		if doc != sum.Trailer.SHA256 {
			t.Errorf("holon_backup.sha256 %s, want %s", doc, sum.Trailer.SHA256)
		}
	})

	t.Run("journal rules", func(t *testing.T) {
		var before int64
		queryRow(t, conn, `SELECT count(*) FROM journal_lines`, &before)
		for _, tt := range []struct{ sql, msg string }{
			{`UPDATE journal_lines SET amount = amount + 1 WHERE entry = 1`, "journal_lines is append-only: UPDATE refused"},
			{`UPDATE journal_entries SET key = 'x' WHERE seq = 1`, "journal_entries is append-only: UPDATE refused"},
			{`DELETE FROM journal_entries WHERE seq = 3`, "journal_entries is append-only: DELETE refused"},
			{`DELETE FROM journal_lines WHERE entry = 3`, "journal_lines is append-only: DELETE refused"},
			{`TRUNCATE journal_lines, journal_entries CASCADE`, "append-only: TRUNCATE refused"},
			{`DELETE FROM accounts WHERE name = 'bob'`, "account bob cannot be deleted or renamed"},
			{`UPDATE accounts SET name = 'robert' WHERE name = 'bob'`, "account bob cannot be deleted or renamed"},
			{`TRUNCATE accounts CASCADE`, "accounts cannot be truncated"},
			{`INSERT INTO journal_entries VALUES (100, 'signup:alice', now(), '', 'h100')`, "journal_entries_key_key"},
		} {
			if _, err := conn.Exec(ctx, tt.sql); err == nil || !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("%s: error %v, want %q", tt.sql, err, tt.msg)
			}
		}
		// Lines are checked when their statement ends (their entry must
		// exist by then); an entry inserted, at commit (it needs lines).
		// Either way the transaction is refused and writes nothing.
		for _, tt := range []struct {
			name  string
			stmts []string
			at    int // the statement refused; len(stmts) means the commit
			msg   string
		}{
			{"unbalanced", []string{
				`INSERT INTO journal_entries VALUES (101, 'test:unbalanced', now(), '', 'h101')`,
				`INSERT INTO journal_lines VALUES (101, 1, 'alice', -1.00), (101, 2, 'bob', 0.50)`,
			}, 1, "journal entry 101 does not sum to zero (its lines sum to -0.500000)"},
			{"balanced lines before their entry", []string{
				`INSERT INTO journal_lines VALUES (105, 1, 'alice', -1.00), (105, 2, 'bob', 1.00)`,
				`INSERT INTO journal_entries VALUES (105, 'test:lines-first', now(), '', 'h105')`,
			}, 0, "journal line for entry 105, which does not exist: an entry is written before its lines"},
			{"lines of an entry among which one is missing", []string{
				`INSERT INTO journal_entries VALUES (109, 'test:missing-among', now(), '', 'h109')`,
				`INSERT INTO journal_lines VALUES (109, 1, 'alice', -1.00), (109, 2, 'bob', 1.00), (110, 1, 'alice', -1.00), (110, 2, 'bob', 1.00)`,
			}, 1, "journal line for entry 110, which does not exist"},
			{"a line whose account does not exist", []string{
				`INSERT INTO journal_entries VALUES (111, 'test:no-account', now(), '', 'h111')`,
				`INSERT INTO journal_lines VALUES (111, 1, 'alice', -1.00), (111, 2, 'nobody', 1.00)`,
			}, 1, "journal line for account nobody, which does not exist: an account is written before its lines"},
			{"lines split over two statements after their entry", []string{
				`INSERT INTO journal_entries VALUES (106, 'test:split', now(), '', 'h106')`,
				`INSERT INTO journal_lines VALUES (106, 1, 'alice', -1.00)`,
				`INSERT INTO journal_lines VALUES (106, 2, 'bob', 1.00)`,
			}, 1, "journal entry 106 has 1 line(s)"},
			{"one line", []string{
				`INSERT INTO journal_entries VALUES (102, 'test:one-line', now(), '', 'h102')`,
				`INSERT INTO journal_lines VALUES (102, 1, 'alice', 0.00)`,
			}, 1, "journal entry 102 has 1 line(s)"},
			{"no line", []string{
				`INSERT INTO journal_entries VALUES (103, 'test:no-line', now(), '', 'h103')`,
			}, 1, "journal entry 103 has 0 line(s)"},
			{"a line added to an old entry", []string{
				`INSERT INTO journal_lines VALUES (1, 3, 'holon', 0.01)`,
			}, 0, "journal entry 1 does not sum to zero"},
			{"a line added to an old entry, among balanced ones", []string{
				`INSERT INTO journal_entries VALUES (108, 'test:among', now(), '', 'h108')`,
				`INSERT INTO journal_lines VALUES (108, 1, 'alice', -1.00), (108, 2, 'bob', 1.00), (2, 9, 'holon', 0.01)`,
			}, 1, "journal entry 2 does not sum to zero"},
		} {
			tx, err := conn.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			refused := len(tt.stmts)
			for i, sql := range tt.stmts {
				if _, err = tx.Exec(ctx, sql); err != nil {
					refused = i
					break
				}
			}
			if refused == len(tt.stmts) {
				err = tx.Commit(ctx)
			} else {
				tx.Rollback(ctx)
			}
			if refused != tt.at || err == nil || !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("%s: refused at step %d of %d (the last is the commit) with %v, want step %d with %q", tt.name, refused, len(tt.stmts), err, tt.at, tt.msg)
			}
		}
		var after int64
		queryRow(t, conn, `SELECT count(*) FROM journal_lines`, &after)
		if after != before {
			t.Errorf("journal lines %d, were %d", after, before)
		}
		// A balanced entry is accepted: the rules refuse only what they must.
		tx, err := conn.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		tx.Exec(ctx, `INSERT INTO journal_entries VALUES (104, 'admin-credit:1', now(), '', 'h104')`)
		tx.Exec(ctx, `INSERT INTO journal_lines VALUES (104, 1, 'external:demo-credit', -1.000001), (104, 2, 'bob', 1.000001)`)
		if err := tx.Commit(ctx); err != nil {
			t.Errorf("a balanced entry was refused: %v", err)
		}
	})

	t.Run("a database that is not empty", func(t *testing.T) {
		_, err := backup.LoadPostgres(ctx, bytes.NewReader(good), url, nil)
		if !errors.Is(err, backup.ErrDatabaseNotEmpty) || !strings.Contains(err.Error(), "public.") {
			t.Fatalf("error %v, want ErrDatabaseNotEmpty naming what it holds", err)
		}
		var n int64
		queryRow(t, conn, `SELECT count(*) FROM receipts`, &n)
		if n != 10 {
			t.Errorf("%d receipts after a refused load", n)
		}
	})

	ls := lines(good)
	unbalanced := reseal(t, editRow(t, ls, "journal", `"key":"signup:bob"`, func(v map[string]any) {
		v["lines"].([]any)[1].(map[string]any)["amount"] = "50.00"
	}))
	editedBalance := reseal(t, editRow(t, ls, "accounts", `"k":"bob"`, func(v map[string]any) { v["balance"] = "50.00" }))
	for _, tt := range []struct {
		name string
		file []byte
		want error
		msg  string
	}{
		{"truncated", good[:len(good)*2/3], backup.ErrTruncated, "without its trailer"},
		{"corrupted", bytes.Replace(good, []byte(`"4.728"`), []byte(`"4.729"`), 1), backup.ErrCorrupt, "checksum"},
		{"unknown version", bytes.Replace(good, []byte(`"version":1`), []byte(`"version":9`), 1), backup.ErrVersion, "version 9"},
		{"an unbalanced entry", unbalanced, nil, "journal entry 2 does not sum to zero"},
		{"a balance edited by hand", editedBalance, nil, "bob has balance 50.000000, its lines sum to 4.920000"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			url := srv.CreateDB(t, "bad_"+strings.ReplaceAll(tt.name, " ", "_"))
			_, err := backup.LoadPostgres(ctx, bytes.NewReader(tt.file), url, nil)
			if err == nil || (tt.want != nil && !errors.Is(err, tt.want)) || !strings.Contains(err.Error(), tt.msg) {
				t.Fatalf("error %v, want %v saying %q", err, tt.want, tt.msg)
			}
			var n int64
			queryRow(t, srv.Connect(t, url), `SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'public'`, &n)
			if n != 0 {
				t.Errorf("a refused load left %d relations", n)
			}
		})
	}
}

func queryRow(t *testing.T, conn *pgx.Conn, sql string, dst ...any) {
	t.Helper()
	if err := conn.QueryRow(context.Background(), sql).Scan(dst...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// Ensure that the PostgreSQL loader carries every field of the store's
// records: a field added to one of them must get a column (and this list),
// or the loader would drop it.
func TestLoadPostgres_CoversEveryField(t *testing.T) {
	mapped := map[reflect.Type][]string{
		reflect.TypeFor[holon.Receipt]():    {"id", "parent", "mandate", "caller", "agent", "status", "error", "approval", "worst_case", "currency", "payer", "sub_mandate", "billed", "cost", "splits", "children", "duration_ms", "created"},
		reflect.TypeFor[holon.Cost]():       {"own", "downstream", "total"},
		reflect.TypeFor[holon.Approval]():   {"id", "mandate", "caller", "agent", "capability", "input_hash", "max_cost", "worst_case", "currency", "receipt", "status", "created", "expires", "decided", "run", "input"},
		reflect.TypeFor[holon.Hold]():       {"receipt", "payer", "amount", "mandate", "reserved", "funder", "parent", "children", "downstream", "sub_mandate", "started", "window"},
		reflect.TypeFor[holon.Event]():      {"seq", "receipt", "agent", "status", "error", "duration_ms", "billed", "currency", "delegated", "time"},
		reflect.TypeFor[holon.Record]():     {"runs", "succeeded", "billed", "duration_ms"},
		reflect.TypeFor[holon.Account]():    {"balance", "held"},
		reflect.TypeFor[holon.Budget]():     {"spent", "reserved"},
		reflect.TypeFor[holon.Doc]():        {"doc", "created", "published", "yanked", "revoked"},
		reflect.TypeFor[holon.JournalRow](): {"seq", "key", "time", "lines", "prev", "hash"},
		reflect.TypeFor[journal.Line]():     {"account", "amount"},
		reflect.TypeFor[journal.Share]():    {"to", "amount"},
	}
	for typ, want := range mapped {
		var got []string
		for f := range typ.Fields() {
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if f.IsExported() && name != "-" {
				got = append(got, name)
			}
		}
		sort.Strings(got)
		want = slices.Sorted(slices.Values(want))
		if !slices.Equal(got, want) {
			t.Errorf("%s has JSON fields %v; the PostgreSQL loader maps %v: update kv/pg/migrations and postgres.go", typ, got, want)
		}
	}
}
