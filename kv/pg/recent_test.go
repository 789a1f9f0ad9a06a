package pg_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"holon.dev/holon"
	"holon.dev/holon/backup/pgtest"
	"holon.dev/holon/journal"
	"holon.dev/holon/kv/pg"
)

// move journals amount from one account to another.
func move(s holon.Store, key, from, to string, amount journal.Amount) error {
	return s.Update(context.Background(), func(tx holon.Tx) error {
		_, err := tx.AppendEntry(journal.Entry{Key: key, Lines: []journal.Line{
			{Account: from, Amount: -amount}, {Account: to, Amount: amount}}})
		return err
	})
}

// recentBalances reads accounts external:x and external:y (which may go
// below zero) in a recent view.
func recentBalances(t *testing.T, s *pg.Store, maxAge time.Duration) (x, y journal.Amount, ok bool) {
	t.Helper()
	ok, err := s.ViewRecent(maxAge, func(tx holon.Tx) error {
		a, err := tx.Account("external:x")
		if err != nil {
			return err
		}
		b, err := tx.Account("external:y")
		x, y = a.Balance, b.Balance
		return err
	})
	if err != nil {
		t.Fatalf("ViewRecent: %v", err)
	}
	return x, y, ok
}

// Ensure that a recent view answers from what the store's writer last saw
// committed, with no round trip: every update the store answered, and the
// other gateways' commits up to the writer's last turn; that it declines
// (ok false, fn stopped at the read) a row the writer does not keep, a
// scan, and a state older than asked for.
func TestStore_ViewRecent(t *testing.T) {
	turns(t)
	url := pgtest.Start(t).CreateDB(t, "recent")
	s, err := pg.Open(context.Background(), url, holon.StoreOptions{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	other, err := pg.Open(context.Background(), url, holon.StoreOptions{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()

	if err := move(s, "e1", "external:x", "external:y", 5); err != nil {
		t.Fatal(err)
	}
	if x, y, ok := recentBalances(t, s, time.Minute); !ok || x != -5 || y != 5 {
		t.Errorf("after its own update: x %s y %s ok %v; want -0.000005, 0.000005, true", x, y, ok)
	}

	// A row the writer never read or wrote, and a scan: fn is stopped there.
	for name, read := range map[string]func(holon.Tx) error{
		"an account never read": func(tx holon.Tx) error { _, err := tx.Account("external:z"); return err },
		"a page of receipts":    func(tx holon.Tx) error { _, err := tx.Receipts("", "", 10); return err },
	} {
		after := false
		ok, err := s.ViewRecent(time.Minute, func(tx holon.Tx) error {
			if err := read(tx); err != nil {
				return err
			}
			after = true
			return nil
		})
		if ok || err != nil || after {
			t.Errorf("%s: ok %v err %v, fn went on %v; want declined, fn stopped at the read", name, ok, err, after)
		}
	}

	// Older than asked for.
	time.Sleep(5 * time.Millisecond)
	if _, _, ok := recentBalances(t, s, time.Millisecond); ok {
		t.Error("a recent view served a state older than its maxAge")
	}

	// Another gateway's commit: seen once this store's writer has had a
	// turn since, and never half.
	if err := move(other, "e2", "external:x", "external:y", 7); err != nil {
		t.Fatal(err)
	}
	if x, y, ok := recentBalances(t, s, time.Minute); !ok || x+y != 0 || (x != -5 && x != -12) {
		t.Errorf("before its writer's turn: x %s y %s ok %v; want one committed state", x, y, ok)
	}
	if err := s.Update(context.Background(), func(tx holon.Tx) error { _, err := tx.AddCounter("turn", 1); return err }); err != nil {
		t.Fatal(err)
	}
	if x, y, ok := recentBalances(t, s, time.Minute); !ok || x != -12 || y != 12 {
		t.Errorf("after its writer's turn: x %s y %s ok %v; want -0.000012, 0.000012, true", x, y, ok)
	}
	if r := s.Reads(); r.Recent != 3 || r.Stale != 1 || r.Missed != 2 {
		t.Errorf("Reads: %d recent views served, %d stale, %d missed; want 3, 1, 2", r.Recent, r.Stale, r.Missed)
	}
}

// Ensure that recent views read one committed state while two gateways'
// writers move money between three accounts: the balances they see always
// sum to what was moved out of them first (run with -race: the writer
// changes what they read).
func TestStore_ViewRecent_OneState(t *testing.T) {
	turns(t)
	url := pgtest.Start(t).CreateDB(t, "recentstate")
	var stores []*pg.Store
	for range 2 {
		s, err := pg.Open(context.Background(), url, holon.StoreOptions{NoSync: true})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		stores = append(stores, s)
	}
	accounts := []string{"external:x", "external:y", "external:z"}
	for _, a := range accounts {
		if err := move(stores[0], "seed"+a, a, "w", 1); err != nil {
			t.Fatal(err)
		}
	}
	// The other writer's turn: it reads the seeds' values from the log.
	if err := stores[1].Update(context.Background(), func(tx holon.Tx) error { _, err := tx.AddCounter("turn", 1); return err }); err != nil {
		t.Fatal(err)
	}
	var stop atomic.Bool
	var n atomic.Int64
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; !stop.Load(); i++ {
				p := rand.Perm(3)
				if err := move(stores[w%2], fmt.Sprintf("w%d-%d", w, i), accounts[p[0]], accounts[p[1]], journal.Amount(1+rand.IntN(100))); err != nil {
					t.Error(err)
					return
				}
				n.Add(1)
			}
		}()
	}
	served := 0
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) {
		for _, s := range stores {
			var sum journal.Amount
			ok, err := s.ViewRecent(time.Second, func(tx holon.Tx) error {
				sum = 0
				for _, a := range accounts {
					acct, err := tx.Account(a)
					if err != nil {
						return err
					}
					sum += acct.Balance
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if ok {
				served++
				if sum != -3 {
					t.Fatalf("a recent view saw the balances sum to %s, want -0.000003", sum)
				}
			}
		}
	}
	stop.Store(true)
	wg.Wait()
	if served < 100 || n.Load() < 100 {
		t.Errorf("%d recent views served beside %d moves: want many of each", served, n.Load())
	}
	t.Logf("%d recent views served beside %d moves", served, n.Load())
}
