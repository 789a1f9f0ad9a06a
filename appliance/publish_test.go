package appliance_test

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"holon.dev/holon"
	"holon.dev/holon/appliance/accounts"
	"holon.dev/holon/appliance/publishing"
	"holon.dev/holon/appliance/signin"
	"holon.dev/holon/appliance/web"
)

// publicAddr is a public address the fake DNS gives published hosts; no
// test connects to it.
const publicAddr = "93.184.216.34"

// pubManifest is a valid open-source webhook manifest of id, its source
// in <ns>/agents, its endpoint on agents.<ns>.example; edit changes it.
func pubManifest(id, version string, edit ...func(m map[string]any)) map[string]any {
	ns, _, _ := strings.Cut(id, "/")
	m := map[string]any{
		"id": id, "version": version, "summary": "A published test agent.",
		"license":      "MIT",
		"source":       map[string]any{"repository": "https://github.com/" + ns + "/agents", "commit": "0123456789abcdef0123456789abcdef01234567"},
		"capabilities": []string{"test.published"},
		"interface": map[string]any{
			"input":  map[string]any{"type": "object", "required": []string{"text"}, "properties": map[string]any{"text": map[string]any{"type": "string"}}},
			"output": map[string]any{"type": "object"},
		},
		"pricing": map[string]any{"model": "per_run", "amount": "0.05", "currency": "EUR"},
		"runtime": map[string]any{"kind": "webhook", "endpoint": "https://agents." + ns + ".example/run"},
	}
	for _, e := range edit {
		e(m)
	}
	return m
}

func set(path string, v any) func(map[string]any) {
	return func(m map[string]any) {
		keys := strings.Split(path, ".")
		cur := m
		for _, k := range keys[:len(keys)-1] {
			next, ok := cur[k].(map[string]any)
			if !ok {
				next = map[string]any{}
				cur[k] = next
			}
			cur = next
		}
		if v == nil {
			delete(cur, keys[len(keys)-1])
		} else {
			cur[keys[len(keys)-1]] = v
		}
	}
}

func proprietary(m map[string]any) { m["license"] = "proprietary"; delete(m, "source") }

func repo(r string) func(map[string]any) {
	return set("source.repository", "https://github.com/"+r)
}

// publishWorld is a gateway with lena signed in with GitHub (id 101), her
// repositories, someone else's, and two organisations: acme-org lists lena
// as a public member, shy-org as a private one.
func publishWorld(t *testing.T) (*ghApp, account) {
	g := newGitHubApp(t)
	lena := g.author(101, "lena")
	g.gh.AddUser(102, "bob-gh", "bob@users.example.com", true)
	g.gh.AddRepo("lena", "agents", false)
	g.gh.AddRepo("lena", "secret", true)
	g.gh.AddRepo("bob-gh", "agents", false)
	g.gh.AddOrg(900, "acme-org", map[string]bool{"lena": true})
	g.gh.AddOrg(901, "shy-org", map[string]bool{"lena": false})
	g.gh.AddRepo("acme-org", "tools", false)
	g.gh.AddRepo("shy-org", "tools", false)
	g.dns.set("agents.lena.example", publicAddr)
	g.dns.set("internal.lena.example", "10.1.2.3")
	g.dns.set("mixed.lena.example", publicAddr, "192.168.1.5")
	return g, lena
}

// Ensure that every rule of "Publishing agents" is checked, each refusal
// with its own code, status and a message that says what to fix, and that
// a refused publish lists and stores nothing.
func TestPublish_Rules(t *testing.T) {
	g, lena := publishWorld(t)
	carol := g.signup("carol") // an email account: not linked to GitHub
	agent := lena.agent
	cases := []struct {
		name     string
		who      client
		manifest map[string]any
		status   int
		code     string
		says     string
	}{
		{"open source, own repository", lena.human, pubManifest("lena/ok", "1.0.0"), 201, "", ""},
		{"open source, organisation that lists her", lena.human, pubManifest("lena/org", "1.0.0", repo("acme-org/tools")), 201, "", ""},
		{"proprietary, nothing to check", lena.human, pubManifest("lena/closed", "1.0.0", proprietary), 201, "", ""},
		{"mcp runtime", lena.human, pubManifest("lena/mcp", "1.0.0", set("runtime", map[string]any{"kind": "mcp", "endpoint": "https://agents.lena.example/mcp", "tool": "run"})), 201, "", ""},
		{"outside her namespace", lena.human, pubManifest("bob/ok", "1.0.0"), 403, publishing.CodeNotYourNamespace, "publish it as lena/ok"},
		{"account not linked to GitHub", carol.human, pubManifest("carol/ok", "1.0.0"), 403, publishing.CodeGitHubNotLinked, "sign in with GitHub"},
		{"an agent key", agent, pubManifest("lena/ok2", "1.0.0"), 403, web.CodeForbidden, "human key"},
		{"license not OSI-approved", lena.human, pubManifest("lena/bad", "1.0.0", set("license", "WTFPL")), 400, holon.CodeInvalidManifest, "license"},
		{"open source without source", lena.human, pubManifest("lena/bad", "1.0.0", set("source", nil)), 400, holon.CodeInvalidManifest, "source"},
		{"fork royalty above 0.5", lena.human, pubManifest("lena/bad", "1.0.0", set("royalties.forks", "0.6")), 400, holon.CodeInvalidManifest, "royalties.forks"},
		{"unknown field", lena.human, pubManifest("lena/bad", "1.0.0", set("colour", "blue")), 400, holon.CodeInvalidManifest, "colour"},
		{"dev runtime", lena.human, pubManifest("lena/bad", "1.0.0", set("runtime", map[string]any{"kind": "dev", "tool": "echo"})), 400, publishing.CodeRuntimeNotPublished, "mcp or webhook"},
		{"http endpoint", lena.human, pubManifest("lena/bad", "1.0.0", set("runtime.endpoint", "http://agents.lena.example/run")), 400, publishing.CodeEndpointNotHTTPS, "https"},
		{"credentials in the endpoint", lena.human, pubManifest("lena/bad", "1.0.0", set("runtime.endpoint", "https://u:p@agents.lena.example/run")), 400, holon.CodeInvalidManifest, "credential"},
		{"endpoint on a private address", lena.human, pubManifest("lena/bad", "1.0.0", set("runtime.endpoint", "https://internal.lena.example/run")), 400, publishing.CodeEndpointNotPublic, "10.1.2.3"},
		{"endpoint resolving to a public and a private address", lena.human, pubManifest("lena/bad", "1.0.0", set("runtime.endpoint", "https://mixed.lena.example/run")), 400, publishing.CodeEndpointNotPublic, "192.168.1.5"},
		{"endpoint on loopback", lena.human, pubManifest("lena/bad", "1.0.0", set("runtime.endpoint", "https://127.0.0.1:8443/run")), 400, publishing.CodeEndpointNotPublic, "loopback"},
		{"endpoint on cloud metadata", lena.human, pubManifest("lena/bad", "1.0.0", set("runtime.endpoint", "https://169.254.169.254/run")), 400, publishing.CodeEndpointNotPublic, "metadata"},
		{"endpoint that does not resolve", lena.human, pubManifest("lena/bad", "1.0.0", set("runtime.endpoint", "https://nowhere.lena.example/run")), 400, publishing.CodeEndpointUnresolved, "nowhere.lena.example"},
		{"repository missing", lena.human, pubManifest("lena/bad", "1.0.0", repo("lena/nothing")), 422, publishing.CodeRepositoryNotFound, "private or does not exist"},
		{"repository private", lena.human, pubManifest("lena/bad", "1.0.0", repo("lena/secret")), 422, publishing.CodeRepositoryNotFound, "private"},
		{"repository owned by someone else", lena.human, pubManifest("lena/bad", "1.0.0", repo("bob-gh/agents")), 403, publishing.CodeRepositoryNotYours, "bob-gh"},
		{"organisation without public membership", lena.human, pubManifest("lena/bad", "1.0.0", repo("shy-org/tools")), 403, publishing.CodeNotPublicMember, "public member"},
		{"fork of a version not listed", lena.human, pubManifest("lena/bad", "1.0.0", set("lineage.fork_of", "acme/base@1.0.0")), 400, holon.CodeInvalidManifest, "lineage.fork_of"},
		{"the same version again", lena.human, pubManifest("lena/ok", "1.0.0"), 409, publishing.CodeVersionExists, "immutable"},
	}
	for _, c := range cases {
		st, out := c.who.do("POST", "/v0/agents", c.manifest)
		if st != c.status || errorCode(out) != c.code || c.says != "" && !strings.Contains(strings.ToLower(str(out)), strings.ToLower(c.says)) {
			t.Errorf("%s: %d %v, want %d %s saying %q", c.name, st, out, c.status, c.code, c.says)
		}
		ref := fmt.Sprint(c.manifest["id"], "@", c.manifest["version"])
		if _, listed := g.app.Engine().Registry().Get(ref); listed != (c.status == 201 || c.code == publishing.CodeVersionExists) {
			t.Errorf("%s: listed %v after %d", c.name, listed, st)
		}
	}
	if st, out := lena.human.do("POST", "/v0/agents", nil); st != 400 || errorCode(out) != holon.CodeInvalidManifest {
		t.Errorf("empty body: %d %v", st, out)
	}
	if st, _, raw := lena.human.raw("POST", "/v0/agents", []byte(`{"id": `)); st != 400 {
		t.Errorf("broken JSON: %d %s", st, raw)
	}
	// GitHub rate-limited: try again later, with when.
	g.gh.SetRateLimited(true)
	st, out := lena.human.do("POST", "/v0/agents", pubManifest("lena/later", "1.0.0"))
	if st != 503 || errorCode(out) != signin.CodeGitHubUnavailable || !strings.Contains(str(out), "rate limit") || !strings.Contains(str(out), "try again in") {
		t.Errorf("rate-limited GitHub: %d %v", st, out)
	}
	g.gh.SetRateLimited(false)
	g.gh.SetDown(true)
	if st, out := lena.human.do("POST", "/v0/agents", pubManifest("lena/later", "1.0.0")); st != 503 || errorCode(out) != signin.CodeGitHubUnavailable {
		t.Errorf("GitHub down: %d %v", st, out)
	}
	g.gh.SetDown(false)
	// The publish-time reads go with the app's credentials, never a user token.
	for _, a := range g.gh.Authorizations("/api/v3/repos/lena/agents") {
		if !strings.HasPrefix(a, "Basic ") {
			t.Errorf("repository read with %q, want the app's Basic credentials", a)
		}
	}
	// The proprietary label, wherever the agent is listed.
	list := g.anonymous().must(200, "GET", "/v0/agents?q=published", nil)
	labels := map[string]any{}
	for _, a := range list["agents"].([]any) {
		av := a.(map[string]any)
		labels[str(av["id"])] = av["proprietary"]
	}
	if len(labels) != 4 || labels["lena/closed"] != true || labels["lena/ok"] != nil {
		t.Errorf("listing: %v, want 4 published agents, lena/closed labelled proprietary", labels)
	}
}

// Ensure that a fork chain is bounded: 8 levels of forks publish, a 9th is
// refused; and that a fork of a yanked version is refused.
func TestPublish_ForkChainBounded(t *testing.T) {
	g, lena := publishWorld(t)
	prev := ""
	for i := 0; i <= 9; i++ {
		m := pubManifest(fmt.Sprintf("lena/f%d", i), "1.0.0", proprietary, set("royalties.forks", "0.1"))
		if prev != "" {
			m["lineage"] = map[string]any{"fork_of": prev}
		}
		st, out := lena.human.do("POST", "/v0/agents", m)
		if i <= 8 && st != 201 {
			t.Fatalf("fork level %d: %d %v", i, st, out)
		}
		if i == 9 && (st != 400 || !strings.Contains(str(out), "longer than 8")) {
			t.Errorf("a 9th level: %d %v, want the chain refused", st, out)
		}
		prev = fmt.Sprintf("lena/f%d@1.0.0", i)
	}
	lena.human.must(200, "DELETE", "/v0/agents/lena/f0@1.0.0", nil)
	st, out := lena.human.do("POST", "/v0/agents", pubManifest("lena/g", "1.0.0", proprietary, set("lineage.fork_of", "lena/f0@1.0.0")))
	if st != 400 || !strings.Contains(str(out), "not a listed version") {
		t.Errorf("fork of a yanked version: %d %v", st, out)
	}
	// The forks of the yanked version stay listed, chains and all, after a restart.
	g.restart()
	if v, ok := g.app.Engine().Registry().Get("lena/f8@1.0.0"); !ok || len(v.Chain) != 8 {
		t.Errorf("after a restart, lena/f8: listed %v, chain %v", ok, v)
	}
	if _, ok := g.app.Engine().Registry().Get("lena/f0@1.0.0"); ok {
		t.Error("the yanked version is listed again after a restart")
	}
}

// Ensure that a yank stops listing a version and never frees its number:
// publishing it again is refused, before and after a restart, and only the
// author yanks.
func TestPublish_YankNeverFreesTheNumber(t *testing.T) {
	g, lena := publishWorld(t)
	bob := g.author(103, "bob")
	lena.human.must(201, "POST", "/v0/agents", pubManifest("lena/tool", "1.0.0"))
	lena.human.must(201, "POST", "/v0/agents", pubManifest("lena/tool", "1.1.0"))
	if st, out := bob.human.do("DELETE", "/v0/agents/lena/tool@1.1.0", nil); st != 404 {
		t.Errorf("someone else's yank: %d %v", st, out)
	}
	if st, out := lena.human.do("DELETE", "/v0/agents/lena/tool", nil); st != 400 || !strings.Contains(str(out), "@<version>") {
		t.Errorf("yank without a version: %d %v", st, out)
	}
	if st, _ := lena.human.do("DELETE", "/v0/agents/lena/tool@9.9.9", nil); st != 404 {
		t.Errorf("yank of a version never published: %d", st)
	}
	if st, out := lena.human.do("DELETE", "/v0/agents/holon-labs/csv-profile@1.0.0", nil); st != 404 {
		t.Errorf("yank of a shipped agent: %d %v", st, out)
	}
	lena.human.must(200, "DELETE", "/v0/agents/lena/tool@1.1.0", nil)
	if d := g.anonymous().must(200, "GET", "/v0/agents/lena/tool", nil); d["manifest"].(map[string]any)["version"] != "1.0.0" {
		t.Errorf("after the yank, lena/tool resolves to %v", d["manifest"])
	}
	if st, out := lena.human.do("DELETE", "/v0/agents/lena/tool@1.1.0", nil); st != 409 || errorCode(out) != accounts.CodeAlreadyYanked {
		t.Errorf("second yank: %d %v", st, out)
	}
	if st, out := lena.human.do("POST", "/v0/agents", pubManifest("lena/tool", "1.1.0")); st != 409 || errorCode(out) != publishing.CodeVersionExists || !strings.Contains(str(out), "never frees") {
		t.Errorf("the yanked number again: %d %v", st, out)
	}
	g.restart()
	if _, ok := g.app.Engine().Registry().Get("lena/tool@1.1.0"); ok {
		t.Error("the yanked version is listed after a restart")
	}
	if _, ok := g.app.Engine().Registry().Get("lena/tool@1.0.0"); !ok {
		t.Error("the published version is not listed after a restart")
	}
	if st, out := lena.human.do("POST", "/v0/agents", pubManifest("lena/tool", "1.1.0")); st != 409 || errorCode(out) != publishing.CodeVersionExists {
		t.Errorf("the yanked number after a restart: %d %v", st, out)
	}
	// The operator's yank of a published version holds too.
	g.admin().must(200, "POST", "/v0/admin/agents/lena/tool@1.0.0/yank", map[string]any{"reason": "abuse"})
	if st, out := lena.human.do("DELETE", "/v0/agents/lena/tool@1.0.0", nil); st != 409 || errorCode(out) != accounts.CodeAlreadyYanked {
		t.Errorf("yank after the operator's: %d %v", st, out)
	}
	g.restart()
	if _, ok := g.app.Engine().Registry().Get("lena/tool@1.0.0"); ok {
		t.Error("the operator's yank did not survive a restart")
	}
}

// Ensure that an endpoint that resolved to a public address at publish
// time and resolves to a private one later (DNS rebinding) is refused at
// call time, unbilled.
func TestPublish_RebindingRefusedAtCallTime(t *testing.T) {
	g, lena := publishWorld(t)
	g.dns.set("rebind.lena.example", publicAddr)
	lena.human.must(201, "POST", "/v0/agents", pubManifest("lena/rebind", "1.0.0", proprietary,
		set("runtime.endpoint", "https://rebind.lena.example/run")))
	g.dns.set("rebind.lena.example", "10.0.0.7")
	carol := g.signup("carol")
	carol.createMandate("pub", map[string]any{"budget": map[string]any{"total": "1.00"},
		"allow": map[string]any{"agents": []string{"lena/*"}}})
	st, out := carol.human.do("POST", "/v0/calls", map[string]any{"mandate": "carol/pub", "agent": "lena/rebind", "input": map[string]any{"text": "hi"}})
	rc, _ := out["receipt"].(map[string]any)
	if st != http.StatusBadGateway || errorCode(out) != holon.CodeRuntimeUnavailable || !strings.Contains(str(out), "10.0.0.7") || rc["billed"] != false {
		t.Errorf("call after rebinding: %d %v, want runtime_unavailable naming 10.0.0.7, unbilled", st, out)
	}
	if carol.balance() != "5.00" {
		t.Errorf("carol's balance %s, want 5.00", carol.balance())
	}
}

// Ensure that App.OnPublished is told of each published version once it is
// stored and listed (callable), and of nothing refused.
func TestPublish_OnPublishedHook(t *testing.T) {
	g, lena := publishWorld(t)
	got := make(chan string, 4)
	g.app.OnPublished(func(ref string) {
		if _, ok := g.app.Engine().Registry().Get(ref); !ok {
			t.Errorf("hook for %s before it is listed", ref)
		}
		got <- ref
	})
	lena.human.must(201, "POST", "/v0/agents", pubManifest("lena/hooked", "1.0.0"))
	lena.human.must(409, "POST", "/v0/agents", pubManifest("lena/hooked", "1.0.0"))
	lena.human.must(400, "POST", "/v0/agents", pubManifest("lena/other", "1.0.0", set("runtime.endpoint", "http://x.example/run")))
	select {
	case ref := <-got:
		if ref != "lena/hooked@1.0.0" {
			t.Errorf("hook got %s", ref)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the hook was not called")
	}
	select {
	case ref := <-got:
		t.Errorf("hook called again, for %s", ref)
	case <-time.After(50 * time.Millisecond):
	}
}

// Ensure that concurrent publishes of one version list it once: one is
// accepted, the others answer version_exists.
func TestPublish_ConcurrentSameVersion(t *testing.T) {
	_, lena := publishWorld(t)
	const n = 8
	statuses := make(chan int, n)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, _ := lena.human.do("POST", "/v0/agents", pubManifest("lena/race", "1.0.0", proprietary))
			statuses <- st
		}()
	}
	wg.Wait()
	close(statuses)
	count := map[int]int{}
	for st := range statuses {
		count[st]++
	}
	if count[201] != 1 || count[409] != n-1 {
		t.Errorf("statuses %v, want one 201 and %d 409", count, n-1)
	}
}

// Ensure that disabling an account with yank_agents withdraws its
// published versions, for good, and that its keys can publish no more.
func TestPublish_DisabledAuthor(t *testing.T) {
	g, lena := publishWorld(t)
	lena.human.must(201, "POST", "/v0/agents", pubManifest("lena/gone", "1.0.0", proprietary))
	out := g.admin().must(200, "POST", "/v0/admin/accounts/lena/disable", map[string]any{"reason": "fraud", "yank_agents": true})
	if str(out["yanked"]) != "[lena/gone@1.0.0]" {
		t.Errorf("disable: %v", out)
	}
	if st, _ := lena.human.do("POST", "/v0/agents", pubManifest("lena/gone", "2.0.0", proprietary)); st != 401 {
		t.Errorf("publish with a disabled account's key: %d, want 401", st)
	}
	g.restart()
	if _, ok := g.app.Engine().Registry().Get("lena/gone@1.0.0"); ok {
		t.Error("the disabled author's version is listed after a restart")
	}
}
