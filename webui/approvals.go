package webui

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/url"

	"holon.dev/holon"
	"holon.dev/holon/appliance/wire"
)

type approvalsPage struct {
	Approvals []*holon.Approval
	Status    string
}

type approvalPage struct {
	Approval *holon.Approval
	// Input is shown only when asked for (?show=input): the data of a
	// call stays out of view unless the human wants to read it.
	ShowInput bool
	Input     string
}

type decidedPage struct {
	Approval *holon.Approval
	Answer   *wire.CallAnswer
	Output   string
}

func (c *Console) approvalList(w http.ResponseWriter, r *http.Request, v Viewer) {
	status := r.URL.Query().Get("status")
	path := "/v0/approvals"
	if status != "" {
		path += "?status=" + url.QueryEscape(status)
	}
	var aps struct {
		Approvals []*holon.Approval `json:"approvals"`
	}
	if err := c.b.Do(r, "GET", path, nil, &aps); err != nil {
		c.fail(w, r, v, err)
		return
	}
	c.render(w, r, v, http.StatusOK, "approvals", approvalsPage{Approvals: aps.Approvals, Status: status})
}

func (c *Console) approvalView(w http.ResponseWriter, r *http.Request, v Viewer) {
	var p approvalPage
	if err := c.b.Do(r, "GET", apiPath("/v0/approvals", r.PathValue("id")), nil, &p.Approval); err != nil {
		c.fail(w, r, v, err)
		return
	}
	if r.URL.Query().Get("show") == "input" {
		p.ShowInput, p.Input = true, indentJSON(p.Approval.Input)
	}
	p.Approval.Input = nil
	c.render(w, r, v, http.StatusOK, "approvals_view", p)
}

// approvalDecide approves and runs, grants, or rejects (POST
// /v0/approvals/{id} with {}, {"run": false} or {"decision": "reject"}).
func (c *Console) approvalDecide(w http.ResponseWriter, r *http.Request, v Viewer) {
	id := r.PathValue("id")
	var body map[string]any
	switch r.PostFormValue("decision") {
	case "run":
		body = map[string]any{}
	case "grant":
		body = map[string]any{"run": false}
	case "reject":
		body = map[string]any{"decision": "reject"}
	default:
		c.render(w, r, v, http.StatusBadRequest, "error", errorPage{Title: "Bad Request", Message: "Pick approve and run, grant, or reject."})
		return
	}
	var ans wire.CallAnswer
	err := c.b.Do(r, "POST", apiPath("/v0/approvals", id), body, &ans)
	if ae, ok := err.(*APIError); ok && ans.Receipt != nil {
		// The run itself failed (denied, input rejected, the agent
		// failed): its receipt says so, shown like any finished run.
		err, ans.Error = nil, ae.Err
	}
	if err != nil {
		c.fail(w, r, v, err)
		return
	}
	var ap holon.Approval
	if err := c.b.Do(r, "GET", apiPath("/v0/approvals", id), nil, &ap); err != nil {
		c.fail(w, r, v, err)
		return
	}
	ap.Input = nil
	c.render(w, r, v, http.StatusOK, "approvals_decided", decidedPage{Approval: &ap, Answer: &ans, Output: indentJSON(ans.Output)})
}

// indentJSON lays out JSON for reading (the template escapes it).
func indentJSON(raw json.RawMessage) string {
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	var b bytes.Buffer
	if err := json.Indent(&b, raw, "", "  "); err != nil {
		return string(raw)
	}
	return b.String()
}
