package appliance_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"holon.dev/holon"
	"holon.dev/holon/appliance"
)

// advance moves a fixed clock.
func (c *fixedClock) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// newClockedApp is a hosted app whose clock only moves when told to.
func newClockedApp(t *testing.T) (*hostedApp, *fixedClock) {
	clock := &fixedClock{now: time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)}
	return newHostedApp(t, func(c *appliance.Config) { c.Now = clock.Now }), clock
}

// keyScope is the scope under which an API key's Idempotency-Keys live.
func keyScope(apiKey string) string {
	sum := sha256.Sum256([]byte(apiKey))
	return hex.EncodeToString(sum[:])
}

// idemKeys lists the keys of the idempotency records, finished (key/) and
// running (run/).
func (ta *hostedApp) idemKeys() []string {
	ta.t.Helper()
	var keys []string
	err := ta.app.Engine().Store().View(func(tx holon.Tx) error {
		return tx.ForEach(holon.BucketIdempotency, "", func(k string, _ json.RawMessage) (bool, error) {
			keys = append(keys, k)
			return true, nil
		})
	})
	if err != nil {
		ta.t.Fatal(err)
	}
	return keys
}

func receiptID(out map[string]any) any { return out["receipt"].(map[string]any)["id"] }

// Ensure that an Idempotency-Key lives 24 hours: re-sent a second before,
// the call replays its receipt; after, the same key and body run as a new
// call, with a new receipt, billed again, and that call is what the key
// replays from then on; an expired key may also carry another body.
func TestIdempotency_ExpiredKeyRunsAgain(t *testing.T) {
	ta, clock := newClockedApp(t)
	ann := ta.signup("ann")
	c := ann.human.with("Idempotency-Key", "order-1")
	first := c.must(http.StatusOK, "POST", "/v0/calls", lookup("ann/sandbox"))
	other := ann.human.with("Idempotency-Key", "order-2")
	other.must(http.StatusOK, "POST", "/v0/calls", lookup("ann/sandbox"))

	clock.advance(appliance.DefaultIdempotencyTTL - time.Second)
	again := c.must(http.StatusOK, "POST", "/v0/calls", lookup("ann/sandbox"))
	if again["replayed"] != true || receiptID(again) != receiptID(first) {
		t.Errorf("a second before 24 hours: %v, want the replay of %v", again, receiptID(first))
	}
	if b := ann.balance(); b != "4.84" {
		t.Errorf("balance %s, want 4.84 (two calls billed once each)", b)
	}

	clock.advance(2 * time.Second)
	second := c.must(http.StatusOK, "POST", "/v0/calls", lookup("ann/sandbox"))
	if second["replayed"] != nil || second["output"] == nil || receiptID(second) == receiptID(first) {
		t.Errorf("after 24 hours: %v, want a new call with a new receipt", second)
	}
	if b := ann.balance(); b != "4.76" {
		t.Errorf("balance %s, want 4.76 (the expired key's call billed again)", b)
	}
	if again := c.must(http.StatusOK, "POST", "/v0/calls", lookup("ann/sandbox")); again["replayed"] != true || receiptID(again) != receiptID(second) {
		t.Errorf("the new call re-sent: %v, want the replay of %v", again, receiptID(second))
	}
	body := lookup("ann/sandbox")
	body["input"] = map[string]any{"name": "ACME Corp"}
	if out := other.must(http.StatusOK, "POST", "/v0/calls", body); out["replayed"] != nil {
		t.Errorf("an expired key with another body: %v, want a new call", out)
	}
	if n := ann.human.receiptCount("ann/sandbox"); n != 4 {
		t.Errorf("%d receipts, want 4", n)
	}
}

// Ensure that the sweep deletes the finished keys whose 24 hours have
// passed, and keeps the fresh ones and those of calls still running
// (however long ago they started): the fresh key still replays, the
// running one still answers 409 and replays once it finished.
func TestIdempotency_SweepDeletesExpired(t *testing.T) {
	ta, clock := newClockedApp(t)
	ann := ta.signup("ann")
	slowMandate(ann)
	scope := keyScope(ann.human.key)
	slow := ann.human.with("Idempotency-Key", "slow-1")
	done := make(chan int, 1)
	go func() {
		status, _ := slow.do("POST", "/v0/calls", slowCall(1))
		done <- status
	}()
	ta.waitStarted()
	ann.human.with("Idempotency-Key", "old-1").must(http.StatusOK, "POST", "/v0/calls", lookup("ann/sandbox"))
	clock.advance(12 * time.Hour)
	fresh := ann.human.with("Idempotency-Key", "fresh-1")
	first := fresh.must(http.StatusOK, "POST", "/v0/calls", lookup("ann/sandbox"))
	clock.advance(13 * time.Hour)

	n, err := ta.app.SweepIdempotencyKeys(context.Background())
	if err != nil || n != 1 {
		t.Errorf("sweep: %d, %v, want 1 key deleted", n, err)
	}
	want := []string{"key/" + scope + "/fresh-1", "run/" + scope + "/slow-1"}
	if got := ta.idemKeys(); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("after the sweep the records are %v, want %v", got, want)
	}
	if out := fresh.must(http.StatusOK, "POST", "/v0/calls", lookup("ann/sandbox")); out["replayed"] != true || receiptID(out) != receiptID(first) {
		t.Errorf("the fresh key: %v, want its replay", out)
	}
	if status, out := slow.do("POST", "/v0/calls", slowCall(1)); status != http.StatusConflict || errorCode(out) != "idempotency_in_flight" {
		t.Errorf("the running key after 25 hours: %d %v, want 409 idempotency_in_flight", status, out)
	}
	ta.letGo()
	if status := <-done; status != http.StatusOK {
		t.Fatalf("the slow call: %d", status)
	}
	if out := slow.must(http.StatusOK, "POST", "/v0/calls", slowCall(1)); out["replayed"] != true {
		t.Errorf("the slow key once finished: %v, want a replay", out)
	}
	if n, err := ta.app.SweepIdempotencyKeys(context.Background()); err != nil || n != 0 {
		t.Errorf("a second sweep: %d, %v, want nothing deleted", n, err)
	}
}

// Ensure that keys which expired while the gateway was stopped are
// deleted by the sweep at start, with nothing of the sweep's kept across
// the restart: the gateway's own sweeper, not a call, removes them.
func TestIdempotency_SweepAtStart(t *testing.T) {
	ta, clock := newClockedApp(t)
	ann := ta.signup("ann")
	for i := range 3 {
		ann.human.with("Idempotency-Key", fmt.Sprintf("k-%d", i)).must(http.StatusOK, "POST", "/v0/calls", lookup("ann/sandbox"))
	}
	if got := ta.idemKeys(); len(got) != 3 {
		t.Fatalf("records before the restart: %v, want 3", got)
	}
	ta.restart(func(*appliance.Config) { clock.advance(appliance.DefaultIdempotencyTTL + time.Minute) })
	deadline := time.Now().Add(10 * time.Second)
	for len(ta.idemKeys()) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("10 s after the restart the expired records are still there: %v", ta.idemKeys())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Ensure that the sweep does bounded work: 10,000 expired keys are
// deleted in at least 20 write transactions, and the 1,000 fresh keys
// among them are kept.
func TestIdempotency_SweepBounded(t *testing.T) {
	ta, clock := newClockedApp(t)
	store := ta.app.Engine().Store()
	finished := clock.Now()
	err := store.Update(context.Background(), func(tx holon.Tx) error {
		for i := range 11_000 {
			at := finished
			if i%11 == 0 {
				at = finished.Add(2 * time.Hour)
			}
			rec := map[string]any{"state": "done", "request": "r", "receipt": fmt.Sprintf("r%d", i), "status": 200, "started": at, "finished": at}
			if err := tx.Put(holon.BucketIdempotency, fmt.Sprintf("key/scope/%06d", i), rec); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	clock.advance(appliance.DefaultIdempotencyTTL + time.Hour)
	before := store.Stats().Commits
	n, err := ta.app.SweepIdempotencyKeys(context.Background())
	if err != nil || n != 10_000 {
		t.Fatalf("sweep: %d, %v, want 10000", n, err)
	}
	if commits := store.Stats().Commits - before; commits < 20 {
		t.Errorf("the sweep of 10,000 keys made %d commits, want at least 20 (500 keys each at most)", commits)
	}
	if got := ta.idemKeys(); len(got) != 1_000 {
		t.Errorf("%d records left, want the 1,000 fresh ones", len(got))
	}
}

// Ensure that a negative lifetime is refused at start.
func TestIdempotency_NegativeTTL(t *testing.T) {
	cfg := appliance.Config{IdempotencyTTL: -time.Hour}
	if err := cfg.Check(); err == nil || !strings.Contains(err.Error(), "--idempotency-ttl") {
		t.Errorf("Check: %v, want --idempotency-ttl refused", err)
	}
}

// Ensure that a key a restart interrupted answers 409
// idempotency_interrupted for its 24 hours, and after them runs as a new
// key: the call runs and is billed.
func TestIdempotency_InterruptedKeyExpires(t *testing.T) {
	ta, clock := newClockedApp(t)
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
	if err := ta.app.Close(); err != nil { // the store closes under the running call
		t.Fatal(err)
	}
	ta.app = nil
	ta.open()
	ta.letGo()
	<-answered
	oldSrv.Close()

	clock.advance(appliance.DefaultIdempotencyTTL - time.Second)
	if status, out := c.do("POST", "/v0/calls", slowCall(3)); status != http.StatusConflict || errorCode(out) != "idempotency_interrupted" {
		t.Errorf("a second before 24 hours: %d %v, want 409 idempotency_interrupted", status, out)
	}
	clock.advance(2 * time.Second)
	out := c.must(http.StatusOK, "POST", "/v0/calls", slowCall(3))
	if out["replayed"] != nil || str(out["output"]) != "map[n:3]" {
		t.Errorf("after 24 hours: %v, want the call run anew", out)
	}
	if n := ann.human.receiptCount("ann/lab"); n != 2 {
		t.Errorf("%d receipts, want 2 (the interrupted call and the new one)", n)
	}
}
