package pg_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"holon.dev/holon"
	"holon.dev/holon/gateway"
	"holon.dev/holon/gateway/storetest"
	"holon.dev/holon/journal"
	"holon.dev/holon/kv/pg"
)

// admit writes what the engine writes when it admits a call: a running
// receipt, the payer's hold, the mandate's reservation, the hold record.
func admit(t *testing.T, s holon.Store, price string) string {
	t.Helper()
	var id string
	amount := journal.MustParseAmount(price)
	err := s.Update(context.Background(), func(tx holon.Tx) (err error) {
		if id, err = tx.NewReceiptID(); err != nil {
			return err
		}
		agent := "acme/tool@1.0.0"
		if err := tx.PutReceipt(&holon.Receipt{ID: id, Mandate: "bob/main", Caller: "bob/assistant", Agent: &agent,
			Status: holon.StatusRunning, WorstCase: &amount, Currency: "EUR", Payer: "bob", Created: tx.Now()}); err != nil {
			return err
		}
		if err := tx.AddHeld("bob", amount); err != nil {
			return err
		}
		if err := tx.AddBudget("bob/main", 0, amount); err != nil {
			return err
		}
		return tx.PutHold(&holon.Hold{Receipt: id, Payer: "bob", Amount: amount, Mandate: "bob/main", Reserved: amount, Started: tx.Now()})
	})
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// Ensure that a gateway closes only the calls in flight of gateways that
// are gone: not those of a running gateway, nor its own, nor a dead
// gateway's before its lease ran out; once it has, they are failed
// gateway_restarted, unbilled, their holds and reservations released.
func TestRecover_OnlyDeadGatewaysCalls(t *testing.T) {
	dbs := newDatabases(t)
	url := dbs.url(t, "leases")
	ctx := context.Background()
	const lease = time.Second
	open := func() *pg.Store {
		s, err := pg.OpenWith(ctx, url, holon.StoreOptions{}, pg.Options{Lease: lease})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	a, b := open(), open()
	defer b.Close()
	(&dbsEnv{t, b}).credit("signup:bob", "bob", "5.00")
	ofA, ofB := admit(t, a, "0.50"), admit(t, b, "0.20")
	engine := gateway.New(gateway.Config{Store: b})

	recover := func(want int) {
		t.Helper()
		n, err := engine.Recover(ctx)
		if err != nil || n != want {
			t.Fatalf("Recover closed %d calls (%v), want %d", n, err, want)
		}
	}
	recover(0) // a runs, and b's own call is b's
	a.Kill()
	recover(0) // a's lease has not run out
	time.Sleep(lease + 200*time.Millisecond)
	recover(1)
	recover(0) // closed once

	err := b.View(func(tx holon.Tx) error {
		r, err := tx.Receipt(ofA)
		if err != nil {
			return err
		}
		if r.Status != holon.StatusFailed || r.Error == nil || *r.Error != holon.CodeGatewayRestarted || r.Billed {
			t.Errorf("the dead gateway's call: %s %v billed=%v", r.Status, r.Error, r.Billed)
		}
		if _, err := tx.Hold(ofA); !errors.Is(err, holon.ErrNotFound) {
			t.Errorf("its hold: %v, want gone", err)
		}
		if _, err := tx.Hold(ofB); err != nil {
			t.Errorf("the running gateway's hold: %v", err)
		}
		acct, err := tx.Account("bob")
		if err != nil {
			return err
		}
		if acct.Held != journal.MustParseAmount("0.20") {
			t.Errorf("bob holds %s, want only the running call's 0.20", acct.Held)
		}
		bu, err := tx.Budget("bob/main")
		if bu.Reserved != journal.MustParseAmount("0.20") {
			t.Errorf("bob/main reserves %s, want 0.20", bu.Reserved)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	storetest.CheckMoney(t, b, storetest.AllowHolds)
}

// dbsEnv journals credits on a store.
type dbsEnv struct {
	t *testing.T
	s holon.Store
}

func (e *dbsEnv) credit(key, account, amount string) {
	e.t.Helper()
	entry, err := journal.Transfer(key, "external:demo-credit", account, journal.MustParseAmount(amount))
	if err != nil {
		e.t.Fatal(err)
	}
	if err := e.s.Update(context.Background(), func(tx holon.Tx) error { _, err := tx.AppendEntry(entry); return err }); err != nil {
		e.t.Fatal(err)
	}
}
