package appliance_test

import (
	"net/http"
	"strings"
	"testing"
)

// Ensure that an account pre-hijacked through its email is worth nothing
// to the squatter once its owner proves the email: someone signs up with
// another person's email and keeps every way in (the signup's keys, one
// more agent key, a console session, an OAuth connection and a code not
// yet traded); when that person first signs in with GitHub, whose
// verified email matches, the account is theirs alone: every earlier key,
// session, token and code is refused, the takeover is in the moderation
// log, and the person is told on GET /v0/me and on the console.
func TestSignIn_GitHub_ClaimRevokesEarlierKeys(t *testing.T) {
	g := newGitHubApp(t)
	squat := g.signup("vic") // vic@example.com, never proved
	extra, _ := squat.newAgentKey("vic/sandbox")
	f := newOAuthFlow(g.hostedApp, squat)
	access, refresh := f.tokens("vic/sandbox")
	pending := f.authorize("vic/sandbox")
	session := signIn(t, g.hostedApp, squat.humanKey)
	if resp, _ := session.get("/console/"); resp.StatusCode != http.StatusOK {
		t.Fatalf("the squatter's console session: %d", resp.StatusCode)
	}

	g.gh.AddUser(41, "victoria", "Vic@example.com", true)
	out := g.signInAs("victoria")
	if out["handle"] != "vic" || out["new_account"] != false {
		t.Fatalf("the owner's first GitHub sign-in: %v, want the account vic", out)
	}
	owner := g.as(str(out["human_key"]))

	for name, c := range map[string]client{"signup human key": squat.human, "signup agent key": squat.agent, "later agent key": extra} {
		if st, o := c.do("GET", "/v0/me", nil); st != http.StatusUnauthorized || errorCode(o) != "invalid_key" {
			t.Errorf("the squatter's %s after the claim: %d %v, want 401 invalid_key", name, st, o)
		}
	}
	if st, _, _ := mcpInit(t, g.srv.URL, access); st != http.StatusUnauthorized {
		t.Errorf("the squatter's OAuth access token after the claim: %d, want 401", st)
	}
	if st, o := f.refresh(refresh); st != http.StatusBadRequest || o["error"] != "invalid_grant" {
		t.Errorf("the squatter's refresh token after the claim: %d %v, want invalid_grant", st, o)
	}
	if st, o := f.exchange(pending, f.verifier); st != http.StatusBadRequest || o["error"] != "invalid_grant" {
		t.Errorf("the squatter's pending authorization code after the claim: %d %v, want invalid_grant", st, o)
	}
	if resp, _ := session.get("/console/"); resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(resp.Header.Get("Location"), "/console/signin") {
		t.Errorf("the squatter's console session after the claim: %d to %q, want sent to sign in", resp.StatusCode, resp.Header.Get("Location"))
	}

	// The person is told, on the API and on the console.
	me := owner.must(http.StatusOK, "GET", "/v0/me", nil)
	claim := obj(me["claimed"])
	if claim["github"] != "victoria" || claim["keys_revoked"] != float64(4) || len(me["keys"].([]any)) != 1 {
		t.Errorf("GET /v0/me after the claim: claimed %v, keys %v; want victoria, 4 revoked, the new key only", claim, me["keys"])
	}
	_, page := signIn(t, g.hostedApp, str(out["human_key"])).get("/console/")
	if !strings.Contains(page, "data-claimed") || !strings.Contains(page, "every key made before then was revoked (4)") {
		t.Errorf("the console's overview does not tell of the claim:\n%s", page)
	}
	// The operator sees it in the moderation log.
	found := false
	for _, e := range g.admin().must(http.StatusOK, "GET", "/v0/admin/log", nil)["entries"].([]any) {
		if e := obj(e); e["action"] == "claim" && e["target"] == "vic" && e["actor"] == "github:victoria" && strings.Contains(str(e["reason"]), "4 earlier keys revoked") {
			found = true
		}
	}
	if !found {
		t.Errorf("no claim in the moderation log: %v", g.admin().must(http.StatusOK, "GET", "/v0/admin/log", nil))
	}
	// Later sign-ins find the account by its GitHub id and revoke nothing.
	again := g.signInAs("victoria")
	owner.must(http.StatusOK, "GET", "/v0/me", nil)
	g.as(str(again["human_key"])).must(http.StatusOK, "GET", "/v0/me", nil)
}
