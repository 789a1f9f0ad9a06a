package kv_test

import (
	"testing"

	"holon.dev/holon"
	"holon.dev/holon/gateway/storetest"
	"holon.dev/holon/kv"
)

// Ensure that kv passes the shared suite of every holon.Store: the
// behaviours the engine relies on, tested against the interface.
func TestStore_Suite(t *testing.T) {
	storetest.Run(t, func(t *testing.T, path string) holon.Store {
		s, err := kv.OpenStore(path, holon.StoreOptions{})
		if err != nil {
			t.Fatalf("open %s: %v", path, err)
		}
		return s
	})
}

// Ensure that the suite is the one the issue asks for: at least 25
// behaviours.
func TestStore_Suite_Size(t *testing.T) {
	if n := len(storetest.Behaviours()); n < 25 {
		t.Errorf("the suite has %d behaviours, want at least 25", n)
	}
}
