package oauth

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/julienschmidt/httprouter"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"holon.dev/holon"
	"holon.dev/holon/appliance/accounts"
	"holon.dev/holon/appliance/auth"
	"holon.dev/holon/appliance/clientmeta"
	"holon.dev/holon/appliance/origin"
	"holon.dev/holon/appliance/ratelimit"
	"holon.dev/holon/appliance/token"
	"holon.dev/holon/appliance/web"
)

// Lifetimes, markers and bounds of the server's records.
const (
	codeTTL    = 2 * time.Minute
	accessTTL  = time.Hour
	refreshTTL = 30 * 24 * time.Hour

	// Markers of the secrets the server hands out; they look like keys,
	// so token.Redact cuts them out of logged text.
	codeMarker    = token.MarkerCode
	accessMarker  = token.MarkerAccess
	refreshMarker = token.MarkerRefresh

	// Registration bounds: a client registers anonymously.
	maxRedirects = 10
	maxName      = 100
	maxURI       = 2000

	// Paths of the authorization server.
	prmPath       = "/.well-known/oauth-protected-resource"
	asMetaPath    = "/.well-known/oauth-authorization-server"
	registerPath  = "/oauth/register"
	authorizePath = "/oauth/authorize"
	tokenPath     = "/oauth/token"
	consentPath   = "/console/connect"
)

// Server is a hosted gateway's authorization server for /mcp.
type Server struct {
	store    holon.Store
	accounts *accounts.Repo
	docs     *clientmeta.Fetcher
	log      *slog.Logger
	now      func() time.Time
	rand     io.Reader
	// origin is the gateway's origin rule: the issuer is its Base.
	origin        *origin.Rule
	registrations ratelimit.Limiter
	trustProxy    bool
}

// Config is what a Server is built with.
type Config struct {
	// Store is the gateway's store: the server's records are its bucket
	// holon.BucketOAuth, written in the same transactions as the keys its
	// grants make through Accounts (the accounts' repository).
	Store    holon.Store
	Accounts *accounts.Repo
	// Documents fetches the metadata documents of clients whose
	// client_id is an https URL.
	Documents *clientmeta.Fetcher
	Log       *slog.Logger
	Now       func() time.Time
	Rand      io.Reader
	// Origin is the gateway's origin rule: the issuer is the public URL,
	// or (a development gateway without one) the origin each request
	// reached.
	Origin *origin.Rule
	// Registrations limits client registrations per client address (the
	// signups' limit: both are anonymous writes); TrustProxy says whether
	// that address is read from X-Forwarded-For.
	Registrations ratelimit.Limiter
	TrustProxy    bool
}

// New returns the authorization server of cfg.
func New(cfg Config) *Server {
	return &Server{store: cfg.Store, accounts: cfg.Accounts, docs: cfg.Documents, log: cfg.Log, now: cfg.Now, rand: cfg.Rand,
		origin: cfg.Origin, registrations: cfg.Registrations, trustProxy: cfg.TrustProxy}
}

// drawSecret draws a code or token: its marker and 32 random bytes.
func (s *Server) drawSecret(marker string) (string, error) {
	return token.Draw(s.rand, marker)
}

// Mount registers the server on the API: its endpoints, the consent
// page's backend behind the human's key or session, the verifier of its
// access tokens in m's chain, and the WWW-Authenticate challenge of a
// 401 from /mcp.
func (s *Server) Mount(m *auth.Mount) {
	r := m.Router
	for _, p := range []string{prmPath, prmPath + "/mcp"} {
		r.GET(p, s.protectedResourceMetadata)
	}
	r.GET(asMetaPath, s.authServerMetadata)
	r.POST(registerPath, s.registerClient)
	r.GET(authorizePath, func(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
		http.Redirect(w, r, consentPath+"?"+r.URL.RawQuery, http.StatusSeeOther)
	})
	r.POST(tokenPath, s.token)
	// Browser-based clients (an MCP inspector) read the metadata, register
	// and trade codes from another origin: these endpoints take no cookie,
	// so any origin may call them.
	for _, p := range []string{prmPath, prmPath + "/mcp", asMetaPath, registerPath, tokenPath} {
		r.OPTIONS(p, corsPreflight)
	}
	m.Handle("GET", "/v0/oauth/authorization", auth.Human, s.checkAuthorization)
	m.Handle("POST", "/v0/oauth/authorization", auth.Human, s.grantAuthorization)
	m.Chain.Register(auth.VerifierFunc(s.verifyAccessToken))
	m.Challenge = s.challenge
}

// issuer is the gateway's public origin: HOLON_PUBLIC_URL, or (a
// development gateway without one) the origin the request reached.
func (s *Server) issuer(r *http.Request) string { return s.origin.Base(r) }

// resource is the protected resource of RFC 8707 that tokens are bound
// to: the /mcp endpoint.
func (s *Server) resource(r *http.Request) string { return s.issuer(r) + "/mcp" }

// challenge adds the WWW-Authenticate header of a refusal for want of a
// credential (RFC 6750 §3, RFC 9728 §5.1): on a 401 from /mcp, where
// discovery starts, the protected resource metadata and the scope /mcp
// needs (invalid_token when a bad one was sent); on a 403 for want of a
// scope, at any route a token reaches, insufficient_scope and the scope
// the route needs, so that the client can ask the human for it (step-up
// authorization).
func (s *Server) challenge(w http.ResponseWriter, r *http.Request, err error) {
	var se *scopeError
	switch {
	case errors.As(err, &se):
		w.Header().Set("WWW-Authenticate", fmt.Sprintf("Bearer resource_metadata=%q, error=%q, scope=%q, error_description=%q",
			s.issuer(r)+prmPath, CodeInsufficientScope, se.scope, "this request needs the scope "+se.scope))
	case r.URL.Path != "/mcp":
	default:
		v := fmt.Sprintf("Bearer resource_metadata=%q, scope=%q", s.issuer(r)+prmPath, ScopeAgents)
		if err != nil {
			v += `, error="invalid_token"`
		}
		w.Header().Set("WWW-Authenticate", v)
	}
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

func (s *Server) protectedResourceMetadata(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	iss := s.issuer(r)
	writeMetadata(w, &oauthex.ProtectedResourceMetadata{
		Resource:               iss + "/mcp",
		AuthorizationServers:   []string{iss},
		BearerMethodsSupported: []string{"header"},
		ScopesSupported:        scopeNames(),
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
	ScopesSupported               []string `json:"scopes_supported"`
	// ClientIDMetadataDocuments: a client_id may be the https URL of the
	// client's metadata document (cimd.go), instead of registering.
	ClientIDMetadataDocuments bool   `json:"client_id_metadata_document_supported"`
	ServiceDocumentation      string `json:"service_documentation"`
}

func (s *Server) authServerMetadata(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	iss := s.issuer(r)
	writeMetadata(w, authServerMeta{
		Issuer:                        iss,
		AuthorizationEndpoint:         iss + authorizePath,
		TokenEndpoint:                 iss + tokenPath,
		RegistrationEndpoint:          iss + registerPath,
		ResponseTypesSupported:        []string{"code"},
		ResponseModesSupported:        []string{"query"},
		GrantTypesSupported:           []string{"authorization_code", "refresh_token"},
		TokenEndpointAuthMethods:      []string{"none"},
		CodeChallengeMethodsSupported: []string{"S256"},
		IssParameterSupported:         true,
		ScopesSupported:               scopeNames(),
		ClientIDMetadataDocuments:     true,
		ServiceDocumentation:          iss + "/console/",
	})
}

// Error is the error answer of RFC 6749 §5.2 and RFC 7591 §3.2.2.
type Error struct {
	// Code is the error code of the RFCs, such as invalid_grant.
	Code string `json:"error"`
	// Description says what to fix.
	Description string `json:"error_description"`
}

// Error is the code and the description.
func (e *Error) Error() string { return e.Code + ": " + e.Description }

// Errorf returns an Error with the code and a description.
func Errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Description: fmt.Sprintf(format, args...)}
}

// writeOAuthError answers an OAuth error: 401 for a client that is not
// known, 400 for the rest, 500 (logged) for anything else.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	var oe *Error
	if !errors.As(err, &oe) {
		s.log.Error("oauth request failed", "path", r.URL.Path, "err", err)
		oe = &Error{Code: "server_error", Description: "the gateway could not answer; the operator's log has the details"}
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
