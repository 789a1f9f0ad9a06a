//go:build !linux

package drill

import (
	"errors"
	"os/exec"
)

// startCmd starts cmd; a file size limit needs Linux's prlimit.
func (g *gatewayProc) startCmd(cmd *exec.Cmd) error {
	if g.limitFile != 0 {
		return errors.New("a file size limit on the gateway needs Linux (prlimit)")
	}
	return cmd.Start()
}
