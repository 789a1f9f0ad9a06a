package holon

import (
	"fmt"

	"holon.dev/holon/journal"
)

// VerifyJournal checks the journal's rules on everything a store holds:
// rows numbered 1, 2, … without a gap, each entry summing to zero with a
// key used once, the hash chain unbroken, every account's balance the sum
// of its lines, and all balances summing to zero. A store that keeps the
// chain's head apart passes checkHead, called with the last row's hash
// once the rows are read (nil otherwise).
func VerifyJournal(tx JournalTx, checkHead func(last string) error) error {
	var head string
	sums := map[string]journal.Amount{}
	keys := map[string]bool{}
	var n uint64
	err := tx.ForEachEntry(0, func(row JournalRow) (bool, error) {
		n++
		if row.Seq != n {
			return false, fmt.Errorf("journal row %d missing (found %d)", n, row.Seq)
		}
		if err := (journal.Entry{Key: row.Key, Lines: row.Lines}).Validate(); err != nil {
			return false, fmt.Errorf("journal row %d: %w", row.Seq, err)
		}
		if keys[row.Key] {
			return false, fmt.Errorf("journal row %d: %w", row.Seq, ErrDuplicateKey)
		}
		keys[row.Key] = true
		if row.Prev != head || journal.RowHash(head, row.Seq, row.Key, row.Time, row.Lines) != row.Hash {
			return false, fmt.Errorf("journal row %d: hash chain broken", row.Seq)
		}
		head = row.Hash
		for _, l := range row.Lines {
			sums[l.Account] += l.Amount
		}
		return true, nil
	})
	if err != nil {
		return err
	}
	if checkHead != nil {
		if err := checkHead(head); err != nil {
			return err
		}
	}
	var total journal.Amount
	err = tx.ForEachAccount(func(name string, a Account) error {
		if a.Balance != sums[name] {
			return fmt.Errorf("account %s: balance %s, journal lines sum to %s", name, a.Balance, sums[name])
		}
		total += a.Balance
		delete(sums, name)
		return nil
	})
	if err != nil {
		return err
	}
	for name, s := range sums {
		if s != 0 {
			return fmt.Errorf("account %s has journal lines summing to %s but no balance", name, s)
		}
	}
	if total != 0 {
		return fmt.Errorf("balances sum to %s, want 0", total)
	}
	return nil
}
