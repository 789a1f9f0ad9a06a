package holon

import (
	"encoding/json"
	"errors"
	"fmt"
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
	// ErrChangedMeanwhile: a row an update changes as it read it (a call
	// in flight it releases) was changed by another writer since (another
	// gateway closed the call): the update is undone whole, and the store
	// reads the row again next time.
	ErrChangedMeanwhile = errors.New("a row the update changes was changed by another writer since it read it")
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
