// Package lossyfstest mounts a lossy filesystem for a test: a temporary
// backing directory, mounted until the test ends. Where it cannot be
// mounted (no /dev/fuse, not root) the test is skipped with a message, or
// fails under HOLON_TEST_STRICT=1.
package lossyfstest

import (
	"os"
	"path/filepath"
	"testing"

	"holon.dev/holon/bench/drill/lossyfs"
)

// Mount mounts a lossy filesystem over a fresh temporary directory and
// unmounts it when the test ends.
func Mount(t testing.TB) *lossyfs.FS {
	t.Helper()
	if err := lossyfs.Available(); err != nil {
		if os.Getenv("HOLON_TEST_STRICT") == "1" {
			t.Fatalf("a lossy FUSE filesystem cannot be mounted here (%v); HOLON_TEST_STRICT=1 makes that a failure", err)
		}
		t.Skipf("a lossy FUSE filesystem cannot be mounted here: %v (run as root on a machine with /dev/fuse)", err)
	}
	dir := t.TempDir()
	f, err := lossyfs.Mount(filepath.Join(dir, "disk"), filepath.Join(dir, "mnt"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := f.Close(); err != nil {
			t.Errorf("unmount the lossy filesystem: %v", err)
		}
	})
	return f
}
