//go:build !linux

package bench

import "time"

// treeCPU is unknown where there is no /proc.
func treeCPU(int) (time.Duration, bool) { return 0, false }

// machineCPU is unknown where there is no /proc.
func machineCPU() (busy, all time.Duration, ok bool) { return 0, 0, false }
