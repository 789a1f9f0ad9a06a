package backup

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"holon.dev/holon"
	"holon.dev/holon/journal"
	"holon.dev/holon/kv"
)

// statusSucceeded is the receipt status of a successful call.
const statusSucceeded = "succeeded"

// maxProblems is how many problems a check lists before it only counts.
const maxProblems = 20

// Check names, in the order a report lists them.
const (
	CheckJournal     = "journal"
	CheckBalances    = "balances"
	CheckSettlements = "settlements"
	CheckTrees       = "receipt trees"
	CheckHolds       = "holds"
	CheckBudgets     = "budgets"
	CheckApprovals   = "approvals"
	CheckRecords     = "records"
	CheckCounters    = "counters"
)

// Report is the outcome of Verify: one result per check.
type Report struct {
	Checks []*CheckResult
}

// CheckResult is one check: what it covered and what it found wrong.
type CheckResult struct {
	Name string
	// Covered says what was checked, such as "41 rows".
	Covered string
	// Problems lists the first problems found; More counts the others.
	Problems []string
	More     int
}

// OK reports whether the check found nothing wrong.
func (c *CheckResult) OK() bool { return len(c.Problems) == 0 }

func (c *CheckResult) fail(format string, args ...any) {
	if len(c.Problems) >= maxProblems {
		c.More++
		return
	}
	c.Problems = append(c.Problems, fmt.Sprintf(format, args...))
}

// OK reports whether every check passed.
func (r *Report) OK() bool {
	for _, c := range r.Checks {
		if !c.OK() {
			return false
		}
	}
	return true
}

// Check returns the result of the named check (nil when absent).
func (r *Report) Check(name string) *CheckResult {
	for _, c := range r.Checks {
		if c.Name == name {
			return c
		}
	}
	return nil
}

// WriteTo prints the report: one line per check, its problems beneath.
func (r *Report) WriteTo(w io.Writer) (int64, error) {
	var b strings.Builder
	failed := 0
	for _, c := range r.Checks {
		verdict := "ok"
		if !c.OK() {
			verdict = "FAIL"
			failed++
		}
		fmt.Fprintf(&b, "%-4s  %-13s  %s\n", verdict, c.Name, c.Covered)
		for _, p := range c.Problems {
			fmt.Fprintf(&b, "        %s\n", p)
		}
		if c.More > 0 {
			fmt.Fprintf(&b, "        … and %d more\n", c.More)
		}
	}
	if failed == 0 {
		fmt.Fprintf(&b, "verify: all %d checks passed\n", len(r.Checks))
	} else {
		fmt.Fprintf(&b, "verify: %d of %d checks FAILED\n", failed, len(r.Checks))
	}
	n, err := io.WriteString(w, b.String())
	return int64(n), err
}

// Verify checks a store's integrity from one read transaction:
//
//   - journal: rows numbered without gaps, each sums to zero, idempotency
//     keys unique, the hash chain intact up to the recorded head (a row
//     altered or removed after the fact breaks it);
//   - balances: every balance is the sum of its account's lines, and all
//     balances sum to zero;
//   - settlements: every billed receipt with cost.own > 0 has its
//     settle:<id> entry, whose lines are the payer's debit and the
//     receipt's splits, and every settle entry has such a receipt;
//   - receipt trees: children exist and point back to their parent, the
//     parent lists them, and the children's billed totals paid by the same
//     payer sum to the parent's cost.downstream; total = own + downstream;
//   - holds: a hold only for a running call and every running call has one;
//     accounts hold, and budgets reserve, exactly what the holds say;
//   - budgets: each mandate has spent what its receipts cost (the sum of
//     their cost.total; for a call still running, what its children have
//     settled so far), and nothing without a budget has spent anything;
//     each budget alert is keyed by its id, once per mandate, budget and
//     threshold, of a billed receipt, and each webhook delivery is of an
//     alert (verify_alerts.go);
//   - approvals: each belongs to an existing receipt, a used one names the
//     receipt it let through, only pending or granted ones keep input, and
//     the index by mandate lists each one, and nothing else;
//   - records: each agent's record is the sum of its call events (what
//     they billed less their refunds);
//   - counters: receipt and journal counters match the rows, the receipt
//     index (and its log) lists each receipt under its mandate and nothing
//     else, sequences are not behind the ids in use;
//   - published: published versions, sealed endpoint credentials and
//     GitHub sign-in state are well formed (verify_publish.go).
//   - earnings: each author's earnings counters are what the settle
//     entries paid it less what refunds took back, and each version's
//     paid calls its entries but those refunded in full;
//   - latency: each version's histogram is its settled events' durations.
//   - rollups: the spend and earnings rollups are what the receipts, the
//     journal and the refunds add up to (verify_rollups.go).
//
// An error means the store could not be read; problems are in the report.
func Verify(s *kv.Store) (*Report, error) { return VerifyContext(context.Background(), s) }

// VerifyContext is Verify that stops, with ctx's error, soon after ctx
// ends (every 1,024 rows of any scan it checks): a long scan of a large
// store is not a reason to ignore SIGTERM.
func VerifyContext(ctx context.Context, s *kv.Store) (*Report, error) {
	rep := &Report{}
	err := s.View(func(tx *kv.Tx) error {
		v := &verifier{ctx: ctx, tx: tx, rep: rep, c: map[string]*CheckResult{}}
		for _, name := range []string{CheckJournal, CheckBalances, CheckSettlements, CheckTrees, CheckHolds, CheckBudgets, CheckApprovals, CheckRecords, CheckCounters,
			CheckEarnings, CheckLatency, CheckRollups, CheckPublished} {
			c := &CheckResult{Name: name}
			v.c[name] = c
			rep.Checks = append(rep.Checks, c)
		}
		for _, step := range []func() error{v.journal, v.balances, v.receipts, v.refunds, v.holds, v.budgets, v.alerts, v.approvals, v.records, v.counters,
			v.earnings, v.latency, v.rollups, v.published} {
			if err := step(); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("verify: %w", err)
	}
	return rep, nil
}

type verifier struct {
	ctx context.Context
	// seen counts the rows scanned, for tick.
	seen int64
	tx   *kv.Tx
	rep  *Report
	c    map[string]*CheckResult

	// From the journal pass: its rows, the last one's number.
	rows    int64
	lastRow uint64
	sums    map[string]journal.Amount
	// From the receipts pass.
	nReceipts  int64
	maxReceipt uint64
	byMandate  map[string]uint64
	// setOf is each mandate's receipts as a set's fingerprint (the sum of
	// mix(seq)), held against the receipt index's.
	setOf map[string]uint64
	// spent is what each mandate's receipts cost (cost.total).
	spent      map[string]journal.Amount
	billed     int64
	settleRows int64
	refundRows int64
	// refundedFrom is what each receipt's refunds took from each account
	// (negative), from the refunds pass.
	refundedFrom map[string]map[string]journal.Amount
	// refunded is what each receipt's refunds gave back in all.
	refunded    map[string]journal.Amount
	running     int64
	treeParents int64
	// From the approvals and records passes.
	maxApproval, maxEvent uint64
}

// tick returns ctx's error on the first row and every 1,024th: the scans
// call it for each row they read.
func (v *verifier) tick() error {
	v.seen++
	if v.seen%1024 != 1 {
		return nil
	}
	if err := v.ctx.Err(); err != nil {
		return fmt.Errorf("stopped after %d rows: %w", v.seen-1, err)
	}
	return nil
}

func (v *verifier) journal() error {
	c := v.c[CheckJournal]
	settle := v.c[CheckSettlements]
	v.sums = map[string]journal.Amount{}
	var chains holon.Chains
	err := v.tx.ForEachEntry(0, func(row holon.JournalRow) (bool, error) {
		if err := v.tick(); err != nil {
			return false, err
		}
		v.rows++
		// Numbers may skip (a store on PostgreSQL hands them out from
		// blocks): a row removed shows in its chain (chains.Add) or at
		// a chain's head (MatchHeads).
		if row.Seq <= v.lastRow {
			c.fail("row %d comes after row %d: rows are not in the order of their numbers", row.Seq, v.lastRow)
		}
		v.lastRow = row.Seq
		if err := (journal.Entry{Key: row.Key, Lines: row.Lines}).Validate(); err != nil {
			c.fail("row %d: %v", row.Seq, err)
		}
		if seq, ok := v.tx.EntrySeq(row.Key); !ok {
			c.fail("row %d: its idempotency key %q is not recorded", row.Seq, row.Key)
		} else if seq != row.Seq {
			c.fail("row %d: idempotency key %q is used again (recorded for row %d)", row.Seq, row.Key, seq)
		}
		if err := chains.Add(row); err != nil {
			c.fail("%v", err)
		}
		for _, l := range row.Lines {
			v.sums[l.Account] += l.Amount
		}
		if isRefundKey(row.Key) {
			v.refundRows++
		}
		if id, ok := strings.CutPrefix(row.Key, "settle:"); ok {
			v.settleRows++
			if !v.tx.HasReceipt(id) {
				settle.fail("entry %s (row %d) pays for receipt %s, which does not exist", row.Key, row.Seq, id)
			}
		}
		return true, nil
	})
	if err != nil {
		return err
	}
	if err := holon.MatchHeads(v.tx.JournalHeads(), chains.Heads()); err != nil {
		c.fail("%v", err)
	}
	if keys := v.tx.JournalKeys(); keys != v.rows {
		c.fail("%d idempotency keys are recorded for %d rows", keys, v.rows)
	}
	c.Covered = fmt.Sprintf("%d entries: each sums to zero, keys unique, hash chains intact to their heads", v.rows)
	return nil
}

func (v *verifier) balances() error {
	c := v.c[CheckBalances]
	var total journal.Amount
	n := 0
	seen := map[string]bool{}
	err := v.tx.ForEachAccount(func(name string, a holon.Account) error {
		n++
		seen[name] = true
		if a.Balance != v.sums[name] {
			c.fail("account %s: balance %s, its journal lines sum to %s", name, a.Balance, v.sums[name])
		}
		total += a.Balance
		return nil
	})
	if err != nil {
		return err
	}
	for _, name := range sortedKeys(v.sums) {
		if !seen[name] && v.sums[name] != 0 {
			c.fail("account %s: journal lines sum to %s, but it has no balance", name, v.sums[name])
		}
	}
	if total != 0 {
		c.fail("balances sum to %s, want 0", total)
	}
	c.Covered = fmt.Sprintf("%d accounts: each balance is the sum of its lines, all sum to zero", n)
	return nil
}

// receipts checks settlements and trees, one receipt at a time.
func (v *verifier) receipts() error {
	settle, trees, holds := v.c[CheckSettlements], v.c[CheckTrees], v.c[CheckHolds]
	appr := v.c[CheckApprovals]
	v.byMandate = map[string]uint64{}
	v.setOf = map[string]uint64{}
	v.spent = map[string]journal.Amount{}
	err := v.tx.ForEachReceipt(func(r *holon.Receipt) error {
		if err := v.tick(); err != nil {
			return err
		}
		v.nReceipts++
		seq, _ := holon.ReceiptSeq(r.ID)
		v.maxReceipt = max(v.maxReceipt, seq)
		v.byMandate[r.Mandate]++
		v.setOf[r.Mandate] += mix(seq)
		if err := v.settlement(settle, r); err != nil {
			return err
		}
		if err := v.tree(trees, r); err != nil {
			return err
		}
		h, err := v.tx.Hold(r.ID)
		hasHold := err == nil
		if err != nil && !errors.Is(err, holon.ErrNotFound) {
			return err
		}
		// A call still running has spent, under its mandate, what its
		// children settled so far (its hold's downstream); any other
		// what its receipt cost in all.
		if r.Status == holon.StatusRunning {
			v.running++
			if !hasHold {
				holds.fail("receipt %s is running but has no hold", r.ID)
			} else {
				v.spent[r.Mandate] += h.Downstream
			}
		} else {
			v.spent[r.Mandate] += r.Cost.Total
		}
		if r.Approval != nil {
			if _, err := v.tx.Approval(*r.Approval); err != nil {
				appr.fail("receipt %s names approval %s, which does not exist", r.ID, *r.Approval)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	settle.Covered = fmt.Sprintf("%d billed receipts against %d settle entries", v.billed, v.settleRows)
	trees.Covered = fmt.Sprintf("%d receipts, %d with children: children exist, point back and add up to cost.downstream", v.nReceipts, v.treeParents)
	return nil
}

// settlement checks that a receipt and its settle entry agree.
func (v *verifier) settlement(c *CheckResult, r *holon.Receipt) error {
	key := "settle:" + r.ID
	row, err := v.tx.EntryByKey(key)
	has := err == nil
	if err != nil && !errors.Is(err, holon.ErrNotFound) {
		return err
	}
	if !r.Billed || r.Cost.Own <= 0 {
		if has {
			c.fail("entry %s (row %d) exists, but receipt %s is not billed (billed %v, cost.own %s)", key, row.Seq, r.ID, r.Billed, r.Cost.Own)
		}
		return nil
	}
	v.billed++
	var sum journal.Amount
	for _, s := range r.Splits {
		sum += s.Amount
	}
	if sum != r.Cost.Own {
		c.fail("receipt %s: splits sum to %s, cost.own is %s", r.ID, sum, r.Cost.Own)
	}
	want, err := journal.Settlement(key, r.Payer, r.Splits)
	if errors.Is(err, journal.ErrTooFewLines) {
		// The payer received every share: nothing moves, nothing is journaled.
		if has {
			c.fail("entry %s exists, but receipt %s's payer %s receives every share", key, r.ID, r.Payer)
		}
		return nil
	}
	if err != nil {
		c.fail("receipt %s: its splits do not make a settlement: %v", r.ID, err)
		return nil
	}
	if !has {
		c.fail("receipt %s is billed %s %s (own), but there is no entry %s", r.ID, r.Cost.Own, r.Currency, key)
		return nil
	}
	if !sameLines(want.Lines, row.Lines) {
		c.fail("entry %s (row %d) moves %s; receipt %s says %s", key, row.Seq, linesString(row.Lines), r.ID, linesString(want.Lines))
	}
	return nil
}

// tree checks a receipt's place in its tree.
func (v *verifier) tree(c *CheckResult, r *holon.Receipt) error {
	if r.Cost.Total != r.Cost.Own+r.Cost.Downstream {
		c.fail("receipt %s: cost.total %s is not own %s + downstream %s", r.ID, r.Cost.Total, r.Cost.Own, r.Cost.Downstream)
	}
	if r.Parent != nil {
		p, err := v.tx.Receipt(*r.Parent)
		switch {
		case errors.Is(err, holon.ErrNotFound):
			c.fail("receipt %s: its parent %s does not exist", r.ID, *r.Parent)
		case err != nil:
			return err
		default:
			listed := p.Children
			if p.Status == holon.StatusRunning {
				if h, err := v.tx.Hold(p.ID); err == nil {
					listed = h.Children
				}
			}
			if !slices.Contains(listed, r.ID) {
				c.fail("receipt %s: its parent %s does not list it among its children", r.ID, p.ID)
			}
		}
	}
	children, downstream := r.Children, r.Cost.Downstream
	if r.Status == holon.StatusRunning {
		h, err := v.tx.Hold(r.ID)
		if err != nil {
			return nil // reported by the holds check
		}
		children, downstream = h.Children, h.Downstream
	}
	if len(children) == 0 {
		if downstream != 0 {
			c.fail("receipt %s: cost.downstream %s without children", r.ID, downstream)
		}
		return nil
	}
	v.treeParents++
	var sum journal.Amount
	for _, id := range children {
		ch, err := v.tx.Receipt(id)
		if errors.Is(err, holon.ErrNotFound) {
			c.fail("receipt %s: its child %s does not exist", r.ID, id)
			continue
		}
		if err != nil {
			return err
		}
		if ch.Parent == nil || *ch.Parent != r.ID {
			c.fail("receipt %s: its child %s does not point back to it", r.ID, id)
		}
		if ch.Payer == r.Payer {
			sum += ch.Cost.Total
		}
	}
	if sum != downstream {
		c.fail("receipt %s: cost.downstream is %s, its children paid by %s were billed %s in all", r.ID, downstream, r.Payer, sum)
	}
	return nil
}

func (v *verifier) holds() error {
	c := v.c[CheckHolds]
	hs, err := v.tx.Holds()
	if err != nil {
		return err
	}
	held := map[string]journal.Amount{}
	reserved := map[string]journal.Amount{}
	type window struct{ mandate, key string }
	inWindow := map[window]journal.Amount{}
	funders := map[string]bool{}
	for _, h := range hs {
		funders[h.Receipt] = true
	}
	for _, h := range hs {
		r, err := v.tx.Receipt(h.Receipt)
		switch {
		case errors.Is(err, holon.ErrNotFound):
			c.fail("hold %s: its receipt does not exist", h.Receipt)
		case err != nil:
			return err
		case r.Status != holon.StatusRunning:
			c.fail("hold %s outlives its call: the receipt is %s", h.Receipt, r.Status)
		}
		if h.Funder != "" && !funders[h.Funder] {
			c.fail("hold %s draws on %s, which holds nothing", h.Receipt, h.Funder)
		}
		held[h.Payer] += h.Amount
		reserved[h.Mandate] += h.Reserved
		if h.Window != "" {
			inWindow[window{h.Mandate, h.Window}] += h.Reserved
		}
	}
	err = v.tx.ForEachAccount(func(name string, a holon.Account) error {
		if a.Held != held[name] {
			c.fail("account %s holds %s, its calls in flight hold %s", name, a.Held, held[name])
		}
		delete(held, name)
		return nil
	})
	if err != nil {
		return err
	}
	for _, name := range sortedKeys(held) {
		if held[name] != 0 {
			c.fail("calls in flight hold %s on %s, which has no account", held[name], name)
		}
	}
	err = v.tx.ForEachBudget(func(mandate string, b holon.Budget) error {
		if b.Reserved != reserved[mandate] {
			c.fail("mandate %s reserves %s, its calls in flight reserve %s", mandate, b.Reserved, reserved[mandate])
		}
		delete(reserved, mandate)
		return nil
	})
	if err != nil {
		return err
	}
	for _, m := range sortedKeys(reserved) {
		if reserved[m] != 0 {
			c.fail("calls in flight reserve %s under %s, which has no budget", reserved[m], m)
		}
	}
	windows := 0
	err = v.tx.ForEachWindowBudget(func(mandate, key string, b holon.Budget) error {
		windows++
		w := window{mandate, key}
		if b.Reserved != inWindow[w] {
			c.fail("mandate %s reserves %s in its window %s, its calls in flight reserve %s there", mandate, b.Reserved, key, inWindow[w])
		}
		if lifetime, err := v.tx.Budget(mandate); err != nil {
			return err
		} else if b.Spent > lifetime.Spent {
			c.fail("mandate %s spent %s in its window %s, more than its lifetime's %s", mandate, b.Spent, key, lifetime.Spent)
		}
		delete(inWindow, w)
		return nil
	})
	if err != nil {
		return err
	}
	for w, r := range inWindow {
		if r != 0 {
			c.fail("calls in flight reserve %s under %s in its window %s, which has no budget", r, w.mandate, w.key)
		}
	}
	c.Covered = fmt.Sprintf("%d holds for %d running calls; held and reserved amounts match, in %d budget windows too", len(hs), v.running, windows)
	return nil
}

func (v *verifier) approvals() error {
	c := v.c[CheckApprovals]
	n := 0
	indexed := v.tx.ApprovalIndexRows()
	err := v.tx.ForEachApproval(func(a *holon.Approval) error {
		if err := v.tick(); err != nil {
			return err
		}
		n++
		seq, _ := holon.ApprovalSeq(a.ID)
		v.maxApproval = max(v.maxApproval, seq)
		if !v.tx.HasReceipt(a.Receipt) {
			c.fail("approval %s: its receipt %s does not exist", a.ID, a.Receipt)
		}
		if a.Status == holon.ApprovalUsed {
			if a.Run == nil {
				c.fail("approval %s is used but names no run", a.ID)
			} else if r, err := v.tx.Receipt(*a.Run); err != nil {
				c.fail("approval %s let %s through, which does not exist", a.ID, *a.Run)
			} else if r.Approval == nil || *r.Approval != a.ID {
				c.fail("approval %s let %s through, whose receipt does not name it", a.ID, *a.Run)
			}
		}
		if len(a.Input) > 0 && a.Status != holon.ApprovalPending && a.Status != holon.ApprovalGranted {
			c.fail("approval %s is %s but still keeps its input", a.ID, a.Status)
		}
		if indexed >= 0 && !v.tx.ApprovalIndexed(a.Mandate, a.ID) {
			c.fail("approval %s is not in the index of mandate %s", a.ID, a.Mandate)
		}
		return nil
	})
	if err != nil {
		return err
	}
	index := "indexed by mandate"
	switch {
	case indexed < 0:
		index = "no index by mandate yet (the gateway writes it when it starts)"
	case indexed != int64(n):
		c.fail("the approvals index holds %d keys for %d approvals", indexed, n)
	}
	c.Covered = fmt.Sprintf("%d approvals: receipts exist, used ones name their run, input kept only while undecided, %s", n, index)
	return nil
}

func (v *verifier) records() error {
	c := v.c[CheckRecords]
	sums := map[string]*holon.Record{}
	var events int64
	err := v.tx.ForEachEvent(func(ev *holon.Event) error {
		if err := v.tick(); err != nil {
			return err
		}
		events++
		r := sums[ev.Agent]
		if r == nil {
			r = &holon.Record{}
			sums[ev.Agent] = r
		}
		r.Runs++
		if ev.Status == statusSucceeded {
			r.Succeeded++
		}
		// What the run billed, less what its refunds gave back.
		r.Billed += ev.Billed - v.refunded[ev.Receipt]
		r.DurationMS += ev.DurationMS
		v.maxEvent = max(v.maxEvent, ev.Seq)
		if !v.tx.HasReceipt(ev.Receipt) {
			c.fail("event %d: its receipt %s does not exist", ev.Seq, ev.Receipt)
		}
		return nil
	})
	if err != nil {
		return err
	}
	n := 0
	err = v.tx.ForEachRecord(func(agent string, r holon.Record) error {
		n++
		want := sums[agent]
		if want == nil {
			want = &holon.Record{}
		}
		if r != *want {
			c.fail("agent %s: record says %d runs, %d succeeded, %s billed, %d ms; its events add up to %d, %d, %s, %d ms",
				agent, r.Runs, r.Succeeded, r.Billed, r.DurationMS, want.Runs, want.Succeeded, want.Billed, want.DurationMS)
		}
		delete(sums, agent)
		return nil
	})
	if err != nil {
		return err
	}
	for _, agent := range sortedKeys(sums) {
		c.fail("agent %s has %d events but no record", agent, sums[agent].Runs)
	}
	c.Covered = fmt.Sprintf("%d agent records are the sums of %d call events", n, events)
	return nil
}

func (v *verifier) counters() error {
	c := v.c[CheckCounters]
	if err := v.receiptIndex(c); err != nil {
		return err
	}
	if n := v.tx.Counter("receipts"); n != uint64(v.nReceipts) {
		c.fail("counter receipts is %d, there are %d receipts", n, v.nReceipts)
	}
	if n := v.tx.Counter("journal_entries"); n != uint64(v.rows) {
		c.fail("counter journal_entries is %d, there are %d journal rows", n, v.rows)
	}
	err := v.tx.ForEachCounter(func(name string, n uint64) error {
		if m, ok := strings.CutPrefix(name, "receipts:"); ok {
			if n != v.byMandate[m] {
				c.fail("counter %s is %d, mandate %s has %d receipts", name, n, m, v.byMandate[m])
			}
			delete(v.byMandate, m)
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, m := range sortedKeys(v.byMandate) {
		c.fail("mandate %s has %d receipts but no counter receipts:%s", m, v.byMandate[m], m)
	}
	if seq := v.tx.Sequence("receipts"); seq < v.maxReceipt {
		c.fail("the receipts sequence is %d, behind receipt r%d: new calls would reuse ids", seq, v.maxReceipt)
	}
	if seq := v.tx.Sequence("journal"); seq < v.lastRow {
		c.fail("the journal sequence is %d, behind row %d", seq, v.lastRow)
	}
	if seq := v.tx.Sequence("approvals"); seq < v.maxApproval {
		c.fail("the approvals sequence is %d, behind approval a%d", seq, v.maxApproval)
	}
	if seq := v.tx.Sequence("call_events"); seq < v.maxEvent {
		c.fail("the call_events sequence is %d, behind event %d", seq, v.maxEvent)
	}
	c.Covered = "receipt and journal counters match their rows; the receipt index lists each receipt under its mandate, and nothing else; sequences are ahead of every id"
	return nil
}

// receiptIndex checks that the receipt index (with its log) lists each
// receipt under its mandate and nothing else: per mandate, the same
// number of keys as receipts and the same set (their fingerprints, the
// sums of mix(seq), which memory holds per mandate, not per receipt).
func (v *verifier) receiptIndex(c *CheckResult) error {
	n := map[string]uint64{}
	set := map[string]uint64{}
	err := v.tx.ForEachReceiptIndexed(func(m string, seq uint64) error {
		if err := v.tick(); err != nil {
			return err
		}
		n[m]++
		set[m] += mix(seq)
		return nil
	})
	if err != nil {
		return err
	}
	for _, m := range sortedKeys(n) {
		switch {
		case n[m] != v.byMandate[m]:
			c.fail("the receipt index lists %d receipts under mandate %s, which has %d", n[m], m, v.byMandate[m])
		case set[m] != v.setOf[m]:
			c.fail("the receipt index lists under mandate %s receipts that are not its own", m)
		}
	}
	for _, m := range sortedKeys(v.byMandate) {
		if _, ok := n[m]; !ok {
			c.fail("the receipt index lists none of mandate %s's %d receipts", m, v.byMandate[m])
		}
	}
	return nil
}

// mix scrambles a sequence number (splitmix64's finalizer), so that sums
// of mixed numbers tell sets apart.
func mix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// VerifyFile checks a backup: first the file itself (header, counts,
// checksum), then, restored into a temporary store under dir ("" for the
// system's), everything Verify checks. The temporary store is removed.
func VerifyFile(r io.Reader, dir string) (*Report, Summary, error) {
	tmp, err := os.MkdirTemp(dir, "holon-verify-")
	if err != nil {
		return nil, Summary{}, err
	}
	defer os.RemoveAll(tmp)
	path := filepath.Join(tmp, "holon.db")
	sum, err := Restore(r, path, nil)
	if err != nil {
		return nil, sum, err
	}
	s, err := kv.OpenReadOnly(path)
	if err != nil {
		return nil, sum, err
	}
	defer s.Close()
	rep, err := Verify(s)
	return rep, sum, err
}

func sameLines(a, b []journal.Line) bool {
	if len(a) != len(b) {
		return false
	}
	m := map[string]journal.Amount{}
	for _, l := range a {
		m[l.Account] += l.Amount
	}
	for _, l := range b {
		m[l.Account] -= l.Amount
	}
	for _, d := range m {
		if d != 0 {
			return false
		}
	}
	return true
}

func linesString(ls []journal.Line) string {
	parts := make([]string, len(ls))
	for i, l := range ls {
		parts[i] = fmt.Sprintf("%s %s", l.Account, l.Amount)
	}
	return strings.Join(parts, ", ")
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
