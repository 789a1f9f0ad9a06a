package pg_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"holon.dev/holon"
	"holon.dev/holon/journal"
	"holon.dev/holon/kv/pg"
)

// takeNumbers takes, in one update through s, a receipt id, an approval
// id, a journal entry (key) and a call event, and returns their numbers;
// fail makes the update fail after taking them.
func takeNumbers(s holon.Store, key string, fail bool) (nums [4]uint64, err error) {
	errFail := errors.New("failed after taking its numbers")
	err = s.Update(context.Background(), func(tx holon.Tx) error {
		rid, err := tx.NewReceiptID()
		if err != nil {
			return err
		}
		aid, err := tx.NewApprovalID()
		if err != nil {
			return err
		}
		e, _ := journal.Transfer(key, "external:demo-credit", "acct", journal.MustParseAmount("0.01"))
		row, err := tx.AppendEntry(e)
		if err != nil {
			return err
		}
		ev := &holon.Event{Receipt: rid, Agent: "a/b@1.0.0", Status: holon.StatusSucceeded, Time: tx.Now()}
		if err := tx.AppendEvent(ev, true); err != nil {
			return err
		}
		nums[0], _ = holon.ReceiptSeq(rid)
		var a uint64
		fmt.Sscanf(aid, "a%d", &a)
		nums[1], nums[2], nums[3] = a, row.Seq, ev.Seq
		if fail {
			return errFail
		}
		return nil
	})
	if errors.Is(err, errFail) {
		err = nil
	}
	return nums, err
}

// Ensure that a gateway alone on its database numbers without a gap:
// updates that fail after taking receipt and approval ids, a journal
// entry and a call event give their numbers back, so the updates that
// stand hold 1, 2, … in each sequence, while blocks are small (taken
// every few numbers).
func TestNumbers_AloneWithoutGaps(t *testing.T) {
	url := newDatabases(t).url(t, "alone")
	s, err := pg.OpenWith(context.Background(), url, holon.StoreOptions{NoSync: true}, pg.Options{NumberBlock: 8})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var mu sync.Mutex
	var got [4][]uint64
	var wg sync.WaitGroup
	for i := range 150 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			fail := i%3 == 1
			nums, err := takeNumbers(s, fmt.Sprintf("k%d", i), fail)
			if err != nil {
				t.Error(err)
				return
			}
			if !fail {
				mu.Lock()
				for j := range nums {
					got[j] = append(got[j], nums[j])
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	st := s.Stats()
	if st.MaxBatch < 2 {
		t.Errorf("the largest group held %d updates: the test needs groups", st.MaxBatch)
	}
	for j, name := range []string{"receipts", "approvals", "journal", "call events"} {
		slices.Sort(got[j])
		for k, n := range got[j] {
			if n != uint64(k+1) {
				t.Errorf("%s: the updates that stood hold %v, want 1 to %d", name, got[j], len(got[j]))
				break
			}
		}
	}
	if taken := pg.BlocksTaken(s); taken < 4*3 {
		t.Errorf("%d blocks taken: the test needs several a sequence", taken)
	}
	verifyJournal(t, s)
}

// Ensure that three gateways numbering at once, from small blocks that
// age fast, hand out no number twice in any sequence, that the journal
// verifies (its chains in the order of their numbers, with gaps), and
// that every sequence is ahead of the numbers in use.
func TestNumbers_SharedBlocks(t *testing.T) {
	dbs := newDatabases(t)
	url := dbs.url(t, "shared")
	var hs []*pg.Store
	for range 3 {
		s, err := pg.OpenWith(context.Background(), url, holon.StoreOptions{NoSync: true}, pg.Options{NumberBlock: 8, NumberAge: 5 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		hs = append(hs, s)
	}
	var mu sync.Mutex
	seen := [4]map[uint64]int{{}, {}, {}, {}}
	var wg sync.WaitGroup
	for h, s := range hs {
		for i := range 60 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				nums, err := takeNumbers(s, fmt.Sprintf("h%d:%d", h, i), i%5 == 4)
				if err != nil {
					t.Error(err)
					return
				}
				if i%5 == 4 {
					return
				}
				mu.Lock()
				defer mu.Unlock()
				for j, n := range nums {
					seen[j][n]++
				}
			}()
		}
	}
	wg.Wait()
	var top [4]uint64
	for j, name := range []string{"receipts", "approvals", "journal", "call_events"} {
		if len(seen[j]) != 3*48 {
			t.Errorf("%s: %d numbers for %d updates", name, len(seen[j]), 3*48)
		}
		for n, c := range seen[j] {
			if c != 1 {
				t.Errorf("%s: %d handed out %d times", name, n, c)
			}
			top[j] = max(top[j], n)
		}
		var seq int64
		if err := hs[0].Read(context.Background(), func(tx pgx.Tx) error {
			return tx.QueryRow(context.Background(), `SELECT value::bigint FROM sequences WHERE bucket = $1`, name).Scan(&seq)
		}); err != nil {
			t.Fatal(err)
		}
		if uint64(seq) < top[j] {
			t.Errorf("the %s sequence is %d, behind %d", name, seq, top[j])
		}
	}
	verifyJournal(t, hs[0])
}

// Ensure that, with two gateways handing out numbers, a number handed
// out after a pause longer than NumberAge is above every number handed
// out before it by either: pages listed newest first keep the order calls
// came in.
func TestNumbers_AgeWhileOthersWrite(t *testing.T) {
	url := newDatabases(t).url(t, "age")
	var hs []*pg.Store
	for range 2 {
		s, err := pg.OpenWith(context.Background(), url, holon.StoreOptions{NoSync: true}, pg.Options{NumberAge: 40 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		hs = append(hs, s)
	}
	var before uint64
	for round := range 6 {
		var high uint64
		for h, s := range hs {
			nums, err := takeNumbers(s, fmt.Sprintf("r%d:%d", round, h), false)
			if err != nil {
				t.Fatal(err)
			}
			if round > 0 && nums[0] <= before {
				t.Errorf("round %d, gateway %d: receipt r%d, not above r%d handed out before the pause", round, h, nums[0], before)
			}
			high = max(high, nums[0])
		}
		before = high
		time.Sleep(100 * time.Millisecond)
	}
}

// Ensure that the mark earnings and latency count from goes down to the
// number of the first row counted, when another gateway, numbering from
// a later block, counted first: holon verify counts every row from the
// mark.
func TestNumbers_CountsFromTheLowestRowCounted(t *testing.T) {
	url := newDatabases(t).url(t, "marks")
	var hs []*pg.Store
	for range 2 {
		s, err := pg.OpenWith(context.Background(), url, holon.StoreOptions{NoSync: true}, pg.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		hs = append(hs, s)
	}
	// a takes its blocks first (lower numbers), then b.
	a0, err := takeNumbers(hs[0], "a0", false)
	if err != nil {
		t.Fatal(err)
	}
	b0, err := takeNumbers(hs[1], "b0", false)
	if err != nil {
		t.Fatal(err)
	}
	if b0[2] <= a0[2] || b0[3] <= a0[3] {
		t.Fatalf("numbers %v then %v: the second gateway's blocks are not above the first's", a0, b0)
	}
	count := func(s holon.Store, key string) (entry, event uint64) {
		t.Helper()
		err := s.Update(context.Background(), func(tx holon.Tx) error {
			e, _ := journal.Transfer(key, "external:demo-credit", "acct", journal.MustParseAmount("0.01"))
			row, err := tx.AppendEntry(e)
			if err != nil {
				return err
			}
			if err := tx.AddEarnings("a/b@1.0.0", "EUR", 1, journal.MustParseAmount("0.01"), 0); err != nil {
				return err
			}
			ev := &holon.Event{Receipt: "r1", Agent: "a/b@1.0.0", Status: holon.StatusSucceeded, Time: tx.Now()}
			if err := tx.AppendEvent(ev, true); err != nil {
				return err
			}
			entry, event = row.Seq, ev.Seq
			return tx.AddLatency("a/b@1.0.0", 5)
		})
		if err != nil {
			t.Fatal(err)
		}
		return entry, event
	}
	marks := func() (uint64, uint64) {
		var e, l uint64
		hs[0].View(func(tx holon.Tx) error {
			e, _ = tx.EarningsFrom()
			l, _ = tx.LatencyFrom()
			return nil
		})
		return e, l
	}
	be, bl := count(hs[1], "b1")
	if e, l := marks(); e != be || l != bl {
		t.Fatalf("marks %d and %d after the first count, want %d and %d", e, l, be, bl)
	}
	ae, al := count(hs[0], "a1")
	if ae >= be || al >= bl {
		t.Fatalf("the first gateway counted entry %d and event %d, not below %d and %d: the test shows nothing", ae, al, be, bl)
	}
	if e, l := marks(); e != ae || l != al {
		t.Errorf("marks %d and %d after a count of lower rows, want them down to %d and %d", e, l, ae, al)
	}
	count(hs[1], "b2")
	if e, l := marks(); e != ae || l != al {
		t.Errorf("marks %d and %d after a count of higher rows, want them still %d and %d", e, l, ae, al)
	}
}

// Ensure that the database refuses to move a sequence back (migration
// 21): a gateway of an earlier version, writing a sequence's value with
// its group, cannot hand out numbers another holds in a block.
func TestNumbers_SequencesNeverGoBack(t *testing.T) {
	url := newDatabases(t).url(t, "back")
	s, err := pg.Open(context.Background(), url, holon.StoreOptions{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := takeNumbers(s, "k", false); err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	_, err = conn.Exec(context.Background(), `UPDATE sequences SET value = 1 WHERE bucket = 'receipts'`)
	if err == nil || !strings.Contains(err.Error(), "would go back") {
		t.Errorf("a sequence moved back: %v, want it refused", err)
	}
}

// Ensure that a store that closes gives back what is left of its blocks
// when no other writer took numbers after them, so that the next gateway
// goes on from its last number; and that a block another writer took
// numbers after is not given back, so that no number is handed out
// twice.
func TestNumbers_GivenBackOnClose(t *testing.T) {
	url := newDatabases(t).url(t, "close")
	open := func() *pg.Store {
		s, err := pg.OpenWith(context.Background(), url, holon.StoreOptions{NoSync: true}, pg.Options{NumberBlock: 16})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	take := func(s *pg.Store, key string) [4]uint64 {
		t.Helper()
		nums, err := takeNumbers(s, key, false)
		if err != nil {
			t.Fatal(err)
		}
		return nums
	}
	a := open()
	for i := range 5 {
		take(a, fmt.Sprintf("a%d", i))
	}
	a.Close()
	b := open()
	if got := take(b, "b0"); got != [4]uint64{6, 6, 6, 6} {
		t.Fatalf("after a store closed with five of each: %v, want the sixth of each", got)
	}
	c := open()
	cn := take(c, "c0") // c's blocks are after b's
	b.Close()           // b's blocks are not the sequences' end: kept
	d := open()
	defer d.Close()
	dn := take(d, "d0")
	for j := range dn {
		if dn[j] <= cn[j] {
			t.Errorf("after a store closed whose blocks others took numbers after: %v, not above %v", dn, cn)
		}
	}
	c.Close()
	verifyJournal(t, d)
}
