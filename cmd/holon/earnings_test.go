package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/time/rate"

	"holon.dev/holon/appliance"
	"holon.dev/holon/backup"
	"holon.dev/holon/gateway/contract"
	"holon.dev/holon/journal"
	"holon.dev/holon/kv"
)

// adaLookup is ada's listing of the shipped company register (its dev
// handler), so that it is evaluated on the public company.lookup suite.
const adaLookup = `
id: ada/lookup
version: 1.0.0
summary: Looks up a company, on the shipped register.
license: proprietary
capabilities: [company.lookup]
interface:
  input: { type: object, required: [name], properties: { name: { type: string } } }
  output: { type: object, required: [name, country, registration], properties: { name: { type: string } } }
  errors:
    not_found: { billed: false, description: Not in the register. }
pricing: { model: per_run, amount: "0.08", currency: EUR }
runtime: { kind: dev, tool: company-lookup }
data: { retention: none, regions: [eu], training: false }
`

// postJSON sends a JSON body with a key and decodes the answer.
func postJSON(t *testing.T, url, key string, body any) (int, map[string]any) {
	t.Helper()
	b, _ := json.Marshal(body)
	req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

// Ensure that holon earnings, against a running hosted gateway, lists the
// author's versions with their evaluation and what they earned, reading
// the gateway and the key from HOLON_URL and HOLON_KEY.
func TestEarnings_AgainstRunningGateway(t *testing.T) {
	ctx := context.Background()
	unlimited := appliance.Limit{Rate: rate.Inf}
	app, err := appliance.Open(ctx, appliance.Config{OpenStore: kv.OpenStore, Backup: backup.StoreHandler,
		DB: filepath.Join(t.TempDir(), "holon.db"), Registry: []string{"agents", "examples"}, NoSync: true, Hosted: true,
		SignupCredit: journal.MustParseAmount("5.00"), AdminKey: adminKey,
		Limits: appliance.Limits{Account: unlimited, Address: unlimited, Signup: unlimited, MaxTracked: 100},
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(app.Handler())
	defer func() { srv.Close(); app.Close() }()
	keys := map[string]string{}
	for _, h := range []string{"ada", "bob"} {
		code, out := postJSON(t, srv.URL+"/v0/signup", "", map[string]any{"handle": h, "email": h + "@example.com"})
		if code != http.StatusCreated {
			t.Fatalf("signup %s: %d %v", h, code, out)
		}
		keys[h] = out["human_key"].(string)
	}
	m, err := contract.ParseManifest([]byte(adaLookup))
	if err != nil {
		t.Fatal(err)
	}
	if err := app.RegisterVersion(ctx, m); err != nil {
		t.Fatal(err)
	}
	if err := app.WaitEvaluations(ctx); err != nil {
		t.Fatal(err)
	}
	// bob's sandbox allows the shipped agents only: a mandate for ada's.
	if code, out := postJSON(t, srv.URL+"/v0/mandates", keys["bob"], map[string]any{"id": "ada-agents", "grantee": "bob/assistant",
		"budget": map[string]any{"total": "1.00"}, "allow": map[string]any{"agents": []string{"ada/*"}}}); code != http.StatusCreated {
		t.Fatalf("mandate: %d %v", code, out)
	}
	for i := 0; i < 2; i++ {
		code, out := postJSON(t, srv.URL+"/v0/calls", keys["bob"], map[string]any{"mandate": "bob/ada-agents",
			"agent": "ada/lookup", "input": map[string]any{"name": "acme corp"}})
		if code != http.StatusOK {
			t.Fatalf("call: %d %v", code, out)
		}
	}
	earnings := func(key string) (int, string, string) {
		var out, errb bytes.Buffer
		m := &Main{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb, Getenv: func(k string) string {
			switch k {
			case "HOLON_URL":
				return srv.URL
			case "HOLON_KEY":
				return key
			}
			return ""
		}}
		return m.Run(ctx, []string{"earnings"}), out.String(), errb.String()
	}
	code, out, errs := earnings(keys["ada"])
	if code != 0 {
		t.Fatalf("holon earnings: exit %d: %s", code, errs)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	// 0.08 a call: 0.008 to the platform, 0.072 to ada, twice.
	want := []string{"ada/lookup@1.0.0", "yes", "passed", "3/3", "public,", "0/0", "hidden", "EUR", "2", "0.144", "0.00", "0.144"}
	if len(lines) != 2 || strings.Join(strings.Fields(lines[1]), " ") != strings.Join(want, " ") {
		t.Errorf("holon earnings printed:\n%s\nwant a header and: %s", out, strings.Join(want, " "))
	}
	// bob wrote nothing; a bad key is refused with the gateway's code.
	if code, out, _ := earnings(keys["bob"]); code != 0 || strings.Count(strings.TrimSpace(out), "\n") != 0 {
		t.Errorf("bob's earnings: exit %d:\n%s", code, out)
	}
	if code, _, errs := earnings("hlk_h_nonsense"); code != 1 || !strings.Contains(errs, "401") {
		t.Errorf("a bad key: exit %d: %s", code, errs)
	}
	// It is in holon help.
	var help bytes.Buffer
	(&Main{Stdout: &help, Stderr: &help, Getenv: func(string) string { return "" }}).Run(ctx, []string{"help"})
	if !strings.Contains(help.String(), "earnings") {
		t.Errorf("holon help does not list earnings:\n%s", help.String())
	}
}
