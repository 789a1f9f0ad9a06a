package pg_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"holon.dev/holon"
	"holon.dev/holon/backup/pgtest"
	"holon.dev/holon/kv/pg"
)

// aheadSetup opens two handles on a new database, each with a block of
// receipt ids and one settlement committed (so that b's writer takes
// turns with a's: its last begin found a's groups in the log), and holds
// a's writer, and the writers' lock, with a's next settlement until
// release is called. ids are b's ids left; url is the database's.
func aheadSetup(t *testing.T, name string, bIDs int) (a, b *pg.Store, ids []string, release func(), done <-chan error, url string) {
	t.Helper()
	url = pgtest.Start(t).CreateDB(t, name)
	var stores []*pg.Store
	for range 2 {
		s, err := pg.Open(context.Background(), url, holon.StoreOptions{NoSync: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		stores = append(stores, s)
	}
	a, b = stores[0], stores[1]
	pg.NoWaitRuns(a) // its held update holds the lock
	bg := context.Background()
	var told uint64
	aIDs, bAll := receiptIDs(t, a, 2), receiptIDs(t, b, bIDs+1)
	if err := a.Update(bg, settleAt(aIDs[0], "payer0", &told)); err != nil {
		t.Fatal(err)
	}
	if err := b.Update(bg, settleAt(bAll[0], "payer1", &told)); err != nil {
		t.Fatal(err)
	}
	if err := a.Update(bg, func(holon.Tx) error { return nil }); err != nil {
		t.Fatal(err)
	}
	rel, done := heldUpdate(a, settleAt(aIDs[1], "payer0", &told))
	release = sync.OnceFunc(rel)
	t.Cleanup(release) // before the stores close, should the test stop early
	return a, b, bAll[1:], release, done, url
}

// releaseOnceRun waits until b's writer took every update queued and ran
// them while it waits for the lock, then releases a's held update and
// waits for it.
func releaseOnceRun(t *testing.T, b *pg.Store, release func(), doneA <-chan error) {
	t.Helper()
	for pg.Queued(b) > 0 {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond)
	release()
	if err := <-doneA; err != nil {
		t.Fatal(err)
	}
}

// waitingWrote reports whether the session waiting for the writers' lock
// wrote before it began to wait (its transaction has an id).
func waitingWrote(t *testing.T, s *pg.Store) bool {
	t.Helper()
	var wrote bool
	err := s.Read(context.Background(), func(tx pgx.Tx) error {
		return tx.QueryRow(context.Background(), `SELECT coalesce(bool_or(backend_xid IS NOT NULL), false) FROM pg_stat_activity
			WHERE wait_event_type = 'Lock' AND query LIKE 'LOCK TABLE writer_log%'`).Scan(&wrote)
	})
	if err != nil {
		t.Fatal(err)
	}
	return wrote
}

// Ensure that a writer that takes turns with another sends the new
// receipts of the updates it ran before asking for the lock ahead of the
// LOCK (its transaction wrote while it waits), and that they stand with
// their updates: each settlement's receipt once, the sums exact, the
// journal whole, no group run again.
func TestStore_ReceiptsSentAheadOfTheLock(t *testing.T) {
	const n = 10
	a, b, ids, release, doneA, _ := aheadSetup(t, "aheadsent", n)
	tolds := make([]uint64, n)
	errs, wait := submit(b, n, func(tx holon.Tx, i int) error { return settleAt(ids[i], "payer1", &tolds[i])(tx) })
	waitForLockWaiters(t, a, 1)
	wrote := waitingWrote(t, a)
	releaseOnceRun(t, b, release, doneA)
	wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if !wrote {
		t.Error("b's writer waited for the lock without having sent a receipt")
	}
	groups, rows, refused, undone := b.Ahead()
	if groups == 0 || rows == 0 || refused != 0 || undone != 0 {
		t.Errorf("ahead: %d groups sent %d receipts, %d refused, %d deleted; want some sent, none refused or deleted", groups, rows, refused, undone)
	}
	if b.SafeRuns() != 0 {
		t.Errorf("%d groups ran again safely, want none", b.SafeRuns())
	}
	const total = n + 3
	err := a.View(func(tx holon.Tx) error {
		for _, id := range ids {
			r, err := tx.Receipt(id)
			if err != nil || r.Payer != "payer1" {
				return fmt.Errorf("receipt %s: %+v, %v", id, r, err)
			}
		}
		if c := tx.Counter("receipts"); c != total {
			return fmt.Errorf("receipts counter %d, want %d", c, total)
		}
		for name, want := range map[string]int64{"platform": total, "payer1": -3 * (n + 1)} {
			if acct, err := tx.Account(name); err != nil || acct.Balance.Micros() != want {
				return fmt.Errorf("%s: %+v, %v; want balance %d", name, acct, err, want)
			}
		}
		return tx.(*pg.Tx).VerifyJournal()
	})
	if err != nil {
		t.Error(err)
	}
	var count int
	err = a.Read(context.Background(), func(tx pgx.Tx) error {
		return tx.QueryRow(context.Background(), `SELECT count(*) FROM receipts`).Scan(&count)
	})
	if err != nil || count != total {
		t.Errorf("%d receipts in the table (%v), want %d", count, err, total)
	}
}

// Ensure that a receipt sent ahead for an update that saw a row the
// other writer changed meanwhile is deleted, and the update runs again
// once the lock is held: its receipt is its second run's, once, and no
// group runs again safely (the second run's insert finds no row in its
// way).
func TestStore_ReceiptSentAheadUndoneWhenRunAgain(t *testing.T) {
	a, b, ids, release, doneA, _ := aheadSetup(t, "aheadundone", 1)
	doneB := make(chan error, 1)
	go func() {
		doneB <- b.Update(context.Background(), func(tx holon.Tx) error {
			p, err := tx.Account("platform")
			if err != nil {
				return err
			}
			// The platform's balance as it saw it, in its receipt.
			seen := fmt.Sprintf("platform %d", p.Balance.Micros())
			return tx.PutReceipt(&holon.Receipt{ID: ids[0], Mandate: "m-payer1", Caller: "payer1", Status: holon.StatusSucceeded,
				Error: &seen, Payer: "payer1", Currency: "EUR", Created: tx.Now()})
		})
	}()
	waitForLockWaiters(t, a, 1)
	wrote := waitingWrote(t, a)
	time.Sleep(50 * time.Millisecond)
	release()
	for _, done := range []<-chan error{doneA, doneB} {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	if !wrote {
		t.Error("b's writer waited for the lock without having sent its receipt")
	}
	if _, rows, refused, undone := b.Ahead(); rows != 1 || refused != 0 || undone != 1 {
		t.Errorf("ahead: %d receipts sent, %d groups refused, %d deleted; want the one sent and deleted", rows, refused, undone)
	}
	if b.SafeRuns() != 0 {
		t.Errorf("%d groups ran again safely, want none", b.SafeRuns())
	}
	err := b.View(func(tx holon.Tx) error {
		r, err := tx.Receipt(ids[0])
		if err != nil {
			return err
		}
		if r.Error == nil || *r.Error != "platform 3" {
			return fmt.Errorf("the receipt says %v, want %q (after a's three settlements)", r.Error, "platform 3")
		}
		return nil
	})
	if err != nil {
		t.Error(err)
	}
}

// Ensure that a receipt sent ahead that PostgreSQL refuses (a row under
// its id already there) costs nothing else: the writer begins again
// without it, and the update that wrote it fails alone (its group run
// again safely), the other of its group committed.
func TestStore_ReceiptSentAheadRefused(t *testing.T) {
	a, b, ids, release, doneA, url := aheadSetup(t, "aheadrefused", 2)
	// A row under the first id, which b does not know of.
	conn, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(context.Background(), `INSERT INTO receipts (id, seq, mandate, caller, agent, status, currency, payer, billed,
			cost_own, cost_downstream, cost_total, duration_ms, created)
		VALUES ($1, $2, 'm-x', 'x', NULL, 'failed', 'EUR', 'x', false, 0, 0, 0, 0, '2026-01-01T00:00:00Z')`, ids[0], seqOf(ids[0])); err != nil {
		t.Fatal(err)
	}
	var told [2]uint64
	errs, wait := submit(b, 2, func(tx holon.Tx, i int) error { return settleAt(ids[i], "payer1", &told[i])(tx) })
	waitForLockWaiters(t, a, 1)
	releaseOnceRun(t, b, release, doneA)
	wait()
	if errs[0] == nil || !strings.Contains(errs[0].Error(), "receipts_pkey") {
		t.Errorf("the settlement under a receipt id already there: %v, want refused (receipts_pkey)", errs[0])
	}
	if errs[1] != nil {
		t.Errorf("the other settlement: %v", errs[1])
	}
	if _, rows, refused, _ := b.Ahead(); rows+refused == 0 || refused == 0 {
		t.Errorf("ahead: %d receipts stood, %d groups refused; want one refused", rows, refused)
	}
	err = b.View(func(tx holon.Tx) error {
		if r, err := tx.Receipt(ids[0]); err != nil || r.Payer != "x" {
			return fmt.Errorf("receipt %s: %+v, %v; want the row put there first", ids[0], r, err)
		}
		if r, err := tx.Receipt(ids[1]); err != nil || r.Payer != "payer1" {
			return fmt.Errorf("receipt %s: %+v, %v", ids[1], r, err)
		}
		if acct, err := tx.Account("payer1"); err != nil || acct.Balance.Micros() != -6 {
			return fmt.Errorf("payer1: %+v, %v; want -6 (two settlements of three)", acct, err)
		}
		return tx.(*pg.Tx).VerifyJournal()
	})
	if err != nil {
		t.Error(err)
	}
}

func seqOf(id string) int64 {
	n, _ := strconv.ParseInt(strings.TrimPrefix(id, "r"), 10, 64)
	return n
}
