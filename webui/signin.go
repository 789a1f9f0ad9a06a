package webui

import (
	"errors"
	"net/http"
	"strings"

	"holon.dev/holon/journal"
)

type signinPage struct {
	Next   string
	GitHub bool
	// Handle and Email refill the signup form after an error.
	Handle, Email string
	// Errors are messages by field: handle, email, key, or "" for the form.
	Errors map[string]string
}

// shownOncePage shows new keys: the only time they are ever shown.
type shownOncePage struct {
	Handle   string
	HumanKey string
	AgentKey string
	Mandate  string
	Credit   journal.Amount
	Next     string
}

func (c *Console) signinForm(w http.ResponseWriter, r *http.Request, v Viewer) {
	if !c.b.Hosted() {
		http.Redirect(w, r, Prefix+"/", http.StatusSeeOther)
		return
	}
	c.render(w, r, v, http.StatusOK, "signin", signinPage{Next: localPath(r.URL.Query().Get("next")), GitHub: c.b.GitHubSignIn()})
}

// signin starts a session from a pasted key (or the key the GitHub
// exchange returned, which the page's script posts here).
func (c *Console) signin(w http.ResponseWriter, r *http.Request, v Viewer) {
	next := localPath(r.PostFormValue("next"))
	key := strings.TrimSpace(r.PostFormValue("key"))
	if key == "" {
		c.render(w, r, v, http.StatusUnprocessableEntity, "signin", signinPage{Next: next, GitHub: c.b.GitHubSignIn(),
			Errors: map[string]string{"key": "Paste your human key (hlk_h_…) or the operator's admin key."}})
		return
	}
	nv, err := c.b.SignIn(w, r, key)
	if err != nil {
		var ae *APIError
		if !errors.As(err, &ae) {
			c.fail(w, r, v, err)
			return
		}
		c.render(w, r, v, ae.Status, "signin", signinPage{Next: next, GitHub: c.b.GitHubSignIn(), Errors: map[string]string{"key": ae.Err.Msg}})
		return
	}
	if agentKey := strings.TrimSpace(r.PostFormValue("agent_key")); agentKey != "" {
		// A first GitHub sign-in made the account: its agent key is shown
		// once, like an email signup's.
		c.render(w, r, nv, http.StatusOK, "shownonce", shownOncePage{Handle: nv.Account, HumanKey: key, AgentKey: agentKey,
			Mandate: nv.Account + "/sandbox", Next: next})
		return
	}
	if next == "" {
		next = Prefix + "/"
		if nv.Operator() {
			next = Prefix + "/operator"
		}
	}
	http.Redirect(w, r, next, http.StatusSeeOther)
}

// signup creates an account by email (POST /v0/signup), signs its human
// key in, and shows both keys once.
func (c *Console) signup(w http.ResponseWriter, r *http.Request, v Viewer) {
	handle, email := strings.TrimSpace(r.PostFormValue("handle")), strings.TrimSpace(r.PostFormValue("email"))
	next := localPath(r.PostFormValue("next"))
	var ans struct {
		Handle   string         `json:"handle"`
		HumanKey string         `json:"human_key"`
		AgentKey string         `json:"agent_key"`
		Mandate  string         `json:"mandate"`
		Credit   journal.Amount `json:"credit"`
	}
	err := c.b.Do(r, "POST", "/v0/signup", map[string]string{"handle": handle, "email": email}, &ans)
	if err != nil {
		var ae *APIError
		if !errors.As(err, &ae) {
			c.fail(w, r, v, err)
			return
		}
		field := ""
		switch {
		case strings.Contains(ae.Err.Code, "handle"):
			field = "handle"
		case strings.Contains(ae.Err.Code, "email"):
			field = "email"
		}
		c.render(w, r, v, ae.Status, "signin", signinPage{Next: next, GitHub: c.b.GitHubSignIn(), Handle: handle, Email: email,
			Errors: map[string]string{field: ae.Err.Msg}})
		return
	}
	if _, err := c.b.SignIn(w, r, ans.HumanKey); err != nil {
		c.fail(w, r, v, err)
		return
	}
	c.render(w, r, Viewer{Kind: ViewerHuman, Account: ans.Handle}, http.StatusCreated, "shownonce",
		shownOncePage{Handle: ans.Handle, HumanKey: ans.HumanKey, AgentKey: ans.AgentKey, Mandate: ans.Mandate, Credit: ans.Credit, Next: next})
}

func (c *Console) signout(w http.ResponseWriter, r *http.Request, v Viewer) {
	if err := c.b.SignOut(w, r); err != nil {
		c.fail(w, r, v, err)
		return
	}
	http.Redirect(w, r, Prefix+"/signin", http.StatusSeeOther)
}
