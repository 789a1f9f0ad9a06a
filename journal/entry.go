package journal

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// Errors that Entry.Validate wraps, so callers can test them with errors.Is.
var (
	// ErrUnbalanced is an entry whose lines do not sum to exactly zero.
	ErrUnbalanced = errors.New("unbalanced entry")
	// ErrNoKey is an entry without an idempotency key.
	ErrNoKey = errors.New("entry without key")
	// ErrTooFewLines is an entry with fewer than two lines.
	ErrTooFewLines = errors.New("too few lines")
	// ErrDuplicateAccount is an entry with two lines for the same account.
	ErrDuplicateAccount = errors.New("duplicate account")
	// ErrBadAccount is a line, share or upstream without an account name.
	ErrBadAccount = errors.New("bad account")
)

// Line is one account's movement in a journal entry: negative when money
// leaves the account, positive when it arrives.
type Line struct {
	Account string `json:"account"`
	Amount  Amount `json:"amount"`
}

// UnmarshalJSON reads a line, whose amount, unlike an amount on the wire,
// may carry a leading minus ("-0.035").
func (l *Line) UnmarshalJSON(b []byte) error {
	var w struct {
		Account string `json:"account"`
		Amount  string `json:"amount"`
	}
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	a, err := parseSignedAmount(w.Amount)
	if err != nil {
		return fmt.Errorf("line %s: amount %w", w.Account, err)
	}
	*l = Line{Account: w.Account, Amount: a}
	return nil
}

// parseSignedAmount is ParseAmount with an optional leading minus.
func parseSignedAmount(s string) (Amount, error) {
	digits, neg := strings.CutPrefix(s, "-")
	a, err := ParseAmount(digits)
	if err != nil {
		return 0, err
	}
	if neg {
		return -a, nil
	}
	return a, nil
}

// Entry is one movement of money: two or more lines, one per account, that
// sum to exactly zero, recorded once under its idempotency key (such as
// "signup:bob", "settle:r4" or "admin-credit:<uuid>").
type Entry struct {
	Key   string `json:"key"`
	Lines []Line `json:"lines"`
}

// Validate checks that the entry has a key, at least two lines, one line per
// named account, and lines that sum to exactly zero.
func (e Entry) Validate() error {
	if e.Key == "" {
		return fmt.Errorf("entry: empty key, want an idempotency key such as settle:<receipt>: %w", ErrNoKey)
	}
	if len(e.Lines) < 2 {
		return fmt.Errorf("entry %s: %d line(s), want at least 2: %w", e.Key, len(e.Lines), ErrTooFewLines)
	}
	seen := make(map[string]int, len(e.Lines))
	for i, l := range e.Lines {
		if l.Account == "" {
			return fmt.Errorf("entry %s: line %d has no account name: %w", e.Key, i+1, ErrBadAccount)
		}
		if j, dup := seen[l.Account]; dup {
			return fmt.Errorf("entry %s: account %s on lines %d and %d, want one line per account: %w",
				e.Key, l.Account, j+1, i+1, ErrDuplicateAccount)
		}
		seen[l.Account] = i
	}
	// Credits and debits are summed apart, so the verdict does not depend on
	// the order of the lines; their sum cannot overflow, their signs differ.
	var credits, debits Amount
	for _, l := range e.Lines {
		var err error
		if l.Amount >= 0 {
			credits, err = credits.Add(l.Amount)
		} else {
			debits, err = debits.Add(l.Amount)
		}
		if err != nil {
			return fmt.Errorf("entry %s: lines move more than %s, want a smaller entry: %w: %w",
				e.Key, MaxAmount, ErrUnbalanced, ErrOverflow)
		}
	}
	if sum := credits + debits; sum != 0 {
		return fmt.Errorf("entry %s: lines sum to %s, want 0: %w", e.Key, sum, ErrUnbalanced)
	}
	return nil
}

// Settlement is the entry that pays the shares of a call out of the payer's
// account: the payer's line first, then one line per share. A payer that is
// also a recipient (the platform calling its own agent) gets one netted line.
func Settlement(key, payer string, shares []Share) (Entry, error) {
	if payer == "" {
		return Entry{}, fmt.Errorf("settlement %s: payer has no account name: %w", key, ErrBadAccount)
	}
	var total Amount
	for i, s := range shares {
		if s.To == "" {
			return Entry{}, fmt.Errorf("settlement %s: share %d has no account name: %w", key, i+1, ErrBadAccount)
		}
		if s.Amount < 0 {
			return Entry{}, fmt.Errorf("settlement %s: share %d to %s is %s, want 0 or more", key, i+1, s.To, s.Amount)
		}
		var err error
		if total, err = total.Add(s.Amount); err != nil {
			return Entry{}, fmt.Errorf("settlement %s: shares sum: %w", key, err)
		}
	}
	if total == 0 {
		return Entry{}, fmt.Errorf("settlement %s: shares sum to 0, want nothing journaled: %w", key, ErrTooFewLines)
	}
	lines := make([]Line, 0, len(shares)+1)
	lines = append(lines, Line{Account: payer, Amount: -total})
	for _, s := range shares {
		if i := lineOf(lines, s.To); i >= 0 {
			// Cannot overflow: every line lies between -total and total.
			lines[i].Amount += s.Amount
			continue
		}
		lines = append(lines, Line{Account: s.To, Amount: s.Amount})
	}
	e := Entry{Key: key, Lines: dropZeroLines(lines)}
	// The lines sum to zero, so none is left only when the payer nets to zero
	// and every share went to the payer.
	if len(e.Lines) == 0 {
		return Entry{}, fmt.Errorf("settlement %s: payer %s receives every share, want nothing journaled: %w", key, payer, ErrTooFewLines)
	}
	if err := e.Validate(); err != nil {
		return Entry{}, fmt.Errorf("settlement: %w", err)
	}
	return e, nil
}

func lineOf(lines []Line, account string) int {
	for i, l := range lines {
		if l.Account == account {
			return i
		}
	}
	return -1
}

func dropZeroLines(lines []Line) []Line {
	out := lines[:0]
	for _, l := range lines {
		if l.Amount != 0 {
			out = append(out, l)
		}
	}
	return out
}

// Transfer is the two-line entry that moves a positive amount from one
// account to another, such as a sign-up credit from external:demo-credit.
func Transfer(key, from, to string, amount Amount) (Entry, error) {
	if amount <= 0 {
		return Entry{}, fmt.Errorf("transfer %s: amount %s, want more than 0", key, amount)
	}
	e := Entry{Key: key, Lines: []Line{{Account: from, Amount: -amount}, {Account: to, Amount: amount}}}
	if err := e.Validate(); err != nil {
		return Entry{}, fmt.Errorf("transfer: %w", err)
	}
	return e, nil
}
