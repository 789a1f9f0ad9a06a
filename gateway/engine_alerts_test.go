package gateway_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"holon.dev/holon"
	"holon.dev/holon/gateway"
)

// alerting renews 1.00 a day (UTC) within a lifetime total of 3.00, and
// tells its issuer at 50% and 80% of each.
var alerting = mandateWith("alerting", `budget: {total: "3.00", window: day, per_window: "1.00", alerts: ["50%", "80%"]}`)

// alertIDs lists alert ids, oldest first.
func alertIDs(as []*holon.Alert) []string {
	var out []string
	for _, a := range as {
		out = append(out, a.ID+"@"+a.Receipt)
	}
	slices.Sort(out)
	return out
}

// Ensure that each threshold is reached once per window, the windows
// renewing day after day, and once for the lifetime total: the call whose
// charge reaches it carries the alert, the store holds it once, a refund
// that brings spent below it and a call that reaches it again record
// nothing more, and a call that reaches nothing carries nothing.
func TestEngine_Alerts_OncePerThresholdPerWindow(t *testing.T) {
	clock := newTestClock() // 2026-09-01 09:00 UTC
	te := openEngine(t, engineConfig{manifests: []string{agentEcho}, handlers: testHandlers(), clock: clock, mandates: []string{alerting}})
	told := map[string]string{} // alert id → the receipt whose answer carried it
	n := 0
	call := func() *gateway.CallResult {
		res := te.call(t, gateway.CallInput{Mandate: "alice/alerting", Agent: "acme/echo"})
		if res.Receipt.Status != holon.StatusSucceeded {
			t.Fatalf("call %d: %s %s", n, res.Receipt.Status, errCode(res.Receipt))
		}
		n++
		for _, a := range res.Alerts {
			if prev, ok := told[a.ID]; ok {
				t.Errorf("alert %s told twice: by %s and %s", a.ID, prev, res.Receipt.ID)
			}
			told[a.ID] = res.Receipt.ID
			if a.Receipt != res.Receipt.ID || a.Account != "alice" || a.Currency != "EUR" {
				t.Errorf("alert %+v carried by %s", a, res.Receipt.ID)
			}
		}
		return res
	}
	for day := range 3 {
		for range 10 { // 10 × 0.10: each window's 1.00
			call()
		}
		if day < 2 {
			clock.Advance(24 * time.Hour)
		}
	}
	// Receipts r1…r30: each window's 5th and 8th call reach 0.50 and
	// 0.80; the 15th and 24th calls reach 1.50 and 2.40 of the 3.00.
	want := []string{}
	for d, date := range []string{"2026-09-01", "2026-09-02", "2026-09-03"} {
		want = append(want, fmt.Sprintf("alice/alerting/day:%s/50%%@r%d", date, d*10+5), fmt.Sprintf("alice/alerting/day:%s/80%%@r%d", date, d*10+8))
	}
	want = append(want, "alice/alerting/total/50%@r15", "alice/alerting/total/80%@r24")
	slices.Sort(want)
	stored, err := te.eng.Alerts("alice/alerting")
	if err != nil {
		t.Fatal(err)
	}
	if got := alertIDs(stored); !slices.Equal(got, want) {
		t.Errorf("stored alerts:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	var carried []string
	for id, r := range told {
		carried = append(carried, id+"@"+r)
	}
	slices.Sort(carried)
	if !slices.Equal(carried, want) {
		t.Errorf("alerts carried by the calls' answers:\n%s\nwant\n%s", strings.Join(carried, "\n"), strings.Join(want, "\n"))
	}
	for _, a := range stored {
		if a.Budget == holon.AlertTotal && (a.Window != "" || a.Limit != eur("3.00")) ||
			a.Budget == holon.AlertWindow && (a.Window == "" || a.Limit != eur("1.00")) {
			t.Errorf("alert %+v", a)
		}
	}

	// Three refunds bring today's spent to 0.70, below 80%; the 28th call
	// is refunded too, so the window's budget and the total reach 80%
	// again with the next calls: nothing more is recorded.
	for _, r := range []string{"r30", "r29", "r28"} {
		if _, err := te.eng.Refund(context.Background(), gateway.RefundInput{Receipt: r}); err != nil {
			t.Fatal(err)
		}
	}
	for range 3 {
		if res := call(); len(res.Alerts) != 0 {
			t.Errorf("%s reached a threshold again: %+v", res.Receipt.ID, res.Alerts[0])
		}
	}
	if again, _ := te.eng.Alerts("alice/alerting"); len(again) != len(want) {
		t.Errorf("%d alerts after the refunds, want %d", len(again), len(want))
	}
}

// Ensure that calls running at once, whose settlements reach the same
// threshold, record one alert: 40 calls (27 of 0.10, 13 of 0.15 with a
// passthrough child) against a 5.00 total with an alert at 50%, all
// settling at once.
func TestEngine_Alerts_ConcurrentCallsOneAlert(t *testing.T) {
	g := newGate()
	te := openEngine(t, engineConfig{manifests: gatedAgents, handlers: g.handlers(),
		mandates: []string{mandateWith("together", `budget: {total: "5.00", alerts: ["50%"]}`)}})
	const calls = 40
	var wg sync.WaitGroup
	var mu sync.Mutex
	var carried []string
	agents := []string{"acme/gate", "acme/gate-durable", "acme/gate-orch"}
	for i := range calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := te.eng.Call(context.Background(), gateway.CallInput{Mandate: "alice/together", Agent: agents[i%len(agents)]})
			if err != nil || res.Receipt.Status != holon.StatusSucceeded {
				t.Errorf("call: %v %+v", err, res)
				return
			}
			mu.Lock()
			for _, a := range res.Alerts {
				carried = append(carried, a.ID)
			}
			mu.Unlock()
		}()
	}
	for range calls + calls/3 { // and the 13 children of acme/gate-orch
		<-g.started
	}
	close(g.open) // every call settles at once
	wg.Wait()
	stored, err := te.eng.Alerts("alice/together")
	if err != nil {
		t.Fatal(err)
	}
	if len(stored) != 1 || stored[0].ID != "alice/together/total/50%" || len(carried) != 1 || carried[0] != stored[0].ID {
		t.Fatalf("stored %v, carried %v: want one alert at 50%%", alertIDs(stored), carried)
	}
	if st := te.mandate(t, "alice/together"); stored[0].Spent < eur("2.50") || stored[0].Spent > eur("2.65") || st.Spent != eur("4.65") {
		t.Errorf("alert at spent %s (mandate spent %s)", stored[0].Spent, st.Spent)
	}
}

// Ensure that a threshold reached by a delegated call's charge (spent in
// its parent's mandate, passthrough) is recorded once, with the child's
// receipt, and told in the root call's answer.
func TestEngine_Alerts_ReachedByAChild(t *testing.T) {
	te := newEngine(t, allAgents, testHandlers(), mandateWith("parent", `budget: {total: "2.00", alerts: ["5%", "10%"]}`))
	res, _ := orchestrate(t, te, gateway.CallInput{Mandate: "alice/parent", Agent: "acme/orch"},
		scriptCall{Agent: "acme/echo", Input: []byte(`{"x":1}`)})
	// The child (0.10) settles first: 5% of 2.00; the parent's own 0.10
	// then makes 0.20: 10%.
	var got []string
	for _, a := range res.Alerts {
		got = append(got, a.ID+"@"+a.Receipt)
	}
	child := res.Receipt.Children[0]
	want := []string{"alice/parent/total/5%@" + child, "alice/parent/total/10%@" + res.Receipt.ID}
	if !slices.Equal(got, want) {
		t.Errorf("the root call's alerts %v, want %v", got, want)
	}
	if stored, _ := te.eng.Alerts("alice/parent"); len(stored) != 2 {
		t.Errorf("stored %v", alertIDs(stored))
	}
}
