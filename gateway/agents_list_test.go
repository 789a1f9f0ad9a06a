package gateway_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"holon.dev/holon"
	"holon.dev/holon/gateway"
)

// The agents of the listing tests: prices that rank them, records that
// change the rank, and ones a mandate refuses.
var listAgents = []string{
	listAgent("acme/cheap", "1.0.0", "A cheap echo.", "[text.echo]", `{model: per_run, amount: "0.05", currency: EUR}`, "ok"),
	listAgent("acme/mid", "1.0.0", "A middle echo.", "[text.echo]", `{model: per_run, amount: "0.10", currency: EUR}`, "ok"),
	// flaky is cheaper than mid, but succeeds one run in two: 0.12 a success.
	listAgent("acme/flaky", "1.0.0", "An unreliable echo.", "[text.echo]", `{model: per_run, amount: "0.06", currency: EUR}`, "maybe"),
	// dud never succeeded: its cost per success is unknown, it ranks last.
	listAgent("acme/dud", "1.0.0", "Never works.", "[text.echo]", `{model: per_run, amount: "0.01", currency: EUR}`, "maybe"),
	listAgent("acme/usd", "1.0.0", "Priced in dollars.", "[text.other]", `{model: per_run, amount: "0.10", currency: USD}`, "ok"),
	listAgent("acme/gated", "1.0.0", "Needs a human above 0.20.", "[text.other]", `{model: per_run, amount: "0.50", currency: EUR}`, "ok"),
	listAgent("acme/pricey", "1.0.0", "Above the per-call limit.", "[text.other]", `{model: per_run, amount: "3.00", currency: EUR}`, "ok"),
	listAgent("other/outside", "1.0.0", "Not allowed by the mandate.", "[text.echo]", `{model: per_run, amount: "0.02", currency: EUR}`, "ok"),
	listAgent("acme/versions", "1.0.0", "The first version.", "[text.other]", `{model: per_run, amount: "0.30", currency: EUR}`, "ok"),
	listAgent("acme/versions", "1.1.0", "The second version.", "[text.other]", `{model: per_run, amount: "0.04", currency: EUR}`, "ok"),
}

func listAgent(id, version, summary, caps, pricing, tool string) string {
	return "id: " + id + "\nversion: " + version + "\nsummary: " + summary + "\nlicense: proprietary\ncapabilities: " + caps +
		"\ninterface: {input: {}, output: {}}\npricing: " + pricing + "\nruntime: {kind: dev, tool: " + tool + "}\n"
}

// listMandate allows acme's agents, up to 1.00 a call, a human approving
// above 0.20, with a dollar at 0.50.
const listMandate = `
id: alice/list
issuer: alice
grantee: alice/assistant
currency: EUR
budget: {total: "10.00", per_call: "1.00"}
allow: {agents: ["acme/*"]}
approval: {above: "0.20"}
fx: {USD: "0.50"}
`

// newListEngine is an engine with the listing agents, listMandate and a
// revoked mandate, where flaky has run twice (one success) and dud once
// (a failure).
func newListEngine(t *testing.T) *testEngine {
	t.Helper()
	handlers := map[string]gateway.DevHandler{
		"ok": echoHandler,
		"maybe": func(_ context.Context, in json.RawMessage, _ *gateway.Ctx) (any, error) {
			var x struct{ Fail bool }
			_ = json.Unmarshal(in, &x)
			if x.Fail {
				return nil, errors.New("asked to fail")
			}
			return map[string]any{}, nil
		},
	}
	te := newEngine(t, listAgents, handlers, listMandate, strings.Replace(listMandate, "alice/list", "alice/revoked", 1)+"revoked: true\n")
	for _, c := range []struct {
		agent string
		fail  bool
	}{{"acme/flaky", false}, {"acme/flaky", true}, {"acme/dud", true}} {
		te.call(t, gateway.CallInput{Mandate: "alice/list", Agent: c.agent, Input: json.RawMessage(`{"fail": ` + map[bool]string{true: "true", false: "false"}[c.fail] + `}`)})
	}
	return te
}

// listed is one agent of a page as the test compares it: id, worst case
// and currency, the deny code, and an "!" when it needs approval.
func listed(p gateway.AgentPage) []string {
	var out []string
	for _, l := range p.Agents {
		s := l.Version.Manifest.Ref() + " " + l.WorstCase.String() + " " + l.Currency
		if l.Denied != nil {
			s += " " + l.Denied.Code
		}
		if l.NeedsApproval {
			s += " !"
		}
		out = append(out, s)
	}
	return out
}

// Ensure that ListAgents filters by text and capability, previews
// admission under a mandate (worst case in its currency, the deny code,
// approval), ranks by cost per successful run with the allowed agents
// first, and refuses an unknown mandate, a bad limit and a bad cursor.
func TestEngine_ListAgents(t *testing.T) {
	te := newListEngine(t)
	tests := []struct {
		name string
		q    gateway.AgentQuery
		want []string
		code string
	}{
		{name: "everything, no mandate: own currencies, ranked by cost per success", q: gateway.AgentQuery{}, want: []string{
			"other/outside@1.0.0 0.02 EUR",
			"acme/versions@1.1.0 0.04 EUR", // the highest release, not 1.0.0
			"acme/cheap@1.0.0 0.05 EUR",
			"acme/mid@1.0.0 0.10 EUR",
			"acme/usd@1.0.0 0.10 USD",
			"acme/flaky@1.0.0 0.06 EUR", // 0.06 × 2 runs / 1 success = 0.12
			"acme/gated@1.0.0 0.50 EUR",
			"acme/pricey@1.0.0 3.00 EUR",
			"acme/dud@1.0.0 0.01 EUR", // never succeeded
		}},
		{name: "under a mandate: allowed first, converted; denied last with the code", q: gateway.AgentQuery{Mandate: "alice/list"}, want: []string{
			"acme/versions@1.1.0 0.04 EUR",
			"acme/cheap@1.0.0 0.05 EUR",
			"acme/usd@1.0.0 0.05 EUR", // 0.10 USD at 0.50
			"acme/mid@1.0.0 0.10 EUR",
			"acme/flaky@1.0.0 0.06 EUR",
			"acme/gated@1.0.0 0.50 EUR !",
			"acme/dud@1.0.0 0.01 EUR",
			"other/outside@1.0.0 0.02 EUR not_allowed",
			"acme/pricey@1.0.0 3.00 EUR over_per_call",
		}},
		{name: "an inactive mandate denies everything", q: gateway.AgentQuery{Mandate: "alice/revoked", Capability: "text.other"}, want: []string{
			"acme/versions@1.1.0 0.04 EUR mandate_inactive",
			"acme/usd@1.0.0 0.10 USD mandate_inactive",
			"acme/gated@1.0.0 0.50 EUR mandate_inactive",
			"acme/pricey@1.0.0 3.00 EUR mandate_inactive",
		}},
		{name: "capability", q: gateway.AgentQuery{Capability: "text.echo", Mandate: "alice/list"}, want: []string{
			"acme/cheap@1.0.0 0.05 EUR",
			"acme/mid@1.0.0 0.10 EUR",
			"acme/flaky@1.0.0 0.06 EUR",
			"acme/dud@1.0.0 0.01 EUR",
			"other/outside@1.0.0 0.02 EUR not_allowed",
		}},
		{name: "text, any case, in summaries", q: gateway.AgentQuery{Text: "ECHO"}, want: []string{
			"other/outside@1.0.0 0.02 EUR", // capability text.echo
			"acme/cheap@1.0.0 0.05 EUR",
			"acme/mid@1.0.0 0.10 EUR",
			"acme/flaky@1.0.0 0.06 EUR",
			"acme/dud@1.0.0 0.01 EUR",
		}},
		{name: "text in ids", q: gateway.AgentQuery{Text: "acme/usd"}, want: []string{"acme/usd@1.0.0 0.10 USD"}},
		{name: "text and capability", q: gateway.AgentQuery{Text: "middle", Capability: "text.echo"}, want: []string{"acme/mid@1.0.0 0.10 EUR"}},
		{name: "nothing matches", q: gateway.AgentQuery{Text: "no such words"}},
		{name: "unknown mandate", q: gateway.AgentQuery{Mandate: "alice/none"}, code: holon.CodeNotFound},
		{name: "limit above the maximum", q: gateway.AgentQuery{Limit: gateway.MaxAgentLimit + 1}, code: holon.CodeInvalidRequest},
		{name: "negative limit", q: gateway.AgentQuery{Limit: -1}, code: holon.CodeInvalidRequest},
		{name: "cursor not base64", q: gateway.AgentQuery{Cursor: "%%%"}, code: holon.CodeInvalidRequest},
		{name: "cursor with an exponent", q: gateway.AgentQuery{Cursor: "YSAxZTk5OTk5OTkgYWNtZS94"}, code: holon.CodeInvalidRequest}, // "a 1e9999999 acme/x"
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			page, err := te.eng.ListAgents(context.Background(), tt.q)
			if tt.code != "" {
				if holon.ErrorCode(err) != tt.code {
					t.Fatalf("error %v, want %s", err, tt.code)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := listed(page); !slices.Equal(got, tt.want) {
				t.Errorf("listed\n  %s\nwant\n  %s", strings.Join(got, "\n  "), strings.Join(tt.want, "\n  "))
			}
			if page.Total != len(tt.want) || page.Next != "" {
				t.Errorf("total %d, next %q; want %d, no next", page.Total, page.Next, len(tt.want))
			}
			if want := []string{"text.echo", "text.other"}; !slices.Equal(page.Capabilities, want) {
				t.Errorf("capabilities %v, want %v", page.Capabilities, want)
			}
		})
	}
}

// Ensure that the denial a listing shows carries the engine's message,
// and that a call by capability picks the first allowed agent the
// listing ranks (one ranking for both).
func TestEngine_ListAgents_RankIsTheCallsRank(t *testing.T) {
	te := newListEngine(t)
	page, err := te.eng.ListAgents(context.Background(), gateway.AgentQuery{Mandate: "alice/list", Capability: "text.echo", Text: "echo"})
	if err != nil {
		t.Fatal(err)
	}
	last := page.Agents[len(page.Agents)-1]
	if last.Denied == nil || !strings.Contains(last.Denied.Msg, "other/outside") {
		t.Errorf("last %+v, want other/outside denied with a message naming it", last)
	}
	// By worst case dud (0.01) would come first; it never succeeded, and
	// a call by capability passes it over, as the listing ranks it.
	res := te.call(t, gateway.CallInput{Mandate: "alice/list", Capability: "text.echo", Input: json.RawMessage(`{}`)})
	if res.Receipt.Agent == nil || *res.Receipt.Agent != page.Agents[0].Version.Manifest.Ref() {
		t.Errorf("call by capability ran %v, the listing ranks %v first", agentOf(res), listed(page))
	}
}

// Ensure that paging through a listing with every limit, by the cursor
// each page answers, lists every agent once, in rank order, with no gap,
// and that a cursor still works after its agent is yanked.
func TestEngine_ListAgents_Paging(t *testing.T) {
	te := newListEngine(t)
	ctx := context.Background()
	for _, mandate := range []string{"", "alice/list"} {
		full, err := te.eng.ListAgents(ctx, gateway.AgentQuery{Mandate: mandate})
		if err != nil {
			t.Fatal(err)
		}
		want := listed(full)
		for limit := 1; limit <= len(want)+1; limit++ {
			var got []string
			cursor := ""
			for pages := 0; ; pages++ {
				if pages > len(want) {
					t.Fatalf("mandate %q, limit %d: more pages than agents", mandate, limit)
				}
				p, err := te.eng.ListAgents(ctx, gateway.AgentQuery{Mandate: mandate, Limit: limit, Cursor: cursor})
				if err != nil {
					t.Fatalf("mandate %q, limit %d, cursor %q: %v", mandate, limit, cursor, err)
				}
				if len(p.Agents) > limit || p.Total != len(want) {
					t.Fatalf("mandate %q, limit %d: page of %d, total %d", mandate, limit, len(p.Agents), p.Total)
				}
				got = append(got, listed(p)...)
				if p.Next == "" {
					break
				}
				cursor = p.Next
			}
			if !slices.Equal(got, want) {
				t.Errorf("mandate %q, limit %d: pages list\n  %s\nwant\n  %s", mandate, limit, strings.Join(got, "\n  "), strings.Join(want, "\n  "))
			}
		}
	}

	first, err := te.eng.ListAgents(ctx, gateway.AgentQuery{Limit: 3})
	if err != nil {
		t.Fatal(err)
	}
	te.reg.Remove(first.Agents[2].Version.Manifest.Ref()) // acme/cheap, the page's last
	next, err := te.eng.ListAgents(ctx, gateway.AgentQuery{Limit: 3, Cursor: first.Next})
	if err != nil {
		t.Fatal(err)
	}
	if got := listed(next); len(got) == 0 || got[0] != "acme/mid@1.0.0 0.10 EUR" {
		t.Errorf("after yanking the cursor's agent, the next page is %v, want it to start at acme/mid", got)
	}
	// Yanking 1.1.0 lists 1.0.0 again.
	te.reg.Remove("acme/versions@1.1.0")
	p, _ := te.eng.ListAgents(ctx, gateway.AgentQuery{Text: "acme/versions"})
	if got := listed(p); !slices.Equal(got, []string{"acme/versions@1.0.0 0.30 EUR"}) {
		t.Errorf("after yanking 1.1.0: %v, want 1.0.0", got)
	}
}

// agentOf is the agent version a call's receipt names, or "none".
func agentOf(res *gateway.CallResult) string {
	if res.Receipt == nil || res.Receipt.Agent == nil {
		return "none"
	}
	return *res.Receipt.Agent
}
