package gateway

import (
	"slices"
	"strings"

	"holon.dev/holon"
)

// MaxReportDays bounds a report's range, so that it reads at most this
// many days of rows.
const MaxReportDays = 366

// ReportRow is one line of a report: a group (a day YYYY-MM-DD, a mandate,
// an agent version or a key prefix) in one currency.
type ReportRow struct {
	Group    string
	Currency string
	holon.Tally
}

// Report is a spend or earnings report: its rows ordered by group, then
// currency; groups with nothing in the range are left out.
type Report struct {
	By       string
	From, To holon.Day
	Rows     []ReportRow
}

// spendDims and earningsDims are the reports' by values.
var (
	spendDims    = map[string]byte{"day": holon.ByDay, "mandate": holon.ByMandate, "agent": holon.ByAgent, "key": holon.ByKey}
	earningsDims = map[string]byte{"day": holon.ByVersion, "version": holon.ByVersion}
)

// SpendReport is what account paid from day from to day to (UTC, both
// included), by day, mandate, agent or key, read from the rollups; with
// a mandate, by day, what it paid under that mandate.
func (e *Engine) SpendReport(account, by, mandate string, from, to holon.Day) (*Report, error) {
	return e.report(holon.RollupSpend, spendDims, account, by, mandate, from, to)
}

// EarningsReport is what author's versions earned from day from to day to,
// by day or version.
func (e *Engine) EarningsReport(author, by string, from, to holon.Day) (*Report, error) {
	return e.report(holon.RollupEarnings, earningsDims, author, by, "", from, to)
}

func (e *Engine) report(kind byte, dims map[string]byte, owner, by, mandate string, from, to holon.Day) (*Report, error) {
	dim, ok := dims[by]
	if !ok {
		names := make([]string, 0, len(dims))
		for n := range dims {
			names = append(names, n)
		}
		slices.Sort(names)
		return nil, holon.Errorf(holon.CodeInvalidReport, "by must be one of %s, not %q", strings.Join(names, ", "), by)
	}
	if err := CheckReportRange(from, to); err != nil {
		return nil, err
	}
	if mandate != "" {
		if by != "day" {
			return nil, holon.Errorf(holon.CodeInvalidReport, "mandate narrows a report by day only, not by %s", by)
		}
		dim = holon.ByMandate
	}
	type group struct{ g, cur string }
	sums := map[group]holon.Tally{}
	err := e.store.View(func(tx holon.Tx) error {
		return tx.ForEachRollup(kind, owner, dim, from, to, func(k holon.RollupKey, ts holon.Tallies) error {
			if mandate != "" && k.Value != mandate {
				return nil
			}
			g := k.Value
			if by == "day" {
				g = k.Day.String()
			}
			for cur, t := range ts {
				s := sums[group{g, cur}]
				s.Calls += t.Calls
				s.Amount += t.Amount
				s.Refunded += t.Refunded
				sums[group{g, cur}] = s
			}
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	r := &Report{By: by, From: from, To: to, Rows: make([]ReportRow, 0, len(sums))}
	for g, t := range sums {
		r.Rows = append(r.Rows, ReportRow{Group: g.g, Currency: g.cur, Tally: t})
	}
	slices.SortFunc(r.Rows, func(a, b ReportRow) int {
		if c := strings.Compare(a.Group, b.Group); c != 0 {
			return c
		}
		return strings.Compare(a.Currency, b.Currency)
	})
	return r, nil
}

// CheckReportRange refuses a range that ends before it starts or spans
// more than MaxReportDays.
func CheckReportRange(from, to holon.Day) error {
	if to < from {
		return holon.Errorf(holon.CodeInvalidReport, "to (%s) is before from (%s)", to, from)
	}
	if n := int(to-from) + 1; n > MaxReportDays {
		return holon.Errorf(holon.CodeInvalidReport, "from %s to %s is %d days: a report spans at most %d", from, to, n, MaxReportDays)
	}
	return nil
}

// Totals sums a report's rows by currency.
func (r *Report) Totals() map[string]holon.Tally {
	out := map[string]holon.Tally{}
	for _, row := range r.Rows {
		t := out[row.Currency]
		t.Calls += row.Calls
		t.Amount += row.Amount
		t.Refunded += row.Refunded
		out[row.Currency] = t
	}
	return out
}
