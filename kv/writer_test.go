package kv_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"holon.dev/holon"
	"holon.dev/holon/journal"
	"holon.dev/holon/kv"
)

// batchInOrder submits fns as updates behind a gate, each once the one
// before it is queued, so that they share one batch in this order, and
// returns their errors once every one is answered.
func batchInOrder(tb testing.TB, s *kv.Store, fns []func(*kv.Tx) error) []error {
	tb.Helper()
	return queueInOrder(tb, s, fns)()
}

// queueInOrder queues fns as batchInOrder does, and returns the function
// that opens the gate and returns their errors once every one is answered.
func queueInOrder(tb testing.TB, s *kv.Store, fns []func(*kv.Tx) error) (release func() []error) {
	tb.Helper()
	g := closeGate(tb, s)
	errs := make([]error, len(fns))
	var wg sync.WaitGroup
	for i, fn := range fns {
		queued := s.QueuedForTest()
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = s.Update(context.Background(), fn)
		}()
		deadline := time.Now().Add(10 * time.Second)
		for s.QueuedForTest() == queued {
			if time.Now().After(deadline) {
				tb.Fatalf("update %d was not queued", i)
			}
			runtime.Gosched()
		}
	}
	return func() []error {
		g.release(tb, s, len(fns))
		wg.Wait()
		return errs
	}
}

// failingHalf returns n updates of round whose odd ones fail (or panic,
// when panics): each writes a journal entry to bob and a counter, and an
// odd one also a mandate, before it fails. runs[i] counts the runs of
// update i.
func failingHalf(tb testing.TB, round, n int, runs []atomic.Int32, panics bool) []func(*kv.Tx) error {
	tb.Helper()
	fns := make([]func(*kv.Tx) error, n)
	for i := range n {
		e := transfer(tb, fmt.Sprintf("admin-credit:%d:%d", round, i), "external:demo-credit", "bob", "0.01")
		fns[i] = func(tx *kv.Tx) error {
			runs[i].Add(1)
			if _, err := tx.AppendEntry(e); err != nil {
				return err
			}
			if _, err := tx.AddCounter(fmt.Sprintf("c%d:%d", round, i), 1); err != nil {
				return err
			}
			if i%2 == 0 {
				return nil
			}
			if err := tx.PutMandate(fmt.Sprintf("m%d:%d", round, i), holon.Doc{Doc: json.RawMessage(`{}`)}); err != nil {
				return err
			}
			if panics {
				panic(fmt.Sprintf("update %d: boom", i))
			}
			return fmt.Errorf("update %d: %w", i, errRefused)
		}
	}
	return fns
}

// Ensure that in a batch where every other update fails (or panics), each
// update runs at most twice, every good one is committed, and every bad one
// gets its own error and leaves nothing written; and that failures, unlike
// panics, cost neither a replay nor a commit of their own.
func TestStore_Update_FailingHalf(t *testing.T) {
	for _, panics := range []bool{false, true} {
		t.Run(map[bool]string{false: "fails", true: "panics"}[panics], func(t *testing.T) {
			testFailingHalf(t, panics)
		})
	}
}

func testFailingHalf(t *testing.T, panics bool) {
	const n = 255
	s := mustOpen(t, kv.Options{NoSync: true})
	runs := make([]atomic.Int32, n)
	errs := batchInOrder(t, s, failingHalf(t, 0, n, runs, panics))

	total := 0
	for i := range runs {
		r := int(runs[i].Load())
		total += r
		if r > 2 {
			t.Errorf("update %d ran %d times, want at most 2", i, r)
		}
	}
	st := s.Stats()
	t.Logf("%d runs of %d updates; stats: %+v", total, n, st)
	if total > 2*n {
		t.Errorf("%d runs of %d updates, want at most %d", total, n, 2*n)
	}
	good := 0
	for i, err := range errs {
		switch {
		case i%2 == 0 && err != nil:
			t.Errorf("good update %d: %v", i, err)
		case i%2 == 0:
			good++
		case panics && (err == nil || !strings.Contains(err.Error(), fmt.Sprintf("panicked: update %d: boom", i))):
			t.Errorf("panicking update %d: got error %v, want its own", i, err)
		case !panics && (!errors.Is(err, errRefused) || !strings.Contains(err.Error(), fmt.Sprintf("update %d:", i))):
			t.Errorf("failing update %d: got error %v, want its own", i, err)
		}
	}
	if st.Updates != uint64(good+1) { // the gate's update counts too
		t.Errorf("Stats.Updates = %d, want %d", st.Updates, good+1)
	}
	if !panics && (st.Commits != 2 || st.Replays != 0 || st.Undone != n/2) {
		t.Errorf("Stats = %+v, want the gate's commit and one of the batch, no replay, %d undone", st, n/2)
	}
	mustView(t, s, func(tx *kv.Tx) error {
		for i := range n {
			_, mErr := tx.Mandate(fmt.Sprintf("m0:%d", i))
			written := []bool{tx.HasEntry(fmt.Sprintf("admin-credit:0:%d", i)), tx.Counter(fmt.Sprintf("c0:%d", i)) == 1, mErr == nil}
			for j, w := range written {
				// A good update writes no mandate.
				if want := i%2 == 0 && j < 2; w != want {
					t.Errorf("update %d (failing: %v): write %d visible: %v", i, i%2 == 1, j, w)
				}
			}
		}
		return nil
	})
	if got, want := balance(t, s, "bob"), amt("0.01")*journal.Amount(good); got != want {
		t.Errorf("bob = %s, want %s", got, want)
	}
}

// TestStore_Expect_Paces checks the writer's pacing: woken with one update
// while four callers are in flight (Expect), it waits for the other three
// and commits the four together; a lone caller in flight is never waited
// for, however long the pace; and an update whose expected neighbours do
// not come is held no longer than the pace.
func TestStore_Expect_Paces(t *testing.T) {
	s := mustOpen(t, kv.Options{Pace: time.Hour})
	noop := func(*kv.Tx) error { return nil }

	// A lone caller: with an hour's pace, this returns only if not waited for.
	done := s.Expect()
	mustUpdate(t, s, noop)
	done()

	before := s.Stats()
	var dones []func()
	for range 4 {
		dones = append(dones, s.Expect())
	}
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := s.Update(context.Background(), noop); err != nil {
				t.Error(err)
			}
			dones[i]()
		}()
		if i == 0 {
			// The writer wakes with this one alone, and waits.
			time.Sleep(20 * time.Millisecond)
		}
	}
	wg.Wait()
	after := s.Stats()
	if commits, updates := after.Commits-before.Commits, after.Updates-before.Updates; commits != 1 || updates != 4 {
		t.Errorf("four callers in flight: %d updates in %d commits, want 4 in 1", updates, commits)
	}

	// Bounded: two in flight, one submits and the other never does.
	b := mustOpen(t, kv.Options{Pace: 50 * time.Millisecond})
	d1, d2 := b.Expect(), b.Expect()
	defer d2()
	mustUpdate(t, b, noop)
	d1()
}
