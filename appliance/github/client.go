// Package github is the gateway's client of GitHub (or a GitHub Enterprise
// Server): the OAuth web flow that signs a person in (the authorize URL,
// the code's exchange, the signed-in account and its verified email) and
// the public facts a publish checks (who owns a repository, who is a
// public member of an organisation). The user's token serves the sign-in
// reads only and is never kept; the publish-time reads are sent with the
// OAuth app's credentials, for the app's rate limit.
//
// It imports nothing of the project: sign-in (appliance/signin) and
// publishing use it; tests run it against appliance/githubtest.
package github

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Client talks to one GitHub as one OAuth app.
type Client struct {
	web, api     string
	clientID     string
	clientSecret string
	http         *http.Client
	now          func() time.Time
}

// Defaults of the GitHub settings (HOLON_GITHUB_URL, HOLON_GITHUB_API_URL).
const (
	DefaultURL    = "https://github.com"
	DefaultAPIURL = "https://api.github.com"
)

// Options configure a Client.
type Options struct {
	// URL and APIURL are GitHub's web and API origins (DefaultURL and
	// DefaultAPIURL when empty).
	URL, APIURL string
	// ClientID and ClientSecret are the OAuth app's.
	ClientID, ClientSecret string
	// HTTP sends the requests (a client with a 10 s timeout when nil).
	HTTP *http.Client
	// Now is the clock a rate limit's reset is read against (time.Now
	// when nil).
	Now func() time.Time
}

// New is a client of the GitHub o names.
func New(o Options) *Client {
	if o.URL == "" {
		o.URL = DefaultURL
	}
	if o.APIURL == "" {
		o.APIURL = DefaultAPIURL
	}
	if o.HTTP == nil {
		o.HTTP = &http.Client{Timeout: 10 * time.Second}
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Client{web: strings.TrimRight(o.URL, "/"), api: strings.TrimRight(o.APIURL, "/"),
		clientID: o.ClientID, clientSecret: o.ClientSecret, http: o.HTTP, now: o.Now}
}

// CodeUnavailable is the error code of a GitHub that is down,
// unreachable or rate-limited (503), for sign-in and publishing alike.
const CodeUnavailable = "github_unavailable"

// Error is a failed exchange with GitHub.
type Error struct {
	// Status is GitHub's HTTP status (0: no answer).
	Status int
	// Message says what failed.
	Message string
	// Unavailable marks an outage, a rate limit or a network failure
	// (try again later) as opposed to an answer that says no.
	Unavailable bool
	// RetryAfter is how long a rate limit lasts (0: unknown).
	RetryAfter time.Duration
}

func (e *Error) Error() string { return e.Message }

// ErrNotFound is a 404 from the API.
var ErrNotFound = errors.New("github: not found")

// User is what the gateway reads of a GitHub account.
type User struct {
	ID    int64  `json:"id"`
	Login string `json:"login"`
	// Email is the primary address, "" unless GitHub verified it.
	Email string `json:"-"`
}

// Repo is what the gateway reads of a repository.
type Repo struct {
	FullName string `json:"full_name"`
	Private  bool   `json:"private"`
	Owner    struct {
		ID    int64  `json:"id"`
		Login string `json:"login"`
		Type  string `json:"type"`
	} `json:"owner"`
}

// AuthorizeURL is where a browser starts signing in: GitHub's consent,
// which sends it back to redirect with state.
func (g *Client) AuthorizeURL(state, redirect string) string {
	q := url.Values{"client_id": {g.clientID}, "redirect_uri": {redirect}, "state": {state},
		"scope": {"read:user user:email"}, "allow_signup": {"true"}}
	return g.web + "/login/oauth/authorize?" + q.Encode()
}

// Exchange trades an OAuth code for the user's access token.
func (g *Client) Exchange(ctx context.Context, code, redirect string) (string, error) {
	form := url.Values{"client_id": {g.clientID}, "client_secret": {g.clientSecret}, "code": {code}, "redirect_uri": {redirect}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, g.web+"/login/oauth/access_token", strings.NewReader(form.Encode()))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	var out struct {
		AccessToken string `json:"access_token"`
		Error       string `json:"error"`
		Description string `json:"error_description"`
	}
	if err := g.do(req, &out); err != nil {
		return "", err
	}
	if out.Error != "" || out.AccessToken == "" {
		return "", &Error{Status: http.StatusOK, Message: fmt.Sprintf("GitHub refused the code: %s %s", out.Error, out.Description)}
	}
	return out.AccessToken, nil
}

// User reads the signed-in account and its primary verified email.
func (g *Client) User(ctx context.Context, token string) (*User, error) {
	var u User
	if err := g.get(ctx, "/user", "Bearer "+token, &u); err != nil {
		return nil, err
	}
	if u.ID == 0 || u.Login == "" {
		return nil, &Error{Message: "GitHub's /user answer has no id or login"}
	}
	var emails []struct {
		Email    string `json:"email"`
		Primary  bool   `json:"primary"`
		Verified bool   `json:"verified"`
	}
	if err := g.get(ctx, "/user/emails", "Bearer "+token, &emails); err != nil {
		return nil, err
	}
	for _, e := range emails {
		if e.Primary && e.Verified {
			u.Email = e.Email
		}
	}
	return &u, nil
}

// Repo reads a public repository; ErrNotFound for a private or missing
// one.
func (g *Client) Repo(ctx context.Context, owner, name string) (*Repo, error) {
	var r Repo
	if err := g.get(ctx, "/repos/"+url.PathEscape(owner)+"/"+url.PathEscape(name), g.appAuth(), &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// PublicMember reports whether login is a public member of org.
func (g *Client) PublicMember(ctx context.Context, org, login string) (bool, error) {
	err := g.get(ctx, "/orgs/"+url.PathEscape(org)+"/public_members/"+url.PathEscape(login), g.appAuth(), nil)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, ErrNotFound):
		return false, nil
	}
	return false, err
}

func (g *Client) appAuth() string {
	req := http.Request{Header: http.Header{}}
	req.SetBasicAuth(g.clientID, g.clientSecret)
	return req.Header.Get("Authorization")
}

func (g *Client) get(ctx context.Context, path, auth string, into any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, g.api+path, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "application/vnd.github+json")
	req.Header.Set("X-GitHub-Api-Version", "2022-11-28")
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	return g.do(req, into)
}

// maxAnswer bounds what is read of one answer.
const maxAnswer = 1 << 20

// do sends a request and decodes a 2xx JSON answer into into (when set).
func (g *Client) do(req *http.Request, into any) error {
	req.Header.Set("User-Agent", "holon-gateway")
	resp, err := g.http.Do(req)
	if err != nil {
		return &Error{Message: fmt.Sprintf("GitHub cannot be reached: %v", err), Unavailable: true}
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		return &Error{Status: resp.StatusCode, Message: fmt.Sprintf("read GitHub's answer: %v", err), Unavailable: true}
	}
	switch {
	case resp.StatusCode == http.StatusNotFound:
		return ErrNotFound
	case resp.StatusCode == http.StatusForbidden && resp.Header.Get("x-ratelimit-remaining") == "0",
		resp.StatusCode == http.StatusTooManyRequests:
		wait := time.Minute
		if reset, err := strconv.ParseInt(resp.Header.Get("x-ratelimit-reset"), 10, 64); err == nil {
			if d := time.Unix(reset, 0).Sub(g.now()); d > 0 {
				wait = d
			}
		}
		return &Error{Status: resp.StatusCode, Message: "GitHub's API rate limit is exhausted", Unavailable: true, RetryAfter: wait}
	case resp.StatusCode >= 500:
		return &Error{Status: resp.StatusCode, Message: fmt.Sprintf("GitHub answered %d", resp.StatusCode), Unavailable: true}
	case resp.StatusCode < 200 || resp.StatusCode > 299:
		var e struct {
			Message string `json:"message"`
		}
		_ = json.Unmarshal(body, &e)
		return &Error{Status: resp.StatusCode, Message: fmt.Sprintf("GitHub answered %d: %s", resp.StatusCode, e.Message)}
	}
	if into == nil {
		return nil
	}
	if err := json.Unmarshal(body, into); err != nil {
		return &Error{Status: resp.StatusCode, Message: fmt.Sprintf("GitHub's answer is not the JSON expected: %v", err)}
	}
	return nil
}
