package drill

import (
	"bytes"
	"strings"
	"testing"

	"holon.dev/holon"
)

// Ensure that the crash drill's check of the calls in flight at a kill
// breaks, naming its invariant, when such a call was billed or still
// holds, and holds when the restart closed it as it must.
func TestDrill_CheckRestarted_Breaks(t *testing.T) {
	restarted := "gateway_restarted"
	for _, tc := range []struct {
		name   string
		r      *holon.Receipt
		holds  []*holon.Hold
		broken bool
	}{
		{"closed unbilled", &holon.Receipt{ID: "r1", Status: "failed", Error: &restarted}, nil, false},
		{"billed", &holon.Receipt{ID: "r1", Status: "succeeded", Billed: true}, nil, true},
		{"still holding", &holon.Receipt{ID: "r1", Status: "failed", Error: &restarted}, []*holon.Hold{{Receipt: "r1"}}, true},
		{"missing", nil, nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			d := &drill{name: "test", o: Options{Out: &out}, counts: map[string]int64{}}
			v := &storeView{receipts: map[string]*holon.Receipt{}, settles: map[string]int{}, holds: tc.holds}
			if tc.r != nil {
				v.receipts["r1"] = tc.r
			}
			d.checkRestarted(v, []string{"r1"}, 1)
			if got := len(d.broken) > 0; got != tc.broken {
				t.Fatalf("broken %v, want %v: %s", got, tc.broken, out.String())
			}
			if tc.broken && !strings.Contains(out.String(), "BROKEN") {
				t.Errorf("the break is not printed: %q", out.String())
			}
		})
	}
}

// Ensure that the drill's report marks every invariant that broke as
// BROKEN, also those whose first break came after the few messages it
// keeps (a long run broke the bystander's p99 after 250 other breaks, and
// its line said held).
func TestDrill_Report_EveryBrokenInvariant(t *testing.T) {
	var out bytes.Buffer
	d := &drill{name: "test", o: Options{Out: &out}, counts: map[string]int64{}}
	for i := range 30 {
		d.check("first", false, "break %d", i)
	}
	d.check("late", false, "after the others")
	d.check("kept", true, "")
	d.report()
	for _, tc := range []struct{ invariant, verdict string }{{"first", "BROKEN"}, {"late", "BROKEN"}, {"kept", "held"}} {
		found := false
		for _, line := range strings.Split(out.String(), "\n") {
			if f := strings.Fields(line); len(f) >= 3 && f[0] == tc.invariant {
				found = true
				if f[len(f)-1] != tc.verdict {
					t.Errorf("%s: %q, want %s", tc.invariant, line, tc.verdict)
				}
			}
		}
		if !found {
			t.Errorf("no line for %s in the report:\n%s", tc.invariant, out.String())
		}
	}
}
