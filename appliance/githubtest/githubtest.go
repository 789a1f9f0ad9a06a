// Package githubtest is a fake GitHub for tests, served on loopback: the
// OAuth web flow (authorize, access_token) and the REST endpoints Holon
// reads (/user, /user/emails, /repos/{owner}/{repo},
// /orgs/{org}/public_members/{user}), with the real API's paths, status
// codes, headers and JSON shapes, its error answers included: 404 for a
// private or missing repository, 401 "Bad credentials" for a bad token, a
// rate-limit 403 with its x-ratelimit-* headers, and 503 when told it is
// down.
//
// It is laid out like GitHub Enterprise Server: the web flow at URL, the
// REST API under URL + "/api/v3".
package githubtest

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
)

// User is a GitHub account.
type User struct {
	ID    int64
	Login string
	// Emails are the account's addresses; the first verified one marked
	// Primary is what /user/emails calls primary.
	Emails []Email
}

// Email is one address of a GitHub account, as /user/emails lists it.
type Email struct {
	Email    string `json:"email"`
	Primary  bool   `json:"primary"`
	Verified bool   `json:"verified"`
}

// Server is a running fake GitHub.
type Server struct {
	// URL is the web origin (OAuth pages); the API is under APIURL.
	URL, APIURL string
	// ClientID and ClientSecret are the one OAuth app it knows.
	ClientID, ClientSecret string

	srv *httptest.Server
	mu  sync.Mutex
	// users by lowercase login; signedIn is who the browser is signed in as.
	users    map[string]*User
	signedIn string
	repos    map[string]repo     // lowercase owner/name
	orgs     map[string]*org     // lowercase login
	codes    map[string]grant    // OAuth codes, one use, 10 minutes
	tokens   map[string]string   // access token → lowercase login
	down     bool                // every answer a 503
	limited  bool                // API answers the rate-limit 403
	deny     bool                // the user refuses the authorization
	hits     map[string]int      // path → requests
	auth     map[string][]string // path → Authorization headers seen
	now      func() time.Time
}

type repo struct {
	id      int64
	owner   string // lowercase login of a user or an org
	name    string
	private bool
}

type org struct {
	id      int64
	login   string
	members map[string]bool // lowercase login → public member
}

type grant struct {
	login    string
	redirect string
	expires  time.Time
}

// New starts a fake GitHub on 127.0.0.1 with one OAuth app; Close stops it.
func New() *Server {
	s := &Server{
		ClientID: "Iv1.fake" + randomHex(6), ClientSecret: randomHex(20),
		users: map[string]*User{}, repos: map[string]repo{}, orgs: map[string]*org{},
		codes: map[string]grant{}, tokens: map[string]string{}, hits: map[string]int{},
		auth: map[string][]string{}, now: time.Now,
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /login/oauth/authorize", s.authorize)
	mux.HandleFunc("POST /login/oauth/access_token", s.accessToken)
	mux.HandleFunc("GET /api/v3/user", s.user)
	mux.HandleFunc("GET /api/v3/user/emails", s.emails)
	mux.HandleFunc("GET /api/v3/repos/{owner}/{repo}", s.repo)
	mux.HandleFunc("GET /api/v3/orgs/{org}/public_members/{user}", s.publicMember)
	s.srv = httptest.NewServer(s.front(mux))
	s.URL, s.APIURL = s.srv.URL, s.srv.URL+"/api/v3"
	return s
}

// Close stops the server.
func (s *Server) Close() { s.srv.Close() }

// AddUser creates a GitHub account with one primary address, verified or
// not, and returns it.
func (s *Server) AddUser(id int64, login, email string, verified bool) *User {
	s.mu.Lock()
	defer s.mu.Unlock()
	u := &User{ID: id, Login: login}
	if email != "" {
		u.Emails = []Email{{Email: email, Primary: true, Verified: verified}}
	}
	s.users[strings.ToLower(login)] = u
	return u
}

// SignIn makes login the account the browser is signed in to GitHub as:
// the next authorization is granted for it.
func (s *Server) SignIn(login string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.signedIn = strings.ToLower(login)
}

// AddRepo creates a repository owner/name (owner a user or an org).
func (s *Server) AddRepo(owner, name string, private bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.repos[strings.ToLower(owner+"/"+name)] = repo{id: int64(1000 + len(s.repos)), owner: strings.ToLower(owner), name: name, private: private}
}

// AddOrg creates an organisation; members maps logins to whether their
// membership is public.
func (s *Server) AddOrg(id int64, login string, members map[string]bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	o := &org{id: id, login: login, members: map[string]bool{}}
	for m, public := range members {
		o.members[strings.ToLower(m)] = public
	}
	s.orgs[strings.ToLower(login)] = o
}

// SetDown makes every answer a 503, as GitHub answers during an outage.
func (s *Server) SetDown(down bool) { s.mu.Lock(); s.down = down; s.mu.Unlock() }

// SetRateLimited makes the API answer its rate-limit 403.
func (s *Server) SetRateLimited(on bool) { s.mu.Lock(); s.limited = on; s.mu.Unlock() }

// SetDeny makes the user refuse the next authorizations (access_denied).
func (s *Server) SetDeny(on bool) { s.mu.Lock(); s.deny = on; s.mu.Unlock() }

// Hits is how many requests reached a path (such as "/api/v3/user").
func (s *Server) Hits(path string) int { s.mu.Lock(); defer s.mu.Unlock(); return s.hits[path] }

// Authorizations are the Authorization headers sent to a path, in order.
func (s *Server) Authorizations(path string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.auth[path]...)
}

// Tokens are the access tokens the fake issued.
func (s *Server) Tokens() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for t := range s.tokens {
		out = append(out, t)
	}
	return out
}

func randomHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b)
}

// front counts requests and answers outages and rate limits before any route.
func (s *Server) front(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.hits[r.URL.Path]++
		s.auth[r.URL.Path] = append(s.auth[r.URL.Path], r.Header.Get("Authorization"))
		down, limited := s.down, s.limited
		s.mu.Unlock()
		if down {
			// GitHub's outage page is HTML, not JSON.
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprint(w, "<!DOCTYPE html><html><body><h1>Unicorn!</h1><p>This page is taking too long to load.</p></body></html>")
			return
		}
		if limited && strings.HasPrefix(r.URL.Path, "/api/v3/") {
			reset := s.now().Add(17 * time.Minute).Unix()
			h := w.Header()
			h.Set("x-ratelimit-limit", "60")
			h.Set("x-ratelimit-remaining", "0")
			h.Set("x-ratelimit-used", "60")
			h.Set("x-ratelimit-reset", strconv.FormatInt(reset, 10))
			h.Set("x-ratelimit-resource", "core")
			writeJSON(w, http.StatusForbidden, map[string]string{
				"message":           "API rate limit exceeded for 127.0.0.1. (But here's the good news: Authenticated requests get a higher rate limit. Check out the documentation for more details.)",
				"documentation_url": "https://docs.github.com/rest/overview/resources-in-the-rest-api#rate-limiting",
			})
			return
		}
		w.Header().Set("x-ratelimit-limit", "5000")
		w.Header().Set("x-ratelimit-remaining", "4999")
		w.Header().Set("x-github-media-type", "github.v3; format=json")
		next.ServeHTTP(w, r)
	})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// apiError is GitHub's REST error body.
func apiError(w http.ResponseWriter, status int, msg, doc string) {
	writeJSON(w, status, map[string]string{"message": msg, "documentation_url": doc, "status": strconv.Itoa(status)})
}

// authorize is GET /login/oauth/authorize: the user, signed in already,
// grants the app at once, and the browser goes back to redirect_uri with
// code and state (or error=access_denied).
func (s *Server) authorize(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if q.Get("client_id") != s.ClientID {
		http.Error(w, "404 page not found (unknown client_id)", http.StatusNotFound)
		return
	}
	redirect, err := url.Parse(q.Get("redirect_uri"))
	if err != nil || redirect.Scheme == "" {
		http.Error(w, "The redirect_uri MUST match the registered callback URL for this application.", http.StatusBadRequest)
		return
	}
	back := redirect.Query()
	back.Set("state", q.Get("state"))
	s.mu.Lock()
	login, deny := s.signedIn, s.deny
	if deny || login == "" || s.users[login] == nil {
		s.mu.Unlock()
		back.Set("error", "access_denied")
		back.Set("error_description", "The user has denied your application access.")
		back.Set("error_uri", "https://docs.github.com/apps/managing-oauth-apps/troubleshooting-authorization-request-errors/#access-denied")
	} else {
		code := randomHex(10)
		s.codes[code] = grant{login: login, redirect: q.Get("redirect_uri"), expires: s.now().Add(10 * time.Minute)}
		s.mu.Unlock()
		back.Set("code", code)
	}
	redirect.RawQuery = back.Encode()
	http.Redirect(w, r, redirect.String(), http.StatusFound)
}

// accessToken is POST /login/oauth/access_token. Like GitHub, it answers
// 200 with an "error" field for a bad code or bad client credentials.
func (s *Server) accessToken(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	id, secret := r.PostForm.Get("client_id"), r.PostForm.Get("client_secret")
	if u, p, ok := r.BasicAuth(); ok {
		id, secret = u, p
	}
	if !strings.Contains(r.Header.Get("Accept"), "application/json") {
		w.Header().Set("Content-Type", "application/x-www-form-urlencoded; charset=utf-8")
		fmt.Fprint(w, "error=unsupported_accept&error_description=this+fake+answers+JSON+only")
		return
	}
	if id != s.ClientID || secret != s.ClientSecret {
		writeJSON(w, http.StatusOK, map[string]string{"error": "incorrect_client_credentials",
			"error_description": "The client_id and/or client_secret passed are incorrect.",
			"error_uri":         "https://docs.github.com/apps/managing-oauth-apps/troubleshooting-oauth-app-access-token-request-errors/#incorrect-client-credentials"})
		return
	}
	code := r.PostForm.Get("code")
	s.mu.Lock()
	g, ok := s.codes[code]
	delete(s.codes, code)
	redirectOK := r.PostForm.Get("redirect_uri") == "" || r.PostForm.Get("redirect_uri") == g.redirect
	if ok && s.now().Before(g.expires) && redirectOK {
		token := "gho_" + randomHex(18)
		s.tokens[token] = g.login
		s.mu.Unlock()
		writeJSON(w, http.StatusOK, map[string]string{"access_token": token, "token_type": "bearer", "scope": "read:user,user:email"})
		return
	}
	s.mu.Unlock()
	if ok && !redirectOK {
		writeJSON(w, http.StatusOK, map[string]string{"error": "redirect_uri_mismatch",
			"error_description": "The redirect_uri MUST match the registered callback URL for this application."})
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"error": "bad_verification_code",
		"error_description": "The code passed is incorrect or expired.",
		"error_uri":         "https://docs.github.com/apps/managing-oauth-apps/troubleshooting-oauth-app-access-token-request-errors/#bad-verification-code"})
}

// tokenUser is the user an access token belongs to, or nil after a 401.
func (s *Server) tokenUser(w http.ResponseWriter, r *http.Request) *User {
	h := r.Header.Get("Authorization")
	tok, ok := strings.CutPrefix(h, "Bearer ")
	if !ok {
		tok, ok = strings.CutPrefix(h, "token ")
	}
	s.mu.Lock()
	login, found := s.tokens[tok]
	u := s.users[login]
	s.mu.Unlock()
	if !ok || !found || u == nil {
		apiError(w, http.StatusUnauthorized, "Bad credentials", "https://docs.github.com/rest")
		return nil
	}
	return u
}

// appAuthOK checks optional credentials on an unauthenticated endpoint:
// none, a user token, or the OAuth app's client id and secret (Basic).
func (s *Server) appAuthOK(w http.ResponseWriter, r *http.Request) bool {
	h := r.Header.Get("Authorization")
	if h == "" {
		return true
	}
	if id, secret, ok := r.BasicAuth(); ok {
		if id == s.ClientID && secret == s.ClientSecret {
			return true
		}
	} else if tok, ok := strings.CutPrefix(h, "Bearer "); ok {
		s.mu.Lock()
		_, found := s.tokens[tok]
		s.mu.Unlock()
		if found {
			return true
		}
	}
	apiError(w, http.StatusUnauthorized, "Bad credentials", "https://docs.github.com/rest")
	return false
}

func (s *Server) userJSON(u *User) map[string]any {
	return map[string]any{
		"login": u.Login, "id": u.ID, "node_id": fmt.Sprintf("MDQ6VXNlcj%d", u.ID),
		"avatar_url": fmt.Sprintf("%s/avatars/u/%d", s.URL, u.ID), "html_url": s.URL + "/" + u.Login,
		"type": "User", "site_admin": false, "name": nil, "company": nil, "email": nil,
		"url": s.APIURL + "/users/" + u.Login,
	}
}

// user is GET /user.
func (s *Server) user(w http.ResponseWriter, r *http.Request) {
	if u := s.tokenUser(w, r); u != nil {
		writeJSON(w, http.StatusOK, s.userJSON(u))
	}
}

// emails is GET /user/emails.
func (s *Server) emails(w http.ResponseWriter, r *http.Request) {
	u := s.tokenUser(w, r)
	if u == nil {
		return
	}
	out := []map[string]any{}
	for _, e := range u.Emails {
		vis := any(nil)
		if e.Primary {
			vis = "private"
		}
		out = append(out, map[string]any{"email": e.Email, "primary": e.Primary, "verified": e.Verified, "visibility": vis})
	}
	writeJSON(w, http.StatusOK, out)
}

// repo is GET /repos/{owner}/{repo}: a private repository is as unknown
// as a missing one to a caller without access.
func (s *Server) repo(w http.ResponseWriter, r *http.Request) {
	if !s.appAuthOK(w, r) {
		return
	}
	key := strings.ToLower(r.PathValue("owner") + "/" + r.PathValue("repo"))
	s.mu.Lock()
	rp, ok := s.repos[key]
	var owner map[string]any
	if ok {
		if o := s.orgs[rp.owner]; o != nil {
			owner = map[string]any{"login": o.login, "id": o.id, "type": "Organization", "url": s.APIURL + "/users/" + o.login}
		} else if u := s.users[rp.owner]; u != nil {
			owner = s.userJSON(u)
		} else {
			ok = false
		}
	}
	s.mu.Unlock()
	if !ok || rp.private {
		apiError(w, http.StatusNotFound, "Not Found", "https://docs.github.com/rest/repos/repos#get-a-repository")
		return
	}
	full := owner["login"].(string) + "/" + rp.name
	writeJSON(w, http.StatusOK, map[string]any{
		"id": rp.id, "name": rp.name, "full_name": full, "private": false, "visibility": "public",
		"owner": owner, "html_url": s.URL + "/" + full, "fork": false, "url": s.APIURL + "/repos/" + full,
		"default_branch": "main", "archived": false, "disabled": false,
	})
}

// publicMember is GET /orgs/{org}/public_members/{user}: 204 when the user
// is a public member, 404 otherwise (private members included).
func (s *Server) publicMember(w http.ResponseWriter, r *http.Request) {
	if !s.appAuthOK(w, r) {
		return
	}
	s.mu.Lock()
	o := s.orgs[strings.ToLower(r.PathValue("org"))]
	public := o != nil && o.members[strings.ToLower(r.PathValue("user"))]
	s.mu.Unlock()
	if !public {
		apiError(w, http.StatusNotFound, "Not Found", "https://docs.github.com/rest/orgs/members#check-public-organization-membership-for-a-user")
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
