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

func (t *Tx) exec(sql string, args ...any) error {
	if err := t.writable(); err != nil {
		return err
	}
	_, err := t.tx.Exec(t.ctx, sql, args...)
	return t.note(err)
}

// one reads one row into dst: holon.ErrNotFound when there is none.
func (t *Tx) one(sql string, args []any, dst ...any) error {
	err := t.note(t.tx.QueryRow(t.ctx, sql, args...).Scan(dst...))
	if errors.Is(err, pgx.ErrNoRows) {
		return holon.ErrNotFound
	}
	return err
}

// all runs a query and calls scan for each row; the rows are read whole
// before any later statement, as one connection runs one at a time.
func (t *Tx) all(sql string, args []any, scan func(pgx.Rows) error) error {
	rows, err := t.tx.Query(t.ctx, sql, args...)
	if err != nil {
		return t.note(err)
	}
	defer rows.Close()
	for rows.Next() {
		if err := scan(rows); err != nil {
			return err
		}
	}
	return t.note(rows.Err())
}

// pageSize is how many rows a walk reads at a time.
const pageSize = 256

// nextSeq hands out the next id of a bucket's sequence.
func (t *Tx) nextSeq(bucket string) (uint64, error) {
	if err := t.writable(); err != nil {
		return 0, err
	}
	var n int64
	err := t.one(`INSERT INTO sequences AS s (bucket, value) VALUES ($1, 1)
		ON CONFLICT (bucket) DO UPDATE SET value = s.value + 1 RETURNING value::bigint`, []any{bucket}, &n)
	return uint64(n), err
}

// sequence reads a bucket's sequence: the last id handed out.
func (t *Tx) sequence(bucket string) uint64 {
	var n int64
	if err := t.one(`SELECT value::bigint FROM sequences WHERE bucket = $1`, []any{bucket}, &n); err != nil {
		return 0
	}
	return uint64(n)
}

// Counter reads a counter (0 when never moved).
func (t *Tx) Counter(name string) uint64 {
	var v string
	if err := t.one(`SELECT value::text FROM counters WHERE name = $1`, []any{name}, &v); err != nil {
		return 0
	}
	n, _ := strconv.ParseUint(v, 10, 64)
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
	return uint64(n), err
}

// meta reads a metadata value ("" and false when absent).
func (t *Tx) meta(key string) (string, bool) {
	var v string
	if err := t.one(`SELECT value FROM meta WHERE key = $1`, []any{key}, &v); err != nil {
		return "", false
	}
	return v, true
}

func (t *Tx) putMeta(key, value string) error {
	return t.exec(`INSERT INTO meta (key, value) VALUES ($1, $2) ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value`, key, value)
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
