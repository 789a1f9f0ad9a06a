package kv_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"holon.dev/holon"
	"holon.dev/holon/kv"
)

// putReceipts writes n receipts r1..rn, receipt i under mandate m<i%3>.
func putReceipts(t *testing.T, s *kv.Store, n int) {
	t.Helper()
	mustUpdate(t, s, func(tx *kv.Tx) error {
		for i := 1; i <= n; i++ {
			id, err := tx.NewReceiptID()
			if err != nil {
				return err
			}
			if want := fmt.Sprintf("r%d", i); id != want {
				return fmt.Errorf("NewReceiptID = %s, want %s", id, want)
			}
			if err := tx.PutReceipt(&holon.Receipt{ID: id, Mandate: fmt.Sprintf("m%d", i%3), Status: "running"}); err != nil {
				return err
			}
		}
		return nil
	})
}

// allPages follows Next from the newest page to the end and returns every
// receipt seen and the size of each page.
func allPages(t *testing.T, s *kv.Store, mandate string, limit int) (ids []string, sizes []int) {
	t.Helper()
	before := ""
	for range 1000 {
		var page holon.ReceiptPage
		mustView(t, s, func(tx *kv.Tx) (err error) { page, err = tx.Receipts(mandate, before, limit); return err })
		sizes = append(sizes, len(page.Receipts))
		for _, r := range page.Receipts {
			ids = append(ids, r.ID)
		}
		if page.Next == "" {
			return ids, sizes
		}
		if last := page.Receipts[len(page.Receipts)-1].ID; page.Next != last {
			t.Fatalf("Next = %s, want the page's last receipt %s", page.Next, last)
		}
		before = page.Next
	}
	t.Fatal("paging does not end")
	return nil, nil
}

// Ensure that receipts page newest first, each exactly once, across all
// mandates and within one.
func TestTx_Receipts_Paging(t *testing.T) {
	s := mustOpen(t, kv.Options{NoSync: true})
	putReceipts(t, s, 120)

	var page holon.ReceiptPage
	mustView(t, s, func(tx *kv.Tx) (err error) { page, err = tx.Receipts("", "", 50); return err })
	if len(page.Receipts) != 50 || page.Receipts[0].ID != "r120" || page.Receipts[49].ID != "r71" || page.Next != "r71" {
		t.Fatalf("first page: %d receipts %s..%s, Next %q; want 50, r120..r71, Next r71",
			len(page.Receipts), page.Receipts[0].ID, page.Receipts[len(page.Receipts)-1].ID, page.Next)
	}

	for _, tt := range []struct {
		mandate string
		limit   int
		total   int
		sizes   []int
	}{
		{"", 50, 120, []int{50, 50, 20}},
		{"", 40, 120, []int{40, 40, 40}}, // the last full page has no Next
		{"", 500, 120, []int{120}},
		{"m0", 15, 40, []int{15, 15, 10}},
		{"m1", 20, 40, []int{20, 20}},
		{"m2", 7, 40, []int{7, 7, 7, 7, 7, 5}},
		{"m", 10, 0, []int{0}}, // a prefix of other mandates is not one of them
		{"nobody", 10, 0, []int{0}},
	} {
		t.Run(fmt.Sprintf("%s/%d", tt.mandate, tt.limit), func(t *testing.T) {
			ids, sizes := allPages(t, s, tt.mandate, tt.limit)
			if fmt.Sprint(sizes) != fmt.Sprint(tt.sizes) {
				t.Errorf("page sizes %v, want %v", sizes, tt.sizes)
			}
			if len(ids) != tt.total {
				t.Fatalf("%d receipts, want %d", len(ids), tt.total)
			}
			prev := uint64(1 << 63)
			for _, id := range ids {
				seq, ok := holon.ReceiptSeq(id)
				if !ok || seq >= prev {
					t.Fatalf("receipts not strictly newest first: %v", ids)
				}
				prev = seq
				var r *holon.Receipt
				mustView(t, s, func(tx *kv.Tx) (err error) { r, err = tx.Receipt(id); return err })
				if tt.mandate != "" && r.Mandate != tt.mandate {
					t.Errorf("receipt %s of %s listed under %s", id, r.Mandate, tt.mandate)
				}
			}
		})
	}
}

// Ensure that a cursor starts the page just before it, wherever it points.
func TestTx_Receipts_Cursor(t *testing.T) {
	s := mustOpen(t, kv.Options{NoSync: true})
	putReceipts(t, s, 30)
	for _, tt := range []struct {
		mandate, before string
		first           string // "" for an empty page
	}{
		{"", "r1", ""},
		{"", "r2", "r1"},
		{"", "r999", "r30"},
		{"m0", "r30", "r27"}, // r30 is m0's own newest
		{"m0", "r29", "r27"}, // a cursor from another mandate
		{"m1", "r1", ""},
		{"m1", "r999", "r28"},
	} {
		var page holon.ReceiptPage
		mustView(t, s, func(tx *kv.Tx) (err error) { page, err = tx.Receipts(tt.mandate, tt.before, 5); return err })
		got := ""
		if len(page.Receipts) > 0 {
			got = page.Receipts[0].ID
		}
		if got != tt.first {
			t.Errorf("Receipts(%q, %q): first %q, want %q", tt.mandate, tt.before, got, tt.first)
		}
	}
	for _, bad := range []string{"x", "r", "r0", "r-1", "a5", "r1x"} {
		err := s.View(func(tx *kv.Tx) error { _, err := tx.Receipts("", bad, 5); return err })
		if err == nil {
			t.Errorf("Receipts with cursor %q: no error", bad)
		}
		err = s.View(func(tx *kv.Tx) error { _, err := tx.Receipts("m0", bad, 5); return err })
		if err == nil {
			t.Errorf("Receipts(m0) with cursor %q: no error", bad)
		}
	}
}

// Ensure that putting a receipt's final state replaces it without counting
// it twice or indexing it twice.
func TestTx_PutReceipt_FinalState(t *testing.T) {
	s := mustOpen(t, kv.Options{NoSync: true})
	putReceipts(t, s, 120)
	mustUpdate(t, s, func(tx *kv.Tx) error {
		for _, id := range []string{"r3", "r6", "r120"} {
			r, err := tx.Receipt(id)
			if err != nil {
				return err
			}
			r.Status = "succeeded"
			r.Billed = true
			if err := tx.PutReceipt(r); err != nil {
				return err
			}
		}
		return nil
	})
	mustView(t, s, func(tx *kv.Tx) error {
		if n := tx.Counter("receipts"); n != 120 {
			t.Errorf("receipts = %d, want 120", n)
		}
		if n := tx.Counter("receipts:m0"); n != 40 {
			t.Errorf("receipts:m0 = %d, want 40", n)
		}
		r, err := tx.Receipt("r6")
		if err != nil || r.Status != "succeeded" || !r.Billed {
			t.Errorf("r6 = %+v, %v; want its final state", r, err)
		}
		return nil
	})
	if ids, _ := allPages(t, s, "m0", 50); len(ids) != 40 {
		t.Errorf("m0 lists %d receipts, want 40", len(ids))
	}
}

// Ensure that a receipt id must be r<number>, on write and on read.
func TestTx_PutReceipt_BadID(t *testing.T) {
	s := mustOpen(t, kv.Options{NoSync: true})
	for _, id := range []string{"", "r0", "x1", "r1.5"} {
		if err := s.Update(context.Background(), func(tx *kv.Tx) error { return tx.PutReceipt(&holon.Receipt{ID: id}) }); err == nil {
			t.Errorf("PutReceipt(%q): no error", id)
		}
	}
	mustView(t, s, func(tx *kv.Tx) error {
		if _, err := tx.Receipt("nope"); !errors.Is(err, holon.ErrNotFound) {
			t.Errorf("Receipt(nope) = %v, want ErrNotFound", err)
		}
		if _, err := tx.Receipt("r1"); !errors.Is(err, holon.ErrNotFound) {
			t.Errorf("Receipt(r1) = %v, want ErrNotFound", err)
		}
		return nil
	})
}

// Ensure that a budget's spent and reserved amounts never go below zero, and
// that a refused move leaves the budget as it was.
func TestTx_AddBudget_NeverNegative(t *testing.T) {
	s := mustOpen(t, kv.Options{NoSync: true})
	mustUpdate(t, s, func(tx *kv.Tx) error { return tx.AddBudget("bob/sandbox", 0, amt("1")) })
	mustUpdate(t, s, func(tx *kv.Tx) error { return tx.AddBudget("bob/sandbox", amt("0.30"), -amt("0.30")) })
	for _, tt := range []struct{ spent, reserved string }{
		{"0", "-0.71"},
		{"-0.31", "0"},
		{"-1", "1"},
	} {
		spent, reserved := signed(tt.spent), signed(tt.reserved)
		err := s.Update(context.Background(), func(tx *kv.Tx) error {
			if _, err := tx.AddCounter("touched", 1); err != nil {
				return err
			}
			return tx.AddBudget("bob/sandbox", spent, reserved)
		})
		if err == nil {
			t.Errorf("AddBudget(%s, %s): no error", tt.spent, tt.reserved)
		}
	}
	if err := s.Update(context.Background(), func(tx *kv.Tx) error { return tx.AddBudget("new/mandate", 0, -amt("0.01")) }); err == nil {
		t.Error("AddBudget below zero on a new mandate: no error")
	}
	mustView(t, s, func(tx *kv.Tx) error {
		b, err := tx.Budget("bob/sandbox")
		if err != nil || b != (holon.Budget{Spent: amt("0.30"), Reserved: amt("0.70")}) {
			t.Errorf("budget = %+v, %v; want spent 0.30, reserved 0.70", b, err)
		}
		if b, err := tx.Budget("new/mandate"); err != nil || b != (holon.Budget{}) {
			t.Errorf("budget of new/mandate = %+v, %v; want zero", b, err)
		}
		if n := tx.Counter("touched"); n != 0 {
			t.Errorf("touched = %d, want 0: a refused update left a write", n)
		}
		return nil
	})
}

// Ensure that counters start at zero, move by their deltas, and never go
// below zero.
func TestTx_AddCounter(t *testing.T) {
	s := mustOpen(t, kv.Options{NoSync: true})
	mustView(t, s, func(tx *kv.Tx) error {
		if n := tx.Counter("calls"); n != 0 {
			t.Errorf("new counter = %d, want 0", n)
		}
		return nil
	})
	mustUpdate(t, s, func(tx *kv.Tx) error {
		for _, tt := range []struct {
			delta int64
			want  uint64
		}{{5, 5}, {-2, 3}, {0, 3}, {-3, 0}, {7, 7}} {
			n, err := tx.AddCounter("calls", tt.delta)
			if err != nil || n != tt.want {
				return fmt.Errorf("AddCounter(%d) = %d, %v; want %d", tt.delta, n, err, tt.want)
			}
		}
		return nil
	})
	err := s.Update(context.Background(), func(tx *kv.Tx) error {
		if _, err := tx.AddCounter("other", 1); err != nil {
			return err
		}
		_, err := tx.AddCounter("calls", -8)
		return err
	})
	if err == nil {
		t.Error("AddCounter below zero: no error")
	}
	mustView(t, s, func(tx *kv.Tx) error {
		if n := tx.Counter("calls"); n != 7 {
			t.Errorf("calls = %d, want 7", n)
		}
		if n := tx.Counter("other"); n != 0 {
			t.Errorf("other = %d, want 0", n)
		}
		return nil
	})
}
