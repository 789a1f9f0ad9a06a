package appliance

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

// githubClient talks to GitHub (or a GitHub Enterprise Server): the OAuth
// web flow's token exchange, the signed-in user, and the public facts a
// publish checks (who owns a repository, who is a public member of an
// organisation). The user's token is used for the sign-in reads only and
// never kept; the publish-time reads are unauthenticated, sent with the
// OAuth app's credentials for the app's rate limit.
type githubClient struct {
	web, api     string
	clientID     string
	clientSecret string
	http         *http.Client
	now          func() time.Time
}

// Defaults of the GitHub settings (HOLON_GITHUB_URL, HOLON_GITHUB_API_URL).
const (
	DefaultGitHubURL    = "https://github.com"
	DefaultGitHubAPIURL = "https://api.github.com"
)

// githubError is a failed exchange with GitHub. unavailable marks an
// outage, a rate limit or a network failure (try again later) as opposed
// to an answer that says no.
type githubError struct {
	status      int
	message     string
	unavailable bool
	retryAfter  time.Duration
}

func (e *githubError) Error() string { return e.message }

// errGitHubNotFound is a 404 from the API.
var errGitHubNotFound = errors.New("github: not found")

// githubUser is what the gateway reads of a GitHub account.
type githubUser struct {
	ID    int64  `json:"id"`
	Login string `json:"login"`
	// Email is the primary address, "" unless GitHub verified it.
	Email string `json:"-"`
}

// githubRepo is what the gateway reads of a repository.
type githubRepo struct {
	FullName string `json:"full_name"`
	Private  bool   `json:"private"`
	Owner    struct {
		ID    int64  `json:"id"`
		Login string `json:"login"`
		Type  string `json:"type"`
	} `json:"owner"`
}

func (g *githubClient) authorizeURL(state, redirect string) string {
	q := url.Values{"client_id": {g.clientID}, "redirect_uri": {redirect}, "state": {state},
		"scope": {"read:user user:email"}, "allow_signup": {"true"}}
	return g.web + "/login/oauth/authorize?" + q.Encode()
}

// exchange trades an OAuth code for the user's access token.
func (g *githubClient) exchange(ctx context.Context, code, redirect string) (string, error) {
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
		return "", &githubError{status: http.StatusOK, message: fmt.Sprintf("GitHub refused the code: %s %s", out.Error, out.Description)}
	}
	return out.AccessToken, nil
}

// user reads the signed-in account and its primary verified email.
func (g *githubClient) user(ctx context.Context, token string) (*githubUser, error) {
	var u githubUser
	if err := g.get(ctx, "/user", "Bearer "+token, &u); err != nil {
		return nil, err
	}
	if u.ID == 0 || u.Login == "" {
		return nil, &githubError{message: "GitHub's /user answer has no id or login"}
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

// repo reads a public repository; errGitHubNotFound for a private or
// missing one.
func (g *githubClient) repo(ctx context.Context, owner, name string) (*githubRepo, error) {
	var r githubRepo
	if err := g.get(ctx, "/repos/"+url.PathEscape(owner)+"/"+url.PathEscape(name), g.appAuth(), &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// publicMember reports whether login is a public member of org.
func (g *githubClient) publicMember(ctx context.Context, org, login string) (bool, error) {
	err := g.get(ctx, "/orgs/"+url.PathEscape(org)+"/public_members/"+url.PathEscape(login), g.appAuth(), nil)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, errGitHubNotFound):
		return false, nil
	}
	return false, err
}

func (g *githubClient) appAuth() string {
	req := http.Request{Header: http.Header{}}
	req.SetBasicAuth(g.clientID, g.clientSecret)
	return req.Header.Get("Authorization")
}

func (g *githubClient) get(ctx context.Context, path, auth string, into any) error {
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

// maxGitHubAnswer bounds what is read of one answer.
const maxGitHubAnswer = 1 << 20

// do sends a request and decodes a 2xx JSON answer into into (when set).
func (g *githubClient) do(req *http.Request, into any) error {
	req.Header.Set("User-Agent", "holon-gateway")
	resp, err := g.http.Do(req)
	if err != nil {
		return &githubError{message: fmt.Sprintf("GitHub cannot be reached: %v", err), unavailable: true}
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxGitHubAnswer))
	if err != nil {
		return &githubError{status: resp.StatusCode, message: fmt.Sprintf("read GitHub's answer: %v", err), unavailable: true}
	}
	switch {
	case resp.StatusCode == http.StatusNotFound:
		return errGitHubNotFound
	case resp.StatusCode == http.StatusForbidden && resp.Header.Get("x-ratelimit-remaining") == "0",
		resp.StatusCode == http.StatusTooManyRequests:
		wait := time.Minute
		if reset, err := strconv.ParseInt(resp.Header.Get("x-ratelimit-reset"), 10, 64); err == nil {
			if d := time.Unix(reset, 0).Sub(g.now()); d > 0 {
				wait = d
			}
		}
		return &githubError{status: resp.StatusCode, message: "GitHub's API rate limit is exhausted", unavailable: true, retryAfter: wait}
	case resp.StatusCode >= 500:
		return &githubError{status: resp.StatusCode, message: fmt.Sprintf("GitHub answered %d", resp.StatusCode), unavailable: true}
	case resp.StatusCode < 200 || resp.StatusCode > 299:
		var e struct {
			Message string `json:"message"`
		}
		_ = json.Unmarshal(body, &e)
		return &githubError{status: resp.StatusCode, message: fmt.Sprintf("GitHub answered %d: %s", resp.StatusCode, e.Message)}
	}
	if into == nil {
		return nil
	}
	if err := json.Unmarshal(body, into); err != nil {
		return &githubError{status: resp.StatusCode, message: fmt.Sprintf("GitHub's answer is not the JSON expected: %v", err)}
	}
	return nil
}
