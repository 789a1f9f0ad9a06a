package appliance_test

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

// approvalIDs lists the ids of an approvals answer, and its next cursor.
func approvalIDs(out map[string]any) (string, string) {
	list, _ := out["approvals"].([]any)
	var ids []string
	for _, a := range list {
		ids = append(ids, str(a.(map[string]any)["id"]))
	}
	next, _ := out["next"].(string)
	return strings.Join(ids, " "), next
}

// Ensure that GET /v0/approvals shows a human the approvals of all its
// mandates merged newest first, and nobody else's; an agent key those of
// its mandate; that status and mandate filter them, that limit and before
// page them with next losing nothing, and that a bad cursor, limit or
// status is a 400 invalid_request.
func TestAPI_Approvals_Pages(t *testing.T) {
	ta := newHostedApp(t)
	ann, bob := ta.signup("ann"), ta.signup("bob")
	held := map[string]any{"budget": map[string]any{"total": "5.00"}, "approval": map[string]any{"above": "0"},
		"allow": map[string]any{"agents": []string{"holon-labs/*"}}}
	ann.createMandate("held", held)
	ann.createMandate("other", held)
	bob.createMandate("held", held)
	hold := func(c client, mandate string) string {
		t.Helper()
		return str(c.must(http.StatusAccepted, "POST", "/v0/calls", lookup(mandate))["approval"].(map[string]any)["id"])
	}
	var ids []string
	for i, m := range []string{"ann/held", "ann/other", "bob/held", "ann/held", "ann/other", "ann/held"} {
		c := ann.human
		if i == 2 {
			c = bob.human
		}
		ids = append(ids, hold(c, m))
	}
	// ids: ann/held 0 3 5, ann/other 1 4, bob/held 2. One of ann's is
	// rejected: it leaves the default (open) listing.
	ann.human.must(http.StatusOK, "POST", "/v0/approvals/"+ids[3], map[string]any{"decision": "reject"})
	join := func(is ...int) string {
		var out []string
		for _, i := range is {
			out = append(out, ids[i])
		}
		return strings.Join(out, " ")
	}
	agentKey, _ := ann.newAgentKey("ann/other")

	for _, tt := range []struct {
		name       string
		c          client
		query      string
		want, next string
	}{
		{"ann, open", ann.human, "", join(5, 4, 1, 0), ""},
		{"ann, all", ann.human, "?status=all", join(5, 4, 3, 1, 0), ""},
		{"ann, rejected", ann.human, "?status=rejected", join(3), ""},
		{"ann, one mandate", ann.human, "?mandate=ann/held&status=all", join(5, 3, 0), ""},
		{"ann, first page", ann.human, "?limit=2", join(5, 4), ids[4]},
		{"ann, second page", ann.human, "?limit=2&before=" + ids[4], join(1, 0), ""},
		{"ann, a page that ends at the last one", ann.human, "?limit=4", join(5, 4, 1, 0), ""},
		{"bob", bob.human, "", join(2), ""},
		{"ann's agent key", agentKey, "?status=all", join(4, 1), ""},
		{"bob's agent key", bob.agent, "", "", ""},
	} {
		got, next := approvalIDs(tt.c.must(http.StatusOK, "GET", "/v0/approvals"+tt.query, nil))
		if got != tt.want || next != tt.next {
			t.Errorf("%s: %q next %q, want %q next %q", tt.name, got, next, tt.want, tt.next)
		}
	}

	for _, q := range []string{"?before=r1", "?before=a", "?limit=0", "?limit=201", "?limit=x", "?status=open"} {
		if status, out := ann.human.do("GET", "/v0/approvals"+q, nil); status != http.StatusBadRequest || errorCode(out) != "invalid_request" {
			t.Errorf("GET /v0/approvals%s: %d %s, want 400 invalid_request", q, status, errorCode(out))
		}
	}
}

// Ensure that on a dev gateway GET /v0/approvals lists every mandate's
// approvals, and pages them.
func TestAPI_Approvals_Dev(t *testing.T) {
	ta := newTestApp(t, "", (&fixedClock{now: time.Date(2026, 10, 1, 9, 0, 0, 0, time.UTC)}).Now)
	var ids []string
	for range 2 {
		status, held := ta.do("POST", "/v0/calls", map[string]any{
			"mandate": "alice/bookkeeping-q4", "agent": "holon-labs/invoice-pipeline", "input": map[string]any{"text": blogInvoice},
		})
		if status != http.StatusAccepted {
			t.Fatalf("POST /v0/calls: %d %v", status, held)
		}
		ids = append(ids, str(held["approval"].(map[string]any)["id"]))
	}
	status, out := ta.do("GET", "/v0/approvals", nil)
	if got, next := approvalIDs(out); status != http.StatusOK || got != ids[1]+" "+ids[0] || next != "" {
		t.Errorf("dev listing: %d %q next %q, want %s %s", status, got, next, ids[1], ids[0])
	}
	status, out = ta.do("GET", "/v0/approvals?limit=1&before="+ids[1], nil)
	if got, next := approvalIDs(out); status != http.StatusOK || got != ids[0] || next != "" {
		t.Errorf("dev second page: %d %q next %q, want %s", status, got, next, ids[0])
	}
}
