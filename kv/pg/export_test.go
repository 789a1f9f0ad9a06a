package pg

import "context"

// Queued is how many updates wait for the writer (for tests that build a
// group of updates in a known order).
func Queued(s *Store) int { return len(s.queue) }

// NoWaitRuns turns off the runs while waiting for the writers' lock
// (spec.go), for tests of what a writer does once it holds the lock: an
// update that holds its writer then holds the lock too.
func NoWaitRuns(s *Store) { s.noWaitRuns = true }

// Fold folds the rollups' additions into their rows, once, as the leader
// of the job rollups_fold does.
func Fold(s *Store) error { return s.fold(context.Background()) }

// BlocksTaken is how many blocks of numbers s took (numbers.go).
func BlocksTaken(s *Store) uint64 {
	s.nums.mu.Lock()
	defer s.nums.mu.Unlock()
	return s.nums.taken
}
