package kv_test

import (
	"context"
	"path/filepath"
	"testing"

	"holon.dev/holon"

	"holon.dev/holon/bench/drill/lossyfs/lossyfstest"
	"holon.dev/holon/kv"
)

// Ensure that what a store committed survives a power cut right after,
// in a store created moments before in a directory made for it: the new
// file's name and the new directories' names are made durable when the
// store is created, not only its pages.
func TestOpen_CommitSurvivesPowerCut(t *testing.T) {
	f := lossyfstest.Mount(t)
	path := filepath.Join(f.Dir(), "data", "holon.db")
	s, err := kv.Open(path, kv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Update(context.Background(), func(tx *kv.Tx) error {
		return tx.Put(holon.BucketFiles, "drill", map[string]string{"committed": "yes"})
	}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Cut(nil); err != nil {
		t.Fatal(err)
	}
	r, err := kv.OpenReadOnly(path)
	if err != nil {
		t.Fatalf("after a power cut the store committed to is gone: %v", err)
	}
	defer r.Close()
	var got map[string]string
	if err := r.View(func(tx *kv.Tx) error { return tx.Get(holon.BucketFiles, "drill", &got) }); err != nil || got["committed"] != "yes" {
		t.Fatalf("after a power cut the commit is lost: %v %v", got, err)
	}
}
