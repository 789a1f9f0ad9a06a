package pg

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
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

// specQuerier is a speculative run's querier: any statement fails with
// errFar, which ends its update's transaction (Tx.note) and so the run.
type specQuerier struct{ g *group }

func (q specQuerier) SendBatch(context.Context, *pgx.Batch) pgx.BatchResults {
	q.g.far = true
	return farBatch{}
}

func (q specQuerier) Query(context.Context, string, ...any) (pgx.Rows, error) {
	q.g.far = true
	return nil, errFar
}

func (q specQuerier) QueryRow(context.Context, string, ...any) pgx.Row {
	q.g.far = true
	return farBatch{}
}

// farBatch answers every statement with errFar.
type farBatch struct{}

func (farBatch) Exec() (pgconn.CommandTag, error) { return pgconn.CommandTag{}, errFar }
func (farBatch) Query() (pgx.Rows, error)         { return nil, errFar }
func (farBatch) QueryRow() pgx.Row                { return farBatch{} }
func (farBatch) Close() error                     { return errFar }
func (farBatch) Scan(...any) error                { return errFar }
func (farBatch) Tx() pgx.Tx                       { return nil }

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
