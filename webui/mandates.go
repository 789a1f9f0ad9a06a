package webui

import (
	"errors"
	"net/http"
	"net/url"
	"strings"

	"holon.dev/holon"
	"holon.dev/holon/appliance/wire"
	"holon.dev/holon/gateway"
)

type mandatesPage struct {
	Mandates []*gateway.MandateState
}

type mandatePage struct {
	State    *gateway.MandateState
	Keys     []wire.KeyView
	Receipts []*holon.Receipt
	// Alerts are the mandate's latest budget alerts (alerts.go).
	Alerts []wire.AlertView
	// NewKey is a key just created: shown once.
	NewKey string
}

// mandateID joins the {ns} and {name} of a mandate path.
func mandateID(r *http.Request) string { return r.PathValue("ns") + "/" + r.PathValue("name") }

// apiPath builds an API path from segments, each escaped.
func apiPath(prefix string, segs ...string) string {
	var b strings.Builder
	b.WriteString(prefix)
	for _, s := range segs {
		b.WriteByte('/')
		b.WriteString(url.PathEscape(s))
	}
	return b.String()
}

func (c *Console) mandateList(w http.ResponseWriter, r *http.Request, v Viewer) {
	var ms struct {
		Mandates []*gateway.MandateState `json:"mandates"`
	}
	if err := c.b.Do(r, "GET", "/v0/mandates", nil, &ms); err != nil {
		c.fail(w, r, v, err)
		return
	}
	c.render(w, r, v, http.StatusOK, "mandates", mandatesPage{Mandates: ms.Mandates})
}

// mandateView is one mandate: its terms, its budget, its agent keys and
// its latest receipts.
func (c *Console) mandateView(w http.ResponseWriter, r *http.Request, v Viewer) {
	c.showMandate(w, r, v, mandateID(r), "")
}

func (c *Console) showMandate(w http.ResponseWriter, r *http.Request, v Viewer, id, newKey string) {
	ns, name, _ := strings.Cut(id, "/")
	var p mandatePage
	p.NewKey = newKey
	if err := c.b.Do(r, "GET", apiPath("/v0/mandates", ns, name), nil, &p.State); err != nil {
		c.fail(w, r, v, err)
		return
	}
	if v.Kind == ViewerHuman {
		var m wire.Me
		if err := c.b.Do(r, "GET", "/v0/me", nil, &m); err != nil {
			c.fail(w, r, v, err)
			return
		}
		for _, k := range m.Keys {
			if k.Mandate == id {
				p.Keys = append(p.Keys, k)
			}
		}
	}
	var rp wire.ReceiptPage
	if err := c.b.Do(r, "GET", "/v0/receipts?limit=10&mandate="+url.QueryEscape(id), nil, &rp); err != nil {
		c.fail(w, r, v, err)
		return
	}
	p.Receipts = rp.Receipts
	if len(p.State.Mandate.Budget.Alerts) > 0 {
		var err error
		if p.Alerts, err = c.mandateAlerts(r, ns, name); err != nil {
			c.fail(w, r, v, err)
			return
		}
	}
	status := http.StatusOK
	if newKey != "" {
		status = http.StatusCreated
	}
	c.render(w, r, v, status, "mandates_view", p)
}

// mandateForm is the form of a new mandate, as typed.
type mandateForm struct {
	Name, Grantee, Total, PerCall, ApprovalAbove string
	AllowAgents, AllowCapabilities, DenyAgents   string
	Published                                    bool
	Retention, Regions, MaxDepth, Expires        string
	Training                                     string
	// Errors are the server's messages by field path ("budget.total"),
	// "" for those no field shows.
	Errors map[string]string
}

// Error returns the message of a field, for the template.
func (f mandateForm) Error(path string) string { return f.Errors[path] }

func (c *Console) mandateNew(w http.ResponseWriter, r *http.Request, v Viewer) {
	if !c.b.Hosted() {
		c.render(w, r, v, http.StatusOK, "error", errorPage{Title: "Mandates come from files here",
			Message: "A dev gateway reads its mandates from its mandates directory (--mandates); a hosted gateway creates them here."})
		return
	}
	c.render(w, r, v, http.StatusOK, "mandates_new", mandateForm{Grantee: v.Account + "/assistant", AllowAgents: "holon-labs/*", AllowCapabilities: "*", MaxDepth: "1"})
}

// list splits a field of comma- or line-separated items.
func list(s string) []string {
	var out []string
	for _, f := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == '\n' || r == '\r' }) {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// document turns the form into the mandate's JSON document. Numbers and
// amounts are passed as typed: the server says what is wrong with them.
func (f mandateForm) document() map[string]any {
	doc := map[string]any{"id": f.Name, "grantee": f.Grantee}
	budget := map[string]any{"total": f.Total}
	if f.PerCall != "" {
		budget["per_call"] = f.PerCall
	}
	doc["budget"] = budget
	if f.ApprovalAbove != "" {
		doc["approval"] = map[string]any{"above": f.ApprovalAbove}
	}
	allow := map[string]any{}
	if a := list(f.AllowAgents); a != nil {
		allow["agents"] = a
	}
	if a := list(f.AllowCapabilities); a != nil {
		allow["capabilities"] = a
	}
	if f.Published {
		allow["published"] = true
	}
	doc["allow"] = allow
	if d := list(f.DenyAgents); d != nil {
		doc["deny"] = map[string]any{"agents": d}
	}
	data := map[string]any{}
	if f.Retention != "" {
		data["retention"] = f.Retention
	}
	if rg := list(f.Regions); rg != nil {
		data["regions"] = rg
	}
	switch f.Training {
	case "yes":
		data["training"] = true
	case "no":
		data["training"] = false
	}
	if len(data) > 0 {
		doc["data"] = data
	}
	if f.MaxDepth != "" {
		doc["delegation"] = map[string]any{"max_depth": jsonNumber(f.MaxDepth)}
	}
	if f.Expires != "" {
		e := f.Expires
		if len(e) == len("2006-01-02") {
			e += "T23:59:59Z"
		}
		doc["expires"] = e
	}
	return doc
}

// jsonNumber passes digits as a number and anything else as typed, for
// the server to refuse with its own message.
func jsonNumber(s string) any {
	for _, r := range s {
		if r < '0' || r > '9' {
			return s
		}
	}
	if len(s) > 9 {
		return s
	}
	n := 0
	for _, r := range s {
		n = n*10 + int(r-'0')
	}
	return n
}

// formFields are the form's fields by the document path the server names.
var formFields = map[string]bool{
	"id": true, "grantee": true, "budget.total": true, "budget.per_call": true, "approval.above": true,
	"allow.agents": true, "allow.capabilities": true, "deny.agents": true, "data.retention": true,
	"data.regions": true, "data.training": true, "delegation.max_depth": true, "expires": true,
}

// fieldOf maps a server path ("allow.agents[0]", "budget") to a field.
func fieldOf(path string) string {
	if i := strings.IndexByte(path, '['); i >= 0 {
		path = path[:i]
	}
	for p := path; p != ""; {
		if formFields[p] {
			return p
		}
		if p == "budget" {
			return "budget.total"
		}
		i := strings.LastIndexByte(p, '.')
		if i < 0 {
			break
		}
		p = p[:i]
	}
	return ""
}

func (c *Console) mandateCreate(w http.ResponseWriter, r *http.Request, v Viewer) {
	f := mandateForm{
		Name: strings.TrimSpace(r.PostFormValue("name")), Grantee: strings.TrimSpace(r.PostFormValue("grantee")),
		Total: strings.TrimSpace(r.PostFormValue("total")), PerCall: strings.TrimSpace(r.PostFormValue("per_call")),
		ApprovalAbove: strings.TrimSpace(r.PostFormValue("approval_above")),
		AllowAgents:   r.PostFormValue("allow_agents"), AllowCapabilities: r.PostFormValue("allow_capabilities"),
		DenyAgents: r.PostFormValue("deny_agents"), Published: r.PostFormValue("published") == "on",
		Retention: strings.TrimSpace(r.PostFormValue("retention")), Regions: r.PostFormValue("regions"),
		Training: r.PostFormValue("training"), MaxDepth: strings.TrimSpace(r.PostFormValue("max_depth")),
		Expires: strings.TrimSpace(r.PostFormValue("expires")),
	}
	var st gateway.MandateState
	err := c.b.Do(r, "POST", "/v0/mandates", f.document(), &st)
	if err == nil {
		http.Redirect(w, r, mandatePath(st.Mandate.ID), http.StatusSeeOther)
		return
	}
	var ae *APIError
	if !errors.As(err, &ae) {
		c.fail(w, r, v, err)
		return
	}
	f.Errors = fieldErrors(ae)
	c.render(w, r, v, ae.Status, "mandates_new", f)
}

// fieldErrors is the one mapping of a refused mandate's errors to the
// form's fields (the new-mandate page and the connect page's new mandate):
// each beside its field (without the path, which goes without saying
// there), several on one field joined, and an error no field shows under
// "".
func fieldErrors(ae *APIError) map[string]string {
	errs := map[string]string{}
	add := func(field, msg string) {
		if errs[field] != "" {
			msg = errs[field] + "; " + msg
		}
		errs[field] = msg
	}
	for _, fe := range ae.Err.Fields {
		if field := fieldOf(fe.Path); field != "" && (field == fe.Path || fe.Path == "budget") {
			add(field, fe.Msg) // beside its field: the path goes without saying
		} else {
			add(field, fe.Error())
		}
	}
	if len(ae.Err.Fields) == 0 {
		field := ""
		if ae.Err.Code == "mandate_exists" {
			field = "id"
		}
		add(field, ae.Err.Msg)
	}
	return errs
}
