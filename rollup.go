package holon

import (
	"errors"
	"fmt"
	"time"

	"holon.dev/holon/journal"
)

// Rollups are the sums the spend and earnings reports answer from, kept as
// calls settle and as refunds are made, in the same transactions, so that a
// report reads a row per day and dimension instead of every receipt.
//
// A payer's spend is counted on the UTC day its call was made (the
// receipt's created time): the call's own charge (cost.own), under the
// account that paid it. A refund is counted on the UTC day it was made, as
// refunded, against the same mandate, agent and key as its call: a day
// already reported never changes but by a refund of that day. An author's
// earnings are counted likewise per version: each version's share of a
// settlement (its creator share, or a royalty from a fork) on the call's
// day, and what a refund took back of it on the refund's day.

// CodeInvalidReport: a spend or earnings report's parameters (by, from,
// to, format) are not ones it can answer.
const CodeInvalidReport = "invalid_report"

// Rollup kinds: whose sums a row keeps.
const (
	// RollupSpend is a payer account's spend.
	RollupSpend byte = 's'
	// RollupEarnings is an author's earnings.
	RollupEarnings byte = 'e'
)

// Rollup dimensions: what a row's sums are broken down by.
const (
	// ByDay is the account's total of the day (the row's value is "").
	ByDay byte = 'd'
	// ByMandate is the payer's mandate the call ran under: the root of
	// the call tree its payer paid (a passthrough child's spend is its
	// orchestrator's mandate's).
	ByMandate byte = 'm'
	// ByAgent is the agent version called (ns/name@version).
	ByAgent byte = 'a'
	// ByKey is the prefix of the API key that made the call ("" for calls
	// made without one: the dev gateway, the console's own calls).
	ByKey byte = 'k'
	// ByVersion is the author's version that earned.
	ByVersion byte = 'v'
)

// RollupKey names one rollup row: whose, which day, and what it is broken
// down by.
type RollupKey struct {
	Kind  byte
	Owner string
	Dim   byte
	Day   Day
	Value string
}

// Tally is a rollup row's sums in one currency: Calls counted, Amount
// charged (or earned), Refunded given back (counted on the refund's day).
type Tally struct {
	Calls    int64          `json:"calls"`
	Amount   journal.Amount `json:"amount"`
	Refunded journal.Amount `json:"refunded"`
}

// Net is what was charged less what was given back.
func (t Tally) Net() journal.Amount { return t.Amount - t.Refunded }

// Tallies is a rollup row: its tally by currency.
type Tallies map[string]Tally

// ErrRollupBelowZero is Tallies.Add's refusal of a change that would leave
// a count or a sum below zero.
var ErrRollupBelowZero = errors.New("rollup would go below zero")

// Add adds d to the tally in currency; it refuses, changing nothing, a
// change that would leave any of its sums below zero.
func (t Tallies) Add(currency string, d Tally) error {
	x, err := t[currency].Plus(d)
	if err != nil {
		return err
	}
	t[currency] = x
	return nil
}

// Plus is x with d added; it refuses a change that would leave any of its
// sums below zero (ErrRollupBelowZero) or out of range.
func (x Tally) Plus(d Tally) (Tally, error) {
	x.Calls += d.Calls
	var err error
	if x.Amount, err = x.Amount.Add(d.Amount); err != nil {
		return Tally{}, err
	}
	if x.Refunded, err = x.Refunded.Add(d.Refunded); err != nil {
		return Tally{}, err
	}
	if x.Calls < 0 || x.Amount < 0 || x.Refunded < 0 {
		return Tally{}, ErrRollupBelowZero
	}
	return x, nil
}

// Merge adds every currency of u to t.
func (t Tallies) Merge(u Tallies) error {
	for c, d := range u {
		if err := t.Add(c, d); err != nil {
			return err
		}
	}
	return nil
}

// RollupsTx keeps the rollups.
type RollupsTx interface {
	// AddRollup adds d to the row k in currency (a row that never moved
	// reads as empty); no sum may go below zero.
	AddRollup(k RollupKey, currency string, d Tally) error
	// ForEachRollup calls fn for the rows of one kind, owner and
	// dimension whose day is from to to (both included), in day order
	// and, within a day, value order.
	ForEachRollup(kind byte, owner string, dim byte, from, to Day, fn func(k RollupKey, t Tallies) error) error
	// RollupsKept reports whether the rollups count every settlement and
	// refund in the store: false for a store written before they were
	// kept, until the engine rebuilt them from its receipts
	// (MarkRollupsKept).
	RollupsKept() bool
	// MarkRollupsKept records that they do; ClearRollups deletes every
	// row and the mark, for a rebuild.
	MarkRollupsKept() error
	ClearRollups() error
}

// Day is a UTC calendar day, counted from 1970-01-01 (day 0).
type Day int32

// DayOf is the UTC day of t.
func DayOf(t time.Time) Day {
	return Day(t.UTC().Unix() / 86400)
}

// ParseDay reads a day written YYYY-MM-DD.
func ParseDay(s string) (Day, error) {
	t, err := time.Parse(time.DateOnly, s)
	if err != nil {
		return 0, fmt.Errorf("%q is not a date written YYYY-MM-DD", s)
	}
	if t.Year() < 1970 {
		return 0, fmt.Errorf("%s is before 1970", s)
	}
	return DayOf(t), nil
}

// Time is the day's first instant.
func (d Day) Time() time.Time { return time.Unix(int64(d)*86400, 0).UTC() }

// String writes the day YYYY-MM-DD.
func (d Day) String() string { return d.Time().Format(time.DateOnly) }
