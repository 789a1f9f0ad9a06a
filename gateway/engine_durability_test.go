package gateway_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"

	"holon.dev/holon"
	"holon.dev/holon/gateway"
	"holon.dev/holon/gateway/contract"
)

// durabilityProbe is a runner of remote agents (kind webhook) that looks,
// from a reader's side, for the call's hold before it "sends" anything: a
// reader sees committed state only, so the hold is there iff the
// reservation is committed.
type durabilityProbe struct {
	store func() holon.Store
	mu    sync.Mutex
	saw   map[string]bool
}

func (p *durabilityProbe) Run(_ context.Context, inv *gateway.Invocation) gateway.RunResult {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.saw[inv.Receipt] = holdCommitted(p.store(), inv.Receipt)
	return gateway.RunResult{Output: json.RawMessage(`{}`), Outcome: contract.Outcome{Kind: contract.OutcomeOutput}}
}

func holdCommitted(s holon.Store, receipt string) bool {
	err := s.View(func(tx holon.Tx) error {
		_, err := tx.Hold(receipt)
		return err
	})
	return err == nil
}

// Ensure that a remote agent is only ever run once its call's reservation
// is committed, under concurrent calls, and that an in-process agent that
// asks (Ctx.Durable) is told so only once its reservation is committed;
// every call is told its steps in order.
func TestEngine_Call_DurableBeforeEffects(t *testing.T) {
	probe := &durabilityProbe{saw: map[string]bool{}}
	h := testHandlers()
	var mu sync.Mutex
	devSaw := map[string]bool{}
	var te *testEngine
	h["durable"] = func(_ context.Context, _ json.RawMessage, c *gateway.Ctx) (any, error) {
		if err := c.Durable(); err != nil {
			return nil, err
		}
		mu.Lock()
		devSaw[c.Receipt()] = holdCommitted(te.store, c.Receipt())
		mu.Unlock()
		return map[string]any{}, nil
	}
	remote := agentDoc("acme/remote", "1.0.0", `
interface: {input: {type: object}, output: {type: object}}
pricing: {model: per_run, amount: "0.10", currency: EUR}
runtime: {kind: webhook, endpoint: "https://agent.example/run"}
`)
	durable := agentDoc("acme/durable", "1.0.0", `
interface: {input: {type: object}, output: {type: object}}
pricing: {model: per_run, amount: "0.10", currency: EUR}
runtime: {kind: dev}
`)
	te = newEngine(t, []string{remote, durable}, h, mainMandate)
	probe.store = func() holon.Store { return te.store }
	te.runners[contract.RuntimeWebhook] = probe

	var wg sync.WaitGroup
	errs := make(chan error, 40)
	for i := range 40 {
		agent := "acme/remote"
		if i%2 == 1 {
			agent = "acme/durable"
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := te.eng.Call(context.Background(), gateway.CallInput{Mandate: "alice/main", Agent: agent, Input: json.RawMessage(`{}`)})
			switch {
			case err != nil:
				errs <- err
			case res.Receipt.Status != holon.StatusSucceeded:
				errs <- errors.New(res.Receipt.ID + " " + res.Receipt.Status)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	for _, saw := range []map[string]bool{probe.saw, devSaw} {
		if len(saw) != 20 {
			t.Errorf("%d runs seen, want 20", len(saw))
		}
		for id, committed := range saw {
			if !committed {
				t.Errorf("%s ran (or was told it was durable) before its reservation was committed", id)
			}
		}
	}
}
