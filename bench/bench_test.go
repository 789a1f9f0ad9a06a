package bench_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"holon.dev/holon/bench"
)

// Ensure that the calls row runs end to end in-process: calls over loopback
// HTTP settle, the money check passes, and the row is printed with its
// target and a verdict.
func TestRun_Calls(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a gateway under load")
	}
	var out bytes.Buffer
	err := bench.Run(context.Background(), bench.Options{
		Quick: true, Rows: []string{"calls"}, Duration: 300 * time.Millisecond, Clients: 8,
		Dir: t.TempDir(), Out: &out,
	})
	if err != nil {
		t.Fatalf("Run: %v\n%s", err, out.String())
	}
	for _, want := range []string{"[1] durable settled calls/s", "measured:", "target:", "verdict:", "money checked", "holon verify's 13 checks passed", "summary"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the report lacks %q:\n%s", want, out.String())
		}
	}
}

// Ensure that the yardstick, hosted and backup rows run end to end, print
// their ratios against row 1 and check their money: the yardstick's rows
// and balances, the hosted gateway's journal, the live backup restored.
func TestRun_RatiosAndBackup(t *testing.T) {
	if testing.Short() {
		t.Skip("runs gateways under load")
	}
	var out bytes.Buffer
	err := bench.Run(context.Background(), bench.Options{
		Quick: true, Rows: []string{"calls", "limit", "hosted", "backup"}, Duration: 300 * time.Millisecond, Clients: 8,
		Receipts: 2000, Dir: t.TempDir(), Out: &out,
	})
	if err != nil {
		t.Fatalf("Run: %v\n%s", err, out.String())
	}
	for _, want := range []string{"[1a] row 1 against the smallest durable server", " of it", "balances sum to zero",
		"[1b] the same through a hosted gateway", "× row 1's", "[8] settled calls during a live backup", "× (p50",
		"[9] holon restore of that backup", "peak heap", "the restored journal checked"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the report lacks %q:\n%s", want, out.String())
		}
	}
	if n := strings.Count(out.String(), "money checked"); n != 4 {
		t.Errorf("%d money checks in the report, want 4 (rows 1, 1a, 1b, 8):\n%s", n, out.String())
	}
}

// Ensure that an unknown row is refused before anything runs.
func TestRun_UnknownRow(t *testing.T) {
	var out bytes.Buffer
	err := bench.Run(context.Background(), bench.Options{Rows: []string{"nope"}, Out: &out})
	if err == nil || !strings.Contains(err.Error(), `unknown row "nope"`) {
		t.Errorf("Run = %v, want an unknown row error", err)
	}
}
