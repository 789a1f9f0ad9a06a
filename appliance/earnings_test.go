package appliance_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"holon.dev/holon"
	"holon.dev/holon/backup"
	"holon.dev/holon/gateway/contract"
	"holon.dev/holon/journal"
	"holon.dev/holon/kv"
)

// forkManifest is an echo agent of ns (the test registry's dev handler),
// priced per run, optionally forking another version and asking royalties.
func forkManifest(t *testing.T, ns, price, forkOf, royalty string) *contract.Manifest {
	t.Helper()
	extra := ""
	if forkOf != "" {
		extra += fmt.Sprintf("lineage: { fork_of: %q }\n", forkOf)
	}
	if royalty != "" {
		extra += fmt.Sprintf("royalties: { forks: %q }\n", royalty)
	}
	m, err := contract.ParseManifest([]byte(fmt.Sprintf(`
id: %s/echo
version: 1.0.0
summary: Answers with its input.
license: MIT
source: { repository: "https://github.com/%s/echo", commit: "0000000000000000000000000000000000000000" }
capabilities: [test.echo]
interface:
  input: { type: object, required: [text], properties: { text: { type: string } } }
  output: { type: object, required: [text], properties: { text: { type: string } } }
pricing: { model: per_run, amount: %q, currency: EUR }
runtime: { kind: dev, tool: echo }
data: { retention: none, regions: [eu], training: false }
%s`, ns, ns, price, extra)))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// earnedByAccount sums, per account, what the settle entries of the
// journal paid it (the payer's own debit put back when it is also paid).
func earnedByAccount(t *testing.T, s holon.Store) map[string]journal.Amount {
	t.Helper()
	out := map[string]journal.Amount{}
	err := s.View(func(tx holon.Tx) error {
		return tx.ForEachEntry(0, func(row holon.JournalRow) (bool, error) {
			if !strings.HasPrefix(row.Key, "settle:") {
				return true, nil
			}
			for _, l := range row.Lines {
				if l.Amount > 0 && l.Account != journal.PlatformAccount {
					out[l.Account] += l.Amount
				}
			}
			return true, nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// Ensure that a fork chain of three levels settles royalties, and that
// each author's earnings (GET /v0/me/agents, from the per-version
// counters) equal their journal lines exactly, level by level.
func TestEarnings_ForkChain(t *testing.T) {
	ta := newHostedApp(t)
	ann, cai, lena, bob := ta.signup("ann"), ta.signup("cai"), ta.signup("lena"), ta.signup("bob")
	ctx := context.Background()
	// lena/echo forks cai/echo (royalties 0.20), which forks ann/echo (0.15).
	for _, m := range []*contract.Manifest{
		forkManifest(t, "ann", "0.03", "", "0.15"),
		forkManifest(t, "cai", "0.04", "ann/echo@1.0.0", "0.20"),
		forkManifest(t, "lena", "0.05", "cai/echo@1.0.0", ""),
	} {
		if err := ta.app.RegisterVersion(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	bob.createMandate("forks", map[string]any{"budget": map[string]any{"total": "2.00"},
		"allow": map[string]any{"agents": []string{"ann/*", "cai/*", "lena/*"}}})
	call := func(agent string, n int) {
		for i := 0; i < n; i++ {
			bob.human.must(http.StatusOK, "POST", "/v0/calls", map[string]any{"mandate": "bob/forks", "agent": agent,
				"input": map[string]any{"text": "hi"}})
		}
	}
	call("lena/echo", 3)
	call("cai/echo", 1)
	call("ann/echo", 2)

	// By hand (manifest.md §8). lena 0.05: fee 0.005, C0 0.045, R1 =
	// floor(0.045×0.20) = 0.009 to cai, R2 = floor(0.009×0.15) = 0.00135 to
	// ann: lena 0.036, cai 0.00765, ann 0.00135. cai 0.04: fee 0.004, C0
	// 0.036, R1 = 0.0054 to ann: cai 0.0306. ann 0.03: fee 0.003, ann 0.027.
	want := map[string]struct {
		calls           int64
		own, royalties  string
		account, ledger string
	}{
		"lena/echo@1.0.0": {3, "0.108", "0.00", "lena", "0.108"},
		"cai/echo@1.0.0":  {1, "0.0306", "0.02295", "cai", "0.05355"},
		"ann/echo@1.0.0":  {2, "0.054", "0.00945", "ann", "0.06345"},
	}
	ledger := earnedByAccount(t, ta.app.Engine().Store())
	for _, who := range []account{ann, cai, lena} {
		out := who.human.must(http.StatusOK, "GET", "/v0/me/agents", nil)
		versions := out["versions"].([]any)
		if len(versions) != 1 {
			t.Fatalf("%s: %d versions, want 1: %v", who.handle, len(versions), out)
		}
		v := versions[0].(map[string]any)
		w := want[v["ref"].(string)]
		e := v["earnings"].(map[string]any)["EUR"].(map[string]any)
		own, roy := journal.MustParseAmount(w.own), journal.MustParseAmount(w.royalties)
		if e["paid_calls"] != float64(w.calls) || e["own"] != own.String() || e["royalties"] != roy.String() {
			t.Errorf("%s: earnings %v, want %d calls, own %s, royalties %s", v["ref"], e, w.calls, own, roy)
		}
		total := journal.MustParseAmount(str(e["total"]))
		if total != ledger[who.handle] || total.String() != journal.MustParseAmount(w.ledger).String() {
			t.Errorf("%s: total earned %s, the journal paid %s, by hand %s", who.handle, total, ledger[who.handle], w.ledger)
		}
	}
	// holon verify checks the counters against the journal, and catches
	// one that drifted by a micro-unit.
	store := ta.app.Engine().Store()
	rep, err := backup.Verify(kv.Unwrap(store))
	if err != nil {
		t.Fatal(err)
	}
	if c := rep.Check(backup.CheckEarnings); !c.OK() || !strings.Contains(c.Covered, "3 versions' counters against 6 settle entries") {
		t.Errorf("verify earnings: %+v", c)
	}
	if c := rep.Check(backup.CheckLatency); !c.OK() || !strings.Contains(c.Covered, "3 histograms") {
		t.Errorf("verify latency: %+v", c)
	}
	if err := store.Update(ctx, func(tx holon.Tx) error {
		if err := tx.AddLatency("ann/echo@1.0.0", 99_999); err != nil {
			return err
		}
		return tx.AddEarnings("cai/echo@1.0.0", "EUR", 0, 1, 0)
	}); err != nil {
		t.Fatal(err)
	}
	if rep, err = backup.Verify(kv.Unwrap(store)); err != nil {
		t.Fatal(err)
	}
	if c := rep.Check(backup.CheckEarnings); c.OK() || !strings.Contains(strings.Join(c.Problems, "\n"), "account cai") {
		t.Errorf("verify after a counter drifted: %+v", c)
	}
	if c := rep.Check(backup.CheckLatency); c.OK() || !strings.Contains(strings.Join(c.Problems, "\n"), "ann/echo@1.0.0") {
		t.Errorf("verify after a histogram drifted: %+v", c)
	}
	// bob's view lists nothing: he wrote no agent.
	if out := bob.human.must(http.StatusOK, "GET", "/v0/me/agents", nil); len(out["versions"].([]any)) != 0 {
		t.Errorf("bob: %v", out)
	}
}
