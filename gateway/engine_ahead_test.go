package gateway_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"holon.dev/holon"
	"holon.dev/holon/gateway"
)

// aheadStore is a store whose transactions take records ahead
// (holon.RecordsAhead), as the PostgreSQL store's do, and note what each
// read was named ahead of.
type aheadStore struct {
	holon.Store
	mu  sync.Mutex
	log []string
}

func (s *aheadStore) View(fn func(holon.Tx) error) error {
	return s.Store.View(func(tx holon.Tx) error { return fn(aheadTx{tx, s}) })
}

func (s *aheadStore) note(what string) {
	s.mu.Lock()
	s.log = append(s.log, what)
	s.mu.Unlock()
}

type aheadTx struct {
	holon.Tx
	s *aheadStore
}

func (t aheadTx) RecordsAhead(agents ...string) { t.s.note("ahead " + strings.Join(agents, " ")) }

func (t aheadTx) MandateRevision(id string) []byte {
	t.s.note("mandate " + id)
	return t.Tx.MandateRevision(id)
}

func (t aheadTx) Record(agent string) (holon.Record, error) {
	t.s.note("record " + agent)
	return t.Tx.Record(agent)
}

// Ensure that admission names the records it will read (the chosen
// agent's) ahead of its first read, the mandate's, so that a store whose
// reads are round trips reads them together.
func TestEngine_Call_NamesRecordsAhead(t *testing.T) {
	te := newEngine(t, allAgents, testHandlers(), mainMandate)
	st := &aheadStore{Store: te.store}
	eng := gateway.New(gateway.Config{Store: st, Registry: te.reg, Runners: te.runners, SignupCredit: te.credit})
	res, err := eng.Call(context.Background(), gateway.CallInput{Mandate: "alice/main", Agent: "acme/echo"})
	if err != nil {
		t.Fatal(err)
	}
	ref := *res.Receipt.Agent
	want := []string{"ahead " + ref, "mandate alice/main", "record " + ref}
	if len(st.log) < len(want) || strings.Join(st.log[:len(want)], "; ") != strings.Join(want, "; ") {
		t.Errorf("admission's reads: %q, want %q first", st.log, want)
	}
}
