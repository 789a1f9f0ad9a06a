package signin

import (
	"context"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/julienschmidt/httprouter"

	"holon.dev/holon"
	"holon.dev/holon/appliance/accounts"
	"holon.dev/holon/appliance/auth"
	"holon.dev/holon/appliance/github"
	"holon.dev/holon/appliance/token"
	"holon.dev/holon/appliance/web"
	"holon.dev/holon/appliance/wire"
)

// Sign in with GitHub: GET /v0/auth/github sends
// the browser to GitHub with a random state, also set in a cookie; the
// callback accepts that state once, from that browser only, within 10
// minutes, reads the GitHub account (stable id, login, primary verified
// email), creates or links the Holon account, and sends the browser to
// /console#login=<code>; POST /v0/auth/exchange trades the code, once and
// within 2 minutes, from that browser only (a cookie the callback sets
// beside the code), for a human key that expires after 30 days (and, for a
// new account, its agent key). No key travels in a URL, the GitHub token is
// never kept, and keys are minted only at the exchange, so no key is ever
// stored in clear. States and codes are stored (by their SHA-256): a
// restart does not break a sign-in under way.

// Sign-in lifetimes.
const (
	signinStateTTL = 10 * time.Minute
	loginCodeTTL   = 2 * time.Minute
	humanKeyTTL    = 30 * 24 * time.Hour
)

// stateCookie carries the state to the callback, in the browser that
// started the sign-in only.
const stateCookie = "holon_github_state"

// codeStateMismatch is the sign-in's end (#login_error=) when the state
// is not the one in this browser's cookie.
const codeStateMismatch = "state_mismatch"

// loginCookie binds a login code to the browser the callback handed it
// to: a code sent to another browser (/console#login=<code> in a link, the
// login CSRF that would sign a victim into the sender's account) is
// refused there.
const loginCookie = "holon_login"

// Error codes of sign-in and publishing.
const (
	// CodeGitHubNotConfigured: no HOLON_GITHUB_CLIENT_ID/SECRET (503).
	CodeGitHubNotConfigured = "github_not_configured"
	// CodeGitHubUnavailable: GitHub is down, unreachable or rate-limited (503).
	CodeGitHubUnavailable = github.CodeUnavailable
	// CodeLoginCodeInvalid: the login code is unknown or was used already.
	CodeLoginCodeInvalid = "login_code_invalid"
	// CodeLoginCodeExpired: the login code is older than 2 minutes.
	CodeLoginCodeExpired = "login_code_expired"
	// CodeLoginCodeOtherBrowser: the login code was handed to another
	// browser than the one that presents it (403).
	CodeLoginCodeOtherBrowser = "login_code_other_browser"
	// CodeEmailUnverified: the GitHub account has no verified primary email.
	CodeEmailUnverified = "email_unverified"
	// CodeEmailLinkedElsewhere: the account with this email is linked to
	// another GitHub account.
	CodeEmailLinkedElsewhere = "email_linked_elsewhere"
)

// signinState is a state handed out, under "state/<sha256>".
type signinState struct {
	Expires time.Time `json:"expires"`
}

// loginCode is a one-time login code, under "code/<sha256>": who signed
// in, whether the sign-in created the account, and the SHA-256 of the
// login cookie of the browser it was handed to.
type loginCode struct {
	Handle  string    `json:"handle"`
	New     bool      `json:"new,omitempty"`
	Browser string    `json:"browser"`
	Expires time.Time `json:"expires"`
}

func hashed(prefix, secret string) string { return prefix + token.Hash(secret) }

func githubKey(id int64) string { return "github/" + strconv.FormatInt(id, 10) }

// randomToken draws 32 random bytes, base64url.
func randomToken(rand io.Reader) (string, error) {
	b := make([]byte, 32)
	if _, err := io.ReadFull(rand, b); err != nil {
		return "", fmt.Errorf("draw a token: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

// Mount registers sign-in's routes: GitHub's start and callback, and the
// login code's exchange.
func (s *Service) Mount(m *auth.Mount) {
	m.Handle("GET", "/v0/auth/github", auth.Anyone, s.githubStart)
	m.Handle("GET", "/v0/auth/github/callback", auth.Anyone, s.githubCallback)
	m.Handle("POST", "/v0/auth/exchange", auth.Anyone, s.exchangeLogin)
}

func (s *Service) githubOff() error {
	if s.github == nil {
		return holon.Errorf(CodeGitHubNotConfigured, "sign-in with GitHub is not configured on this gateway: the operator sets HOLON_GITHUB_CLIENT_ID and HOLON_GITHUB_CLIENT_SECRET")
	}
	return nil
}

// callbackURL is where GitHub sends the browser back.
func (s *Service) callbackURL(r *http.Request) string {
	return s.origin.Base(r) + "/v0/auth/github/callback"
}

// githubStart is GET /v0/auth/github.
func (s *Service) githubStart(w http.ResponseWriter, r *http.Request, _ httprouter.Params, _ *auth.Principal) {
	if err := s.githubOff(); err != nil {
		s.fail(w, r, err)
		return
	}
	state, err := randomToken(s.rand)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	now := s.now().UTC()
	err = s.store.Update(r.Context(), func(tx holon.Tx) error {
		return tx.Put(holon.BucketSignIn, hashed("state/", state), signinState{Expires: now.Add(signinStateTTL)})
	})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	http.SetCookie(w, &http.Cookie{Name: stateCookie, Value: state, Path: "/v0/auth/github",
		MaxAge: int(signinStateTTL.Seconds()), HttpOnly: true, SameSite: http.SameSiteLaxMode, Secure: s.origin.HTTPS(r)})
	w.Header().Set("Cache-Control", "no-store")
	http.Redirect(w, r, s.github.AuthorizeURL(state, s.callbackURL(r)), http.StatusFound)
}

// signinRefusal is a sign-in that ends on the console with a reason.
type signinRefusal struct{ reason, why string }

func (e *signinRefusal) Error() string { return e.reason + ": " + e.why }

func refuseSignin(reason, format string, args ...any) error {
	return &signinRefusal{reason: reason, why: fmt.Sprintf(format, args...)}
}

// githubCallback is GET /v0/auth/github/callback: it always ends on the
// console, with #login=<code> or #login_error=<reason>.
func (s *Service) githubCallback(w http.ResponseWriter, r *http.Request, _ httprouter.Params, _ *auth.Principal) {
	w.Header().Set("Cache-Control", "no-store")
	code, browser, err := s.signIn(r)
	console := s.publicURL + "/console"
	var refusal *signinRefusal
	if !errors.As(err, &refusal) || refusal.reason != codeStateMismatch {
		// This browser's own state came back: spent, whatever follows. A
		// state that is not its own leaves its cookie, and the sign-in it
		// has under way, alone.
		http.SetCookie(w, &http.Cookie{Name: stateCookie, Value: "", Path: "/v0/auth/github", MaxAge: -1,
			HttpOnly: true, SameSite: http.SameSiteLaxMode, Secure: s.origin.HTTPS(r)})
	}
	switch {
	case err == nil:
		http.SetCookie(w, &http.Cookie{Name: loginCookie, Value: browser, Path: "/v0/auth/exchange",
			MaxAge: int(loginCodeTTL.Seconds()), HttpOnly: true, SameSite: http.SameSiteLaxMode, Secure: s.origin.HTTPS(r)})
		http.Redirect(w, r, console+"#login="+url.QueryEscape(code), http.StatusFound)
	case errors.As(err, &refusal):
		s.log.Info("sign-in refused", "reason", refusal.reason, "why", token.Redact(refusal.why))
		http.Redirect(w, r, console+"#login_error="+refusal.reason, http.StatusFound)
	default:
		s.log.Error("sign-in failed", "err", err)
		http.Redirect(w, r, console+"#login_error=gateway_error", http.StatusFound)
	}
}

// signIn checks the callback's state, reads the GitHub account, creates or
// links the account, and returns a login code and the login cookie that
// binds it to this browser.
func (s *Service) signIn(r *http.Request) (code, browser string, err error) {
	if s.github == nil {
		return "", "", refuseSignin(CodeGitHubNotConfigured, "no GitHub app configured")
	}
	q := r.URL.Query()
	state := q.Get("state")
	c, err := r.Cookie(stateCookie)
	if state == "" || err != nil || subtle.ConstantTimeCompare([]byte(c.Value), []byte(state)) != 1 {
		// Another browser (or none) started this sign-in: it must not
		// finish here, nor burn the state of the browser that did.
		return "", "", refuseSignin(codeStateMismatch, "the state does not match this browser's cookie")
	}
	now := s.now().UTC()
	var st signinState
	err = s.store.Update(r.Context(), func(tx holon.Tx) error {
		key := hashed("state/", state)
		if err := tx.Get(holon.BucketSignIn, key, &st); err != nil {
			return err
		}
		return tx.Delete(holon.BucketSignIn, key) // accepted once
	})
	switch {
	case errors.Is(err, holon.ErrNotFound):
		return "", "", refuseSignin("state_invalid", "the state is unknown or was used already")
	case err != nil:
		return "", "", err
	case !now.Before(st.Expires):
		return "", "", refuseSignin("state_expired", "the sign-in was started more than 10 minutes ago")
	}
	if e := q.Get("error"); e != "" {
		if e != "access_denied" {
			e = "github_error"
		}
		return "", "", refuseSignin(e, "GitHub answered %s", q.Get("error"))
	}
	token, err := s.github.Exchange(r.Context(), q.Get("code"), s.callbackURL(r))
	if err != nil {
		return "", "", githubRefusal(err)
	}
	// The token reads the account once and is dropped: never stored.
	gu, err := s.github.User(r.Context(), token)
	if err != nil {
		return "", "", githubRefusal(err)
	}
	if !s.knownGitHub(gu) {
		// A new account: the signups' rate limit applies, as to POST /v0/signup.
		if ok, _ := s.signups.Allow(web.ClientAddr(r, s.trustProxy)); !ok {
			return "", "", refuseSignin(web.CodeRateLimited, "too many new accounts from this address")
		}
	}
	if code, err = randomToken(s.rand); err != nil {
		return "", "", err
	}
	if browser, err = randomToken(s.rand); err != nil {
		return "", "", err
	}
	err = s.store.Update(r.Context(), func(tx holon.Tx) error {
		handle, isNew, err := s.linkGitHub(tx, gu, now)
		if err != nil {
			return err
		}
		return tx.Put(holon.BucketSignIn, hashed("code/", code), loginCode{Handle: handle, New: isNew,
			Browser: hashed("", browser), Expires: now.Add(loginCodeTTL)})
	})
	if err != nil {
		var ge *holon.Error
		if errors.As(err, &ge) {
			return "", "", refuseSignin(ge.Code, "%s", ge.Msg)
		}
		return "", "", err
	}
	return code, browser, nil
}

func githubRefusal(err error) error {
	var ge *github.Error
	if errors.As(err, &ge) && ge.Unavailable {
		return refuseSignin(CodeGitHubUnavailable, "%v", err)
	}
	return refuseSignin("github_error", "%v", err)
}

// knownGitHub reports whether a GitHub account is linked, or its email
// has an account already: a sign-in that creates no account.
func (s *Service) knownGitHub(gu *github.User) bool {
	known := false
	_ = s.store.View(func(tx holon.Tx) error {
		var handle string
		email, err := accounts.NormalizeEmail(gu.Email)
		if known = tx.Get(holon.BucketSignIn, githubKey(gu.ID), &handle) == nil; !known && err == nil {
			_, _, err := accounts.ByEmail(tx, email)
			known = err == nil
		}
		return nil
	})
	return known
}

// linkGitHub finds the account of a GitHub account: the one linked to its
// id; else the account with its primary verified email, which is linked
// now; else a new account, handle = the login in lowercase.
func (s *Service) linkGitHub(tx holon.Tx, gu *github.User, now time.Time) (handle string, isNew bool, err error) {
	disabled := holon.Errorf(accounts.CodeAccountDisabled, "this account is disabled: no key is given to it")
	switch err := tx.Get(holon.BucketSignIn, githubKey(gu.ID), &handle); {
	case err == nil:
		acct, err := accounts.Get(tx, handle)
		if err != nil {
			return "", false, fmt.Errorf("account %s of github %d: %w", handle, gu.ID, err)
		}
		if acct.Disabled != nil {
			return "", false, disabled
		}
		if acct.GitHub == nil || acct.GitHub.ID != gu.ID {
			return "", false, fmt.Errorf("account %s is not linked back to github %d", handle, gu.ID)
		}
		acct.GitHub.Login, acct.GitHub.Seen = gu.Login, now // a renamed login follows
		return handle, false, accounts.Put(tx, acct)
	case !errors.Is(err, holon.ErrNotFound):
		return "", false, err
	}
	if gu.Email == "" {
		return "", false, holon.Errorf(CodeEmailUnverified, "the GitHub account has no verified primary email: verify one on GitHub, then sign in again")
	}
	email, err := accounts.NormalizeEmail(gu.Email)
	if err != nil {
		return "", false, err
	}
	link := &wire.GitHubLink{ID: gu.ID, Login: gu.Login, Linked: now, Seen: now}
	switch owner, barred, err := accounts.ByEmail(tx, email); {
	case err == nil:
		// An account made with this email, which GitHub has now verified.
		acct, err := accounts.Get(tx, owner)
		if err != nil {
			return "", false, fmt.Errorf("account %s of %s: %w", owner, email, err)
		}
		switch {
		case barred || acct.Disabled != nil:
			return "", false, disabled
		case acct.GitHub != nil:
			return "", false, holon.Errorf(CodeEmailLinkedElsewhere, "the account with this email is linked to another GitHub account")
		}
		acct.GitHub = link
		if err := s.claimAccount(tx, acct, gu.Login, now); err != nil {
			return "", false, err
		}
		if err := accounts.Put(tx, acct); err != nil {
			return "", false, err
		}
		return owner, false, tx.Put(holon.BucketSignIn, githubKey(gu.ID), owner)
	case !errors.Is(err, holon.ErrNotFound):
		return "", false, err
	}
	handle = strings.ToLower(gu.Login)
	if err := s.accounts.CheckHandle(handle); err != nil {
		return "", false, err
	}
	if err := s.accounts.Create(tx, accounts.Account{Handle: handle, Email: email, GitHub: link}); err != nil {
		return "", false, err
	}
	return handle, true, tx.Put(holon.BucketSignIn, githubKey(gu.ID), handle)
}

// claimAccount is the takeover of an account made with an email nobody
// proved, by the first GitHub sign-in that proves it: whoever signed up
// with that email may not be its owner (an account pre-hijacked by
// someone who signed up with another person's email and waits), so
// nothing made before keeps working for anyone but the person who just
// proved the email: every earlier key is revoked (with them the console
// sessions and the OAuth connections made with them), the authorization
// codes not yet traded are dropped, and the takeover is in the moderation
// log. The person is told on GET /v0/me and on the console.
func (s *Service) claimAccount(tx holon.Tx, acct *accounts.Account, login string, now time.Time) error {
	revoked, err := accounts.RevokeLiveKeys(tx, acct.Handle, now)
	if err != nil {
		return err
	}
	if s.claimed != nil {
		if err := s.claimed(tx, acct.Handle); err != nil {
			return err
		}
	}
	acct.Claimed = &wire.Claim{At: now, GitHub: login, KeysRevoked: revoked}
	return accounts.AppendLog(tx, accounts.LogEntry{Time: now, Actor: "github:" + login, Action: accounts.ActionClaim, Target: acct.Handle,
		Reason: fmt.Sprintf("a GitHub sign-in proved the email %s, which the account was made with unproved: %d earlier keys revoked", acct.Email, revoked)})
}

type exchangeBody struct {
	Code string `json:"code"`
}

// exchangeAnswer carries the keys: the only time they are shown.
type exchangeAnswer struct {
	Handle   string    `json:"handle"`
	HumanKey string    `json:"human_key"`
	Expires  time.Time `json:"expires"`
	// AgentKey and Mandate are set for a new account only.
	AgentKey string `json:"agent_key,omitempty"`
	Mandate  string `json:"mandate,omitempty"`
	New      bool   `json:"new_account"`
}

// exchangeLogin is POST /v0/auth/exchange.
func (s *Service) exchangeLogin(w http.ResponseWriter, r *http.Request, _ httprouter.Params, _ *auth.Principal) {
	if err := s.githubOff(); err != nil {
		s.fail(w, r, err)
		return
	}
	var body exchangeBody
	if err := web.DecodeBody(r, &body); err != nil {
		s.fail(w, r, err)
		return
	}
	if body.Code == "" {
		s.fail(w, r, holon.Errorf(holon.CodeInvalidRequest, "code is required: the login code from /console#login=<code>"))
		return
	}
	browser := ""
	if c, err := r.Cookie(loginCookie); err == nil {
		browser = hashed("", c.Value)
	}
	now := s.now().UTC()
	var ans exchangeAnswer
	var refusal error
	err := s.accounts.Update(r.Context(), func(tx holon.Tx) error {
		refusal = nil
		humanKey, human, err := s.accounts.DrawKey(token.KindHuman, "", "", false)
		if err != nil {
			return err
		}
		agentKey, agent, err := s.accounts.DrawKey(token.KindAgent, "", "", true)
		if err != nil {
			return err
		}
		key := hashed("code/", body.Code)
		var lc loginCode
		if err := tx.Get(holon.BucketSignIn, key, &lc); errors.Is(err, holon.ErrNotFound) {
			refusal = holon.Errorf(CodeLoginCodeInvalid, "this login code is unknown or was used already: sign in again at /v0/auth/github")
			return nil
		} else if err != nil {
			return err
		}
		if subtle.ConstantTimeCompare([]byte(lc.Browser), []byte(browser)) != 1 {
			// Another browser than the one the callback handed the
			// code to: refused, and the code is not burnt for that one.
			refusal = holon.Errorf(CodeLoginCodeOtherBrowser, "this login code belongs to the browser that signed in with GitHub, not to this one "+
				"(a link with someone else's code would sign you into their account): sign in yourself at /v0/auth/github")
			return nil
		}
		if err := tx.Delete(holon.BucketSignIn, key); err != nil { // once, whatever follows
			return err
		}
		if !now.Before(lc.Expires) {
			refusal = holon.Errorf(CodeLoginCodeExpired, "this login code expired (they last 2 minutes): sign in again at /v0/auth/github")
			return nil
		}
		acct, err := accounts.Get(tx, lc.Handle)
		if err != nil {
			return err
		}
		if acct.Disabled != nil {
			refusal = holon.Errorf(accounts.CodeAccountDisabled, "this account is disabled: no key is given to it")
			return nil
		}
		expires := now.Add(humanKeyTTL)
		human.Account, human.Expires = lc.Handle, &expires
		if err := accounts.PutKey(tx, human); err != nil {
			return err
		}
		ans = exchangeAnswer{Handle: lc.Handle, HumanKey: humanKey, Expires: expires, New: lc.New}
		if lc.New {
			agent.Account, agent.Mandate = lc.Handle, s.accounts.StarterMandate(lc.Handle).ID
			if err := accounts.PutKey(tx, agent); err != nil {
				return err
			}
			ans.AgentKey, ans.Mandate = agentKey, agent.Mandate
		}
		return nil
	})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if refusal != nil {
		s.fail(w, r, refusal)
		return
	}
	http.SetCookie(w, &http.Cookie{Name: loginCookie, Value: "", Path: "/v0/auth/exchange", MaxAge: -1,
		HttpOnly: true, SameSite: http.SameSiteLaxMode, Secure: s.origin.HTTPS(r)})
	w.Header().Set("Cache-Control", "no-store")
	web.JSON(w, http.StatusOK, ans)
}

// Purge deletes the states and codes that expired.
func (s *Service) Purge(now time.Time) (int, error) {
	var stale []string
	err := s.store.View(func(tx holon.Tx) error {
		for _, prefix := range []string{"state/", "code/"} {
			err := tx.ForEach(holon.BucketSignIn, prefix, func(k string, raw json.RawMessage) (bool, error) {
				var rec struct {
					Expires time.Time `json:"expires"`
				}
				if err := json.Unmarshal(raw, &rec); err != nil || !now.Before(rec.Expires) {
					stale = append(stale, k)
				}
				return true, nil
			})
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil || len(stale) == 0 {
		return 0, err
	}
	return len(stale), s.store.Update(context.Background(), func(tx holon.Tx) error {
		for _, k := range stale {
			if err := tx.Delete(holon.BucketSignIn, k); err != nil {
				return err
			}
		}
		return nil
	})
}
