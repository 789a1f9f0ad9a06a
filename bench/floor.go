package bench

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// floor is the physical floor of the store's writes on the machine the
// bench runs on: the latency of fdatasync after a small write, alone and
// two in a row, on the filesystem of the work directory (where every row
// keeps its store). bbolt syncs each commit twice (its pages, then its
// meta page); a call to a remote agent waits for two commits in a row.
type floor struct {
	p50, p99       time.Duration // one write and fdatasync
	twoP50, twoP99 time.Duration // two of them in a row
	// idleP50 and idleP99 are one write and fdatasync after the process
	// slept idleGap, as a lone caller's commits come: on a virtual
	// machine the disk and the CPUs answer an I/O that follows idleness
	// more slowly than one in a busy stream.
	idleP50, idleP99 time.Duration
	samples          int
}

// idleGap is the idle time before each of the floor's idle samples: about
// what separates a remote call's two commits (its MCP round trip).
const idleGap = 300 * time.Microsecond

// measureFloor writes 4 KB and syncs it n times over, then n times two in
// a row, in a file of dir, removed after.
func measureFloor(dir string, n int) (floor, error) {
	var fl floor
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fl, err
	}
	f, err := os.CreateTemp(dir, "fsync-floor-")
	if err != nil {
		return fl, err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	buf := make([]byte, 4096)
	write := func(i int) error {
		buf[0] = byte(i)
		if _, err := f.WriteAt(buf, int64(i%64)*4096); err != nil {
			return err
		}
		return datasync(f)
	}
	// The file's blocks allocated first: bbolt's commits overwrite pages
	// of a file that already has them.
	for i := range 64 {
		if err := write(i); err != nil {
			return fl, fmt.Errorf("fdatasync in %s: %w", filepath.Dir(f.Name()), err)
		}
	}
	var one, two, idle latencies
	for i := range n {
		t := time.Now()
		if err := write(i); err != nil {
			return fl, err
		}
		one = append(one, time.Since(t))
		t = time.Now()
		if err := write(i + 1); err != nil {
			return fl, err
		}
		if err := write(i + 2); err != nil {
			return fl, err
		}
		two = append(two, time.Since(t))
	}
	for i := range n {
		time.Sleep(idleGap)
		t := time.Now()
		if err := write(i); err != nil {
			return fl, err
		}
		idle = append(idle, time.Since(t))
	}
	slices.Sort(one)
	slices.Sort(two)
	slices.Sort(idle)
	return floor{p50: one.P(0.5), p99: one.P(0.99), twoP50: two.P(0.5), twoP99: two.P(0.99),
		idleP50: idle.P(0.5), idleP99: idle.P(0.99), samples: n}, nil
}

// result is the floor's row.
func (fl floor) result(dir string) *Result {
	return &Result{
		Name:   "[0] the physical floor: fdatasync of a 4 KB write on the store's filesystem (" + dir + ")",
		Target: "reported: what the disk allows every durable row below",
		Measured: fmt.Sprintf("one: p50 %s, p99 %s; two in a row (a remote call's reservation, then its settlement): p50 %s, p99 %s; one after %s idle: p50 %s, p99 %s (%d samples each)",
			ms(fl.p50), ms(fl.p99), ms(fl.twoP50), ms(fl.twoP99), ms(idleGap), ms(fl.idleP50), ms(fl.idleP99), fl.samples),
		Verdict: "ok",
		Notes:   []string{fmt.Sprintf("a commit syncs once, its record in the store's write-ahead log: one commit's floor is about %s, a remote call's two commits %s (on a nearly full disk, where the store commits with bbolt's two syncs, twice that); a crowd of calls shares each commit", ms(fl.p50), ms(2*fl.p50))},
	}
}
