package drill

import (
	"context"
	"os/exec"

	"holon.dev/holon"
	"holon.dev/holon/journal"
	"holon.dev/holon/kv/pg"
)

// readPG is readStore for the PostgreSQL store at url, with the budgets
// of the mandates of totals, and the journal's hash chain verified.
func readPG(ctx context.Context, url string, totals map[string]journal.Amount) (*storeView, error) {
	s, err := pg.Open(ctx, url, holon.StoreOptions{})
	if err != nil {
		return nil, err
	}
	defer s.Close()
	v := newStoreView()
	err = s.View(func(tx holon.Tx) error {
		for before := ""; ; {
			page, err := tx.Receipts("", before, 1000)
			if err != nil {
				return err
			}
			for _, r := range page.Receipts {
				v.receipts[r.ID] = r
			}
			if before = page.Next; before == "" {
				break
			}
		}
		if err := v.readJournal(tx); err != nil {
			return err
		}
		var err error
		for m := range totals {
			if v.budgets[m], err = tx.Budget(m); err != nil {
				return err
			}
		}
		v.chainErr = tx.(*pg.Tx).VerifyJournal()
		return tx.ForEachAccount(func(name string, a holon.Account) error { v.accounts[name] = a; return nil })
	})
	return v, err
}

// verifyPG runs the real `holon verify --store` on the database.
func verifyPG(ctx context.Context, holon, url string) (string, error) {
	out, err := exec.CommandContext(ctx, holon, "verify", "--store", url).CombinedOutput()
	return string(out), err
}
