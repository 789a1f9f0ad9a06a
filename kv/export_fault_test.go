package kv

// FailCommitsForTest makes every later commit fail after its updates were
// applied (and Apply's callers let go), as a write to a failing disk would.
func (s *Store) FailCommitsForTest(err error) { s.commitFault = func() error { return err } }
