package oauth

import (
	"errors"
	"net/http"
	"net/url"
	"regexp"
	"strings"

	"github.com/julienschmidt/httprouter"

	"holon.dev/holon"
	"holon.dev/holon/appliance/accounts"
	"holon.dev/holon/appliance/auth"
	"holon.dev/holon/appliance/clientmeta"
	"holon.dev/holon/appliance/web"
)

// Errors of an authorization request that cannot be sent back to the
// client, because the client or its redirect URI is not known: the
// consent page shows them to the human instead (RFC 6749 §4.1.2.1).
const (
	// CodeInvalidClient: the client_id was never registered here, or
	// names a metadata document the gateway cannot use.
	CodeInvalidClient = "oauth_invalid_client"
	// CodeInvalidRedirect: the redirect_uri is not one the client
	// registered.
	CodeInvalidRedirect = "oauth_invalid_redirect_uri"
)

// authorizationRequest is an authorization request (RFC 6749 §4.1.1 with
// PKCE and a resource indicator), as the consent page passes it on.
type authorizationRequest struct {
	ResponseType        string `json:"response_type"`
	ClientID            string `json:"client_id"`
	RedirectURI         string `json:"redirect_uri"`
	CodeChallenge       string `json:"code_challenge"`
	CodeChallengeMethod string `json:"code_challenge_method"`
	State               string `json:"state,omitempty"`
	Scope               string `json:"scope,omitempty"`
	Resource            string `json:"resource,omitempty"`
}

// grantBody is the human's answer on the consent page.
type grantBody struct {
	authorizationRequest
	// Decision is "allow" or "deny".
	Decision    string `json:"decision"`
	Mandate     string `json:"mandate,omitempty"`
	AskInClient bool   `json:"ask_in_client,omitempty"`
}

// authorizationAnswer describes a valid request for the consent page, or
// (ErrorRedirect) where to send the browser with an error for the client.
type authorizationAnswer struct {
	ClientID   string `json:"client_id,omitempty"`
	ClientName string `json:"client_name,omitempty"`
	ClientURI  string `json:"client_uri,omitempty"`
	// RedirectURI is where the browser goes next; Redirect is that URI
	// with the answer in its query (after a decision).
	RedirectURI string `json:"redirect_uri,omitempty"`
	Resource    string `json:"resource,omitempty"`
	// Scope is the scopes the token will carry (space-separated), Scopes
	// what each lets the application do, and UnknownScopes the names it
	// asked for that this server does not offer (not granted).
	Scope         string      `json:"scope,omitempty"`
	Scopes        []scopeInfo `json:"scopes,omitempty"`
	UnknownScopes []string    `json:"unknown_scopes,omitempty"`
	ErrorRedirect string      `json:"error_redirect,omitempty"`
	Redirect      string      `json:"redirect,omitempty"`
}

// pkceChallenge is a S256 code challenge: base64url of a SHA-256, no
// padding (RFC 7636 §4.2).
var pkceChallenge = regexp.MustCompile(`^[A-Za-z0-9_-]{43}$`)

// check validates an authorization request. An unknown client or
// redirect URI is an error for the human; the other faults come back as
// an ErrorRedirect for the client.
func (s *Server) checkRequest(r *http.Request, q *authorizationRequest) (*client, *authorizationAnswer, error) {
	c, err := s.getClient(r.Context(), q.ClientID)
	if err != nil {
		var doc *clientmeta.Error
		if errors.As(err, &doc) {
			return nil, nil, holon.Errorf(CodeInvalidClient, "the application that sent you here describes itself in a document this gateway cannot use (%s): nothing was sent to it", doc.Error())
		}
		if errors.Is(err, holon.ErrNotFound) {
			return nil, nil, holon.Errorf(CodeInvalidClient, "the application that sent you here is not registered with this gateway (client_id %q): start connecting again from the application", q.ClientID)
		}
		return nil, nil, err
	}
	if q.RedirectURI == "" || !redirectMatches(c.RedirectURIs, q.RedirectURI) {
		return nil, nil, holon.Errorf(CodeInvalidRedirect, "%s asked to send you back to %q, which is not among the redirect URIs it registered or lists in its metadata document: nothing was sent to it", c.Name, q.RedirectURI)
	}
	refuse := func(code, desc string) (*client, *authorizationAnswer, error) {
		return c, &authorizationAnswer{ErrorRedirect: s.redirectWith(r, q.RedirectURI, q.State, url.Values{"error": {code}, "error_description": {desc}})}, nil
	}
	switch {
	case q.ResponseType != "code":
		return refuse("unsupported_response_type", "response_type must be code")
	case q.CodeChallenge == "":
		return refuse("invalid_request", "code_challenge is required: this server needs PKCE with S256")
	case q.CodeChallengeMethod != "S256":
		return refuse("invalid_request", "code_challenge_method must be S256")
	case !pkceChallenge.MatchString(q.CodeChallenge):
		return refuse("invalid_request", "code_challenge must be the base64url SHA-256 of the code_verifier (43 characters)")
	case q.Resource != "" && q.Resource != s.resource(r):
		return refuse("invalid_target", "resource must be "+s.resource(r))
	case len(q.State) > 1000 || len(q.Scope) > 1000:
		return refuse("invalid_request", "state and scope are at most 1000 characters")
	}
	granted, unknown := grantScope(q.Scope)
	return c, &authorizationAnswer{ClientID: c.ID, ClientName: c.Name, ClientURI: c.URI, RedirectURI: q.RedirectURI,
		Resource: s.resource(r), Scope: strings.Join(granted, " "), Scopes: scopeInfos(granted), UnknownScopes: unknown}, nil
}

// redirectWith is a redirect URI with the answer's parameters, the state
// and the issuer (RFC 9207) added to its query.
func (s *Server) redirectWith(r *http.Request, redirectURI, state string, v url.Values) string {
	u, err := url.Parse(redirectURI)
	if err != nil {
		return redirectURI // checked at registration: cannot happen
	}
	q := u.Query()
	for k, vs := range v {
		q[k] = vs
	}
	if state != "" {
		q.Set("state", state)
	}
	q.Set("iss", s.issuer(r))
	u.RawQuery = q.Encode()
	return u.String()
}

func queryRequest(r *http.Request) authorizationRequest {
	q := r.URL.Query()
	return authorizationRequest{
		ResponseType: q.Get("response_type"), ClientID: q.Get("client_id"), RedirectURI: q.Get("redirect_uri"),
		CodeChallenge: q.Get("code_challenge"), CodeChallengeMethod: q.Get("code_challenge_method"),
		State: q.Get("state"), Scope: q.Get("scope"), Resource: q.Get("resource"),
	}
}

// checkAuthorization is GET /v0/oauth/authorization?<the authorization
// request>: what the consent page shows, for the signed-in human.
func (s *Server) checkAuthorization(w http.ResponseWriter, r *http.Request, _ httprouter.Params, p *auth.Principal) {
	q := queryRequest(r)
	_, ans, err := s.checkRequest(r, &q)
	if err != nil {
		web.Fail(s.log, w, r, err)
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	web.JSON(w, http.StatusOK, ans)
}

// grantAuthorization is POST /v0/oauth/authorization: the human allows
// the client to act under one of their root mandates (an authorization
// code, traded once within codeTTL for the key's tokens), or denies
// it. The answer says where to send the browser.
func (s *Server) grantAuthorization(w http.ResponseWriter, r *http.Request, _ httprouter.Params, p *auth.Principal) {
	var body grantBody
	if err := web.DecodeBody(r, &body); err != nil {
		web.Fail(s.log, w, r, err)
		return
	}
	c, ans, err := s.checkRequest(r, &body.authorizationRequest)
	if err != nil {
		web.Fail(s.log, w, r, err)
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	if ans.ErrorRedirect != "" {
		web.JSON(w, http.StatusOK, ans)
		return
	}
	switch body.Decision {
	case "deny":
		ans.Redirect = s.redirectWith(r, body.RedirectURI, body.State, url.Values{"error": {"access_denied"}, "error_description": {"the human declined"}})
		web.JSON(w, http.StatusOK, ans)
		return
	case "allow":
	default:
		web.Fail(s.log, w, r, holon.Errorf(holon.CodeInvalidRequest, "decision must be allow or deny"))
		return
	}
	if body.Mandate == "" {
		web.Fail(s.log, w, r, holon.Errorf(holon.CodeInvalidRequest, "mandate is required: the mandate %s acts under, such as %s/sandbox", c.Name, p.Account))
		return
	}
	secret, err := s.drawSecret(codeMarker)
	if err != nil {
		web.Fail(s.log, w, r, err)
		return
	}
	now := s.now().UTC()
	rec := code{Client: c.ID, ClientName: c.Name, RedirectURI: body.RedirectURI, Challenge: body.CodeChallenge,
		Resource: s.resource(r), Scope: ans.Scope, Account: p.Account, Mandate: body.Mandate, Ask: body.AskInClient,
		Expires: now.Add(codeTTL)}
	err = s.store.Update(r.Context(), func(tx holon.Tx) error {
		acct, err := accounts.Get(tx, p.Account)
		if err != nil {
			return err
		}
		if !acct.HasMandate(body.Mandate) {
			return web.NotFound("no mandate %s among your root mandates", body.Mandate)
		}
		return tx.Put(holon.BucketOAuth, secretKey("code", secret), rec)
	})
	if err != nil {
		web.Fail(s.log, w, r, err)
		return
	}
	ans.Redirect = s.redirectWith(r, body.RedirectURI, body.State, url.Values{"code": {secret}})
	web.JSON(w, http.StatusOK, ans)
}
