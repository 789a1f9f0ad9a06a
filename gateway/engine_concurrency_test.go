package gateway_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"

	"holon.dev/holon"
	"holon.dev/holon/gateway"
)

// Ensure that concurrent calls cannot together overrun a budget: of 200
// calls at 0.10 against 3.35, exactly 33 succeed and the rest are denied
// over_budget; while they run, spent + reserved never exceeds the total;
// every call has a receipt.
func TestEngine_Call_ConcurrentBudget(t *testing.T) {
	const calls = 200
	te := newEngine(t, []string{agentEcho}, testHandlers(), mandateWith("tight", `budget: {total: "3.35"}`))
	total := eur("3.35")

	stop := make(chan struct{})
	var samples atomic.Int64
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			st, err := te.eng.Mandate("alice/tight")
			if err != nil {
				t.Errorf("Mandate: %v", err)
				return
			}
			if st.Spent+st.Reserved > total || st.Remaining < 0 {
				t.Errorf("spent %s + reserved %s is above the total %s", st.Spent, st.Reserved, total)
			}
			samples.Add(1)
			select {
			case <-stop:
				return
			default:
			}
		}
	}()

	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		statuses = map[string]int{}
		ids      = map[string]bool{}
	)
	for range calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := te.eng.Call(context.Background(), gateway.CallInput{Mandate: "alice/tight", Agent: "acme/echo"})
			if err != nil {
				t.Errorf("Call: %v", err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			statuses[res.Receipt.Status+"/"+errCode(res.Receipt)]++
			ids[res.Receipt.ID] = true
		}()
	}
	wg.Wait()
	close(stop)
	<-sampled

	want := map[string]int{holon.StatusSucceeded + "/": 33, holon.StatusDenied + "/" + holon.CodeOverBudget: calls - 33}
	if len(statuses) != len(want) || statuses[holon.StatusSucceeded+"/"] != 33 {
		t.Errorf("outcomes %v, want %v", statuses, want)
	}
	if len(ids) != calls {
		t.Errorf("%d distinct receipts for %d calls", len(ids), calls)
	}
	page, err := te.eng.Receipts("alice/tight", "", 2*calls)
	if err != nil || len(page.Receipts) != calls {
		t.Errorf("the mandate lists %d receipts (%v), want %d", len(page.Receipts), err, calls)
	}
	if st := te.mandate(t, "alice/tight"); st.Spent != eur("3.30") || st.Reserved != 0 {
		t.Errorf("spent %s reserved %s, want 3.30 and 0", st.Spent, st.Reserved)
	}
	if samples.Load() < 2 {
		t.Errorf("the budget was sampled %d times while the calls ran", samples.Load())
	}
	if te.ran("echo") != 33 {
		t.Errorf("the agent ran %d times, want 33", te.ran("echo"))
	}
}
