//go:build !linux

package kv

import "os"

// datasync flushes f to the disk.
func datasync(f *os.File) error { return f.Sync() }

// freeBytes cannot tell the space left here.
func freeBytes(string) (int64, bool) { return 0, false }
