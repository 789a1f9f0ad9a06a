package appliance_test

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"holon.dev/holon/appliance"
	"holon.dev/holon/backup"
	"holon.dev/holon/kv"
)

// Ensure that the catalogue pages through every listed agent in id order,
// declares the shipped ones as such, shows sample records only with
// HOLON_RECORDS=1 and beside (never in) the measured record, and refuses a
// bad limit.
func TestCatalog_PagesAndSamples(t *testing.T) {
	ta := newHostedApp(t)
	var ids []string
	after := ""
	for pages := 0; pages < 20; pages++ {
		out := ta.anonymous().must(http.StatusOK, "GET", "/v0/catalog?limit=2&after="+after, nil)
		for _, a := range out["agents"].([]any) {
			e := a.(map[string]any)
			ids = append(ids, e["id"].(string))
			if e["sample"] != nil {
				t.Errorf("%s has a sample record without HOLON_RECORDS", e["id"])
			}
		}
		if after = out["next"].(string); after == "" {
			break
		}
	}
	want := []string{"holon-labs/company-lookup", "holon-labs/csv-profile", "holon-labs/invoice-pipeline", "holon-labs/text-tables", "test-lab/echo", "test-lab/slow"}
	if strings.Join(ids, " ") != strings.Join(want, " ") {
		t.Errorf("catalogue pages: %v, want %v", ids, want)
	}
	if code, out := ta.anonymous().do("GET", "/v0/catalog?limit=0", nil); code != http.StatusBadRequest || errorCode(out) != "invalid_request" {
		t.Errorf("limit=0: %d %v", code, out)
	}
	cat := ta.anonymous().must(http.StatusOK, "GET", "/v0/catalog?capability=data.profile.csv", nil)
	e := firstAgent(t, cat)
	if d := e["declared"].(map[string]any); d["shipped"] != true || d["proprietary"] != false || d["data_policy"] == "attested, not enforced" {
		t.Errorf("csv-profile declared: %v", d)
	}

	ta.restart(func(c *appliance.Config) { c.Records = true })
	e = firstAgent(t, ta.anonymous().must(http.StatusOK, "GET", "/v0/catalog?capability=extraction.table", nil))
	sample, _ := e["sample"].(map[string]any)
	if sample == nil || sample["runs"] != float64(1240) || !strings.Contains(str(sample["note"]), "not a measurement") {
		t.Errorf("text-tables with HOLON_RECORDS=1: sample %v", e["sample"])
	}
	if m := e["measured"].(map[string]any); m["runs"] != float64(0) {
		t.Errorf("the sample leaked into the measured record: %v", m)
	}
}

// Ensure that a private suite that does not parse stops the gateway with
// a message naming its file.
func TestEvaluate_BadPrivateSuite(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "extraction.table"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "extraction.table", "suite.yaml"), []byte("capability: extraction.table\ncases:\n  - id: a\n    input: {}\n    expect: {}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := appliance.Open(t.Context(), appliance.Config{OpenStore: kv.OpenStore, Backup: backup.StoreHandler, DB: filepath.Join(t.TempDir(), "h.db"), Registry: []string{"agents"}, NoSync: true, PrivateEvals: dir})
	if err == nil || !strings.Contains(err.Error(), "extraction.table/suite.yaml") || !strings.Contains(err.Error(), "exactly one of output_contains and error") {
		t.Errorf("a bad private suite: %v", err)
	}
}

// Ensure that the shipped and demo agents pass the public sample suites
// shipped for their capabilities, evaluated at start-up.
func TestEvaluate_ShippedAgentsPassTheSamples(t *testing.T) {
	ta := newHostedApp(t)
	if err := ta.app.WaitEvaluations(t.Context()); err != nil {
		t.Fatal(err)
	}
	got := map[string]any{}
	for _, a := range ta.anonymous().must(http.StatusOK, "GET", "/v0/catalog?q=holon-labs", nil)["agents"].([]any) {
		e := a.(map[string]any)
		got[e["id"].(string)] = e["measured"].(map[string]any)["evaluated"]
	}
	want := map[string]any{
		"holon-labs/company-lookup":   "3/3 public, 0/0 hidden",
		"holon-labs/csv-profile":      "6/6 public, 0/0 hidden",
		"holon-labs/text-tables":      "3/3 public, 0/0 hidden",
		"holon-labs/invoice-pipeline": nil, // extraction.invoice has no suite (an orchestrator: its runs are paid calls)
	}
	for id, w := range want {
		if got[id] != w {
			t.Errorf("%s evaluated %v, want %v", id, got[id], w)
		}
	}
}
