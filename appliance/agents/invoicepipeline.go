package agents

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"holon.dev/holon/gateway"
	"holon.dev/holon/journal"
)

// holon-labs/invoice-pipeline: examples/invoice-pipeline/holon.yaml, the
// orchestrator of the delegated run in spec/gateway.md §4.
//
// The input is a plain-text invoice: its first non-blank line is the issuer's
// name, and each other line is "description, quantity, unit price". The
// pipeline asks extraction.table for the rows of the lines after the
// issuer's, checks every row, and only then asks
// holon-labs/company-lookup@^1 for the issuer, so an invoice it cannot read
// costs its payer one table call and no lookup.
//
// A row's last two cells are the quantity (a whole number, 0 or more) and
// the unit price (a decimal amount such as 12.50, at most six decimals); the
// cells before them, joined again with ", ", are the description, so a
// description may hold commas. Amounts are computed exactly in micro-units:
// amount = quantity × unit price, total = Σ amounts.
//
// An issuer the register does not know (not_found) is not a failure: the
// output says {name, found: false} with the name as the invoice writes it.
// Any other failure of the lookup is lookup_failed, because claiming the
// issuer is unknown when it was never looked up would be false.
//
// The run of spec/gateway.md §4, a three-line invoice:
//
//	text-tables     3 rows × 0.004 = 0.012  (per_unit, under its max 0.05)
//	company-lookup                   0.08   (per_run)
//	downstream      0.012 + 0.08   = 0.092  (passthrough, under the cap 3.00)
//	own                              0.10   (per_run)
//	total           0.10 + 0.092   = 0.192
//	splits of own   holon ⌊0.10 × 10%⌋ = 0.01, holon-labs 0.10 − 0.01 = 0.09
//
// Its worst case is 0.10 + 3.00 = 3.10, above a mandate's approval threshold
// of 1.00, hence the approval before it runs.

// The calls the pipeline makes; each is declared in its manifest's calls.
var (
	tableTarget   = gateway.Target{Capability: "extraction.table"}
	companyTarget = gateway.Target{Agent: "holon-labs/company-lookup@^1"}
)

type invoiceInput struct {
	Text string `json:"text"`
}

type invoiceOutput struct {
	Issuer issuer        `json:"issuer"`
	Lines  []invoiceLine `json:"lines"`
	Total  string        `json:"total"`
}

// issuer is company-lookup's answer with found: true, or the invoice's name
// with found: false.
type issuer struct {
	Name         string `json:"name"`
	Found        bool   `json:"found"`
	Country      string `json:"country,omitempty"`
	Registration string `json:"registration,omitempty"`
}

type invoiceLine struct {
	Description string `json:"description"`
	Quantity    int64  `json:"quantity"`
	UnitPrice   string `json:"unit_price"`
	Amount      string `json:"amount"`
}

func invoicePipeline(ctx context.Context, input json.RawMessage, c *gateway.Ctx) (any, error) {
	var in invoiceInput
	if err := json.Unmarshal(input, &in); err != nil {
		return nil, fmt.Errorf("read input: %w", err)
	}
	name, body := splitIssuer(in.Text)
	if name == "" || strings.TrimSpace(body) == "" {
		// Nothing to send to extraction.table: spare the payer the call.
		return nil, c.Error("no_table_found", "the invoice has no lines after the issuer's name")
	}

	table := c.Call(ctx, tableTarget, textTablesInput{Text: body})
	if !table.OK {
		return nil, c.Error("no_table_found", "extraction.table: "+outcomeReason(table))
	}
	var rows textTablesOutput
	if err := json.Unmarshal(table.Output, &rows); err != nil {
		return nil, fmt.Errorf("read extraction.table output (receipt %s): %w", table.Receipt, err)
	}
	if len(rows.Rows) == 0 {
		return nil, c.Error("no_table_found", "extraction.table found no rows [receipt "+table.Receipt+"]")
	}
	lines, total, err := invoiceLines(rows.Rows)
	if err != nil {
		return nil, c.Error("invalid_line", err.Error())
	}

	who, err := lookupIssuer(ctx, c, name)
	if err != nil {
		return nil, err
	}
	return invoiceOutput{Issuer: who, Lines: lines, Total: total.String()}, nil
}

// splitIssuer returns the first non-blank line, trimmed, and the text after it.
func splitIssuer(text string) (name, body string) {
	for text != "" {
		line, rest, _ := strings.Cut(text, "\n")
		if name = strings.TrimSpace(line); name != "" {
			return name, rest
		}
		text = rest
	}
	return "", ""
}

// invoiceLines reads the table's rows as invoice lines and adds them up.
func invoiceLines(rows [][]string) ([]invoiceLine, journal.Amount, error) {
	lines := make([]invoiceLine, 0, len(rows))
	var total journal.Amount
	for i, row := range rows {
		if len(row) < 3 {
			return nil, 0, fmt.Errorf("row %d: %d cells, want description, quantity, unit price", i+1, len(row))
		}
		n := len(row)
		desc := strings.Join(row[:n-2], ", ")
		if strings.TrimSpace(desc) == "" {
			return nil, 0, fmt.Errorf("row %d: no description", i+1)
		}
		qty, err := strconv.ParseInt(row[n-2], 10, 64)
		if err != nil || qty < 0 {
			return nil, 0, fmt.Errorf("row %d: quantity %q is not a whole number, 0 or more", i+1, row[n-2])
		}
		price, err := journal.ParseAmount(row[n-1])
		if err != nil {
			return nil, 0, fmt.Errorf("row %d: unit price: %w", i+1, err)
		}
		amount, err := price.MulInt(qty)
		if err == nil {
			total, err = total.Add(amount)
		}
		if err != nil {
			return nil, 0, fmt.Errorf("row %d: %w", i+1, err)
		}
		lines = append(lines, invoiceLine{Description: desc, Quantity: qty, UnitPrice: price.String(), Amount: amount.String()})
	}
	return lines, total, nil
}

// lookupIssuer asks company-lookup for the issuer; not_found is an answer,
// any other failure is lookup_failed.
func lookupIssuer(ctx context.Context, c *gateway.Ctx, name string) (issuer, error) {
	res := c.Call(ctx, companyTarget, companyLookupInput{Name: name})
	switch {
	case res.OK:
	case res.Error == "not_found":
		return issuer{Name: name, Found: false}, nil
	default:
		return issuer{}, c.Error("lookup_failed", companyTarget.Agent+": "+outcomeReason(res))
	}
	var co company
	if err := json.Unmarshal(res.Output, &co); err != nil {
		return issuer{}, fmt.Errorf("read company-lookup output (receipt %s): %w", res.Receipt, err)
	}
	return issuer{Name: co.Name, Found: true, Country: co.Country, Registration: co.Registration}, nil
}

// outcomeReason says why a downstream call failed, for the caller's message.
func outcomeReason(o gateway.CallOutcome) string {
	s := o.Status
	if o.Error != "" {
		s += " (" + o.Error + ")"
	}
	if o.Message != "" {
		s += ": " + o.Message
	}
	if o.Receipt != "" {
		s += " [receipt " + o.Receipt + "]"
	}
	return s
}
