package appliance_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"holon.dev/holon"
	"holon.dev/holon/appliance"
	"holon.dev/holon/gateway"
)

// slowMandate lets an account's keys call the test agents.
func slowMandate(a account) {
	a.createMandate("lab", map[string]any{"budget": map[string]any{"total": "5.00"},
		"allow": map[string]any{"agents": []string{"test-lab/*", "holon-labs/*"}}})
}

func slowCall(n int) map[string]any {
	return map[string]any{"mandate": "ann/lab", "agent": "test-lab/slow", "input": map[string]any{"n": n}}
}

// Ensure that a call re-sent with its Idempotency-Key is not run again:
// the answer is the original status and receipt with replayed: true and
// output null, nothing more is billed; the same request written with other
// white space or key order is the same request; and keys are per API key.
func TestIdempotency_Replay(t *testing.T) {
	ta := newHostedApp(t)
	ann := ta.signup("ann")
	c := ann.human.with("Idempotency-Key", "order-1")
	first := c.must(http.StatusOK, "POST", "/v0/calls", lookup("ann/sandbox"))
	if first["output"] == nil || first["replayed"] != nil {
		t.Fatalf("first call: %v", first)
	}
	id := first["receipt"].(map[string]any)["id"]
	for _, body := range []string{
		`{"mandate":"ann/sandbox","agent":"holon-labs/company-lookup","input":{"name":"Globex GmbH"}}`,
		`{ "input": { "name": "Globex GmbH" }, "agent": "holon-labs/company-lookup", "mandate": "ann/sandbox" }`,
	} {
		status, _, b := c.raw("POST", "/v0/calls", []byte(body))
		out := map[string]any{}
		if err := jsonUnmarshal(b, &out); err != nil || status != http.StatusOK || out["replayed"] != true || out["output"] != nil ||
			out["receipt"].(map[string]any)["id"] != id {
			t.Errorf("replay of %s: %d %s, want 200, replayed, output null, receipt %v", body, status, b, id)
		}
	}
	if n := ann.human.receiptCount("ann/sandbox"); n != 1 {
		t.Errorf("%d receipts, want 1", n)
	}
	if b := ann.balance(); b != "4.92" {
		t.Errorf("balance %s, want 4.92 (billed once)", b)
	}
	// The same Idempotency-Key under another API key is another key.
	other := ann.agent.with("Idempotency-Key", "order-1").must(http.StatusOK, "POST", "/v0/calls", lookup(""))
	if other["replayed"] != nil || other["receipt"].(map[string]any)["id"] == id {
		t.Errorf("the agent key's order-1 replayed the human key's: %v", other)
	}
	// A held call replays its 202 and its approval.
	ann.createMandate("strict", map[string]any{"budget": map[string]any{"total": "1.00"}, "approval": map[string]any{"above": "0"},
		"allow": map[string]any{"agents": []string{"holon-labs/*"}}})
	h := ann.human.with("Idempotency-Key", "held-1")
	held := h.must(http.StatusAccepted, "POST", "/v0/calls", lookup("ann/strict"))
	again := h.must(http.StatusAccepted, "POST", "/v0/calls", lookup("ann/strict"))
	if again["replayed"] != true || again["approval"].(map[string]any)["id"] != held["approval"].(map[string]any)["id"] {
		t.Errorf("replay of a held call: %v", again)
	}
}

// Ensure that the same Idempotency-Key with another request is refused
// with 422 idempotency_mismatch, and that a malformed key is refused.
func TestIdempotency_Mismatch(t *testing.T) {
	ta := newHostedApp(t)
	ann := ta.signup("ann")
	c := ann.human.with("Idempotency-Key", "k-1")
	c.must(http.StatusOK, "POST", "/v0/calls", lookup("ann/sandbox"))
	other := lookup("ann/sandbox")
	other["input"] = map[string]any{"name": "ACME Corp"}
	if status, out := c.do("POST", "/v0/calls", other); status != http.StatusUnprocessableEntity || errorCode(out) != "idempotency_mismatch" {
		t.Errorf("same key, other input: %d %v, want 422 idempotency_mismatch", status, out)
	}
	capped := lookup("ann/sandbox")
	capped["max_cost"] = "0.50"
	if status, out := c.do("POST", "/v0/calls", capped); status != http.StatusUnprocessableEntity {
		t.Errorf("same key, another max_cost: %d %v, want 422", status, out)
	}
	if status, out := ann.human.with("Idempotency-Key", "has space").do("POST", "/v0/calls", lookup("ann/sandbox")); status != http.StatusBadRequest || errorCode(out) != "invalid_idempotency_key" {
		t.Errorf("malformed key: %d %v, want 400 invalid_idempotency_key", status, out)
	}
	if n := ann.human.receiptCount("ann/sandbox"); n != 1 {
		t.Errorf("%d receipts, want 1", n)
	}
}

// Ensure that a key whose call is still running answers 409
// idempotency_in_flight, and the finished call replays afterwards.
func TestIdempotency_InFlight(t *testing.T) {
	ta := newHostedApp(t)
	ann := ta.signup("ann")
	slowMandate(ann)
	c := ann.human.with("Idempotency-Key", "slow-1")
	done := make(chan map[string]any)
	go func() {
		_, out := c.do("POST", "/v0/calls", slowCall(1))
		done <- out
	}()
	ta.waitStarted()
	if status, out := c.do("POST", "/v0/calls", slowCall(1)); status != http.StatusConflict || errorCode(out) != "idempotency_in_flight" {
		t.Errorf("while running: %d %v, want 409 idempotency_in_flight", status, out)
	}
	ta.letGo()
	first := <-done
	if str(first["output"]) != "map[n:1]" {
		t.Errorf("the call: %v", first)
	}
	again := c.must(http.StatusOK, "POST", "/v0/calls", slowCall(1))
	if again["replayed"] != true {
		t.Errorf("after it finished: %v, want a replay", again)
	}
}

// Ensure that 50 concurrent requests with one Idempotency-Key run the call
// exactly once: with a slow agent, one runs and 49 get 409; once it is
// done, 50 more all replay it; with a fast agent, whatever the
// interleaving, one runs and the rest replay or get 409.
func TestIdempotency_ConcurrentDuplicates(t *testing.T) {
	ta := newHostedApp(t)
	ann := ta.signup("ann")
	slowMandate(ann)
	burst := func(c client, body map[string]any) map[string]int {
		var mu sync.Mutex
		count := map[string]int{}
		var wg sync.WaitGroup
		for i := 0; i < 50; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				status, out := c.do("POST", "/v0/calls", body)
				key := fmt.Sprint(status)
				if out["replayed"] == true {
					key += " replayed"
				} else if code := errorCode(out); code != "" {
					key += " " + code
				}
				mu.Lock()
				count[key]++
				mu.Unlock()
			}()
		}
		wg.Wait()
		return count
	}

	slow := ann.human.with("Idempotency-Key", "dup-slow")
	results := make(chan map[string]int)
	go func() { results <- burst(slow, slowCall(7)) }()
	ta.waitStarted()
	// The other 49 are refused while the first runs; then it may finish.
	deadline := time.Now().Add(10 * time.Second)
	for ta.conflicts("/v0/calls") < 49 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	ta.letGo()
	if got := <-results; got["200"] != 1 || got["409 idempotency_in_flight"] != 49 {
		t.Errorf("50 duplicates of a slow call: %v, want 1 × 200 and 49 × 409", got)
	}
	if got := burst(slow, slowCall(7)); got["200 replayed"] != 50 {
		t.Errorf("50 duplicates after it finished: %v, want 50 replays", got)
	}
	select {
	case <-ta.started:
		t.Error("the slow agent ran twice")
	default:
	}

	fast := ann.agent.with("Idempotency-Key", "dup-fast")
	got := burst(fast, lookup(""))
	if got["200"] != 1 || got["200"]+got["200 replayed"]+got["409 idempotency_in_flight"] != 50 {
		t.Errorf("50 duplicates of a fast call: %v, want exactly one run", got)
	}
	if n := ann.human.receiptCount("ann/lab"); n != 1 {
		t.Errorf("%d receipts under ann/lab, want 1", n)
	}
	if n := ann.human.receiptCount("ann/sandbox"); n != 1 {
		t.Errorf("%d receipts under ann/sandbox, want 1", n)
	}
}

// conflicts counts the 409 answers recorded so far on a path.
func (ta *hostedApp) conflicts(path string) int {
	ta.mu.Lock()
	defer ta.mu.Unlock()
	n := 0
	for _, x := range ta.transcript {
		if x.path == path && x.status == http.StatusConflict {
			n++
		}
	}
	return n
}

// Ensure that an idempotent call costs no commit of its own: its key is
// claimed with the reservation and finished with the settlement, so it
// commits exactly as often as the same call without a key.
func TestIdempotency_NoCommitOfItsOwn(t *testing.T) {
	ta := newHostedApp(t)
	ann := ta.signup("ann")
	// The gateway's own commits at start-up: the evaluations of the
	// registry's versions (several commits each, for a second or so under
	// -race) are waited for, and the fewest of three calls is taken, as a
	// commit of the approvals' sweep may land in one of them.
	if err := ta.app.WaitEvaluations(t.Context()); err != nil {
		t.Fatal(err)
	}
	commits := func(key string) uint64 {
		least := uint64(1 << 62)
		for i := range 3 {
			c := ann.human
			if key != "" {
				c = c.with("Idempotency-Key", fmt.Sprintf("%s-%d", key, i))
			}
			before := ta.app.Engine().Store().Stats().Commits
			c.must(http.StatusOK, "POST", "/v0/calls", lookup("ann/sandbox"))
			least = min(least, ta.app.Engine().Store().Stats().Commits-before)
		}
		return least
	}
	plain, keyed := commits(""), commits("one-commit")
	if keyed != plain || plain == 0 {
		t.Errorf("a call with an Idempotency-Key made %d commits, without %d: want the same", keyed, plain)
	}
}

// Ensure that a key whose call settled before the gateway stopped (the
// settlement durable, the caller not yet answered) replays its receipt
// after the restart, billed once, instead of answering 409.
func TestIdempotency_RestartAfterSettlement(t *testing.T) {
	ta := newHostedApp(t)
	ann := ta.signup("ann")
	var armed atomic.Bool
	reached, hold := make(chan string, 1), make(chan struct{})
	ta.restart(func(c *appliance.Config) {
		c.OnStep = func(step, receipt string) {
			if step == gateway.StepSettleDurable && armed.CompareAndSwap(true, false) {
				reached <- receipt
				<-hold // the process "dies" here: the caller is never answered
			}
		}
	})
	armed.Store(true)
	c := ann.human.with("Idempotency-Key", "settled-1")
	oldSrv := ta.srv
	go c.do("POST", "/v0/calls", lookup("ann/sandbox"))
	var rid string
	select {
	case rid = <-reached:
	case <-time.After(10 * time.Second):
		t.Fatal("the call did not settle")
	}
	if err := ta.app.Close(); err != nil {
		t.Fatal(err)
	}
	ta.app = nil
	ta.open()
	defer func() {
		close(hold) // the old process's request returns, into a closed store
		oldSrv.Close()
	}()

	again := c.must(http.StatusOK, "POST", "/v0/calls", lookup("ann/sandbox"))
	if again["replayed"] != true || again["receipt"].(map[string]any)["id"] != rid {
		t.Errorf("after the restart: %v, want the replay of %s", again, rid)
	}
	if b := ann.balance(); b != "4.92" {
		t.Errorf("balance %s, want 4.92 (billed once)", b)
	}
}

// Ensure that a restart with a call in flight leaves its Idempotency-Key
// at 409 idempotency_interrupted, for good, and that the call itself was
// closed as gateway_restarted and not billed.
func TestIdempotency_RestartInFlight(t *testing.T) {
	ta := newHostedApp(t)
	ann := ta.signup("ann")
	slowMandate(ann)
	c := ann.human.with("Idempotency-Key", "crash-1")
	answered := make(chan int, 1)
	oldSrv := ta.srv
	go func() {
		status, _ := c.do("POST", "/v0/calls", slowCall(3))
		answered <- status
	}()
	ta.waitStarted()

	// The gateway stops with the call running: the store closes under it.
	if err := ta.app.Close(); err != nil {
		t.Fatal(err)
	}
	ta.app = nil
	ta.open()
	defer func() {
		ta.letGo()
		<-answered
		oldSrv.Close()
	}()

	c = ann.human.with("Idempotency-Key", "crash-1")
	for i := 0; i < 2; i++ {
		if status, out := c.do("POST", "/v0/calls", slowCall(3)); status != http.StatusConflict || errorCode(out) != "idempotency_interrupted" {
			t.Errorf("after the restart (%d): %d %v, want 409 idempotency_interrupted", i, status, out)
		}
	}
	rs := ann.human.must(http.StatusOK, "GET", "/v0/receipts?mandate=ann/lab", nil)["receipts"].([]any)
	if len(rs) != 1 {
		t.Fatalf("%d receipts, want 1", len(rs))
	}
	if r := rs[0].(map[string]any); r["status"] != "failed" || r["error"] != "gateway_restarted" || r["billed"] != false {
		t.Errorf("the interrupted call's receipt: %v", r)
	}
	if b := ann.balance(); b != "5.00" {
		t.Errorf("balance %s, want 5.00 (nothing billed)", b)
	}
	// Another restart does not change the answer.
	ta.restart(func(*appliance.Config) {})
	if status, _ := c.do("POST", "/v0/calls", slowCall(3)); status != http.StatusConflict {
		t.Errorf("after a second restart: %d, want 409", status)
	}
	select {
	case <-ta.started:
		t.Error("the interrupted call ran again")
	default:
	}
}

// Ensure that a store written before the running records moved to run/
// (a running record under key/, a run/ marker of true) still has its
// interrupted keys found at start-up: 409 idempotency_interrupted after
// the restart, and the marker gone.
func TestIdempotency_RestartEarlierLayout(t *testing.T) {
	ta := newHostedApp(t)
	ann := ta.signup("ann")
	sum := sha256.Sum256([]byte(ann.human.key))
	scope := hex.EncodeToString(sum[:])
	c := ann.human.with("Idempotency-Key", "old-1")
	c.must(http.StatusOK, "POST", "/v0/calls", lookup("ann/sandbox"))
	// The sweep folds the log of finished keys into key/.
	if _, err := ta.app.SweepIdempotencyKeys(context.Background()); err != nil {
		t.Fatal(err)
	}
	// Turn its record back into a running one of the earlier layout.
	err := ta.app.Engine().Store().Update(context.Background(), func(tx holon.Tx) error {
		var rec map[string]any
		if err := tx.Get(holon.BucketIdempotency, "key/"+scope+"/old-1", &rec); err != nil {
			return err
		}
		rec["state"] = "running"
		if err := tx.Put(holon.BucketIdempotency, "key/"+scope+"/old-1", rec); err != nil {
			return err
		}
		return tx.Put(holon.BucketIdempotency, "run/"+scope+"/old-1", true)
	})
	if err != nil {
		t.Fatal(err)
	}
	ta.restart()
	if status, out := c.do("POST", "/v0/calls", lookup("ann/sandbox")); status != http.StatusConflict || errorCode(out) != "idempotency_interrupted" {
		t.Errorf("the earlier layout's interrupted key: %d %v, want 409 idempotency_interrupted", status, out)
	}
	_ = ta.app.Engine().Store().View(func(tx holon.Tx) error {
		var v any
		if err := tx.Get(holon.BucketIdempotency, "run/"+scope+"/old-1", &v); !errors.Is(err, holon.ErrNotFound) {
			t.Errorf("the run/ marker is still there: %v", err)
		}
		return nil
	})
}
