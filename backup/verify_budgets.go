package backup

import (
	"fmt"

	"holon.dev/holon"
)

// budgets checks that each mandate's spent is the sum of the totals of its
// receipts (a parent's total counts its same-payer children, which its
// budget paid for), and that no receipt spent under a mandate without a
// budget.
func (v *verifier) budgets() error {
	c := v.c[CheckBudgets]
	n := 0
	err := v.tx.ForEachBudget(func(mandate string, b holon.Budget) error {
		if err := v.tick(); err != nil {
			return err
		}
		n++
		if b.Spent != v.spent[mandate] {
			c.fail("mandate %s has spent %s, its receipts cost %s", mandate, b.Spent, v.spent[mandate])
		}
		delete(v.spent, mandate)
		return nil
	})
	if err != nil {
		return err
	}
	for _, m := range sortedKeys(v.spent) {
		if v.spent[m] != 0 {
			c.fail("receipts under %s cost %s, but it has no budget", m, v.spent[m])
		}
	}
	c.Covered = fmt.Sprintf("%d budgets: each has spent what its receipts cost", n)
	return nil
}
