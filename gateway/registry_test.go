package gateway_test

import (
	"fmt"
	"slices"
	"testing"

	"holon.dev/holon/gateway"
	"holon.dev/holon/gateway/contract"
)

// regManifest is a free dev agent id@version, forking forkOf when set.
func regManifest(t *testing.T, id, version, forkOf string) *contract.Manifest {
	t.Helper()
	lineage := ""
	if forkOf != "" {
		lineage = fmt.Sprintf("lineage: { fork_of: %q }\nroyalties: { forks: \"0.10\" }\n", forkOf)
	}
	m, err := contract.ParseManifest([]byte(fmt.Sprintf(`id: %s
version: %s
summary: Registry test agent %s.
license: proprietary
capabilities: [test.reg]
interface: { input: { type: object }, output: { type: object } }
pricing: { model: free }
runtime: { kind: dev }
%s`, id, version, id, lineage)))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// Ensure that a registry names each royalty level's exact version, keeps
// Latest current through adds, removals and fact changes, searches
// lowercased text, and that SetFacts replaces the version instead of
// changing the one a caller holds.
func TestRegistry_ChainFactsLatest(t *testing.T) {
	r := gateway.NewRegistry()
	for _, m := range []*contract.Manifest{
		regManifest(t, "ann/base", "1.0.0", ""),
		regManifest(t, "cai/fork", "1.0.0", "ann/base@1.0.0"),
		regManifest(t, "lena/fork", "2.0.0", "cai/fork@1.0.0"),
	} {
		if err := r.Add(&gateway.AgentVersion{Manifest: m}); err != nil {
			t.Fatal(err)
		}
	}
	lena, _ := r.Get("lena/fork@2.0.0")
	if !slices.Equal(lena.ChainRefs, []string{"cai/fork@1.0.0", "ann/base@1.0.0"}) || len(lena.Chain) != 2 || lena.Chain[1].Account != "ann" {
		t.Errorf("lena's chain %v, refs %v", lena.Chain, lena.ChainRefs)
	}
	ids := func() (out []string) {
		for _, v := range r.Latest() {
			out = append(out, v.Manifest.ID+"@"+v.Manifest.Version)
		}
		return out
	}
	if got := ids(); !slices.Equal(got, []string{"ann/base@1.0.0", "cai/fork@1.0.0", "lena/fork@2.0.0"}) {
		t.Errorf("Latest %v", got)
	}
	if err := r.Add(&gateway.AgentVersion{Manifest: regManifest(t, "ann/base", "1.1.0", "")}); err != nil {
		t.Fatal(err)
	}
	r.Remove("cai/fork@1.0.0")
	if got := ids(); !slices.Equal(got, []string{"ann/base@1.1.0", "lena/fork@2.0.0"}) {
		t.Errorf("Latest after an add and a removal: %v", got)
	}
	held, _ := r.Get("ann/base@1.1.0")
	if !r.SetFacts("ann/base@1.1.0", func(f *contract.AgentFacts) { f.Evaluated = true }) {
		t.Fatal("SetFacts on a listed version said false")
	}
	now, _ := r.Get("ann/base@1.1.0")
	if held.Facts.Evaluated || !now.Facts.Evaluated || !r.Latest()[0].Facts.Evaluated {
		t.Errorf("facts: held %v, now %v, latest %v", held.Facts, now.Facts, r.Latest()[0].Facts)
	}
	if v, _ := r.Resolve("ann/base"); !v.Facts.Evaluated {
		t.Errorf("Resolve gives the old facts: %v", v.Facts)
	}
	if r.SetFacts("nobody/x@1.0.0", func(*contract.AgentFacts) {}) {
		t.Error("SetFacts on an unlisted version said true")
	}
	if !now.Matches("test agent ann") || !now.Matches("") || now.Matches("TEST") {
		t.Error("Matches: the text is lowercased once, the query is the caller's to lowercase")
	}
}

// Ensure that Capabilities follows the latest versions through an add and
// a removal: a capability only an older or a yanked version offers is not
// on offer.
func TestRegistry_Capabilities(t *testing.T) {
	r := gateway.NewRegistry()
	parse := func(version, caps string) *contract.Manifest {
		m, err := contract.ParseManifest([]byte("id: ann/x\nversion: " + version + "\nsummary: s\nlicense: proprietary\ncapabilities: " + caps +
			"\ninterface: {input: {}, output: {}}\npricing: {model: free}\nruntime: {kind: dev}\n"))
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	if got := r.Capabilities(); len(got) != 0 {
		t.Errorf("empty registry: %v", got)
	}
	if err := r.Add(&gateway.AgentVersion{Manifest: parse("1.0.0", "[b.old, a.both]")}); err != nil {
		t.Fatal(err)
	}
	if got := r.Capabilities(); !slices.Equal(got, []string{"a.both", "b.old"}) {
		t.Errorf("after 1.0.0: %v", got)
	}
	if err := r.Add(&gateway.AgentVersion{Manifest: parse("1.1.0", "[c.new, a.both]")}); err != nil {
		t.Fatal(err)
	}
	if got := r.Capabilities(); !slices.Equal(got, []string{"a.both", "c.new"}) {
		t.Errorf("after 1.1.0: %v", got)
	}
	r.Remove("ann/x@1.1.0")
	if got := r.Capabilities(); !slices.Equal(got, []string{"a.both", "b.old"}) {
		t.Errorf("after yanking 1.1.0: %v", got)
	}
}
