package holon

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"holon.dev/holon/journal"
)

// The journal's rules, as errors a caller can test with errors.Is.
var (
	// ErrDuplicateKey: an entry with this idempotency key is already journaled.
	ErrDuplicateKey = errors.New("journal: idempotency key already used")
	// ErrJournalRowExists: a journal row would be overwritten.
	ErrJournalRowExists = errors.New("journal: rows are never overwritten")
	// ErrOverdrawn: an update would leave an account's available balance
	// below zero (Overdrafts).
	ErrOverdrawn = errors.New("journal: an account would be overdrawn")
	// ErrOverBudget: an update would raise a mandate's budget above the
	// limit declared for it (BudgetLimits).
	ErrOverBudget = errors.New("a budget would go over its limit")
)

// JournalRow is one committed journal entry. Rows are hash-chained: Hash
// covers the entry and Prev, the hash of the row before it on its writer's
// chain ("" for a chain's first row), so a row altered or removed after
// the fact is detected by a verifier (Chains).
type JournalRow struct {
	Seq   uint64         `json:"seq"`
	Key   string         `json:"key"`
	Time  time.Time      `json:"time"`
	Lines []journal.Line `json:"lines"`
	Prev  string         `json:"prev"`
	Hash  string         `json:"hash"`
}

// Account is an account's standing: its balance (the sum of its journal
// lines) and what is held on it for calls in flight.
type Account struct {
	Balance journal.Amount `json:"balance"`
	Held    journal.Amount `json:"held"`
}

// UnmarshalJSON reads an account. Its balance, unlike an amount on the wire,
// may be negative (an external:* account always is), which
// journal.Amount's UnmarshalText refuses.
func (a *Account) UnmarshalJSON(b []byte) error {
	var w struct {
		Balance string         `json:"balance"`
		Held    journal.Amount `json:"held"`
	}
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	digits, neg := strings.CutPrefix(w.Balance, "-")
	bal, err := journal.ParseAmount(digits)
	if err != nil {
		return fmt.Errorf("balance %w", err)
	}
	if neg {
		bal = -bal
	}
	*a = Account{Balance: bal, Held: w.Held}
	return nil
}

// Available is the balance less what is held.
func (a Account) Available() journal.Amount { return a.Balance - a.Held }

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
type Overdrafts map[string]journal.Amount

// Before records what account had available before the update changed it
// (its first change only).
func (o Overdrafts) Before(name string, a Account) {
	if _, ok := o[name]; !ok && !IsExternal(name) {
		o[name] = a.Available()
	}
}

// Check reads the accounts the update changed (read) and refuses the
// update when one of them is overdrawn by it; it then forgets them.
func (o Overdrafts) Check(read func(name string) (Account, error)) error {
	defer clear(o)
	names := make([]string, 0, len(o))
	for name := range o {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		before := o[name]
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

// JournalHeadKey names where a store records the head of its journal's
// chain n: "journal_head" for chain 0 (the embedded store's, and the first
// gateway's on a shared database), JournalHeadsFrom+"n" for the others.
func JournalHeadKey(n int) string {
	if n == 0 {
		return "journal_head"
	}
	return JournalHeadsFrom + strconv.Itoa(n)
}

// JournalHeadsFrom begins the keys of the chains after the first.
const JournalHeadsFrom = "journal_head:"

// IsJournalHeadKey reports whether a store's meta key records a chain's
// head (JournalHeadKey).
func IsJournalHeadKey(k string) bool {
	if k == "journal_head" {
		return true
	}
	n, ok := strings.CutPrefix(k, JournalHeadsFrom)
	if !ok {
		return false
	}
	i, err := strconv.Atoi(n)
	return err == nil && i > 0 && strconv.Itoa(i) == n
}

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

// Moved reports whether the update moved a budget.
func (b *BudgetLimits) Moved() bool { return len(b.before) > 0 }

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
		return strings.Compare(x.Mandate+"\x00"+x.Window, y.Mandate+"\x00"+y.Window)
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
