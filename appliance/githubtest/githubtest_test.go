package githubtest_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"holon.dev/holon/appliance/githubtest"
)

func get(t *testing.T, u, auth string) (*http.Response, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest("GET", u, nil)
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var out map[string]any
	_ = json.Unmarshal(b, &out)
	return resp, out
}

// Ensure that the fake runs GitHub's OAuth web flow (authorize redirects
// back with code and state; the token endpoint answers JSON, and 200 with
// an error for a used code) and answers /user and /user/emails with the
// token, 401 "Bad credentials" without a good one.
func TestServer_OAuthAndUser(t *testing.T) {
	gh := githubtest.New()
	defer gh.Close()
	gh.AddUser(5, "Octo", "octo@example.com", true)
	gh.SignIn("Octo")
	q := url.Values{"client_id": {gh.ClientID}, "redirect_uri": {"http://app.test/cb"}, "state": {"s1"}}
	resp, _ := get(t, gh.URL+"/login/oauth/authorize?"+q.Encode(), "")
	back, _ := url.Parse(resp.Header.Get("Location"))
	code := back.Query().Get("code")
	if resp.StatusCode != 302 || back.Host != "app.test" || back.Query().Get("state") != "s1" || code == "" {
		t.Fatalf("authorize: %d %s", resp.StatusCode, back)
	}
	token := func() map[string]any {
		form := url.Values{"client_id": {gh.ClientID}, "client_secret": {gh.ClientSecret}, "code": {code}}
		req, _ := http.NewRequest("POST", gh.URL+"/login/oauth/access_token", strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Accept", "application/json")
		r, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Body.Close()
		var out map[string]any
		json.NewDecoder(r.Body).Decode(&out)
		if r.StatusCode != 200 {
			t.Errorf("token endpoint: %d", r.StatusCode)
		}
		return out
	}
	tok := token()
	if !strings.HasPrefix(tok["access_token"].(string), "gho_") || tok["token_type"] != "bearer" {
		t.Fatalf("token: %v", tok)
	}
	if again := token(); again["error"] != "bad_verification_code" {
		t.Errorf("a used code: %v", again)
	}
	bearer := "Bearer " + tok["access_token"].(string)
	if r, u := get(t, gh.APIURL+"/user", bearer); r.StatusCode != 200 || u["login"] != "Octo" || u["id"] != float64(5) || u["type"] != "User" {
		t.Errorf("/user: %d %v", r.StatusCode, u)
	}
	req, _ := http.NewRequest("GET", gh.APIURL+"/user/emails", nil)
	req.Header.Set("Authorization", bearer)
	r, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var emails []map[string]any
	json.NewDecoder(r.Body).Decode(&emails)
	r.Body.Close()
	if len(emails) != 1 || emails[0]["email"] != "octo@example.com" || emails[0]["primary"] != true || emails[0]["verified"] != true {
		t.Errorf("/user/emails: %v", emails)
	}
	if r, body := get(t, gh.APIURL+"/user", "Bearer gho_wrong"); r.StatusCode != 401 || body["message"] != "Bad credentials" {
		t.Errorf("bad token: %d %v", r.StatusCode, body)
	}
}

// Ensure that repositories and public membership answer like GitHub: a
// private or missing repository is a 404 with GitHub's body, an owner is a
// User or an Organization, a public member is 204 and anyone else 404;
// and that the rate-limit 403 and an outage's 503 come with their headers.
func TestServer_ReposOrgsAndErrors(t *testing.T) {
	gh := githubtest.New()
	defer gh.Close()
	gh.AddUser(5, "octo", "", false)
	gh.AddRepo("octo", "public", false)
	gh.AddRepo("octo", "hidden", true)
	gh.AddOrg(9, "Acme", map[string]bool{"octo": true, "shy": false})
	gh.AddRepo("acme", "tools", false)
	if r, repo := get(t, gh.APIURL+"/repos/OCTO/public", ""); r.StatusCode != 200 || repo["full_name"] != "octo/public" || repo["private"] != false || repo["owner"].(map[string]any)["type"] != "User" {
		t.Errorf("public repository: %d %v", r.StatusCode, repo)
	}
	if _, repo := get(t, gh.APIURL+"/repos/acme/tools", ""); repo["owner"].(map[string]any)["type"] != "Organization" || repo["owner"].(map[string]any)["login"] != "Acme" {
		t.Errorf("organisation repository: %v", repo)
	}
	for _, p := range []string{"/repos/octo/hidden", "/repos/octo/none", "/repos/nobody/x"} {
		if r, body := get(t, gh.APIURL+p, ""); r.StatusCode != 404 || body["message"] != "Not Found" || body["documentation_url"] == nil {
			t.Errorf("%s: %d %v", p, r.StatusCode, body)
		}
	}
	if r, _ := get(t, gh.APIURL+"/repos/octo/public", "Basic bm86bm8="); r.StatusCode != 401 {
		t.Errorf("wrong app credentials: %d", r.StatusCode)
	}
	for user, want := range map[string]int{"octo": 204, "shy": 404, "stranger": 404} {
		if r, _ := get(t, gh.APIURL+"/orgs/acme/public_members/"+user, ""); r.StatusCode != want {
			t.Errorf("public member %s: %d, want %d", user, r.StatusCode, want)
		}
	}
	gh.SetRateLimited(true)
	r, body := get(t, gh.APIURL+"/repos/octo/public", "")
	reset, err := strconv.ParseInt(r.Header.Get("x-ratelimit-reset"), 10, 64)
	if r.StatusCode != 403 || r.Header.Get("x-ratelimit-remaining") != "0" || err != nil || reset == 0 || !strings.Contains(body["message"].(string), "rate limit") {
		t.Errorf("rate limited: %d %v %v", r.StatusCode, r.Header, body)
	}
	gh.SetRateLimited(false)
	gh.SetDown(true)
	if r, _ := get(t, gh.APIURL+"/user", ""); r.StatusCode != 503 {
		t.Errorf("down: %d", r.StatusCode)
	}
	if gh.Hits("/api/v3/user") != 1 {
		t.Errorf("hits: %d", gh.Hits("/api/v3/user"))
	}
}
