package kv_test

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"

	"holon.dev/holon"
	"holon.dev/holon/kv"
)

// putApprovals writes n approvals, the i-th (from 0) under mandate(i) with
// status(i), in updates of at most 5,000.
func putApprovals(tb testing.TB, s *kv.Store, n int, mandate func(int) string, status func(int) string) {
	tb.Helper()
	for done := 0; done < n; {
		mustUpdate(tb, s, func(tx *kv.Tx) error {
			for end := min(done+5000, n); done < end; done++ {
				id, err := tx.NewApprovalID()
				if err != nil {
					return err
				}
				if err := tx.PutApproval(&holon.Approval{ID: id, Mandate: mandate(done), Status: status(done)}); err != nil {
					return err
				}
			}
			return nil
		})
	}
}

func pageString(p holon.ApprovalPage) string {
	var out []string
	for _, a := range p.Approvals {
		out = append(out, a.ID)
	}
	return strings.Join(out, " ") + " | " + p.Next
}

// Ensure that ApprovalsOf lists the named mandates' approvals merged newest
// first, filtered, at most limit, from a cursor, ending a page early once
// it read scan approvals, with a Next that loses nothing.
func TestTx_ApprovalsOf(t *testing.T) {
	s := mustOpen(t, kv.Options{NoSync: true})
	// a1..a12: m0, m1, m2 in turn; every fourth (a4, a8, a12) used.
	putApprovals(t, s, 12, func(i int) string { return fmt.Sprintf("m%d", i%3) }, func(i int) string {
		if i%4 == 3 {
			return holon.ApprovalUsed
		}
		return holon.ApprovalPending
	})
	all := func(*holon.Approval) bool { return true }
	open := func(a *holon.Approval) bool { return a.Status == holon.ApprovalPending }
	for _, tt := range []struct {
		name        string
		mandates    []string
		before      string
		keep        func(*holon.Approval) bool
		limit, scan int
		want        string
	}{
		{"one mandate", []string{"m1"}, "", all, 10, 100, "a11 a8 a5 a2 | "},
		{"two merged", []string{"m0", "m2"}, "", all, 10, 100, "a12 a10 a9 a7 a6 a4 a3 a1 | "},
		{"named twice", []string{"m1", "m1"}, "", all, 10, 100, "a11 a8 a5 a2 | "},
		{"limit", []string{"m0", "m2"}, "", all, 3, 100, "a12 a10 a9 | a9"},
		{"limit, exactly the rest", []string{"m1"}, "", all, 4, 100, "a11 a8 a5 a2 | "},
		{"from a cursor", []string{"m0", "m2"}, "a9", all, 3, 100, "a7 a6 a4 | a4"},
		{"cursor of another mandate", []string{"m1"}, "a10", all, 10, 100, "a8 a5 a2 | "},
		{"filtered", []string{"m0", "m2"}, "", open, 10, 100, "a10 a9 a7 a6 a3 a1 | "},
		// a12 and a10 read, a12 dropped: the page ends at a10.
		{"scan cap", []string{"m0", "m2"}, "", open, 1, 2, "a10 | a10"},
		// Scan below limit reads limit.
		{"scan under the limit", []string{"m0"}, "", open, 2, 1, "a10 a7 | a7"},
		{"scan cap, nothing kept", []string{"m0", "m1", "m2"}, "", func(*holon.Approval) bool { return false }, 2, 5, " | a8"},
		{"unknown mandate", []string{"nobody"}, "", all, 10, 100, " | "},
		{"a prefix of a mandate", []string{"m"}, "", all, 10, 100, " | "},
		{"no mandates", nil, "", all, 10, 100, " | "},
		{"before the oldest", []string{"m0"}, "a1", all, 10, 100, " | "},
	} {
		var got holon.ApprovalPage
		mustView(t, s, func(tx *kv.Tx) (err error) {
			got, err = tx.ApprovalsOf(tt.mandates, tt.before, tt.keep, tt.limit, tt.scan)
			return err
		})
		if pageString(got) != tt.want {
			t.Errorf("%s: %q, want %q", tt.name, pageString(got), tt.want)
		}
	}

	// Following Next with a small scan visits exactly what one big page
	// shows.
	var walked []string
	for before, pages := "", 0; ; pages++ {
		if pages > 20 {
			t.Fatal("the pages do not end")
		}
		var p holon.ApprovalPage
		mustView(t, s, func(tx *kv.Tx) (err error) {
			p, err = tx.ApprovalsOf([]string{"m0", "m2"}, before, open, 2, 3)
			return err
		})
		for _, a := range p.Approvals {
			walked = append(walked, a.ID)
		}
		if p.Next == "" {
			break
		}
		before = p.Next
	}
	if got := strings.Join(walked, " "); got != "a10 a9 a7 a6 a3 a1" {
		t.Errorf("paged: %s, want a10 a9 a7 a6 a3 a1", got)
	}

	mustView(t, s, func(tx *kv.Tx) error {
		if _, err := tx.ApprovalsOf([]string{"m0"}, "r3", all, 10, 10); err == nil {
			t.Error("a receipt id as the cursor was accepted")
		}
		if _, err := tx.ApprovalsBefore("a0", all, 10, 10); err == nil {
			t.Error("a0 as the cursor was accepted")
		}
		return nil
	})
}

// Ensure that ApprovalsBefore lists every mandate's approvals newest
// first, from a cursor, bounded by limit and scan.
func TestTx_ApprovalsBefore(t *testing.T) {
	s := mustOpen(t, kv.Options{NoSync: true})
	putApprovals(t, s, 6, func(i int) string { return fmt.Sprintf("m%d", i%2) }, func(int) string { return holon.ApprovalPending })
	m1 := func(a *holon.Approval) bool { return a.Mandate == "m1" }
	for _, tt := range []struct {
		name, before string
		keep         func(*holon.Approval) bool
		limit, scan  int
		want         string
	}{
		{"all", "", func(*holon.Approval) bool { return true }, 10, 100, "a6 a5 a4 a3 a2 a1 | "},
		{"limit", "", func(*holon.Approval) bool { return true }, 4, 100, "a6 a5 a4 a3 | a3"},
		{"cursor", "a4", func(*holon.Approval) bool { return true }, 10, 100, "a3 a2 a1 | "},
		{"cursor past the newest", "a99", func(*holon.Approval) bool { return true }, 2, 100, "a6 a5 | a5"},
		{"filtered, scan cap", "", m1, 2, 2, "a6 | a5"},
	} {
		var got holon.ApprovalPage
		mustView(t, s, func(tx *kv.Tx) (err error) {
			got, err = tx.ApprovalsBefore(tt.before, tt.keep, tt.limit, tt.scan)
			return err
		})
		if pageString(got) != tt.want {
			t.Errorf("%s: %q, want %q", tt.name, pageString(got), tt.want)
		}
	}
}

// Ensure that listing one mandate's approvals decodes only that mandate's,
// however many other mandates hold (keep is called once per approval
// decoded), where a filtered scan of the approvals decodes them all.
func TestTx_ApprovalsOf_ReadsOnlyTheMandate(t *testing.T) {
	s := mustOpen(t, kv.Options{NoSync: true})
	const others = 5000
	putApprovals(t, s, others+3, func(i int) string {
		if i == 7 || i == others/2 || i == others+2 {
			return "alice/held"
		}
		return fmt.Sprintf("bob/m%d", i%50)
	}, func(int) string { return holon.ApprovalPending })
	var decoded int
	count := func(a *holon.Approval) bool { decoded++; return a.Mandate == "alice/held" }
	var page holon.ApprovalPage
	mustView(t, s, func(tx *kv.Tx) (err error) {
		page, err = tx.ApprovalsOf([]string{"alice/held"}, "", count, 200, 2000)
		return err
	})
	if len(page.Approvals) != 3 || page.Next != "" || decoded != 3 {
		t.Errorf("ApprovalsOf: %s, %d approvals decoded; want 3 approvals, 3 decoded", pageString(page), decoded)
	}
	decoded = 0
	mustView(t, s, func(tx *kv.Tx) error { _, err := tx.Approvals(count, 200); return err })
	if decoded != others+3 {
		t.Errorf("the scan decoded %d approvals, want all %d", decoded, others+3)
	}
}

// Ensure that a store written before the approvals index existed (the
// bucket deleted from the file) gets it at Open, lists correctly, and
// indexes the approvals written after.
func TestStore_Open_BuildsApprovalIndex(t *testing.T) {
	path := filepath.Join(t.TempDir(), "holon.db")
	s, err := kv.Open(path, kv.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	putApprovals(t, s, 7, func(i int) string { return fmt.Sprintf("m%d", i%2) }, func(int) string { return holon.ApprovalPending })
	err = s.TamperForTest(func(btx *bolt.Tx) error { return btx.DeleteBucket([]byte("approvals_by_mandate")) })
	if err != nil {
		t.Fatal(err)
	}
	list := func(s *kv.Store) string {
		var p holon.ApprovalPage
		mustView(t, s, func(tx *kv.Tx) (err error) {
			p, err = tx.ApprovalsOf([]string{"m1"}, "", func(*holon.Approval) bool { return true }, 10, 100)
			return err
		})
		return pageString(p)
	}
	s.Close()

	// Read-only, the index is not written: the listing scans.
	ro, err := kv.OpenReadOnly(path)
	if err != nil {
		t.Fatal(err)
	}
	mustView(t, ro, func(tx *kv.Tx) error {
		if n := tx.ApprovalIndexRows(); n != -1 {
			t.Errorf("read-only store without the index: %d index rows, want -1", n)
		}
		return nil
	})
	if got := list(ro); got != "a6 a4 a2 | " {
		t.Errorf("read-only, without the index: %q", got)
	}
	ro.Close()

	s, err = kv.Open(path, kv.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	mustView(t, s, func(tx *kv.Tx) error {
		if n := tx.ApprovalIndexRows(); n != 7 {
			t.Errorf("index rows after Open: %d, want 7", n)
		}
		for i := 1; i <= 7; i++ {
			if id := fmt.Sprintf("a%d", i); !tx.ApprovalIndexed(fmt.Sprintf("m%d", (i-1)%2), id) {
				t.Errorf("%s is not indexed after Open", id)
			}
		}
		return nil
	})
	if got := list(s); got != "a6 a4 a2 | " {
		t.Errorf("after Open: %q, want a6 a4 a2", got)
	}
	putApprovals(t, s, 2, func(int) string { return "m1" }, func(int) string { return holon.ApprovalPending })
	if got := list(s); got != "a9 a8 a6 a4 a2 | " {
		t.Errorf("after two more: %q, want a9 a8 a6 a4 a2", got)
	}
}

// Ensure that Export leaves the approvals index out and that Restore
// writes it again from the approvals.
func TestRestore_BuildsApprovalIndex(t *testing.T) {
	src := mustOpen(t, kv.Options{NoSync: true})
	putApprovals(t, src, 5, func(i int) string { return fmt.Sprintf("m%d", i%2) }, func(int) string { return holon.ApprovalGranted })
	// A decision rewrites an approval: it stays indexed once.
	mustUpdate(t, src, func(tx *kv.Tx) error {
		a, err := tx.Approval("a3")
		if err != nil {
			return err
		}
		a.Status = holon.ApprovalRejected
		return tx.PutApproval(a)
	})
	e := export(t, src)
	for _, b := range e.snap.Buckets {
		if b.Name == "approvals_by_mandate" {
			t.Errorf("the snapshot lists the approvals index: %+v", b)
		}
	}
	if slices.ContainsFunc(e.rows, func(r kv.Row) bool { return r.Bucket == "approvals_by_mandate" }) {
		t.Error("the approvals index was exported")
	}

	path := filepath.Join(t.TempDir(), "copy.db")
	if err := kv.Restore(path, e.snap, feed(e.rows)); err != nil {
		t.Fatal(err)
	}
	// Read-only, so that Open does not write the index instead.
	dst, err := kv.OpenReadOnly(path)
	if err != nil {
		t.Fatal(err)
	}
	defer dst.Close()
	mustView(t, dst, func(tx *kv.Tx) error {
		if n := tx.ApprovalIndexRows(); n != 5 {
			t.Errorf("restored index rows: %d, want 5", n)
		}
		p, err := tx.ApprovalsOf([]string{"m0"}, "", func(*holon.Approval) bool { return true }, 10, 100)
		if got := pageString(p); err != nil || got != "a5 a3 a1 | " {
			t.Errorf("restored m0: %q, %v; want a5 a3 a1", got, err)
		}
		return nil
	})
}

// BenchmarkTx_ApprovalsOf lists the 3 approvals of one mandate among
// 100,000 of other mandates: "scan" is the filtered scan of every approval
// GET /v0/approvals did, "index" reads the mandate's index.
func BenchmarkTx_ApprovalsOf(b *testing.B) {
	s := mustOpen(b, kv.Options{NoSync: true})
	const others = 100_000
	putApprovals(b, s, others+3, func(i int) string {
		if i == 7 || i == others/2 || i == others+2 {
			return "alice/held"
		}
		return fmt.Sprintf("bob/m%d", i%100)
	}, func(int) string { return holon.ApprovalPending })
	mine := func(a *holon.Approval) bool { return a.Mandate == "alice/held" }
	b.Run("scan", func(b *testing.B) {
		for b.Loop() {
			mustView(b, s, func(tx *kv.Tx) error {
				got, err := tx.Approvals(mine, 200)
				if err == nil && len(got) != 3 {
					b.Fatalf("%d approvals", len(got))
				}
				return err
			})
		}
	})
	b.Run("index", func(b *testing.B) {
		for b.Loop() {
			mustView(b, s, func(tx *kv.Tx) error {
				got, err := tx.ApprovalsOf([]string{"alice/held"}, "", mine, 200, 2000)
				if err == nil && len(got.Approvals) != 3 {
					b.Fatalf("%d approvals", len(got.Approvals))
				}
				return err
			})
		}
	})
}
