package appliance_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// listingLine is one agent of a listing as both wires must agree on it:
// id, version, worst case and currency, record, and the deny code.
func listingLine(a map[string]any) string {
	rec := obj(a["record"])
	s := str(a["id"]) + "@" + str(a["version"]) + " " + str(a["worst_case"]) + " " + str(a["currency"]) +
		" runs " + str(rec["runs"]) + "/" + str(rec["succeeded"])
	if d := obj(a["denied"]); d != nil {
		s += " denied " + str(d["code"])
	}
	return s
}

// Ensure that GET /v0/agents?mandate= (paged by its cursor, and as the
// mandate's agent key) and the MCP tool search_agents under a key of the
// same mandate list the same agents, in the same order, with the same
// previews: both are Engine.ListAgents.
func TestListAgents_APIAndMCPAgree(t *testing.T) {
	ta := newHostedApp(t)
	ann := ta.signup("ann")
	labMandate(ann)
	// A measured record, so the rank is not only the price.
	for _, in := range []string{`{"text": "a"}`, `{"text": "b"}`} {
		ann.human.must(http.StatusOK, "POST", "/v0/calls", map[string]any{"mandate": "ann/lab", "agent": "test-lab/echo", "input": json.RawMessage(in)})
	}
	key, _ := ann.newKey("ann/lab", false)

	full := ann.human.must(http.StatusOK, "GET", "/v0/agents?mandate=ann/lab", nil)
	var want []string
	for _, a := range full["agents"].([]any) {
		want = append(want, listingLine(obj(a)))
	}
	if len(want) < 5 || full["next"] != "" || int(full["total"].(float64)) != len(want) {
		t.Fatalf("GET /v0/agents?mandate=ann/lab: %d agents, next %v, total %v", len(want), full["next"], full["total"])
	}
	if !strings.Contains(strings.Join(want, "\n"), "denied over_per_call") || !strings.Contains(strings.Join(want, "\n"), "runs 2/2") {
		t.Errorf("the listing has no denied agent or no record:\n%s", strings.Join(want, "\n"))
	}

	var paged []string
	cursor := ""
	for range len(want) {
		q := url.Values{"mandate": {"ann/lab"}, "limit": {"3"}}
		if cursor != "" {
			q.Set("cursor", cursor)
		}
		page := ann.human.must(http.StatusOK, "GET", "/v0/agents?"+q.Encode(), nil)
		for _, a := range page["agents"].([]any) {
			paged = append(paged, listingLine(obj(a)))
		}
		if cursor = str(page["next"]); cursor == "" {
			break
		}
	}
	if !slices.Equal(paged, want) {
		t.Errorf("paged by 3:\n%s\nwant\n%s", strings.Join(paged, "\n"), strings.Join(want, "\n"))
	}

	var asAgent []string
	for _, a := range ta.as(key).must(http.StatusOK, "GET", "/v0/agents", nil)["agents"].([]any) {
		asAgent = append(asAgent, listingLine(obj(a)))
	}
	if !slices.Equal(asAgent, want) {
		t.Errorf("GET /v0/agents with the agent key:\n%s\nwant\n%s", strings.Join(asAgent, "\n"), strings.Join(want, "\n"))
	}

	s := connectMCP(t, ta.srv.URL+"/mcp", key, nil)
	out := s.ok("search_agents", map[string]any{})
	var mcp []string
	for _, a := range out["agents"].([]any) {
		mcp = append(mcp, listingLine(obj(a)))
	}
	if !slices.Equal(mcp, want) || int(out["total"].(float64)) != len(want) || out["next"] != nil {
		t.Errorf("search_agents (total %v, next %v):\n%s\nwant\n%s", out["total"], out["next"], strings.Join(mcp, "\n"), strings.Join(want, "\n"))
	}

	// The same with a filter, and the bad paging arguments refused.
	api := ann.human.must(http.StatusOK, "GET", "/v0/agents?mandate=ann/lab&capability=test.echo", nil)
	found := s.ok("search_agents", map[string]any{"capability": "test.echo"})
	if a, b := api["agents"].([]any), found["agents"].([]any); len(a) != 1 || len(b) != 1 || listingLine(obj(a[0])) != listingLine(obj(b[0])) {
		t.Errorf("capability test.echo: API %v, MCP %v", a, b)
	}
	for _, q := range []string{"limit=0", "limit=201", "limit=x", "cursor=nope"} {
		if st, out := ann.human.do("GET", "/v0/agents?"+q, nil); st != http.StatusBadRequest || errorCode(out) != "invalid_request" {
			t.Errorf("GET /v0/agents?%s: %d %v, want 400 invalid_request", q, st, out)
		}
	}
	if res, out := s.call("search_agents", map[string]any{"cursor": "nope"}); !res.IsError || obj(out["error"])["code"] != "invalid_request" {
		t.Errorf("search_agents with a bad cursor: %v", out)
	}
}

// Ensure that the console's catalogue lists the agents GET /v0/agents
// lists, in its order, and offers every capability on offer in its filter
// even when the page is filtered by one.
func TestListAgents_ConsoleCatalogue(t *testing.T) {
	ta := newHostedApp(t)
	ann := ta.signup("ann")
	b := signIn(t, ta, ann.humanKey)
	rows := regexp.MustCompile(`<tr><td><a href="/console/agents/([^"]+)">`)
	ids := func(body string) []string {
		var out []string
		for _, m := range rows.FindAllStringSubmatch(body, -1) {
			out = append(out, m[1])
		}
		return out
	}
	var want []string
	for _, a := range ann.human.must(http.StatusOK, "GET", "/v0/agents", nil)["agents"].([]any) {
		want = append(want, str(obj(a)["id"]))
	}
	resp, body := b.get("/console/agents")
	if got := ids(body); resp.StatusCode != http.StatusOK || !slices.Equal(got, want) {
		t.Errorf("console catalogue: %d\n%v\nwant the API's\n%v", resp.StatusCode, got, want)
	}
	resp, body = b.get("/console/agents?capability=test.echo")
	if got := ids(body); resp.StatusCode != http.StatusOK || !slices.Equal(got, []string{"test-lab/echo"}) {
		t.Errorf("console catalogue by test.echo: %d %v", resp.StatusCode, got)
	}
	for _, c := range []string{"test.echo", "extraction.table"} {
		if !strings.Contains(body, `<option value="`+c+`"`) {
			t.Errorf("filtered by test.echo, the capability filter does not offer %s", c)
		}
	}
}
