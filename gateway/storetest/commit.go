package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"holon.dev/holon"
	"holon.dev/holon/journal"
)

func init() {
	add(
		behaviour{"Commit/FailingUpdatesAreIsolated", testFailingUpdatesIsolated},
		behaviour{"Commit/PanicIsTheUpdatesError", testPanicIsAnError},
		behaviour{"Commit/ApplyThenWait", testApplyThenWait},
		behaviour{"Commit/ApplyOfAFailingUpdate", testApplyFailing},
		behaviour{"Commit/UpdateAfterCloseIsErrClosed", testUpdateAfterClose},
		behaviour{"Commit/CloseKeepsWhatReturned", testCloseKeepsWhatReturned},
		behaviour{"Commit/UpdatesRacingCloseReturn", testUpdatesRacingClose},
	)
}

// gate holds an update open until released, so that the updates submitted
// meanwhile pile up behind it (a store that groups commits then batches
// them together, with the failing ones among them).
type gate struct {
	open chan struct{}
	done chan error
}

// closeGate starts the holding update and returns once it runs.
func closeGate(e *env) *gate {
	g := &gate{open: make(chan struct{}), done: make(chan error, 1)}
	entered := make(chan struct{})
	var once sync.Once
	go func() {
		g.done <- e.s.Update(context.Background(), func(holon.Tx) error {
			once.Do(func() { close(entered) })
			<-g.open // closed for good: a replay does not wait
			return nil
		})
	}()
	<-entered
	return g
}

// release lets the holding update finish once started goroutines have
// begun their update, after a moment for them to be queued.
func (g *gate) release(t *testing.T, started *atomic.Int64, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for started.Load() < int64(n) && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(20 * time.Millisecond)
	close(g.open)
	if err := <-g.done; err != nil {
		t.Fatalf("the holding update: %v", err)
	}
}

// Ensure that among many concurrent updates, some of which return an error
// or panic after writing everywhere, each failing one returns its own error
// and leaves nothing, and every other one is committed whole.
func testFailingUpdatesIsolated(t *testing.T, e *env) {
	const n = 200
	fails := func(i int) bool { return i%10 == 0 }
	panics := func(i int) bool { return i%50 == 0 }
	g := closeGate(e)
	var started atomic.Int64
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			started.Add(1)
			errs[i] = e.s.Update(context.Background(), func(tx holon.Tx) error {
				if err := writeEverywhere(tx, i); err != nil {
					return err
				}
				switch {
				case panics(i):
					panic(fmt.Sprintf("boom %d", i))
				case fails(i):
					return refused(i)
				}
				return nil
			})
		}()
	}
	g.release(t, &started, n)
	wg.Wait()
	ok := 0
	for i, err := range errs {
		switch {
		case panics(i):
			if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("boom %d", i)) {
				t.Errorf("update %d panicked, got error %v", i, err)
			}
		case fails(i):
			if !errors.Is(err, errRefused) || !strings.Contains(err.Error(), fmt.Sprintf("update %d:", i)) {
				t.Errorf("update %d failed, got error %v", i, err)
			}
		case err != nil:
			t.Errorf("update %d: %v", i, err)
		default:
			ok++
		}
	}
	if want := n - n/10; ok != want {
		t.Errorf("%d updates committed, want %d", ok, want)
	}
	e.view(func(tx holon.Tx) error {
		for i := range n {
			if seen := writesSeen(tx, i); seen != nil && fails(i) {
				t.Errorf("update %d failed, yet its writes are visible: %v", i, seen)
			} else if !fails(i) && len(seen) != everywhere {
				t.Errorf("update %d committed, but only %v of its %d writes are visible", i, seen, everywhere)
			}
		}
		page, err := tx.Receipts("", "", 2*n)
		if err != nil {
			return err
		}
		if len(page.Receipts) != ok {
			t.Errorf("%d receipts, want %d", len(page.Receipts), ok)
		}
		for _, r := range page.Receipts {
			var i int
			fmt.Sscanf(r.Mandate, "m%d", &i)
			if fails(i) {
				t.Errorf("receipt %s of failing update %d is visible", r.ID, i)
			}
		}
		return nil
	})
	if got, want := e.account("bob"), (holon.Account{Balance: amt("0.01") * 180, Held: amt("0.01") * 180}); got != want {
		t.Errorf("bob = %+v, want %+v", got, want)
	}
}

// everywhere is the number of writes writeEverywhere makes.
const everywhere = 7

// writeEverywhere makes update i write one of each kind of record.
func writeEverywhere(tx holon.Tx, i int) error {
	id, err := tx.NewReceiptID()
	if err != nil {
		return err
	}
	m := fmt.Sprintf("m%d", i)
	if err := tx.PutReceipt(&holon.Receipt{ID: id, Mandate: m, Status: holon.StatusSucceeded}); err != nil {
		return err
	}
	entry, err := journal.Transfer(fmt.Sprintf("admin-credit:%d", i), "external:demo-credit", "bob", amt("0.01"))
	if err != nil {
		return err
	}
	if _, err := tx.AppendEntry(entry); err != nil {
		return err
	}
	if err := tx.PutMandate(m, holon.Doc{Doc: json.RawMessage(`{}`)}); err != nil {
		return err
	}
	if _, err := tx.AddCounter("c"+m, 1); err != nil {
		return err
	}
	if err := tx.AddBudget(m, amt("0.01"), 0); err != nil {
		return err
	}
	if err := tx.PutHold(&holon.Hold{Receipt: "h" + m, Payer: "bob", Mandate: m}); err != nil {
		return err
	}
	if err := tx.Put(holon.BucketSettings, m, map[string]int{"i": i}); err != nil {
		return err
	}
	return tx.AddHeld("bob", amt("0.01"))
}

// writesSeen lists which of update i's writes a transaction sees (nil when
// none).
func writesSeen(tx holon.Tx, i int) []string {
	m := fmt.Sprintf("m%d", i)
	var seen []string
	if tx.HasEntry(fmt.Sprintf("admin-credit:%d", i)) {
		seen = append(seen, "entry")
	}
	if _, err := tx.Mandate(m); err == nil {
		seen = append(seen, "mandate")
	}
	if tx.Counter("c"+m) == 1 {
		seen = append(seen, "counter")
	}
	if b, err := tx.Budget(m); err == nil && b.Spent == amt("0.01") {
		seen = append(seen, "budget")
	}
	if _, err := tx.Hold("h" + m); err == nil {
		seen = append(seen, "hold")
	}
	var doc map[string]int
	if err := tx.Get(holon.BucketSettings, m, &doc); err == nil && doc["i"] == i {
		seen = append(seen, "document")
	}
	if page, err := tx.Receipts(m, "", 10); err == nil && len(page.Receipts) == 1 {
		seen = append(seen, "receipt")
	}
	return seen
}

// Ensure that an update that panics returns an error naming the panic, and
// that the store goes on committing.
func testPanicIsAnError(t *testing.T, e *env) {
	err := e.s.Update(context.Background(), func(tx holon.Tx) error {
		if _, err := tx.AddCounter("c", 1); err != nil {
			return err
		}
		panic("boom alone")
	})
	if err == nil || !strings.Contains(err.Error(), "boom alone") {
		t.Errorf("Update that panicked: %v, want an error naming the panic", err)
	}
	e.update(func(tx holon.Tx) error { _, err := tx.AddCounter("d", 1); return err })
	if c, d := e.counter("c"), e.counter("d"); c != 0 || d != 1 {
		t.Errorf("counters c %d, d %d; want 0, 1", c, d)
	}
}

// Ensure that Apply returns a Commit once its update is applied, that an
// update submitted after Apply returned sees its writes, and that Wait
// returns nil once the update is durable, to any number of callers, any
// number of times.
func testApplyThenWait(t *testing.T, e *env) {
	c, err := e.s.Apply(context.Background(), func(tx holon.Tx) error {
		_, err := tx.AppendEntry(transfer(t, "admin-credit:apply", "external:demo-credit", "ann", "0.02"))
		return err
	})
	if err != nil || c == nil {
		t.Fatalf("Apply = %v, %v; want a Commit", c, err)
	}
	var seen bool
	e.update(func(tx holon.Tx) error { seen = tx.HasEntry("admin-credit:apply"); return nil })
	if !seen {
		t.Error("an update submitted after Apply returned does not see its writes")
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 3 {
				if err := c.Wait(); err != nil {
					t.Errorf("Commit.Wait: %v", err)
				}
			}
		}()
	}
	wg.Wait()
	if a := e.account("ann"); a.Balance != amt("0.02") {
		t.Errorf("ann = %s after the Apply, want 0.02 (applied once)", a.Balance)
	}
	e.reopen()
	if a := e.account("ann"); a.Balance != amt("0.02") {
		t.Errorf("ann = %s after a reopen, want 0.02: Wait returned before the update was durable", a.Balance)
	}
}

// Ensure that Apply of an update that fails or panics returns its error
// and leaves nothing.
func testApplyFailing(t *testing.T, e *env) {
	for i, fn := range []func(holon.Tx) error{
		func(tx holon.Tx) error {
			if _, err := tx.AppendEntry(transfer(t, "admin-credit:0", "external:demo-credit", "ann", "1.00")); err != nil {
				return err
			}
			return refused(0)
		},
		func(tx holon.Tx) error {
			if _, err := tx.AppendEntry(transfer(t, "admin-credit:1", "external:demo-credit", "ann", "1.00")); err != nil {
				return err
			}
			panic("boom in Apply")
		},
	} {
		c, err := e.s.Apply(context.Background(), fn)
		if err == nil {
			t.Errorf("Apply %d of a failing update: no error (commit %v)", i, c)
		}
		if i == 0 && !errors.Is(err, errRefused) {
			t.Errorf("Apply of a failing update: %v, want its own error", err)
		}
	}
	e.view(func(tx holon.Tx) error {
		if tx.HasEntry("admin-credit:0") || tx.HasEntry("admin-credit:1") {
			t.Error("a failed Apply left its entry")
		}
		return nil
	})
	if a := e.account("ann"); a.Balance != 0 {
		t.Errorf("ann = %s, want 0", a.Balance)
	}
}

// Ensure that Update and Apply after Close return holon.ErrClosed and run
// nothing.
func testUpdateAfterClose(t *testing.T, e *env) {
	s := e.s
	e.close()
	var ran atomic.Bool
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := s.Update(context.Background(), func(holon.Tx) error { ran.Store(true); return nil }); !errors.Is(err, holon.ErrClosed) {
			t.Errorf("Update after Close: %v, want ErrClosed", err)
		}
		if c, err := s.Apply(context.Background(), func(holon.Tx) error { ran.Store(true); return nil }); !errors.Is(err, holon.ErrClosed) {
			t.Errorf("Apply after Close: %v, %v; want ErrClosed", c, err)
		}
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("an update after Close has not returned after 10 s")
	}
	if ran.Load() {
		t.Error("an update ran after Close")
	}
}

// Ensure that every update that returned nil is in the store when it is
// opened again: those queued when Close began (which Close waits for) and
// those racing with it.
func testCloseKeepsWhatReturned(t *testing.T, e *env) {
	const n = 100
	g := closeGate(e)
	var started, committed atomic.Int64
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			started.Add(1)
			err := e.s.Update(context.Background(), func(tx holon.Tx) error {
				_, err := tx.AddCounter("drained", 1)
				return err
			})
			switch {
			case err == nil:
				committed.Add(1)
			case !errors.Is(err, holon.ErrClosed):
				t.Errorf("update queued before Close: %v, want nil or ErrClosed", err)
			}
		}()
	}
	for started.Load() < n {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(20 * time.Millisecond)
	closed := make(chan error, 1)
	go func() { closed <- e.s.Close() }()
	time.Sleep(20 * time.Millisecond) // Close has begun: now let the queue go
	close(g.open)
	if err := <-g.done; err != nil {
		t.Errorf("the holding update: %v", err)
	}
	if err := <-closed; err != nil {
		t.Fatalf("close: %v", err)
	}
	e.s = nil
	wg.Wait()
	e.reopen()
	if got := e.counter("drained"); got != uint64(committed.Load()) {
		t.Errorf("drained = %d after a reopen, but %d updates returned nil", got, committed.Load())
	}
	t.Logf("%d of %d updates committed", committed.Load(), n)
}

// Ensure that updates racing with Close all return, committed or
// ErrClosed, and never hang.
func testUpdatesRacingClose(t *testing.T, e *env) {
	for round := range 10 {
		s := e.s
		var wg sync.WaitGroup
		for range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					err := s.Update(context.Background(), func(holon.Tx) error { return nil })
					if errors.Is(err, holon.ErrClosed) {
						return
					}
					if err != nil {
						t.Errorf("update racing Close: %v", err)
						return
					}
				}
			}()
		}
		time.Sleep(time.Millisecond)
		e.close()
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatalf("round %d: an Update still waits 10 s after Close", round)
		}
		e.reopen()
	}
}
