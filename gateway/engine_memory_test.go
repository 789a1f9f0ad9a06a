package gateway_test

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"holon.dev/holon"
	"holon.dev/holon/gateway"
	"holon.dev/holon/gateway/contract"
	"holon.dev/holon/journal"
)

// spendProbe is run by both runners of the overspend test: it counts the
// money every run started is bound to be charged (each run succeeds at
// its price), per mandate and in all, and fails the test the moment that
// is above what the mandate's budget or the payer's balance allowed.
type spendProbe struct {
	t      *testing.T
	price  journal.Amount
	limits map[string]journal.Amount // mandate → budget total
	credit journal.Amount

	mu      sync.Mutex
	started map[string]journal.Amount
	all     journal.Amount
	runs    int
}

// run counts a run; its input names its mandate ({"m": id}).
func (p *spendProbe) run(input json.RawMessage) {
	var in struct{ M string }
	if err := json.Unmarshal(input, &in); err != nil {
		p.t.Errorf("input %s: %v", input, err)
	}
	mandate := in.M
	p.mu.Lock()
	p.started[mandate] += p.price
	p.all += p.price
	p.runs++
	if p.started[mandate] > p.limits[mandate] {
		p.t.Errorf("runs started under %s are bound to charge %s, above its budget %s", mandate, p.started[mandate], p.limits[mandate])
	}
	if p.all > p.credit {
		p.t.Errorf("runs started are bound to charge %s, above the balance %s", p.all, p.credit)
	}
	p.mu.Unlock()
	time.Sleep(time.Duration(rand.IntN(1500)) * time.Microsecond)
}

// probeRunner is a remote runner (not in-process): its calls keep their
// durable reservation.
type probeRunner struct{ p *spendProbe }

func (r *probeRunner) Run(_ context.Context, inv *gateway.Invocation) gateway.RunResult {
	r.p.run(inv.Input)
	return gateway.RunResult{Output: json.RawMessage(`{}`), Outcome: contract.Outcome{Kind: contract.OutcomeOutput}}
}

// Ensure that reservations held in memory overspend nothing at any
// instant: concurrent calls to an in-process agent (reserved in memory)
// and to a remote one (reserved in the store) on one balance (1.00) and,
// for half of them, one budget (0.50), at 0.01 each. Every run is counted
// as it starts, and the money runs are bound to charge is never above the
// budget or the balance; a watcher sampling the store sees spent +
// reserved never above the total and the available balance never below
// zero; once the load is over, calls made one after another spend the
// balance to the last micro-unit, no more.
func TestEngine_Call_MemoryReservations_NoOverspend(t *testing.T) {
	price := journal.MustParseAmount("0.01")
	pricing := `pricing: {model: per_run, amount: "0.01", currency: EUR}`
	local := agentDoc("acme/local", "1.0.0", "interface: {input: {}, output: {}}\n"+pricing+"\nruntime: {kind: dev, tool: probe}\n")
	remote := agentDoc("acme/far", "1.0.0", "interface: {input: {}, output: {}}\n"+pricing+"\nruntime: {kind: webhook, endpoint: \"https://agent.example/run\"}\n")
	p := &spendProbe{t: t, price: price, credit: journal.MustParseAmount("1.00"), started: map[string]journal.Amount{},
		limits: map[string]journal.Amount{"alice/tight": journal.MustParseAmount("0.50"), "alice/wide": journal.MustParseAmount("10.00")}}
	var te *testEngine
	var memMu sync.Mutex
	inMemory := 0
	h := testHandlers()
	h["probe"] = func(_ context.Context, in json.RawMessage, c *gateway.Ctx) (any, error) {
		if !holdCommitted(te.store, c.Receipt()) {
			memMu.Lock()
			inMemory++
			memMu.Unlock()
		}
		p.run(in)
		return map[string]any{}, nil
	}
	te = openEngine(t, engineConfig{
		manifests: []string{local, remote},
		handlers:  h,
		credit:    "1.00",
		mandates:  []string{mandateWith("tight", `budget: {total: "0.50"}`), mandateWith("wide", `budget: {total: "10.00"}`)},
	})
	te.runners[contract.RuntimeWebhook] = &probeRunner{p: p}
	call := func(mandate, agent string) string {
		res := te.call(t, gateway.CallInput{Mandate: mandate, Agent: agent, Input: json.RawMessage(`{"m":"` + mandate + `"}`)})
		return res.Receipt.Status
	}

	stop := make(chan struct{})
	watched := make(chan int)
	go func() {
		n := 0
		defer func() { watched <- n }()
		for {
			for _, id := range []string{"alice/tight", "alice/wide"} {
				st := te.mandate(t, id)
				if st.Spent+st.Reserved > st.Mandate.Total() {
					t.Errorf("%s: spent %s + reserved %s is above the total %s", id, st.Spent, st.Reserved, st.Mandate.Total())
				}
			}
			if a := te.account(t, "alice"); a.Available() < 0 {
				t.Errorf("alice has %s available", a.Available())
			}
			n++
			select {
			case <-stop:
				return
			default:
			}
		}
	}()

	var wg sync.WaitGroup
	for i := range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 8 {
				agent, mandate := "acme/local", "alice/wide"
				if (i+j)%2 == 1 {
					agent = "acme/far"
				}
				if (i/2+j)%2 == 1 {
					mandate = "alice/tight"
				}
				call(mandate, agent)
			}
		}()
	}
	wg.Wait()
	close(stop)
	if n := <-watched; n < 10 {
		t.Errorf("the watcher sampled %d times, want many", n)
	}
	// One after another, nothing reserved: the calls that fit succeed.
	for _, agent := range []string{"acme/local", "acme/far"} {
		for call("alice/tight", agent) == holon.StatusSucceeded {
		}
		for call("alice/wide", agent) == holon.StatusSucceeded {
		}
	}
	tight, wide := te.mandate(t, "alice/tight"), te.mandate(t, "alice/wide")
	if tight.Spent > p.limits["alice/tight"] || tight.Spent+wide.Spent != p.credit || tight.Reserved+wide.Reserved != 0 {
		t.Errorf("alice/tight spent %s, alice/wide %s (reserved %s, %s); want 1.00 in all, at most 0.50 of it under alice/tight",
			tight.Spent, wide.Spent, tight.Reserved, wide.Reserved)
	}
	if a := te.account(t, "alice"); a.Balance != 0 || a.Held != 0 {
		t.Errorf("alice has %s, %s held; want the whole balance spent", a.Balance, a.Held)
	}
	if p.runs != 100 {
		t.Errorf("%d runs, want 100 (1.00 at 0.01)", p.runs)
	}
	if in := te.eng.InFlight(); in != 0 {
		t.Errorf("%d reservations left in memory", in)
	}
	if inMemory == 0 {
		t.Error("no call ran on a reservation held in memory")
	}
}
