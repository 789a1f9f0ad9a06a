package holon

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"

	"holon.dev/holon/journal"
)

// The stores' guards of money: rules every store enforces on every
// update whatever the gateway asked, so that a decision made on a stale
// read (another gateway moved the row meanwhile) cannot overdraw an
// account or overspend a budget.

// IsExternal reports whether an account is outside the platform
// (external:…): money enters from it, and its balance is below zero by
// design.
func IsExternal(account string) bool { return strings.HasPrefix(account, "external:") }

// Overdrafts is the stores' rule that no update overdraws an account: an
// update that leaves an account other than an external one with less
// available than zero, and less than it had before the update, fails
// with ErrOverdrawn. Within the update an account may pass through such a
// state (a settlement debits the payer before it releases the hold that
// covered the debit): the rule judges where the update ends. The gateway
// never asks for an overdraft (it checks what is available first); the
// stores refuse one all the same, so that a check made on a stale read
// (another gateway moved the account meanwhile) cannot overdraw it.
//
// A store calls Before with an account's standing before each change it
// makes to it, and Check once the update ran.
type Overdrafts struct {
	before map[string]journal.Amount
}

// Before records what account had available before the update changed it
// (its first change only).
func (o *Overdrafts) Before(name string, a Account) {
	if o.before == nil {
		o.before = map[string]journal.Amount{}
	}
	if _, ok := o.before[name]; !ok && !IsExternal(name) {
		o.before[name] = a.Available()
	}
}

// Check reads the accounts the update changed (read) and refuses the
// update when one of them is overdrawn by it; it then forgets them.
func (o *Overdrafts) Check(read func(name string) (Account, error)) error {
	defer o.Reset()
	for _, name := range slices.Sorted(maps.Keys(o.before)) {
		before := o.before[name]
		a, err := read(name)
		if err != nil {
			return err
		}
		if now := a.Available(); now < 0 && now < before {
			return fmt.Errorf("account %s: %w: %s available after this update (balance %s, held %s), %s before", name, ErrOverdrawn, now, a.Balance, a.Held, before)
		}
	}
	return nil
}

// Reset forgets the update's accounts.
func (o *Overdrafts) Reset() { clear(o.before) }

// BudgetLimits is the stores' rule that no update raises a budget above
// the limit the gateway judged it against: an update that declares a
// limit for a mandate's budget (the lifetime's, window "", or one
// window's: LimitBudget) and leaves its spent plus reserved above it, and
// above what it was before the update, fails with ErrOverBudget. The
// gateway declares the limit where it reads the budget to decide a call
// (the mandate's total, its window's), and reserves only within it, so
// none of its calls is refused; the store refuses one all the same, so
// that a decision made on a stale read (another gateway reserved
// meanwhile) cannot overspend the budget. Moves the update makes without
// a declared limit are not judged.
type BudgetLimits struct {
	limits map[BudgetKey]journal.Amount
	before map[BudgetKey]journal.Amount
}

// BudgetKey names a budget: a mandate's lifetime one (Window "") or one
// of its windows.
type BudgetKey struct{ Mandate, Window string }

// Limit declares the limit of a budget for the rest of the update (the
// lowest, when declared twice).
func (b *BudgetLimits) Limit(k BudgetKey, limit journal.Amount) {
	if b.limits == nil {
		b.limits = map[BudgetKey]journal.Amount{}
	}
	if l, ok := b.limits[k]; !ok || limit < l {
		b.limits[k] = limit
	}
}

// Declared is the limit declared for a budget, if any.
func (b *BudgetLimits) Declared(k BudgetKey) (journal.Amount, bool) {
	l, ok := b.limits[k]
	return l, ok
}

// Before records what a budget used (spent plus reserved) before the
// update's first move of it.
func (b *BudgetLimits) Before(k BudgetKey, bud Budget) {
	if b.before == nil {
		b.before = map[BudgetKey]journal.Amount{}
	}
	if _, ok := b.before[k]; !ok {
		b.before[k] = used(bud)
	}
}

// Check reads the budgets the update moved under a declared limit (read)
// and refuses the update when one of them is over it by the update; it
// then forgets the update's limits and moves.
func (b *BudgetLimits) Check(read func(BudgetKey) (Budget, error)) error {
	defer b.Reset()
	keys := make([]BudgetKey, 0, len(b.before))
	for k := range b.before {
		if _, ok := b.limits[k]; ok {
			keys = append(keys, k)
		}
	}
	slices.SortFunc(keys, func(x, y BudgetKey) int {
		return cmp.Or(strings.Compare(x.Mandate, y.Mandate), strings.Compare(x.Window, y.Window))
	})
	for _, k := range keys {
		bud, err := read(k)
		if err != nil {
			return err
		}
		if now, limit := used(bud), b.limits[k]; now > limit && now > b.before[k] {
			in := ""
			if k.Window != "" {
				in = " in " + k.Window
			}
			return fmt.Errorf("budget of %s%s: %w: %s spent and reserved after this update, its limit %s", k.Mandate, in, ErrOverBudget, now, limit)
		}
	}
	return nil
}

// Reset forgets the update's limits and moves.
func (b *BudgetLimits) Reset() {
	clear(b.limits)
	clear(b.before)
}

// used is a budget's spent plus reserved (the largest amount when the
// sum would overflow).
func used(b Budget) journal.Amount {
	u, err := journal.Sum(b.Spent, b.Reserved)
	if err != nil {
		return journal.MaxAmount
	}
	return u
}
