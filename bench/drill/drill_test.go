package drill_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"holon.dev/holon/bench/drill"
)

var (
	buildOnce sync.Once
	holonBin  string
	buildErr  error
	buildOut  []byte
)

// holon builds the real binary once (go build ./cmd/holon) into a
// temporary directory shared by the drills of this test binary.
func holon(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "holon-drill-bin-")
		if err != nil {
			buildErr = err
			return
		}
		holonBin = filepath.Join(dir, "holon")
		cmd := exec.Command("go", "build", "-o", holonBin, "holon.dev/holon/cmd/holon")
		buildOut, buildErr = cmd.CombinedOutput()
	})
	if buildErr != nil {
		t.Fatalf("go build ./cmd/holon: %v\n%s", buildErr, buildOut)
	}
	return holonBin
}

// runDrill runs one drill's short form (as `holon drill <name>` does) and
// fails the test, with the drill's report, when an invariant broke.
func runDrill(t *testing.T, name string) {
	if testing.Short() {
		t.Skip("drills drive the real binary for seconds each: not in -short")
	}
	bin := holon(t)
	var out bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	err := drill.Run(ctx, name, drill.Options{Holon: bin, Out: &out, Strict: os.Getenv("HOLON_TEST_STRICT") == "1"})
	t.Logf("holon drill %s:\n%s", name, out.String())
	if err != nil {
		t.Fatalf("holon drill %s: %v", name, err)
	}
}

// Ensure that the gateway SIGKILLed 20 times under load loses, doubles and
// overspends nothing, and never runs an Idempotency-Key twice.
func TestDrill_Crash(t *testing.T) { runDrill(t, "crash") }

// Ensure that a store write that fails (commit error, short write, fsync
// error, full disk) stops the gateway with no false 200, and that the next
// start recovers with nothing lost or doubled.
func TestDrill_Faults(t *testing.T) { runDrill(t, "faults") }

// Ensure that thousands of concurrent calls at one budget and one balance
// never overspend either, as a watcher sees them and as the store does.
func TestDrill_Overspend(t *testing.T) { runDrill(t, "overspend") }

// Ensure that hostile requests (broken, nested, huge, ambiguous, slow,
// forged, aimed at other accounts) are each answered with their code,
// nothing stored or billed, a normal client unaffected.
func TestDrill_Hostile(t *testing.T) { runDrill(t, "hostile") }

// Ensure that remote agents that hang, close, flood, answer garbage, lie
// about units or redirect each fail cleanly and unbilled, within their
// timeout, while calls to other agents go on.
func TestDrill_Agents(t *testing.T) { runDrill(t, "agents") }
