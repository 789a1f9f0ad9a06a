package drill_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
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

// TestMain removes the binary the drills built, once they ran.
func TestMain(m *testing.M) {
	code := m.Run()
	if holonBin != "" {
		os.RemoveAll(filepath.Dir(holonBin))
	}
	os.Exit(code)
}

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

// runBroken runs a drill's short form against a gateway given env, and
// wants it to fail naming what matches want (a regular expression).
func runBroken(t *testing.T, name string, o drill.Options, want string, env ...string) {
	if testing.Short() {
		t.Skip("drills drive the real binary for seconds each: not in -short")
	}
	var out bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	o.Holon, o.Out, o.GatewayEnv, o.Dir = holon(t), &out, env, t.TempDir()
	o.Strict = os.Getenv("HOLON_TEST_STRICT") == "1"
	err := drill.Run(ctx, name, o)
	t.Logf("holon drill %s against %v:\n%s", name, env, out.String())
	if strings.Contains(out.String(), "skipped") && !o.Strict {
		t.Skip("the drill was skipped here (see its note)")
	}
	if err == nil || !errors.Is(err, drill.ErrBroken) || !regexp.MustCompile(want).MatchString(err.Error()) {
		t.Fatalf("holon drill %s against a gateway with %v: %v, want it broken naming %q", name, env, err, want)
	}
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
	if strings.Contains(out.String(), "drill "+name+": skipped") {
		t.Skip("the drill could not run here (its note says why and what to install); HOLON_TEST_STRICT=1 makes it fail")
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

// Ensure that the gateway's data directory on a filesystem that loses
// whatever was not fsynced, cut at random moments under calls, uploads, a
// live backup and a restore, loses nothing the gateway answered for.
func TestDrill_PowerLoss(t *testing.T) { runDrill(t, "powerloss") }

// Ensure that three gateways on one PostgreSQL, SIGKILLed at random and
// restarted, with PostgreSQL itself crashed twice under load, lose,
// double and overspend nothing, and never run an Idempotency-Key twice
// across gateways.
func TestDrill_Cluster(t *testing.T) { runDrill(t, "cluster") }

// Ensure that the power-loss drill catches a store that never fsyncs (the
// planted bug kv.FaultEnv=nosync:0), which the crash drill cannot see.
func TestDrill_PowerLoss_CatchesNoSync(t *testing.T) {
	runBroken(t, "powerloss", drill.Options{Kills: 3}, "every call answered 200 has its billed receipt|keeps its record across a cut|keeps its bytes", "HOLON_TEST_STORE_FAULT=nosync:0")
}

// refuseAll makes the gateway refuse every call of the drills: their
// agents are excluded from its catalogue (404 not_found).
const refuseAll = "HOLON_EXCLUDE=drill/echo,drill/slow,drill/pricey,drill/orch,drill/base,maker/fork"

// Ensure that a gateway refusing every call fails the crash drill, naming
// its floor, instead of holding every invariant over nothing.
func TestDrill_Crash_RefusingGatewayFails(t *testing.T) {
	runBroken(t, "crash", drill.Options{Kills: 3}, "floor of real work", refuseAll)
}
