package appliance

import (
	"bufio"
	"io"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
)

// gcPercent is the collector's GOGC for a process that serves calls (holon
// serve, and holon bench, which runs the same gateway in its process). A
// call allocates tens of KB (HTTP, JSON, the store's encodings: about 46 KB
// a settled call through the PostgreSQL store's driver) and keeps almost
// none of it, while the live heap is a few tens of MB: at Go's default of
// 100 the collector ran several times a second and took about a quarter of
// the gateway's CPU on the PostgreSQL store, its idle workers spinning on
// the cores PostgreSQL's own processes wanted. At 400 it runs a fifth as
// often for a heap up to five times the live one, which the memory limit
// below bounds.
const gcPercent = 400

// TuneCollector sets the collector for a process that serves calls: GOGC
// to gcPercent and a soft memory limit (memoryLimit), each unless the
// operator set it in the environment (GOGC, GOMEMLIMIT), which the Go
// runtime then applies as usual. It returns the function that puts the
// settings back as they were.
func TuneCollector(getenv func(string) string) (undo func()) {
	var undos []func()
	if getenv("GOGC") == "" {
		old := debug.SetGCPercent(gcPercent)
		undos = append(undos, func() { debug.SetGCPercent(old) })
	}
	if getenv("GOMEMLIMIT") == "" {
		if l := memoryLimit(); l > 0 {
			old := debug.SetMemoryLimit(l)
			undos = append(undos, func() { debug.SetMemoryLimit(old) })
		}
	}
	return func() {
		for _, u := range undos {
			u()
		}
	}
}

// memoryLimit is the soft limit of the Go heap: half the memory the
// process may use (its cgroup's memory.max when one is set, the machine's
// MemTotal otherwise), so that near it the collector works harder rather
// than the heap growing to gcPercent's goal. 0 when neither is known.
func memoryLimit() int64 {
	avail := readMemTotal("/proc/meminfo")
	if max := readCgroupMax("/sys/fs/cgroup/memory.max"); max > 0 && (avail == 0 || max < avail) {
		avail = max
	}
	return avail / 2
}

// readMemTotal is MemTotal of a meminfo file, in bytes (0 when unknown).
func readMemTotal(path string) int64 {
	f, err := os.Open(path)
	if err != nil {
		return 0
	}
	defer f.Close()
	return parseMemTotal(f)
}

func parseMemTotal(r io.Reader) int64 {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "MemTotal:")
		if !ok {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
		if err != nil || kb <= 0 {
			return 0
		}
		return kb << 10
	}
	return 0
}

// readCgroupMax is a cgroup v2 memory.max in bytes (0 when unset: "max",
// or no such file).
func readCgroupMax(path string) int64 {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil || n <= 0 {
		return 0
	}
	return n
}
