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
