package drill

import (
	"context"
	"fmt"
	"os/exec"
	"strings"

	"holon.dev/holon"
	"holon.dev/holon/journal"
	"holon.dev/holon/kv"
)

// storeView is what a stopped gateway's store holds, read with the store
// opened read-only (the gateway must be down: it holds the file's lock).
type storeView struct {
	receipts map[string]*holon.Receipt
	// settles counts the journal entries keyed settle:<receipt>.
	settles  map[string]int
	holds    []*holon.Hold
	budgets  map[string]holon.Budget
	accounts map[string]holon.Account
	entries  int
	// refunds are the refunds by receipt, oldest first (read from a kv
	// store only); refundEntries the lines of the refund: entries, by key;
	// credits what every other entry (signups, top-ups) moved, by
	// account.
	refunds       map[string][]*holon.Refund
	refundEntries map[string][]journal.Line
	credits       map[string]journal.Amount
	// chainErr is what verifying the journal's hash chain found (read
	// from PostgreSQL only; holon verify checks it on either store).
	chainErr error
}

func newStoreView() *storeView {
	return &storeView{receipts: map[string]*holon.Receipt{}, settles: map[string]int{}, budgets: map[string]holon.Budget{}, accounts: map[string]holon.Account{},
		refunds: map[string][]*holon.Refund{}, refundEntries: map[string][]journal.Line{}, credits: map[string]journal.Amount{}}
}

// readJournal counts the journal's entries, and its settle: entries by
// receipt, keeps the refund: entries' lines and adds up what the other
// entries moved, and reads the holds.
func (v *storeView) readJournal(tx holon.Tx) error {
	err := tx.ForEachEntry(0, func(row holon.JournalRow) (bool, error) {
		v.entries++
		if id, ok := strings.CutPrefix(row.Key, "settle:"); ok {
			v.settles[id]++
		} else if strings.HasPrefix(row.Key, "refund:") {
			v.refundEntries[row.Key] = row.Lines
		} else {
			for _, l := range row.Lines {
				v.credits[l.Account] += l.Amount
			}
		}
		return true, nil
	})
	if err != nil {
		return err
	}
	v.holds, err = tx.Holds()
	return err
}

func readStore(path string) (*storeView, error) {
	s, err := kv.OpenReadOnly(path)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	v := newStoreView()
	err = s.View(func(tx *kv.Tx) error {
		if err := tx.ForEachReceipt(func(r *holon.Receipt) error { v.receipts[r.ID] = r; return nil }); err != nil {
			return err
		}
		if err := v.readJournal(tx); err != nil {
			return err
		}
		if err := v.readRefunds(tx); err != nil {
			return err
		}
		if err := tx.ForEachBudget(func(m string, b holon.Budget) error { v.budgets[m] = b; return nil }); err != nil {
			return err
		}
		return tx.ForEachAccount(func(name string, a holon.Account) error { v.accounts[name] = a; return nil })
	})
	return v, err
}

// verifyStore runs the real `holon verify --db` on the store.
func verifyStore(ctx context.Context, holon, db string) (string, error) {
	out, err := exec.CommandContext(ctx, holon, "verify", "--db", db).CombinedOutput()
	return string(out), err
}

// checkStore checks the invariants that hold of any store between runs:
// `holon verify` passes, every billed receipt has exactly one settle: entry
// and every settle: entry its billed receipt, nothing is running, no hold
// remains, every mandate of totals has spent no more than its total, and no
// account but the platform's external ones is below zero.
func (d *drill) checkStore(ctx context.Context, db string, totals map[string]journal.Amount) (*storeView, error) {
	out, err := verifyStore(ctx, d.o.Holon, db)
	d.check("holon verify passes", err == nil, "%v:\n%s", err, tail(out, 1500))
	v, err := readStore(db)
	if err != nil {
		return nil, err
	}
	d.checkView(v, totals)
	return v, nil
}

// checkView is checkStore's invariants, on what a store holds.
func (d *drill) checkView(v *storeView, totals map[string]journal.Amount) {
	for id, r := range v.receipts {
		if r.Billed {
			d.check("a billed receipt has exactly one settle: entry", v.settles[id] == 1, "%s has %d", id, v.settles[id])
		}
		d.check("no receipt is still running between runs", r.Status != "running", "%s is %s", id, r.Status)
		if r.Error != nil && *r.Error == "gateway_restarted" {
			d.check("a call cut by a restart is unbilled", !r.Billed, "%s billed %s", id, r.Cost.Total)
		}
	}
	for id, n := range v.settles {
		r := v.receipts[id]
		d.check("a settle: entry pays a billed receipt, once", n == 1 && r != nil && r.Billed, "settle:%s ×%d, receipt %v", id, n, r != nil)
	}
	d.check("no hold remains once nothing is in flight", len(v.holds) == 0, "%d holds, first %s", len(v.holds), firstHold(v.holds))
	for m, total := range totals {
		b := v.budgets[m]
		d.check("no mandate spent more than its budget", b.Spent+b.Reserved <= total, "%s spent %s + reserved %s > %s", m, b.Spent, b.Reserved, total)
		d.check("no reservation remains once nothing is in flight", b.Reserved == 0, "%s reserved %s", m, b.Reserved)
	}
	for name, a := range v.accounts {
		if strings.HasPrefix(name, "external:") {
			continue
		}
		d.check("no balance below zero", a.Balance >= 0 && a.Held == 0, "%s balance %s held %s", name, a.Balance, a.Held)
	}
}

func firstHold(hs []*holon.Hold) string {
	if len(hs) == 0 {
		return ""
	}
	return fmt.Sprintf("%+v", *hs[0])
}
