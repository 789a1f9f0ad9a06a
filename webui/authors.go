package webui

import (
	"errors"
	"net/http"
	"sort"
	"strings"
	"time"

	"holon.dev/holon"
	"holon.dev/holon/journal"
)

// The author's pages (gateway.md §6 and §7 "Publishing agents"): the
// versions in the account's namespace with their evaluation and what they
// earned (GET /v0/me/agents), the endpoint credentials (set or removed,
// never shown: GET /v0/me/credentials says only whether one is set),
// publishing from a manifest (POST /v0/agents), "Connect a webhook" (POST
// /v0/agents/draft, reviewed, then published), and yanking a version.

func (c *Console) routeAuthors() {
	m := c.mux
	m.Handle("GET "+Prefix+"/authors", c.page(c.authors))
	m.Handle("GET "+Prefix+"/authors/publish", c.page(c.publishForm))
	m.Handle("POST "+Prefix+"/authors/publish", c.page(c.publish))
	m.Handle("GET "+Prefix+"/authors/connect", c.page(c.connectWebhookForm))
	m.Handle("POST "+Prefix+"/authors/connect", c.page(c.connectWebhook))
	m.Handle("POST "+Prefix+"/authors/credential", c.page(c.credentialSet))
	m.Handle("POST "+Prefix+"/authors/credential/remove", c.page(c.credentialRemove))
	m.Handle("POST "+Prefix+"/authors/yank", c.page(c.yank))
}

// earning is what a version earned in one currency.
type earning struct {
	PaidCalls int64          `json:"paid_calls"`
	Own       journal.Amount `json:"own"`
	Royalties journal.Amount `json:"royalties"`
	Total     journal.Amount `json:"total"`
}

type caseCounts struct {
	Passed int `json:"passed"`
	Failed int `json:"failed"`
}

// myVersion is one version in GET /v0/me/agents.
type myVersion struct {
	Ref        string `json:"ref"`
	ID         string `json:"id"`
	Version    string `json:"version"`
	Listed     bool   `json:"listed"`
	Published  bool   `json:"published"`
	Evaluation *struct {
		Finished time.Time `json:"finished"`
		Passed   bool      `json:"passed"`
		Error    string    `json:"error"`
		Suites   []struct {
			Capability string     `json:"capability"`
			Public     caseCounts `json:"public"`
			Hidden     caseCounts `json:"hidden"`
		} `json:"suites"`
	} `json:"evaluation"`
	Queued   bool               `json:"evaluation_queued"`
	Earnings map[string]earning `json:"earnings"`
	Record   holon.Record       `json:"record"`
}

// Currencies are the version's earnings in currency order.
func (v myVersion) Currencies() []string {
	cs := make([]string, 0, len(v.Earnings))
	for c := range v.Earnings {
		cs = append(cs, c)
	}
	sort.Strings(cs)
	return cs
}

type credentialItem struct {
	Agent string    `json:"agent"`
	Set   time.Time `json:"set"`
	Opens bool      `json:"opens"`
}

type authorsPage struct {
	Versions    []myVersion
	Credentials []credentialItem
	// Agents are the namespace's agent ids (for the credential form).
	Agents []string
	// Notice says what was just done; Error what the gateway refused.
	Notice, Error, ErrorCode string
}

// authors is the author's own page.
func (c *Console) authors(w http.ResponseWriter, r *http.Request, v Viewer) {
	c.showAuthors(w, r, v, authorsPage{}, http.StatusOK)
}

func (c *Console) showAuthors(w http.ResponseWriter, r *http.Request, v Viewer, p authorsPage, status int) {
	if !c.authorOnly(w, r, v) {
		return
	}
	var mine struct {
		Versions []myVersion `json:"versions"`
	}
	if err := c.b.Do(r, "GET", "/v0/me/agents", nil, &mine); err != nil {
		c.fail(w, r, v, err)
		return
	}
	var creds struct {
		Credentials []credentialItem `json:"credentials"`
	}
	if err := c.b.Do(r, "GET", "/v0/me/credentials", nil, &creds); err != nil {
		c.fail(w, r, v, err)
		return
	}
	p.Versions, p.Credentials = mine.Versions, creds.Credentials
	seen := map[string]bool{}
	for _, mv := range p.Versions {
		if !seen[mv.ID] {
			seen[mv.ID] = true
			p.Agents = append(p.Agents, mv.ID)
		}
	}
	c.render(w, r, v, status, "authors", p)
}

// authorOnly answers for viewers who cannot publish: a dev gateway has no
// authors, the operator publishes nothing.
func (c *Console) authorOnly(w http.ResponseWriter, r *http.Request, v Viewer) bool {
	if v.Kind == ViewerHuman {
		return true
	}
	c.render(w, r, v, http.StatusNotFound, "error", errorPage{Title: "Publishing is for authors",
		Message: "Agents are published by a signed-in account of a hosted gateway; a dev gateway lists the agents of its registry directory."})
	return false
}

// apiRefusal is the gateway's code and message of err, or ok false.
func apiRefusal(err error) (status int, code, msg string, ok bool) {
	var ae *APIError
	if errors.As(err, &ae) {
		msg = ae.Err.Msg
		for _, fe := range ae.Err.Fields {
			msg += "; " + fe.Error()
		}
		return ae.Status, ae.Err.Code, msg, true
	}
	return 0, "", "", false
}

// credentialSet is PUT /v0/agents/{ns}/{name}/credential: the token goes
// in, and never comes back out.
func (c *Console) credentialSet(w http.ResponseWriter, r *http.Request, v Viewer) {
	ns, name := splitAgent(v, r.PostFormValue("agent"))
	if !pathSegments(ns, name) {
		c.showAuthors(w, r, v, authorsPage{Error: "Name the agent as <name> or " + v.Account + "/<name>: lowercase letters, digits, - and _.", ErrorCode: "invalid_request"}, http.StatusBadRequest)
		return
	}
	id := ns + "/" + name
	err := c.b.Do(r, "PUT", apiPath("/v0/agents", ns, name, "credential"), map[string]any{"token": r.PostFormValue("token")}, nil)
	if status, code, msg, ok := apiRefusal(err); ok {
		c.showAuthors(w, r, v, authorsPage{Error: msg, ErrorCode: code}, status)
		return
	} else if err != nil {
		c.fail(w, r, v, err)
		return
	}
	c.showAuthors(w, r, v, authorsPage{Notice: "The credential of " + id + " is set: calls to its endpoint carry it as a bearer token. It is not shown again."}, http.StatusOK)
}

// credentialRemove is DELETE /v0/agents/{ns}/{name}/credential.
func (c *Console) credentialRemove(w http.ResponseWriter, r *http.Request, v Viewer) {
	ns, name := splitAgent(v, r.PostFormValue("agent"))
	if !pathSegments(ns, name) {
		c.showAuthors(w, r, v, authorsPage{Error: "Name the agent as " + v.Account + "/<name>.", ErrorCode: "invalid_request"}, http.StatusBadRequest)
		return
	}
	err := c.b.Do(r, "DELETE", apiPath("/v0/agents", ns, name, "credential"), nil, nil)
	if status, code, msg, ok := apiRefusal(err); ok {
		c.showAuthors(w, r, v, authorsPage{Error: msg, ErrorCode: code}, status)
		return
	} else if err != nil {
		c.fail(w, r, v, err)
		return
	}
	c.showAuthors(w, r, v, authorsPage{Notice: "The credential of " + ns + "/" + name + " is removed: calls go without one."}, http.StatusOK)
}

// yank is DELETE /v0/agents/{ns}/{name}@{version}.
func (c *Console) yank(w http.ResponseWriter, r *http.Request, v Viewer) {
	ref := r.PostFormValue("ref")
	ns, nameVersion, _ := strings.Cut(ref, "/")
	if !pathSegments(ns, nameVersion) {
		c.showAuthors(w, r, v, authorsPage{Error: "Name the version to yank as <handle>/<name>@<version>.", ErrorCode: "invalid_request"}, http.StatusBadRequest)
		return
	}
	err := c.b.Do(r, "DELETE", apiPath("/v0/agents", ns, nameVersion), nil, nil)
	if status, code, msg, ok := apiRefusal(err); ok {
		c.showAuthors(w, r, v, authorsPage{Error: msg, ErrorCode: code}, status)
		return
	} else if err != nil {
		c.fail(w, r, v, err)
		return
	}
	c.showAuthors(w, r, v, authorsPage{Notice: ref + " is yanked: no longer listed; its number stays taken."}, http.StatusOK)
}

// splitAgent reads an agent typed as <name> (in the viewer's namespace)
// or <ns>/<name>.
func splitAgent(v Viewer, typed string) (ns, name string) {
	typed = strings.TrimSpace(typed)
	if ns, name, ok := strings.Cut(typed, "/"); ok {
		return ns, name
	}
	return v.Account, typed
}

// pathSegments reports whether each string is one path segment that
// stays one: not empty, no slash, not a dot segment (which a router
// would clean away into another path).
func pathSegments(segs ...string) bool {
	for _, s := range segs {
		if s == "" || s == "." || s == ".." || strings.ContainsAny(s, "/\\?#") {
			return false
		}
	}
	return true
}
