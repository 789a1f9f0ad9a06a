package agents_test

import (
	"encoding/json"
	"testing"

	"holon.dev/holon/gateway/contract"
	"holon.dev/holon/journal"
)

// Ensure that company-lookup finds a registered company whatever the case
// and spacing of its name, answers with the name as registered, and costs
// 0.08 a run.
func TestCompanyLookup(t *testing.T) {
	m := manifest(t, "holon-labs/company-lookup")
	for _, tt := range []struct{ name, want string }{
		{"ACME Corp", `{"name":"ACME Corp","country":"US","registration":"Delaware 4471023"}`},
		{"  acme   CORP ", `{"name":"ACME Corp","country":"US","registration":"Delaware 4471023"}`},
		{"globex gmbh", `{"name":"Globex GmbH","country":"DE","registration":"HRB 208731 B"}`},
		{"Initech SARL", `{"name":"Initech SARL","country":"FR","registration":"RCS Paris 812 345 678"}`},
		{"UMBRELLA B.V.", `{"name":"Umbrella B.V.","country":"NL","registration":"KvK 61234567"}`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			res := run(t, m, nameInput(t, tt.name))
			wantOutput(t, res, tt.want)
			if bill := contract.DecideBilling(m, res.Outcome, nil, journal.One); bill.Price != journal.MustParseAmount("0.08") {
				t.Errorf("bill %+v, want a price of 0.08", bill)
			}
		})
	}
}

// Ensure that company-lookup declares not_found, unbilled, for a name it
// does not know, including a registered name with a letter more or less.
func TestCompanyLookup_NotFound(t *testing.T) {
	m := manifest(t, "holon-labs/company-lookup")
	for _, name := range []string{"Nobody Ltd", "ACME", "ACME Corp.", "Globex"} {
		res := run(t, m, nameInput(t, name))
		wantError(t, res, "not_found")
		if bill := contract.DecideBilling(m, res.Outcome, nil, journal.One); bill.Billed {
			t.Errorf("%q: billed %+v", name, bill)
		}
	}
}

// nameInput is company-lookup's input {name}.
func nameInput(t *testing.T, name string) string {
	t.Helper()
	b, err := json.Marshal(map[string]string{"name": name})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
