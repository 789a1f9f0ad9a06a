package pg

import "time"

// RoundTrips is how many round trips to the database the writer's
// updates took since the store opened (each read, and each batch of
// writes sent with a read or at an update's end; not the group's BEGIN,
// lock and COMMIT), and how many statements they carried (savepoints
// included): a store that sent each statement on its own would have taken
// as many round trips as statements.
func (s *Store) RoundTrips() (trips, statements uint64) { return s.trips.Load(), s.stmts.Load() }

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
