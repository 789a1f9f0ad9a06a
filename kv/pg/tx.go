package pg

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"holon.dev/holon"
	"holon.dev/holon/journal"
)

// Tx is a transaction on the store: read-only inside View.
type Tx struct {
	s        *Store
	ctx      context.Context
	tx       querier
	readOnly bool
	// fatal is the first error that ends the whole transaction (a
	// serialization conflict, the connection lost); failed the first
	// error PostgreSQL returned to this update, which leaves the
	// transaction refusing statements until the update is undone.
	fatal, failed error
	// restart reports that a round trip this update made failed on a
	// statement of an earlier update of its group: that one failed, and
	// this one runs again from its start (every method refuses meanwhile).
	restart bool
	// sent reports whether any statement of this update reached the
	// database.
	sent bool
	// g is the writer's group this update runs in, idx its place in it
	// and l its changes to the writer's cache (cache.go); g is nil in
	// View.
	g   *group
	idx int
	l   layer
	// began is when the update began running (Unix nanoseconds), and
	// usedMoved the moved rows it used from what the writer knew before
	// (overlap.go: judgedStale).
	began     int64
	usedMoved []string
	// ahead are the rows a View reads with its next round trip
	// (RecordsAhead, AccountsAhead, CountersAhead).
	ahead ahead
	// recent: a View served from the writer's cache (recent.go).
	recent bool
	// inner counts the methods running that change rows by deltas a
	// rebase can move (spec.go): the rows they read are theirs, not
	// what the update sees.
	inner int
	// atCommit are the CounterAt calls of this update.
	atCommit []counterAt
	// overdrafts are the accounts the update moved, with what they had
	// available before it (holon.Overdrafts).
	overdrafts holon.Overdrafts
	// limits are the budgets' limits the update declared, and the budgets
	// it moved (holon.BudgetLimits).
	limits holon.BudgetLimits
	// numbered is the last number the update handed out, by bucket.
	numbered map[string]uint64
	// seen are the rows written whole that the update read, as it first
	// found them, for its writes of them to be checked (guards.go).
	seen map[string]entry
}

// counterAt is a CounterAt call: f is told the counter under key k once
// the group commits.
type counterAt struct {
	k string
	f func(uint64)
}

// inside marks the rows read until the function it returns runs as read
// by a change that a rebase can move (spec.go), not seen by the update.
func (t *Tx) inside() func() {
	t.inner++
	return func() { t.inner-- }
}

// ahead are the rows a View reads with its next round trip: agent
// versions' records, accounts and counters, by name.
type ahead struct {
	records, accounts, counters []string
}

// querier is a pgx.Tx (View) or the writer's connection.
type querier interface {
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// queued is a statement waiting in the group's pending writes, with the
// update it belongs to (-1: the group's own).
type queued struct {
	sql   string
	args  []any
	owner int
	// wrap, when set, says what PostgreSQL's refusal of it means.
	wrap func(error) error
	// free: it leaves the hot rows and rollups alone, so that their
	// writes may be sent after it (rows.go).
	free bool
	// touches, when set, are the cache keys of the only hot rows it
	// changes (by what the database holds): their writes go before it.
	touches []string
	// row is a hot row's new value under cache key key, roll a rollup's
	// addition: rendered into statements when sent (rows.go).
	key  string
	row  *rowWrite
	roll *rollupAdd
}

var (
	_ holon.Tx           = (*Tx)(nil)
	_ holon.RecordsAhead = (*Tx)(nil)
	_ holon.ReadsAhead   = (*Tx)(nil)
)

// errRestart is what an update's methods return once it must run again.
var errRestart = errors.New("an earlier update of the group failed: this one runs again")

// StoreSchema is the version of the store's records (kv.SchemaVersion),
// written in meta as the embedded store writes it, so that a backup of
// either store reads the same.
const StoreSchema = 1

// initMeta writes the store's metadata into a new database.
func initMeta(t holon.Tx) error {
	tx := t.(*Tx)
	return tx.exec(`INSERT INTO meta (key, value) VALUES ('schema', $1) ON CONFLICT (key) DO NOTHING`, strconv.Itoa(StoreSchema))
}

// Now is the store's clock.
func (t *Tx) Now() time.Time { return t.s.now() }

// note records what an error means for the transaction and returns it.
func (t *Tx) note(err error) error {
	if err == nil || errors.Is(err, pgx.ErrNoRows) {
		return err
	}
	err = refusal(err)
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || conflict(err) || serverGone(pe.Code) {
		if t.fatal == nil {
			t.fatal = err
		}
		return err
	}
	if t.failed == nil {
		t.failed = err
	}
	return err
}

// refusal names what a check of the database refused, when a holon
// error says it (the PostgreSQL error stays wrapped).
func refusal(err error) error {
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "23514" {
		switch pe.ConstraintName {
		case "accounts_available":
			return fmt.Errorf("%w: %w", holon.ErrOverdrawn, err)
		case "budgets_within":
			return fmt.Errorf("%w: %w", holon.ErrOverBudget, err)
		case "rows_gone_once", "rows_as_read":
			return fmt.Errorf("%w: %w", holon.ErrChangedMeanwhile, err)
		}
	}
	return err
}

// staleRow is the cache key of the row a check of the database refused
// from its own values (migrations 18 to 20: the error's detail names it),
// "" for any other error: the writer's idea of that row was stale, since
// it judged the update allowed.
func staleRow(err error) string {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "23514" || pe.Detail == "" {
		return ""
	}
	switch pe.ConstraintName {
	case "accounts_available":
		return kAccount(pe.Detail)
	case "budgets_within":
		mandate, win, _ := strings.Cut(pe.Detail, "\n")
		if win == "" {
			return kBudget(mandate)
		}
		return kWindow(mandate, win)
	case "rows_gone_once":
		if table, key, _ := strings.Cut(pe.Detail, "\n"); table == "holds" {
			return kHold(key)
		}
	case "rows_as_read":
		return pe.Detail
	}
	return ""
}

func (t *Tx) writable() error {
	if t.readOnly {
		return errors.New("write in a read-only transaction")
	}
	return nil
}

// exec queues a write: it is sent with the next statement that must be
// answered (a read, of this update or a later one of its group, or the
// group's end). Its error, if PostgreSQL refuses it, is the error of this
// update.
func (t *Tx) exec(sql string, args ...any) error {
	return t.queue(queued{sql: sql, args: args})
}

// execFree is exec of a write that leaves the hot rows and rollups alone
// (rows.go).
func (t *Tx) execFree(sql string, args ...any) error {
	return t.queue(queued{sql: sql, args: args, free: true})
}

// execRow is execFree of a write of the one row under cache key k: the
// writes of that row waiting to be sent go before it (rows.go).
func (t *Tx) execRow(k, sql string, args ...any) error {
	return t.queue(queued{sql: sql, args: args, free: true, key: k})
}

// execTouching is exec of a write that changes, of the hot rows, only
// those under the cache keys touches (rows.go).
func (t *Tx) execTouching(touches []string, sql string, args ...any) error {
	return t.queue(queued{sql: sql, args: args, touches: touches})
}

// queue adds a write of this update to the group's pending writes.
func (t *Tx) queue(q queued) error {
	if err := t.writable(); err != nil {
		return err
	}
	if err := t.err(); err != nil {
		return err
	}
	q.owner = t.idx
	t.g.pending = append(t.g.pending, q)
	return nil
}

// execWrapped is exec with what PostgreSQL's refusal of the write means.
func (t *Tx) execWrapped(wrap func(error) error, sql string, args ...any) error {
	return t.queue(queued{sql: sql, args: args, wrap: wrap, free: true})
}

// err is the error that stopped this update.
func (t *Tx) err() error {
	switch {
	case t.fatal != nil:
		return t.fatal
	case t.restart:
		return errRestart
	}
	return t.failed
}

// send sends the group's pending writes and then, if sql is not empty,
// one more statement, in one round trip; it returns the batch's results
// positioned at that statement (nil when there is none, or when a write
// failed: its error is returned).
func (t *Tx) send(sql string, args []any) (pgx.BatchResults, error) {
	if err := t.err(); err != nil {
		return nil, err
	}
	if q, ok := t.tx.(specQuerier); ok {
		q.far() // before the pending writes are taken: they stay the run's
	}
	var pend []queued
	if t.g != nil {
		pend, t.g.pending = t.g.pending, nil
		for _, q := range pend {
			if q.owner == t.idx {
				t.sent = true
				break
			}
		}
		pend = render(pend, !t.g.safe, int32(t.s.chain))
	}
	b := &pgx.Batch{}
	for _, q := range pend {
		b.Queue(q.sql, q.args...)
	}
	if sql != "" {
		b.Queue(sql, args...)
	}
	if b.Len() == 0 {
		return nil, nil
	}
	t.trip(b.Len())
	defer t.timed(time.Now())
	br := t.tx.SendBatch(t.ctx, b)
	for _, q := range pend {
		if _, err := br.Exec(); err != nil {
			br.Close()
			if q.wrap != nil {
				err = q.wrap(err)
			}
			return nil, t.g.refused(t, q.owner, err)
		}
	}
	if t.g != nil {
		t.g.answered()
	}
	if sql == "" {
		return nil, t.note(br.Close())
	}
	return br, nil
}

// trip counts one round trip of this update, carrying n statements (a
// View's, viewTx counts).
func (t *Tx) trip(n int) {
	if _, spec := t.tx.(specQuerier); spec {
		return // not sent (spec.go)
	}
	if !t.readOnly {
		t.s.trips.Add(1)
		t.s.stmts.Add(uint64(n))
	}
}

// timed adds the time since start to the writer's time in round trips.
func (t *Tx) timed(start time.Time) {
	if !t.readOnly {
		t.s.inTrips.Add(int64(time.Since(start)))
	}
}

// flush sends the pending writes.
func (t *Tx) flush() error {
	_, err := t.send("", nil)
	return err
}

// one reads one row into dst: holon.ErrNotFound when there is none. The
// pending writes go first, in the same round trip.
func (t *Tx) one(sql string, args []any, dst ...any) error {
	var err error
	if t.g == nil || len(t.g.pending) == 0 {
		if err = t.err(); err != nil {
			return err
		}
		t.trip(1)
		start := time.Now()
		err = t.tx.QueryRow(t.ctx, sql, args...).Scan(dst...)
		t.timed(start)
	} else {
		var br pgx.BatchResults
		if br, err = t.send(sql, args); err != nil {
			return err
		}
		err = br.QueryRow().Scan(dst...)
		if cerr := br.Close(); err == nil {
			err = cerr
		}
	}
	err = t.note(err)
	if errors.Is(err, pgx.ErrNoRows) {
		return holon.ErrNotFound
	}
	return err
}

// all runs a query and calls scan for each row; the rows are read whole
// before any later statement, as one connection runs one at a time. The
// pending writes go first, in the same round trip.
func (t *Tx) all(sql string, args []any, scan func(pgx.Rows) error) error {
	var rows pgx.Rows
	var br pgx.BatchResults
	if t.g == nil || len(t.g.pending) == 0 {
		if err := t.err(); err != nil {
			return err
		}
		var err error
		t.trip(1)
		defer t.timed(time.Now())
		if rows, err = t.tx.Query(t.ctx, sql, args...); err != nil {
			return t.note(err)
		}
	} else {
		var err error
		if br, err = t.send(sql, args); err != nil {
			return err
		}
		defer br.Close()
		if rows, err = br.Query(); err != nil {
			return t.note(err)
		}
	}
	defer rows.Close()
	for rows.Next() {
		if err := scan(rows); err != nil {
			return err
		}
	}
	rows.Close()
	return t.note(rows.Err())
}

// pageSize is how many rows a walk reads at a time.
const pageSize = 256

// nextSeq hands out the next number of a bucket's sequence, from the
// writer's blocks (numbers.go), taking one if it must (in a transaction
// of its own, so even in a speculative run: that run does not read the
// database); a speculative run that cannot take one ends (it needs the
// database).
func (t *Tx) nextSeq(bucket string) (uint64, error) {
	if err := t.writable(); err != nil {
		return 0, err
	}
	v, ok := t.s.nums.next(bucket)
	if !ok {
		var err error
		if v, err = t.s.nums.take(t.ctx, bucket); err != nil {
			if q, spec := t.tx.(specQuerier); spec {
				q.far()
			}
			return 0, t.note(err)
		}
	}
	if t.numbered == nil {
		t.numbered = map[string]uint64{}
	}
	t.numbered[bucket] = v
	return v, nil
}

// Counter reads a counter (0 when never moved).
func (t *Tx) Counter(name string) uint64 {
	k := kCounter(name)
	if e, ok := t.cached(k); ok {
		if e.st == present {
			return e.v.(uint64)
		}
		return 0
	}
	if slices.Contains(t.ahead.counters, name) {
		if t.sendAhead() != nil {
			return 0
		}
		return t.Counter(name)
	}
	v := "0"
	err := t.one(`SELECT sum(value)::text FROM counters WHERE name = $1 GROUP BY name`, []any{name}, &v)
	if err != nil && !errors.Is(err, holon.ErrNotFound) {
		return 0
	}
	n, _ := strconv.ParseUint(v, 10, 64)
	t.read(k, n)
	return n
}

// CounterAt tells f the counter's value as the group's COMMIT leaves it,
// before the COMMIT is sent: the update does not see it, so that a
// group run while its writer waited for the writers' lock (spec.go)
// stands when another gateway moved the counter meanwhile.
func (t *Tx) CounterAt(name string, f func(uint64)) {
	t.atCommit = append(t.atCommit, counterAt{kCounter(name), f})
}

// AddCounter adds delta and returns the new value.
func (t *Tx) AddCounter(name string, delta int64) (uint64, error) {
	n := int64(t.Counter(name)) + delta
	if err := t.err(); err != nil {
		return 0, err
	}
	if n < 0 {
		return 0, fmt.Errorf("counter %s would go below zero", name)
	}
	err := t.writeRow(kCounter(name), rowCounterMove, name, delta)
	if err == nil {
		t.wrote(kCounter(name), uint64(n))
	}
	return uint64(n), err
}

// meta reads a metadata value ("" and false when absent).
func (t *Tx) meta(key string) (string, bool) {
	k := kMeta(key)
	if e, ok := t.cached(k); ok {
		t.saw(k, e)
		if e.st == present {
			return e.v.(string), true
		}
		return "", false
	}
	var v string
	err := t.one(`SELECT value FROM meta WHERE key = $1`, []any{key}, &v)
	switch {
	case errors.Is(err, holon.ErrNotFound):
		t.readAbsent(k)
		t.saw(k, entry{st: absent})
		return "", false
	case err != nil:
		return "", false
	}
	t.read(k, v)
	t.saw(k, entry{v: v})
	return v, true
}

// putMeta writes a meta row, as the update read it if it did (guards.go):
// a chain's head moved by another writer (one that took over the chain
// while this one's lease had run out) refuses the group, and the writer
// chains on the new head.
func (t *Tx) putMeta(key, value string) error {
	if t.s.overlap {
		// Under the writers' lock, the log tells a writer whose chain
		// another extended before it writes.
		if err := t.guard(kMeta(key)); err != nil {
			return err
		}
	}
	err := t.writeRow(kMeta(key), rowMeta, key, value)
	if err == nil {
		t.wrote(kMeta(key), value)
	}
	return err
}

// Amounts go to PostgreSQL as NUMERIC with six decimals and come back as
// micro-units (column * 1000000)::bigint, never through a float.

// Numeric is an amount as PostgreSQL's numeric, in units with six decimals.
func Numeric(a journal.Amount) pgtype.Numeric {
	return pgtype.Numeric{Int: big.NewInt(int64(a)), Exp: -6, Valid: true}
}

// OptNumeric is Numeric of an optional amount, NULL when there is none.
func OptNumeric(a *journal.Amount) pgtype.Numeric {
	if a == nil {
		return pgtype.Numeric{}
	}
	return Numeric(*a)
}

func optAmount(n *int64) *journal.Amount {
	if n == nil {
		return nil
	}
	a := journal.Amount(*n)
	return &a
}

// Times are RFC 3339 text with nanoseconds and their offset, as the
// store's JSON writes them.

func ts(t time.Time) string { return t.Format(time.RFC3339Nano) }

func optTs(t *time.Time) *string {
	if t == nil {
		return nil
	}
	s := ts(*t)
	return &s
}

func parseTime(s string) (time.Time, error) { return time.Parse(time.RFC3339Nano, s) }

func parseOptTime(s *string) (*time.Time, error) {
	if s == nil {
		return nil, nil
	}
	v, err := parseTime(*s)
	return &v, err
}

func optText(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func u64(n uint64) []byte { return binary.BigEndian.AppendUint64(nil, n) }

// keyText is a key as a person reads it (app_docs.key): the text, the
// decimal of an 8-byte sequence key, or base64, as in a backup's lines.
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

// printable reports whether b is UTF-8 text without control characters.
func printable(b []byte) bool {
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && n <= 1 || r < 0x20 || r == 0x7f {
			return false
		}
		i += n
	}
	return true
}

// isDocument reports whether a value is a JSON object or array on one
// line (kept as json in app_docs.doc; anything else is raw bytes).
func isDocument(v []byte) bool {
	if len(v) < 2 || (v[0] != '{' && v[0] != '[') || (v[len(v)-1] != '}' && v[len(v)-1] != ']') {
		return false
	}
	for _, c := range v {
		if c == '\n' || c == '\r' {
			return false
		}
	}
	return json.Valid(v)
}
