package agents_test

import (
	"encoding/json"
	"testing"

	"holon.dev/holon/gateway/contract"
	"holon.dev/holon/journal"
)

// Ensure that text-tables returns the lines with two or more cells, reports
// one unit per row, and is priced 0.004 a row up to its max of 0.05.
func TestTextTables(t *testing.T) {
	m := manifest(t, "holon-labs/text-tables")
	for _, tt := range []struct {
		name, text, rows string
		units            int64
		price            string
	}{
		{
			name:  "the three lines of the demo invoice",
			text:  "Widget, 2, 3.00\nGadget, 1, 12.00\nService hour, 4, 25.00\n",
			rows:  `[["Widget","2","3.00"],["Gadget","1","12.00"],["Service hour","4","25.00"]]`,
			units: 3, price: "0.012",
		},
		{
			name:  "blank lines and lines without a comma are not rows",
			text:  "Invoice 42\n\n  a ,b  \r\n\nThank you\n",
			rows:  `[["a","b"]]`,
			units: 1, price: "0.004",
		},
		{
			name:  "empty cells are kept",
			text:  "a,,c\n,\n",
			rows:  `[["a","","c"],["",""]]`,
			units: 2, price: "0.008",
		},
		{
			name:  "the price stops at max",
			text:  "1,a\n2,b\n3,c\n4,d\n5,e\n6,f\n7,g\n8,h\n9,i\n10,j\n11,k\n12,l\n13,m\n",
			rows:  `[["1","a"],["2","b"],["3","c"],["4","d"],["5","e"],["6","f"],["7","g"],["8","h"],["9","i"],["10","j"],["11","k"],["12","l"],["13","m"]]`,
			units: 13, price: "0.05",
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			res := run(t, m, textInput(t, tt.text))
			wantOutput(t, res, `{"rows":`+tt.rows+`}`)
			if res.Outcome.Units != tt.units {
				t.Errorf("units = %v (%T), want %d", res.Outcome.Units, res.Outcome.Units, tt.units)
			}
			bill := contract.DecideBilling(m, res.Outcome, nil, journal.One)
			if !bill.Billed || bill.Price != journal.MustParseAmount(tt.price) {
				t.Errorf("bill %+v, want a price of %s", bill, tt.price)
			}
		})
	}
}

// Ensure that text-tables declares no_table_found, unbilled and without
// units, when no line has two cells.
func TestTextTables_NoTable(t *testing.T) {
	m := manifest(t, "holon-labs/text-tables")
	for _, text := range []string{"", "\n\n", "Just a sentence.", "one\ntwo\n"} {
		res := run(t, m, textInput(t, text))
		wantError(t, res, "no_table_found")
		if res.Outcome.Units != nil {
			t.Errorf("%q: units %v reported for no table", text, res.Outcome.Units)
		}
		if bill := contract.DecideBilling(m, res.Outcome, nil, journal.One); bill.Billed {
			t.Errorf("%q: billed %+v", text, bill)
		}
	}
}

// textInput is the input {text} of text-tables and invoice-pipeline.
func textInput(t *testing.T, text string) string {
	t.Helper()
	b, err := json.Marshal(map[string]string{"text": text})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
