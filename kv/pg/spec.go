package pg

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"math"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"holon.dev/holon"
)

// Speculation. A writer alone on the database begins its next group in
// the round trip of its COMMIT (commit), and runs that group's updates
// while the COMMIT is in flight, on the committing group's changes and
// what committed before (g.prior, then base), instead of waiting for the
// answer with nothing to do: the updates' own work (the engine's checks,
// encoding, hashing) then overlaps PostgreSQL's work on the group before.
// What such a run computes is what it would compute once the COMMIT is
// answered, if the COMMIT succeeds and no other writer wrote in between
// (the log the head start read is empty): the rows it read are the
// database's then. Otherwise it is dropped, and its updates run again
// as any others (Store.held). An update that needs the database (a row
// the writer does not know) ends the run (specQuerier): it is dropped.
// Nothing of such a run reaches the database before the COMMIT before it
// is answered, and no caller is answered before its own group commits.
// A group that stands goes as soon as the COMMIT before it is answered,
// with the updates that came while it ran and nothing more, and the
// callers of the group before are answered once its COMMIT is sent
// (Store.run): PostgreSQL's one writing process then waits for neither
// the updates' work nor the answers'.

// errFar ends a speculative run at its first update that needs the
// database.
var errFar = errors.New("an update needs the database: the speculative run is dropped")

// specQuerier is a speculative run's querier: any statement ends the
// run's update at once (a panic of farRead, as a recent view's, which
// call turns into errFar), so that the update never sees an answer the
// database did not give.
type specQuerier struct{ g *group }

func (q specQuerier) far() {
	q.g.far = true
	panic(farRead{})
}

func (q specQuerier) SendBatch(context.Context, *pgx.Batch) pgx.BatchResults {
	q.far()
	return nil
}

func (q specQuerier) Query(context.Context, string, ...any) (pgx.Rows, error) {
	q.far()
	return nil, nil
}

func (q specQuerier) QueryRow(context.Context, string, ...any) pgx.Row {
	q.far()
	return nil
}

// speculate runs, as the group after prior, whose COMMIT is in flight,
// the updates held and those that come until answered is, up to
// MaxBatch; it returns that group (nil when none came) and the answer.
func (s *Store) speculate(prior *group, answered <-chan commitAnswer) (*group, commitAnswer) {
	var g *group
	add := func(u *update) {
		if g == nil {
			g = &group{s: s, ctx: prior.ctx, conf: layer{}, rerun: -1, prior: prior.conf, pending: s.pendingBuf()}
		}
		g.batch, g.errs = append(g.batch, u), append(g.errs, nil)
		if g.runUpdates(g.batch, len(g.batch)-1, specQuerier{g}) != nil {
			g.far = true // dropped: take no more
		}
	}
	for _, u := range s.fill(nil) {
		if g == nil || !g.far {
			add(u)
		} else {
			g.batch = append(g.batch, u)
		}
	}
	for {
		queue := s.queue
		if g != nil && (g.far || len(g.batch) >= MaxBatch) {
			queue = nil
		}
		select {
		case a := <-answered:
			return g, a
		case u, ok := <-queue:
			if !ok {
				return g, <-answered
			}
			add(u)
		}
	}
}

// Runs while waiting for the writers' lock. A writer that must wait for
// the lock (another gateway's writer holds it) runs its group's updates
// meanwhile, on what it knows (base), instead of after: under the lock,
// where every gateway waits for it. Once the lock is held, the log tells
// which rows the other writers changed since; the run stands for its
// updates before the first one that saw such a row (read its value,
// which decided what it did), and those rows it changed only by a delta
// (a balance, a counter, an agent's record, a version's earnings and
// latency: methods that say so with Tx.inside) are moved onto the other
// writers' values (rebase): the writer's cache takes the other writers'
// value plus this group's change (the rows sent as moves need no
// rewrite, rows.go). Its journal entries and call events keep their
// numbers, from the writer's own blocks (numbers.go), and its entries
// their place on the writer's own chain. The updates after it run again
// under the lock, as any group's, with the numbers they took given back.
// Nothing of the run reaches the database before the lock is held.

// touch is how the updates of a run while waiting for the lock used a
// row: the first that read or wrote it, and the first that saw its value
// (-1: none did; the others changed it only by a delta).
type touch struct{ first, seen int }

func (g *group) touch(key string, idx int, seen bool) {
	t, ok := g.touched[key]
	if !ok {
		t = touch{first: idx, seen: -1}
	}
	if seen && t.seen < 0 {
		t.seen = idx
	}
	g.touched[key] = t
}

// see marks rows as seen by the running update, whoever reads them.
func (t *Tx) see(keys ...string) {
	if t.g == nil || t.g.touched == nil {
		return
	}
	for _, k := range keys {
		t.g.touch(k, t.idx, true)
	}
}

// begunAnswer is what a begin sent while the writer runs updates found:
// the connection whose transaction holds the writers' lock, and the log.
type begunAnswer struct {
	conn   *pgxpool.Conn
	logged []logEntry
	err    error
}

// speculateWaiting runs batch, what is held and the updates that come
// until answered is (up to MaxBatch), as one group on what the writer
// knows. An update that needs the database or fails stops the run: it
// and those after it (taken all the same) run once the lock is held.
func (s *Store) speculateWaiting(ctx context.Context, batch []*update, answered <-chan begunAnswer) (*group, begunAnswer) {
	g := &group{s: s, ctx: ctx, conf: layer{}, rerun: -1, pending: s.pendingBuf(), touched: map[string]touch{}, stop: -1}
	add := func(u *update) {
		g.batch, g.errs = append(g.batch, u), append(g.errs, nil)
		if g.stop >= 0 {
			return
		}
		i := len(g.batch) - 1
		if g.runUpdates(g.batch, i, specQuerier{g}) != nil || g.errs[i] != nil {
			g.stop = i
		}
	}
	for _, u := range s.fill(batch) {
		add(u)
	}
	for {
		queue := s.queue
		if len(g.batch) >= MaxBatch {
			queue = nil
		}
		select {
		case a := <-answered:
			// What waits now joins too, as it would the group's
			// under the lock.
			if n := len(g.batch); a.err == nil {
				for _, u := range s.fill(slices.Clip(g.batch))[n:] {
					add(u)
				}
			}
			return g, a
		case u, ok := <-queue:
			if !ok {
				return g, <-answered
			}
			add(u)
		}
	}
}

// rebase keeps, of g (run while its writer waited for the lock), the
// updates that stand after the other writers' groups logged: those
// before the first that saw a row they changed, or touched one no delta
// explains, or whose change cannot be moved onto theirs. It moves the
// rows those updates changed by deltas, and returns how many stand.
// It runs before catchUp: base is still what the run read.
func (s *Store) rebase(g *group, logged []logEntry) int {
	n := len(g.batch)
	if g.stop >= 0 {
		n = g.stop
	}
	if n > 0 && len(logged) > 0 && logged[0].gen != s.gen+1 {
		n = 0 // log entries pruned in between: what changed is not known
	}
	theirs := map[string]*string{}
	for _, e := range logged {
		for i, k := range e.keys {
			var v *string
			if len(e.vals) == len(e.keys) {
				v = e.vals[i]
			}
			theirs[k] = v
		}
	}
	for k := range theirs {
		t, ok := g.touched[k]
		switch {
		case !ok || t.first >= n:
		case t.seen >= 0:
			n = min(n, t.seen)
		case !s.movable(k):
			n = min(n, t.first)
		}
	}
	for {
		moved, ours, bad := s.moves(g, n, theirs)
		if bad < 0 {
			g.keep(n, ours)
			for k, e := range moved {
				g.conf[k] = e
			}
			if err := g.writeMoved(n, moved); err != nil {
				g.keep(0, nil)
				return 0
			}
			s.waitMoved.Add(uint64(len(moved)))
			return n
		}
		n = bad
	}
}

// keep drops the run's updates from n on: their writes and cache
// changes; the others' changes become the group's (ours, when moves
// merged them already).
func (g *group) keep(n int, ours layer) {
	p := 0
	for _, q := range g.pending {
		if q.owner < n {
			g.pending[p] = q
			p++
		}
	}
	g.pending = g.pending[:p]
	if n == 0 {
		g.conf, g.atCommit = layer{}, nil
	}
	merged := ours != nil && len(g.conf) == 0
	if merged {
		g.conf = ours
	}
	for _, o := range g.open {
		if o.idx < n {
			if !merged {
				g.conf.merge(o.l)
			}
			g.atCommit = append(g.atCommit, o.atCommit...)
		}
	}
	g.open = g.open[:0]
	for i := n; i < len(g.errs); i++ {
		g.errs[i] = nil
	}
	g.touched, g.stop, g.far = nil, -1, false
}

// movable reports whether a row a run changed only by deltas can be
// moved onto another writer's value (rebase). A chain's head is not: the
// writer's own chain is extended by another only when that writer's
// lease ran out while it still ran (lease.go), and the run's entries
// then run again, numbered from a block taken after (catchUp).
func (s *Store) movable(k string) bool {
	switch k[0] {
	case 'a', 'c', 'v':
		return true
	case 'd':
		return strings.HasPrefix(k, "d"+sep+"earnings"+sep) || strings.HasPrefix(k, "d"+sep+"latency"+sep)
	}
	return false
}

// moves computes the new values of the rows the first n updates of g
// changed and the other writers changed too: theirs plus the run's
// change. bad is the first update whose change cannot move (-1: none).
func (s *Store) moves(g *group, n int, theirs map[string]*string) (moved, ours layer, bad int) {
	if n == 0 {
		return nil, nil, -1
	}
	ours = layer{}
	for _, o := range g.open {
		if o.idx < n {
			ours.merge(o.l)
		}
	}
	moved = layer{}
	for k, v := range theirs {
		t, ok := g.touched[k]
		if !ok || t.first >= n {
			continue
		}
		o, ok := ours[k]
		if !ok || !o.dirty {
			// Read by a delta that then wrote nothing (an update that
			// failed stopped the run): what it read went nowhere.
			continue
		}
		th, ok1 := fromLog(k, v)
		was, ok2 := s.base[k]
		nv, ok3 := move(k, was, o, th)
		if !ok1 || !ok2 || was.st == unknown || o.st != present || was.st == present && th.st != present || !ok3 {
			return nil, nil, t.first
		}
		moved[k] = nv
	}
	return moved, ours, -1
}

// move is a row's new value: ours, which the run made from was, moved
// onto theirs. It refuses when a value the run's checks kept from going
// below zero went down in theirs: the checks would not have seen the
// same.
func move(k string, was, ours, theirs entry) (entry, bool) {
	out := entry{st: present, dirty: true}
	switch k[0] {
	case 'a':
		w, o, t := asAccount(was), asAccount(ours), asAccount(theirs)
		db, dh := t.Balance-w.Balance, t.Held-w.Held
		if dh < 0 {
			return out, false
		}
		b, err1 := o.Balance.Add(db)
		h, err2 := o.Held.Add(dh)
		if err1 != nil || err2 != nil {
			return out, false
		}
		if o.Available() < w.Available() && b-h < 0 && !holon.IsExternal(k[2:]) {
			// The run's check that it overdrew nothing saw more than
			// the others left (holon.Overdrafts).
			return out, false
		}
		out.v = holon.Account{Balance: b, Held: h}
	case 'c':
		w, o, t := asUint(was), asUint(ours), asUint(theirs)
		if t < w || o > math.MaxUint64-(t-w) {
			return out, false
		}
		out.v = o + (t - w)
	case 'v':
		w, o, t := asRecord(was), asRecord(ours), asRecord(theirs)
		d := holon.Record{Runs: t.Runs - w.Runs, Succeeded: t.Succeeded - w.Succeeded, Billed: t.Billed - w.Billed, DurationMS: t.DurationMS - w.DurationMS}
		if d.Runs < 0 || d.Succeeded < 0 || d.Billed < 0 || d.DurationMS < 0 {
			return out, false
		}
		billed, err := o.Billed.Add(d.Billed)
		if err != nil {
			return out, false
		}
		out.v = holon.Record{Runs: o.Runs + d.Runs, Succeeded: o.Succeeded + d.Succeeded, Billed: billed, DurationMS: o.DurationMS + d.DurationMS}
	case 'd':
		var b []byte
		var ok bool
		if strings.HasPrefix(k, "d"+sep+"earnings"+sep) {
			b, ok = moveEarnings(asBytes(was), asBytes(ours), asBytes(theirs))
		} else {
			b, ok = moveLatency(asBytes(was), asBytes(ours), asBytes(theirs))
		}
		if !ok {
			return out, false
		}
		out.v = b
	default:
		return out, false
	}
	return out, true
}

func asAccount(e entry) holon.Account {
	a, _ := e.v.(holon.Account)
	return a
}

func asUint(e entry) uint64 {
	n, _ := e.v.(uint64)
	return n
}

func asRecord(e entry) holon.Record {
	r, _ := e.v.(holon.Record)
	return r
}

func asBytes(e entry) []byte {
	b, _ := e.v.([]byte)
	return b
}

// moveEarnings is ours plus what theirs added to was (documents; nil is
// none).
func moveEarnings(was, ours, theirs []byte) ([]byte, bool) {
	var w, o, t holon.Earnings
	for _, x := range []struct {
		b []byte
		e *holon.Earnings
	}{{was, &w}, {ours, &o}, {theirs, &t}} {
		*x.e = holon.Earnings{}
		if x.b != nil && json.Unmarshal(x.b, x.e) != nil {
			return nil, false
		}
	}
	for cur, te := range t {
		we := w[cur]
		calls, own, roy := te.PaidCalls-we.PaidCalls, te.Own-we.Own, te.Royalties-we.Royalties
		if calls < 0 || own < 0 || roy < 0 {
			return nil, false
		}
		if o.Add(cur, calls, own, roy) != nil {
			return nil, false
		}
	}
	for cur := range w {
		if _, ok := t[cur]; !ok {
			return nil, false
		}
	}
	b, err := earningsJSON(o)
	return b, err == nil
}

// moveLatency is ours plus what theirs added to was.
func moveLatency(was, ours, theirs []byte) ([]byte, bool) {
	n := len(holon.LatencyBoundsMS) + 1
	var ls [3]holon.Latency
	for i, b := range [][]byte{was, ours, theirs} {
		if b != nil && json.Unmarshal(b, &ls[i]) != nil {
			return nil, false
		}
		if len(ls[i].Counts) > n {
			return nil, false
		}
		grown := make([]int64, n)
		copy(grown, ls[i].Counts)
		ls[i].Counts = grown
	}
	out := holon.Latency{Counts: make([]int64, n)}
	for i := range n {
		d := ls[2].Counts[i] - ls[0].Counts[i]
		if d < 0 {
			return nil, false
		}
		out.Counts[i] = ls[1].Counts[i] + d
	}
	return latencyJSON(out), true
}

// writeMoved queues the new values of the moved rows written whole
// (documents) after the first n updates' writes.
func (g *group) writeMoved(n int, moved layer) error {
	for k, e := range moved {
		if k[0] != 'd' {
			continue // moved by the run's writes themselves (rows.go: moves)
		}
		bucket, hexKey, _ := strings.Cut(k[2:], sep)
		key, err := hex.DecodeString(hexKey)
		if err != nil {
			return err
		}
		doc := string(e.v.([]byte))
		row := []any{bucket, keyText(key), key, &doc, []byte(nil)}
		g.pending = append(g.pending, queued{key: k, row: &rowWrite{kind: rowAppDoc, rows: [][]any{row}}, owner: n - 1, free: true})
	}
	return nil
}
