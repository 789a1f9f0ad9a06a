package pg

// RoundTrips is how many round trips to the database the writer's
// updates took since the store opened (each read, and each batch of
// writes sent with a read or at an update's end; not the group's BEGIN,
// lock and COMMIT), and how many statements they carried (savepoints
// included): a store that sent each statement on its own would have taken
// as many round trips as statements.
func (s *Store) RoundTrips() (trips, statements uint64) { return s.trips.Load(), s.stmts.Load() }
