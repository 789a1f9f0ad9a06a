package pg

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"holon.dev/holon"
)

// Recent views: a read served from the writer's cache (cache.go), with no
// round trip. What committed groups left (Store.base) is, for every row it
// holds, the row's committed value as of the writer's last turn: each
// turn reads the log of every other writer's changes under the writers'
// lock (catchUp), and while it holds the lock no other writer commits;
// its own group joins base once it commits, before any of the group's
// updates is answered. So base is one consistent state of the rows it
// holds (the database's as of its time, Store.baseAt), that includes
// every update this store answered; only other gateways' commits since
// then are missing from it.
//
// ViewRecent runs a View's fn on that state when it is no older than
// maxAge and holds every row fn reads; when fn asks for a row base does
// not hold, or for anything but single rows (a scan, a page), fn is
// stopped (farRead) and the caller runs its View on the database.
//
// The writer changes base only under baseMu, which a recent view holds
// for reading while fn runs (microseconds: fn reads maps); the writer's
// own reads of base, on its one goroutine, need no lock.

// ViewRecent is holon.RecentViews.
func (s *Store) ViewRecent(maxAge time.Duration, fn func(holon.Tx) error) (ok bool, err error) {
	s.baseMu.RLock()
	defer s.baseMu.RUnlock()
	at := s.baseAt
	if at.IsZero() || time.Since(at) > maxAge {
		s.recentStale.Add(1)
		return false, nil
	}
	defer func() {
		if r := recover(); r != nil {
			if _, far := r.(farRead); !far {
				panic(r)
			}
			s.recentMissed.Add(1)
			ok, err = false, nil
		}
	}()
	// No layer of its own: every row it reads is base's (a read of the
	// database stops fn).
	tx := &Tx{s: s, ctx: context.Background(), tx: farQuerier{}, readOnly: true, idx: -2, recent: true}
	err = fn(tx)
	s.recentServed.Add(1)
	return true, err
}

// farRead stops a recent view's fn, or a speculative run's update
// (spec.go), at a read the writer's memory cannot answer.
type farRead struct{}

// farQuerier is a recent view's querier: any statement is a read base
// cannot answer.
type farQuerier struct{}

func (farQuerier) SendBatch(context.Context, *pgx.Batch) pgx.BatchResults { panic(farRead{}) }
func (farQuerier) Query(context.Context, string, ...any) (pgx.Rows, error) {
	panic(farRead{})
}
func (farQuerier) QueryRow(context.Context, string, ...any) pgx.Row { panic(farRead{}) }
