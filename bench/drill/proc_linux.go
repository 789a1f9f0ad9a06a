package drill

import (
	"fmt"
	"os/exec"
	"syscall"
	"unsafe"
)

// startCmd starts cmd; with limitFile set, it then caps the size of any
// file the child writes (RLIMIT_FSIZE, by prlimit on the child alone): a
// write that would grow a file past it fails with EFBIG, as on a full disk
// (Go ignores SIGXFSZ, so the process sees the error).
func (g *gatewayProc) startCmd(cmd *exec.Cmd) error {
	if err := cmd.Start(); err != nil {
		return err
	}
	if g.limitFile == 0 {
		return nil
	}
	lim := syscall.Rlimit{Cur: g.limitFile, Max: g.limitFile}
	_, _, errno := syscall.RawSyscall6(syscall.SYS_PRLIMIT64, uintptr(cmd.Process.Pid), syscall.RLIMIT_FSIZE,
		uintptr(unsafe.Pointer(&lim)), 0, 0, 0)
	if errno != 0 {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return fmt.Errorf("prlimit RLIMIT_FSIZE: %w", errno)
	}
	return nil
}
