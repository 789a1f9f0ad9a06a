package kv

import (
	"context"

	"holon.dev/holon"
)

// A *Tx is a holon.Tx.
var _ holon.Tx = (*Tx)(nil)

// Holon returns the store as the engine sees it: a holon.Store whose
// transactions are this store's. Package kv's own callers (backups, the
// consistency checks) keep the richer *Store and *Tx.
func (s *Store) Holon() holon.Store { return engineStore{s} }

// Unwrap returns the *Store behind a holon.Store made by Holon, for the
// wiring that opened it (backups, metrics of the writer); nil for any
// other store.
func Unwrap(s holon.Store) *Store {
	if e, ok := s.(engineStore); ok {
		return e.s
	}
	return nil
}

type engineStore struct{ s *Store }

func (e engineStore) View(fn func(holon.Tx) error) error {
	return e.s.View(func(tx *Tx) error { return fn(tx) })
}

func (e engineStore) Update(ctx context.Context, fn func(holon.Tx) error) error {
	return e.s.Update(ctx, func(tx *Tx) error { return fn(tx) })
}

func (e engineStore) Apply(ctx context.Context, fn func(holon.Tx) error) (holon.Commit, error) {
	c, err := e.s.Apply(ctx, func(tx *Tx) error { return fn(tx) })
	if c == nil {
		return nil, err
	}
	return c, err
}

func (e engineStore) Stats() holon.StoreStats {
	st := e.s.Stats()
	return holon.StoreStats{SizeBytes: e.s.Size(), Commits: st.Commits, Updates: st.Updates, MaxBatch: st.MaxBatch, Replays: st.Replays}
}

func (e engineStore) BucketChanges(bucket string) uint64 { return e.s.BucketChanges(bucket) }

func (e engineStore) Close() error { return e.s.Close() }

// Writers is holon.SoleWriter: a bbolt file is written by the one process
// that holds its lock.
func (e engineStore) Writers() holon.WriterSet { return holon.SoleWriter }

// Expect counts a caller in flight for the writer's pacing (Store.Expect).
func (e engineStore) Expect() (done func()) { return e.s.Expect() }

// OpenStore opens (or creates) the store at path as a holon.Store: what
// the hosted product is given to open its store with.
func OpenStore(path string, opts holon.StoreOptions) (holon.Store, error) {
	s, err := Open(path, OptionsOf(opts))
	if err != nil {
		return nil, err
	}
	return s.Holon(), nil
}

// OptionsOf is the Options of a store opened as holon.StoreOptions say.
func OptionsOf(o holon.StoreOptions) Options {
	return Options{NoSync: o.NoSync, Now: o.Now, OnCommit: o.OnCommit, OnFailure: o.OnFailure}
}

var _ holon.OpenStore = OpenStore
