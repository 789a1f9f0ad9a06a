package pg

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// A writer alone on the database sends a group's COMMIT with the next
// group's begin (group.go) and, while that round trip is in flight, runs
// the updates that queue meanwhile: the next group's, on the cache as the
// committing group leaves it. Nothing of them reaches the database before
// that COMMIT is answered: an update that must read a row the cache does
// not hold stops there and runs again from its start once it is (the
// methods that would send a statement refuse with errOverlap). When the
// COMMIT is answered (land):
//
//   - committed, the next group begun and no other writer's log entry in
//     between: the updates run meanwhile stand, and the next group goes
//     on from them (Store.try), its statements sent with its COMMIT;
//   - anything else (the COMMIT refused or its answer lost, the head start
//     refused because another writer waits for the lock): the cache is
//     dropped (or caught up), the committing group's updates are answered
//     or run again as they would have been, and the updates run meanwhile
//     are thrown away and run again, from their start, after them.
//
// A caller is answered only once its own group's COMMIT is (durability
// is unchanged), and the database sees a group's statements only once
// the group before it committed, so its order is the one the writers'
// lock gives. What overlaps is the writer's own work on the next group
// (running its updates, rendering its statements) with the database's
// work on this one.

// flight is a group whose COMMIT is in flight.
type flight struct {
	done  chan struct{}
	g     *group
	conn  *pgxpool.Conn
	start time.Time
	// Set before done is closed: the next group's begin's log (nil: no
	// head start) and the COMMIT's error.
	begun []logEntry
	err   error
}

// specGroup is the next group, run while the COMMIT before it was in
// flight: batch are the updates it took from the queue, of which the
// first ran ran to their end (the one after, if any, stopped at a read
// the cache could not answer).
type specGroup struct {
	g     *group
	batch []*update
	ran   int
}

// errOverlap is what an update run while the COMMIT before its group is
// in flight gets from a method that would send a statement: it runs
// again from its start once that COMMIT is answered.
var errOverlap = errors.New("the group before this update's is committing: it runs again once that is answered")

// wire refuses a round trip while the COMMIT before this update's group
// is in flight.
func (t *Tx) wire() error {
	if t.g != nil && t.g.spec {
		if t.fatal == nil {
			t.fatal = errOverlap
		}
		return t.fatal
	}
	return nil
}

// overlap runs the updates that queue while the COMMIT in flight
// (s.flying) is not answered, up to MaxBatch, into s.spec.
func (s *Store) overlap() {
	f := s.flying
	g := &group{s: s, ctx: context.Background(), conn: f.g.conn, conf: layer{}, rerun: -1, alone: true, gen: s.gen, spec: true}
	sp := &specGroup{g: g}
	s.spec = sp
	for len(sp.batch) < MaxBatch {
		var u *update
		select {
		case <-f.done:
			return
		case v, ok := <-s.queue:
			if !ok {
				s.queueClosed = true
				return
			}
			u = v
		}
		i := len(sp.batch)
		sp.batch = append(sp.batch, u)
		g.errs = append(g.errs, nil)
		if err := u.ctx.Err(); err != nil {
			g.errs[i] = err
			sp.ran++
			continue
		}
		tx := &Tx{s: s, ctx: g.ctx, tx: g.conn, g: g, idx: i, l: layer{}}
		ferr := call(u.fn, tx)
		if tx.fatal != nil || tx.restart || tx.failed != nil || tx.sent {
			// It needs the database: it runs again once the COMMIT is
			// answered. Nothing of it was sent; its writes are the last
			// pending ones.
			g.dropPending(i)
			g.errs = g.errs[:i]
			return
		}
		sp.ran++
		s.overlapped.Add(1)
		if ferr == nil {
			g.open = append(g.open, tx)
			continue
		}
		g.errs[i] = ferr
		g.dropPending(i)
	}
}

// dropPending drops the pending writes of update i, the last ones.
func (g *group) dropPending(i int) {
	n := len(g.pending)
	for n > 0 && g.pending[n-1].owner == i {
		n--
	}
	g.pending = g.pending[:n]
}

// land waits for the COMMIT in flight and returns its outcome as try
// would have: again when the group must run again safely, retry after a
// conflict, err when it failed. The updates run meanwhile stand when the
// COMMIT committed and began the next group with no other writer's
// entry in between; else they are thrown away, to run again after.
func (s *Store) land() (retry, again bool, err error) {
	f := s.flying
	s.flying = nil
	<-f.done
	s.inCommit.Add(int64(time.Since(f.start)))
	err = f.err
	if err == nil && s.loseAnswer.Load() && wroteHold(f.g.conf) && s.loseAnswer.CompareAndSwap(true, false) {
		err = &pgconn.PgError{Code: "57P01", Message: "the commit's answer was lost (LoseCommitAnswer)"}
	}
	if sp := s.spec; sp != nil && (err != nil || len(f.begun) != 0 || f.begun == nil || len(sp.batch) == 0) {
		s.spec = nil
		if len(sp.batch) > 0 {
			s.carry = sp.batch
			s.overlapsLost.Add(1)
		}
	}
	if err != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		f.conn.Conn().Close(ctx)
		cancel()
		f.conn.Release()
		s.dropCache()
		var sr *errSafeRun
		if errors.As(err, &sr) {
			return false, true, nil
		}
		return conflict(err), false, unavailable(err)
	}
	if f.begun == nil {
		f.conn.Release()
		return false, false, nil
	}
	s.next, s.nextLog = f.conn, f.begun
	return false, false, nil
}

// Overlapped is how many updates ran while the COMMIT before their group
// was in flight, since the store opened, and lost how many times such
// updates were thrown away to run again (the COMMIT failed, or another
// writer came between).
func (s *Store) Overlapped() (ran, lost uint64) { return s.overlapped.Load(), s.overlapsLost.Load() }
