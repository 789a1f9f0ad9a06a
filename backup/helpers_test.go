package backup_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"holon.dev/holon"
	"holon.dev/holon/backup"
	"holon.dev/holon/journal"
	"holon.dev/holon/kv"
)

var t0 = time.Date(2026, 10, 1, 9, 0, 0, 123456789, time.UTC)

func amt(s string) journal.Amount { return journal.MustParseAmount(s) }

func ptr[T any](v T) *T { return &v }

// openStore opens a fresh store; it is closed at cleanup.
func openStore(tb testing.TB, path string) *kv.Store {
	tb.Helper()
	if path == "" {
		path = filepath.Join(tb.TempDir(), "holon.db")
	}
	now := t0
	s, err := kv.Open(path, kv.Options{NoSync: true, Now: func() time.Time { return now }})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.Close() })
	return s
}

func update(tb testing.TB, s *kv.Store, fn func(*kv.Tx) error) {
	tb.Helper()
	if err := s.Update(context.Background(), fn); err != nil {
		tb.Fatal(err)
	}
}

// call is one finished call to write as the engine would have settled it.
type call struct {
	mandate, payer, author, agent string
	status                        string
	own                           journal.Amount
	parent                        *holon.Receipt
	approval                      *string
	errCode                       string
}

// settle writes a finished call: its receipt (with splits and cost), its
// settlement entry, its budget's spending, its event and the agent's
// record; a child is added to its parent's tree, and what it cost to its
// parent's total and its parent's budget, as the engine does.
// refund gives back part of a settled call's charge, as the engine does:
// its entry, its record, and its mandate's spent.
func refund(tx *kv.Tx, r *holon.Receipt, amount journal.Amount) error {
	e, parts, err := journal.Refund(holon.RefundEntryKey(r.ID, 1), r.Payer, r.Splits, 0, amount)
	if err != nil {
		return err
	}
	if _, err := tx.AppendEntry(e); err != nil {
		return err
	}
	rf := &holon.Refund{ID: holon.RefundKey(r.ID, 1), Receipt: r.ID, Amount: amount, Reason: "the lookup named the wrong company", By: "holon-labs",
		Entry: e.Key, Created: tx.Now()}
	for i, sh := range r.Splits {
		rf.Parts = append(rf.Parts, journal.Share{To: sh.To, Amount: parts[i]})
	}
	if err := tx.Put(holon.BucketRefunds, rf.ID, rf); err != nil {
		return err
	}
	if err := tx.RefundRecord(*r.Agent, amount); err != nil {
		return err
	}
	return tx.AddBudget(r.Mandate, -amount, 0)
}

func settle(tx *kv.Tx, c call) (*holon.Receipt, error) {
	id, err := tx.NewReceiptID()
	if err != nil {
		return nil, err
	}
	r := &holon.Receipt{ID: id, Mandate: c.mandate, Caller: c.mandate + "/assistant", Agent: ptr(c.agent), Status: c.status,
		WorstCase: ptr(c.own), Currency: "EUR", Payer: c.payer, Splits: []journal.Share{}, Children: []string{},
		Approval: c.approval, DurationMS: 12, Created: tx.Now()}
	if c.errCode != "" {
		r.Error = ptr(c.errCode)
	}
	if c.parent != nil {
		r.Parent = ptr(c.parent.ID)
	}
	if c.status == "succeeded" && c.own > 0 {
		shares, err := journal.Split(c.own, c.author, nil)
		if err != nil {
			return nil, err
		}
		e, err := journal.Settlement("settle:"+id, c.payer, shares)
		if err != nil {
			return nil, err
		}
		if _, err := tx.AppendEntry(e); err != nil {
			return nil, err
		}
		r.Billed, r.Splits = true, shares
		r.Cost = holon.Cost{Own: c.own, Total: c.own}
		if err := tx.AddBudget(c.mandate, c.own, 0); err != nil {
			return nil, err
		}
	}
	if c.parent != nil {
		c.parent.Children = append(c.parent.Children, id)
		if c.parent.Payer == r.Payer {
			// The parent's budget pays for what its children cost.
			c.parent.Cost.Downstream += r.Cost.Total
			c.parent.Cost.Total += r.Cost.Total
			if err := tx.AddBudget(c.parent.Mandate, r.Cost.Total, 0); err != nil {
				return nil, err
			}
		}
		if err := tx.PutReceipt(c.parent); err != nil {
			return nil, err
		}
	}
	if err := tx.PutReceipt(r); err != nil {
		return nil, err
	}
	if c.status == "succeeded" || c.status == "failed" {
		ev := &holon.Event{Receipt: id, Agent: c.agent, Status: c.status, DurationMS: 12, Billed: r.Cost.Own,
			Currency: "EUR", Delegated: c.parent != nil, Time: tx.Now()}
		if r.Error != nil {
			ev.Error = *r.Error
		}
		if err := tx.AppendEvent(ev, c.status == "succeeded"); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// fixture fills a store with one of everything the gateway writes: sign-up
// credits, mandates and a derived sub-mandate, settled calls, a delegated
// tree (orchestrator and two children), a denial, a failure, a call in
// flight with its hold, a pending approval (with its input) and a used one,
// call events and records, and hosted-product documents (one under a binary
// sequence key).
func fixture(tb testing.TB, s *kv.Store) {
	tb.Helper()
	update(tb, s, func(tx *kv.Tx) error {
		for _, who := range []string{"alice", "bob"} {
			e, err := journal.Transfer("signup:"+who, "external:demo-credit", who, amt("5.00"))
			if err != nil {
				return err
			}
			if _, err := tx.AppendEntry(e); err != nil {
				return err
			}
			doc := json.RawMessage(`{"id":"` + who + `/sandbox","issuer":"` + who + `","grantee":"` + who + `/assistant","currency":"EUR"}`)
			if err := tx.PutMandate(who+"/sandbox", holon.Doc{Doc: doc, Created: tx.Now()}); err != nil {
				return err
			}
		}
		if err := tx.PutAgent("holon-labs/company-lookup@1.0.0", holon.Doc{Doc: json.RawMessage(`{"id":"holon-labs/company-lookup","version":"1.0.0"}`), Created: tx.Now(), Published: true}); err != nil {
			return err
		}
		return nil
	})
	update(tb, s, func(tx *kv.Tx) error {
		// A plain paid call, and a failure (never billed).
		if _, err := settle(tx, call{mandate: "alice/sandbox", payer: "alice", author: "holon-labs", agent: "holon-labs/company-lookup@1.0.0", status: "succeeded", own: amt("0.08")}); err != nil {
			return err
		}
		if _, err := settle(tx, call{mandate: "bob/sandbox", payer: "bob", author: "holon-labs", agent: "holon-labs/company-lookup@1.0.0", status: "failed", errCode: "not_found"}); err != nil {
			return err
		}
		// The delegated run: own 0.10, children 0.012 and 0.08.
		root, err := settle(tx, call{mandate: "alice/sandbox", payer: "alice", author: "holon-labs", agent: "holon-labs/invoice-pipeline@0.4.0", status: "succeeded", own: amt("0.10")})
		if err != nil {
			return err
		}
		sub := root.Mandate + "~" + root.ID
		root.SubMandate = &sub
		if err := tx.PutMandate(sub, holon.Doc{Doc: json.RawMessage(`{"id":"` + sub + `","issuer":"alice","parent":"alice/sandbox"}`), Created: tx.Now()}); err != nil {
			return err
		}
		if _, err := settle(tx, call{mandate: sub, payer: "alice", author: "holon-labs", agent: "holon-labs/text-tables@1.0.0", status: "succeeded", own: amt("0.012"), parent: root}); err != nil {
			return err
		}
		if _, err := settle(tx, call{mandate: sub, payer: "alice", author: "holon-labs", agent: "holon-labs/company-lookup@1.0.0", status: "succeeded", own: amt("0.08"), parent: root}); err != nil {
			return err
		}
		// A denial.
		if _, err := settle(tx, call{mandate: "bob/sandbox", payer: "bob", agent: "lena/extract@1.0.0", status: "denied", errCode: "insufficient_funds"}); err != nil {
			return err
		}
		return nil
	})
	update(tb, s, func(tx *kv.Tx) error {
		// A pending approval, which keeps the input.
		held, err := settle(tx, call{mandate: "alice/sandbox", payer: "alice", agent: "holon-labs/invoice-pipeline@0.4.0", status: "pending_approval"})
		if err != nil {
			return err
		}
		aid, err := tx.NewApprovalID()
		if err != nil {
			return err
		}
		held.Approval = &aid
		if err := tx.PutReceipt(held); err != nil {
			return err
		}
		if err := tx.PutApproval(&holon.Approval{ID: aid, Mandate: "alice/sandbox", Caller: "alice/assistant", Agent: "holon-labs/invoice-pipeline@0.4.0",
			Capability: "extraction.invoice", InputHash: "sha256:00", WorstCase: amt("3.10"), Currency: "EUR", Receipt: held.ID, Status: holon.ApprovalPending,
			Created: tx.Now(), Expires: tx.Now().Add(7 * 24 * time.Hour), Input: json.RawMessage(`{"text":"ACME <Corp> & co"}`)}); err != nil {
			return err
		}
		// A used approval and the run it let through.
		held2, err := settle(tx, call{mandate: "bob/sandbox", payer: "bob", agent: "holon-labs/company-lookup@1.0.0", status: "pending_approval"})
		if err != nil {
			return err
		}
		aid2, err := tx.NewApprovalID()
		if err != nil {
			return err
		}
		held2.Approval = &aid2
		if err := tx.PutReceipt(held2); err != nil {
			return err
		}
		run, err := settle(tx, call{mandate: "bob/sandbox", payer: "bob", author: "holon-labs", agent: "holon-labs/company-lookup@1.0.0", status: "succeeded", own: amt("0.08"), approval: &aid2})
		if err != nil {
			return err
		}
		return tx.PutApproval(&holon.Approval{ID: aid2, Mandate: "bob/sandbox", Caller: "bob/assistant", Agent: "holon-labs/company-lookup@1.0.0",
			InputHash: "sha256:01", WorstCase: amt("0.08"), Currency: "EUR", Receipt: held2.ID, Status: holon.ApprovalUsed,
			Created: tx.Now(), Expires: tx.Now().Add(time.Hour), Decided: ptr(tx.Now()), Run: &run.ID})
	})
	update(tb, s, func(tx *kv.Tx) error {
		// A call in flight: its receipt, hold, held amount and reservation.
		r, err := settle(tx, call{mandate: "alice/sandbox", payer: "alice", agent: "holon-labs/company-lookup@1.0.0", status: "running"})
		if err != nil {
			return err
		}
		if err := tx.PutHold(&holon.Hold{Receipt: r.ID, Payer: "alice", Amount: amt("0.08"), Mandate: "alice/sandbox", Window: "day:2026-10-01",
			Reserved: amt("0.08"), Started: tx.Now()}); err != nil {
			return err
		}
		if err := tx.AddHeld("alice", amt("0.08")); err != nil {
			return err
		}
		// Its mandate's budget windows: the day before, spent; this day,
		// the call's reservation.
		if err := tx.AddWindowBudget("alice/sandbox", "day:2026-09-30", amt("0.18"), 0); err != nil {
			return err
		}
		if err := tx.AddWindowBudget("alice/sandbox", "day:2026-10-01", 0, amt("0.08")); err != nil {
			return err
		}
		return tx.AddBudget("alice/sandbox", 0, amt("0.08"))
	})
	update(tb, s, func(tx *kv.Tx) error {
		if err := tx.Put(holon.BucketUsers, "alice", map[string]any{"handle": "alice", "email": "alice@example.com"}); err != nil {
			return err
		}
		if err := tx.Put(holon.BucketSettings, "weird \"key\" \\ é", map[string]any{"on": true}); err != nil {
			return err
		}
		_, err := tx.Append(holon.BucketModLog, map[string]any{"action": "disable", "reason": "spam"})
		return err
	})
}

// writeBackup backs a store up into a byte slice.
func writeBackup(tb testing.TB, s *kv.Store) []byte {
	tb.Helper()
	var buf bytes.Buffer
	if _, err := backup.Write(&buf, s, backup.Options{Gateway: "test", Now: func() time.Time { return t0 }}); err != nil {
		tb.Fatal(err)
	}
	return buf.Bytes()
}

// lines splits a backup into its lines (each without its newline).
func lines(b []byte) []string {
	return strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
}

// reseal rebuilds a backup from edited lines: header counts follow the rows,
// and the trailer gets the right checksum, as someone covering their tracks
// would do.
func reseal(tb testing.TB, ls []string) []byte {
	tb.Helper()
	var hd backup.Header
	if err := json.Unmarshal([]byte(ls[0]), &hd); err != nil {
		tb.Fatal(err)
	}
	rows := ls[1 : len(ls)-1]
	for name, t := range hd.Tables {
		t.Rows = 0
		hd.Tables[name] = t
	}
	for _, l := range rows {
		var r struct {
			T string `json:"t"`
		}
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			tb.Fatal(err)
		}
		t := hd.Tables[r.T]
		t.Rows++
		hd.Tables[r.T] = t
	}
	hd.Rows = int64(len(rows))
	head, err := json.Marshal(hd)
	if err != nil {
		tb.Fatal(err)
	}
	var buf bytes.Buffer
	buf.Write(head)
	buf.WriteByte('\n')
	for _, l := range rows {
		buf.WriteString(l)
		buf.WriteByte('\n')
	}
	sum := sha256.Sum256(buf.Bytes())
	end, _ := json.Marshal(map[string]any{"end": backup.Trailer{Rows: int64(len(rows)), SHA256: hex.EncodeToString(sum[:])}})
	buf.Write(end)
	buf.WriteByte('\n')
	return buf.Bytes()
}

// editRow finds the first row line of table t whose text contains match,
// and replaces it with edit's result.
func editRow(tb testing.TB, ls []string, t, match string, edit func(v map[string]any)) []string {
	tb.Helper()
	out := append([]string(nil), ls...)
	for i, l := range out[1 : len(out)-1] {
		if !strings.HasPrefix(l, `{"t":"`+t+`"`) || !strings.Contains(l, match) {
			continue
		}
		var row map[string]any
		if err := json.Unmarshal([]byte(l), &row); err != nil {
			tb.Fatal(err)
		}
		v := row["v"].(map[string]any)
		edit(v)
		b, err := json.Marshal(row)
		if err != nil {
			tb.Fatal(err)
		}
		out[i+1] = string(b)
		return out
	}
	tb.Fatalf("no %s row contains %q", t, match)
	return nil
}

// dump reads every row and the snapshot of a store, for comparisons.
func dump(tb testing.TB, s *kv.Store) (kv.Snapshot, []kv.Row) {
	tb.Helper()
	var snap kv.Snapshot
	var rows []kv.Row
	err := s.Export(func(sn kv.Snapshot) error { snap = sn; return nil }, func(b string, k, v []byte) error {
		rows = append(rows, kv.Row{Bucket: b, Key: bytes.Clone(k), Value: bytes.Clone(v)})
		return nil
	})
	if err != nil {
		tb.Fatal(err)
	}
	return snap, rows
}

// files lists the names in a directory.
func files(tb testing.TB, dir string) []string {
	tb.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		tb.Fatal(err)
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return names
}

func mustView(tb testing.TB, s *kv.Store, fn func(*kv.Tx) error) {
	tb.Helper()
	if err := s.View(fn); err != nil {
		tb.Fatal(err)
	}
}
