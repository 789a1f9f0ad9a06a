package contract_test

import (
	"errors"
	"strings"
	"testing"

	"holon.dev/holon"
	"holon.dev/holon/gateway/contract"
	"holon.dev/holon/journal"
)

// Ensure that budget.alerts reads percentages, writes them back the same,
// and refuses what is not one with invalid_mandate naming the entry.
func TestParseMandate_Alerts(t *testing.T) {
	m := mustParseMandate(t, []byte(strings.Replace(minimalMandate, `budget: { total: "50.00" }`,
		`budget: { total: "50.00", alerts: [50%, "80%", "12.5%", "100%", "0.05%"] }`, 1)))
	var got []string
	for _, a := range m.Budget.Alerts {
		got = append(got, a.String())
	}
	if strings.Join(got, " ") != "50% 80% 12.5% 100% 0.05%" {
		t.Errorf("alerts = %v", got)
	}
	for _, c := range []struct{ alerts, path, msg string }{
		{`[80]`, "budget.alerts[0]", `"80" is not a percentage of the budget such as "80%"`},
		{`["0%"]`, "budget.alerts[0]", "not above 0% and at most 100%"},
		{`["100.01%"]`, "budget.alerts[0]", "at most 100%"},
		{`["1.234%"]`, "budget.alerts[0]", "at most two decimals"},
		{`["-5%"]`, "budget.alerts[0]", "is not a percentage"},
		{`["50%", "80%", "50.0%"]`, "budget.alerts", "50% is named twice"},
		{`["1%","2%","3%","4%","5%","6%","7%","8%","9%","10%","11%"]`, "budget.alerts", "11 thresholds, at most 10"},
		{`"80%"`, "budget.alerts", "want a list"},
	} {
		doc := strings.Replace(minimalMandate, `budget: { total: "50.00" }`, `budget: { total: "50.00", alerts: `+c.alerts+` }`, 1)
		_, err := contract.ParseMandate([]byte(doc))
		var e *holon.Error
		if !errors.As(err, &e) || e.Code != holon.CodeInvalidMandate {
			t.Errorf("alerts %s: err = %v, want invalid_mandate", c.alerts, err)
			continue
		}
		found := false
		for _, f := range e.Fields {
			if f.Path == c.path && strings.Contains(f.Msg, c.msg) {
				found = true
			}
		}
		if !found {
			t.Errorf("alerts %s: fields %+v, want %s: …%s…", c.alerts, e.Fields, c.path, c.msg)
		}
	}
}

// Ensure that a threshold's amount is rounded up: spent reaches 80% of
// 0.000003 at 0.000003 (2.4 micro-units), never below the percentage.
func TestAlertThreshold_Of(t *testing.T) {
	for _, c := range []struct {
		t, limit, want string
	}{
		{"80%", "1.00", "0.80"},
		{"80%", "0.000003", "0.000003"},
		{"50%", "0.000003", "0.000002"},
		{"12.5%", "10.00", "1.25"},
		{"0.01%", "0.01", "0.000001"},
		{"100%", "123456789.123456", "123456789.123456"},
		{"33.33%", "1.00", "0.3333"},
	} {
		th, err := contract.ParseAlertThreshold(c.t)
		if err != nil {
			t.Fatal(err)
		}
		if got := th.Of(journal.MustParseAmount(c.limit)); got != journal.MustParseAmount(c.want) {
			t.Errorf("%s of %s = %s, want %s", c.t, c.limit, got, c.want)
		}
	}
}

// Ensure that alerts are no authority: a child mandate with alerts of its
// own, or none, is within a parent with others, and a derived sub-mandate
// carries none (its spending is counted by its parent's alerts).
func TestCheckAttenuation_AlertsIgnored(t *testing.T) {
	parent := mustParseMandate(t, []byte(strings.Replace(minimalMandate, `budget: { total: "50.00" }`,
		`budget: { total: "50.00", alerts: ["80%"] }`, 1)))
	for _, alerts := range []string{``, `, alerts: ["10%", "20%", "99.99%"]`} {
		child := mustParseMandate(t, []byte(strings.NewReplacer(`budget: { total: "50.00" }`, `budget: { total: "5.00"`+alerts+` }`,
			"id: alice/books", "id: alice/child").Replace(minimalMandate)))
		child.Issuer = parent.Grantee
		depth := 1
		child.Delegation = &contract.Delegation{MaxDepth: &depth}
		if wide := contract.CheckAttenuation(child, parent, amountOf(t, "50.00")); wide != nil {
			t.Errorf("child with alerts %q widens its parent in %q", alerts, wide)
		}
	}
	bk := readMandate(t, "mandates/bookkeeping-q4.yaml")
	bk.Budget.Alerts = []contract.AlertThreshold{5000}
	sub, err := contract.DeriveSubMandate(bk, readManifest(t, "manifests/invoice-pipeline.yaml"), "r4", nil, amountOf(t, "50.00"))
	if err != nil {
		t.Fatal(err)
	}
	if len(sub.Budget.Alerts) != 0 {
		t.Errorf("the derived sub-mandate has alerts %v", sub.Budget.Alerts)
	}
}
