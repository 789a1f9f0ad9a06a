package pg

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// A group is one transaction of the writer: the updates it took from the
// queue, run one after the other. A group runs fast first: without
// savepoints, its hot rows written once per round trip (rows.go), its last
// writes sent with its COMMIT. Only when that cannot stand — PostgreSQL
// refuses one of its statements or its COMMIT (a constraint, or a check
// deferred to the COMMIT: the transaction is then refused whole), or an
// update fails after some of its writes reached the database — is it
// rolled back and run again safely (Store.SafeRuns), each update under
// its own savepoint and its deferred checks run at its end (checkNow), so
// that a refused update fails alone.
//
// An update's writes are not sent when it ends: they wait, with those of
// the updates after it, for the next statement that must be answered (a
// read the cache cannot answer, or the group's end), so that a group whose
// updates read only cached rows costs one round trip in all. In a safe run,
// until its statements are answered, an update is open: when one of them
// is refused, that update alone fails (undone to its savepoint) and the
// updates after it, whose statements the database skipped, run again.
type group struct {
	s       *Store
	ctx     context.Context
	conn    *pgx.Conn
	pending []queued
	// open are the updates that ran to their end but whose statements
	// are not all answered yet, oldest first.
	open []*Tx
	// conf holds the cache changes of the updates answered so far.
	conf layer
	// errs are the updates' outcomes; rerun the first update to run
	// again after one was refused in another's round trip (-1: none).
	errs  []error
	rerun int
	// gen is the last writer_log entry this writer has seen.
	gen int64
	// safe: each update runs under its own savepoint.
	safe bool
	// alone: no other writer wrote since this writer's last group; begun
	// is the log read by the next group's begin, sent with this group's
	// COMMIT (commit), when it was.
	alone bool
	begun []logEntry
	// committedAt is when its COMMIT was sent.
	committedAt time.Time
	// prior, in a group run while the COMMIT of the group before is in
	// flight (speculate), is that group's changes; far reports that an
	// update of such a group needed the database.
	prior layer
	far   bool
	batch []*update
	// touched, in a group run while its writer waits for the writers'
	// lock (speculateWaiting), is how its updates used each row; stop
	// is its first update that must run again once the lock is held
	// (-1: none).
	touched map[string]touch
	stop    int
	// atCommit are the CounterAt calls of the updates answered.
	atCommit []counterAt
	// stale are the rows a check of the database showed this writer
	// knew wrong (staleRow): the group commits forgetting them.
	stale []string
	// marks are where each update that ran began handing out numbers
	// (numbers.go: mark).
	marks []uint64
	// recheck, in a group of writers that overlap run while the COMMIT
	// before it was in flight, are the rows other writers changed
	// meanwhile: forgotten once it commits, if it used them
	// (overlap.go).
	recheck []string
}

// mark records where update i begins handing out numbers. An update
// before it that did not run (its caller gone) handed out none: its mark
// is i's, so that a rewind from it gives back no number handed out
// before (and a mark left at zero would give back every number the
// writer handed out since it opened, committed ones too).
func (g *group) mark(i int) {
	at := g.s.nums.mark()
	for len(g.marks) <= i {
		g.marks = append(g.marks, at)
	}
	g.marks[i] = at
	g.marks = g.marks[:i+1]
}

// rewind gives back the numbers handed out since update i began: it
// and the updates after it do not stand.
func (g *group) rewind(i int) {
	if i >= 0 && i < len(g.marks) {
		g.s.nums.rewind(g.marks[i])
	}
}

// errSafeRun is a fast run's end: the group must run again safely.
type errSafeRun struct{ err error }

func (e *errSafeRun) Error() string {
	return fmt.Sprintf("the group runs again, each update under a savepoint: %v", e.err)
}

func (e *errSafeRun) Unwrap() error { return e.err }

// answered is told that every pending statement was answered: the open
// updates are done, their changes the group's.
func (g *group) answered() {
	for _, o := range g.open {
		g.conf.merge(o.l)
		g.atCommit = append(g.atCommit, o.atCommit...)
	}
	g.open = g.open[:0]
}

// refused handles a pending statement of update owner that PostgreSQL
// refused with err, in a round trip update t made, and returns t's error.
func (g *group) refused(t *Tx, owner int, err error) error {
	if k := staleRow(err); k != "" {
		g.stale = append(g.stale, k)
		g.s.baseMu.Lock()
		delete(g.s.base, k)
		g.s.baseMu.Unlock()
		if k == kMeta(g.s.headKey) {
			// Another writer extended this writer's chain: its entries
			// take numbers from a block taken after those (numbers.go).
			g.s.nums.drop("journal")
		}
	}
	err = refusal(err)
	if t.note(err); t.fatal == nil && !g.safe {
		// A fast run has no savepoint to go back to.
		t.fatal = &errSafeRun{err}
	}
	if t.fatal != nil || owner < 0 {
		if t.fatal == nil {
			t.fatal = err
		}
		return t.fatal
	}
	// The updates before owner were answered; owner's statements stop
	// at the one refused, and nothing after it ran.
	n := 0
	for _, o := range g.open {
		if o.idx < owner {
			g.conf.merge(o.l)
			g.atCommit = append(g.atCommit, o.atCommit...)
			n++
		}
	}
	g.open = g.open[n:]
	if owner == t.idx {
		t.sent = true
		return err
	}
	// An earlier update, which ended without an error, is refused: it
	// fails, and every update after it runs again.
	g.errs[owner] = err
	g.open = g.open[:0]
	g.rerun = owner + 1
	t.failed = nil
	if uerr := g.undo(); uerr != nil {
		t.fatal = uerr
		return uerr
	}
	t.restart = true
	return errRestart
}

// undo rolls the transaction back to the last savepoint, at once, in the
// simple protocol: the transaction refuses every statement until then,
// even its preparing (which pgx does for a batch's new statements).
func (g *group) undo() error {
	g.pending = g.pending[:0]
	g.s.trips.Add(1)
	g.s.stmts.Add(2)
	_, err := g.conn.PgConn().Exec(g.ctx, `ROLLBACK TO SAVEPOINT u; RELEASE SAVEPOINT u`).ReadAll()
	return err
}

// try runs the group once in a REPEATABLE READ transaction: fast, or
// safely with each update under a savepoint. retry is true after a
// serialization conflict or deadlock (the whole group must run again),
// again when a fast run must run again safely; err is an error of the
// transaction itself (the database unreachable, the commit refused).
func (s *Store) try(batch *[]*update, fill, safe bool) (errs []error, retry, again bool, err error) {
	ctx := context.Background()
	g := &group{s: s, ctx: ctx, conf: layer{}, rerun: -1, safe: safe, pending: s.pendingBuf()}
	// start: the updates run already, while the COMMIT before was in
	// flight (speculate), when they stand.
	start := 0
	if sp := s.spec; sp != nil && fill {
		s.spec = nil
		g, start = sp, len(sp.errs)
		g.prior = nil // committed: in base now
	}
	// The writers of every gateway take turns, a group at a time: the
	// lock is taken before the transaction's snapshot, so it sees every
	// group committed before it and no two groups ever conflict (a
	// conflict would run a whole group again). The same round trip reads
	// the writers' log since this writer's last group.
	var logged []logEntry
	var begunAt time.Time
	var waited *group // run while the begin waited (speculateWaiting)
	conn := s.next
	if conn != nil {
		// The last group's COMMIT began this one (commit).
		logged, begunAt, s.next, s.nextLog = s.nextLog, s.nextAt, nil, nil
		s.headStarts.Add(1)
	} else {
		begunAt = time.Now()
		at := s.pos()
		begun := func() (a begunAnswer) {
			a.conn, a.err = s.acquire(ctx, func(c *pgxpool.Conn) (err error) {
				a.logged, err = s.begin(ctx, c.Conn(), at)
				return err
			})
			return a
		}
		var a begunAnswer
		if fill && start == 0 && !safe && at.gen >= 0 && !s.noWaitRuns && !s.overlap {
			// While the begin waits for the lock, the updates run.
			answered := make(chan begunAnswer, 1)
			go func() { answered <- begun() }()
			waited, a = s.speculateWaiting(ctx, *batch, answered)
			*batch = waited.batch
		} else {
			a = begun()
		}
		conn, logged, err = a.conn, a.logged, a.err
		s.inBegin.Add(int64(time.Since(begunAt)))
		if err != nil {
			s.dropCache()
			return nil, false, false, unavailable(err)
		}
	}
	// alone: no other writer wrote since this one's last group.
	g.alone = s.gen >= 0 && !changed(logged)
	if start > 0 && s.overlap {
		// Run while the COMMIT before was in flight, on what this
		// writer knew then (commit).
		for _, e := range logged {
			g.recheck = append(g.recheck, e.keys...)
		}
	}
	ok := false
	defer func() {
		if !ok {
			// The connection may be inside the transaction: closing it
			// ends it.
			conn.Conn().Close(ctx)
			s.dropCache()
		}
		if ok && g.begun != nil {
			s.next, s.nextLog, s.nextAt = conn, g.begun, g.committedAt
			return
		}
		conn.Release()
	}()
	// fail ends the run on an error of the transaction; a fast run that
	// must run again safely is rolled back, and the writer's cache, which
	// the rollback leaves true, kept.
	fail := func(err error) ([]error, bool, bool, error) {
		var sr *errSafeRun
		if errors.As(err, &sr) {
			if rerr := rollback(ctx, conn.Conn()); rerr == nil {
				ok = true
				return nil, false, true, nil
			}
			err = sr.err
		}
		return nil, conflict(err), false, unavailable(err)
	}
	if waited != nil {
		// What stands of the run made while waiting (spec.go); the rest
		// runs now.
		n := s.rebase(waited, logged)
		waited.rewind(n) // the updates from n on run again
		s.waitGroups.Add(1)
		ran := len(waited.batch)
		if waited.stop >= 0 {
			ran = waited.stop
		}
		s.waitUpdates.Add(uint64(ran))
		s.waitKept.Add(uint64(n))
		if n > 0 {
			waited.alone = g.alone
			g, start = waited, n
		}
	}
	g.conn = conn.Conn()
	g.gen = s.catchUp(logged, begunAt)
	if fill && start == 0 {
		// What queued while this writer waited for its turn joins the
		// group. (A group run while the COMMIT before it was in flight
		// holds what came meanwhile, and goes at once: what comes now is
		// run while its COMMIT is.)
		*batch = s.fill(*batch)
	}
	updates := *batch
	g.errs = append(g.errs, make([]error, len(updates)-len(g.errs))...)
	if err := g.runUpdates(updates, start, conn.Conn()); err != nil {
		// Nothing of the group stands: it fails, or runs again.
		g.rewind(0)
		return fail(err)
	}
	if err := s.commit(ctx, conn.Conn(), g); err != nil {
		if errors.As(err, new(*errSafeRun)) {
			// PostgreSQL refused the group: it runs again. (Another
			// error may have come after the COMMIT took effect: its
			// numbers are then not given back.)
			g.rewind(0)
		}
		return fail(err)
	}
	ok = true
	return g.errs, false, false, nil
}

// runUpdates runs updates[i:] in g, each in its own Tx on q, and
// returns the error that ends the group's run (nil: it is ready to
// commit).
func (g *group) runUpdates(updates []*update, i int, q querier) error {
	for {
		for ; i < len(updates); i++ {
			u := updates[i]
			g.mark(i)
			if err := u.ctx.Err(); err != nil {
				g.errs[i] = err
				continue
			}
			tx := &Tx{s: g.s, ctx: g.ctx, tx: q, g: g, idx: i, l: layer{}, began: time.Now().UnixNano()}
			if g.safe {
				g.pending = append(g.pending, queued{sql: `SAVEPOINT u`, owner: i, free: true})
			}
			ferr := call(u.fn, tx)
			if ferr == nil && tx.fatal == nil && tx.failed == nil {
				if ferr = tx.checkOverdrafts(); ferr == nil {
					ferr = tx.checkLimits()
				}
				if ferr == nil && g.s.overlap {
					ferr = tx.guardAbsent()
				}
			}
			if tx.fatal == nil && tx.failed == nil && !g.far && !tx.restart {
				ferr = tx.refusedAsRead(tx.judgedStale(ferr))
			}
			if tx.fatal != nil {
				return tx.fatal
			}
			if tx.restart {
				// The update before g.rerun failed; it and those after
				// it wrote nothing that stands.
				g.rewind(g.rerun - 1)
				i = g.rerun - 1
				continue
			}
			if g.far {
				return errFar
			}
			if ferr == nil && tx.failed == nil {
				if g.safe {
					// Its deferred checks (a refund within its receipt,
					// the journal's) run now, under its savepoint, not at
					// the COMMIT, where a refusal fails the whole group.
					g.pending = append(g.pending, queued{sql: checkNow, owner: i}, queued{sql: checkAtCommit, owner: i, free: true},
						queued{sql: `RELEASE SAVEPOINT u`, owner: i, free: true})
				}
				g.open = append(g.open, tx)
				g.errs[i] = nil
				continue
			}
			if ferr == nil {
				ferr = tx.failed // an error PostgreSQL returned, which fn went past
			}
			g.errs[i] = ferr
			g.rewind(i) // it fails: nothing of it stands, and none ran after it
			if !g.safe && tx.failed != nil {
				// PostgreSQL refused one of its reads: the transaction
				// refuses everything after it, and has no savepoint.
				return &errSafeRun{tx.failed}
			}
			if !tx.sent {
				// Nothing of it reached the database: its writes are the
				// last pending ones (a round trip it made sent only those
				// of the updates before it).
				n := len(g.pending)
				for n > 0 && g.pending[n-1].owner == i {
					n--
				}
				g.pending = g.pending[:n]
				continue
			}
			if !g.safe {
				// Some of it did, and there is no savepoint to undo it to.
				return &errSafeRun{ferr}
			}
			// Some of it did: undo it, at once if PostgreSQL refused it
			// (the transaction refuses everything until then). Its
			// statements not sent yet are the last pending ones.
			if tx.failed != nil {
				if err := g.undo(); err != nil {
					return err
				}
				continue
			}
			n := len(g.pending)
			for n > 0 && g.pending[n-1].owner == i {
				n--
			}
			g.pending = append(g.pending[:n], queued{sql: `ROLLBACK TO SAVEPOINT u`, owner: -1}, queued{sql: `RELEASE SAVEPOINT u`, owner: -1})
		}
		if !g.safe {
			// The group's last writes go with its COMMIT.
			return nil
		}
		// The group's end: what is still pending is sent.
		end := &Tx{s: g.s, ctx: g.ctx, tx: q, g: g, idx: len(updates)}
		if end.flush(); end.fatal != nil {
			return end.fatal
		}
		if !end.restart {
			return nil
		}
		g.rewind(g.rerun - 1)
		i = g.rerun
	}
}

// checkNow runs the deferred checks of the writes so far (the
// constraints declared DEFERRABLE INITIALLY DEFERRED: the journal's
// balance and references, refunds within their receipts), and
// checkAtCommit defers them again. A safe run sends both at the end of
// each update, under its savepoint, so that a write one of them refuses
// fails its update alone; a fast run leaves them to its COMMIT, whose
// refusal runs the group again safely.
const (
	checkNow      = `SET CONSTRAINTS ALL IMMEDIATE`
	checkAtCommit = `SET CONSTRAINTS ALL DEFERRED`
)

// rollback ends the transaction, at once, in the simple protocol.
func rollback(ctx context.Context, c *pgx.Conn) error {
	_, err := c.PgConn().Exec(ctx, `ROLLBACK`).ReadAll()
	return err
}

// logEntry is one group's entry in writer_log.
type logEntry struct {
	gen  int64
	keys []string
	// vals are the keys' rows' new values, or nil (cache.go).
	vals []*string
	// snap, for writers that overlap (overlap.go), is the snapshot the
	// log was read in: one entry names every row the others wrote whole
	// since the last read (no values: they are forgotten).
	snap string
}

// changed reports whether other writers changed rows in the entries.
func changed(logged []logEntry) bool {
	for _, e := range logged {
		if len(e.keys) > 0 {
			return true
		}
	}
	return false
}

// logPos is where a writer's reading of the log stands: the last entry
// it read under the writers' lock (-1: it knows nothing), or, for
// writers that overlap, the snapshot it last read the log in.
type logPos struct {
	gen  int64
	snap string
}

// pos is the writer's position in the log (the writer goroutine's).
func (s *Store) pos() logPos { return logPos{s.gen, s.snap} }

// begin begins the group's transaction, takes the writers' lock and reads
// the writers' log after gen (the newest entry alone when gen < 0), in one
// round trip. The lock is writer_log's table lock in EXCLUSIVE mode
// (readers are not held up), taken by the transaction's first statement:
// LOCK TABLE takes no snapshot, so the transaction's snapshot is taken once
// the lock is held, and sees every group committed before. It is let go
// of at COMMIT or ROLLBACK, or when the connection dies.
func (s *Store) begin(ctx context.Context, c *pgx.Conn, at logPos) ([]logEntry, error) {
	b := &pgx.Batch{}
	s.queueBegin(b, at, false)
	br := c.SendBatch(ctx, b)
	defer br.Close()
	out, err := s.readBegin(br)
	if err != nil {
		return nil, err
	}
	return out, br.Close()
}

// queueBegin queues begin's statements; with nowait, the lock is taken
// only if no other writer holds it, else the transaction fails at once.
// Writers that overlap take no lock (overlap.go).
func (s *Store) queueBegin(b *pgx.Batch, at logPos, nowait bool) {
	if s.overlap {
		queueOverlapBegin(b, at, s.chain)
		return
	}
	gen := at.gen
	b.Queue(`BEGIN ISOLATION LEVEL REPEATABLE READ`)
	if nowait {
		b.Queue(`LOCK TABLE writer_log IN EXCLUSIVE MODE NOWAIT`)
	} else {
		b.Queue(`LOCK TABLE writer_log IN EXCLUSIVE MODE`)
	}
	if gen < 0 {
		b.Queue(`SELECT coalesce(max(gen), 0), '{}'::text[], NULL::text[] FROM writer_log`)
	} else {
		b.Queue(`SELECT gen, keys, vals FROM writer_log WHERE gen > $1 ORDER BY gen`, gen)
	}
}

// readBegin reads the answers to queueBegin's statements: the log.
func (s *Store) readBegin(br pgx.BatchResults) ([]logEntry, error) {
	if s.overlap {
		return readOverlapBegin(br)
	}
	rows, err := queryAfter(br, 2)
	if err != nil {
		return nil, err
	}
	var out []logEntry
	for rows.Next() {
		var e logEntry
		if err := rows.Scan(&e.gen, &e.keys, &e.vals); err != nil {
			rows.Close()
			return nil, err
		}
		out = append(out, e)
	}
	rows.Close()
	return out, rows.Err()
}

// queryAfter reads the answers of a batch's first n statements, and the
// rows of the next one.
func queryAfter(br pgx.BatchResults, n int) (pgx.Rows, error) {
	for range n {
		if _, err := br.Exec(); err != nil {
			return nil, err
		}
	}
	return br.Query()
}

// catchUp forgets the rows the other writers changed since this writer's
// last group and returns the newest log entry's number. Its log was read
// under the writers' lock, taken after at: base is then the committed
// state as of at, or later (recent.go).
func (s *Store) catchUp(logged []logEntry, at time.Time) int64 {
	s.baseMu.Lock()
	defer s.baseMu.Unlock()
	s.baseAt = at
	if s.overlap {
		return s.catchUpOverlap(logged, at)
	}
	// Another writer that extended this writer's chain numbered its
	// entries after what this writer knew: the entries this writer
	// numbers next take a block taken after those (numbers.go).
	head := kMeta(s.headKey)
	if s.gen < 0 {
		s.nums.drop("journal")
		s.base = layer{}
		if len(logged) == 0 {
			return 0
		}
		return logged[len(logged)-1].gen
	}
	if len(logged) == 0 {
		return s.gen
	}
	if logged[0].gen != s.gen+1 {
		// The entries in between were pruned: forget everything.
		s.nums.drop("journal")
		s.base = layer{}
	} else {
		for _, e := range logged {
			for i, k := range e.keys {
				if k == head {
					s.nums.drop("journal")
				}
				// The row's new value, when the log carries it; else the
				// row is read again when needed.
				var v *string
				if len(e.vals) == len(e.keys) {
					v = e.vals[i]
				}
				if c, ok := fromLog(k, v); ok {
					s.base[k] = c
				} else {
					delete(s.base, k)
				}
			}
		}
	}
	return logged[len(logged)-1].gen
}

// logPrune is how often (in log entries) the writers' log is pruned, and
// logKeep how many entries pruning keeps: a writer idle for longer than
// that many groups of others forgets its whole cache.
const (
	logPrune = 1024
	logKeep  = 8192
)

// commit sends the group's pending writes (a fast run's last ones),
// appends the group's changed rows to the writers' log and commits
// (letting go of the writers' lock), in one round trip, and keeps the
// group's cache changes. A pending write refused fails a fast run: it
// must run again safely.
func (s *Store) commit(ctx context.Context, c *pgx.Conn, g *group) (err error) {
	s.pendingHint = max(len(g.pending), s.pendingHint*7/8)
	pend := render(g.pending, !g.safe, int32(s.chain))
	g.pending = nil
	for _, o := range g.open {
		g.conf.merge(o.l)
		g.atCommit = append(g.atCommit, o.atCommit...)
	}
	g.open = nil
	for _, k := range g.recheck {
		if e, used := g.conf[k]; used {
			// Computed from an older value than the other writer's: not
			// known, here, in base once committed, and in the group run
			// while this COMMIT is in flight (overlap.go).
			g.conf[k] = entry{st: unknown, dirty: e.dirty}
		}
	}
	for _, k := range g.stale {
		// Forgotten, here and in the other writers' caches.
		g.conf[k] = entry{st: unknown, dirty: true}
	}
	var keys []string
	var vals []*string
	movedAny := false
	for k, e := range g.conf {
		switch {
		case !e.dirty:
		case !s.overlap:
			keys, vals = append(keys, k), append(vals, logValue(k, e))
		case moved(k):
			movedAny = true
		default:
			keys = append(keys, k) // forgotten by the others: no value
		}
	}
	gen := g.gen
	b := &pgx.Batch{}
	for _, q := range pend {
		b.Queue(q.sql, q.args...)
	}
	s.stmts.Add(uint64(len(pend))) // in the COMMIT's round trip
	switch {
	case s.overlap:
		if len(keys) > 0 || movedAny {
			// The marker tells the other writers that this one moved or
			// wrote rows (overlap.go: fresh).
			s.queueOverlapLog(b, append(keys, kOthers))
		}
	case len(keys) > 0:
		gen++
		b.Queue(`INSERT INTO writer_log (gen, keys, vals) VALUES ($1, $2, $3)`, gen, keys, vals)
		if gen%logPrune == 0 {
			b.Queue(`DELETE FROM writer_log WHERE gen <= $1`, gen-logKeep)
		}
	}
	b.Queue(`COMMIT`)
	commitAt := b.Len() - 1
	// A writer alone on the database begins its next group in the same
	// round trip: the lock it takes again is not waited for. It does so
	// whether or not updates wait now: under load the queue fills while
	// the COMMIT runs (fill took what waited when this group began), and
	// a writer that finds none waiting once it is answered gives the
	// lock back at once (Store.write). The lock is taken without
	// waiting: if another writer came meanwhile, it holds the lock once
	// this COMMIT lets go of it, the head start fails at once and the
	// next group begins as any other. (Waiting for it would hold this
	// group's answers too: PostgreSQL sends a batch's answers when it
	// ends.)
	pipe := (g.alone || s.overlap) && !g.safe
	if pipe {
		s.queueBegin(b, logPos{gen, s.snap}, true)
	}
	// CounterAt: the counters as this COMMIT leaves them, told before
	// any reader can see it (unknown: a value no reader reaches).
	for _, at := range g.atCommit {
		v := uint64(math.MaxUint64)
		e, ok := g.conf[at.k]
		if !ok {
			e, ok = s.base[at.k]
		}
		if ok && e.st != unknown {
			v = asUint(e)
		}
		at.f(v)
	}
	g.committedAt = time.Now()
	defer func(start time.Time) { s.inCommit.Add(int64(time.Since(start))) }(g.committedAt)
	br := c.SendBatch(ctx, b)
	s.answerHeld()
	var begun []logEntry
	if pipe {
		// While PostgreSQL runs this group, the next one runs on what
		// this one leaves (speculate); it stands if this one commits and
		// no other writer wrote meanwhile.
		answered := make(chan commitAnswer, 1)
		go func() {
			begun, err := s.readCommit(ctx, c, br, commitAt, pipe, g.safe)
			answered <- commitAnswer{begun, err}
		}()
		sp, a := s.speculate(g, answered)
		begun, err = a.begun, a.err
		defer func() {
			if sp == nil {
				return
			}
			if err == nil && !sp.far && g.begun != nil && (s.overlap || !changed(g.begun)) {
				// Writers that overlap keep it whatever the others
				// changed meanwhile: it ran on what this writer knew, as
				// any of their groups does, and the rows the others
				// changed that it used are forgotten once it commits
				// (overlap.go).
				s.spec = sp
				s.specGroups.Add(1)
				s.specUpdates.Add(uint64(len(sp.batch)))
				return
			}
			s.specDropped.Add(1)
			sp.rewind(0)
			s.held = append(sp.batch, s.held...)
		}()
	} else {
		begun, err = s.readCommit(ctx, c, br, commitAt, pipe, g.safe)
	}
	if err != nil {
		return err
	}
	g.begun = begun
	if s.loseAnswer.Load() && wroteHold(g.conf) && s.loseAnswer.CompareAndSwap(true, false) {
		return &pgconn.PgError{Code: "57P01", Message: "the commit's answer was lost (LoseCommitAnswer)"}
	}
	s.gen = gen
	// No other writer committed between this group's turn and its
	// COMMIT: base and the group's changes are the committed state as of
	// the COMMIT, which came after it was sent.
	s.baseMu.Lock()
	defer s.baseMu.Unlock()
	s.baseAt = g.committedAt
	if len(s.base)+len(g.conf) > maxBase {
		s.base = layer{}
	}
	for k, e := range g.conf {
		if e.st == unknown {
			delete(s.base, k)
		} else {
			e.dirty = false
			s.base[k] = e
		}
	}
	if s.overlap {
		// What this group computed of a row another writer wrote
		// meanwhile is not the committed state: the head start's log
		// read, after this COMMIT, names those rows, and base is that
		// state once they are forgotten. Without it, base is one state
		// again at the next group's read, and no recent view reads it
		// before (overlap.go).
		if begun == nil {
			s.baseAt = time.Time{}
		}
		for _, e := range begun {
			s.takeLog(e)
		}
		s.forgetMoved()
	}
	return nil
}

// pendingBuf is a new group's pending writes, with room for as many as
// the groups before it sent (pendingHint): a group queues hundreds.
func (s *Store) pendingBuf() []queued { return make([]queued, 0, s.pendingHint) }

// commitAnswer is what readCommit read.
type commitAnswer struct {
	begun []logEntry
	err   error
}

// readCommit reads the answers to commit's round trip, the group's
// COMMIT's at commitAt; with pipe, the log the next group's head start
// read after it (nil when it did not begin: its transaction is then
// ended).
func (s *Store) readCommit(ctx context.Context, c *pgx.Conn, br pgx.BatchResults, commitAt int, pipe, safe bool) ([]logEntry, error) {
	for i := range commitAt + 1 {
		tag, err := br.Exec()
		if err == nil && i == commitAt && tag.String() != "COMMIT" {
			err = fmt.Errorf("PostgreSQL answered %q to COMMIT", tag.String())
		}
		if err != nil {
			br.Close()
			// A refusal of a fast run's statement, or of its COMMIT (a
			// deferred check), is one update's: the group runs again
			// safely, where each update's checks run at its end.
			var pe *pgconn.PgError
			if !safe && errors.As(err, &pe) && !conflict(err) && !serverGone(pe.Code) {
				return nil, &errSafeRun{err}
			}
			return nil, err
		}
	}
	if !pipe {
		return nil, br.Close()
	}
	// Committed: a failure from here on costs the next group its head
	// start, not this group its commit.
	logged, err := s.readBegin(br)
	if err == nil && br.Close() == nil {
		if logged == nil {
			logged = []logEntry{}
		}
		return logged, nil
	}
	if br.Close(); rollback(ctx, c) != nil {
		c.Close(ctx)
	}
	return nil, nil
}

// dropCache forgets everything the writer knew: after a group failed, what
// the database holds is not known.
func (s *Store) dropCache() {
	s.baseMu.Lock()
	defer s.baseMu.Unlock()
	s.base = layer{}
	s.baseAt = time.Time{}
	s.gen, s.snap = -1, ""
}

// LoseCommitAnswer makes the next commit that writes a hold (a call's
// reservation) land and then fail as if the connection had dropped before
// its answer came back: for tests and drills of what a gateway does then.
func (s *Store) LoseCommitAnswer() { s.loseAnswer.Store(true) }

func wroteHold(l layer) bool {
	for k, e := range l {
		if e.dirty && e.st == present && strings.HasPrefix(k, "h"+sep) {
			return true
		}
	}
	return false
}
