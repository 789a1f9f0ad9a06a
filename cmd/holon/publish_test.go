package main

import (
	"context"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"holon.dev/holon/appliance/githubtest"
)

// publishedManifest is a proprietary webhook agent of lena's. The endpoint
// is never called here: publishing does not call it, and private endpoints
// are allowed on this gateway, so the address is not checked.
const publishedManifest = `id: lena/hook
version: 1.0.0
summary: Answers a webhook.
license: proprietary
capabilities: [test.hook]
interface:
  input: { type: object }
  output: { type: object }
pricing: { model: per_run, amount: "0.02", currency: EUR }
runtime: { kind: webhook, endpoint: "https://127.0.0.1:9/run" }
`

// signInWithGitHub runs the browser's part of signing in and returns the
// human key.
func signInWithGitHub(t *testing.T, api string) string {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, Timeout: 20 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	loc := api + "/v0/auth/github"
	for i := 0; i < 3; i++ { // start, GitHub's authorize page, the callback
		resp, err := c.Get(loc)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if loc = resp.Header.Get("Location"); resp.StatusCode != http.StatusFound {
			t.Fatalf("step %d: %d", i, resp.StatusCode)
		}
		if strings.HasPrefix(loc, "/") {
			loc = api + loc
		}
	}
	_, frag, _ := strings.Cut(loc, "#login=")
	code, _ := url.QueryUnescape(frag)
	var out struct {
		HumanKey string `json:"human_key"`
	}
	if st := do(t, c, "POST", api+"/v0/auth/exchange", "", map[string]string{"code": code}, &out); st != http.StatusOK || out.HumanKey == "" {
		t.Fatalf("exchange: %d %+v (sign-in ended at %s)", st, out, loc)
	}
	return out.HumanKey
}

// Ensure that holon publish and holon credential work against a running
// hosted gateway with HOLON_URL and HOLON_KEY, and say what went wrong
// when the gateway refuses.
func TestPublishAndCredential(t *testing.T) {
	gh := githubtest.New()
	defer gh.Close()
	gh.AddUser(101, "lena", "lena@users.example.com", true)
	gh.SignIn("lena")
	env := map[string]string{
		"HOLON_GITHUB_CLIENT_ID": gh.ClientID, "HOLON_GITHUB_CLIENT_SECRET": gh.ClientSecret,
		"HOLON_GITHUB_URL": gh.URL, "HOLON_GITHUB_API_URL": gh.APIURL,
		"HOLON_FILE_SECRET": "fs-7Hq2Wv9Lx4Kb8Nz1Rc5Tm3Jp6Gd0Ys", "HOLON_ALLOW_PRIVATE_ENDPOINTS": "1",
	}
	// A fixed port: the gateway's default public origin, which GitHub sends
	// the browser back to, is its --addr.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	rs := startServe(t, env, "--hosted", "--addr", addr, "--db", filepath.Join(t.TempDir(), "holon.db"))
	api := "http://" + rs.addrs["api"]
	key := signInWithGitHub(t, api)

	dir := t.TempDir()
	manifest := filepath.Join(dir, "holon.yaml")
	if err := os.WriteFile(manifest, []byte(publishedManifest), 0o644); err != nil {
		t.Fatal(err)
	}
	cli := func(stdin string, args ...string) (int, string, string) {
		var stdout, stderr lockedBuffer
		m := &Main{Stdin: strings.NewReader(stdin), Stdout: &stdout, Stderr: &stderr, Getenv: func(k string) string {
			return map[string]string{"HOLON_URL": api, "HOLON_KEY": key}[k]
		}}
		code := m.Run(context.Background(), args)
		return code, stdout.String(), stderr.String()
	}
	const token = "cli-Tk9Qw2Lm7Xv4Bn1Rz8"
	if code, out, errs := cli(token+"\n", "credential", "set", "lena/hook"); code != 0 || !strings.Contains(out, "set the endpoint credential of lena/hook") || strings.Contains(out+errs, token) {
		t.Errorf("credential set: %d %q %q", code, out, errs)
	}
	if code, out, errs := cli("", "publish", manifest); code != 0 || !strings.Contains(out, "published lena/hook@1.0.0") || !strings.Contains(out, "proprietary") || !strings.Contains(out, "credential is sent") {
		t.Errorf("publish: %d %q %q", code, out, errs)
	}
	var detail struct {
		Versions []string `json:"versions"`
	}
	if st := do(t, http.DefaultClient, "GET", api+"/v0/agents/lena/hook", "", nil, &detail); st != 200 || len(detail.Versions) != 1 {
		t.Errorf("GET /v0/agents/lena/hook: %d %v", st, detail)
	}
	if code, _, errs := cli("", "publish", manifest); code != 1 || !strings.Contains(errs, "version_exists") || !strings.Contains(errs, "publish a new version") {
		t.Errorf("publish again: %d %q", code, errs)
	}
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(bad, []byte(strings.Replace(publishedManifest, "license: proprietary", "license: WTFPL", 1)), 0o644)
	if code, _, errs := cli("", "publish", bad); code != 1 || !strings.Contains(errs, "license:") {
		t.Errorf("publish an invalid manifest: %d %q", code, errs)
	}
	other := filepath.Join(dir, "other.yaml")
	os.WriteFile(other, []byte(strings.Replace(publishedManifest, "id: lena/hook", "id: bob/hook", 1)), 0o644)
	if code, _, errs := cli("", "publish", other); code != 1 || !strings.Contains(errs, "not_your_namespace") {
		t.Errorf("publish outside the namespace: %d %q", code, errs)
	}
	if code, out, errs := cli("", "credential", "delete", "lena/hook"); code != 0 || !strings.Contains(out, "deleted") {
		t.Errorf("credential delete: %d %q %q", code, out, errs)
	}
	if code, _, errs := cli("", "credential", "delete", "lena/hook"); code != 1 || !strings.Contains(errs, "no credential set") {
		t.Errorf("credential delete again: %d %q", code, errs)
	}
	if code, _, errs := cli("", "credential", "set", "lena/hook"); code != 1 || !strings.Contains(errs, "no token on standard input") {
		t.Errorf("credential set without a token: %d %q", code, errs)
	}
	if code, _, _ := cli("", "credential", "set", "lena/hook@1.0.0"); code != 2 {
		t.Errorf("credential set on a version: exit %d, want 2 (usage)", code)
	}
	var stderr lockedBuffer
	m := &Main{Stdout: &lockedBuffer{}, Stderr: &stderr, Getenv: func(string) string { return "" }}
	if code := m.Run(context.Background(), []string{"publish", manifest}); code != 1 || !strings.Contains(stderr.String(), "HOLON_URL") {
		t.Errorf("publish without HOLON_URL: %d %q", code, stderr.String())
	}
	if strings.Contains(rs.stderr.String(), token) {
		t.Error("the token is in the gateway's logs")
	}
}
