package pg

import "time"

// RoundTrips is how many round trips to the database the writer's
// updates took since the store opened (each read, with the writes sent
// before it, and the end of a group run safely; not the group's BEGIN,
// lock and COMMIT, with which a fast run's last writes go), and how many
// statements they carried (savepoints and the writes sent with COMMIT
// included): a store that sent each statement on its own would have taken
// as many round trips as statements.
func (s *Store) RoundTrips() (trips, statements uint64) { return s.trips.Load(), s.stmts.Load() }

// Reads is what the store's read-only transactions (View) cost since it
// opened: how many there were, how many of them reached the database, and
// their round trips, each attempt on a dead connection and each
// transaction's end (ROLLBACK) included.
type Reads struct {
	Views, Begun, Trips uint64
	// Recent views (recent.go): served from memory, declined because
	// the state was too old, declined for a row it did not hold.
	Recent, Stale, Missed uint64
}

// Reads reports what the store's Views cost since it opened.
func (s *Store) Reads() Reads {
	return Reads{Views: s.views.Load(), Begun: s.viewsBegun.Load(), Trips: s.viewTrips.Load(),
		Recent: s.recentServed.Load(), Stale: s.recentStale.Load(), Missed: s.recentMissed.Load()}
}

// WriterTimes is where the writer's time went since the store opened.
type WriterTimes struct {
	// Groups is the time from a group's start to its answers; Begin the
	// part spent beginning it (waiting for the writers' lock, reading
	// the writers' log), Trips in its updates' round trips and Commit
	// in its commit.
	Groups, Begin, Trips, Commit time.Duration
}

// Times reports where the writer's time went since the store opened.
func (s *Store) Times() WriterTimes {
	return WriterTimes{Groups: time.Duration(s.inGroups.Load()), Begin: time.Duration(s.inBegin.Load()),
		Trips: time.Duration(s.inTrips.Load()), Commit: time.Duration(s.inCommit.Load())}
}

// Pool is how the store's connections were waited for since it opened.
type Pool struct {
	// Max is the most connections the store opens; Acquires how many
	// times one was taken (a View's first round trip, a group's begin
	// without a head start, the lease's renewal), Waited how many of
	// those found none free, and Waiting the time all of them took.
	Max              int32
	Acquires, Waited int64
	Waiting          time.Duration
	// Opened is how many connections it opened (closed ones are opened
	// again).
	Opened int64
}

// Pool reports how the store's connections were waited for.
func (s *Store) Pool() Pool {
	st := s.pool.Stat()
	return Pool{Max: st.MaxConns(), Acquires: st.AcquireCount(), Waited: st.EmptyAcquireCount(), Waiting: st.AcquireDuration(), Opened: st.NewConnsCount()}
}
