package kv_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"holon.dev/holon"
	"holon.dev/holon/journal"
	"holon.dev/holon/kv"
)

// signed parses an amount with an optional leading minus.
func signed(s string) journal.Amount {
	if rest, ok := strings.CutPrefix(s, "-"); ok {
		return -amt(rest)
	}
	return amt(s)
}

// Ensure that what is held on an account never goes below zero, and that a
// refused release leaves the hold as it was.
func TestTx_AddHeld_NeverNegative(t *testing.T) {
	s := mustOpen(t, kv.Options{NoSync: true})
	credit(t, s, "bob", "5")
	mustUpdate(t, s, func(tx *kv.Tx) error { return tx.AddHeld("bob", amt("1")) })
	mustUpdate(t, s, func(tx *kv.Tx) error { return tx.AddHeld("bob", -amt("0.40")) })
	err := s.Update(context.Background(), func(tx *kv.Tx) error {
		if err := tx.PutHold(&holon.Hold{Receipt: "r9", Payer: "bob"}); err != nil {
			return err
		}
		return tx.AddHeld("bob", -amt("0.61"))
	})
	if err == nil {
		t.Error("releasing more than is held: no error")
	}
	if err := s.Update(context.Background(), func(tx *kv.Tx) error { return tx.AddHeld("lena", -amt("0.01")) }); err == nil {
		t.Error("releasing on an account with nothing held: no error")
	}
	mustView(t, s, func(tx *kv.Tx) error {
		a, err := tx.Account("bob")
		if err != nil || a.Held != amt("0.60") || a.Balance != amt("5") || a.Available() != amt("4.40") {
			t.Errorf("bob = %+v, %v; want balance 5.00, held 0.60", a, err)
		}
		if _, err := tx.Hold("r9"); !errors.Is(err, holon.ErrNotFound) {
			t.Errorf("hold of the refused update: %v, want ErrNotFound", err)
		}
		return nil
	})
	mustUpdate(t, s, func(tx *kv.Tx) error { return tx.AddHeld("bob", -amt("0.60")) })
	if b := balance(t, s, "bob"); b != amt("5") {
		t.Errorf("bob's balance = %s after holds, want 5.00: holds are not journaled", b)
	}
}

// Ensure that holds are listed, read and deleted by receipt.
func TestTx_Holds(t *testing.T) {
	s := mustOpen(t, kv.Options{NoSync: true})
	mustUpdate(t, s, func(tx *kv.Tx) error {
		for i := 1; i <= 3; i++ {
			h := &holon.Hold{Receipt: fmt.Sprintf("r%d", i), Payer: "bob", Amount: amt("0.10"),
				Mandate: "bob/sandbox", Reserved: amt("0.10")}
			if err := tx.PutHold(h); err != nil {
				return err
			}
		}
		return nil
	})
	mustUpdate(t, s, func(tx *kv.Tx) error {
		if err := tx.DeleteHold("r2"); err != nil {
			return err
		}
		return tx.DeleteHold("r404") // deleting no hold is not an error
	})
	mustView(t, s, func(tx *kv.Tx) error {
		hs, err := tx.Holds()
		if err != nil {
			return err
		}
		var got []string
		for _, h := range hs {
			got = append(got, h.Receipt)
		}
		if fmt.Sprint(got) != "[r1 r3]" {
			t.Errorf("holds %v, want [r1 r3]", got)
		}
		if _, err := tx.Hold("r2"); !errors.Is(err, holon.ErrNotFound) {
			t.Errorf("deleted hold: %v, want ErrNotFound", err)
		}
		h, err := tx.Hold("r3")
		if err != nil || h.Payer != "bob" || h.Amount != amt("0.10") || h.Mandate != "bob/sandbox" || h.Reserved != amt("0.10") {
			t.Errorf("hold r3 = %+v, %v", h, err)
		}
		return nil
	})
}

// Ensure that approvals are listed newest first, filtered, at most limit,
// and that an id must be a<number>.
func TestTx_Approvals(t *testing.T) {
	s := mustOpen(t, kv.Options{NoSync: true})
	statuses := []string{holon.ApprovalPending, holon.ApprovalGranted, holon.ApprovalUsed, holon.ApprovalRejected}
	mustUpdate(t, s, func(tx *kv.Tx) error {
		for i := 1; i <= 12; i++ {
			id, err := tx.NewApprovalID()
			if err != nil {
				return err
			}
			if want := fmt.Sprintf("a%d", i); id != want {
				return fmt.Errorf("NewApprovalID = %s, want %s", id, want)
			}
			if err := tx.PutApproval(&holon.Approval{ID: id, Mandate: fmt.Sprintf("m%d", i%2), Status: statuses[i%4]}); err != nil {
				return err
			}
		}
		return nil
	})
	ids := func(as []*holon.Approval) string {
		var out []string
		for _, a := range as {
			out = append(out, a.ID)
		}
		return strings.Join(out, " ")
	}
	all := func(*holon.Approval) bool { return true }
	pending := func(a *holon.Approval) bool { return a.Status == holon.ApprovalPending }
	for _, tt := range []struct {
		name  string
		keep  func(*holon.Approval) bool
		limit int
		want  string
	}{
		{"all", all, 5, "a12 a11 a10 a9 a8"},
		{"all, more than there are", all, 50, "a12 a11 a10 a9 a8 a7 a6 a5 a4 a3 a2 a1"},
		{"pending", pending, 2, "a12 a8"},
		{"pending, all of them", pending, 10, "a12 a8 a4"},
		{"mandate m1", func(a *holon.Approval) bool { return a.Mandate == "m1" }, 3, "a11 a9 a7"},
		{"none", func(*holon.Approval) bool { return false }, 10, ""},
		{"zero limit", all, 0, ""},
	} {
		var got []*holon.Approval
		mustView(t, s, func(tx *kv.Tx) (err error) { got, err = tx.Approvals(tt.keep, tt.limit); return err })
		if ids(got) != tt.want {
			t.Errorf("%s: %q, want %q", tt.name, ids(got), tt.want)
		}
	}
	mustUpdate(t, s, func(tx *kv.Tx) error {
		a, err := tx.Approval("a4")
		if err != nil {
			return err
		}
		run := "r7"
		a.Status, a.Run = holon.ApprovalUsed, &run
		return tx.PutApproval(a)
	})
	mustView(t, s, func(tx *kv.Tx) error {
		if a, err := tx.Approval("a4"); err != nil || a.Status != holon.ApprovalUsed || a.Run == nil || *a.Run != "r7" {
			t.Errorf("a4 = %+v, %v; want used by r7", a, err)
		}
		for _, id := range []string{"a13", "r1", "a0", "a"} {
			if _, err := tx.Approval(id); !errors.Is(err, holon.ErrNotFound) {
				t.Errorf("Approval(%q) = %v, want ErrNotFound", id, err)
			}
		}
		return nil
	})
	if err := s.Update(context.Background(), func(tx *kv.Tx) error { return tx.PutApproval(&holon.Approval{ID: "x1"}) }); err == nil {
		t.Error("PutApproval(x1): no error")
	}
}

// Ensure that call events page newest first by sequence, each once, and
// that they add up in the agent's record.
func TestTx_Events_Paging(t *testing.T) {
	s := mustOpen(t, kv.Options{NoSync: true})
	const n = 25
	mustUpdate(t, s, func(tx *kv.Tx) error {
		for i := 1; i <= n; i++ {
			ev := &holon.Event{Receipt: fmt.Sprintf("r%d", i), Agent: "acme/x@1.0.0", Status: "succeeded",
				DurationMS: 10, Billed: amt("0.01"), Currency: "EUR"}
			if i%5 == 0 {
				ev.Status, ev.Error, ev.Billed = "failed", "agent_error", 0
			}
			if err := tx.AppendEvent(ev, i%5 != 0); err != nil {
				return err
			}
			if ev.Seq != uint64(i) {
				return fmt.Errorf("event %d got seq %d", i, ev.Seq)
			}
		}
		return nil
	})
	var seen []uint64
	var sizes []int
	var before uint64
	for {
		var page []*holon.Event
		mustView(t, s, func(tx *kv.Tx) (err error) { page, err = tx.Events(before, 10); return err })
		sizes = append(sizes, len(page))
		if len(page) == 0 {
			break
		}
		for _, ev := range page {
			seen = append(seen, ev.Seq)
		}
		before = page[len(page)-1].Seq
	}
	if fmt.Sprint(sizes) != "[10 10 5 0]" {
		t.Errorf("page sizes %v, want [10 10 5 0]", sizes)
	}
	for i, seq := range seen {
		if seq != uint64(n-i) {
			t.Fatalf("events %v, want %d down to 1", seen, n)
		}
	}
	mustView(t, s, func(tx *kv.Tx) error {
		for _, tt := range []struct {
			before uint64
			first  uint64
		}{{999, 25}, {25, 24}, {2, 1}, {1, 0}} {
			page, err := tx.Events(tt.before, 3)
			if err != nil {
				return err
			}
			var first uint64
			if len(page) > 0 {
				first = page[0].Seq
			}
			if first != tt.first {
				t.Errorf("Events(%d): first %d, want %d", tt.before, first, tt.first)
			}
		}
		rec, err := tx.Record("acme/x@1.0.0")
		if err != nil {
			return err
		}
		if want := (holon.Record{Runs: 25, Succeeded: 20, Billed: amt("0.20"), DurationMS: 250}); rec != want {
			t.Errorf("record = %+v, want %+v", rec, want)
		}
		if rec, err := tx.Record("nobody/x@1.0.0"); err != nil || rec != (holon.Record{}) {
			t.Errorf("record of an agent never run = %+v, %v", rec, err)
		}
		return nil
	})
}
