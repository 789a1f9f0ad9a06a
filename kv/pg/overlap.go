package pg

import (
	"context"
	"errors"
	"maps"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"holon.dev/holon"
)

// Writers that overlap. Without the writers' lock, several gateways'
// groups run at once, each in a READ COMMITTED transaction: what keeps
// them right is no longer that they take turns but what each write says
// of the row it changes. Balances, budgets, counters and agents' records
// are moved (rows.go), each gateway's credits in a part of its own
// (migrations 24 and 25), and the database judges the sums at the COMMIT
// (migrations 18 and 19: no overdraft, no budget over its limit); a hold
// is deleted once (migration 22); a row written whole is written as the
// update read it (guards.go, migration 26); journal entries, receipts,
// approvals and call events take numbers from each writer's own blocks
// (numbers.go) and entries extend the writer's own chain (lease.go).
// Two groups that lock rows in opposite orders deadlock. PostgreSQL
// would find the cycle only after its deadlock_timeout (a second by
// default, and a setting only a superuser may change), holding both
// groups, and every group waiting on a row either holds, for that long:
// so a writer's group waits for a row's lock at most lockWait
// (lock_timeout, the transaction's own), then gives up and runs again
// whole (Store.run), as does one PostgreSQL refused for a deadlock or
// one that inserts a row another inserted meanwhile (conflict).
//
// Each writer still keeps the rows it read and wrote in memory (cache.go),
// and each group logs the keys of the rows it wrote whole (writer_log;
// moved rows are not logged: see MovedForget below). A group begins by
// reading, in one statement's snapshot, the keys the other writers logged
// since its writer's last read (migration 27: by transaction, since
// entries now commit in any order), and the writer forgets those rows.
// What it knows of them is then the committed state as of that snapshot,
// plus its own groups; another writer's group that commits after it is
// learned at the next group's read, and meanwhile anything decided on it
// is checked where it is written (a write whole checked against what was
// read). A group run while the COMMIT before it was in flight (spec.go)
// stands whatever the others committed meanwhile, and the rows they
// changed that it used are forgotten once it commits, since what it left
// of them was computed from older values.

// logForget is how long a writer may go without reading the log and
// still trust what it knows; logAge how long an entry is kept (well
// beyond logForget, so that a writer that read within logForget finds
// every entry since).
const (
	logForget = 5 * time.Second
	logAge    = "15 seconds"
)

// lockWait is how long a group of writers that overlap waits for a row
// another transaction locked before it gives up and runs again. A group
// holds the rows it moved from its moves to its COMMIT: a few
// milliseconds, tens when the machine is busy (the manual's performance
// page), so a wait this long is mostly a deadlock's or one behind it; on
// a starved machine some are not, and cost a group run again.
const lockWait = "200ms"

// queueOverlapBegin queues the begin of a group of writers that overlap:
// a READ COMMITTED transaction, and the keys the other writers logged in
// transactions committed since at's snapshot, with this statement's
// snapshot, in one statement planned on the index of the entries'
// transactions.
func queueOverlapBegin(b *pgx.Batch, at logPos, chain int) {
	b.Queue(`BEGIN ISOLATION LEVEL READ COMMITTED`)
	b.Queue(`SET LOCAL lock_timeout = '` + lockWait + `'`)
	var prev *string
	if at.gen >= 0 && at.snap != "" {
		prev = &at.snap
	}
	b.Queue(`SET LOCAL enable_seqscan = off`)
	b.Queue(`SELECT NULL::text, pg_current_snapshot()::text UNION ALL
		SELECT DISTINCT u.k, NULL FROM writer_log l, unnest(l.keys) AS u (k) WHERE $1::pg_snapshot IS NOT NULL
			AND l.xid >= pg_snapshot_xmin($1::pg_snapshot) AND l.writer IS DISTINCT FROM $2 AND NOT pg_visible_in_snapshot(l.xid, $1::pg_snapshot)`,
		prev, int32(chain))
	b.Queue(`SET LOCAL enable_seqscan = on`)
}

// readOverlapBegin reads queueOverlapBegin's answers: one entry, the rows
// the others wrote whole (no values: they are forgotten), and the
// snapshot read in.
func readOverlapBegin(br pgx.BatchResults) ([]logEntry, error) {
	rows, err := queryAfter(br, 3)
	if err != nil {
		return nil, err
	}
	var e logEntry
	for rows.Next() {
		var k, v *string
		if err := rows.Scan(&k, &v); err != nil {
			rows.Close()
			return nil, err
		}
		if k == nil {
			e.snap = *v
			continue
		}
		e.keys = append(e.keys, *k)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if _, err := br.Exec(); err != nil {
		return nil, err
	}
	return []logEntry{e}, nil
}

// catchUpOverlap forgets the rows the log read names (under baseMu). A
// writer that knew nothing, or has not read the log for longer than
// logForget, starts from nothing.
func (s *Store) catchUpOverlap(logged []logEntry, at time.Time) int64 {
	var e logEntry
	if len(logged) > 0 {
		e = logged[len(logged)-1]
	}
	if s.gen < 0 || s.snap == "" || at.Sub(s.snapAt) > logForget {
		s.nums.drop("journal")
		s.base = layer{}
		if slices.Contains(e.keys, kOthers) {
			s.othersAt.Store(time.Now().UnixNano())
		}
	} else {
		s.takeLog(e)
	}
	s.snap, s.snapAt = e.snap, at
	return 0
}

// takeLog forgets, in base (under baseMu), the rows a log read names,
// and notes another writer's group (kOthers).
func (s *Store) takeLog(e logEntry) {
	head := kMeta(s.headKey)
	for _, k := range e.keys {
		if k == kOthers {
			s.othersAt.Store(time.Now().UnixNano())
			continue
		}
		if k == head {
			// Another writer extended this writer's chain (its lease ran
			// out meanwhile): numbers from a new block.
			s.nums.drop("journal")
		}
		delete(s.base, k)
	}
}

// overlapPrune is how often (in its log entries) a writer prunes the log.
const overlapPrune = 256

// queueOverlapLog queues a group's log entry, and now and then the
// pruning of old entries.
func (s *Store) queueOverlapLog(b *pgx.Batch, keys []string) {
	b.Queue(`INSERT INTO writer_log (gen, keys, writer) VALUES (nextval('writer_log_gen'), $1, $2)`, keys, int32(s.chain))
	if s.logged++; s.logged%overlapPrune == 0 {
		b.Queue(`DELETE FROM writer_log WHERE at < now() - interval '` + logAge + `'`)
	}
}

// Moved rows. Balances, budgets, budget windows, counters and agents'
// records are moved (rows.go): a group sends what its updates changed
// them by, and the database judges the sums at the COMMIT (an overdraft,
// a budget over its limit), so a writer need not know what another
// gateway moved them by to move them right, nor to be refused if it
// allowed what the sums do not. Their changes are therefore not logged
// (every settlement moves several of them, and the log would name them
// all to every writer, each of which would read them again): a writer's
// idea of such a row is what it last read plus what it moved since. It
// errs toward allowing, for the others' debits, which the database then
// refuses; toward refusing only for the others' credits (a top-up, a
// refund, a budget's release on another gateway), which it learns by
// reading the row again once its value is MovedForget old.
const MovedForget = time.Second

// moved reports whether k is the cache key of a moved row.
func moved(k string) bool {
	switch k[0] {
	case 'a', 'b', 'w', 'c', 'v':
		return true
	}
	return false
}

// fresh reports whether e, the writer's entry for k, may be used: any
// row under the writers' lock, and a moved row of writers that overlap
// read at most MovedForget ago, or read after the last group of another
// writer this one learned of (every group of a writer that overlaps logs
// kOthers, which the others' log reads find): a writer alone on its
// database keeps what it knows.
func (s *Store) fresh(k string, e entry) bool {
	return !s.overlap || e.at == 0 || !moved(k) || e.at > s.othersAt.Load() || time.Now().UnixNano()-e.at <= int64(MovedForget)
}

// kOthers is the key every group of a writer that overlaps logs with the
// rows it wrote: no row's, so no writer knows or forgets it.
var kOthers = "o" + sep

// judgedStale turns a refusal the writer judged on a moved row (an
// overdraft, a budget over its limit, a refund off a record or a release
// of more than is held) into errJudgedStale when the update used a moved
// row it did not read itself, for writers that overlap: that row may lack
// another gateway's credit, so the writer forgets it (once the group is
// done: forgetMoved) and Store.Update runs the update again, which reads
// it. Refused again on rows read afresh, it fails as it did.
func (t *Tx) judgedStale(err error) error {
	var j *judgedErr
	if err == nil || !t.s.overlap || !(errors.Is(err, holon.ErrOverdrawn) || errors.Is(err, holon.ErrOverBudget) || errors.As(err, &j)) {
		return err
	}
	if len(t.usedMoved) == 0 {
		return err
	}
	t.s.forget = append(t.s.forget, t.usedMoved...)
	return &errJudgedStale{err}
}

// judged marks a refusal the store judged on a moved row's value
// (judgedStale).
func judged(err error) error { return &judgedErr{err} }

type judgedErr struct{ err error }

func (e *judgedErr) Error() string { return e.err.Error() }
func (e *judgedErr) Unwrap() error { return e.err }

// errJudgedStale is a refusal judged on rows the writer has since
// forgotten: the update runs again (Store.Update).
type errJudgedStale struct{ err error }

func (e *errJudgedStale) Error() string { return e.err.Error() }
func (e *errJudgedStale) Unwrap() error { return e.err }

// forgetMoved forgets, in base, the rows refusals were judged on
// (judgedStale), once the group they were judged in has left what it
// knew there (under baseMu; the writer's goroutine).
func (s *Store) forgetMoved() {
	for _, k := range s.forget {
		delete(s.base, k)
	}
	s.forget = s.forget[:0]
}

// guardAbsent checks, for an update of writers that overlap that wrote a
// document, that every document it read as absent and did not write is
// still absent at its commit (guards.go: the key locked, then NOT
// EXISTS). Its statements do not share one snapshot, so without it an
// update could decide on one row as it was before another gateway's
// commit and on a second as it is after: an Idempotency-Key's claim reads
// its finished record (absent: not finished yet) and its running one
// (absent: the other gateway's settlement just finished it), and would
// run the key again.
func (t *Tx) guardAbsent() error {
	wrote := false
	for k, e := range t.l {
		if e.dirty && k[0] == 'd' {
			wrote = true
			break
		}
	}
	if !wrote {
		return nil
	}
	// In the keys' order, as every writer takes their locks.
	for _, k := range slices.Sorted(maps.Keys(t.seen)) {
		if e := t.seen[k]; e.st != absent || k[0] != 'd' {
			continue
		}
		if w, ok := t.l[k]; ok && w.dirty {
			continue // written: checked where it was
		}
		if err := t.guard(k); err != nil {
			return err
		}
	}
	return nil
}

// refusedAsRead lets a refusal of an update of writers that overlap (its
// function's error, or a check of the store's) stand only if the rows it
// read whole are still as it read them. Its statements do not share one
// snapshot: a gateway closing a call left in flight reads the call's
// hold, another gateway closes the same call and commits, and the first
// then reads the mandate's budget with the reservation released, and
// refuses to release it again. Refusals are few, so they are checked
// here, in one round trip on a connection of the writer's pool (the
// rows as committed), rather than at the group's COMMIT: if one changed,
// the writer forgets it (once the group is done) and Store.Update runs
// the update again, on the rows as they are. A refusal judged on rows
// still as read stands, as does one the check could not make.
func (t *Tx) refusedAsRead(err error) error {
	if err == nil || !t.s.overlap || errors.As(err, new(*errJudgedStale)) {
		return err
	}
	type check struct {
		k     string
		there bool // the row as read is there (else: absent)
	}
	var checks []check
	b := &pgx.Batch{}
	for _, k := range slices.Sorted(maps.Keys(t.seen)) {
		e := t.seen[k]
		if e.st == unknown {
			continue // its group wrote it, or it was checked as it was written
		}
		r, gerr := guardOf(k)
		if gerr != nil {
			continue
		}
		cond, args := r.where(e)
		checks = append(checks, check{k, e.st == present})
		b.Queue(`SELECT EXISTS (SELECT FROM `+r.g.table+` WHERE `+cond+`)`, args...)
	}
	if len(checks) == 0 {
		return err
	}
	ctx, cancel := context.WithTimeout(t.ctx, refusalCheckWait)
	defer cancel()
	conn, cerr := t.s.pool.Acquire(ctx)
	if cerr != nil {
		return err
	}
	defer conn.Release()
	t.s.refusalChecks.Add(1)
	br := conn.SendBatch(ctx, b)
	defer br.Close()
	var changed []string
	for _, c := range checks {
		var there bool
		if cerr := br.QueryRow().Scan(&there); cerr != nil {
			return err
		}
		if there != c.there {
			changed = append(changed, c.k)
		}
	}
	if len(changed) == 0 {
		return err
	}
	t.s.forget = append(t.s.forget, changed...)
	return &errJudgedStale{err}
}

// refusalCheckWait bounds refusedAsRead's round trip.
const refusalCheckWait = 5 * time.Second
