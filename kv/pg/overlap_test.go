package pg_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"holon.dev/holon"
	"holon.dev/holon/gateway/storetest"
	"holon.dev/holon/journal"
	"holon.dev/holon/kv/pg"
)

// turns makes the stores a test opens take turns under the writers' lock
// (HOLON_PG_TURNS=1, pg.Options.Turns), instead of overlapping as they do
// by default: the tests of the lock's own machinery, and the suites below,
// which keep that mode tested.
func turns(t *testing.T) {
	t.Setenv("HOLON_PG_TURNS", "1")
}

// Ensure that writers that take turns pass the shared suite, and its
// multi-writer extension: three handles writing at once, money never
// overspent at any instant, keys claimed once.
func TestTurns_Suite(t *testing.T) {
	turns(t)
	storetest.Run(t, newDatabases(t).open)
}

func TestTurns_Shared(t *testing.T) {
	turns(t)
	storetest.RunShared(t, newDatabases(t).open)
}

// Ensure that the rows several gateways move, and those written whole,
// keep their rules when the writers take turns.
func TestTurns_Rows(t *testing.T) {
	for name, test := range map[string]func(*testing.T){
		"parts":            TestParts_CreditsOnePartAGateway,
		"earnings":         TestParts_EarningsAndLatency,
		"counters":         TestParts_Counters,
		"guards":           TestGuards_RowsWrittenAsRead,
		"overdraft":        TestOverdraft_RefusedByTheDatabase,
		"over budget":      TestOverBudget_RefusedByTheDatabase,
		"moves":            TestMoves_KeepWhatOthersMoved,
		"chain taken over": TestChains_ClaimedFromALiveGateway,
	} {
		t.Run(name, func(t *testing.T) {
			turns(t)
			test(t)
		})
	}
}

// Ensure that a writer that overlaps learns another gateway's move of a
// balance within pg.MovedForget: its idea of the row lacks the other's
// credit until it reads the row again, which it does once its value is
// that old.
func TestOverlapping_MovesLearnedWithinTheBound(t *testing.T) {
	_, _, a, b := twoGateways(t, "learned")
	ctx := context.Background()
	amt := journal.MustParseAmount
	credit := func(s *pg.Store, key, x string) {
		t.Helper()
		err := s.Update(ctx, func(tx holon.Tx) error {
			e, _ := journal.Transfer(key, "external:demo-credit", "bob", amt(x))
			return tx.PostEntry(e)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	balance := func(s *pg.Store) (bal journal.Amount) {
		t.Helper()
		err := s.Update(ctx, func(tx holon.Tx) error {
			a, err := tx.Account("bob")
			bal = a.Balance
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return bal
	}
	credit(a, "c:1", "1.00")
	if got := balance(a); got != amt("1.00") {
		t.Fatalf("bob through a: %s, want 1.00", got)
	}
	start := time.Now()
	credit(b, "c:2", "2.00")
	// Right away a may still know 1.00; within the bound it knows 3.00.
	for {
		got := balance(a)
		if got == amt("3.00") {
			break
		}
		if got != amt("1.00") {
			t.Fatalf("bob through a: %s, want 1.00 or 3.00", got)
		}
		if time.Since(start) > pg.MovedForget+500*time.Millisecond {
			t.Fatalf("bob through a still %s %s after b's credit, want 3.00 within %s", got, time.Since(start), pg.MovedForget)
		}
		time.Sleep(50 * time.Millisecond)
	}
	storetest.CheckMoney(t, a)
}

// Ensure that an update of a writer that overlaps decides on documents it
// read as absent as they are at its commit: an Idempotency-Key's claim
// reads the key's finished record (absent: not finished yet), then,
// after another gateway finished the key (its finished record written,
// its running one deleted), its running record (absent now), and claims
// the key. Without the check of rows read as absent (guardAbsent) the
// key is claimed again and runs twice.
func TestOverlapping_AbsentReadsChecked(t *testing.T) {
	_, _, a, b := twoGateways(t, "absent")
	ctx := context.Background()
	bucket := holon.BucketIdempotency
	if err := a.Update(ctx, func(tx holon.Tx) error { return tx.Put(bucket, "run/K", "a") }); err != nil {
		t.Fatal(err)
	}
	finished := make(chan error, 1)
	finish := func() {
		finished <- a.Update(ctx, func(tx holon.Tx) error {
			if err := tx.Put(bucket, "key/K", "done by a"); err != nil {
				return err
			}
			return tx.Delete(bucket, "run/K")
		})
	}
	runs, claimed := 0, false
	err := b.Update(ctx, func(tx holon.Tx) error {
		runs++
		claimed = false
		var rec string
		if err := tx.Get(bucket, "key/K", &rec); err == nil {
			return nil // finished: replayed
		} else if !errors.Is(err, holon.ErrNotFound) {
			return err
		}
		if runs == 1 {
			finish()
			if err := <-finished; err != nil {
				return err
			}
		}
		if err := tx.Get(bucket, "run/K", &rec); err == nil {
			return nil // running elsewhere
		} else if !errors.Is(err, holon.ErrNotFound) {
			return err
		}
		claimed = true
		return tx.Put(bucket, "run/K", "b")
	})
	if err != nil {
		t.Fatal(err)
	}
	if claimed || runs < 2 {
		t.Errorf("the key finished on a was claimed again on b (runs %d, claimed %v), want its claim refused and run again on what a left", runs, claimed)
	}
	err = b.View(func(tx holon.Tx) error {
		var rec string
		if err := tx.Get(bucket, "run/K", &rec); !errors.Is(err, holon.ErrNotFound) {
			t.Errorf("run/K: %q %v, want none", rec, err)
		}
		return tx.Get(bucket, "key/K", &rec)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// Ensure that a gateway whose writer would take turns is refused on a
// database where another's overlaps, and the other way round (they read
// the writers' log in different ways), and starts once the other stopped.
func TestModes_MixedRefused(t *testing.T) {
	url := newDatabases(t).url(t, "modes")
	ctx := context.Background()
	open := func(turns bool) (*pg.Store, error) {
		return pg.OpenWith(ctx, url, holon.StoreOptions{NoSync: true}, pg.Options{Turns: turns})
	}
	a, err := open(false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := open(true); err == nil || !strings.Contains(err.Error(), "start every gateway on one database the same way") {
		t.Errorf("a gateway taking turns beside one that overlaps: %v, want refused", err)
	}
	b, err := open(false)
	if err != nil {
		t.Fatalf("a second gateway that overlaps: %v", err)
	}
	b.Close()
	a.Close()
	c, err := open(true)
	if err != nil {
		t.Fatalf("a gateway taking turns once the others stopped: %v", err)
	}
	defer c.Close()
	if _, err := open(false); err == nil || !strings.Contains(err.Error(), "takes turns under the writers' lock") {
		t.Errorf("a gateway that overlaps beside one taking turns: %v, want refused naming its mode", err)
	}
}

// Ensure that a refusal of a writer that overlaps stands only if the
// rows it read whole are still as it read them: a gateway closing a call
// left in flight reads its hold, then, after another gateway closed the
// same call (its hold deleted, its reservation released), the mandate's
// budget, and finds it would release more than is reserved. Its
// statements do not share one snapshot; the hold it read is gone, so the
// update runs again, finds no hold, and closes nothing. Without the check
// the gateway's start fails on that refusal (as the cluster drill found).
func TestOverlapping_RefusalOnRowsAsRead(t *testing.T) {
	_, _, a, b := twoGateways(t, "refusal")
	ctx := context.Background()
	amt := journal.MustParseAmount
	h := &holon.Hold{Receipt: "r1", Payer: "bob", Mandate: "bob/main", Reserved: amt("0.01"), Started: time.Now().UTC()}
	err := a.Update(ctx, func(tx holon.Tx) error {
		if err := tx.AddBudget(h.Mandate, 0, h.Reserved); err != nil {
			return err
		}
		return tx.PutHold(h)
	})
	if err != nil {
		t.Fatal(err)
	}
	closeCall := func(tx holon.Tx) (bool, error) {
		h, err := tx.Hold("r1")
		if errors.Is(err, holon.ErrNotFound) {
			return false, nil // closed meanwhile
		}
		if err != nil {
			return false, err
		}
		if err := tx.AddBudget(h.Mandate, 0, -h.Reserved); err != nil {
			return false, err
		}
		return true, tx.DeleteHold(h.Receipt)
	}
	runs, closed := 0, false
	err = b.Update(ctx, func(tx holon.Tx) error {
		runs++
		if _, err := tx.Hold("r1"); err != nil || runs > 1 {
			var err error
			closed, err = closeCall(tx)
			return err
		}
		// Between b's read of the hold and of the budget, a closes the call.
		if err := a.Update(ctx, func(tx holon.Tx) error { _, err := closeCall(tx); return err }); err != nil {
			return err
		}
		var err error
		closed, err = closeCall(tx)
		return err
	})
	if err != nil {
		t.Fatalf("closing a call another gateway closed meanwhile: %v, want it run again and find the call closed", err)
	}
	if closed || runs < 2 {
		t.Errorf("runs %d, closed %v: want the update run again, closing nothing", runs, closed)
	}
	err = b.View(func(tx holon.Tx) error {
		bu, err := tx.Budget(h.Mandate)
		if err == nil && bu.Reserved != 0 {
			t.Errorf("bob/main reserves %s, want 0", bu.Reserved)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	// A refusal judged on rows still as read stands, checked once.
	h.Receipt = "r2"
	if err := a.Update(ctx, func(tx holon.Tx) error { return tx.PutHold(h) }); err != nil {
		t.Fatal(err)
	}
	checks := b.RefusalChecks()
	runs = 0
	err = b.Update(ctx, func(tx holon.Tx) error {
		runs++
		h, err := tx.Hold("r2")
		if err != nil {
			return err
		}
		return tx.AddBudget(h.Mandate, 0, -h.Reserved)
	})
	if err == nil || !strings.Contains(err.Error(), "would go below zero") || runs != 1 {
		t.Errorf("a release of more than is reserved, on rows as read: %v after %d runs, want refused once", err, runs)
	}
	if got := b.RefusalChecks() - checks; got != 1 {
		t.Errorf("%d checks of the refusal, want 1", got)
	}
}

// Ensure that a writer that overlaps, alone on its database, keeps the
// moved rows it knows past pg.MovedForget (no other writer can have
// moved them), and reads one again once older than that after another
// writer's group committed.
func TestOverlapping_AloneKeepsMovedRows(t *testing.T) {
	dbs := newDatabases(t)
	url := dbs.url(t, "alone")
	ctx := context.Background()
	open := func() *pg.Store {
		s, err := pg.Open(ctx, url, holon.StoreOptions{NoSync: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	a := open()
	credit := func(s *pg.Store, key string) {
		t.Helper()
		err := s.Update(ctx, func(tx holon.Tx) error {
			e, _ := journal.Transfer(key, "external:demo-credit", "bob", journal.MustParseAmount("1.00"))
			return tx.PostEntry(e)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	// readTrips is the round trips an update reading bob's balance took.
	readTrips := func(s *pg.Store) uint64 {
		t.Helper()
		before, _ := s.RoundTrips()
		err := s.Update(ctx, func(tx holon.Tx) error {
			_, err := tx.Account("bob")
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		after, _ := s.RoundTrips()
		return after - before
	}
	credit(a, "c:1")
	readTrips(a) // known now, whether it was or not
	time.Sleep(pg.MovedForget + 200*time.Millisecond)
	if n := readTrips(a); n != 0 {
		t.Errorf("alone, bob's balance %s old took %d round trips, want 0 (kept)", pg.MovedForget+200*time.Millisecond, n)
	}
	b := open()
	credit(b, "c:2")
	time.Sleep(pg.MovedForget + 200*time.Millisecond)
	// The first group after b's learns of it: bob's balance is read again.
	if n := readTrips(a); n == 0 {
		t.Errorf("after another writer's group, bob's balance %s old took no round trip, want it read again", pg.MovedForget+200*time.Millisecond)
	}
}

// A group of writers that overlap waits for a row another transaction
// holds locked at most lockWait, then runs again whole: two gateways'
// groups that lock rows in opposite orders cost each other that, not
// PostgreSQL's deadlock_timeout, and the move lands once.
func TestOverlapping_LockWaitGivenUp(t *testing.T) {
	a, locker := lockedBudget(t, "lockwait")
	ctx := context.Background()
	amt := journal.MustParseAmount
	const m = lockedMandate
	done := make(chan error, 1)
	go func() {
		done <- a.Update(ctx, func(tx holon.Tx) error { return tx.AddBudget(m, amt("0.02"), 0) })
	}()
	for deadline := time.Now().Add(30 * time.Second); a.LockWaits() < 2 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	waits := a.LockWaits()
	select {
	case err := <-done:
		t.Fatalf("the update was answered (%v) while the budget's row was locked", err)
	default:
	}
	if err := locker.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("the update, once the row was let go: %v", err)
	}
	if waits < 2 {
		t.Errorf("%d waits for the locked row given up in 30 s, want the group to give up and run again", waits)
	}
	lockedSpent(t, a, "0.03", "the move landed once")
}

// A group kept from a row that another transaction never lets go fails
// once its attempts are spent (about 20 s of waits given up), with an
// error that says why, rather than waiting without end; nothing of it
// lands.
func TestOverlapping_LockHeldTooLongFails(t *testing.T) {
	a, locker := lockedBudget(t, "lockheld")
	ctx := context.Background()
	amt := journal.MustParseAmount
	const m = lockedMandate
	err := a.Update(ctx, func(tx holon.Tx) error { return tx.AddBudget(m, amt("0.02"), 0) })
	if err == nil || !strings.Contains(err.Error(), "a row locked for over 200ms") {
		t.Errorf("an update kept from its row: %v, want it failed, naming the lock", err)
	}
	if err := locker.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	lockedSpent(t, a, "0.01", "nothing of the failed update landed")
}

// lockedMandate is the mandate whose budget lockedBudget locks.
const lockedMandate = "bob/main"

// lockedSpent checks that lockedMandate's budget has spent want, as a
// View of s reads it (why: what that shows).
func lockedSpent(t *testing.T, s *pg.Store, want, why string) {
	t.Helper()
	err := s.View(func(tx holon.Tx) error {
		bu, err := tx.Budget(lockedMandate)
		if err == nil && bu.Spent != journal.MustParseAmount(want) {
			t.Errorf("%s spent %s, want %s (%s)", lockedMandate, bu.Spent, want, why)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// lockedBudget opens two stores on a new database, gives lockedMandate a
// budget that spent 0.01 through the first, and returns it with a
// transaction of another connection that holds the budget's row locked.
func lockedBudget(t *testing.T, name string) (*pg.Store, pgx.Tx) {
	t.Helper()
	_, url, a, _ := twoGateways(t, name)
	ctx := context.Background()
	if err := a.Update(ctx, func(tx holon.Tx) error { return tx.AddBudget(lockedMandate, journal.MustParseAmount("0.01"), 0) }); err != nil {
		t.Fatal(err)
	}
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	locker, err := c.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := locker.Exec(ctx, `SELECT FROM budgets WHERE mandate = $1 FOR UPDATE`, lockedMandate); err != nil {
		t.Fatal(err)
	}
	return a, locker
}
