package pg_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"holon.dev/holon"
	"holon.dev/holon/journal"
	"holon.dev/holon/kv/pg"
)

// submit submits n updates of fn at once to s, fn told its update's
// number, and returns their errors, filled once wait returns.
func submit(s *pg.Store, n int, fn func(tx holon.Tx, i int) error) (errs []error, wait func()) {
	errs = make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = s.Update(context.Background(), func(tx holon.Tx) error { return fn(tx, i) })
		}()
	}
	return errs, wg.Wait
}

// burst runs n updates of fn at once on s, fn told its update's number,
// each expected to commit.
func burst(t *testing.T, s *pg.Store, n int, fn func(tx holon.Tx, i int) error) {
	t.Helper()
	errs, wait := submit(s, n, fn)
	wait()
	for _, err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
}

// heldUpdate submits fn to s as an update that, once fn has run without
// error, holds its writer (and the writers' lock) until release is
// called. It returns once the writer holds, with the update's outcome to
// come on done.
func heldUpdate(s *pg.Store, fn func(holon.Tx) error) (release func(), done <-chan error) {
	held, rel, out := make(chan struct{}, 1), make(chan struct{}), make(chan error, 1)
	go func() {
		out <- s.Update(context.Background(), func(tx holon.Tx) error {
			if err := fn(tx); err != nil {
				return err
			}
			select {
			case held <- struct{}{}:
			default:
			}
			<-rel
			return nil
		})
	}()
	<-held
	return func() { close(rel) }, out
}

// queuedBehind submits fn to s and returns once it waits in s's queue,
// with its outcome to come on done.
func queuedBehind(s *pg.Store, fn func(holon.Tx) error) (done <-chan error) {
	out := make(chan error, 1)
	go func() { out <- s.Update(context.Background(), fn) }()
	for pg.Queued(s) < 1 {
		time.Sleep(time.Millisecond)
	}
	return out
}

// Ensure that a writer alone on the database runs the updates that come
// while a COMMIT is in flight, on what that group leaves, and that what
// they computed is what commits: every move and every counter exact, the
// journal's chain whole. An update that needs a row the writer does not
// know drops such a run, whose updates then run as any others.
func TestStore_SpeculatesWhileCommitting(t *testing.T) {
	stores, _ := openOn(t, "speculates", 1)
	s := stores[0]
	burst(t, s, 400, func(tx holon.Tx, i int) error { return moveAnn(tx, fmt.Sprintf("a%d", i)) })
	groups, updates, _ := s.Speculated()
	if groups == 0 || updates == 0 {
		t.Fatalf("400 updates at once: no group ran while a COMMIT was in flight (%d commits)", s.Stats().Commits)
	}
	wantMoves(t, s, 400)

	// Each update reads a counter nobody read yet: from the database.
	_, _, dropped := s.Speculated()
	burst(t, s, 400, func(tx holon.Tx, i int) error {
		if n := tx.Counter(fmt.Sprintf("fresh%d", i)); n != 0 {
			return fmt.Errorf("counter fresh%d is %d before its first move", i, n)
		}
		if _, err := tx.AddCounter(fmt.Sprintf("fresh%d", i), 1); err != nil {
			return err
		}
		return moveAnn(tx, fmt.Sprintf("b%d", i))
	})
	if _, _, d := s.Speculated(); d == dropped {
		t.Errorf("updates that read rows the writer does not know: no run while a COMMIT was in flight was dropped")
	}
	wantMoves(t, s, 800)
	err := s.View(func(tx holon.Tx) error {
		for i := range 400 {
			if n := tx.Counter(fmt.Sprintf("fresh%d", i)); n != 1 {
				return fmt.Errorf("counter fresh%d is %d, want 1", i, n)
			}
		}
		return nil
	})
	if err != nil {
		t.Error(err)
	}
}

// Ensure that the run of an update queued while its writer's COMMIT is in
// flight is dropped when another writer takes the writers' lock as that
// COMMIT lets go of it: it ran on a state the other writer then changed,
// and it runs again after it, on the other writer's values. Kept, it
// would write ann's held amount and the counter as they were before the
// other writer's update, which would be lost (no constraint of the
// database would see it: neither row is journaled).
func TestStore_SpeculationDroppedWhenAnotherWrites(t *testing.T) {
	turns(t)
	stores, _ := openOn(t, "speculationdropped", 2)
	a, b := stores[0], stores[1]
	// Its held updates must hold the writers' lock too (NoWaitRuns).
	pg.NoWaitRuns(a)
	bg := context.Background()
	count := func(tx holon.Tx) error {
		if err := tx.AddHeld("ann", 1); err != nil {
			return err
		}
		_, err := tx.AddCounter("n", 1)
		return err
	}
	// Both writers know both rows.
	for _, s := range []*pg.Store{b, a} {
		if err := s.Update(bg, func(tx holon.Tx) error { return moveAnn(tx, fmt.Sprintf("%p", s)) }); err != nil {
			t.Fatal(err)
		}
		if err := s.Update(bg, count); err != nil {
			t.Fatal(err)
		}
	}
	release, doneA := heldUpdate(a, count) // a is alone and holds the writers' lock
	doneC := queuedBehind(a, count)
	doneB := make(chan error, 1)
	go func() { doneB <- b.Update(bg, count) }()
	waitForLockWaiters(t, a, 1)
	// a commits: its next update runs while the COMMIT is in flight, and
	// b, waiting, takes the lock as the COMMIT lets go of it.
	release()
	for _, done := range []<-chan error{doneA, doneB, doneC} {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	groups, _, dropped := a.Speculated()
	if dropped != 1 || groups != 0 {
		t.Errorf("runs while a COMMIT was in flight: %d stood, %d dropped; want the one dropped", groups, dropped)
	}
	err := a.View(func(tx holon.Tx) error {
		ann, err := tx.Account("ann")
		if err != nil {
			return err
		}
		if n := tx.Counter("n"); n != 5 || ann.Held != 7 {
			return fmt.Errorf("counter n is %d and ann holds %v; want 5 and 0.000007 (2 moves, 5 counts)", n, ann.Held)
		}
		return nil
	})
	if err != nil {
		t.Error(err)
	}
}

// Ensure that a run while a COMMIT is in flight is dropped when that
// COMMIT's answer is lost (it landed, the connection dropped before its
// answer came), and that its updates then run again once, on what the
// database holds: each update's move is journaled at most once, every
// update answered without error is journaled, and the moves counter,
// ann's balance and the holds agree with the journal.
func TestStore_SpeculationDroppedWhenCommitAnswerLost(t *testing.T) {
	stores, _ := openOn(t, "speculationlost", 1)
	s := stores[0]
	const n = 400
	errs, wait := submit(s, n, func(tx holon.Tx, i int) error {
		if i == n/2 {
			s.LoseCommitAnswer() // the COMMIT of this update's group
		}
		if err := moveAnn(tx, fmt.Sprintf("a%d", i)); err != nil {
			return err
		}
		return tx.PutHold(&holon.Hold{Receipt: fmt.Sprintf("r%d", i+1), Payer: "ann", Amount: 1, Mandate: "m", Reserved: 1, Started: tx.Now()})
	})
	wait()
	failed := 0
	for _, err := range errs {
		if err != nil {
			failed++
		}
	}
	if failed == 0 {
		t.Fatal("no update saw the lost answer")
	}
	err := s.View(func(tx holon.Tx) error {
		journaled := 0
		for i := range n {
			_, err := tx.Hold(fmt.Sprintf("r%d", i+1))
			in := tx.HasEntry(fmt.Sprintf("a%d", i))
			if in != (err == nil) {
				return fmt.Errorf("update %d: journaled %v, its hold read %v", i, in, err)
			}
			if errs[i] == nil && !in {
				return fmt.Errorf("update %d was answered without error and is not journaled", i)
			}
			if in {
				journaled++
			}
		}
		ann, err := tx.Account("ann")
		if err != nil {
			return err
		}
		if m := tx.Counter("moves"); m != uint64(journaled) || ann.Balance.Micros() != int64(10*journaled) {
			return fmt.Errorf("%d moves counted, ann's balance %v, for %d journaled", m, ann.Balance, journaled)
		}
		t.Logf("%d updates answered with an error, %d journaled", failed, journaled)
		return tx.(*pg.Tx).VerifyJournal()
	})
	if err != nil {
		t.Error(err)
	}
}

// Ensure that the run of an update queued while its writer's COMMIT is in
// flight is dropped when that COMMIT's answer is lost, and that the
// update then runs again once: both it and the group before are
// journaled once each.
func TestStore_SpeculationDroppedWhenCommitAnswerLostAlone(t *testing.T) {
	turns(t)
	stores, _ := openOn(t, "speculationlostalone", 1)
	s := stores[0]
	// Its held updates must hold the writers' lock too (NoWaitRuns).
	pg.NoWaitRuns(s)
	bg := context.Background()
	move := func(i int) func(holon.Tx) error {
		return func(tx holon.Tx) error {
			if err := moveAnn(tx, fmt.Sprintf("a%d", i)); err != nil {
				return err
			}
			return tx.PutHold(&holon.Hold{Receipt: fmt.Sprintf("r%d", i), Payer: "ann", Amount: 1, Mandate: "m", Reserved: 1, Started: tx.Now()})
		}
	}
	if err := s.Update(bg, move(1)); err != nil {
		t.Fatal(err)
	}
	release, lost := heldUpdate(s, move(2))
	next := queuedBehind(s, move(3))
	s.LoseCommitAnswer()
	release()
	if err := <-lost; err == nil {
		t.Error("the update whose COMMIT's answer was lost was answered without error")
	}
	if err := <-next; err != nil {
		t.Fatal(err)
	}
	if groups, _, dropped := s.Speculated(); dropped != 1 || groups != 0 {
		t.Errorf("runs while a COMMIT was in flight: %d stood, %d dropped; want the one dropped", groups, dropped)
	}
	wantMoves(t, s, 3) // the lost answer's update committed
}

// Ensure that a run while a COMMIT is in flight is dropped when
// PostgreSQL refuses that COMMIT's group (an entry under a key another
// gateway journaled, which this writer learns only from the table's
// unique key): it ran on that group's changes, which the group's safe
// run does not make all of. Kept, it would count the refused update's
// move (4 moves for 3).
func TestStore_SpeculationDroppedWhenCommitRefused(t *testing.T) {
	turns(t)
	stores, open := openOn(t, "speculationrefused", 1)
	b := stores[0]
	bg := context.Background()
	if err := b.Update(bg, func(tx holon.Tx) error { return moveAnn(tx, "dup") }); err != nil {
		t.Fatal(err)
	}
	a := open() // it never learns that b journaled "dup"
	// Its held updates must hold the writers' lock too (NoWaitRuns).
	pg.NoWaitRuns(a)
	if err := a.Update(bg, func(tx holon.Tx) error { return moveAnn(tx, "first") }); err != nil {
		t.Fatal(err)
	}
	// a's group of one update journals "dup", and waits while the next
	// update queues: that one runs while the group's COMMIT is in flight.
	release, dup := heldUpdate(a, func(tx holon.Tx) error { return moveAnn(tx, "dup") })
	next := queuedBehind(a, func(tx holon.Tx) error { return moveAnn(tx, "a2") })
	release()
	if err := <-dup; !errors.Is(err, holon.ErrDuplicateKey) {
		t.Errorf("the update journaling dup: %v, want ErrDuplicateKey", err)
	}
	if err := <-next; err != nil {
		t.Fatal(err)
	}
	if a.SafeRuns() == 0 {
		t.Error("no group ran again safely")
	}
	if groups, _, dropped := a.Speculated(); dropped != 1 || groups != 0 {
		t.Errorf("runs while a COMMIT was in flight: %d stood, %d dropped; want the one dropped", groups, dropped)
	}
	wantMoves(t, a, 3) // b's dup, a's first and a2
}

// Ensure that closing a store while its writer runs groups during their
// COMMITs answers every update submitted before the close, and commits
// each that was answered without error.
func TestStore_CloseWhileSpeculating(t *testing.T) {
	turns(t)
	stores, open := openOn(t, "speculationclose", 1)
	s := stores[0]
	const n = 400
	errs, wait := submit(s, n, func(tx holon.Tx, i int) error { return moveAnn(tx, fmt.Sprintf("a%d", i)) })
	for s.Stats().Commits < 3 {
		time.Sleep(time.Millisecond)
	}
	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("Close did not return within 60 s")
	}
	answered := make(chan struct{})
	go func() { wait(); close(answered) }()
	select {
	case <-answered:
	case <-time.After(60 * time.Second):
		t.Fatal("updates submitted before Close were not answered within 60 s of it")
	}
	ok := 0
	for _, err := range errs {
		switch {
		case err == nil:
			ok++
		case !errors.Is(err, holon.ErrClosed):
			t.Errorf("an update: %v", err)
		}
	}
	if groups, _, _ := s.Speculated(); groups == 0 {
		t.Error("no group ran while a COMMIT was in flight")
	}
	// What was answered committed, and nothing else did.
	wantMoves(t, open(), int64(ok))
}

// settleAt is a settled call's update as the engine makes it (receipt,
// journal entry, event, earnings and latency, the receipts counter told
// at commit), under receipt id, for payer: 3 micro-units from the
// account external:<payer> (the fixtures fund no payer, and only an
// external account may go below zero), 1 to the platform and 2 to the
// author. told receives what CounterAt told.
func settleAt(id, payer string, told *uint64) func(holon.Tx) error {
	return func(tx holon.Tx) error {
		if err := tx.PutReceipt(&holon.Receipt{ID: id, Mandate: "m-" + payer, Caller: payer, Status: holon.StatusSucceeded, Payer: payer, Currency: "EUR", Created: tx.Now()}); err != nil {
			return err
		}
		lines := []journal.Line{{Account: "external:" + payer, Amount: -3}, {Account: "platform", Amount: 1}, {Account: "author", Amount: 2}}
		if err := tx.PostEntry(journal.Entry{Key: "settle:" + id, Lines: lines}); err != nil {
			return err
		}
		if err := tx.PostEvent(holon.Event{Receipt: id, Agent: "acme/a@1.0.0", Status: holon.StatusSucceeded, DurationMS: 5, Billed: 3, Currency: "EUR", Time: tx.Now()}, true); err != nil {
			return err
		}
		if err := tx.AddEarnings("acme/a@1.0.0", "EUR", 1, 2, 0); err != nil {
			return err
		}
		tx.CounterAt("receipts", func(n uint64) { *told = n })
		return tx.AddLatency("acme/a@1.0.0", 5)
	}
}

// receiptIDs hands out n receipt ids on s, as the engine takes a block.
func receiptIDs(t *testing.T, s *pg.Store, n int) []string {
	t.Helper()
	var ids []string
	err := s.Update(context.Background(), func(tx holon.Tx) error {
		ids = ids[:0]
		for range n {
			id, err := tx.NewReceiptID()
			if err != nil {
				return err
			}
			ids = append(ids, id)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

// releaseOnceTaken waits until b's writer waits for the writers' lock,
// which a's held update holds, and has taken every update queued (and run
// the last), then releases a's update, which must commit.
func releaseOnceTaken(t *testing.T, a, b *pg.Store, release func(), doneA <-chan error) {
	t.Helper()
	waitForLockWaiters(t, a, 1)
	for pg.Queued(b) > 0 {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond) // the last taken runs
	release()
	if err := <-doneA; err != nil {
		t.Fatal(err)
	}
}

// Ensure that a writer waiting for the writers' lock runs its updates
// meanwhile, and that those that only moved what the other writer moved
// too (the platform's and the author's balances, the agent's record,
// earnings and latency, the counters) stand once it holds the lock,
// moved onto the other writer's values, while their journal entries and
// events keep the numbers of the writer's own blocks: every sum exact,
// the chains whole, each event numbered once, and each CounterAt told a
// value a reader that shows the
// commit reaches.
func TestStore_RunsWhileWaitingStandMoved(t *testing.T) {
	turns(t)
	stores, _ := openOn(t, "waitruns", 2)
	a, b := stores[0], stores[1]
	pg.NoWaitRuns(a) // its held update holds the lock
	bg := context.Background()
	var told uint64
	aIDs, bIDs := receiptIDs(t, a, 3), receiptIDs(t, b, 21)
	for i, s := range []*pg.Store{a, b} {
		id := []string{aIDs[0], bIDs[0]}[i]
		if err := s.Update(bg, settleAt(id, fmt.Sprintf("payer%d", i), &told)); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.Update(bg, settleAt(aIDs[1], "payer0", &told)); err != nil {
		t.Fatal(err)
	}
	release, doneA := heldUpdate(a, settleAt(aIDs[2], "payer0", &told))
	const n = 20
	tolds := make([]uint64, n)
	errs, wait := submit(b, n, func(tx holon.Tx, i int) error { return settleAt(bIDs[1+i], "payer1", &tolds[i])(tx) })
	releaseOnceTaken(t, a, b, release, doneA)
	wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	groups, ran, kept, moved := b.WaitRuns()
	if kept < n || moved == 0 {
		t.Errorf("runs while waiting: %d groups ran %d updates, %d stood, %d rows moved; want the %d settlements standing, moved", groups, ran, kept, moved, n)
	}
	const total = n + 4
	err := a.View(func(tx holon.Tx) error {
		for name, want := range map[string]journal.Amount{"platform": total, "author": 2 * total, "external:payer0": -9, "external:payer1": -3 * (n + 1)} {
			if acct, err := tx.Account(name); err != nil || acct.Balance != want {
				return fmt.Errorf("%s: %+v, %v; want balance %d", name, acct, err, want)
			}
		}
		if r, err := tx.Record("acme/a@1.0.0"); err != nil || r.Runs != total || r.Billed != 3*total || r.DurationMS != 5*total {
			return fmt.Errorf("record %+v, %v; want %d runs", r, err, total)
		}
		if e, err := tx.Earnings("acme/a@1.0.0"); err != nil || e["EUR"].PaidCalls != total || e["EUR"].Own != 2*total {
			return fmt.Errorf("earnings %+v, %v; want %d paid calls", e, err, total)
		}
		if l, err := tx.Latency("acme/a@1.0.0"); err != nil || l.Runs() != total {
			return fmt.Errorf("latency %+v, %v; want %d runs", l, err, total)
		}
		// Each gateway numbers from blocks of its own: once each, with
		// gaps (numbers.go).
		evs, err := tx.Events(0, 1000)
		if err != nil || len(evs) != total || !slices.IsSortedFunc(evs, func(x, y *holon.Event) int { return cmp.Compare(y.Seq, x.Seq) }) ||
			len(slices.CompactFunc(slices.Clone(evs), func(x, y *holon.Event) bool { return x.Seq == y.Seq })) != total {
			return fmt.Errorf("%d events (%v), want %d numbered once each, newest first", len(evs), err, total)
		}
		if c, r := tx.Counter("journal_entries"), tx.Counter("receipts"); c != total || r != total {
			return fmt.Errorf("counters: %d entries, %d receipts; want %d", c, r, total)
		}
		for i, v := range tolds {
			if v == 0 || v > total {
				return fmt.Errorf("settlement %d told receipts %d, want one of 1 to %d", i, v, total)
			}
		}
		return tx.(*pg.Tx).VerifyJournal()
	})
	if err != nil {
		t.Error(err)
	}
}

// Ensure that a run while waiting for the lock does not stand for an
// update that saw a row the other writer changed meanwhile: it runs
// again once the lock is held, on the other writer's value.
func TestStore_RunsWhileWaitingRunAgainWhenSeen(t *testing.T) {
	turns(t)
	stores, _ := openOn(t, "waitrunseen", 2)
	a, b := stores[0], stores[1]
	pg.NoWaitRuns(a)
	bg := context.Background()
	var told uint64
	aIDs, bIDs := receiptIDs(t, a, 2), receiptIDs(t, b, 1)
	for i, s := range []*pg.Store{a, b} {
		id := []string{aIDs[0], bIDs[0]}[i]
		if err := s.Update(bg, settleAt(id, fmt.Sprintf("payer%d", i), &told)); err != nil {
			t.Fatal(err)
		}
	}
	release, doneA := heldUpdate(a, settleAt(aIDs[1], "payer0", &told))
	// b records the platform's balance as it sees it. (Its settlement
	// above may have stood, run while it waited: count from here.)
	_, ran0, kept0, _ := b.WaitRuns()
	doneB := make(chan error, 1)
	go func() {
		doneB <- b.Update(bg, func(tx holon.Tx) error {
			p, err := tx.Account("platform")
			if err != nil {
				return err
			}
			return tx.Put(holon.BucketSettings, "platform_seen", p.Balance.Micros())
		})
	}()
	waitForLockWaiters(t, a, 1)
	time.Sleep(50 * time.Millisecond)
	release()
	for _, done := range []<-chan error{doneA, doneB} {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	if _, ran, kept, _ := b.WaitRuns(); ran == ran0 || kept != kept0 {
		t.Errorf("runs while waiting: %d updates ran, %d stood; want the one run again", ran-ran0, kept-kept0)
	}
	err := b.View(func(tx holon.Tx) error {
		var seen int64
		if err := tx.Get(holon.BucketSettings, "platform_seen", &seen); err != nil {
			return err
		}
		if seen != 3 {
			return fmt.Errorf("b saw the platform at %d, want 3 (after a's three settlements)", seen)
		}
		return nil
	})
	if err != nil {
		t.Error(err)
	}
}
