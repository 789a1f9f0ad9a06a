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
					{Account: "a", Amount: -journal.Amount(i + 1)}, {Account: "b", Amount: journal.Amount(i + 1)}}}
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
