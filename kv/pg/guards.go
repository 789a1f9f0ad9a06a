package pg

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"

	"holon.dev/holon"
)

// Rows written whole, written as read. Balances, budgets, counters and
// records are moved (rows.go): a move keeps what another writer moved
// meanwhile. A document, an agent version or mandate, an approval, a hold
// or a meta row (a chain's head) is written whole, so a write of one that its update read first
// (from the writer's memory or from the database) is sent after a check
// that the row is still as the update read it: the check locks the row
// (FOR UPDATE, so that nothing changes it before the COMMIT) and compares
// it, or, for a row read as absent, takes a lock of its key first
// (pg_advisory_xact_lock), which every such check of the same key takes,
// so that two writers cannot both insert it (migration 26). A row that
// differs refuses the transaction with rows_as_read, naming the row's
// cache key: the writer forgets the row and the group runs again safely,
// each update reading again what it needs, and an update refused again
// (the row changed once more in between) runs again on its own
// (Store.Update), up to maxAsRead times.
//
// A write of a row the update did not read (a new receipt's hold, a new
// document under a fresh key) is sent as it is, and so is a write of a
// row this update wrote before reading it: the value it read was its own.

// maxAsRead is how many times an update refused by a row it read runs.
const maxAsRead = 4

// guardTable is how a check finds a row: its table and the condition on
// its key, with the key's arguments $1 … $n.
type guardTable struct {
	table, key string
	// same is the condition that the row holds the value read, with that
	// value the argument after the key's ("" : being there is enough).
	same string
}

// The checks of rows other than documents (a bucket's documents: its
// docTable's guard, docs.go).
var (
	// A registry document: its document and columns, as the writer reads
	// them ($2 … $6).
	guardMandate = guardTable{"mandates", "id = $1", registrySame}
	guardAgent   = guardTable{"agents", "ref = $1", registrySame}
	guardApprove = guardTable{"approvals", "id = $1", "status = $2"}
	guardHold    = guardTable{"holds", "receipt = $1", ""}
	guardMeta    = guardTable{"meta", "key = $1", "value = $2"}
)

const registrySame = `doc::text = $2 AND created::timestamptz = $3::timestamptz AND published = $4
	AND yanked IS NOT DISTINCT FROM $5 AND revoked = $6`

// saw records a row as this update first found it (before any write of
// its own), for a write of it to be checked against.
func (t *Tx) saw(k string, e entry) {
	if t.g == nil {
		return
	}
	if _, ok := t.seen[k]; ok {
		return
	}
	if t.seen == nil {
		t.seen = map[string]entry{}
	}
	if t.groupWrote(k) {
		// What it reads is its group's own write: that write was checked
		// (and the row locked) when it was sent, or was written whatever
		// the row held; this one builds on it.
		e = entry{st: unknown}
	}
	t.seen[k] = e
}

// groupWrote reports whether this update or an earlier one of its group
// wrote the row under k (not committed yet: this transaction's own).
func (t *Tx) groupWrote(k string) bool {
	if e, ok := t.l[k]; ok && e.dirty {
		return true
	}
	for _, o := range t.g.open {
		if e, ok := o.l[k]; ok && e.dirty {
			return true
		}
	}
	e, ok := t.g.conf[k]
	return ok && e.dirty
}

// guard queues, before a write of the row under cache key k, the check
// that the row is as this update read it (nothing when it did not read
// it, or checked it already).
func (t *Tx) guard(k string) error {
	e, ok := t.seen[k]
	if !ok || e.st == unknown {
		return nil
	}
	r, err := guardOf(k)
	if err != nil {
		return err
	}
	t.seen[k] = entry{st: unknown} // checked once: the row is locked now
	cond, args := r.where(e)
	key := placeholder(len(args) + 1)
	// Rows of k waiting to be written go first (touches): the check
	// judges the row as the transaction holds it.
	if e.st == absent {
		if err := t.queue(queued{sql: `SELECT pg_advisory_xact_lock(hashtextextended($1, 0))`, args: []any{k}, touches: []string{k}}); err != nil {
			return err
		}
		return t.queue(queued{sql: `SELECT holon_as_read(` + key + `, NOT EXISTS (SELECT FROM ` + r.g.table + ` WHERE ` + cond + `))`,
			args: append(args, k), touches: []string{k}})
	}
	return t.queue(queued{sql: `SELECT holon_as_read(` + key + `, EXISTS (SELECT FROM ` + r.g.table + ` WHERE ` + cond + ` FOR UPDATE))`,
		args: append(args, k), touches: []string{k}})
}

// asRead is how a check finds the row under a cache key, and compares it
// with the value read: its table's guard, its key's arguments as g.key
// takes them, and the value read as g.same takes it.
type asRead struct {
	g       guardTable
	keyArgs []any
	same    func(entry) []any
}

// where is the condition that the row is there as e read it, and its
// arguments: the key alone for a row read as absent (NOT EXISTS of it)
// or a table whose rows are judged by being there.
func (r asRead) where(e entry) (string, []any) {
	args := slices.Clone(r.keyArgs)
	if e.st == absent || r.g.same == "" {
		return r.g.key, args
	}
	return r.g.key + " AND " + r.g.same, append(args, r.same(e)...)
}

// guardOf is how the checks find the row under cache key k, one of a
// row written whole.
func guardOf(k string) (asRead, error) {
	kind, rest, _ := strings.Cut(k, sep)
	sameValue := func(e entry) []any { return []any{e.v} }
	switch kind {
	case "h":
		return asRead{guardHold, []any{rest}, nil}, nil
	case "p":
		return asRead{guardApprove, []any{rest}, sameValue}, nil
	case "m":
		return asRead{guardMeta, []any{rest}, sameValue}, nil
	case "g":
		if table, id, ok := strings.Cut(rest, sep); ok {
			g := guardMandate
			if table == "agents" {
				g = guardAgent
			}
			return asRead{g, []any{id}, sameRegistry}, nil
		}
	case "d":
		if bucket, hexKey, ok := strings.Cut(rest, sep); ok {
			key, err := hex.DecodeString(hexKey)
			if err != nil {
				return asRead{}, fmt.Errorf("cache key %q: %w", k, err)
			}
			return asRead{tableOf(bucket).guard, []any{bucket, key}, sameBytes}, nil
		}
	}
	return asRead{}, fmt.Errorf("cache key %q: no row written whole", k)
}

// placeholder is $n.
func placeholder(n int) string { return "$" + strconv.Itoa(n) }

// sameBytes is g.same's argument for a document read.
func sameBytes(e entry) []any { return []any{bytes.Clone(e.v.([]byte))} }

// sameRegistry is g.same's arguments for a registry document read.
func sameRegistry(e entry) []any {
	d := e.v.(holon.Doc)
	return []any{string(d.Doc), ts(d.Created), d.Published, optText(d.Yanked), d.Revoked}
}

// runAgain reports whether err is a check of the database refusing an
// update for what its writer knew wrong: a row it read and wrote whole
// changed since (rows_as_read), or a move judged from a balance or budget
// the writer knew wrong (an overdraft or a budget over its limit that
// names its row, staleRow). The row is forgotten by then; run again, the
// update reads it afresh, and decides on what it holds.
func runAgain(err error) bool {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "23514" {
		return false
	}
	return pe.ConstraintName == "rows_as_read" || staleRow(err) != "" && pe.ConstraintName != "rows_gone_once"
}
