package gateway_test

import (
	"context"
	"errors"
	"testing"

	"holon.dev/holon"
	"holon.dev/holon/gateway"
)

// lostReads is a store whose reads fail as a PostgreSQL store's do when
// the connection dies in the middle of a View: each read after the first
// failure comes back empty (a mandate "not found"), and View then returns
// store_unavailable.
type lostReads struct{ holon.Store }

func (s lostReads) View(fn func(holon.Tx) error) error {
	err := s.Store.View(func(tx holon.Tx) error { return fn(lostTx{tx}) })
	if err != nil {
		return err
	}
	return &holon.Error{Code: holon.CodeStoreUnavailable, Msg: "the database cannot be reached", Err: errors.New("connection reset")}
}

type lostTx struct{ holon.Tx }

func (lostTx) MandateRevision(string) []byte { return nil }

// Ensure that a call whose admission read failed with the store (its
// mandate read empty because the connection died, not because the mandate
// is missing) is answered store_unavailable and writes nothing, rather
// than denied mandate_inactive with a receipt; and that a listing of
// agents under that mandate is not answered not_found either.
func TestEngine_Call_LostReadIsStoreUnavailable(t *testing.T) {
	te := newEngine(t, allAgents, testHandlers(), mainMandate)
	eng := gateway.New(gateway.Config{Store: lostReads{te.store}, Registry: te.reg, Runners: te.runners, SignupCredit: te.credit})
	res, err := eng.Call(context.Background(), gateway.CallInput{Mandate: "alice/main", Agent: "acme/echo"})
	if holon.ErrorCode(err) != holon.CodeStoreUnavailable {
		t.Fatalf("a call whose read was lost: %+v, %v; want the error %s", res, err, holon.CodeStoreUnavailable)
	}
	var n int
	if err := te.store.View(func(tx holon.Tx) error {
		p, err := tx.Receipts("", "", 10)
		n = len(p.Receipts)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("%d receipts written for a call the store could not admit", n)
	}
	// The catalogue's preview under that mandate says the same.
	if _, err := eng.ListAgents(context.Background(), gateway.AgentQuery{Mandate: "alice/main"}); holon.ErrorCode(err) != holon.CodeStoreUnavailable {
		t.Errorf("listing agents under a mandate whose read was lost: %v; want %s", err, holon.CodeStoreUnavailable)
	}
}
