package appliance_test

import (
	"net/http"
	"testing"
)

// Ensure that a paid call to the third level of a chain of published forks
// settles the royalties of manifest.md §8 exactly, in integer micro-units:
// on 0.035, holon 0.0035, the creator 0.0252, the first upstream (forks
// rate 0.2) 0.005355, the second (0.15) 0.000945; and that capability
// routing reaches published agents only under allow.published: true.
func TestPublish_ForkChainSettlesRoyalties(t *testing.T) {
	srv := newAuthorServer(t)
	g := newGitHubApp(t, withAuthorServer(srv))
	acme, lena, bob := g.author(201, "acme"), g.author(101, "lena"), g.author(103, "bob")
	endpoint := set("runtime.endpoint", srv.srv.URL+"/run")
	acme.human.must(201, "POST", "/v0/agents", pubManifest("acme/base", "1.0.0", proprietary, endpoint,
		set("royalties.forks", "0.15"), set("pricing.amount", "0.02")))
	lena.human.must(201, "POST", "/v0/agents", pubManifest("lena/fork", "1.0.0", proprietary, endpoint,
		set("royalties.forks", "0.2"), set("lineage.fork_of", "acme/base@1.0.0")))
	bob.human.must(201, "POST", "/v0/agents", pubManifest("bob/fork2", "1.0.0", proprietary, endpoint,
		set("pricing.amount", "0.035"), set("lineage.fork_of", "lena/fork@1.0.0"), set("capabilities", []string{"test.forked"})))

	carol := g.signup("carol")
	carol.createMandate("closed", map[string]any{"budget": map[string]any{"total": "1.00"},
		"allow": map[string]any{"agents": []string{"bob/*"}, "capabilities": []string{"*"}}})
	carol.createMandate("open", map[string]any{"budget": map[string]any{"total": "1.00"},
		"allow": map[string]any{"agents": []string{"bob/*"}, "capabilities": []string{"*"}, "published": true}})

	before := len(srv.authorizations("/run"))
	st, out := carol.human.do("POST", "/v0/calls", map[string]any{"mandate": "carol/closed", "capability": "test.forked", "input": map[string]any{"text": "x"}})
	if st == http.StatusOK || len(srv.authorizations("/run")) != before {
		t.Errorf("capability call without allow.published: %d %v, want it refused before the agent", st, out)
	}
	out = carol.human.must(200, "POST", "/v0/calls", map[string]any{"mandate": "carol/open", "capability": "test.forked", "input": map[string]any{"text": "x"}})
	rc := out["receipt"].(map[string]any)
	if rc["agent"] != "bob/fork2@1.0.0" {
		t.Errorf("capability call with allow.published reached %v", rc["agent"])
	}
	want := map[string]string{"holon": "0.0035", "bob": "0.0252", "lena": "0.005355", "acme": "0.000945"}
	splits := map[string]string{}
	for _, s := range rc["splits"].([]any) {
		sp := s.(map[string]any)
		splits[str(sp["to"])] = str(sp["amount"])
	}
	if len(splits) != len(want) {
		t.Errorf("splits %v, want %v", splits, want)
	}
	for acct, amt := range want {
		if splits[acct] != amt {
			t.Errorf("split to %s: %s, want %s", acct, splits[acct], amt)
		}
	}
	// By name, no allow.published needed; the balances are the journal's.
	carol.human.must(200, "POST", "/v0/calls", map[string]any{"mandate": "carol/closed", "agent": "bob/fork2", "input": map[string]any{"text": "y"}})
	balances := map[string]string{}
	for _, a := range g.admin().must(200, "GET", "/v0/accounts", nil)["accounts"].([]any) {
		av := a.(map[string]any)
		balances[str(av["account"])] = str(av["balance"])
	}
	for acct, amt := range map[string]string{"carol": "4.93", "holon": "0.007", "bob": "5.0504", "lena": "5.01071", "acme": "5.00189"} {
		if balances[acct] != amt {
			t.Errorf("balance of %s: %s, want %s", acct, balances[acct], amt)
		}
	}
}
