package webui

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strings"

	"holon.dev/holon/appliance/wire"
	"holon.dev/holon/gateway"
)

type cataloguePage struct {
	Agents       []wire.Agent
	Q            string
	Capability   string
	Capabilities []string
	// Next is the link to the following page, "" on the last.
	Next string
}

type agentPage struct {
	Detail   wire.AgentDetail
	Mandates []string
	// Try is the "try it" form and, once sent, its result.
	Try tryForm
}

type tryForm struct {
	Mandate, Input, MaxCost string
	Error                   string
	Result                  *decidedPage
}

// catalogue lists the agents (GET /v0/agents, ranked by the engine):
// search, filter by capability, a page at a time.
func (c *Console) catalogue(w http.ResponseWriter, r *http.Request, v Viewer) {
	qs := r.URL.Query()
	p := cataloguePage{Q: strings.TrimSpace(qs.Get("q")), Capability: strings.TrimSpace(qs.Get("capability"))}
	q := url.Values{}
	if p.Q != "" {
		q.Set("q", p.Q)
	}
	if p.Capability != "" {
		q.Set("capability", p.Capability)
	}
	if cur := qs.Get("cursor"); cur != "" {
		q.Set("cursor", cur)
	}
	var page struct {
		Agents       []wire.Agent `json:"agents"`
		Next         string       `json:"next"`
		Capabilities []string     `json:"capabilities"`
	}
	if err := c.b.Do(r, "GET", "/v0/agents?"+q.Encode(), nil, &page); err != nil {
		c.fail(w, r, v, err)
		return
	}
	p.Agents, p.Capabilities = page.Agents, page.Capabilities
	if page.Next != "" {
		q.Set("cursor", page.Next)
		p.Next = Prefix + "/agents?" + q.Encode()
	}
	c.render(w, r, v, http.StatusOK, "agents", p)
}

// agentView is one agent: its manifest (declared) and its record
// (measured), its versions, and a "try it" form.
func (c *Console) agentView(w http.ResponseWriter, r *http.Request, v Viewer) {
	c.showAgent(w, r, v, tryForm{Input: "{}"}, http.StatusOK)
}

func (c *Console) showAgent(w http.ResponseWriter, r *http.Request, v Viewer, try tryForm, status int) {
	p := agentPage{Try: try}
	if err := c.b.Do(r, "GET", apiPath("/v0/agents", r.PathValue("ns"), r.PathValue("name")), nil, &p.Detail); err != nil {
		c.fail(w, r, v, err)
		return
	}
	if v.Decides() {
		var ms struct {
			Mandates []*gateway.MandateState `json:"mandates"`
		}
		if err := c.b.Do(r, "GET", "/v0/mandates", nil, &ms); err != nil {
			c.fail(w, r, v, err)
			return
		}
		for _, m := range ms.Mandates {
			p.Mandates = append(p.Mandates, m.Mandate.ID)
		}
	}
	c.render(w, r, v, status, "agents_view", p)
}

// agentTry calls the agent under a chosen mandate (POST /v0/calls) and
// shows the receipt: the same call, checks and bill as from the API.
func (c *Console) agentTry(w http.ResponseWriter, r *http.Request, v Viewer) {
	try := tryForm{Mandate: r.PostFormValue("mandate"), Input: r.PostFormValue("input"), MaxCost: strings.TrimSpace(r.PostFormValue("max_cost"))}
	agent := r.PathValue("ns") + "/" + r.PathValue("name")
	var input json.RawMessage
	if err := json.Unmarshal([]byte(try.Input), &input); err != nil {
		try.Error = "The input is not JSON: " + err.Error()
		c.showAgent(w, r, v, try, http.StatusBadRequest)
		return
	}
	body := map[string]any{"mandate": try.Mandate, "agent": agent, "input": input}
	if try.MaxCost != "" {
		body["max_cost"] = try.MaxCost
	}
	var ans wire.CallAnswer
	err := c.b.Do(r, "POST", "/v0/calls", body, &ans)
	var ae *APIError
	switch {
	case err == nil:
	case errors.As(err, &ae) && ans.Receipt != nil:
		ans.Error = ae.Err
	case errors.As(err, &ae):
		try.Error = ae.Err.Msg
		c.showAgent(w, r, v, try, ae.Status)
		return
	default:
		c.fail(w, r, v, err)
		return
	}
	try.Result = &decidedPage{Answer: &ans, Output: indentJSON(ans.Output)}
	c.showAgent(w, r, v, try, http.StatusOK)
}
