package webui

import (
	"errors"
	"net/http"
	"net/url"
	"strings"

	"holon.dev/holon/gateway"
)

// The consent page of the MCP authorization protocol. An MCP client (Claude
// Desktop, claude.ai, Claude Code, …) sends the human's browser to the
// gateway's authorization endpoint, which lands here with the request in
// the query. The human, signed in (or sent to sign in and back), sees the
// client's self-declared name, picks one of their root mandates or creates
// one from a short form, says whether approvals may be asked in the
// client, and allows or denies. The gateway answers where the browser
// goes next: the client's redirect URI with a code, or with an error.

// connectPath is the consent page: the gateway's authorization endpoint
// sends the browser here.
const connectPath = Prefix + "/connect"

// oauthParams are the authorization request's parameters, carried from
// the page's query into its form.
var oauthParams = []string{"response_type", "client_id", "redirect_uri", "code_challenge", "code_challenge_method", "state", "scope", "resource"}

// authorization is the API's description of a request
// (GET /v0/oauth/authorization).
type authorization struct {
	ClientID    string `json:"client_id"`
	ClientName  string `json:"client_name"`
	ClientURI   string `json:"client_uri"`
	RedirectURI string `json:"redirect_uri"`
	Resource    string `json:"resource"`
	// Scope is what the application will be allowed (space-separated
	// scopes), Scopes each with what it allows, UnknownScopes what it
	// asked for that the gateway does not offer.
	Scope         string      `json:"scope"`
	Scopes        []scopeView `json:"scopes"`
	UnknownScopes []string    `json:"unknown_scopes"`
	ErrorRedirect string      `json:"error_redirect"`
	Redirect      string      `json:"redirect"`
}

// scopeView is one scope the application will be allowed, and what it
// lets it do.
type scopeView struct {
	Name   string `json:"name"`
	Allows string `json:"allows"`
}

type connectPage struct {
	Auth     authorization
	Params   []param
	Mandates []*gateway.MandateState
	// Chosen is the mandate picked ("new": the form below).
	Chosen string
	Ask    bool
	New    mandateForm
}

type param struct{ Name, Value string }

// RedirectHost is where the browser goes back to, as the human should
// read it.
func (p connectPage) RedirectHost() string {
	u, err := url.Parse(p.Auth.RedirectURI)
	if err != nil {
		return p.Auth.RedirectURI
	}
	if u.Host == "" {
		return u.Scheme + ":"
	}
	return u.Host
}

// connectQuery is the authorization request of a GET (its query) or of
// the form's POST (its hidden fields).
func connectQuery(r *http.Request, post bool) url.Values {
	q := url.Values{}
	for _, k := range oauthParams {
		v := r.URL.Query().Get(k)
		if post {
			v = r.PostFormValue(k)
		}
		if v != "" {
			q.Set(k, v)
		}
	}
	return q
}

// checkAuthorization asks the API about the request; it answers the
// browser itself when the request cannot go on (unknown client or
// redirect URI: an error page; other faults: back to the client).
func (c *Console) checkAuthorization(w http.ResponseWriter, r *http.Request, v Viewer, q url.Values) (*authorization, bool) {
	if !c.b.Hosted() || v.Kind != ViewerHuman {
		c.render(w, r, v, http.StatusForbidden, "error", errorPage{Title: "Sign in as a human",
			Message: "Connecting an application needs a hosted gateway and your human key: the mandate you pick is yours."})
		return nil, false
	}
	var a authorization
	if err := c.b.Do(r, "GET", "/v0/oauth/authorization?"+q.Encode(), nil, &a); err != nil {
		c.fail(w, r, v, err)
		return nil, false
	}
	if a.ErrorRedirect != "" {
		http.Redirect(w, r, a.ErrorRedirect, http.StatusSeeOther)
		return nil, false
	}
	return &a, true
}

func (c *Console) connectForm(w http.ResponseWriter, r *http.Request, v Viewer) {
	q := connectQuery(r, false)
	a, ok := c.checkAuthorization(w, r, v, q)
	if !ok {
		return
	}
	p := connectPage{Auth: *a, Chosen: "new", Ask: true, New: mandateForm{
		Name: slug(a.ClientName), Total: "5.00", AllowAgents: "holon-labs/*",
	}}
	c.showConnect(w, r, v, q, &p, http.StatusOK)
}

// showConnect renders the consent page. Its form may send the browser on
// to the client's redirect URI, so the page's form-action allows that
// origin besides the gateway's own (the redirect after a POST is checked
// against it).
func (c *Console) showConnect(w http.ResponseWriter, r *http.Request, v Viewer, q url.Values, p *connectPage, status int) {
	var ms struct {
		Mandates []*gateway.MandateState `json:"mandates"`
	}
	if err := c.b.Do(r, "GET", "/v0/mandates", nil, &ms); err != nil {
		c.fail(w, r, v, err)
		return
	}
	for _, m := range ms.Mandates {
		if m.Mandate.Parent == "" && !m.Mandate.Revoked {
			p.Mandates = append(p.Mandates, m)
			if p.New.AllowAgents == "holon-labs/*" && strings.HasSuffix(m.Mandate.ID, "/sandbox") {
				p.New.AllowAgents = strings.Join(m.Mandate.Allow.Agents, ", ")
			}
		}
	}
	for _, k := range oauthParams {
		if val := q.Get(k); val != "" {
			p.Params = append(p.Params, param{k, val})
		}
	}
	w.Header().Set("Content-Security-Policy", strings.Replace(contentSecurityPolicy,
		"form-action 'self'", "form-action 'self' "+formActionSource(p.Auth.RedirectURI), 1))
	c.render(w, r, v, status, "connect", p)
}

// formActionSource is the CSP source of a redirect URI: its origin, or
// its scheme for a private-use scheme.
func formActionSource(redirect string) string {
	u, err := url.Parse(redirect)
	if err != nil || strings.ContainsAny(redirect, " ;,'\"") {
		return ""
	}
	if u.Host == "" {
		return u.Scheme + ":"
	}
	return u.Scheme + "://" + u.Host
}

// connectDecide is the human's answer: deny, or allow under a mandate
// picked or created here. The browser goes back to the client.
func (c *Console) connectDecide(w http.ResponseWriter, r *http.Request, v Viewer) {
	q := connectQuery(r, true)
	a, ok := c.checkAuthorization(w, r, v, q)
	if !ok {
		return
	}
	body := map[string]any{}
	for k := range q {
		body[k] = q.Get(k)
	}
	decision := r.PostFormValue("decision")
	body["decision"] = decision
	p := connectPage{Auth: *a, Chosen: r.PostFormValue("mandate"), Ask: r.PostFormValue("ask_in_client") == "on", New: mandateForm{
		Name: strings.TrimSpace(r.PostFormValue("name")), Total: strings.TrimSpace(r.PostFormValue("total")),
		PerCall: strings.TrimSpace(r.PostFormValue("per_call")), ApprovalAbove: strings.TrimSpace(r.PostFormValue("approval_above")),
		AllowAgents: r.PostFormValue("allow_agents"),
	}}
	if decision == "allow" {
		mandate := p.Chosen
		if mandate == "new" || mandate == "" {
			f := p.New
			f.Grantee = v.Account + "/" + slug(a.ClientName)
			f.MaxDepth = "1"
			var st gateway.MandateState
			if err := c.b.Do(r, "POST", "/v0/mandates", f.document(), &st); err != nil {
				var ae *APIError
				if !errors.As(err, &ae) {
					c.fail(w, r, v, err)
					return
				}
				p.New.Errors = fieldErrors(ae)
				p.Chosen = "new"
				c.showConnect(w, r, v, q, &p, ae.Status)
				return
			}
			mandate = st.Mandate.ID
		}
		body["mandate"] = mandate
		body["ask_in_client"] = p.Ask
	}
	var ans authorization
	if err := c.b.Do(r, "POST", "/v0/oauth/authorization", body, &ans); err != nil {
		c.fail(w, r, v, err)
		return
	}
	next := ans.Redirect
	if next == "" {
		next = ans.ErrorRedirect
	}
	http.Redirect(w, r, next, http.StatusSeeOther)
}

// slug makes a mandate name of a client's name: "Claude Desktop" →
// "claude-desktop".
func slug(name string) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(name) {
		switch {
		case r >= 'a' && r <= 'z' || r >= '0' && r <= '9':
			b.WriteRune(r)
			dash = false
		case b.Len() > 0 && !dash:
			b.WriteByte('-')
			dash = true
		}
		if b.Len() >= 30 {
			break
		}
	}
	s := strings.Trim(b.String(), "-")
	if s == "" {
		return "connected-app"
	}
	return s
}

// routeConnect registers the consent page.
func (c *Console) routeConnect() {
	c.mux.Handle("GET "+connectPath, c.page(c.connectForm))
	c.mux.Handle("POST "+connectPath, c.page(c.connectDecide))
}
