package webui

import (
	"net/http"
	"net/url"
	"strings"
	"time"

	"holon.dev/holon/appliance/wire"
	"holon.dev/holon/journal"
)

type adminAccount struct {
	Handle   string    `json:"handle"`
	Email    string    `json:"email"`
	Created  time.Time `json:"created"`
	Disabled *struct {
		At     time.Time `json:"at"`
		Reason string    `json:"reason"`
	} `json:"disabled"`
	Mandates []string   `json:"mandates"`
	Balance  wire.Money `json:"balance"`
	Held     wire.Money `json:"held"`
}

type modEntry struct {
	Seq    uint64          `json:"seq"`
	Time   time.Time       `json:"time"`
	Action string          `json:"action"`
	Target string          `json:"target"`
	Reason string          `json:"reason"`
	Amount *journal.Amount `json:"amount"`
	Agents []string        `json:"agents"`
}

type health struct {
	SizeBytes int64   `json:"size_bytes"`
	Commits   uint64  `json:"commits"`
	Updates   uint64  `json:"updates"`
	MeanBatch float64 `json:"mean_batch"`
	MaxBatch  int     `json:"max_batch"`
	HoldsOpen int     `json:"holds_open"`
	Receipts  uint64  `json:"receipts"`
}

type operatorPage struct {
	Q        string
	Accounts []adminAccount
	Log      []modEntry
	Health   health
	// Done says what the last action did.
	Done string
}

func (c *Console) operator(w http.ResponseWriter, r *http.Request, v Viewer) {
	if !v.Operator() {
		c.render(w, r, v, http.StatusForbidden, "error", errorPage{Title: "Operator only", Message: "This page needs the operator's admin key: sign in with it."})
		return
	}
	p := operatorPage{Q: strings.TrimSpace(r.URL.Query().Get("q")), Done: r.URL.Query().Get("done")}
	var accts struct {
		Accounts []adminAccount `json:"accounts"`
	}
	var log struct {
		Entries []modEntry `json:"entries"`
	}
	path := "/v0/admin/accounts?limit=200"
	if p.Q != "" {
		path += "&q=" + url.QueryEscape(p.Q)
	}
	for _, call := range []struct {
		path string
		out  any
	}{{path, &accts}, {"/v0/admin/log?order=newest&limit=1000", &log}, {"/v0/admin/health", &p.Health}} {
		if err := c.b.Do(r, "GET", call.path, nil, call.out); err != nil {
			c.fail(w, r, v, err)
			return
		}
	}
	p.Accounts = accts.Accounts
	p.Log = log.Entries // newest first
	c.render(w, r, v, http.StatusOK, "operator", p)
}

// operatorAction runs one moderation action and comes back to the page.
func (c *Console) operatorAction(w http.ResponseWriter, r *http.Request, v Viewer) {
	reason := strings.TrimSpace(r.PostFormValue("reason"))
	var path, done string
	var body map[string]any
	switch r.PathValue("action") {
	case "disable":
		h := strings.TrimSpace(r.PostFormValue("handle"))
		path, done = apiPath("/v0/admin/accounts", h, "disable"), "disabled "+h
		body = map[string]any{"reason": reason, "yank_agents": r.PostFormValue("yank_agents") == "on"}
	case "yank":
		ref := strings.TrimSpace(r.PostFormValue("ref"))
		ns, name, _ := strings.Cut(ref, "/")
		path, done = apiPath("/v0/admin/agents", ns, name, "yank"), "yanked "+ref
		body = map[string]any{"reason": reason}
	case "credit":
		acct := strings.TrimSpace(r.PostFormValue("account"))
		path, done = "/v0/admin/credit", "credited "+acct
		body = map[string]any{"account": acct, "amount": strings.TrimSpace(r.PostFormValue("amount")), "reason": reason}
	default:
		c.render(w, r, v, http.StatusNotFound, "error", errorPage{Title: "Not found", Message: "No such operator action."})
		return
	}
	if err := c.b.Do(r, "POST", path, body, nil); err != nil {
		c.fail(w, r, v, err)
		return
	}
	http.Redirect(w, r, Prefix+"/operator?done="+url.QueryEscape(done), http.StatusSeeOther)
}
