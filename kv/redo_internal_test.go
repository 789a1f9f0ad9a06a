package kv

import (
	"errors"
	"path/filepath"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Ensure that the log's record names a bucket the transaction did not ask
// for through Tx.bkt (found among all of its buckets), as well as one it
// did.
func TestRedo_NamesEveryBucket(t *testing.T) {
	s, err := Open(filepath.Join(t.TempDir(), "holon.db"), Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	rollback := errors.New("rollback")
	err = s.db.Update(func(btx *bolt.Tx) error {
		tx := &Tx{btx: btx, now: time.Now, writable: true, cache: newWriteCache(newHotCache()), redo: newRedoBuf()}
		if err := tx.put(btx.Bucket(bucketCounters), []byte("k1"), []byte("v1")); err != nil {
			return err
		}
		if err := tx.put(tx.bkt(bucketMeta), []byte("k2"), []byte("v2")); err != nil {
			return err
		}
		r := opReader{b: tx.redo.ops()}
		for _, want := range []string{string(bucketCounters), string(bucketMeta)} {
			if op := r.b[0]; op != opPut {
				t.Fatalf("operation %d, want a put", op)
			}
			r.b = r.b[1:]
			name, _, _ := r.bytes(), r.bytes(), r.bytes()
			if r.err != nil || string(name) != want {
				t.Errorf("the record names bucket %q (%v), want %q", name, r.err, want)
			}
		}
		return rollback
	})
	if err != rollback {
		t.Fatal(err)
	}
}
