package kv_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"holon.dev/holon"
	"holon.dev/holon/kv"
)

// boltWrites are the names of bbolt's writing methods (Bucket, Cursor, Tx).
var boltWrites = map[string]bool{
	"Put": true, "Delete": true, "NextSequence": true, "SetSequence": true,
	"CreateBucket": true, "CreateBucketIfNotExists": true, "DeleteBucket": true,
}

// undoable are the functions allowed to write to bbolt directly: the undo
// log's own (undo.go), which every write of the writer's transactions goes
// through, and those that write outside the writer (bucket creation and
// the file format's upgrade at Open, the format written when the log
// starts and at a clean close, restore into a new file), or after
// every update of the writer's transaction ran (the fold of the receipt
// index's log, which no update's undo may take back), and the replay of the
// write-ahead log at Open (before the writer starts), and the rows
// pending from earlier commits put into bbolt (deferred.go: committed
// values, which no update's failure may take back).
var undoable = map[string]bool{
	"undo.go:put": true, "undo.go:putOver": true, "undo.go:putNew": true, "undo.go:del": true, "undo.go:nextSeq": true, "undo.go:undoUpdate": true,
	"tx.go:createBuckets": true, "export_restore.go:*": true, "approvals_index.go:buildApprovalIndex": true, "rollups.go:createRollups": true,
	"receipts_index.go:checkFormat": true, "receipts_index.go:setFormat": true, "receipts_index.go:foldLog": true,
	"redo.go:applyOps": true, "deferred.go:materialize": true,
}

// Ensure that every write to bbolt in the store's code goes through the
// undo log, so that a failing update can always be undone: a write that
// bypassed it would survive its update's failure.
func TestTx_Writes_Undoable(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	seen := map[string]bool{}
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		f, err := parser.ParseFile(fset, name, src, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			where := name + ":" + fn.Name.Name
			allowed := undoable[where] || undoable[name+":*"]
			seen[where] = true
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok {
					return true
				}
				sel, ok := call.Fun.(*ast.SelectorExpr)
				if !ok || !boltWrites[sel.Sel.Name] {
					return true
				}
				// tx.Put and tx.Delete are the Tx's own (docs.go), which
				// write through the log.
				if id, ok := sel.X.(*ast.Ident); ok && id.Name == "tx" {
					return true
				}
				if !allowed {
					t.Errorf("%s: %s writes to bbolt around the undo log (use tx.put, tx.putOver, tx.putNew, tx.del, tx.nextSeq)", fset.Position(call.Pos()), where)
				}
				return true
			})
		}
	}
	for where := range undoable {
		if !strings.HasSuffix(where, ":*") && !seen[where] {
			t.Errorf("%s is gone: update this test's list of the functions that write", where)
		}
	}
}

// steps runs each step in turn, stopping at the first error.
func steps(fns ...func(*kv.Tx) error) func(*kv.Tx) error {
	return func(tx *kv.Tx) error {
		for _, fn := range fns {
			if err := fn(tx); err != nil {
				return err
			}
		}
		return nil
	}
}

// dump is a store's every row and bucket, as Export gives them.
func dump(tb testing.TB, s *kv.Store) []string {
	tb.Helper()
	var rows []string
	err := s.Export(func(snap kv.Snapshot) error {
		rows = append(rows, fmt.Sprintf("%+v", snap.Buckets))
		return nil
	}, func(bucket string, key, value []byte) error {
		rows = append(rows, fmt.Sprintf("%s %q = %s", bucket, key, value))
		return nil
	})
	if err != nil {
		tb.Fatalf("export: %v", err)
	}
	return rows
}

// Ensure that an update that writes everywhere the store can write, then
// fails, is undone to the byte: overwrites, deletes, new keys, sequences,
// the write cache (records changed by an update before it, and flushed in
// the middle of it), so that the store after a batch with it is the store
// after the same batch without it.
func TestStore_Update_UndoEveryWrite(t *testing.T) {
	at := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	opts := kv.Options{NoSync: true, Now: func() time.Time { return at }}
	agent := "lena/extract@1.0.0"
	entry := func(key, from, to, amount string) func(*kv.Tx) error {
		e := transfer(t, key, from, to, amount)
		return func(tx *kv.Tx) error { _, err := tx.AppendEntry(e); return err }
	}
	doc := func(v string) holon.Doc { return holon.Doc{Doc: json.RawMessage(`{"v":"` + v + `"}`), Created: at} }
	idemLog := func(n int) func(*kv.Tx) error {
		return func(tx *kv.Tx) error { return tx.Put(holon.BucketIdempotency, idemLogKey(n), doc(fmt.Sprint(n))) }
	}
	receipt := func(id, status string) func(*kv.Tx) error {
		return func(tx *kv.Tx) error {
			return tx.PutReceipt(&holon.Receipt{ID: id, Mandate: "ann/m", Caller: "ann", Agent: &agent, Status: status, Created: at})
		}
	}
	newReceipt := func(tx *kv.Tx) error {
		id, err := tx.NewReceiptID()
		if err != nil {
			return err
		}
		return receipt(id, "running")(tx)
	}
	approvalOf := func(mandate string) func(*kv.Tx) error {
		return func(tx *kv.Tx) error {
			id, err := tx.NewApprovalID()
			if err != nil {
				return err
			}
			return tx.PutApproval(&holon.Approval{ID: id, Mandate: mandate, Caller: "ann", Agent: agent, Status: "pending", Created: at})
		}
	}
	approval := approvalOf("ann/m")
	event := func(tx *kv.Tx) error {
		return tx.AppendEvent(&holon.Event{Receipt: "r1", Agent: agent, Status: "succeeded", DurationMS: 40, Time: at}, true)
	}
	counter := func(name string, d int64) func(*kv.Tx) error {
		return func(tx *kv.Tx) error { _, err := tx.AddCounter(name, d); return err }
	}
	seed := steps(
		entry("signup:ann", "external:demo-credit", "ann", "10"),
		entry("signup:bob", "external:demo-credit", "bob", "10"),
		newReceipt,
		func(tx *kv.Tx) error {
			return tx.PutHold(&holon.Hold{Receipt: "r1", Payer: "ann", Amount: amt("1"), Mandate: "ann/m", Reserved: amt("1"), Started: at})
		},
		func(tx *kv.Tx) error { return tx.AddHeld("ann", amt("1")) },
		func(tx *kv.Tx) error { return tx.AddBudget("ann/m", 0, amt("1")) },
		func(tx *kv.Tx) error { return tx.Put(holon.BucketUsers, "ann", doc("ann")) },
		func(tx *kv.Tx) error { return tx.Put(holon.BucketUsers, "zed", doc("zed")) },
		func(tx *kv.Tx) error { return tx.PutMandate("ann/m", doc("m")) },
		func(tx *kv.Tx) error { return tx.PutAgent(agent, doc("agent")) },
		event,
		func(tx *kv.Tx) error { return tx.AddEarnings(agent, "EUR", 1, amt("0.5"), 0) },
		func(tx *kv.Tx) error { return tx.AddLatency(agent, 100) },
		approval,
		func(tx *kv.Tx) error { _, err := tx.Append(holon.BucketModLog, doc("first")); return err },
		idemLog(1),
	)
	good1 := steps(
		entry("admin-credit:g1", "external:demo-credit", "ann", "1"),
		func(tx *kv.Tx) error { return tx.AddBudget("ann/m", amt("0.1"), 0) },
		counter("g", 1),
		// The per-version counters the write cache holds, changed before
		// the failing update changes them again.
		func(tx *kv.Tx) error { return tx.AddEarnings(agent, "EUR", 1, amt("0.25"), 0) },
		func(tx *kv.Tx) error { return tx.AddLatency(agent, 3) },
		idemLog(2),
	)
	// The idempotency keys' log: a row deferred and taken back from the
	// rows deferred; then one deferred, put into bbolt with the pending
	// rows by the deletion of one (a fold), and taken back from bbolt.
	badLog := steps(idemLog(6), func(*kv.Tx) error { return errRefused })
	bad := steps(
		idemLog(3),
		func(tx *kv.Tx) error { return tx.Delete(holon.BucketIdempotency, idemLogKey(1)) },
		newReceipt,
		receipt("r1", "succeeded"),
		func(tx *kv.Tx) error { return tx.DeleteHold("r1") },
		func(tx *kv.Tx) error { return tx.AddHeld("ann", -amt("1")) },
		entry("admin-credit:bad", "ann", "bob", "2"),
		func(tx *kv.Tx) error { return tx.AddBudget("ann/m", amt("1"), -amt("1")) },
		func(tx *kv.Tx) error { return tx.AddBudget("bob/m", amt("1"), 0) },
		counter("g", 5), counter("new", 1),
		event,
		// A raw iteration flushes the cache in the middle of the update.
		func(tx *kv.Tx) error { return tx.ForEachCounter(func(string, uint64) error { return nil }) },
		func(tx *kv.Tx) error { return tx.AddHeld("ann", amt("2")) },
		counter("g", 1),
		func(tx *kv.Tx) error { return tx.Put(holon.BucketUsers, "ann", doc("changed")) },
		func(tx *kv.Tx) error { return tx.Put(holon.BucketUsers, "new", doc("new")) },
		func(tx *kv.Tx) error { return tx.Delete(holon.BucketUsers, "zed") },
		func(tx *kv.Tx) error { _, err := tx.Append(holon.BucketModLog, doc("bad")); return err },
		func(tx *kv.Tx) error { return tx.PutMandate("ann/m", doc("changed")) },
		func(tx *kv.Tx) error { return tx.PutAgent("lena/new@1.0.0", doc("new")) },
		func(tx *kv.Tx) error { return tx.AddEarnings(agent, "EUR", 1, amt("1"), 0) },
		func(tx *kv.Tx) error { return tx.AddLatency(agent, 900) },
		func(tx *kv.Tx) error { return tx.AddLatency("lena/new@1.0.0", 900) },
		func(tx *kv.Tx) error { return tx.AddEarnings(agent, "USD", 1, amt("1"), 0) },
		func(tx *kv.Tx) error { return tx.ForEachLatency(func(string, holon.Latency) error { return nil }) },
		func(tx *kv.Tx) error { return tx.AddLatency(agent, 3) },
		approval, approvalOf("bob/m"),
		idemLog(4),
		func(*kv.Tx) error { return errRefused },
	)
	good2 := steps(
		func(tx *kv.Tx) error {
			var d holon.Doc
			return tx.Get(holon.BucketUsers, "zed", &d) // deleted by the undone update
		},
		entry("admin-credit:g2", "ann", "bob", "1"),
		func(tx *kv.Tx) error { return tx.AddHeld("ann", amt("1")) },
		counter("g", 1),
		newReceipt, approval, event,
		func(tx *kv.Tx) error { return tx.AddEarnings(agent, "EUR", 1, amt("0.25"), 0) },
		func(tx *kv.Tx) error { return tx.AddLatency(agent, 3) },
		func(tx *kv.Tx) error { _, err := tx.Append(holon.BucketModLog, doc("good")); return err },
		func(tx *kv.Tx) error {
			for _, n := range []int{3, 4, 6} {
				if _, err := tx.GetRaw(holon.BucketIdempotency, idemLogKey(n)); !errors.Is(err, holon.ErrNotFound) {
					return fmt.Errorf("the undone update's log row %d: %v", n, err)
				}
			}
			var d holon.Doc
			return tx.Get(holon.BucketIdempotency, idemLogKey(1), &d) // deleted by the undone update
		},
		idemLog(5),
	)

	with, without := mustOpen(t, opts), mustOpen(t, opts)
	for _, s := range []*kv.Store{with, without} {
		mustUpdate(t, s, seed)
	}
	errs := batchInOrder(t, with, []func(*kv.Tx) error{good1, badLog, bad, good2})
	if errs[0] != nil || !errors.Is(errs[1], errRefused) || !errors.Is(errs[2], errRefused) || errs[3] != nil {
		t.Fatalf("batch: %v", errs)
	}
	for i, err := range batchInOrder(t, without, []func(*kv.Tx) error{good1, good2}) {
		if err != nil {
			t.Fatalf("batch without the failing update: update %d: %v", i, err)
		}
	}
	got, want := dump(t, with), dump(t, without)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		for i := range max(len(got), len(want)) {
			g, w := "", ""
			if i < len(got) {
				g = got[i]
			}
			if i < len(want) {
				w = want[i]
			}
			if g != w {
				t.Errorf("row %d:\n got  %s\n want %s", i, g, w)
			}
		}
	}
	// Export leaves the approvals index out of the dump: the undone
	// approvals must be gone from it too.
	index := func(s *kv.Store) (out string) {
		mustView(t, s, func(tx *kv.Tx) error {
			p, err := tx.ApprovalsOf([]string{"ann/m", "bob/m"}, "", func(*holon.Approval) bool { return true }, 10, 10)
			out = fmt.Sprintf("%d keys, %s", tx.ApprovalIndexRows(), pageString(p))
			return err
		})
		return out
	}
	if g, w := index(with), index(without); g != w {
		t.Errorf("approvals index: %s, want %s", g, w)
	}
}

// idemLogKey is the key of the idempotency keys' log entry n.
func idemLogKey(n int) string { return fmt.Sprintf("%s%016x", holon.IdempotencyLogPrefix, n) }
