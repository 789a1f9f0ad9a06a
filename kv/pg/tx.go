package pg

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"strconv"
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
	tx       pgx.Tx
	readOnly bool
	// fatal is the first error that ends the whole transaction (a
	// serialization conflict, the connection lost); failed the first
	// error PostgreSQL returned to this update, which leaves the
	// transaction refusing statements until the update is undone.
	fatal, failed error
	// pending are the writes not sent yet: a write whose answer the
	// update does not read waits here and goes with the next statement
	// that must be answered (a read, or the update's end), in one round
	// trip (pipelining). Their errors come with that statement's.
	pending []queued
	// sent reports whether any statement of this update reached the
	// database.
	sent bool
	// g and u are the group's cache and this update's changes to it
	// (cache.go); nil outside the writer.
	g, u *cache
}

// queued is a statement waiting in pending.
type queued struct {
	sql  string
	args []any
}

var _ holon.Tx = (*Tx)(nil)

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

func (t *Tx) writable() error {
	if t.readOnly {
		return errors.New("write in a read-only transaction")
	}
	return nil
}

// exec queues a write: it is sent with the next statement that must be
// answered (flush). Its error, if PostgreSQL refuses it, is the error of
// that statement and of the update.
func (t *Tx) exec(sql string, args ...any) error {
	if err := t.writable(); err != nil {
		return err
	}
	if t.failed != nil || t.fatal != nil {
		return t.err()
	}
	t.pending = append(t.pending, queued{sql, args})
	return nil
}

// err is the error that stopped this update.
func (t *Tx) err() error {
	if t.fatal != nil {
		return t.fatal
	}
	return t.failed
}

// send sends the pending writes and then, if sql is not empty, one more
// statement, in one round trip; it returns the batch's results positioned
// at that statement (nil when there is none, or when a write failed:
// its error is returned).
func (t *Tx) send(sql string, args []any) (pgx.BatchResults, error) {
	if t.failed != nil || t.fatal != nil {
		t.pending = nil
		return nil, t.err()
	}
	b := &pgx.Batch{}
	for _, q := range t.pending {
		b.Queue(q.sql, q.args...)
	}
	n := len(t.pending)
	t.pending = t.pending[:0]
	if sql != "" {
		b.Queue(sql, args...)
	}
	if b.Len() == 0 {
		return nil, nil
	}
	t.trip(b.Len())
	br := t.tx.SendBatch(t.ctx, b)
	for range n {
		if _, err := br.Exec(); err != nil {
			br.Close()
			return nil, t.note(err)
		}
	}
	if sql == "" {
		return nil, t.note(br.Close())
	}
	return br, nil
}

// trip counts one round trip of this update, carrying n statements.
func (t *Tx) trip(n int) {
	t.sent = true
	if !t.readOnly {
		t.s.trips.Add(1)
		t.s.stmts.Add(uint64(n))
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
	if len(t.pending) == 0 && t.failed == nil && t.fatal == nil {
		t.trip(1)
		err = t.tx.QueryRow(t.ctx, sql, args...).Scan(dst...)
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
	if len(t.pending) == 0 && t.failed == nil && t.fatal == nil {
		var err error
		t.trip(1)
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

// nextSeq hands out the next id of a bucket's sequence.
func (t *Tx) nextSeq(bucket string) (uint64, error) {
	if err := t.writable(); err != nil {
		return 0, err
	}
	if v, ok := t.cachedSeq(bucket); ok {
		t.u.seq[bucket] = v + 1
		return v + 1, t.exec(`INSERT INTO sequences (bucket, value) VALUES ($1, $2)
			ON CONFLICT (bucket) DO UPDATE SET value = EXCLUDED.value`, bucket, int64(v+1))
	}
	var n int64
	err := t.one(`INSERT INTO sequences AS s (bucket, value) VALUES ($1, 1)
		ON CONFLICT (bucket) DO UPDATE SET value = s.value + 1 RETURNING value::bigint`, []any{bucket}, &n)
	if err == nil && t.u != nil {
		t.u.seq[bucket] = uint64(n)
	}
	return uint64(n), err
}

// sequence reads a bucket's sequence: the last id handed out.
func (t *Tx) sequence(bucket string) uint64 {
	if v, ok := t.cachedSeq(bucket); ok {
		return v
	}
	var n int64
	err := t.one(`SELECT value::bigint FROM sequences WHERE bucket = $1`, []any{bucket}, &n)
	if err != nil && !errors.Is(err, holon.ErrNotFound) {
		return 0
	}
	if t.u != nil {
		t.u.seq[bucket] = uint64(n)
	}
	return uint64(n)
}

// Counter reads a counter (0 when never moved).
func (t *Tx) Counter(name string) uint64 {
	if v, ok := t.cachedCounter(name); ok {
		return v
	}
	v := "0"
	err := t.one(`SELECT value::text FROM counters WHERE name = $1`, []any{name}, &v)
	if err != nil && !errors.Is(err, holon.ErrNotFound) {
		return 0
	}
	n, _ := strconv.ParseUint(v, 10, 64)
	if t.u != nil {
		t.u.ctr[name] = n
	}
	return n
}

// AddCounter adds delta and returns the new value.
func (t *Tx) AddCounter(name string, delta int64) (uint64, error) {
	n := int64(t.Counter(name)) + delta
	if n < 0 {
		return 0, fmt.Errorf("counter %s would go below zero", name)
	}
	err := t.exec(`INSERT INTO counters AS c (name, value) VALUES ($1, $2)
		ON CONFLICT (name) DO UPDATE SET value = EXCLUDED.value`, name, strconv.FormatInt(n, 10))
	if err == nil && t.u != nil {
		t.u.ctr[name] = uint64(n)
	}
	return uint64(n), err
}

// meta reads a metadata value ("" and false when absent).
func (t *Tx) meta(key string) (string, bool) {
	if v, ok := t.cachedMeta(key); ok {
		if v == nil {
			return "", false
		}
		return *v, true
	}
	var v string
	err := t.one(`SELECT value FROM meta WHERE key = $1`, []any{key}, &v)
	switch {
	case errors.Is(err, holon.ErrNotFound):
		if t.u != nil {
			t.u.meta[key] = nil
		}
		return "", false
	case err != nil:
		return "", false
	}
	if t.u != nil {
		t.u.meta[key] = &v
	}
	return v, true
}

func (t *Tx) putMeta(key, value string) error {
	err := t.exec(`INSERT INTO meta (key, value) VALUES ($1, $2) ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value`, key, value)
	if err == nil && t.u != nil {
		t.u.meta[key] = &value
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
