package bench

import (
	"os"
	"syscall"
)

// evict drops a file's pages from the page cache (after writing out any
// dirty ones), so that the next start reads it from the disk: a cold start,
// without touching any other file's cached pages.
func evict(path string) (bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return false, err
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		return false, err
	}
	const fadvDontNeed = 4 // POSIX_FADV_DONTNEED
	if _, _, errno := syscall.Syscall6(syscall.SYS_FADVISE64, f.Fd(), 0, 0, fadvDontNeed, 0, 0); errno != 0 {
		return false, errno
	}
	return true, nil
}
