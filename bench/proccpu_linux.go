package bench

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// clockTicks is the unit of /proc's CPU times (USER_HZ, 100 on Linux).
const clockTicks = 100

// treeCPU is the CPU time (user and system) a process and its children
// have used so far, those reaped included: a PostgreSQL server's
// postmaster and its backends. ok is false where /proc does not say.
func treeCPU(pid int) (time.Duration, bool) {
	stats, err := filepath.Glob("/proc/[0-9]*/stat")
	if err != nil {
		return 0, false
	}
	var ticks int64
	found := false
	for _, p := range stats {
		b, err := os.ReadFile(p)
		if err != nil {
			continue // a process that ended meanwhile
		}
		// The command, in parentheses, may hold spaces: the fields after it.
		i := strings.LastIndexByte(string(b), ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(b[i+1:]))
		if len(f) < 15 {
			continue
		}
		self, _ := strconv.Atoi(filepath.Base(filepath.Dir(p)))
		ppid, _ := strconv.Atoi(f[1])
		if self != pid && ppid != pid {
			continue
		}
		// utime, stime (fields 14, 15: f[11], f[12]); the postmaster's
		// cutime and cstime (16, 17) hold its reaped backends'.
		last := 12
		if self == pid {
			found = true
			last = 14
		}
		for _, v := range f[11 : last+1] {
			n, _ := strconv.ParseInt(v, 10, 64)
			ticks += n
		}
	}
	return time.Duration(ticks) * time.Second / clockTicks, found
}

// machineCPU is the machine's CPU time so far, every CPU and process:
// busy (user, system, interrupts, steal) and in all (idle and waiting for
// the disk too), from /proc/stat. ok is false where it does not say.
func machineCPU() (busy, all time.Duration, ok bool) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0, false
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return 0, 0, false
	}
	var total, idle int64
	for i, v := range f[1:9] { // user nice system idle iowait irq softirq steal
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return 0, 0, false
		}
		total += n
		if i == 3 || i == 4 {
			idle += n
		}
	}
	tick := time.Second / clockTicks
	return time.Duration(total-idle) * tick, time.Duration(total) * tick, true
}
