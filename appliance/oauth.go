package appliance

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/julienschmidt/httprouter"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"holon.dev/holon"
	"holon.dev/holon/appliance/auth"
	"holon.dev/holon/appliance/clientmeta"
	"holon.dev/holon/appliance/token"
	"holon.dev/holon/appliance/web"
)

// The MCP authorization protocol (revision 2025-11-25) for /mcp: the
// gateway is its own authorization server. A client that gets a 401 from
// /mcp finds the protected resource metadata (RFC 9728) named in
// WWW-Authenticate, then the authorization server metadata (RFC 8414),
// registers itself (RFC 7591), sends the human's browser to the consent
// page in the console (authorization code with PKCE S256, RFC 7636; the
// resource indicator of RFC 8707 bound into the grant), and trades the
// code for an access token and a refresh token at the token endpoint.
//
// The human's consent makes an agent key bound to the mandate they chose,
// listed in the console like any key. Access tokens act as that key, for
// /mcp only, until they expire; refresh tokens rotate on use, and a used
// refresh token presented again revokes the key, so the whole family
// stops. Revoking the key, or disabling the account, ends every token of
// it at its next request. Codes and tokens are stored as SHA-256 hashes
// only (holon.BucketOAuth), like keys.
const (
	oauthCodeTTL    = 2 * time.Minute
	oauthAccessTTL  = time.Hour
	oauthRefreshTTL = 30 * 24 * time.Hour

	// Markers of the secrets the authorization server hands out; they
	// look like keys, so redactKeys cuts them out of logged text.
	oauthCodeMarker    = "hlk_c_"
	oauthAccessMarker  = "hlk_t_"
	oauthRefreshMarker = "hlk_r_"

	// Registration bounds: a client registers anonymously.
	oauthMaxRedirects = 10
	oauthMaxName      = 100
	oauthMaxURI       = 2000

	// Paths of the authorization server.
	oauthPRMPath       = "/.well-known/oauth-protected-resource"
	oauthASMetaPath    = "/.well-known/oauth-authorization-server"
	oauthRegisterPath  = "/oauth/register"
	oauthAuthorizePath = "/oauth/authorize"
	oauthTokenPath     = "/oauth/token"
	oauthConsentPath   = "/console/connect"
)

// oauthClient is a registered client (holon.BucketOAuth "client/<id>"). Its
// name is what it says it is: nobody checked it.
type oauthClient struct {
	ID           string    `json:"client_id"`
	Name         string    `json:"client_name"`
	URI          string    `json:"client_uri,omitempty"`
	RedirectURIs []string  `json:"redirect_uris"`
	GrantTypes   []string  `json:"grant_types"`
	Created      time.Time `json:"created"`
}

// oauthCode is an authorization code, by its hash ("code/<sha256>"): the
// human's decision, waiting for the client to trade it once.
type oauthCode struct {
	Client      string    `json:"client_id"`
	ClientName  string    `json:"client_name"`
	RedirectURI string    `json:"redirect_uri"`
	Challenge   string    `json:"code_challenge"`
	Resource    string    `json:"resource"`
	Scope       string    `json:"scope,omitempty"`
	Account     string    `json:"account"`
	Mandate     string    `json:"mandate"`
	Ask         bool      `json:"ask_in_client"`
	Expires     time.Time `json:"expires"`
	// Used is set when the code was traded; KeyHash is the key it made,
	// revoked when the code comes back.
	Used    *time.Time `json:"used,omitempty"`
	KeyHash string     `json:"key_hash,omitempty"`
}

// oauthAccess is an access token, by its hash ("access/<sha256>").
type oauthAccess struct {
	KeyHash  string    `json:"key_hash"`
	Prefix   string    `json:"prefix"`
	Resource string    `json:"resource"`
	Expires  time.Time `json:"expires"`
}

// oauthRefresh is a refresh token, by its hash ("refresh/<sha256>").
type oauthRefresh struct {
	KeyHash  string    `json:"key_hash"`
	Client   string    `json:"client_id"`
	Resource string    `json:"resource"`
	Scope    string    `json:"scope,omitempty"`
	Expires  time.Time `json:"expires"`
	// Access is the hash of the access token issued with it, deleted when
	// the refresh token is used.
	Access string     `json:"access"`
	Used   *time.Time `json:"used,omitempty"`
}

func oauthClientKey(id string) string { return "client/" + id }

func oauthSecretKey(kind, secret string) string {
	return kind + "/" + token.Hash(secret)
}

// drawSecret draws a code or token: its marker and 32 random bytes.
func (h *hosted) drawSecret(marker string) (string, error) {
	return token.Draw(h.rand, marker)
}

// routeOAuth mounts the authorization server of a hosted gateway.
func (a *api) routeOAuth() {
	if a.hosted == nil {
		return
	}
	r := a.router
	for _, p := range []string{oauthPRMPath, oauthPRMPath + "/mcp"} {
		r.GET(p, a.protectedResourceMetadata)
	}
	r.GET(oauthASMetaPath, a.authServerMetadata)
	r.POST(oauthRegisterPath, a.registerClient)
	r.GET(oauthAuthorizePath, func(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
		http.Redirect(w, r, oauthConsentPath+"?"+r.URL.RawQuery, http.StatusSeeOther)
	})
	r.POST(oauthTokenPath, a.token)
	// Browser-based clients (an MCP inspector) read the metadata, register
	// and trade codes from another origin: these endpoints take no cookie,
	// so any origin may call them.
	for _, p := range []string{oauthPRMPath, oauthPRMPath + "/mcp", oauthASMetaPath, oauthRegisterPath, oauthTokenPath} {
		r.OPTIONS(p, corsPreflight)
	}
	a.handle("GET", "/v0/oauth/authorization", auth.Human, a.checkAuthorization)
	a.handle("POST", "/v0/oauth/authorization", auth.Human, a.grantAuthorization)
}

// issuer is the gateway's public origin: HOLON_PUBLIC_URL, or (a
// development gateway without one) the origin the request reached.
func (a *api) issuer(r *http.Request) string { return a.origin.Base(r) }

// resource is the protected resource of RFC 8707 that tokens are bound
// to: the /mcp endpoint.
func (a *api) resource(r *http.Request) string { return a.issuer(r) + "/mcp" }

// challenge adds to a 401 from /mcp the header that starts discovery
// (RFC 9728 §5.1); invalid says a token was sent and refused.
func (a *api) challenge(w http.ResponseWriter, r *http.Request, invalid bool) {
	if a.hosted == nil || r.URL.Path != "/mcp" {
		return
	}
	v := fmt.Sprintf("Bearer resource_metadata=%q", a.issuer(r)+oauthPRMPath)
	if invalid {
		v += `, error="invalid_token"`
	}
	w.Header().Set("WWW-Authenticate", v)
}

// corsPreflight answers a browser's preflight for the authorization
// server's endpoints.
func corsPreflight(w http.ResponseWriter, _ *http.Request, _ httprouter.Params) {
	h := w.Header()
	h.Set("Access-Control-Allow-Origin", "*")
	h.Set("Access-Control-Allow-Methods", "GET, POST, OPTIONS")
	h.Set("Access-Control-Allow-Headers", "Content-Type, MCP-Protocol-Version")
	h.Set("Access-Control-Max-Age", "600")
	w.WriteHeader(http.StatusNoContent)
}

func writeMetadata(w http.ResponseWriter, v any) {
	w.Header().Set("Access-Control-Allow-Origin", "*")
	w.Header().Set("Cache-Control", "max-age=300")
	web.JSON(w, http.StatusOK, v)
}

func (a *api) protectedResourceMetadata(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	iss := a.issuer(r)
	writeMetadata(w, &oauthex.ProtectedResourceMetadata{
		Resource:               iss + "/mcp",
		AuthorizationServers:   []string{iss},
		BearerMethodsSupported: []string{"header"},
		ResourceName:           "Holon gateway",
		ResourceDocumentation:  iss + "/console/",
	})
}

// authServerMeta is RFC 8414's document, with only the fields this
// server fills (oauthex.AuthServerMeta would send an empty jwks_uri).
type authServerMeta struct {
	Issuer                        string   `json:"issuer"`
	AuthorizationEndpoint         string   `json:"authorization_endpoint"`
	TokenEndpoint                 string   `json:"token_endpoint"`
	RegistrationEndpoint          string   `json:"registration_endpoint"`
	ResponseTypesSupported        []string `json:"response_types_supported"`
	ResponseModesSupported        []string `json:"response_modes_supported"`
	GrantTypesSupported           []string `json:"grant_types_supported"`
	TokenEndpointAuthMethods      []string `json:"token_endpoint_auth_methods_supported"`
	CodeChallengeMethodsSupported []string `json:"code_challenge_methods_supported"`
	IssParameterSupported         bool     `json:"authorization_response_iss_parameter_supported"`
	// ClientIDMetadataDocuments: a client_id may be the https URL of the
	// client's metadata document (oauth_cimd.go), instead of registering.
	ClientIDMetadataDocuments bool   `json:"client_id_metadata_document_supported"`
	ServiceDocumentation      string `json:"service_documentation"`
}

func (a *api) authServerMetadata(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	iss := a.issuer(r)
	writeMetadata(w, authServerMeta{
		Issuer:                        iss,
		AuthorizationEndpoint:         iss + oauthAuthorizePath,
		TokenEndpoint:                 iss + oauthTokenPath,
		RegistrationEndpoint:          iss + oauthRegisterPath,
		ResponseTypesSupported:        []string{"code"},
		ResponseModesSupported:        []string{"query"},
		GrantTypesSupported:           []string{"authorization_code", "refresh_token"},
		TokenEndpointAuthMethods:      []string{"none"},
		CodeChallengeMethodsSupported: []string{"S256"},
		IssParameterSupported:         true,
		ClientIDMetadataDocuments:     true,
		ServiceDocumentation:          iss + "/console/",
	})
}

// oauthError is the error answer of RFC 6749 §5.2 and RFC 7591 §3.2.2.
type oauthError struct {
	Code        string `json:"error"`
	Description string `json:"error_description"`
}

func (e *oauthError) Error() string { return e.Code + ": " + e.Description }

func oauthErrorf(code, format string, args ...any) *oauthError {
	return &oauthError{Code: code, Description: fmt.Sprintf(format, args...)}
}

// writeOAuthError answers an OAuth error: 401 for a client that is not
// known, 400 for the rest, 500 (logged) for anything else.
func (a *api) writeOAuthError(w http.ResponseWriter, r *http.Request, err error) {
	var oe *oauthError
	if !errors.As(err, &oe) {
		a.log.Error("oauth request failed", "path", r.URL.Path, "err", err)
		oe = &oauthError{Code: "server_error", Description: "the gateway could not answer; the operator's log has the details"}
		w.Header().Set("Cache-Control", "no-store")
		web.JSON(w, http.StatusInternalServerError, oe)
		return
	}
	w.Header().Set("Access-Control-Allow-Origin", "*")
	status := http.StatusBadRequest
	if oe.Code == "invalid_client" {
		status = http.StatusUnauthorized
	}
	w.Header().Set("Cache-Control", "no-store")
	web.JSON(w, status, oe)
}

// registrationRequest is what a client sends to register (RFC 7591 §2):
// the fields this server reads; others are ignored, as §3.1 allows.
type registrationRequest struct {
	RedirectURIs            []string `json:"redirect_uris"`
	TokenEndpointAuthMethod string   `json:"token_endpoint_auth_method"`
	GrantTypes              []string `json:"grant_types"`
	ResponseTypes           []string `json:"response_types"`
	ClientName              string   `json:"client_name"`
	ClientURI               string   `json:"client_uri"`
	Scope                   string   `json:"scope"`
}

// registrationAnswer is RFC 7591 §3.2.1's answer.
type registrationAnswer struct {
	ClientID                string   `json:"client_id"`
	ClientIDIssuedAt        int64    `json:"client_id_issued_at"`
	ClientName              string   `json:"client_name"`
	ClientURI               string   `json:"client_uri,omitempty"`
	RedirectURIs            []string `json:"redirect_uris"`
	GrantTypes              []string `json:"grant_types"`
	ResponseTypes           []string `json:"response_types"`
	TokenEndpointAuthMethod string   `json:"token_endpoint_auth_method"`
	Scope                   string   `json:"scope,omitempty"`
}

// registerClient is POST /oauth/register: dynamic client registration of
// public clients (token_endpoint_auth_method "none"; a client asking for a
// secret is registered without one, and told so in the answer).
func (a *api) registerClient(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	h := a.hosted
	// A registration is an anonymous write, like a signup: it counts
	// against the same limit of the client's address.
	if ok, wait := h.limits.signup.Allow(web.ClientAddr(r, h.limits.trustProxy)); !ok {
		a.tooMany(w, r, wait, "your address (signups and client registrations)")
		return
	}
	var req registrationRequest
	b, err := web.ReadBody(r)
	if err == nil {
		err = json.Unmarshal(b, &req)
	}
	if err != nil {
		a.writeOAuthError(w, r, oauthErrorf("invalid_client_metadata", "the body must be a JSON object of client metadata (RFC 7591): %v", err))
		return
	}
	c, err := newOAuthClient(req)
	if err != nil {
		a.writeOAuthError(w, r, err)
		return
	}
	c.Created = h.now().UTC()
	for attempt := 0; ; attempt++ {
		id, err := h.drawSecret("hoc_")
		if err != nil {
			a.writeOAuthError(w, r, err)
			return
		}
		c.ID = id[:4+16] // a client id is public: 80 random bits name it
		err = h.store.Update(r.Context(), func(tx holon.Tx) error {
			var old oauthClient
			if err := tx.Get(holon.BucketOAuth, oauthClientKey(c.ID), &old); err == nil {
				return errKeyCollision
			} else if !errors.Is(err, holon.ErrNotFound) {
				return err
			}
			return tx.Put(holon.BucketOAuth, oauthClientKey(c.ID), c)
		})
		if errors.Is(err, errKeyCollision) && attempt < 3 {
			continue
		}
		if err != nil {
			a.writeOAuthError(w, r, err)
			return
		}
		break
	}
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Access-Control-Allow-Origin", "*")
	web.JSON(w, http.StatusCreated, registrationAnswer{
		ClientID: c.ID, ClientIDIssuedAt: c.Created.Unix(), ClientName: c.Name, ClientURI: c.URI,
		RedirectURIs: c.RedirectURIs, GrantTypes: c.GrantTypes, ResponseTypes: []string{"code"},
		TokenEndpointAuthMethod: "none", Scope: req.Scope,
	})
}

// newOAuthClient checks a registration request and builds the client.
func newOAuthClient(req registrationRequest) (*oauthClient, error) {
	bad := func(format string, args ...any) error {
		return oauthErrorf("invalid_client_metadata", format, args...)
	}
	if len(req.RedirectURIs) == 0 {
		return nil, oauthErrorf("invalid_redirect_uri", "redirect_uris is required: the URIs the browser is sent back to, such as http://127.0.0.1:33418/callback")
	}
	if len(req.RedirectURIs) > oauthMaxRedirects {
		return nil, oauthErrorf("invalid_redirect_uri", "at most %d redirect_uris", oauthMaxRedirects)
	}
	for _, u := range req.RedirectURIs {
		if err := checkRedirectURI(u); err != nil {
			return nil, oauthErrorf("invalid_redirect_uri", "redirect_uri %q: %v", u, err)
		}
	}
	grants := req.GrantTypes
	if len(grants) == 0 {
		grants = []string{"authorization_code", "refresh_token"}
	}
	for _, g := range grants {
		if g != "authorization_code" && g != "refresh_token" {
			return nil, bad("grant_types: %q is not offered here: only authorization_code and refresh_token", g)
		}
	}
	if !slices.Contains(grants, "authorization_code") {
		return nil, bad("grant_types must include authorization_code")
	}
	for _, rt := range req.ResponseTypes {
		if rt != "code" {
			return nil, bad("response_types: %q is not offered here: only code", rt)
		}
	}
	name := strings.TrimSpace(req.ClientName)
	if name == "" {
		name = "an unnamed client"
	}
	if len([]rune(name)) > oauthMaxName || strings.ContainsFunc(name, isControl) {
		return nil, bad("client_name: at most %d printable characters", oauthMaxName)
	}
	if req.ClientURI != "" {
		u, err := url.Parse(req.ClientURI)
		if err != nil || len(req.ClientURI) > oauthMaxURI || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			return nil, bad("client_uri must be an http(s) URL")
		}
	}
	return &oauthClient{Name: name, URI: req.ClientURI, RedirectURIs: slices.Clone(req.RedirectURIs), GrantTypes: grants}, nil
}

func isControl(r rune) bool { return r < 0x20 || r == 0x7f }

// privateScheme is a private-use URI scheme of a native app (RFC 8252
// §7.1), such as cursor: or com.example.app:.
var privateScheme = regexp.MustCompile(`^[a-z][a-z0-9+.-]*$`)

// checkRedirectURI accepts https URLs, http on a loopback address (RFC
// 8252 §7.3) and private-use schemes; never a fragment, and never a
// scheme a browser would run (javascript:, data:, …).
func checkRedirectURI(s string) error {
	if len(s) > oauthMaxURI {
		return fmt.Errorf("longer than %d characters", oauthMaxURI)
	}
	u, err := url.Parse(s)
	if err != nil || !u.IsAbs() {
		return errors.New("not an absolute URI")
	}
	if u.Fragment != "" || strings.Contains(s, "#") {
		return errors.New("a redirect URI has no fragment")
	}
	if u.User != nil {
		return errors.New("a redirect URI carries no credentials")
	}
	switch scheme := strings.ToLower(u.Scheme); scheme {
	case "https":
		if u.Host == "" {
			return errors.New("no host")
		}
	case "http":
		if !isLoopbackHost(u.Hostname()) {
			return errors.New("http is for loopback addresses only (127.0.0.1, [::1] or localhost): use https")
		}
	case "javascript", "data", "file", "vbscript", "about", "blob", "ws", "wss", "ftp":
		return fmt.Errorf("%s: is not a redirect scheme", scheme)
	default:
		if !privateScheme.MatchString(scheme) {
			return errors.New("not a valid scheme")
		}
	}
	return nil
}

func isLoopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// redirectMatches reports whether a requested redirect URI is one the
// client registered: the same string, except that an http loopback URI
// may name any port (RFC 8252 §7.3), since a native app listens where
// the system lets it.
func redirectMatches(registered []string, requested string) bool {
	if slices.Contains(registered, requested) {
		return true
	}
	q, err := url.Parse(requested)
	if err != nil || q.Scheme != "http" || !isLoopbackHost(q.Hostname()) {
		return false
	}
	for _, reg := range registered {
		g, err := url.Parse(reg)
		if err != nil || g.Scheme != "http" {
			continue
		}
		if g.Hostname() == q.Hostname() && g.EscapedPath() == q.EscapedPath() && g.RawQuery == q.RawQuery && g.User == nil && q.User == nil && q.Fragment == "" {
			return true
		}
	}
	return false
}

// getClient reads a registered client, or the client an https client_id's
// metadata document describes (oauth_cimd.go).
func (h *hosted) getClient(ctx context.Context, id string) (*oauthClient, error) {
	if clientmeta.IsURL(id) {
		return h.documentClient(ctx, id)
	}
	var c oauthClient
	if id == "" || len(id) > 64 {
		return nil, holon.ErrNotFound
	}
	err := h.store.View(func(tx holon.Tx) error { return tx.Get(holon.BucketOAuth, oauthClientKey(id), &c) })
	if err != nil {
		return nil, err
	}
	return &c, nil
}
