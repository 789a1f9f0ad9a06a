package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"holon.dev/holon"
	"holon.dev/holon/journal"
)

// RunShared runs the suite's multi-writer behaviours: several handles on
// one store (several gateways on one database) writing at once. open is as
// for Run, and opening a path that is already open must give another
// handle on the same store (a store that one process holds alone, such as
// kv's, does not run it). Each behaviour uses Handles handles.
func RunShared(t *testing.T, open func(t *testing.T, path string) holon.Store) {
	for _, b := range shared {
		t.Run(b.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "holon.db")
			hs := make([]holon.Store, Handles)
			for i := range hs {
				hs[i] = open(t, path)
			}
			t.Cleanup(func() {
				if err := hs[0].View(func(tx holon.Tx) error { return verifyJournal(tx) }); err != nil {
					t.Errorf("journal at cleanup: %v", err)
				}
				for _, s := range hs {
					if err := s.Close(); err != nil {
						t.Errorf("close: %v", err)
					}
				}
			})
			b.test(t, hs)
		})
	}
}

// Handles is how many handles on one store the shared behaviours use.
const Handles = 3

// SharedBehaviours lists RunShared's subtests by name.
func SharedBehaviours() []string {
	var names []string
	for _, b := range shared {
		names = append(names, b.name)
	}
	return names
}

var shared = []struct {
	name string
	test func(t *testing.T, hs []holon.Store)
}{
	{"Shared/MoneyNeverOverspent", testSharedMoney},
	{"Shared/KeysClaimedOnce", testSharedKeys},
	{"Shared/IDsHandedOutOnce", testSharedIDs},
}

// errSharedRefused is a call the store's state refuses (no funds, no budget).
var errSharedRefused = errors.New("refused: not enough left")

// Ensure that calls admitted and settled through several handles at once
// never take a payer's available balance below zero nor a mandate's
// spending over its total, at any instant a reader sees, that exactly as
// many calls succeed as the money allows, and that the journal and the
// accounts still add up.
func testSharedMoney(t *testing.T, hs []holon.Store) {
	const (
		perHandle = 40
		total     = "1.00" // the mandate's budget: 25 calls of 0.04
		price     = "0.04"
		funds     = "0.80" // the payer's: 20 calls
	)
	e := &env{t: t, s: hs[0]}
	e.credit("fund", "payer", funds)
	limit, cost := amt(total), amt(price)
	var ok, refused atomic.Int64
	var seen atomic.Int64
	stop := make(chan struct{})
	var watch sync.WaitGroup
	watch.Add(1)
	go func() { // the watcher: what any reader sees, at every instant
		defer watch.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			err := hs[len(hs)-1].View(func(tx holon.Tx) error {
				a, err := tx.Account("payer")
				if err != nil {
					return err
				}
				b, err := tx.Budget("m")
				if err != nil {
					return err
				}
				if a.Available() < 0 || a.Held < 0 || a.Balance < 0 {
					t.Errorf("payer seen at balance %s, held %s", a.Balance, a.Held)
				}
				if b.Spent+b.Reserved > limit || b.Spent < 0 || b.Reserved < 0 {
					t.Errorf("mandate seen at spent %s + reserved %s, over its %s", b.Spent, b.Reserved, limit)
				}
				return nil
			})
			if err != nil {
				t.Errorf("watcher: %v", err)
				return
			}
			seen.Add(1)
		}
	}()
	var wg sync.WaitGroup
	for h, s := range hs {
		for i := range perHandle {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rid := ""
				// Admission: reserve the budget and hold the funds.
				err := s.Update(bg, func(tx holon.Tx) error {
					b, err := tx.Budget("m")
					if err != nil {
						return err
					}
					a, err := tx.Account("payer")
					if err != nil {
						return err
					}
					if b.Spent+b.Reserved+cost > limit || a.Available() < cost {
						return errSharedRefused
					}
					if rid, err = tx.NewReceiptID(); err != nil {
						return err
					}
					if err := tx.AddBudget("m", 0, cost); err != nil {
						return err
					}
					if err := tx.AddHeld("payer", cost); err != nil {
						return err
					}
					return tx.PutHold(&holon.Hold{Receipt: rid, Payer: "payer", Amount: cost, Mandate: "m", Reserved: cost, Started: tx.Now()})
				})
				if errors.Is(err, errSharedRefused) {
					refused.Add(1)
					return
				}
				if err != nil {
					t.Errorf("handle %d call %d: admit: %v", h, i, err)
					return
				}
				// Settlement: pay, spend, release.
				err = s.Update(bg, func(tx holon.Tx) error {
					entry := journal.Entry{Key: "settle:" + rid, Lines: []journal.Line{
						{Account: "payer", Amount: -cost},
						{Account: "holon", Amount: amt("0.004")},
						{Account: "author", Amount: cost - amt("0.004")},
					}}
					if _, err := tx.AppendEntry(entry); err != nil {
						return err
					}
					if err := tx.AddBudget("m", cost, -cost); err != nil {
						return err
					}
					if err := tx.AddHeld("payer", -cost); err != nil {
						return err
					}
					return tx.DeleteHold(rid)
				})
				if err != nil {
					t.Errorf("handle %d call %d: settle %s: %v", h, i, rid, err)
					return
				}
				ok.Add(1)
			}()
		}
	}
	wg.Wait()
	close(stop)
	watch.Wait()
	if want := amt(funds).Micros() / cost.Micros(); ok.Load() != want {
		t.Errorf("%d calls settled, %d refused; the funds allow %d", ok.Load(), refused.Load(), want)
	}
	if a := e.account("payer"); a.Balance != 0 || a.Held != 0 {
		t.Errorf("payer at %s (held %s), want 0", a.Balance, a.Held)
	}
	e.view(func(tx holon.Tx) error {
		b, err := tx.Budget("m")
		if err != nil {
			return err
		}
		if b.Reserved != 0 || b.Spent != cost*journal.Amount(ok.Load()) {
			t.Errorf("budget spent %s reserved %s after %d calls of %s", b.Spent, b.Reserved, ok.Load(), cost)
		}
		holds, err := tx.Holds()
		if len(holds) != 0 {
			t.Errorf("%d holds left", len(holds))
		}
		return err
	})
	CheckMoney(t, hs[0], SkipReceipts)
	t.Logf("%d settled, %d refused, the watcher read %d times", ok.Load(), refused.Load(), seen.Load())
}

// Ensure that an idempotency key sent to every handle at once is claimed
// once: its document written once and its journal entry appended once.
func testSharedKeys(t *testing.T, hs []holon.Store) {
	const keys = 30
	var wg sync.WaitGroup
	for h, s := range hs {
		for k := range keys {
			wg.Add(1)
			go func() {
				defer wg.Done()
				key := fmt.Sprintf("K%d", k)
				err := s.Update(bg, func(tx holon.Tx) error {
					var owner string
					if err := tx.Get(holon.BucketIdempotency, key, &owner); err == nil {
						return nil // claimed by another
					} else if !errors.Is(err, holon.ErrNotFound) {
						return err
					}
					if err := tx.Put(holon.BucketIdempotency, key, fmt.Sprintf("handle %d", h)); err != nil {
						return err
					}
					_, err := tx.AppendEntry(transfer(t, "idem:"+key, "external:demo-credit", "bob", "0.01"))
					return err
				})
				if err != nil {
					t.Errorf("handle %d key %s: %v", h, key, err)
				}
			}()
		}
	}
	wg.Wait()
	e := &env{t: t, s: hs[0]}
	n := 0
	for _, row := range e.rows() {
		if strings.HasPrefix(row.Key, "idem:") {
			n++
		}
	}
	if n != keys {
		t.Errorf("%d idempotent entries journaled for %d keys", n, keys)
	}
	if bob := e.account("bob"); bob.Balance != amt("0.01")*keys {
		t.Errorf("bob = %s, want %s", bob.Balance, amt("0.01")*keys)
	}
	var docs int
	e.view(func(tx holon.Tx) error {
		return tx.ForEach(holon.BucketIdempotency, "K", func(string, json.RawMessage) (bool, error) { docs++; return true, nil })
	})
	if docs != keys {
		t.Errorf("%d idempotency documents for %d keys", docs, keys)
	}
}

// Ensure that receipt and approval ids and appended sequence numbers taken
// through several handles at once are each handed out once, and that
// paging the receipts newest first, a small page at a time, reads every
// one once, in order, without a gap.
func testSharedIDs(t *testing.T, hs []holon.Store) {
	const perHandle = 30
	var mu sync.Mutex
	ids := map[string]int{}
	var wg sync.WaitGroup
	for h, s := range hs {
		for i := range perHandle {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var got []string
				err := s.Update(bg, func(tx holon.Tx) error {
					got = got[:0]
					rid, err := tx.NewReceiptID()
					if err != nil {
						return err
					}
					aid, err := tx.NewApprovalID()
					if err != nil {
						return err
					}
					seq, err := tx.Append(holon.BucketModLog, map[string]int{"handle": h, "i": i})
					if err != nil {
						return err
					}
					got = append(got, rid, aid, fmt.Sprintf("modlog %d", seq))
					return tx.PutReceipt(&holon.Receipt{ID: rid, Mandate: fmt.Sprintf("m%d", i%3), Status: holon.StatusSucceeded, Created: tx.Now()})
				})
				if err != nil {
					t.Errorf("handle %d update %d: %v", h, i, err)
					return
				}
				mu.Lock()
				for _, id := range got {
					ids[id]++
				}
				mu.Unlock()
			}()
		}
	}
	wg.Wait()
	n := Handles * perHandle
	for id, c := range ids {
		if c != 1 {
			t.Errorf("%s handed out %d times", id, c)
		}
	}
	if len(ids) != 3*n {
		t.Errorf("%d ids for %d updates of 3", len(ids), n)
	}
	// Paging: every receipt once, newest first, whatever the handle.
	for _, s := range hs {
		var paged []string
		before := ""
		for {
			var page holon.ReceiptPage
			if err := s.View(func(tx holon.Tx) (err error) { page, err = tx.Receipts("", before, 7); return err }); err != nil {
				t.Fatal(err)
			}
			for _, r := range page.Receipts {
				paged = append(paged, r.ID)
			}
			if page.Next == "" {
				break
			}
			before = page.Next
		}
		if len(paged) != n {
			t.Errorf("paging read %d receipts, want %d", len(paged), n)
		}
		seqs := make([]uint64, len(paged))
		for i, id := range paged {
			seqs[i], _ = holon.ReceiptSeq(id)
			if ids[id] != 1 {
				t.Errorf("paging read %s, which no update wrote", id)
			}
		}
		if !slices.IsSortedFunc(seqs, func(a, b uint64) int { return int(b) - int(a) }) || len(slices.Compact(slices.Clone(seqs))) != len(seqs) {
			t.Errorf("pages not newest first, each once: %v", paged)
		}
	}
}
