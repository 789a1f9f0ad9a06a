package backup

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/big"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"holon.dev/holon"
	"holon.dev/holon/kv"
	"holon.dev/holon/kv/pg"
)

// Schema is the PostgreSQL schema a backup loads into, version 1 of the
// PostgreSQL store's (kv/pg): tables with keys and constraints, and the
// journal's rules as database constraints. The loader checks the backup
// against it, then applies the store's later versions.
var Schema = pg.Migrations()[0].SQL

// ErrDatabaseNotEmpty is returned when the target PostgreSQL database
// already holds tables or functions.
var ErrDatabaseNotEmpty = errors.New("PostgreSQL database is not empty")

// LoadSummary describes a backup loaded into PostgreSQL.
type LoadSummary struct {
	Summary
	// Tables is how many rows went into each PostgreSQL table.
	Tables map[string]int64
}

// LoadPostgres applies Schema to the empty PostgreSQL database at url and
// loads the backup read from r into it, in one transaction. The file is
// checked as it is read (counts, checksum); the database checks the rest
// (keys, amounts, the journal's rules) and the loader checks that every
// balance is the sum of its lines. Nothing is committed unless all of it
// holds. progress, when set, gets the rows read and the total.
func LoadPostgres(ctx context.Context, r io.Reader, url string, progress func(done, total int64)) (LoadSummary, error) {
	cr := &countReader{r: r}
	rd, err := NewReader(cr)
	if err != nil {
		return LoadSummary{}, err
	}
	hd := rd.Header()
	sum := LoadSummary{Summary: Summary{Header: hd}, Tables: map[string]int64{}}
	if hd.Schema != kv.SchemaVersion {
		return sum, fmt.Errorf("the backup holds a store of schema %d, this loader reads schema %d", hd.Schema, kv.SchemaVersion)
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return sum, fmt.Errorf("connect to PostgreSQL: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if err := checkEmptyDatabase(ctx, conn); err != nil {
		return sum, err
	}
	tx, err := conn.Begin(ctx)
	if err != nil {
		return sum, err
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	if err := pg.ApplyTo(ctx, tx, 0, 1); err != nil {
		return sum, fmt.Errorf("apply the schema: %w", err)
	}
	if _, err := tx.Exec(ctx, `CREATE TEMP TABLE journal_stage (seq bigint, key text, time text, prev text, hash text, lines jsonb) ON COMMIT DROP`); err != nil {
		return sum, err
	}
	if _, err := tx.Exec(ctx, `CREATE TEMP TABLE budget_windows_stage (mandate text, win text, spent numeric(20,6), reserved numeric(20,6)) ON COMMIT DROP`); err != nil {
		return sum, err
	}
	l := &pgLoader{ctx: ctx, tx: tx, rd: rd, progress: progress, counts: sum.Tables, sums: map[string][]uint64{}}
	if err := l.load(); err != nil {
		return sum, err
	}
	t, ok := rd.Trailer()
	if !ok {
		return sum, errors.New("load ended before the trailer was checked")
	}
	sum.Trailer, sum.Bytes = t, cr.n
	if err := l.finish(hd, t); err != nil {
		return sum, err
	}
	// Checked against version 1 (its references included): now the
	// versions a gateway serves from.
	if err := pg.ApplyTo(ctx, tx, 1, pg.SchemaVersion()); err != nil {
		return sum, fmt.Errorf("migrate the loaded schema: %w", err)
	}
	if err := l.moveStaged(); err != nil {
		return sum, err
	}
	// Every table reads back as the backup's rows, in the schema a
	// gateway serves from.
	if err := l.checkReadBack(); err != nil {
		return sum, err
	}
	if err := tx.Commit(ctx); err != nil {
		return sum, fmt.Errorf("PostgreSQL refused the load at commit: %w", err)
	}
	return sum, nil
}

// checkEmptyDatabase refuses a database that holds any table, view,
// sequence or function outside PostgreSQL's own schemas.
func checkEmptyDatabase(ctx context.Context, conn *pgx.Conn) error {
	rows, err := conn.Query(ctx, `
		SELECT n.nspname || '.' || c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname NOT LIKE 'pg\_toast%' AND n.nspname NOT LIKE 'pg\_temp%'
		UNION ALL
		SELECT n.nspname || '.' || p.proname || '()' FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
		WHERE n.nspname NOT IN ('pg_catalog', 'information_schema')
		ORDER BY 1 LIMIT 6`)
	if err != nil {
		return fmt.Errorf("inspect the PostgreSQL database: %w", err)
	}
	held, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return fmt.Errorf("inspect the PostgreSQL database: %w", err)
	}
	if len(held) > 0 {
		if len(held) > 5 {
			held = append(held[:5], "…")
		}
		return fmt.Errorf("%w (it holds %s): load into a new database (createdb)", ErrDatabaseNotEmpty, strings.Join(held, ", "))
	}
	return nil
}

// pgTable is where one bucket's rows go.
type pgTable struct {
	name    string
	columns []string
	convert func(r kv.Row) ([]any, error)
}

// derived buckets are indexes of other buckets; PostgreSQL builds its own.
var derived = map[string]string{
	"journal_keys":        "journal",
	"receipts_by_mandate": "receipts",
}

// pgTables maps the store's buckets to tables; any other bucket goes to app_docs.
var pgTables = map[string]pgTable{
	"accounts": {"accounts", []string{"name", "balance", "held"}, convertAccount},
	"agents":   {"agents", docColumns("ref"), convertDoc},
	"mandates": {"mandates", docColumns("id"), convertDoc},
	"budgets":  {"budgets", []string{"mandate", "spent", "reserved"}, convertBudget},
	// budget_windows and holds.budget_window come with version 7 of the
	// schema: staged while the backup is checked against version 1, moved
	// in once the later versions are applied (moveStaged).
	"budget_windows": {"budget_windows_stage", []string{"mandate", "win", "spent", "reserved"}, convertBudgetWindow},
	"counters":       {"counters", []string{"name", "value"}, convertCounter},
	"meta":           {"meta", []string{"key", "value"}, convertMeta},
	"journal":        {"journal_stage", []string{"seq", "key", "time", "prev", "hash", "lines"}, convertJournal},
	"receipts":       {"receipts", receiptColumns, convertReceipt},
	"approvals":      {"approvals", approvalColumns, convertApproval},
	"holds":          {"holds", holdColumns, convertHold},
	"call_events":    {"call_events", eventColumns, convertEvent},
	"records":        {"agent_records", []string{"agent", "runs", "succeeded", "billed", "duration_ms"}, convertRecord},
	// Publishing (postgres_publish.go).
	holon.BucketCredentials: {"credentials", credentialColumns, convertCredential},
	holon.BucketSignIn:      {"signin", signinColumns, convertSignIn},
}

var appDocs = pgTable{"app_docs", []string{"bucket", "key", "key_bytes", "doc", "raw"}, convertAppDoc}

type pgLoader struct {
	ctx      context.Context
	tx       pgx.Tx
	rd       *Reader
	progress func(done, total int64)
	counts   map[string]int64
	// sums are the digests of each loaded bucket's rows, in file order
	// (postgres_readback.go).
	sums    map[string][]uint64
	pending *kv.Row
	eof     bool
	// holdWindows are the budget windows of the calls in flight, by
	// receipt, set once the schema has the column (moveStaged).
	holdWindows map[string]string
}

// convertHold is convertHold, keeping the hold's budget window aside.
func (l *pgLoader) convertHold(r kv.Row) ([]any, error) {
	var h holon.Hold
	if err := decode(r.Value, &h); err != nil {
		return nil, err
	}
	if h.Window != "" {
		if l.holdWindows == nil {
			l.holdWindows = map[string]string{}
		}
		l.holdWindows[h.Receipt] = h.Window
	}
	return convertHold(r)
}

// moveStaged moves what version 1 of the schema has no place for into the
// tables of the later versions.
func (l *pgLoader) moveStaged() error {
	tag, err := l.tx.Exec(l.ctx, `INSERT INTO budget_windows (mandate, win, spent, reserved)
		SELECT mandate, win, spent, reserved FROM budget_windows_stage`)
	if err != nil {
		return fmt.Errorf("load budget windows: %w", err)
	}
	l.counts["budget_windows"] = tag.RowsAffected()
	delete(l.counts, "budget_windows_stage")
	// Refunds stay within their receipts (the rule version 8's trigger
	// keeps for every later write), checked here for the rows loaded.
	var bad []string
	rows, err := l.tx.Query(l.ctx, `SELECT d.doc ->> 'receipt', sum((d.doc ->> 'amount')::numeric)::text, coalesce(r.cost_own::text, 'none'), coalesce(r.billed, false)
		FROM app_docs d LEFT JOIN receipts r ON r.id = d.doc ->> 'receipt' WHERE d.bucket = 'refunds'
		GROUP BY d.doc ->> 'receipt', r.cost_own, r.billed
		HAVING r.cost_own IS NULL OR NOT r.billed OR sum((d.doc ->> 'amount')::numeric) > r.cost_own`)
	if err != nil {
		return fmt.Errorf("check the refunds: %w", err)
	}
	for rows.Next() {
		var id, refunded, own string
		var billed bool
		if err := rows.Scan(&id, &refunded, &own, &billed); err != nil {
			rows.Close()
			return err
		}
		bad = append(bad, fmt.Sprintf("receipt %s (cost.own %s, billed %v) is refunded %s", id, own, billed, refunded))
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	if len(bad) > 0 {
		return fmt.Errorf("%w: refunds above their receipts: %s", ErrCorrupt, strings.Join(bad, "; "))
	}
	for receipt, w := range l.holdWindows {
		if _, err := l.tx.Exec(l.ctx, `UPDATE holds SET budget_window = $2 WHERE receipt = $1`, receipt, w); err != nil {
			return fmt.Errorf("load the budget window of hold %s: %w", receipt, err)
		}
	}
	return nil
}

// peek returns the next row without taking it; false after the trailer.
func (l *pgLoader) peek() (*kv.Row, error) {
	if l.pending != nil || l.eof {
		return l.pending, nil
	}
	r, err := l.rd.Next()
	if l.progress != nil && (err != nil || l.rd.Rows()%progressEvery == 0) {
		l.progress(l.rd.Rows(), l.rd.Header().Rows)
	}
	if errors.Is(err, io.EOF) {
		l.eof = true
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	l.pending = &r
	return l.pending, nil
}

// load copies the rows, one COPY per bucket.
func (l *pgLoader) load() error {
	for {
		r, err := l.peek()
		if err != nil {
			return err
		}
		if r == nil {
			return nil
		}
		bucket := r.Bucket
		if _, ok := derived[bucket]; ok {
			for r != nil && r.Bucket == bucket {
				l.counts[bucket]++
				l.pending = nil
				if r, err = l.peek(); err != nil {
					return err
				}
			}
			continue
		}
		t, ok := pgTables[bucket]
		if !ok {
			t = appDocs
		}
		convert := t.convert
		if bucket == "holds" {
			convert = l.convertHold
		}
		src := &copySource{l: l, bucket: bucket, convert: convert}
		n, err := l.tx.CopyFrom(l.ctx, pgx.Identifier{t.name}, t.columns, src)
		if src.err != nil {
			return src.err
		}
		if err != nil {
			return fmt.Errorf("load %s into %s: %w", bucket, t.name, err)
		}
		l.counts[t.name] += n
	}
}

// copySource feeds one bucket's rows to a COPY.
type copySource struct {
	l       *pgLoader
	bucket  string
	convert func(kv.Row) ([]any, error)
	values  []any
	err     error
}

func (s *copySource) Next() bool {
	r, err := s.l.peek()
	if err != nil {
		s.err = err
		return false
	}
	if r == nil || r.Bucket != s.bucket {
		return false
	}
	s.l.pending = nil
	if s.values, s.err = s.convert(*r); s.err != nil {
		s.err = fmt.Errorf("%w: line %d: %s %s: %v", ErrCorrupt, s.l.rd.Line(), r.Bucket, keyText(r.Key), s.err)
		return false
	}
	s.l.sums[s.bucket] = append(s.l.sums[s.bucket], rowSum(r.Key, r.Value))
	return true
}

func (s *copySource) Values() ([]any, error) { return s.values, nil }
func (s *copySource) Err() error             { return s.err }

// finish moves the journal into its tables, loads the sequences and the
// backup's description, and checks what the database cannot.
func (l *pgLoader) finish(hd Header, t Trailer) error {
	ctx, tx := l.ctx, l.tx
	tag, err := tx.Exec(ctx, `INSERT INTO journal_entries (seq, key, time, prev, hash)
		SELECT seq, key, time, prev, hash FROM journal_stage ORDER BY seq`)
	if err != nil {
		return fmt.Errorf("load journal entries: %w", err)
	}
	l.counts["journal_entries"] = tag.RowsAffected()
	delete(l.counts, "journal_stage")
	tag, err = tx.Exec(ctx, `INSERT INTO journal_lines (entry, position, account, amount)
		SELECT s.seq, l.position, l.line ->> 'account', (l.line ->> 'amount')::numeric(20,6)
		FROM journal_stage s, jsonb_array_elements(s.lines) WITH ORDINALITY AS l (line, position)`)
	if err != nil {
		return fmt.Errorf("load journal lines: %w", err)
	}
	l.counts["journal_lines"] = tag.RowsAffected()
	for bucket, of := range derived {
		if hd.Tables[bucket].Rows != hd.Tables[of].Rows {
			return fmt.Errorf("%w: index %s has %d rows for %d in %s", ErrCorrupt, bucket, hd.Tables[bucket].Rows, hd.Tables[of].Rows, of)
		}
	}
	var seqs [][]any
	for name, tb := range hd.Tables {
		seqs = append(seqs, []any{name, u64Numeric(tb.Sequence)})
	}
	if _, err := tx.CopyFrom(ctx, pgx.Identifier{"sequences"}, []string{"bucket", "value"}, pgx.CopyFromRows(seqs)); err != nil {
		return fmt.Errorf("load sequences: %w", err)
	}
	if _, err := tx.Exec(ctx, `INSERT INTO holon_backup (format_version, gateway, store_schema, taken, row_count, sha256)
		VALUES ($1, $2, $3, $4, $5, $6)`, Version, hd.Gateway, int64(hd.Schema), hd.Time, t.Rows, t.SHA256); err != nil {
		return err
	}
	// Let PostgreSQL check its deferred rules (balanced entries, keys) now,
	// so that its own refusal is what an operator reads.
	if _, err := tx.Exec(ctx, `SET CONSTRAINTS ALL IMMEDIATE`); err != nil {
		return fmt.Errorf("PostgreSQL refused the backup: %w", err)
	}
	rows, err := tx.Query(ctx, `SELECT a.name, a.balance::text, coalesce(j.balance, 0)::text
		FROM (SELECT name, sum(balance) AS balance FROM accounts GROUP BY name) a LEFT JOIN journal_balances j ON j.account = a.name
		WHERE a.balance <> coalesce(j.balance, 0) ORDER BY a.name LIMIT 5`)
	if err != nil {
		return err
	}
	var bad []string
	for rows.Next() {
		var name, bal, lines string
		if err := rows.Scan(&name, &bal, &lines); err != nil {
			return err
		}
		bad = append(bad, fmt.Sprintf("%s has balance %s, its lines sum to %s", name, bal, lines))
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if len(bad) > 0 {
		return fmt.Errorf("balances are not the sums of the journal: %s (run holon verify on the backup)", strings.Join(bad, "; "))
	}
	return nil
}

// Conversions: amounts are integer micro-units, sent as NUMERIC with six
// decimals, never through a float.

func u64Numeric(n uint64) pgtype.Numeric {
	return pgtype.Numeric{Int: new(big.Int).SetUint64(n), Valid: true}
}

func bigint(n uint64) (int64, error) {
	if n > math.MaxInt64 {
		return 0, fmt.Errorf("%d does not fit a bigint", n)
	}
	return int64(n), nil
}

// ts is a time as the store's JSON writes it (RFC 3339, nanoseconds, its
// zone offset): the schema keeps times as that text.
func ts(t time.Time) string { return t.Format(time.RFC3339Nano) }

func optTs(t *time.Time) *string {
	if t == nil {
		return nil
	}
	s := ts(*t)
	return &s
}

func optText(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// decode reads a stored document strictly: a field the schema does not
// know would be lost, so it is an error.
func decode(b []byte, v any) error {
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		return err
	}
	if d.More() {
		return errors.New("data after the document")
	}
	return nil
}

func docColumns(key string) []string {
	return []string{key, "doc", "created", "published", "yanked", "revoked"}
}

func convertAccount(r kv.Row) ([]any, error) {
	var a holon.Account
	if err := decode(r.Value, &a); err != nil {
		return nil, err
	}
	return []any{string(r.Key), pg.Numeric(a.Balance), pg.Numeric(a.Held)}, nil
}

func convertDoc(r kv.Row) ([]any, error) {
	var d holon.Doc
	if err := decode(r.Value, &d); err != nil {
		return nil, err
	}
	if len(d.Doc) == 0 {
		d.Doc = json.RawMessage("null")
	}
	return []any{string(r.Key), d.Doc, ts(d.Created), d.Published, optText(d.Yanked), d.Revoked}, nil
}

func convertBudget(r kv.Row) ([]any, error) {
	var b holon.Budget
	if err := decode(r.Value, &b); err != nil {
		return nil, err
	}
	return []any{string(r.Key), pg.Numeric(b.Spent), pg.Numeric(b.Reserved)}, nil
}

// convertBudgetWindow reads a budget window's row (mandate 0x00 window key).
func convertBudgetWindow(r kv.Row) ([]any, error) {
	mandate, window, ok := bytes.Cut(r.Key, []byte{0})
	if !ok || len(window) == 0 {
		return nil, fmt.Errorf("budget window key %q is not mandate 0x00 window", r.Key)
	}
	var b holon.Budget
	if err := decode(r.Value, &b); err != nil {
		return nil, err
	}
	return []any{string(mandate), string(window), pg.Numeric(b.Spent), pg.Numeric(b.Reserved)}, nil
}

func convertCounter(r kv.Row) ([]any, error) {
	if len(r.Value) != 8 {
		return nil, fmt.Errorf("a counter of %d bytes, want 8", len(r.Value))
	}
	return []any{string(r.Key), u64Numeric(binary.BigEndian.Uint64(r.Value))}, nil
}

func convertMeta(r kv.Row) ([]any, error) {
	v := string(r.Value)
	if string(r.Key) == "schema" {
		if len(r.Value) != 8 {
			return nil, fmt.Errorf("schema of %d bytes, want 8", len(r.Value))
		}
		v = strconv.FormatUint(binary.BigEndian.Uint64(r.Value), 10)
	}
	return []any{string(r.Key), v}, nil
}

func convertJournal(r kv.Row) ([]any, error) {
	var row holon.JournalRow
	if err := decode(r.Value, &row); err != nil {
		return nil, err
	}
	seq, err := bigint(row.Seq)
	if err != nil {
		return nil, err
	}
	if len(r.Key) != 8 || binary.BigEndian.Uint64(r.Key) != row.Seq {
		return nil, fmt.Errorf("journal row %d is stored under another key", row.Seq)
	}
	lines, err := json.Marshal(row.Lines)
	if err != nil {
		return nil, err
	}
	return []any{seq, row.Key, ts(row.Time), row.Prev, row.Hash, json.RawMessage(lines)}, nil
}

var receiptColumns = []string{"id", "seq", "parent", "mandate", "caller", "agent", "status", "error", "approval",
	"worst_case", "currency", "payer", "sub_mandate", "billed", "cost_own", "cost_downstream", "cost_total",
	"splits", "children", "duration_ms", "created"}

func convertReceipt(r kv.Row) ([]any, error) {
	var rc holon.Receipt
	if err := decode(r.Value, &rc); err != nil {
		return nil, err
	}
	seq, ok := holon.ReceiptSeq(rc.ID)
	if !ok || len(r.Key) != 8 || binary.BigEndian.Uint64(r.Key) != seq {
		return nil, fmt.Errorf("receipt %q is stored under another key", rc.ID)
	}
	n, err := bigint(seq)
	if err != nil {
		return nil, err
	}
	var sj json.RawMessage
	if rc.Splits != nil {
		if sj, err = json.Marshal(rc.Splits); err != nil {
			return nil, err
		}
	}
	children := rc.Children
	return []any{rc.ID, n, rc.Parent, rc.Mandate, rc.Caller, rc.Agent, rc.Status, rc.Error, rc.Approval,
		pg.OptNumeric(rc.WorstCase), rc.Currency, rc.Payer, rc.SubMandate, rc.Billed,
		pg.Numeric(rc.Cost.Own), pg.Numeric(rc.Cost.Downstream), pg.Numeric(rc.Cost.Total),
		sj, children, rc.DurationMS, ts(rc.Created)}, nil
}

var approvalColumns = []string{"id", "seq", "mandate", "caller", "agent", "capability", "input_hash", "max_cost", "worst_case",
	"currency", "receipt", "status", "created", "expires", "decided", "run", "input"}

func convertApproval(r kv.Row) ([]any, error) {
	var a holon.Approval
	if err := decode(r.Value, &a); err != nil {
		return nil, err
	}
	seq, ok := holon.ApprovalSeq(a.ID)
	if !ok || len(r.Key) != 8 || binary.BigEndian.Uint64(r.Key) != seq {
		return nil, fmt.Errorf("approval %q is stored under another key", a.ID)
	}
	n, err := bigint(seq)
	if err != nil {
		return nil, err
	}
	var input any
	if len(a.Input) > 0 {
		input = a.Input
	}
	return []any{a.ID, n, a.Mandate, a.Caller, a.Agent, optText(a.Capability), a.InputHash, pg.OptNumeric(a.MaxCost), pg.Numeric(a.WorstCase),
		a.Currency, a.Receipt, a.Status, ts(a.Created), ts(a.Expires), optTs(a.Decided), a.Run, input}, nil
}

var holdColumns = []string{"receipt", "payer", "amount", "mandate", "reserved", "funder", "parent", "children",
	"downstream", "sub_mandate", "started"}

func convertHold(r kv.Row) ([]any, error) {
	var h holon.Hold
	if err := decode(r.Value, &h); err != nil {
		return nil, err
	}
	children := h.Children
	if children == nil {
		children = []string{}
	}
	return []any{h.Receipt, h.Payer, pg.Numeric(h.Amount), h.Mandate, pg.Numeric(h.Reserved), optText(h.Funder),
		optText(h.Parent), children, pg.Numeric(h.Downstream), optText(h.SubMandate), ts(h.Started)}, nil
}

var eventColumns = []string{"seq", "receipt", "agent", "status", "error", "duration_ms", "billed", "currency",
	"delegated", "time"}

func convertEvent(r kv.Row) ([]any, error) {
	var ev holon.Event
	if err := decode(r.Value, &ev); err != nil {
		return nil, err
	}
	seq, err := bigint(ev.Seq)
	if err != nil {
		return nil, err
	}
	return []any{seq, ev.Receipt, ev.Agent, ev.Status, optText(ev.Error), ev.DurationMS, pg.Numeric(ev.Billed),
		ev.Currency, ev.Delegated, ts(ev.Time)}, nil
}

func convertRecord(r kv.Row) ([]any, error) {
	var rec holon.Record
	if err := decode(r.Value, &rec); err != nil {
		return nil, err
	}
	return []any{string(r.Key), rec.Runs, rec.Succeeded, pg.Numeric(rec.Billed), rec.DurationMS}, nil
}

func convertAppDoc(r kv.Row) ([]any, error) {
	var doc, raw any
	if isDocument(r.Value) {
		doc = json.RawMessage(r.Value)
	} else {
		raw = r.Value
	}
	return []any{r.Bucket, keyText(r.Key), r.Key, doc, raw}, nil
}

// keyText is a key as a person reads it, as in the backup's row lines.
func keyText(k []byte) string {
	switch {
	case printable(k):
		return string(k)
	case len(k) == 8:
		return strconv.FormatUint(binary.BigEndian.Uint64(k), 10)
	default:
		return base64.StdEncoding.EncodeToString(k)
	}
}
