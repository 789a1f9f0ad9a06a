package oauth

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

	"github.com/julienschmidt/httprouter"

	"holon.dev/holon"
	"holon.dev/holon/appliance/accounts"
	"holon.dev/holon/appliance/clientmeta"
	"holon.dev/holon/appliance/web"
)

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
func (s *Server) registerClient(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	// A registration is an anonymous write, like a signup: it counts
	// against the same limit of the client's address.
	if ok, wait := s.registrations.Allow(web.ClientAddr(r, s.trustProxy)); !ok {
		web.TooMany(s.log, w, r, wait, "your address (signups and client registrations)")
		return
	}
	var req registrationRequest
	b, err := web.ReadBody(r)
	if err == nil {
		err = json.Unmarshal(b, &req)
	}
	if err != nil {
		s.writeError(w, r, Errorf("invalid_client_metadata", "the body must be a JSON object of client metadata (RFC 7591): %v", err))
		return
	}
	c, err := newClient(req)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	c.Created = s.now().UTC()
	err = accounts.DrawUpdate(r.Context(), s.store, func(tx holon.Tx) error {
		id, err := s.drawSecret("hoc_")
		if err != nil {
			return err
		}
		c.ID = id[:4+16] // a client id is public: 80 random bits name it
		var old client
		if err := tx.Get(holon.BucketOAuth, clientKey(c.ID), &old); err == nil {
			return accounts.ErrCollision
		} else if !errors.Is(err, holon.ErrNotFound) {
			return err
		}
		return tx.Put(holon.BucketOAuth, clientKey(c.ID), c)
	})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Access-Control-Allow-Origin", "*")
	web.JSON(w, http.StatusCreated, registrationAnswer{
		ClientID: c.ID, ClientIDIssuedAt: c.Created.Unix(), ClientName: c.Name, ClientURI: c.URI,
		RedirectURIs: c.RedirectURIs, GrantTypes: c.GrantTypes, ResponseTypes: []string{"code"},
		TokenEndpointAuthMethod: "none", Scope: req.Scope,
	})
}

// newClient checks a registration request and builds the client.
func newClient(req registrationRequest) (*client, error) {
	bad := func(format string, args ...any) error {
		return Errorf("invalid_client_metadata", format, args...)
	}
	if len(req.RedirectURIs) == 0 {
		return nil, Errorf("invalid_redirect_uri", "redirect_uris is required: the URIs the browser is sent back to, such as http://127.0.0.1:33418/callback")
	}
	if len(req.RedirectURIs) > maxRedirects {
		return nil, Errorf("invalid_redirect_uri", "at most %d redirect_uris", maxRedirects)
	}
	for _, u := range req.RedirectURIs {
		if err := checkRedirectURI(u); err != nil {
			return nil, Errorf("invalid_redirect_uri", "redirect_uri %q: %v", u, err)
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
	if len([]rune(name)) > maxName || strings.ContainsFunc(name, isControl) {
		return nil, bad("client_name: at most %d printable characters", maxName)
	}
	if req.ClientURI != "" {
		u, err := url.Parse(req.ClientURI)
		if err != nil || len(req.ClientURI) > maxURI || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			return nil, bad("client_uri must be an http(s) URL")
		}
	}
	return &client{Name: name, URI: req.ClientURI, RedirectURIs: slices.Clone(req.RedirectURIs), GrantTypes: grants}, nil
}

func isControl(r rune) bool { return r < 0x20 || r == 0x7f }

// privateScheme is a private-use URI scheme of a native app (RFC 8252
// §7.1), such as cursor: or com.example.app:.
var privateScheme = regexp.MustCompile(`^[a-z][a-z0-9+.-]*$`)

// checkRedirectURI accepts https URLs, http on a loopback address (RFC
// 8252 §7.3) and private-use schemes; never a fragment, and never a
// scheme a browser would run (javascript:, data:, …).
func checkRedirectURI(s string) error {
	if len(s) > maxURI {
		return fmt.Errorf("longer than %d characters", maxURI)
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
// metadata document describes (cimd.go).
func (s *Server) getClient(ctx context.Context, id string) (*client, error) {
	if clientmeta.IsURL(id) {
		return s.documentClient(ctx, id)
	}
	var c client
	if id == "" || len(id) > 64 {
		return nil, holon.ErrNotFound
	}
	err := s.store.View(func(tx holon.Tx) error { return tx.Get(holon.BucketOAuth, clientKey(id), &c) })
	if err != nil {
		return nil, err
	}
	return &c, nil
}
