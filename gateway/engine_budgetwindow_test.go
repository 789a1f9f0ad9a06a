package gateway_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	_ "time/tzdata" // the same zones on every host

	"holon.dev/holon"
	"holon.dev/holon/gateway"
	"holon.dev/holon/journal"
)

// gatedAgents are in-process agents that wait for a test to let them
// answer: acme/gate keeps its reservation in memory, acme/gate-durable
// makes it durable first (as an agent about to send an effect out does),
// and acme/gate-orch pays a downstream call to acme/gate out of its hold
// (passthrough), so that its reservation is durable from the start.
var gatedAgents = []string{
	agentEcho,
	agentDoc("acme/gate", "1.0.0", `
interface: {input: {}, output: {}}
pricing: {model: per_run, amount: "0.10", currency: EUR}
runtime: {kind: dev, tool: gate}
`),
	agentDoc("acme/gate-durable", "1.0.0", `
interface: {input: {}, output: {}}
pricing: {model: per_run, amount: "0.10", currency: EUR}
runtime: {kind: dev, tool: gate-durable}
`),
	agentDoc("acme/gate-orch", "1.0.0", `
interface: {input: {}, output: {}}
pricing: {model: per_run, amount: "0.05", currency: EUR}
runtime: {kind: dev, tool: gate-orch}
downstream: {mode: passthrough, cap: "0.10"}
calls:
  - {agent: acme/gate, max_cost: "0.10"}
`),
}

// gate lets the gated agents through: each waits until the gate is
// opened, after telling started that it runs.
type gate struct {
	started chan string
	open    chan struct{}
}

func newGate() *gate { return &gate{started: make(chan string, 64), open: make(chan struct{})} }

func (g *gate) handlers() map[string]gateway.DevHandler {
	h := testHandlers()
	h["gate"] = func(ctx context.Context, _ json.RawMessage, _ *gateway.Ctx) (any, error) {
		g.started <- "gate"
		<-g.open
		return map[string]any{}, nil
	}
	h["gate-durable"] = func(ctx context.Context, _ json.RawMessage, c *gateway.Ctx) (any, error) {
		if err := c.Durable(); err != nil {
			return nil, err
		}
		g.started <- "gate-durable"
		<-g.open
		return map[string]any{}, nil
	}
	h["gate-orch"] = func(ctx context.Context, _ json.RawMessage, c *gateway.Ctx) (any, error) {
		g.started <- "gate-orch"
		out := c.Call(ctx, gateway.Target{Agent: "acme/gate"}, map[string]any{})
		if !out.OK {
			return nil, &callFailed{out}
		}
		return map[string]any{}, nil
	}
	return h
}

type callFailed struct{ out gateway.CallOutcome }

func (e *callFailed) Error() string {
	return "downstream call failed: " + e.out.Error + " " + e.out.Message
}

// dailyMandate renews 0.25 EUR a day in Paris, with no lifetime total.
var dailyMandate = mandateWith("daily", `budget: {window: day, per_window: "0.25", timezone: Europe/Paris}`)

// windowBudget reads a mandate's spending in one window.
func (te *testEngine) windowBudget(tb testing.TB, mandate, window string) holon.Budget {
	tb.Helper()
	var b holon.Budget
	err := te.store.View(func(tx holon.Tx) error {
		var err error
		b, err = tx.WindowBudget(mandate, window)
		return err
	})
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// Ensure that a call reserved before a boundary and settled after it is
// paid by the window it was reserved in, for each way a reservation is
// kept (in memory, made durable by the agent, durable from the start with
// a passthrough child drawing on it): the new window starts empty while
// the call still runs, and the old one ends with the call's cost.
func TestEngine_Window_CallStraddlesBoundary(t *testing.T) {
	for _, tt := range []struct {
		agent string
		cost  journal.Amount
	}{
		{"acme/gate", eur("0.10")},
		{"acme/gate-durable", eur("0.10")},
		{"acme/gate-orch", eur("0.15")},
	} {
		t.Run(tt.agent, func(t *testing.T) {
			clock := newTestClock()
			// 23:59:30 in Paris, the night the clocks go back.
			clock.t = time.Date(2026, 10, 24, 21, 59, 30, 0, time.UTC)
			g := newGate()
			te := openEngine(t, engineConfig{manifests: gatedAgents, handlers: g.handlers(), mandates: []string{dailyMandate}, clock: clock})
			done := make(chan *gateway.CallResult)
			go func() {
				res, err := te.eng.Call(context.Background(), gateway.CallInput{Mandate: "alice/daily", Agent: tt.agent})
				if err != nil {
					t.Error(err)
				}
				done <- res
			}()
			want := "gate"
			if tt.agent != "acme/gate" {
				want = strings.TrimPrefix(tt.agent, "acme/")
			}
			for got := <-g.started; got != want; got = <-g.started {
				if tt.agent != "acme/gate-orch" {
					t.Fatalf("started %s", got)
				}
				want = "gate" // the orchestrator's child is the one to wait for
			}
			// A view shows committed reservations and in-memory ones: a
			// durable one shows once its commit lands (an in-process child
			// runs without waiting for it).
			st := te.mandate(t, "alice/daily")
			for end := time.Now().Add(5 * time.Second); st.Window != nil && st.Window.Reserved == 0 && time.Now().Before(end); {
				time.Sleep(5 * time.Millisecond)
				st = te.mandate(t, "alice/daily")
			}
			if st.Window == nil || st.Window.Key != "day:2026-10-24" || st.Window.Reserved == 0 || st.Remaining != st.Window.Remaining {
				t.Fatalf("before midnight: %+v", st.Window)
			}
			clock.Advance(time.Minute) // 00:00:30 on the 25th
			st = te.mandate(t, "alice/daily")
			if w := st.Window; w == nil || w.Key != "day:2026-10-25" || w.Spent != 0 || w.Reserved != 0 || w.Remaining != eur("0.25") ||
				w.End.Sub(w.Start) != 25*time.Hour || w.End.Format(time.RFC3339) != "2026-10-26T00:00:00+01:00" {
				t.Fatalf("after midnight, while the call runs: %+v", st.Window)
			}
			close(g.open)
			res := <-done
			if res == nil || res.Receipt.Status != holon.StatusSucceeded || res.Receipt.Cost.Total != tt.cost {
				t.Fatalf("the call: %+v", res)
			}
			if b := te.windowBudget(t, "alice/daily", "day:2026-10-24"); b != (holon.Budget{Spent: tt.cost}) {
				t.Errorf("the window it was reserved in: %+v, want spent %s", b, tt.cost)
			}
			if b := te.windowBudget(t, "alice/daily", "day:2026-10-25"); b != (holon.Budget{}) {
				t.Errorf("the window it settled in: %+v, want nothing", b)
			}
			if st := te.mandate(t, "alice/daily"); st.Spent != tt.cost || st.Window.Spent != 0 {
				t.Errorf("lifetime spent %s, this window's %s", st.Spent, st.Window.Spent)
			}
		})
	}
}

// Ensure that a window renews with no call at its boundary: a mandate
// spent to its allowance refuses the next call until the clock passes
// midnight, then allows the whole allowance again, with nothing written in
// between.
func TestEngine_Window_RenewsWithNoCall(t *testing.T) {
	clock := newTestClock()
	clock.t = time.Date(2026, 3, 28, 12, 0, 0, 0, time.UTC) // noon in Paris, the day before the clocks go forward
	te := openEngine(t, engineConfig{manifests: allAgents, handlers: testHandlers(), mandates: []string{dailyMandate}, clock: clock})
	call := func() *holon.Receipt {
		res, err := te.eng.Call(context.Background(), gateway.CallInput{Mandate: "alice/daily", Agent: "acme/echo"})
		if err != nil {
			t.Fatal(err)
		}
		return res.Receipt
	}
	for i := range 2 {
		if r := call(); r.Status != holon.StatusSucceeded {
			t.Fatalf("call %d: %s %s", i, r.Status, errCode(r))
		}
	}
	res, err := te.eng.Call(context.Background(), gateway.CallInput{Mandate: "alice/daily", Agent: "acme/echo"})
	if err != nil || res.Receipt.Status != holon.StatusDenied || errCode(res.Receipt) != holon.CodeOverBudget ||
		!strings.Contains(res.Message, "renews at 2026-03-29T00:00:00+01:00") {
		t.Fatalf("the third call: %+v %v", res, err)
	}
	commits := te.store.Stats().Commits
	clock.t = time.Date(2026, 3, 28, 22, 59, 59, 0, time.UTC) // 23:59:59 in Paris
	if st := te.mandate(t, "alice/daily"); st.Window.Remaining != eur("0.05") || st.Remaining != eur("0.05") {
		t.Fatalf("a second before midnight: %+v", st.Window)
	}
	clock.Advance(time.Second) // midnight: a day of 23 hours begins
	st := te.mandate(t, "alice/daily")
	if w := st.Window; w.Key != "day:2026-03-29" || w.Remaining != eur("0.25") || w.End.Sub(w.Start) != 23*time.Hour || st.Spent != eur("0.20") {
		t.Fatalf("at midnight: %+v, lifetime spent %s", w, st.Spent)
	}
	if n := te.store.Stats().Commits; n != commits {
		t.Fatalf("%d commits while the window renewed, want none", n-commits)
	}
	for i := range 2 {
		if r := call(); r.Status != holon.StatusSucceeded {
			t.Fatalf("call %d of the new day: %s %s", i, r.Status, errCode(r))
		}
	}
	if r := call(); errCode(r) != holon.CodeOverBudget {
		t.Fatalf("the third call of the new day: %s %s", r.Status, errCode(r))
	}
}

// Ensure that concurrent calls at a boundary cannot overrun either
// window: calls start on both sides of midnight while a watcher samples
// both windows, and no window ever holds more than its allowance in spent
// and reserved; each window ends with exactly as many paid calls as its
// allowance buys.
func TestEngine_Window_ConcurrentAtBoundary(t *testing.T) {
	const calls = 120
	clock := newTestClock()
	clock.t = time.Date(2026, 10, 24, 21, 59, 59, 0, time.UTC) // 23:59:59 in Paris
	g := newGate()
	te := openEngine(t, engineConfig{manifests: gatedAgents, handlers: g.handlers(), clock: clock,
		mandates: []string{mandateWith("daily", `budget: {window: day, per_window: "1.05", timezone: Europe/Paris}`)}})
	allowance := eur("1.05")
	windows := []string{"day:2026-10-24", "day:2026-10-25"}

	stop := make(chan struct{})
	sampled := make(chan struct{})
	var samples atomic.Int64
	go func() {
		defer close(sampled)
		for {
			err := te.store.View(func(tx holon.Tx) error {
				for _, w := range windows {
					b, err := tx.WindowBudget("alice/daily", w)
					if err != nil {
						return err
					}
					if b.Spent+b.Reserved > allowance {
						t.Errorf("window %s: spent %s + reserved %s is above %s", w, b.Spent, b.Reserved, allowance)
					}
				}
				return nil
			})
			if err != nil {
				t.Error(err)
				return
			}
			if st, err := te.eng.Mandate("alice/daily"); err != nil || st.Window.Spent+st.Window.Reserved > allowance || st.Remaining < 0 {
				t.Errorf("the mandate's view: %+v, %v", st, err)
			}
			samples.Add(1)
			select {
			case <-stop:
				return
			default:
			}
		}
	}()

	var wg sync.WaitGroup
	var mu sync.Mutex
	byWindow := map[string]map[string]int{}
	agents := []string{"acme/gate", "acme/gate-durable", "acme/echo"}
	started := 0
	for half := range 2 {
		if half == 1 {
			clock.Advance(time.Second) // midnight, with the first half's calls in flight
		}
		var returned atomic.Int64
		for i := range calls / 2 {
			wg.Add(1)
			agent := agents[i%len(agents)]
			go func() {
				defer wg.Done()
				defer returned.Add(1)
				res, err := te.eng.Call(context.Background(), gateway.CallInput{Mandate: "alice/daily", Agent: agent})
				if err != nil {
					t.Errorf("Call: %v", err)
					return
				}
				r := res.Receipt
				w := "day:2026-10-24"
				if !r.Created.Before(time.Date(2026, 10, 24, 22, 0, 0, 0, time.UTC)) {
					w = "day:2026-10-25"
				}
				mu.Lock()
				defer mu.Unlock()
				if byWindow[w] == nil {
					byWindow[w] = map[string]int{}
				}
				byWindow[w][r.Status+"/"+errCode(r)]++
			}()
		}
		// Every call of this half has either returned or reached its
		// gated agent (and holds its reservation) before the clock moves.
		inHalf := 0
		for deadline := time.Now().Add(10 * time.Second); int(returned.Load())+inHalf < calls/2; {
			select {
			case <-g.started:
				inHalf++
			case <-time.After(time.Millisecond):
			}
			if time.Now().After(deadline) {
				t.Fatalf("half %d: %d returned, %d running", half, returned.Load(), inHalf)
			}
		}
		started += inHalf
	}
	close(g.open)
	wg.Wait()
	close(stop)
	<-sampled

	for _, w := range windows {
		if n := byWindow[w][holon.StatusSucceeded+"/"]; n != 10 {
			t.Errorf("window %s: %d calls succeeded, want 10 (1.05 buys ten at 0.10): %v", w, n, byWindow[w])
		}
		if b := te.windowBudget(t, "alice/daily", w); b != (holon.Budget{Spent: eur("1.00")}) {
			t.Errorf("window %s: %+v, want spent 1.00", w, b)
		}
	}
	if samples.Load() < 2 || started == 0 {
		t.Errorf("sampled %d times, %d gated calls seen running", samples.Load(), started)
	}
}
