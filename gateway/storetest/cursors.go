package storetest

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"holon.dev/holon"
)

func init() {
	add(
		behaviour{"Receipts/NewestFirst", testReceiptsNewestFirst},
		behaviour{"Receipts/PagesJoinAcrossMandates", testReceiptsPagesJoin},
		behaviour{"Receipts/CursorStartsBeforeIt", testReceiptsCursor},
		behaviour{"Receipts/FinalStateReplaces", testReceiptFinalState},
		behaviour{"IDs/ReceiptIDsIncrease", testReceiptIDsIncrease},
		behaviour{"IDs/ApprovalIDsIncrease", testApprovalIDsIncrease},
		behaviour{"Approvals/NewestFirstFiltered", testApprovalsListed},
		behaviour{"Approvals/PagesOfMandatesJoin", testApprovalsOf},
		behaviour{"Events/PagesNewestFirst", testEventsPaging},
	)
}

// putReceipts writes n receipts in one update, receipt i under mandate
// m<i%3>, and returns their ids, oldest first.
func putReceipts(t *testing.T, e *env, n int) []string {
	t.Helper()
	var ids []string
	e.update(func(tx holon.Tx) error {
		for i := 1; i <= n; i++ {
			id, err := tx.NewReceiptID()
			if err != nil {
				return err
			}
			if err := tx.PutReceipt(&holon.Receipt{ID: id, Mandate: fmt.Sprintf("m%d", i%3), Status: holon.StatusRunning}); err != nil {
				return err
			}
			ids = append(ids, id)
		}
		return nil
	})
	return ids
}

// allPages follows Next from the newest page to the end and returns every
// receipt id seen and the size of each page.
func allPages(t *testing.T, e *env, mandate string, limit int) (ids []string, sizes []int) {
	t.Helper()
	before := ""
	for range 1000 {
		var page holon.ReceiptPage
		e.view(func(tx holon.Tx) (err error) { page, err = tx.Receipts(mandate, before, limit); return err })
		sizes = append(sizes, len(page.Receipts))
		for _, r := range page.Receipts {
			if mandate != "" && r.Mandate != mandate {
				t.Errorf("receipt %s of %s listed under %s", r.ID, r.Mandate, mandate)
			}
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

// reversed returns ids newest first, those of mandate m ("" for all).
func reversed(ids []string, m string) []string {
	var out []string
	for i := len(ids) - 1; i >= 0; i-- {
		if m == "" || fmt.Sprintf("m%d", (i+1)%3) == m {
			out = append(out, ids[i])
		}
	}
	return out
}

// Ensure that the first page of receipts is the newest, newest first, with
// Next its last receipt when there are older ones.
func testReceiptsNewestFirst(t *testing.T, e *env) {
	ids := putReceipts(t, e, 120)
	var page holon.ReceiptPage
	e.view(func(tx holon.Tx) (err error) { page, err = tx.Receipts("", "", 50); return err })
	want := reversed(ids, "")[:50]
	var got []string
	for _, r := range page.Receipts {
		got = append(got, r.ID)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) || page.Next != want[49] {
		t.Errorf("first page %v, Next %q; want %v, Next %s", got, page.Next, want, want[49])
	}
}

// Ensure that pages joined by Next list every receipt exactly once, newest
// first, across all mandates and within one, and that a mandate whose id
// is a prefix of others' lists none of theirs.
func testReceiptsPagesJoin(t *testing.T, e *env) {
	ids := putReceipts(t, e, 120)
	for _, tt := range []struct {
		mandate string
		limit   int
		sizes   string
	}{
		{"", 50, "[50 50 20]"},
		{"", 40, "[40 40 40]"}, // the last full page has no Next
		{"", 500, "[120]"},
		{"m0", 15, "[15 15 10]"},
		{"m1", 20, "[20 20]"},
		{"m2", 7, "[7 7 7 7 7 5]"},
		{"m", 10, "[0]"},
		{"nobody", 10, "[0]"},
	} {
		got, sizes := allPages(t, e, tt.mandate, tt.limit)
		want := reversed(ids, tt.mandate)
		if tt.mandate == "m" || tt.mandate == "nobody" {
			want = nil
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("Receipts(%q) by %d: %v, want %v", tt.mandate, tt.limit, got, want)
		}
		if fmt.Sprint(sizes) != tt.sizes {
			t.Errorf("Receipts(%q) by %d: page sizes %v, want %s", tt.mandate, tt.limit, sizes, tt.sizes)
		}
	}
}

// Ensure that a page starts just before its cursor, wherever it points (a
// receipt of another mandate, one past the newest), and that a cursor that
// is not a receipt id is refused.
func testReceiptsCursor(t *testing.T, e *env) {
	ids := putReceipts(t, e, 30) // ids[i] is under m<(i+1)%3>
	seq := func(id string) uint64 { n, _ := holon.ReceiptSeq(id); return n }
	past := fmt.Sprintf("r%d", seq(ids[29])+1000)
	for _, tt := range []struct {
		mandate, before string
		first           string // "" for an empty page
	}{
		{"", ids[0], ""},
		{"", ids[1], ids[0]},
		{"", past, ids[29]},
		{"m0", ids[29], ids[26]}, // ids[29] is m0's own newest
		{"m0", ids[28], ids[26]}, // a cursor from another mandate
		{"m1", ids[0], ""},
		{"m1", past, ids[27]},
	} {
		var page holon.ReceiptPage
		e.view(func(tx holon.Tx) (err error) { page, err = tx.Receipts(tt.mandate, tt.before, 5); return err })
		got := ""
		if len(page.Receipts) > 0 {
			got = page.Receipts[0].ID
		}
		if got != tt.first {
			t.Errorf("Receipts(%q, %q): first %q, want %q", tt.mandate, tt.before, got, tt.first)
		}
	}
	for _, bad := range []string{"x", "r", "r0", "r-1", "a5", "r1x"} {
		for _, m := range []string{"", "m0"} {
			if err := e.s.View(func(tx holon.Tx) error { _, err := tx.Receipts(m, bad, 5); return err }); err == nil {
				t.Errorf("Receipts(%q) with cursor %q: no error", m, bad)
			}
		}
	}
}

// Ensure that putting a receipt's final state replaces it: read and listed
// once, in its new state, and counted once in the "receipts" counter the
// hosted product reads.
func testReceiptFinalState(t *testing.T, e *env) {
	var id string
	e.update(func(tx holon.Tx) (err error) {
		if id, err = tx.NewReceiptID(); err != nil {
			return err
		}
		return tx.PutReceipt(&holon.Receipt{ID: id, Mandate: "m", Status: holon.StatusRunning})
	})
	e.update(func(tx holon.Tx) error {
		return tx.PutReceipt(&holon.Receipt{ID: id, Mandate: "m", Status: holon.StatusSucceeded, Billed: true})
	})
	e.view(func(tx holon.Tx) error {
		r, err := tx.Receipt(id)
		if err != nil || r.Status != holon.StatusSucceeded || !r.Billed {
			t.Errorf("Receipt(%s) = %+v, %v; want its final state", id, r, err)
		}
		for _, m := range []string{"", "m"} {
			page, err := tx.Receipts(m, "", 10)
			if err != nil {
				return err
			}
			if len(page.Receipts) != 1 || page.Receipts[0].Status != holon.StatusSucceeded {
				t.Errorf("Receipts(%q) lists %d receipts, want the final state once", m, len(page.Receipts))
			}
		}
		if n := tx.Counter("receipts"); n != 1 {
			t.Errorf("receipts counter = %d, want 1", n)
		}
		if _, err := tx.Receipt("r999999"); !errors.Is(err, holon.ErrNotFound) {
			t.Errorf("Receipt of an unknown id: %v, want ErrNotFound", err)
		}
		return nil
	})
	if err := e.s.Update(bg, func(tx holon.Tx) error { return tx.PutReceipt(&holon.Receipt{ID: "x1", Mandate: "m"}) }); err == nil {
		t.Error("PutReceipt with id x1: no error")
	}
}

// newIDs reserves n ids with next in updates of three, across a reopen,
// and checks that they increase and parse with seq.
func newIDs(t *testing.T, e *env, n int, next func(holon.Tx) (string, error), seq func(string) (uint64, bool)) {
	t.Helper()
	var ids []string
	for i := 0; i < n; i += 3 {
		if i == n/2 {
			e.reopen()
		}
		var got []string
		e.update(func(tx holon.Tx) error {
			got = got[:0] // a store may run fn again
			for range 3 {
				id, err := next(tx)
				if err != nil {
					return err
				}
				got = append(got, id)
			}
			return nil
		})
		ids = append(ids, got...)
	}
	var prev uint64
	for _, id := range ids {
		s, ok := seq(id)
		if !ok || s <= prev {
			t.Fatalf("ids %v: %s does not parse or does not increase", ids, id)
		}
		prev = s
	}
}

// Ensure that receipt ids increase, within an update, across updates and
// across a reopen, and parse with holon.ReceiptSeq.
func testReceiptIDsIncrease(t *testing.T, e *env) {
	newIDs(t, e, 30, holon.Tx.NewReceiptID, holon.ReceiptSeq)
}

// Ensure that approval ids increase, within an update, across updates and
// across a reopen, and parse with holon.ApprovalSeq.
func testApprovalIDsIncrease(t *testing.T, e *env) {
	newIDs(t, e, 30, holon.Tx.NewApprovalID, holon.ApprovalSeq)
}

// Ensure that approvals are read by id and listed newest first, those
// keep accepts, at most limit.
func testApprovalsListed(t *testing.T, e *env) {
	var ids []string
	e.update(func(tx holon.Tx) error {
		for i := range 10 {
			id, err := tx.NewApprovalID()
			if err != nil {
				return err
			}
			status := holon.ApprovalPending
			if i%2 == 1 {
				status = holon.ApprovalGranted
			}
			if err := tx.PutApproval(&holon.Approval{ID: id, Mandate: "m", Status: status}); err != nil {
				return err
			}
			ids = append(ids, id)
		}
		return nil
	})
	e.view(func(tx holon.Tx) error {
		a, err := tx.Approval(ids[3])
		if err != nil || a.ID != ids[3] || a.Status != holon.ApprovalGranted {
			t.Errorf("Approval(%s) = %+v, %v", ids[3], a, err)
		}
		if _, err := tx.Approval("a999999"); !errors.Is(err, holon.ErrNotFound) {
			t.Errorf("Approval of an unknown id: %v, want ErrNotFound", err)
		}
		list, err := tx.Approvals(func(a *holon.Approval) bool { return a.Status == holon.ApprovalPending }, 3)
		if err != nil {
			return err
		}
		var got []string
		for _, a := range list {
			got = append(got, a.ID)
		}
		if want := []string{ids[8], ids[6], ids[4]}; fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("pending approvals, at most 3: %v, want %v", got, want)
		}
		return nil
	})
}

// Ensure that ApprovalsOf lists the named mandates' approvals merged
// newest first, filtered, from a cursor; that pages joined by Next, however
// small their limit and scan, list each exactly once; that ApprovalsBefore
// does the same over every mandate; and that a cursor that is not an
// approval id is refused.
func testApprovalsOf(t *testing.T, e *env) {
	var ids []string // ids[i] under m<i%3>, every fourth used
	e.update(func(tx holon.Tx) error {
		for i := range 24 {
			id, err := tx.NewApprovalID()
			if err != nil {
				return err
			}
			status := holon.ApprovalPending
			if i%4 == 3 {
				status = holon.ApprovalUsed
			}
			if err := tx.PutApproval(&holon.Approval{ID: id, Mandate: fmt.Sprintf("m%d", i%3), Status: status}); err != nil {
				return err
			}
			ids = append(ids, id)
		}
		return nil
	})
	// A decision rewrites an approval: it is still listed once.
	e.update(func(tx holon.Tx) error {
		a, err := tx.Approval(ids[0])
		if err != nil {
			return err
		}
		a.Status = holon.ApprovalRejected
		return tx.PutApproval(a)
	})
	pending := func(a *holon.Approval) bool { return a.Status == holon.ApprovalPending }
	want := func(mandates map[string]bool, before int) []string {
		var out []string
		for i := before - 1; i >= 0; i-- {
			if (mandates == nil || mandates[fmt.Sprintf("m%d", i%3)]) && i%4 != 3 && i != 0 {
				out = append(out, ids[i])
			}
		}
		return out
	}
	walk := func(list func(tx holon.Tx, before string) (holon.ApprovalPage, error), limit int) []string {
		var got []string
		before := ""
		for range 100 {
			var p holon.ApprovalPage
			e.view(func(tx holon.Tx) (err error) { p, err = list(tx, before); return err })
			if len(p.Approvals) > limit {
				t.Errorf("a page of %d approvals, limit %d", len(p.Approvals), limit)
			}
			for _, a := range p.Approvals {
				got = append(got, a.ID)
			}
			if p.Next == "" {
				return got
			}
			before = p.Next
		}
		t.Fatal("the pages do not end")
		return nil
	}
	m02 := map[string]bool{"m0": true, "m2": true}
	for _, size := range [][2]int{{100, 1000}, {3, 100}, {2, 3}, {1, 1}} {
		limit, scan := size[0], size[1]
		got := walk(func(tx holon.Tx, before string) (holon.ApprovalPage, error) {
			return tx.ApprovalsOf([]string{"m0", "m2", "m2"}, before, pending, limit, scan)
		}, limit)
		if fmt.Sprint(got) != fmt.Sprint(want(m02, len(ids))) {
			t.Errorf("ApprovalsOf(m0, m2) by %d, scanning %d: %v, want %v", limit, scan, got, want(m02, len(ids)))
		}
		got = walk(func(tx holon.Tx, before string) (holon.ApprovalPage, error) {
			return tx.ApprovalsBefore(before, pending, limit, scan)
		}, limit)
		if fmt.Sprint(got) != fmt.Sprint(want(nil, len(ids))) {
			t.Errorf("ApprovalsBefore by %d, scanning %d: %v, want %v", limit, scan, got, want(nil, len(ids)))
		}
	}
	e.view(func(tx holon.Tx) error {
		p, err := tx.ApprovalsOf([]string{"m1"}, ids[10], pending, 100, 1000)
		if err != nil {
			return err
		}
		var got []string
		for _, a := range p.Approvals {
			got = append(got, a.ID)
		}
		if w := want(map[string]bool{"m1": true}, 10); fmt.Sprint(got) != fmt.Sprint(w) {
			t.Errorf("ApprovalsOf(m1) before %s (another mandate's): %v, want %v", ids[10], got, w)
		}
		for _, m := range [][]string{{"nobody"}, {"m"}, nil} {
			if p, err := tx.ApprovalsOf(m, "", pending, 10, 100); err != nil || len(p.Approvals) != 0 {
				t.Errorf("ApprovalsOf(%q) = %v, %v; want none", m, p.Approvals, err)
			}
		}
		if _, err := tx.ApprovalsOf([]string{"m0"}, "r3", pending, 10, 10); err == nil {
			t.Error("ApprovalsOf with a receipt id as the cursor: no error")
		}
		if _, err := tx.ApprovalsBefore("a0", pending, 10, 10); err == nil {
			t.Error("ApprovalsBefore from a0: no error")
		}
		return nil
	})
}

// Ensure that call events page newest first by sequence, each once, and
// add up in their agent's record.
func testEventsPaging(t *testing.T, e *env) {
	const n = 25
	var seqs []uint64
	e.update(func(tx holon.Tx) error {
		for i := 1; i <= n; i++ {
			ev := &holon.Event{Receipt: fmt.Sprintf("r%d", i), Agent: "acme/x@1.0.0", Status: holon.StatusSucceeded,
				DurationMS: 10, Billed: amt("0.01"), Currency: "EUR"}
			if i%5 == 0 {
				ev.Status, ev.Error, ev.Billed = holon.StatusFailed, "agent_error", 0
			}
			if err := tx.AppendEvent(ev, i%5 != 0); err != nil {
				return err
			}
			if len(seqs) > 0 && ev.Seq <= seqs[len(seqs)-1] {
				t.Errorf("event %d got seq %d after %d", i, ev.Seq, seqs[len(seqs)-1])
			}
			seqs = append(seqs, ev.Seq)
		}
		return nil
	})
	var seen []uint64
	var sizes []int
	var before uint64
	for range 100 {
		var page []*holon.Event
		e.view(func(tx holon.Tx) (err error) { page, err = tx.Events(before, 10); return err })
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
		if seq != seqs[n-1-i] {
			t.Fatalf("events %v, want %v newest first", seen, seqs)
		}
	}
	e.view(func(tx holon.Tx) error {
		if page, err := tx.Events(seqs[1], 3); err != nil || len(page) != 1 || page[0].Seq != seqs[0] {
			t.Errorf("Events before the second: %v, %v; want the first alone", page, err)
		}
		if page, err := tx.Events(seqs[0], 3); err != nil || len(page) != 0 {
			t.Errorf("Events before the first: %v, %v; want none", page, err)
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
	// A refund takes its amount off what the record billed, never below
	// zero; the runs stay counted.
	e.update(func(tx holon.Tx) error { return tx.RefundRecord("acme/x@1.0.0", amt("0.05")) })
	if err := e.s.Update(context.Background(), func(tx holon.Tx) error { return tx.RefundRecord("acme/x@1.0.0", amt("0.150001")) }); err == nil {
		t.Error("a refund above what the record billed: no error")
	}
	e.view(func(tx holon.Tx) error {
		rec, err := tx.Record("acme/x@1.0.0")
		if want := (holon.Record{Runs: 25, Succeeded: 20, Billed: amt("0.15"), DurationMS: 250}); err != nil || rec != want {
			t.Errorf("record after refunds = %+v, %v; want %+v", rec, err, want)
		}
		return nil
	})
}
