package pg_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"holon.dev/holon"
	"holon.dev/holon/backup/pgtest"
	"holon.dev/holon/journal"
	"holon.dev/holon/kv/pg"
)

// openOn opens n store handles (n gateways) on one new database, and
// returns them with a function that opens one more.
func openOn(t *testing.T, name string, n int) ([]*pg.Store, func() *pg.Store) {
	t.Helper()
	url := pgtest.Start(t).CreateDB(t, name)
	open := func() *pg.Store {
		t.Helper()
		s, err := pg.Open(context.Background(), url, holon.StoreOptions{NoSync: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	var out []*pg.Store
	for range n {
		out = append(out, open())
	}
	return out, open
}

// grouped runs fns as one group of s's writer, in their order: the writer
// is held by an update until every fn is queued behind it. It returns
// each fn's error.
func grouped(t *testing.T, s *pg.Store, fns ...func(holon.Tx) error) []error {
	t.Helper()
	return groupedSkipping(t, s, nil, fns...)
}

// groupedSkipping is grouped, the fns at the indexes in skip queued with
// a context canceled before the group runs (their callers gone): the
// writer skips them.
func groupedSkipping(t *testing.T, s *pg.Store, skip map[int]bool, fns ...func(holon.Tx) error) []error {
	t.Helper()
	bg := context.Background()
	hold, held := make(chan struct{}), make(chan struct{}, 1)
	first := make(chan error, 1)
	go func() {
		first <- s.Update(bg, func(holon.Tx) error {
			select {
			case held <- struct{}{}:
			default:
			}
			<-hold
			return nil
		})
	}()
	<-held
	errs := make([]error, len(fns))
	done := make(chan int, len(fns))
	var cancels []context.CancelFunc
	for i, fn := range fns {
		ctx := bg
		if skip[i] {
			var cancel context.CancelFunc
			ctx, cancel = context.WithCancel(bg)
			cancels = append(cancels, cancel)
		}
		go func() {
			errs[i] = s.Update(ctx, fn)
			done <- i
		}()
		for pg.Queued(s) < i+1 {
			time.Sleep(time.Millisecond)
		}
	}
	for _, cancel := range cancels {
		cancel()
	}
	close(hold)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	for range fns {
		<-done
	}
	if st := s.Stats(); st.MaxBatch < len(fns) {
		// (A group that failed whole is not counted.)
		t.Fatalf("the largest group held %d updates, want the %d in one; their errors: %v", st.MaxBatch, len(fns), errs)
	}
	return errs
}

// entry is a transfer of micros from ext to account, under key.
func entry(key, account string, micros int64) journal.Entry {
	return journal.Entry{Key: key, Lines: []journal.Line{{Account: "external:ext", Amount: -journal.Amount(micros)}, {Account: account, Amount: journal.Amount(micros)}}}
}

// moveAnn journals 10 micro-units to ann under key, holds 1 more on ann,
// spends 10 of budget m and counts the move: hot rows all.
func moveAnn(tx holon.Tx, key string) error {
	if _, err := tx.AppendEntry(entry(key, "ann", 10)); err != nil {
		return err
	}
	if err := tx.AddHeld("ann", 1); err != nil {
		return err
	}
	if err := tx.AddBudget("m", 10, 0); err != nil {
		return err
	}
	_, err := tx.AddCounter("moves", 1)
	return err
}

// annAndM reads the tests' account ann and budget m.
func annAndM(tx holon.Tx) (holon.Account, holon.Budget, error) {
	ann, err := tx.Account("ann")
	if err != nil {
		return ann, holon.Budget{}, err
	}
	bud, err := tx.Budget("m")
	return ann, bud, err
}

// Ensure that a group whose fast run PostgreSQL refuses (one update
// journals a key another gateway used before this one started, which this
// writer learns only from the table's unique key) runs again safely: the
// refused update alone fails, with its error, the others commit, and
// SafeRuns counts it; a group nobody refuses runs once, fast.
func TestStore_RefusalRunsGroupAgainSafe(t *testing.T) {
	stores, open := openOn(t, "saferun", 1)
	b := stores[0]
	bg := context.Background()
	if err := b.Update(bg, func(tx holon.Tx) error { _, err := tx.AppendEntry(entry("used", "ann", 1)); return err }); err != nil {
		t.Fatal(err)
	}
	a := open()
	move := func(key string) func(holon.Tx) error {
		return func(tx holon.Tx) error {
			if _, err := tx.AppendEntry(entry(key, "ann", 10)); err != nil {
				return err
			}
			if _, err := tx.AddCounter("moves", 1); err != nil {
				return err
			}
			return tx.AddBudget("m", 10, 0)
		}
	}
	safe := a.SafeRuns()
	errs := grouped(t, a, move("k1"), move("k2"), move("k3"))
	for i, err := range errs {
		if err != nil {
			t.Errorf("update %d of a group nobody refuses: %v", i, err)
		}
	}
	if n := a.SafeRuns(); n != safe {
		t.Errorf("a group nobody refused ran again safely (%d safe runs)", n-safe)
	}
	errs = grouped(t, a, move("k4"), move("used"), move("k5"))
	if errs[0] != nil || errs[2] != nil {
		t.Errorf("the updates beside the refused one: %v, %v; want both committed", errs[0], errs[2])
	}
	if !errors.Is(errs[1], holon.ErrDuplicateKey) {
		t.Errorf("the refused update: %v, want ErrDuplicateKey", errs[1])
	}
	if n := a.SafeRuns(); n != safe+1 {
		t.Errorf("%d safe runs after a refused group, want 1", n-safe)
	}
	err := a.View(func(tx holon.Tx) error {
		ann, bud, err := annAndM(tx)
		if err != nil {
			return err
		}
		if ann.Balance != 51 || tx.Counter("moves") != 5 || bud.Spent != 50 || tx.Counter("journal_entries") != 6 {
			return fmt.Errorf("ann %s, %d moves, budget spent %s, %d entries; want 51, 5, 50 and 6",
				ann.Balance, tx.Counter("moves"), bud.Spent, tx.Counter("journal_entries"))
		}
		return tx.(*pg.Tx).VerifyJournal()
	})
	if err != nil {
		t.Error(err)
	}
}

// Ensure that a group whose first update was skipped (its caller gone
// before the group ran) and whose fast run PostgreSQL refuses gives back,
// for its safe run, only the numbers its own updates took: the writer's
// committed entries keep theirs, and the safe run's entries take new
// ones. (A skipped update once left its mark at zero, and the refused run
// gave back every number the writer had handed out, which the safe run
// then handed out again: a duplicate journal number, the update refused.)
func TestStore_SkippedUpdateKeepsCommittedNumbers(t *testing.T) {
	stores, open := openOn(t, "skipped", 1)
	b := stores[0]
	bg := context.Background()
	if err := b.Update(bg, func(tx holon.Tx) error { _, err := tx.AppendEntry(entry("used", "ann", 1)); return err }); err != nil {
		t.Fatal(err)
	}
	a := open()
	journals := func(key string) func(holon.Tx) error {
		return func(tx holon.Tx) error { _, err := tx.AppendEntry(entry(key, "ann", 10)); return err }
	}
	for _, k := range []string{"k1", "k2", "k3"} {
		if err := a.Update(bg, journals(k)); err != nil {
			t.Fatal(err)
		}
	}
	safe := a.SafeRuns()
	errs := groupedSkipping(t, a, map[int]bool{0: true}, journals("gone"), journals("used"), journals("k4"))
	if !errors.Is(errs[0], context.Canceled) {
		t.Errorf("the update whose caller was gone: %v, want context.Canceled", errs[0])
	}
	if !errors.Is(errs[1], holon.ErrDuplicateKey) {
		t.Errorf("the refused update: %v, want ErrDuplicateKey", errs[1])
	}
	if errs[2] != nil {
		t.Errorf("the update beside them: %v, want it committed with a number of its own", errs[2])
	}
	if n := a.SafeRuns(); n != safe+1 {
		t.Errorf("%d safe runs, want 1 (the fast run refused)", n-safe)
	}
	err := a.View(func(tx holon.Tx) error {
		if n := tx.Counter("journal_entries"); n != 5 {
			return fmt.Errorf("%d journal entries, want 5 (used, k1-k3, k4)", n)
		}
		return tx.(*pg.Tx).VerifyJournal()
	})
	if err != nil {
		t.Error(err)
	}
}

// Ensure that an update failing after it moved the same hot rows as an
// earlier update of its group (a balance, a budget, a counter, the
// journal's head) takes back its own moves only: the earlier update's
// reach the database, whether the failing update's writes were still
// waiting to be sent (no savepoint needed; also when a read it made
// first sent the earlier update's writes) or some had gone with a read
// (the group runs again safely).
func TestStore_LaterFailedWriteKeepsEarlier(t *testing.T) {
	stores, _ := openOn(t, "laterfailed", 1)
	s := stores[0]
	errLater := errors.New("later update fails")
	// read: 0 none, 1 after its moves, 2 before them.
	move := func(key string, read int, fail bool) func(holon.Tx) error {
		return func(tx holon.Tx) error {
			// A read no cache answers: the writes so far go with it.
			if read == 2 {
				if _, err := tx.Receipts("", "", 1); err != nil {
					return err
				}
			}
			if err := moveAnn(tx, key); err != nil {
				return err
			}
			if read == 1 {
				if _, err := tx.Receipts("", "", 1); err != nil {
					return err
				}
			}
			if fail {
				return errLater
			}
			return nil
		}
	}
	check := func(moves int64) {
		t.Helper()
		err := s.View(func(tx holon.Tx) error {
			ann, bud, err := annAndM(tx)
			if err != nil {
				return err
			}
			if ann.Balance != journal.Amount(10*moves) || ann.Held != journal.Amount(moves) || bud.Spent != journal.Amount(10*moves) ||
				tx.Counter("moves") != uint64(moves) || tx.Counter("journal_entries") != uint64(moves) {
				return fmt.Errorf("ann %+v, budget %+v, %d moves, %d entries; want %d moves", ann, bud, tx.Counter("moves"), tx.Counter("journal_entries"), moves)
			}
			return tx.(*pg.Tx).VerifyJournal()
		})
		if err != nil {
			t.Error(err)
		}
	}
	for i, read := range []int{0, 1, 2} {
		safe := s.SafeRuns()
		errs := grouped(t, s, move(fmt.Sprintf("e%d", i), 0, false), move(fmt.Sprintf("f%d", i), read, true))
		if errs[0] != nil || !errors.Is(errs[1], errLater) {
			t.Errorf("read %v: %v, %v; want the earlier committed, the later failed", read, errs[0], errs[1])
		}
		check(int64(i + 1))
		if ran := s.SafeRuns() - safe; (read == 1) != (ran == 1) {
			t.Errorf("read %v: %d safe runs", read, ran)
		}
	}
}

// Ensure that a writer takes the values of the small rows another gateway
// changed from the writers' log, without reading them again: handle a
// moves a balance, a hold, a budget, a counter and the journal (caching
// them all), b moves each of them, and a moves each again in an update
// that makes no round trip of its own; the database ends with every move.
func TestStore_LogCarriesValues(t *testing.T) {
	turns(t)
	stores, _ := openOn(t, "logvalues", 2)
	a, b := stores[0], stores[1]
	bg := context.Background()
	move := func(s *pg.Store, key string) {
		t.Helper()
		err := s.Update(bg, func(tx holon.Tx) error { return moveAnn(tx, key) })
		if err != nil {
			t.Fatal(err)
		}
	}
	move(a, "k1")
	move(b, "k2")
	trips, _ := a.RoundTrips()
	move(a, "k3")
	if after, _ := a.RoundTrips(); after != trips {
		t.Errorf("a read again %d times the rows b changed", after-trips)
	}
	err := a.View(func(tx holon.Tx) error {
		ann, bud, err := annAndM(tx)
		if err != nil {
			return err
		}
		if ann.Balance != 30 || ann.Held != 3 || bud.Spent != 30 || tx.Counter("moves") != 3 || tx.Counter("journal_entries") != 3 {
			return fmt.Errorf("ann %+v, budget %+v, %d moves, %d entries; want 3 moves of each", ann, bud, tx.Counter("moves"), tx.Counter("journal_entries"))
		}
		return tx.(*pg.Tx).VerifyJournal()
	})
	if err != nil {
		t.Error(err)
	}
}

// Ensure that a writer takes the new value of a short document another
// gateway changed from the writers' log, without reading it again (the
// agents' earnings and latency documents are rewritten by every group
// that settles a call), and reads a long one again: handle a reads and
// writes two documents, b rewrites both, and a reads them back.
func TestStore_LogCarriesShortDocuments(t *testing.T) {
	turns(t)
	stores, _ := openOn(t, "logdocs", 2)
	a, b := stores[0], stores[1]
	bg := context.Background()
	long := strings.Repeat("x", 600)
	put := func(s *pg.Store, n int, text string) {
		t.Helper()
		err := s.Update(bg, func(tx holon.Tx) error {
			if err := tx.Put(holon.BucketSettings, "short", map[string]int{"n": n}); err != nil {
				return err
			}
			return tx.Put(holon.BucketSettings, "long", map[string]string{"text": text})
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	read := func() (short map[string]int, long map[string]string) {
		t.Helper()
		err := a.Update(bg, func(tx holon.Tx) error {
			if err := tx.Get(holon.BucketSettings, "short", &short); err != nil {
				return err
			}
			return tx.Get(holon.BucketSettings, "long", &long)
		})
		if err != nil {
			t.Fatal(err)
		}
		return short, long
	}
	put(a, 1, "a")
	put(b, 2, long)
	trips, _ := a.RoundTrips()
	short, l := read()
	if short["n"] != 2 || l["text"] != long {
		t.Errorf("a reads %v and a text of %d bytes, want b's (n 2, %d bytes)", short, len(l["text"]), len(long))
	}
	if after, _ := a.RoundTrips(); after-trips != 1 {
		t.Errorf("a took %d round trips to read the two documents b changed, want 1 (the long one)", after-trips)
	}
}

// Ensure that a group whose updates write one row in turns (a hold put,
// deleted and put again; a document put, deleted and put again; a hold
// put then deleted) ends with the last write of each, although the rows
// of many updates go to the database in one statement per table.
func TestStore_GroupKeepsARowsWritesInOrder(t *testing.T) {
	stores, _ := openOn(t, "roworder", 1)
	s := stores[0]
	hold := func(id string) func(holon.Tx) error {
		return func(tx holon.Tx) error {
			return tx.PutHold(&holon.Hold{Receipt: id, Payer: "ann", Mandate: "m", Started: tx.Now()})
		}
	}
	unhold := func(id string) func(holon.Tx) error { return func(tx holon.Tx) error { return tx.DeleteHold(id) } }
	put := func(v string) func(holon.Tx) error {
		return func(tx holon.Tx) error { return tx.Put(holon.BucketSettings, "k", map[string]string{"v": v}) }
	}
	del := func(tx holon.Tx) error { return tx.Delete(holon.BucketSettings, "k") }
	errs := grouped(t, s, hold("r1"), hold("r2"), put("a"), unhold("r1"), del, unhold("r2"), hold("r1"), put("b"))
	for i, err := range errs {
		if err != nil {
			t.Fatalf("update %d: %v", i, err)
		}
	}
	err := s.View(func(tx holon.Tx) error {
		hs, err := tx.Holds()
		if err != nil {
			return err
		}
		if len(hs) != 1 || hs[0].Receipt != "r1" {
			return fmt.Errorf("holds %v, want r1 alone", hs)
		}
		var v map[string]string
		if err := tx.Get(holon.BucketSettings, "k", &v); err != nil || v["v"] != "b" {
			return fmt.Errorf("document %v (%v), want b", v, err)
		}
		return nil
	})
	if err != nil {
		t.Error(err)
	}
}

// Ensure that a writer alone on the database, with updates waiting when
// it commits, begins its next group in the COMMIT's round trip, and that
// a writer that saw another's groups does not; the money adds up either
// way.
func TestStore_HeadStartWhenAlone(t *testing.T) {
	turns(t)
	stores, _ := openOn(t, "headstart", 2)
	a, b := stores[0], stores[1]
	burst(t, a, 300, func(tx holon.Tx, i int) error { return moveAnn(tx, fmt.Sprintf("a%d", i)) })
	if used, _ := a.HeadStarts(); used == 0 {
		t.Errorf("a writer alone began no group with the COMMIT before it (%d commits)", a.Stats().Commits)
	}
	before, _ := a.HeadStarts()
	// In turns: a group of b's, then one of a's that commits with updates
	// waiting behind it.
	for i := range 10 {
		if err := b.Update(context.Background(), func(tx holon.Tx) error { return moveAnn(tx, fmt.Sprintf("b%d", i)) }); err != nil {
			t.Fatal(err)
		}
		move := func(tx holon.Tx) error { return moveAnn(tx, fmt.Sprintf("c%d", i)) }
		for _, err := range grouped(t, a, move) {
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	if used, _ := a.HeadStarts(); used-before != 0 {
		n := used - before
		t.Errorf("a writer taking turns with another began %d groups with its COMMIT", n)
	}
	err := a.View(func(tx holon.Tx) error {
		ann, bud, err := annAndM(tx)
		if err != nil {
			return err
		}
		if ann.Balance != 3200 || ann.Held != 320 || bud.Spent != 3200 || tx.Counter("moves") != 320 {
			return fmt.Errorf("ann %+v, budget %+v, %d moves; want 320 moves", ann, bud, tx.Counter("moves"))
		}
		return tx.(*pg.Tx).VerifyJournal()
	})
	if err != nil {
		t.Error(err)
	}
}

// Ensure that a writer alone on the database begins its next group in
// the COMMIT's round trip even when no update waits as it commits (under
// load the queue fills while the COMMIT runs), and that, finding none
// waiting once answered, it gives that group back: the writers' lock is
// not held by an idle writer, so another handle's update commits.
func TestStore_HeadStartGivenBackWhenIdle(t *testing.T) {
	turns(t)
	stores, _ := openOn(t, "headstartidle", 2)
	a, b := stores[0], stores[1]
	// One update at a time: none waits as each commits.
	for i := range 5 {
		if err := a.Update(context.Background(), func(tx holon.Tx) error { return moveAnn(tx, fmt.Sprintf("a%d", i)) }); err != nil {
			t.Fatal(err)
		}
	}
	used, idle := a.HeadStarts()
	if idle == 0 {
		t.Errorf("a writer alone, one update at a time, began no group with its COMMIT to give back (%d used)", used)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := b.Update(ctx, func(tx holon.Tx) error { return moveAnn(tx, "b") }); err != nil {
		t.Fatalf("another handle's update while the first writer idles: %v", err)
	}
	if err := a.Update(context.Background(), func(tx holon.Tx) error { return moveAnn(tx, "a5") }); err != nil {
		t.Fatal(err)
	}
	wantMoves(t, a, 7)
}

// Ensure that a writer that begins its next group with its COMMIT answers
// that COMMIT's updates at once, even when another writer, waiting for the
// lock already, takes it as the COMMIT lets go of it: the head start does
// not wait for the lock (PostgreSQL would send the COMMIT's answer only
// with the whole batch's), and the next group begins as any other.
func TestStore_HeadStartDoesNotHoldAnswers(t *testing.T) {
	turns(t)
	stores, _ := openOn(t, "headstartanswers", 2)
	a, b := stores[0], stores[1]
	// Their held updates must hold the writers' lock too (NoWaitRuns).
	pg.NoWaitRuns(a)
	pg.NoWaitRuns(b)
	bg := context.Background()
	if err := b.Update(bg, func(tx holon.Tx) error { return moveAnn(tx, "b0") }); err != nil {
		t.Fatal(err)
	}
	if err := a.Update(bg, func(tx holon.Tx) error { return moveAnn(tx, "a0") }); err != nil {
		t.Fatal(err)
	}
	// hold returns an update that moves ann and then waits for release,
	// holding its writer (and the writers' lock).
	hold := func(key string) (func(holon.Tx) error, chan struct{}, chan struct{}) {
		held, release := make(chan struct{}, 1), make(chan struct{})
		return func(tx holon.Tx) error {
			if err := moveAnn(tx, key); err != nil {
				return err
			}
			select {
			case held <- struct{}{}:
			default:
			}
			<-release
			return nil
		}, held, release
	}
	fa, heldA, releaseA := hold("a1")
	fb, heldB, releaseB := hold("b1")
	doneA, doneB := make(chan error, 1), make(chan error, 1)
	go func() { doneA <- a.Update(bg, fa) }()
	<-heldA // a is alone (nothing written since its last group) and holds the lock
	go func() { doneB <- b.Update(bg, fb) }()
	waitForLockWaiters(t, a, 1) // b's writer waits for the lock
	close(releaseA)             // a commits, beginning its next group: b has the lock first
	<-heldB
	select {
	case err := <-doneA:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		close(releaseB)
		t.Fatal("a's update was not answered while b's writer held the lock")
	}
	close(releaseB)
	if err := <-doneB; err != nil {
		t.Fatal(err)
	}
	if err := a.Update(bg, func(tx holon.Tx) error { return moveAnn(tx, "a2") }); err != nil {
		t.Fatal(err)
	}
	wantMoves(t, a, 5)
}

// wantMoves checks that s holds n of moveAnn's moves, and its journal.
func wantMoves(t *testing.T, s *pg.Store, n int64) {
	t.Helper()
	err := s.View(func(tx holon.Tx) error {
		ann, _, err := annAndM(tx)
		if err != nil {
			return err
		}
		if ann.Balance != journal.Amount(10*n) || ann.Held != journal.Amount(n) || tx.Counter("moves") != uint64(n) {
			return fmt.Errorf("ann %+v, %d moves; want %d moves", ann, tx.Counter("moves"), n)
		}
		return tx.(*pg.Tx).VerifyJournal()
	})
	if err != nil {
		t.Error(err)
	}
}

// waitForLockWaiters waits until n sessions of s's database wait for a
// lock.
func waitForLockWaiters(t *testing.T, s *pg.Store, n int) {
	t.Helper()
	for range 3000 {
		var waiting int
		err := s.Read(context.Background(), func(tx pgx.Tx) error {
			return tx.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'`).Scan(&waiting)
		})
		if err != nil {
			t.Fatal(err)
		}
		if waiting >= n {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("no %d sessions waiting for a lock after 30 s", n)
}

// Ensure that a read PostgreSQL refuses (a key that is not UTF-8, in a
// table keyed by text) fails its update alone: the group, whose
// transaction refuses everything after it, runs again safely, and an
// update after it that reads and writes commits.
func TestStore_RefusedReadRunsGroupAgainSafe(t *testing.T) {
	stores, _ := openOn(t, "refusedread", 1)
	s := stores[0]
	bad := func(tx holon.Tx) error {
		var v map[string]any
		return tx.Get(holon.BucketCredentials, "\xff", &v)
	}
	after := func(tx holon.Tx) error {
		if _, err := tx.Receipts("", "", 1); err != nil {
			return err
		}
		return moveAnn(tx, "k1")
	}
	safe := s.SafeRuns()
	errs := grouped(t, s, bad, after)
	var pe *pgconn.PgError
	if !errors.As(errs[0], &pe) || pe.Code != "22021" {
		t.Errorf("the refused read: %v, want PostgreSQL's invalid byte sequence", errs[0])
	}
	if errs[1] != nil {
		t.Errorf("the update after it: %v", errs[1])
	}
	if n := s.SafeRuns() - safe; n != 1 {
		t.Errorf("%d safe runs, want 1", n)
	}
}

// Ensure that a fast group sends its receipts and holds as rows of one
// statement per table and round trip, not one statement each, and that
// they read back as they were put: a receipt new and then given its final
// state in the same group, a parent, splits, no worst case, children nil
// or empty, a hold with children and one without.
func TestStore_GroupSendsReceiptsAndHoldsAsRows(t *testing.T) {
	stores, _ := openOn(t, "receiptrows", 1)
	s := stores[0]
	const n = 20
	now := time.Date(2026, 12, 5, 15, 0, 0, 123456789, time.UTC)
	worst := journal.Amount(70000)
	want := map[string]*holon.Receipt{}
	var mu sync.Mutex
	put := func(i int) func(holon.Tx) error {
		return func(tx holon.Tx) error {
			id, err := tx.NewReceiptID()
			if err != nil {
				return err
			}
			r := &holon.Receipt{ID: id, Mandate: "m", Caller: "c", Status: holon.StatusRunning, Currency: "EUR", Payer: "ann", Created: now}
			if i%2 == 1 {
				agent, msg := "echo@1.0.0", "it failed"
				r.Agent, r.WorstCase, r.Children, r.Splits = &agent, &worst, []string{}, []journal.Share{}
				if err := tx.PutReceipt(r); err != nil {
					return err
				}
				parent := "r1"
				r.Parent, r.Status, r.Error, r.Billed = &parent, holon.StatusFailed, &msg, true
				r.Children = []string{"r3", "r2"}
				r.Splits = []journal.Share{{To: "bob", Amount: 40000}, {To: "carl", Amount: 30000}}
				r.Cost = holon.Cost{Own: 40000, Downstream: 30000, Total: 70000}
				r.DurationMS = 12
			}
			if err := tx.PutReceipt(r); err != nil {
				return err
			}
			h := &holon.Hold{Receipt: id, Payer: "ann", Amount: 5, Mandate: "m", Reserved: 7, Started: now}
			if i%2 == 1 {
				h.Children, h.Funder, h.Window = []string{"r9", "r8"}, "r1", "2026-12-05"
			}
			if err := tx.PutHold(h); err != nil {
				return err
			}
			mu.Lock()
			want[id] = r
			mu.Unlock()
			return nil
		}
	}
	fns := make([]func(holon.Tx) error, n)
	for i := range fns {
		fns[i] = put(i)
	}
	_, stmts0 := s.RoundTrips()
	for i, err := range grouped(t, s, fns...) {
		if err != nil {
			t.Fatalf("update %d: %v", i, err)
		}
	}
	// n new receipts, n/2 of them given a new state, n holds: one
	// statement each would be 2.5 n.
	if _, stmts := s.RoundTrips(); stmts-stmts0 >= n {
		t.Errorf("%d receipts and holds written in %d statements, want fewer than %d", 5*n/2, stmts-stmts0, n)
	}
	err := s.View(func(tx holon.Tx) error {
		for id, w := range want {
			got, err := tx.Receipt(id)
			if err != nil {
				return err
			}
			if got.Created.Equal(w.Created) {
				got.Created = w.Created
			}
			if !reflect.DeepEqual(got, w) {
				return fmt.Errorf("receipt %s reads back %+v, want %+v", id, got, w)
			}
			h, err := tx.Hold(id)
			if err != nil {
				return err
			}
			if h.Amount != 5 || h.Reserved != 7 || !h.Started.Equal(now) || (w.Agent != nil) != (h.Funder == "r1" && h.Window == "2026-12-05" && fmt.Sprint(h.Children) == "[r9 r8]") ||
				w.Agent == nil && (h.Children != nil || h.Funder != "" || h.Window != "") {
				return fmt.Errorf("hold %s reads back %+v", id, h)
			}
		}
		if c := tx.Counter("receipts"); c != n {
			return fmt.Errorf("%d receipts counted, want %d", c, n)
		}
		return nil
	})
	if err != nil {
		t.Error(err)
	}
}

// Ensure that the holds a group releases are deleted through the primary
// key however the holds table has grown: the plan PostgreSQL caches for
// the prepared deletion is made while the table is a few pages, and
// there a sequential scan is cheaper; once the table holds thousands of
// dead rows (each call puts a hold and deletes it, autovacuum comes a
// minute apart) that plan reads every page for each group's deletion.
func TestStore_HoldsReleasedWithoutScan(t *testing.T) {
	s, conn := openWatched(t, "holdscan")
	// stats is how many sequential scans of holds PostgreSQL counted, once
	// its statistics show dels holds deleted.
	stats := func(dels int64) int64 {
		t.Helper()
		return tableStats(t, conn, "holds", "n_tup_del", dels, "seq_scan")
	}
	// groups runs n pairs of groups: one puts 20 calls' receipts and
	// holds, the next releases those holds.
	groups := func(n int) {
		t.Helper()
		for range n {
			var ids []string
			err := s.Update(context.Background(), func(tx holon.Tx) error {
				ids = ids[:0]
				for range 20 {
					id, err := tx.NewReceiptID()
					if err != nil {
						return err
					}
					if err := tx.PutReceipt(&holon.Receipt{ID: id, Mandate: "m", Caller: "c", Status: holon.StatusRunning, Currency: "EUR", Payer: "ann", Created: tx.Now()}); err != nil {
						return err
					}
					if err := tx.PutHold(&holon.Hold{Receipt: id, Payer: "ann", Amount: 5, Mandate: "m", Reserved: 5, Started: tx.Now()}); err != nil {
						return err
					}
					ids = append(ids, id)
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			err = s.Update(context.Background(), func(tx holon.Tx) error {
				for _, id := range ids {
					if err := tx.DeleteHold(id); err != nil {
						return err
					}
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	// PostgreSQL plans a prepared statement afresh for its first five
	// runs, then keeps a generic plan.
	groups(10)
	before := stats(200)
	groups(30)
	if scans := stats(800) - before; scans > 0 {
		t.Errorf("30 groups that released 20 holds each scanned the holds table %d times, want 0 (deleted through its primary key)", scans)
	}
}

// Ensure that a receipt's second state, written when its call settles,
// mostly stays on the page of its first (a heap-only update, without new
// index entries): each round puts 20 calls' receipts, running, and
// settles those of the round before.
func TestStore_ReceiptsSettleOnTheirPage(t *testing.T) {
	s, conn := openWatched(t, "receiptpages")
	bg := context.Background()
	var last []*holon.Receipt
	const rounds, perRound = 20, 20
	for range rounds + 1 {
		var fresh []*holon.Receipt
		err := s.Update(bg, func(tx holon.Tx) error {
			fresh = fresh[:0]
			for range perRound {
				id, err := tx.NewReceiptID()
				if err != nil {
					return err
				}
				r := &holon.Receipt{ID: id, Mandate: "m", Caller: "c", Status: holon.StatusRunning, Currency: "EUR", Payer: "ann",
					Children: []string{}, Splits: []journal.Share{}, Created: tx.Now()}
				if err := tx.PutReceipt(r); err != nil {
					return err
				}
				fresh = append(fresh, r)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		err = s.Update(bg, func(tx holon.Tx) error {
			for _, r := range last {
				f := *r
				f.Status, f.Billed, f.DurationMS = holon.StatusSucceeded, true, 3
				f.Splits = []journal.Share{{To: "bob", Amount: 9000}, {To: "holon", Amount: 1000}}
				f.Cost = holon.Cost{Own: 10000, Total: 10000}
				if err := tx.PutReceipt(&f); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		last = fresh
	}
	upd := int64(rounds * perRound)
	if hot := tableStats(t, conn, "receipts", "n_tup_upd", upd, "n_tup_hot_upd"); hot*10 < upd*4 {
		t.Errorf("%d of %d receipts settled on their page, want at least 40%%", hot, upd)
	}
}

// openWatched opens a store on a new database, with a connection to that
// database beside it to read PostgreSQL's statistics of its tables.
//
// The database's tables are made first, by a store opened and closed
// before it: building a table's primary key counts as a sequential scan
// of the table, and a backend reports its counts to the statistics only
// from time to time (at the end of a transaction at most once a second,
// else within ten seconds once idle), so the migration's scans could
// show up in the middle of a test's count. A backend that exits reports
// its counts before it leaves pg_stat_activity.
func openWatched(t *testing.T, name string) (*pg.Store, *pgx.Conn) {
	t.Helper()
	bg := context.Background()
	srv := pgtest.Start(t)
	url := srv.CreateDB(t, name)
	made, err := pg.Open(bg, url, holon.StoreOptions{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	made.Close()
	conn := srv.Connect(t, url)
	for n := 0; ; n++ {
		var others int
		err := conn.QueryRow(bg, `SELECT count(*) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()`, name).Scan(&others)
		if err != nil {
			t.Fatal(err)
		}
		if others == 0 {
			break
		}
		if n == 300 {
			t.Fatalf("%d connections of a closed store still open after 30 s", others)
		}
		time.Sleep(100 * time.Millisecond)
	}
	s, err := pg.Open(bg, url, holon.StoreOptions{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, conn
}

// tableStats waits until PostgreSQL's statistics of table count at least
// n in column until (a backend reports them once idle, within ten
// seconds), and returns column of.
func tableStats(t *testing.T, conn *pgx.Conn, table, until string, n int64, of string) int64 {
	t.Helper()
	for range 300 {
		var got, v int64
		err := conn.QueryRow(context.Background(), `SELECT `+until+`, `+of+` FROM pg_stat_user_tables WHERE relname = $1`, table).Scan(&got, &v)
		if err != nil {
			t.Fatal(err)
		}
		if got >= n {
			return v
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("PostgreSQL's statistics never counted %d %s of %s", n, until, table)
	return 0
}
