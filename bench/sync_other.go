//go:build !linux

package bench

import "os"

// datasync is the platform's file sync (fdatasync where there is one).
func datasync(f *os.File) error { return f.Sync() }
