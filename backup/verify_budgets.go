package backup

import (
	"fmt"

	"holon.dev/holon"
)

// budgets checks that each mandate's spent is what the receipts pass
// counted for it (v.spent: each receipt's cost.total, which counts its
// same-payer children, whom its budget paid for; a running call's settled
// children so far), and that nothing was spent under a mandate without a
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
