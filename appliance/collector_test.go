package appliance

import (
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
)

// gcSettings reads the collector's GOGC and memory limit.
func gcSettings() (int, int64) {
	p := debug.SetGCPercent(100)
	debug.SetGCPercent(p)
	return p, debug.SetMemoryLimit(-1)
}

// Ensure that TuneCollector sets holon serve's GOGC and a memory limit of
// half the machine's memory, leaves each alone when the operator set it in
// the environment, and that its undo puts back what was there.
func TestTuneCollector(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(math.MaxInt64))

	undo := TuneCollector(func(string) string { return "" })
	percent, limit := gcSettings()
	if percent != gcPercent {
		t.Errorf("GOGC %d, want %d", percent, gcPercent)
	}
	if want := memoryLimit(); want <= 0 || limit != want {
		t.Errorf("memory limit %d, want half the memory the process may use (%d)", limit, want)
	}
	undo()
	if percent, limit := gcSettings(); percent != 100 || limit != math.MaxInt64 {
		t.Errorf("after undo: GOGC %d, limit %d; want 100 and none", percent, limit)
	}

	set := map[string]string{"GOGC": "150", "GOMEMLIMIT": "1GiB"}
	debug.SetGCPercent(150)
	undo = TuneCollector(func(k string) string { return set[k] })
	if percent, limit := gcSettings(); percent != 150 || limit != math.MaxInt64 {
		t.Errorf("with GOGC and GOMEMLIMIT set: GOGC %d, limit %d; want both left alone", percent, limit)
	}
	undo()
}

func TestMemoryLimit_Sources(t *testing.T) {
	meminfo := "MemTotal:       24683792 kB\nMemFree:         1000 kB\n"
	if got := parseMemTotal(strings.NewReader(meminfo)); got != 24683792<<10 {
		t.Errorf("MemTotal %d", got)
	}
	for _, bad := range []string{"", "MemFree: 10 kB\n", "MemTotal: lots kB\n"} {
		if got := parseMemTotal(strings.NewReader(bad)); got != 0 {
			t.Errorf("MemTotal of %q: %d, want 0", bad, got)
		}
	}
	dir := t.TempDir()
	for content, want := range map[string]int64{"536870912\n": 536870912, "max\n": 0, "": 0} {
		p := filepath.Join(dir, "memory.max")
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		if got := readCgroupMax(p); got != want {
			t.Errorf("memory.max %q: %d, want %d", content, got, want)
		}
	}
	if got := readCgroupMax(filepath.Join(dir, "none")); got != 0 {
		t.Errorf("no memory.max: %d", got)
	}
}
