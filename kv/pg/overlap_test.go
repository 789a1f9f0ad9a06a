package pg_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"holon.dev/holon"
	"holon.dev/holon/kv/pg"
)

// slowCommits makes a group that counts "gate" or "gate-fail" wait at its
// COMMIT (a deferred trigger takes an advisory lock, which the returned
// connection holds until release is called), a group that counts
// "gate-fail" then be refused there, and returns release.
func slowCommits(t *testing.T, s *pg.Store) (release func()) {
	t.Helper()
	ctx := context.Background()
	var conn *pgx.Conn
	err := s.Read(ctx, func(tx pgx.Tx) error {
		conn = tx.Conn()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	conn, err = pgx.ConnectConfig(ctx, conn.Config())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	_, err = conn.Exec(ctx, `
CREATE FUNCTION test_gate() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	PERFORM pg_advisory_xact_lock(4242);
	IF NEW.name = 'gate-fail' THEN
		RAISE EXCEPTION 'the test refuses this group at its COMMIT';
	END IF;
	RETURN NULL;
END $$;
CREATE CONSTRAINT TRIGGER test_gate AFTER INSERT OR UPDATE ON counters
	DEFERRABLE INITIALLY DEFERRED FOR EACH ROW WHEN (NEW.name LIKE 'gate%') EXECUTE FUNCTION test_gate();
SELECT pg_advisory_lock(4242)`)
	if err != nil {
		t.Fatal(err)
	}
	var once atomic.Bool
	release = func() {
		if once.CompareAndSwap(false, true) {
			if _, err := conn.Exec(context.Background(), `SELECT pg_advisory_unlock(4242)`); err != nil {
				t.Error(err)
			}
		}
	}
	t.Cleanup(release)
	return release
}

// overlapRun opens a store on a new database name, moves ann once, then
// runs an update that counts gate (its COMMIT waits for the test) and,
// once that COMMIT waits, a second update that moves ann: it returns the
// store, both updates' errors and how many times the second ran before
// the COMMIT was let go of, and in all.
func overlapRun(t *testing.T, name, gate string) (s *pg.Store, err1, err2 error, before, runs int64) {
	t.Helper()
	bg := context.Background()
	stores, _ := openOn(t, name, 1)
	s = stores[0]
	if err := s.Update(bg, func(tx holon.Tx) error { return moveAnn(tx, "a0") }); err != nil {
		t.Fatal(err)
	}
	release := slowCommits(t, s)
	done1, done2 := make(chan error, 1), make(chan error, 1)
	go func() {
		done1 <- s.Update(bg, func(tx holon.Tx) error {
			if _, err := tx.AddCounter(gate, 1); err != nil {
				return err
			}
			return moveAnn(tx, "a1")
		})
	}()
	waitForLockWaiters(t, s, 1) // its COMMIT waits in the trigger
	var ran atomic.Int64
	started := make(chan struct{}, 8)
	go func() {
		done2 <- s.Update(bg, func(tx holon.Tx) error {
			ran.Add(1)
			started <- struct{}{}
			return moveAnn(tx, "a2")
		})
	}()
	select {
	case <-started:
	case <-time.After(10 * time.Second):
	}
	before = ran.Load()
	release()
	err1, err2 = <-done1, <-done2
	return s, err1, err2, before, ran.Load()
}

// Ensure that a writer alone on the database runs the updates that queue
// while a group's COMMIT is in flight before that COMMIT is answered, and
// that they commit, once, after it.
func TestStore_OverlapRunsNextGroupDuringCommit(t *testing.T) {
	s, err1, err2, before, _ := overlapRun(t, "overlap", "gate")
	if err1 != nil || err2 != nil {
		t.Fatalf("updates: %v; %v", err1, err2)
	}
	if before == 0 {
		t.Error("an update queued while the COMMIT before it was in flight did not run until that COMMIT was answered")
	}
	if ran, lost := s.Overlapped(); ran == 0 || lost != 0 {
		t.Errorf("%d updates ran during a COMMIT, %d times thrown away; want some, none", ran, lost)
	}
	wantMoves(t, s, 3)
}

// Ensure that when the COMMIT in flight is refused, the updates run
// meanwhile are thrown away and run again after the refused group's own
// updates ran again safely: the refused update fails alone, the next
// commits once, and the journal verifies.
func TestStore_OverlapThrownAwayWhenCommitRefused(t *testing.T) {
	s, err1, err2, before, runs := overlapRun(t, "overlapfail", "gate-fail")
	if err1 == nil || !strings.Contains(err1.Error(), "the test refuses") {
		t.Errorf("the refused group's update: %v; want the trigger's refusal", err1)
	}
	if err2 != nil {
		t.Errorf("the update run during the refused COMMIT: %v", err2)
	}
	if before == 0 || runs < 2 {
		t.Errorf("the next update ran %d times during the COMMIT, %d in all; want 1 then again", before, runs)
	}
	if _, lost := s.Overlapped(); lost == 0 {
		t.Error("no updates run during a refused COMMIT were thrown away")
	}
	if s.SafeRuns() == 0 {
		t.Error("the refused group did not run again safely")
	}
	wantMoves(t, s, 2) // a0 and a2: a1 was refused
}
