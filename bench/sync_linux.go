package bench

import (
	"os"
	"syscall"
)

// datasync is fdatasync(2), what bbolt calls to make a commit durable on
// Linux.
func datasync(f *os.File) error { return syscall.Fdatasync(int(f.Fd())) }
