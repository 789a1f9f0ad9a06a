package kv

import (
	"os"
	"syscall"
)

// datasync flushes f's data (and the size, when it changed) to the disk.
func datasync(f *os.File) error {
	for {
		err := syscall.Fdatasync(int(f.Fd()))
		if err != syscall.EINTR {
			return err
		}
	}
}

// freeBytes is the space left to unprivileged writers on dir's filesystem
// (ok false when it cannot be told).
func freeBytes(dir string) (n int64, ok bool) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, false
	}
	return int64(st.Bavail) * int64(st.Bsize), true
}
