package wire

import (
	"encoding/csv"
	"io"
	"strconv"
)

// Report is GET /v0/reports/spend and /v0/reports/earnings: a payer's
// spend, or an author's earnings, from day from to day to (UTC, both
// included), by day or by what it was spent on (or earned by).
type Report struct {
	// Account is the payer (spend) or the author (earnings).
	Account string `json:"account"`
	By      string `json:"by"`
	// From and To are days, YYYY-MM-DD.
	From string `json:"from"`
	To   string `json:"to"`
	// Mandate, when set, narrows a spend report by day to one mandate.
	Mandate string `json:"mandate,omitempty"`
	// Rows are ordered by group, then currency; a group with nothing in
	// the range has no row.
	Rows []ReportRow `json:"rows"`
	// Totals are the rows' sums, one per currency.
	Totals []ReportRow `json:"totals"`
}

// ReportRow is one group (a day, a mandate, an agent version, a key
// prefix; "" in a total) in one currency: the calls counted, what they
// were charged (or earned), what refunds gave back that day, and the
// difference.
type ReportRow struct {
	Group    string `json:"group"`
	Currency string `json:"currency"`
	Calls    int64  `json:"calls"`
	Charged  Money  `json:"charged"`
	Refunded Money  `json:"refunded"`
	Net      Money  `json:"net"`
}

// WriteCSV writes a report's rows as CSV, with a header row whose first
// column is named after By.
func (rep Report) WriteCSV(w io.Writer) error {
	c := csv.NewWriter(w)
	_ = c.Write([]string{rep.By, "currency", "calls", "charged", "refunded", "net"})
	for _, row := range rep.Rows {
		_ = c.Write([]string{csvSafe(row.Group), row.Currency, strconv.FormatInt(row.Calls, 10), row.Charged.String(), row.Refunded.String(), row.Net.String()})
	}
	c.Flush()
	return c.Error()
}

// csvSafe keeps a spreadsheet from reading a cell as a formula.
func csvSafe(s string) string {
	if s != "" && (s[0] == '=' || s[0] == '+' || s[0] == '-' || s[0] == '@') {
		return "'" + s
	}
	return s
}
