package pg_test

import (
	"context"
	"testing"
	"time"

	"holon.dev/holon"
	"holon.dev/holon/backup/pgtest"
	"holon.dev/holon/journal"
	"holon.dev/holon/kv/pg"
)

// readsSince is what s's Views cost since before.
func readsSince(s *pg.Store, before pg.Reads) pg.Reads {
	r := s.Reads()
	return pg.Reads{Views: r.Views - before.Views, Begun: r.Begun - before.Begun, Trips: r.Trips - before.Trips}
}

// Ensure that a View's BEGIN goes with its first query and its end is not
// waited for: a View of one read costs that read's round trip (and the
// ROLLBACK sent after it returned), a View that reads nothing costs none.
func TestView_BeginsWithItsFirstQuery(t *testing.T) {
	stores, _ := openOn(t, "view_trips", 1)
	s := stores[0]
	if err := s.Update(context.Background(), func(tx holon.Tx) error { _, err := tx.AddCounter("c", 3); return err }); err != nil {
		t.Fatal(err)
	}
	before := s.Reads()
	var n uint64
	if err := s.View(func(tx holon.Tx) error { n = tx.Counter("c"); return nil }); err != nil || n != 3 {
		t.Fatalf("counter %d, %v, want 3", n, err)
	}
	if r := readsSince(s, before); r.Views != 1 || r.Begun != 1 || r.Trips != 2 {
		t.Errorf("a View of one read: %+v, want 1 View begun, 2 round trips (the read with its BEGIN, the ROLLBACK)", r)
	}
	before = s.Reads()
	if err := s.View(func(tx holon.Tx) error { tx.Now(); return nil }); err != nil {
		t.Fatal(err)
	}
	if r := readsSince(s, before); r.Views != 1 || r.Begun != 0 || r.Trips != 0 {
		t.Errorf("a View that reads nothing: %+v, want no round trip", r)
	}
}

// putM1 writes mandate m1 with a budget spent 5, reserved 7.
func putM1(tx holon.Tx) error {
	if err := tx.PutMandate("m1", holon.Doc{Doc: []byte(`{"id":"m1"}`), Created: time.Now()}); err != nil {
		return err
	}
	return tx.AddBudget("m1", 5, 7)
}

// Ensure that a View reads a mandate's budget with the mandate, and
// reads nothing twice: admission's reads of a mandate (its revision, its
// record) and of its budget cost one round trip.
func TestView_MandateBringsItsBudget(t *testing.T) {
	stores, _ := openOn(t, "view_mandate", 1)
	s := stores[0]
	if err := s.Update(context.Background(), putM1); err != nil {
		t.Fatal(err)
	}
	var err error
	before := s.Reads()
	var b holon.Budget
	err = s.View(func(tx holon.Tx) error {
		if tx.MandateRevision("m1") == nil {
			t.Error("no revision of mandate m1")
		}
		if _, err := tx.Mandate("m1"); err != nil {
			return err
		}
		b, err = tx.Budget("m1")
		return err
	})
	if err != nil || b.Spent != journal.Amount(5) || b.Reserved != journal.Amount(7) {
		t.Fatalf("budget %+v, %v, want spent 5 reserved 7", b, err)
	}
	if r := readsSince(s, before); r.Trips != 2 {
		t.Errorf("a mandate's revision, record and budget in a View: %+v, want 2 round trips (one read, the ROLLBACK)", r)
	}
	// A mandate without a budget row reads a zero budget.
	before = s.Reads()
	err = s.View(func(tx holon.Tx) error {
		if _, err := tx.Mandate("m2"); err != holon.ErrNotFound {
			t.Errorf("mandate m2: %v, want not found", err)
		}
		b, err = tx.Budget("m2")
		return err
	})
	if err != nil || b != (holon.Budget{}) {
		t.Errorf("budget of m2 %+v, %v, want zero", b, err)
	}
	if r := readsSince(s, before); r.Trips != 2 {
		t.Errorf("a missing mandate and its budget: %+v, want 2 round trips", r)
	}
}

// Ensure that a View sees one state: what commits after its first read
// is not seen by its later reads, of other rows too.
func TestView_OneSnapshotFromItsFirstRead(t *testing.T) {
	stores, _ := openOn(t, "view_snapshot", 1)
	s := stores[0]
	bg := context.Background()
	add := func() {
		t.Helper()
		err := s.Update(bg, func(tx holon.Tx) error {
			if _, err := tx.AddCounter("a", 1); err != nil {
				return err
			}
			_, err := tx.AddCounter("b", 1)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	add()
	var a, b uint64
	err := s.View(func(tx holon.Tx) error {
		a = tx.Counter("a")
		add() // commits while the View is open
		b = tx.Counter("b")
		return nil
	})
	if err != nil || a != 1 || b != 1 {
		t.Errorf("a View read a=%d then b=%d (%v), want 1 and 1: one state", a, b, err)
	}
}

// openCrashable opens a store on a new database of its own server, one
// the test may stop as a crash would.
func openCrashable(t *testing.T, name string) (*pgtest.Server, *pg.Store) {
	t.Helper()
	srv := pgtest.StartCrashable(t)
	s, err := pg.Open(context.Background(), srv.CreateDB(t, name), holon.StoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return srv, s
}

// Ensure that a View that finds its connection dead (PostgreSQL stopped
// at once and started again since it was last used: every pooled
// connection is dead) is sent again on a fresh one and answers.
func TestView_RetriedAfterServerRestart(t *testing.T) {
	srv, s := openCrashable(t, "view_restart")
	if err := s.Update(context.Background(), func(tx holon.Tx) error { _, err := tx.AddCounter("c", 2); return err }); err != nil {
		t.Fatal(err)
	}
	// Fill the pool with connections, each used.
	hold := make(chan struct{})
	held := make(chan struct{}, 3)
	done := make(chan error, 3)
	for range 3 {
		go func() {
			done <- s.View(func(tx holon.Tx) error {
				tx.Counter("c")
				held <- struct{}{}
				<-hold
				return nil
			})
		}()
	}
	for range 3 {
		<-held
	}
	close(hold)
	for range 3 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(200 * time.Millisecond) // the Views' ends return their connections
	if err := srv.Crash(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := srv.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		var n uint64
		if err := s.View(func(tx holon.Tx) error { n = tx.Counter("c"); return nil }); err != nil || n != 2 {
			t.Fatalf("View %d after the restart: counter %d, %v; want 2", i, n, err)
		}
	}
}

// Ensure that a View that cannot begin (PostgreSQL is down) returns
// store_unavailable, and that fn sees no answer of it: a caller that
// reads what fn kept before the View's error (a mandate "not found")
// must not be misled.
func TestView_NotBegunStopsFn(t *testing.T) {
	srv, s := openCrashable(t, "view_down")
	if err := srv.Crash(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Restart(context.Background()) })
	answered := false
	err := s.View(func(tx holon.Tx) error {
		tx.MandateRevision("m1")
		answered = true
		return nil
	})
	if holon.ErrorCode(err) != holon.CodeStoreUnavailable || answered {
		t.Errorf("a View with PostgreSQL down: %v, fn went on after its first read: %v; want store_unavailable, fn stopped", err, answered)
	}
}

// Ensure that a View reads the records named ahead (admission's
// candidates) with its next round trip: with the mandate and its budget,
// or, when a record is read first, all of them with that one; a record
// not there reads as none.
func TestView_RecordsAheadComeWithTheNextRead(t *testing.T) {
	stores, _ := openOn(t, "view_records", 1)
	s := stores[0]
	err := s.Update(context.Background(), func(tx holon.Tx) error {
		if err := putM1(tx); err != nil {
			return err
		}
		id, err := tx.NewReceiptID()
		if err != nil {
			return err
		}
		if err := tx.PutReceipt(&holon.Receipt{ID: id, Mandate: "m1", Caller: "c", Status: holon.StatusSucceeded, Currency: "EUR", Payer: "ann", Created: tx.Now()}); err != nil {
			return err
		}
		return tx.AppendEvent(&holon.Event{Receipt: id, Agent: "a@1.0.0", Status: holon.StatusSucceeded, Billed: 3, Currency: "EUR", Time: tx.Now()}, true)
	})
	if err != nil {
		t.Fatal(err)
	}
	check := func(what string, fn func(tx holon.Tx) error) {
		t.Helper()
		before := s.Reads()
		var a, b holon.Record
		err := s.View(func(tx holon.Tx) error {
			tx.(holon.RecordsAhead).RecordsAhead("a@1.0.0", "b@1.0.0")
			if err := fn(tx); err != nil {
				return err
			}
			var err error
			if a, err = tx.Record("a@1.0.0"); err != nil {
				return err
			}
			b, err = tx.Record("b@1.0.0")
			return err
		})
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if a.Runs != 1 || a.Succeeded != 1 || a.Billed != 3 || b != (holon.Record{}) {
			t.Errorf("%s: records %+v and %+v, want one run billed 3 and none", what, a, b)
		}
		if r := readsSince(s, before); r.Trips != 2 {
			t.Errorf("%s: %+v, want 2 round trips (one read, the ROLLBACK)", what, r)
		}
	}
	check("with the mandate and budget", func(tx holon.Tx) error {
		if tx.MandateRevision("m1") == nil {
			t.Error("no revision of mandate m1")
		}
		bud, err := tx.Budget("m1")
		if err == nil && bud.Spent != 5 {
			t.Errorf("budget %+v, want spent 5", bud)
		}
		return err
	})
	check("read first", func(holon.Tx) error { return nil })
}

// Ensure that a View reads the accounts and counters named ahead (an
// in-memory admission's payer and the receipts counter) with its next
// round trip, as it reads records: with the mandate and its budget, or,
// when one of them is read first, all of them with that one; an account
// or counter not there reads as zero.
func TestView_AccountsAndCountersAheadComeWithTheNextRead(t *testing.T) {
	stores, _ := openOn(t, "view_ahead", 1)
	s := stores[0]
	err := s.Update(context.Background(), func(tx holon.Tx) error {
		if err := putM1(tx); err != nil {
			return err
		}
		if _, err := tx.AppendEntry(journal.Entry{Key: "k1", Lines: []journal.Line{{Account: "ann", Amount: 9}, {Account: "external:bank", Amount: -9}}}); err != nil {
			return err
		}
		_, err := tx.AddCounter("receipts", 4)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, first := range []string{"mandate", "account", "counter"} {
		before := s.Reads()
		var ann, nobody holon.Account
		var n, none uint64
		err := s.View(func(tx holon.Tx) error {
			ra := tx.(holon.ReadsAhead)
			ra.AccountsAhead("ann", "nobody")
			ra.CountersAhead("receipts", "none")
			if first == "mandate" && tx.MandateRevision("m1") == nil {
				t.Error("no revision of mandate m1")
			}
			if first == "counter" {
				n = tx.Counter("receipts")
			}
			var err error
			if ann, err = tx.Account("ann"); err != nil {
				return err
			}
			if nobody, err = tx.Account("nobody"); err != nil {
				return err
			}
			n, none = tx.Counter("receipts"), tx.Counter("none")
			return nil
		})
		if err != nil {
			t.Fatalf("%s first: %v", first, err)
		}
		if ann.Balance != 9 || nobody != (holon.Account{}) || n != 4 || none != 0 {
			t.Errorf("%s first: ann %+v, nobody %+v, counters %d and %d; want 9, nothing, 4 and 0", first, ann, nobody, n, none)
		}
		if r := readsSince(s, before); r.Trips != 2 {
			t.Errorf("%s first: %+v, want 2 round trips (one read, the ROLLBACK)", first, r)
		}
	}
}
