package gateway

import (
	"time"

	"holon.dev/holon"
	"holon.dev/holon/gateway/contract"
)

// budgetState reads a mandate's spending as admission sees it at now: its
// lifetime budget and, when its budget renews by window, the window that
// holds now. A window nothing ran in reads as zero: a window renews by the
// clock alone, with no call and no write at its boundary.
func budgetState(tx holon.Tx, m *contract.Mandate, now time.Time) (contract.BudgetState, error) {
	b, err := tx.Budget(m.ID)
	if err != nil {
		return contract.BudgetState{}, err
	}
	// The limits the call is judged against, declared to the store, which
	// refuses an update that would raise the budget above them (the
	// decision made here may rest on a read another gateway has made
	// stale: holon.BudgetLimits).
	tx.LimitBudget(m.ID, "", m.Total())
	bs := contract.BudgetState{Spent: b.Spent, Reserved: b.Reserved}
	if w, ok := m.WindowAt(now); ok {
		wb, err := tx.WindowBudget(m.ID, w.Key)
		if err != nil {
			return contract.BudgetState{}, err
		}
		tx.LimitBudget(m.ID, w.Key, m.PerWindow())
		bs.Window, bs.WindowSpent, bs.WindowReserved = w, wb.Spent, wb.Reserved
	}
	return bs, nil
}
