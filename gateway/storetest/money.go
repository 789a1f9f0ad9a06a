package storetest

import (
	"errors"
	"fmt"
	"maps"
	"sort"
	"strings"
	"sync"
	"testing"

	"holon.dev/holon"
	"holon.dev/holon/journal"
)

// Option relaxes CheckMoney for a test with a reason to.
type Option func(*moneyCheck)

// AllowHolds lets calls still be in flight: holds, reservations, amounts
// held and running receipts may remain (a test that stops with calls
// cut by a crash). Everything else is checked.
var AllowHolds Option = func(c *moneyCheck) { c.allowHolds = true }

// SkipReceipts leaves the receipts unread, for a test that cut them short
// on purpose (a store it corrupted): the journal, holds, reservations and
// accounts are still checked.
var SkipReceipts Option = func(c *moneyCheck) { c.skipReceipts = true }

// Foreign names journal keys of the settle:<receipt> form that a test
// journaled itself (fault injection): they are not the receipts'
// settlements.
func Foreign(keys ...string) Option {
	return func(c *moneyCheck) {
		for _, k := range keys {
			c.foreign[k] = true
		}
	}
}

// moneyCheck is one run of CheckMoney.
type moneyCheck struct {
	tb           testing.TB
	tx           holon.Tx
	allowHolds   bool
	skipReceipts bool
	foreign      map[string]bool
}

// CheckMoney checks a store's money, as every test of the engine and of the
// hosted product does at its end:
//
//   - the journal's rules (holon.VerifyJournal, or the transaction's own
//     VerifyJournal when it has one, as *kv.Tx does with its head check);
//   - no hold left, nothing reserved in any budget, nothing held on any
//     account, no account but an external:* one below zero;
//   - every receipt final and agreeing with the journal: a billed one with
//     a cost has exactly its settle:<receipt> entry, whose lines are the
//     payer's debit of cost.own and the splits; any other has none; every
//     settle: entry pays a billed receipt;
//   - costs add up: total = own + downstream, splits sum to own, a parent's
//     downstream is the sum of its same-payer children's totals, and the
//     tree links both ways;
//   - each mandate's spent is the sum of the totals of its receipts, less
//     their refunds (and a parent's, less its same-payer children's);
//     every refund: of a billed receipt, within its cost.own, journaled
//     under refund:<receipt>:<n> as the parts it lists.
//
// It reports every failure with tb.Errorf.
func CheckMoney(tb testing.TB, s holon.Store, opts ...Option) {
	tb.Helper()
	c := &moneyCheck{tb: tb, foreign: map[string]bool{}}
	for _, o := range opts {
		o(c)
	}
	err := s.View(func(tx holon.Tx) error {
		c.tx = tx
		if err := verifyJournal(tx); err != nil {
			tb.Errorf("journal: %v", err)
		}
		if err := c.inFlight(); err != nil {
			return err
		}
		if c.skipReceipts {
			return c.reservations()
		}
		return c.receipts()
	})
	if err != nil {
		tb.Errorf("check money: %v", err)
	}
}

// inFlight checks that no call is left in flight: no hold, nothing
// reserved, nothing held, and no account but an external one below zero.
func (c *moneyCheck) inFlight() error {
	c.tb.Helper()
	holds, err := c.tx.Holds()
	if err != nil {
		return err
	}
	if !c.allowHolds {
		for _, h := range holds {
			c.tb.Errorf("hold left for %s: %+v", h.Receipt, h)
		}
	}
	return c.tx.ForEachAccount(func(name string, a holon.Account) error {
		if a.Held != 0 && !c.allowHolds {
			c.tb.Errorf("account %s: %s still held", name, a.Held)
		}
		if a.Balance < 0 && !strings.HasPrefix(name, "external:") {
			c.tb.Errorf("account %s: balance %s below zero", name, a.Balance)
		}
		return nil
	})
}

// reservations checks that no stored mandate has anything reserved.
func (c *moneyCheck) reservations() error {
	c.tb.Helper()
	return c.tx.ForEachMandate(func(id string, _ holon.Doc) error {
		b, err := c.tx.Budget(id)
		if err == nil && b.Reserved != 0 && !c.allowHolds {
			c.tb.Errorf("mandate %s: %s still reserved", id, b.Reserved)
		}
		return err
	})
}

// receipts checks every receipt against the journal, the tree and the
// budgets.
func (c *moneyCheck) receipts() error {
	c.tb.Helper()
	tb, tx := c.tb, c.tx
	byID := map[string]*holon.Receipt{}
	var all []*holon.Receipt
	for before := ""; ; {
		page, err := tx.Receipts("", before, 500)
		if err != nil {
			return err
		}
		for _, r := range page.Receipts {
			if byID[r.ID] != nil {
				tb.Errorf("%s: listed twice", r.ID)
			}
			byID[r.ID] = r
			all = append(all, r)
		}
		if page.Next == "" {
			break
		}
		before = page.Next
	}
	// Every mandate stored, and every one a receipt names, has a budget.
	totals := map[string]journal.Amount{}
	err := tx.ForEachMandate(func(id string, _ holon.Doc) error { totals[id] += 0; return nil })
	if err != nil {
		return err
	}
	settlements := 0
	refundEntries := map[string]bool{}
	for _, r := range all {
		totals[r.Mandate] += r.Cost.Total
		if err := c.refunds(r, byID, totals, refundEntries); err != nil {
			return err
		}
		billed, err := c.receipt(r, byID)
		if err != nil {
			return err
		}
		if billed {
			settlements++
		}
	}
	mandates := make([]string, 0, len(totals))
	for id := range totals {
		mandates = append(mandates, id)
	}
	sort.Strings(mandates)
	for _, id := range mandates {
		b, err := tx.Budget(id)
		if err != nil {
			return err
		}
		if b.Reserved != 0 && !c.allowHolds {
			tb.Errorf("mandate %s: %s still reserved", id, b.Reserved)
		}
		if b.Spent != totals[id] {
			tb.Errorf("mandate %s: spent %s, its receipts' totals sum to %s", id, b.Spent, totals[id])
		}
	}
	journaled := 0
	err = tx.ForEachEntry(0, func(row holon.JournalRow) (bool, error) {
		if strings.HasPrefix(row.Key, "refund:") && !refundEntries[row.Key] {
			tb.Errorf("journal row %d (%s) is no refund of a receipt", row.Seq, row.Key)
		}
		id, ok := strings.CutPrefix(row.Key, "settle:")
		if !ok || c.foreign[row.Key] {
			return true, nil
		}
		journaled++
		if r := byID[id]; r == nil || !r.Billed {
			tb.Errorf("journal row %d (%s) pays no billed receipt", row.Seq, row.Key)
		}
		return true, nil
	})
	if journaled != settlements {
		tb.Errorf("journal has %d settle entries, receipts bill %d", journaled, settlements)
	}
	return err
}

// refunds checks a receipt's refunds: only a billed receipt has them, at
// most its cost.own in all, each journaled under its key with the payer's
// credit of its amount and the parts it lists as the debits; and it takes
// them off the totals the budgets must show: the receipt's mandate's, and
// each same-payer parent's, whose cost.downstream counted it.
func (c *moneyCheck) refunds(r *holon.Receipt, byID map[string]*holon.Receipt, totals map[string]journal.Amount, entries map[string]bool) error {
	c.tb.Helper()
	rs, err := holon.Refunds(c.tx, r.ID)
	if err != nil || len(rs) == 0 {
		return err
	}
	refunded := holon.Refunded(rs)
	if !r.Billed || refunded > r.Cost.Own {
		c.tb.Errorf("%s: billed %v, cost.own %s, refunded %s", r.ID, r.Billed, r.Cost.Own, refunded)
	}
	for i, rf := range rs {
		key := holon.RefundEntryKey(r.ID, i+1)
		entries[key] = true
		if rf.Entry != key || rf.Receipt != r.ID || rf.ID != holon.RefundKey(r.ID, i+1) {
			c.tb.Errorf("%s: refund %d is %+v", r.ID, i+1, rf)
		}
		row, err := c.tx.EntryByKey(key)
		if err != nil {
			c.tb.Errorf("%s: refund %s has no entry %s: %v", r.ID, rf.ID, key, err)
			continue
		}
		want := map[string]journal.Amount{r.Payer: rf.Amount}
		var parts journal.Amount
		for _, p := range rf.Parts {
			want[p.To] -= p.Amount
			parts += p.Amount
		}
		for k, v := range want {
			if v == 0 {
				delete(want, k)
			}
		}
		if got := lineMap(row.Lines); parts != rf.Amount || !maps.Equal(got, want) {
			c.tb.Errorf("%s: refund %s of %s moves %v, its parts (%s) want %v", r.ID, rf.ID, rf.Amount, got, parts, want)
		}
	}
	for cur := r; cur != nil; {
		totals[cur.Mandate] -= refunded
		if cur.Parent == nil {
			break
		}
		p := byID[*cur.Parent]
		if p == nil || p.Payer != cur.Payer {
			break
		}
		cur = p
	}
	return nil
}

// receipt checks one receipt; billed reports whether it has a settlement.
func (c *moneyCheck) receipt(r *holon.Receipt, byID map[string]*holon.Receipt) (billed bool, err error) {
	c.tb.Helper()
	tb := c.tb
	switch r.Status {
	case holon.StatusSucceeded, holon.StatusFailed, holon.StatusDenied,
		holon.StatusPendingApproval, holon.StatusRejected:
	case holon.StatusRunning:
		if !c.allowHolds {
			tb.Errorf("%s: status %q at the end of the test", r.ID, r.Status)
		}
	default:
		tb.Errorf("%s: status %q at the end of the test", r.ID, r.Status)
	}
	if r.Cost.Total != r.Cost.Own+r.Cost.Downstream {
		tb.Errorf("%s: cost %+v does not add up", r.ID, r.Cost)
	}
	if !r.Billed && r.Cost.Own != 0 {
		tb.Errorf("%s: not billed but cost.own is %s", r.ID, r.Cost.Own)
	}
	var splits journal.Amount
	for _, sh := range r.Splits {
		splits += sh.Amount
	}
	if splits != r.Cost.Own {
		tb.Errorf("%s: splits sum to %s, cost.own is %s", r.ID, splits, r.Cost.Own)
	}
	key := "settle:" + r.ID
	row, err := c.tx.EntryByKey(key)
	hasEntry := err == nil
	if err != nil && !errors.Is(err, holon.ErrNotFound) {
		return false, err
	}
	if hasEntry != c.tx.HasEntry(key) {
		tb.Errorf("%s: EntryByKey found its settlement %v, HasEntry %v", r.ID, hasEntry, !hasEntry)
	}
	switch {
	case c.foreign[key]:
	case r.Billed && r.Cost.Own > 0:
		billed = true
		if !hasEntry {
			tb.Errorf("%s: billed %s but no %s entry", r.ID, r.Cost.Own, key)
			break
		}
		if got, want := lineMap(row.Lines), settlementLines(r); !maps.Equal(got, want) {
			tb.Errorf("%s: settle entry lines %v, want %v", r.ID, got, want)
		}
	case hasEntry:
		tb.Errorf("%s: %s, billed %v, cost.own %s, but journaled as %v", r.ID, r.Status, r.Billed, r.Cost.Own, row.Lines)
	}
	var downstream journal.Amount
	for _, id := range r.Children {
		child, ok := byID[id]
		if !ok {
			tb.Errorf("%s: child %s has no receipt", r.ID, id)
			continue
		}
		if child.Parent == nil || *child.Parent != r.ID {
			tb.Errorf("%s: child %s names parent %v", r.ID, id, child.Parent)
		}
		if child.Payer == r.Payer {
			downstream += child.Cost.Total
		}
	}
	if downstream != r.Cost.Downstream {
		tb.Errorf("%s: cost.downstream %s, its same-payer children's totals sum to %s", r.ID, r.Cost.Downstream, downstream)
	}
	if r.Parent != nil {
		if p, ok := byID[*r.Parent]; !ok || !contains(p.Children, r.ID) {
			tb.Errorf("%s: parent %s does not list it as a child", r.ID, *r.Parent)
		}
	}
	return billed, nil
}

// settlementLines is what a receipt's settle entry must move: the payer pays
// cost.own, each split's account receives its amount.
func settlementLines(r *holon.Receipt) map[string]journal.Amount {
	want := map[string]journal.Amount{r.Payer: -r.Cost.Own}
	for _, sh := range r.Splits {
		want[sh.To] += sh.Amount
	}
	for k, v := range want {
		if v == 0 {
			delete(want, k)
		}
	}
	return want
}

func lineMap(lines []journal.Line) map[string]journal.Amount {
	m := map[string]journal.Amount{}
	for _, l := range lines {
		m[l.Account] += l.Amount
	}
	return m
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// Recorder is a testing.TB that records what is reported to it with
// Errorf instead of failing, for a test that a check reports what it must.
// Its other methods are the embedded TB's.
type Recorder struct {
	testing.TB
	mu   sync.Mutex
	Errs []string
}

// Errorf records a failure.
func (r *Recorder) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.Errs = append(r.Errs, fmt.Sprintf(format, args...))
}

// Helper does nothing: a recorded failure has no line to point at.
func (r *Recorder) Helper() {}

// Saw reports whether a recorded failure contains s.
func (r *Recorder) Saw(s string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, e := range r.Errs {
		if strings.Contains(e, s) {
			return true
		}
	}
	return false
}

// AllReceipts reads every receipt, newest first, page by page.
func AllReceipts(tx holon.CallsTx) ([]*holon.Receipt, error) {
	var all []*holon.Receipt
	for before := ""; ; {
		page, err := tx.Receipts("", before, 500)
		if err != nil {
			return nil, err
		}
		all = append(all, page.Receipts...)
		if page.Next == "" {
			return all, nil
		}
		before = page.Next
	}
}
