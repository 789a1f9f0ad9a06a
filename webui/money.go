package webui

import (
	"strings"

	"holon.dev/holon/journal"
)

// money is a signed amount in micro-units: balances of external accounts
// are negative (the journal sums to zero), and journal.Amount's text form
// has no sign.
type money int64

// UnmarshalText reads a decimal string with an optional leading minus.
func (m *money) UnmarshalText(b []byte) error {
	s, neg := strings.CutPrefix(string(b), "-")
	a, err := journal.ParseAmount(s)
	if err != nil {
		return err
	}
	*m = money(a.Micros())
	if neg {
		*m = -*m
	}
	return nil
}

// String is the decimal form, with a minus when negative.
func (m money) String() string {
	if m < 0 {
		return "-" + journal.Amount(-m).String()
	}
	return journal.Amount(m).String()
}
