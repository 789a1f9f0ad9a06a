package pg_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"holon.dev/holon"
	"holon.dev/holon/backup/pgtest"
	"holon.dev/holon/journal"
	"holon.dev/holon/kv/pg"
)

// Ensure that updates grouped into one transaction, every other one
// failing after it journaled an entry and took a receipt id, leave the
// journal's chain whole and hand out no id twice: what a failed update
// moved (the journal's head and sequence, the counters, the receipt
// sequence) is forgotten with it, by the database and by the writer's
// group cache alike.
func TestStore_GroupCacheForgetsFailedUpdates(t *testing.T) {
	url := pgtest.Start(t).CreateDB(t, "cache")
	s, err := pg.Open(context.Background(), url, holon.StoreOptions{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	errRefused := errors.New("refused after writing")
	var mu sync.Mutex
	ids := map[string]bool{}
	var wg sync.WaitGroup
	for i := range 200 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var id string
			err := s.Update(context.Background(), func(tx holon.Tx) (err error) {
				if id, err = tx.NewReceiptID(); err != nil {
					return err
				}
				e := journal.Entry{Key: fmt.Sprintf("k%d", i), Lines: []journal.Line{
					{Account: "external:a", Amount: -journal.Amount(i + 1)}, {Account: "b", Amount: journal.Amount(i + 1)}}}
				if _, err := tx.AppendEntry(e); err != nil {
					return err
				}
				if _, err := tx.AddCounter("n", 1); err != nil {
					return err
				}
				if i%2 == 1 {
					return errRefused
				}
				return nil
			})
			if i%2 == 1 {
				if !errors.Is(err, errRefused) {
					t.Errorf("update %d: %v, want it refused", i, err)
				}
				return
			}
			if err != nil {
				t.Errorf("update %d: %v", i, err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			if ids[id] {
				t.Errorf("receipt id %s handed out twice", id)
			}
			ids[id] = true
		}()
	}
	wg.Wait()
	st := s.Stats()
	if st.Updates <= st.Commits {
		t.Logf("no group held two updates (%d updates, %d commits): the test did not reach the cache", st.Updates, st.Commits)
	}
	err = s.View(func(tx holon.Tx) error {
		if n := tx.Counter("n"); n != 100 {
			return fmt.Errorf("counter n is %d, want 100", n)
		}
		return tx.(*pg.Tx).VerifyJournal()
	})
	if err != nil {
		t.Error(err)
	}
	if st.MaxBatch < 2 {
		t.Errorf("the largest group held %d updates: the test needs groups", st.MaxBatch)
	}
}

// Ensure that what one handle changed is what another handle's writer
// computes from, although that writer had the rows cached: handle A holds
// on an account, journals an entry and moves a budget (caching all three);
// handle B moves each of them; A moves each again, and the database ends
// with both handles' moves. A key B journaled is refused to A.
func TestStore_CacheFollowsOtherWriters(t *testing.T) {
	url := pgtest.Start(t).CreateDB(t, "others")
	open := func() *pg.Store {
		s, err := pg.Open(context.Background(), url, holon.StoreOptions{NoSync: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	a, b := open(), open()
	bg := context.Background()
	move := func(s *pg.Store, key string) error {
		return s.Update(bg, func(tx holon.Tx) error {
			if err := tx.AddHeld("bob", 1); err != nil {
				return err
			}
			if err := tx.AddBudget("m", 2, 3); err != nil {
				return err
			}
			_, err := tx.AppendEntry(journal.Entry{Key: key, Lines: []journal.Line{{Account: "external:ext", Amount: -5}, {Account: "bob", Amount: 5}}})
			return err
		})
	}
	for i, s := range []*pg.Store{a, b, a, b, a} {
		if err := move(s, fmt.Sprintf("k%d", i)); err != nil {
			t.Fatalf("move %d: %v", i, err)
		}
	}
	if err := move(a, "k3"); !errors.Is(err, holon.ErrDuplicateKey) {
		t.Errorf("a key the other handle journaled: %v, want ErrDuplicateKey", err)
	}
	err := a.View(func(tx holon.Tx) error {
		acct, err := tx.Account("bob")
		if err != nil {
			return err
		}
		bud, err := tx.Budget("m")
		if err != nil {
			return err
		}
		if acct.Held != 5 || acct.Balance != 25 || bud.Spent != 10 || bud.Reserved != 15 || tx.Counter("journal_entries") != 5 {
			return fmt.Errorf("bob %+v, budget %+v, %d entries; want held 5, balance 25, spent 10, reserved 15, 5 entries",
				acct, bud, tx.Counter("journal_entries"))
		}
		return tx.(*pg.Tx).VerifyJournal()
	})
	if err != nil {
		t.Error(err)
	}
}

// Ensure that an update whose write is refused when a later update of its
// group sends it fails alone: the updates after it in the group run again
// and commit, the journal's chain stays whole. The refused write is a
// journal key another handle used (a writer learns it only from the
// table's unique key: the other handle used it before this one started),
// grouped with updates that make round trips.
func TestStore_RefusedWriteFailsItsUpdateAlone(t *testing.T) {
	stores, open := openOn(t, "refused", 1)
	b := stores[0]
	bg := context.Background()
	entry := func(key string) journal.Entry {
		return journal.Entry{Key: key, Lines: []journal.Line{{Account: "external:ext", Amount: -1}, {Account: "ann", Amount: 1}}}
	}
	const n = 60
	for i := 0; i < n; i += 3 {
		if err := b.Update(bg, func(tx holon.Tx) error { _, err := tx.AppendEntry(entry(fmt.Sprintf("used%d", i))); return err }); err != nil {
			t.Fatal(err)
		}
	}
	a := open()
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = a.Update(bg, func(tx holon.Tx) error {
				if i%3 == 0 {
					// No round trip of its own: its entry waits for the
					// next update's.
					_, err := tx.AppendEntry(entry(fmt.Sprintf("used%d", i)))
					return err
				}
				if _, err := tx.AppendEntry(entry(fmt.Sprintf("new%d", i))); err != nil {
					return err
				}
				// A read no cache answers: the group's pending writes go
				// with it.
				_, err := tx.Receipts("", "", 1)
				return err
			})
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if i%3 == 0 && !errors.Is(err, holon.ErrDuplicateKey) {
			t.Errorf("update %d (a used key): %v, want ErrDuplicateKey", i, err)
		}
		if i%3 != 0 && err != nil {
			t.Errorf("update %d: %v", i, err)
		}
	}
	err := a.View(func(tx holon.Tx) error {
		if c, acct := tx.Counter("journal_entries"), must(tx.Account("ann")); c != n || acct.Balance != n {
			return fmt.Errorf("%d entries, ann %s; want %d and %d micro-units", c, acct.Balance, n, n)
		}
		return tx.(*pg.Tx).VerifyJournal()
	})
	if err != nil {
		t.Error(err)
	}
	if st := a.Stats(); st.MaxBatch < 2 {
		t.Logf("the largest group held %d updates: the test did not reach a refusal in another update's round trip", st.MaxBatch)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// Ensure that a version's latency and earnings, which the writer keeps
// decoded between calls (memo.go), count what every handle added: A and B
// add in turns, A after B must start from B's document, not from the one
// A wrote last; and a value read and changed by an update that then fails
// changes nothing kept.
func TestStore_HotDocumentsFollowOtherWriters(t *testing.T) {
	stores, _ := openOn(t, "hotdocs", 2)
	a, b := stores[0], stores[1]
	bg := context.Background()
	add := func(s *pg.Store, ms int64) error {
		return s.Update(bg, func(tx holon.Tx) error {
			if err := tx.AddLatency("acme/echo@1.0.0", ms); err != nil {
				return err
			}
			return tx.AddEarnings("acme/echo@1.0.0", "EUR", 1, 10, 0)
		})
	}
	for i, s := range []*pg.Store{a, a, b, a, b, b, a} {
		if err := add(s, int64(i)); err != nil {
			t.Fatalf("add %d: %v", i, err)
		}
	}
	spoil := errors.New("spoiled")
	if err := a.Update(bg, func(tx holon.Tx) error {
		l, err := tx.Latency("acme/echo@1.0.0")
		if err != nil {
			return err
		}
		l.Counts[0] += 1000
		e, err := tx.Earnings("acme/echo@1.0.0")
		if err != nil {
			return err
		}
		e["EUR"] = holon.Earned{PaidCalls: 1000}
		e["USD"] = holon.Earned{PaidCalls: 1}
		return spoil
	}); !errors.Is(err, spoil) {
		t.Fatalf("the spoiling update: %v", err)
	}
	if err := add(a, 1); err != nil {
		t.Fatal(err)
	}
	for name, s := range map[string]*pg.Store{"a": a, "b": b} {
		err := s.View(func(tx holon.Tx) error {
			l, err := tx.Latency("acme/echo@1.0.0")
			if err != nil {
				return err
			}
			var calls int64
			for _, n := range l.Counts {
				calls += n
			}
			e, err := tx.Earnings("acme/echo@1.0.0")
			if err != nil {
				return err
			}
			if calls != 8 || len(e) != 1 || e["EUR"].PaidCalls != 8 || e["EUR"].Own != 80 {
				return fmt.Errorf("latency %v (%d calls), earnings %+v; want 8 calls, 8 paid, 80 own, EUR only", l.Counts, calls, e)
			}
			return nil
		})
		if err != nil {
			t.Errorf("read through %s: %v", name, err)
		}
	}
}
