package pg

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"holon.dev/holon"
	"holon.dev/holon/journal"
)

// The writer's cache. While a group's transaction runs, no other writer of
// any gateway can write (they wait for the writers' lock), so a row the
// writer read or wrote is still the database's until it commits, and after
// it commits until another writer commits a change to it. Every group
// appends to the writers' log (writer_log) the keys of the rows it changed,
// with the new values of the small ones; a writer that takes the lock reads
// the log since its last group, in the same round trip as the lock, takes
// those values and forgets the other rows. A writer alone on a
// database (one gateway) therefore reads its hot rows (balances, budgets,
// counters, a chain's head, the holds and receipts of its
// own calls) from the database once, not once per update.
//
// Layers, newest first: the running update's (t.l), the updates of this
// group that ran but whose statements are not all answered yet (g.open),
// the group's answered updates (g.conf), the changes of the group whose
// COMMIT is in flight when this group runs while it is (g.prior,
// spec.go), then what committed groups left (Store.base). An update's layer joins the group's once its statements
// are answered without error, and the group's joins base once it
// commits; a failed update's layer is dropped, and a group that fails
// empties base (what the database holds is then not known).

// state is what a cache entry says about a row.
type state uint8

const (
	present state = iota // v is the row's value
	absent               // there is no such row
	unknown              // the row changed in a way the writer did not compute: read it
)

type entry struct {
	v  any
	st state
	// dirty: the group changed the row (its key goes to writer_log).
	dirty bool
	// at, for a moved row of writers that overlap (overlap.go), is when
	// the value it was computed from was read from the database (Unix
	// nanoseconds): past MovedForget it is read again.
	at int64
}

// layer maps cache keys to what is known of their rows.
type layer map[string]entry

// maxBase bounds the rows base keeps; past it, base starts again empty.
const maxBase = 100_000

// Cache keys: a kind, the unit separator, the row's key. Keys travel in
// writer_log as text, so a binary key is hex.
const sep = "\x1f"

func kCounter(name string) string       { return "c" + sep + name }
func kMeta(key string) string           { return "m" + sep + key }
func kAccount(name string) string       { return "a" + sep + name }
func kEntry(key string) string          { return "e" + sep + key }
func kBudget(mandate string) string     { return "b" + sep + mandate }
func kWindow(mandate, w string) string  { return "w" + sep + mandate + sep + w }
func kHold(receipt string) string       { return "h" + sep + receipt }
func kReceipt(id string) string         { return "r" + sep + id }
func kRecord(agent string) string       { return "v" + sep + agent }
func kRegistry(table, id string) string { return "g" + sep + table + sep + id }

// kApproval keys an approval an update read, for a write of it to be
// checked (guards.go): approvals are not kept in the cache.
func kApproval(id string) string { return "p" + sep + id }
func kDoc(bucket string, key []byte) string {
	return "d" + sep + bucket + sep + hex.EncodeToString(key)
}

// Values in the writers' log (writer_log.vals): the new value of a small
// row a group changed, for the next writer to keep instead of reading the
// row again. "-" is a row that is absent, "=" and the value one that is
// present; a document is carried when it is short text (maxLoggedDoc),
// so that the documents every group rewrites (an agent's earnings and
// latency) are not read again by the next gateway's writer under the
// writers' lock; a row of any other kind, a longer or binary document, or
// a row whose value the writer did not compute, has none (NULL: read it
// again). A writer of an earlier version reads a document's value as
// none, as before.

// logValue is e's value for the writers' log (nil: none).
func logValue(k string, e entry) *string {
	if len(k) < 2 || !logged(k[0]) || e.st == unknown {
		return nil
	}
	v := "-"
	if e.st == present {
		switch x := e.v.(type) {
		case uint64:
			v = strconv.FormatUint(x, 10)
		case string:
			v = x
		case holon.Account:
			v = fmt.Sprintf("%d,%d", x.Balance.Micros(), x.Held.Micros())
		case holon.Budget:
			v = fmt.Sprintf("%d,%d", x.Spent.Micros(), x.Reserved.Micros())
		case holon.Record:
			v = fmt.Sprintf("%d,%d,%d,%d", x.Runs, x.Succeeded, x.Billed.Micros(), x.DurationMS)
		case bool:
			v = strconv.FormatBool(x)
		case []byte:
			// A document: carried when it is short text (the gateways'
			// hot documents, such as an agent's earnings and latency,
			// rewritten by every group that settles a call of it).
			if k[0] != 'd' || len(x) > maxLoggedDoc || !utf8.Valid(x) || bytes.IndexByte(x, 0) >= 0 {
				return nil
			}
			v = string(x)
		default:
			return nil
		}
		v = "=" + v
	}
	return &v
}

// maxLoggedDoc is the longest document the writers' log carries (in
// bytes); a longer one is read again.
const maxLoggedDoc = 512

// logged reports whether rows of a kind carry their values in the log
// (documents only when short text, see logValue).
func logged(kind byte) bool {
	switch kind {
	case 'c', 'm', 'a', 'b', 'w', 'v', 'e', 'd':
		return true
	}
	return false
}

// fromLog is the cache entry of a value in the writers' log (false: the
// row must be read again).
func fromLog(k string, v *string) (entry, bool) {
	if v == nil || len(k) < 2 || !logged(k[0]) {
		return entry{}, false
	}
	if *v == "-" {
		return entry{st: absent}, true
	}
	s, ok := strings.CutPrefix(*v, "=")
	if !ok {
		return entry{}, false
	}
	ints := func(n int) ([]int64, bool) {
		f := strings.Split(s, ",")
		if len(f) != n {
			return nil, false
		}
		out := make([]int64, n)
		for i, x := range f {
			var err error
			if out[i], err = strconv.ParseInt(x, 10, 64); err != nil {
				return nil, false
			}
		}
		return out, true
	}
	var val any
	switch k[0] {
	case 'c':
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return entry{}, false
		}
		val = n
	case 'm':
		val = s
	case 'a':
		x, ok := ints(2)
		if !ok {
			return entry{}, false
		}
		val = holon.Account{Balance: journal.Amount(x[0]), Held: journal.Amount(x[1])}
	case 'b', 'w':
		x, ok := ints(2)
		if !ok {
			return entry{}, false
		}
		val = holon.Budget{Spent: journal.Amount(x[0]), Reserved: journal.Amount(x[1])}
	case 'v':
		x, ok := ints(4)
		if !ok {
			return entry{}, false
		}
		val = holon.Record{Runs: x[0], Succeeded: x[1], Billed: journal.Amount(x[2]), DurationMS: x[3]}
	case 'e':
		b, err := strconv.ParseBool(s)
		if err != nil {
			return entry{}, false
		}
		val = b
	case 'd':
		val = []byte(s)
	}
	return entry{v: val}, true
}

// cached is what the writer knows of a row (false: read it).
func (t *Tx) cached(key string) (entry, bool) {
	if t.g == nil { // a View: the rows it read already, from its one snapshot
		e, ok := t.l[key]
		if !ok && t.recent { // or what committed groups left (recent.go)
			e, ok = t.s.base[key]
			ok = ok && t.s.fresh(key, e)
		}
		return e, ok && e.st != unknown
	}
	if t.g.touched != nil {
		t.g.touch(key, t.idx, t.inner == 0)
	}
	e, ok, group := t.known(key)
	ok = ok && e.st != unknown && (group || t.s.fresh(key, e))
	if ok && t.s.overlap && e.at != 0 && e.at < t.began && moved(key) {
		t.usedMoved = append(t.usedMoved, key) // judgedStale
	}
	return e, ok
}

// known is the newest layer's entry for key in the update's group, and
// whether it is of the group's own layers (not the group before it, nor
// base).
func (t *Tx) known(key string) (e entry, ok, group bool) {
	if e, ok := t.l[key]; ok {
		return e, true, true
	}
	for i := len(t.g.open) - 1; i >= 0; i-- {
		if e, ok := t.g.open[i].l[key]; ok {
			return e, true, true
		}
	}
	if e, ok := t.g.conf[key]; ok {
		return e, true, true
	}
	if e, ok := t.g.prior[key]; ok {
		return e, true, false
	}
	e, ok = t.s.base[key]
	return e, ok, false
}

// read records a row's value as this update read it from the database.
func (t *Tx) read(key string, v any) { t.set(key, entry{v: v}) }

// readAbsent records that the database has no such row.
func (t *Tx) readAbsent(key string) { t.set(key, entry{st: absent}) }

// wrote records a row's value as this update wrote it.
func (t *Tx) wrote(key string, v any) { t.set(key, entry{v: v, dirty: true}) }

// wroteAbsent records that this update deleted the row.
func (t *Tx) wroteAbsent(key string) { t.set(key, entry{st: absent, dirty: true}) }

// forget records that this update changed a row in a way the writer did
// not compute (the database did): it is read again when needed.
func (t *Tx) forget(key string) { t.set(key, entry{st: unknown, dirty: true}) }

func (t *Tx) set(key string, e entry) {
	if t.g == nil {
		if t.l != nil && !e.dirty { // a View's reads, from its one snapshot
			t.l[key] = e
		}
		return
	}
	if t.s.overlap && moved(key) {
		// A value read is as fresh as now; one computed, as the value it
		// was computed from.
		e.at = time.Now().UnixNano()
		if e.dirty {
			if old, ok, _ := t.known(key); ok && old.st != unknown {
				e.at = old.at
			}
		}
	}
	if old, ok := t.l[key]; ok && old.dirty {
		e.dirty = true
	}
	t.l[key] = e
}

// merge adds a newer layer's entries to l: a row changed in either is
// changed.
func (l layer) merge(newer layer) {
	for k, e := range newer {
		if old, ok := l[k]; ok && old.dirty {
			e.dirty = true
		}
		l[k] = e
	}
}

// Values are copied into the cache and out of it: a caller may change
// what it was given.

func cloneReceipt(r *holon.Receipt) *holon.Receipt {
	c := *r
	c.Parent, c.Agent, c.Error, c.Approval, c.SubMandate = cloneStr(r.Parent), cloneStr(r.Agent), cloneStr(r.Error), cloneStr(r.Approval), cloneStr(r.SubMandate)
	if r.WorstCase != nil {
		w := *r.WorstCase
		c.WorstCase = &w
	}
	c.Splits, c.Children = slices.Clone(r.Splits), slices.Clone(r.Children)
	return &c
}

func cloneHold(h *holon.Hold) *holon.Hold {
	c := *h
	c.Children = slices.Clone(h.Children)
	return &c
}

func cloneStr(s *string) *string {
	if s == nil {
		return nil
	}
	v := *s
	return &v
}
