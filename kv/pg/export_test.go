package pg

// Queued is how many updates wait for the writer (for tests that build a
// group of updates in a known order).
func Queued(s *Store) int { return len(s.queue) }
