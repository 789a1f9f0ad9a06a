package appliance_test

import (
	"context"
	"encoding/csv"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"holon.dev/holon"
	"holon.dev/holon/appliance"
	"holon.dev/holon/appliance/token"
	"holon.dev/holon/backup"
	"holon.dev/holon/journal"
	"holon.dev/holon/kv"
)

// Ensure that GET /v0/reports/spend answers, for every by, what the
// receipts and refunds the API lists add up to (each call on its UTC day,
// under its mandate, agent and the key that made it; each refund on its
// day), as JSON and as the same rows in CSV with a header row; that the
// earnings report of the agent's author adds up to its receipts' splits;
// and that bad parameters are refused with invalid_report (400), another
// account's report with 404 and an agent key with 403.
func TestReports_API(t *testing.T) {
	ta := newHostedApp(t)
	ann := ta.signup("ann")
	keyOf := map[string]string{}
	for i := range 5 {
		c, key, body := ann.human, ann.humanKey, lookup("ann/sandbox")
		if i%2 == 1 {
			c, key, body = ann.agent, ann.agentKey, lookup("")
		}
		out := c.must(http.StatusOK, "POST", "/v0/calls", body)
		keyOf[str(out["receipt"].(map[string]any)["id"])] = token.Prefix(key)
	}
	op := ta.admin()
	var refunded journal.Amount
	for id := range keyOf {
		op.must(http.StatusCreated, "POST", "/v0/receipts/"+id+"/refunds", map[string]any{"amount": "0.01"})
		refunded += journal.MustParseAmount("0.01")
		break
	}
	today := time.Now().UTC().Format(time.DateOnly)
	// The brute force, from the receipts and their refunds.
	want := map[string]map[string][3]journal.Amount{}
	earned := [3]journal.Amount{}
	list := ann.human.must(http.StatusOK, "GET", "/v0/receipts?limit=100&mandate=ann/sandbox", nil)
	for _, x := range list["receipts"].([]any) {
		r := x.(map[string]any)
		if r["billed"] != true {
			continue
		}
		own := journal.MustParseAmount(str(r["cost"].(map[string]any)["own"]))
		day := str(r["created"])[:10]
		tree := ann.human.must(http.StatusOK, "GET", "/v0/receipts/"+str(r["id"]), nil)
		var back journal.Amount
		refunds, _ := tree["refunds"].([]any)
		for _, f := range refunds {
			back += journal.MustParseAmount(str(f.(map[string]any)["amount"]))
		}
		for by, g := range map[string]string{"day": day, "mandate": str(r["mandate"]), "agent": str(r["agent"]), "key": keyOf[str(r["id"])]} {
			if want[by] == nil {
				want[by] = map[string][3]journal.Amount{}
			}
			w := want[by][g]
			w[0]++
			w[1] += own
			if by != "key" {
				w[2] += back // refunded today, the day of the call
			}
			want[by][g] = w
		}
		for _, s := range r["splits"].([]any) {
			if s := s.(map[string]any); s["to"] == "holon-labs" {
				earned[0]++
				earned[1] += journal.MustParseAmount(str(s["amount"]))
			}
		}
		for _, f := range refunds {
			for _, p := range f.(map[string]any)["parts"].([]any) {
				if p := p.(map[string]any); p["to"] == "holon-labs" {
					earned[2] += journal.MustParseAmount(str(p["amount"]))
				}
			}
		}
	}
	if len(want["key"]) != 2 {
		t.Fatalf("the calls were made with 2 keys, the brute force has %v", want["key"])
	}
	for _, by := range []string{"day", "mandate", "agent", "key"} {
		q := "/v0/reports/spend?by=" + by + "&from=" + today + "&to=" + today
		rep := ann.human.must(http.StatusOK, "GET", q, nil)
		var got []string
		for _, x := range rep["rows"].([]any) {
			r := x.(map[string]any)
			got = append(got, fmt.Sprintf("%s %s %s %s %s", r["group"], str(r["calls"]), r["charged"], r["refunded"], r["net"]))
		}
		var exp []string
		for g, w := range want[by] {
			exp = append(exp, fmt.Sprintf("%s %d %s %s %s", g, w[0], w[1], w[2], w[1]-w[2]))
		}
		slices.Sort(got)
		slices.Sort(exp)
		if !slices.Equal(got, exp) {
			t.Errorf("by %s:\n got %v\nwant %v", by, got, exp)
		}
		status, h, body := ann.human.raw("GET", q+"&format=csv", nil)
		if status != http.StatusOK || !strings.HasPrefix(h.Get("Content-Type"), "text/csv") {
			t.Fatalf("CSV by %s: %d %s", by, status, h.Get("Content-Type"))
		}
		recs, err := csv.NewReader(strings.NewReader(string(body))).ReadAll()
		if err != nil || len(recs) == 0 || strings.Join(recs[0], ",") != by+",currency,calls,charged,refunded,net" {
			t.Fatalf("CSV by %s: %v %q", by, err, body)
		}
		var fromCSV []string
		for _, rec := range recs[1:] {
			fromCSV = append(fromCSV, fmt.Sprintf("%s %s %s %s %s", rec[0], rec[2], rec[3], rec[4], rec[5]))
		}
		slices.Sort(fromCSV)
		if !slices.Equal(fromCSV, exp) {
			t.Errorf("CSV by %s:\n got %v\nwant %v", by, fromCSV, exp)
		}
	}
	// Nothing the day before or after.
	yesterday := time.Now().UTC().AddDate(0, 0, -1).Format(time.DateOnly)
	if rep := ann.human.must(http.StatusOK, "GET", "/v0/reports/spend?from="+yesterday+"&to="+yesterday, nil); len(rep["rows"].([]any)) != 0 {
		t.Errorf("yesterday: %v", rep)
	}
	e := op.must(http.StatusOK, "GET", "/v0/reports/earnings?by=version&account=holon-labs&from="+today+"&to="+today, nil)
	tot := e["totals"].([]any)
	if len(tot) != 1 || str(tot[0].(map[string]any)["charged"]) != earned[1].String() || str(tot[0].(map[string]any)["refunded"]) != earned[2].String() {
		t.Errorf("holon-labs' earnings %v, its splits %v", e, earned)
	}
	for _, bad := range []struct {
		c      client
		q      string
		status int
		code   string
	}{
		{ann.human, "/v0/reports/spend?by=week", 400, "invalid_report"},
		{ann.human, "/v0/reports/spend?from=2026-13-01", 400, "invalid_report"},
		{ann.human, "/v0/reports/spend?from=2026-12-02&to=2026-12-01", 400, "invalid_report"},
		{ann.human, "/v0/reports/spend?from=2024-01-01&to=2026-01-01", 400, "invalid_report"},
		{ann.human, "/v0/reports/spend?format=xml", 400, "invalid_report"},
		{ann.human, "/v0/reports/spend?since=2026-01-01", 400, "invalid_report"},
		{ann.human, "/v0/reports/spend?by=agent&mandate=ann/sandbox", 400, "invalid_report"},
		{ann.human, "/v0/reports/earnings?by=mandate", 400, "invalid_report"},
		{ann.human, "/v0/reports/spend?account=holon-labs", 404, "not_found"},
		{ann.human, "/v0/reports/spend?by=day&mandate=bob/sandbox", 404, "not_found"},
		{op, "/v0/reports/spend", 400, "invalid_report"},
		{ann.agent, "/v0/reports/spend", 403, "forbidden"},
	} {
		if st, out := bad.c.do("GET", bad.q, nil); st != bad.status || code(out) != bad.code {
			t.Errorf("%s: %d %v, want %d %s", bad.q, st, out, bad.status, bad.code)
		}
	}
}

// Ensure that a store whose rollups are not kept (written before they
// were, here cleared) has them rebuilt from its receipts and refunds as
// the gateway starts, to the same reports (calls then count under no key),
// that holon verify's recomputation passes before and after, and that it
// catches a rollup row that does not match the receipts.
func TestReports_RebuiltAtStartAndVerified(t *testing.T) {
	ta := newHostedApp(t)
	ann := ta.signup("ann")
	var ids []string
	for i := range 4 {
		c, body := ann.human, lookup("ann/sandbox")
		if i == 3 {
			c, body = ann.agent, lookup("")
		}
		out := c.must(http.StatusOK, "POST", "/v0/calls", body)
		ids = append(ids, str(out["receipt"].(map[string]any)["id"]))
	}
	ta.admin().must(http.StatusCreated, "POST", "/v0/receipts/"+ids[1]+"/refunds", map[string]any{"amount": "0.02"})
	read := func(by string) any {
		return ann.human.must(http.StatusOK, "GET", "/v0/reports/spend?by="+by, nil)["rows"]
	}
	before := map[string]any{}
	for _, by := range []string{"day", "mandate", "agent"} {
		before[by] = read(by)
	}
	totals := ann.human.must(http.StatusOK, "GET", "/v0/reports/spend?by=key", nil)["totals"]
	verify := func() *backup.CheckResult {
		s, err := kv.Open(ta.cfg.DB, kv.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		rep, err := backup.Verify(s)
		if err != nil {
			t.Fatal(err)
		}
		return rep.Check(backup.CheckRollups)
	}
	ta.restart(func(*appliance.Config) {
		if c := verify(); !c.OK() || !strings.Contains(c.Covered, "against 4 settled calls") {
			t.Errorf("verify of the rollups kept by the calls: %+v", c)
		}
		s, err := kv.Open(ta.cfg.DB, kv.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Update(context.Background(), func(tx *kv.Tx) error { return tx.ClearRollups() }); err != nil {
			t.Fatal(err)
		}
		s.Close()
		if c := verify(); !c.OK() || !strings.HasPrefix(c.Covered, "not kept") {
			t.Errorf("verify of a store whose rollups are not kept: %+v", c)
		}
	})
	if !strings.Contains(ta.logs.String(), "rebuilt the spend and earnings rollups") {
		t.Error("the start did not say it rebuilt the rollups")
	}
	for by, want := range before {
		if got := read(by); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("by %s after the rebuild:\n got %v\nwant %v", by, got, want)
		}
	}
	keys := ann.human.must(http.StatusOK, "GET", "/v0/reports/spend?by=key", nil)
	if rows := keys["rows"].([]any); len(rows) != 1 || rows[0].(map[string]any)["group"] != "" || fmt.Sprint(keys["totals"]) != fmt.Sprint(totals) {
		t.Errorf("by key after the rebuild: %v, want every call under no key, totals %v", keys, totals)
	}
	ta.shutdown(true)
	if c := verify(); !c.OK() || !strings.Contains(c.Covered, "against 4 settled calls") {
		t.Errorf("verify after the rebuild: %+v", c)
	}
	s, err := kv.Open(ta.cfg.DB, kv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	day := holon.DayOf(time.Now())
	if err := s.Update(context.Background(), func(tx *kv.Tx) error {
		return tx.AddRollup(holon.RollupKey{Kind: holon.RollupSpend, Owner: "ann", Dim: holon.ByAgent, Day: day, Value: "holon-labs/company-lookup@1.0.0"}, "EUR", holon.Tally{Calls: 1})
	}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if c := verify(); c.OK() || !strings.Contains(fmt.Sprint(c.Problems), "spend of ann on "+day.String()+" agent holon-labs/company-lookup@1.0.0") {
		t.Errorf("verify of a tampered rollup row: %+v", c)
	}
	ta.open()
}
