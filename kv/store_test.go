package kv_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"holon.dev/holon"
	"holon.dev/holon/kv"
)

// Ensure that concurrent updates are grouped into fewer commits than updates,
// and that every one of them lands.
func TestStore_Update_GroupCommit(t *testing.T) {
	const n = 500
	s := mustOpen(t, kv.Options{}) // fsync on, as a gateway runs
	g := closeGate(t, s)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			e := transfer(t, fmt.Sprintf("admin-credit:%d", i), "external:demo-credit", fmt.Sprintf("acct%03d", i%50), "0.01")
			errs[i] = s.Update(context.Background(), func(tx *kv.Tx) error {
				_, err := tx.AppendEntry(e)
				return err
			})
		}()
	}
	// Open the gate once most are queued: the rest join later batches.
	g.release(t, s, n/2)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("update %d: %v", i, err)
		}
	}
	st := s.Stats()
	t.Logf("stats: %+v", st)
	if st.Updates != n+1 { // the gate's update counts too
		t.Errorf("Updates = %d, want %d", st.Updates, n+1)
	}
	if st.Commits >= st.Updates || st.MaxBatch < 2 {
		t.Errorf("Stats = %+v, want fewer commits than updates", st)
	}
	rows := journalRows(t, s)
	if len(rows) != n {
		t.Fatalf("journal has %d rows, want %d", len(rows), n)
	}
	for i, r := range rows {
		if r.Seq != uint64(i+1) {
			t.Fatalf("row %d has seq %d", i+1, r.Seq)
		}
	}
	if got := balance(t, s, "acct007"); got != amt("0.10") {
		t.Errorf("acct007 = %s, want 0.10", got)
	}
	mustView(t, s, func(tx *kv.Tx) error {
		if c := tx.Counter("journal_entries"); c != n {
			t.Errorf("journal_entries = %d, want %d", c, n)
		}
		return tx.VerifyJournal()
	})
}

var errRefused = errors.New("refused on purpose")

// Ensure that an update that fails or panics gets its own error, does not
// fail the updates batched with it, and leaves no write behind.
func TestStore_Update_FailingNeighbour(t *testing.T) {
	const n = 200
	s := mustOpen(t, kv.Options{NoSync: true})
	g := closeGate(t, s)
	fails := func(i int) bool { return i%10 == 0 }
	panics := func(i int) bool { return i%50 == 0 }
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			e := transfer(t, fmt.Sprintf("admin-credit:%d", i), "external:demo-credit", "bob", "0.01")
			errs[i] = s.Update(context.Background(), func(tx *kv.Tx) error {
				// Write everywhere first, so a leak would show.
				id, err := tx.NewReceiptID()
				if err != nil {
					return err
				}
				if err := tx.PutReceipt(&holon.Receipt{ID: id, Mandate: fmt.Sprintf("m%d", i), Status: "succeeded"}); err != nil {
					return err
				}
				if _, err := tx.AppendEntry(e); err != nil {
					return err
				}
				if err := tx.PutMandate(fmt.Sprintf("m%d", i), holon.Doc{Doc: json.RawMessage(`{}`)}); err != nil {
					return err
				}
				if _, err := tx.AddCounter(fmt.Sprintf("c%d", i), 1); err != nil {
					return err
				}
				switch {
				case panics(i):
					panic(fmt.Sprintf("boom %d", i))
				case fails(i):
					return fmt.Errorf("update %d: %w", i, errRefused)
				}
				return nil
			})
		}()
	}
	g.release(t, s, n/2)
	wg.Wait()

	ok := 0
	for i, err := range errs {
		switch {
		case panics(i):
			if err == nil || !strings.Contains(err.Error(), "panic") || !strings.Contains(err.Error(), fmt.Sprintf("boom %d", i)) {
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
	st := s.Stats()
	t.Logf("stats: %+v", st)
	if st.Updates != uint64(ok+1) {
		t.Errorf("Stats.Updates = %d, want %d", st.Updates, ok+1)
	}
	mustView(t, s, func(tx *kv.Tx) error {
		for i := range n {
			_, mErr := tx.Mandate(fmt.Sprintf("m%d", i))
			visible := []bool{tx.HasEntry(fmt.Sprintf("admin-credit:%d", i)), mErr == nil, tx.Counter(fmt.Sprintf("c%d", i)) == 1}
			for j, v := range visible {
				if v == fails(i) {
					t.Errorf("update %d (failing: %v): write %d visible: %v", i, fails(i), j, v)
				}
			}
		}
		if c := tx.Counter("receipts"); c != uint64(ok) {
			t.Errorf("receipts counter = %d, want %d", c, ok)
		}
		page, err := tx.Receipts("", "", n)
		if err != nil {
			return err
		}
		// Refused updates gave their receipt id back: ids stay dense.
		if len(page.Receipts) != ok || page.Receipts[0].ID != fmt.Sprintf("r%d", ok) {
			t.Errorf("%d receipts, newest %s; want %d, newest r%d", len(page.Receipts), page.Receipts[0].ID, ok, ok)
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
	if got, want := balance(t, s, "bob"), amt("0.01")*180; got != want {
		t.Errorf("bob = %s, want %s", got, want)
	}
}

// Ensure that an update that fails alone is not counted as a replay.
func TestStore_Update_FailAlone(t *testing.T) {
	s := mustOpen(t, kv.Options{NoSync: true})
	if err := s.Update(context.Background(), func(*kv.Tx) error { return errRefused }); !errors.Is(err, errRefused) {
		t.Fatalf("Update = %v, want %v", err, errRefused)
	}
	mustUpdate(t, s, func(tx *kv.Tx) error { _, err := tx.AddCounter("c", 1); return err })
	if st := s.Stats(); st.Commits != 1 || st.Updates != 1 || st.Replays != 0 || st.MaxBatch != 1 {
		t.Errorf("Stats = %+v, want one commit of one update and no replay", st)
	}
}

// Ensure that the journal, balances and sequences survive a reopen: the
// chain continues from the same head and no id is handed out twice.
func TestStore_Open_Reopen(t *testing.T) {
	s := mustOpen(t, kv.Options{})
	path := s.Path()
	credit(t, s, "bob", "5")
	credit(t, s, "lena", "3")
	mustUpdate(t, s, func(tx *kv.Tx) error {
		for range 3 {
			id, err := tx.NewReceiptID()
			if err != nil {
				return err
			}
			if err := tx.PutReceipt(&holon.Receipt{ID: id, Mandate: "bob/sandbox"}); err != nil {
				return err
			}
			a, err := tx.NewApprovalID()
			if err != nil {
				return err
			}
			if err := tx.PutApproval(&holon.Approval{ID: a, Status: holon.ApprovalPending}); err != nil {
				return err
			}
			if err := tx.AppendEvent(&holon.Event{Receipt: id, Agent: "acme/x@1.0.0"}, true); err != nil {
				return err
			}
		}
		_, err := tx.AppendEntry(transfer(t, "settle:r1", "bob", "lena", "0.50"))
		return err
	})
	before := journalRows(t, s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s2, err := kv.Open(path, kv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	after := journalRows(t, s2)
	if len(after) != len(before) || after[len(after)-1].Hash != before[len(before)-1].Hash {
		t.Fatalf("journal after reopen: %d rows, head %s; want %d, head %s",
			len(after), after[len(after)-1].Hash, len(before), before[len(before)-1].Hash)
	}
	for account, want := range map[string]string{"bob": "4.50", "lena": "3.50"} {
		if got := balance(t, s2, account); got != amt(want) {
			t.Errorf("%s = %s, want %s", account, got, want)
		}
	}
	var row holon.JournalRow
	var receipt, approval string
	var event holon.Event
	mustUpdate(t, s2, func(tx *kv.Tx) (err error) {
		if row, err = tx.AppendEntry(transfer(t, "settle:r4", "lena", "bob", "0.25")); err != nil {
			return err
		}
		if receipt, err = tx.NewReceiptID(); err != nil {
			return err
		}
		if approval, err = tx.NewApprovalID(); err != nil {
			return err
		}
		event = holon.Event{Receipt: receipt, Agent: "acme/x@1.0.0"}
		return tx.AppendEvent(&event, false)
	})
	if row.Seq != 4 || row.Prev != before[2].Hash {
		t.Errorf("first row after reopen: seq %d prev %s, want seq 4 prev %s", row.Seq, row.Prev, before[2].Hash)
	}
	if receipt != "r4" || approval != "a4" || event.Seq != 4 {
		t.Errorf("ids after reopen: %s %s event %d, want r4 a4 event 4", receipt, approval, event.Seq)
	}
	mustView(t, s2, func(tx *kv.Tx) error {
		if rec, _ := tx.Record("acme/x@1.0.0"); rec.Runs != 4 || rec.Succeeded != 3 {
			t.Errorf("record = %+v, want 4 runs, 3 succeeded", rec)
		}
		return tx.VerifyJournal()
	})
}

// Ensure that Update after Close returns ErrClosed.
func TestStore_Update_Closed(t *testing.T) {
	s := mustOpen(t, kv.Options{NoSync: true})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Update(context.Background(), func(*kv.Tx) error { return nil }); err != holon.ErrClosed {
		t.Errorf("Update after Close = %v, want ErrClosed", err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close = %v", err)
	}
}

// Ensure that Close commits the updates already submitted before it stops
// the writer.
func TestStore_Close_Drain(t *testing.T) {
	const n = 50
	s := mustOpen(t, kv.Options{NoSync: true})
	path := s.Path()
	g := closeGate(t, s)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = s.Update(context.Background(), func(tx *kv.Tx) error {
				_, err := tx.AddCounter("drained", 1)
				return err
			})
		}()
	}
	for s.QueuedForTest() < n {
		time.Sleep(time.Millisecond)
	}
	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	// Once updates are refused, Close has begun: only then let the writer go.
	for !s.ClosedForTest() {
		time.Sleep(time.Millisecond)
	}
	if err := s.Update(context.Background(), func(*kv.Tx) error { return nil }); err != holon.ErrClosed {
		t.Errorf("Update while closing = %v, want ErrClosed", err)
	}
	g.release(t, s, 0)
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("update %d submitted before Close: %v", i, err)
		}
	}
	s2, err := kv.Open(path, kv.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	mustView(t, s2, func(tx *kv.Tx) error {
		if c := tx.Counter("drained"); c != n {
			t.Errorf("drained = %d, want %d", c, n)
		}
		return nil
	})
}

// Ensure that updates racing with Close all return, committed or refused,
// and never hang.
func TestStore_Close_Race(t *testing.T) {
	for round := range 50 {
		s := mustOpen(t, kv.Options{NoSync: true})
		var wg sync.WaitGroup
		for range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for s.Update(context.Background(), func(tx *kv.Tx) error { return nil }) != holon.ErrClosed {
				}
			}()
		}
		time.Sleep(time.Millisecond)
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatalf("round %d: an Update still waits 10 s after Close", round)
		}
	}
}

// Ensure that an update whose context ends while it waits to be submitted
// returns the context's error and never runs.
func TestStore_Update_ContextDone(t *testing.T) {
	const queue = 4096 // the store's queue of submitted updates
	s := mustOpen(t, kv.Options{NoSync: true})
	g := closeGate(t, s)
	var wg sync.WaitGroup
	for range queue {
		wg.Add(1)
		go func() { defer wg.Done(); _ = s.Update(context.Background(), func(*kv.Tx) error { return nil }) }()
	}
	for s.QueuedForTest() < queue {
		time.Sleep(time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	ran := false
	if err := s.Update(ctx, func(*kv.Tx) error { ran = true; return nil }); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Update = %v, want context.DeadlineExceeded", err)
	}
	g.release(t, s, 0)
	wg.Wait()
	if ran {
		t.Error("an update refused by its context ran")
	}
}

// Ensure that Apply returns once its update is applied, that an update
// submitted after it sees its writes (it lands in the same commit or a
// later one), that its Commit then reports it durable, and that a failing
// neighbour queued before it in the batch does not make it apply twice.
func TestStore_Apply(t *testing.T) {
	s := mustOpen(t, kv.Options{}) // fsync on, as a gateway runs
	g := closeGate(t, s)
	failed := make(chan error, 1)
	go func() {
		failed <- s.Update(context.Background(), func(tx *kv.Tx) error {
			if _, err := tx.AppendEntry(transfer(t, "admin-credit:bad", "external:demo-credit", "bob", "0.01")); err != nil {
				return err
			}
			return errRefused
		})
	}()
	applied := make(chan *kv.Commit, 1)
	go func() {
		c, err := s.Apply(context.Background(), func(tx *kv.Tx) error {
			_, err := tx.AppendEntry(transfer(t, "admin-credit:apply", "external:demo-credit", "ann", "0.02"))
			return err
		})
		if err != nil {
			t.Error(err)
		}
		applied <- c
	}()
	g.release(t, s, 2)
	c := <-applied
	if err := <-failed; !errors.Is(err, errRefused) {
		t.Errorf("the failing neighbour: %v", err)
	}
	var seen bool
	mustUpdate(t, s, func(tx *kv.Tx) error {
		seen = tx.HasEntry("admin-credit:apply")
		return nil
	})
	if !seen {
		t.Error("an update submitted after Apply returned does not see its writes")
	}
	if err := c.Wait(); err != nil || c.Wait() != nil {
		t.Fatalf("Commit.Wait: %v", err)
	}
	if b := balance(t, s, "ann"); b != amt("0.02") {
		t.Errorf("ann has %s after the Apply, want 0.02 (applied once)", b)
	}
	if _, err := s.Apply(context.Background(), func(tx *kv.Tx) error { return errRefused }); !errors.Is(err, errRefused) {
		t.Errorf("Apply of a failing update: %v, want its error", err)
	}
}

// Ensure that a commit that fails after Apply let its caller go on breaks
// the store: the Commit reports the failure, and every later update is
// refused with ErrBroken, so nothing commits on top of the lost writes.
func TestStore_Apply_FailedCommitBreaks(t *testing.T) {
	s := mustOpen(t, kv.Options{NoSync: true})
	disk := errors.New("disk on fire")
	s.FailCommitsForTest(disk)
	c, err := s.Apply(context.Background(), func(tx *kv.Tx) error {
		_, err := tx.AppendEntry(transfer(t, "admin-credit:lost", "external:demo-credit", "ann", "0.02"))
		return err
	})
	if err != nil {
		t.Fatalf("Apply: %v (the failure comes with the commit)", err)
	}
	if err := c.Wait(); !errors.Is(err, disk) {
		t.Errorf("Commit.Wait: %v, want the commit's failure", err)
	}
	for _, try := range []func() error{
		func() error { return s.Update(context.Background(), func(*kv.Tx) error { return nil }) },
		func() error { _, err := s.Apply(context.Background(), func(*kv.Tx) error { return nil }); return err },
	} {
		if err := try(); !errors.Is(err, holon.ErrBroken) || !errors.Is(err, disk) {
			t.Errorf("an update after the failed commit: %v, want ErrBroken with the cause", err)
		}
	}
}

// Ensure that an app bucket's change number grows with each commit that
// wrote to it, before the update returns, and only with those: a reader
// that sees the same number again may keep what it read (holon.Changes).
func TestStore_BucketChanges(t *testing.T) {
	s := mustOpen(t, kv.Options{})
	ch, ok := s.Holon().(holon.Changes)
	if !ok {
		t.Fatal("the embedded store's holon.Store does not say its changes (holon.Changes)")
	}
	ctx := context.Background()
	update := func(fn func(tx *kv.Tx) error) {
		t.Helper()
		if err := s.Update(ctx, fn); err != nil {
			t.Fatal(err)
		}
	}
	want := func(keys, users uint64) {
		t.Helper()
		if k, u := ch.BucketChanges(holon.BucketKeys), ch.BucketChanges(holon.BucketUsers); k != keys || u != users {
			t.Fatalf("changes: keys %d, users %d; want %d, %d", k, u, keys, users)
		}
	}
	want(0, 0)
	update(func(tx *kv.Tx) error { return tx.Put(holon.BucketKeys, "hash/a", "a") })
	want(1, 0)
	update(func(tx *kv.Tx) error { return tx.Put(holon.BucketUsers, "bob", "b") })
	want(1, 1)
	update(func(tx *kv.Tx) error { return tx.Delete(holon.BucketKeys, "hash/a") })
	want(2, 1)
	// Another bucket, a read, an update that writes nothing: no change.
	update(func(tx *kv.Tx) error { return tx.Put(holon.BucketSettings, "x", 1) })
	update(func(tx *kv.Tx) error { _, err := tx.Append(holon.BucketModLog, "entry"); return err })
	if err := s.View(func(tx *kv.Tx) error { var v string; return tx.Get(holon.BucketUsers, "bob", &v) }); err != nil {
		t.Fatal(err)
	}
	update(func(tx *kv.Tx) error { return nil })
	want(2, 1)
	if n := ch.BucketChanges(holon.BucketModLog); n != 1 {
		t.Fatalf("an append to the moderation log: %d changes, want 1", n)
	}
	if n := ch.BucketChanges("no such bucket"); n != 0 {
		t.Fatalf("a bucket that is not an app bucket: %d changes", n)
	}
	// Updates grouped in one commit, each writing keys: the number grows
	// by the time each returns, and a reader then sees the new record.
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			before := ch.BucketChanges(holon.BucketKeys)
			k := fmt.Sprintf("hash/%d", i)
			if err := s.Update(ctx, func(tx *kv.Tx) error { return tx.Put(holon.BucketKeys, k, i) }); err != nil {
				t.Error(err)
				return
			}
			if after := ch.BucketChanges(holon.BucketKeys); after <= before {
				t.Errorf("update %d returned with the keys' changes at %d, as before it", i, after)
			}
			var got int
			if err := s.View(func(tx *kv.Tx) error { return tx.Get(holon.BucketKeys, k, &got) }); err != nil || got != i {
				t.Errorf("read %s after its update: %d, %v", k, got, err)
			}
		}()
	}
	wg.Wait()
}
