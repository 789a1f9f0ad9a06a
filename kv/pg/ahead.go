package pg

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Receipts sent ahead of the writers' lock. A writer that takes turns
// with others (the last group it began found their groups in the log)
// waits for the lock for about two of their turns. It asks for the lock
// once its group's updates came and ran (as many as its last group held,
// or after gatherMax), not at once: the others asked before it all the
// same, so its turn comes no later. It sends their new receipts with its
// begin, before the LOCK: they are inserted while the other writers hold
// the lock, not in this writer's turn, where every gateway waits. The
// updates that come after run while the begin waits, as before
// (speculateWaiting).
//
// A new receipt's row depends on nothing another writer changes, and no
// statement of the group reads receipts before those updates' (a run
// while waiting sends none). Only receipts whose ids this writer holds go
// ahead: ids of a block an earlier group took (an in-process call's,
// which takes ids 256 at a time), not ids taken from the sequence in the
// run, which another writer may take too once the run does not stand:
// its insert, under the lock, would wait for this writer's, which waits
// for the lock.
//
// That transaction is READ COMMITTED, not REPEATABLE READ: its first
// statement, the insert, would take a REPEATABLE READ transaction's
// snapshot before the lock. Each of its statements after the LOCK sees
// every group committed before the lock was held, as that snapshot taken
// then would: no writer commits while this one holds the lock. (The
// tables written outside the lock, the leases, the jobs' leaders, rate
// buckets, files' bytes and folded rollups, are read by a statement as
// they are when it runs.)
//
// Once the lock is held, the run stands for its updates before the first
// that saw a row another writer changed (rebase); the receipts sent for
// the others are deleted, first thing in the group's writes, and those
// updates run again. A refused insert rolls that transaction back: the
// writer begins again at once, as any other, and the receipts go with
// the group's other writes.

// gatherMax is the longest a writer that takes turns waits for its
// group's updates before it asks for the lock.
const gatherMax = 3 * time.Millisecond

// gatherFor is how long a writer that takes turns waits for its group's
// updates before it asks for the lock: half its last wait for the lock,
// at most gatherMax.
func (s *Store) gatherFor() time.Duration {
	return min(s.lastWait/2, gatherMax)
}

// gather runs, as add does, the updates that come until g holds as many
// as the writer's last group, or one stops the run, or gatherFor passed.
func (s *Store) gather(g *group, add func(*update)) {
	if len(g.batch) >= s.lastSize || g.stop >= 0 {
		return
	}
	t := time.NewTimer(s.gatherFor())
	defer t.Stop()
	for len(g.batch) < min(s.lastSize, MaxBatch) && g.stop < 0 {
		select {
		case u, ok := <-s.queue:
			if !ok {
				return
			}
			add(u)
		case <-t.C:
			return
		}
	}
}

// takeAhead takes out of g's pending writes the new receipts of the
// updates that ran to their end before any took a receipt id from the
// sequence, each written once in the run so far, and returns them.
func (g *group) takeAhead() []queued {
	limit := len(g.batch)
	if g.stop >= 0 {
		limit = g.stop
	}
	if t, ok := g.touched[kSeq("receipts")]; ok {
		limit = min(limit, t.first)
	}
	writes := map[string]int{}
	for _, q := range g.pending {
		if q.key != "" {
			writes[q.key]++
		}
	}
	var ahead []queued
	p := 0
	for _, q := range g.pending {
		if q.row != nil && q.row.kind == rowReceiptNew && q.owner < limit && writes[q.key] == 1 {
			ahead = append(ahead, q)
			continue
		}
		g.pending[p] = q
		p++
	}
	g.pending = g.pending[:p]
	return ahead
}

// beginAhead begins a group as begin does, with ahead's receipts sent
// before the writers' lock is taken, in a READ COMMITTED transaction, in
// one round trip. sent reports whether they stand: when PostgreSQL
// refused them, that transaction is rolled back and the group begun
// without them.
func beginAhead(ctx context.Context, c *pgx.Conn, gen int64, ahead []queued) (logged []logEntry, sent bool, err error) {
	if len(ahead) == 0 {
		logged, err = begin(ctx, c, gen)
		return logged, false, err
	}
	stmts := render(ahead, true)
	b := &pgx.Batch{}
	b.Queue(`BEGIN ISOLATION LEVEL READ COMMITTED`)
	for _, q := range stmts {
		b.Queue(q.sql, q.args...)
	}
	queueLog(b, gen, false)
	br := c.SendBatch(ctx, b)
	for range 1 + len(stmts) {
		if _, err = br.Exec(); err != nil {
			break
		}
	}
	if err == nil {
		logged, err = readLog(br)
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		return logged, true, nil
	}
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || serverGone(pe.Code) {
		return nil, false, err
	}
	// Refused (or a deadlock's victim, which receipts of this writer's
	// own ids do not make): begin again without them.
	if err := rollback(ctx, c); err != nil {
		return nil, false, err
	}
	logged, err = begin(ctx, c, gen)
	return logged, false, err
}

// undoAhead settles, once the lock is held, the receipts of the run's
// updates, of which the first kept stand: when sent, those of the others
// are deleted, first thing in the group's writes; when not, those of the
// kept ones go first with the group's writes (the others' updates run
// again).
func (g *group) undoAhead(ahead []queued, sent bool, kept int) {
	var back []queued
	var gone []string
	for _, q := range ahead {
		switch {
		case q.owner < kept && !sent:
			back = append(back, q)
		case q.owner >= kept && sent:
			gone = append(gone, q.row.rows[0][0].(string))
		}
	}
	if len(gone) > 0 {
		back = append(back, queued{sql: `DELETE FROM receipts WHERE id = ANY($1::text[])`, args: []any{gone}, owner: -1, free: true})
		g.s.aheadUndone.Add(uint64(len(gone)))
	}
	if len(back) > 0 {
		g.pending = append(back, g.pending...)
	}
}
